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
//! [`DeviceAllocator`] (`device/allocator.rs`) owns a device segment
//! (`gex::kinds::DeviceSegment`), allocated for it or over memory the program
//! allocated ([`DeviceAllocator::with_memory`], §16.1.2 ¶13), and hands out global pointers of kind
//! [`CudaDeviceKind`] from it. The segment's memory is managed out of band (device
//! memory cannot hold an allocator's own bookkeeping) by `range-alloc`, the range
//! allocator of the `wgpu` project, behind a lock: any thread may allocate (progress
//! level none). The copies are `device/copy.rs`.
//!
//! # Copies
//!
//! [`copy`] moves `count` values between two global pointers of any kinds, on any
//! ranks; [`copy_from_host`] and [`copy_to_host`] have a host slice at one end
//! (§16.1.3). Host memory this process maps is read or written in place; other host
//! memory moves with gex RMA; device memory with `gex::kinds::put`, `get` and `copy`,
//! which map the device segments of this host's other ranks (CUDA IPC: one driver
//! copy) and reach other hosts' with Active Messages to the owner. A copy
//! between two places neither of which this process can reach in place bounces
//! through this process's memory in pieces of 4 MiB. Two kinds of copy return with
//! the transfer in flight (§16.1.3 ¶3: the call initiates the copy) and complete in
//! progress, the end this process maps lent to them until the completions say so: a
//! [`copy`] between host memory this process maps and host memory of another host (one
//! gex put or get), and a copy with a device end that this process reaches by messages
//! only (another host's device, or any other rank's with mapping off), whose other end
//! is host memory it maps, a host slice ([`copy_from_host`]: its bytes travel in the
//! messages, so the slice is free at return) or device memory it reaches
//! (`gex::kinds::put_nb`, `get_nb`, `copy_nb`, up to 4 MiB for the last). Every other
//! copy finishes before the call returns (the calls make internal progress, §16.1.3
//! ¶9), so a host slice is borrowed only for the call; notifications are delivered as
//! chapter 7 says:
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

mod allocator;
mod copy;

pub use allocator::DeviceAllocator;
pub use copy::{
    copy, copy_from_host, copy_from_host_with, copy_to_host, copy_to_host_with, copy_with,
    CopyEvents,
};
/// The types the device calls take and give, so that a program names them without
/// depending on `gex`: an address in device memory (UPC++ `Device::pointer<T>`, untyped)
/// and the error of a device that could not be opened or allocated in.
pub use gex::kinds::{DeviceAddr, KindError};

use gex::kinds::Mk;

use crate::global_ptr::{CudaDeviceKind, KindId, MemoryKind};
use crate::runtime::state::rt;
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

    /// §16.1.1 ¶8 `null_pointer<T>()`: the device address no allocation has, which
    /// [`DeviceAllocator::local`] gives for a null global pointer.
    pub const fn null_pointer() -> DeviceAddr {
        0
    }

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
        crate::progress::wait_internal(rt.team.barrier_nb());
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
            EntryBarrier::User => crate::progress::barrier_with_progress(&rt.team),
            EntryBarrier::Internal => crate::progress::wait_internal(rt.team.barrier_nb()),
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
