//! Serialization (UPC++ spec ch. 6).
//!
//! UPC++ sends values between processes as bytes: RPC arguments and results (ch. 9) and,
//! later, `as_rpc` completions (ch. 7). This module decides how a Rust value becomes
//! bytes and back.
//!
//! ```
//! use upcxx::serialization::{deserialize, make_view, serialize, View};
//!
//! let bytes = serialize(&(7u32, String::from("seven"), vec![Some(1.5f64), None]));
//! let back: (u32, String, Vec<Option<f64>>) = deserialize::<(u32, String, Vec<Option<f64>>)>(&bytes).unwrap();
//! assert_eq!(back, (7, "seven".to_string(), vec![Some(1.5), None]));
//!
//! let data = [1u64, 2, 3];
//! let bytes = serialize(&make_view(&data));
//! let view: View<'_, u64> = deserialize::<View<'_, u64>>(&bytes).unwrap();
//! assert_eq!(&*view, &data);
//! ```
//!
//! # The codec: serde + postcard
//!
//! Any type that implements serde's `Serialize` and `DeserializeOwned` is
//! *DefinitelySerializable* (§6.2): derive them (`#[derive(Serialize, Deserialize)]`,
//! serde is re-exported as [`upcxx::serialization::serde`](serde)) the way a C++ user
//! writes `serialize(Archive&)` (§6.1). The wire format is [postcard]'s: varint integers,
//! length-prefixed strings and sequences, no field names, no schema. We chose it over
//! bincode 2 because its format is small and documented (a stable 1.x specification),
//! it decodes borrowed data in place, its output is a pluggable `Flavor` (so we serialize
//! straight into the Active Message buffer, see below, and know the write position,
//! which the aligned views need), and it is actively maintained.
//!
//! # Byte-copy fast paths for plain old data
//!
//! A type that is [`bytemuck::Pod`] is *DefinitelyTriviallySerializable* (§6.2 ¶2–¶5):
//! its bytes are its value. Rust has no specialization, so the byte-copy path is chosen
//! by the type the user passes, not detected:
//!
//! * [`Trivial<T>`] wraps one Pod value (an array, a `#[repr(C)]` struct): it is sent as
//!   one `memcpy` instead of field by field. It is an ordinary serde type, so it also works
//!   inside your own structs.
//! * [`View<T>`] (§6.5) is a sequence of Pod elements: the sender copies the slice once
//!   into the message; the target gets a `View` that dereferences to `&[T]` **in the
//!   network buffer** (no copy, no allocation). The sender pads the message so that the
//!   elements start at a multiple of `align_of::<T>()` from the start of the message, and
//!   the RPC layer keeps every message 16-byte aligned in its receive buffers, so for
//!   alignments up to 16 the slice is always valid in place. For larger alignments, or a
//!   buffer that the caller of [`deserialize`] did not align, the elements are copied
//!   into an owned, aligned vector ([`View::in_place`] tells which happened). A
//!   container that is not a slice (a linked list, a map's values) is sent as the same
//!   view by [`make_view_iter`], which writes its elements one by one into the message.
//! * [`SeqView<T>`] is the §6.5 view of elements that are *not* trivially serializable
//!   (strings, structs with heap data): the sender serializes each element from any
//!   iterator (no intermediate container); the target gets an iterator that deserializes
//!   the elements one by one, on demand, from the network buffer (the spec's
//!   `deserializing_iterator`).
//! * [`StrView`] is the §6.5 view of a string's characters: the target gets a `&str`
//!   in the network buffer, checked to be UTF-8 (no copy, no allocation).
//!
//! # Lifetimes
//!
//! A received `View<'de, T>`, `SeqView<'de, T>` or `StrView<'de>` borrows the receive
//! buffer, so the RPC function's signature must accept any lifetime (`|v: View<'_,
//! u64>| ...`, or a `fn` with an elided lifetime); a function that wants a
//! `View<'static, _>` is rejected at compile time, so a view cannot outlive its buffer
//! through safe code. The buffer lives
//! until the RPC function returns or, if it returns a not-yet-ready future, until that
//! future is ready (§6.5 ¶6); within that window, raw pointers taken with
//! [`View::as_ptr`] stay valid, which is how an asynchronous operation started by the
//! RPC can keep reading the elements.
//!
//! # What is an RPC argument
//!
//! [`Serialization`] is implemented for every serde type, for [`View`], [`SeqView`]
//! and [`StrView`], and for [`ByRef`], a borrowed argument made with [`by_ref`]
//! (`by_ref(name.as_str())`, `by_ref(&values[..])`, `by_ref(&my_struct)`): it is
//! serialized straight from the borrow, as UPC++ serializes `const&` arguments, and the
//! target receives the owned value (`by_ref.rs` says why this is a wrapper rather than
//! impls for references). Its associated type [`Serialization::Deserialized`] is what the target
//! receives: the type itself for serde types, a view borrowing the receive buffer for
//! views. It is sealed: make your types serializable by implementing serde's traits.
//!
//! Serialization code must not call UPC++ communication (§6.1 ¶5): the arguments of an
//! RPC are serialized directly into the network layer's send buffer, where no other
//! communication may start.

//! # Layout
//!
//! `codec.rs` (errors, writer, reader, the [`Serialization`] trait) is the leaf;
//! [`Trivial`] (`trivial.rs`), [`View`] (`view.rs`), [`SeqView`] (`seq_view.rs`),
//! [`StrView`] (`str_view.rs`) and [`ByRef`] (`by_ref.rs`) each sit on it. This file
//! holds the free functions. The module imports nothing else from the crate.

mod by_ref;
mod codec;
#[cfg(test)]
mod fuzz;
mod seq_view;
mod str_view;
mod trivial;
mod view;

pub use serde;

pub use by_ref::{by_ref, Borrowed, ByRef};
pub(crate) use codec::{copy, sealed};
pub use codec::{Error, Reader, Rerun, Serialization, Writer};
pub use seq_view::{make_seq_view, Elements, SeqView};
pub use str_view::{make_str_view, StrView};
pub use trivial::Trivial;
pub use view::{make_view, make_view_iter, View, ViewIter};

/// Serializes `value` into a new vector, with the same encoding RPC uses.
pub fn serialize<T: Serialization + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    try_serialize_into(value, &mut out)
        .unwrap_or_else(|e| panic!("upcxx::serialization::serialize: {e}"));
    out
}

/// Serializes `value` into `out` (cleared first), reusing its allocation.
pub fn try_serialize_into<T: Serialization + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    out.clear();
    let mut w = Writer::new(&mut [], Some(out));
    value.encode(&mut w)
}

/// Deserializes a `T` from `bytes` produced by [`serialize`]. Views borrow `bytes`; a
/// [`View`] is in place only if `bytes` starts at a 16-byte-aligned address (otherwise
/// its elements are copied, see [`View::in_place`]).
///
/// A `&DistObject<T>` or `&Team` decodes only as an RPC argument: asking for one here
/// fails the build.
pub fn deserialize<'de, T: Serialization + ?Sized>(
    bytes: &'de [u8],
) -> Result<T::Deserialized<'de>, Error> {
    const {
        assert!(
            !T::BY_ID,
            "upcxx::serialization::deserialize: a &DistObject or &Team argument is \
             this process's object only while an RPC runs; deserialize its id instead"
        )
    };
    T::decode(&mut Reader::new(bytes))
}
