//! Chaining: [`Future::then`], and what its callback may return: [`FutureValue`],
//! implemented for futures (flattened) and for the standard value types (wrapped in a
//! ready future), and [`to_future`]. Also [`FutureElements`], how a value type reads as
//! the type parameters of a UPC++ `future<T...>`, implemented alongside. Sits on the
//! future handle and state, the type-level lists (and on `serialization`, for
//! [`Trivial`]).

use std::rc::Rc;

use super::handle::{make_future, Future, Repr};
use super::list::{Cons, Nil};
use super::state::State;
use crate::serialization::Trivial;
use crate::thread;

impl<T: 'static> Future<T> {
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
}

/// A value a `then` callback may return: either a future (flattened) or a plain value
/// (wrapped in a ready future). See the module documentation.
pub trait FutureValue: 'static {
    /// The value of the future that `then` returns: `T` for a `Future<T>`, the type
    /// itself for a plain value (§5.8.1 ¶36).
    type Value: 'static;
    /// The future itself, or a ready future holding the value (§5.8.1 ¶55, `to_future`).
    fn into_future(self) -> Future<Self::Value>;

    /// The value, if this is a plain value or a ready future; the future otherwise
    /// (what `into_future` then `into_ready` give, without a future made for a plain
    /// value: the result of an RPC's function, on its way to the reply).
    #[doc(hidden)]
    #[inline]
    fn into_value(self) -> Result<Self::Value, Future<Self::Value>>
    where
        Self: Sized,
    {
        self.into_future().into_ready()
    }

    /// [`into_value`](Self::into_value) by reference: `reply` runs on the value if it
    /// is available now, and the future is returned otherwise. An RPC's reply
    /// serializes what its function returned this way, so a result that can lend its
    /// value (a distributed object's member, for `fetch`) is neither moved nor copied.
    #[doc(hidden)]
    #[inline]
    fn lend_value<R>(self, reply: impl FnOnce(&Self::Value) -> R) -> Result<R, Future<Self::Value>>
    where
        Self: Sized,
    {
        self.into_value().map(|v| reply(&v))
    }
}

impl<T: 'static> FutureValue for Future<T> {
    type Value = T;
    fn into_future(self) -> Future<T> {
        self
    }
}

/// The type parameters `T...` of the UPC++ `future<T...>` that a `Future<Self>` stands
/// for (see the [module documentation](crate::future)), as a type-level list: none for
/// `()` (`future<>`), the elements of a tuple (`Future<(A, B)>` is `future<A, B>`), and
/// the type itself for any other type (`future<T>`). [`when_all`](crate::when_all)
/// concatenates them (§5.8.1 ¶53), so a `Future<()>` contributes no value to its result.
///
/// Implemented for the types that implement [`FutureValue`], by the same macro
/// ([`impl_future_value!`](crate::impl_future_value)) for your own.
pub trait FutureElements: 'static {
    /// The element types: [`Nil`](crate::future::Nil), or a
    /// [`Cons`](crate::future::Cons) list of them.
    type List: 'static;
    /// The value as its list of elements.
    fn into_elements(self) -> Self::List;
}

impl FutureValue for () {
    type Value = ();
    #[inline]
    fn into_future(self) -> Future<()> {
        make_future(())
    }
    #[inline]
    fn into_value(self) -> Result<(), Future<()>> {
        Ok(())
    }
}

impl FutureElements for () {
    type List = Nil;
    #[inline]
    fn into_elements(self) -> Nil {
        Nil
    }
}

/// Implements [`FutureValue`] and [`FutureElements`] for plain value types, so `then`
/// callbacks can return them and `when_all` join their futures:
/// `upcxx::impl_future_value!(MyType, MyOtherType);`.
#[macro_export]
macro_rules! impl_future_value {
    ($($t:ty),* $(,)?) => {
        $(impl $crate::future::FutureValue for $t {
            type Value = $t;
            #[inline]
            fn into_future(self) -> $crate::Future<$t> {
                $crate::make_future(self)
            }
            #[inline]
            fn into_value(self) -> ::std::result::Result<$t, $crate::Future<$t>> {
                ::std::result::Result::Ok(self)
            }
        }
        impl $crate::future::FutureElements for $t {
            type List = $crate::future::Cons<$t, $crate::future::Nil>;
            #[inline]
            fn into_elements(self) -> Self::List {
                $crate::future::Cons::one(self)
            }
        })*
    };
}

impl_future_value!(
    bool, char, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, String
);

// The standard library's plain value types that programs pass around: a program cannot
// implement the trait for them itself (Rust's orphan rule), so they are here.
impl_future_value!(
    &'static str,
    Box<str>,
    std::path::PathBuf,
    std::ffi::CString,
    std::ffi::OsString,
    std::time::Duration,
    std::time::Instant,
    std::time::SystemTime,
    std::cmp::Ordering,
    std::net::IpAddr,
    std::net::Ipv4Addr,
    std::net::Ipv6Addr,
    std::net::SocketAddr,
    std::num::NonZeroU8,
    std::num::NonZeroU16,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroU128,
    std::num::NonZeroUsize,
    std::num::NonZeroI8,
    std::num::NonZeroI16,
    std::num::NonZeroI32,
    std::num::NonZeroI64,
    std::num::NonZeroI128,
    std::num::NonZeroIsize,
    // This crate's names of distributed things, plain values as the spec's are.
    crate::TeamId,
    crate::Team,
);

macro_rules! generic_future_value {
    ($([$($g:ident),*] $t:ty;)*) => {
        $(impl<$($g: 'static),*> FutureValue for $t {
            type Value = $t;
            #[inline]
            fn into_future(self) -> Future<$t> {
                make_future(self)
            }
            #[inline]
            fn into_value(self) -> Result<$t, Future<$t>> {
                Ok(self)
            }
        }
        impl<$($g: 'static),*> FutureElements for $t {
            type List = Cons<$t, Nil>;
            #[inline]
            fn into_elements(self) -> Self::List {
                Cons::one(self)
            }
        })*
    };
}

/// A tuple is a value like any other for `then`; its elements are the future's.
macro_rules! tuple_future_value {
    ($($v:ident: $t:ident),+) => {
        impl<$($t: 'static),+> FutureValue for ($($t,)+) {
            type Value = ($($t,)+);
            #[inline]
            fn into_future(self) -> Future<($($t,)+)> {
                make_future(self)
            }
            #[inline]
            fn into_value(self) -> Result<($($t,)+), Future<($($t,)+)>> {
                Ok(self)
            }
        }
        impl<$($t: 'static),+> FutureElements for ($($t,)+) {
            type List = tuple_future_value!(@ty $($t),+);
            #[inline]
            fn into_elements(self) -> Self::List {
                let ($($v,)+) = self;
                tuple_future_value!(@list $($v),+)
            }
        }
    };
    (@ty) => { Nil };
    (@ty $h:ident $(, $t:ident)*) => { Cons<$h, tuple_future_value!(@ty $($t),*)> };
    (@list) => { Nil };
    (@list $h:ident $(, $t:ident)*) => { Cons::new($h, tuple_future_value!(@list $($t),*)) };
}

tuple_future_value!(a: A);
tuple_future_value!(a: A, b: B);
tuple_future_value!(a: A, b: B, c: C);
tuple_future_value!(a: A, b: B, c: C, d: D);
tuple_future_value!(a: A, b: B, c: C, d: D, e: E);
tuple_future_value!(a: A, b: B, c: C, d: D, e: E, f: F);
tuple_future_value!(a: A, b: B, c: C, d: D, e: E, f: F, g: G);
tuple_future_value!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H);

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
    [T] std::collections::LinkedList<T>;
    [T] std::collections::BinaryHeap<T>;
    [T] std::cell::Cell<T>;
    [T] std::cell::RefCell<T>;
    [T] std::ops::Range<T>;
    [T] std::ops::RangeInclusive<T>;
    [T] std::marker::PhantomData<T>;
    [T] std::num::Wrapping<T>;
    [T] std::cmp::Reverse<T>;
    [T] crate::DistId<T>;
}

/// A global pointer is a plain value, as the spec's `global_ptr` is (an RPC that returns
/// one, `make_future(gp)`).
impl<T: 'static, K: crate::global_ptr::MemoryKind> FutureValue for crate::GlobalPtr<T, K> {
    type Value = Self;
    #[inline]
    fn into_future(self) -> Future<Self> {
        make_future(self)
    }
    #[inline]
    fn into_value(self) -> Result<Self, Future<Self>> {
        Ok(self)
    }
}

impl<T: 'static, K: crate::global_ptr::MemoryKind> FutureElements for crate::GlobalPtr<T, K> {
    type List = Cons<Self, Nil>;
    #[inline]
    fn into_elements(self) -> Self::List {
        Cons::one(self)
    }
}

impl<T: 'static, const N: usize> FutureValue for [T; N] {
    type Value = [T; N];
    #[inline]
    fn into_future(self) -> Future<[T; N]> {
        make_future(self)
    }
    #[inline]
    fn into_value(self) -> Result<[T; N], Future<[T; N]>> {
        Ok(self)
    }
}

impl<T: 'static, const N: usize> FutureElements for [T; N] {
    type List = Cons<[T; N], Nil>;
    #[inline]
    fn into_elements(self) -> Self::List {
        Cons::one(self)
    }
}

/// Converts a value or a future into a future (UPC++ `to_future`).
pub fn to_future<R: FutureValue>(v: R) -> Future<R::Value> {
    v.into_future()
}

impl<T: 'static> FutureValue for Trivial<T> {
    type Value = Trivial<T>;
    #[inline]
    fn into_future(self) -> Future<Trivial<T>> {
        make_future(self)
    }
    #[inline]
    fn into_value(self) -> Result<Trivial<T>, Future<Trivial<T>>> {
        Ok(self)
    }
}

impl<T: 'static> FutureElements for Trivial<T> {
    type List = Cons<Trivial<T>, Nil>;
    #[inline]
    fn into_elements(self) -> Self::List {
        Cons::one(self)
    }
}
