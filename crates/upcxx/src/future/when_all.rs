//! Joining futures: [`when_all`] (UPC++ `when_all`, §5.8.1 ¶53) over tuples and vectors of
//! futures. Sits on the future handle (`then`) and its state.

use std::cell::RefCell;
use std::rc::Rc;

use super::handle::{make_future, Future};
use super::state::State;

/// Futures that `when_all` can join: tuples of futures, and vectors of futures.
pub trait WhenAll {
    /// The value of the joined future: the values of the futures joined, in order
    /// (§5.8.1 ¶53: the concatenated results of the arguments).
    type Output: 'static;
    /// A future ready when all of these futures are, with their values; a trivially
    /// ready one if there are none (§5.8.1 ¶53).
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
