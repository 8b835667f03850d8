//! The completion objects (§7.3): futures, promises, LPCs, remote RPCs, and the
//! source-completion requests that need no notification, with their union `|`. Each
//! implements the protocol for the events it can notify. Sits on the protocol, on
//! futures and promises, on personas (LPC notifications) and on `rpc` (remote
//! notifications).

use std::marker::PhantomData;
use std::ops::BitOr;

use super::events::{
    CompletionEvents, EventValues, FulfillWith, HasOperation, HasRemote, HasSource, LpcCallback,
    Operation, RemoteCall, Source, OPERATION_EVENT, REMOTE_EVENT, SOURCE_EVENT,
};
use super::protocol::{Armed, Completions};
use crate::future::list::{Append, Cons, FutureList, Nil};
use crate::future::{fits_cell, Future, Promise, ReplyCell};
use crate::persona::Persona;
use crate::rpc::{PreparedRpcFf, RpcArgs, RpcFn};
use crate::runtime::state::Rank;
use crate::thread;

/// Marker of the completion-object types, so that `|` accepts only them.
pub trait CompletionObject {}

/// Notification through a future (`source_cx::as_future`, `operation_cx::as_future`).
#[derive(Debug)]
pub struct FutureCx<E> {
    pub(super) _event: PhantomData<E>,
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
    pub(super) persona: Persona,
    pub(super) func: F,
    pub(super) _event: PhantomData<E>,
}

/// Notification through an RPC at the target (`remote_cx::as_rpc`).
#[derive(Clone)]
pub struct RpcCx<F, A> {
    pub(super) func: F,
    pub(super) args: A,
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
    const SOURCE_AT_RETURN: bool = A::SOURCE_AT_RETURN || B::SOURCE_AT_RETURN;

    fn arm(self) -> (Self::Futures, Self::Armed) {
        let (fa, aa) = self.a.arm();
        let (fb, ab) = self.b.arm();
        (fa.append(fb), (aa, ab))
    }

    #[inline]
    #[track_caller]
    fn check_armable(&self) {
        self.a.check_armable();
        self.b.check_armable();
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
        (Cons::one(future), promise_cx(promise))
    }

    #[inline]
    fn completed_at_initiation(self, _target: Rank, _values: Ev::OpValues) -> Self::Futures {
        Cons::one(Future::after_progress(()))
    }
}

impl<Ev: HasOperation> Completions<Ev> for FutureCx<Operation>
where
    Promise<<Ev::OpValues as EventValues>::FutureValue>: FulfillWith<Ev::OpValues>,
{
    type Futures = Cons<Future<<Ev::OpValues as EventValues>::FutureValue>, Nil>;
    type Armed = FutureArmed<<Ev::OpValues as EventValues>::FutureValue>;
    const EVENTS: u8 = OPERATION_EVENT;

    fn arm(self) -> (Self::Futures, Self::Armed) {
        if fits_cell::<<Ev::OpValues as EventValues>::FutureValue>() {
            let cell = ReplyCell::claim();
            // SAFETY: a fresh cell, which only this request's `operation_done` fills,
            // with the future's value type, which fits it.
            let future = unsafe { Future::from_cell(cell) };
            return (
                Cons::one(future),
                FutureArmed(ArmedFuture::Cell(cell, PhantomData)),
            );
        }
        let promise = Promise::new();
        let future = promise.get_future();
        (
            Cons::one(future),
            FutureArmed(ArmedFuture::Promise(promise_cx(promise))),
        )
    }

    #[inline]
    fn completed_at_initiation(self, _target: Rank, values: Ev::OpValues) -> Self::Futures {
        Cons::one(Future::after_progress(values.into_future_value()))
    }
}

/// The armed state of an `operation_cx::as_future` request: the reply cell its future
/// holds, for a value that fits one (as a round-trip RPC's future does: no allocation,
/// the value delivered in place), else the promise behind its future.
pub struct FutureArmed<T: 'static>(ArmedFuture<T>);

enum ArmedFuture<T: 'static> {
    Cell(&'static ReplyCell, PhantomData<fn() -> T>),
    Promise(PromiseCx<Operation, T>),
}

impl<Ev: CompletionEvents, T: 'static> Armed<Ev> for FutureArmed<T>
where
    Ev::OpValues: EventValues<FutureValue = T>,
    Promise<T>: FulfillWith<Ev::OpValues>,
{
    fn source_done(&mut self) {}
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, values: Ev::OpValues) {
        match self.0 {
            // SAFETY: `arm` claimed the cell for this request's future, of value type
            // `T`, on this thread (an operation notifies on its initiating thread), and
            // an operation completes once.
            ArmedFuture::Cell(cell, _) => unsafe {
                cell.deliver(|| values.into_future_value());
            },
            ArmedFuture::Promise(p) => {
                <PromiseCx<Operation, T> as Armed<Ev>>::operation_done(p, values);
            }
        }
    }
    fn abandon(self) {
        // The call is failing, so its future is dropped as it unwinds, leaving the cell
        // to a value that will never come: the next progress frees it. (A promise's
        // state goes with its future and this request.)
        if let ArmedFuture::Cell(cell, _) = self.0 {
            thread::defer(Box::new(move || {
                // SAFETY: the operation never started, so nothing delivers to the cell,
                // and deferred notifications run once, on this thread.
                unsafe { cell.release_unanswered() }
            }));
        }
    }
}

pub(super) fn promise_cx<E, T: 'static>(promise: Promise<T>) -> PromiseCx<E, T> {
    PromiseCx {
        promise,
        _event: PhantomData,
    }
}

impl<E, T: 'static> PromiseCx<E, T> {
    /// Registers the dependency this request will fulfil (§7.1 ¶8).
    #[track_caller]
    fn register(self, call: &str) -> Self {
        self.check(call);
        self.promise.require_anonymous(1);
        self
    }

    /// Panics naming `call` if the promise is already ready (§7.2.1 ¶3).
    #[track_caller]
    fn check(&self, call: &str) {
        if self.promise.is_ready() {
            panic!(
                "upcxx::{call}: the promise of an as_promise completion has a dependency \
                 count of zero (it is already ready); it must be greater than zero \
                 (UPC++ spec §7.2.1)"
            );
        }
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

    #[track_caller]
    fn check_armable(&self) {
        self.check(Ev::NAME);
    }
}

impl<Ev: CompletionEvents, T: 'static> Armed<Ev> for PromiseCx<Source, T> {
    fn source_done(&mut self) {
        thread::defer_satisfy(self.promise.clone().into_dependencies());
    }
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, _values: Ev::OpValues) {}
    fn abandon(self) {
        // The registered dependency, satisfied at the next progress as a notification
        // would be: the call is failing, and runs no callback while it does.
        thread::defer_satisfy(self.promise.into_dependencies());
    }
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

    #[track_caller]
    fn check_armable(&self) {
        self.check(Ev::NAME);
    }
}

impl<Ev: CompletionEvents, T: 'static> Armed<Ev> for PromiseCx<Operation, T>
where
    Promise<T>: FulfillWith<Ev::OpValues>,
{
    fn source_done(&mut self) {}
    fn remote_done(&mut self, _target: Rank) {}
    fn operation_done(self, values: Ev::OpValues) {
        self.promise.notify_with(values);
    }
    fn abandon(self) {
        // As for a source completion's promise: the dependency back, and no value.
        thread::defer_satisfy(self.promise.into_dependencies());
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

/// Enlists `func(values)` on `persona`, the event having occurred (§7.1 ¶9): the
/// callback runs in that persona's user-level progress (¶14), by whichever thread
/// holds it then. Always through the persona's own queue, also for a persona this
/// thread holds: a thread may release it before its next user-level progress (a
/// worker's scope that ends, §10.4 ¶8), and a queue of the thread's own would keep the
/// callback from the persona's next holder. Never inside the initiating call: the
/// queue runs in progress.
fn enlist<V: Send + 'static, F: LpcCallback<V>>(persona: Persona, func: F, values: V) {
    persona.lpc_ff(move || func.call(values));
}

impl<Ev: HasRemote, F, A> Completions<Ev> for RpcCx<F, A>
where
    RpcCx<F, A>: RemoteCall,
{
    type Futures = Nil;
    type Armed = Option<PreparedRpcFf>;
    const EVENTS: u8 = REMOTE_EVENT;

    /// Serializes the call now, while its borrowed arguments are alive.
    fn arm(self) -> (Nil, Option<PreparedRpcFf>) {
        (Nil, Some(self.prepare()))
    }
}

impl<Ev: CompletionEvents> Armed<Ev> for Option<PreparedRpcFf> {
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
    const SOURCE_AT_RETURN: bool = true;

    fn arm(self) -> (Nil, ()) {
        (Nil, ())
    }
}

impl<Ev: HasSource> Completions<Ev> for BlockingCx {
    type Futures = Nil;
    type Armed = ();
    const EVENTS: u8 = SOURCE_EVENT;
    const SOURCE_AT_RETURN: bool = true;

    fn arm(self) -> (Nil, ()) {
        (Nil, ())
    }
}

impl<F, A> RemoteCall for RpcCx<F, A>
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    fn prepare(self) -> PreparedRpcFf {
        PreparedRpcFf::new(self.func, &self.args)
    }
}
