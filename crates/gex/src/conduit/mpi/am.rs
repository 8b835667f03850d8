//! The Active Message transport of the mpi conduit between hosts: the wire format, the
//! rings of pre-posted receives, sends kept until complete, and the credits (see the
//! parent module's documentation).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use super::boot::{check, fatal};
use super::{MpiConduit, CREDITS, MSG_SIZE, POLL_BATCH};
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

/// A pre-posted receive.
pub(super) struct Posted {
    pub(super) req: ffi::MPI_Request,
    pub(super) buf: Buf,
}

/// Everything touched by MPI calls, under the one lock.
pub(super) struct State {
    pub(super) recvs: [VecDeque<Posted>; 2],
    pub(super) credit_recvs: VecDeque<(ffi::MPI_Request, Box<[u32; 2]>)>,
    pub(super) sends: Vec<(ffi::MPI_Request, Buf)>,
    pub(super) credit_sends: Vec<(ffi::MPI_Request, Box<[u32; 2]>)>,
    pub(super) free: Vec<Buf>,
    /// Messages handled per peer and network since credits were last returned.
    pub(super) handled: Vec<[u32; 2]>,
    /// Messages handled from MPI so far (reported under `GEX_MPI_STATS`).
    pub(super) net_handled: u64,
    /// The window of the host's AM queues (see `host`), freed by `finalize`.
    pub(super) host_win: ffi::MPI_Win,
    pub(super) finalized: bool,
}

impl MpiConduit {
    pub(super) fn post(state_buf: Buf, network: Network) -> Posted {
        let mut buf = state_buf;
        // SAFETY: a null request is overwritten by MPI_Irecv.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer lives in `Posted` (a Box: its address is stable) until the
        // receive completes or is cancelled.
        unsafe {
            check(
                ffi::MPI_Irecv(
                    buf.ptr().cast(),
                    MSG_SIZE as c_int,
                    ffi::RSMPI_UINT8_T,
                    ffi::RSMPI_ANY_SOURCE,
                    tag_of(network),
                    Self::world(),
                    &mut req,
                ),
                "MPI_Irecv",
            );
        }
        Posted { req, buf }
    }

    pub(super) fn post_credit(mut b: Box<[u32; 2]>) -> (ffi::MPI_Request, Box<[u32; 2]>) {
        // SAFETY: as in `post`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the box outlives the receive (kept beside its request).
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
        (req, b)
    }

    /// Tests a request; on completion returns its status.
    pub(super) fn test(req: &mut ffi::MPI_Request) -> Option<ffi::MPI_Status> {
        let mut flag = 0;
        // SAFETY: a zeroed status is a valid out-parameter.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: valid request and out-pointers.
        unsafe { check(ffi::MPI_Test(req, &mut flag, &mut status), "MPI_Test") };
        (flag != 0).then_some(status)
    }

    /// Completes finished sends and applies returned credits.
    pub(super) fn progress_locked(&self, st: &mut State) {
        let mut i = 0;
        while i < st.sends.len() {
            if Self::test(&mut st.sends[i].0).is_some() {
                let (_, buf) = st.sends.swap_remove(i);
                st.free.push(buf);
            } else {
                i += 1;
            }
        }
        st.credit_sends
            .retain_mut(|(req, _)| Self::test(req).is_none());
        while let Some((req, _)) = st.credit_recvs.front_mut() {
            let Some(status) = Self::test(req) else { break };
            let (_, b) = st.credit_recvs.pop_front().expect("tested");
            let (net, n) = (b[0] as usize, b[1]);
            if net > 1 || status.MPI_SOURCE < 0 || status.MPI_SOURCE as Rank >= self.size {
                fatal(&format!(
                    "rank {}: a corrupt credit message from rank {}",
                    self.rank, status.MPI_SOURCE
                ));
            }
            self.in_flight[status.MPI_SOURCE as usize][net].fetch_sub(n, Ordering::AcqRel);
            st.credit_recvs.push_back(Self::post_credit(b));
        }
    }

    /// Counts a handled message from `src` and returns credit when a batch is due.
    pub(super) fn handled(&self, st: &mut State, src: Rank, net: usize) {
        st.net_handled += 1;
        let h = &mut st.handled[src as usize][net];
        *h += 1;
        if *h < CREDITS / 2 {
            return;
        }
        let b = Box::new([net as u32, *h]);
        *h = 0;
        // SAFETY: as in `post`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the box is kept with its request until the send completes.
        unsafe {
            check(
                ffi::MPI_Isend(
                    b.as_ptr().cast(),
                    2,
                    ffi::RSMPI_UINT32_T,
                    src as c_int,
                    TAG_CREDIT,
                    Self::world(),
                    &mut req,
                ),
                "MPI_Isend",
            );
        }
        st.credit_sends.push((req, b));
    }

    /// Completes sends and applies credits, once per poll.
    pub(super) fn progress(&self) {
        let mut st = self.state.lock();
        if !st.finalized {
            self.progress_locked(&mut st);
        }
    }

    /// Handles up to `POLL_BATCH` arrived messages of one network.
    pub(super) fn drain(&self, network: Network, dispatch: fn(&Inbound<'_>)) -> usize {
        let net = net_index(network);
        let mut n = 0;
        while n < POLL_BATCH {
            let (mut buf, status) = {
                let mut st = self.state.lock();
                if st.finalized {
                    return n;
                }
                let Some(head) = st.recvs[net].front_mut() else {
                    return n;
                };
                let Some(status) = Self::test(&mut head.req) else {
                    return n;
                };
                let done = st.recvs[net].pop_front().expect("tested");
                let spare = st.free.pop().unwrap_or_else(Buf::new);
                st.recvs[net].push_back(Self::post(spare, network));
                (done.buf, status)
            };
            let mut count = 0;
            // SAFETY: a completed receive's status.
            unsafe {
                check(
                    ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count),
                    "MPI_Get_count",
                );
            }
            let h = *buf.header();
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
                    std::slice::from_raw_parts(buf.ptr().add(HEADER), payload_len)
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
            let msg = Inbound {
                src,
                handler: h.handler,
                category,
                network,
                args: &h.args[..h.nargs as usize],
                payload,
                dest_addr: h.dest_addr as usize,
            };
            dispatch(&msg);
            let mut st = self.state.lock();
            st.free.push(buf);
            self.handled(&mut st, src, net);
            n += 1;
        }
        n
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
        let mut st = self.state.lock();
        // SAFETY: as in `post`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer is kept with its request until the send completes.
        unsafe {
            check(
                ffi::MPI_Isend(
                    out.buf.ptr().cast(),
                    len as c_int,
                    ffi::RSMPI_UINT8_T,
                    out.dest as c_int,
                    tag_of(out.network),
                    Self::world(),
                    &mut req,
                ),
                "MPI_Isend",
            );
        }
        st.sends.push((req, out.buf));
        self.progress_locked(&mut st);
    }
}
