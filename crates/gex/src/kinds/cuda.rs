//! The CUDA class of memory kinds (`cuda_device`): the driver API through `cudarc`'s
//! raw bindings, loaded at run time (see the parent module). A leaf: the one file that
//! calls the CUDA driver.
//!
//! Every call pushes the device's primary context onto the calling thread's context
//! stack (`cuCtxPushCurrent`, thread-local in the driver) and pops it before returning,
//! so any thread may use a kind and the program finds its own current context (or
//! none) as it left it, whatever device or context it works with. The primary context
//! is the one CUDA's runtime API uses for the device, so memory the program allocates
//! through that API is memory of this context.
//!
//! Copies are complete at return: the driver's copies from pageable host memory and
//! between device addresses may return before the data has landed, so those are
//! followed by a synchronization of the legacy default stream, the copies' stream.
//! That stream is ordered with the context's blocking streams, so the copies also wait
//! for kernels the program queued on those (and the synchronization with them), but
//! not with non-blocking streams (cudarc's `CudaContext::new_stream` makes those): a
//! program that runs kernels there synchronizes them itself before a copy reads what
//! they write, as `examples/gpu_stencil.rs` does.

use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::sync::OnceLock;

use cudarc::driver::sys::{self, CUresult};

use super::{Device, DeviceAddr, End, KindError};

const CLASS: &str = "cuda_device";

/// Loads the driver library and initializes it, once per process: the outcome of the
/// first call is every later call's.
///
/// A library that is found but whose `cuInit` fails is no usable driver either: the
/// toolkit's stub `libcuda.so` ahead of the real one on the library path
/// (`CUDA_ERROR_STUB_LIBRARY`), a driver older than the toolkit, or a kernel module
/// that does not match it. Each is [`KindError::NoDriver`], naming `cuInit`'s error, as
/// a missing library is: a program, or a test, that goes on without a device where
/// there is no driver does so there too.
fn driver(call: &'static str) -> Result<(), KindError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = INIT.get_or_init(|| {
        // SAFETY: loading the driver library runs its initializers only, and is probed
        // before any binding resolves a symbol (a missing library would panic there).
        if !unsafe { sys::is_culib_present() } {
            return Err(
                "the CUDA driver library (libcuda.so) was not found on the library path"
                    .to_string(),
            );
        }
        // SAFETY: cuInit takes flags 0; the library is present.
        let r = unsafe { sys::cuInit(0) };
        if r == CUresult::CUDA_ERROR_NO_DEVICE {
            return Ok(()); // a driver without devices: counted as 0 below
        }
        result(r, "cuInit").map_err(|e| {
            format!("the CUDA driver library (libcuda.so) was found, but cuInit failed: {e}")
        })
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(detail) => Err(KindError::NoDriver {
            call,
            class: CLASS,
            detail: detail.clone(),
        }),
    }
}

/// `Ok` for success, else the driver's name of the error and its code.
fn result(r: CUresult, function: &str) -> Result<(), String> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: an out-pointer; the driver returns a static string or fails.
    let named = unsafe { sys::cuGetErrorName(r, &mut name) } == CUresult::CUDA_SUCCESS;
    if named && !name.is_null() {
        // SAFETY: a NUL-terminated static string of the driver.
        let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        Err(format!("{s} ({})", r as u32))
    } else {
        Err(format!("{function}: CUresult {}", r as u32))
    }
}

fn check(call: &'static str, function: &'static str, r: CUresult) -> Result<(), KindError> {
    result(r, function).map_err(|error| KindError::Driver {
        call,
        function,
        error,
    })
}

/// How many CUDA devices the process sees: 0 if the driver has none.
pub(super) fn device_count(call: &'static str) -> Result<i32, KindError> {
    driver(call)?;
    let mut n: c_int = 0;
    // SAFETY: an out-pointer; the driver is initialized.
    let r = unsafe { sys::cuDeviceGetCount(&mut n) };
    if r == CUresult::CUDA_ERROR_NO_DEVICE || r == CUresult::CUDA_ERROR_NOT_INITIALIZED {
        return Ok(0);
    }
    check(call, "cuDeviceGetCount", r)?;
    Ok(n)
}

/// One CUDA device with its primary context retained.
#[derive(Debug)]
pub(super) struct Cuda {
    id: i32,
    dev: sys::CUdevice,
    ctx: Context,
    total: usize,
}

/// The primary context, as the driver's pointer.
#[derive(Debug, Clone, Copy)]
struct Context(sys::CUcontext);

// SAFETY: a CUDA context may be made current on any thread (cuCtxSetCurrent); the
// handle is an opaque pointer the driver owns.
unsafe impl Send for Context {}
// SAFETY: as above; the driver synchronizes its own use of a context.
unsafe impl Sync for Context {}

impl Cuda {
    /// Opens device `id`, retaining its primary context.
    pub(super) fn open(call: &'static str, id: i32) -> Result<Cuda, KindError> {
        let count = device_count(call)?;
        if id < 0 || id >= count {
            return Err(KindError::NoSuchDevice {
                call,
                class: CLASS,
                id,
                count,
            });
        }
        let mut dev: sys::CUdevice = 0;
        // SAFETY: an out-pointer; `id` is a valid ordinal.
        check(call, "cuDeviceGet", unsafe {
            sys::cuDeviceGet(&mut dev, id)
        })?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer; `dev` is a device handle. Released in `drop`.
        check(call, "cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        let mut total = 0;
        // SAFETY: an out-pointer; `dev` is a device handle.
        let r = unsafe { sys::cuDeviceTotalMem_v2(&mut total, dev) };
        let cuda = Cuda {
            id,
            dev,
            ctx: Context(ctx),
            total,
        };
        check(call, "cuDeviceTotalMem", r)?;
        Ok(cuda)
    }

    /// Makes the device's primary context current on this thread until the guard
    /// drops, which makes current again what was before.
    fn bind(&self, call: &'static str) -> Result<Bound, KindError> {
        // SAFETY: a context retained by `open`, alive until `drop`.
        check(call, "cuCtxPushCurrent", unsafe {
            sys::cuCtxPushCurrent_v2(self.ctx.0)
        })?;
        Ok(Bound(PhantomData))
    }
}

/// A context pushed by [`Cuda::bind`], popped on drop. Not `Send`: the driver's
/// context stack is the thread's.
struct Bound(PhantomData<*const ()>);

impl Drop for Bound {
    fn drop(&mut self) {
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer; `bind` pushed a context on this thread, and every
        // call that pushes pops what it pushed before this guard drops. An error here
        // cannot be acted on.
        unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: retained once by `open`; every segment of the device holds the kind,
        // so none is left. An error here cannot be acted on.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

impl Device for Cuda {
    fn class(&self) -> &'static str {
        CLASS
    }

    fn id(&self) -> i32 {
        self.id
    }

    fn total_memory(&self) -> usize {
        self.total
    }

    fn alloc(&self, call: &'static str, size: usize) -> Result<DeviceAddr, KindError> {
        let _bound = self.bind(call)?;
        let mut addr: sys::CUdeviceptr = 0;
        // SAFETY: an out-pointer; the context is current.
        let r = unsafe { sys::cuMemAlloc_v2(&mut addr, size) };
        if r == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(KindError::OutOfMemory {
                call,
                size,
                total: self.total,
            });
        }
        check(call, "cuMemAlloc", r)?;
        Ok(addr)
    }

    unsafe fn free(&self, addr: DeviceAddr) {
        if let Ok(_bound) = self.bind("gex::kinds::DeviceSegment::drop") {
            // SAFETY: the caller's guarantee: allocated by `alloc`, not used again.
            unsafe { sys::cuMemFree_v2(addr) };
        }
    }

    fn owns(&self, addr: DeviceAddr, len: usize) -> bool {
        let Ok(_bound) = self.bind("gex::kinds::Mk::owns") else {
            return false;
        };
        let mut ordinal: c_int = -1;
        // SAFETY: an out-pointer of the attribute's type (int); any address may be asked.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut c_int).cast::<c_void>(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                addr,
            )
        };
        if r != CUresult::CUDA_SUCCESS || ordinal != self.id {
            return false;
        }
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers; `addr` is device memory of this context (above).
        let r = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, addr) };
        r == CUresult::CUDA_SUCCESS && addr + len as u64 <= base + size as u64
    }

    fn allocation(&self, addr: DeviceAddr) -> Option<(DeviceAddr, usize)> {
        let _bound = self
            .bind("gex::kinds (the allocation of an address)")
            .ok()?;
        let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers; any address may be asked (an error if it is no
        // allocation of the current context).
        let r = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, addr) };
        (r == CUresult::CUDA_SUCCESS).then_some((base, size))
    }

    fn export(&self, call: &'static str, base: DeviceAddr) -> Result<Vec<u8>, KindError> {
        let _bound = self.bind(call)?;
        // SAFETY: a zeroed handle is a valid out-parameter (an array of bytes).
        let mut handle: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        // SAFETY: an out-pointer; the driver checks that `base` is an allocation.
        check(call, "cuIpcGetMemHandle", unsafe {
            sys::cuIpcGetMemHandle(&mut handle, base)
        })?;
        Ok(handle.reserved.iter().map(|&c| c as u8).collect())
    }

    unsafe fn import(
        &self,
        call: &'static str,
        handle: &[u8],
        _size: usize,
    ) -> Result<DeviceAddr, KindError> {
        let _bound = self.bind(call)?;
        // SAFETY: as in `export`.
        let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        if handle.len() != h.reserved.len() {
            return Err(KindError::Driver {
                call,
                function: "cuIpcOpenMemHandle",
                error: format!(
                    "a handle of {} bytes, not {}",
                    handle.len(),
                    h.reserved.len()
                ),
            });
        }
        for (d, &b) in h.reserved.iter_mut().zip(handle) {
            *d = b as std::ffi::c_char;
        }
        let mut addr: sys::CUdeviceptr = 0;
        // SAFETY: an out-pointer and a handle of another process's allocation (the
        // caller's guarantee); peers are enabled lazily when the devices differ.
        check(call, "cuIpcOpenMemHandle", unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut addr,
                h,
                sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
        })?;
        Ok(addr)
    }

    unsafe fn close(&self, addr: DeviceAddr) {
        if let Ok(_bound) = self.bind("gex::kinds (closing an import)") {
            // SAFETY: opened by `import` (the caller's guarantee).
            unsafe { sys::cuIpcCloseMemHandle(addr) };
        }
    }

    unsafe fn copy(
        &self,
        call: &'static str,
        dst: End<'_>,
        src: End<'_>,
        len: usize,
    ) -> Result<(), KindError> {
        let _bound = self.bind(call)?;
        // Each arm: the caller guarantees that device ends are `len` bytes of this
        // device's memory and host ends slices of `len` bytes; the host side of every
        // copy is done when the call returns (the stream is synchronized after the two
        // that may return early), so the borrows outlive the copies.
        match (dst, src) {
            (End::Device(d), End::Host(s)) => {
                // SAFETY: as above.
                let r = unsafe { sys::cuMemcpyHtoD_v2(d, s.as_ptr().cast(), len) };
                check(call, "cuMemcpyHtoD", r)?;
                sync(call)
            }
            (End::HostMut(d), End::Device(s)) => {
                // SAFETY: as above.
                let r = unsafe { sys::cuMemcpyDtoH_v2(d.as_mut_ptr().cast(), s, len) };
                check(call, "cuMemcpyDtoH", r)
            }
            (End::Device(d), End::Device(s)) => {
                // SAFETY: as above.
                let r = unsafe { sys::cuMemcpyDtoD_v2(d, s, len) };
                check(call, "cuMemcpyDtoD", r)?;
                sync(call)
            }
            _ => unreachable!("a copy has a device end"),
        }
    }
}

/// Waits for the copies on the default stream of the current context.
fn sync(call: &'static str) -> Result<(), KindError> {
    // SAFETY: the null stream is the current context's default stream.
    check(call, "cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(std::ptr::null_mut())
    })
}
