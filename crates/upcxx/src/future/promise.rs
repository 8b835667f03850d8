//! The producer side of a future: [`Promise`] (UPC++ `promise<T...>`, §5.3). Sits on
//! the future handle and its state.

use std::rc::Rc;

use super::handle::Future;
use super::state::State;
use crate::thread::Dependencies;

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

    /// A promise with a dependency count of `count` (UPC++ `promise(dependency_count)`,
    /// §5.8.2 ¶4): ready once `count` dependencies are satisfied.
    ///
    /// # Panics
    /// If `count` is 0 (the spec's precondition: at least 1).
    #[track_caller]
    pub fn with_dependencies(count: usize) -> Promise<T> {
        if count == 0 {
            panic!("upcxx::Promise::with_dependencies: the dependency count must be at least 1");
        }
        Promise {
            state: State::new(count),
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
        gasp::atomic!(GASP_UPCXX_PROMISE_FULFILL, count);
        self.state.satisfy(count, "Promise::fulfill_anonymous");
    }

    /// Sets the result and satisfies one dependency (UPC++ `fulfill_result`).
    #[track_caller]
    pub fn fulfill_result(&self, value: T) {
        if self.state.ready.get() {
            panic!("upcxx::Promise::fulfill_result: the promise is already ready");
        }
        gasp::atomic!(GASP_UPCXX_PROMISE_FULFILL, 1);
        self.state.set_value(value);
        self.state.satisfy(1, "Promise::fulfill_result");
    }

    /// Satisfies the initial dependency and returns the future (UPC++ `finalize`).
    #[track_caller]
    pub fn finalize(self) -> Future<T> {
        self.state.satisfy(1, "Promise::finalize");
        Future::from_state(Rc::clone(&self.state))
    }

    /// The future of this promise (UPC++ `get_future`). Every call gives another future
    /// of the same state. For a promise of no value (`()`) each gets the value; a value
    /// of another type is copied for several readers only once one of the futures was
    /// made by [`Future::clone`] (which knows how to copy it): clone a future rather
    /// than calling `get_future` again for a second reader.
    pub fn get_future(&self) -> Future<T> {
        Future::from_state(Rc::clone(&self.state))
    }

    /// Whether the promise's future is ready (what `get_future().ready()` says, without
    /// making a future).
    #[inline]
    pub(crate) fn is_ready(&self) -> bool {
        self.state.ready.get()
    }

    /// This promise's dependency counter, for a notification that only satisfies
    /// dependencies (`thread::defer_satisfy`).
    pub(crate) fn into_dependencies(self) -> Rc<dyn Dependencies> {
        self.state
    }
}

impl<T: 'static> Dependencies for State<T> {
    fn satisfy_anonymous(&self, count: usize) {
        gasp::atomic!(GASP_UPCXX_PROMISE_FULFILL, count);
        self.satisfy(count, "Promise::fulfill_anonymous");
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
