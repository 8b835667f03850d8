//! Memory kinds (UPC++ spec ch. 16): devices, their allocators, and `copy` between
//! memory of any kind on any rank.
//!
//! ```
//! use upcxx::{CudaDevice, DeviceAllocator};
//!
//! upcxx::init();
//! // Device 0 where there is one; inactive (and so without an allocator) elsewhere.
//! let id = if CudaDevice::device_count() > 0 { 0 } else { CudaDevice::INVALID_DEVICE_ID };
//! let mut gpu = CudaDevice::new(id).expect("device 0");
//! if gpu.is_active() {
//!     let alloc = DeviceAllocator::new(&mut gpu, 1 << 20).unwrap();
//!     let dev = alloc.allocate::<f64>(1024);
//!     let host = upcxx::new_array::<f64>(1024);
//!     upcxx::copy(host, dev, 1024).wait(); // host to device
//!     upcxx::copy(dev, host, 1024).wait(); // and back
//!     alloc.deallocate(dev);
//!     upcxx::delete_array(host);
//! }
//! gpu.destroy(upcxx::EntryBarrier::User);
//! upcxx::finalize();
//! ```
//!
//! A [`CudaDevice`] is created collectively over the world (§16.1.1 ¶17); its
//! [`DeviceAllocator`] owns a device segment (`gex::kinds::DeviceSegment`) and hands
//! out global pointers of kind [`CudaDeviceKind`] from it. The segment's memory is
//! managed out of band (device memory cannot hold an allocator's own bookkeeping) by
//! `range-alloc`, the range allocator of the `wgpu` project, behind a lock: any thread
//! may allocate (progress level none).
//!
//! # Copies
//!
//! [`copy`] moves `count` values between two global pointers of any kinds, on any
//! ranks; [`copy_from_host`] and [`copy_to_host`] have a host slice at one end
//! (§16.1.3). Host memory this process maps is read or written in place; other host
//! memory moves with gex RMA; device memory with `gex::kinds::put`, `get` and `copy`,
//! which reach another rank's device with Active Messages to its owner. A copy
//! between two places neither of which this process can reach in place bounces
//! through this process's memory in pieces of 4 MiB. Every copy finishes before the
//! call returns (the calls make internal progress, §16.1.3 ¶9), so a host slice is
//! borrowed only for the call; its notifications are delivered as chapter 7 says:
//! futures and promises at the next user-level progress, a remote-completion RPC run
//! by the destination's owner (the caller, for [`copy_to_host`]; ¶4).
//!
//! GASP: `GASP_UPCXX_COPY` around each copy (the transfers inside are not reported),
//! `GASP_UPCXX_DEVICE_CONSTRUCT` and `_DESTROY` around the collective device calls,
//! `GASP_UPCXX_DEVICE_SEGMENT` around the allocation of an allocator's segment, and
//! `GASP_UPCXX_DEVICE_ALLOC` and `_FREE` around allocations in it.
//!
//! A device without CUDA: [`CudaDevice::new`] with a valid id fails with the reason
//! (no driver, no such device), as `gex::kinds::Mk::cuda` reports it; with
//! [`CudaDevice::INVALID_DEVICE_ID`] it makes an inactive device (¶6).

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use bytemuck::Pod;
use gex::kinds::{DeviceAddr, DeviceSegment, KindError, Mk};
use range_alloc::RangeAllocator;

use crate::completion::{
    operation_cx, CompletionEvents, Completions, FutureList, HasOperation, HasRemote, HasSource,
    Returned,
};
use crate::global_ptr::{CudaDeviceKind, GlobalPtr, KindId, MemoryKind};
use crate::runtime::state::{check_init, rt, Rank, Setup};
use crate::team::{check_collective, EntryBarrier};

/// A kind of device (UPC++ spec ch. 16 "Device" types): what [`DeviceAllocator`] is
/// generic over. Sealed: [`CudaDevice`] is the one device type.
pub trait Device: sealed::Sealed {
    /// The memory kind of the device's memory (`Device::kind`, §16.1.1 ¶11).
    type Kind: MemoryKind;
    /// The id of no device (`Device::invalid_device_id`, §16.1.1 ¶13).
    const INVALID_DEVICE_ID: i32;
    /// The device's id, or [`Self::INVALID_DEVICE_ID`] if inactive.
    fn device_id(&self) -> i32;
    /// Whether the device is active.
    fn is_active(&self) -> bool;
    /// The device's memory kind in gex, and whether an allocator was made of it yet;
    /// `None` if inactive.
    #[doc(hidden)]
    fn state(&mut self) -> Option<(&Mk, &mut bool)>;
}

mod sealed {
    pub trait Sealed {}
}

/// A CUDA device (UPC++ spec §16.1.1 `cuda_device`): this process's representative of
/// a collective device, or an inactive one.
#[derive(Debug, Default)]
pub struct CudaDevice {
    /// The device's kind; `None` if inactive.
    mk: Option<Mk>,
    /// Whether a [`DeviceAllocator`] was made of it (§16.1.2 ¶8: only one).
    allocated: bool,
}

impl sealed::Sealed for CudaDevice {}

impl Device for CudaDevice {
    type Kind = CudaDeviceKind;
    const INVALID_DEVICE_ID: i32 = -1;

    fn device_id(&self) -> i32 {
        self.mk
            .as_ref()
            .map_or(Self::INVALID_DEVICE_ID, |mk| mk.device_id())
    }

    fn is_active(&self) -> bool {
        self.mk.is_some()
    }

    fn state(&mut self) -> Option<(&Mk, &mut bool)> {
        let CudaDevice { mk, allocated } = self;
        mk.as_ref().map(|mk| (mk, allocated))
    }
}

impl CudaDevice {
    /// §16.1.1 ¶13 `cuda_device::invalid_device_id`.
    pub const INVALID_DEVICE_ID: i32 = -1;
    /// §16.1.1 ¶11 `cuda_device::kind`.
    pub const KIND: KindId = KindId::CudaDevice;

    /// §16.1.1 ¶16: the device `device_id` as this process's part of a collective
    /// device, or an inactive device for [`CudaDevice::INVALID_DEVICE_ID`]. Collective
    /// over the world team, on the thread holding the master persona; it makes internal
    /// progress (¶20) and returns once every rank has opened its device.
    ///
    /// A valid id this process cannot open (no CUDA driver, no device with that id) is
    /// the error `gex::kinds::Mk::cuda` gives, after the collective part.
    ///
    /// # Panics
    /// Before `init`, off the master persona's thread, or in a restricted context.
    #[track_caller]
    pub fn new(device_id: i32) -> Result<CudaDevice, KindError> {
        const CALL: &str = "cuda_device::cuda_device";
        let opened = (device_id != Self::INVALID_DEVICE_ID).then(|| Mk::cuda(device_id));
        Self::collective(CALL, opened)
    }

    /// A device of another `gex` memory kind standing in for a CUDA device: with the
    /// `gex` feature `testing`, an emulated device (`gex::kinds::Mk::emulated`), so that
    /// programs and tests of memory kinds run without a GPU. Collective, as
    /// [`CudaDevice::new`].
    #[track_caller]
    pub fn with_kind(mk: Mk) -> CudaDevice {
        Self::collective("cuda_device::with_kind", Some(Ok(mk))).expect("a kind given")
    }

    #[track_caller]
    fn collective(
        call: &str,
        opened: Option<Result<Mk, KindError>>,
    ) -> Result<CudaDevice, KindError> {
        let rt = rt(call);
        check_collective(call);
        if let Some(Ok(mk)) = &opened {
            if mk.device_id() > i32::from(u16::MAX) {
                panic!("upcxx::{call}: device id {} is too large", mk.device_id());
            }
        }
        let device = match &opened {
            Some(Ok(mk)) => mk.device_id(),
            _ => Self::INVALID_DEVICE_ID,
        };
        let kind = Self::KIND as i32;
        let span = gasp::span!(GASP_UPCXX_DEVICE_CONSTRUCT, kind, device);
        // Every rank takes part, whether or not its device opened.
        rt.team.barrier_nb().wait();
        gasp::end!(span, kind, device);
        match opened {
            None => Ok(CudaDevice::default()),
            Some(Ok(mk)) => Ok(CudaDevice {
                mk: Some(mk),
                allocated: false,
            }),
            Some(Err(e)) => Err(e),
        }
    }

    /// An inactive device (§16.1.1 ¶14, the default constructor).
    pub fn inactive() -> CudaDevice {
        CudaDevice::default()
    }

    /// How many CUDA devices this process sees: 0 without a CUDA driver.
    pub fn device_count() -> i32 {
        Mk::cuda_device_count()
    }

    /// §16.1.1 ¶35 `device_id`: the device's id, or [`CudaDevice::INVALID_DEVICE_ID`] if
    /// inactive.
    pub fn device_id(&self) -> i32 {
        Device::device_id(self)
    }

    /// §16.1.1 ¶38 `is_active`.
    pub fn is_active(&self) -> bool {
        Device::is_active(self)
    }

    /// §16.1.1 ¶9 `default_alignment<T>`: the alignment of a `T` on the device.
    pub const fn default_alignment<T>() -> usize {
        std::mem::align_of::<T>()
    }

    /// §16.1.1 ¶24 `destroy`: collective over the world team (on the master persona's
    /// thread), after the entry barrier `lev`; deactivates this device. Memory of its
    /// allocator must not be used afterwards (¶27); the allocator, dropped, frees it.
    ///
    /// # Panics
    /// Before `init`, off the master persona's thread, or in a restricted context.
    #[track_caller]
    pub fn destroy(&mut self, lev: EntryBarrier) {
        const CALL: &str = "cuda_device::destroy";
        let rt = rt(CALL);
        check_collective(CALL);
        let (kind, device) = (Self::KIND as i32, self.device_id());
        let span = gasp::span!(GASP_UPCXX_DEVICE_DESTROY, kind, device);
        match lev {
            EntryBarrier::User => {
                let mut ev = rt.team.barrier_nb();
                crate::progress::wait_until(|| ev.test());
            }
            EntryBarrier::Internal => rt.team.barrier_nb().wait(),
            EntryBarrier::None => {}
        }
        self.mk = None;
        gasp::end!(span, kind, device);
    }
}

impl Drop for CudaDevice {
    /// §16.1.1 ¶31: an active device must have been destroyed unless UPC++ was
    /// finalized since.
    fn drop(&mut self) {
        if self.mk.is_some() && crate::initialized() && !std::thread::panicking() {
            panic!(
                "upcxx::cuda_device::~cuda_device: device {} was dropped active, without \
                 destroy(), while UPC++ is initialized (UPC++ spec §16.1.1 ¶31)",
                self.device_id()
            );
        }
    }
}

/// The memory allocator of a device (UPC++ spec §16.1.2 `device_allocator`): a device
/// segment of its own, from which it allocates.
pub struct DeviceAllocator<D: Device> {
    state: Option<Arc<AllocState>>,
    _device: PhantomData<fn() -> D>,
}

struct AllocState {
    segment: DeviceSegment,
    device: u16,
    /// Free ranges of the segment, as offsets.
    heap: Mutex<Heap>,
}

struct Heap {
    free: RangeAllocator<u64>,
    /// The range each live allocation took (its start may lie below the pointer, for
    /// the alignment), by the pointer's offset.
    live: std::collections::HashMap<u64, Range<u64>>,
}

impl AllocState {
    /// The device address of room for `n` values of `size` bytes aligned to `align`,
    /// if the segment has it.
    fn allocate(&self, n: usize, size: usize, align: usize) -> Option<DeviceAddr> {
        // A zero-sized request still gets its own address, as `malloc(0)` may.
        let len = n.checked_mul(size)?.max(1) as u64;
        let base = self.segment.base();
        let mut heap = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
        // Aligned as a device address (the segment's base is 256-aligned under CUDA).
        let range = heap.free.allocate_range(len + align as u64 - 1).ok()?;
        let at = (base + range.start).next_multiple_of(align as u64) - base;
        heap.live.insert(at, range);
        Some(base + at)
    }
}

impl<D: Device> std::fmt::Debug for DeviceAllocator<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.state {
            Some(s) => write!(f, "DeviceAllocator({:?})", s.segment),
            None => f.write_str("DeviceAllocator(invalid)"),
        }
    }
}

impl<D: Device> Default for DeviceAllocator<D> {
    /// §16.1.2 ¶5: an invalid allocator.
    fn default() -> Self {
        DeviceAllocator {
            state: None,
            _device: PhantomData,
        }
    }
}

impl<D: Device> DeviceAllocator<D> {
    /// §16.1.2 ¶7: an allocator of `device`, managing a segment of `size` bytes that
    /// it allocates on the device now and frees when dropped. An error if the device
    /// cannot allocate it (¶9: `std::bad_alloc`).
    ///
    /// # Panics
    /// If `device` is inactive or already has an allocator (¶8), or before `init`.
    #[track_caller]
    pub fn new(device: &mut D, size: usize) -> Result<Self, KindError> {
        const CALL: &str = "device_allocator::device_allocator";
        check_init(CALL);
        let id = device.device_id();
        let Some((mk, allocated)) = device.state() else {
            panic!("upcxx::{CALL}: the device is inactive (UPC++ spec §16.1.2 ¶8)");
        };
        if *allocated {
            panic!(
                "upcxx::{CALL}: device {id} already has a device_allocator (UPC++ spec \
                 §16.1.2 ¶8: one per device)"
            );
        }
        let span = gasp::span!(GASP_UPCXX_DEVICE_SEGMENT, id, size);
        let segment = DeviceSegment::create(mk, size);
        gasp::end!(span, id, size);
        let segment = segment?;
        *allocated = true;
        Ok(DeviceAllocator {
            state: Some(Arc::new(AllocState {
                segment,
                device: id as u16,
                heap: Mutex::new(Heap {
                    free: RangeAllocator::new(0..size as u64),
                    live: Default::default(),
                }),
            })),
            _device: PhantomData,
        })
    }

    #[track_caller]
    fn state(&self, call: &str) -> &AllocState {
        match &self.state {
            Some(s) => s,
            None => panic!("upcxx::{call}: the device_allocator is invalid (default-made)"),
        }
    }

    /// §16.1.2 ¶24 `allocate<T>(n)`: room for `n` values of `T`, aligned for `T`, or
    /// null if the segment has no such room. The memory is uninitialized.
    #[track_caller]
    pub fn allocate<T>(&self, n: usize) -> GlobalPtr<T, D::Kind> {
        self.allocate_aligned(n, std::mem::align_of::<T>())
    }

    /// §16.1.2 ¶24 `allocate<T, alignment>(n)`: as [`allocate`](Self::allocate), aligned
    /// to `align` (a power of two).
    ///
    /// # Panics
    /// If `align` is not a power of two, or the allocator is invalid.
    #[track_caller]
    pub fn allocate_aligned<T>(&self, n: usize, align: usize) -> GlobalPtr<T, D::Kind> {
        const CALL: &str = "device_allocator::allocate";
        let st = self.state(CALL);
        if !align.is_power_of_two() {
            panic!("upcxx::{CALL}: alignment {align} is not a power of two");
        }
        let (me, device) = (rt(CALL).rank, i32::from(st.device));
        let nbytes = n.saturating_mul(std::mem::size_of::<T>());
        let span = gasp::span!(GASP_UPCXX_DEVICE_ALLOC, device, nbytes);
        let gp = st
            .allocate(n, std::mem::size_of::<T>(), align)
            .map_or(GlobalPtr::null(), |addr| {
                GlobalPtr::from_device_parts(me, addr as usize, D::Kind::ID, st.device)
            });
        gasp::end!(span, device, nbytes, gasp::GPtr::new(me, gp.owner_addr()));
        gp
    }

    /// §16.1.2 ¶28 `deallocate`: frees what [`allocate`](Self::allocate) returned; null
    /// does nothing.
    ///
    /// # Panics
    /// If `g` is of another rank, or not a live allocation of this allocator.
    #[track_caller]
    pub fn deallocate<T>(&self, g: GlobalPtr<T, D::Kind>) {
        const CALL: &str = "device_allocator::deallocate";
        if g.is_null() {
            return;
        }
        let st = self.state(CALL);
        let me = rt(CALL).rank;
        if g.where_() != me {
            panic!(
                "upcxx::{CALL}: {g} is of rank {}, not this rank ({me})",
                g.where_()
            );
        }
        let (device, at) = (i32::from(st.device), gasp::GPtr::new(me, g.owner_addr()));
        let span = gasp::span!(GASP_UPCXX_DEVICE_FREE, device, at);
        let off = (g.owner_addr() as u64).wrapping_sub(st.segment.base());
        let mut heap = st.heap.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(range) = heap.live.remove(&off) else {
            panic!(
                "upcxx::{CALL}: {g} is not a live allocation of this device_allocator (freed \
                 already, or not the start of an allocation)"
            );
        };
        heap.free.free_range(range);
        drop(heap);
        gasp::end!(span, device, at);
    }

    /// §16.1.2 ¶32 `to_global_ptr`: the global pointer to the device address `ptr`,
    /// which must lie in this allocator's segment; null for 0.
    ///
    /// # Panics
    /// If `ptr` is not in the segment (room for a `T` from it).
    #[track_caller]
    pub fn to_global_ptr<T>(&self, ptr: DeviceAddr) -> GlobalPtr<T, D::Kind> {
        const CALL: &str = "device_allocator::to_global_ptr";
        if ptr == 0 {
            return GlobalPtr::null();
        }
        let st = self.state(CALL);
        if st
            .segment
            .offset_of(ptr, std::mem::size_of::<T>())
            .is_none()
        {
            panic!(
                "upcxx::{CALL}: device address {ptr:#x} is not in this allocator's segment \
                 ({:?})",
                st.segment
            );
        }
        GlobalPtr::from_device_parts(rt(CALL).rank, ptr as usize, D::Kind::ID, st.device)
    }

    /// §16.1.2 ¶36 `local`: the device address of `g`, which must be this rank's; 0 for
    /// null.
    ///
    /// # Panics
    /// If `g` is of another rank.
    #[track_caller]
    pub fn local<T>(g: GlobalPtr<T, D::Kind>) -> DeviceAddr {
        const CALL: &str = "device_allocator::local";
        if g.is_null() {
            return 0;
        }
        let me = rt(CALL).rank;
        if g.where_() != me {
            panic!(
                "upcxx::{CALL}: {g} is of rank {}, not this rank ({me})",
                g.where_()
            );
        }
        g.owner_addr() as DeviceAddr
    }

    /// §16.1.2 ¶40 `device_id`: the id of the device holding `g`'s memory;
    /// [`Device::INVALID_DEVICE_ID`] for null.
    pub fn device_id<T>(g: GlobalPtr<T, D::Kind>) -> i32 {
        if g.is_null() {
            D::INVALID_DEVICE_ID
        } else {
            i32::from(g.device())
        }
    }

    /// Bytes of the segment in live allocations (their alignment padding included).
    pub fn used(&self) -> usize {
        let st = self.state("device_allocator::used");
        let heap = st.heap.lock().unwrap_or_else(PoisonError::into_inner);
        heap.live.values().map(|r| (r.end - r.start) as usize).sum()
    }
}

/// The completion events of [`copy_with`] and its host forms (§16.1.3 ¶5–¶7): source,
/// remote and operation, no values.
#[derive(Debug)]
pub enum CopyEvents {}

impl CompletionEvents for CopyEvents {
    const NAME: &'static str = "copy";
    type OpValues = ();
}
impl HasSource for CopyEvents {}
impl HasRemote for CopyEvents {}
impl HasOperation for CopyEvents {}

/// Copies `count` values from `src` to `dest`, memory of any kinds on any ranks
/// (UPC++ `copy(global_ptr src, global_ptr dest, count)`, §16.1.3), with the default
/// completion: a future of operation completion.
///
/// # Panics
/// If either pointer is null while `count` is not 0, if a range is not memory of its
/// kind on its rank (outside every segment), if the ranges overlap, or before `init`.
#[track_caller]
pub fn copy<T: Pod, Ks: MemoryKind, Kd: MemoryKind>(
    src: GlobalPtr<T, Ks>,
    dest: GlobalPtr<T, Kd>,
    count: usize,
) -> crate::Future<()> {
    copy_with(src, dest, count, operation_cx::as_future())
}

/// [`copy`] with completions (§16.1.3): `source_cx`, `remote_cx` (run by `dest`'s
/// owner, ¶4) and `operation_cx` requests, with operation or remote completion among
/// them (§7.2.1 ¶2).
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_with<T: Pod, Ks: MemoryKind, Kd: MemoryKind, C: Completions<CopyEvents>>(
    src: GlobalPtr<T, Ks>,
    dest: GlobalPtr<T, Kd>,
    count: usize,
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let len = bytes::<T>(CALL, count);
    if len > 0 {
        let (s, d) = (end(CALL, src), end(CALL, dest));
        if s.rank == d.rank && s.kind == d.kind && s.addr < d.addr + len && d.addr < s.addr + len {
            panic!("upcxx::{CALL}: the {len}-byte ranges at {src} and {dest} overlap");
        }
        let span = gasp::span!(
            GASP_UPCXX_COPY,
            peer(rt, d, s),
            d.gasp(),
            s.gasp(),
            d.kind as i32,
            s.kind as i32,
            len
        );
        between(CALL, rt, d, s, len);
        gasp::end!(
            span,
            peer(rt, d, s),
            d.gasp(),
            s.gasp(),
            d.kind as i32,
            s.kind as i32,
            len
        );
    }
    cxs.completed_at_initiation(dest.where_(), ()).into_return()
}

/// Copies `src`, host memory of this process, to `dest`, memory of any kind on any
/// rank (UPC++ `copy(T const *src, global_ptr dest, count)`, §16.1.3), with the default
/// completion. `src` is borrowed only for the call.
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_from_host<T: Pod, Kd: MemoryKind>(
    src: &[T],
    dest: GlobalPtr<T, Kd>,
) -> crate::Future<()> {
    copy_from_host_with(src, dest, operation_cx::as_future())
}

/// [`copy_from_host`] with completions, as [`copy_with`].
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_from_host_with<T: Pod, Kd: MemoryKind, C: Completions<CopyEvents>>(
    src: &[T],
    dest: GlobalPtr<T, Kd>,
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let bytes: &[u8] = bytemuck::cast_slice(src);
    if !bytes.is_empty() {
        let (d, s) = (end(CALL, dest), End::slice(rt, bytes));
        let n = bytes.len();
        let (dk, sk) = (d.kind as i32, s.kind as i32);
        let span = gasp::span!(GASP_UPCXX_COPY, d.rank, d.gasp(), s.gasp(), dk, sk, n);
        write(CALL, rt, d, bytes);
        gasp::end!(span, d.rank, d.gasp(), s.gasp(), dk, sk, n);
    }
    cxs.completed_at_initiation(dest.where_(), ()).into_return()
}

/// Copies `src`, memory of any kind on any rank, into `dest`, host memory of this
/// process (UPC++ `copy(global_ptr src, T *dest, count)`, §16.1.3), with the default
/// completion. `dest` is written before the call returns.
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_to_host<T: Pod, Ks: MemoryKind>(
    src: GlobalPtr<T, Ks>,
    dest: &mut [T],
) -> crate::Future<()> {
    copy_to_host_with(src, dest, operation_cx::as_future())
}

/// [`copy_to_host`] with completions, as [`copy_with`]; a remote-completion RPC runs
/// on this process (¶4).
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_to_host_with<T: Pod, Ks: MemoryKind, C: Completions<CopyEvents>>(
    src: GlobalPtr<T, Ks>,
    dest: &mut [T],
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dest);
    if !bytes.is_empty() {
        let (d, s) = (End::slice(rt, bytes), end(CALL, src));
        let n = bytes.len();
        let (dk, sk) = (d.kind as i32, s.kind as i32);
        let span = gasp::span!(GASP_UPCXX_COPY, s.rank, d.gasp(), s.gasp(), dk, sk, n);
        read(CALL, rt, s, bytes);
        gasp::end!(span, s.rank, d.gasp(), s.gasp(), dk, sk, n);
    }
    cxs.completed_at_initiation(rt.rank, ()).into_return()
}

/// Pieces of a copy that bounces through this process's memory.
const BOUNCE: usize = 4 << 20;

/// One end of a copy: memory of `kind` at `addr` (owner space) of `rank`.
#[derive(Clone, Copy)]
struct End {
    rank: Rank,
    addr: usize,
    kind: KindId,
}

/// The runtime. A copy may start in the restricted context (§10.2), as an `rput` may:
/// it waits with internal progress only, which the restricted context does not make a
/// no-op.
impl End {
    /// A host slice of this process, as an end.
    fn slice(rt: &Setup, bytes: &[u8]) -> End {
        End {
            rank: rt.rank,
            addr: bytes.as_ptr() as usize,
            kind: KindId::Host,
        }
    }

    /// The end as a GASP pointer (rank and owner-space address).
    fn gasp(self) -> gasp::GPtr {
        gasp::GPtr::new(self.rank, self.addr)
    }
}

/// The rank at the other end of a copy: the destination's, unless that is this rank
/// and the source's is not.
fn peer(rt: &Setup, dst: End, src: End) -> Rank {
    if dst.rank == rt.rank {
        src.rank
    } else {
        dst.rank
    }
}

#[track_caller]
fn start(call: &str) -> &'static Setup {
    rt(call)
}

#[track_caller]
fn bytes<T>(call: &str, count: usize) -> usize {
    count
        .checked_mul(std::mem::size_of::<T>())
        .unwrap_or_else(|| panic!("upcxx::{call}: {count} values overflow the address space"))
}

#[track_caller]
fn end<T, K: MemoryKind>(call: &str, gp: GlobalPtr<T, K>) -> End {
    if gp.is_null() {
        panic!("upcxx::{call}: the global pointer is null");
    }
    End {
        rank: gp.where_(),
        addr: gp.owner_addr(),
        kind: gp.dynamic_kind(),
    }
}

/// What a device transfer failed with, as a panic naming the call.
#[track_caller]
fn failed(call: &str, e: KindError) -> ! {
    panic!("upcxx::{call}: {e}")
}

/// Writes `bytes` to `to`.
#[track_caller]
fn write(call: &str, rt: &Setup, to: End, bytes: &[u8]) {
    if to.kind != KindId::Host {
        gex::kinds::put(&rt.team, to.rank, to.addr as DeviceAddr, bytes)
            .unwrap_or_else(|e| failed(call, e));
    } else if let Some(local) = rt.local_range(to.rank, to.addr, bytes.len()) {
        // SAFETY: inside the mapping of `to.rank`'s segment (`local_range`), mapped for
        // the job; concurrent access is the program's to order, as for any put.
        unsafe { std::ptr::copy(bytes.as_ptr(), local as *mut u8, bytes.len()) };
    } else {
        rt.team
            .put_blocking(to.rank, to.addr, bytes, gex::Flags::NONE)
            .expect("a put without IMMEDIATE does it");
    }
}

/// Reads `from` into `buf`.
#[track_caller]
fn read(call: &str, rt: &Setup, from: End, buf: &mut [u8]) {
    if from.kind != KindId::Host {
        gex::kinds::get(&rt.team, from.rank, from.addr as DeviceAddr, buf)
            .unwrap_or_else(|e| failed(call, e));
    } else if let Some(local) = rt.local_range(from.rank, from.addr, buf.len()) {
        // SAFETY: as in `write`; `buf` is a live exclusive borrow.
        unsafe { std::ptr::copy(local as *const u8, buf.as_mut_ptr(), buf.len()) };
    } else {
        rt.team
            .get_blocking(buf, from.rank, from.addr, gex::Flags::NONE)
            .expect("a get without IMMEDIATE does it");
    }
}

/// Copies `len` bytes from `src` to `dst`: one device transfer when both are device
/// memory, in place when this process maps either host end, else in pieces through a
/// buffer of this process.
#[track_caller]
fn between(call: &str, rt: &Setup, dst: End, src: End, len: usize) {
    if dst.kind != KindId::Host && src.kind != KindId::Host {
        gex::kinds::copy(
            &rt.team,
            dst.rank,
            dst.addr as DeviceAddr,
            src.rank,
            src.addr as DeviceAddr,
            len,
        )
        .unwrap_or_else(|e| failed(call, e));
        return;
    }
    if src.kind == KindId::Host {
        if let Some(local) = rt.local_range(src.rank, src.addr, len) {
            // SAFETY: inside a mapped segment (`local_range`), mapped for the job.
            let from = unsafe { std::slice::from_raw_parts(local as *const u8, len) };
            return write(call, rt, dst, from);
        }
    }
    if dst.kind == KindId::Host {
        if let Some(local) = rt.local_range(dst.rank, dst.addr, len) {
            // SAFETY: as above; the ranges do not overlap (checked by the caller).
            let to = unsafe { std::slice::from_raw_parts_mut(local as *mut u8, len) };
            return read(call, rt, src, to);
        }
    }
    let mut buf = vec![0u8; len.min(BOUNCE)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(BOUNCE);
        let piece = &mut buf[..n];
        read(
            call,
            rt,
            End {
                addr: src.addr + done,
                ..src
            },
            piece,
        );
        write(
            call,
            rt,
            End {
                addr: dst.addr + done,
                ..dst
            },
            piece,
        );
        done += n;
    }
}
