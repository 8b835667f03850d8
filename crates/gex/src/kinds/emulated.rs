//! An emulated class of device memory (feature `testing`): a "device" whose memory is
//! host memory that only [`Device::copy`] touches, with a fixed capacity, so that the
//! device-independent machinery (segments, range checks, routing of copies, sharing
//! between the processes of a host) is tested on machines without a GPU. A leaf of
//! `kinds`.
//!
//! Each allocation is an anonymous memory file (`memfd_create`) mapped shared, so that
//! another process of the same user can map it as CUDA IPC maps device memory: its
//! handle is the owner's pid and descriptor, opened through `/proc/<pid>/fd/<fd>`.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use rustix::fs::{MemfdFlags, Mode, OFlags};
use rustix::mm::{MapFlags, ProtFlags};

use super::{Device, DeviceAddr, End, KindError};

const CLASS: &str = "emulated_device";

#[derive(Debug)]
pub(super) struct Emulated {
    id: i32,
    total: usize,
    /// The live allocations by base address: size and memory file.
    live: Mutex<BTreeMap<DeviceAddr, (usize, OwnedFd)>>,
    /// Other processes' allocations mapped here, by address: their sizes.
    imported: Mutex<BTreeMap<DeviceAddr, usize>>,
}

impl Emulated {
    pub(super) fn new(id: i32, total: usize) -> Emulated {
        Emulated {
            id,
            total,
            live: Mutex::new(BTreeMap::new()),
            imported: Mutex::new(BTreeMap::new()),
        }
    }
}

fn map(call: &'static str, fd: &OwnedFd, size: usize) -> Result<DeviceAddr, KindError> {
    // SAFETY: a fresh shared mapping at an address the kernel chooses cannot alias
    // memory this process already uses.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            size,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| driver(call, "mmap", e))?;
    Ok(p as DeviceAddr)
}

fn driver(call: &'static str, function: &'static str, e: rustix::io::Errno) -> KindError {
    KindError::Driver {
        call,
        function,
        error: e.to_string(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device for Emulated {
    fn class(&self) -> &'static str {
        CLASS
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
        let mut live = lock(&self.live);
        let used: usize = live.values().map(|(n, _)| n).sum();
        if used + size > self.total {
            return Err(KindError::OutOfMemory {
                call,
                size,
                total: self.total,
            });
        }
        let fd = rustix::fs::memfd_create("gex-emulated-device", MemfdFlags::CLOEXEC)
            .map_err(|e| driver(call, "memfd_create", e))?;
        rustix::fs::ftruncate(&fd, size as u64).map_err(|e| driver(call, "ftruncate", e))?;
        let addr = map(call, &fd, size)?;
        live.insert(addr, (size, fd));
        Ok(addr)
    }

    unsafe fn free(&self, addr: DeviceAddr) {
        let (size, _fd) = lock(&self.live)
            .remove(&addr)
            .expect("an emulated device allocation");
        // SAFETY: mapped by `alloc` with this size (the caller's guarantee); the file
        // is closed with `_fd`, and freed with the last mapping of other processes.
        let _ = unsafe { rustix::mm::munmap(addr as *mut _, size) };
    }

    fn owns(&self, addr: DeviceAddr, len: usize) -> bool {
        lock(&self.live)
            .range(..=addr)
            .next_back()
            .is_some_and(|(&base, &(size, _))| addr + len as u64 <= base + size as u64)
    }

    fn allocation(&self, addr: DeviceAddr) -> Option<(DeviceAddr, usize)> {
        lock(&self.live)
            .range(..=addr)
            .next_back()
            .filter(|(&base, &(size, _))| addr < base + size as u64)
            .map(|(&base, &(size, _))| (base, size))
    }

    fn export(&self, call: &'static str, base: DeviceAddr) -> Result<Vec<u8>, KindError> {
        let live = lock(&self.live);
        let Some((_, fd)) = live.get(&base) else {
            return Err(KindError::NotDeviceMemory {
                call,
                addr: base,
                kind: CLASS.into(),
            });
        };
        use std::os::fd::AsRawFd;
        let mut handle = std::process::id().to_le_bytes().to_vec();
        handle.extend_from_slice(&fd.as_raw_fd().to_le_bytes());
        Ok(handle)
    }

    unsafe fn import(
        &self,
        call: &'static str,
        handle: &[u8],
        size: usize,
    ) -> Result<DeviceAddr, KindError> {
        let bad = || KindError::Driver {
            call,
            function: "import",
            error: "a malformed emulated device handle".into(),
        };
        let pid = u32::from_le_bytes(handle.get(..4).ok_or_else(bad)?.try_into().unwrap());
        let fd = i32::from_le_bytes(handle.get(4..8).ok_or_else(bad)?.try_into().unwrap());
        let path = format!("/proc/{pid}/fd/{fd}");
        let file = rustix::fs::open(&path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| driver(call, "open", e))?;
        let addr = map(call, &file, size)?;
        lock(&self.imported).insert(addr, size);
        Ok(addr)
    }

    unsafe fn close(&self, addr: DeviceAddr) {
        if let Some(size) = lock(&self.imported).remove(&addr) {
            // SAFETY: mapped by `import` with this size; not used again (the caller's
            // guarantee).
            let _ = unsafe { rustix::mm::munmap(addr as *mut _, size) };
        }
    }

    unsafe fn copy(
        &self,
        _call: &'static str,
        dst: End<'_>,
        src: End<'_>,
        len: usize,
    ) -> Result<(), KindError> {
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
        // SAFETY: the caller's guarantee: `len` bytes at each end (device ends in this
        // device's memory or memory imported here), not overlapping.
        unsafe { std::ptr::copy_nonoverlapping(from, to, len) };
        Ok(())
    }
}
