//! Initialization, finalization and rank queries (UPC++ spec ch. 2).
//!
//! `init` may be called several times; each call must be matched by a `finalize`, and
//! only the first `init` and the last `finalize` do work (§2.2 ¶3–¶5). The first `init`
//! creates the `gex` client, attaches the whole shared segment the launcher provided,
//! builds the table that makes `GlobalPtr::local` O(1), and makes the calling thread
//! hold the master persona. The last `finalize` is a barrier that keeps making
//! user-level progress (so RPCs aimed at this rank still run) and then releases the
//! rank. The communication layer cannot be initialized twice in one process, so `init`
//! after the last `finalize` is an error.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::{persona, progress, thread};

/// A rank in the job or a team (UPC++ `intrank_t`).
pub type Rank = u32;

/// Where rank `r`'s segment lives, at its owner and in this process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerSegment {
    pub owner_base: usize,
    pub local_base: usize,
    pub size: usize,
}

pub(crate) struct Runtime {
    pub client: gex::Client,
    pub team: gex::Team,
    /// The segments this process maps, indexed by rank: the local team's.
    pub peers: Vec<PeerSegment>,
    /// The segments `rput`/`rget` copy to and from directly: `peers`, or none while a
    /// GASP tool is attached (the operations then go through `gex`, where they are
    /// reported). Keeping the choice in the table spares the copies a flag test.
    pub direct: Vec<PeerSegment>,
    pub rank: Rank,
    pub size: Rank,
}

impl Runtime {
    /// Where this process reaches `len` bytes at `addr` in `rank`'s segment, if it maps
    /// that segment (`rank` is in the local team) and the whole range is inside it
    /// (`len` 0: `addr` may be one past the segment's end).
    #[inline]
    pub(crate) fn local_range(&self, rank: Rank, addr: usize, len: usize) -> Option<usize> {
        range_in(&self.peers, rank, addr, len)
    }

    /// As [`Runtime::local_range`], for the segments RMA copies to and from directly
    /// (none while a GASP tool is attached).
    #[inline]
    pub(crate) fn direct_range(&self, rank: Rank, addr: usize, len: usize) -> Option<usize> {
        range_in(&self.direct, rank, addr, len)
    }
}

#[inline(always)]
fn range_in(peers: &[PeerSegment], rank: Rank, addr: usize, len: usize) -> Option<usize> {
    let peer = peers.get(rank as usize)?;
    let off = addr.wrapping_sub(peer.owner_base);
    // Lazily: outside the segment, `off` may be anything and the sum overflow.
    (off <= peer.size && len <= peer.size - off).then(|| peer.local_base + off)
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
/// `RUNTIME`'s value from the end of the first `init` to the last `finalize`, null
/// otherwise: every call finds the runtime, and whether it may be used, in one load.
static LIVE: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
static INITS: AtomicUsize = AtomicUsize::new(0);
static FINALIZED: AtomicBool = AtomicBool::new(false);

/// The runtime, or a panic naming `call` if UPC++ is not initialized.
#[inline]
#[track_caller]
pub(crate) fn rt(call: &str) -> &'static Runtime {
    let live = LIVE.load(Ordering::Acquire);
    if live.is_null() {
        not_initialized(call);
    }
    // SAFETY: a non-null `LIVE` points at `RUNTIME`'s value, which is never dropped or
    // moved; the Acquire load pairs with the Release store made after it was set.
    unsafe { &*live }
}

#[inline]
#[track_caller]
pub(crate) fn check_init(call: &str) {
    rt(call);
}

#[cold]
#[track_caller]
fn not_initialized(call: &str) -> ! {
    if FINALIZED.load(Ordering::Relaxed) {
        panic!("upcxx::{call}: called after upcxx::finalize")
    }
    panic!("upcxx::{call}: called before upcxx::init")
}

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
    let peers = (0..team.size())
        .map(|r| {
            let b = team
                .segment_bound(r)
                .expect("every rank attached a segment");
            PeerSegment {
                owner_base: b.owner_addr,
                local_base: b.local_addr.expect("smp maps every segment"),
                size: b.size,
            }
        })
        .collect::<Vec<_>>();
    // The tool, if any, was attached by `gex::Client::init`.
    let direct = if crate::instrument::reporting() {
        Vec::new()
    } else {
        peers.clone()
    };
    crate::alloc::init_heap(segment.addr(), segment.size());
    let rank = team.rank();
    let size = team.size();
    let _ = RUNTIME.set(Runtime {
        client,
        team,
        peers,
        direct,
        rank,
        size,
    });
    let runtime: &'static Runtime = RUNTIME.get().expect("just set");
    LIVE.store(std::ptr::from_ref(runtime).cast_mut(), Ordering::Release);
}

/// True between the first `init` and the last `finalize` (UPC++ `initialized`).
pub fn initialized() -> bool {
    INITS.load(Ordering::Acquire) > 0
}

/// Ends one `init` (UPC++ `finalize`, §2.2). The last call is collective: a barrier
/// (with user-level progress) after which this rank may exit.
#[track_caller]
pub fn finalize() {
    let rt = rt("finalize");
    thread::check_not_restricted("finalize");
    if INITS.load(Ordering::Acquire) == 1 {
        let span = gasp::span!(GASP_UPC_COLLECTIVE_EXIT, [gasp::Arg::Int(0)]);
        barrier_with_progress(&rt.team);
        INITS.store(0, Ordering::Release);
        FINALIZED.store(true, Ordering::Release);
        LIVE.store(std::ptr::null_mut(), Ordering::Release);
        gasp::end!(span, [gasp::Arg::Int(0)]);
        // gex's own exit event would repeat ours; its finalize also ends the tool.
        #[cfg(feature = "gasp")]
        let _quiet = gasp::dispatch::quiet();
        rt.client.finalize();
    } else {
        INITS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A barrier over `team` that keeps making user-level progress while it waits.
pub(crate) fn barrier_with_progress(team: &gex::Team) {
    let mut ev = team.barrier_nb();
    progress::wait_until(|| ev.test());
}

/// This process's rank in the world team (UPC++ `rank_me`).
#[inline]
#[track_caller]
pub fn rank_me() -> Rank {
    rt("rank_me").rank
}

/// The number of ranks in the world team (UPC++ `rank_n`).
#[inline]
#[track_caller]
pub fn rank_n() -> Rank {
    rt("rank_n").size
}

/// Waits until every rank has entered the barrier, making user-level progress
/// (UPC++ `barrier` over the world team).
#[track_caller]
pub fn barrier() {
    let rt = rt("barrier");
    thread::check_not_restricted("barrier");
    let span = gasp::span!(GASP_UPC_BARRIER, [gasp::Arg::Int(0), gasp::Arg::Int(0)]);
    barrier_with_progress(&rt.team);
    gasp::end!(span, [gasp::Arg::Int(0), gasp::Arg::Int(0)]);
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
