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
//!   into an owned, aligned vector ([`View::in_place`] tells which happened).
//! * [`SeqView<T>`] is the §6.5 view of elements that are *not* trivially serializable
//!   (strings, structs with heap data): the sender serializes each element from any
//!   iterator (no intermediate container); the target gets an iterator that deserializes
//!   the elements one by one, on demand, from the network buffer (the spec's
//!   `deserializing_iterator`).
//!
//! # Lifetimes
//!
//! A received `View<'de, T>`/`SeqView<'de, T>` borrows the receive buffer, so the RPC
//! function's signature must accept any lifetime (`|v: View<'_, u64>| ...`, or a `fn`
//! with an elided lifetime); a function that wants a `View<'static, _>` is rejected at
//! compile time, so a view cannot outlive its buffer through safe code. The buffer lives
//! until the RPC function returns or, if it returns a not-yet-ready future, until that
//! future is ready (§6.5 ¶6); within that window, raw pointers taken with
//! [`View::as_ptr`] stay valid, which is how an asynchronous operation started by the
//! RPC can keep reading the elements.
//!
//! # What is an RPC argument
//!
//! [`Serialization`] is implemented for every serde type, for [`View`] and for
//! [`SeqView`]. Its associated type [`Serialization::Deserialized`] is what the target
//! receives: the type itself for serde types, a view borrowing the receive buffer for
//! views. It is sealed: make your types serializable by implementing serde's traits.
//!
//! Serialization code must not call UPC++ communication (§6.1 ¶5): the arguments of an
//! RPC are serialized directly into the network layer's send buffer, where no other
//! communication may start.

use std::borrow::Borrow;
use std::marker::PhantomData;

use bytemuck::Pod;
pub use serde;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Why a value could not be serialized or deserialized.
#[derive(Debug)]
pub struct Error(ErrorRepr);

#[derive(Debug)]
enum ErrorRepr {
    Codec(postcard::Error),
    Truncated { wanted: usize, left: usize },
    Full,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            ErrorRepr::Codec(e) => write!(f, "serialization failed: {e}"),
            ErrorRepr::Truncated { wanted, left } => write!(
                f,
                "deserialization failed: needed {wanted} more bytes, {left} left"
            ),
            ErrorRepr::Full => f.write_str("serialization failed: the output buffer is full"),
        }
    }
}

impl std::error::Error for Error {}

impl From<postcard::Error> for Error {
    fn from(e: postcard::Error) -> Error {
        if e == postcard::Error::SerializeBufferFull {
            Error(ErrorRepr::Full)
        } else {
            Error(ErrorRepr::Codec(e))
        }
    }
}

/// Where serialized bytes go: first a fixed buffer (an Active Message slot), then, once
/// that is full, a growable vector that takes over (the slot's bytes are copied into it
/// once, so the whole message is contiguous there). Serialization never restarts.
pub struct Writer<'a> {
    slot: &'a mut [u8],
    spill: Option<&'a mut Vec<u8>>,
    pos: usize,
    spilled: bool,
}

impl<'a> Writer<'a> {
    /// Writes into `slot`, moving to `spill` (if any) when the slot is full.
    pub(crate) fn new(slot: &'a mut [u8], spill: Option<&'a mut Vec<u8>>) -> Writer<'a> {
        Writer {
            slot,
            spill,
            pos: 0,
            spilled: false,
        }
    }

    /// Bytes written so far: the position relative to the start of the message.
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// True once the output moved from the slot to the spill vector.
    pub(crate) fn spilled(&self) -> bool {
        self.spilled
    }

    #[inline]
    fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        if !self.spilled {
            let end = self.pos + data.len();
            if end <= self.slot.len() {
                self.slot[self.pos..end].copy_from_slice(data);
                self.pos = end;
                return Ok(());
            }
            self.spill_now()?;
        }
        let v = self.spill.as_mut().expect("spilled implies a spill vector");
        v.extend_from_slice(data);
        self.pos += data.len();
        Ok(())
    }

    #[inline]
    fn push(&mut self, byte: u8) -> Result<(), Error> {
        if !self.spilled && self.pos < self.slot.len() {
            self.slot[self.pos] = byte;
            self.pos += 1;
            return Ok(());
        }
        self.write(&[byte])
    }

    #[cold]
    fn spill_now(&mut self) -> Result<(), Error> {
        let v = self.spill.as_mut().ok_or(Error(ErrorRepr::Full))?;
        v.clear();
        v.extend_from_slice(&self.slot[..self.pos]);
        self.spilled = true;
        Ok(())
    }

    /// Writes zeros up to the next multiple of `align` (a power of two).
    fn pad_to(&mut self, align: usize) -> Result<(), Error> {
        const ZEROS: [u8; 64] = [0; 64];
        let mut pad = self.pos.next_multiple_of(align) - self.pos;
        while pad > 0 {
            let n = pad.min(ZEROS.len());
            self.write(&ZEROS[..n])?;
            pad -= n;
        }
        Ok(())
    }

    /// Overwrites bytes written earlier at position `at`.
    fn patch(&mut self, at: usize, data: &[u8]) {
        let end = at + data.len();
        assert!(end <= self.pos, "patching bytes not yet written");
        if self.spilled {
            self.spill.as_mut().expect("spilled")[at..end].copy_from_slice(data);
        } else {
            self.slot[at..end].copy_from_slice(data);
        }
    }

    /// Serializes `value` with the codec.
    #[inline]
    fn serde<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        postcard::serialize_with_flavor(value, Flavor(self)).map_err(Error::from)
    }
}

/// Lets postcard write into a [`Writer`].
struct Flavor<'w, 'a>(&'w mut Writer<'a>);

impl postcard::ser_flavors::Flavor for Flavor<'_, '_> {
    type Output = ();

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0
            .write(data)
            .map_err(|_| postcard::Error::SerializeBufferFull)
    }

    #[inline]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0
            .push(data)
            .map_err(|_| postcard::Error::SerializeBufferFull)
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Reads a message produced by a [`Writer`]; positions are relative to its start.
pub struct Reader<'de> {
    buf: &'de [u8],
    pos: usize,
}

impl<'de> Reader<'de> {
    pub(crate) fn new(buf: &'de [u8]) -> Reader<'de> {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(Error(ErrorRepr::Truncated { wanted: n, left }));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn skip_to(&mut self, align: usize) -> Result<(), Error> {
        let pad = self.pos.next_multiple_of(align) - self.pos;
        self.take(pad).map(|_| ())
    }

    fn u64(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn len(&mut self) -> Result<usize, Error> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| {
            Error(ErrorRepr::Truncated {
                wanted: usize::MAX,
                left: self.buf.len() - self.pos,
            })
        })
    }

    #[inline]
    fn serde<T: Deserialize<'de>>(&mut self) -> Result<T, Error> {
        let (v, rest) = postcard::take_from_bytes::<T>(&self.buf[self.pos..])?;
        self.pos = self.buf.len() - rest.len();
        Ok(v)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A value that can travel as an RPC argument (UPC++ *DefinitelySerializable*, §6.2):
/// any serde type, a [`View`] or a [`SeqView`]. See the module documentation.
pub trait Serialization: sealed::Sealed {
    /// What the receiver gets: `Self` for serde types; a view borrowing the receive
    /// buffer (lifetime `'de`) for views.
    type Deserialized<'de>;

    #[doc(hidden)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error>;

    #[doc(hidden)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error>;
}

impl<T: Serialize + DeserializeOwned> sealed::Sealed for T {}

impl<T: Serialize + DeserializeOwned> Serialization for T {
    type Deserialized<'de> = T;

    #[inline]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.serde(self)
    }

    #[inline]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<T, Error> {
        r.serde()
    }
}

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
pub fn deserialize<'de, T: Serialization + ?Sized>(
    bytes: &'de [u8],
) -> Result<T::Deserialized<'de>, Error> {
    T::decode(&mut Reader::new(bytes))
}

// ---------------------------------------------------------------------------------------
// Trivial<T>: one Pod value as one memcpy.

/// A plain-old-data value sent as its bytes (UPC++ *DefinitelyTriviallySerializable*,
/// §6.2 ¶5): one copy instead of element-by-element encoding. Use it for arrays and
/// `#[repr(C)]` structs of numbers, also inside your own serde types.
///
/// ```
/// use upcxx::serialization::{deserialize, serialize, Trivial};
/// let grid = Trivial([[1.0f64; 8]; 8]);
/// let bytes = serialize(&grid);
/// assert_eq!(bytes.len(), 2 + 8 * 8 * 8); // varint length prefix + raw bytes
/// assert_eq!(deserialize::<Trivial<[[f64; 8]; 8]>>(&bytes).unwrap(), grid);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Trivial<T>(pub T);

impl<T> std::ops::Deref for Trivial<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Trivial<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> From<T> for Trivial<T> {
    fn from(v: T) -> Trivial<T> {
        Trivial(v)
    }
}

impl<T: Pod> Serialize for Trivial<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytemuck::bytes_of(&self.0))
    }
}

impl<'de, T: Pod> Deserialize<'de> for Trivial<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Trivial<T>, D::Error> {
        struct Bytes<T>(PhantomData<T>);
        impl<'de, T: Pod> serde::de::Visitor<'de> for Bytes<T> {
            type Value = Trivial<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{} bytes", std::mem::size_of::<T>())
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Trivial<T>, E> {
                if v.len() != std::mem::size_of::<T>() {
                    return Err(E::invalid_length(v.len(), &self));
                }
                Ok(Trivial(bytemuck::pod_read_unaligned(v)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Trivial<T>, A::Error> {
                let mut v = T::zeroed();
                let bytes = bytemuck::bytes_of_mut(&mut v);
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                }
                Ok(Trivial(v))
            }
        }
        d.deserialize_bytes(Bytes(PhantomData))
    }
}

impl<T: 'static> crate::future::FutureValue for Trivial<T> {
    type Value = Trivial<T>;
    fn into_future(self) -> crate::Future<Trivial<T>> {
        crate::make_future(self)
    }
}

// ---------------------------------------------------------------------------------------
// View<T>: a sequence of Pod elements, read in place on the target.

/// A view of a sequence of plain-old-data elements (UPC++ `view<T>` with a
/// *DefinitelyTriviallySerializable* `T`, §6.5 ¶4): the sender makes one with
/// [`make_view`] over a slice; the RPC target receives a `View` that dereferences to
/// `&[T]` over the network buffer, without copying (see the module documentation for
/// alignment and lifetime).
///
/// ```no_run
/// use upcxx::serialization::{make_view, View};
/// upcxx::init();
/// let data: Vec<f64> = (0..1000).map(f64::from).collect();
/// let sum = upcxx::rpc(0, |v: View<'_, f64>| v.iter().sum::<f64>(), (make_view(&data),));
/// assert_eq!(sum.wait(), 499500.0);
/// upcxx::finalize();
/// ```
pub struct View<'a, T> {
    repr: ViewRepr<'a, T>,
}

enum ViewRepr<'a, T> {
    Borrowed(&'a [T]),
    /// The elements were misaligned in the buffer and had to be copied.
    Owned(Vec<T>),
}

/// A view over `elements` to pass to an RPC (UPC++ `make_view`, §6.6).
pub fn make_view<T: Pod>(elements: &[T]) -> View<'_, T> {
    View {
        repr: ViewRepr::Borrowed(elements),
    }
}

impl<'a, T> View<'a, T> {
    /// The elements (UPC++ `view::begin`..`end`).
    pub fn as_slice(&self) -> &[T] {
        match &self.repr {
            ViewRepr::Borrowed(s) => s,
            ViewRepr::Owned(v) => v,
        }
    }

    /// Pointer to the first element (UPC++ `view::data`). On an RPC target it points into
    /// the receive buffer, which stays valid until the RPC function returns, or until the
    /// future it returned is ready (§6.5 ¶6).
    pub fn as_ptr(&self) -> *const T {
        self.as_slice().as_ptr()
    }

    /// True if the elements are read where they lie (the sender's slice, or the network
    /// buffer on the target); false if they had to be copied because the buffer was not
    /// aligned for `T`. Always true on an RPC target when `align_of::<T>() <= 16`.
    pub fn in_place(&self) -> bool {
        matches!(self.repr, ViewRepr::Borrowed(_))
    }
}

impl<T> std::ops::Deref for View<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<'a, T> From<&'a [T]> for View<'a, T> {
    fn from(s: &'a [T]) -> View<'a, T> {
        View {
            repr: ViewRepr::Borrowed(s),
        }
    }
}

impl<'a, T> From<&'a Vec<T>> for View<'a, T> {
    fn from(s: &'a Vec<T>) -> View<'a, T> {
        View::from(s.as_slice())
    }
}

impl<T: Clone> Clone for View<'_, T> {
    fn clone(&self) -> Self {
        match &self.repr {
            ViewRepr::Borrowed(s) => View {
                repr: ViewRepr::Borrowed(s),
            },
            ViewRepr::Owned(v) => View {
                repr: ViewRepr::Owned(v.clone()),
            },
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for View<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<'v, T> IntoIterator for &'v View<'_, T> {
    type Item = &'v T;
    type IntoIter = std::slice::Iter<'v, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: Pod> sealed::Sealed for View<'_, T> {}

/// Encoding: element count (u64 LE), zero padding to a multiple of `align_of::<T>()`
/// from the start of the message, the elements' bytes.
impl<T: Pod> Serialization for View<'_, T> {
    type Deserialized<'de> = View<'de, T>;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        const {
            assert!(
                std::mem::size_of::<T>() > 0,
                "upcxx::View of zero-sized elements"
            )
        };
        let s = self.as_slice();
        w.write(&(s.len() as u64).to_le_bytes())?;
        w.pad_to(std::mem::align_of::<T>())?;
        w.write(bytemuck::cast_slice(s))
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<View<'de, T>, Error> {
        const {
            assert!(
                std::mem::size_of::<T>() > 0,
                "upcxx::View of zero-sized elements"
            )
        };
        let n = r.len()?;
        r.skip_to(std::mem::align_of::<T>())?;
        let nbytes =
            n.checked_mul(std::mem::size_of::<T>())
                .ok_or(Error(ErrorRepr::Truncated {
                    wanted: usize::MAX,
                    left: 0,
                }))?;
        let bytes = r.take(nbytes)?;
        let repr = match bytemuck::try_cast_slice::<u8, T>(bytes) {
            Ok(s) => ViewRepr::Borrowed(s),
            Err(_) => {
                let mut v = vec![T::zeroed(); n];
                bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
                ViewRepr::Owned(v)
            }
        };
        Ok(View { repr })
    }
}

// ---------------------------------------------------------------------------------------
// SeqView<T>: a sequence of serde elements, deserialized lazily on the target.

/// A view of a sequence whose elements need real (de)serialization (UPC++ `view<T>` with
/// `deserializing_iterator<T>`, §6.5 ¶4). The sender makes one from any cloneable
/// iterator with [`make_seq_view`] (over `&T` items) or [`SeqView::from_values`] (over
/// `T` items); no intermediate container is built. The target receives a
/// `SeqView<'de, T>` whose iterator deserializes each element on demand from the network
/// buffer.
///
/// ```no_run
/// use std::collections::LinkedList;
/// use upcxx::serialization::{make_seq_view, SeqView};
/// upcxx::init();
/// let words: LinkedList<String> = ["a", "bb", "ccc"].iter().map(|s| s.to_string()).collect();
/// let total = upcxx::rpc(
///     0,
///     |v: SeqView<'_, String>| v.iter().map(|s| s.len()).sum::<usize>(),
///     (make_seq_view(words.iter()),),
/// );
/// assert_eq!(total.wait(), 6);
/// upcxx::finalize();
/// ```
pub struct SeqView<'a, T, I = Elements<'a, T>> {
    iter: I,
    len: Option<usize>,
    _marker: SeqMarker<'a, T>,
}

/// Ties a [`SeqView`] to its buffer's lifetime and element type (without owning a `T`).
type SeqMarker<'a, T> = PhantomData<(&'a (), fn() -> T)>;

/// A view over the elements `iter` yields by reference (UPC++ `make_view(begin, end)`
/// for elements that are not trivially serializable).
pub fn make_seq_view<'a, T, I>(iter: I) -> SeqView<'a, T, I::IntoIter>
where
    T: Serialize + 'a,
    I: IntoIterator<Item = &'a T>,
    I::IntoIter: Clone,
{
    SeqView {
        iter: iter.into_iter(),
        len: None,
        _marker: PhantomData,
    }
}

impl<T, I> SeqView<'static, T, I> {
    /// A view over the elements `iter` yields by value.
    pub fn from_values<J>(iter: J) -> SeqView<'static, T, I>
    where
        J: IntoIterator<Item = T, IntoIter = I>,
        I: Iterator<Item = T> + Clone,
    {
        SeqView {
            iter: iter.into_iter(),
            len: None,
            _marker: PhantomData,
        }
    }
}

impl<'a, T, I: Iterator + Clone> SeqView<'a, T, I> {
    /// Iterates over the elements; on a received view, each is deserialized as it is
    /// reached (UPC++ `deserializing_iterator`).
    pub fn iter(&self) -> I {
        self.iter.clone()
    }

    /// The number of elements (UPC++ `view::size`). Known without iterating on a received
    /// view; counts a clone of the iterator on the sender.
    pub fn len(&self) -> usize {
        self.len.unwrap_or_else(|| self.iter.clone().count())
    }

    /// True if there are no elements (UPC++ `view::empty`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, T, I: Iterator> IntoIterator for SeqView<'a, T, I> {
    type Item = I::Item;
    type IntoIter = I;
    fn into_iter(self) -> I {
        self.iter
    }
}

impl<T, I: Clone> Clone for SeqView<'_, T, I> {
    fn clone(&self) -> Self {
        SeqView {
            iter: self.iter.clone(),
            len: self.len,
            _marker: PhantomData,
        }
    }
}

impl<T, I> std::fmt::Debug for SeqView<'_, T, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqView").field("len", &self.len).finish()
    }
}

/// The iterator of a received [`SeqView`]: deserializes one element per step from the
/// network buffer (UPC++ `deserializing_iterator<T>`, §6.6 ¶5).
pub struct Elements<'de, T> {
    bytes: &'de [u8],
    left: usize,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Clone for Elements<'_, T> {
    fn clone(&self) -> Self {
        Elements {
            bytes: self.bytes,
            left: self.left,
            _marker: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Iterator for Elements<'de, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        let (v, rest) = postcard::take_from_bytes::<T>(self.bytes).unwrap_or_else(|e| {
            panic!(
                "upcxx::SeqView: an element does not deserialize ({e}): its Deserialize does \
                 not match its Serialize"
            )
        });
        self.bytes = rest;
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'de, T: Deserialize<'de>> ExactSizeIterator for Elements<'de, T> {}

impl<T, I> sealed::Sealed for SeqView<'_, T, I>
where
    T: Serialize + DeserializeOwned,
    I: Iterator + Clone,
    I::Item: Borrow<T>,
{
}

/// Encoding: element count (u64 LE), byte length of the elements (u64 LE), the
/// elements one after another in the codec's encoding.
impl<T, I> Serialization for SeqView<'_, T, I>
where
    T: Serialize + DeserializeOwned,
    I: Iterator + Clone,
    I::Item: Borrow<T>,
{
    type Deserialized<'de> = SeqView<'de, T>;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        let at = w.pos();
        w.write(&[0; 16])?;
        let mut n = 0u64;
        for x in self.iter.clone() {
            w.serde(x.borrow())?;
            n += 1;
        }
        let nbytes = (w.pos() - at - 16) as u64;
        w.patch(at, &n.to_le_bytes());
        w.patch(at + 8, &nbytes.to_le_bytes());
        Ok(())
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<SeqView<'de, T>, Error> {
        let n = r.len()?;
        let nbytes = r.len()?;
        let bytes = r.take(nbytes)?;
        Ok(SeqView {
            iter: Elements {
                bytes,
                left: n,
                _marker: PhantomData,
            },
            len: Some(n),
            _marker: PhantomData,
        })
    }
}
