//! Top-level values without postcard's serializer: the path of a value that *is* an
//! integer (an RPC argument `x: u64`, the result of `|x| x + 1`), the most common
//! argument and result of an RPC, a string (a `String` argument, a name looked up), or
//! an option of one (the result of a lookup, `Option<String>`).
//!
//! A serde type is written by handing it a serializer; postcard's costs, for one
//! integer, a call, a varint built in a buffer and copied out of it, and its flavor's
//! error mapping: several times the varint itself. [`Top`] and [`TopReader`] are the
//! serializer and deserializer [`Writer::serde`](super::Writer::serde) and
//! [`Reader::serde`](super::Reader::serde) hand a value: 32- and 64-bit integers
//! (signed ones zigzag-coded first, as postcard does) take the codec's inline varint
//! ([`Writer::varint`](super::Writer::varint), [`Reader::varint_bounded`](super::Reader::varint_bounded));
//! strings take the codec's string path ([`Writer::str`](super::Writer::str), and on
//! the way in its short ASCII test before the full UTF-8 check, where postcard runs
//! `core::str::from_utf8`, which walks a short string byte by byte); an option writes
//! its tag and hands its value the same serializer. Everything else, and everything
//! inside a compound value, goes to postcard as before. The bytes are postcard's
//! either way (tested below), and so are the errors.
//!
//! Hand-written because serde has no way to forward one serializer's methods to another
//! but writing each out; the macros below do that.

use serde::de::Visitor;
use serde::{Deserializer, Serialize, Serializer};

use super::{Error, ErrorRepr, Flavor, Reader, Writer};

/// What postcard's serializer writes into: a [`Writer`](super::Writer).
type Postcard<'w, 'a> = postcard::Serializer<Flavor<'w, 'a>>;

/// The serializer a top-level value is handed (see the module documentation): its own
/// integers, strings and options, postcard for the rest.
pub(super) struct Top<'s, 'w, 'a>(pub(super) &'s mut Postcard<'w, 'a>);

impl<'a> Top<'_, '_, 'a> {
    /// Writes by one of the codec's own paths into the writer under postcard's
    /// serializer; a write that finds no room fails as postcard's would.
    #[inline(always)]
    fn write(
        self,
        write: impl FnOnce(&mut Writer<'a>) -> Result<(), Error>,
    ) -> postcard::Result<()> {
        write(self.0.output.0).map_err(|_| postcard::Error::SerializeBufferFull)
    }
}

/// Forwards serializer methods to postcard's.
macro_rules! forward_ser {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            #[inline]
            fn $name(self, $($arg: $ty),*) -> postcard::Result<$ret> {
                self.0.$name($($arg),*)
            }
        )*
    };
}

impl<'s, 'w, 'a> Serializer for Top<'s, 'w, 'a> {
    type Ok = ();
    type Error = postcard::Error;
    type SerializeSeq = &'s mut Postcard<'w, 'a>;
    type SerializeTuple = &'s mut Postcard<'w, 'a>;
    type SerializeTupleStruct = &'s mut Postcard<'w, 'a>;
    type SerializeTupleVariant = &'s mut Postcard<'w, 'a>;
    type SerializeMap = &'s mut Postcard<'w, 'a>;
    type SerializeStruct = &'s mut Postcard<'w, 'a>;
    type SerializeStructVariant = &'s mut Postcard<'w, 'a>;

    fn is_human_readable(&self) -> bool {
        false
    }

    #[inline(always)]
    fn serialize_u32(self, v: u32) -> postcard::Result<()> {
        self.write(|w| w.varint(u64::from(v)))
    }

    #[inline(always)]
    fn serialize_u64(self, v: u64) -> postcard::Result<()> {
        self.write(|w| w.varint(v))
    }

    #[inline(always)]
    fn serialize_i32(self, v: i32) -> postcard::Result<()> {
        self.write(|w| w.varint(u64::from(((v << 1) ^ (v >> 31)) as u32)))
    }

    #[inline(always)]
    fn serialize_i64(self, v: i64) -> postcard::Result<()> {
        self.write(|w| w.varint(((v << 1) ^ (v >> 63)) as u64))
    }

    forward_ser! {
        serialize_bool(v: bool) -> ();
        serialize_i8(v: i8) -> ();
        serialize_i16(v: i16) -> ();
        serialize_i128(v: i128) -> ();
        serialize_u8(v: u8) -> ();
        serialize_u16(v: u16) -> ();
        serialize_u128(v: u128) -> ();
        serialize_f32(v: f32) -> ();
        serialize_f64(v: f64) -> ();
        serialize_char(v: char) -> ();
        serialize_bytes(v: &[u8]) -> ();
        serialize_unit() -> ();
        serialize_unit_struct(name: &'static str) -> ();
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str) -> ();
        serialize_seq(len: Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(len: usize) -> Self::SerializeTuple;
        serialize_tuple_struct(name: &'static str, len: usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(
            name: &'static str, index: u32, variant: &'static str, len: usize
        ) -> Self::SerializeTupleVariant;
        serialize_map(len: Option<usize>) -> Self::SerializeMap;
        serialize_struct(name: &'static str, len: usize) -> Self::SerializeStruct;
        serialize_struct_variant(
            name: &'static str, index: u32, variant: &'static str, len: usize
        ) -> Self::SerializeStructVariant;
    }

    #[inline(always)]
    fn serialize_str(self, v: &str) -> postcard::Result<()> {
        self.write(|w| w.str(v))
    }

    #[inline(always)]
    fn serialize_none(self) -> postcard::Result<()> {
        self.write(|w| w.push(0))
    }

    /// An option's tag, then its value as a top-level value: `Option<String>` and
    /// `Option<u64>`, the results of a lookup, take the paths of their contents.
    #[inline(always)]
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> postcard::Result<()> {
        let postcard = self.0;
        Top(&mut *postcard).write(|w| w.push(1))?;
        value.serialize(Top(postcard))
    }

    #[inline]
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> postcard::Result<()> {
        self.0.serialize_newtype_struct(name, value)
    }

    #[inline]
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> postcard::Result<()> {
        self.0
            .serialize_newtype_variant(name, index, variant, value)
    }

    #[inline]
    fn collect_str<T: std::fmt::Display + ?Sized>(self, value: &T) -> postcard::Result<()> {
        self.0.collect_str(value)
    }
}

/// The deserializer a top-level value is handed (see the module documentation): its own
/// integers, strings and options, postcard, from the reader's position on, for the rest.
pub(super) struct TopReader<'r, 'de>(pub(super) &'r mut Reader<'de>);

impl<'de> TopReader<'_, 'de> {
    /// Runs postcard's deserializer on the bytes left, and moves past what it read.
    #[inline]
    fn postcard<T>(
        self,
        f: impl FnOnce(
            &mut postcard::Deserializer<'de, postcard::de_flavors::Slice<'de>>,
        ) -> postcard::Result<T>,
    ) -> postcard::Result<T> {
        let r = self.0;
        let mut d = postcard::Deserializer::from_bytes(&r.buf[r.pos..]);
        let v = f(&mut d)?;
        r.pos = r.buf.len() - d.finalize()?.len();
        Ok(v)
    }

    /// A varint of at most `max` bytes whose last byte is at most `last` (postcard's
    /// bounds for the integer type read).
    #[inline(always)]
    fn varint(self, max: usize, last: u8) -> postcard::Result<u64> {
        self.0.varint_bounded(max, last)
    }

    /// A string in place, by the codec's own path ([`Reader::str`]), with postcard's
    /// errors.
    #[inline(always)]
    fn str(self) -> postcard::Result<&'de str> {
        self.0.str().map_err(|e| match e.0 {
            ErrorRepr::Codec(e) => e,
            _ => postcard::Error::DeserializeUnexpectedEnd,
        })
    }
}

/// Forwards deserializer methods to postcard's.
macro_rules! forward_de {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[inline]
            fn $name<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> postcard::Result<V::Value> {
                self.postcard(|d| d.$name($($arg,)* visitor))
            }
        )*
    };
}

impl<'de> Deserializer<'de> for TopReader<'_, 'de> {
    type Error = postcard::Error;

    fn is_human_readable(&self) -> bool {
        false
    }

    #[inline(always)]
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        visitor.visit_u32(self.varint(5, 0x0f)? as u32)
    }

    #[inline(always)]
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        visitor.visit_u64(self.varint(10, 0x01)?)
    }

    #[inline(always)]
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        let n = self.varint(5, 0x0f)? as u32;
        visitor.visit_i32(((n >> 1) as i32) ^ -((n & 1) as i32))
    }

    #[inline(always)]
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        let n = self.varint(10, 0x01)?;
        visitor.visit_i64(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    /// A string in place, its UTF-8 checked by the codec's short test
    /// ([`utf8`](super::utf8)); a `String` copies it out of the message once.
    #[inline(always)]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        visitor.visit_borrowed_str(self.str()?)
    }

    #[inline(always)]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        visitor.visit_borrowed_str(self.str()?)
    }

    /// An option's tag, then its value as a top-level value (see `Top::serialize_some`).
    #[inline(always)]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> postcard::Result<V::Value> {
        let r = self.0;
        match r.buf.get(r.pos) {
            Some(0) => {
                r.pos += 1;
                visitor.visit_none()
            }
            Some(1) => {
                r.pos += 1;
                visitor.visit_some(TopReader(r))
            }
            Some(_) => Err(postcard::Error::DeserializeBadOption),
            None => Err(postcard::Error::DeserializeUnexpectedEnd),
        }
    }

    forward_de! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Reader, Writer};
    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Serialize};

    /// `value` through the codec (in a slot of `slot` bytes, spilling past it) writes
    /// postcard's bytes, and reads back as postcard's bytes do, consuming them all.
    fn same_as_postcard<T>(value: &T, slot: usize)
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let theirs = postcard::to_stdvec(value).expect("postcard serializes it");
        let mut buf = vec![0u8; slot];
        let mut spill = Vec::new();
        let mut w = Writer::new(&mut buf, Some(&mut spill));
        w.serde(value).expect("the codec serializes it");
        let (len, spilled) = (w.pos(), w.spilled());
        let ours = if spilled { spill } else { buf[..len].to_vec() };
        assert_eq!(ours, theirs, "{value:?} in a slot of {slot}");
        let mut r = Reader::new(&theirs);
        assert_eq!(&r.serde::<T>().expect("the codec reads it"), value);
        assert_eq!(r.pos, theirs.len(), "{value:?}: every byte read");
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Mixed {
        a: u64,
        b: i32,
        s: String,
        v: Vec<i64>,
        o: Option<u32>,
        e: Shape,
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    enum Shape {
        Dot,
        Line(u64),
        Box { w: i64, h: u32 },
    }

    /// Integers of every width and sign, at the edges of each varint length, and values
    /// that go to postcard (compounds, other scalars) are written and read as postcard
    /// writes and reads them, in slots of every size around the value's.
    #[test]
    fn values_are_postcards() {
        let mut u = vec![0u64, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX)];
        u.extend([u64::MAX - 1, u64::MAX]);
        for slot in [0, 1, 2, 5, 9, 10, 11, 64] {
            for &n in &u {
                same_as_postcard(&n, slot);
                same_as_postcard(&(n as usize), slot);
                same_as_postcard(&(n as u32), slot);
                same_as_postcard(&(n as i64), slot);
                same_as_postcard(&(n as i32), slot);
                same_as_postcard(&(n as i64).wrapping_neg(), slot);
                same_as_postcard(&(n as i32).wrapping_neg(), slot);
                same_as_postcard(&(n as u16, n as i8, n as u8 as char), slot);
            }
            for n in [i64::MIN, i64::MAX, -1, -64, -65] {
                same_as_postcard(&n, slot);
                same_as_postcard(&(n as i32), slot);
            }
            same_as_postcard(&(true, 2.5f64, -1.5f32, 7u128, -7i128), slot);
            same_as_postcard(&Some(300u64), slot);
            same_as_postcard(&None::<u64>, slot);
            same_as_postcard(&"a string".to_string(), slot);
            for text in ["", "value-1f", "ключ", &"k".repeat(127), &"é".repeat(100)] {
                same_as_postcard(&text.to_string(), slot);
                same_as_postcard(&Some(text.to_string()), slot);
                same_as_postcard(&(text.to_string(), Some(text.len() as u64)), slot);
            }
            same_as_postcard(&None::<String>, slot);
            same_as_postcard(&Some(Some(-5i64)), slot);
            same_as_postcard(&Some(None::<u32>), slot);
            same_as_postcard(&Some(vec![Some(1u8), None]), slot);
            same_as_postcard(&vec![1u64, 300, 70_000], slot);
            same_as_postcard(&(), slot);
            for e in [Shape::Dot, Shape::Line(1 << 40), Shape::Box { w: -3, h: 4 }] {
                let m = Mixed {
                    a: 1 << 33,
                    b: -77,
                    s: "k".repeat(200),
                    v: vec![-1, i64::MAX],
                    o: Some(9),
                    e,
                };
                same_as_postcard(&m, slot);
            }
        }
    }

    /// Bytes that are not a value of the type read fail as postcard fails on them: an
    /// integer cut short, longer than the type's varint, or with a last byte past its
    /// bits; a string cut short or not UTF-8; an option with a bad tag.
    #[test]
    fn bad_bytes_fail_as_postcards() {
        let bad: [&[u8]; 6] = [
            &[],
            &[0x80],
            &[0xff; 10],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0xff, 0xff, 0xff, 0xff, 0x10],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ];
        fn both<T: DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
            let theirs = postcard::from_bytes::<T>(bytes).ok();
            let ours = Reader::new(bytes).serde::<T>().ok();
            assert_eq!(ours, theirs, "{bytes:x?} as {}", std::any::type_name::<T>());
        }
        for bytes in bad {
            both::<u64>(bytes);
            both::<i64>(bytes);
            both::<u32>(bytes);
            both::<i32>(bytes);
        }
        // Strings and options: cut short, a length past the bytes, a length that is no
        // varint, bytes that are not UTF-8 (in the short test's reach and past it), an
        // option's tag that is neither 0 nor 1.
        let bad: [&[u8]; 9] = [
            &[],
            &[3, b'a', b'b'],
            &[0xff; 11],
            &[2, 0xc3, 0x28],
            &[4, b'a', 0xff, b'b', b'c'],
            &[
                40, 0xe2, 0x82, 0x28, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37,
            ],
            &[2],
            &[1],
            &[1, 5, b'a'],
        ];
        for bytes in bad {
            both::<String>(bytes);
            both::<Option<String>>(bytes);
            both::<Option<u64>>(bytes);
            both::<Option<Option<String>>>(bytes);
        }
        for (bytes, kind) in [(&[1u8, 2, 0xc3, 0x28][..], "utf-8"), (&[2], "Option")] {
            let ours = Reader::new(bytes).serde::<Option<String>>().unwrap_err();
            let theirs = postcard::from_bytes::<Option<String>>(bytes).unwrap_err();
            assert_eq!(
                ours.to_string(),
                crate::serialization::Error::from(theirs).to_string()
            );
            assert!(ours.to_string().contains(kind), "{ours}");
        }
        let e = Reader::new(&[0x80]).serde::<u64>().unwrap_err();
        assert!(e.to_string().contains("end of buffer"), "{e}");
    }
}
