//! Reply completion: what a round-trip RPC's reply does on the calling thread. The
//! cookie the call sent names the caller's reply inbox and where its future waits (a
//! reply cell or a promise state); the reply decodes the value into it. This runs no
//! user callback: the future turns ready at the thread's next user-level progress.
//! A leaf of `rpc`: it sits on futures (`future::cell`, promise states) and the thread's
//! deferred notifications.

use std::rc::Rc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::incoming::Incoming;
use crate::future::{fulfill_state, ReplyCell, State};
use crate::serialization::{Reader, Serialization};
use crate::thread;

/// The cookie of a round-trip RPC: the words `a` (the caller's reply inbox) and `b`
/// (its reply cell or promise state).
pub(super) fn cookie_of(a: u64, b: u64) -> [u32; 4] {
    [a as u32, (a >> 32) as u32, b as u32, (b >> 32) as u32]
}

/// Word `i` of a cookie made by [`cookie_of`].
pub(super) fn cookie_word(cookie: [u32; 4], i: usize) -> u64 {
    u64::from(cookie[2 * i]) | u64::from(cookie[2 * i + 1]) << 32
}

fn decode_result<V: Serialize + DeserializeOwned>(msg: &Incoming<'_>) -> V {
    <V as Serialization>::decode(&mut Reader::new(msg.payload)).unwrap_or_else(|e| {
        panic!(
            "upcxx::rpc: the result from rank {} does not deserialize: {e}",
            msg.head.src
        )
    })
}

/// Delivers a reply into the reply cell of the initiator's future.
///
/// # Safety
/// `msg` must be the reply to an `rpc` with value type `V` made on this thread, whose
/// future has a reply cell.
pub(super) unsafe fn complete_in_cell<V: Serialize + DeserializeOwned + 'static>(
    msg: &Incoming<'_>,
) {
    // SAFETY: as this function's.
    unsafe { fill_cell(msg.head.cookie, || decode_result::<V>(msg)) }
}

/// Delivers a reply of kind `KIND_REPLY_UNIT` (the result `()`) on the calling thread,
/// as its entry, `complete_in_cell::<()>`, would, without the message or the indirect
/// call: `()`, the result of an RPC run for its effect, is the most common reply, and
/// its delivery is on the round trip's critical path.
///
/// # Safety
/// `cookie` must be that of a `KIND_REPLY_UNIT` reply to an `rpc` made on this thread.
pub(super) unsafe fn complete_unit(cookie: [u32; 4]) {
    // SAFETY: such a reply answers an `rpc` with value type `()`, whose future has a
    // reply cell (`()` fits one).
    unsafe { fill_cell(cookie, || ()) }
}

/// Puts the value `value` computes into the reply cell named by `cookie`, or frees the
/// cell if its future no longer wants it.
///
/// # Safety
/// `cookie` must be that of the reply to an `rpc` with value type `V` made on this
/// thread, whose future has a reply cell.
unsafe fn fill_cell<V: 'static>(cookie: [u32; 4], value: impl FnOnce() -> V) {
    let ptr = cookie_word(cookie, 1) as usize as *const ReplyCell;
    // SAFETY: `rpc` put the address of the cell (never freed) claimed on this thread for
    // this call's future in the cookie; replies are delivered on the calling thread.
    let cell: &'static ReplyCell = unsafe { &*ptr };
    // SAFETY: the cell was claimed for a `V` and this is the call's only reply.
    unsafe { cell.deliver(value) };
}

/// Delivers a reply into the promise state of the initiator's future, which turns
/// ready at this thread's next user-level progress.
///
/// # Safety
/// `msg` must be the reply to an `rpc` with value type `V` made on this thread, whose
/// future has a promise state.
pub(super) unsafe fn complete_in_state<V: Serialize + DeserializeOwned + 'static>(
    msg: &Incoming<'_>,
) {
    let ptr = cookie_word(msg.head.cookie, 1) as usize as *const State<V>;
    // SAFETY: `rpc` made this pointer with `Rc::into_raw` on this thread (replies are
    // delivered on the calling thread) and exactly one reply takes it back.
    let state = unsafe { Rc::from_raw(ptr) };
    let value = decode_result::<V>(msg);
    thread::defer(Box::new(move || fulfill_state(&state, value, "rpc")));
}
