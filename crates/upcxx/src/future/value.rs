//! Chaining: [`Future::then`], and what its callback may return: [`FutureValue`],
//! implemented for futures (flattened) and for the standard value types (wrapped in a
//! ready future), and [`to_future`]. Sits on the future handle and state (and on
//! `serialization`, for [`Trivial`]).

use std::rc::Rc;

use super::handle::{make_future, Future, Repr};
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

impl<T: 'static> FutureValue for Trivial<T> {
    type Value = Trivial<T>;
    fn into_future(self) -> Future<Trivial<T>> {
        make_future(self)
    }
}
