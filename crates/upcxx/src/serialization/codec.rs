//! The codec under every serialized value: the error type, the [`Writer`] that fills a
//! send buffer (spilling into a vector when the value outgrows it), the [`Reader`] that
//! decodes a receive buffer, and the sealed [`Serialization`] trait with its impl for
//! serde types. A leaf of `serialization`.
//!
//! What the runtime itself writes on every call, an object's id and a string passed by
//! reference, has a path of its own here (`varint`, `str`) beside postcard's
//! serializer: the same bytes, without a serializer set up per value, and with the
//! common case (a one-byte length, an ASCII string) inline. A serde value is handed
//! the serializer and deserializer of `top`, which write and read an integer, a string
//! or an option of them by the same paths and leave everything else to postcard.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod top;

/// Why a value could not be serialized or deserialized.
#[derive(Debug)]
pub struct Error(pub(super) ErrorRepr);

#[derive(Debug)]
pub(super) enum ErrorRepr {
    Codec(postcard::Error),
    Truncated {
        wanted: usize,
        left: usize,
    },
    /// A sequence claims more elements than its bytes can hold.
    Count {
        elements: usize,
        bytes: usize,
    },
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
            ErrorRepr::Count { elements, bytes } => write!(
                f,
                "deserialization failed: {elements} elements claimed in {bytes} bytes"
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

/// The longest varint: a `u64`'s 64 bits, seven a byte.
const MAX_VARINT: usize = 10;

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
    pub(super) fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        if !self.spilled {
            let end = self.pos + data.len();
            if end <= self.slot.len() {
                copy(&mut self.slot[self.pos..end], data);
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
    pub(super) fn push(&mut self, byte: u8) -> Result<(), Error> {
        if !self.spilled && self.pos < self.slot.len() {
            self.slot[self.pos] = byte;
            self.pos += 1;
            return Ok(());
        }
        self.push_spilled(byte)
    }

    /// [`push`](Writer::push) past the slot, out of line so that the common case
    /// inlines as a compare and a store.
    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, byte: u8) -> Result<(), Error> {
        self.write(&[byte])
    }

    #[cold]
    pub(super) fn spill_now(&mut self) -> Result<(), Error> {
        let v = self.spill.as_mut().ok_or(Error(ErrorRepr::Full))?;
        v.clear();
        v.extend_from_slice(&self.slot[..self.pos]);
        self.spilled = true;
        Ok(())
    }

    /// Writes zeros up to the next multiple of `align` (a power of two).
    pub(super) fn pad_to(&mut self, align: usize) -> Result<(), Error> {
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
    pub(super) fn patch(&mut self, at: usize, data: &[u8]) {
        let end = at + data.len();
        assert!(end <= self.pos, "patching bytes not yet written");
        if self.spilled {
            self.spill.as_mut().expect("spilled")[at..end].copy_from_slice(data);
        } else {
            self.slot[at..end].copy_from_slice(data);
        }
    }

    /// Writes bytes that an earlier `Writer` produced (a message serialized ahead of
    /// its sending).
    #[inline]
    pub(crate) fn raw(&mut self, data: &[u8]) -> Result<(), Error> {
        self.write(data)
    }

    /// Serializes `value` with the codec.
    #[inline]
    pub(crate) fn serde<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let mut postcard = postcard::Serializer {
            output: Flavor(self),
        };
        value
            .serialize(top::Top(&mut postcard))
            .map_err(Error::from)
    }

    /// Writes `n` as postcard writes an unsigned integer or a length (a LEB128 varint:
    /// seven bits a byte, low first, the high bit set on all but the last). postcard
    /// keeps its varint encoder private, and reaching it through its serializer costs
    /// several times the varint; the one-byte case (a string's length, an id) is a
    /// compare and a store, and a longer one with room for any varint in the slot is
    /// written in place.
    #[inline(always)]
    pub(crate) fn varint(&mut self, n: u64) -> Result<(), Error> {
        if n < 0x80 {
            return self.push(n as u8);
        }
        if !self.spilled && self.pos + MAX_VARINT <= self.slot.len() {
            self.pos += put_varint(&mut self.slot[self.pos..self.pos + MAX_VARINT], n);
            return Ok(());
        }
        self.varint_long(n)
    }

    /// [`varint`](Writer::varint) near the end of the slot or past it, out of line.
    #[cold]
    #[inline(never)]
    fn varint_long(&mut self, n: u64) -> Result<(), Error> {
        let mut buf = [0u8; MAX_VARINT];
        let len = put_varint(&mut buf, n);
        self.write(&buf[..len])
    }

    /// Writes `s` as postcard writes a `str` (its length as a varint, then its bytes),
    /// without postcard's serializer between: the path of every string argument sent by
    /// reference ([`by_ref`](super::by_ref())).
    #[inline(always)]
    pub(crate) fn str(&mut self, s: &str) -> Result<(), Error> {
        let bytes = s.as_bytes();
        let end = self.pos + 1 + bytes.len();
        // A string shorter than 128 bytes that fits the slot: its one-byte length and
        // its bytes, with one bounds check.
        if bytes.len() < 0x80 && !self.spilled && end <= self.slot.len() {
            self.slot[self.pos] = bytes.len() as u8;
            copy(&mut self.slot[self.pos + 1..end], bytes);
            self.pos = end;
            return Ok(());
        }
        self.str_long(bytes)
    }

    /// [`str`](Writer::str) of a long string, or one that does not fit the slot.
    #[cold]
    #[inline(never)]
    fn str_long(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.varint(bytes.len() as u64)?;
        self.write(bytes)
    }
}

/// Writes `n` as a LEB128 varint (see [`Writer::varint`]) at the start of `out`, which
/// has room for any; returns its length.
#[inline(always)]
fn put_varint(out: &mut [u8], mut n: u64) -> usize {
    let mut i = 0;
    while n >= 0x80 {
        out[i] = n as u8 | 0x80;
        n >>= 7;
        i += 1;
    }
    out[i] = n as u8;
    i + 1
}

/// Copies `src` into `dst`, as long: [`copy_small`] up to 32 bytes, `memcpy` above.
/// Also the copy of an RPC's payload into a receive page (`rpc::inbox`).
#[inline(always)]
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    if src.len() <= 32 {
        copy_small(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Copies `src` (at most 32 bytes) into `dst`, as long, with at most two overlapping
/// moves of a fixed width: what the codec writes most (a varint, a length, a short
/// string such as a key) costs no call to `memcpy`, whose dispatch on the length
/// outweighs the copy.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    #[inline(always)]
    fn two<const W: usize>(dst: &mut [u8], src: &[u8]) {
        let n = src.len();
        let head: [u8; W] = src[..W].try_into().expect("W bytes");
        let tail: [u8; W] = src[n - W..].try_into().expect("W bytes");
        dst[..W].copy_from_slice(&head);
        dst[n - W..].copy_from_slice(&tail);
    }
    match src.len() {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => two::<2>(dst, src),
        4..=7 => two::<4>(dst, src),
        8..=16 => two::<8>(dst, src),
        _ => two::<16>(dst, src),
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

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(Error(ErrorRepr::Truncated { wanted: n, left }));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(super) fn skip_to(&mut self, align: usize) -> Result<(), Error> {
        let pad = self.pos.next_multiple_of(align) - self.pos;
        self.take(pad).map(|_| ())
    }

    pub(super) fn u64(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub(super) fn len(&mut self) -> Result<usize, Error> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| {
            Error(ErrorRepr::Truncated {
                wanted: usize::MAX,
                left: self.buf.len() - self.pos,
            })
        })
    }

    #[inline]
    pub(crate) fn serde<T: Deserialize<'de>>(&mut self) -> Result<T, Error> {
        T::deserialize(top::TopReader(self)).map_err(Error::from)
    }

    /// Reads what [`Writer::varint`] writes: the one-byte case inline, the rest out of
    /// line.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.varint_long(),
        }
    }

    /// [`varint`](Reader::varint) of more than one byte (or none left), out of line.
    #[cold]
    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64, Error> {
        self.varint_bounded(MAX_VARINT, 0x01).map_err(Error::from)
    }

    /// Reads a varint of at most `max` bytes whose last byte, if the `max`th, is at most
    /// `last`: postcard's bounds for the integer type read (10 and `0x01` for a `u64`,
    /// 5 and `0x0f` for a `u32`), with its errors.
    #[inline(always)]
    pub(super) fn varint_bounded(&mut self, max: usize, last: u8) -> postcard::Result<u64> {
        let bytes = &self.buf[self.pos..];
        let mut n = 0u64;
        for i in 0..max {
            let Some(&b) = bytes.get(i) else {
                return Err(postcard::Error::DeserializeUnexpectedEnd);
            };
            n |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if i == max - 1 && b > last {
                    break;
                }
                self.pos += i + 1;
                return Ok(n);
            }
        }
        Err(postcard::Error::DeserializeBadVarint)
    }

    /// Reads what [`Writer::str`] writes, in place, checked to be UTF-8 (see [`utf8`]).
    #[inline(always)]
    pub(super) fn str(&mut self) -> Result<&'de str, Error> {
        let n = self.varint()?;
        let n =
            usize::try_from(n).map_err(|_| Error::from(postcard::Error::DeserializeBadVarint))?;
        utf8(self.take(n)?)
    }
}

/// `bytes` as a `str`, if they are UTF-8 (the check postcard makes, with its error).
///
/// The bytes come from another process of the job, which the receiver trusts with the
/// function it runs (`rpc/delivery.rs`), but a `str` that is not UTF-8 is undefined
/// behaviour in every later use, so the check stays: it is made cheap rather than
/// skipped. Names and keys are mostly ASCII, and ASCII is UTF-8: [`is_ascii`] tests a
/// short string in two to four word loads, where `core::str::from_utf8` walks a
/// string shorter than its fast path byte by byte, each byte through its state
/// machine. Anything else takes the full check.
#[inline(always)]
pub(super) fn utf8(bytes: &[u8]) -> Result<&str, Error> {
    if is_ascii(bytes) {
        // SAFETY: ASCII bytes are valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    not_ascii(bytes)
}

/// [`utf8`] of bytes that are not all ASCII: the full check, out of line.
#[cold]
#[inline(never)]
fn not_ascii(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::from(postcard::Error::DeserializeBadUtf8))
}

/// Whether every byte is ASCII (below 128). Up to 32 bytes, the test ORs together
/// overlapping words that cover the bytes and checks their high bits once; longer
/// strings go to `<[u8]>::is_ascii`. Hand-written because core's `is_ascii` walks the
/// bytes after the last whole word one at a time, which for a key of some twenty
/// bytes costs more than the words.
#[inline(always)]
fn is_ascii(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let w8 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let w4 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    const HIGH8: u64 = 0x8080_8080_8080_8080;
    match n {
        0..=3 => bytes.iter().all(|b| *b < 0x80),
        4..=7 => (w4(0) | w4(n - 4)) & 0x8080_8080 == 0,
        8..=16 => (w8(0) | w8(n - 8)) & HIGH8 == 0,
        17..=32 => (w8(0) | w8(8) | w8(n - 16) | w8(n - 8)) & HIGH8 == 0,
        _ => bytes.is_ascii(),
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A deferred run of a message whose arguments name objects this process has not built
/// yet (see [`Serialization::BY_ID`]). `Send`: it runs on the thread that builds the
/// object, which holds the master persona then, and the persona may have moved to
/// another thread since the message arrived (§10.5.3).
pub type Rerun = Box<dyn FnOnce() + Send>;

/// A value that can travel as an RPC argument (UPC++ *DefinitelySerializable*, §6.2):
/// any serde type, a [`View`](super::View) or a [`SeqView`](super::SeqView). See the
/// [module documentation](super).
pub trait Serialization: sealed::Sealed {
    /// What the receiver gets: `Self` for serde types; a view borrowing the receive
    /// buffer (lifetime `'de`) for views.
    type Deserialized<'de>;

    #[doc(hidden)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error>;

    #[doc(hidden)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error>;

    /// The value travels as the id of an object and decodes to this process's object
    /// of that id (a `&DistObject<T>` or a `&Team` RPC argument, §9.3 ¶1): it decodes
    /// only while an RPC runs, and may have to wait until the object is built here.
    #[doc(hidden)]
    const BY_ID: bool = false;

    /// Reads past the value in `r`; if it names an object not built here yet, arranges
    /// for `rerun()` (made by `make_rerun`) to run once it is, and returns true.
    #[doc(hidden)]
    fn wait_until_here(
        r: &mut Reader<'_>,
        make_rerun: &mut dyn FnMut() -> Rerun,
    ) -> Result<bool, Error> {
        let _ = make_rerun;
        Self::decode(r).map(|_| false)
    }
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

#[cfg(test)]
mod tests;
