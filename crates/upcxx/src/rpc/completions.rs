//! RPCs with completion objects (§9.3, second variants): [`rpc_ff_with`] and
//! [`rpc_with`], which notify source completion (the function and arguments are
//! serialized: whatever they borrowed may be reused) and, for `rpc`, operation
//! completion (the result is back) through futures, promises or LPCs, as ch. 7 defines
//! them for every call:
//!
//! ```
//! use upcxx::{operation_cx, source_cx, Promise};
//!
//! upcxx::init();
//! let target = (upcxx::rank_me() + 1) % upcxx::rank_n();
//! let total = Promise::<u64>::new();
//! let (sent, doubled) = upcxx::rpc_with(
//!     target,
//!     source_cx::as_future() | operation_cx::as_future() | operation_cx::as_promise(&total),
//!     |x: u64| 2 * x,
//!     (21u64,),
//! );
//! sent.wait(); // the arguments are serialized
//! assert_eq!(doubled.wait(), 42);
//! assert_eq!(total.finalize().wait(), 42);
//! upcxx::finalize();
//! ```
//!
//! The arguments are always serialized before the call returns (as `as_buffered`
//! asks), so source completion happens inside the call; its notifications, like all
//! others, wait for the caller's next user-level progress (§7.1 ¶14–¶15). Operation
//! completion produces the function's result (the value of the future it returns, if
//! it returns one): a promise must be a `Promise` of that type and an LPC callback
//! must take it; a function returning `()` produces no value, so any promise and a
//! callback without arguments do (§9.3 ¶22–¶24). `rpc_ff` provides source completion
//! only.
//!
//! The calls without completions ([`rpc`](super::rpc), [`rpc_ff`](super::rpc_ff)) are
//! the default completions of §7.2.3 and keep their own, allocation-free paths. These
//! forms run on them: an `rpc_with` makes the plain call, attaches the operation
//! notifications to its future, and so allocates that future's state (one allocation
//! per call) besides what the requested notifications need.
//!
//! Ch. 9 also has forms taking a team and a rank in that team; they come with teams.
//!
//! The one file of `rpc` above `completion` (which itself sits on the rest of `rpc`,
//! for `remote_cx::as_rpc`): it sits on the plain calls and the completion protocol.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{RpcArgs, RpcFn, RpcValue};
use crate::completion::{
    self, Armed, CompletionEvents, Completions, FutureList, HasOperation, HasSource, Returned,
    ValuesFromList, ValuesOf,
};
use crate::future::FutureElements;
use crate::runtime::state::Rank;

/// The completion events of [`rpc_with`] whose function produces a `V` (§9.3 ¶28–¶29):
/// source, and operation producing the `V` (nothing for `()`).
#[derive(Debug)]
pub struct RpcCall<V>(PhantomData<fn() -> V>);

impl<V: FutureElements> CompletionEvents for RpcCall<V>
where
    V::List: ValuesFromList<V>,
{
    const NAME: &'static str = "rpc";
    type OpValues = ValuesOf<V>;
}
impl<V: FutureElements> HasSource for RpcCall<V> where V::List: ValuesFromList<V> {}
impl<V: FutureElements> HasOperation for RpcCall<V> where V::List: ValuesFromList<V> {}

/// The completion events of [`rpc_ff_with`] (§9.3 ¶9): source only.
#[derive(Debug)]
pub enum RpcFfCall {}

impl CompletionEvents for RpcFfCall {
    const NAME: &'static str = "rpc_ff";
    type OpValues = ();
}
impl HasSource for RpcFfCall {}

/// [`rpc_ff`](super::rpc_ff) notifying as `cxs` requests (UPC++ `rpc_ff(recipient, cxs,
/// func, args...)`, §9.3): `source_cx` requests only, any number (none is the plain
/// call, `source_cx::as_buffered()`). Progress level: internal.
///
/// ```
/// # use upcxx::{operation_cx, source_cx};
/// # upcxx::init();
/// fn hello(from: upcxx::Rank) {
///     println!("hello from {from}");
/// }
/// let sent = upcxx::rpc_ff_with(0, source_cx::as_future(), hello, (upcxx::rank_me(),));
/// sent.wait();
/// # upcxx::finalize();
/// ```
///
/// An `rpc_ff` has no operation completion, so `operation_cx` requests do not compile:
///
/// ```compile_fail,E0277
/// # use upcxx::operation_cx;
/// let done = upcxx::rpc_ff_with(0, operation_cx::as_future(), || (), ());
/// ```
///
/// # Panics
/// As [`rpc_ff`](super::rpc_ff), or if an `as_promise` request's promise is already
/// ready (before anything is sent).
#[track_caller]
pub fn rpc_ff_with<C, F, A>(rank: Rank, cxs: C, func: F, args: A) -> Returned<C, RpcFfCall>
where
    C: Completions<RpcFfCall>,
    F: RpcFn<A>,
    A: RpcArgs,
{
    let (futures, armed) = cxs.arm();
    let (mut armed, ()) =
        completion::start_armed::<RpcFfCall, _, _>(armed, || super::rpc_ff(rank, func, args));
    Armed::<RpcFfCall>::source_done(&mut armed);
    futures.into_return()
}

/// [`rpc`](super::rpc) notifying as `cxs` requests (UPC++ `rpc(recipient, cxs, func,
/// args...)`, §9.3): `source_cx` and `operation_cx` requests, operation completion
/// among them (§7.2.1 ¶2). Returns one future per `as_future`, in `|` order (§7.2.2);
/// see [`crate::completion`]. Progress level: internal.
///
/// ```
/// # use upcxx::{current_persona, operation_cx, Promise};
/// # upcxx::init();
/// let ran = Promise::<()>::new(); // any promise, for a function returning ()
/// upcxx::rpc_with(
///     0,
///     operation_cx::as_promise(&ran) | operation_cx::as_lpc(&current_persona(), || println!("ran")),
///     || (),
///     (),
/// );
/// ran.finalize().wait();
/// # upcxx::finalize();
/// ```
///
/// Requesting source completion alone would leave the result unobservable, which
/// §7.2.1 ¶2 forbids; it does not compile:
///
/// ```compile_fail,E0080
/// # use upcxx::source_cx;
/// # fn f() {
/// let sent = upcxx::rpc_with(0, source_cx::as_future(), |x: u64| x, (1u64,));
/// # }
/// # f();
/// ```
///
/// An LPC callback takes the result, of the function's type:
///
/// ```compile_fail,E0277
/// # use upcxx::{current_persona, operation_cx};
/// upcxx::rpc_with(0, operation_cx::as_lpc(&current_persona(), |s: String| ()), |x: u64| x, (1u64,));
/// ```
///
/// Combining requests with `|` needs a result type that is `Clone` (each request gets
/// a copy).
///
/// # Panics
/// As [`rpc`](super::rpc), or if an `as_promise` request's promise is already ready
/// (before anything is sent).
#[track_caller]
pub fn rpc_with<C, F, A>(
    rank: Rank,
    cxs: C,
    func: F,
    args: A,
) -> Returned<C, RpcCall<RpcValue<F, A>>>
where
    C: Completions<RpcCall<RpcValue<F, A>>>,
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned + FutureElements,
    <RpcValue<F, A> as FutureElements>::List: ValuesFromList<RpcValue<F, A>>,
{
    const {
        assert!(
            completion::requests_op_or_remote::<RpcCall<RpcValue<F, A>>, C>(),
            "rpc needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (futures, armed) = cxs.arm();
    let (mut armed, result) =
        completion::start_armed::<RpcCall<RpcValue<F, A>>, _, _>(armed, || {
            super::rpc(rank, func, args)
        });
    Armed::<RpcCall<RpcValue<F, A>>>::source_done(&mut armed);
    result.on_ready(move |value| {
        Armed::<RpcCall<RpcValue<F, A>>>::operation_done(
            armed,
            <<RpcValue<F, A> as FutureElements>::List as ValuesFromList<_>>::values(value),
        );
    });
    futures.into_return()
}
