//! The raw MPI baselines: the same operations as the gex figures, made directly with
//! MPI calls (rsmpi's `mpi::ffi`, as the conduit makes them) in the same processes and
//! interleaved with the gex figures, on a communicator and a window of their own.
//!
//! The calls: `MPI_Send`/`MPI_Recv` ping-pong of 8 bytes; a stream of 64-byte
//! `MPI_Isend`s into pre-posted `MPI_Irecv`s; `MPI_Put` of 8 bytes and of
//! 1 MiB and `MPI_Get` of 8 bytes, each followed by `MPI_Win_flush` (remote completion,
//! what gex's blocking put and get wait for), in a passive-target epoch opened once
//! (`MPI_Win_lock_all`, MPI 4.1 §12.5.3) on an `MPI_Win_create` window (as the
//! conduit's, see [`Raw::new`]);
//! `MPI_Fetch_and_op` of an `MPI_INT64_T` with `MPI_SUM`, then `MPI_Win_flush`;
//! `MPI_Barrier`; `MPI_Bcast` of 1 MiB, the root alternating between the two ranks.
//!
//! Rank 1 waits for rank 0's messages in a blocking `MPI_Recv` (where Open MPI makes
//! progress, as the gex figures' rank 1 polls), and the collective figures learn from
//! such a message how many operations to join. Every figure checks its data: the pong
//! carries the ping's value plus one, puts are read back with `MPI_Get`, gets return
//! what rank 1 wrote, each fetch-add returns the previous one's value plus one, the
//! first barrier orders a put before it, the first two broadcasts (one per root) arrive
//! in a poisoned buffer and must hold their root's pattern.
//!
//! The file is over 600 lines: one method per baseline, each beside the others so that
//! the raw calls of every figure read alike; a split would separate them by no line
//! of their own.

use std::ffi::{c_int, c_void};
use std::time::Instant;

use mpi::ffi;

use crate::common::am::{check_pattern, fill_pattern, MEDIUM_BYTES};
use crate::common::figures::{page_aligned, Bench, Unit};
use crate::common::time_iters;
use crate::{BCAST_BYTES, BW_BYTES, BW_SEED, GET_VALUE};

/// Tags on the baselines' communicator.
const TAG_CTL: c_int = 1;
const TAG_PING: c_int = 2;
const TAG_STREAM: c_int = 3;
const TAG_ANY_PING: c_int = 4;

/// The stream's receives rank 1 keeps posted and sends rank 0 keeps in flight (the mpi
/// conduit's receives per network and credits per peer).
const STREAM_RECVS: usize = 8;
const STREAM_SENDS: usize = 16;

/// Offsets in the window.
const PUT_OFF: usize = 0;
const GET_OFF: usize = 64;
const FADD_OFF: usize = 128;
const ARRIVE_OFF: usize = 192;
const BW_OFF: usize = 4096;
const WIN_BYTES: usize = BW_OFF + BW_BYTES;
/// Seeds of the broadcast patterns (plus the root's rank).
const BCAST_SEED: u64 = 0x5eed_0b00;
const POISON: u8 = 0xee;

#[track_caller]
fn check(rc: c_int, call: &str) {
    assert_eq!(rc, 0, "{call} failed (MPI error {rc})");
}

/// The baselines' communicator and window (the calls are made only from the thread
/// that runs the figures, and never while a gex call runs: the conduit initialized MPI
/// with `MPI_THREAD_SERIALIZED`).
#[derive(Clone, Copy)]
pub(crate) struct Raw {
    comm: ffi::MPI_Comm,
    win: ffi::MPI_Win,
    base: *mut u8,
    rank: c_int,
}

impl Raw {
    /// Collective over `MPI_COMM_WORLD`: a duplicate of it (so these messages never
    /// meet the conduit's), and the window, locked for the life of the job. The window
    /// is made as the conduit makes its window for the ranks of other hosts,
    /// `MPI_Win_create` over memory allocated beforehand, so that a baseline differs
    /// from its gex figure by the conduit's own work only (Open MPI serves an
    /// `MPI_Win_allocate` window whose ranks share a machine through shared memory,
    /// a path the conduit's window does not get).
    pub(crate) fn new() -> Raw {
        // SAFETY: MPI is initialized (the conduit's bootstrap); valid out-pointers; the
        // window's memory is MPI's, WIN_BYTES long.
        unsafe {
            let mut comm = ffi::RSMPI_COMM_WORLD;
            check(
                ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm),
                "MPI_Comm_dup",
            );
            let mut rank = 0;
            check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank");
            let base = page_aligned(WIN_BYTES, 0).as_mut_ptr();
            let mut win = std::mem::zeroed();
            check(
                ffi::MPI_Win_create(
                    base.cast::<c_void>(),
                    WIN_BYTES as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    comm,
                    &mut win,
                ),
                "MPI_Win_create",
            );
            (base.add(GET_OFF) as *mut u64).write(GET_VALUE);
            check(ffi::MPI_Win_lock_all(0, win), "MPI_Win_lock_all");
            check(ffi::MPI_Win_sync(win), "MPI_Win_sync");
            check(ffi::MPI_Barrier(comm), "MPI_Barrier");
            Raw {
                comm,
                win,
                base,
                rank,
            }
        }
    }

    /// Collective: ends the epoch, frees the window and the communicator.
    pub(crate) fn free(mut self) {
        // SAFETY: every rank calls this after its last figure.
        unsafe {
            check(ffi::MPI_Win_unlock_all(self.win), "MPI_Win_unlock_all");
            check(ffi::MPI_Win_free(&mut self.win), "MPI_Win_free");
            check(ffi::MPI_Comm_free(&mut self.comm), "MPI_Comm_free");
        }
    }

    /// Collective: whether `ok` holds on every rank.
    pub(crate) fn all(&self, ok: bool) -> bool {
        let mine = c_int::from(ok);
        let mut all = 0;
        // SAFETY: one int in, one out, on every rank of the communicator.
        unsafe {
            check(
                ffi::MPI_Allreduce(
                    (&mine as *const c_int).cast(),
                    (&mut all as *mut c_int).cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    ffi::RSMPI_LAND,
                    self.comm,
                ),
                "MPI_Allreduce",
            )
        };
        all != 0
    }

    fn send(&self, to: c_int, tag: c_int, v: u64) {
        // SAFETY: 8 bytes from a live u64.
        unsafe {
            check(
                ffi::MPI_Send(
                    (&v as *const u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    to,
                    tag,
                    self.comm,
                ),
                "MPI_Send",
            )
        };
    }

    fn recv(&self, from: c_int, tag: c_int) -> u64 {
        let mut v = 0u64;
        // SAFETY: 8 bytes into a live u64.
        unsafe {
            check(
                ffi::MPI_Recv(
                    (&mut v as *mut u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    from,
                    tag,
                    self.comm,
                    ffi::RSMPI_STATUS_IGNORE,
                ),
                "MPI_Recv",
            )
        };
        v
    }

    fn flush(&self, target: c_int) {
        // SAFETY: the window is locked (lock_all) until `free`.
        unsafe { check(ffi::MPI_Win_flush(target, self.win), "MPI_Win_flush") };
    }

    fn put(&self, src: &[u8], target: c_int, disp: usize) {
        // SAFETY: `src` is live until the flush that follows every call; the target
        // range lies inside the window.
        unsafe {
            check(
                ffi::MPI_Put(
                    src.as_ptr().cast(),
                    src.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    target,
                    disp as ffi::MPI_Aint,
                    src.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                ),
                "MPI_Put",
            )
        };
    }

    fn get(&self, dst: &mut [u8], target: c_int, disp: usize) {
        // SAFETY: as for `put`, `dst` written until the flush.
        unsafe {
            check(
                ffi::MPI_Get(
                    dst.as_mut_ptr().cast(),
                    dst.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    target,
                    disp as ffi::MPI_Aint,
                    dst.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                ),
                "MPI_Get",
            )
        };
    }

    fn barrier(&self) {
        // SAFETY: every rank of the communicator makes the same calls.
        unsafe { check(ffi::MPI_Barrier(self.comm), "MPI_Barrier") };
    }

    /// A word of this rank's window, read after `MPI_Win_sync` (unified model).
    fn own_word(&self, off: usize) -> u64 {
        // SAFETY: inside the window, 8-byte aligned; the sync orders the remote
        // accesses that completed before it.
        unsafe {
            check(ffi::MPI_Win_sync(self.win), "MPI_Win_sync");
            (self.base.add(off) as *const u64).read_volatile()
        }
    }

    /// Rank 1's part of a figure only rank 0 acts in: wait in `MPI_Recv` for the stop.
    fn wait_stop(self) -> impl FnMut() {
        move || {
            self.recv(0, TAG_CTL);
        }
    }

    fn stop(self) -> impl FnMut() {
        move || self.send(1, TAG_CTL, 0)
    }

    /// `MPI_Send`/`MPI_Recv` ping-pong of one u64: rank 0 sends the odd `n`, rank 1
    /// answers `n + 1`, which rank 0 checks; `u64::MAX` stops rank 1.
    pub(crate) fn send_recv_pingpong(self, name: String) -> Bench<'static> {
        let mut n = 1u64;
        Bench::duo(
            name,
            Unit::Latency,
            move |iters| {
                time_iters(iters, || {
                    self.send(1, TAG_PING, n);
                    let got = self.recv(1, TAG_PING);
                    assert_eq!(got, n + 1, "send/recv ping-pong: wrong pong");
                    n += 2;
                })
            },
            move || self.send(1, TAG_PING, u64::MAX),
            move || loop {
                let v = self.recv(0, TAG_PING);
                if v == u64::MAX {
                    return;
                }
                self.send(0, TAG_PING, v + 1);
            },
        )
    }

    /// The ping-pong of [`send_recv_pingpong`](Self::send_recv_pingpong) made as a
    /// message layer over MPI must make it, since it cannot know who sends next: each
    /// rank keeps a receive from any source posted (`MPI_Irecv` with
    /// `MPI_ANY_SOURCE`), posted again after its next send, sends by `MPI_Isend` +
    /// `MPI_Test`, and finds an arrival by `MPI_Test` in a loop. What MPI itself costs
    /// under `am_short_roundtrip`, the floor of that figure.
    pub(crate) fn anysource_pingpong(self, name: String) -> Bench<'static> {
        let mut n = 1u64;
        Bench::duo(
            name,
            Unit::Latency,
            move |iters| {
                let (mut ping, mut pong) = (Box::new(0u64), Box::new(0u64));
                let mut recv = Self::null();
                time_iters(iters, || {
                    *ping = n;
                    let send = self.isend_test(1, &ping);
                    if recv == Self::null() {
                        recv = self.post_any(&mut pong);
                    }
                    self.test_until_done(&mut recv);
                    self.complete(send);
                    assert_eq!(*pong, n + 1, "any-source ping-pong: wrong pong");
                    n += 2;
                })
            },
            move || self.send(1, TAG_ANY_PING, u64::MAX),
            move || {
                let (mut ping, mut pong) = (Box::new(0u64), Box::new(0u64));
                let mut recv = self.post_any(&mut ping);
                loop {
                    self.test_until_done(&mut recv);
                    if *ping == u64::MAX {
                        return;
                    }
                    *pong = *ping + 1;
                    let send = self.isend_test(0, &pong);
                    recv = self.post_any(&mut ping);
                    self.complete(send);
                }
            },
        )
    }

    /// A receive of one u64 into `into` from any source on [`TAG_ANY_PING`].
    fn post_any(&self, into: &mut u64) -> ffi::MPI_Request {
        let mut req = Self::null();
        // SAFETY: each caller keeps `into` (boxed: it does not move) until it has tested
        // the receive to completion.
        unsafe {
            self.irecv(
                (into as *mut u64).cast(),
                8,
                ffi::RSMPI_ANY_SOURCE,
                TAG_ANY_PING,
                &mut req,
            )
        };
        req
    }

    /// `MPI_Irecv` of `len` bytes into `buf` from `src` on `tag`, its request in `req`.
    ///
    /// # Safety
    /// `buf` must stay live and unmoved until the receive completes or is cancelled.
    unsafe fn irecv(
        &self,
        buf: *mut u8,
        len: usize,
        src: c_int,
        tag: c_int,
        req: &mut ffi::MPI_Request,
    ) {
        // SAFETY: the caller's guarantee for `buf`.
        unsafe {
            check(
                ffi::MPI_Irecv(
                    buf.cast(),
                    len as c_int,
                    ffi::RSMPI_UINT8_T,
                    src,
                    tag,
                    self.comm,
                    req,
                ),
                "MPI_Irecv",
            )
        };
    }

    /// `MPI_Isend` of `*v` to `to` on [`TAG_ANY_PING`], then one `MPI_Test` (a small
    /// send completes there, eagerly); the caller keeps `v` until
    /// [`complete`](Self::complete).
    fn isend_test(&self, to: c_int, v: &u64) -> ffi::MPI_Request {
        let mut req = Self::null();
        let mut done = 0;
        // SAFETY: the caller keeps the value until the send completes.
        unsafe {
            check(
                ffi::MPI_Isend(
                    (v as *const u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    to,
                    TAG_ANY_PING,
                    self.comm,
                    &mut req,
                ),
                "MPI_Isend",
            );
            check(
                ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                "MPI_Test",
            );
        }
        req
    }

    /// Waits for a send of [`isend_test`](Self::isend_test) (at once if it completed).
    fn complete(&self, mut req: ffi::MPI_Request) {
        // SAFETY: the send's request; a null one returns at once.
        unsafe {
            check(
                ffi::MPI_Wait(&mut req, ffi::RSMPI_STATUS_IGNORE),
                "MPI_Wait",
            )
        };
    }

    /// `MPI_Test` of `req` until it completes (and MPI sets it null).
    fn test_until_done(&self, req: &mut ffi::MPI_Request) {
        let mut done = 0;
        while done == 0 {
            // SAFETY: a pending receive.
            unsafe {
                check(
                    ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                    "MPI_Test",
                )
            };
        }
    }

    /// `MPI_REQUEST_NULL`: a request that is complete, or not started.
    fn null() -> ffi::MPI_Request {
        // SAFETY: reading an MPI constant.
        unsafe { ffi::RSMPI_REQUEST_NULL }
    }

    /// A stream of [`MEDIUM_BYTES`]-byte `MPI_Isend`s to rank 1, at most
    /// [`STREAM_SENDS`] in flight (the oldest is waited for before its buffer is used
    /// again), each carrying its sequence number; rank 1 keeps [`STREAM_RECVS`]
    /// `MPI_Irecv`s posted, each posted again as `MPI_Waitany` reports it. A sample ends
    /// with the count sent (an `MPI_Send` on another tag); rank 1 answers once it has
    /// received that many, saying whether their sequence numbers were `1..=count` and
    /// every payload right. A count of 0 stops rank 1.
    pub(crate) fn isend_rate(self, name: String) -> Bench<'static> {
        let mut sent = 0u64;
        let mut bufs = vec![[0u8; MEDIUM_BYTES]; STREAM_SENDS];
        let mut reqs = vec![Self::null(); STREAM_SENDS];
        let (mut received, mut sum) = (0u64, 0u64);
        Bench::duo(
            name,
            Unit::Rate("msg/s"),
            move |iters| {
                let t0 = Instant::now();
                for _ in 0..iters {
                    let k = (sent % STREAM_SENDS as u64) as usize;
                    sent += 1;
                    // SAFETY: a pending (or null) send of `bufs[k]`, then a new send of
                    // it, live in `bufs` until waited for.
                    unsafe {
                        check(
                            ffi::MPI_Wait(&mut reqs[k], ffi::RSMPI_STATUS_IGNORE),
                            "MPI_Wait",
                        );
                        bufs[k][..8].copy_from_slice(&sent.to_le_bytes());
                        bufs[k][MEDIUM_BYTES - 1] = (MEDIUM_BYTES - 1) as u8;
                        check(
                            ffi::MPI_Isend(
                                bufs[k].as_ptr().cast(),
                                MEDIUM_BYTES as c_int,
                                ffi::RSMPI_UINT8_T,
                                1,
                                TAG_STREAM,
                                self.comm,
                                &mut reqs[k],
                            ),
                            "MPI_Isend",
                        );
                    }
                }
                // SAFETY: the pending (or null) sends of `bufs`.
                unsafe {
                    check(
                        ffi::MPI_Waitall(
                            STREAM_SENDS as c_int,
                            reqs.as_mut_ptr(),
                            ffi::RSMPI_STATUSES_IGNORE,
                        ),
                        "MPI_Waitall",
                    )
                };
                self.send(1, TAG_CTL, sent);
                let ok = self.recv(1, TAG_CTL);
                assert_eq!(ok, 1, "MPI_Isend stream: rank 1 received wrong data");
                t0.elapsed()
            },
            self.stop(),
            move || self.serve_stream(&mut received, &mut sum),
        )
    }

    /// Rank 1's part of [`Raw::isend_rate`], until the stop; `received` and `sum` (of
    /// the sequence numbers) carry over from one sample to the next.
    fn serve_stream(self, received: &mut u64, sum: &mut u64) {
        let null = Self::null();
        let mut bufs = vec![[0u8; MEDIUM_BYTES]; STREAM_RECVS];
        let mut ctl = Box::new(0u64);
        // The stream's receives, then the control message's.
        let mut reqs = vec![null; STREAM_RECVS + 1];
        let post = |buf: *mut u8, len: usize, tag: c_int, req: &mut ffi::MPI_Request| {
            // SAFETY: `buf` is live and unmoved until the receive completes or is
            // cancelled below.
            unsafe { self.irecv(buf, len, 0, tag, req) };
        };
        for (b, r) in bufs.iter_mut().zip(reqs.iter_mut()) {
            post(b.as_mut_ptr(), MEDIUM_BYTES, TAG_STREAM, r);
        }
        let ctl_ptr: *mut u8 = (&mut *ctl as *mut u64).cast();
        post(ctl_ptr, 8, TAG_CTL, &mut reqs[STREAM_RECVS]);
        let (mut target, mut bad) = (None::<u64>, 0u64);
        loop {
            let mut i: c_int = 0;
            // SAFETY: the posted receives above.
            unsafe {
                check(
                    ffi::MPI_Waitany(
                        reqs.len() as c_int,
                        reqs.as_mut_ptr(),
                        &mut i,
                        ffi::RSMPI_STATUS_IGNORE,
                    ),
                    "MPI_Waitany",
                )
            };
            let i = i as usize;
            if i < STREAM_RECVS {
                let b = &mut bufs[i];
                let seq = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                bad += u64::from(b[MEDIUM_BYTES - 1] != (MEDIUM_BYTES - 1) as u8);
                *received += 1;
                *sum = sum.wrapping_add(seq);
                post(b.as_mut_ptr(), MEDIUM_BYTES, TAG_STREAM, &mut reqs[i]);
            } else if *ctl == 0 {
                break;
            } else {
                target = Some(*ctl);
                post(ctl_ptr, 8, TAG_CTL, &mut reqs[STREAM_RECVS]);
            }
            if let Some(n) = target.filter(|&n| *received == n) {
                let ok = bad == 0 && *sum == n.wrapping_mul(n + 1) / 2;
                self.send(0, TAG_CTL, u64::from(ok));
                target = None;
            }
        }
        for r in reqs.iter_mut().filter(|r| **r != null) {
            // SAFETY: a pending receive, cancelled and then completed.
            unsafe {
                check(ffi::MPI_Cancel(r), "MPI_Cancel");
                check(ffi::MPI_Wait(r, ffi::RSMPI_STATUS_IGNORE), "MPI_Wait");
            }
        }
    }

    /// `MPI_Put` of 8 bytes to rank 1, then `MPI_Win_flush`; the last value put is read
    /// back with `MPI_Get` once.
    pub(crate) fn put_flush_8b(self, name: String) -> Bench<'static> {
        let mut n = 0u64;
        let mut checked = false;
        Bench::duo(
            name,
            Unit::Latency,
            move |iters| {
                let t = time_iters(iters, || {
                    n += 1;
                    self.put(&n.to_ne_bytes(), 1, PUT_OFF);
                    self.flush(1);
                });
                if !checked {
                    let mut back = [0u8; 8];
                    self.get(&mut back, 1, PUT_OFF);
                    self.flush(1);
                    assert_eq!(u64::from_ne_bytes(back), n, "MPI_Put: wrong data");
                    checked = true;
                }
                t
            },
            self.stop(),
            self.wait_stop(),
        )
    }

    /// `MPI_Get` of 8 bytes that rank 1 wrote at setup, then `MPI_Win_flush`; checked
    /// once.
    pub(crate) fn get_flush_8b(self, name: String) -> Bench<'static> {
        let mut word = [0u8; 8];
        let mut checked = false;
        Bench::duo(
            name,
            Unit::Latency,
            move |iters| {
                let t = time_iters(iters, || {
                    self.get(&mut word, 1, GET_OFF);
                    self.flush(1);
                });
                if !checked {
                    assert_eq!(u64::from_ne_bytes(word), GET_VALUE, "MPI_Get: wrong data");
                    checked = true;
                }
                t
            },
            self.stop(),
            self.wait_stop(),
        )
    }

    /// `MPI_Put` of [`BW_BYTES`] to rank 1, then `MPI_Win_flush`, as bandwidth; read
    /// back once.
    pub(crate) fn put_flush_bw(self, name: String) -> Bench<'static> {
        let src = page_aligned(BW_BYTES, 0);
        fill_pattern(src, BW_SEED);
        let src: &'static [u8] = src;
        let mut checked = false;
        Bench::duo(
            name,
            Unit::Bandwidth(BW_BYTES),
            move |iters| {
                let t = time_iters(iters, || {
                    self.put(src, 1, BW_OFF);
                    self.flush(1);
                });
                if !checked {
                    let back = page_aligned(BW_BYTES, 0);
                    self.get(back, 1, BW_OFF);
                    self.flush(1);
                    check_pattern(back, BW_SEED, "MPI_Put of 1 MiB read back");
                    checked = true;
                }
                t
            },
            self.stop(),
            self.wait_stop(),
        )
    }

    /// `MPI_Fetch_and_op` of 1 (`MPI_SUM`, `MPI_INT64_T`) on a word of rank 1, then
    /// `MPI_Win_flush`; nobody else adds to it, so each returns the previous plus one.
    pub(crate) fn fetch_and_op(self, name: String) -> Bench<'static> {
        let mut next = 0i64;
        Bench::duo(
            name,
            Unit::Latency,
            move |iters| {
                let one = 1i64;
                time_iters(iters, || {
                    let mut old = -1i64;
                    // SAFETY: one i64 each way; `old` is live until the flush.
                    unsafe {
                        check(
                            ffi::MPI_Fetch_and_op(
                                (&one as *const i64).cast(),
                                (&mut old as *mut i64).cast(),
                                ffi::RSMPI_INT64_T,
                                1,
                                FADD_OFF as ffi::MPI_Aint,
                                ffi::RSMPI_SUM,
                                self.win,
                            ),
                            "MPI_Fetch_and_op",
                        )
                    };
                    self.flush(1);
                    assert_eq!(old, next, "MPI_Fetch_and_op: wrong value fetched");
                    next += 1;
                })
            },
            self.stop(),
            self.wait_stop(),
        )
    }

    /// A collective figure: rank 0 tells rank 1 how many operations to join (before
    /// timing), then both perform `op(j)` for the same `j = 0, 1, 2, …`; 0 operations
    /// end rank 1's part.
    fn collective(self, name: String, unit: Unit, op: impl FnMut(u64) + 'static) -> Bench<'static> {
        let op = std::rc::Rc::new(std::cell::RefCell::new(op));
        let mut done = 0u64;
        let mut served = 0u64;
        let serve_op = op.clone();
        Bench::duo(
            name,
            unit,
            move |iters| {
                self.send(1, TAG_CTL, iters);
                let mut op = op.borrow_mut();
                let t0 = Instant::now();
                for j in done..done + iters {
                    op(j);
                }
                done += iters;
                t0.elapsed()
            },
            self.stop(),
            move || loop {
                let n = self.recv(0, TAG_CTL);
                if n == 0 {
                    return;
                }
                let mut op = serve_op.borrow_mut();
                for j in served..served + n {
                    op(j);
                }
                served += n;
            },
        )
    }

    /// `MPI_Barrier`; before the first, each rank puts 1 into the other's arrival word,
    /// which it must find set after it.
    pub(crate) fn barrier_figure(self, name: String) -> Bench<'static> {
        let other = 1 - self.rank;
        self.collective(name, Unit::Latency, move |j| {
            if j == 0 {
                self.put(&1u64.to_ne_bytes(), other, ARRIVE_OFF);
                self.flush(other);
            }
            self.barrier();
            if j == 0 {
                assert_eq!(
                    self.own_word(ARRIVE_OFF),
                    1,
                    "MPI_Barrier: rank {} left before rank {other} entered",
                    self.rank
                );
            }
        })
    }

    /// `MPI_Bcast` of [`BCAST_BYTES`], operation `j` rooted at rank `j mod 2`: the root
    /// sends its pattern, the other receives into its destination (checked for
    /// `j < 2`, poisoned before).
    pub(crate) fn bcast(self, name: String) -> Bench<'static> {
        let src = page_aligned(BCAST_BYTES, 0);
        fill_pattern(src, BCAST_SEED + self.rank as u64);
        let dst = page_aligned(BCAST_BYTES, POISON);
        self.collective(name, Unit::Latency, move |j| {
            let root = (j % 2) as c_int;
            let buf = if root == self.rank {
                src.as_mut_ptr()
            } else {
                dst.as_mut_ptr()
            };
            // SAFETY: a live buffer of BCAST_BYTES on every rank.
            unsafe {
                check(
                    ffi::MPI_Bcast(
                        buf.cast(),
                        BCAST_BYTES as c_int,
                        ffi::RSMPI_UINT8_T,
                        root,
                        self.comm,
                    ),
                    "MPI_Bcast",
                )
            };
            if j < 2 && root != self.rank {
                let what = format!("MPI_Bcast: rank {} receiving from {root}", self.rank);
                check_pattern(dst, BCAST_SEED + root as u64, &what);
            }
        })
    }
}

/// The baselines of one job, in the order they are measured, named `<prefix><figure>`.
pub(crate) fn figures(raw: Raw, prefix: &str) -> Vec<Bench<'static>> {
    let n = |s: &str| format!("{prefix}{s}");
    vec![
        raw.send_recv_pingpong(n("send_recv_pingpong")),
        raw.anysource_pingpong(n("anysource_pingpong")),
        raw.isend_rate(n("isend_rate")),
        raw.put_flush_8b(n("put_flush_8B")),
        raw.get_flush_8b(n("get_flush_8B")),
        raw.put_flush_bw(n("put_flush_bw_1MiB")),
        raw.fetch_and_op(n("fetch_and_op_i64")),
        raw.barrier_figure(n("barrier")),
        raw.bcast(n("bcast_1MiB")),
    ]
}
