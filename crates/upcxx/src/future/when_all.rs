//! Joining futures: [`when_all`] (UPC++ `when_all`, §5.8.1 ¶53) over tuples and vectors of
//! futures. Sits on the future handle (`then`), its state, the type-level lists and
//! [`FutureElements`].
//!
//! The value of `when_all` over a tuple is the concatenation of the futures' type
//! parameters, as the spec says: each future's value is read as its elements
//! ([`FutureElements`]: none for `()`, a tuple's elements, any other value itself), the
//! lists are appended at the type level, and the result is `()`, the one element, or
//! the tuple of them. So a `Future<()>` contributes no value:
//!
//! ```
//! use upcxx::{make_future, when_all, Future};
//! let done: Future<()> = make_future(());
//! let n: Future<u64> = when_all((done, make_future(7u64)));
//! let pair: Future<(u64, char)> = when_all((make_future(7u64), make_future(()), make_future('x')));
//! let flat: Future<(u64, char, bool)> = when_all((make_future((7u64, 'x')), make_future(true)));
//! let nothing: Future<()> = when_all((make_future(()), make_future(())));
//! # assert_eq!((n.wait(), pair.wait(), flat.wait()), (7, (7, 'x'), (7, 'x', true)));
//! # nothing.wait();
//! ```
//!
//! A `Vec` of futures of one type is an extension of ours: its value is the `Vec` of
//! their values, `()` included.

use std::cell::RefCell;
use std::rc::Rc;

use super::cell::CellJoin;
use super::handle::{make_future, Future, Repr};
use super::list::{Append, FutureList};
use super::state::State;
use super::value::FutureElements;

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
/// Takes a tuple of futures, whose values are concatenated (`when_all((a, b))` →
/// `Future<(A, B)>`; a `Future<()>` contributes nothing, a `Future` of a tuple its
/// elements), or a `Vec` of futures of one type
/// (→ `Future<Vec<T>>`).
pub fn when_all<W: WhenAll>(futures: W) -> Future<W::Output> {
    futures.join()
}

impl WhenAll for () {
    type Output = ();
    fn join(self) -> Future<()> {
        make_future(())
    }
}

/// A tuple of values whose elements `when_all` concatenates: the list of the first
/// value's [`FutureElements`] followed by those of the others. Implemented for tuples
/// of up to 8 values; you never implement it.
pub trait ConcatElements {
    /// The concatenated elements.
    type List: FutureList;
    /// The values' elements, concatenated in order.
    fn concat(self) -> Self::List;
}

macro_rules! concat_elements {
    ($h:ident: $hv:ident) => {
        impl<$h: FutureElements> ConcatElements for ($h,)
        where
            $h::List: FutureList,
        {
            type List = $h::List;
            #[inline]
            fn concat(self) -> Self::List {
                self.0.into_elements()
            }
        }
    };
    ($h:ident: $hv:ident, $($t:ident: $tv:ident),+) => {
        impl<$h: FutureElements, $($t),+> ConcatElements for ($h, $($t,)+)
        where
            ($($t,)+): ConcatElements,
            $h::List: Append<<($($t,)+) as ConcatElements>::List>,
            <$h::List as Append<<($($t,)+) as ConcatElements>::List>>::Output: FutureList,
        {
            type List = <$h::List as Append<<($($t,)+) as ConcatElements>::List>>::Output;
            #[inline]
            fn concat(self) -> Self::List {
                let ($hv, $($tv,)+) = self;
                $hv.into_elements().append(($($tv,)+).concat())
            }
        }
    };
}

concat_elements!(A: a);
concat_elements!(A: a, B: b);
concat_elements!(A: a, B: b, C: c);
concat_elements!(A: a, B: b, C: c, D: d);
concat_elements!(A: a, B: b, C: c, D: d, E: e);
concat_elements!(A: a, B: b, C: c, D: d, E: e, F: f);
concat_elements!(A: a, B: b, C: c, D: d, E: e, F: f, G: g);
concat_elements!(A: a, B: b, C: c, D: d, E: e, F: f, G: g, H: h);

// A tuple is joined by nesting `then`: each step waits for one more future. When every
// future is already ready, every `then` runs at once and nothing is allocated.
macro_rules! when_all_tuple {
    ($($f:ident: $v:ident),+) => {
        impl<$($v: 'static),+> WhenAll for ($(Future<$v>,)+)
        where
            ($($v,)+): ConcatElements,
            <($($v,)+) as ConcatElements>::List: FutureList<Return: 'static>,
        {
            type Output = <<($($v,)+) as ConcatElements>::List as FutureList>::Return;
            fn join(self) -> Future<Self::Output> {
                let ($($f,)+) = self;
                when_all_tuple!(@nest [] $($f),+)
            }
        }
    };
    (@nest [$($done:ident)*] $f:ident) => {
        $f.then(move |$f| make_future(($($done,)* $f,).concat().into_return()))
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
        if self.iter().all(|f| match f.repr {
            Repr::Ready(_) | Repr::AfterProgress(..) => true,
            Repr::Reply(cell) => cell.arrival().is_some(),
            _ => false,
        }) {
            return join_complete(self);
        }
        if self.iter().all(|f| matches!(f.repr, Repr::Reply(_))) {
            return join_cells(self);
        }
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

/// `when_all` over futures whose values are here already (operations complete at
/// initiation, such as RMA on shared memory, and replies that arrived, ready now or at
/// the next user-level progress): their values in order, ready when the last of them
/// is, with no callback, state or allocation but the vector's. Also the empty vector's:
/// ready at once.
fn join_complete<T: 'static>(futures: Vec<Future<T>>) -> Future<Vec<T>> {
    let mut after: Option<u64> = None;
    let values = futures
        .into_iter()
        .map(|mut f| match std::mem::replace(&mut f.repr, Repr::Taken) {
            Repr::Ready(v) => v,
            Repr::AfterProgress(v, epoch) => {
                after = Some(after.map_or(epoch, |a| a.max(epoch)));
                v
            }
            Repr::Reply(cell) => {
                let epoch = cell
                    .arrival()
                    .expect("only arrived replies are joined here");
                after = Some(after.map_or(epoch, |a| a.max(epoch)));
                // SAFETY: the future owned the cell (it refers to it no more: its
                // representation is `Taken`), and the cell's value arrived.
                unsafe { cell.take::<T>() }
            }
            _ => unreachable!("only complete futures are joined here"),
        })
        .collect();
    Future {
        repr: match after {
            Some(epoch) => Repr::AfterProgress(values, epoch),
            None => Repr::Ready(values),
        },
    }
}

/// `when_all` over futures whose values all come in reply cells (the round-trip RPCs a
/// program starts in bulk): one [`CellJoin`] counts the values still to come, instead
/// of a callback and a forward state per future (see `cell.rs`), and once they all
/// arrived, the next user-level progress moves them out of their cells into the result.
fn join_cells<T: 'static>(futures: Vec<Future<T>>) -> Future<Vec<T>> {
    let join = CellJoin::new();
    let mut left = 0;
    for f in &futures {
        let Repr::Reply(cell) = f.repr else {
            unreachable!("only cell futures are joined here")
        };
        if !cell.arrived() {
            // SAFETY: the cell's future owns it, it has no value yet (no progress runs
            // here), the future moves into the join's completion below, and the join
            // counts this value there.
            unsafe { cell.join(&join) };
            left += 1;
        }
    }
    let state = State::<Vec<T>>::new(1);
    let out = Rc::clone(&state);
    let finish = move || {
        // SAFETY: every value arrived (the join finishes once the last did), each
        // into its future's cell.
        let values = futures
            .into_iter()
            .map(|f| unsafe { f.take_arrived_cell() })
            .collect();
        out.set_value(values);
        out.satisfy(1, "when_all");
    };
    join.finish_with(left, Box::new(finish));
    Future::from_state(state)
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
