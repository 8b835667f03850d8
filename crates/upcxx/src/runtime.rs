//! Initialization, finalization and rank queries (UPC++ spec ch. 2).
//!
//! `init` may be called several times; each call must be matched by a `finalize`, and
//! only the first `init` and the last `finalize` do work (§2.2 ¶3–¶5). The first `init`
//! creates the `gex` client, attaches the whole shared segment the launcher provided,
//! builds the table that makes `GlobalPtr::local` O(1) (every rank's segment, those of
//! the local team mapped: across hosts, on the mpi conduit, the others are reached
//! through `gex` only), makes the calling thread hold the master persona, and makes the
//! world and local teams. The last `finalize` is a barrier that keeps making
//! user-level progress (so RPCs aimed at this rank still run) and then releases the
//! rank. The communication layer cannot be initialized twice in one process, so `init`
//! after the last `finalize` is an error.
//!
//! `init` and `finalize` are the composition root: they call every layer (personas,
//! RPC handlers, the segment heap, progress). What the layers import from the runtime,
//! the state `init` leaves and the rank queries, is `runtime/state.rs`, the bottom of
//! the crate.

pub(crate) mod state;

use std::sync::atomic::Ordering;

use crate::{persona, progress};
use state::{rt, PeerSegment, Setup, FINALIZED, INITS, LIVE, RUNTIME};

pub use state::{initialized, rank_me, rank_n, Rank};

/// Initializes UPC++ (UPC++ `init`, §2.2). Collective on the first call.
#[track_caller]
pub fn init() {
    if FINALIZED.load(Ordering::Relaxed) {
        panic!("upcxx::init: UPC++ cannot be initialized again after its last finalize");
    }
    if INITS.fetch_add(1, Ordering::AcqRel) > 0 {
        return;
    }
    if RUNTIME.get().is_some() {
        return;
    }
    persona::adopt_master();
    gasp::set_language(gasp::Language::Upcxx);
    let (client, endpoint, team) =
        gex::Client::init("UPCXX", gex::Flags::NONE).unwrap_or_else(|e| panic!("upcxx::init: {e}"));
    crate::rpc::register_handlers(&endpoint);
    let segment = gex::Segment::attach(&team, gex::max_segment_size())
        .unwrap_or_else(|e| panic!("upcxx::init: {e}"));
    let bounds: Vec<gex::BoundSegment> = (0..team.size())
        .map(|r| {
            team.segment_bound(r)
                .expect("every rank attached a segment")
        })
        .collect();
    // The mpi conduit maps only the segments of this host's ranks (the local team);
    // the others are reached through `gex`.
    let peers = bounds
        .iter()
        .map(|b| match b.local_addr {
            Some(local_base) => PeerSegment {
                owner_base: b.owner_addr,
                local_base,
                size: b.size,
            },
            None => PeerSegment::UNMAPPED,
        })
        .collect::<Vec<_>>();
    let bounds = bounds.iter().map(|b| (b.owner_addr, b.size)).collect();
    // The tool, if any, was attached by `gex::Client::init`.
    let direct = if crate::reported::enabled() {
        Vec::new()
    } else {
        peers.clone()
    };
    crate::alloc::init_heap(segment.addr(), segment.size());
    let rank = team.rank();
    let size = team.size();
    let _ = RUNTIME.set(Setup {
        client,
        team,
        peers,
        bounds,
        direct,
        rank,
        size,
    });
    let runtime: &'static Setup = RUNTIME.get().expect("just set");
    LIVE.store(std::ptr::from_ref(runtime).cast_mut(), Ordering::Release);
    crate::team::init(team);
}

/// Ends one `init` (UPC++ `finalize`, §2.2). The last call is collective: a barrier
/// (with user-level progress) after which this rank may exit.
#[track_caller]
pub fn finalize() {
    let rt = rt("finalize");
    // Collective, on the master persona's thread (§2.2 ¶9), and it waits.
    crate::team::check_collective("finalize");
    if INITS.load(Ordering::Acquire) == 1 {
        let span = gasp::span!(GASP_UPC_COLLECTIVE_EXIT, 0);
        progress::barrier_with_progress(&rt.team);
        INITS.store(0, Ordering::Release);
        FINALIZED.store(true, Ordering::Release);
        LIVE.store(std::ptr::null_mut(), Ordering::Release);
        gasp::end!(span, 0);
        // gex's own exit event would repeat ours; its finalize also ends the tool.
        #[cfg(feature = "gasp")]
        let _quiet = gasp::dispatch::quiet();
        rt.client.finalize();
    } else {
        INITS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until every rank has entered the barrier, making user-level progress
/// (UPC++ `barrier` over the world team).
#[track_caller]
pub fn barrier() {
    let rt = rt("barrier");
    crate::team::check_collective("barrier");
    let span = gasp::span!(GASP_UPC_BARRIER, 0, 0);
    progress::barrier_with_progress(&rt.team);
    gasp::end!(span, 0, 0);
}

/// Interoperability with the communication layer underneath (as UPC++'s
/// `upcxx::backend::gasnet` namespace): for libraries and benchmarks that mix UPC++ with
/// direct `gex` calls.
pub mod backend {
    /// The `gex` primordial team UPC++ runs on; its ranks are UPC++ world ranks.
    #[track_caller]
    pub fn gex_team() -> gex::Team {
        super::rt("backend::gex_team").team
    }
}
