//! The shared state of a non-ready future and its promise: the value, the dependency
//! counter (§5.3), and the callbacks and wakers to run when it turns ready. A leaf of
//! `future`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

pub(super) type Callback<T> = Box<dyn FnOnce(T)>;
/// Copies a value for one more consumer.
type CloneFn<T> = fn(&T) -> T;

/// The shared state of a non-ready future and its promise.
pub(crate) struct State<T> {
    pub(super) value: RefCell<Option<T>>,
    pub(super) ready: Cell<bool>,
    /// Promise dependency counter (UPC++ §5.3): ready when it reaches zero.
    pub(super) deps: Cell<usize>,
    pub(super) callbacks: RefCell<Vec<Callback<T>>>,
    pub(super) wakers: RefCell<Vec<Waker>>,
    /// Live `Future` handles onto this state.
    pub(super) handles: Cell<usize>,
    /// Callbacks that `make_ready` took and has not run yet: consumers of the value as
    /// much as the handles are (an earlier callback may consume a handle).
    unrun: Cell<usize>,
    /// Set by `Future::clone` (where `T: Clone` is known) so that several consumers can
    /// each get a value.
    pub(super) clone_fn: Cell<Option<CloneFn<T>>>,
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
            unrun: Cell::new(0),
            clone_fn: Cell::new(None),
        })
    }

    pub(super) fn set_value(&self, v: T) {
        let mut slot = self.value.borrow_mut();
        if slot.is_some() {
            drop(slot);
            panic!("upcxx::Promise::fulfill_result: the result was already fulfilled");
        }
        *slot = Some(v);
    }

    /// Takes the value for one consumer (a handle that gave itself up, or a callback):
    /// a copy while others still need it, live handles or callbacks not run yet.
    pub(super) fn take_for_consumer(&self) -> T {
        let others_remain = self.handles.get() > 0 || self.unrun.get() > 0;
        // `()` is made anew for each consumer: a promise of no value (operation
        // completion) serves any number of futures and callbacks, as in C++ (§5.8.2 ¶20).
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<()>() {
            return unit_value::<T>().expect("T is ()");
        }
        if others_remain {
            let clone = self.clone_fn.get().unwrap_or_else(|| {
                panic!(
                    "upcxx: a future's value is needed by several consumers (the futures \
                     of one promise, or a callback and a wait) but none of them was made by \
                     Future::clone, which alone can copy it: clone a future (for a Clone \
                     type) rather than calling Promise::get_future again, or take the \
                     value once"
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
        self.unrun.set(callbacks.len());
        // A callback that panics (the program may catch it) keeps none of the others
        // from running, nor the wakers from waking: each runs, and the first panic
        // continues once all did.
        let mut panicked = None;
        for cb in callbacks {
            self.unrun.set(self.unrun.get() - 1);
            let value = self.take_for_consumer();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(value)));
            if let Err(panic) = ran {
                panicked.get_or_insert(panic);
            }
        }
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
    }

    pub(super) fn on_ready(&self, cb: Callback<T>) {
        self.callbacks.borrow_mut().push(cb);
    }

    /// A copy of `v` for one more consumer (`Future::clone` set the copy function).
    pub(super) fn copy_value(&self, v: &T) -> T {
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
