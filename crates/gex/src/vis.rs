//! Non-contiguous one-sided transfers: Vector, Indexed and Strided put and get
//! (GASNet-EX spec, "Vector/Indexed/Strided (VIS)", `gex_VIS_*`), in Blocking, NB and
//! NBI forms, and the peer completion handler of VIS puts
//! (`gex_VIS_SetPeerCompletionHandler`).
//!
//! ```
//! use gex::{Client, Flags, Memvec, Segment};
//!
//! let (client, _ep, team) = Client::init("VIS_DOC", Flags::NONE).unwrap();
//! let seg = Segment::attach(&team, 1 << 16).unwrap();
//! let base = team.segment_bound(0).unwrap().owner_addr;
//! // Two local pieces into one remote run and a remote gap.
//! let dst = [Memvec::new(base, 3), Memvec::new(base + 100, 2)];
//! team.vector_put_blocking(0, &dst, &[&b"abcd"[..], b"e"], Flags::NONE).unwrap();
//! // Transpose a 2×3 matrix of bytes into rank 0's segment at base + 200.
//! let m = *b"123456";
//! team.strided_put_blocking(0, base + 200, &[2, 1], &m, 0, &[1, 3], 1, &[3, 2], Flags::NONE)
//!     .unwrap();
//! let mut back = [0u8; 6];
//! team.get_blocking(&mut back, 0, base + 200, Flags::NONE).unwrap();
//! assert_eq!(&back, b"142536");
//! # let _ = seg;
//! client.finalize();
//! ```
//!
//! # Arguments
//!
//! The remote side of each call is what the spec passes: addresses in the target's
//! address space, inside its bound segment ([`Memvec`] lists, address lists with one
//! length, or a base address with byte strides). The local side is Rust memory: slices
//! of pieces for Vector and Indexed (a get's destination pieces are `&mut` slices, which
//! cannot overlap), and for Strided one slice holding the whole local shape plus the
//! offset of its base element in it, so a negative stride is expressible and the shape is
//! checked against the slice. As in [`rma`](crate::rma), the Blocking calls borrow their
//! buffers; the NB and NBI calls are `unsafe`, because a buffer must stay valid until the
//! operation is synchronized (a put's source, until its local completion). The metadata
//! (lists, strides, counts) are consumed before a call returns, which the spec requires
//! only of the strided ones.
//!
//! # Checks, before any byte moves
//!
//! Every call checks the rank, every remote range against the target's segment (a
//! strided shape by its extent, computed with overflow-checked arithmetic), every local
//! range against its slice, that both sides describe the same number of bytes, and that
//! no two destination locations overlap (the spec leaves that undefined; we refuse it).
//! One exception: a strided shape of more than 2^22 runs whose levels interleave (a
//! stride shorter than what the levels inside it span) is not searched run by run, and
//! overlap there stays undefined (each element is still copied whole). A failure is a
//! panic naming the call. Source locations may overlap.
//!
//! # Degenerate cases (spec "Strided Puts and Gets", "Degenerate cases")
//!
//! * Strided, `elemsz == 0`: a no-op; every other argument is ignored.
//! * Strided, `count` empty (`stridelevels == 0`): one contiguous copy of `elemsz`
//!   bytes; the strides are ignored.
//! * Strided, an entry of `count` is 0: a no-op; rank and addresses are ignored, but the
//!   stride slices must still hold `count.len()` entries.
//! * Vector and Indexed: lists may be empty and entries may have length zero; an empty
//!   entry's address is ignored. A transfer of zero bytes moves nothing (the rank is
//!   still checked).
//!
//! A no-op still counts as "the next VIS operation" for an armed peer completion
//! handler, whose message is then sent to the named rank (so that rank is checked).
//!
//! # Completion
//!
//! Where the target's segment is mapped here (every rank, on the smp conduit), the data
//! are copied through the mapping during the call and the operation is complete at
//! return ([`Event::invalid`], nothing pending in the NBI categories); otherwise each
//! contiguous run is one put or get as gex's RMA calls make it (the conduit's, or, for
//! a small run where the conduit asks for messages, a place in a message of runs to
//! the owner, which carries as many as fit: `rma/remote.rs`), and the event stands for
//! all of them. With [`Flags::ENABLE_LEAF_LC`] local completion happens before return
//! (the conduit reads a put's source during the call: it copies it, or waits for it to
//! be read), so the leaf event of an NB put ([`Event::query_leaf`]) is invalid and an
//! NBI put adds nothing to [`EventCategory::LC`](crate::EventCategory::LC). Without it,
//! the caller of an NB or NBI put keeps its sources until the operation completes, and
//! the conduit reads the runs it takes (not those in messages, which are copies) until
//! then, without copying them or waiting. [`Flags::IMMEDIATE`] is accepted
//! and never taken: a run the conduit leaves to messages (see `rma/remote.rs`) waits
//! for room to send, as the conduit's own transfers wait for theirs.
//!
//! # The copy loops
//!
//! A strided shape is first normalized (`vis/shape.rs`): levels of count 1 drop out,
//! levels contiguous on both sides fold into the element, and a level that continues
//! another's progression on both sides merges with it. The innermost remaining level is
//! the one with the smallest destination stride, so writes stream; a transposing shape
//! is then copied element by element with fixed-size loads and stores for the common
//! element sizes. Vector and indexed lists are checked in one loop per list kind and
//! each run is one `memcpy` (`memmove` where a run's source and destination overlap).
//!
//! # GASP
//!
//! Every call reports `GASP_GEX_VIS_PUT` or `GASP_GEX_VIS_GET` (events of our own:
//! GASP 1.4 has none for non-contiguous transfers) with the target, the shape, the runs
//! and the bytes.

mod list;
mod peer;
mod shape;
mod strided;

use std::sync::Arc;

use crate::conduit::{AddressError, BoundSegment, Completion, Conduit, OpHandle, Rank};
use crate::context;
use crate::event::{self, Event, EventCategory};
use crate::rma::remote::Runs;
use crate::runtime::{runtime, Runtime};
use crate::team::Team;
use crate::Flags;

pub use peer::{set_peer_completion_handler, VIS_MAX_PEERCOMPLETION};

/// One contiguous range of a target's memory: address (in the target's address space)
/// and length in bytes (GASNet-EX `gex_Memvec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memvec {
    /// Start of the range (`gex_addr`).
    pub addr: usize,
    /// Length in bytes (`gex_len`).
    pub len: usize,
}

impl Memvec {
    /// The range `[addr, addr + len)`.
    pub const fn new(addr: usize, len: usize) -> Memvec {
        Memvec { addr, len }
    }
}

/// The shape of a VIS operation, as reported to GASP (the `shape` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Vector = 0,
    Indexed = 1,
    Strided = 2,
}

/// The completion form of a call: Blocking, NBI or NB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Blocking,
    Nbi,
    Nb,
}

/// Whether a call puts or gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Put,
    Get,
}

/// Checks the flags of a VIS call: `ENABLE_LEAF_LC` is for NB and NBI puts only, and
/// `IMMEDIATE` may not be given to an operation with an armed peer completion handler.
#[track_caller]
fn check_flags(call: &str, dir: Dir, form: Form, flags: Flags) {
    if flags.contains(Flags::ENABLE_LEAF_LC) && (dir == Dir::Get || form == Form::Blocking) {
        panic!("gex::{call}: Flags::ENABLE_LEAF_LC is for NB and NBI VIS puts only");
    }
    if flags.contains(Flags::IMMEDIATE) && peer::armed() {
        panic!(
            "gex::{call}: Flags::IMMEDIATE may not be given to the operation a peer \
             completion handler is armed for"
        );
    }
}

/// The target of a checked call: its ranks and its bound segment.
pub(crate) struct Target {
    rt: &'static Runtime,
    call: &'static str,
    /// The rank as the caller named it (in the team), for messages.
    rank: Rank,
    /// The job rank.
    job: Rank,
    seg: BoundSegment,
}

impl Target {
    /// Checks the context and the rank, and finds the target's segment.
    #[track_caller]
    fn new(call: &'static str, team: &Team, rank: Rank) -> Target {
        let rt = runtime(call);
        context::check_may_communicate(call);
        let job = team.job_rank_of(call, rank);
        let Some(seg) = rt.conduit.bound_segment(job) else {
            crate::rma::address_error(call, rank, 0, 0, AddressError::NoSegment)
        };
        Target {
            rt,
            call,
            rank,
            job,
            seg,
        }
    }

    /// Checks that `[addr, addr + len)` lies in the target's segment.
    #[inline]
    #[track_caller]
    fn check(&self, addr: usize, len: usize) {
        let offset = addr.wrapping_sub(self.seg.owner_addr);
        if offset > self.seg.size || len > self.seg.size - offset {
            let e = AddressError::OutOfSegment {
                owner_addr: self.seg.owner_addr,
                size: self.seg.size,
            };
            crate::rma::address_error(self.call, self.rank, addr, len, e);
        }
    }

    /// Where a checked remote address is mapped in this process, if it is.
    #[inline]
    fn local(&self, addr: usize) -> Option<*mut u8> {
        self.seg
            .local_addr
            .map(|base| (base + (addr - self.seg.owner_addr)) as *mut u8)
    }
}

/// Moves the contiguous runs of one operation whose ranges are all checked, collecting
/// the conduit operations still pending.
pub(crate) struct Mover<'t> {
    target: &'t Target,
    pending: Vec<Arc<OpHandle>>,
    /// The small runs to a segment not mapped here that the conduit leaves to
    /// messages, gathered into messages of runs.
    runs: Option<Runs>,
    /// The caller keeps a put's sources until the operation completes ([`held`]), so
    /// the conduit may read them until then.
    held: bool,
}

/// Whether a VIS call's caller keeps its put's sources until the operation completes:
/// an NB or NBI put without [`Flags::ENABLE_LEAF_LC`] (whose contract says so).
fn held(dir: Dir, form: Form, flags: Flags) -> bool {
    dir == Dir::Put && form != Form::Blocking && !flags.contains(Flags::ENABLE_LEAF_LC)
}

impl<'t> Mover<'t> {
    fn new(target: &'t Target, dir: Dir, form: Form, flags: Flags) -> Mover<'t> {
        Mover {
            target,
            pending: Vec::new(),
            runs: None,
            held: held(dir, form, flags),
        }
    }

    fn pending(&mut self, c: Completion) {
        if let Completion::Pending(op) = c {
            self.pending.push(op);
        }
    }

    /// The messages of runs of this operation.
    fn runs(&mut self) -> &mut Runs {
        let t = self.target;
        self.runs
            .get_or_insert_with(|| Runs::new(t.rt, t.call, t.job))
    }

    /// Puts `len` bytes from `src` to the checked remote `addr`.
    ///
    /// # Safety
    /// `src` must be valid for `len` bytes of reads, until the operation completes when
    /// the put is [`held`].
    #[inline]
    unsafe fn put(&mut self, addr: usize, src: *const u8, len: usize) {
        match self.target.local(addr) {
            // SAFETY: the range was checked against the segment, which is mapped at
            // `dst` for the life of the job; `src` is the caller's.
            Some(dst) => unsafe { copy_run(src, dst, len) },
            None => {
                // SAFETY: the caller's contract.
                let bytes = unsafe { std::slice::from_raw_parts(src, len) };
                let t = self.target;
                if Runs::takes(t.rt, len) {
                    if let Some(c) = self.runs().put(addr, bytes) {
                        self.pending(c);
                    }
                    return;
                }
                let c = match self.held {
                    // SAFETY: the caller's contract.
                    true => unsafe {
                        crate::rma::remote::put_held(t.rt, t.call, t.job, addr, bytes)
                    },
                    false => crate::rma::remote::put(t.rt, t.call, t.job, addr, bytes, false),
                };
                self.pending(c.expect("the range was checked before any byte moved"));
            }
        }
    }

    /// Gets `len` bytes at the checked remote `addr` into `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes until the operation is complete.
    #[inline]
    unsafe fn get(&mut self, dst: *mut u8, addr: usize, len: usize) {
        match self.target.local(addr) {
            // SAFETY: as in `put`, with the roles exchanged.
            Some(src) => unsafe { copy_run(src, dst, len) },
            None => {
                let t = self.target;
                if Runs::takes(t.rt, len) {
                    // SAFETY: the caller's contract, until the operation's completion,
                    // which waits for the message's.
                    if let Some(c) = unsafe { self.runs().get(dst, addr, len) } {
                        self.pending(c);
                    }
                    return;
                }
                // SAFETY: the caller's contract.
                let c =
                    unsafe { crate::rma::remote::get(t.rt, t.call, dst, t.job, addr, len, false) };
                self.pending(c.expect("the range was checked before any byte moved"));
            }
        }
    }

    /// Completes the operation in its form: waits (Blocking), files the pending
    /// conduit operations in the NBI category, or returns their event (NB). An armed
    /// peer completion handler is sent once the data are at the target. Returns the
    /// event and the operation's GASP handle.
    #[track_caller]
    fn finish(mut self, dir: Dir, form: Form, peer: Option<peer::Armed>) -> (Event, u64) {
        if let Some(c) = self.runs.as_mut().and_then(Runs::flush) {
            self.pending(c);
        }
        let rt = self.target.rt;
        let mut pending = std::mem::take(&mut self.pending);
        if let Some(armed) = peer {
            // The handler must find the data: wait for any transfer still under way.
            rt.wait_through_unwind(&|| pending.iter().all(|o| o.is_done()));
            pending.clear();
            armed.send(rt, self.target.call, self.target.job);
        }
        match form {
            Form::Blocking => {
                rt.wait_through_unwind(&|| pending.iter().all(|o| o.is_done()));
                (Event::invalid(), gasp::events::NB_TRIVIAL)
            }
            Form::Nbi => {
                let category = match dir {
                    Dir::Put => EventCategory::PUT,
                    Dir::Get => EventCategory::GET,
                };
                let handle = if pending.is_empty() {
                    gasp::events::NB_TRIVIAL
                } else {
                    gasp::events::NB_IMPLICIT
                };
                for op in pending {
                    event::track_nbi(category, Completion::Pending(op));
                }
                (Event::invalid(), handle)
            }
            Form::Nb => {
                // A put that keeps its sources ([`held`]): its local completion is
                // its operation completion ("behaves as GEX_EVENT_DEFER"), so its
                // event's LC leaf completes with it.
                let lc = if self.held {
                    pending.clone()
                } else {
                    Vec::new()
                };
                let e = Event::from_ops(pending, lc);
                let handle = e.gasp_handle();
                (e, handle)
            }
        }
    }
}

impl Drop for Mover<'_> {
    /// A mover dropped before it finished (a send that unwound, from a handler's panic
    /// the program catches) waits for the transfers it started: they read and write
    /// the caller's buffers, which the caller, given no event, may free at once.
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let rt = self.target.rt;
            rt.wait_until(|| self.pending.iter().all(|o| o.is_done()));
        }
    }
}

/// Copies one run of `len` bytes. Overlap of source and destination is the program's
/// error (an undefined result, spec "Restrictions"), but it must not be undefined
/// behaviour: runs that do not overlap (all of them in a correct program) are copied
/// with `memcpy`, the others with `memmove`.
///
/// # Safety
/// `src` must be valid for `len` bytes of reads and `dst` for `len` bytes of writes.
#[inline(always)]
pub(crate) unsafe fn copy_run(src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    // SAFETY: (both arms) the caller's contract; the first only for disjoint ranges.
    unsafe {
        if s + len <= d || d + len <= s {
            std::ptr::copy_nonoverlapping(src, dst, len)
        } else {
            std::ptr::copy(src, dst, len)
        }
    }
}

/// Runs `op`, the transfer, inside the GASP interval of a VIS operation on job rank `r`
/// (`GASP_GEX_VIS_PUT` or `GASP_GEX_VIS_GET`); `op` returns the event and its handle.
#[track_caller]
fn reported(
    r: Rank,
    dir: Dir,
    kind: Kind,
    runs: usize,
    bytes: usize,
    op: impl FnOnce() -> (Event, u64),
) -> Event {
    let shape = kind as i32;
    match dir {
        Dir::Put => {
            let span = gasp::span!(GASP_GEX_VIS_PUT, r, shape, runs, bytes);
            let (e, handle) = op();
            gasp::end!(span, r, shape, runs, bytes, handle);
            e
        }
        Dir::Get => {
            let span = gasp::span!(GASP_GEX_VIS_GET, r, shape, runs, bytes);
            let (e, handle) = op();
            gasp::end!(span, r, shape, runs, bytes, handle);
            e
        }
    }
}
