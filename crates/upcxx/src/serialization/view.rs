//! [`View<T>`]: a sequence of plain-old-data elements, read in place on the target
//! (§6.5), sent from a slice or, as [`ViewIter`], from any iterator. Sits on the codec.

use std::marker::PhantomData;

use bytemuck::Pod;

use super::codec::{sealed, Error, ErrorRepr, Reader, Serialization, Writer};

/// A view of a sequence of plain-old-data elements (UPC++ `view<T>` with a
/// *DefinitelyTriviallySerializable* `T`, §6.5 ¶4): the sender makes one with
/// [`make_view`] over a slice, or with [`make_view_iter`] over the elements of any
/// container; the RPC target receives a `View` that dereferences to `&[T]` over the
/// network buffer, without copying (see the module documentation for alignment and
/// lifetime).
///
/// ```
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

/// A view of the plain-old-data elements an iterator yields, to pass to an RPC: UPC++
/// `make_view(begin, end)` over a container that is not contiguous, as the `std::list`
/// of §6.5 ¶1. The elements are written one after another into the message, in the
/// encoding of a [`View`], so the target receives a `View<'_, T>` over the network
/// buffer, as from a slice: no container is built on either side. Made by
/// [`make_view_iter`].
///
/// ```
/// use std::collections::{BTreeMap, LinkedList};
/// use upcxx::serialization::{make_view_iter, View};
/// upcxx::init();
/// let items: LinkedList<f64> = (1..=4).map(f64::from).collect();
/// let sum = upcxx::rpc(0, |v: View<'_, f64>| v.iter().sum::<f64>(), (make_view_iter(&items),));
/// assert_eq!(sum.wait(), 10.0);
/// let ages = BTreeMap::from([("ann", 31u32), ("bo", 45)]);
/// let oldest = upcxx::rpc(0, |v: View<'_, u32>| v.iter().max().copied(), (make_view_iter(ages.values()),));
/// assert_eq!(oldest.wait(), Some(45));
/// upcxx::finalize();
/// ```
pub struct ViewIter<T, I> {
    iter: I,
    _elements: PhantomData<fn() -> T>,
}

/// A view over the elements `iter` yields by reference (UPC++ `make_view(begin, end)`,
/// §6.6, for plain-old-data elements of any container): see [`ViewIter`].
pub fn make_view_iter<'a, T, I>(iter: I) -> ViewIter<T, I::IntoIter>
where
    T: Pod,
    I: IntoIterator<Item = &'a T>,
    I::IntoIter: Clone,
{
    ViewIter {
        iter: iter.into_iter(),
        _elements: PhantomData,
    }
}

impl<T, I: Clone> Clone for ViewIter<T, I> {
    fn clone(&self) -> Self {
        ViewIter {
            iter: self.iter.clone(),
            _elements: PhantomData,
        }
    }
}

impl<T, I> std::fmt::Debug for ViewIter<T, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ViewIter")
    }
}

impl<'a, T: Pod, I: Iterator<Item = &'a T> + Clone> sealed::Sealed for ViewIter<T, I> {}

/// The encoding of a [`View`] (the count is written once the elements are).
impl<'a, T: Pod, I: Iterator<Item = &'a T> + Clone> Serialization for ViewIter<T, I> {
    type Deserialized<'de> = View<'de, T>;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        let at = write_head::<T>(w, 0)?;
        let mut n = 0u64;
        for x in self.iter.clone() {
            w.write(bytemuck::bytes_of(x))?;
            n += 1;
        }
        w.patch(at, &n.to_le_bytes());
        Ok(())
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<View<'de, T>, Error> {
        View::decode(r)
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

/// Fails the build for a view of zero-sized elements (its count would mean nothing).
#[inline(always)]
fn sized<T>() {
    const {
        assert!(
            std::mem::size_of::<T>() > 0,
            "upcxx::View of zero-sized elements"
        )
    };
}

/// Writes the head of a view of `count` elements of `T` (see the encoding below):
/// returns where the count lies, for a writer that learns it only later.
#[inline]
fn write_head<T>(w: &mut Writer<'_>, count: u64) -> Result<usize, Error> {
    sized::<T>();
    let at = w.pos();
    w.write(&count.to_le_bytes())?;
    w.pad_to(std::mem::align_of::<T>())?;
    Ok(at)
}

/// Encoding: element count (u64 LE), zero padding to a multiple of `align_of::<T>()`
/// from the start of the message, the elements' bytes.
impl<T: Pod> Serialization for View<'_, T> {
    type Deserialized<'de> = View<'de, T>;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        let s = self.as_slice();
        write_head::<T>(w, s.len() as u64)?;
        w.write(bytemuck::cast_slice(s))
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<View<'de, T>, Error> {
        sized::<T>();
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
