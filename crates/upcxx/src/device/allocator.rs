//! The memory allocator of a device (UPC++ spec §16.1.2 `device_allocator`): a device
//! segment and its out-of-band heap. A leaf of `device`.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use gex::kinds::{DeviceAddr, DeviceSegment, KindError, Mk};
use range_alloc::RangeAllocator;

use super::Device;
use crate::global_ptr::{GlobalPtr, MemoryKind};
use crate::runtime::state::{check_init, rt};

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
        // Room for the alignment too; a request too large to name has no room.
        let with_alignment = len.checked_add(align as u64 - 1)?;
        // Larger than the segment: no room (and `range-alloc` asserts that twice the
        // length fits a `u64`).
        if with_alignment > self.segment.size() as u64 {
            return None;
        }
        let range = heap.free.allocate_range(with_alignment).ok()?;
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
        Self::make(device, size, |mk| DeviceSegment::create(mk, size))
    }

    /// §16.1.2 ¶13: an allocator of `device` managing the `size` bytes of device memory
    /// at `memory` that the program allocated itself (for memory with properties of its
    /// own, or shared with another library); dropping the allocator leaves the memory
    /// to the program (¶21). An error if the memory is not `device`'s (`size` bytes in
    /// one allocation) or is managed by another allocator already.
    ///
    /// # Safety
    /// ¶14: the memory stays allocated until the allocator is dropped, and nothing but
    /// this allocator's users (`copy` and the like) writes it meanwhile.
    ///
    /// # Panics
    /// As [`new`](Self::new).
    #[track_caller]
    pub unsafe fn with_memory(
        device: &mut D,
        memory: DeviceAddr,
        size: usize,
    ) -> Result<Self, KindError> {
        // SAFETY: the caller's guarantee.
        Self::make(device, size, |mk| unsafe {
            DeviceSegment::wrap(mk, memory, size)
        })
    }

    /// An allocator of `device` over the segment `segment` makes of `size` bytes of its
    /// memory, after the checks of ¶8.
    #[track_caller]
    fn make(
        device: &mut D,
        size: usize,
        segment: impl FnOnce(&Mk) -> Result<DeviceSegment, KindError>,
    ) -> Result<Self, KindError> {
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
        let segment = segment(mk);
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
