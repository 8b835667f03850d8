//! The standard traits of [`GlobalPtr`]: plain data (`Clone`, `Copy`, `Default`),
//! comparison and hashing (UPC++ spec §3.2 ¶74–¶84), printing (¶86), serialization
//! (¶6) and pointer arithmetic (¶52–¶69). Implemented by hand so that they hold
//! whatever `T` is.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Add, AddAssign, Sub, SubAssign};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{address_overflow, GlobalPtr, KindId, MemoryKind};
use crate::runtime::state::Rank;

impl<T, K: MemoryKind> Clone for GlobalPtr<T, K> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, K: MemoryKind> Copy for GlobalPtr<T, K> {}

// SAFETY: all zero bits are a valid pointer, the null pointer (`KindId::code` of host
// is 0): the fields are integers and the marker is zero-sized.
unsafe impl<T: 'static, K: MemoryKind> bytemuck::Zeroable for GlobalPtr<T, K> {}

/// UPC++ spec §3.2 ¶6: a global pointer is DefinitelyTriviallySerializable, so it is
/// [`bytemuck::Pod`], the element types of RMA, collectives and views here: it may be
/// put, got, broadcast, reduced, stored in a segment or in a `Pod` struct. Any bytes
/// make a pointer (in UPC++ one that never held a pointer is undefined behaviour):
/// every null compares, hashes, prints and serializes as `null()`; a pointer is used as
/// what its static kind says, and its rank and address are checked where it is used as
/// every pointer's are; a kind code that names no kind fails where the kind is asked
/// for ([`GlobalPtr::dynamic_kind`]) and where the pointer is serialized.
// SAFETY: `repr(C)` with integer fields only (`usize`, `u32`, `u16`, `u16`) and no
// padding (asserted below), every bit pattern of which is a value of the field; the
// marker is zero-sized. No unsafe code relies on a pointer's rank, address, kind or
// device being valid: every use checks them against the job, the segments or the
// devices (`local`, `rt().direct_range`, gex's checks).
unsafe impl<T: 'static, K: MemoryKind> bytemuck::Pod for GlobalPtr<T, K> {}

const _: () = assert!(
    std::mem::size_of::<GlobalPtr<u8>>()
        == std::mem::size_of::<usize>() + std::mem::size_of::<Rank>() + 4,
    "a GlobalPtr has padding, so it cannot be Pod"
);

/// UPC++ spec §3.2 ¶12: the default pointer is null.
impl<T, K: MemoryKind> Default for GlobalPtr<T, K> {
    #[inline]
    fn default() -> Self {
        Self::null()
    }
}

/// UPC++ spec §3.2 ¶74–¶76: equal iff both null, or same rank, kind and address.
impl<T, K: MemoryKind> PartialEq for GlobalPtr<T, K> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T, K: MemoryKind> Eq for GlobalPtr<T, K> {}

impl<T, K: MemoryKind> GlobalPtr<T, K> {
    /// What equality, order and hashing compare: the owner, the kind, the device (two
    /// devices of one process may use the same addresses, and pointers into them are
    /// equal only on the same device, §3.2 ¶76) and the address; every null alike (a
    /// null made of bytes read from memory may have other parts than `null()`'s; every
    /// constructor makes the canonical one).
    #[inline]
    fn key(&self) -> (Rank, u16, u16, usize) {
        if self.is_null() {
            (0, KindId::Host.code(), 0, 0)
        } else {
            (self.rank, self.kind, self.device, self.addr)
        }
    }
}

/// UPC++ spec §3.2 ¶77, ¶84: the strict total order of `std::less`, by (rank, kind,
/// device, address); within one array it orders by index, as the comparison operators
/// do.
impl<T, K: MemoryKind> Ord for GlobalPtr<T, K> {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// UPC++ spec §3.2 ¶74 `operator<` & co.: see [`Ord`].
impl<T, K: MemoryKind> PartialOrd for GlobalPtr<T, K> {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// UPC++ spec §3.2 ¶83 `std::hash<global_ptr>`: consistent with equality.
impl<T, K: MemoryKind> Hash for GlobalPtr<T, K> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

/// UPC++ spec §3.2 ¶86 `operator<<`: `(gp: rank 2, 0x7f0000001000)`, `(gp: rank 2,
/// cuda_device, device 0, 0x...)` for memory of device 0, `(gp: null)`. Equal
/// pointers and only equal pointers print alike.
impl<T, K: MemoryKind> fmt::Display for GlobalPtr<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            f.write_str("(gp: null)")
        } else if self.kind == KindId::Host.code() {
            write!(f, "(gp: rank {}, {:#x})", self.rank, self.addr)
        } else {
            write!(
                f,
                "(gp: rank {}, {}, device {}, {:#x})",
                self.rank,
                KindId::describe(self.kind),
                self.device,
                self.addr
            )
        }
    }
}

impl<T, K: MemoryKind> fmt::Debug for GlobalPtr<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalPtr<{}, {:?}>{self}",
            std::any::type_name::<T>(),
            K::default()
        )
    }
}

/// UPC++ spec §3.2 ¶6 (DefinitelyTriviallySerializable): a pointer travels as
/// `(rank, kind, address, device)`.
impl<T, K: MemoryKind> Serialize for GlobalPtr<T, K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_null() {
            // Every null as `null()` is, whatever its other parts.
            return (0 as Rank, KindId::Host as u8, 0u64, 0u16).serialize(s);
        }
        let Some(kind) = KindId::from_code(self.kind) else {
            return Err(serde::ser::Error::custom(format!(
                "a global pointer with {} cannot be serialized",
                KindId::describe(self.kind)
            )));
        };
        (self.rank, kind as u8, self.addr as u64, self.device).serialize(s)
    }
}

impl<'de, T, K: MemoryKind> Deserialize<'de> for GlobalPtr<T, K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (rank, kind, addr, device) = <(Rank, u8, u64, u16)>::deserialize(d)?;
        let addr = usize::try_from(addr)
            .map_err(|_| D::Error::custom(format!("global pointer address {addr:#x} too wide")))?;
        let kind = KindId::from_u8(kind)
            .filter(|&k| k != KindId::Any)
            .ok_or_else(|| D::Error::custom(format!("invalid memory kind {kind}")))?;
        if addr != 0 && K::ID != KindId::Any && kind != K::ID {
            return Err(D::Error::custom(format!(
                "a pointer to {kind} memory cannot be a GlobalPtr of kind {}",
                K::ID
            )));
        }
        if kind == KindId::Host && device != 0 {
            return Err(D::Error::custom(format!(
                "a pointer to host memory names device {device}"
            )));
        }
        Ok(GlobalPtr::from_device_parts(rank, addr, kind, device))
    }
}

// Arithmetic operators (UPC++ spec §3.2 ¶52, ¶58, ¶64, ¶69).

/// UPC++ spec §3.2 ¶52 `ptr + diff`.
impl<T, K: MemoryKind> Add<isize> for GlobalPtr<T, K> {
    type Output = Self;
    #[inline]
    #[track_caller]
    fn add(self, n: isize) -> Self {
        self.offset_by("GlobalPtr + isize", n)
    }
}

/// UPC++ spec §3.2 ¶52 `diff + ptr`.
impl<T, K: MemoryKind> Add<GlobalPtr<T, K>> for isize {
    type Output = GlobalPtr<T, K>;
    #[inline]
    #[track_caller]
    fn add(self, p: GlobalPtr<T, K>) -> GlobalPtr<T, K> {
        p.offset_by("isize + GlobalPtr", self)
    }
}

/// UPC++ spec §3.2 ¶52 `operator+=`, ¶69 `operator++` (`+= 1`).
impl<T, K: MemoryKind> AddAssign<isize> for GlobalPtr<T, K> {
    #[inline]
    #[track_caller]
    fn add_assign(&mut self, n: isize) {
        *self = self.offset_by("GlobalPtr += isize", n);
    }
}

/// UPC++ spec §3.2 ¶58 `ptr - diff`.
impl<T, K: MemoryKind> Sub<isize> for GlobalPtr<T, K> {
    type Output = Self;
    #[inline]
    #[track_caller]
    fn sub(self, n: isize) -> Self {
        match n.checked_neg() {
            Some(m) => self.offset_by("GlobalPtr - isize", m),
            None => address_overflow("GlobalPtr - isize", self.rank, self.addr),
        }
    }
}

/// UPC++ spec §3.2 ¶58 `operator-=`, ¶69 `operator--` (`-= 1`).
impl<T, K: MemoryKind> SubAssign<isize> for GlobalPtr<T, K> {
    #[inline]
    #[track_caller]
    fn sub_assign(&mut self, n: isize) {
        *self = *self - n;
    }
}

/// UPC++ spec §3.2 ¶64 `ptr - ptr`: see [`GlobalPtr::offset_from`].
impl<T, K: MemoryKind> Sub for GlobalPtr<T, K> {
    type Output = isize;
    #[inline]
    #[track_caller]
    fn sub(self, origin: Self) -> isize {
        self.offset_from(origin)
    }
}
