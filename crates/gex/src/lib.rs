//! `gex`: the GASNet-EX communication layer for Rust.
//!
//! This crate implements the point-to-point part of the GASNet-EX API (the
//! `gasnet-ex-api.txt` specification) for SPMD jobs: every rank is a process running the
//! same program, owning a *segment* of memory that every other rank can write and read
//! with one-sided operations and send *Active Messages* to.
//!
//! ```
//! use gex::{Client, Flags, Segment};
//!
//! let (client, _ep, team) = Client::init("HELLO", Flags::NONE).unwrap();
//! let segment = Segment::attach(&team, 1 << 20).unwrap();
//! // Write our rank into the start of the next rank's segment.
//! let next = (team.rank() + 1) % team.size();
//! let dest = team.segment_bound(next).unwrap().owner_addr;
//! team.put_blocking(next, dest, &team.rank().to_le_bytes(), Flags::NONE).unwrap();
//! team.barrier();
//! // SAFETY: the previous rank's put completed before the barrier.
//! let got = unsafe { (segment.addr() as *const u32).read_volatile() };
//! assert_eq!(got, (team.rank() + team.size() - 1) % team.size());
//! client.finalize();
//! ```
//!
//! Start it with `upcxx-run -n 4 program`, or `UPCXX_RANKS=4 program`; started plainly
//! (as `cargo test` runs this example) it runs as one rank, whose next rank is itself.
//!
//! The map of the crate, top down:
//! * [`Client::init`] (`init.rs`): the composition root, the one module that knows
//!   every part; it creates the runtime and hands it what progress runs.
//! * [`job`]: starting N-rank jobs (the launcher behind `upcxx-run`);
//!   `testing` (feature `testing`): multi-rank tests in `cargo test`.
//! * [`barrier`]: the split-phase barrier of the primordial team.
//! * [`am`]: Active Messages: registration, Short/Medium/Long Requests and Replies,
//!   negotiated payloads. [`rma`]: put and get (Blocking, NB, NBI, value-based).
//!   [`event`]: events, local completion, NBI categories and access regions.
//!   [`hsl`]: handler-safe locks. [`vis`]: vector, indexed and strided put and get.
//!   [`atomic`]: atomic domains and remote atomics. [`kinds`]: memory kinds, segments
//!   of device memory (our extension).
//! * [`client`]: client, endpoint, team and segment objects, job queries.
//! * `progress` ([`poll`]), `runtime` (the process-wide state), `context` (restricted
//!   contexts), `backoff`, `env`: the core below the operations.
//! * `conduit`: the transport, private; `conduit/smp/` is shared memory on one host.
//! * [`layered`]: what a runtime built on gex (such as UPC++) needs beyond the
//!   GASNet-EX API.
//!
//! **Architecture invariant:** imports point down this list; the conduit knows nothing
//! above it.

pub mod am;
pub mod atomic;
mod backoff;
pub mod barrier;
pub mod client;
pub mod coll;
mod conduit;
mod context;
mod env;
pub mod event;
pub mod hsl;
mod init;
pub mod job;
pub mod kinds;
pub mod layered;
pub mod ops;
mod progress;
pub mod rma;
mod runtime;
mod sync;
pub mod team;
#[cfg(feature = "testing")]
pub mod testing;
pub mod vis;

pub use am::{AmCategory, AmEntry, AmIndex, AmRole, HandlerFn, LcKind, SrcDesc, Token, TokenInfo};
pub use atomic::{AtomicDomain, AtomicType};
pub use client::{
    host_info, job_rank, job_size, max_segment_size, my_position, nbrhd_info, Client, Endpoint,
    InitError, Segment,
};
pub use conduit::{BoundSegment, Rank};
pub use event::{
    nbi_begin_access_region, nbi_end_access_region, nbi_test, nbi_wait, Event, EventCategory, Lc,
};
pub use hsl::Hsl;
pub use init::exit;
pub use progress::poll;
pub use team::Team;
pub use vis::{Memvec, VIS_MAX_PEERCOMPLETION};

/// Segment sizes are multiples of this (GASNet `GASNET_PAGESIZE`).
pub const PAGE_SIZE: usize = conduit::smp::layout::PAGE;

/// Flags of communication calls (GASNet-EX `gex_Flags_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(u32);

impl Flags {
    /// No flag: the default behaviour of every call (a `flags` argument of 0).
    pub const NONE: Flags = Flags(0);
    /// Return [`NoOp`] instead of blocking for resources (GASNet-EX `GEX_FLAG_IMMEDIATE`).
    pub const IMMEDIATE: Flags = Flags(1);
    /// Ask a VIS NB or NBI put for its local-completion leaf event, or for local
    /// completion in the NBI category `LC` (GASNet-EX `GEX_FLAG_ENABLE_LEAF_LC`).
    pub const ENABLE_LEAF_LC: Flags = Flags(1 << 12);
    /// Asserts that the target of a remote atomic is the calling rank
    /// (GASNet-EX `GEX_FLAG_AD_MY_RANK`); exclusive with [`Flags::AD_MY_NBRHD`].
    pub const AD_MY_RANK: Flags = Flags(1 << 16);
    /// Asserts that the target of a remote atomic is in the calling process's
    /// neighborhood (GASNet-EX `GEX_FLAG_AD_MY_NBRHD`).
    pub const AD_MY_NBRHD: Flags = Flags(1 << 17);
    /// Asks `AtomicDomain::create` to favor targets on the calling rank (GASNet-EX
    /// `GEX_FLAG_AD_FAVOR_MY_RANK`); one of three exclusive hints.
    pub const AD_FAVOR_MY_RANK: Flags = Flags(1 << 18);
    /// Asks `AtomicDomain::create` to favor targets in the caller's neighborhood
    /// (GASNet-EX `GEX_FLAG_AD_FAVOR_MY_NBRHD`).
    pub const AD_FAVOR_MY_NBRHD: Flags = Flags(1 << 19);
    /// Asks `AtomicDomain::create` to favor targets in other neighborhoods (GASNet-EX
    /// `GEX_FLAG_AD_FAVOR_REMOTE`).
    pub const AD_FAVOR_REMOTE: Flags = Flags(1 << 20);
    /// Makes a `Team::max_{request,reply}_{medium,long}` query answer the largest
    /// `least_payload` of a Prepare call with a client buffer (GASNet-EX
    /// `GEX_FLAG_AM_PREPARE_LEAST_CLIENT`); exclusive with
    /// [`Flags::AM_PREPARE_LEAST_ALLOC`]. Ignored by Prepare calls; a fixed-payload
    /// Request or Reply refuses it.
    pub const AM_PREPARE_LEAST_CLIENT: Flags = Flags(1 << 8);
    /// Makes a payload query answer the largest `least_payload` of a Prepare call whose
    /// buffer the library provides (GASNet-EX `GEX_FLAG_AM_PREPARE_LEAST_ALLOC`); as
    /// [`Flags::AM_PREPARE_LEAST_CLIENT`] otherwise.
    pub const AM_PREPARE_LEAST_ALLOC: Flags = Flags(1 << 9);
    /// The remote atomic performs an "acquire" (GASNet-EX `GEX_FLAG_AD_ACQ`).
    pub const AD_ACQ: Flags = Flags(1 << 21);
    /// The remote atomic performs a "release" (GASNet-EX `GEX_FLAG_AD_REL`).
    pub const AD_REL: Flags = Flags(1 << 22);
    /// The target rank of a remote atomic is a job rank, not a rank of the domain's
    /// team (GASNet-EX `GEX_FLAG_RANK_IS_JOBRANK`).
    pub const RANK_IS_JOBRANK: Flags = Flags(1 << 23);

    /// The flags as the bit mask `gex_Flags_t` is.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag in `other` is set in `self`.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag in `other` is set in `self`.
    pub const fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }

    /// The flags of `self` and of `other` (`|`, usable in constants).
    pub const fn or(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// The flags of `self` that are not in `other`.
    pub const fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// A call with [`Flags::IMMEDIATE`] found no resources and did nothing (the spec's
/// non-zero return, `GEX_EVENT_NO_OP`, `GEX_AM_SRCDESC_NO_OP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoOp;

impl std::fmt::Display for NoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no resources were available and IMMEDIATE was given: nothing was done")
    }
}

impl std::error::Error for NoOp {}
