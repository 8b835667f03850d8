//! The device segments of this process, by address: where a transfer that names a
//! device address of this rank (from this process or in an AM from another rank)
//! finds the segment and the device. A leaf of `kinds`.
//!
//! A lookup holds the table's read lock while its copy runs, and a segment leaves the
//! table (write lock) before its memory is freed, so a copy never touches freed memory.

use parking_lot::RwLock;

use super::{DeviceAddr, Mk};

struct Entry {
    base: DeviceAddr,
    size: usize,
    mk: Mk,
}

static SEGMENTS: RwLock<Vec<Entry>> = parking_lot::const_rwlock(Vec::new());

/// Adds a segment just created.
pub(super) fn add(mk: &Mk, base: DeviceAddr, size: usize) {
    SEGMENTS.write().push(Entry {
        base,
        size,
        mk: mk.clone(),
    });
}

/// Removes the segment at `base`, waiting for the copies into it that run now.
pub(super) fn remove(base: DeviceAddr) {
    let mut all = SEGMENTS.write();
    if let Some(i) = all.iter().position(|e| e.base == base) {
        all.swap_remove(i);
    }
}

/// Runs `f` with the kind and the base address of the segment holding
/// `[addr, addr + len)`, the segment kept alive meanwhile; `None` if no segment of this
/// process holds the range.
pub(super) fn with<R>(
    addr: DeviceAddr,
    len: usize,
    f: impl FnOnce(&Mk, DeviceAddr) -> R,
) -> Option<R> {
    // Recursive: a copy between two segments of this process holds two lookups.
    let all = SEGMENTS.read_recursive();
    let e = all.iter().find(|e| {
        addr >= e.base
            && (addr - e.base)
                .checked_add(len as u64)
                .is_some_and(|end| end <= e.size as u64)
    })?;
    Some(f(&e.mk, e.base))
}
