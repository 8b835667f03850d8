//! The device segments of this process, by address: where a transfer that names a
//! device address of this rank (from this process or in an AM from another rank)
//! finds the segment and the device. A leaf of `kinds`.
//!
//! A lookup holds the table's read lock while its copy runs, and a segment leaves the
//! table (write lock) before its memory is freed, so a copy never touches freed memory.

use std::sync::Mutex;

use parking_lot::RwLock;

use super::{DeviceAddr, KindError, Mk};
use crate::conduit::Rank;

struct Entry {
    base: DeviceAddr,
    size: usize,
    mk: Mk,
    /// The ranks that asked to map the segment (`ipc`), told before it is freed.
    importers: Mutex<Vec<Rank>>,
}

static SEGMENTS: RwLock<Vec<Entry>> = parking_lot::const_rwlock(Vec::new());

/// Adds a segment just made, unless it overlaps one of the table (then false).
pub(super) fn add(mk: &Mk, base: DeviceAddr, size: usize) -> bool {
    let mut all = SEGMENTS.write();
    let end = base + size as u64;
    if all
        .iter()
        .any(|e| base < e.base + e.size as u64 && e.base < end)
    {
        return false;
    }
    all.push(Entry {
        base,
        size,
        mk: mk.clone(),
        importers: Mutex::new(Vec::new()),
    });
    true
}

/// Removes the segment at `base`, waiting for the copies into it that run now;
/// returns the ranks that asked to map it.
pub(super) fn remove(base: DeviceAddr) -> Vec<Rank> {
    let mut all = SEGMENTS.write();
    match all.iter().position(|e| e.base == base) {
        Some(i) => {
            let e = all.swap_remove(i);
            e.importers.into_inner().unwrap_or_else(|e| e.into_inner())
        }
        None => Vec::new(),
    }
}

/// A segment exported for another process of this host.
pub(super) struct Exported {
    pub(super) base: DeviceAddr,
    pub(super) size: usize,
    pub(super) class: &'static str,
    /// The handle that maps the allocation holding the segment, or why the driver gave
    /// none.
    pub(super) handle: Result<Vec<u8>, KindError>,
    /// The segment's offset in that allocation (not 0 for a segment over part of the
    /// program's memory), and the allocation's size.
    pub(super) offset: u64,
    pub(super) allocation: usize,
}

/// The segment holding `addr`, exported for `asker` (noted as an importer).
pub(super) fn export(addr: DeviceAddr, asker: Rank) -> Option<Exported> {
    let all = SEGMENTS.read_recursive();
    let e = all
        .iter()
        .find(|e| addr >= e.base && addr - e.base < e.size as u64)?;
    let (at, allocation) = e.mk.0.dev.allocation(e.base).unwrap_or((e.base, e.size));
    let handle = e.mk.0.dev.export("gex::kinds (exporting a segment)", at);
    // Noted whether or not the export worked: an asker that could not map the segment
    // still keeps it in its table (reached by messages), which the segment's drop must
    // clear, or a later segment at the same address would be taken for it.
    let mut importers = e.importers.lock().unwrap_or_else(|e| e.into_inner());
    if !importers.contains(&asker) {
        importers.push(asker);
    }
    drop(importers);
    Some(Exported {
        base: e.base,
        size: e.size,
        class: e.mk.0.dev.class(),
        handle,
        offset: e.base - at,
        allocation,
    })
}

/// A device of this process of class `class` (the kind of one of its segments).
pub(super) fn any_of(class: &str) -> Option<Mk> {
    let all = SEGMENTS.read_recursive();
    all.iter()
        .find(|e| e.mk.0.dev.class() == class)
        .map(|e| e.mk.clone())
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
