//! The codec under every serialized value: the error type, the [`Writer`] that fills a
//! send buffer (spilling into a vector when the value outgrows it), the [`Reader`] that
//! decodes a receive buffer, and the sealed [`Serialization`] trait with its impl for
//! serde types. A leaf of `serialization`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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
                let dst = &mut self.slot[self.pos..end];
                if data.len() <= 16 {
                    copy_small(dst, data);
                } else {
                    dst.copy_from_slice(data);
                }
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
        postcard::serialize_with_flavor(value, Flavor(self)).map_err(Error::from)
    }
}

/// Copies `src` (at most 16 bytes) into `dst`, as long, with at most two overlapping
/// moves of a fixed width: what the codec writes most (a varint, a length, a short
/// string) costs no call to `memcpy`, whose dispatch on the length outweighs the copy.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
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
        _ => two::<8>(dst, src),
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
        let (v, rest) = postcard::take_from_bytes::<T>(&self.buf[self.pos..])?;
        self.pos = self.buf.len() - rest.len();
        Ok(v)
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
mod tests {
    use super::*;

    /// Every length `copy_small` takes, at every offset of a larger buffer, copies
    /// exactly those bytes and touches no other.
    #[test]
    fn copy_small_copies_exactly_the_bytes() {
        let src: Vec<u8> = (1..=16).collect();
        for n in 0..=16 {
            for at in 0..4 {
                let mut buf = [0u8; 24];
                copy_small(&mut buf[at..at + n], &src[..n]);
                let mut want = [0u8; 24];
                want[at..at + n].copy_from_slice(&src[..n]);
                assert_eq!(buf, want, "{n} bytes at {at}");
            }
        }
    }
}
