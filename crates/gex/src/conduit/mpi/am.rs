//! The Active Message transport of the mpi conduit between hosts: the wire format, the
//! pre-posted receives, sends kept until complete, all tested by one `MPI_Testsome`
//! per poll, and the credits (see the parent module's documentation).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use super::boot::{check, fatal};
use parking_lot::MutexGuard;

use super::{MpiConduit, CREDITS, CREDIT_DEPTH, MSG_SIZE, POLL_BATCH, RECV_DEPTH};
use crate::conduit::{AmHeader, Category, Conduit, Inbound, Network, Rank};

/// Bytes of the header at the start of each message.
pub(super) const HEADER: usize = std::mem::size_of::<WireHeader>();
const TAG_REQUEST: c_int = 1;
const TAG_REPLY: c_int = 2;
const TAG_CREDIT: c_int = 3;

/// The header of a message on the wire.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default)]
pub(super) struct WireHeader {
    src: u32,
    handler: u8,
    category: u8,
    nargs: u8,
    _pad: u8,
    nbytes: u32,
    _pad1: u32,
    dest_addr: u64,
    args: [u32; 16],
}

/// A message buffer, 16-byte aligned.
pub(crate) struct Buf(pub(super) Box<[u128; MSG_SIZE / 16]>);

impl Buf {
    pub(super) fn new() -> Buf {
        Buf(Box::new([0; MSG_SIZE / 16]))
    }
    pub(super) fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
    fn const_ptr(&self) -> *const u8 {
        self.0.as_ptr().cast()
    }
    fn header(&self) -> &WireHeader {
        // SAFETY: the buffer is 16-byte aligned and larger than a header; every bit
        // pattern is a valid `WireHeader`.
        unsafe { &*(self.0.as_ptr() as *const WireHeader) }
    }
}

/// A claimed send buffer for a rank on another host.
pub(crate) struct NetOutbound {
    pub(super) buf: Buf,
    pub(super) dest: Rank,
    pub(super) network: Network,
}

pub(super) fn tag_of(network: Network) -> c_int {
    match network {
        Network::Request => TAG_REQUEST,
        Network::Reply => TAG_REPLY,
    }
}

pub(super) fn net_index(network: Network) -> usize {
    match network {
        Network::Request => 0,
        Network::Reply => 1,
    }
}

/// A receive slot: its buffer (taken out while its message is handled) and, once
/// `MPI_Testsome` has completed its receive, the receive's status.
pub(super) struct RecvSlot {
    pub(super) buf: Option<Buf>,
    pub(super) status: Option<ffi::MPI_Status>,
}

/// What a send in flight keeps alive until it completes.
pub(super) enum SendBuf {
    Msg(Buf),
    Credit(Box<[u32; 2]>),
}

/// Where the receive slots of each network start in [`State::reqs`], then the credit
/// receives, then the sends.
const RING_BASE: [usize; 2] = [0, RECV_DEPTH];
pub(super) const CREDIT_BASE: usize = 2 * RECV_DEPTH;
pub(super) const SEND_BASE: usize = CREDIT_BASE + CREDIT_DEPTH;

/// Everything touched by MPI calls, under the one lock.
pub(super) struct State {
    /// Every request a poll tests, in one array so that one `MPI_Testsome` (one pass of
    /// MPI's progress engine) covers them all: the receive slots of the Reply and the
    /// Request network (`RECV_DEPTH` each), the credit receives, then the sends in
    /// flight. A completed request is `MPI_REQUEST_NULL`, which `MPI_Testsome` skips.
    pub(super) reqs: Vec<ffi::MPI_Request>,
    /// The receive slots, as the first `2 * RECV_DEPTH` entries of `reqs`.
    pub(super) slots: Vec<RecvSlot>,
    /// Per network, its slots in posting order: MPI matches a message with the oldest
    /// posted receive of its tag, so this is arrival order. A slot leaves while its
    /// message is handled and comes back at the end when posted again.
    pub(super) order: [VecDeque<usize>; 2],
    /// The buffers of the credit receives (entries `CREDIT_BASE..SEND_BASE` of `reqs`),
    /// boxed: the `State` moves, buffers MPI writes into must not.
    pub(super) credit_bufs: Box<[[u32; 2]; CREDIT_DEPTH]>,
    /// The buffers of the sends, entry `SEND_BASE + i` of `reqs` for `sends[i]`.
    pub(super) sends: Vec<SendBuf>,
    pub(super) free: Vec<Buf>,
    /// Messages handled per peer and network since credits were last returned.
    pub(super) handled: Vec<[u32; 2]>,
    /// Messages handled from MPI so far (reported under `GEX_MPI_STATS`).
    pub(super) net_handled: u64,
    /// Scratch space of `MPI_Testsome`.
    pub(super) done_idx: Vec<c_int>,
    pub(super) done_status: Vec<ffi::MPI_Status>,
    /// The window of the host's AM queues (see `host`), freed by `finalize`.
    pub(super) host_win: ffi::MPI_Win,
    pub(super) finalized: bool,
}

impl State {
    /// The state of a rank with `size` ranks in the job, its receives posted.
    pub(super) fn new(size: usize, host_win: ffi::MPI_Win) -> State {
        let mut st = State {
            // SAFETY: reading an MPI constant.
            reqs: vec![unsafe { ffi::RSMPI_REQUEST_NULL }; SEND_BASE],
            slots: Vec::with_capacity(2 * RECV_DEPTH),
            order: [VecDeque::new(), VecDeque::new()],
            credit_bufs: Box::new([[0; 2]; CREDIT_DEPTH]),
            sends: Vec::new(),
            free: Vec::new(),
            handled: vec![[0; 2]; size],
            net_handled: 0,
            done_idx: Vec::new(),
            done_status: Vec::new(),
            host_win,
            finalized: false,
        };
        for (net, base) in RING_BASE.into_iter().enumerate() {
            for slot in base..base + RECV_DEPTH {
                st.slots.push(RecvSlot {
                    buf: None,
                    status: None,
                });
                st.repost(slot, net, Buf::new());
            }
        }
        for (i, b) in st.credit_bufs.iter_mut().enumerate() {
            st.reqs[CREDIT_BASE + i] = MpiConduit::post_credit(b);
        }
        st
    }

    /// Posts the receive of `slot` (of network `net`) into `buf`, at the end of the
    /// network's order.
    fn repost(&mut self, slot: usize, net: usize, mut buf: Buf) {
        // SAFETY: a null request is overwritten by MPI_Irecv.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer (a Box: its address is stable) stays in the slot until the
        // receive completes or is cancelled.
        unsafe {
            check(
                ffi::MPI_Irecv(
                    buf.ptr().cast(),
                    MSG_SIZE as c_int,
                    ffi::RSMPI_UINT8_T,
                    ffi::RSMPI_ANY_SOURCE,
                    [TAG_REQUEST, TAG_REPLY][net],
                    MpiConduit::world(),
                    &mut req,
                ),
                "MPI_Irecv",
            );
        }
        self.reqs[slot] = req;
        self.slots[slot].buf = Some(buf);
        self.order[net].push_back(slot);
    }

    /// Starts a send of `len` bytes at `ptr`, kept in `keep`, to `dest` with `tag`.
    fn isend(&mut self, ptr: *const u8, len: usize, dest: Rank, tag: c_int, keep: SendBuf) {
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
                    tag,
                    MpiConduit::world(),
                    &mut req,
                ),
                "MPI_Isend",
            );
        }
        self.reqs.push(req);
        self.sends.push(keep);
    }
}

impl MpiConduit {
    pub(super) fn post_credit(b: &mut [u32; 2]) -> ffi::MPI_Request {
        // SAFETY: a null request is overwritten by MPI_Irecv.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the box outlives the receive (kept in `State::credit_bufs`).
        unsafe {
            check(
                ffi::MPI_Irecv(
                    b.as_mut_ptr().cast(),
                    2,
                    ffi::RSMPI_UINT32_T,
                    ffi::RSMPI_ANY_SOURCE,
                    TAG_CREDIT,
                    Self::world(),
                    &mut req,
                ),
                "MPI_Irecv",
            );
        }
        req
    }

    /// One pass over every request with one `MPI_Testsome`: marks arrived messages
    /// ready in their slots, applies returned credits and posts their receives again,
    /// and frees completed sends.
    pub(super) fn test_all(&self, st: &mut State) {
        let count = st.reqs.len();
        st.done_idx.resize(count, 0);
        // SAFETY: a zeroed status is a valid out-parameter.
        st.done_status.resize(count, unsafe { std::mem::zeroed() });
        let mut outcount = 0;
        // A test call that finds nothing done runs one pass of the progress engine and
        // returns, without looking again at what that pass delivered: a second call
        // reports it in this poll instead of the next.
        for _ in 0..2 {
            // SAFETY: arrays of `count` requests, indices and statuses.
            unsafe {
                check(
                    ffi::MPI_Testsome(
                        count as c_int,
                        st.reqs.as_mut_ptr(),
                        &mut outcount,
                        st.done_idx.as_mut_ptr(),
                        st.done_status.as_mut_ptr(),
                    ),
                    "MPI_Testsome",
                );
            }
            if outcount != 0 {
                break;
            }
        }
        // MPI_UNDEFINED (negative) when every request is null: nothing to do.
        let outcount = outcount.max(0) as usize;
        let mut sends_done = false;
        for k in 0..outcount {
            let i = st.done_idx[k] as usize;
            let status = st.done_status[k];
            if i < CREDIT_BASE {
                st.slots[i].status = Some(status);
                self.ready[usize::from(i >= RING_BASE[1])].fetch_add(1, Ordering::Relaxed);
            } else if i < SEND_BASE {
                let b = &mut st.credit_bufs[i - CREDIT_BASE];
                let (net, n) = (b[0] as usize, b[1]);
                if net > 1 || status.MPI_SOURCE < 0 || status.MPI_SOURCE as Rank >= self.size {
                    fatal(&format!(
                        "rank {}: a corrupt credit message from rank {}",
                        self.rank, status.MPI_SOURCE
                    ));
                }
                self.in_flight[status.MPI_SOURCE as usize][net].fetch_sub(n, Ordering::AcqRel);
                st.reqs[i] = Self::post_credit(b);
            } else {
                sends_done = true;
            }
        }
        if sends_done {
            // Completed sends are null now: drop them, keeping `sends` beside `reqs`.
            let mut j = SEND_BASE;
            while j < st.reqs.len() {
                // SAFETY: reading an MPI constant.
                if st.reqs[j] == unsafe { ffi::RSMPI_REQUEST_NULL } {
                    st.reqs.swap_remove(j);
                    match st.sends.swap_remove(j - SEND_BASE) {
                        SendBuf::Msg(buf) => st.free.push(buf),
                        SendBuf::Credit(sent) => drop(sent),
                    }
                } else {
                    j += 1;
                }
            }
        }
    }

    /// Counts a handled message from `src` and returns credit when a batch is due.
    fn handled(&self, st: &mut State, src: Rank, net: usize) {
        st.net_handled += 1;
        let h = &mut st.handled[src as usize][net];
        *h += 1;
        if *h < CREDITS / 2 {
            return;
        }
        let b = Box::new([net as u32, *h]);
        *h = 0;
        st.isend(b.as_ptr().cast(), 8, src, TAG_CREDIT, SendBuf::Credit(b));
    }

    /// Tests every request once (when `test`) and handles up to `POLL_BATCH` arrived
    /// messages of one network, in arrival order, each without the lock held.
    pub(super) fn drain(&self, network: Network, test: bool, dispatch: fn(&Inbound<'_>)) -> usize {
        let net = net_index(network);
        if !test && self.ready[net].load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut st = self.state.lock();
        if st.finalized {
            return 0;
        }
        if test {
            self.test_all(&mut st);
        }
        let mut n = 0;
        while n < POLL_BATCH {
            let Some(&slot) = st.order[net].front() else {
                break;
            };
            let Some(status) = st.slots[slot].status.take() else {
                break;
            };
            st.order[net].pop_front();
            self.ready[net].fetch_sub(1, Ordering::Relaxed);
            let buf = st.slots[slot]
                .buf
                .take()
                .expect("a completed slot's buffer");
            // A handler may poll (a nested drain takes the next slots) or send.
            let (buf, src) = MutexGuard::unlocked(&mut st, || {
                let src = self.dispatch_one(&buf, &status, network, dispatch);
                (buf, src)
            });
            if st.finalized {
                break;
            }
            // Posted again only now, off the path from the arrival to the handler.
            st.repost(slot, net, buf);
            self.handled(&mut st, src, net);
            n += 1;
        }
        n
    }

    /// Checks an arrived message and runs its handler; returns its sender.
    fn dispatch_one(
        &self,
        buf: &Buf,
        status: &ffi::MPI_Status,
        network: Network,
        dispatch: fn(&Inbound<'_>),
    ) -> Rank {
        let mut count = 0;
        // SAFETY: a completed receive's status.
        unsafe {
            check(
                ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count),
                "MPI_Get_count",
            );
        }
        let h = buf.header();
        let src = status.MPI_SOURCE as Rank;
        let category = match h.category {
            0 => Category::Short,
            1 => Category::Medium,
            2 => Category::Long,
            c => fatal(&format!(
                "rank {}: message of unknown category {c}",
                self.rank
            )),
        };
        let payload_len = if category == Category::Medium {
            h.nbytes as usize
        } else {
            0
        };
        if h.src != src
            || h.nargs as usize > h.args.len()
            || (count as usize) < HEADER + payload_len
        {
            fatal(&format!(
                "rank {}: a corrupt {network:?} message from rank {src}",
                self.rank
            ));
        }
        let payload: &[u8] = match category {
            Category::Short => &[],
            // SAFETY: checked above that the bytes were received.
            Category::Medium => unsafe {
                std::slice::from_raw_parts(buf.const_ptr().add(HEADER), payload_len)
            },
            Category::Long => {
                let len = h.nbytes as usize;
                let local = self
                    .translate(self.rank, h.dest_addr as usize, len)
                    .unwrap_or_else(|_| {
                        fatal(&format!(
                            "rank {}: a Long payload from rank {src} outside the segment",
                            self.rank
                        ))
                    });
                // SAFETY: inside our segment (translate), delivered before the header.
                unsafe { std::slice::from_raw_parts(local as *const u8, len) }
            }
        };
        dispatch(&Inbound {
            src,
            handler: h.handler,
            category,
            network,
            args: &h.args[..h.nargs as usize],
            payload,
            dest_addr: h.dest_addr as usize,
        });
        src
    }

    /// Sends the message in a claimed buffer (`Conduit::am_commit`).
    pub(super) fn send(&self, mut out: NetOutbound, header: &AmHeader<'_>) {
        let mut h = WireHeader {
            src: self.rank,
            handler: header.handler,
            category: header.category as u8,
            nargs: header.args.len() as u8,
            nbytes: header.nbytes as u32,
            dest_addr: header.dest_addr as u64,
            ..WireHeader::default()
        };
        h.args[..header.args.len()].copy_from_slice(header.args);
        // SAFETY: the buffer is aligned for and larger than a header.
        unsafe { (out.buf.ptr() as *mut WireHeader).write(h) };
        let len = HEADER
            + if header.category == Category::Medium {
                header.nbytes
            } else {
                0
            };
        let ptr = out.buf.ptr();
        self.state.lock().isend(
            ptr,
            len,
            out.dest,
            tag_of(out.network),
            SendBuf::Msg(out.buf),
        );
    }
}
