//! How a waiting loop backs off while nothing happens.
//!
//! A leaf: the conduit's bootstrap, gex's progress loops and the runtimes above gex all
//! wait with it, and it knows nothing of any of them (whoever knows the job's placement
//! tells it, through [`set_oversubscribed`], whether the host runs more ranks than it
//! has processors).

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this host runs more ranks than this process may use processors.
static OVERSUBSCRIBED: AtomicBool = AtomicBool::new(false);

/// Tells every back-off of this process whether the host runs more ranks than this
/// process may use processors (then an idle rank's naps grow, see [`Backoff`]).
pub(crate) fn set_oversubscribed(yes: bool) {
    OVERSUBSCRIBED.store(yes, Ordering::Relaxed);
}

/// Whether this host runs more ranks than this process may use processors (found by
/// `Client::init`; false before it), for a runtime's own waiting loops.
#[inline]
pub fn oversubscribed() -> bool {
    OVERSUBSCRIBED.load(Ordering::Relaxed)
}

/// Spins for a few polls (a reply from a rank on another core arrives within a
/// microsecond), then yields the processor between polls (another rank of an
/// oversubscribed job may need it), and after about a millisecond of idleness sleeps
/// briefly between polls, so idle ranks (waiting in a barrier, say) leave the cores to
/// the ranks that are working.
///
/// The naps last 50 µs. When the host is oversubscribed, each nap instead lasts a
/// quarter of the time napped so far in this wait, from 50 µs up to 1 ms: every
/// wake-up of an idle rank takes a processor from a working one, and on a 2-core
/// machine the idle ranks of a 4-rank job waking every 50 µs made the working pair's
/// cache-line ping-pong about 5× slower (`gex` bench, `raw.pingpong_roundtrip_4ranks`;
/// about 1.0× with growing naps). A wait of an oversubscribed rank then ends at most a
/// quarter of its napping time, and at most 1 ms, after what it waits for happened.
#[derive(Debug, Default)]
pub struct Backoff {
    idle: u32,
    /// Microseconds slept in naps since the last reset.
    napped_us: u32,
}

impl Backoff {
    const SPINS: u32 = 64;
    const YIELDS: u32 = 64 + 2000;
    const NAP_US: u32 = 50;
    const MAX_NAP_US: u32 = 1000;
    /// An oversubscribed rank's nap is this fraction of its napping so far.
    const NAP_SHARE: u32 = 4;

    /// A back-off that starts with spinning.
    pub const fn new() -> Backoff {
        Backoff {
            idle: 0,
            napped_us: 0,
        }
    }

    /// Something happened: start over with spinning.
    #[inline]
    pub fn reset(&mut self) {
        self.idle = 0;
        self.napped_us = 0;
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
            let nap = self.next_nap(oversubscribed());
            std::thread::sleep(std::time::Duration::from_micros(u64::from(nap)));
        }
    }

    /// The length of the next nap in microseconds, counted as napped.
    fn next_nap(&mut self, oversubscribed: bool) -> u32 {
        let nap = if oversubscribed {
            (self.napped_us / Self::NAP_SHARE).clamp(Self::NAP_US, Self::MAX_NAP_US)
        } else {
            Self::NAP_US
        };
        self.napped_us = self.napped_us.saturating_add(nap);
        nap
    }
}

#[cfg(test)]
mod tests {
    use super::Backoff;

    #[test]
    fn naps_stay_short_unless_oversubscribed() {
        let mut b = Backoff::new();
        assert!((0..1000).all(|_| b.next_nap(false) == 50));
    }

    #[test]
    fn oversubscribed_naps_grow_to_a_quarter_of_the_wait_up_to_a_millisecond() {
        let mut b = Backoff::new();
        let naps: Vec<u32> = (0..100).map(|_| b.next_nap(true)).collect();
        assert_eq!(naps[0], 50);
        assert!(
            naps.windows(2).all(|w| w[0] <= w[1]),
            "never shrink: {naps:?}"
        );
        let mut napped = 0;
        for &nap in &naps {
            assert!(
                nap == 50 || nap == 1000 || nap == napped / 4,
                "{nap} after {napped}"
            );
            napped += nap;
        }
        assert_eq!(*naps.last().unwrap(), 1000);
        b.reset();
        assert_eq!(b.next_nap(true), 50, "a reset starts over");
    }
}
