//! The collective figures of `coll.rs`: what each rank does in one operation of a
//! figure, how the ranks agree on the number of operations, and the data checks.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::am::{check_pattern, fill_pattern};
use crate::common::figures::{Bench, Unit};
use crate::common::{spin_until, Sampler};
use gex::coll::{self, Algorithm, Kind};
use gex::ops::{Dt, Op};
use gex::{Flags, Rank, Segment, Team};

/// Each rank's segment.
pub(crate) const SEGMENT: usize = 8 << 20;

// Layout of each rank's segment.
/// The control words of the collective figures (used in rank 0's segment), one cache
/// line pair per figure.
const CTRL_OFF: usize = 0;
const CTRL_STRIDE: usize = 128;
const CTRL_SLOTS: usize = 64;
/// The cache line of the raw ping-pong (in rank 1's segment).
const RAW_OFF: usize = CTRL_OFF + CTRL_SLOTS * CTRL_STRIDE;
/// The words each rank writes before the first barrier of a barrier figure.
const ARRIVE_OFF: usize = RAW_OFF + 4096;
/// A broadcast's source (each rank's pattern) and destination.
const BCAST_SRC: usize = 1 << 20;
const BCAST_DST: usize = 2 << 20;
/// A reduction's source (each rank's input) and destination.
const RED_SRC: usize = 3 << 20;
const RED_DST: usize = 4 << 20;
/// The largest size of a broadcast or reduction.
const MAX_BYTES: usize = 1 << 20;

/// Rank `r` broadcasts the pattern of seed `BCAST_SEED + r`.
const BCAST_SEED: u64 = 0x5eed_c011;
/// Fills a destination before the operations whose data is checked.
const POISON: u8 = 0xee;

/// What every figure needs.
pub(crate) struct Ctx {
    /// The primordial team.
    pub(crate) world: Team,
    segment: Segment,
    pub(crate) sampler: Sampler,
    /// Appended to the names of figures measured in a job of more than 2 ranks.
    suffix: String,
    /// The control slot of the next collective figure.
    next_slot: Cell<usize>,
}

impl Ctx {
    /// The context of this rank; writes its broadcast pattern and reduction input.
    pub(crate) fn new(world: Team, segment: Segment) -> Ctx {
        let suffix = if world.size() > 2 {
            format!("_{}ranks", world.size())
        } else {
            String::new()
        };
        let ctx = Ctx {
            world,
            segment,
            sampler: Sampler::from_env(),
            suffix,
            next_slot: Cell::new(0),
        };
        // SAFETY: the source areas of this rank's segment, which no collective runs on yet.
        let (pattern, input) = unsafe {
            (
                area(ctx.own(BCAST_SRC, MAX_BYTES), MAX_BYTES),
                area(ctx.own(RED_SRC, MAX_BYTES), MAX_BYTES),
            )
        };
        fill_pattern(pattern, BCAST_SEED + u64::from(world.rank()));
        for (i, x) in input.chunks_exact_mut(8).enumerate() {
            x.copy_from_slice(&reduce_input(world.rank(), i).to_ne_bytes());
        }
        ctx
    }

    pub(crate) fn name(&self, base: &str) -> String {
        format!("{base}{}", self.suffix)
    }

    /// The line of `raw.pingpong_roundtrip`, in rank 1's segment.
    pub(crate) fn raw_line(&self) -> &'static AtomicU64 {
        self.peer_word(1, RAW_OFF)
    }

    /// The address of `len` bytes at `offset` of this rank's own segment.
    fn own(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset + len <= self.segment.size());
        // SAFETY: inside the attached segment (checked above).
        unsafe { self.segment.addr().add(offset) }
    }

    /// An atomic word at `offset` of `rank`'s segment, through this process's mapping.
    fn peer_word(&self, rank: Rank, offset: usize) -> &'static AtomicU64 {
        assert!(offset + 8 <= SEGMENT && offset & 7 == 0);
        let b = self.world.segment_bound(rank).expect("segments attached");
        let base = b.local_addr.expect("smp maps every segment");
        // SAFETY: inside `rank`'s segment, mapped here for the life of the process,
        // 8-byte aligned; the words of the layout are only accessed through atomics.
        unsafe { &*((base + offset) as *const AtomicU64) }
    }

    /// The control words of a new collective figure in rank 0's segment: the number of
    /// operations rank 0 asked for so far, and of phases it ended.
    fn control(&self) -> (&'static AtomicU64, &'static AtomicU64) {
        let slot = self.next_slot.get();
        assert!(slot < CTRL_SLOTS, "too many collective figures");
        self.next_slot.set(slot + 1);
        let off = CTRL_OFF + slot * CTRL_STRIDE;
        (self.peer_word(0, off), self.peer_word(0, off + 64))
    }
}

/// What a rank does in operation `j` of a figure.
type Operation = Box<dyn FnMut(u64)>;

/// How a figure forces the algorithm of its collective: `None` for the selected one.
type Choice = Option<(Kind, Option<Algorithm>)>;

/// A collective figure: every rank performs `op(j)` for the same `j = 0, 1, 2, …` (the
/// figure's operations, counted over all its phases). Rank 0 times its runs; before
/// each, it publishes in its segment the total it asked for, and the other ranks, which
/// spin on it, perform the operations up to it, until rank 0 ends the phase.
fn collective(
    ctx: &Ctx,
    name: String,
    unit: Unit,
    choice: Choice,
    mut op: impl FnMut(u64) + 'static,
) -> Bench<'static> {
    let (total, stops) = ctx.control();
    let choose = move || {
        if let Some((kind, algorithm)) = choice {
            coll::set_algorithm(kind, algorithm);
        }
    };
    let mut done = 0u64;
    if ctx.world.rank() == 0 {
        let mut stopped = 0u64;
        let run = move |iters: u64| {
            choose();
            let start = done;
            done += iters;
            total.store(done, Ordering::Release);
            let t0 = Instant::now();
            for j in start..done {
                op(j);
            }
            t0.elapsed()
        };
        let stop = move || {
            stopped += 1;
            stops.store(stopped, Ordering::Release);
        };
        Bench::team(name, unit, run, stop, || {})
    } else {
        let mut seen = 0u64;
        let serve = move || loop {
            let (mut s, mut t) = (0, 0);
            // `stops` first: rank 0 stores its last total before it ends the phase.
            spin_until(|| {
                s = stops.load(Ordering::Acquire);
                t = total.load(Ordering::Acquire);
                t > done || s > seen
            });
            if t > done {
                choose();
                for j in done..t {
                    op(j);
                }
                done = t;
            } else {
                seen = s;
                return;
            }
        };
        Bench::team(name, unit, |_| Duration::ZERO, || {}, serve)
    }
}

/// `coll.barrier` (on the primordial team) and `coll.barrier.team` (on the split team):
/// `barrier_nb().wait()` on `team`. In the first, each rank writes its word of slot
/// `check` before it and reads every rank's after it.
pub(crate) fn barrier(ctx: &Ctx, name: &str, team: Team, check: usize) -> Bench<'static> {
    let off = ARRIVE_OFF + check * 8;
    let mine = ctx.peer_word(ctx.world.rank(), off);
    let all: Vec<_> = (0..ctx.world.size())
        .map(|r| ctx.peer_word(r, off))
        .collect();
    let name = ctx.name(name);
    let what = name.clone();
    collective(ctx, name, Unit::Latency, None, move |j| {
        if j == 0 {
            mine.store(1, Ordering::Release);
        }
        team.barrier_nb().wait();
        if j == 0 {
            for (r, word) in all.iter().enumerate() {
                assert_eq!(
                    word.load(Ordering::Acquire),
                    1,
                    "{what}: rank {} left the first barrier before rank {r} entered it",
                    team.rank()
                );
            }
        }
    })
}

/// A collective figure with an algorithm choice, measured with the selected algorithm
/// (`name`) and with every alternative forced (`name.<algorithm>`).
pub(crate) struct Collective {
    /// The name of the figure with the selected algorithm.
    pub(crate) name: &'static str,
    /// The choice its algorithms are forced through.
    pub(crate) kind: Kind,
    pub(crate) unit: Unit,
    /// One operation of the figure named by the second argument, on every rank.
    op: fn(&Ctx, String) -> Operation,
}

/// The figures with an algorithm choice; latency figures are measured with
/// `raw.pingpong_roundtrip`, bandwidth figures with `raw.memcpy_4MiB`.
///
/// `coll.gather_all_4KiB` and `coll.exchange_4KiB` belong in this list, with their
/// operations next to those below, once `gex::coll` has gather_all and exchange (and
/// [`alternatives`] their algorithms).
pub(crate) const CHOICES: &[Collective] = &[
    Collective {
        name: "coll.broadcast_8B",
        kind: Kind::Broadcast,
        unit: Unit::Latency,
        op: |ctx, name| broadcast(ctx, name, 8),
    },
    Collective {
        name: "coll.reduce_all_f64",
        kind: Kind::Reduce,
        unit: Unit::Latency,
        op: |ctx, name| reduce_all(ctx, name, 1),
    },
    Collective {
        name: "coll.broadcast_1MiB",
        kind: Kind::Broadcast,
        unit: Unit::Bandwidth(MAX_BYTES),
        op: |ctx, name| broadcast(ctx, name, MAX_BYTES),
    },
    Collective {
        name: "coll.reduce_all_1MiB_f64",
        kind: Kind::Reduce,
        unit: Unit::Bandwidth(MAX_BYTES),
        op: |ctx, name| reduce_all(ctx, name, MAX_BYTES / 8),
    },
];

/// The algorithms a collective of `kind` can be forced to use.
pub(crate) fn alternatives(kind: Kind) -> &'static [Algorithm] {
    match kind {
        Kind::Broadcast | Kind::Reduce => &[Algorithm::Flat, Algorithm::Binomial],
    }
}

impl Collective {
    /// The figure with the selected algorithm, then one per alternative.
    pub(crate) fn benches(&self, ctx: &Ctx) -> Vec<Bench<'static>> {
        let forced = alternatives(self.kind).iter().map(|&a| {
            let name = ctx.name(&format!("{}.{}", self.name, a.name()));
            (name, Some(a))
        });
        std::iter::once((ctx.name(self.name), None))
            .chain(forced)
            .map(|(name, algorithm)| {
                let op = (self.op)(ctx, name.clone());
                collective(ctx, name, self.unit, Some((self.kind, algorithm)), op)
            })
            .collect()
    }
}

/// `len` bytes at `addr` of this rank's segment.
///
/// # Safety
/// The range must lie in the segment (as [`Ctx::own`] gives it), and nothing else may
/// access it while the slice lives: no collective in flight on it, no other slice.
unsafe fn area(addr: *mut u8, len: usize) -> &'static mut [u8] {
    // SAFETY: the caller's contract; the segment is mapped for the life of the process.
    unsafe { std::slice::from_raw_parts_mut(addr, len) }
}

/// A broadcast of `nbytes` into every rank's destination, operation `j` rooted at team
/// rank `j mod n`; the first `n` (one from each root) are checked on every rank.
fn broadcast(ctx: &Ctx, name: String, nbytes: usize) -> Operation {
    let team = ctx.world;
    let n = u64::from(team.size());
    let src = ctx.own(BCAST_SRC, nbytes);
    let dst = ctx.own(BCAST_DST, nbytes);
    Box::new(move |j| {
        let root = (j % n) as Rank;
        let check = j < n;
        if check {
            // SAFETY: the destination, between two operations (the last one completed).
            unsafe { area(dst, nbytes) }.fill(POISON);
        }
        // SAFETY: `src` and `dst` are distinct ranges of this rank's segment, valid for
        // `nbytes` bytes and used by nothing else until the event completes below.
        unsafe { team.broadcast_nb(root, dst, src, nbytes, Flags::NONE) }.wait();
        if check {
            let what = format!("{name}: rank {} receiving from rank {root}", team.rank());
            // SAFETY: as above, after the operation completed.
            check_pattern(
                unsafe { area(dst, nbytes) },
                BCAST_SEED + u64::from(root),
                &what,
            );
        }
    })
}

/// Element `i` of rank `rank`'s reduction input: small integers, so that every sum is
/// exact in any order.
fn reduce_input(rank: Rank, i: usize) -> f64 {
    f64::from(rank + 1) * ((i % 1000) + 1) as f64
}

/// A reduction to all of `count` f64 with `Op::Add`; the first is checked on every rank.
fn reduce_all(ctx: &Ctx, name: String, count: usize) -> Operation {
    let team = ctx.world;
    let src = ctx.own(RED_SRC, count * 8);
    let dst = ctx.own(RED_DST, count * 8);
    let n = team.size();
    Box::new(move |j| {
        if j == 0 {
            // SAFETY: the destination, before the figure's first operation.
            unsafe { area(dst, count * 8) }.fill(POISON);
        }
        // SAFETY: `src` and `dst` are distinct ranges of this rank's segment, valid for
        // `count` f64 and used by nothing else until the event completes below.
        unsafe { team.reduce_to_all_nb(dst, src, Dt::Dbl, 8, count, Op::Add, None, Flags::NONE) }
            .wait();
        if j == 0 {
            // SAFETY: as above, after the operation completed.
            let result = unsafe { area(dst, count * 8) };
            for (i, x) in result.chunks_exact(8).enumerate() {
                let got = f64::from_ne_bytes(x.try_into().expect("8 bytes"));
                let want: f64 = (0..n).map(|r| reduce_input(r, i)).sum();
                assert!(
                    got == want,
                    "{name}: rank {} got {got} in element {i} of the sum, expected {want}",
                    team.rank()
                );
            }
        }
    })
}
