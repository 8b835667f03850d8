//! The `mpi` conduit: a job started by `mpirun` or `srun`, possibly across hosts, with
//! shared memory between the ranks of each host (GASNet-EX's mpi conduit with PSHM).
//!
//! **Selection.** A binary built with the `mpi` feature uses this conduit when the
//! environment shows an MPI launcher ([`launched`]: `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`,
//! `PMIX_RANK`) and no `UPCXX_RANK` of our own launcher; otherwise the smp conduit.
//!
//! **Bootstrap.** Rank and size come from `MPI_COMM_WORLD`. The host team is
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`, cut into teams of at most
//! `GEX_MPI_HOST_RANKS` consecutive members when that variable is set (1: every rank is
//! its own host), so the network path can be tested on one machine. Neighbourhood and
//! host are the same team (`gex_System_QueryNbrhdInfo`, `QueryHostInfo`); the hosts are
//! numbered by their lowest job rank. Ranks that read different segment sizes
//! (`UPCXX_SEGMENT_SIZE`) end the job at start-up, naming one that differs.
//!
//! **Segments.** Each rank's segment is its part of one `MPI_Win_allocate_shared` window
//! over its host team (the part is a page larger and the segment starts at its first
//! page boundary, as segments do on the smp conduit; the segment size is rounded up to
//! whole pages likewise); `MPI_Win_shared_query` gives the local address of every host
//! member's part, so [`Conduit::translate`] answers for same-host ranks only, and puts,
//! gets and Long payloads to them are `memcpy`s. For the other ranks a second window,
//! `MPI_Win_create` over the same memory on `MPI_COMM_WORLD`, is locked once
//! (`MPI_Win_lock_all`, MPI-3 passive target, MPI 4.1 §12.5.3). A blocking put is an
//! `MPI_Put` followed by `MPI_Win_flush`, complete at return; a non-blocking put is an
//! `MPI_Rput` from a copy of its source (from the source, waited for, beyond 64 KiB;
//! from the source, not waited for, when the caller keeps it until completion),
//! and each get an `MPI_Rget`, whose requests
//! every poll tests with the sends in flight (`rma`; a put's poll then flushes its
//! target), so non-blocking transfers return at once and complete in a later poll.
//! The upper half
//! sends a put or get of at most `GEX_MPI_AM_RMA_MAX` bytes to such a rank as Active
//! Messages to the owner instead ([`Conduit::am_rma_max`], `gex/rma/remote.rs`), where
//! a round trip of messages is faster than an `MPI_Put` and its flush (see `rma`), and
//! where messages gather the transfers in flight. For a blocking put or get, which is
//! faster depends on the machine and its MPI, so with the variable unset rank 0
//! measures both paths when the segments are attached and chooses that threshold, up
//! to [`AM_RMA_MAX`] ([`Conduit::am_rma_blocking_max`], `gex/rma/probe.rs`;
//! `GEX_MPI_STATS=1` reports it).
//! The collectives' transfers always take the window, and so does a Long payload too
//! large for a message (a smaller one travels in its message, below).
//!
//! **RMA between hosts needs the target's progress** where the window is served by Open
//! MPI's `osc pt2pt` (hosts joined by TCP only, as under `scripts/multihost.sh`; see
//! `rma`): the target applies a put, and answers a get or a flush, only when it enters
//! MPI, which it does in `poll`. A rank spinning on its own memory for a peer's put
//! must therefore poll (`gex::poll`, or any call that waits: every wait polls), as
//! GASNet-EX asks of its clients ("_Wait: Polls until success"; progress is made only
//! inside library calls); otherwise a blocking put's origin waits in `MPI_Win_flush`,
//! and a non-blocking put's or a get's in its polls, for as long as the target spins;
//! and a transfer through the window may wait for the target inside the call: `osc
//! pt2pt` takes the target's lock of `MPI_Win_lock_all` at the first operation to it,
//! and starts a put too large for its eager fragments only once the target has
//! answered that lock (`MPI_MODE_NOCHECK` does not spare that wait).
//! With `osc rdma` (shared memory or an RDMA network, and `GEX_MPI_HOST_RANKS` on one
//! machine) the target's NIC or memory serves the operation and no progress of the
//! target is needed, but a client may not count on that.
//!
//! **Within a host**, Active Messages and the barrier's signal words use shared memory,
//! as under the smp conduit (`host`): at bootstrap, each member of the host team
//! allocates its part of one more `MPI_Win_allocate_shared` window, holding the smp
//! conduit's per-rank control block (its signal words) and its Request and Reply
//! queues, laid out as in the smp job region; the queues are the smp conduit's bounded
//! MPSC queues of fixed slots, driven by the same code (`smp::mailbox`). An AM to a
//! rank of this host claims a slot in its queue (a full queue is back-pressure), and
//! [`Conduit::signal`] stores into its signal word (for a rank of another host it
//! sends a control message, below). A Long
//! payload to a rank of this host is a `memcpy` into the mapped segment. With every
//! rank on one host, `poll` makes no MPI call.
//!
//! **Between hosts**, Active Messages travel over MPI point-to-point. A message is one
//! buffer of at most [`MSG_SIZE`] bytes holding one or more records, each a header
//! (`am::wire`: a fixed part, then the arguments) and a Medium payload, or a Long
//! payload that fits (`Conduit::am_long_inline`; the receiver copies it to its
//! destination before the handler runs: a round trip of an 8-byte Long took 0.5-1.1 µs
//! this way against 3.0 µs with the payload put by RMA first), at 16-byte
//! boundaries (a payload of at most 256 bytes right after the arguments, even in a
//! message of one record, so that it does not carry the space a larger one's
//! arguments could take). A message holding only a Short AM with at most one argument is sent
//! compact instead, in 8 bytes (handler, argument count, credits, argument), told
//! apart by its length: with Open MPI over shared memory a message of at most 8 bytes
//! travels in one cache line, and a round trip of longer ones took up to 15% longer
//! (`MPI_Send`/`MPI_Recv` on 2 cores: 790 ns at 8 bytes, 910 ns at 12 to 32).
//! The Request and Reply networks are two communicators (duplicates of
//! `MPI_COMM_WORLD`), so a rank that only drains Replies never matches a Request, and
//! an arriving message is matched against its own network's receives only: on one
//! communicator with a tag each, Open MPI's matching of an arrival walked past the
//! other network's posted receives (about 800 instructions against 500; a round trip
//! between hosts took 15% longer). Each network has [`RECV_DEPTH`] pre-posted
//! persistent receives from `MPI_ANY_SOURCE` (made once by `MPI_Recv_init`, restarted
//! by `MPI_Start`, which matches as a new `MPI_Irecv` would without making a request),
//! kept in posting order (MPI matches a message with the oldest posted receive of its
//! communicator and tag, so this is arrival order). Sends are `MPI_Isend`s, tested once
//! as they start: a small message leaves eagerly and its buffer is free at once; a send
//! not yet complete is tested by every poll until it is.
//!
//! **Aggregation.** `am_commit` sends a message on its own when nothing to that peer on
//! that network is in flight or being filled (a lone message, a round trip, pays no
//! copy and no wait). Otherwise the message becomes a record of the message being
//! filled for that peer and network (one per pair at most, started by the message that
//! found a send in flight): appended when it fits, else the filled one is sent and the
//! new one starts the next. Every poll first sends every message being filled, so a
//! record never waits for a later one, only for the sender's next poll; a stream sent
//! without polling between its messages leaves as full buffers, one MPI message (one
//! matching, one progress step) per buffer instead of per AM. MPI delivers the
//! messages of one pair and tag in the order sent, and the records of one message are
//! handled in their order, so each network's AMs from one sender run in the order sent.
//! The receiver keeps a cursor per network on the message whose records it is
//! handling; a handler that polls continues from the cursor, and a receive is posted
//! again (by the next poll) only when every record of its buffer has been taken and no
//! handler of one still runs.
//!
//! The requests a poll must look at are one array, tested by one `MPI_Testsome` per
//! poll: with Open MPI each test call that finds nothing done runs a pass of the
//! progress engine and returns without looking at what the pass delivered, so one call
//! instead of one per queue head makes an idle poll cheap, and a second call when the
//! first found nothing reports in the same poll a message that the first one's pass
//! delivered (it shortens a round trip more than it costs an idle poll). The call
//! looks at every request it is given, so the array holds only those whose completion
//! can be used now: the two oldest pending receives of each network and the oldest
//! control receive (the receives of one tag all match any source, so MPI matches them
//! in posting order, and records are handled in that order anyway), and the sends in
//! flight; it is gathered again only when a request starts or completes. The call
//! marks completed receives ready in their slots; handling then takes the records of
//! the oldest slot of each network (Replies, then Requests when wanted, in the same
//! hold of the lock as the test unless a handler ran) while it is ready, runs each
//! handler without the lock held, and leaves the
//! receive to be posted again by the next poll, before its test: off the path from the
//! arrival to the handler and from the handler back to the caller (in a round trip the
//! posting overlaps the next message's flight; the other posted receives take the next
//! messages meanwhile). A Request that completes during a Reply-only poll stays ready,
//! in order, until a poll that wants Requests.
//!
//! **Flow control** is by credits, which count MPI messages (buffers), not AMs: a rank
//! may have at most [`CREDITS`] messages per peer and network that the peer has not yet
//! handled, the message being filled included; `am_reserve` takes a credit for the
//! buffer it claims, and a record appended to the message being filled gives it back.
//! The receiver returns credits with every Reply message it sends to that peer (in the
//! first record's header, for both networks), and otherwise in batches of
//! `CREDITS / 2` messages in a control message; the sender applies them when
//! `MPI_Testsome` completes their receive. Only Replies carry credits: a rank always drains its
//! Replies, while a Request may wait unmatched behind Requests that the rank cannot
//! handle yet (it is sending a Reply under back-pressure, polling Replies only), and
//! the credits it carried with it. In a stream of round trips the Replies carry every
//! credit of the Requests. An exhausted peer makes `am_reserve` report
//! back-pressure, as a full smp queue does, and the upper half polls (which sends the
//! message being filled). Per peer, a rank keeps two counters per network, the message
//! being filled and a count of sends in flight per network, a segment entry and its
//! host index; per member of its host, the addresses of its control block and queues.
//! Send buffers come from a free list, at most `CREDITS` per peer and network at a
//! time (in flight, being filled or claimed).
//!
//! `poll` drains this rank's Reply queue and then the MPI Replies, and only then, when
//! Requests are wanted too, the MPI Requests and its Request queue. The largest Medium
//! payload is the smaller of a queue slot's and an MPI buffer's, so it does not depend
//! on the destination.
//!
//! **`GEX_MPI_STATS=1`** makes each rank print at finalize how many AMs it handled from
//! its host queues and how many over MPI, in how many MPI messages (tests use it to
//! check which path carried the AMs, and that streams were aggregated), and at attach
//! the threshold of blocking transfers between hosts, if it was measured (rank 0 with
//! its figures).
//!
//! **Threads.** Every MPI call is made under one lock, and no thread is started:
//! progress happens in `poll`, which is called from library calls. MPI is initialized
//! with `MPI_THREAD_SERIALIZED`, so any thread may communicate; **`GEX_MPI_THREAD=single`**
//! asks for `MPI_THREAD_SINGLE` instead, for a program that communicates from the thread
//! that started it only (UPC++'s `seq` thread mode, GASNet's SEQ). It is faster: Open
//! MPI takes its own locks around matching and sending at every level above
//! `MPI_THREAD_SINGLE`, which costs a raw `MPI_Send`/`MPI_Recv` ping-pong about a fifth
//! of its time; and the conduit's own lock is then a flag, taken without a locked
//! instruction (`serial.rs`). An MPI call from another thread then ends the job with an
//! error that names the variable ([`MpiConduit::serial`]), instead of breaking MPI's
//! contract.
//!
//! **Across hosts** [`Conduit::translate`] reports [`AddressError::NotMapped`] (after
//! checking the range, which [`Conduit::check_range`] does alone), and every caller
//! falls back: remote atomics become Active Messages to the owner, collectives use
//! messages unless the whole team is on one host, and the upcxx runtime reaches those
//! segments through gex. The barrier's rounds to ranks of other hosts stay signals:
//! [`Conduit::signal`] sends the value in a control message. With hosts of several
//! ranks the barrier is hierarchical (`barrier`), so only each host's lowest rank
//! ([`Conduit::host_leaders`]) sends them.
//!
//! **Control messages** travel on a third communicator, each a few words into one of
//! [`CONTROL_DEPTH`] pre-posted receives (the oldest tested by each poll, posted again
//! by the next): credit returns, and signals to ranks of other hosts, which the
//! receiver's poll stores into its own signal word. A barrier round between hosts is
//! then one small message (8 bytes while the barrier's count fits 32 bits), matched
//! and applied without an Active Message's handler,
//! flow control or aggregation, and the barrier reads its words as within a host
//! (messages of one pair and tag arrive in the order sent, so a word takes a sender's
//! values in order). Signals need no credits: the barrier bounds how many are in
//! flight.
//!
//! **A dying rank** aborts the job (`MPI_Abort`) after printing why (see `abort`).
//!
//! **`gex::exit(0)`** (`gasnet_exit`) in one rank ends the job: the rank marks every
//! member of its host as leaving (the state in their control blocks) and sends a
//! control message to the leader of every other host, whose poll marks its members; each
//! rank notices at its next wait for communication and leaves the same way. Leaving
//! finalizes, and [`Conduit::finalize`] waits for its sends and ends with collective
//! calls (a barrier, `MPI_Win_free`, `MPI_Finalize`), which a rank that never waits
//! again (it computes) would hold up: a rank leaving this way waits for the others at
//! most [`crate::job::EXIT_GRACE`], then ends the job with `MPI_Abort` and status 0, as
//! the smp launcher stops such a rank (GASNet's conduit likewise aborts an exit that
//! does not end in time; `mpirun` then exits 0, while `srun` counts the killed ranks as
//! failed). See `finalize`.
//!
//! The files: `boot` (the bootstrap: its MPI calls and checks, and the error path of
//! every call), `finalize` (the end of a rank's MPI), `abort` (a dying rank's end: its
//! message and `MPI_Abort`), `host` (the shared memory of the host: queues and signal
//! words), `am` (the AM transport between hosts: wire format, aggregation, receive
//! rings, each poll's test, control messages for credits and signals), `rma` (puts and
//! gets to another host's segment); this file holds the conduit's state, the choice of
//! path and the segments.
//!
//! All MPI calls go through rsmpi's raw bindings (`mpi::ffi`): its safe API has no
//! shared-memory windows or passive-target RMA, and one style of call keeps the locking
//! rule visible.
//!
//! This file is about 900 lines, a quarter of them the design above, which
//! describes the conduit as one piece.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use ::mpi::ffi;
use parking_lot::Mutex;

mod abort;
mod am;
mod boot;
mod finalize;
mod host;
mod rma;
mod serial;

pub(crate) use abort::abort_job;
#[cfg(feature = "testing")]
pub(crate) use abort::GEX_MPI_FAILURE_DIR;
use am::{net_index, Buf, NetOutbound, State, HEADER};
use boot::{allgather_u64, check, error_string, fatal};
use host::Host;
use serial::{Serial, SerialGuard};

use crate::conduit::smp::{self, queue::Queue, queue::SlotBounds, queue::SLOT_PAYLOAD};
use crate::conduit::{
    AddressError, AmHeader, BoundSegment, Completion, Conduit, Inbound, Network, Rank,
};

/// Bytes of one message buffer (records of a header and a Medium payload). Under 4 KiB:
/// Open MPI's shared-memory transport sends a message eagerly only up to its
/// `btl_vader_eager_limit` (4096 bytes) less its own headers, and a larger one by
/// rendezvous, a round trip more. A put of 3,936 bytes in one message (3,984 bytes)
/// took about 1.0 µs, one of 3,968 (4,016 bytes) 3.3-4.8 µs.
pub(crate) const MSG_SIZE: usize = 3968;
/// Pre-posted receives per network.
const RECV_DEPTH: usize = 8;
/// Messages per peer and network that may be unhandled by the peer.
const CREDITS: u32 = 16;
/// Pre-posted receives of control messages (credit returns and signals).
const CONTROL_DEPTH: usize = 4;
/// Largest number of Active Messages handled per network in one poll.
const POLL_BATCH: usize = 32;

/// The conduit's settings (see the module documentation), named where the launcher
/// passes them on to the ranks.
pub(crate) use crate::job::mpirun::{
    GEX_MPI_AM_RMA_MAX, GEX_MPI_HOST_RANKS, GEX_MPI_STATS, GEX_MPI_THREAD,
};

/// The default of `GEX_MPI_AM_RMA_MAX`, and the largest size measured when it is unset:
/// the transfers that messages may carry faster than RMA (see `rma`), with room to
/// spare below the size at which Open MPI's shared-memory transport stops sending a
/// message eagerly.
const AM_RMA_MAX: usize = 3072;

thread_local! {
    /// Whether this thread initialized MPI: under `GEX_MPI_THREAD=single` only it may
    /// make MPI calls.
    static INIT_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this process was started by an MPI launcher (and not by ours).
pub(crate) fn launched() -> bool {
    if std::env::var_os(crate::env::UPCXX_RANK).is_some() {
        return false;
    }
    crate::job::mpirun::MPI_LAUNCHER_VARS
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Where one rank's segment lives.
#[derive(Debug, Clone, Copy)]
struct PeerSegment {
    owner_base: usize,
    /// Set when the segment is mapped here (same host).
    local_base: Option<usize>,
    size: usize,
}

/// A claimed send buffer: a slot in the queue of a rank of this host, or an MPI buffer.
pub(crate) enum Outbound {
    Host(smp::Outbound),
    Net(NetOutbound),
}

/// The windows over the segments.
struct Windows {
    shared: ffi::MPI_Win,
    world: ffi::MPI_Win,
}

/// The MPI conduit. See the module documentation.
pub(crate) struct MpiConduit {
    rank: Rank,
    size: Rank,
    host_comm: ffi::MPI_Comm,
    host_ranks: Vec<Rank>,
    host_index: Rank,
    /// The lowest job rank of each host, by host index.
    host_leaders: Vec<Rank>,
    my_host: Rank,
    /// Whether some rank is on another host (else `poll` makes no MPI call).
    remote: bool,
    max_segment: usize,
    /// The largest put or get to another host's segment left to messages
    /// (`GEX_MPI_AM_RMA_MAX` or [`AM_RMA_MAX`]; see `rma`).
    am_rma_max: usize,
    /// That of a blocking put or get: `am_rma_max`, or as measured at attach when the
    /// variable is unset and there are hosts to measure between.
    am_rma_blocking_max: AtomicUsize,
    /// Whether `am_rma_blocking_max` is to be measured (`GEX_MPI_AM_RMA_MAX` unset on
    /// every rank, several hosts).
    am_rma_probe: bool,
    /// The shared memory of this host: queues and signal words.
    host: Host,
    /// Whether `host` is still mapped (until `finalize` frees its window).
    host_mapped: AtomicBool,
    /// The AM transport's state; holding its lock is what allows an MPI call. A spin
    /// lock, released with a plain store, and made `single` (taken without a locked
    /// instruction, see `serial`) when MPI was initialized with `MPI_THREAD_SINGLE`
    /// (`GEX_MPI_THREAD=single`): every poll and every AM sent takes it, and a locked
    /// instruction on x86 also waits for the stores before it, such as a message just
    /// written into a peer's shared-memory mailbox by MPI, to leave the store buffer. A
    /// waiter yields the processor between its tries, as the holder may be waiting in
    /// MPI (`MPI_Win_flush` waits for the target's progress).
    state: Serial<State>,
    /// Taken only with `state` held.
    windows: Mutex<Option<Windows>>,
    segments: OnceLock<Box<[PeerSegment]>>,
    /// This rank's segment, `(base, size)`, once attached.
    my_segment: OnceLock<(usize, usize)>,
}

// SAFETY: the MPI handles are plain identifiers; every call that uses them is made under
// `state` or `windows` (MPI_THREAD_SERIALIZED), or during the single-threaded bootstrap.
unsafe impl Send for MpiConduit {}
// SAFETY: as for `Send`.
unsafe impl Sync for MpiConduit {}

impl MpiConduit {
    /// Takes `state`, which allows MPI calls. Under `GEX_MPI_THREAD=single` a thread
    /// other than the one that initialized MPI ends the job here.
    #[inline]
    fn serial(&self) -> SerialGuard<'_, State> {
        if self.state.single() && !INIT_THREAD.with(|t| t.get()) {
            wrong_thread();
        }
        // SAFETY: with the lock `single` (`MPI_THREAD_SINGLE`) only the thread that
        // initialized MPI gets here.
        unsafe { self.state.lock() }
    }

    /// [`serial`](Self::serial) for `call`, which reaches MPI: made after this rank
    /// finalized (another thread communicating while this one finalizes, which UPC++
    /// §2 ¶11 and GASNet-EX leave undefined), it ends the process with a message
    /// naming the call instead of calling MPI after `MPI_Finalize`.
    #[inline]
    fn serial_live(&self, call: &str) -> SerialGuard<'_, State> {
        let st = self.serial();
        if st.finalized {
            drop(st);
            after_finalize(call);
        }
        st
    }

    /// `dest`'s queue of `network` if `dest` is on this host: a slot of it is claimed,
    /// filled and published as under the smp conduit (`select` sends there without
    /// going through this conduit's [`Outbound`]).
    #[inline]
    pub(super) fn host_queue(&self, dest: Rank, network: Network) -> Option<Queue> {
        self.host.queue(dest, network)
    }

    /// Claims a send buffer for `dest` on another host, if its credits allow: the
    /// network half of [`Conduit::am_reserve`], for `select`, which has looked for a
    /// host queue already.
    #[inline]
    pub(super) fn net_reserve(&self, dest: Rank, network: Network) -> Option<NetOutbound> {
        let mut st = self.serial_live("am_reserve");
        let in_flight = &mut st.in_flight[dest as usize][net_index(network)];
        if *in_flight >= CREDITS {
            return None;
        }
        *in_flight += 1;
        let buf = st.free.pop().unwrap_or_else(Buf::new);
        Some(NetOutbound { buf, dest, network })
    }

    fn world() -> ffi::MPI_Comm {
        // SAFETY: reading an MPI constant.
        unsafe { ffi::RSMPI_COMM_WORLD }
    }

    /// What a host queue's slot header is checked against (`queue::decode`).
    fn slot_bounds(&self) -> SlotBounds {
        SlotBounds {
            ranks: self.size,
            segment: self.my_segment.get().copied().unwrap_or((0, 0)),
        }
    }

    #[inline]
    fn peer_segment(&self, rank: Rank) -> Result<&PeerSegment, AddressError> {
        self.segments
            .get()
            .and_then(|s| s.get(rank as usize))
            .filter(|s| s.size > 0)
            .ok_or(AddressError::NoSegment)
    }

    /// `rank`'s segment and the displacement of `[addr, addr + len)` in it.
    #[inline]
    fn locate(
        &self,
        rank: Rank,
        addr: usize,
        len: usize,
    ) -> Result<(&PeerSegment, usize), AddressError> {
        let s = self.peer_segment(rank)?;
        let offset = addr.wrapping_sub(s.owner_base);
        if offset > s.size || len > s.size - offset {
            return Err(AddressError::OutOfSegment {
                owner_addr: s.owner_base,
                size: s.size,
            });
        }
        Ok((s, offset))
    }

    /// The displacement of `[addr, addr + len)` in `rank`'s segment.
    #[inline]
    fn displacement(&self, rank: Rank, addr: usize, len: usize) -> Result<usize, AddressError> {
        self.locate(rank, addr, len).map(|(_, offset)| offset)
    }

    /// A put: a copy into dest's segment where it is mapped here, else `remote` (the
    /// segment is on another host; `rma`).
    #[inline(always)]
    fn put_or(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        remote: impl FnOnce() -> Result<Completion, AddressError>,
    ) -> Result<Completion, AddressError> {
        match self.translate(dest, dest_addr, src.len()) {
            Ok(local) => {
                // SAFETY: inside the shared mapping of dest's segment (translate).
                unsafe { std::ptr::copy(src.as_ptr(), local as *mut u8, src.len()) };
                Ok(Completion::Done)
            }
            Err(AddressError::NotMapped) => remote(),
            Err(e) => Err(e),
        }
    }
}

impl Conduit for MpiConduit {
    type Outbound = Outbound;

    fn bootstrap() -> MpiConduit {
        boot::bootstrap()
    }

    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> Rank {
        self.size
    }
    fn nbrhd(&self) -> (&[Rank], Rank) {
        (&self.host_ranks, self.host_index)
    }
    fn host(&self) -> (&[Rank], Rank) {
        (&self.host_ranks, self.host_index)
    }
    fn nbrhd_set(&self) -> (Rank, Rank, Rank, Rank) {
        let hosts = self.host_leaders.len() as Rank;
        (hosts, self.my_host, hosts, self.my_host)
    }
    fn host_leaders(&self) -> &[Rank] {
        &self.host_leaders
    }

    fn max_segment_size(&self) -> usize {
        self.max_segment
    }

    fn attach_segment(&self, size: usize) -> usize {
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: reading an MPI constant.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        let _serial = self.serial();
        // One page more than asked: Open MPI's part of the window need not start on a
        // page, and a segment does (the same rounding on every rank finds each peer's
        // segment in its part, see `segments_attached`).
        // SAFETY: collective over the host team (Segment::attach is collective); valid
        // out-pointers.
        unsafe {
            check(
                ffi::MPI_Win_allocate_shared(
                    (size + crate::PAGE_SIZE) as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    self.host_comm,
                    (&mut base as *mut *mut c_void).cast(),
                    &mut win,
                ),
                "MPI_Win_allocate_shared",
            );
        }
        *self.windows.lock() = Some(Windows {
            shared: win,
            // SAFETY: reading an MPI constant.
            world: unsafe { ffi::RSMPI_WIN_NULL },
        });
        let base = (base as usize).next_multiple_of(crate::PAGE_SIZE);
        if self.my_segment.set((base, size)).is_err() {
            fatal("a second segment attached");
        }
        base
    }

    fn segments_attached(&self) {
        let (base, size) = *self.my_segment.get().expect("attach_segment ran");
        let _serial = self.serial();
        let world = Self::world();
        let bases = allgather_u64(world, base as u64);
        let sizes = allgather_u64(world, size as u64);
        let mut windows = self.windows.lock();
        let w = windows.as_mut().expect("attach_segment ran");
        let mut table: Vec<PeerSegment> = (0..self.size as usize)
            .map(|r| PeerSegment {
                owner_base: bases[r] as usize,
                local_base: None,
                size: sizes[r] as usize,
            })
            .collect();
        for (i, &r) in self.host_ranks.iter().enumerate() {
            let (mut len, mut unit) = (0 as ffi::MPI_Aint, 0 as c_int);
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: `i` is a rank of the shared window's communicator.
            unsafe {
                check(
                    ffi::MPI_Win_shared_query(
                        w.shared,
                        i as c_int,
                        &mut len,
                        &mut unit,
                        (&mut p as *mut *mut c_void).cast(),
                    ),
                    "MPI_Win_shared_query",
                );
            }
            table[r as usize].local_base = Some((p as usize).next_multiple_of(crate::PAGE_SIZE));
        }
        // The world window serves the ranks of other hosts only; with one host there
        // are none (and Open MPI has no window of this kind for a job of one rank).
        // `hosts` is the same on every rank, so all or none take part.
        if self.host_leaders.len() > 1 {
            // SAFETY: collective over the world; the memory is this rank's segment,
            // alive until finalize frees the windows.
            let rc = unsafe {
                ffi::MPI_Win_create(
                    base as *mut c_void,
                    size as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    world,
                    &mut w.world,
                )
            };
            if rc != 0 {
                // Open MPI 4.1 tries its one-sided components in turn, and one that
                // cannot serve the job may fail the call rather than decline (`osc ucx`
                // where UCX is not the transport, as when `osc rdma` declines for lack
                // of a single-copy mechanism between ranks of one machine).
                fatal(&format!(
                    "rank {}: MPI_Win_create failed ({}): cannot create the window over \
                     the segments through which RMA reaches other hosts; no one-sided \
                     component of the MPI library took it (with Open MPI, name ones that \
                     serve this job, e.g. OMPI_MCA_osc=sm,pt2pt)",
                    self.rank,
                    error_string(rc)
                ));
            }
            // SAFETY: the window was just created; collective over the world.
            unsafe {
                check(
                    ffi::MPI_Win_set_errhandler(w.world, ffi::RSMPI_ERRORS_RETURN),
                    "MPI_Win_set_errhandler",
                );
                check(ffi::MPI_Win_lock_all(0, w.world), "MPI_Win_lock_all");
            }
        }
        let _ = self.segments.set(table.into_boxed_slice());
    }

    fn bound_segment(&self, rank: Rank) -> Option<BoundSegment> {
        let s = self.peer_segment(rank).ok()?;
        Some(BoundSegment {
            owner_addr: s.owner_base,
            local_addr: s.local_base,
            size: s.size,
        })
    }

    #[inline]
    fn translate(&self, rank: Rank, addr: usize, len: usize) -> Result<usize, AddressError> {
        let (s, offset) = self.locate(rank, addr, len)?;
        match s.local_base {
            Some(local) => Ok(local + offset),
            None => Err(AddressError::NotMapped),
        }
    }

    #[inline]
    fn check_range(&self, rank: Rank, addr: usize, len: usize) -> Result<(), AddressError> {
        self.displacement(rank, addr, len).map(|_| ())
    }

    #[inline]
    fn am_max_medium(&self) -> usize {
        SLOT_PAYLOAD.min(MSG_SIZE - HEADER)
    }

    fn am_max_long(&self) -> usize {
        self.max_segment.min(crate::conduit::LONG_MAX)
    }

    #[inline]
    fn am_rma_max(&self) -> usize {
        self.am_rma_max
    }

    #[inline]
    fn am_rma_blocking_max(&self) -> usize {
        self.am_rma_blocking_max.load(Ordering::Relaxed)
    }

    fn am_rma_probe(&self) -> bool {
        self.am_rma_probe
    }

    fn set_am_rma_blocking_max(&self, max: usize, measured: Option<&str>) {
        self.am_rma_blocking_max.store(max, Ordering::Relaxed);
        if self.host.handled().is_some() {
            if let Some(line) = blocking_max_report(self.rank, max, measured) {
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            }
        }
    }

    #[cfg(feature = "testing")]
    fn am_handled_over_network(&self) -> u64 {
        self.serial().net_handled
    }

    #[inline]
    fn am_long_inline(&self, out: &Outbound, len: usize) -> bool {
        matches!(out, Outbound::Net(_)) && am::long_inline(len)
    }

    #[inline]
    fn am_reserve(&self, dest: Rank, network: Network) -> Option<Outbound> {
        match self.host.queue(dest, network) {
            Some(queue) => smp::Outbound::reserve(queue).map(Outbound::Host),
            None => self.net_reserve(dest, network).map(Outbound::Net),
        }
    }

    #[inline]
    fn am_buffer(&self, out: &Outbound) -> *mut u8 {
        match out {
            Outbound::Host(slot) => slot.buffer(),
            Outbound::Net(out) => out.buf.payload(),
        }
    }

    #[inline]
    fn am_commit(&self, out: Outbound, header: &AmHeader<'_>) {
        match out {
            Outbound::Host(slot) => slot.commit(self.rank, header),
            Outbound::Net(out) => self.send(out, header),
        }
    }

    fn long_payload(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        // Blocking: the header that follows must find the payload in place.
        self.put(dest, dest_addr, src, true)
    }

    fn poll(&self, requests: bool, dispatch: fn(&Inbound<'_>)) -> usize {
        let bounds = || self.slot_bounds();
        let mut n = self.host.drain(Network::Reply, self.rank, bounds, dispatch);
        if self.remote {
            // The one pass of MPI's progress engine of this poll, then the Replies and
            // Requests that arrived over MPI.
            n += self.drain(requests, dispatch);
        }
        if requests {
            n += self
                .host
                .drain(Network::Request, self.rank, bounds, dispatch);
        }
        n
    }

    #[inline]
    fn put(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        blocking: bool,
    ) -> Result<Completion, AddressError> {
        self.put_or(dest, dest_addr, src, || {
            if blocking {
                self.put_remote(dest, dest_addr, src)
                    .map(|()| Completion::Done)
            } else {
                // SAFETY: not `held`: the source is read before this returns.
                unsafe { self.put_remote_nb(dest, dest_addr, src, false) }
            }
        })
    }

    #[inline]
    unsafe fn put_held(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        // SAFETY: the caller keeps `src` until the put completes.
        self.put_or(dest, dest_addr, src, || unsafe {
            self.put_remote_nb(dest, dest_addr, src, true)
        })
    }

    #[inline]
    unsafe fn get(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError> {
        match self.translate(src, src_addr, len) {
            Ok(local) => {
                // SAFETY: inside the mapping (translate); the caller guarantees `dest`.
                unsafe { std::ptr::copy(local as *const u8, dest, len) };
            }
            Err(AddressError::NotMapped) => {
                // SAFETY: the caller's guarantee for `dest`, until the completion.
                return unsafe { self.get_remote(dest, src, src_addr, len) };
            }
            Err(e) => return Err(e),
        }
        Ok(Completion::Done)
    }

    #[inline]
    fn signal(&self, dest: Rank, slot: usize, value: u64) {
        if !self.host.signal(dest, slot, value) {
            self.signal_remote(dest, slot, value);
        }
    }

    #[inline]
    fn signal_value(&self, slot: usize) -> u64 {
        self.host.signal_value(slot)
    }

    fn signal_slots(&self) -> usize {
        self.host.signal_slots()
    }

    fn finalize(&self) {
        self.finalize_by(None);
    }

    fn end_job(&self) {
        // Tell the others, unless one told this rank: they leave at their next wait
        // and finalize too, which this rank's finalize waits for.
        if !self.host.exiting() {
            self.host.mark_exiting();
            self.send_exit();
        }
        self.finalize_by(Some(Instant::now() + crate::job::EXIT_GRACE));
    }

    fn record_failure(&self, message: &str) {
        abort::record_failure(message);
    }

    fn ending(&self) -> Option<i32> {
        // A dying rank ends the job with `MPI_Abort`; only `gex::exit(0)` is noticed
        // here. After finalize the host window is gone (and the rank leaves next).
        (self.host_mapped.load(Ordering::Acquire) && self.host.exiting()).then_some(0)
    }
}

/// The `GEX_MPI_STATS` line of rank `rank` on the threshold of blocking transfers set
/// to `max` (see [`Conduit::set_am_rma_blocking_max`]): rank 0 says what it measured,
/// the others what they were told (`measured` empty); none where nothing was measured
/// (`measured` is `None`: a test set it).
fn blocking_max_report(rank: Rank, max: usize, measured: Option<&str>) -> Option<String> {
    let seen = match measured? {
        "" => String::new(),
        figures => format!(" ({figures})"),
    };
    Some(format!(
        "gex: rank {rank}: {GEX_MPI_AM_RMA_MAX} of blocking transfers measured: {max}{seen}\n"
    ))
}

/// Ends the process: `call` reached the conduit after this rank finalized.
#[cold]
#[inline(never)]
fn after_finalize(call: &str) -> ! {
    fatal(&format!(
        "{call} after this rank finalized: another thread was still communicating while \
         Client::finalize (or gex::exit) ran; communication must end before finalize"
    ))
}

/// Ends the job: an MPI call from a thread other than the one that initialized MPI with
/// `MPI_THREAD_SINGLE`.
#[cold]
#[inline(never)]
fn wrong_thread() -> ! {
    fatal(&format!(
        "{GEX_MPI_THREAD}=single (MPI_THREAD_SINGLE) allows communication from the thread \
         that initialized gex only, and another thread communicated; unset \
         {GEX_MPI_THREAD} (or set it to serialized) to communicate from several threads"
    ))
}

#[cfg(test)]
mod tests {
    use super::blocking_max_report;

    /// A measured threshold is reported (rank 0 with its figures, the others without);
    /// one set by hand is not, since nothing was measured.
    #[test]
    fn only_a_measured_blocking_threshold_is_reported() {
        assert_eq!(
            blocking_max_report(0, 256, Some("8 B: 1.2 us")).as_deref(),
            Some("gex: rank 0: GEX_MPI_AM_RMA_MAX of blocking transfers measured: 256 (8 B: 1.2 us)\n")
        );
        assert_eq!(
            blocking_max_report(1, 256, Some("")).as_deref(),
            Some("gex: rank 1: GEX_MPI_AM_RMA_MAX of blocking transfers measured: 256\n")
        );
        assert_eq!(blocking_max_report(1, 0, None), None);
    }
}
