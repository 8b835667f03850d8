//! The collective figures of `upcxx.rs`: each UPC++ collective over the world and the
//! `gex` collective it runs on, called directly on the same `gex` team, both ranks taking
//! part in every operation; rank 0 times it.
//!
//! The protocol is the `coll` bench's, [`Bench::collective`]: before each run rank 0
//! publishes, in a control word of its segment, how many operations it asked for so far,
//! and rank 1, spinning on it, performs the same operations until rank 0 ends the phase
//! with a second word. A
//! broadcast's root rotates (operation `j` is rooted at rank `j mod 2`), so the time is a
//! broadcast's latency, counted as bandwidth per receiver.
//!
//! Data is checked in the first operations of each figure on both ranks: a barrier's
//! ranks each write a word before the first one and read the other's after it; the
//! first two broadcasts (one from each root) arrive in a buffer poisoned beforehand and
//! must hold the root's pattern; the first reduction's result must be the exact sum.

use std::sync::atomic::{AtomicU64, Ordering};

use gex::ops::{Dt, Op};
use gex::{Flags, Rank};
use upcxx::GlobalPtr;

use crate::common::am::{check_pattern, fill_pattern};
use crate::common::figures::{Bench, Unit};
use crate::ctx::{word, Ctx};

/// The size of the broadcast figures.
const BCAST: usize = 1 << 20;
/// Each figure's control words (the total, then the phases ended) sit in a line pair.
const CTRL_STRIDE: usize = 128;
const CTRL_SLOTS: usize = 8;
/// After the slots: the word each rank writes before the first barrier of a barrier
/// figure, one per rank and figure.
const ARRIVE_OFF: usize = CTRL_SLOTS * CTRL_STRIDE;
const CTRL_BYTES: usize = ARRIVE_OFF + CTRL_SLOTS * 2 * 8;
/// Rank `r` broadcasts the pattern of seed `BCAST_SEED + r`.
const BCAST_SEED: u64 = 0x5eed_c0de;
/// Fills a destination before the operations whose data is checked.
const POISON: u8 = 0xee;

/// Allocates and zeroes this rank's control words (rank 0's are the ones used).
pub(crate) fn control_words() -> GlobalPtr<u64> {
    let gp = upcxx::allocate(CTRL_BYTES, CTRL_STRIDE)
        .expect("segment space for the control words")
        .cast::<u64>();
    // SAFETY: a fresh block of our segment that nobody else knows yet.
    unsafe { std::ptr::write_bytes(gp.local(), 0, CTRL_BYTES / 8) };
    gp
}

/// The collective figures: barriers and the reduction of one f64 (latencies), then
/// broadcasts of 1 MiB (bandwidths), each `gex` figure before its UPC++ counterpart.
pub(crate) fn figures(ctx: &Ctx) -> Vec<Bench<'static>> {
    let mut slots = Slots {
        base: if ctx.rank == 0 {
            ctx.me.coll_ctrl
        } else {
            ctx.peer.coll_ctrl
        },
        rank: ctx.rank,
        next: 0,
    };
    let team = ctx.team;
    let gex_src = segment_bytes(BCAST);
    let gex_dst = segment_bytes(BCAST);
    let gex_buf = segment_bytes(BCAST);
    let upc_buf = segment_bytes(BCAST);
    // SAFETY: this rank's fresh source block; no collective runs on it yet.
    fill_pattern(unsafe { bytes(gex_src) }, BCAST_SEED + u64::from(ctx.rank));

    vec![
        barrier(&mut slots, "coll.barrier", move || team.barrier_nb().wait()),
        barrier(&mut slots, "upcxx.barrier", || {
            upcxx::coll::barrier(upcxx::world())
        }),
        reduce_all(&mut slots, "coll.reduce_all_f64", move |x| {
            let (src, mut dst) = (x, f64::NAN);
            let (s, d) = ((&src as *const f64).cast(), (&mut dst as *mut f64).cast());
            // SAFETY: `src` and `dst` live on this stack frame until the wait returns.
            unsafe { team.reduce_to_all_nb(d, s, Dt::Dbl, 8, 1, Op::Add, None, Flags::NONE) }
                .wait();
            dst
        }),
        reduce_all(&mut slots, "upcxx.reduce_all_f64", |x| {
            upcxx::reduce_all(x, upcxx::op_fast_add, upcxx::world()).wait()
        }),
        broadcast(&mut slots, "coll.broadcast_1MiB", gex_dst, move |root| {
            let (d, s) = (gex_dst.local(), gex_src.local());
            // SAFETY: `gex_src` and `gex_dst` are distinct blocks of this rank's segment
            // of `BCAST` bytes, used by nothing else until the event completes.
            unsafe { team.broadcast_nb(root, d, s, BCAST, Flags::NONE) }.wait();
        }),
        broadcast(
            &mut slots,
            "coll.broadcast_inplace_1MiB",
            gex_buf,
            move |root| {
                let buf = gex_buf.local();
                // SAFETY: a block of this rank's segment of `BCAST` bytes, used by nothing
                // else until the event completes; at the root `src == dst`.
                unsafe { team.broadcast_nb(root, buf, buf, BCAST, Flags::NONE) }.wait();
            },
        ),
        broadcast(&mut slots, "upcxx.broadcast_1MiB", upc_buf, move |root| {
            upcxx::coll::broadcast_global(upc_buf, BCAST, root, upcxx::world()).wait();
        }),
    ]
}

/// The control slots, in rank 0's segment, handed to the figures in turn.
struct Slots {
    base: GlobalPtr<u64>,
    rank: Rank,
    next: usize,
}

/// The words of one figure.
struct Slot {
    rank: Rank,
    /// The operations rank 0 asked for so far.
    total: &'static AtomicU64,
    /// The phases rank 0 ended.
    stops: &'static AtomicU64,
    /// Each rank's arrival word (barrier figures).
    arrive: [&'static AtomicU64; 2],
}

impl Slots {
    /// The next figure's words.
    fn take(&mut self) -> Slot {
        let slot = self.next;
        assert!(slot < CTRL_SLOTS, "too many collective figures");
        self.next += 1;
        let at = |off: usize| word(self.base.add(off / 8));
        let arrive = ARRIVE_OFF + slot * 16;
        Slot {
            rank: self.rank,
            total: at(slot * CTRL_STRIDE),
            stops: at(slot * CTRL_STRIDE + 64),
            arrive: [at(arrive), at(arrive + 8)],
        }
    }
}

/// A page-aligned block of `len` bytes of this rank's segment, zeroed (faulting it in).
fn segment_bytes(len: usize) -> GlobalPtr<u8> {
    let gp = upcxx::allocate(len, 4096).expect("segment space for a broadcast buffer");
    // SAFETY: a fresh block of our segment that nobody else knows yet.
    unsafe { std::ptr::write_bytes(gp.local(), 0, len) };
    gp
}

/// The `BCAST` bytes of this rank's block `gp`.
///
/// # Safety
/// No collective may be in flight on the block, and nothing else may access it while
/// the slice lives.
unsafe fn bytes(gp: GlobalPtr<u8>) -> &'static mut [u8] {
    // SAFETY: the caller's contract; the segment is mapped for the life of the process.
    unsafe { std::slice::from_raw_parts_mut(gp.local(), BCAST) }
}

/// A collective figure ([`Bench::collective`]) in `slot`.
fn collective(
    slot: &Slot,
    name: &str,
    unit: Unit,
    op: impl FnMut(u64) + 'static,
) -> Bench<'static> {
    let control = (slot.total, slot.stops);
    Bench::collective(slot.rank, control, name, unit, || {}, op)
}

/// A barrier figure; before the first barrier each rank writes its arrival word, and
/// after it reads the other's.
fn barrier(slots: &mut Slots, name: &str, barrier: impl Fn() + 'static) -> Bench<'static> {
    let slot = slots.take();
    let (rank, arrive) = (slot.rank, slot.arrive);
    let what = name.to_owned();
    collective(&slot, name, Unit::Latency, move |j| {
        if j == 0 {
            arrive[rank as usize].store(1, Ordering::Release);
        }
        barrier();
        if j == 0 {
            let other = 1 - rank as usize;
            assert_eq!(
                arrive[other].load(Ordering::Acquire),
                1,
                "{what}: rank {rank} left the first barrier before rank {other} entered it"
            );
        }
    })
}

/// A reduction to all of one f64 with addition: rank `r` contributes `r + 1`, and the
/// first result must be the exact sum.
fn reduce_all(
    slots: &mut Slots,
    name: &str,
    reduce: impl Fn(f64) -> f64 + 'static,
) -> Bench<'static> {
    let slot = slots.take();
    let rank = slot.rank;
    let what = name.to_owned();
    collective(&slot, name, Unit::Latency, move |j| {
        let got = reduce(f64::from(rank + 1));
        if j == 0 {
            assert!(got == 3.0, "{what}: rank {rank} got {got}, expected 3");
        }
    })
}

/// A broadcast of `BCAST` bytes into `dst` of each rank, operation `j` rooted at rank
/// `j mod 2`; the first two are checked on both ranks. Before those, the root's `dst`
/// holds its pattern (where the in-place broadcast reads it; the other broadcast's
/// source holds it for good) and the other rank's is poisoned.
fn broadcast(
    slots: &mut Slots,
    name: &str,
    dst: GlobalPtr<u8>,
    bcast: impl Fn(Rank) + 'static,
) -> Bench<'static> {
    let slot = slots.take();
    let rank = slot.rank;
    let what = name.to_owned();
    collective(&slot, name, Unit::Bandwidth(BCAST), move |j| {
        let root = (j % 2) as Rank;
        let check = j < 2;
        if check {
            // SAFETY: between two operations (the last one completed).
            let buf = unsafe { bytes(dst) };
            if rank == root {
                fill_pattern(buf, BCAST_SEED + u64::from(root));
            } else {
                buf.fill(POISON);
            }
        }
        bcast(root);
        if check {
            let what = format!("{what}: rank {rank} receiving from rank {root}");
            // SAFETY: as above, after the operation completed.
            check_pattern(unsafe { bytes(dst) }, BCAST_SEED + u64::from(root), &what);
        }
    })
}
