//! [`SeqView<T>`]: a sequence of serde elements, deserialized lazily on the target
//! (§6.5 ¶4). Sits on the codec.

use std::borrow::Borrow;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::codec::{sealed, Error, ErrorRepr, Reader, Serialization, Writer};

/// A view of a sequence whose elements need real (de)serialization (UPC++ `view<T>` with
/// `deserializing_iterator<T>`, §6.5 ¶4). The sender makes one from any cloneable
/// iterator with [`make_seq_view`] (over `&T` items) or [`SeqView::from_values`] (over
/// `T` items); no intermediate container is built. The target receives a
/// `SeqView<'de, T>` whose iterator deserializes each element on demand from the network
/// buffer.
///
/// ```
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
        // Every element takes at least one byte unless `T` encodes in none: a larger
        // count cannot come from `encode`, and would make the iterator's exact size (and
        // so a `collect`'s allocation) a lie.
        if n > nbytes && postcard::from_bytes::<T>(&[]).is_err() {
            return Err(Error(ErrorRepr::Count {
                elements: n,
                bytes: nbytes,
            }));
        }
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
