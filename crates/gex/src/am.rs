//! Active Messages (GASNet-EX spec, "Active Message (AM)" sections).
//!
//! An Active Message names a handler, registered at the same index on every rank, that
//! runs at the target with up to [`max_args`] 32-bit arguments and, for Medium and Long,
//! a payload: a Medium's payload lands in a library buffer that is valid during the
//! handler; a Long's payload is written to an address in the target's segment before
//! the handler runs. A Request handler may send at most one Reply to its sender.
//!
//! * Registration ([`Endpoint::register_handlers`](crate::Endpoint::register_handlers)): fixed indices in
//!   `[AM_INDEX_BASE, 255]`; index 0 means "don't care" and is replaced, in table order,
//!   by the highest index still free. Indices below `AM_INDEX_BASE` are the library's.
//! * Injection: `Team::request_{short,medium,long}` and `Token::reply_*`. With
//!   [`Flags::IMMEDIATE`](crate::Flags::IMMEDIATE) an injection that would block returns `Err(NoOp)` and does
//!   nothing; otherwise it polls until the target's queue has room.
//! * Negotiated payload: `Team::prepare_request_{medium,long}` /
//!   `Token::prepare_reply_*` return a [`SrcDesc`] whose buffer is either the client's
//!   or a slot of the target's queue (no copy at all), consumed by `commit` (in
//!   `am/negotiated.rs`); `Team::request_medium_in_place` is a Prepare/Commit of a
//!   Medium Request in one call, its payload written into the slot by a closure (in
//!   `am/in_place.rs`).

//!
//! The files, bottom up: `handler` (handler entries and the token a handler gets),
//! `completion` (how the library's own messages name the completion they answer),
//! `table` (the handler table and registration), `send` (injection of Requests,
//! including the back-pressure wait), `reply` (a Request handler's Reply), `negotiated`
//! (Prepare/Commit), `in_place` (a Prepare/Commit in one call), `dispatch` (running an
//! arrived message: the function the runtime hands to progress), `reported` (their
//! GASP events).

mod completion;
mod dispatch;
mod handler;
mod in_place;
mod negotiated;
mod reply;
#[cfg(feature = "gasp")]
mod reported;
mod send;
mod table;

pub(crate) use completion::{blocking, outliving, OpName, Sending};
pub(crate) use dispatch::dispatch;
pub use handler::{
    max_args, AmCategory, AmEntry, AmIndex, AmRole, HandlerFn, RegisterError, Token, TokenInfo,
    AM_INDEX_BASE, HIDDEN_AM_CONCURRENCY_LEVEL,
};
pub use negotiated::SrcDesc;
pub(crate) use send::{
    check_peer_completion_handler, send_internal, send_internal_medium, send_peer_completion,
    try_send_internal_medium,
};
pub use send::{lub_reply_long, lub_reply_medium, lub_request_long, lub_request_medium, LcKind};
pub(crate) use table::register_internal;

/// A 64-bit value as two AM arguments (low word first), for the library's handlers
/// that carry addresses, records and operands.
#[inline]
pub(crate) fn split_u64(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// The 64-bit value of two AM arguments made by [`split_u64`].
#[inline]
pub(crate) fn join_u64(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}
