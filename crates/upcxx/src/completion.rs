//! Completion objects (UPC++ spec ch. 7).
//!
//! A communication call may report three *events* (§7.1): **source** completion (the
//! source buffer may be reused), **remote** completion (the data are at the target) and
//! **operation** completion (everything is done, from the initiator's point of view;
//! for a get this event carries the value). The caller says how it wants to hear of
//! each with a *completion object*, built by the functions of [`source_cx`],
//! [`remote_cx`] and [`operation_cx`] and joined with `|`:
//!
//! ```
//! use upcxx::{operation_cx, remote_cx, source_cx, GlobalPtr, Promise};
//!
//! fn land(n: u64) {
//!     println!("rank {} received {n} values", upcxx::rank_me());
//! }
//!
//! fn put_three(src: &[u64], dest: GlobalPtr<u64>) {
//!     let done = Promise::<()>::new();
//!     let cxs = source_cx::as_future()
//!         | operation_cx::as_promise(&done)
//!         | operation_cx::as_future()
//!         | remote_cx::as_rpc(land, (src.len() as u64,));
//!     // One future per `as_future`, in the order of the `|` chain (§7.2.2).
//!     let (src_done, op_done) = upcxx::rput_slice_with(src, dest, cxs);
//!     src_done.wait();
//!     op_done.wait();
//!     done.finalize().wait();
//! }
//! # upcxx::init();
//! # let dest = upcxx::new_array::<u64>(3);
//! # put_three(&[1, 2, 3], dest);
//! # assert_eq!(upcxx::rget(dest.add(2)).wait(), 3);
//! # upcxx::delete_array(dest);
//! # upcxx::finalize();
//! ```
//!
//! # How the rules of the spec are kept
//!
//! * **The return type is computed at compile time** (§7.2.2). Each completion object
//!   has a type-level list of the futures it produces ([`Completions::Futures`]: `Nil`
//!   or `Cons<Future<..>, ..>`); `|` builds a [`CxUnion`] whose list is the two lists
//!   appended, and [`FutureList::Return`] turns the list into what the call returns:
//!   `()` for none, the `Future` itself for one, a tuple of futures for several, in the
//!   order of the `|` chain. The future's value type comes from the call: `rget` of a
//!   `T` gives `Future<T>` where `rput` gives `Future<()>`.
//! * **Requests a call cannot honour do not compile** (§7.2.1 says they are undefined
//!   behaviour). Each call names its events with a marker type implementing
//!   [`CompletionEvents`] and the [`HasSource`]/[`HasRemote`]/[`HasOperation`] markers
//!   it provides; a `source_cx` request on a call without source completion, a
//!   promise of the wrong value type, or an LPC callback taking the wrong arguments
//!   is a type error. The rule that operation or remote completion must be requested
//!   (§7.2.1 ¶2) is a compile-time assertion in each call.
//!
//!   ```compile_fail,E0308
//!   # use upcxx::{operation_cx, source_cx, Future, GlobalPtr};
//!   # fn f(gp: GlobalPtr<u64>, src: &[u64]) {
//!   // Two future requests give a pair of futures, not one (§7.2.2).
//!   let done: Future<()> =
//!       upcxx::rput_slice_with(src, gp, source_cx::as_future() | operation_cx::as_future());
//!   # }
//!   ```
//!
//!   ```compile_fail,E0277
//!   # use upcxx::{operation_cx, remote_cx, GlobalPtr};
//!   # fn f(gp: GlobalPtr<u64>) {
//!   // A get has no remote completion (§8.2.2), so it takes no remote_cx request.
//!   let v = upcxx::rget_with(gp, remote_cx::as_rpc(|| (), ()) | operation_cx::as_future());
//!   # }
//!   ```
//!
//!   ```compile_fail,E0277
//!   # use upcxx::{operation_cx, GlobalPtr};
//!   # fn f(gp: GlobalPtr<u64>) {
//!   // The LPC callback of a get takes the value.
//!   upcxx::rget_with(gp, operation_cx::as_lpc(&upcxx::current_persona(), || ()));
//!   # }
//!   ```
//! * **Notifications happen only during user-level progress** (§7.1 ¶14), even though
//!   on shared memory every transfer is finished before the call returns. A future from
//!   `as_future` is then ready at this thread's next user-level progress with no
//!   allocation at all (`Future::after_progress`); promise fulfilment, and an LPC to a
//!   persona this thread holds, are queued for that progress. An LPC to a persona
//!   another thread holds is enlisted there when the event occurs (¶9) and runs in
//!   that persona's user-level progress, whether or not the initiating thread makes
//!   any more; but an operation that completes later (a transfer the network finishes,
//!   an RPC's reply, which arrives to the thread that made the call) is found complete
//!   by its initiating thread's progress (§10.3), so that thread must keep making it
//!   until then. A remote RPC is sent once the data are at
//!   the target and runs in the target's user-level progress.
//!   A future from `as_future` for an operation that completes later holds a reply cell
//!   when its value fits one (`FutureArmed`), which the notification fills in place;
//!   only a larger value takes a promise and its state.
//! * **Several notifications of one operation** come in an unspecified order (§7.2
//!   ¶6), even source and operation notifications delivered by the same progress
//!   call; programs must not rely on the order this implementation happens to use.
//! * A promise named by `as_promise` gets one more dependency when the call starts
//!   (its count must not be zero then: checked) and has it fulfilled, with the event's
//!   value if any, at the notification (§7.1 ¶8, §7.2.1 ¶3).
//!
//! # For authors of communication calls
//!
//! A call `op_with<C: Completions<MyOp>>(.., cxs: C) -> Returned<C, MyOp>` first checks
//! `const { assert!(requests_op_or_remote::<MyOp, C>()) }`, starts the transfer, and then
//! either calls [`Completions::completed_at_initiation`] when every event happened
//! inside the call (the common, allocation-free case), or [`Completions::arm`], which
//! returns the futures and an [`Armed`] whose `source_done`/`remote_done`/
//! `operation_done` the call invokes as the events occur (from any point on the
//! initiating thread; delivery is always queued for user-level progress).
//! The crate-private `notify_when` runs such an `Armed` from progress once a completion
//! test passes; `notify_when_outgoing` does so for an operation that needs only this
//! thread's progress, which `progress_required` and `discharge` then account for.

//!
//! # Layout
//!
//! `events.rs` (what calls report and what can be notified) is the leaf; `protocol.rs`
//! (arming, notifying, the return type) sits on it and on the type-level lists of
//! futures (`future::list`, shared with `when_all`), and `objects.rs` (the completion
//! objects and `|`) on the protocol.
//! This file holds the constructors, named as in the spec. Completions sit on futures,
//! personas (LPC notifications), `rpc` (remote notifications) and the per-thread state.

use std::marker::PhantomData;

mod events;
mod objects;
mod protocol;

pub use crate::future::list::{Append, Cons, FutureList, Nil};
pub use events::{
    CompletionEvents, EventValues, FulfillWith, HasOperation, HasRemote, HasSource, LpcCallback,
    Operation, Remote, RemoteCall, Source, ValuesFromList, ValuesOf, OPERATION_EVENT, REMOTE_EVENT,
    SOURCE_EVENT,
};
pub use objects::{
    BlockingCx, BufferedCx, CompletionObject, CxUnion, FutureArmed, FutureCx, LpcCx, PromiseCx,
    RpcCx,
};
pub(crate) use protocol::{
    notify_when, notify_when_outgoing, notify_when_outgoing_from_source, start_armed,
};
pub use protocol::{requests_op_or_remote, Armed, Completions, Returned};

use crate::future::Promise;
use crate::persona::Persona;
use objects::promise_cx;

/// Completion objects for source completion (UPC++ `source_cx`, §7.3).
pub mod source_cx {
    use super::*;

    /// Notify source completion by readying a `Future<()>` (UPC++
    /// `source_cx::as_future`).
    #[inline]
    pub fn as_future() -> FutureCx<Source> {
        FutureCx {
            _event: PhantomData,
        }
    }

    /// Notify source completion by fulfilling one anonymous dependency of `promise`,
    /// which must not be ready when the call starts (UPC++ `source_cx::as_promise`).
    pub fn as_promise<T: 'static>(promise: &Promise<T>) -> PromiseCx<Source, T> {
        promise_cx(promise.clone())
    }

    /// Notify source completion by enlisting `func()` on `target` (UPC++
    /// `source_cx::as_lpc`).
    pub fn as_lpc<F: LpcCallback<()>>(target: &Persona, func: F) -> LpcCx<Source, F> {
        LpcCx {
            persona: target.clone(),
            func,
            _event: PhantomData,
        }
    }

    /// Source completion happens before the call returns: the source buffer may be
    /// reused at once (UPC++ `source_cx::as_buffered`). The notification-free request;
    /// combine it with others as usual.
    #[inline]
    pub fn as_buffered() -> BufferedCx {
        BufferedCx
    }

    /// As [`as_buffered`], but by waiting until the data are injected rather than by
    /// copying them (UPC++ `source_cx::as_blocking`).
    #[inline]
    pub fn as_blocking() -> BlockingCx {
        BlockingCx
    }
}

/// Completion objects for remote completion (UPC++ `remote_cx`, §7.3).
pub mod remote_cx {
    use super::*;

    /// Run `func(args...)` on the target's master persona once the data are there
    /// (UPC++ `remote_cx::as_rpc`). As for [`crate::rpc::rpc_ff`], `func` is a
    /// function item or a non-capturing closure and `args` a tuple of serializable
    /// values, `&DistObject` and `&Team` among them (§9.3 ¶1); its result is discarded
    /// (§7.2 ¶7). The call is serialized when the operation starts, so the arguments
    /// need to live only as long as the initiating call.
    pub fn as_rpc<F, A>(func: F, args: A) -> RpcCx<F, A>
    where
        RpcCx<F, A>: RemoteCall,
    {
        RpcCx { func, args }
    }
}

/// Completion objects for operation completion (UPC++ `operation_cx`, §7.3).
pub mod operation_cx {
    use super::*;

    /// Notify operation completion by readying a future of the operation's value
    /// (`Future<()>` if it has none) (UPC++ `operation_cx::as_future`). The default
    /// completion of most calls (§7.2.3).
    #[inline]
    pub fn as_future() -> FutureCx<Operation> {
        FutureCx {
            _event: PhantomData,
        }
    }

    /// Notify operation completion through `promise`, which must not be ready when the
    /// call starts: `fulfill_result` with the operation's value, or one anonymous
    /// dependency if it has none (UPC++ `operation_cx::as_promise`).
    pub fn as_promise<T: 'static>(promise: &Promise<T>) -> PromiseCx<Operation, T> {
        promise_cx(promise.clone())
    }

    /// Notify operation completion by enlisting `func(value)` (or `func()` if the
    /// operation has no value) on `target` (UPC++ `operation_cx::as_lpc`).
    pub fn as_lpc<F>(target: &Persona, func: F) -> LpcCx<Operation, F> {
        LpcCx {
            persona: target.clone(),
            func,
            _event: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::future::Future;
    use crate::{current_persona, progress, ProgressLevel};

    /// An operation with source and operation completion, producing a `u64`, whose
    /// events the test triggers by hand.
    enum Manual {}

    impl CompletionEvents for Manual {
        const NAME: &'static str = "manual";
        type OpValues = (u64,);
    }
    impl HasSource for Manual {}
    impl HasOperation for Manual {}

    #[test]
    fn armed_notifications_follow_their_events_and_progress() {
        gex::testing::spmd(1, || {
            crate::init();
            let promise = Promise::<u64>::new();
            let lpc_got = Arc::new(AtomicU64::new(0));
            let lpc_got2 = lpc_got.clone();
            let cxs = source_cx::as_future()
                | operation_cx::as_future()
                | operation_cx::as_promise(&promise)
                | operation_cx::as_lpc(&current_persona(), move |v: u64| {
                    lpc_got2.store(v, Ordering::SeqCst)
                });
            let (futures, mut armed) = Completions::<Manual>::arm(cxs);
            let (src, op): (Future<()>, Future<u64>) = futures.into_return();
            let promised = promise.finalize();
            let user = || progress(ProgressLevel::User);
            user();
            assert!(!src.ready() && !op.ready(), "notified before any event");
            Armed::<Manual>::source_done(&mut armed);
            assert!(!src.ready(), "source notified outside progress");
            user();
            assert!(src.ready(), "source notified at the next progress");
            assert!(!op.ready() && !promised.ready());
            let done = Rc::new(Cell::new(false));
            let done2 = done.clone();
            notify_when::<Manual, _, _, _>(move || done2.get(), 0, armed, || (42,));
            for _ in 0..3 {
                user();
            }
            assert!(
                !op.ready() && !promised.ready(),
                "notified before the operation completed"
            );
            assert_eq!(lpc_got.load(Ordering::SeqCst), 0);
            done.set(true);
            // The progress call that sees the completion notifies the future and the
            // promise; the LPC runs when the persona's queue is next drained.
            user();
            assert!(
                op.ready() && promised.ready(),
                "notified in the progress that saw it"
            );
            user();
            assert_eq!(op.wait(), 42);
            assert_eq!(promised.wait(), 42);
            assert_eq!(lpc_got.load(Ordering::SeqCst), 42);
            crate::finalize();
        });
    }

    /// §10.5.3: an operation in flight makes progress required; `discharge` advances
    /// it with internal progress only, so its notifications still wait for user-level
    /// progress.
    #[test]
    fn discharge_completes_operations_without_notifying() {
        gex::testing::spmd(1, || {
            crate::init();
            let lpc_ran = Arc::new(AtomicU64::new(0));
            let lpc_ran2 = lpc_ran.clone();
            let cxs = operation_cx::as_future()
                | operation_cx::as_lpc(&current_persona(), move |v: u64| {
                    lpc_ran2.store(v, Ordering::SeqCst)
                });
            let (op, armed) = Completions::<Manual>::arm(cxs);
            let op: Future<u64> = op.into_return();
            // The operation completes at its third test.
            let tests = Rc::new(Cell::new(0));
            let tests2 = tests.clone();
            notify_when_outgoing::<Manual, _, _, _>(
                move || {
                    tests2.set(tests2.get() + 1);
                    tests2.get() == 3
                },
                0,
                armed,
                || (7,),
            );
            assert!(crate::progress_required(), "an operation is in flight");
            crate::discharge();
            assert_eq!(
                tests.get(),
                3,
                "discharge stopped before the operation completed"
            );
            assert!(!crate::progress_required());
            assert!(!op.ready(), "discharge notified");
            assert_eq!(lpc_ran.load(Ordering::SeqCst), 0, "discharge ran an LPC");
            progress(ProgressLevel::User);
            assert_eq!(op.wait(), 7);
            progress(ProgressLevel::User);
            assert_eq!(lpc_ran.load(Ordering::SeqCst), 7);
            crate::finalize();
        });
    }

    #[test]
    fn unions_append_futures_in_order() {
        fn list<C: Completions<Manual>>(c: C) -> C::Futures {
            c.arm().0
        }
        // Nested either way, the futures come in the order of the `|` chain.
        let left =
            list((source_cx::as_future() | operation_cx::as_future()) | source_cx::as_future());
        let right =
            list(source_cx::as_future() | (operation_cx::as_future() | source_cx::as_future()));
        let (a, b, c): (Future<()>, Future<u64>, Future<()>) = left.into_return();
        let (d, e, f): (Future<()>, Future<u64>, Future<()>) = right.into_return();
        assert!(![
            a.ready(),
            b.ready(),
            c.ready(),
            d.ready(),
            e.ready(),
            f.ready()
        ]
        .contains(&true));
        let () = list(BufferedCx | BlockingCx).into_return();
        assert_eq!(
            <CxUnion<FutureCx<Source>, CxUnion<BufferedCx, FutureCx<Operation>>> as Completions<
                Manual,
            >>::EVENTS,
            SOURCE_EVENT | OPERATION_EVENT
        );
        assert!(!requests_op_or_remote::<
            Manual,
            CxUnion<FutureCx<Source>, BufferedCx>,
        >());
        assert!(requests_op_or_remote::<
            Manual,
            CxUnion<FutureCx<Source>, FutureCx<Operation>>,
        >());
    }
}
