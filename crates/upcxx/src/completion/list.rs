//! Type-level lists of futures, and the return type of §7.2.2: what `|` appends and
//! what a call turns the list into. A leaf of `completion`.

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
    /// The futures of this list followed by those of `L`.
    type Output;
    /// Puts the futures of `list` after this list's, so that the futures stay in the
    /// order in which `|` was applied (§7.2 ¶5).
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
    /// What the call returns (the spec's `RType`, §7.2.2): `()` if no future-based
    /// completion was requested, the future if one was, a tuple of the futures in `|`
    /// order if several were.
    type Return;
    /// Turns the list into [`FutureList::Return`].
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

/// The list of the one future `future`.
#[inline]
pub(super) fn one<F>(future: F) -> Cons<F, Nil> {
    Cons {
        head: future,
        tail: Nil,
    }
}
