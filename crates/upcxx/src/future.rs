//! Futures and promises (UPC++ spec ch. 5 and Appendix A).
//!
//! A [`Future<T>`] is the eventual value of an operation; a [`Promise<T>`] is the
//! producer side, with a dependency counter. Differences from C++ forced or suggested by
//! Rust, and how the spec's semantics are kept:
//!
//! * `future<A, B, ...>` is `Future<(A, B, ...)>`: one value type, which may be a tuple
//!   (`Future<()>` is `future<>`). C++'s `result_tuple`-style access is just the tuple.
//! * Futures are single-threaded (§5.5: "as if the current thread is the only one"), so
//!   they are `Rc`-based and neither `Send` nor `Sync`.
//! * Consumers take values by move: [`Future::wait`] and [`Future::then`] consume the
//!   handle. A future may be cloned when `T: Clone`; each consumer then gets a copy, as
//!   in C++, and the last one gets the original.
//! * Callbacks run exactly where §5.5 says: during `then` on a ready future, or during
//!   the promise fulfilment that makes the future ready.
//! * `then` flattens: a callback returning a `Future<U>` gives `Future<U>`; a callback
//!   returning a value `V` gives `Future<V>`. Which is which is decided by the
//!   [`FutureValue`] trait, implemented for the standard value types; implement it for
//!   your own types with [`impl_future_value!`](crate::impl_future_value), or return
//!   [`make_future`]`(v)` from the callback.
//! * A ready future of plain values ([`make_future`], `to_future`) lives inline: no heap
//!   allocation. So does the future of an operation that completed at initiation, which
//!   the spec still requires to stay non-ready until the next user-level progress: it
//!   records the thread's progress epoch and becomes ready when that advances.
//! * The future of a round-trip RPC with a small value holds a *reply cell* from a
//!   per-thread pool, into which the reply is decoded (see `cell.rs`): no allocation
//!   either, unless a callback is attached before the value arrives.
//! * Futures also implement [`std::future::Future`]; [`block_on`](crate::block_on)
//!   drives them with user-level progress, so `async` code can `.await` them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::instrument::reporting;
use crate::progress;
use crate::thread;

mod cell;

pub(crate) use cell::{fits as fits_cell, ReplyCell};

type Callback<T> = Box<dyn FnOnce(T)>;
/// Copies a value for one more consumer.
type CloneFn<T> = fn(&T) -> T;

/// The shared state of a non-ready future and its promise.
pub(crate) struct State<T> {
    value: RefCell<Option<T>>,
    ready: Cell<bool>,
    /// Promise dependency counter (UPC++ §5.3): ready when it reaches zero.
    deps: Cell<usize>,
    callbacks: RefCell<Vec<Callback<T>>>,
    wakers: RefCell<Vec<Waker>>,
    /// Live `Future` handles onto this state.
    handles: Cell<usize>,
    /// Set by `Future::clone` (where `T: Clone` is known) so that several consumers can
    /// each get a value.
    clone_fn: Cell<Option<CloneFn<T>>>,
}

impl<T: 'static> State<T> {
    pub(crate) fn new(deps: usize) -> Rc<State<T>> {
        Rc::new(State {
            value: RefCell::new(None),
            ready: Cell::new(false),
            deps: Cell::new(deps),
            callbacks: RefCell::new(Vec::new()),
            wakers: RefCell::new(Vec::new()),
            handles: Cell::new(0),
            clone_fn: Cell::new(None),
        })
    }

    fn set_value(&self, v: T) {
        let mut slot = self.value.borrow_mut();
        if slot.is_some() {
            drop(slot);
            panic!("upcxx::Promise::fulfill_result: the result was already fulfilled");
        }
        *slot = Some(v);
    }

    /// Takes the value for one consumer: a copy while others still need it.
    fn take_for_consumer(&self, others_remain: bool) -> T {
        if others_remain {
            let clone = self.clone_fn.get().unwrap_or_else(|| {
                panic!(
                    "upcxx: a future's value is needed by several consumers but its type is \
                     not Clone (take each value once)"
                )
            });
            clone(
                self.value
                    .borrow()
                    .as_ref()
                    .expect("ready future has a value"),
            )
        } else {
            self.value
                .borrow_mut()
                .take()
                .expect("ready future has a value")
        }
    }

    /// Decrements the dependency counter by `n`; at zero the future becomes ready and
    /// its callbacks run here, on the calling thread (§5.5 ¶2).
    pub(crate) fn satisfy(&self, n: usize, call: &str) {
        let deps = self.deps.get();
        if n > deps {
            panic!("upcxx::{call}: the dependency counter would drop below zero ({deps} - {n})");
        }
        self.deps.set(deps - n);
        if deps == n {
            self.make_ready(call);
        }
    }

    fn make_ready(&self, call: &str) {
        if self.value.borrow().is_none() {
            match unit_value::<T>() {
                Some(v) => *self.value.borrow_mut() = Some(v),
                None => panic!(
                    "upcxx::{call}: the promise became ready without a result \
                     (call fulfill_result before the last dependency is fulfilled)"
                ),
            }
        }
        self.ready.set(true);
        let callbacks = std::mem::take(&mut *self.callbacks.borrow_mut());
        let n = callbacks.len();
        for (i, cb) in callbacks.into_iter().enumerate() {
            let others = i + 1 < n || self.handles.get() > 0;
            cb(self.take_for_consumer(others));
        }
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    fn on_ready(&self, cb: Callback<T>) {
        self.callbacks.borrow_mut().push(cb);
    }

    /// A copy of `v` for one more consumer (`Future::clone` set the copy function).
    fn copy_value(&self, v: &T) -> T {
        let clone = self
            .clone_fn
            .get()
            .expect("a state copied for a clone knows how to clone");
        clone(v)
    }
}

/// `()` for `T = ()`: the value of a future that carries none.
fn unit_value<T: 'static>() -> Option<T> {
    let unit: Box<dyn std::any::Any> = Box::new(());
    unit.downcast::<T>().ok().map(|b| *b)
}

enum Repr<T> {
    /// Ready, value inline (no allocation).
    Ready(T),
    /// Complete, but ready only after this thread's next user-level progress (§7: an
    /// operation's notification is delivered during progress).
    AfterProgress(T, u64),
    Shared(Rc<State<T>>),
    /// The value is delivered into a reply cell of this thread (see `cell.rs`).
    Reply(&'static ReplyCell),
    /// The value was taken (only transiently, inside consuming methods).
    Taken,
}

/// The eventual value of an operation (UPC++ `future<T...>`, spec ch. 5).
#[must_use = "a future does nothing unless waited on or given a callback"]
pub struct Future<T: 'static> {
    repr: Repr<T>,
}

impl<T: 'static> Future<T> {
    pub(crate) fn from_state(state: Rc<State<T>>) -> Future<T> {
        state.handles.set(state.handles.get() + 1);
        Future {
            repr: Repr::Shared(state),
        }
    }

    /// A future that becomes ready at this thread's next user-level progress.
    pub(crate) fn after_progress(value: T) -> Future<T> {
        Future {
            repr: Repr::AfterProgress(value, thread::progress_epoch()),
        }
    }

    /// The future of a value that will be delivered into `cell`.
    ///
    /// # Safety
    /// `cell` must be freshly claimed for this future, and only ever receive a `T`
    /// (which must fit: `fits_cell::<T>()`).
    pub(crate) unsafe fn from_cell(cell: &'static ReplyCell) -> Future<T> {
        debug_assert!(fits_cell::<T>());
        Future {
            repr: Repr::Reply(cell),
        }
    }

    /// Turns a reply-cell future into an `AfterProgress` one if its value arrived, or
    /// into a `Shared` one fed by the cell otherwise: for the uses a cell does not
    /// support (callbacks, wakers).
    fn unpack(&mut self) {
        if let Repr::Reply(cell) = self.repr {
            self.repr = match cell.arrival() {
                // SAFETY: this future owns the cell, which holds its `T`.
                Some(epoch) => Repr::AfterProgress(unsafe { cell.take::<T>() }, epoch),
                None => {
                    // SAFETY: this future owns the `Waiting` cell of a `T`; after
                    // `abandon` it no longer refers to it.
                    let state = unsafe { cell.forward_state::<T>() };
                    unsafe { cell.abandon::<T>() };
                    state.handles.set(state.handles.get() + 1);
                    Repr::Shared(state)
                }
            };
        }
    }

    /// The progress epoch in which the operation behind a future that is not ready yet
    /// completed, if it did: the first user-level progress after it readies the future.
    fn completed_in(&self) -> Option<u64> {
        match &self.repr {
            Repr::AfterProgress(_, epoch) => Some(*epoch),
            Repr::Reply(cell) => cell.arrival(),
            _ => None,
        }
    }

    /// Turns an `AfterProgress` future whose epoch passed into `Ready`.
    fn settle(&mut self) {
        if let Repr::AfterProgress(_, epoch) = &self.repr {
            if thread::progress_epoch() > *epoch {
                let Repr::AfterProgress(v, _) = std::mem::replace(&mut self.repr, Repr::Taken)
                else {
                    unreachable!()
                };
                self.repr = Repr::Ready(v);
            }
        }
    }

    /// True once the value is available (UPC++ `future::ready`).
    pub fn ready(&self) -> bool {
        match &self.repr {
            Repr::Ready(_) => true,
            Repr::AfterProgress(_, epoch) => thread::progress_epoch() > *epoch,
            Repr::Shared(s) => s.ready.get(),
            Repr::Reply(cell) => cell.ready(),
            Repr::Taken => false,
        }
    }

    /// A copy of the value of a ready future (UPC++ `future::result`).
    ///
    /// # Panics
    /// If the future is not ready.
    #[track_caller]
    pub fn result(&self) -> T
    where
        T: Clone,
    {
        if !self.ready() {
            panic!("upcxx::Future::result: the future is not ready");
        }
        match &self.repr {
            Repr::Ready(v) | Repr::AfterProgress(v, _) => v.clone(),
            Repr::Shared(s) => s.value.borrow().as_ref().expect("ready").clone(),
            // SAFETY: this future owns the cell, whose value arrived (it is ready).
            Repr::Reply(cell) => unsafe { cell.peek::<T>() }.clone(),
            Repr::Taken => unreachable!(),
        }
    }

    /// The value of a ready future, moved out (UPC++ `future::result_moved`).
    ///
    /// # Panics
    /// If the future is not ready.
    #[track_caller]
    pub fn into_result(mut self) -> T {
        self.settle();
        if !self.ready() {
            panic!("upcxx::Future::into_result: the future is not ready");
        }
        self.take_value()
    }

    /// The value if the future is ready, else the future.
    #[inline]
    pub(crate) fn into_ready(mut self) -> Result<T, Future<T>> {
        match self.repr {
            Repr::Ready(_) => {
                let Repr::Ready(v) = std::mem::replace(&mut self.repr, Repr::Taken) else {
                    unreachable!()
                };
                Ok(v)
            }
            _ if self.ready() => Ok(self.into_result()),
            _ => Err(self),
        }
    }

    fn take_value(&mut self) -> T {
        match std::mem::replace(&mut self.repr, Repr::Taken) {
            Repr::Ready(v) | Repr::AfterProgress(v, _) => v,
            Repr::Shared(s) => {
                s.handles.set(s.handles.get() - 1);
                s.take_for_consumer(s.handles.get() > 0)
            }
            // SAFETY: this future owns the cell, whose value arrived (callers check
            // readiness first); the cell is no longer referred to.
            Repr::Reply(cell) => unsafe { cell.take::<T>() },
            Repr::Taken => unreachable!("value taken twice"),
        }
    }

    /// Waits for the value, making user-level progress (UPC++ `future::wait`).
    ///
    /// # Panics
    /// In the restricted context (inside a callback run by progress), where waiting
    /// could deadlock (§10.2).
    #[track_caller]
    #[inline(always)]
    pub fn wait(self) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the representation is moved out once and `this` is neither used nor
        // dropped afterwards, so it is owned exactly once (by the match below).
        match unsafe { std::ptr::read(&this.repr) } {
            Repr::Ready(v) => v,
            // An operation complete at initiation (all shared-memory RMA): ready at the
            // next user-level progress, which `wait_past` makes if needed (reporting
            // the GASP event out of line, when a tool is attached: no test here).
            Repr::AfterProgress(v, epoch) => {
                progress::wait_past(epoch);
                v
            }
            repr => Future { repr }.wait_slow(),
        }
    }

    /// [`Future::wait`] on a future with a promise state or a reply cell: reported as a
    /// GASP event when the future is not ready yet and a tool is attached.
    #[track_caller]
    fn wait_slow(self) -> T {
        if reporting() && !self.ready() {
            return self.wait_reported();
        }
        self.wait_unreported()
    }

    /// [`Future::wait_slow`] on a future not ready while a tool is attached, out of
    /// line: the wait's GASP event around the wait.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn wait_reported(self) -> T {
        let span = gasp::span_if!(true, GASP_UPCXX_FUTURE_WAIT, gasp::instrument::NONE);
        let v = self.wait_unreported();
        gasp::end!(span, gasp::instrument::NONE);
        v
    }

    #[inline(always)]
    #[track_caller]
    fn wait_unreported(mut self) -> T {
        if let Repr::Reply(cell) = self.repr {
            // The future of an RPC: its reply fills the cell.
            if !cell.ready() {
                match cell.arrival() {
                    Some(epoch) => progress::progress_past(epoch, "Future::wait"),
                    None => {
                        thread::check_not_restricted("Future::wait");
                        progress::wait_until(|| cell.ready());
                    }
                }
            }
            std::mem::forget(self);
            // SAFETY: this future owned the cell (it is forgotten, so it will not
            // abandon it), whose value arrived.
            return unsafe { cell.take::<T>() };
        }
        if !self.ready() {
            if let Some(epoch) = self.completed_in() {
                progress::progress_past(epoch, "Future::wait");
            }
            if !self.ready() {
                thread::check_not_restricted("Future::wait");
                progress::wait_until(|| self.ready());
            }
        }
        self.take_value()
    }

    /// Runs `f` on the value once ready and returns the future of its result (UPC++
    /// `future::then`). If `f` returns a future, the result is that future's value
    /// (flattened). On a ready future `f` runs now, before `then` returns.
    pub fn then<R, F>(mut self, f: F) -> Future<R::Value>
    where
        F: FnOnce(T) -> R + 'static,
        R: FutureValue,
    {
        self.unpack();
        self.settle();
        match std::mem::replace(&mut self.repr, Repr::Taken) {
            Repr::Ready(v) => f(v).into_future(),
            Repr::Shared(s) if s.ready.get() => {
                self.repr = Repr::Shared(s);
                let v = self.take_value();
                f(v).into_future()
            }
            Repr::Shared(s) => {
                let out = State::<R::Value>::new(1);
                let out2 = Rc::clone(&out);
                s.on_ready(Box::new(move |v| {
                    f(v).into_future().forward_to(out2);
                }));
                s.handles.set(s.handles.get() - 1);
                Future::from_state(out)
            }
            Repr::AfterProgress(v, _) => {
                let out = State::<R::Value>::new(1);
                let out2 = Rc::clone(&out);
                thread::defer(Box::new(move || {
                    f(v).into_future().forward_to(out2);
                }));
                Future::from_state(out)
            }
            Repr::Reply(_) | Repr::Taken => unreachable!(),
        }
    }

    /// Fulfils `target` (a promise state with one dependency) with this future's value
    /// when it is ready.
    pub(crate) fn forward_to(mut self, target: Rc<State<T>>) {
        self.unpack();
        self.settle();
        match std::mem::replace(&mut self.repr, Repr::Taken) {
            Repr::Ready(v) => {
                target.set_value(v);
                target.satisfy(1, "Future::then");
            }
            Repr::Shared(s) if s.ready.get() => {
                self.repr = Repr::Shared(s);
                let v = self.take_value();
                target.set_value(v);
                target.satisfy(1, "Future::then");
            }
            Repr::Shared(s) => {
                s.on_ready(Box::new(move |v| {
                    target.set_value(v);
                    target.satisfy(1, "Future::then");
                }));
                s.handles.set(s.handles.get() - 1);
            }
            Repr::AfterProgress(v, _) => thread::defer(Box::new(move || {
                target.set_value(v);
                target.satisfy(1, "Future::then");
            })),
            Repr::Reply(_) | Repr::Taken => unreachable!(),
        }
    }

    /// Registers `f` to run with the value when ready (no result future).
    pub(crate) fn on_ready(self, f: impl FnOnce(T) + 'static) {
        drop(self.then(move |v| {
            f(v);
        }));
    }
}

impl<T: Clone + 'static> Clone for Future<T> {
    fn clone(&self) -> Future<T> {
        match &self.repr {
            Repr::Ready(v) => Future {
                repr: Repr::Ready(v.clone()),
            },
            Repr::AfterProgress(v, e) => Future {
                repr: Repr::AfterProgress(v.clone(), *e),
            },
            Repr::Shared(s) => {
                s.clone_fn.set(Some(T::clone));
                Future::from_state(Rc::clone(s))
            }
            &Repr::Reply(cell) => match cell.arrival() {
                Some(epoch) => Future {
                    // SAFETY: this future owns the cell, which holds its `T`.
                    repr: Repr::AfterProgress(unsafe { cell.peek::<T>() }.clone(), epoch),
                },
                None => {
                    // SAFETY: this future owns the `Waiting` cell of a `T`, which keeps
                    // it: the state gets a copy of the value when it arrives.
                    let state = unsafe { cell.forward_state::<T>() };
                    state.clone_fn.set(Some(T::clone));
                    Future::from_state(state)
                }
            },
            Repr::Taken => unreachable!(),
        }
    }
}

impl<T: 'static> Drop for Future<T> {
    fn drop(&mut self) {
        match &self.repr {
            Repr::Shared(s) => s.handles.set(s.handles.get() - 1),
            // SAFETY: this future owns the cell, of its `T`, and is gone after this.
            Repr::Reply(cell) => unsafe { cell.abandon::<T>() },
            _ => {}
        }
    }
}

impl<T: 'static> std::fmt::Debug for Future<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Future")
            .field("ready", &self.ready())
            .finish()
    }
}

impl<T: 'static> Unpin for Future<T> {}

impl<T: 'static> std::future::Future for Future<T> {
    type Output = T;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.unpack();
        self.settle();
        if self.ready() {
            return Poll::Ready(self.take_value());
        }
        match &self.repr {
            Repr::Shared(s) => s.wakers.borrow_mut().push(cx.waker().clone()),
            // Ready after the executor's next progress call, which `block_on` makes.
            _ => cx.waker().wake_by_ref(),
        }
        Poll::Pending
    }
}

/// A ready future holding `value` (UPC++ `make_future`). No heap allocation.
pub fn make_future<T: 'static>(value: T) -> Future<T> {
    Future {
        repr: Repr::Ready(value),
    }
}

/// A value a `then` callback may return: either a future (flattened) or a plain value
/// (wrapped in a ready future). See the module documentation.
pub trait FutureValue: 'static {
    type Value: 'static;
    fn into_future(self) -> Future<Self::Value>;
}

impl<T: 'static> FutureValue for Future<T> {
    type Value = T;
    fn into_future(self) -> Future<T> {
        self
    }
}

/// Implements [`FutureValue`] for plain value types, so `then` callbacks can return
/// them: `upcxx::impl_future_value!(MyType, MyOtherType);`.
#[macro_export]
macro_rules! impl_future_value {
    ($($t:ty),* $(,)?) => {
        $(impl $crate::future::FutureValue for $t {
            type Value = $t;
            fn into_future(self) -> $crate::Future<$t> {
                $crate::make_future(self)
            }
        })*
    };
}

impl_future_value!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    String
);

macro_rules! generic_future_value {
    ($([$($g:ident),*] $t:ty;)*) => {
        $(impl<$($g: 'static),*> FutureValue for $t {
            type Value = $t;
            fn into_future(self) -> Future<$t> {
                make_future(self)
            }
        })*
    };
}

generic_future_value! {
    [T] Vec<T>;
    [T] Box<T>;
    [T] Option<T>;
    [T, E] Result<T, E>;
    [T] std::collections::VecDeque<T>;
    [K, V] std::collections::HashMap<K, V>;
    [K, V] std::collections::BTreeMap<K, V>;
    [T] std::collections::HashSet<T>;
    [T] std::collections::BTreeSet<T>;
    [T] std::rc::Rc<T>;
    [T] std::sync::Arc<T>;
    [A] (A,);
    [A, B] (A, B);
    [A, B, C] (A, B, C);
    [A, B, C, D] (A, B, C, D);
    [A, B, C, D, E] (A, B, C, D, E);
    [A, B, C, D, E, F] (A, B, C, D, E, F);
    [A, B, C, D, E, F, G] (A, B, C, D, E, F, G);
    [A, B, C, D, E, F, G, H] (A, B, C, D, E, F, G, H);
}

impl<T: 'static, const N: usize> FutureValue for [T; N] {
    type Value = [T; N];
    fn into_future(self) -> Future<[T; N]> {
        make_future(self)
    }
}

/// Converts a value or a future into a future (UPC++ `to_future`).
pub fn to_future<R: FutureValue>(v: R) -> Future<R::Value> {
    v.into_future()
}

/// Futures that `when_all` can join: tuples of futures, and vectors of futures.
pub trait WhenAll {
    type Output: 'static;
    fn join(self) -> Future<Self::Output>;
}

/// A future ready when all of `futures` are, with their values (UPC++ `when_all`).
/// Takes a tuple of futures (`when_all((a, b))` → `Future<(A, B)>`) or a `Vec` of
/// futures of one type (→ `Future<Vec<T>>`).
pub fn when_all<W: WhenAll>(futures: W) -> Future<W::Output> {
    futures.join()
}

impl WhenAll for () {
    type Output = ();
    fn join(self) -> Future<()> {
        make_future(())
    }
}

// A tuple is joined by nesting `then`: each step waits for one more future. When every
// future is already ready, every `then` runs at once and nothing is allocated.
macro_rules! when_all_tuple {
    ($($f:ident: $v:ident),+) => {
        impl<$($v: 'static),+> WhenAll for ($(Future<$v>,)+) {
            type Output = ($($v,)+);
            fn join(self) -> Future<($($v,)+)> {
                let ($($f,)+) = self;
                when_all_tuple!(@nest [] $($f),+)
            }
        }
    };
    (@nest [$($done:ident)*] $f:ident) => {
        $f.then(move |$f| make_future(($($done,)* $f,)))
    };
    (@nest [$($done:ident)*] $f:ident, $($rest:ident),+) => {
        $f.then(move |$f| when_all_tuple!(@nest [$($done)* $f] $($rest),+))
    };
}

when_all_tuple!(a: A);
when_all_tuple!(a: A, b: B);
when_all_tuple!(a: A, b: B, c: C);
when_all_tuple!(a: A, b: B, c: C, d: D);
when_all_tuple!(a: A, b: B, c: C, d: D, e: E);
when_all_tuple!(a: A, b: B, c: C, d: D, e: E, f: F);
when_all_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G);
when_all_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H);

impl<T: 'static> WhenAll for Vec<Future<T>> {
    type Output = Vec<T>;
    fn join(self) -> Future<Vec<T>> {
        let n = self.len();
        let slots: Rc<RefCell<Vec<Option<T>>>> =
            Rc::new(RefCell::new((0..n).map(|_| None).collect()));
        let state = State::<Vec<T>>::new(n + 1);
        for (i, f) in self.into_iter().enumerate() {
            let slots = Rc::clone(&slots);
            let state = Rc::clone(&state);
            f.on_ready(move |v| {
                slots.borrow_mut()[i] = Some(v);
                satisfy_when_all(&state, &slots);
            });
        }
        // The extra dependency kept the future from turning ready while callbacks were
        // still being registered.
        satisfy_when_all(&state, &slots);
        Future::from_state(state)
    }
}

/// Satisfies one dependency of a `when_all` over a `Vec`; the last one first moves the
/// collected values into the result.
fn satisfy_when_all<T: 'static>(state: &State<Vec<T>>, slots: &RefCell<Vec<Option<T>>>) {
    if state.deps.get() == 1 {
        let all = slots
            .borrow_mut()
            .drain(..)
            .map(|o| o.expect("every input delivered its value"))
            .collect();
        state.set_value(all);
    }
    state.satisfy(1, "when_all");
}

/// The producer side of a future, with a dependency counter (UPC++ `promise<T...>`,
/// spec §5.3). A new promise has one dependency, satisfied by `fulfill_result` (or, for
/// `Promise<()>`, by `finalize`/`fulfill_anonymous`).
pub struct Promise<T: 'static> {
    state: Rc<State<T>>,
}

impl<T: 'static> Default for Promise<T> {
    fn default() -> Promise<T> {
        Promise::new()
    }
}

impl<T: 'static> Promise<T> {
    /// A promise with a dependency count of one.
    pub fn new() -> Promise<T> {
        Promise {
            state: State::new(1),
        }
    }

    /// Adds `count` dependencies (UPC++ `require_anonymous`).
    ///
    /// # Panics
    /// If the promise is already ready.
    #[track_caller]
    pub fn require_anonymous(&self, count: usize) {
        if self.state.ready.get() {
            panic!("upcxx::Promise::require_anonymous: the promise is already ready");
        }
        self.state.deps.set(self.state.deps.get() + count);
    }

    /// Satisfies `count` dependencies (UPC++ `fulfill_anonymous`). At zero the future
    /// becomes ready and its callbacks run before this returns.
    #[track_caller]
    pub fn fulfill_anonymous(&self, count: usize) {
        gasp::atomic!(GASP_UPCXX_PROMISE_FULFILL, [gasp::Arg::Size(count)]);
        self.state.satisfy(count, "Promise::fulfill_anonymous");
    }

    /// Sets the result and satisfies one dependency (UPC++ `fulfill_result`).
    #[track_caller]
    pub fn fulfill_result(&self, value: T) {
        if self.state.ready.get() {
            panic!("upcxx::Promise::fulfill_result: the promise is already ready");
        }
        gasp::atomic!(GASP_UPCXX_PROMISE_FULFILL, [gasp::Arg::Size(1)]);
        self.state.set_value(value);
        self.state.satisfy(1, "Promise::fulfill_result");
    }

    /// Satisfies the initial dependency and returns the future (UPC++ `finalize`).
    #[track_caller]
    pub fn finalize(self) -> Future<T> {
        self.state.satisfy(1, "Promise::finalize");
        Future::from_state(Rc::clone(&self.state))
    }

    /// The future of this promise (UPC++ `get_future`).
    pub fn get_future(&self) -> Future<T> {
        Future::from_state(Rc::clone(&self.state))
    }
}

impl<T: 'static> Clone for Promise<T> {
    fn clone(&self) -> Promise<T> {
        Promise {
            state: Rc::clone(&self.state),
        }
    }
}

/// Sets the value of a one-dependency state and makes it ready.
pub(crate) fn fulfill_state<T: 'static>(state: &Rc<State<T>>, value: T, call: &str) {
    state.set_value(value);
    state.satisfy(1, call);
}
