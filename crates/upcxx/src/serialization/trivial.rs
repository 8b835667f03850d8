//! [`Trivial<T>`]: one plain-old-data value as one memcpy (§6.2 ¶5). Sits on serde
//! only.

use std::marker::PhantomData;

use bytemuck::Pod;
use serde::{Deserialize, Serialize};

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
