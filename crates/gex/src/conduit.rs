//! The transport beneath `gex`: the [`Conduit`] trait and its implementations.
//!
//! GASNet-EX splits an implementation into a portable upper half (handler tables,
//! handler-context rules, events, NBI bookkeeping, barriers) and a conduit that moves
//! bytes. We keep the same split: everything in `gex` outside this module talks to the
//! transport only through [`Conduit`], so a new transport (the `mpi` conduit for jobs
//! spanning hosts, which keeps shared memory inside each host) is one new implementation
//! of this trait (`mpi.rs`, beside `smp/`) and a variant of [`Selected`], the one
//! selection point, with no change above it.
//!
//! **Architecture invariant:** nothing in this module or below it imports from the rest
//! of `gex` except the leaves `backoff` and `env`; the conduit knows nothing above it.
//!
//! The trait is deliberately small and speaks in job ranks, addresses in the target's
//! address space, and raw message slots:
//!
//! * **Active Messages** are two-phase: [`Conduit::am_reserve`] claims a send buffer on
//!   the Request or Reply network of the destination (or reports back-pressure),
//!   the upper half writes the payload into [`Conduit::am_buffer`], and
//!   [`Conduit::am_commit`] sends it. This serves fixed-payload and negotiated-payload
//!   (Prepare/Commit) AMs alike without a second copy.
//! * **RMA** calls return a [`Completion`]: done at return (shared memory), or an
//!   [`OpHandle`] that the conduit completes later from `poll` (network transfers).
//!   The upper half turns either into GASNet-EX events and NBI categories.
//! * **Requests and Replies travel on separate networks**, so a Request handler that
//!   blocks to send its Reply only needs to drain Replies, and Reply handlers never
//!   send: the protocol cannot deadlock however full the queues are.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[cfg(feature = "mpi")]
pub(crate) mod mpi;
#[cfg(feature = "mpi")]
mod select;
pub(crate) mod smp;

/// The conduit this build uses: the one place a build selects its transport. Without
/// the `mpi` feature it is the smp conduit itself, so every call is direct.
#[cfg(not(feature = "mpi"))]
pub(crate) type Selected = smp::SmpConduit;
/// With the `mpi` feature, the conduit is chosen at start-up (see [`select`]).
#[cfg(feature = "mpi")]
pub(crate) use select::Selected;

/// A rank: a position in the job or in a team (GASNet-EX `gex_Rank_t`).
pub type Rank = u32;

/// The two independent AM networks of each rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    Request,
    Reply,
}

/// How an AM's payload is delivered (GASNet-EX AM categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Category {
    Short = 0,
    Medium = 1,
    Long = 2,
}

/// The header of one Active Message, as handed to [`Conduit::am_commit`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AmHeader<'a> {
    pub handler: u8,
    pub category: Category,
    // The smp conduit knows the network from the queue it reserved; a conduit whose
    // messages share one channel reads it here.
    #[allow(dead_code)]
    pub network: Network,
    pub args: &'a [u32],
    /// Payload bytes in the send buffer (Medium) or already delivered (Long).
    pub nbytes: usize,
    /// Long only: where the payload was delivered, in the target's address space.
    pub dest_addr: usize,
}

/// An Active Message being handled by the receiver.
#[derive(Debug)]
pub(crate) struct Inbound<'a> {
    pub src: Rank,
    pub handler: u8,
    pub category: Category,
    // The smp conduit knows the network from the queue it reserved; a conduit whose
    // messages share one channel reads it here.
    #[allow(dead_code)]
    pub network: Network,
    pub args: &'a [u32],
    /// Medium: the payload in the receive buffer. Long: the delivered payload in the
    /// local segment. Short: empty.
    pub payload: &'a [u8],
    pub dest_addr: usize,
}

/// An operation the conduit will finish later, from inside `poll`.
#[derive(Debug, Default)]
pub(crate) struct OpHandle {
    done: AtomicBool,
    /// Parts not yet done, of an operation made of parts ([`OpHandle::awaiting`]).
    left: AtomicUsize,
}

impl OpHandle {
    pub(crate) fn new() -> Arc<OpHandle> {
        Arc::new(OpHandle::default())
    }
    /// An operation of `parts` parts (at least one), complete when each is done
    /// ([`OpHandle::part_done`]).
    pub(crate) fn awaiting(parts: usize) -> OpHandle {
        debug_assert!(parts > 0, "an operation of no parts");
        OpHandle {
            done: AtomicBool::new(false),
            left: AtomicUsize::new(parts),
        }
    }
    /// A handle that no operation uses, ready for [`OpHandle::restart`].
    pub(crate) fn idle() -> OpHandle {
        OpHandle {
            done: AtomicBool::new(true),
            left: AtomicUsize::new(0),
        }
    }
    /// Makes a complete handle await `parts` parts again, as [`OpHandle::awaiting`]
    /// does; false, changing nothing, if it is not complete (an operation still uses
    /// it). Only its owner restarts it.
    pub(crate) fn restart(&self, parts: usize) -> bool {
        // Acquire: the last part's stores, and its completion, happen before the reuse
        // (the completion is the last access of the operation that made it).
        if !self.done.load(Ordering::Acquire) {
            return false;
        }
        self.left.store(parts, Ordering::Relaxed);
        self.done.store(false, Ordering::Relaxed);
        true
    }
    /// Marks the operation complete (called by the conduit).
    pub(crate) fn complete(&self) {
        self.done.store(true, Ordering::Release);
    }
    /// Marks one part of an operation made by [`OpHandle::awaiting`] done; the last
    /// completes it. Returns whether this was the last. Nothing touches the handle
    /// after the completion's store: a waiter may free it at once.
    pub(crate) fn part_done(&self) -> bool {
        // AcqRel: what each part stored (a get's bytes, on any thread) happens before
        // the completion the last part makes.
        let last = self.left.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.complete();
        }
        last
    }
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// The state of an operation when its initiation call returns.
#[derive(Debug, Clone)]
pub(crate) enum Completion {
    /// Complete already: the common case on shared memory.
    Done,
    /// Completes when the handle says so; the upper half polls until then.
    // The smp conduit completes every operation at return; this is for conduits that
    // do not.
    #[allow(dead_code)]
    Pending(Arc<OpHandle>),
}

/// A segment bound to some rank's endpoint (GASNet-EX `gex_Segment_QueryBound`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundSegment {
    /// Address of the segment in its owner's address space.
    pub owner_addr: usize,
    /// Address of the same memory in this process, if it is mapped here (PSHM).
    pub local_addr: Option<usize>,
    /// Length of the segment in bytes.
    pub size: usize,
}

/// Where an address range falls, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressError {
    NoSegment,
    OutOfSegment {
        owner_addr: usize,
        size: usize,
    },
    /// Inside the segment, but the segment is not mapped in this process (another
    /// host): an operation that needs a local address cannot reach it.
    // Only the mpi conduit has segments that are not mapped.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    NotMapped,
}

/// The largest Long payload any conduit carries: a message header holds a payload's
/// length in 32 bits (the smp queue's slot header, the mpi conduit's records), so a
/// segment of 4 GiB or more still takes Longs of less than 4 GiB only.
pub(crate) const LONG_MAX: usize = u32::MAX as usize;

/// The transport used by the `gex` upper half. See the module documentation.
pub(crate) trait Conduit: Send + Sync + Sized + 'static {
    /// A send buffer claimed by `am_reserve`.
    type Outbound;

    /// Joins the job described by the environment (or starts a single-rank job) and
    /// completes the bootstrap barrier: on return, every rank's queues accept messages.
    fn bootstrap() -> Self;
    fn rank(&self) -> Rank;
    fn size(&self) -> Rank;
    /// Job ranks sharing memory with this one (sorted), and this rank's index there.
    fn nbrhd(&self) -> (&[Rank], Rank);
    /// Job ranks on this host (sorted), and this rank's index there.
    fn host(&self) -> (&[Rank], Rank);
    /// Number of neighbourhoods and hosts, and this rank's index in each set.
    fn nbrhd_set(&self) -> (Rank, Rank, Rank, Rank);
    /// The lowest job rank of each host, by host index (hosts are numbered in that
    /// order).
    fn host_leaders(&self) -> &[Rank];

    /// The largest segment `attach_segment` accepts.
    fn max_segment_size(&self) -> usize;
    /// Creates this rank's segment; the upper half adds the collective barrier.
    fn attach_segment(&self, size: usize) -> usize;
    /// Called once after the attach barrier, when every rank's segment exists.
    fn segments_attached(&self);
    fn bound_segment(&self, rank: Rank) -> Option<BoundSegment>;
    /// The local address of `[addr, addr + len)` in `rank`'s segment, when mapped here.
    fn translate(&self, rank: Rank, addr: usize, len: usize) -> Result<usize, AddressError>;
    /// Whether `[addr, addr + len)` lies in `rank`'s segment, mapped here or not.
    fn check_range(&self, rank: Rank, addr: usize, len: usize) -> Result<(), AddressError> {
        self.translate(rank, addr, len).map(|_| ())
    }

    fn am_max_medium(&self) -> usize;
    /// The largest Long payload: the segment's size, within [`LONG_MAX`].
    fn am_max_long(&self) -> usize;
    /// The largest put or get to a segment not mapped here that gex's RMA calls send
    /// as Active Messages to the owner (`rma/remote.rs`) rather than through
    /// [`put`](Self::put) and [`get`](Self::get), where messages are the faster path
    /// (0: none).
    fn am_rma_max(&self) -> usize {
        0
    }
    /// [`am_rma_max`](Self::am_rma_max) of a blocking put or get, whose caller waits
    /// for the one transfer: it may be measured
    /// ([`set_am_rma_blocking_max`](Self::set_am_rma_blocking_max)), while
    /// non-blocking transfers and the runs of VIS operations, which messages gather
    /// and overlap, keep the configured one.
    fn am_rma_blocking_max(&self) -> usize {
        self.am_rma_max()
    }
    /// Whether [`am_rma_blocking_max`](Self::am_rma_blocking_max) is to be measured
    /// when the segments are attached (`rma/probe.rs`): messages and the conduit's
    /// RMA both reach segments not mapped here, and which is faster depends on the
    /// machine.
    fn am_rma_probe(&self) -> bool {
        false
    }
    /// Sets [`am_rma_blocking_max`](Self::am_rma_blocking_max) to what the
    /// measurement chose (the same on every rank); `measured` says what rank 0 saw
    /// (empty elsewhere), for the conduit's report, and is `None` where no measurement
    /// chose it (a test sets it), which the report leaves out.
    fn set_am_rma_blocking_max(&self, _max: usize, _measured: Option<&str>) {}
    /// Active Messages this rank has handled that came over the network (the count
    /// that the mpi conduit reports under `GEX_MPI_STATS`), for tests of the paths.
    #[cfg(feature = "testing")]
    fn am_handled_over_network(&self) -> u64 {
        0
    }
    /// Claims a send buffer for a message to `dest`, or `None` under back-pressure.
    fn am_reserve(&self, dest: Rank, network: Network) -> Option<Self::Outbound>;
    /// The payload area of a claimed buffer (`am_max_medium` bytes, 16-byte aligned).
    fn am_buffer(&self, out: &Self::Outbound) -> *mut u8;
    /// Sends the message in a claimed buffer.
    fn am_commit(&self, out: Self::Outbound, header: &AmHeader<'_>);
    /// Whether a Long payload of `len` bytes to the claimed buffer `out` travels in the
    /// message itself: the upper half then copies it into [`am_buffer`](Self::am_buffer)
    /// as a Medium's, instead of calling [`long_payload`](Self::long_payload), and the
    /// receiver copies it to its destination before the handler runs.
    fn am_long_inline(&self, _out: &Self::Outbound, _len: usize) -> bool {
        false
    }
    /// Delivers a Long payload to `dest_addr` in `dest`'s segment before its header.
    fn long_payload(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError>;
    /// Runs `dispatch` on arrived messages of the given networks; returns how many, plus
    /// the transfers it found complete (a conduit whose polls complete transfers): the
    /// work found, for waiting loops.
    fn poll(&self, requests: bool, dispatch: fn(&Inbound<'_>)) -> usize;

    /// Copies `src` to `dest_addr` in `dest`'s segment, or reports why the range is not
    /// there (checking it is part of the transfer, so it is done once). `src` has been
    /// read when this returns; the transfer has completed too if `blocking`, else it
    /// may be pending.
    fn put(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        blocking: bool,
    ) -> Result<Completion, AddressError>;
    /// The non-blocking [`Conduit::put`] of a caller that keeps `src` until the put
    /// completes: the conduit may read it until then.
    ///
    /// # Safety
    /// `src` must stay valid and unchanged until the returned completion says the put
    /// is complete.
    unsafe fn put_held(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        self.put(dest, dest_addr, src, false)
    }
    /// Copies `len` bytes at `src_addr` in `src`'s segment to `dest`.
    ///
    /// # Safety
    /// `dest` must be valid for `len` bytes of writes until the completion.
    unsafe fn get(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError>;

    /// Stores `value` into signal word `slot` of `dest` (Release): directly when `dest`
    /// shares memory with this rank, or (the mpi conduit between hosts) by a message
    /// that `dest`'s next poll applies. Slots are below `signal_slots()`.
    fn signal(&self, dest: Rank, slot: usize, value: u64);
    /// This rank's signal word `slot` (Acquire).
    fn signal_value(&self, slot: usize) -> u64;
    /// How many signal words each rank has.
    fn signal_slots(&self) -> usize;

    /// Records that this rank finished cleanly; it may now exit.
    fn finalize(&self);
    /// Records that this rank ends the job with status 0 (`gex::exit(0)`), so that the
    /// others leave too; it exits next.
    fn end_job(&self);
    /// Records why this rank is about to die, for the launcher's report.
    fn record_failure(&self, message: &str);
    /// How the job is ending, if it is: the status this rank should leave with (0: a
    /// rank called `gex::exit(0)`; 1: the job is being torn down).
    fn ending(&self) -> Option<i32>;
}
