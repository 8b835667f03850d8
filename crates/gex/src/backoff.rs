//! How a waiting loop backs off while nothing happens.
//!
//! A leaf: the conduit's bootstrap, gex's progress loops and the runtimes above gex all
//! wait with it, and it knows nothing of any of them.

/// Spins for a few polls (a reply from a rank on another core arrives within a
/// microsecond), then yields the processor between polls (another rank of an
/// oversubscribed job may need it), and after about a millisecond of idleness sleeps
/// briefly between polls, so idle ranks (waiting in a barrier, say) leave the cores to
/// the ranks that are working.
#[derive(Debug, Default)]
pub struct Backoff {
    idle: u32,
}

impl Backoff {
    const SPINS: u32 = 64;
    const YIELDS: u32 = 64 + 2000;
    const NAP: std::time::Duration = std::time::Duration::from_micros(50);

    /// A back-off that starts with spinning.
    pub const fn new() -> Backoff {
        Backoff { idle: 0 }
    }

    /// Something happened: start over with spinning.
    #[inline]
    pub fn reset(&mut self) {
        self.idle = 0;
    }

    /// Nothing happened in the last poll: wait a little before the next one.
    #[inline]
    pub fn snooze(&mut self) {
        self.idle = self.idle.saturating_add(1);
        if self.idle < Self::SPINS {
            std::hint::spin_loop();
        } else if self.idle < Self::YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Self::NAP);
        }
    }
}
