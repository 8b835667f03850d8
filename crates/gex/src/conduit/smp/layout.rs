//! The layout of a job's shared-memory region, shared by the launcher and the ranks.
//!
//! One anonymous memory file (`memfd`) holds the whole job. The launcher creates it,
//! sizes it and writes the [`JobHeader`]; every rank inherits the descriptor, maps the
//! whole file once, and closes the descriptor. Because the file has no name, nothing can
//! be left behind in `/dev/shm` or the file system however the job ends: the kernel frees
//! the memory when the last process that maps it exits.
//!
//! ```text
//! offset 0            JobHeader (one page)
//! HEADER_SIZE         rank 0:  RankControl | request queue | reply queue | segment
//! + rank_stride       rank 1:  RankControl | request queue | reply queue | segment
//! ...
//! ```
//!
//! Each rank owns two bounded multi-producer, single-consumer queues of fixed-size slots
//! (one for Requests, one for Replies; see `queue.rs`). Their size does not depend on the
//! number of ranks, so queue memory is O(1) per rank and O(N) per host. Pages are only
//! backed by memory when touched, so a large `segment_size` costs address space, not RAM.
//!
//! The mpi conduit lays out each rank's area up to [`JobLayout::SEGMENT_OFFSET`] (control
//! block and queues) the same way, in a shared-memory window over the ranks of a host.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Identifies a region written by this version of the layout.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"GEXSMP02");

/// Size of the job header at the start of the region.
pub(crate) const HEADER_SIZE: usize = 4096;
/// Size of each rank's control block.
pub(crate) const CONTROL_SIZE: usize = 4096;
/// Size of one message slot in an AM queue: a [`SLOT_HEADER`]-byte header and the Medium
/// payload.
pub(crate) const SLOT_SIZE: usize = 4096;
/// Bytes at the start of each slot for the message header and arguments: the header's
/// own 96 (its fixed fields and 16 argument words), so that a Medium payload starts in
/// the slot's second cache line, in the aligned 128-byte pair with the header's first,
/// which processors' adjacent-line prefetchers fetch together, rather than in a third
/// line that the receiver fetches from the sender's cache on its own. Measured: with a
/// 128-byte header, a round trip of small RPCs carrying a payload took about a sixth
/// longer.
pub(crate) const SLOT_HEADER: usize = 96;
/// Number of slots in each rank's Request queue.
pub(crate) const REQUEST_SLOTS: usize = 256;
/// Number of slots in each rank's Reply queue.
pub(crate) const REPLY_SLOTS: usize = 256;
/// Bytes of a queue's own bookkeeping (the producers' tail counter) before its slots.
pub(crate) const QUEUE_HEADER: usize = 128;
/// The largest failure message a rank records for the launcher.
pub(crate) const FAILURE_MESSAGE_MAX: usize = 3072;
/// Number of signal words in each rank's control block (see [`RankControl::signals`]):
/// the primordial team's barrier's 32, then 8 blocks of 8 for split teams' barriers
/// (`gex::barrier::team`).
pub(crate) const SIGNALS: usize = 32 + 8 * 8;
/// Alignment of each rank's area and segment.
pub(crate) const PAGE: usize = 4096;

/// Lifecycle of one rank, as recorded in its control block.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankState {
    /// The process has not initialized the communication layer (yet).
    NotStarted = 0,
    /// `Client::init` has run.
    Running = 1,
    /// The rank finalized: it may exit without taking the job down.
    Finalized = 2,
    /// The rank recorded a failure message (a panic or a fatal error) before dying.
    Failed = 3,
    /// The rank left through `gex::exit(0)`, its own or another rank's: the job ends
    /// with status 0.
    Exited = 4,
}

impl RankState {
    fn from_u32(v: u32) -> RankState {
        match v {
            1 => RankState::Running,
            2 => RankState::Finalized,
            3 => RankState::Failed,
            4 => RankState::Exited,
            _ => RankState::NotStarted,
        }
    }
}

/// `JobHeader::abort`: the launcher tears the job down.
pub(crate) const TEARDOWN: u32 = 1;
/// `JobHeader::abort`: a rank called `gex::exit(0)`, which ends the job.
pub(crate) const EXIT: u32 = 2;

/// The first page of the region, written by the launcher before any rank starts.
#[repr(C)]
pub struct JobHeader {
    pub magic: AtomicU64,
    pub ranks: AtomicU32,
    /// How the job is ending, if it is: `TEARDOWN` (set by the launcher when it tears
    /// the job down; ranks that notice it stop waiting and exit with status 1) or
    /// `EXIT` (set by a rank that called `gex::exit(0)`; ranks that notice it leave
    /// the same way).
    pub abort: AtomicU32,
    /// Largest segment each rank may attach.
    pub segment_size: AtomicU64,
    pub rank_stride: AtomicU64,
    _pad0: [u64; 3],
    /// Arrival counter of the barrier inside `Client::init` (before queues may be used).
    pub init_arrived: AtomicU32,
    _pad1: [u32; 15],
}

/// Per-rank bookkeeping that other ranks and the launcher read.
#[repr(C)]
pub struct RankControl {
    pub state: AtomicU32,
    pub pid: AtomicU32,
    /// Address at which the owning rank mapped the whole region.
    pub map_base: AtomicU64,
    /// Size of the segment the rank attached (0: none yet).
    pub segment_attached: AtomicU64,
    pub failure_len: AtomicU32,
    _pad: [u32; 9],
    /// Words other ranks store to and this rank waits on (the conduit's `signal`: a
    /// barrier's rounds within a host); they start on a cache line of their own.
    pub signals: [AtomicU64; SIGNALS],
    pub failure: [u8; FAILURE_MESSAGE_MAX],
}

const _: () = assert!(std::mem::size_of::<JobHeader>() <= HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<RankControl>() <= CONTROL_SIZE);
const _: () = assert!(JobLayout::SEGMENT_OFFSET.is_multiple_of(PAGE));
const _: () = assert!(JobLayout::REPLY_QUEUE_OFFSET > JobLayout::REQUEST_QUEUE_OFFSET);

/// Offsets and sizes of a job's region, computed from the rank count and segment size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLayout {
    pub ranks: usize,
    pub segment_size: usize,
    pub rank_stride: usize,
}

const fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

impl JobLayout {
    /// Byte offset of a rank's request queue within its rank area.
    pub const REQUEST_QUEUE_OFFSET: usize = CONTROL_SIZE;
    /// Byte offset of a rank's reply queue within its rank area.
    pub const REPLY_QUEUE_OFFSET: usize =
        Self::REQUEST_QUEUE_OFFSET + QUEUE_HEADER + REQUEST_SLOTS * SLOT_SIZE;
    /// Byte offset of a rank's segment within its rank area.
    pub const SEGMENT_OFFSET: usize = round_up(
        Self::REPLY_QUEUE_OFFSET + QUEUE_HEADER + REPLY_SLOTS * SLOT_SIZE,
        PAGE,
    );

    /// The layout of a job of `ranks` ranks with `segment_size` bytes of segment each
    /// (rounded up to whole pages).
    pub fn new(ranks: usize, segment_size: usize) -> JobLayout {
        let segment_size = round_up(segment_size.max(PAGE), PAGE);
        JobLayout {
            ranks,
            segment_size,
            rank_stride: Self::SEGMENT_OFFSET + segment_size,
        }
    }

    /// Total size of the memory file.
    pub fn total_size(&self) -> usize {
        HEADER_SIZE + self.ranks * self.rank_stride
    }

    /// Offset of `rank`'s area from the start of the region.
    pub fn rank_offset(&self, rank: usize) -> usize {
        HEADER_SIZE + rank * self.rank_stride
    }
}

/// A mapping of a job region in this process, with typed access to its parts.
///
/// `Region` does not own the mapping; whoever created it (the launcher or the smp
/// conduit) keeps it alive for as long as the `Region` is used.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    base: *mut u8,
    layout: JobLayout,
}

// SAFETY: a Region is an address and sizes; all shared state it exposes is atomic or is
// accessed through raw pointers by code that synchronizes with atomics.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Wraps a mapping of `layout.total_size()` bytes at `base`.
    ///
    /// # Safety
    /// `base` must point to a live, writable, shared mapping of at least
    /// `layout.total_size()` bytes that outlives every use of the returned value.
    pub unsafe fn new(base: *mut u8, layout: JobLayout) -> Region {
        Region { base, layout }
    }

    /// Start of the mapping in this process's address space.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The sizes and offsets of the job's parts.
    pub fn layout(&self) -> &JobLayout {
        &self.layout
    }

    /// The job header at the start of the region.
    pub fn header(&self) -> &JobHeader {
        // SAFETY: the header lies at offset 0 of a mapping that is at least HEADER_SIZE
        // bytes, page aligned, and only accessed through atomics.
        unsafe { &*(self.base as *const JobHeader) }
    }

    /// Start of `rank`'s area in this process's address space.
    pub fn rank_area(&self, rank: usize) -> *mut u8 {
        assert!(rank < self.layout.ranks, "rank {rank} out of range");
        // SAFETY: the offset is within the mapping (checked rank).
        unsafe { self.base.add(self.layout.rank_offset(rank)) }
    }

    /// `rank`'s control block: its lifecycle state and failure message.
    pub fn control(&self, rank: usize) -> &RankControl {
        // SAFETY: the control block starts each rank area (page aligned) and is only
        // accessed through atomics, except `failure`, which is written before the
        // Release store of `failure_len` and read after its Acquire load.
        unsafe { &*(self.rank_area(rank) as *const RankControl) }
    }

    /// Start of `rank`'s segment in this process's address space.
    pub fn segment(&self, rank: usize) -> *mut u8 {
        // SAFETY: SEGMENT_OFFSET + segment_size == rank_stride, within the rank's area.
        unsafe { self.rank_area(rank).add(JobLayout::SEGMENT_OFFSET) }
    }

    /// Writes the job header. Called once by whoever created the region.
    pub fn init_header(&self) {
        let h = self.header();
        h.ranks.store(self.layout.ranks as u32, Ordering::Relaxed);
        h.segment_size
            .store(self.layout.segment_size as u64, Ordering::Relaxed);
        h.rank_stride
            .store(self.layout.rank_stride as u64, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
    }

    /// Where `rank` is in its lifecycle, as it last recorded.
    pub fn rank_state(&self, rank: usize) -> RankState {
        RankState::from_u32(self.control(rank).state.load(Ordering::Acquire))
    }

    /// Records `rank`'s lifecycle state for the launcher and the other ranks.
    pub fn set_rank_state(&self, rank: usize, state: RankState) {
        self.control(rank)
            .state
            .store(state as u32, Ordering::Release);
    }

    /// Records why `rank` is failing, for the launcher's report. A later message
    /// replaces an earlier one (a panic the program caught is followed by the real one).
    /// The launcher reads it only after the rank died, so only the owner writes it.
    pub fn record_failure(&self, rank: usize, message: &str) {
        let ctl = self.control(rank);
        let bytes = message.as_bytes();
        let mut n = bytes.len().min(FAILURE_MESSAGE_MAX);
        while !message.is_char_boundary(n) {
            n -= 1;
        }
        ctl.failure_len.store(0, Ordering::Release);
        // SAFETY: `failure` is a plain byte array inside the control block; only the
        // owning rank writes it, and readers wait for the Release store below.
        unsafe {
            let dst = ctl.failure.as_ptr() as *mut u8;
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        }
        ctl.failure_len.store(n.max(1) as u32, Ordering::Release);
    }

    /// The failure message `rank` recorded, if any.
    pub fn failure_message(&self, rank: usize) -> Option<String> {
        let ctl = self.control(rank);
        let n = ctl.failure_len.load(Ordering::Acquire) as usize;
        if n == 0 {
            return None;
        }
        let n = n.min(FAILURE_MESSAGE_MAX);
        Some(String::from_utf8_lossy(&ctl.failure[..n]).into_owned())
    }

    /// Tells every rank that the job is being torn down.
    pub fn set_abort(&self) {
        self.header().abort.store(TEARDOWN, Ordering::Release);
    }

    /// Records that `rank` ends the job with `gex::exit(0)`, and tells every rank
    /// (unless the job is already being torn down).
    pub fn request_exit(&self, rank: usize) {
        self.set_rank_state(rank, RankState::Exited);
        let _ = self
            .header()
            .abort
            .compare_exchange(0, EXIT, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Whether the job is being torn down (see [`Region::set_abort`]).
    pub fn aborted(&self) -> bool {
        self.header().abort.load(Ordering::Relaxed) != 0
    }

    /// How the job is ending, if it is: the status a rank that notices leaves with (0 if
    /// a rank called `gex::exit(0)`, 1 if the launcher tears the job down).
    pub fn ending(&self) -> Option<i32> {
        match self.header().abort.load(Ordering::Relaxed) {
            0 => None,
            EXIT => Some(0),
            _ => Some(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_are_page_aligned_and_disjoint() {
        let l = JobLayout::new(3, 1 << 20);
        assert_eq!(l.rank_stride % PAGE, 0);
        assert_eq!(l.total_size(), HEADER_SIZE + 3 * l.rank_stride);
        assert_eq!(JobLayout::new(1, 1).segment_size, PAGE);
    }
}
