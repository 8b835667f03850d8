//! [`StrView`]: a string read in place on the target (§6.5), as [`View`](super::View)
//! reads plain-old-data elements. Sits on the codec.
//!
//! UPC++ sends the characters of a string as a `view<char>`: `char` is trivially
//! serializable, so the target's view lies over the network buffer, with no copy and
//! no allocation (§6.5 ¶4), and gives const access only, "analogous to C++17
//! `string_view`" (¶5). A Rust `str` is UTF-8 besides, so the target checks the bytes
//! when it decodes them (the codec's check, whose ASCII case costs a few word loads);
//! bytes that are not UTF-8 fail the call as any other bytes that do not decode.
//!
//! The bytes are those of a `String`, so what a view sends means the same as a
//! [`by_ref`](super::by_ref()) of the string: only what the target receives differs, a
//! `&str` into the buffer instead of an owned `String`. A target that needs to keep the
//! string copies it (`to_owned`); one that only reads it (a lookup, a comparison, a
//! key already stored) allocates nothing.

use super::codec::{sealed, Error, Reader, Serialization, Writer};

/// A view of a string (UPC++ `view<char>` over a string's characters, §6.5): the sender
/// makes one with [`make_str_view`]; the RPC target receives a `StrView` that
/// dereferences to `&str` in the network buffer, without copying or allocating. Its
/// lifetime is the receive buffer's, as a [`View`](super::View)'s is.
///
/// ```
/// use std::cell::RefCell;
/// use std::collections::HashMap;
/// use upcxx::serialization::{make_str_view, StrView};
/// use upcxx::DistObject;
///
/// upcxx::init();
/// let ages = DistObject::new(RefCell::new(HashMap::from([(String::from("ada"), 36u32)])));
/// // The target looks the name up where it lies: no `String` is built for it.
/// let age = upcxx::rpc(
///     0,
///     |ages: &DistObject<RefCell<HashMap<String, u32>>>, name: StrView<'_>| {
///         ages.borrow().get(&*name).copied()
///     },
///     (&ages, make_str_view("ada")),
/// );
/// assert_eq!(age.wait(), Some(36));
/// upcxx::barrier();
/// drop(ages);
/// upcxx::finalize();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StrView<'a>(&'a str);

/// A view of `s` to pass to an RPC (UPC++ `make_view` over a string's characters,
/// §6.6).
pub fn make_str_view(s: &str) -> StrView<'_> {
    StrView(s)
}

impl<'a> StrView<'a> {
    /// The string, with the view's lifetime (on an RPC target, the receive buffer's).
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

impl std::ops::Deref for StrView<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl<'a> From<&'a str> for StrView<'a> {
    fn from(s: &'a str) -> StrView<'a> {
        StrView(s)
    }
}

impl<'a> From<&'a String> for StrView<'a> {
    fn from(s: &'a String) -> StrView<'a> {
        StrView(s)
    }
}

impl std::fmt::Display for StrView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl sealed::Sealed for StrView<'_> {}

impl Serialization for StrView<'_> {
    type Deserialized<'de> = StrView<'de>;

    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.str(self.0)
    }

    // Both always inlined into the call's coding: their common case (a one-byte
    // length, a short ASCII string) is a few loads, stores and compares, less than a
    // call's own cost.
    #[inline(always)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<StrView<'de>, Error> {
        r.str().map(StrView)
    }
}
