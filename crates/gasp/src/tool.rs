//! The tool side of the interface (GASP §3.2–3.4): what a tool receives and implements.
//!
//! A tool is a value implementing [`Tool`], created once per rank by the tool's
//! initialization function — the Rust form of `gasp_init(srclanguage, &argc, &argv)`,
//! which receives the language, the program arguments (which it may edit) and the
//! rank's place in the job. The value it returns is the spec's `gasp_context_t`: every
//! later call reaches the same value. A rank is a process, so "per rank" is "per
//! process"; the tool must be thread-safe because every thread of the rank reports
//! events (§3.2: "gasp_event_notify shall be thread-safe").

use std::ffi::CStr;
use std::panic::Location;

/// The source language of the events (`gasp_lang_t`). The spec's five values keep their
/// numbers; ours follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum Language {
    /// `GASP_LANG_UPC` (§3.2).
    Upc = 0,
    /// `GASP_LANG_TITANIUM` (§3.2).
    Titanium = 1,
    /// `GASP_LANG_CAF` (§3.2), Co-Array Fortran.
    Caf = 2,
    /// `GASP_LANG_MPI` (§3.2).
    Mpi = 3,
    /// `GASP_LANG_SHMEM` (§3.2).
    Shmem = 4,
    /// Programs using `upcxx`.
    Upcxx = 5,
    /// Programs using `gex` directly.
    Gex = 6,
}

/// `gasp_evttype_t` (§3.2): whether an event is a begin event, end event, or atomic
/// event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum EventType {
    /// `GASP_START`: the beginning of an operation.
    Start = 0,
    /// `GASP_END`: the end of an operation begun by a START of the same tag.
    End = 1,
    /// `GASP_ATOMIC`: an event without duration.
    Atomic = 2,
}

/// A global pointer as events carry it (`gasp_upcxx_gptr_t`): the owning rank and the
/// address in the owner's address space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct GPtr {
    /// The rank whose shared segment holds the data.
    pub rank: u32,
    /// The address in the owner's address space.
    pub addr: u64,
}

impl GPtr {
    /// The pointer-to-shared of address `addr` of rank `rank`.
    #[inline]
    pub fn new(rank: u32, addr: usize) -> GPtr {
        GPtr {
            rank,
            addr: addr as u64,
        }
    }
}

/// One argument of an event (the varargs of `gasp_event_notify`). Each variant names
/// the C type a C tool reads it as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    /// `int`.
    Int(i32),
    /// `size_t`, a count that is not bytes moved.
    Size(usize),
    /// `size_t`, a number of bytes moved (tools add these up).
    Bytes(usize),
    /// `int`, the rank at the other end of the operation (the event's peer).
    Rank(u32),
    /// `void *`, a local address.
    Ptr(usize),
    /// `gasp_upcxx_gptr_t *`, a pointer-to-shared.
    GPtr(GPtr),
    /// `gasp_upc_nb_handle_t` (`uint64_t`).
    Handle(u64),
    /// `uint64_t`.
    U64(u64),
    /// `int64_t` (user event values).
    I64(i64),
    /// `double` (user event values).
    F64(f64),
    /// `const char *` (user event values).
    Str(&'a CStr),
}

/// One event as a tool receives it (the arguments of `gasp_event_notify`).
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// `evttag`: the event identifier, a system event's (§5.4, [`crate::events`]) or a
    /// user event's (§5.3).
    pub tag: u32,
    /// `evttype`: START, END or ATOMIC.
    pub ty: EventType,
    /// The user's call site that caused the event.
    pub location: &'static Location<'static>,
    /// The event's arguments, as its event's list declares them (§3.2 `varargs`; the
    /// lists of [`crate::events`], or the values the user passed for a user event).
    pub args: &'a [Arg<'a>],
}

impl Event<'_> {
    /// The rank at the other end: the first [`Arg::Rank`], else the rank of the first
    /// [`Arg::GPtr`].
    pub fn peer(&self) -> Option<u32> {
        let rank = self.args.iter().find_map(|a| match a {
            Arg::Rank(r) => Some(*r),
            _ => None,
        });
        rank.or_else(|| {
            self.args.iter().find_map(|a| match a {
                Arg::GPtr(g) => Some(g.rank),
                _ => None,
            })
        })
    }

    /// The bytes the event moves: the sum of its [`Arg::Bytes`].
    pub fn bytes(&self) -> u64 {
        self.args
            .iter()
            .map(|a| match a {
                Arg::Bytes(n) => *n as u64,
                _ => 0,
            })
            .sum()
    }

    /// The non-blocking handle the event names, if any.
    pub fn handle(&self) -> Option<u64> {
        self.args.iter().find_map(|a| match a {
            Arg::Handle(h) => Some(*h),
            _ => None,
        })
    }
}

/// What a tool learns when it is initialized (`gasp_init`'s arguments, plus the rank's
/// place in the job).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitInfo {
    /// `srclanguage`: the language of the events the tool will receive.
    pub language: Language,
    /// This rank's number in the job.
    pub rank: u32,
    /// The number of ranks in the job.
    pub ranks: u32,
    /// The ranks whose segments this rank reaches with loads and stores (its local team),
    /// in increasing order: not always a range (ranks placed round-robin over hosts).
    pub local_ranks: Vec<u32>,
}

/// A performance tool (the functions of GASP §3.2–3.4 that tool code provides).
pub trait Tool: Send + Sync + 'static {
    /// `gasp_event_notify`: one event. Called from any thread of the rank, never
    /// re-entrantly on one thread (events the tool causes itself are not reported).
    fn event_notify(&self, event: &Event<'_>);

    /// `gasp_control` (§3.3): stop (`false`) or resume (`true`) measuring. Returns the
    /// previous setting (`true` before the first call).
    fn control(&self, on: bool) -> bool;

    /// `gasp_create_event` (§3.4): a tag for a user event, in
    /// [`crate::USEREVT_START`]`..=`[`crate::USEREVT_END`].
    fn create_event(&self, name: &str, desc: Option<&str>) -> u32;

    /// The end of the run (collective exit, or the end of `gex::Client::finalize`):
    /// write what was measured. Called once, from the thread that finalizes.
    fn finish(&self) {}
}
