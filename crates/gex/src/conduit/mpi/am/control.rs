//! The control messages of the mpi conduit's transport between hosts: credit returns,
//! signals and the end of the job, on a tag of their own (see the parent module and
//! `conduit/mpi.rs`).

use std::ffi::c_int;

use super::super::boot::fatal;
use super::super::{MpiConduit, CREDITS};
use super::{SendBuf, State, CONTROL};
use crate::conduit::Rank;

/// The tag of control messages: credit returns and signals (see [`Control`]).
pub(super) const TAG_CONTROL: c_int = 3;

/// A control message: up to four words, of which the first one's low byte is the
/// kind.
/// - Kind [`net_index`](super::net_index) of a network, two words `[kind, n]`: `n`
///   credits of that network returned.
/// - Kind [`SIGNAL`], `[SIGNAL | slot << 8, lo]` or `[SIGNAL | slot << 8, lo, hi]`:
///   store `lo | hi << 32` into signal word `slot` of the receiver
///   ([`Conduit::signal`] between hosts). A value below 2^32 goes in two words: with
///   Open MPI over shared memory a message of at most 8 bytes travels in one
///   cache line (see the conduit's documentation).
/// - Kind [`EXIT`], `[EXIT]`: the sender called `gex::exit(0)`, which ends the job;
///   sent to the leader of every other host, which tells its host's members.
///
/// [`Conduit::signal`]: crate::conduit::Conduit::signal
pub(super) type Control = [u32; 4];
/// The kind of a signal's control message.
pub(super) const SIGNAL: u32 = 2;
/// The kind of the control message that ends the job.
pub(super) const EXIT: u32 = 3;

impl State {
    /// A control message's buffer holding `words`, from the free list if it has one.
    pub(super) fn control(&mut self, words: Control) -> Box<Control> {
        match self.free_control.pop() {
            Some(mut b) => {
                *b = words;
                b
            }
            None => Box::new(words),
        }
    }

    /// Counts a handled message from `src` and returns credit when a batch is due.
    pub(super) fn handled(&mut self, src: Rank, net: usize) {
        let h = &mut self.handled[src as usize][net];
        *h += 1;
        if *h < CREDITS / 2 {
            return;
        }
        let n = std::mem::take(h);
        let b = self.control([net as u32, n, 0, 0]);
        self.isend(b.as_ptr().cast(), 8, src, CONTROL, SendBuf::Control(b));
    }
}

impl MpiConduit {
    /// Stores the value of a signal's control message `b` of `len` bytes from `src`
    /// into this rank's signal word.
    pub(super) fn apply_signal(&self, src: c_int, len: usize, b: Control) {
        let slot = (b[0] >> 8) as usize;
        let value = match len {
            8 => Some(u64::from(b[1])),
            12 => Some(u64::from(b[1]) | u64::from(b[2]) << 32),
            _ => None,
        };
        let (Some(value), true) = (value, slot < self.host.signal_slots()) else {
            fatal(&format!(
                "rank {}: a corrupt signal {b:?} of {len} bytes from rank {src}",
                self.rank
            ));
        };
        // This rank shares memory with itself: a store into its own word.
        self.host.signal(self.rank, slot, value);
    }

    /// [`Conduit::signal`](crate::conduit::Conduit::signal) to `dest`, a rank of
    /// another host: a control message, whose receiver's poll stores the value.
    /// Messages of one pair and tag arrive in the order sent, so the word takes the
    /// values in that order, as a store would.
    pub(in super::super) fn signal_remote(&self, dest: Rank, slot: usize, value: u64) {
        let mut st = self.serial();
        if st.finalized {
            return;
        }
        let (lo, hi) = (value as u32, (value >> 32) as u32);
        let b = st.control([SIGNAL | (slot as u32) << 8, lo, hi, 0]);
        let len = if hi == 0 { 8 } else { 12 };
        st.isend(b.as_ptr().cast(), len, dest, CONTROL, SendBuf::Control(b));
    }

    /// Tells the leader of every other host that this rank ends the job with
    /// `gex::exit(0)` (a control message [`EXIT`] each; this host's members learn it
    /// through their control blocks).
    pub(in super::super) fn send_exit(&self) {
        let mut st = self.serial();
        if st.finalized {
            return;
        }
        for (h, &leader) in self.host_leaders.iter().enumerate() {
            if h as Rank != self.my_host {
                let b = st.control([EXIT, 0, 0, 0]);
                st.isend(b.as_ptr().cast(), 4, leader, CONTROL, SendBuf::Control(b));
            }
        }
    }

    /// Applies the credits `src` returned per network to `in_flight`.
    pub(super) fn apply_credits(&self, in_flight: &mut [[u32; 2]], src: c_int, credits: [u32; 2]) {
        let peer = usize::try_from(src)
            .ok()
            .filter(|&p| p < self.size as usize);
        let (Some(peer), true) = (peer, credits.iter().all(|&n| n <= CREDITS)) else {
            fatal(&format!(
                "rank {}: corrupt credits {credits:?} from rank {src}",
                self.rank
            ));
        };
        for (net, n) in credits.into_iter().enumerate() {
            let used = &mut in_flight[peer][net];
            *used = used.checked_sub(n).unwrap_or_else(|| {
                fatal(&format!(
                    "rank {}: rank {src} returned {n} credits of network {net}, {used} \
                     were taken",
                    self.rank
                ))
            });
        }
    }
}
