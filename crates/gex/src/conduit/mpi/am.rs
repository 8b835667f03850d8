//! The Active Message transport of the mpi conduit between hosts: the aggregation of
//! AMs into messages (their format is in `wire`), the pre-posted receives, the sends,
//! and the handling of arrived records; what each poll tests with its one
//! `MPI_Testsome` is in `progress`, the control messages (credit returns and signals)
//! in `control` (see the parent module's documentation).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::Arc;

use ::mpi::ffi;

use super::boot::{check, fatal};
use super::serial::SerialGuard;

use super::{MpiConduit, CONTROL_DEPTH, MSG_SIZE, POLL_BATCH, RECV_DEPTH};
use wire::Record;
pub(super) use wire::HEADER;
pub(crate) use wire::{long_inline, Buf};

mod control;
mod progress;
mod wire;
use crate::conduit::{AmHeader, Category, Conduit, Inbound, Network, OpHandle, Rank};
use control::Control;

const TAG_REQUEST: c_int = 1;
const TAG_REPLY: c_int = 2;
/// The tag of each channel: the networks, by [`net_index`], then control messages.
const TAGS: [c_int; 3] = [TAG_REQUEST, TAG_REPLY, control::TAG_CONTROL];
/// The channel of control messages, after the two networks'.
pub(super) const CONTROL: usize = 2;

/// A claimed send buffer for a rank on another host.
pub(crate) struct NetOutbound {
    pub(super) buf: Buf,
    pub(super) dest: Rank,
    pub(super) network: Network,
}

/// What a rank sends to one peer on one network: the message being filled, if any,
/// and how many of its sends to that peer are in flight.
#[derive(Default)]
pub(super) struct PeerOut {
    /// The message being filled: its records go out with the next poll, or when the
    /// next record does not fit. It holds one credit, as a message in flight does.
    pending: Option<Buf>,
    /// Bytes of `pending` used.
    len: u16,
    /// Sends of messages to this peer not yet seen complete by a poll (one that
    /// completed at once counts until the next poll, as if that poll's test saw it).
    sending: u16,
}

pub(super) fn net_index(network: Network) -> usize {
    match network {
        Network::Request => 0,
        Network::Reply => 1,
    }
}

/// A receive slot: its buffer and, once `MPI_Testsome` has completed its receive, the
/// message's sender and length (its status). The receive is persistent
/// (`MPI_Recv_init` into the buffer, which the slot keeps for the job's life), started
/// again once every record has been taken and no handler of one is still running (a
/// handler may poll, and a nested poll takes the next records).
pub(super) struct RecvSlot {
    /// The buffer the slot's receive was made with: never replaced (MPI writes to the
    /// address `MPI_Recv_init` was given), freed with the slot.
    buf: Buf,
    pub(super) status: Option<(Rank, usize)>,
    /// Handlers of this slot's records running now.
    active: u32,
    /// Every record has been taken (the cursor moved on).
    taken: bool,
}

/// The next record to handle on one network: in which slot, at which offset, up to
/// which end, and from which sender.
#[derive(Clone, Copy)]
pub(super) struct Cursor {
    slot: usize,
    at: usize,
    end: usize,
    src: Rank,
}

/// What a send in flight keeps alive until it completes, or, for a get through the
/// window, what its completion completes.
pub(super) enum SendBuf {
    Msg {
        buf: Buf,
        dest: Rank,
        net: usize,
    },
    Control(Box<Control>),
    /// One `MPI_Rget` of a get (see `rma`): one part of the handle's operation.
    Get(Arc<OpHandle>),
    /// One `MPI_Rput` of a non-blocking put (see `rma`), from `data`: once its request
    /// completes, a flush of `dest` completes one part of the handle's operation.
    Put {
        #[allow(dead_code, reason = "MPI reads it until the request completes")]
        data: Box<[u8]>,
        dest: Rank,
        op: Arc<OpHandle>,
    },
}

/// Where the receive slots of each network start in [`State::reqs`], then the credit
/// receives, then the sends.
const RING_BASE: [usize; 2] = [0, RECV_DEPTH];
pub(super) const CONTROL_BASE: usize = 2 * RECV_DEPTH;
pub(super) const SEND_BASE: usize = CONTROL_BASE + CONTROL_DEPTH;

/// Everything touched by MPI calls, under the one lock.
pub(super) struct State {
    /// Every request a poll tests, in one array so that one `MPI_Testsome` (one pass of
    /// MPI's progress engine) covers them all: the receive slots of the Reply and the
    /// Request network (`RECV_DEPTH` each), the credit receives, then the sends in
    /// flight and the `MPI_Rget`s of gets through the window (`rma`). A completed send,
    /// get or put is `MPI_REQUEST_NULL`; a completed receive (entries `..SEND_BASE`,
    /// persistent requests) stays, inactive until started again. `MPI_Testsome` skips
    /// both.
    pub(super) reqs: Vec<ffi::MPI_Request>,
    /// The receive slots, as the first `2 * RECV_DEPTH` entries of `reqs`.
    pub(super) slots: Vec<RecvSlot>,
    /// Per network, its slots in posting order: MPI matches a message with the oldest
    /// posted receive of its tag, so this is arrival order. A slot leaves when the
    /// cursor reaches it and comes back at the end when posted again.
    pub(super) order: [VecDeque<usize>; 2],
    /// Per network, the next record of a message whose records are being handled.
    cursor: [Option<Cursor>; 2],
    /// Slots (with their network and sender) whose records have all been handled, to
    /// be posted again, and counted for credits, by the next poll.
    unposted: Vec<(usize, usize, Rank)>,
    /// The buffers of the control receives (entries `CONTROL_BASE..SEND_BASE` of `reqs`),
    /// boxed: the `State` moves, buffers MPI writes into must not.
    pub(super) control_bufs: Box<[Control; CONTROL_DEPTH]>,
    /// Buffers of control messages sent, for the next ones (a barrier round between
    /// hosts sends one each). Boxed as a send in flight holds them, so that taking one
    /// for a send allocates nothing.
    #[allow(clippy::vec_box, reason = "the boxes move to and from sends in flight")]
    free_control: Vec<Box<Control>>,
    /// Messages whose send completed when it started, each counted in its peer's
    /// `sending` until the next poll's test.
    sent_done: Vec<(Rank, usize)>,
    /// What each send or get in flight keeps or completes, entry `SEND_BASE + i` of
    /// `reqs` for `sends[i]`.
    pub(super) sends: Vec<SendBuf>,
    /// The parts of non-blocking puts whose `MPI_Rput` has completed (their buffers
    /// read), with their targets: the next poll flushes each target once and
    /// completes them (`rma`).
    pub(super) unflushed: Vec<(Rank, Arc<OpHandle>)>,
    pub(super) free: Vec<Buf>,
    /// Per peer and network, the message being filled and the sends in flight.
    out: Vec<[PeerOut; 2]>,
    /// The `(peer, network)` pairs whose `pending` message is set.
    filling: Vec<(Rank, usize)>,
    /// Messages (buffers) per peer and network sent, being filled or claimed, that the
    /// peer has not returned credit for.
    pub(super) in_flight: Vec<[u32; 2]>,
    /// Messages handled per peer and network since credits were last returned.
    pub(super) handled: Vec<[u32; 2]>,
    /// Active Messages handled from MPI so far, and the MPI messages that carried
    /// them (reported under `GEX_MPI_STATS`).
    pub(super) net_handled: u64,
    pub(super) net_messages: u64,
    /// Per credit receive, in posting order (see `reqs`): credit messages match them
    /// in that order, as Active Messages match a network's receive slots.
    control_order: VecDeque<usize>,
    /// Control receives completed, to be posted again by the next poll.
    control_unposted: Vec<usize>,
    /// The requests a poll tests, copied from `reqs` (see [`State::gather_tested`]),
    /// and the index in `reqs` of each; gathered again only when `reqs` or the
    /// receives' order changed (`stale`), so an idle poll only tests.
    tested: Vec<ffi::MPI_Request>,
    tested_at: Vec<usize>,
    stale: bool,
    /// Scratch space of `MPI_Testsome`.
    pub(super) done_idx: Vec<c_int>,
    pub(super) done_status: Vec<ffi::MPI_Status>,
    /// The window of the host's AM queues (see `host`), freed by `finalize`.
    pub(super) host_win: ffi::MPI_Win,
    /// The communicator of each channel (the networks by [`net_index`], then
    /// [`CONTROL`]), each a duplicate of `MPI_COMM_WORLD`, freed by `finalize`. MPI
    /// matches an arriving message against the receives posted on its communicator
    /// in posting order: on one communicator for all, a Reply walked past every
    /// posted Request receive before its own (Open MPI's matching of an arrival took
    /// about 800 instructions, against 300 for a raw `MPI_Recv`'s).
    pub(super) comms: [ffi::MPI_Comm; 3],
    /// Per network, whether a thread is handling its arrived messages (with the lock
    /// released while each handler runs): another thread's poll leaves that network
    /// alone meanwhile, so one sender's messages run one at a time, in the order sent
    /// (as the smp mailbox's `busy` flag has it).
    handling: [bool; 2],
    pub(super) finalized: bool,
}

impl State {
    /// The state of a rank with `size` ranks in the job, its receives posted.
    pub(super) fn new(size: usize, host_win: ffi::MPI_Win, comms: [ffi::MPI_Comm; 3]) -> State {
        let mut st = State {
            // SAFETY: reading an MPI constant.
            reqs: vec![unsafe { ffi::RSMPI_REQUEST_NULL }; SEND_BASE],
            slots: Vec::with_capacity(2 * RECV_DEPTH),
            order: [VecDeque::new(), VecDeque::new()],
            cursor: [None, None],
            unposted: Vec::with_capacity(2 * RECV_DEPTH),
            control_bufs: Box::new([[0; 4]; CONTROL_DEPTH]),
            sends: Vec::new(),
            unflushed: Vec::new(),
            sent_done: Vec::new(),
            free_control: Vec::new(),
            free: Vec::new(),
            out: (0..size).map(|_| Default::default()).collect(),
            filling: Vec::new(),
            in_flight: vec![[0; 2]; size],
            handled: vec![[0; 2]; size],
            net_handled: 0,
            net_messages: 0,
            control_order: (0..CONTROL_DEPTH).collect(),
            control_unposted: Vec::with_capacity(CONTROL_DEPTH),
            tested: Vec::new(),
            tested_at: Vec::new(),
            stale: true,
            done_idx: Vec::new(),
            done_status: Vec::new(),
            host_win,
            comms,
            handling: [false; 2],
            finalized: false,
        };
        for (net, base) in RING_BASE.into_iter().enumerate() {
            for slot in base..base + RECV_DEPTH {
                let mut buf = Buf::new();
                // SAFETY: the buffer (a heap allocation: its address is stable) stays
                // in the slot until `finalize` frees the request.
                st.reqs[slot] = unsafe { recv_init(buf.ptr(), MSG_SIZE, TAGS[net], comms[net]) };
                st.slots.push(RecvSlot {
                    buf,
                    status: None,
                    active: 0,
                    taken: false,
                });
                st.repost(slot, net);
            }
        }
        for (i, b) in st.control_bufs.iter_mut().enumerate() {
            // SAFETY: the buffers are boxed in `State` until `finalize` frees the
            // requests. Bytes, as control messages are sent (MPI matches type
            // signatures, and the poll reads the length received in bytes).
            st.reqs[CONTROL_BASE + i] = unsafe {
                recv_init(
                    b.as_mut_ptr().cast(),
                    std::mem::size_of::<Control>(),
                    control::TAG_CONTROL,
                    comms[CONTROL],
                )
            };
            // SAFETY: made just now by `recv_init`, into the box's buffer.
            unsafe { start(&mut st.reqs[CONTROL_BASE + i]) };
        }
        st
    }

    /// Starts the receive of `slot` (of network `net`) again, at the end of the
    /// network's order.
    fn repost(&mut self, slot: usize, net: usize) {
        // SAFETY: the slot's receive, made by `recv_init` into its buffer, is inactive:
        // made and not started, or completed (its slot left the order when its records
        // were taken, and a slot comes back only through here).
        unsafe { start(&mut self.reqs[slot]) };
        self.order[net].push_back(slot);
        self.stale = true;
    }

    /// Starts a send of `len` bytes at `ptr`, kept in `keep`, to `dest` on channel
    /// `chan` (a network by [`net_index`], or [`CONTROL`]).
    fn isend(&mut self, ptr: *const u8, len: usize, dest: Rank, chan: usize, keep: SendBuf) {
        // SAFETY: a null request is overwritten by MPI_Isend.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `ptr` points into `keep`'s heap allocation, kept with the request
        // until the send completes.
        unsafe {
            check(
                ffi::MPI_Isend(
                    ptr.cast(),
                    len as c_int,
                    ffi::RSMPI_UINT8_T,
                    dest as c_int,
                    TAGS[chan],
                    self.comms[chan],
                    &mut req,
                ),
                "MPI_Isend",
            );
        }
        let mut done = 0;
        // SAFETY: the request just started; a complete one becomes MPI_REQUEST_NULL.
        unsafe {
            check(
                ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                "MPI_Test",
            );
        }
        if done != 0 {
            // A small message leaves eagerly: its buffer is free at once, and no poll
            // need test it.
            match keep {
                SendBuf::Msg { buf, dest, net } => {
                    self.free.push(buf);
                    self.sent_done.push((dest, net));
                }
                SendBuf::Control(b) => self.free_control.push(b),
                SendBuf::Get(_) | SendBuf::Put { .. } => {
                    unreachable!("window RMA is tracked, not sent")
                }
            }
            return;
        }
        self.track(req, keep);
    }

    /// Keeps a request in flight, and what it keeps alive, among those every poll
    /// tests.
    pub(super) fn track(&mut self, req: ffi::MPI_Request, keep: SendBuf) {
        self.reqs.push(req);
        self.sends.push(keep);
        // Every send in flight is tested: it joins the gathered requests as it joins
        // `reqs`.
        if !self.stale {
            self.tested_at.push(self.reqs.len() - 1);
            self.tested.push(req);
        }
    }

    /// Sends the first `len` bytes of `buf`, a message of network `net`, to `dest`.
    fn send_msg(&mut self, mut buf: Buf, len: usize, dest: Rank, net: usize) {
        self.out[dest as usize][net].sending += 1;
        // A Reply carries the credits owed to `dest` (fewer than CREDITS / 2 per
        // network, else `handled` has returned them). Only a Reply: a rank always
        // drains its Replies (a Reply-only poll drains nothing else), so their receives
        // always complete, while a Request may wait unmatched behind Requests that a
        // rank sending a Reply under back-pressure cannot handle yet, and the credits
        // it carried with it.
        if net == net_index(Network::Reply) {
            let owed = std::mem::take(&mut self.handled[dest as usize]);
            wire::set_credits(&mut buf, owed.map(|n| n as u8));
        }
        let len = wire::compact(&mut buf, len);
        let ptr = buf.ptr();
        self.isend(ptr, len, dest, net, SendBuf::Msg { buf, dest, net });
    }

    /// A handler of a record of `slot` (of network `net`, from `src`) returned, or
    /// unwound: once the slot's last record was handled, its receive is posted again
    /// by the next poll (off the path from the arrival to the handler and from the
    /// handler back to the caller), and its sender's credit returned.
    fn handled_one(&mut self, slot: usize, net: usize, src: Rank) {
        let s = &mut self.slots[slot];
        s.active -= 1;
        if s.taken && s.active == 0 {
            s.taken = false;
            self.unposted.push((slot, net, src));
        }
    }

    /// Posts again the receives of the slots whose records have all been handled, and
    /// the completed control receives (a check inlined into every poll).
    #[inline]
    fn repost_taken(&mut self) {
        if !self.unposted.is_empty() || !self.control_unposted.is_empty() {
            self.repost_all();
        }
    }

    /// [`repost_taken`](Self::repost_taken) past its check.
    fn repost_all(&mut self) {
        while let Some((slot, net, src)) = self.unposted.pop() {
            self.repost(slot, net);
            self.handled(src, net);
        }
        while let Some(c) = self.control_unposted.pop() {
            // SAFETY: the control receive `c` completed (its poll took it from the
            // order), and its buffer is boxed in `control_bufs`.
            unsafe { start(&mut self.reqs[CONTROL_BASE + c]) };
            self.control_order.push_back(c);
            self.stale = true;
        }
    }

    /// Sends every message being filled (each poll does, so that no record waits for
    /// a later one).
    pub(super) fn flush(&mut self) {
        while let Some((dest, net)) = self.filling.pop() {
            let out = &mut self.out[dest as usize][net];
            if let Some(buf) = out.pending.take() {
                let len = usize::from(out.len);
                self.send_msg(buf, len, dest, net);
            }
        }
    }
}

impl MpiConduit {
    /// One poll's part over MPI: sends every message being filled, tests the requests
    /// once, and handles up to `POLL_BATCH` arrived Active Messages of the Reply network
    /// and then, when `requests`, of the Request network, in arrival order, each
    /// without the lock held. Both networks are handled in one hold of the lock unless a
    /// handler ran in between: MPI's progress pass writes memory the peer reads (a
    /// shared-memory mailbox's indices), and taking the lock again right after it would
    /// wait for those stores to leave the store buffer, on the way from an arrival to
    /// its handler.
    pub(super) fn drain(&self, requests: bool, dispatch: fn(&Inbound<'_>)) -> usize {
        let mut st = self.serial();
        if st.finalized {
            return 0;
        }
        st.repost_taken();
        st.flush();
        // A get or put through the window completed counts as work, as an AM handled
        // does, so that a loop waiting for it keeps polling rather than backing off.
        let mut n = self.test_all(&mut st);
        if st.arrived(net_index(Network::Reply)) {
            let handled;
            (handled, st) = self.handle(st, Network::Reply, dispatch);
            n += handled;
        }
        if requests && !st.finalized && st.arrived(net_index(Network::Request)) {
            n += self.handle(st, Network::Request, dispatch).0;
        }
        n
    }

    /// Handles up to `POLL_BATCH` arrived Active Messages of `network`, in arrival
    /// order, each without the lock held; returns how many, and the lock.
    fn handle<'a>(
        &'a self,
        mut st: SerialGuard<'a, State>,
        network: Network,
        dispatch: fn(&Inbound<'_>),
    ) -> (usize, SerialGuard<'a, State>) {
        let net = net_index(network);
        if st.handling[net] {
            return (0, st);
        }
        st.handling[net] = true;
        let mut n = 0;
        while n < POLL_BATCH {
            let mut c = match st.cursor[net] {
                Some(c) => c,
                None => {
                    let Some(&slot) = st.order[net].front() else {
                        break;
                    };
                    let Some((src, end)) = st.slots[slot].status.take() else {
                        break;
                    };
                    st.order[net].pop_front();
                    st.net_messages += 1;
                    Cursor {
                        slot,
                        at: 0,
                        end,
                        src,
                    }
                }
            };
            let buf = st.slots[c.slot].buf.const_ptr();
            // SAFETY: the slot's buffer holds `c.end` received bytes and is not posted
            // again while `active` counts a handler of it.
            let record = unsafe { self.record(buf, c.at, c.end, c.src, network) };
            c.at = record.next;
            st.slots[c.slot].active += 1;
            if c.at >= c.end {
                st.slots[c.slot].taken = true;
                st.cursor[net] = None;
            } else {
                st.cursor[net] = Some(c);
            }
            st.net_handled += 1;
            // A handler may send (and poll the other network while it waits for room).
            drop(st);
            let unwinding = Unwinding {
                conduit: self,
                slot: c.slot,
                net,
                src: c.src,
            };
            self.dispatch_record(&record, network, dispatch);
            std::mem::forget(unwinding);
            st = self.serial();
            n += 1;
            if st.finalized {
                break;
            }
            st.handled_one(c.slot, net, c.src);
        }
        st.handling[net] = false;
        (n, st)
    }

    /// The record at offset `at` of a message of `end` bytes at `buf` from `src`;
    /// a corrupt one ends the job.
    ///
    /// # Safety
    /// As for [`wire::parse`].
    unsafe fn record(
        &self,
        buf: *const u8,
        at: usize,
        end: usize,
        src: Rank,
        network: Network,
    ) -> Record {
        // SAFETY: the caller's guarantee.
        unsafe { wire::parse(buf, at, end, src) }.unwrap_or_else(|| {
            fatal(&format!(
                "rank {}: a corrupt {network:?} message from rank {src}",
                self.rank
            ))
        })
    }

    /// Runs the handler of a checked record.
    fn dispatch_record(&self, r: &Record, network: Network, dispatch: fn(&Inbound<'_>)) {
        let payload: &[u8] = match r.category {
            Category::Short => &[],
            // SAFETY: checked by `record` to lie in the received bytes.
            Category::Medium => unsafe { std::slice::from_raw_parts(r.payload, r.nbytes) },
            // No bytes: the handler gets `dest_addr` as sent, unchecked (`check_long`).
            Category::Long if r.nbytes == 0 => &[],
            Category::Long => {
                let local = self
                    .translate(self.rank, r.dest_addr, r.nbytes)
                    .unwrap_or_else(|_| {
                        fatal(&format!(
                            "rank {}: a Long payload from rank {} outside the segment",
                            self.rank, r.src
                        ))
                    });
                if r.long_inline {
                    // SAFETY: the payload lies in the received bytes (checked by
                    // `record`), the destination in our segment (translate).
                    unsafe { std::ptr::copy_nonoverlapping(r.payload, local as *mut u8, r.nbytes) };
                }
                // SAFETY: inside our segment (translate), delivered before the header
                // or just now.
                unsafe { std::slice::from_raw_parts(local as *const u8, r.nbytes) }
            }
        };
        dispatch(&Inbound {
            src: r.src,
            handler: r.handler,
            category: r.category,
            network,
            // SAFETY: checked by `record`; 4-byte aligned (records are 16-aligned and
            // the arguments follow the 24-byte fixed header).
            args: unsafe { std::slice::from_raw_parts(r.args, r.nargs) },
            payload,
            dest_addr: r.dest_addr,
        });
    }

    /// Sends the message in a claimed buffer (`Conduit::am_commit`): on its own when
    /// nothing to its destination is in flight or being filled, else as a record
    /// appended to the message being filled for that destination (whose credit it then
    /// shares, returning its own), which goes out first when the record does not fit.
    pub(super) fn send(&self, mut out: NetOutbound, header: &AmHeader<'_>) {
        let rec = wire::encode(&mut out.buf, self.rank, header);
        let (dest, net) = (out.dest, net_index(out.network));
        let mut st = self.serial_live("am_commit");
        let st = &mut *st;
        let peer = &mut st.out[dest as usize][net];
        let Some(pending) = &mut peer.pending else {
            let len = wire::pack(&mut out.buf, &rec);
            if peer.sending == 0 {
                st.send_msg(out.buf, len, dest, net);
            } else {
                peer.pending = Some(out.buf);
                peer.len = len as u16;
                st.filling.push((dest, net));
            }
            return;
        };
        if let Some(end) = wire::append(pending, usize::from(peer.len), &out.buf, &rec) {
            peer.len = end as u16;
            st.free.push(out.buf);
            // The record travels in the pending message, under that message's credit.
            st.in_flight[dest as usize][net] -= 1;
        } else {
            let len = wire::pack(&mut out.buf, &rec);
            let full = std::mem::replace(pending, out.buf);
            let full_len = std::mem::replace(&mut peer.len, len as u16);
            st.send_msg(full, usize::from(full_len), dest, net);
        }
    }
}

/// Armed while a handler of a record of the network queues runs: if the handler
/// unwinds (a panic the program may catch around its poll), the slot is still
/// released and the network left to the next poll, as when the handler returns.
struct Unwinding<'a> {
    conduit: &'a MpiConduit,
    slot: usize,
    net: usize,
    src: Rank,
}

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        let mut st = self.conduit.serial();
        st.handling[self.net] = false;
        if !st.finalized {
            st.handled_one(self.slot, self.net, self.src);
        }
    }
}

/// A persistent receive of up to `len` bytes into `buf`, from any source with `tag`
/// on `comm`, not yet started. A persistent receive is matched as a fresh
/// `MPI_Irecv` is, without allocating and initializing a request each time.
///
/// # Safety
/// `buf` holds `len` bytes and stays valid until the request is freed.
unsafe fn recv_init(buf: *mut u8, len: usize, tag: c_int, comm: ffi::MPI_Comm) -> ffi::MPI_Request {
    // SAFETY: a null request is overwritten by MPI_Recv_init.
    let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
    // SAFETY: the caller's guarantee for the buffer.
    unsafe {
        check(
            ffi::MPI_Recv_init(
                buf.cast(),
                len as c_int,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                tag,
                comm,
                &mut req,
            ),
            "MPI_Recv_init",
        );
    }
    req
}

/// Starts a persistent receive made by [`recv_init`].
///
/// # Safety
/// The request is inactive (not started since it was made, or completed), and the
/// buffer it was made with is still valid.
unsafe fn start(req: &mut ffi::MPI_Request) {
    // SAFETY: the caller's guarantee.
    unsafe { check(ffi::MPI_Start(req), "MPI_Start") };
}

/// Ends the persistent receives of `reqs` (those of [`recv_init`], started or not):
/// cancels those still pending, waits for each, and frees them.
pub(super) fn free_receives(reqs: &mut [ffi::MPI_Request]) {
    for req in reqs {
        let mut done = 0;
        // SAFETY: a persistent request; a pending one is cancelled and then completed
        // (an inactive one completes at once), after which it is freed.
        unsafe {
            check(
                ffi::MPI_Request_get_status(*req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                "MPI_Request_get_status",
            );
            if done == 0 {
                check(ffi::MPI_Cancel(req), "MPI_Cancel");
            }
            check(ffi::MPI_Wait(req, ffi::RSMPI_STATUS_IGNORE), "MPI_Wait");
            check(ffi::MPI_Request_free(req), "MPI_Request_free");
        }
    }
}
