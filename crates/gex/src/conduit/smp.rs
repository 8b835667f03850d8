//! The `smp` conduit: all ranks on one host, every segment in shared memory (PSHM).
//!
//! The job region (see [`layout`]) is one anonymous memory file mapped by every rank, so
//! a put or get to any rank is a bounds check, an address translation and a `memcpy`,
//! and an Active Message is a slot in the target's queue (see [`queue`]). Ranks map the
//! region at different addresses; each rank publishes its mapping address, and
//! translating an address of rank `r`'s segment is one subtraction and one addition.
//!
//! Without a launcher (no `UPCXX_RANK` in the environment) the conduit creates a
//! private one-rank region, so every program also runs as a single rank.
//!
//! The files: `layout` (where everything lies in the region), `region` (creating,
//! inheriting, mapping and validating it), `spawn` (starting a rank that inherits it),
//! `queue` (the AM queues), `mailbox` (their consumer's drain loop and a producer's
//! claimed slot, which the mpi conduit uses too).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::conduit::{
    AddressError, AmHeader, BoundSegment, Completion, Conduit, Inbound, Network, Rank,
};

pub(crate) mod layout;
pub(crate) mod mailbox;
pub(crate) mod queue;
pub(crate) mod region;
pub(crate) mod spawn;

use crate::backoff::Backoff;
use layout::{JobLayout, RankState, Region, SLOT_HEADER, SLOT_SIZE};
use mailbox::Inbox;
pub(crate) use mailbox::Outbound;
use queue::{Queue, SlotBounds};
use region::Joined;

/// Where one peer's segment lives.
#[derive(Debug, Clone, Copy)]
struct PeerSegment {
    owner_base: usize,
    local_base: usize,
    size: usize,
}

/// The shared-memory conduit. See the module documentation.
pub(crate) struct SmpConduit {
    region: Region,
    /// Keeps the region mapped for the life of the process.
    _joined: Joined,
    rank: Rank,
    size: Rank,
    ranks: Vec<Rank>,
    requests: Vec<Queue>,
    replies: Vec<Queue>,
    my_requests: Inbox,
    my_replies: Inbox,
    /// Address each rank mapped the region at, read once after bootstrap.
    map_bases: Vec<usize>,
    segments: OnceLock<Box<[PeerSegment]>>,
    attached: AtomicUsize,
}

fn fatal(msg: &str) -> ! {
    eprintln!("gex: {msg}");
    std::process::exit(1)
}

impl SmpConduit {
    fn queue(region: &Region, rank: usize, network: Network) -> Queue {
        // SAFETY: the rank's area of the live mapping holds its queues.
        unsafe { mailbox::queue_in(region.rank_area(rank), network) }
    }

    fn wait_for_all_ranks(&self) {
        let h = self.region.header();
        h.init_arrived.fetch_add(1, Ordering::AcqRel);
        let mut backoff = Backoff::new();
        while h.init_arrived.load(Ordering::Acquire) < self.size {
            match self.region.ending() {
                None => backoff.snooze(),
                // A rank that already joined called `gex::exit(0)`: the job ends.
                Some(0) => {
                    self.region.request_exit(self.rank as usize);
                    std::process::exit(0)
                }
                Some(code) => std::process::exit(code),
            }
        }
    }

    /// Builds the table of every rank's segment from the attach records in the region
    /// (after the attach's barrier, or earlier once every rank attached).
    fn build_segments(&self) -> &[PeerSegment] {
        let offset = |r: usize| self.region.layout().rank_offset(r) + JobLayout::SEGMENT_OFFSET;
        self.segments.get_or_init(|| {
            (0..self.size as usize)
                .map(|r| PeerSegment {
                    owner_base: self.map_bases[r] + offset(r),
                    local_base: self.region.segment(r) as usize,
                    size: self
                        .region
                        .control(r)
                        .segment_attached
                        .load(Ordering::Acquire) as usize,
                })
                .collect()
        })
    }

    /// The table of segments before this rank left the attach's barrier, where the job
    /// already has every segment: a rank that left that barrier may send this one
    /// messages whose handlers address any segment (all ranks attached before any left
    /// it). Until every rank attached, none (the table is built once, for good).
    #[cold]
    fn segments_once_all_attached(&self) -> Result<&[PeerSegment], AddressError> {
        let attached = |r: usize| {
            self.region
                .control(r)
                .segment_attached
                .load(Ordering::Acquire)
                > 0
        };
        if (0..self.size as usize).all(attached) {
            Ok(self.build_segments())
        } else {
            Err(AddressError::NoSegment)
        }
    }

    fn peer_segment(&self, rank: Rank) -> Result<&PeerSegment, AddressError> {
        let segments = match self.segments.get() {
            Some(segments) => segments,
            None => self.segments_once_all_attached()?,
        };
        segments
            .get(rank as usize)
            .filter(|s| s.size > 0)
            .ok_or(AddressError::NoSegment)
    }

    /// What a slot's header is checked against (see `queue::decode`). The segment is
    /// this rank's whole segment area in the region (mapped whatever part of it is
    /// attached), known from the start: a Long payload may arrive before this rank has
    /// built its table of the attached segments.
    fn slot_bounds(&self) -> SlotBounds {
        SlotBounds {
            ranks: self.size,
            segment: (
                self.region.segment(self.rank as usize) as usize,
                self.region.layout().segment_size,
            ),
        }
    }
}

impl Conduit for SmpConduit {
    type Outbound = Outbound;

    fn bootstrap() -> SmpConduit {
        let joined = Joined::from_env(|| {
            crate::env::segment_size_from_env()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })
        .unwrap_or_else(|e| fatal(&format!("cannot join the job: {e}")));
        let (region, rank) = joined.region();
        let rank = rank as Rank;
        let n = region.layout().ranks;
        let me = rank as usize;
        let ctl = region.control(me);
        ctl.map_base
            .store(region.base() as usize as u64, Ordering::Relaxed);
        ctl.pid.store(std::process::id(), Ordering::Relaxed);
        let requests: Vec<Queue> = (0..n)
            .map(|r| SmpConduit::queue(&region, r, Network::Request))
            .collect();
        let replies: Vec<Queue> = (0..n)
            .map(|r| SmpConduit::queue(&region, r, Network::Reply))
            .collect();
        requests[me].initialize();
        replies[me].initialize();
        region.set_rank_state(me, RankState::Running);
        let conduit = SmpConduit {
            my_requests: Inbox::new(requests[me]),
            my_replies: Inbox::new(replies[me]),
            requests,
            replies,
            region,
            _joined: joined,
            rank,
            size: n as Rank,
            ranks: (0..n as Rank).collect(),
            map_bases: Vec::new(),
            segments: OnceLock::new(),
            attached: AtomicUsize::new(0),
        };
        conduit.wait_for_all_ranks();
        let map_bases = (0..n)
            .map(|r| conduit.region.control(r).map_base.load(Ordering::Relaxed) as usize)
            .collect();
        SmpConduit {
            map_bases,
            ..conduit
        }
    }

    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> Rank {
        self.size
    }
    fn nbrhd(&self) -> (&[Rank], Rank) {
        (&self.ranks, self.rank)
    }
    fn host(&self) -> (&[Rank], Rank) {
        (&self.ranks, self.rank)
    }
    fn nbrhd_set(&self) -> (Rank, Rank, Rank, Rank) {
        (1, 0, 1, 0)
    }
    fn host_leaders(&self) -> &[Rank] {
        &self.ranks[..1] // one host, led by rank 0
    }

    fn max_segment_size(&self) -> usize {
        self.region.layout().segment_size
    }

    fn attach_segment(&self, size: usize) -> usize {
        let me = self.rank as usize;
        self.region
            .control(me)
            .segment_attached
            .store(size as u64, Ordering::Release);
        self.attached.store(size, Ordering::Relaxed);
        self.region.segment(me) as usize
    }

    fn segments_attached(&self) {
        self.build_segments();
    }

    fn bound_segment(&self, rank: Rank) -> Option<BoundSegment> {
        let s = self.peer_segment(rank).ok()?;
        Some(BoundSegment {
            owner_addr: s.owner_base,
            local_addr: Some(s.local_base),
            size: s.size,
        })
    }

    #[inline]
    fn translate(&self, rank: Rank, addr: usize, len: usize) -> Result<usize, AddressError> {
        let s = self.peer_segment(rank)?;
        let offset = addr.wrapping_sub(s.owner_base);
        if offset > s.size || len > s.size - offset {
            return Err(AddressError::OutOfSegment {
                owner_addr: s.owner_base,
                size: s.size,
            });
        }
        Ok(s.local_base + offset)
    }

    fn am_max_medium(&self) -> usize {
        SLOT_SIZE - SLOT_HEADER
    }

    fn am_max_long(&self) -> usize {
        self.region
            .layout()
            .segment_size
            .min(crate::conduit::LONG_MAX)
    }

    #[inline]
    fn am_reserve(&self, dest: Rank, network: Network) -> Option<Outbound> {
        Outbound::reserve(match network {
            Network::Request => self.requests[dest as usize],
            Network::Reply => self.replies[dest as usize],
        })
    }

    #[inline]
    fn am_buffer(&self, out: &Outbound) -> *mut u8 {
        out.buffer()
    }

    #[inline]
    fn am_commit(&self, out: Outbound, header: &AmHeader<'_>) {
        out.commit(self.rank, header);
    }

    fn long_payload(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        self.put(dest, dest_addr, src, true)
    }

    fn poll(&self, requests: bool, dispatch: fn(&Inbound<'_>)) -> usize {
        let bounds = || self.slot_bounds();
        let mut n = self
            .my_replies
            .drain(Network::Reply, self.rank, bounds, dispatch, fatal);
        if requests {
            n += self
                .my_requests
                .drain(Network::Request, self.rank, bounds, dispatch, fatal);
        }
        n
    }

    #[inline]
    fn put(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        _blocking: bool,
    ) -> Result<Completion, AddressError> {
        let local = self.translate(dest, dest_addr, src.len())?;
        // SAFETY: `local` is inside the shared mapping of dest's segment (translate
        // checked the bounds); a source slice cannot overlap in a way `copy` mishandles.
        unsafe { std::ptr::copy(src.as_ptr(), local as *mut u8, src.len()) };
        Ok(Completion::Done)
    }

    #[inline]
    unsafe fn get(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError> {
        let local = self.translate(src, src_addr, len)?;
        // SAFETY: the source range is inside the mapping (translate); the caller
        // guarantees `dest` is valid for `len` bytes.
        unsafe { std::ptr::copy(local as *const u8, dest, len) };
        Ok(Completion::Done)
    }

    #[inline]
    fn signal(&self, dest: Rank, slot: usize, value: u64) {
        self.region.control(dest as usize).signals[slot].store(value, Ordering::Release);
    }

    #[inline]
    fn signal_value(&self, slot: usize) -> u64 {
        self.region.control(self.rank as usize).signals[slot].load(Ordering::Acquire)
    }

    fn signal_slots(&self) -> usize {
        layout::SIGNALS
    }

    fn finalize(&self) {
        self.region
            .set_rank_state(self.rank as usize, RankState::Finalized);
    }

    fn end_job(&self) {
        self.region.request_exit(self.rank as usize);
    }

    fn record_failure(&self, message: &str) {
        self.region.record_failure(self.rank as usize, message);
    }

    fn ending(&self) -> Option<i32> {
        self.region.ending()
    }
}
