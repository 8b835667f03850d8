//! Memory kinds: segments in the memory of a device (our extension of the GASNet-EX
//! API, shaped as later GASNet-EX releases add memory kinds: `gex_MK_Create` makes an
//! [`Mk`], `gex_Segment_Create` with that kind a [`DeviceSegment`]).
//!
//! ```
//! use gex::kinds::{KindError, Mk};
//!
//! // Without a CUDA driver (or without a device 0) the call says why.
//! match Mk::cuda(0) {
//!     Ok(mk) => println!("{mk:?}"),
//!     Err(e @ (KindError::NoDriver { .. } | KindError::NoSuchDevice { .. })) => println!("{e}"),
//!     Err(e) => panic!("{e}"),
//! }
//! ```
//!
//! A kind is a *class* of memory and one device of it: CUDA device memory
//! (`cuda_device`, through the driver API) or, with the feature `testing`, an emulated
//! device whose memory is ordinary host memory that only this module's copies touch,
//! so that the device-independent machinery is tested on machines without a GPU. Every
//! class implements one private `Device` trait (allocate, free, copy between its
//! memory and the host or within itself, and sharing its memory with other processes
//! of the host); what is above it (segments, range checks, the routing of transfers
//! between ranks) is written once, for every class.
//!
//! # Between ranks
//!
//! [`put`], [`get`] and [`copy`] name device memory of any rank by its device address
//! (`transfer`): this rank's through the registry of its segments (`registry`), another
//! rank's on this host mapped here and reached by one device copy (`ipc`: CUDA IPC, or
//! an emulated device's memory file), any other by Active Messages to its owner, whose
//! handler copies between the message and its device (`remote`). The files are leaves
//! of this one, in that order of use. Those calls are complete at return; [`put_nb`],
//! [`get_nb`] and [`copy_nb`] return a [`Transfer`] instead, which a transfer by
//! messages leaves in flight until the owner's answers.
//!
//! # CUDA without CUDA
//!
//! The CUDA class reaches the driver through `cudarc` with dynamic loading: the crate
//! builds with no CUDA installed, and the driver library (`libcuda.so`) is looked for
//! when a program first opens a CUDA kind. No library, no device, or a device id out of
//! range is a [`KindError`] naming the call, never a panic inside the driver bindings
//! (the library is probed before any of its functions is resolved).
//!
//! # Device addresses
//!
//! Device memory is named by a [`DeviceAddr`], an integer as CUDA's `CUdeviceptr` is: it
//! is not a host pointer, and nothing in this module dereferences it on the host.
//! Copies take a [`Src`] and a [`Dst`]: host memory (a slice) or a [`Range`] of a
//! segment.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod cuda;
#[cfg(feature = "testing")]
mod emulated;
mod error;
mod ipc;
mod registry;
mod remote;
mod transfer;

pub use error::KindError;
pub use transfer::{copy, copy_nb, get, get_nb, put, put_nb, Transfer};

/// Unmaps the device segments of other processes that this process mapped (client
/// finalization, before its barrier), so that their owners may free them after it.
pub(crate) fn close_imports() {
    ipc::close_all();
}

/// The handlers of transfers between ranks (registered by client initialization).
pub(crate) fn handler_entries() -> [crate::am::AmEntry; 8] {
    let [put, ack, get, data] = remote::handler_entries();
    let [ask, answer, forget, forgotten] = ipc::handler_entries();
    [put, ack, get, data, ask, answer, forget, forgotten]
}

/// An address in a device's memory (CUDA's `CUdeviceptr`): not dereferenceable on the
/// host.
pub type DeviceAddr = u64;

/// One end of a copy, as the [`Device`] of a kind sees it.
pub(crate) enum End<'a> {
    /// Host memory.
    Host(&'a [u8]),
    /// Host memory written by the copy.
    HostMut(&'a mut [u8]),
    /// Device memory of the kind.
    Device(DeviceAddr),
}

/// A class of device memory, bound to one device: the only place that talks to a
/// driver. Implementations check nothing above the driver: [`DeviceSegment`] checks
/// every range first.
pub(crate) trait Device: Send + Sync + fmt::Debug {
    /// The class's name (`cuda_device`), as in [`KindError`].
    fn class(&self) -> &'static str;
    /// The device's id within its class.
    fn id(&self) -> i32;
    /// Bytes of memory the device has in all.
    fn total_memory(&self) -> usize;
    /// Allocates `size` bytes of device memory.
    fn alloc(&self, call: &'static str, size: usize) -> Result<DeviceAddr, KindError>;
    /// Frees what [`alloc`](Device::alloc) returned.
    ///
    /// # Safety
    /// `addr` came from `alloc` on this device and is not used again.
    unsafe fn free(&self, addr: DeviceAddr);
    /// Whether `other` is this same device (whose memory one copy of the driver's
    /// reaches at both ends): by default the same class and id.
    fn same(&self, other: &dyn Device) -> bool {
        self.class() == other.class() && self.id() == other.id()
    }
    /// Whether `[addr, addr + len)` is memory of this device, inside one allocation.
    fn owns(&self, addr: DeviceAddr, len: usize) -> bool;
    /// The allocation of this device that holds `addr`: its base and size
    /// (`cuMemGetAddressRange`).
    fn allocation(&self, addr: DeviceAddr) -> Option<(DeviceAddr, usize)>;
    /// An opaque handle by which another process of this host maps the allocation at
    /// `base` (CUDA IPC's `cuIpcGetMemHandle`).
    fn export(&self, call: &'static str, base: DeviceAddr) -> Result<Vec<u8>, KindError>;
    /// Maps the `size`-byte allocation of another process that `handle` names into
    /// this process, where this device's copies reach it (`cuIpcOpenMemHandle`).
    ///
    /// # Safety
    /// `handle` came from [`export`](Device::export) of a device of this class on this
    /// host, for an allocation of `size` bytes that is not freed until the import is
    /// closed.
    unsafe fn import(
        &self,
        call: &'static str,
        handle: &[u8],
        size: usize,
    ) -> Result<DeviceAddr, KindError>;
    /// Unmaps what [`import`](Device::import) returned.
    ///
    /// # Safety
    /// `addr` came from `import` on this device and is not used again.
    unsafe fn close(&self, addr: DeviceAddr);
    /// Copies `len` bytes from `src` to `dst`; a host end holds exactly `len` bytes.
    ///
    /// # Safety
    /// Each device end is a range of `len` bytes of memory of this device, allocated
    /// and not freed; the two do not overlap.
    unsafe fn copy(
        &self,
        call: &'static str,
        dst: End<'_>,
        src: End<'_>,
        len: usize,
    ) -> Result<(), KindError>;
}

/// A memory kind bound to one device (GASNet-EX `gex_MK_t`): what segments of device
/// memory are created with. Cloning shares the device.
#[derive(Clone)]
pub struct Mk(Arc<Shared>);

struct Shared {
    dev: Box<dyn Device>,
    /// Bytes of the kind's live segments.
    allocated: AtomicUsize,
}

impl fmt::Debug for Mk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mk({} {})", self.0.dev.class(), self.0.dev.id())
    }
}

impl Mk {
    fn new(dev: Box<dyn Device>) -> Mk {
        Mk(Arc::new(Shared {
            dev,
            allocated: AtomicUsize::new(0),
        }))
    }

    /// The CUDA device `id` (GASNet-EX `gex_MK_Create` of class `GEX_MK_CLASS_CUDA_UVA`):
    /// loads the driver on first use and retains the device's primary context, released
    /// when the last clone and segment of the kind are dropped.
    pub fn cuda(id: i32) -> Result<Mk, KindError> {
        Ok(Mk::new(Box::new(cuda::Cuda::open(
            "gex::kinds::Mk::cuda",
            id,
        )?)))
    }

    /// How many CUDA devices this process sees: 0 with no driver installed.
    pub fn cuda_device_count() -> i32 {
        cuda::device_count("gex::kinds::Mk::cuda_device_count").unwrap_or(0)
    }

    /// An emulated device `id` with `total` bytes of memory, in host memory that only
    /// this module's copies touch: the device-independent machinery, tested without a
    /// GPU. Feature `testing` only.
    #[cfg(feature = "testing")]
    pub fn emulated(id: i32, total: usize) -> Mk {
        Mk::new(Box::new(emulated::Emulated::new(id, total)))
    }

    /// The class's name, as UPC++ names its memory kind (`cuda_device`).
    pub fn class(&self) -> &'static str {
        self.0.dev.class()
    }

    /// The device's id within its class.
    pub fn device_id(&self) -> i32 {
        self.0.dev.id()
    }

    /// Bytes of memory the device has in all.
    pub fn total_memory(&self) -> usize {
        self.0.dev.total_memory()
    }

    /// Whether `[addr, addr + len)` is memory of this kind's device (a pointer claimed
    /// to be device memory is checked with it before any copy).
    pub fn owns(&self, addr: DeviceAddr, len: usize) -> bool {
        self.0.dev.owns(addr, len)
    }

    /// Bytes of this kind's segments alive now (the device memory allocated through
    /// it and not yet freed; segments over the program's memory, [`DeviceSegment::wrap`],
    /// are not counted).
    pub fn allocated(&self) -> usize {
        self.0.allocated.load(Ordering::Relaxed)
    }

    /// Allocates `size` bytes of the device's memory outside any segment, as a program
    /// gets memory from its driver (`cuMemAlloc`): for tests of
    /// [`DeviceSegment::wrap`]. Feature `testing` only.
    #[cfg(feature = "testing")]
    pub fn alloc_unmanaged(&self, size: usize) -> Result<DeviceAddr, KindError> {
        self.0.dev.alloc("gex::kinds::Mk::alloc_unmanaged", size)
    }

    /// Frees what [`alloc_unmanaged`](Mk::alloc_unmanaged) returned. Feature `testing`
    /// only.
    ///
    /// # Safety
    /// `addr` came from `alloc_unmanaged` of this kind, and no segment holds it.
    #[cfg(feature = "testing")]
    pub unsafe fn free_unmanaged(&self, addr: DeviceAddr) {
        // SAFETY: the caller's guarantee.
        unsafe { self.0.dev.free(addr) }
    }

    fn same_device(&self, other: &Mk) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.dev.same(&*other.0.dev)
    }
}

/// A segment of device memory (GASNet-EX `gex_Segment_Create` with a device kind): `size`
/// bytes allocated on the kind's device when created and freed when dropped, or memory
/// of the program's that it manages ([`DeviceSegment::wrap`]), left to the program.
pub struct DeviceSegment {
    mk: Mk,
    base: DeviceAddr,
    size: usize,
    /// Whether the segment allocated its memory (and frees it).
    owned: bool,
}

impl fmt::Debug for DeviceSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceSegment({:?}, {:#x}, {} bytes)",
            self.mk, self.base, self.size
        )
    }
}

/// A range of a device segment: `len` bytes at `offset`.
#[derive(Debug, Clone, Copy)]
pub struct Range<'a> {
    /// The segment.
    pub segment: &'a DeviceSegment,
    /// The offset of the range in the segment.
    pub offset: usize,
    /// The range's length.
    pub len: usize,
}

/// The source of [`DeviceSegment::copy`]: host memory, or a range of a device segment.
#[derive(Debug, Clone, Copy)]
pub enum Src<'a> {
    /// Host memory.
    Host(&'a [u8]),
    /// A range of a device segment.
    Device(Range<'a>),
}

/// The destination of [`DeviceSegment::copy`]: host memory, or a range of a device
/// segment.
#[derive(Debug)]
pub enum Dst<'a> {
    /// Host memory.
    Host(&'a mut [u8]),
    /// A range of a device segment.
    Device(Range<'a>),
}

impl DeviceSegment {
    /// Allocates a segment of `size` bytes on the kind's device. A size of zero, or
    /// larger than the device's memory, is an error; so is one the device cannot
    /// allocate now.
    pub fn create(mk: &Mk, size: usize) -> Result<DeviceSegment, KindError> {
        const CALL: &str = "gex::kinds::DeviceSegment::create";
        if size == 0 {
            return Err(KindError::BadSize { call: CALL, size });
        }
        let total = mk.total_memory();
        if size > total {
            return Err(KindError::OutOfMemory {
                call: CALL,
                size,
                total,
            });
        }
        let base = mk.0.dev.alloc(CALL, size)?;
        mk.0.allocated.fetch_add(size, Ordering::Relaxed);
        let fresh = registry::add(mk, base, size);
        debug_assert!(fresh, "a new allocation overlaps no segment");
        Ok(DeviceSegment {
            mk: mk.clone(),
            base,
            size,
            owned: true,
        })
    }

    /// A segment over `size` bytes of the kind's device memory at `base` that the
    /// program allocated itself (GASNet-EX `gex_Segment_Create` with client-allocated
    /// memory; UPC++ §16.1.2 ¶13): transfers reach it as any segment, and dropping it
    /// leaves the memory to the program. A size of zero, memory that is not the
    /// device's (in one allocation), and memory a segment of this process already holds
    /// are errors.
    ///
    /// # Safety
    /// The memory stays allocated until the segment is dropped, and nothing but
    /// transfers through segments writes it meanwhile.
    pub unsafe fn wrap(mk: &Mk, base: DeviceAddr, size: usize) -> Result<DeviceSegment, KindError> {
        const CALL: &str = "gex::kinds::DeviceSegment::wrap";
        if size == 0 {
            return Err(KindError::BadSize { call: CALL, size });
        }
        if !mk.owns(base, size) {
            return Err(KindError::NotDeviceMemory {
                call: CALL,
                addr: base,
                kind: format!("{} {} ({size} bytes)", mk.class(), mk.device_id()),
            });
        }
        if !registry::add(mk, base, size) {
            return Err(KindError::InUse {
                call: CALL,
                addr: base,
                size,
            });
        }
        Ok(DeviceSegment {
            mk: mk.clone(),
            base,
            size,
            owned: false,
        })
    }

    /// The kind (and device) of the segment's memory.
    pub fn kind(&self) -> &Mk {
        &self.mk
    }

    /// The device address of the segment's first byte.
    pub fn base(&self) -> DeviceAddr {
        self.base
    }

    /// The segment's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The offset of the device address `addr` in this segment, if `len` bytes from
    /// it lie inside.
    pub fn offset_of(&self, addr: DeviceAddr, len: usize) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        (off.checked_add(len)? <= self.size).then_some(off)
    }

    fn check(
        &self,
        call: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<DeviceAddr, KindError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(self.base + offset as u64),
            _ => Err(KindError::OutOfSegment {
                call,
                offset,
                len,
                size: self.size,
            }),
        }
    }

    /// Copies `src` into `dst`, either end host memory or a range of a device segment
    /// (this one or another, of this kind or another): host to device, device to host,
    /// device to device on one device or between two, and host to host. The lengths
    /// must match, every device range must lie in its segment, and two ranges of one
    /// segment must not overlap; nothing is copied otherwise. Complete at return.
    pub fn copy(dst: Dst<'_>, src: Src<'_>) -> Result<(), KindError> {
        const CALL: &str = "gex::kinds::DeviceSegment::copy";
        let (dst_len, src_len) = (dst.len(), src.len());
        if dst_len != src_len {
            return Err(KindError::LengthMismatch {
                call: CALL,
                dst: dst_len,
                src: src_len,
            });
        }
        let len = dst_len;
        match (dst, src) {
            (Dst::Host(to), Src::Host(from)) => {
                to.copy_from_slice(from);
                Ok(())
            }
            (Dst::Host(to), Src::Device(r)) => {
                let a = r.segment.check(CALL, r.offset, len)?;
                // SAFETY: the range lies in its segment, allocated while borrowed.
                unsafe {
                    r.segment
                        .mk
                        .0
                        .dev
                        .copy(CALL, End::HostMut(to), End::Device(a), len)
                }
            }
            (Dst::Device(r), Src::Host(from)) => {
                let a = r.segment.check(CALL, r.offset, len)?;
                // SAFETY: as above.
                unsafe {
                    r.segment
                        .mk
                        .0
                        .dev
                        .copy(CALL, End::Device(a), End::Host(from), len)
                }
            }
            (Dst::Device(d), Src::Device(s)) => {
                let (da, sa) = (
                    d.segment.check(CALL, d.offset, len)?,
                    s.segment.check(CALL, s.offset, len)?,
                );
                if std::ptr::eq(d.segment, s.segment)
                    && da < sa + len as u64
                    && sa < da + len as u64
                {
                    return Err(KindError::Overlap {
                        call: CALL,
                        dst: d.offset,
                        src: s.offset,
                        len,
                    });
                }
                if d.segment.mk.same_device(&s.segment.mk) {
                    // SAFETY: both ranges lie in segments of this device and do not
                    // overlap (one segment: checked; two: disjoint allocations).
                    return unsafe {
                        d.segment
                            .mk
                            .0
                            .dev
                            .copy(CALL, End::Device(da), End::Device(sa), len)
                    };
                }
                // Two devices (or two classes): through host memory, in pieces so that
                // a large copy needs no large buffer.
                let mut bounce = vec![0u8; len.min(BOUNCE)];
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(BOUNCE);
                    let buf = &mut bounce[..n];
                    let off = done as u64;
                    // SAFETY: each piece lies in its checked range.
                    unsafe {
                        s.segment.mk.0.dev.copy(
                            CALL,
                            End::HostMut(buf),
                            End::Device(sa + off),
                            n,
                        )?;
                        d.segment
                            .mk
                            .0
                            .dev
                            .copy(CALL, End::Device(da + off), End::Host(buf), n)?;
                    }
                    done += n;
                }
                Ok(())
            }
        }
    }
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Host(s) => s.len(),
            Src::Device(r) => r.len,
        }
    }
}

impl Dst<'_> {
    fn len(&self) -> usize {
        match self {
            Dst::Host(s) => s.len(),
            Dst::Device(r) => r.len,
        }
    }
}

/// The piece of a copy between two devices staged in host memory.
pub(super) const BOUNCE: usize = 4 << 20;

impl Drop for DeviceSegment {
    fn drop(&mut self) {
        // No transfer finds the segment from here on, and none runs in it now; the
        // processes that map it unmap it first.
        let importers = registry::remove(self.base);
        ipc::forget(self.base, &importers);
        if self.owned {
            // SAFETY: allocated by `create` on this device; the segment is gone after
            // this.
            unsafe { self.mk.0.dev.free(self.base) };
            self.mk.0.allocated.fetch_sub(self.size, Ordering::Relaxed);
        }
    }
}
