//! Device memory of other processes of this host, mapped here (CUDA IPC): a transfer to
//! or from another rank's device segment on this host is then one device copy made by
//! this process, not a bounce through the owner's handlers.
//!
//! The first transfer that names a segment of rank `r` asks `r` for it (a Short Request
//! to [`ASK_HANDLER`] with the address): the owner finds the segment holding it, exports
//! it (`Device::export`: a CUDA IPC handle, or an emulated device's memory file), notes
//! `r`'s importer, and answers ([`ANSWER_HANDLER`], a Medium carrying the handle, the
//! segment's base, size and class, and its offset in the allocation the handle maps,
//! not 0 for a segment over part of the program's memory). The asker maps the
//! allocation with a device of its own of that class (`Device::import`) and keeps the
//! mapping in its table of imports; later transfers into the segment find it there. A
//! segment this process cannot map (no device of that class here, or the driver
//! refuses: CUDA IPC between devices without peer access, or a second opening of an
//! allocation two wrapped segments share) is kept as such, and its transfers take the
//! messages of `remote`.
//!
//! A segment's owner frees its memory only after every importer has unmapped it: its
//! drop sends each importer a Request to [`FORGET_HANDLER`], whose handler removes the
//! import (waiting for a copy into it that runs now: the table's lock) and answers
//! ([`FORGOTTEN_HANDLER`]); the owner polls until every answer is in. An import being
//! made while the forget arrives (the answer of the ask and the forget travel on two
//! networks, in either order) is cancelled: a forget marks every ask of this process to
//! that owner, under the table's lock, and a cancelled ask maps nothing. Client
//! finalization unmaps every import before its barrier ([`close_all`]), so a segment
//! dropped after finalization, whose owner asks no importer, is mapped nowhere else.
//!
//! `GEX_KINDS_IPC=0` turns this off (every transfer to another rank takes messages),
//! for tests and to compare.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use parking_lot::RwLock;

use crate::am::{join_u64, split_u64, AmCategory, AmEntry, AmIndex, AmRole, Token};
use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::{Flags, Lc};

use super::{registry, DeviceAddr, Mk};

/// The library's handler index of a request for a segment's handle (run by its owner).
pub(crate) const ASK_HANDLER: AmIndex = 9;
/// Its Reply, carrying the handle.
pub(crate) const ANSWER_HANDLER: AmIndex = 10;
/// The library's handler index of an owner's notice that a segment is going away.
pub(crate) const FORGET_HANDLER: AmIndex = 11;
/// Its Reply, once the import is unmapped.
pub(crate) const FORGOTTEN_HANDLER: AmIndex = 12;

/// The environment variable that turns mapping other processes' segments off (`0`).
pub(crate) const GEX_KINDS_IPC: &str = "GEX_KINDS_IPC";

const FOUND: u32 = 0;
const NOT_FOUND: u32 = 1;
const NOT_EXPORTED: u32 = 2;

/// The classes, numbered for the wire.
const CLASSES: [&str; 2] = ["cuda_device", "emulated_device"];

/// A segment of another rank as this process sees it.
struct Import {
    size: usize,
    /// The device that maps its allocation here, and where; `None` if this process
    /// cannot.
    mapped: Option<(Mk, DeviceAddr)>,
    /// The segment's offset in that allocation.
    offset: u64,
}

/// A request for a segment's handle, waiting for its answer.
#[derive(Default)]
struct Ask {
    answered: AtomicBool,
    cancelled: AtomicBool,
    answer: Mutex<Option<Answer>>,
}

struct Answer {
    status: u32,
    base: DeviceAddr,
    size: usize,
    class: u32,
    handle: Vec<u8>,
    /// The segment's offset in the allocation `handle` maps, and the allocation's size.
    offset: u64,
    allocation: usize,
}

#[derive(Default)]
struct Imports {
    /// By owner and base address.
    segments: BTreeMap<(Rank, DeviceAddr), Import>,
    /// Asks in flight, by owner.
    asks: Vec<(Rank, Arc<Ask>)>,
}

static IMPORTS: RwLock<Option<Imports>> = parking_lot::const_rwlock(None);

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(GEX_KINDS_IPC).map_or(true, |v| v.trim() != "0"))
}

/// The entries of the four handlers (registered by client initialization).
pub(crate) fn handler_entries() -> [AmEntry; 4] {
    [
        AmEntry::short("gex device segment ask", AmRole::Request, 4, on_ask)
            .unreported()
            .at(ASK_HANDLER),
        AmEntry::payload(
            "gex device segment answer",
            AmCategory::Medium,
            AmRole::Reply,
            12,
            on_answer,
        )
        .unreported()
        .at(ANSWER_HANDLER),
        AmEntry::short("gex device segment forget", AmRole::Request, 4, on_forget)
            .unreported()
            .at(FORGET_HANDLER),
        AmEntry::short(
            "gex device segment forgotten",
            AmRole::Reply,
            2,
            on_forgotten,
        )
        .unreported()
        .at(FORGOTTEN_HANDLER),
    ]
}

/// Runs `f` with a device of this process and the address here of `[addr, addr +
/// len)` of job rank `rank`'s device memory, if this process maps (or, when `may_ask`,
/// can map) the segment holding it; `None` to take messages instead (another host, a
/// segment this process cannot map, or none holding the range). `f` runs under the
/// table's read lock: a call inside it must not ask (`may_ask` false), which takes the
/// write lock.
pub(super) fn with<R>(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    addr: DeviceAddr,
    len: usize,
    may_ask: bool,
    f: impl FnOnce(&Mk, DeviceAddr) -> R,
) -> Option<R> {
    if !enabled() || rank == rt.conduit.rank() || rt.conduit.host().0.binary_search(&rank).is_err()
    {
        return None;
    }
    let mut f = Some(f);
    // At most twice: the second lookup follows a successful ask.
    for _ in 0..2 {
        {
            // Recursive: a copy between two mapped segments holds two lookups.
            let table = IMPORTS.read_recursive();
            if let Some((base, import)) = table.as_ref().and_then(|t| lookup(t, rank, addr, len)) {
                let (mk, local) = import.mapped.as_ref()?;
                let f = f.take().expect("run once");
                return Some(f(mk, local + import.offset + (addr - base)));
            }
        }
        if !may_ask || !ask(rt, call, rank, addr) {
            return None;
        }
    }
    None
}

/// The import of `rank`'s segment holding `[addr, addr + len)`, with its base.
fn lookup(t: &Imports, rank: Rank, addr: DeviceAddr, len: usize) -> Option<(DeviceAddr, &Import)> {
    let (&(r, base), import) = t.segments.range(..=(rank, addr)).next_back()?;
    let inside = r == rank
        && (addr - base)
            .checked_add(len as u64)
            .is_some_and(|end| end <= import.size as u64);
    inside.then_some((base, import))
}

/// Asks `rank` for the segment holding `addr` and maps it here if this process can
/// (or notes that it cannot). False if `rank` has no such segment or the ask was
/// cancelled by the segment's going away.
fn ask(rt: &Runtime, call: &'static str, rank: Rank, addr: DeviceAddr) -> bool {
    let asked = Arc::new(Ask::default());
    IMPORTS
        .write()
        .get_or_insert_with(Imports::default)
        .asks
        .push((rank, asked.clone()));
    let [r0, r1] = split_u64(Arc::as_ptr(&asked) as u64);
    let [a0, a1] = split_u64(addr);
    crate::am::send_internal(rt, call, rank, ASK_HANDLER, &[r0, r1, a0, a1], Flags::NONE)
        .expect("a send without Flags::IMMEDIATE waits for room");
    rt.wait_until(|| asked.answered.load(Ordering::Acquire));
    let answer = asked
        .answer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("an answered ask has its answer");
    // Mapped under the table's lock, which a forget of the segment takes: a forget that
    // came first cancelled this ask (its owner may have freed the memory since, so the
    // handle is not opened), and one that comes now waits for the import, then unmaps
    // it before answering its owner.
    let mut table = IMPORTS.write();
    let t = table.get_or_insert_with(Imports::default);
    t.asks.retain(|(_, a)| !Arc::ptr_eq(a, &asked));
    if answer.status == NOT_FOUND || asked.cancelled.load(Ordering::Acquire) {
        return false;
    }
    // Another thread's ask may have imported the segment meanwhile: that import stays
    // and this ask opens nothing (a second opening would outlive the forget, which
    // closes the one import of the table).
    t.segments
        .entry((rank, answer.base))
        .or_insert_with(|| Import {
            size: answer.size,
            mapped: map(call, &answer),
            offset: answer.offset,
        });
    true
}

/// Unmaps every segment of other processes mapped here (client finalization, before
/// its barrier): after it, an owner may free its segments without asking this process,
/// as a segment dropped after finalization does.
pub(super) fn close_all() {
    let imports = IMPORTS.write().take();
    for import in imports.into_iter().flat_map(|t| t.segments.into_values()) {
        if let Some((mk, local)) = import.mapped {
            // SAFETY: mapped by `map`; out of the table, so no transfer uses it.
            unsafe { mk.0.dev.close(local) };
        }
    }
}

/// Maps the answered segment with a device of this process of its class, if there is
/// one and the driver allows it.
fn map(call: &'static str, answer: &Answer) -> Option<(Mk, DeviceAddr)> {
    if answer.status != FOUND {
        return None;
    }
    let class = CLASSES.get(answer.class as usize)?;
    let mk = registry::any_of(class)?;
    // SAFETY: a handle its owner exported for an allocation of `allocation` bytes of
    // this class, holding the segment, which it frees (or, for the program's memory,
    // leaves) only after this process has unmapped it (its forget).
    let local = unsafe { mk.0.dev.import(call, &answer.handle, answer.allocation) }.ok()?;
    Some((mk, local))
}

/// The owner's handler: finds the segment, exports it, notes the importer, answers.
fn on_ask(token: &Token<'_>, args: &[u32]) {
    let addr = join_u64(args[2], args[3]);
    let asker = token.src_rank();
    let found = registry::export(addr, asker);
    let (status, base, size, class, handle, offset, allocation) = match found {
        None => (NOT_FOUND, 0, 0, 0, Vec::new(), 0, 0),
        Some(e) => {
            let code = CLASSES
                .iter()
                .position(|&c| c == e.class)
                .unwrap_or(CLASSES.len()) as u32;
            let (status, handle) = match e.handle {
                Ok(h) => (FOUND, h),
                Err(_) => (NOT_EXPORTED, Vec::new()),
            };
            (status, e.base, e.size, code, handle, e.offset, e.allocation)
        }
    };
    let [b0, b1] = split_u64(base);
    let [s0, s1] = split_u64(size as u64);
    let [o0, o1] = split_u64(offset);
    let [a0, a1] = split_u64(allocation as u64);
    token
        .reply_medium(
            ANSWER_HANDLER,
            &handle,
            Lc::Now,
            Flags::NONE,
            &[
                args[0], args[1], status, b0, b1, s0, s1, class, o0, o1, a0, a1,
            ],
        )
        .expect("a Reply without IMMEDIATE waits for room");
}

fn on_answer(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    // SAFETY: the pointer of an `Arc<Ask>` that `ask` holds until it is answered.
    let asked = unsafe { &*(join_u64(args[0], args[1]) as usize as *const Ask) };
    *asked.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(Answer {
        status: args[2],
        base: join_u64(args[3], args[4]),
        size: join_u64(args[5], args[6]) as usize,
        class: args[7],
        handle: payload.to_vec(),
        offset: join_u64(args[8], args[9]),
        allocation: join_u64(args[10], args[11]) as usize,
    });
    asked.answered.store(true, Ordering::Release);
}

/// Tells every importer of the segment at `base` that it goes away, and waits until
/// each has unmapped it. Called by its drop before the memory is freed.
pub(super) fn forget(base: DeviceAddr, importers: &[Rank]) {
    if importers.is_empty() {
        return;
    }
    let Some(rt) = crate::runtime::try_runtime() else {
        return;
    };
    if rt.finalized.load(Ordering::Acquire) {
        // Every importer unmapped it in its finalization (`close_all`), and none would
        // answer now.
        return;
    }
    const CALL: &str = "gex::kinds::DeviceSegment::drop";
    crate::context::check_may_communicate("kinds::DeviceSegment::drop");
    // The answers still to come, each counted once its request went out (an answer
    // that comes first wraps the count below zero for a moment: only the total matters).
    // They write this frame's `left`, so it is waited for even if a handler run
    // meanwhile unwinds.
    let left = AtomicUsize::new(0);
    let all_answered = || left.load(Ordering::Acquire) == 0;
    let answers = crate::progress::WaitOnUnwind::new(rt, &all_answered);
    let [l0, l1] = split_u64(&left as *const AtomicUsize as u64);
    let [b0, b1] = split_u64(base);
    for &r in importers {
        let sent =
            crate::am::send_internal(rt, CALL, r, FORGET_HANDLER, &[l0, l1, b0, b1], Flags::NONE);
        sent.expect("a send without Flags::IMMEDIATE waits for room");
        left.fetch_add(1, Ordering::AcqRel);
    }
    rt.wait_until(all_answered);
    drop(answers);
}

/// An importer's handler: unmaps the segment (after a copy into it that runs now),
/// cancels asks to its owner in flight, answers.
fn on_forget(token: &Token<'_>, args: &[u32]) {
    let owner = token.src_rank();
    let base = join_u64(args[2], args[3]);
    let mut table = IMPORTS.write();
    if let Some(t) = table.as_mut() {
        for (_, a) in t.asks.iter().filter(|(r, _)| *r == owner) {
            a.cancelled.store(true, Ordering::Release);
        }
        if let Some(Import {
            mapped: Some((mk, local)),
            ..
        }) = t.segments.remove(&(owner, base))
        {
            // SAFETY: mapped by `map`; out of the table, under its lock, so unused.
            unsafe { mk.0.dev.close(local) };
        }
    }
    drop(table);
    token
        .reply_short(FORGOTTEN_HANDLER, &[args[0], args[1]], Flags::NONE)
        .expect("a Reply without IMMEDIATE waits for room");
}

fn on_forgotten(_token: &Token<'_>, args: &[u32]) {
    // SAFETY: the counter `forget` waits on until every importer has answered.
    let left = unsafe { &*(join_u64(args[0], args[1]) as usize as *const AtomicUsize) };
    left.fetch_sub(1, Ordering::Release);
}
