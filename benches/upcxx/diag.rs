//! Diagnostics (`PGAS_BENCH_DIAG=1`): where the time of the UPC++ figures goes.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use gex::{Flags, Lc, Token};
use upcxx::ProgressLevel;

use crate::common::am::*;
use crate::common::figures::{Bench, Unit};
use crate::common::rpc::{round_trips, rpc_u64_roundtrip};
use crate::common::{spin_until, time_iters};
use crate::ctx::{Ctx, GET_VALUE};

// gex handler indices (fixed, so every rank agrees; UPC++ takes the highest free ones).
// Diagnostics only.
pub(crate) const H_MPING: u8 = 206;
pub(crate) const H_MPONG: u8 = 207;
pub(crate) const H_MCOUNT: u8 = 208;
pub(crate) const H_MSYNC: u8 = 209;

/// Rank 0: the sequence number carried back by the last Medium Pong.
pub(crate) static LAST_MPONG: AtomicU32 = AtomicU32::new(0);
/// Medium requests with RPC-sized headers counted by `mcount` (any rank).
pub(crate) static MCOUNT: AtomicU64 = AtomicU64::new(0);

/// A Medium request with RPC-sized headers: answered by a Medium reply of the same shape.
pub(crate) fn mping(token: &Token<'_>, _payload: &[u8], args: &[u32]) {
    token
        .reply_medium(H_MPONG, &[], Lc::Now, Flags::NONE, args)
        .unwrap();
}

pub(crate) fn mpong(_token: &Token<'_>, _payload: &[u8], args: &[u32]) {
    LAST_MPONG.store(args[0], Ordering::Relaxed);
}

/// Counts a Medium request with RPC-sized headers (checked by the sender's sync).
pub(crate) fn mcount(_token: &Token<'_>, payload: &[u8], _args: &[u32]) {
    if payload.len() == 8 {
        MCOUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// The argument words of an RPC message (`NARGS` = 10 in `upcxx::rpc`), carrying `seq`.
pub(crate) fn rpc_like_args(seq: u32) -> [u32; 10] {
    [seq, 1, 2, 3, 4, 5, 6, 7, 8, 9]
}

/// Figures that take the UPC++ ones apart, measured interleaved with them:
///
/// * `diag.gex_poll_idle`, `diag.upcxx_progress_idle`: one `gex::poll` / one
///   `upcxx::progress(User)` with nothing to do.
/// * `diag.spin_loop_hint`: one `std::hint::spin_loop` (x86 `pause`), which a
///   `Future::wait` that finds nothing to run executes before looking again.
/// * `diag.mutex_lock_unlock`: an uncontended `std::sync::Mutex` lock and unlock (the
///   cost a lock would add to a message; the RPC path takes none when the threads
///   involved hold the master personas).
/// * `diag.rget_no_wait`: the initiation of `upcxx::rget` (the future is dropped);
///   `diag.rget_progress_result`: `rget`, one explicit `progress(User)`, `into_result`:
///   what `rget(..).wait()` costs without its wait loop.
/// * `diag.rpc_u64_roundtrip`, `diag.rpc_u64_arg_roundtrip`: `upcxx.rpc_roundtrip` with
///   one `u64` argument, and a `u64` result or none: what an RPC that carries a payload
///   costs over one that is its header alone.
/// * `diag.gex_am_short_self_roundtrip`, `diag.rpc_self_roundtrip`: the round trips of
///   `gex.am_short_roundtrip` and `upcxx.rpc_roundtrip` with rank 0 itself as the target:
///   all the software, no cross-core transfer.
/// * `diag.gex_am_medium10_self_per_msg`, `diag.rpc_ff_self_per_msg`: a Medium request
///   with an RPC's 10 argument words and 8 bytes of payload, and an `rpc_ff` of one u64,
///   sent to rank 0 itself and run by a progress call every 16 messages: the CPU cost
///   of sending and running one message.
/// * `diag.gex_am_medium10_roundtrip`: `gex.am_short_roundtrip` with the wire format of
///   an RPC (Medium request and reply with 10 argument words).
/// * `diag.gex_am_medium10_8B_rate`: `gex.am_medium_64B_rate` with the wire format of
///   `upcxx.rpc_ff_rate` (10 argument words, 8 bytes of payload).
pub(crate) fn diag(ctx: &Ctx) -> Vec<Bench<'static>> {
    let team = ctx.team;
    let src = ctx.rank1().get_word;
    let m: &'static std::sync::Mutex<u64> = Box::leak(Box::new(std::sync::Mutex::new(0)));
    let (mut self_seq, mut mseq, mut msent, mut self_sent) = (0u32, 0u32, 0u64, 0u64);
    let mut arg_seq = 0u64;
    vec![
        Bench::solo("diag.gex_poll_idle", Unit::Latency, |iters| {
            time_iters(iters, gex::poll)
        }),
        Bench::solo("diag.upcxx_progress_idle", Unit::Latency, |iters| {
            time_iters(iters, || upcxx::progress(ProgressLevel::User))
        }),
        Bench::solo("diag.spin_loop_hint", Unit::Latency, |iters| {
            time_iters(iters, std::hint::spin_loop)
        }),
        Bench::solo("diag.mutex_lock_unlock", Unit::Latency, move |iters| {
            time_iters(iters, || *black_box(m).lock().unwrap() += 1)
        }),
        Bench::solo("diag.rget_no_wait", Unit::Latency, move |iters| {
            time_iters(iters, || drop(black_box(upcxx::rget(black_box(src)))))
        }),
        Bench::solo("diag.rget_progress_result", Unit::Latency, move |iters| {
            let mut v = 0;
            let t = time_iters(iters, || {
                let f = upcxx::rget(black_box(src));
                upcxx::progress(ProgressLevel::User);
                v = black_box(f.into_result());
            });
            assert_eq!(v, GET_VALUE, "rget read wrong data");
            t
        }),
        Bench::solo(
            "diag.gex_am_short_self_roundtrip",
            Unit::Latency,
            move |iters| {
                time_iters(iters, || {
                    self_seq = self_seq.wrapping_add(1);
                    let want = self_seq;
                    team.request_short(0, H_PING, &[want], Flags::NONE).unwrap();
                    spin_until(|| {
                        gex::poll();
                        LAST_PONG.load(Ordering::Relaxed) == want
                    });
                })
            },
        ),
        rpc_u64_roundtrip("diag.rpc_u64_roundtrip", team),
        round_trips("diag.rpc_u64_arg_roundtrip", team, move || {
            arg_seq += 1;
            upcxx::rpc(
                1,
                |x: u64| {
                    black_box(x);
                },
                (arg_seq,),
            )
            .wait();
        }),
        Bench::solo("diag.rpc_self_roundtrip", Unit::Latency, |iters| {
            time_iters(iters, || upcxx::rpc(0, || (), ()).wait())
        }),
        Bench::solo(
            "diag.gex_am_medium10_self_per_msg",
            Unit::Latency,
            move |iters| {
                let t = time_iters(iters, || {
                    self_sent += 1;
                    let payload = self_sent.to_le_bytes();
                    let args = rpc_like_args(self_sent as u32);
                    team.request_medium(0, H_MCOUNT, &payload, Lc::Now, Flags::NONE, &args)
                        .unwrap();
                    if self_sent.is_multiple_of(16) {
                        gex::poll();
                    }
                });
                while MCOUNT.load(Ordering::Relaxed) < self_sent {
                    gex::poll();
                }
                assert_eq!(
                    MCOUNT.load(Ordering::Relaxed),
                    self_sent,
                    "self Medium count"
                );
                t
            },
        ),
        Bench::solo("diag.rpc_ff_self_per_msg", Unit::Latency, |iters| {
            let mut k = 0u32;
            time_iters(iters, || {
                upcxx::rpc_ff(
                    0,
                    |x: u64| {
                        black_box(x);
                    },
                    (u64::from(k),),
                );
                k += 1;
                if k.is_multiple_of(16) {
                    upcxx::progress(ProgressLevel::User);
                }
            })
        }),
        Bench::duo(
            "diag.gex_am_medium10_roundtrip",
            Unit::Latency,
            move |iters| {
                time_iters(iters, || {
                    mseq = mseq.wrapping_add(1);
                    let want = mseq;
                    let args = rpc_like_args(want);
                    team.request_medium(1, H_MPING, &[0; 8], Lc::Now, Flags::NONE, &args)
                        .unwrap();
                    spin_until(|| {
                        gex::poll();
                        LAST_MPONG.load(Ordering::Relaxed) == want
                    });
                })
            },
            move || stop_server(team),
            serve_until_stopped,
        ),
        Bench::duo(
            "diag.gex_am_medium10_8B_rate",
            Unit::Rate("msg/s"),
            move |iters| {
                let t0 = Instant::now();
                for _ in 0..iters {
                    msent += 1;
                    let args = rpc_like_args(msent as u32);
                    team.request_medium(
                        1,
                        H_MCOUNT,
                        &msent.to_le_bytes(),
                        Lc::Now,
                        Flags::NONE,
                        &args,
                    )
                    .unwrap();
                }
                // Rank 1 counts in MCOUNT; a Short request behind the stream answers once
                // every Medium before it has run.
                let acks = SYNC_ACKS.load(Ordering::Acquire);
                team.request_short(1, H_MSYNC, &[], Flags::NONE).unwrap();
                spin_until(|| {
                    gex::poll();
                    SYNC_ACKS.load(Ordering::Acquire) > acks
                });
                let received = u64::from(ACK_RECEIVED.load(Ordering::Relaxed));
                assert_eq!(
                    received,
                    msent & 0xffff_ffff,
                    "Medium (RPC-sized) stream count"
                );
                t0.elapsed()
            },
            move || stop_server(team),
            serve_until_stopped,
        ),
    ]
}

/// Answers with rank 1's `MCOUNT` (low 32 bits), in a SyncAck.
pub(crate) fn msync(token: &Token<'_>, _args: &[u32]) {
    let received = MCOUNT.load(Ordering::Relaxed) as u32;
    token
        .reply_short(H_SYNC_ACK, &[received, 0], Flags::NONE)
        .unwrap();
}
