//! The control messages of the mpi conduit's transport between hosts: credit returns
//! and signals, on a tag of their own (see the parent module and `conduit/mpi.rs`).

use std::ffi::c_int;

use ::mpi::ffi;

use super::super::boot::{check, fatal};
use super::super::{MpiConduit, CREDITS};
use super::{SendBuf, State};
use crate::conduit::Rank;

/// The tag of control messages: credit returns and signals (see [`Control`]).
pub(super) const TAG_CONTROL: c_int = 3;

/// A control message: `[kind, a, b_lo, b_hi]`, of which a credit return sends the
/// first two words. Kind [`net_index`](super::net_index) of a network: `a` credits of
/// that network returned; kind [`SIGNAL`]: store `b_lo | b_hi << 32` into signal word
/// `a` of the receiver ([`Conduit::signal`] between hosts).
///
/// [`Conduit::signal`]: crate::conduit::Conduit::signal
pub(super) type Control = [u32; 4];
/// The kind of a signal's control message.
pub(super) const SIGNAL: u32 = 2;

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
        self.isend(b.as_ptr().cast(), 8, src, TAG_CONTROL, SendBuf::Control(b));
    }
}

impl MpiConduit {
    pub(super) fn post_control(b: &mut Control) -> ffi::MPI_Request {
        // SAFETY: a null request is overwritten by MPI_Irecv.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the box outlives the receive (kept in `State::control_bufs`).
        unsafe {
            check(
                ffi::MPI_Irecv(
                    b.as_mut_ptr().cast(),
                    4,
                    ffi::RSMPI_UINT32_T,
                    ffi::RSMPI_ANY_SOURCE,
                    TAG_CONTROL,
                    Self::world(),
                    &mut req,
                ),
                "MPI_Irecv",
            );
        }
        req
    }

    /// Stores the value of a signal's control message `b` of `len` bytes from `src`
    /// into this rank's signal word.
    pub(super) fn apply_signal(&self, src: c_int, len: usize, b: Control) {
        let slot = b[1] as usize;
        if len != std::mem::size_of::<Control>() || slot >= self.host.signal_slots() {
            fatal(&format!(
                "rank {}: a corrupt signal {b:?} of {len} bytes from rank {src}",
                self.rank
            ));
        }
        let value = u64::from(b[2]) | u64::from(b[3]) << 32;
        // This rank shares memory with itself: a store into its own word.
        self.host.signal(self.rank, slot, value);
    }

    /// [`Conduit::signal`](crate::conduit::Conduit::signal) to `dest`, a rank of
    /// another host: a control message, whose receiver's poll stores the value.
    /// Messages of one pair and tag arrive in the order sent, so the word takes the
    /// values in that order, as a store would.
    pub(in super::super) fn signal_remote(&self, dest: Rank, slot: usize, value: u64) {
        let mut st = self.state.lock();
        if st.finalized {
            return;
        }
        let b = st.control([SIGNAL, slot as u32, value as u32, (value >> 32) as u32]);
        let len = std::mem::size_of::<Control>();
        st.isend(
            b.as_ptr().cast(),
            len,
            dest,
            TAG_CONTROL,
            SendBuf::Control(b),
        );
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
