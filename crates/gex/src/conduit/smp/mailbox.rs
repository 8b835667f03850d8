//! Both ends of a rank's AM queues (see [`queue`]) as a conduit uses them: the
//! consumer's [`Inbox`] with its drain loop, and a producer's claimed slot,
//! [`Outbound`].
//!
//! The queues do not care where their memory comes from: the smp conduit keeps them in
//! the job region, the mpi conduit in a shared-memory window over each host's ranks.
//! Both hand the same `Inbox` and `Outbound` to their `poll` and `am_*` calls, so a
//! message between two ranks of one host is the same slot protocol under either.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::layout::{JobLayout, REPLY_SLOTS, REQUEST_SLOTS, SLOT_HEADER};
use super::queue::{
    self, FirstLine, Queue, Reserved, SlotBounds, SlotHeader, SlotPayload, FIRST_LINE_ARGS,
};
use crate::conduit::{AmHeader, Inbound, Network, Rank};

/// Largest number of messages handled per queue in one poll, so one busy sender cannot
/// keep a poll from returning.
const POLL_BATCH: u64 = 32;

/// The Request or Reply queue of the rank area at `area`, laid out as the job region's
/// (a [`RankControl`](super::layout::RankControl), then the two queues; see
/// [`JobLayout`]).
///
/// # Safety
/// `area` must point to at least [`JobLayout::SEGMENT_OFFSET`] bytes of shared memory,
/// page aligned, that outlive every use of the returned queue.
pub(crate) unsafe fn queue_in(area: *mut u8, network: Network) -> Queue {
    let (offset, slots) = match network {
        Network::Request => (JobLayout::REQUEST_QUEUE_OFFSET, REQUEST_SLOTS),
        Network::Reply => (JobLayout::REPLY_QUEUE_OFFSET, REPLY_SLOTS),
    };
    // SAFETY: the queue's area lies inside the rank area (the caller's obligation).
    unsafe { Queue::at(area.add(offset), slots) }
}

/// One inbound queue and its consumer state in this process.
pub(crate) struct Inbox {
    queue: Queue,
    head: AtomicU64,
    /// Held by the thread currently draining this queue (GASNet-EX PAR mode: any thread
    /// may poll; one drains at a time, the others move on).
    busy: AtomicBool,
}

impl Inbox {
    /// The consumer side of `queue`, which its owner has initialized.
    pub(crate) fn new(queue: Queue) -> Inbox {
        Inbox {
            queue,
            head: AtomicU64::new(0),
            busy: AtomicBool::new(false),
        }
    }

    /// Runs `dispatch` on up to [`POLL_BATCH`] published messages, in queue order, and
    /// returns how many. `bounds` is asked only when a message is there; a header that
    /// fails [`queue::decode`] ends the process through `fatal`, naming `rank`.
    ///
    /// The common empty poll reads one shared cache line and writes nothing, inline in
    /// the caller: the loop over messages is a call of its own, so that the empty poll
    /// does not pay its prologue (about 20 instructions of saved registers per queue).
    #[inline(always)]
    pub(crate) fn drain(
        &self,
        network: Network,
        rank: Rank,
        bounds: impl FnOnce() -> SlotBounds,
        dispatch: fn(&Inbound<'_>),
        fatal: fn(&str) -> !,
    ) -> usize {
        if self.queue.peek(self.head.load(Ordering::Relaxed)).is_none() {
            return 0;
        }
        self.drain_arrived(network, rank, bounds, dispatch, fatal)
    }

    /// [`drain`](Self::drain) once a message is there.
    #[inline(never)]
    fn drain_arrived(
        &self,
        network: Network,
        rank: Rank,
        bounds: impl FnOnce() -> SlotBounds,
        dispatch: fn(&Inbound<'_>),
        fatal: fn(&str) -> !,
    ) -> usize {
        if self.busy.swap(true, Ordering::Acquire) {
            return 0;
        }
        struct Unbusy<'a>(&'a AtomicBool);
        impl Drop for Unbusy<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _unbusy = Unbusy(&self.busy);
        let mut head = self.head.load(Ordering::Relaxed);
        let start = head;
        let bounds = bounds();
        while head - start < POLL_BATCH {
            let Some(slot) = self.queue.peek(head) else {
                break;
            };
            // The message is ours until released; advance first so a handler that polls
            // (a Request handler blocked on sending its Reply drains Replies only) never
            // sees this slot again.
            self.head.store(head + 1, Ordering::Relaxed);
            // SAFETY: the slot was published (seq == head + 1) and is owned by the
            // consumer until `release`; its header fields were written before publish.
            let h = unsafe { &*(slot as *const SlotHeader) };
            let m = queue::decode(h, &bounds).unwrap_or_else(|why| {
                fatal(&format!(
                    "rank {rank}: a corrupt message in the {network:?} queue (slot {head}): {why}"
                ))
            });
            let payload: &[u8] = match m.payload {
                SlotPayload::None => &[],
                // SAFETY: `decode` checked that len <= SLOT_PAYLOAD, the bytes after the
                // header inside the slot, which the sender wrote before publishing.
                SlotPayload::Inline(len) => unsafe {
                    std::slice::from_raw_parts(slot.add(SLOT_HEADER), len)
                },
                // SAFETY: `decode` checked that the bytes lie inside our segment; the
                // sender delivered them there before publishing the header.
                SlotPayload::At { addr, len } => unsafe {
                    std::slice::from_raw_parts(addr as *const u8, len)
                },
            };
            let msg = Inbound {
                src: m.src,
                handler: m.handler,
                category: m.category,
                network,
                args: &h.args[..m.nargs],
                payload,
                dest_addr: h.dest_addr as usize,
            };
            // Free the slot even if the handler unwinds, so a panic the program catches
            // around its poll does not leave the queue stuck at this slot.
            let release = ReleaseSlot(&self.queue, head);
            dispatch(&msg);
            drop(release);
            head += 1;
        }
        (head - start) as usize
    }
}

/// Releases a consumed slot when dropped.
struct ReleaseSlot<'a>(&'a Queue, u64);

impl Drop for ReleaseSlot<'_> {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// A claimed slot in a peer's queue.
pub(crate) struct Outbound {
    queue: Queue,
    reserved: Reserved,
}

impl Outbound {
    /// Claims the next slot of `queue`, or `None` while it is full (back-pressure).
    #[inline]
    pub(crate) fn reserve(queue: Queue) -> Option<Outbound> {
        queue.reserve().map(|reserved| Outbound { queue, reserved })
    }

    /// The payload area of the slot (`SLOT_PAYLOAD` bytes, 16-byte aligned).
    #[inline]
    pub(crate) fn buffer(&self) -> *mut u8 {
        // SAFETY: the payload area follows the header inside the claimed slot.
        unsafe { self.reserved.slot.add(SLOT_HEADER) }
    }

    /// Writes the header of a message from `src` and publishes the slot.
    #[inline]
    pub(crate) fn commit(self, src: Rank, header: &AmHeader<'_>) {
        let (first, more) = header.args.split_at(header.args.len().min(FIRST_LINE_ARGS));
        let line = FirstLine {
            src,
            handler: header.handler,
            kind: header.category as u8,
            nargs: header.args.len() as u8,
            pad0: 0,
            nbytes: header.nbytes as u32,
            pad1: 0,
            dest_addr: header.dest_addr as u64,
            args: std::array::from_fn(|i| first.get(i).copied().unwrap_or(0)),
        };
        // SAFETY: the slot is claimed by us and not visible to the consumer until publish.
        let h = unsafe { &mut *(self.reserved.slot as *mut SlotHeader) };
        if !more.is_empty() {
            // A call of `memcpy` even for no bytes: most messages have no more.
            h.args[FIRST_LINE_ARGS..FIRST_LINE_ARGS + more.len()].copy_from_slice(more);
        }
        h.write_first_line(line);
        self.queue.publish(self.reserved);
    }
}
