//! The UPC++ RPC figures that several benches measure (`upcxx.rs`, and `app.rs` for its
//! baselines): rank 0 calls, rank 1 makes user-level progress and runs the calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gex::Team;
use upcxx::ProgressLevel;

use super::am::{stop_server, STOP};
use super::figures::{Bench, Unit};
use super::{spin_until, time_iters};

/// Rank 1's side of the RPC figures: make user-level progress (running the RPCs) until
/// rank 0 says stop (its stop is a gex AM, run by the poll inside progress).
pub(crate) fn serve_upcxx_until_stopped() {
    spin_until(|| {
        upcxx::progress(ProgressLevel::User);
        STOP.load(Ordering::Relaxed)
    });
    STOP.store(false, Ordering::Relaxed);
}

/// A round-trip figure: rank 0 times `call` (an RPC to rank 1 and its wait) once per
/// iteration; rank 1 makes user-level progress, running the calls.
pub(crate) fn round_trips(
    name: impl Into<String>,
    team: Team,
    mut call: impl FnMut() + 'static,
) -> Bench<'static> {
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| time_iters(iters, &mut call),
        move || stop_server(team),
        serve_upcxx_until_stopped,
    )
}

/// `upcxx::rpc(1, |x| x + 1, (n,)).wait()`, each result checked: a round trip whose call
/// and reply both carry a payload (a Medium each way).
pub(crate) fn rpc_u64_roundtrip(name: impl Into<String>, team: Team) -> Bench<'static> {
    let name = name.into();
    let what = name.clone();
    let mut n = 0u64;
    round_trips(name, team, move || {
        n += 1;
        let got = upcxx::rpc(1, |x: u64| x + 1, (n,)).wait();
        assert_eq!(got, n + 1, "{what}: wrong result");
    })
}

/// Rank 1: `rpc_ff` messages run, and how many carried an unexpected sequence number
/// (run by the master persona only; atomics for the statics).
static FF_RECEIVED: AtomicU64 = AtomicU64::new(0);
static FF_BAD: AtomicU64 = AtomicU64::new(0);

fn ff_count(seq: u64) {
    let n = FF_RECEIVED.load(Ordering::Relaxed) + 1;
    if seq != n {
        FF_BAD.fetch_add(1, Ordering::Relaxed);
    }
    FF_RECEIVED.store(n, Ordering::Relaxed);
}

/// `upcxx.rpc_ff_rate`: rank 0 streams `rpc_ff(1, ff_count, (seq,))`; rank 1 makes
/// user-level progress and counts. A sample ends with an `rpc` returning rank 1's count
/// (RPCs from one rank run in order, so every earlier `rpc_ff` has run), which rank 0
/// checks. `team` is the gex team UPC++ runs on, with the `am.rs` handlers.
pub(crate) fn rpc_ff_rate(name: impl Into<String>, team: Team) -> Bench<'static> {
    let mut sent = 0u64;
    Bench::duo(
        name,
        Unit::Rate("msg/s"),
        move |iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                sent += 1;
                upcxx::rpc_ff(1, ff_count, (sent,));
            }
            let (received, bad) = upcxx::rpc(
                1,
                || {
                    (
                        FF_RECEIVED.load(Ordering::Relaxed),
                        FF_BAD.load(Ordering::Relaxed),
                    )
                },
                (),
            )
            .wait();
            let t = t0.elapsed();
            assert!(
                received == sent && bad == 0,
                "rpc_ff stream: sent {sent}, rank 1 ran {received} ({bad} out of sequence)"
            );
            t
        },
        move || stop_server(team),
        serve_upcxx_until_stopped,
    )
}

/// `upcxx.rpc_inflight_rate`: rank 0 starts round-trip `rpc(1, |x| x + 1, (x,))` in
/// batches of `inflight`, all in flight together, and completes each batch with one
/// `when_all` over its futures; per RPC. Rank 0 checks every result.
pub(crate) fn rpc_inflight_rate(
    name: impl Into<String>,
    team: Team,
    inflight: usize,
) -> Bench<'static> {
    let mut next = 0u64;
    Bench::duo(
        name,
        Unit::Rate("msg/s"),
        move |iters| {
            let t0 = Instant::now();
            let mut left = iters;
            while left > 0 {
                let batch = left.min(inflight as u64);
                let first = next;
                let futures: Vec<_> = (0..batch)
                    .map(|i| upcxx::rpc(1, |x: u64| x + 1, (first + i,)))
                    .collect();
                next += batch;
                left -= batch;
                let got = upcxx::when_all(futures).wait();
                let wrong = got
                    .iter()
                    .zip(first..)
                    .filter(|&(&v, x)| v != x + 1)
                    .count();
                assert_eq!(wrong, 0, "rpc round trips in flight: {wrong} wrong results");
            }
            t0.elapsed()
        },
        move || stop_server(team),
        serve_upcxx_until_stopped,
    )
}
