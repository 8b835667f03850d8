//! The shared memory between the ranks of one host: each member's control block (its
//! signal words) and its Request and Reply queues, in one `MPI_Win_allocate_shared`
//! window over the host team.
//!
//! Each member's part of the window is laid out as a rank area of the smp conduit's job
//! region up to its segment ([`JobLayout::SEGMENT_OFFSET`] bytes: a [`RankControl`],
//! then the two queues), and the queues are driven by the smp conduit's own code
//! ([`mailbox`]): a message between two ranks of one host is a slot claimed in the
//! target's queue, filled in place and published, under either conduit. The barrier's
//! signal words ([`Conduit::signal`](crate::conduit::Conduit::signal)) are the control
//! blocks' `signals`.
//!
//! The window is separate from the segments' (which are attached later, and may never
//! be), and lives until `finalize`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use ::mpi::ffi;

use super::boot::{check, error_string, fatal};
use crate::conduit::smp::layout::{JobLayout, RankControl, RankState, CONTROL_SIZE, PAGE, SIGNALS};
use crate::conduit::smp::mailbox::{self, Inbox};
use crate::conduit::smp::queue::{Queue, SlotBounds};
use crate::conduit::{Inbound, Network, Rank};

/// Bytes of each member's area: a control block and two queues.
const AREA: usize = JobLayout::SEGMENT_OFFSET;
/// Bytes of each member's part of the window: its area and room to page-align it (MPI
/// need not align a member's part; Open MPI's start 8 bytes into a page).
const PART: usize = AREA + PAGE;

/// Marks a job rank that is not on this host in [`Host::member`].
const ELSEWHERE: u32 = u32::MAX;

/// This rank's view of its host's shared memory.
pub(super) struct Host {
    /// Per job rank: its index in the host team, or [`ELSEWHERE`].
    member: Box<[u32]>,
    /// Per host member: the start of its area in this process.
    areas: Box<[usize]>,
    /// Per job rank: its Request and Reply queues if it is on this host. Indexed by job
    /// rank, so that claiming a slot costs what it costs under the smp conduit (one
    /// lookup, no translation to a member index first).
    requests: Box<[Option<Queue>]>,
    replies: Box<[Option<Queue>]>,
    my_requests: Inbox,
    my_replies: Inbox,
    my_area: usize,
    /// Messages this rank handled from its queues, counted only under `GEX_MPI_STATS`
    /// (so that the common poll makes no locked read-modify-write).
    handled: Option<AtomicU64>,
}

impl Host {
    /// Allocates this rank's part of the host window (collective over `host_comm`),
    /// maps every member's, and initializes this rank's control block and queues.
    /// Producers may use them once every member has called [`Host::joined`] after a
    /// barrier. Returns the window, which `finalize` frees. With `count`, the messages
    /// handled are counted for [`Host::handled`].
    pub(super) fn allocate(
        host_comm: ffi::MPI_Comm,
        host_ranks: &[Rank],
        host_index: Rank,
        size: Rank,
        count: bool,
    ) -> (Host, ffi::MPI_Win) {
        let rank = host_ranks[host_index as usize];
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: reading an MPI constant.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: collective over the host team (every member calls it from bootstrap);
        // valid out-pointers.
        let rc = unsafe {
            ffi::MPI_Win_allocate_shared(
                PART as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                host_comm,
                (&mut base as *mut *mut c_void).cast(),
                &mut win,
            )
        };
        if rc != 0 {
            fatal(&format!(
                "rank {rank}: MPI_Win_allocate_shared failed ({}): cannot allocate the \
                 AM queues shared within the host ({PART} bytes per rank)",
                error_string(rc)
            ));
        }
        let areas: Box<[usize]> = (0..host_ranks.len())
            .map(|i| {
                let (mut len, mut unit) = (0 as ffi::MPI_Aint, 0 as c_int);
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: `i` is a rank of the window's communicator; valid out-pointers.
                unsafe {
                    check(
                        ffi::MPI_Win_shared_query(
                            win,
                            i as c_int,
                            &mut len,
                            &mut unit,
                            (&mut p as *mut *mut c_void).cast(),
                        ),
                        "MPI_Win_shared_query",
                    );
                }
                // Every process maps the window at a page boundary, so the first page
                // boundary in a member's part is the same memory in all of them.
                let area = (p as usize).next_multiple_of(PAGE);
                if (len as usize) < PART {
                    fatal(&format!(
                        "rank {rank}: MPI_Win_shared_query: host member {i}'s part of the \
                         queue window is {len} bytes, not {PART}"
                    ));
                }
                area
            })
            .collect();
        let mut member = vec![ELSEWHERE; size as usize].into_boxed_slice();
        for (i, &r) in host_ranks.iter().enumerate() {
            member[r as usize] = i as u32;
        }
        let queues = |network| -> Box<[Option<Queue>]> {
            member
                .iter()
                .map(|&m| {
                    let a = *areas.get(m as usize)?;
                    // SAFETY: each area is AREA page-aligned bytes of the window, mapped
                    // until finalize.
                    Some(unsafe { mailbox::queue_in(a as *mut u8, network) })
                })
                .collect()
        };
        let (requests, replies) = (queues(Network::Request), queues(Network::Reply));
        let me = host_index as usize;
        // MPI does not promise zeroed memory; the signal words must start at 0.
        // SAFETY: this rank's own control block, which no other member reads before the
        // barrier that follows.
        unsafe { std::ptr::write_bytes(areas[me] as *mut u8, 0, CONTROL_SIZE) };
        let mine = |queues: &[Option<Queue>]| queues[rank as usize].expect("this rank's queue");
        let (my_requests, my_replies) = (mine(&requests), mine(&replies));
        my_requests.initialize();
        my_replies.initialize();
        let host = Host {
            member,
            my_requests: Inbox::new(my_requests),
            my_replies: Inbox::new(my_replies),
            my_area: areas[me],
            areas,
            requests,
            replies,
            handled: count.then(|| AtomicU64::new(0)),
        };
        host.control(me)
            .state
            .store(RankState::Running as u32, Ordering::Release);
        (host, win)
    }

    /// Called after a barrier that followed every member's [`Host::allocate`]: reads
    /// each member's state with Acquire, which orders the initialization of its queues
    /// before this rank's first message to it. A member may already read `Exited`: a
    /// rank past the same barrier called `gex::exit(0)` ([`Host::mark_exiting`]), which
    /// this rank notices at its first wait.
    pub(super) fn joined(&self) {
        for i in 0..self.areas.len() {
            let state = self.control(i).state.load(Ordering::Acquire);
            if state != RankState::Running as u32 && state != RankState::Exited as u32 {
                fatal(&format!(
                    "host member {i} did not initialize its AM queues before the bootstrap \
                     barrier"
                ));
            }
        }
    }

    fn control(&self, member: usize) -> &RankControl {
        // SAFETY: each area starts with a control block (zeroed by its owner, then only
        // accessed through atomics), mapped until finalize.
        unsafe { &*(self.areas[member] as *const RankControl) }
    }

    /// `rank`'s index in the host team, if it is on this host.
    #[inline]
    fn member(&self, rank: Rank) -> Option<usize> {
        let m = self.member[rank as usize];
        (m != ELSEWHERE).then_some(m as usize)
    }

    /// `dest`'s queue of `network`, if `dest` is on this host (a slot of it is claimed
    /// with [`mailbox::Outbound::reserve`]).
    #[inline]
    pub(super) fn queue(&self, dest: Rank, network: Network) -> Option<Queue> {
        match network {
            Network::Request => self.requests[dest as usize],
            Network::Reply => self.replies[dest as usize],
        }
    }

    /// Runs `dispatch` on messages in this rank's queue of `network`.
    #[inline]
    pub(super) fn drain(
        &self,
        network: Network,
        rank: Rank,
        bounds: impl FnOnce() -> SlotBounds,
        dispatch: fn(&Inbound<'_>),
    ) -> usize {
        let inbox = match network {
            Network::Request => &self.my_requests,
            Network::Reply => &self.my_replies,
        };
        let n = inbox.drain(network, rank, bounds, dispatch, fatal);
        if let Some(handled) = &self.handled {
            handled.fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    /// Marks every member of this host as leaving through `gex::exit(0)` (the state in
    /// its control block), which each notices at its next wait ([`Host::exiting`]).
    pub(super) fn mark_exiting(&self) {
        for i in 0..self.areas.len() {
            self.control(i)
                .state
                .store(RankState::Exited as u32, Ordering::Release);
        }
    }

    /// Whether a rank marked this host's members as leaving ([`Host::mark_exiting`]).
    #[inline]
    pub(super) fn exiting(&self) -> bool {
        // SAFETY: as in `control`.
        let ctl = unsafe { &*(self.my_area as *const RankControl) };
        ctl.state.load(Ordering::Acquire) == RankState::Exited as u32
    }

    /// Messages handled from this rank's queues so far, if counted.
    pub(super) fn handled(&self) -> Option<u64> {
        self.handled.as_ref().map(|h| h.load(Ordering::Relaxed))
    }

    /// Stores into signal word `slot` of `dest` if it is on this host.
    #[inline]
    pub(super) fn signal(&self, dest: Rank, slot: usize, value: u64) -> bool {
        let Some(m) = self.member(dest) else {
            return false;
        };
        self.control(m).signals[slot].store(value, Ordering::Release);
        true
    }

    /// This rank's signal word `slot`.
    #[inline]
    pub(super) fn signal_value(&self, slot: usize) -> u64 {
        // SAFETY: as in `control`.
        let ctl = unsafe { &*(self.my_area as *const RankControl) };
        ctl.signals[slot].load(Ordering::Acquire)
    }

    pub(super) fn signal_slots(&self) -> usize {
        SIGNALS
    }
}
