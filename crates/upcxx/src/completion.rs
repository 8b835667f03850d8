//! Completion objects (UPC++ spec ch. 7).
//!
//! A communication call may report three *events* (§7.1): **source** completion (the
//! source buffer may be reused), **remote** completion (the data are at the target) and
//! **operation** completion (everything is done, from the initiator's point of view;
//! for a get this event carries the value). The caller says how it wants to hear of
//! each with a *completion object*, built by the functions of [`source_cx`],
//! [`remote_cx`] and [`operation_cx`] and joined with `|`:
//!
//! ```no_run
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
//! * **Notifications happen only during user-level progress** of the initiating
//!   thread (§7.1 ¶14), even though on shared memory every transfer is finished before
//!   the call returns. A future from `as_future` is then ready at this thread's next
//!   user-level progress with no allocation at all (`Future::after_progress`); promise
//!   fulfilment and LPC enlistment are queued for that progress; a remote RPC is sent
//!   once the data are at the target and runs in the target's user-level progress.
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
//! test passes.

use std::marker::PhantomData;
use std::ops::BitOr;

use crate::future::{Future, Promise};
use crate::persona::Persona;
use crate::rpc::{RpcArgs, RpcFn};
use crate::runtime::state::Rank;
use crate::thread;

/// The source-completion event (§7.1): the source buffer may be reused.
#[derive(Debug, Clone, Copy)]
pub enum Source {}

/// The remote-completion event (§7.1): the data are at the target.
#[derive(Debug, Clone, Copy)]
pub enum Remote {}

/// The operation-completion event (§7.1): the operation is done for the initiator.
#[derive(Debug, Clone, Copy)]
pub enum Operation {}

/// Bit of [`Completions::EVENTS`] for source completion.
pub const SOURCE_EVENT: u8 = 1;
/// Bit of [`Completions::EVENTS`] for remote completion.
pub const REMOTE_EVENT: u8 = 2;
/// Bit of [`Completions::EVENTS`] for operation completion.
pub const OPERATION_EVENT: u8 = 4;

/// The completion events a communication call provides and the values its operation
/// completion produces (the "Completions:" paragraph of each call in the spec). Each
/// call has a marker type implementing this and the `Has*` traits of its events.
pub trait CompletionEvents: 'static {
    /// The call's name, for messages (`"rput"`).
    const NAME: &'static str;
    /// The values of operation completion: `()` for none, `(T,)` for one value.
    type OpValues: EventValues;
}

/// A call that provides source completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no source completion, so `source_cx` requests are not \
               accepted (UPC++ spec §7.2.1)"
)]
pub trait HasSource: CompletionEvents {}

/// A call that provides remote completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no remote completion, so `remote_cx` requests are not \
               accepted (UPC++ spec §7.2.1)"
)]
pub trait HasRemote: CompletionEvents {}

/// A call that provides operation completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no operation completion, so `operation_cx` requests are \
               not accepted (UPC++ spec §7.2.1)"
)]
pub trait HasOperation: CompletionEvents {}

/// The values an event produces: `()` (none) or `(T,)` (one value of type `T`).
pub trait EventValues: 'static {
    /// The value type of a future readied by the event: `()` or `T`.
    type FutureValue: 'static;
    fn into_future_value(self) -> Self::FutureValue;
}

impl EventValues for () {
    type FutureValue = ();
    fn into_future_value(self) {}
}

impl<T: 'static> EventValues for (T,) {
    type FutureValue = T;
    fn into_future_value(self) -> T {
        self.0
    }
}

/// A promise that can be notified of an event producing `V` (§7.1 ¶8): any promise
/// for an event without values (one anonymous dependency is fulfilled), a
/// `Promise<T>` for an event producing a `T` (`fulfill_result`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be notified of an event producing `{V}`: the promise's type \
               must match the event's value (UPC++ spec §7.1)"
)]
pub trait FulfillWith<V> {
    fn fulfill_with(&self, values: V);
}

impl<T: 'static> FulfillWith<()> for Promise<T> {
    fn fulfill_with(&self, (): ()) {
        self.fulfill_anonymous(1);
    }
}

impl<T: 'static> FulfillWith<(T,)> for Promise<T> {
    fn fulfill_with(&self, (value,): (T,)) {
        self.fulfill_result(value);
    }
}

/// An LPC callback for an event producing `V` (§7.1 ¶9): `FnOnce()` for an event
/// without values, `FnOnce(T)` for an event producing a `T`. Its result is discarded.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the LPC callback of an event producing `{V}`: it must be \
               a `Send + 'static` closure taking the event's values (none, or one) \
               (UPC++ spec §7.1)"
)]
pub trait LpcCallback<V>: Send + 'static {
    fn call(self, values: V);
}

impl<F, R> LpcCallback<()> for F
where
    F: FnOnce() -> R + Send + 'static,
{
    fn call(self, (): ()) {
        self();
    }
}

impl<F, T, R> LpcCallback<(T,)> for F
where
    F: FnOnce(T) -> R + Send + 'static,
{
    fn call(self, (value,): (T,)) {
        self(value);
    }
}

/// A function and arguments that `remote_cx::as_rpc` can run on the target: what
/// [`crate::rpc::rpc_ff`] accepts, with owned (`'static`) arguments, because the call
/// may be sent after the initiating call returned.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent by `remote_cx::as_rpc`",
    note = "the function must be a fn item or a closure capturing nothing, taking the \
            elements of the argument tuple; the arguments must be serializable and owned \
            ('static)"
)]
pub trait RemoteCall: 'static {
    /// Sends the call to `target`'s master persona.
    fn send(self, target: Rank);
}

impl<F, A> RemoteCall for RpcCx<F, A>
where
    F: RpcFn<A> + 'static,
    A: RpcArgs + 'static,
{
    #[inline]
    #[track_caller]
    fn send(self, target: Rank) {
        crate::rpc::rpc_ff(target, self.func, self.args);
    }
}

// ---------------------------------------------------------------------------------
// Type-level lists of futures, and the return type of §7.2.2.

/// The empty list of futures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nil;

/// A list of futures: `head` then `tail`.
#[derive(Debug)]
pub struct Cons<H, T> {
    head: H,
    tail: T,
}

/// Appends list `L` to this list (`|` joins the futures of two completion objects).
pub trait Append<L> {
    type Output;
    fn append(self, list: L) -> Self::Output;
}

impl<L> Append<L> for Nil {
    type Output = L;
    #[inline]
    fn append(self, list: L) -> L {
        list
    }
}

impl<H, T: Append<L>, L> Append<L> for Cons<H, T> {
    type Output = Cons<H, T::Output>;
    #[inline]
    fn append(self, list: L) -> Self::Output {
        Cons {
            head: self.head,
            tail: self.tail.append(list),
        }
    }
}

/// A list of futures and what a call returns for it (§7.2.2): `()` for none, the future
/// for one, a tuple for several (up to 8).
pub trait FutureList {
    type Return;
    fn into_return(self) -> Self::Return;
}

impl FutureList for Nil {
    type Return = ();
    #[inline]
    fn into_return(self) {}
}

impl<A> FutureList for Cons<A, Nil> {
    type Return = A;
    #[inline]
    fn into_return(self) -> A {
        self.head
    }
}

macro_rules! future_list {
    ($($v:ident: $t:ident),+) => {
        impl<$($t),+> FutureList for future_list!(@ty $($t),+) {
            type Return = ($($t,)+);
            #[inline]
            fn into_return(self) -> Self::Return {
                let future_list!(@pat $($v),+) = self;
                ($($v,)+)
            }
        }
    };
    (@ty) => { Nil };
    (@ty $h:ident $(, $t:ident)*) => { Cons<$h, future_list!(@ty $($t),*)> };
    (@pat) => { Nil };
    (@pat $h:ident $(, $t:ident)*) => { Cons { head: $h, tail: future_list!(@pat $($t),*) } };
}

future_list!(a: A, b: B);
future_list!(a: A, b: B, c: C);
future_list!(a: A, b: B, c: C, d: D);
future_list!(a: A, b: B, c: C, d: D, e: E);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H);

// ---------------------------------------------------------------------------------
// The completion-object protocol.

/// A completion object that call `Ev` accepts: how the call reports its events, and
/// what it returns (§7.2.2). See the [module documentation](self).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a completion object that `{Ev}` accepts",
    note = "build completion objects with `source_cx`, `remote_cx` and `operation_cx`, \
            join them with `|`, and request only the events the call provides (UPC++ \
            spec §7.2.1)"
)]
pub trait Completions<Ev: CompletionEvents>: Sized {
    /// The futures this object produces, in `|` order.
    type Futures: FutureList;
    /// The state kept while the operation is in flight (see [`Completions::arm`]).
    type Armed: Armed<Ev>;
    /// The events requested: a mask of [`SOURCE_EVENT`], [`REMOTE_EVENT`],
    /// [`OPERATION_EVENT`].
    const EVENTS: u8;

    /// Prepares the notifications of an operation whose events will occur later:
    /// returns the futures and the state to notify as they do. Adds a dependency to
    /// every promise named (§7.1 ¶8).
    ///
    /// # Panics
    /// If a promise named has a dependency count of zero (§7.2.1 ¶3).
    fn arm(self) -> (Self::Futures, Self::Armed);

    /// Every event of the operation (to `target`) occurred inside the initiating call,
    /// with operation values `values`: queues the notifications for this thread's next
    /// user-level progress (sending any remote RPC now) and returns the futures.
    #[inline]
    fn completed_at_initiation(self, target: Rank, values: Ev::OpValues) -> Self::Futures {
        let (futures, mut armed) = self.arm();
        armed.source_done();
        armed.remote_done(target);
        armed.operation_done(values);
        futures
    }
}

/// What a call returns for completion object `C` (UPC++'s `RType`, §7.2.2).
pub type Returned<C, Ev> = <<C as Completions<Ev>>::Futures as FutureList>::Return;

/// The notifications of an operation in flight. Each method is called once, on the
/// initiating thread, when its event has occurred (operation last); the notifications
/// are queued for this thread's next user-level progress, except remote RPCs, which
/// are sent at once.
pub trait Armed<Ev: CompletionEvents>: 'static {
    fn source_done(&mut self);
    fn remote_done(&mut self, target: Rank);
    fn operation_done(self, values: Ev::OpValues);
}

impl<Ev: CompletionEvents> Armed<Ev> for () {
    #[inline]
    fn source_done(&mut self) {}
    #[inline]
    fn remote_done(&mut self, _target: Rank) {}
    #[inline]
    fn operation_done(self, _values: Ev::OpValues) {}
}

impl<Ev: CompletionEvents, A: Armed<Ev>, B: Armed<Ev>> Armed<Ev> for (A, B)
where
    Ev::OpValues: Clone,
{
    fn source_done(&mut self) {
        self.0.source_done();
        self.1.source_done();
    }
    fn remote_done(&mut self, target: Rank) {
        self.0.remote_done(target);
        self.1.remote_done(target);
    }
    fn operation_done(self, values: Ev::OpValues) {
        self.0.operation_done(values.clone());
        self.1.operation_done(values);
    }
}

/// True if `C` requests operation or remote completion, as §7.2.1 ¶2 requires of a
/// call that provides either. Calls assert it at compile time.
pub const fn requests_op_or_remote<Ev: CompletionEvents, C: Completions<Ev>>() -> bool {
    C::EVENTS & (REMOTE_EVENT | OPERATION_EVENT) != 0
}

/// Runs `armed`'s remote and operation notifications once `done()` is true, testing
/// at each user-level progress of this thread: for operations that finish after their
/// initiating call returns. `values` gives the operation's values then.
pub(crate) fn notify_when<Ev, A, D, V>(mut done: D, target: Rank, armed: A, values: V)
where
    Ev: CompletionEvents,
    A: Armed<Ev>,
    D: FnMut() -> bool + 'static,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    thread::defer(Box::new(move || {
        if done() {
            let mut armed = armed;
            armed.remote_done(target);
            armed.operation_done(values());
        } else {
            notify_when(done, target, armed, values);
        }
    }));
}

// ---------------------------------------------------------------------------------
// The completion objects.

/// Marker of the completion-object types, so that `|` accepts only them.
pub trait CompletionObject {}

/// Notification through a future (`source_cx::as_future`, `operation_cx::as_future`).
#[derive(Debug)]
pub struct FutureCx<E> {
    _event: PhantomData<E>,
}

impl<E> Clone for FutureCx<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for FutureCx<E> {}

/// Notification through a promise (`source_cx::as_promise`, `operation_cx::as_promise`).
pub struct PromiseCx<E, T: 'static> {
    promise: Promise<T>,
    _event: PhantomData<E>,
}

impl<E, T: 'static> Clone for PromiseCx<E, T> {
    fn clone(&self) -> Self {
        PromiseCx {
            promise: self.promise.clone(),
            _event: PhantomData,
        }
    }
}

/// Notification through an LPC on a persona (`source_cx::as_lpc`, `operation_cx::as_lpc`).
#[derive(Clone)]
pub struct LpcCx<E, F> {
    persona: Persona,
    func: F,
    _event: PhantomData<E>,
}

/// Notification through an RPC at the target (`remote_cx::as_rpc`).
#[derive(Clone)]
pub struct RpcCx<F, A> {
    func: F,
    args: A,
}

/// Source completion before the call returns (`source_cx::as_buffered`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BufferedCx;

/// Source completion before the call returns, without buffering
/// (`source_cx::as_blocking`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockingCx;

/// The union of two completion objects (`a | b`, §7.3 ¶24).
#[derive(Clone)]
pub struct CxUnion<A, B> {
    a: A,
    b: B,
}

macro_rules! completion_object {
    ($([$($g:tt)*] $t:ty;)*) => {$(
        impl<$($g)*> CompletionObject for $t {}
        impl<$($g)* Rhs: CompletionObject> BitOr<Rhs> for $t {
            type Output = CxUnion<Self, Rhs>;
            /// The union of two completion objects; futures keep the operands' order.
            #[inline]
            fn bitor(self, rhs: Rhs) -> CxUnion<Self, Rhs> {
                CxUnion { a: self, b: rhs }
            }
        }
    )*};
}

completion_object! {
    [E,] FutureCx<E>;
    [E, T: 'static,] PromiseCx<E, T>;
    [E, F,] LpcCx<E, F>;
    [F, A,] RpcCx<F, A>;
    [] BufferedCx;
    [] BlockingCx;
    [A, B,] CxUnion<A, B>;
}

impl<Ev, A, B> Completions<Ev> for CxUnion<A, B>
where
    Ev: CompletionEvents,
    Ev::OpValues: Clone,
    A: Completions<Ev>,
    B: Completions<Ev>,
    A::Futures: Append<B::Futures>,
    <A::Futures as Append<B::Futures>>::Output: FutureList,
{
    type Futures = <A::Futures as Append<B::Futures>>::Output;
    type Armed = (A::Armed, B::Armed);
    const EVENTS: u8 = A::EVENTS | B::EVENTS;

    fn arm(self) -> (Self::Futures, Self::Armed) {
        let (fa, aa) = self.a.arm();
        let (fb, ab) = self.b.arm();
        (fa.append(fb), (aa, ab))
    }

    #[inline]
    fn completed_at_initiation(self, target: Rank, values: Ev::OpValues) -> Self::Futures {
        let fa = self.a.completed_at_initiation(target, values.clone());
        let fb = self.b.completed_at_initiation(target, values);
        fa.append(fb)
    }
}

impl<Ev: HasSource> Completions<Ev> for FutureCx<Source> {
    type Futures = Cons<Future<()>, Nil>;
    type Armed = PromiseCx<Source, ()>;
    const EVENTS: u8 = SOURCE_EVENT;

    fn arm(self) -> (Self::Futures, Self::Armed) {
        let promise = Promise::new();
        let future = promise.get_future();
        (one(future), promise_cx(promise))
    }

    #[inline]
    fn completed_at_initiation(self, _target: Rank, _values: Ev::OpValues) -> Self::Futures {
        one(Future::after_progress(()))
    }
}

impl<Ev: HasOperation> Completions<Ev> for FutureCx<Operation>
where
    Promise<<Ev::OpValues as EventValues>::FutureValue>: FulfillWith<Ev::OpValues>,
{
    type Futures = Cons<Future<<Ev::OpValues as EventValues>::FutureValue>, Nil>;
    type Armed = PromiseCx<Operation, <Ev::OpValues as EventValues>::FutureValue>;
    const EVENTS: u8 = OPERATION_EVENT;

    fn arm(self) -> (Self::Futures, Self::Armed) {
        let promise = Promise::new();
        let future = promise.get_future();
        (one(future), promise_cx(promise))
    }

    #[inline]
    fn completed_at_initiation(self, _target: Rank, values: Ev::OpValues) -> Self::Futures {
        one(Future::after_progress(values.into_future_value()))
    }
}

#[inline]
fn one<F>(future: F) -> Cons<F, Nil> {
    Cons {
        head: future,
        tail: Nil,
    }
}

fn promise_cx<E, T: 'static>(promise: Promise<T>) -> PromiseCx<E, T> {
    PromiseCx {
        promise,
        _event: PhantomData,
    }
}

impl<E, T: 'static> PromiseCx<E, T> {
    /// Registers the dependency this request will fulfil (§7.1 ¶8).
    #[track_caller]
    fn register(self, call: &str) -> Self {
        if self.promise.get_future().ready() {
            panic!(
                "upcxx::{call}: the promise of an as_promise completion has a dependency \
                 count of zero (it is already ready); it must be greater than zero \
                 (UPC++ spec §7.2.1)"
            );
        }
        self.promise.require_anonymous(1);
        self
    }
}

impl<Ev: HasSource, T: 'static> Completions<Ev> for PromiseCx<Source, T> {
    type Futures = Nil;
    type Armed = Self;
    const EVENTS: u8 = SOURCE_EVENT;

    #[track_caller]
    fn arm(self) -> (Nil, Self) {
        (Nil, self.register(Ev::NAME))
    }
}

impl<Ev: CompletionEvents, T: 'static> Armed<Ev> for PromiseCx<Source, T> {
    fn source_done(&mut self) {
        let promise = self.promise.clone();
        thread::defer(Box::new(move || promise.fulfill_anonymous(1)));
    }
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, _values: Ev::OpValues) {}
}

impl<Ev: HasOperation, T: 'static> Completions<Ev> for PromiseCx<Operation, T>
where
    Promise<T>: FulfillWith<Ev::OpValues>,
{
    type Futures = Nil;
    type Armed = Self;
    const EVENTS: u8 = OPERATION_EVENT;

    #[track_caller]
    fn arm(self) -> (Nil, Self) {
        (Nil, self.register(Ev::NAME))
    }
}

impl<Ev: CompletionEvents, T: 'static> Armed<Ev> for PromiseCx<Operation, T>
where
    Promise<T>: FulfillWith<Ev::OpValues>,
{
    fn source_done(&mut self) {}
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, values: Ev::OpValues) {
        let promise = self.promise;
        thread::defer(Box::new(move || promise.fulfill_with(values)));
    }
}

impl<Ev: HasSource, F: LpcCallback<()>> Completions<Ev> for LpcCx<Source, F> {
    type Futures = Nil;
    type Armed = Option<Self>;
    const EVENTS: u8 = SOURCE_EVENT;

    fn arm(self) -> (Nil, Option<Self>) {
        (Nil, Some(self))
    }
}

impl<Ev: CompletionEvents, F: LpcCallback<()>> Armed<Ev> for Option<LpcCx<Source, F>> {
    fn source_done(&mut self) {
        if let Some(LpcCx { persona, func, .. }) = self.take() {
            enlist(persona, func, ());
        }
    }
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, _values: Ev::OpValues) {}
}

impl<Ev: HasOperation, F: LpcCallback<Ev::OpValues>> Completions<Ev> for LpcCx<Operation, F>
where
    Ev::OpValues: Send,
{
    type Futures = Nil;
    type Armed = Self;
    const EVENTS: u8 = OPERATION_EVENT;

    fn arm(self) -> (Nil, Self) {
        (Nil, self)
    }
}

impl<Ev: CompletionEvents, F: LpcCallback<Ev::OpValues>> Armed<Ev> for LpcCx<Operation, F>
where
    Ev::OpValues: Send,
{
    fn source_done(&mut self) {}
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, values: Ev::OpValues) {
        let LpcCx { persona, func, .. } = self;
        enlist(persona, func, values);
    }
}

/// Enlists `func(values)` on `persona` at this thread's next user-level progress, so
/// the callback cannot run before the initiator could have learnt of the event (§7.1
/// ¶14). A persona this thread holds is being progressed right then, so the callback
/// runs there and then instead of waiting for one more progress call.
fn enlist<V: Send + 'static, F: LpcCallback<V>>(persona: Persona, func: F, values: V) {
    thread::defer(Box::new(move || {
        if persona.active_with_caller() {
            func.call(values);
        } else {
            persona.lpc_ff(move || func.call(values));
        }
    }));
}

impl<Ev: HasRemote, F, A> Completions<Ev> for RpcCx<F, A>
where
    RpcCx<F, A>: RemoteCall,
{
    type Futures = Nil;
    type Armed = Option<Self>;
    const EVENTS: u8 = REMOTE_EVENT;

    fn arm(self) -> (Nil, Option<Self>) {
        (Nil, Some(self))
    }
}

impl<Ev: CompletionEvents, F, A> Armed<Ev> for Option<RpcCx<F, A>>
where
    RpcCx<F, A>: RemoteCall,
{
    fn source_done(&mut self) {}
    fn remote_done(&mut self, target: Rank) {
        if let Some(rpc) = self.take() {
            rpc.send(target);
        }
    }
    fn operation_done(self, _values: Ev::OpValues) {}
}

impl<Ev: HasSource> Completions<Ev> for BufferedCx {
    type Futures = Nil;
    type Armed = ();
    const EVENTS: u8 = SOURCE_EVENT;

    fn arm(self) -> (Nil, ()) {
        (Nil, ())
    }
}

impl<Ev: HasSource> Completions<Ev> for BlockingCx {
    type Futures = Nil;
    type Armed = ();
    const EVENTS: u8 = SOURCE_EVENT;

    fn arm(self) -> (Nil, ()) {
        (Nil, ())
    }
}

// ---------------------------------------------------------------------------------
// The constructors, named as in the spec.

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
    /// values; its result is discarded (§7.2 ¶7).
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
            // One progress call sees the completion and queues the notifications, the
            // next delivers them.
            user();
            user();
            assert!(op.ready() && promised.ready());
            assert_eq!(op.wait(), 42);
            assert_eq!(promised.wait(), 42);
            assert_eq!(lpc_got.load(Ordering::SeqCst), 42);
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
