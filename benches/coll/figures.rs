//! The collective figures of `coll.rs`: the layout of each rank's segment, how the ranks
//! agree on the number of operations of a figure, the choices of algorithm and method
//! that figures force, and the figures with such a choice ([`CHOICES`]). What one
//! operation of each collective does, and its data check, is in `ops.rs`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::am::fill_pattern;
use crate::common::figures::{page_aligned, Bench, Unit};
use crate::common::Sampler;
use crate::ops::{self, RankOp};
use gex::coll::{self, Algorithm, Kind, Method};
use gex::{Rank, Segment, Team};

/// Each rank's segment.
pub(crate) const SEGMENT: usize = 16 << 20;

// Layout of each rank's segment.
/// The control words of the collective figures (used in rank 0's segment), one cache
/// line pair per figure.
const CTRL_OFF: usize = 0;
const CTRL_STRIDE: usize = 128;
const CTRL_SLOTS: usize = 256;
/// The cache line of the raw ping-pong (in rank 1's segment).
const RAW_OFF: usize = CTRL_OFF + CTRL_SLOTS * CTRL_STRIDE;
/// The words each rank writes before the first barrier of a barrier figure.
const ARRIVE_OFF: usize = RAW_OFF + 4096;
/// A broadcast's source (each rank's pattern) and destination.
pub(crate) const BCAST_SRC: usize = 1 << 20;
pub(crate) const BCAST_DST: usize = 2 << 20;
/// A reduction's source (each rank's input) and destination.
pub(crate) const RED_SRC: usize = 3 << 20;
pub(crate) const RED_DST: usize = 4 << 20;
/// The largest size of a broadcast or reduction.
pub(crate) const MAX_BYTES: usize = 1 << 20;
/// The source (each rank's pattern) and destination of gather-all and exchange, each
/// [`MOVE_BYTES`] long: they hold a block per rank.
pub(crate) const MOVE_SRC: usize = 8 << 20;
pub(crate) const MOVE_DST: usize = 12 << 20;
pub(crate) const MOVE_BYTES: usize = 4 << 20;
const _: () = assert!(MOVE_DST + MOVE_BYTES <= SEGMENT && RED_DST + MAX_BYTES <= MOVE_SRC);

/// Rank `r` broadcasts the pattern of seed `BCAST_SEED + r`.
pub(crate) const BCAST_SEED: u64 = 0x5eed_c011;
/// Rank `r`'s source of gather-all and exchange holds the pattern of seed
/// `MOVE_SEED + r`.
pub(crate) const MOVE_SEED: u64 = 0x5eed_a11a;

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
    /// This rank's broadcast pattern in private memory, the source of the broadcasts
    /// that must run along a tree (from the segment, the root would copy directly).
    pub(crate) private_pattern: &'static [u8],
}

impl Ctx {
    /// The context of this rank; writes its broadcast pattern, reduction input and
    /// gather-all/exchange source.
    pub(crate) fn new(world: Team, segment: Segment) -> Ctx {
        let suffix = if world.size() > 2 {
            format!("_{}ranks", world.size())
        } else {
            String::new()
        };
        let private_pattern = page_aligned(MAX_BYTES, 0);
        fill_pattern(private_pattern, BCAST_SEED + u64::from(world.rank()));
        let ctx = Ctx {
            world,
            segment,
            sampler: Sampler::from_env(),
            suffix,
            next_slot: Cell::new(0),
            private_pattern,
        };
        // SAFETY: the source areas of this rank's segment, which no collective runs on yet.
        let (pattern, input, moved) = unsafe {
            (
                area(ctx.own(BCAST_SRC, MAX_BYTES), MAX_BYTES),
                area(ctx.own(RED_SRC, MAX_BYTES), MAX_BYTES),
                area(ctx.own(MOVE_SRC, MOVE_BYTES), MOVE_BYTES),
            )
        };
        pattern.copy_from_slice(private_pattern);
        for (i, x) in input.chunks_exact_mut(8).enumerate() {
            x.copy_from_slice(&ops::reduce_input(world.rank(), i).to_ne_bytes());
        }
        fill_pattern(moved, MOVE_SEED + u64::from(world.rank()));
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
    pub(crate) fn own(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset + len <= self.segment.size());
        // SAFETY: inside the attached segment (checked above).
        unsafe { self.segment.addr().add(offset) }
    }

    /// The address of `offset` in every rank's segment, in its owner's address space,
    /// by rank: a SINGLE address argument.
    pub(crate) fn every(&self, offset: usize) -> Vec<usize> {
        (0..self.world.size())
            .map(|r| {
                let b = self.world.segment_bound(r).expect("segments attached");
                b.owner_addr + offset
            })
            .collect()
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

/// What chooses how a collective moves its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The tree of a GASNet-EX collective (`coll::set_algorithm`).
    Algorithm(Kind),
    /// The method of a collective of the design document (`coll::set_method`).
    Method(coll::Operation),
}

/// One way a [`Choice`] can be forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alternative {
    Algorithm(Algorithm),
    Method(Method),
}

impl Alternative {
    /// The name gex gives it (`flat`, `staggered`, `shared`, …).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Alternative::Algorithm(a) => a.name(),
            Alternative::Method(m) => m.name(),
        }
    }

    /// Whether it needs SINGLE addressing (the shared method): figures forcing it pass
    /// every rank's in-segment addresses, and the automatic selection with LOCAL
    /// addressing, which the figures without a suffix use, can never pick it.
    pub(crate) fn single(self) -> bool {
        self == Alternative::Method(Method::Shared)
    }
}

impl Choice {
    /// Every alternative that can be forced.
    pub(crate) fn alternatives(self) -> Vec<Alternative> {
        match self {
            Choice::Algorithm(_) => [Algorithm::Flat, Algorithm::Binomial]
                .into_iter()
                .map(Alternative::Algorithm)
                .collect(),
            Choice::Method(op) => op
                .methods()
                .iter()
                .map(|&m| Alternative::Method(m))
                .collect(),
        }
    }

    /// Forces `alternative` in this process (`None`: the automatic choice).
    pub(crate) fn force(self, alternative: Option<Alternative>) {
        match (self, alternative) {
            (Choice::Algorithm(kind), None) => coll::set_algorithm(kind, None),
            (Choice::Algorithm(kind), Some(Alternative::Algorithm(a))) => {
                coll::set_algorithm(kind, Some(a))
            }
            (Choice::Method(op), None) => coll::set_method(op, None),
            (Choice::Method(op), Some(Alternative::Method(m))) => coll::set_method(op, Some(m)),
            (choice, Some(alt)) => panic!("{choice:?} has no alternative {alt:?}"),
        }
    }

    /// What the automatic choice picks on `n` ranks for blocks of `nbytes` with LOCAL
    /// addressing (a broadcast's tree: from its source in the root's segment, a large
    /// broadcast copies directly instead, whatever the tree).
    pub(crate) fn selected(self, n: Rank, nbytes: usize) -> Alternative {
        self.force(None);
        match self {
            Choice::Algorithm(kind) => Alternative::Algorithm(coll::algorithm(kind, n)),
            Choice::Method(op) => Alternative::Method(coll::method(op, n, nbytes, false)),
        }
    }
}

/// A collective figure ([`Bench::collective`]) in the next control slot, with `force`
/// in effect.
pub(crate) fn collective(
    ctx: &Ctx,
    name: String,
    unit: Unit,
    force: Option<(Choice, Option<Alternative>)>,
    op: impl FnMut(u64) + 'static,
) -> Bench<'static> {
    let choose = move || {
        if let Some((choice, alternative)) = force {
            choice.force(alternative);
        }
    };
    Bench::collective(ctx.world.rank(), ctx.control(), name, unit, choose, op)
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

/// A collective figure with an algorithm or method choice, measured with the automatic
/// selection (`name`) and with every alternative forced (`name.<alternative>`).
pub(crate) struct Collective {
    /// The name of the figure with the automatic selection.
    pub(crate) name: &'static str,
    /// The choice its alternatives are forced through.
    pub(crate) choice: Choice,
    /// The bytes of a block (what the selection goes by).
    pub(crate) nbytes: usize,
    pub(crate) unit: Unit,
    /// One operation of the figure named by the second argument, on every rank, with
    /// the alternative forced by the third (`None`: the automatic selection).
    op: fn(&Ctx, String, Option<Alternative>) -> RankOp,
}

/// The figures with an algorithm or method choice; latency figures are measured with
/// `raw.pingpong_roundtrip`, bandwidth figures with `raw.memcpy_4MiB`.
pub(crate) const CHOICES: &[Collective] = &[
    Collective {
        name: "coll.broadcast_8B",
        choice: Choice::Algorithm(Kind::Broadcast),
        nbytes: 8,
        unit: Unit::Latency,
        op: |ctx, name, alt| ops::broadcast(ctx, name, 8, alt),
    },
    Collective {
        name: "coll.reduce_all_f64",
        choice: Choice::Algorithm(Kind::Reduce),
        nbytes: 8,
        unit: Unit::Latency,
        op: |ctx, name, _| ops::reduce_all(ctx, name, 1),
    },
    Collective {
        name: "coll.gather_all_4KiB",
        choice: Choice::Method(coll::Operation::GatherAll),
        nbytes: 4 << 10,
        unit: Unit::Latency,
        op: |ctx, name, alt| ops::gather_all(ctx, name, 4 << 10, alt),
    },
    Collective {
        name: "coll.exchange_4KiB",
        choice: Choice::Method(coll::Operation::Exchange),
        nbytes: 4 << 10,
        unit: Unit::Latency,
        op: |ctx, name, alt| ops::exchange(ctx, name, 4 << 10, alt),
    },
    Collective {
        name: "coll.broadcast_1MiB",
        choice: Choice::Algorithm(Kind::Broadcast),
        nbytes: MAX_BYTES,
        unit: Unit::Bandwidth(MAX_BYTES),
        op: |ctx, name, alt| ops::broadcast(ctx, name, MAX_BYTES, alt),
    },
    Collective {
        name: "coll.reduce_all_1MiB_f64",
        choice: Choice::Algorithm(Kind::Reduce),
        nbytes: MAX_BYTES,
        unit: Unit::Bandwidth(MAX_BYTES),
        op: |ctx, name, _| ops::reduce_all(ctx, name, MAX_BYTES / 8),
    },
];

impl Collective {
    /// The figure with the automatic selection, then one per alternative.
    pub(crate) fn benches(&self, ctx: &Ctx) -> Vec<Bench<'static>> {
        let forced = self.choice.alternatives().into_iter().map(|a| {
            let name = ctx.name(&format!("{}.{}", self.name, a.name()));
            (name, Some(a))
        });
        std::iter::once((ctx.name(self.name), None))
            .chain(forced)
            .map(|(name, alt)| {
                let op = (self.op)(ctx, name.clone(), alt);
                collective(ctx, name, self.unit, Some((self.choice, alt)), op)
            })
            .collect()
    }
}

/// `len` bytes at `addr` of this rank's segment.
///
/// # Safety
/// The range must lie in the segment (as [`Ctx::own`] gives it), and nothing else may
/// access it while the slice lives: no collective in flight on it, no other slice.
pub(crate) unsafe fn area(addr: *mut u8, len: usize) -> &'static mut [u8] {
    // SAFETY: the caller's contract; the segment is mapped for the life of the process.
    unsafe { std::slice::from_raw_parts_mut(addr, len) }
}
