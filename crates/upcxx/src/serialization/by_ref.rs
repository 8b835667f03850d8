//! [`ByRef`]: an RPC argument serialized straight from a borrow, as UPC++ serializes
//! the arguments it takes by `const&` (§9.3 ¶3), so that a program sends what it keeps
//! without cloning it. The target receives the owned value. Sits on the codec.
//!
//! # Why a wrapper and not `impl Serialization for &T`
//!
//! Every serde type is [`Serialization`] through one blanket impl (`codec.rs`). An impl
//! for `&str`, `&[T]`, `&String` or a generic `&T` beside it is rejected by coherence:
//! serde may one day implement `DeserializeOwned` for `&str` (it already implements
//! `Deserialize<'a>` for it) and the two impls would then overlap. Only references to
//! this crate's own types are free of that (`&DistObject<T>` and `&Team`, which travel
//! by id, see `dist_object/by_id.rs`). A local wrapper is the one design that covers
//! every borrowed type and leaves those two alone: `by_ref(&x)` names the borrow, and
//! [`Borrowed`] maps the borrowed type to what the target receives.
//!
//! The bytes are those of the owned type (postcard writes a `str` as a `String`, a
//! slice as a `Vec`, a `&T` as the `T`), so a `ByRef<str>` decodes as a `String` and a
//! message means the same whichever way its sender held the value.
//!
//! A string, the most common borrowed argument (a key, a name), goes through the
//! codec's own string path (`Writer::str`, `Reader::str`) rather than through
//! postcard's serializer: the same bytes, without a serializer on either side, and
//! with an ASCII fast path for the UTF-8 check (`codec::utf8`).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{sealed, Error, Reader, Serialization, Writer};

/// A borrowed RPC argument: serialized from `&T` when the RPC starts, received by the
/// target as the owned [`Borrowed::Owned`] (`String` for `str`, `Vec<T>` for `[T]`, `T`
/// for a serde type). Make one with [`by_ref`].
///
/// ```
/// use upcxx::by_ref;
/// upcxx::init();
/// let key = String::from("alpha");
/// let weights = vec![0.5f64, 1.5];
/// let f = upcxx::rpc(
///     0,
///     |k: String, w: Vec<f64>| format!("{k}: {}", w.iter().sum::<f64>()),
///     (by_ref(key.as_str()), by_ref(&weights[..])),
/// );
/// assert_eq!(f.wait(), "alpha: 2");
/// assert_eq!(key, "alpha"); // still ours: nothing was moved or cloned
/// upcxx::finalize();
/// ```
///
/// The target must be able to rebuild the value: a type that is only `Serialize` is
/// refused at compile time.
///
/// ```compile_fail,E0277
/// #[derive(serde::Serialize)]
/// struct SendOnly(u64);
/// upcxx::init();
/// let x = SendOnly(1);
/// upcxx::rpc_ff(0, |_x: SendOnly| {}, (upcxx::by_ref(&x),));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ByRef<'a, T: ?Sized>(&'a T);

/// Passes `value` to an RPC by reference (UPC++ passes `const&` arguments this way):
/// it is serialized from the borrow, not cloned; the target gets the owned value.
pub fn by_ref<T: ?Sized + Borrowed>(value: &T) -> ByRef<'_, T> {
    ByRef(value)
}

/// A type that an RPC argument can borrow ([`by_ref`]): `str`, `[T]` and every serde
/// type. Implemented for you; you never implement it.
pub trait Borrowed: Serialize + sealed::Sealed {
    /// What the target receives.
    type Owned: Serialize + DeserializeOwned;

    /// Writes the borrowed value as postcard writes it.
    #[doc(hidden)]
    #[inline]
    fn encode_borrowed(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.serde(self)
    }

    /// Reads what [`encode_borrowed`](Borrowed::encode_borrowed) wrote, as the owned type.
    #[doc(hidden)]
    #[inline]
    fn decode_owned(r: &mut Reader<'_>) -> Result<Self::Owned, Error> {
        r.serde()
    }
}

impl sealed::Sealed for str {}

impl Borrowed for str {
    type Owned = String;

    #[inline]
    fn encode_borrowed(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.str(self)
    }

    #[inline]
    fn decode_owned(r: &mut Reader<'_>) -> Result<String, Error> {
        r.str().map(String::from)
    }
}

impl<T: Serialize + DeserializeOwned> sealed::Sealed for [T] {}

impl<T: Serialize + DeserializeOwned> Borrowed for [T] {
    type Owned = Vec<T>;
}

impl<T: Serialize + DeserializeOwned> Borrowed for T {
    type Owned = T;
}

impl<T: ?Sized + Borrowed> sealed::Sealed for ByRef<'_, T> {}

impl<T: ?Sized + Borrowed> Serialization for ByRef<'_, T> {
    type Deserialized<'de> = T::Owned;

    #[inline]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        self.0.encode_borrowed(w)
    }

    #[inline]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<T::Owned, Error> {
        T::decode_owned(r)
    }
}
