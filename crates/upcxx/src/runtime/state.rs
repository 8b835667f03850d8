//! The state `init` leaves for every call: this rank's [`Setup`] and whether UPC++
//! is initialized, with the rank queries. The bottom of the crate: it imports nothing
//! from it. (`runtime.rs`, which fills it, is the composition root at the top.)

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A rank in the job or a team (UPC++ `intrank_t`).
pub type Rank = u32;

/// Where rank `r`'s segment lives, at its owner and in this process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerSegment {
    pub owner_base: usize,
    pub local_base: usize,
    pub size: usize,
}

impl PeerSegment {
    /// The entry of a segment this process does not map (a rank on another host): the
    /// empty range at address 0, which holds no non-null address. Every lookup is of a
    /// non-null address (null pointers are refused or answered before), so a lookup
    /// misses it with the same instructions that test any segment's bounds: the
    /// shared-memory fast paths pay nothing for the ranks they cannot reach.
    pub(crate) const UNMAPPED: PeerSegment = PeerSegment {
        owner_base: 0,
        local_base: 0,
        size: 0,
    };

    /// Whether this process maps the segment (a rank of the local team: attached
    /// segments are never empty).
    #[inline]
    pub(crate) fn is_mapped(&self) -> bool {
        self.size != 0
    }
}

/// What `init` set up for this rank: the `gex` client and world team, the segments
/// this process maps, this rank and the world size. Read by every call through [`rt`].
pub(crate) struct Setup {
    pub client: gex::Client,
    pub team: gex::Team,
    /// Every rank's segment as this process reaches it, indexed by rank: the local
    /// team's (this host's) mapped, the others [`PeerSegment::UNMAPPED`].
    pub peers: Vec<PeerSegment>,
    /// Every rank's segment in its owner's address space (`owner_base`, `size`), mapped
    /// here or not: for the checks and messages about ranks on other hosts.
    pub bounds: Vec<(usize, usize)>,
    /// The segments `rput`/`rget` copy to and from directly: `peers`, or none while a
    /// GASP tool is attached (the operations then go through `gex`, where they are
    /// reported). Keeping the choice in the table spares the copies a flag test.
    pub direct: Vec<PeerSegment>,
    pub rank: Rank,
    pub size: Rank,
}

impl Setup {
    /// Where this process reaches `len` bytes at the non-null `addr` in `rank`'s
    /// segment, if it maps that segment (`rank` is in the local team) and the whole
    /// range is inside it (`len` 0: `addr` may be one past the segment's end).
    #[inline]
    pub(crate) fn local_range(&self, rank: Rank, addr: usize, len: usize) -> Option<usize> {
        range_in(&self.peers, rank, addr, len)
    }

    /// As [`Setup::local_range`], for the segments RMA copies to and from directly
    /// (none while a GASP tool is attached).
    #[inline]
    pub(crate) fn direct_range(&self, rank: Rank, addr: usize, len: usize) -> Option<usize> {
        range_in(&self.direct, rank, addr, len)
    }

    /// Whether `[addr, addr + len)` lies inside `rank`'s segment, mapped here or not
    /// (`bounds`); `None` if `rank` is not in the job.
    #[inline]
    pub(crate) fn in_segment(&self, rank: Rank, addr: usize, len: usize) -> Option<bool> {
        let &(base, size) = self.bounds.get(rank as usize)?;
        Some(inside(base, size, addr, len))
    }
}

/// `addr` must not be 0 (see [`PeerSegment::UNMAPPED`]).
#[inline(always)]
fn range_in(peers: &[PeerSegment], rank: Rank, addr: usize, len: usize) -> Option<usize> {
    let peer = peers.get(rank as usize)?;
    inside(peer.owner_base, peer.size, addr, len)
        .then(|| peer.local_base + addr.wrapping_sub(peer.owner_base))
}

/// Whether `[addr, addr + len)` lies inside `[base, base + size)`.
#[inline(always)]
fn inside(base: usize, size: usize, addr: usize, len: usize) -> bool {
    let off = addr.wrapping_sub(base);
    // Lazily: outside the segment, `off` may be anything and the sum overflow.
    off <= size && len <= size - off
}

pub(super) static RUNTIME: OnceLock<Setup> = OnceLock::new();
/// `RUNTIME`'s value from the end of the first `init` to the last `finalize`, null
/// otherwise: every call finds the runtime, and whether it may be used, in one load.
pub(super) static LIVE: AtomicPtr<Setup> = AtomicPtr::new(std::ptr::null_mut());
pub(super) static INITS: AtomicUsize = AtomicUsize::new(0);
pub(super) static FINALIZED: AtomicBool = AtomicBool::new(false);

/// The runtime, or a panic naming `call` if UPC++ is not initialized.
#[inline]
#[track_caller]
pub(crate) fn rt(call: &str) -> &'static Setup {
    let live = LIVE.load(Ordering::Acquire);
    if live.is_null() {
        not_initialized(call);
    }
    // SAFETY: a non-null `LIVE` points at `RUNTIME`'s value, which is never dropped or
    // moved; the Acquire load pairs with the Release store made after it was set.
    unsafe { &*live }
}

/// The runtime, if UPC++ is initialized.
#[inline]
pub(crate) fn try_rt() -> Option<&'static Setup> {
    // SAFETY: as in `rt`.
    unsafe { LIVE.load(Ordering::Acquire).as_ref() }
}

/// Fails, naming `call`, unless UPC++ is initialized.
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

/// True between the first `init` and the last `finalize` (UPC++ `initialized`).
pub fn initialized() -> bool {
    INITS.load(Ordering::Acquire) > 0
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
