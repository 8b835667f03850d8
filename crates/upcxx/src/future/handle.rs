//! The consumer side: [`Future<T>`] (UPC++ `future<T...>`), its representations
//! (inline, after-progress, shared state, reply cell), waiting and `then`.
//!
//! Sits on the promise state (`state.rs`), reply cells (`cell.rs`) and the per-thread
//! state (epoch, deferred notifications, the restricted-context check), and on
//! `progress` for waiting: the futures ↔ progress knot described in `future.rs`.

use std::rc::Rc;
use std::task::{Context, Poll};

use super::cell::{fits as fits_cell, ReplyCell};
use super::state::State;
use crate::progress;
use crate::thread;

pub(super) enum Repr<T> {
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
    pub(super) repr: Repr<T>,
}

impl<T: 'static> Future<T> {
    pub(crate) fn from_state(state: Rc<State<T>>) -> Future<T> {
        state.handles.set(state.handles.get() + 1);
        Future {
            repr: Repr::Shared(state),
        }
    }

    /// A future that never becomes ready (UPC++ `future()`, §5.8.1 ¶4: the default
    /// constructor). Not `Default`, so that a defaulted field does not become a future
    /// that waiting on hangs; needs no runtime.
    pub fn never() -> Future<T> {
        Future::from_state(State::new(1))
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
    pub(super) fn unpack(&mut self) {
        if let Repr::Reply(cell) = self.repr {
            self.repr = match cell.arrival() {
                // SAFETY: this future owns the cell, which holds its `T`.
                Some(epoch) => Repr::AfterProgress(unsafe { cell.take::<T>() }, epoch),
                None => {
                    // SAFETY: this future owns the cell of its `T`, and no value has
                    // arrived (`arrival` is `None`), so the cell is `Waiting`.
                    let state = unsafe { cell.forward_state::<T>() };
                    // SAFETY: this future owns the cell of its `T`, and gives it up
                    // here: `self.repr` stops referring to it just below. The value,
                    // when it arrives, goes to `state` and frees the cell.
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
    pub(super) fn settle(&mut self) {
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

    /// The value of a reply-cell future whose value arrived, taken out of the cell
    /// (which is freed) without the readiness checks of [`Future::take_value`]: a
    /// `when_all` over cells takes thousands at once.
    ///
    /// # Safety
    /// The future must hold a reply cell, whose value arrived.
    pub(super) unsafe fn take_arrived_cell(self) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        match this.repr {
            // SAFETY: this future owns the cell, whose value arrived (caller); the future
            // is forgotten, so nothing refers to the cell afterwards.
            Repr::Reply(cell) => unsafe { cell.take::<T>() },
            _ => unreachable!("a cell future holds a cell"),
        }
    }

    pub(super) fn take_value(&mut self) -> T {
        match std::mem::replace(&mut self.repr, Repr::Taken) {
            Repr::Ready(v) | Repr::AfterProgress(v, _) => v,
            Repr::Shared(s) => {
                s.handles.set(s.handles.get() - 1);
                s.take_for_consumer()
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
        if crate::reported::enabled() && !self.ready() {
            return self.wait_reported();
        }
        self.wait_unreported()
    }

    /// The reported instance of [`Future::wait_slow`], on a future not ready (see
    /// [the reported instance](gasp::instrument#the-reported-instance-of-an-operation)): the wait's GASP event around the wait.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn wait_reported(self) -> T {
        let span = gasp::span_if!(true, GASP_UPCXX_FUTURE_WAIT);
        let v = self.wait_unreported();
        gasp::end!(span);
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
