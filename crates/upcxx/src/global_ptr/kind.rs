//! Memory kinds (UPC++ spec §3.2 ¶3, ch. 16): the run-time [`KindId`] every global
//! pointer carries and the sealed [`MemoryKind`] types of its static kind parameter. A
//! leaf of `global_ptr` (see the module docs, "Memory kinds").

use std::fmt;
use std::hash::Hash;

/// The run-time identity of a memory kind (UPC++ spec §3.2 ¶3 `memory_kind`).
///
/// `Any` is only ever a *static* kind ([`AnyKind::ID`]); [`GlobalPtr::dynamic_kind`](super::GlobalPtr::dynamic_kind)
/// of a non-null pointer is never `Any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum KindId {
    /// UPC++ spec §3.2 ¶3 `memory_kind::any`: any kind of memory.
    Any = 0,
    /// UPC++ spec §3.2 ¶3 `memory_kind::host`: the shared segments in host memory.
    Host = 1,
    /// UPC++ spec §3.2 ¶3 `memory_kind::cuda_device`: memory of a CUDA device (ch. 16).
    CudaDevice = 2,
}

impl KindId {
    pub(super) fn from_u8(v: u8) -> Option<KindId> {
        match v {
            0 => Some(KindId::Any),
            1 => Some(KindId::Host),
            2 => Some(KindId::CudaDevice),
            _ => None,
        }
    }

    /// The code a pointer stores for its dynamic kind: 0 for host memory, so that the
    /// all-zero pointer is the null pointer (a zeroed segment holds nulls), then the
    /// device kinds. `Any` is never a pointer's dynamic kind.
    pub(super) const fn code(self) -> u16 {
        match self {
            KindId::Host | KindId::Any => 0,
            KindId::CudaDevice => 1,
        }
    }

    /// The kind a pointer's stored code stands for; `None` for a code no pointer stores
    /// (its bytes came from memory that never held a pointer).
    pub(super) const fn from_code(code: u16) -> Option<KindId> {
        match code {
            0 => Some(KindId::Host),
            1 => Some(KindId::CudaDevice),
            _ => None,
        }
    }

    /// How messages name the kind a pointer's stored `code` stands for: the kind's
    /// name, or the code itself if it names none.
    pub(super) fn describe(code: u16) -> String {
        match KindId::from_code(code) {
            Some(kind) => kind.name().to_owned(),
            None => format!("kind code {code}"),
        }
    }

    /// The spec's name of the kind (`host`, `any`, `cuda_device`).
    pub const fn name(self) -> &'static str {
        match self {
            KindId::Any => "any",
            KindId::Host => "host",
            KindId::CudaDevice => "cuda_device",
        }
    }
}

impl fmt::Display for KindId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A memory kind as a type (UPC++ spec §3.2 ¶4 the `Kind` parameter of `global_ptr`).
///
/// Sealed: the kinds are [`Host`], [`CudaDeviceKind`] and [`AnyKind`].
pub trait MemoryKind:
    sealed::Sealed
    + Copy
    + Default
    + fmt::Debug
    + PartialEq
    + Eq
    + Hash
    + PartialOrd
    + Ord
    + Send
    + Sync
    + 'static
{
    /// The run-time identity of this kind (UPC++ spec §3.2 ¶10 `global_ptr::kind`).
    const ID: KindId;
}

/// UPC++ spec §3.2 ¶3 `memory_kind::host`: host memory in a shared segment. The default
/// kind of [`GlobalPtr`](super::GlobalPtr).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Host;

/// UPC++ spec §3.2 ¶3 `memory_kind::any`: a pointer that may reference memory of any
/// kind; its [`GlobalPtr::dynamic_kind`](super::GlobalPtr::dynamic_kind) says which.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AnyKind;

/// UPC++ spec §3.2 ¶3 `memory_kind::cuda_device`: memory of a CUDA device, allocated by
/// a [`DeviceAllocator`](crate::DeviceAllocator) of a [`CudaDevice`](crate::CudaDevice)
/// (ch. 16). Never local: the host cannot load or store it; `copy` moves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaDeviceKind;

impl sealed::Sealed for Host {}
impl sealed::Sealed for AnyKind {}
impl sealed::Sealed for CudaDeviceKind {}

impl MemoryKind for Host {
    const ID: KindId = KindId::Host;
}

impl MemoryKind for AnyKind {
    const ID: KindId = KindId::Any;
}

impl MemoryKind for CudaDeviceKind {
    const ID: KindId = KindId::CudaDevice;
}

/// UPC++ spec §3.2 ¶96: a kind cast is allowed only between equal kinds, or to or from
/// [`AnyKind`].
pub(super) const fn kinds_convertible(from: KindId, to: KindId) -> bool {
    from as u8 == to as u8 || from as u8 == KindId::Any as u8 || to as u8 == KindId::Any as u8
}
