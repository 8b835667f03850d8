//! [`View<T>`]: a sequence of plain-old-data elements, read in place on the target
//! (§6.5). Sits on the codec.

use bytemuck::Pod;

use super::codec::{sealed, Error, ErrorRepr, Reader, Serialization, Writer};

/// A view of a sequence of plain-old-data elements (UPC++ `view<T>` with a
/// *DefinitelyTriviallySerializable* `T`, §6.5 ¶4): the sender makes one with
/// [`make_view`] over a slice; the RPC target receives a `View` that dereferences to
/// `&[T]` over the network buffer, without copying (see the module documentation for
/// alignment and lifetime).
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
