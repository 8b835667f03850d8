//! An emulated class of device memory (feature `testing`): a "device" whose memory is
//! host memory that only [`Device::copy`] touches, with a fixed capacity, so that the
//! device-independent machinery (segments, range checks, routing of copies) is tested
//! on machines without a GPU. A leaf of `kinds`.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{Device, DeviceAddr, End, KindError};

/// The alignment of an allocation (CUDA's `cuMemAlloc` gives at least 256).
const ALIGN: usize = 256;

#[derive(Debug)]
pub(super) struct Emulated {
    id: i32,
    total: usize,
    /// The live allocations: base address to size.
    live: Mutex<BTreeMap<DeviceAddr, usize>>,
}

impl Emulated {
    pub(super) fn new(id: i32, total: usize) -> Emulated {
        Emulated {
            id,
            total,
            live: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Device for Emulated {
    fn class(&self) -> &'static str {
        "emulated_device"
    }

    fn id(&self) -> i32 {
        self.id
    }

    fn total_memory(&self) -> usize {
        self.total
    }

    /// Each emulated device is its own instance: two made with one id are two devices.
    fn same(&self, other: &dyn Device) -> bool {
        std::ptr::addr_eq(self as *const Self, other as *const dyn Device)
    }

    fn alloc(&self, call: &'static str, size: usize) -> Result<DeviceAddr, KindError> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let used: usize = live.values().sum();
        let layout = Layout::from_size_align(size, ALIGN).ok();
        let Some(layout) = layout.filter(|_| used + size <= self.total) else {
            return Err(KindError::OutOfMemory {
                call,
                size,
                total: self.total,
            });
        };
        // SAFETY: `size` is not zero (`DeviceSegment::create` checks).
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(KindError::OutOfMemory {
                call,
                size,
                total: self.total,
            });
        }
        live.insert(p as DeviceAddr, size);
        Ok(p as DeviceAddr)
    }

    unsafe fn free(&self, addr: DeviceAddr) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let size = live.remove(&addr).expect("an emulated device allocation");
        let layout = Layout::from_size_align(size, ALIGN).expect("its layout");
        // SAFETY: allocated by `alloc` with this layout (the caller's guarantee).
        unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
    }

    fn owns(&self, addr: DeviceAddr, len: usize) -> bool {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.range(..=addr)
            .next_back()
            .is_some_and(|(&base, &size)| addr + len as u64 <= base + size as u64)
    }

    unsafe fn copy(
        &self,
        _call: &'static str,
        dst: End<'_>,
        src: End<'_>,
        len: usize,
    ) -> Result<(), KindError> {
        debug_assert!(
            [&dst, &src].iter().all(|e| match e {
                End::Device(a) => self.owns(*a, len),
                _ => true,
            }),
            "an emulated copy outside the device's allocations"
        );
        let to = match dst {
            End::Device(a) => a as *mut u8,
            End::HostMut(s) => s.as_mut_ptr(),
            End::Host(_) => unreachable!("a destination is writable"),
        };
        let from = match src {
            End::Device(a) => a as *const u8,
            End::Host(s) => s.as_ptr(),
            End::HostMut(s) => s.as_ptr(),
        };
        // SAFETY: the caller's guarantee: `len` bytes at each end, not overlapping.
        unsafe { std::ptr::copy_nonoverlapping(from, to, len) };
        Ok(())
    }
}
