//! The peer completion handler of VIS puts (spec "VIS Put Peer Completion",
//! `gex_VIS_SetPeerCompletionHandler`).
//!
//! Arming stores the handler and a copy of the payload in the calling thread; the next
//! VIS operation this thread initiates takes it, and once that operation's data are at
//! the target sends the handler as a 0-argument Medium Reply carrying the payload
//! (always after the data: on shared memory the data are copied through the mapping
//! before the message is published; to another host, the operation waits for every
//! conduit put it made to complete at the target, which the mpi conduit's are at
//! return, before the message is sent). Copying the payload at arming time meets the
//! spec's rule that the payload stay valid until completion without asking the caller.

use std::cell::RefCell;

use super::Dir;
use crate::am::AmIndex;
use crate::conduit::Rank;
use crate::runtime::Runtime;
use crate::Flags;

/// The largest payload of a VIS peer completion handler, in bytes (GASNet-EX
/// `GEX_VIS_MAX_PEERCOMPLETION`; the spec guarantees at least 127).
pub const VIS_MAX_PEERCOMPLETION: usize = 512;

/// A handler armed for the next VIS operation of this thread.
pub(super) struct Armed {
    handler: AmIndex,
    payload: Vec<u8>,
}

thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
}

/// Whether this thread has a peer completion handler armed.
pub(super) fn armed() -> bool {
    ARMED.with(|a| a.borrow().is_some())
}

/// Takes the handler armed for the operation `call` is initiating: only puts support
/// one (spec: "Currently this feature is only supported for VIS Put operations").
#[track_caller]
pub(super) fn take(call: &str, dir: Dir) -> Option<Armed> {
    let armed = ARMED.with(|a| a.borrow_mut().take());
    if armed.is_some() && dir == Dir::Get {
        panic!(
            "gex::{call}: a peer completion handler is armed, and only VIS puts support \
             one (disarm it with set_peer_completion_handler(0, ..))"
        );
    }
    armed
}

impl Armed {
    /// Sends the handler to `job_rank`, whose data have all landed.
    #[track_caller]
    pub(super) fn send(self, rt: &Runtime, call: &str, job_rank: Rank) {
        crate::am::send_peer_completion(rt, call, job_rank, self.handler, &self.payload);
    }
}

/// GASNet-EX `gex_VIS_SetPeerCompletionHandler`: arms `handler` (with `payload`) for
/// the next VIS put this thread initiates; `handler == 0` disarms. The handler must be
/// registered on every rank as a 0-argument Medium Reply handler ([`AmCategory::Medium`]
/// or `MedLong`, [`AmRole::Reply`] or `ReqRep`, `nargs == 0`); it runs on the put's
/// target after all the put's data have landed there, and gets `payload`. The payload
/// is copied, so it may be reused at once. `flags` must be [`Flags::NONE`].
///
/// [`AmCategory::Medium`]: crate::AmCategory::Medium
/// [`AmRole::Reply`]: crate::AmRole::Reply
///
/// # Panics
/// If `payload` is longer than [`VIS_MAX_PEERCOMPLETION`], the handler is not
/// registered here as a 0-argument Medium Reply handler, or `flags` is not empty.
#[track_caller]
pub fn set_peer_completion_handler(handler: AmIndex, payload: &[u8], flags: Flags) {
    const CALL: &str = "vis::set_peer_completion_handler";
    crate::runtime::runtime(CALL);
    if flags != Flags::NONE {
        panic!("gex::{CALL}: flags must be Flags::NONE (the spec defines none)");
    }
    if handler == 0 {
        ARMED.with(|a| *a.borrow_mut() = None);
        return;
    }
    if payload.len() > VIS_MAX_PEERCOMPLETION {
        panic!(
            "gex::{CALL}: a payload of {} bytes exceeds VIS_MAX_PEERCOMPLETION = \
             {VIS_MAX_PEERCOMPLETION}",
            payload.len()
        );
    }
    crate::am::check_peer_completion_handler(CALL, handler);
    let armed = Armed {
        handler,
        payload: payload.to_vec(),
    };
    ARMED.with(|a| *a.borrow_mut() = Some(armed));
}
