//! The handler table: 256 write-once entries that dispatch reads without a lock, and
//! registration (GASNet-EX `gex_EP_RegisterHandlers`).
//!
//! **Architecture invariant:** handler table entries are never modified or freed after
//! registration.

use std::panic::Location;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use super::handler::{
    max_args, AmCategory, AmEntry, AmIndex, HandlerFn, RegisterError, AM_INDEX_BASE,
};
use crate::client::Endpoint;
use crate::runtime::runtime;

/// The table of the process's one endpoint.
pub(super) static HANDLERS: HandlerTable = HandlerTable::new();

/// The per-endpoint table of 256 handlers. Entries are written once and never freed, so
/// dispatch reads them without a lock.
pub(super) struct HandlerTable {
    entries: [AtomicPtr<AmEntry>; 256],
    /// Where each handler was registered: the call site GASP reports for its runs.
    sites: [AtomicPtr<Location<'static>>; 256],
    register: Mutex<()>,
}

impl HandlerTable {
    const fn new() -> HandlerTable {
        HandlerTable {
            entries: [const { AtomicPtr::new(std::ptr::null_mut()) }; 256],
            sites: [const { AtomicPtr::new(std::ptr::null_mut()) }; 256],
            register: Mutex::new(()),
        }
    }

    #[inline]
    pub(super) fn get(&self, index: AmIndex) -> Option<&'static AmEntry> {
        let p = self.entries[index as usize].load(Ordering::Acquire);
        // SAFETY: non-null entries are leaked boxes that are never freed or modified.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Whether messages to handler `index` are reported to GASP.
    #[cfg(feature = "gasp")]
    #[inline]
    pub(super) fn reported(&self, index: AmIndex) -> bool {
        index >= AM_INDEX_BASE && self.get(index).is_some_and(|e| e.reported)
    }

    /// Where handler `index` was registered.
    #[cfg(feature = "gasp")]
    pub(super) fn site(&self, index: AmIndex) -> &'static Location<'static> {
        let p = self.sites[index as usize].load(Ordering::Acquire);
        if p.is_null() {
            Location::caller()
        } else {
            // SAFETY: non-null sites are `&'static Location`s stored by `register`.
            unsafe { &*p }
        }
    }

    /// Registers `table`, assigning "don't care" indices from the top of `range`.
    #[track_caller]
    fn register(
        &self,
        table: &mut [AmEntry],
        range: std::ops::RangeInclusive<AmIndex>,
    ) -> Result<(), RegisterError> {
        let _guard = self.register.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken: Vec<bool> = (0..256).map(|i| self.get(i as AmIndex).is_some()).collect();
        for e in table.iter() {
            if e.nargs > max_args() {
                return Err(RegisterError::TooManyArgs {
                    name: e.name,
                    nargs: e.nargs,
                });
            }
            let short_fn = matches!(e.handler, HandlerFn::Short(_));
            if short_fn != (e.category == AmCategory::Short) {
                return Err(RegisterError::WrongFunction { name: e.name });
            }
            if e.index != 0 {
                if !range.contains(&e.index) {
                    return Err(RegisterError::IndexReserved(e.index));
                }
                if taken[e.index as usize] {
                    return Err(RegisterError::IndexTaken(e.index));
                }
                taken[e.index as usize] = true;
            }
        }
        let mut assigned = Vec::with_capacity(table.len());
        for e in table.iter() {
            if e.index == 0 {
                let free = range
                    .clone()
                    .rev()
                    .find(|&i| !taken[i as usize])
                    .ok_or(RegisterError::TableFull)?;
                taken[free as usize] = true;
                assigned.push(free);
            } else {
                assigned.push(e.index);
            }
        }
        for (e, index) in table.iter_mut().zip(assigned) {
            e.index = index;
            let entry = Box::into_raw(Box::new(*e));
            let site = Location::caller() as *const Location<'static> as *mut Location<'static>;
            self.sites[index as usize].store(site, Ordering::Release);
            self.entries[index as usize].store(entry, Ordering::Release);
        }
        Ok(())
    }
}

impl Endpoint {
    /// Registers AM handlers (GASNet-EX `gex_EP_RegisterHandlers`). Entries with index 0
    /// get the highest free index, in table order, written back into `table`.
    ///
    /// Not collective: register before any rank may send to these handlers (for example
    /// before a barrier).
    #[track_caller]
    pub fn register_handlers(&self, table: &mut [AmEntry]) -> Result<(), RegisterError> {
        runtime("Endpoint::register_handlers");
        HANDLERS.register(table, AM_INDEX_BASE..=255)
    }
}

/// Registers the library's own handlers (indices below `AM_INDEX_BASE`).
#[track_caller]
pub(crate) fn register_internal(table: &mut [AmEntry]) {
    HANDLERS
        .register(table, 1..=AM_INDEX_BASE - 1)
        .expect("internal handler indices are unique");
}
