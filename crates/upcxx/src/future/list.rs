//! Type-level lists, and what a list turns into: `()` for none, the element for one, a
//! tuple for several. Completions list the futures a call returns (§7.2.2: what `|`
//! appends and what the call turns the list into); `when_all` lists the element types
//! of the futures it joins (§5.8.1 ¶53: their concatenation). A leaf of `future`.

/// The empty list.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nil;

/// A list: `head` then `tail`.
#[derive(Debug)]
pub struct Cons<H, T> {
    head: H,
    tail: T,
}

/// Appends list `L` to this list (`|` joins the futures of two completion objects,
/// `when_all` the elements of two futures).
pub trait Append<L> {
    /// The futures of this list followed by those of `L`.
    type Output;
    /// Puts the elements of `list` after this list's, so that futures stay in the order
    /// in which `|` was applied (§7.2 ¶5) and joined elements in argument order.
    fn append(self, list: L) -> Self::Output;
}

impl<H, T> Cons<H, T> {
    /// The list of `head` followed by `tail`.
    #[inline]
    pub fn new(head: H, tail: T) -> Cons<H, T> {
        Cons { head, tail }
    }
}

impl<H> Cons<H, Nil> {
    /// The list of the one element `head`.
    #[inline]
    pub fn one(head: H) -> Cons<H, Nil> {
        Cons { head, tail: Nil }
    }
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

/// A list and what it turns into: `()` for none, the element for one, a tuple for
/// several (up to 12). For a list of futures, what a call returns (§7.2.2).
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
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K);
future_list!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L);
