//! Choosing the method of each collective of the design document: by name (an
//! environment variable or [`set_method`]), or automatically by team size and block
//! size.
//!
//! The crossovers are named constants, set from the `coll` bench's sweep
//! (`PGAS_BENCH_SWEEP=1 cargo bench --bench coll`: every method of broadcast,
//! reduce_to_all, gather_all, exchange, scatter, gather and prefix reduction at 8 B to
//! 1 MiB, interleaved, on 2 and 4 ranks of one 2-core host, so the 4-rank job runs two
//! ranks per core):
//!
//! * gather_all: the staggered order beat dissemination at every size on 2 and 4 ranks
//!   (by 1.04x to 1.27x at 8 B to 2 KiB, more above). Dissemination's `ceil(log2 n)`
//!   rounds against the staggered `n - 1` sends can only pay off on larger teams,
//!   which this host cannot measure; it is chosen from [`GATHER_ALL_DISSEMINATION_MIN_RANKS`]
//!   ranks, for blocks below [`GATHER_ALL_STAGGERED_MIN_BYTES`].
//! * SINGLE addressing on shared memory (`shared`): the one-copy method lost to the
//!   message methods at small blocks (up to 2x at 8 B, from its synchronization) and won
//!   from 2 KiB on 2 ranks and 32 KiB on 4 ranks (up to 3.6x); it is chosen from
//!   [`SHARED_MIN_BYTES`].
//! * Scatter and gather: on 2 ranks the trees are the flat exchange. On 4 ranks the
//!   binomial tree never won clearly: scatter's trees were within 1.17x of each other up
//!   to 32 KiB, flat won above (1.03x to 1.32x), and gather's binomial tree took about
//!   2x flat's time at every size from 8 B to 8 KiB, because its inner ranks wait for
//!   their whole subtree before forwarding. The binomial tree is kept for teams of
//!   [`SCATTER_GATHER_BINOMIAL_MIN_RANKS`] and more (where `ceil(log2 n)` levels against
//!   `n - 1` exchanges at the root must pay off, unmeasurable on this host), for blocks
//!   below [`ROOTED_FLAT_MIN_BYTES`] (flat won from 128 KiB on 4 ranks).
//! * Prefix reduction: the chain beat recursive doubling at every size from 32 B to
//!   1 MiB on 4 ranks (by 1.2x to 2.5x; doubling combines every element `log2 n` times
//!   and sends twice as many messages) and tied it on 2 ranks, where both are one
//!   exchange. Doubling is chosen from [`SCAN_DOUBLING_MIN_RANKS`] ranks, below
//!   [`SCAN_CHAIN_MIN_BYTES`], where its `log2 n` rounds against the chain's `n - 1`
//!   must pay off; unmeasurable on this host.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::conduit::Rank;

/// From this many ranks, the design document's broadcast uses the binomial tree, as
/// the GASNet-EX broadcast does (`coll::broadcast`, measured there).
pub const ROOTED_BINOMIAL_MIN_RANKS: Rank = 3;
/// From this many ranks, scatter and gather use the binomial tree (flat measured as
/// fast or faster on 4 ranks; see the module documentation).
pub const SCATTER_GATHER_BINOMIAL_MIN_RANKS: Rank = 5;
/// From this block size, scatter and gather go flat again: a tree forwards every byte
/// up to `log2 n` times (flat measured faster from 128 KiB on 4 ranks).
pub const ROOTED_FLAT_MIN_BYTES: usize = 64 << 10;
/// From this block size, gather-all sends each block straight to every rank
/// (staggered) instead of disseminating, whatever the team size.
pub const GATHER_ALL_STAGGERED_MIN_BYTES: usize = 4 << 10;
/// Below this many ranks gather-all is always staggered (measured on 2 and 4 ranks).
pub const GATHER_ALL_DISSEMINATION_MIN_RANKS: Rank = 5;
/// From this block size, SINGLE addressing on shared memory copies the blocks straight
/// between segments (`shared`); below it the message methods win (measured).
pub const SHARED_MIN_BYTES: usize = 16 << 10;
/// From this many ranks, a prefix reduction uses recursive doubling instead of the
/// chain (the chain measured faster on 4 ranks; see the module documentation).
pub const SCAN_DOUBLING_MIN_RANKS: Rank = 5;
/// From this size, a prefix reduction uses the chain again: doubling moves and combines
/// every byte `log2 n` times (the chain measured faster at every size on 4 ranks).
pub const SCAN_CHAIN_MIN_BYTES: usize = 64 << 10;

/// A collective of the design document, for choosing its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// [`Team::coll_broadcast_nb`](crate::Team::coll_broadcast_nb).
    Broadcast,
    /// [`Team::scatter_nb`](crate::Team::scatter_nb).
    Scatter,
    /// [`Team::gather_nb`](crate::Team::gather_nb).
    Gather,
    /// [`Team::gather_all_nb`](crate::Team::gather_all_nb).
    GatherAll,
    /// [`Team::exchange_nb`](crate::Team::exchange_nb).
    Exchange,
    /// [`Team::permute_nb`](crate::Team::permute_nb).
    Permute,
    /// [`Team::prefix_reduce_nb`](crate::Team::prefix_reduce_nb).
    PrefixReduce,
}

/// How a collective of the design document moves its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Rooted: the root exchanges each block with its rank directly. Permute: each rank
    /// sends its block to its destination.
    Flat,
    /// Rooted: a binomial tree of `ceil(log2 n)` levels, each rank forwarding its
    /// subtree's blocks.
    Binomial,
    /// Gather-all: recursive doubling (Bruck's dissemination), `ceil(log2 n)` rounds.
    Dissemination,
    /// Gather-all and exchange: every rank sends to `r + 1, r + 2, …` in turn.
    Staggered,
    /// Prefix reduction: a chain from rank 0 to rank `n - 1`.
    Chain,
    /// Prefix reduction: recursive doubling (Hillis and Steele).
    Doubling,
    /// SINGLE addressing on one host: each rank copies its blocks straight from the
    /// source segments, one copy per byte, no data in messages.
    Shared,
}

const METHODS: [Method; 7] = [
    Method::Flat,
    Method::Binomial,
    Method::Dissemination,
    Method::Staggered,
    Method::Chain,
    Method::Doubling,
    Method::Shared,
];

impl Method {
    /// The method's name, as the environment variables take it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Flat => "flat",
            Method::Binomial => "binomial",
            Method::Dissemination => "dissemination",
            Method::Staggered => "staggered",
            Method::Chain => "chain",
            Method::Doubling => "doubling",
            Method::Shared => "shared",
        }
    }

    /// The method named `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        METHODS.into_iter().find(|m| m.name() == name.trim())
    }
}

impl Operation {
    /// The environment variable that forces this collective's method for a job.
    pub fn variable(self) -> &'static str {
        match self {
            // `GEX_COLL_BROADCAST` is the GASNet-EX broadcast's (`Kind::Broadcast`).
            Operation::Broadcast => "GEX_COLL_DESIGN_BROADCAST",
            Operation::Scatter => "GEX_COLL_SCATTER",
            Operation::Gather => "GEX_COLL_GATHER",
            Operation::GatherAll => "GEX_COLL_GATHER_ALL",
            Operation::Exchange => "GEX_COLL_EXCHANGE",
            Operation::Permute => "GEX_COLL_PERMUTE",
            Operation::PrefixReduce => "GEX_COLL_PREFIX_REDUCE",
        }
    }

    /// The methods this collective has.
    pub fn methods(self) -> &'static [Method] {
        match self {
            Operation::Broadcast | Operation::Scatter | Operation::Gather => {
                &[Method::Flat, Method::Binomial, Method::Shared]
            }
            Operation::GatherAll => &[Method::Dissemination, Method::Staggered, Method::Shared],
            Operation::Exchange => &[Method::Staggered, Method::Shared],
            Operation::Permute => &[Method::Flat, Method::Shared],
            Operation::PrefixReduce => &[Method::Chain, Method::Doubling],
        }
    }

    fn slot(self) -> &'static AtomicU8 {
        static SLOTS: [AtomicU8; 7] = [const { AtomicU8::new(UNSET) }; 7];
        &SLOTS[self as usize]
    }
}

const UNSET: u8 = 0;
const AUTO: u8 = 1;

fn encode(op: Operation, call: &str, m: Method) -> u8 {
    if !op.methods().contains(&m) {
        let names: Vec<&str> = op.methods().iter().map(|m| m.name()).collect();
        panic!(
            "gex::{call}: {:?} has no method {} (it has {})",
            op,
            m.name(),
            names.join(", ")
        );
    }
    2 + m as u8
}

/// Forces `method` for `op` in this process (`None`: the automatic choice). Every rank
/// of a team must have made the same choice when it initiates a collective.
///
/// # Panics
/// If `op` has no such method ([`Operation::methods`]).
#[track_caller]
pub fn set_method(op: Operation, method: Option<Method>) {
    let v = method.map_or(AUTO, |m| encode(op, "coll::set_method", m));
    op.slot().store(v, Ordering::Relaxed);
}

/// The forced method of `op`, if any.
pub(crate) fn forced(op: Operation) -> Option<Method> {
    let slot = op.slot();
    let mut v = slot.load(Ordering::Relaxed);
    if v == UNSET {
        v = match std::env::var(op.variable()) {
            Err(_) => AUTO,
            Ok(name) if name.trim().is_empty() || name.trim() == "auto" => AUTO,
            Ok(name) => match Method::from_name(&name) {
                Some(m) => encode(op, op.variable(), m),
                None => panic!("gex: {}={name} is not a method", op.variable()),
            },
        };
        slot.store(v, Ordering::Relaxed);
    }
    (v >= 2).then(|| METHODS[(v - 2) as usize])
}

/// The method `op` uses on a team of `n` ranks with blocks of `nbytes`; `shared` says
/// whether the shared-memory method is possible (SINGLE addressing, every source
/// mapped here). A forced [`Method::Shared`] that is not possible falls back to the
/// automatic choice among the others.
pub fn method(op: Operation, n: Rank, nbytes: usize, shared: bool) -> Method {
    match forced(op) {
        Some(Method::Shared) if !shared => {}
        Some(m) => return m,
        None if shared && nbytes >= SHARED_MIN_BYTES && op.methods().contains(&Method::Shared) => {
            return Method::Shared
        }
        None => {}
    }
    match op {
        // A broadcast tree forwards each chunk as soon as it has it (pipelined), and a
        // large one on one host goes direct (`coll::broadcast`): no size crossover.
        Operation::Broadcast if n >= ROOTED_BINOMIAL_MIN_RANKS => Method::Binomial,
        Operation::Broadcast => Method::Flat,
        Operation::Scatter | Operation::Gather => {
            if n >= SCATTER_GATHER_BINOMIAL_MIN_RANKS && nbytes < ROOTED_FLAT_MIN_BYTES {
                Method::Binomial
            } else {
                Method::Flat
            }
        }
        Operation::GatherAll
            if n >= GATHER_ALL_DISSEMINATION_MIN_RANKS
                && nbytes < GATHER_ALL_STAGGERED_MIN_BYTES =>
        {
            Method::Dissemination
        }
        Operation::GatherAll | Operation::Exchange => Method::Staggered,
        Operation::Permute => Method::Flat,
        Operation::PrefixReduce => {
            if n >= SCAN_DOUBLING_MIN_RANKS && nbytes < SCAN_CHAIN_MIN_BYTES {
                Method::Doubling
            } else {
                Method::Chain
            }
        }
    }
}
