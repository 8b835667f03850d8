//! Multi-rank benchmarks of the UPC++ layer against the `gex` layer it runs on:
//! `cargo bench --bench upcxx`.
//!
//! Over 600 lines on purpose: the file is the table of figures (its docs), each
//! figure's short measuring function, and the driver that relates them; the shared
//! parts live in `benches/common/` and `benches/upcxx/`.
//!
//! The bench process is the driver: it runs this same executable as one 2-rank job,
//! prints a table and writes `<target>/bench-results/upcxx.json` (see `common/mod.rs`;
//! same format as `gex.json`).
//!
//! The job initializes UPC++ and measures the `gex` baselines in the same processes, on
//! the `gex` team UPC++ runs on (`upcxx::backend::gex_team`, with this bench's AM
//! handlers registered on its endpoint right after `upcxx::init`), so that every UPC++
//! figure is compared with its `gex` counterpart measured in the same stretch of time:
//!
//! | result                          | what                                              | baseline (target)                  |
//! |---------------------------------|---------------------------------------------------|------------------------------------|
//! | `raw.pingpong_roundtrip`        | one cache line of rank 1's segment bounced with plain atomics (as in `gex.rs`): which cache regime the run saw | — |
//! | `gex.am_short_roundtrip`        | request_short to rank 1, whose handler does reply_short; rank 0 polls (as in `gex.rs`) | raw pingpong (—) |
//! | `upcxx.rpc_roundtrip`           | `upcxx::rpc(1, \|\| (), ()).wait()`; rank 1 makes user-level progress | `gex.am_short_roundtrip` (≤ 1.3×) |
//! | `upcxx.dist_object_fetch`       | `fetch(1).wait()` of a `DistObject<u64>`; rank 1 makes user-level progress | `upcxx.rpc_roundtrip` (≤ 1.3×) |
//! | `gex.put_pingpong_8B`           | put_blocking of an 8-byte flag into rank 1's segment, rank 1 spins on its own memory and puts it back (as in `gex.rs`) | raw pingpong (—) |
//! | `upcxx.rput_pingpong_8B`        | the same with `upcxx::rput(flag, gp).wait()`, rank 1 spinning on `gp.local()` | `gex.put_pingpong_8B` (≤ 1.2×) |
//! | `gex.get_8B`                    | get_blocking of a u64 of rank 1's segment         | raw pingpong (—)                   |
//! | `upcxx.rget_8B`                 | `upcxx::rget(gp).wait()` of a u64 on rank 1       | `gex.get_8B` (≤ 1.2×)              |
//! | `atomic.fetch_add_i64`          | a blocking `GEX_OP_FADD` on a line of rank 1's segment that rank 1 keeps touching (as in `gex.rs`) | — |
//! | `upcxx.atomic_fetch_add_i64`    | `AtomicDomain::<i64>::fetch_add(gp, 1, Relaxed).wait()` on the same line (`upcxx/atomic.rs`) | `atomic.fetch_add_i64` (≤ 1.2×) |
//! | `gex.am_medium_64B_rate`        | rank 0 streams 64-byte Medium requests to polling rank 1 (as in `gex.rs`) | —          |
//! | `upcxx.rpc_ff_rate`             | rank 0 streams `upcxx::rpc_ff(1, f, (seq,))`, rank 1 (making user-level progress) counts them; a sample ends when an `rpc` returns the count | `gex.am_medium_64B_rate` (—), absolute target ≥ 7e6 msg/s |
//! | `gex.put_bw_4MiB`               | put_blocking of 4 MiB into rank 1's segment       | —                                  |
//! | `upcxx.rput_bw_4MiB`            | `upcxx::rput_slice(src, gp).wait()` of 4 MiB      | `gex.put_bw_4MiB` (—)              |
//! | `upcxx.then_chain_per_future`   | rank 0 alone: a chain of N = 1000 `then`s on the non-ready future of one promise, then the promise's fulfilment runs them all; time / N | — |
//! | `upcxx.when_all_per_future`     | rank 0 alone: `when_all` of a `Vec` of N = 1000 futures of promises, the N fulfilments and the `wait`; time / N (creating the promises is not timed) | — |
//! | `upcxx.ready_future_then`       | rank 0 alone: `make_future(x).then(\|v\| v + 1).wait()` | —                           |
//! | `coll.barrier`                  | both ranks: `Team::barrier_nb().wait()` on the `gex` team UPC++ runs on (as in `coll.rs`) | — |
//! | `upcxx.barrier`                 | both ranks: `upcxx::coll::barrier(world())`       | `coll.barrier` (≤ 1.2×)            |
//! | `coll.reduce_all_f64`           | both ranks: `reduce_to_all_nb(..).wait()` of one f64 with `Op::Add` (as in `coll.rs`) | — |
//! | `upcxx.reduce_all_f64`          | both ranks: `upcxx::reduce_all(x, op_fast_add, world()).wait()` | `coll.reduce_all_f64` (≤ 1.2×) |
//! | `coll.broadcast_1MiB`           | both ranks: `broadcast_nb(root, ..).wait()` of 1 MiB between segment blocks, the root alternating, as bandwidth per receiver (as in `coll.rs`) | — |
//! | `coll.broadcast_inplace_1MiB`   | the same in place: one block per rank, `src == dst` at the root | — |
//! | `upcxx.broadcast_1MiB`          | the same with `coll::broadcast_global(buf, 1 MiB, root, world()).wait()`, in place (UPC++'s broadcast has one buffer) | `coll.broadcast_inplace_1MiB` (time ≤ 1.2×) |
//!
//! The rate target is absolute (there is no baseline it is a ratio of): the JSON result
//! carries it as `target_value` (in the result's unit, msg/s) with `target_value_is`
//! (`"min"`), next to the usual `name`, `value`, `unit`, `baseline`, `baseline_value`,
//! `ratio`, `target_ratio`, `target_is` keys (see `Report::to_json`).
//!
//! With `PGAS_BENCH_DIAG=1`, diagnostic figures (`diag.*`, no targets) that take the
//! UPC++ figures apart are measured too, interleaved with the latency group: idle
//! progress, the `pause` of a wait loop, an uncontended mutex, `rget` without its wait,
//! the RPC and AM round trips to rank 0 itself (software only), the per-message CPU cost
//! of `rpc_ff` and of a gex Medium of the same shape, and the gex round trip and stream
//! with the wire format of an RPC (see `upcxx/diag.rs`).
//!
//! The figures are measured in four groups, each interleaved as in `gex.rs` (a
//! calibration phase for each figure, then rounds of one ~30 ms sample of each; medians
//! of 9 samples after 2 warm-up rounds): the latencies and rates, the bandwidths, the
//! futures, and the collectives (see `upcxx/coll.rs`). On a VM the cost of a cache-line transfer between the two vCPUs can
//! switch between two levels for seconds at a time; `raw.pingpong_roundtrip` says which
//! one a run saw, and `PGAS_BENCH_VERBOSE=1` lists every sample, round by round.
//!
//! Data is checked once per figure (the ping-pongs spin on exact sequence values; gets
//! are compared with what the owner wrote; puts are read back through rank 0's mapping
//! and by rank 1 in its own memory; rank 1 checks every `rpc_ff` sequence number and
//! rank 0 the count it returns; the round-trip RPC path is checked with an RPC that
//! returns a value computed on rank 1; future results are compared with what the chain
//! or join must produce), so a broken path fails the job instead of reporting a great
//! number.
//!
//! This file holds the rank's figures and the driver; `upcxx/ctx.rs` what the ranks
//! allocate and exchange, `upcxx/coll.rs` the collective figures, `upcxx/atomic.rs` the
//! atomic ones, `upcxx/diag.rs` the diagnostic figures.

#[path = "upcxx/atomic.rs"]
mod atomic;
#[path = "upcxx/coll.rs"]
mod coll;
mod common;
#[path = "upcxx/ctx.rs"]
mod ctx;
#[path = "upcxx/diag.rs"]
mod diag;

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::am::*;
use common::figures::{self, page_aligned, Bench, Unit};
use common::rpc::serve_upcxx_until_stopped;
use common::{spin_until, time_iters, Measured, RankJob, Report, Sampler, TargetIs};
use ctx::{my_ptrs, owner_addr, word, Ctx, Ptrs, BW, GET_VALUE, MINE};
use diag::{diag, mcount, mping, mpong, msync, H_MCOUNT, H_MPING, H_MPONG, H_MSYNC};
use gex::{AmCategory, AmEntry, AmRole, Flags};
use upcxx::{GlobalPtr, Promise};

const BENCH: &str = "upcxx";
const JOB: &str = "full";
/// Each rank's shared segment (UPC++ takes all of it for its heap).
const SEGMENT: usize = 32 << 20;
/// Futures per chain or join.
const FUTURES_N: usize = 1000;
/// `upcxx.rpc_ff_rate` target, in msg/s.
const RPC_FF_TARGET: f64 = 7e6;
/// The UPC++ collectives' time is at most this multiple of the `gex` ones'.
const COLL_VS_GEX: f64 = 1.2;
/// Set (non-empty) to also measure the diagnostic figures (`diag.*`, see [`diag`]),
/// interleaved with the latency and rate figures they take apart.
const DIAG: &str = "PGAS_BENCH_DIAG";

fn handlers() -> Vec<AmEntry> {
    let mut entries = common::am::handlers();
    entries.extend([
        AmEntry::payload(
            "bench mping",
            AmCategory::Medium,
            AmRole::Request,
            10,
            mping,
        )
        .at(H_MPING),
        AmEntry::payload("bench mpong", AmCategory::Medium, AmRole::Reply, 10, mpong).at(H_MPONG),
        AmEntry::payload(
            "bench mcount",
            AmCategory::Medium,
            AmRole::Request,
            10,
            mcount,
        )
        .at(H_MCOUNT),
        AmEntry::short("bench msync", AmRole::Request, 0, msync).at(H_MSYNC),
    ]);
    entries
}

fn rank_main(job: RankJob) {
    upcxx::init();
    let team = upcxx::backend::gex_team();
    team.endpoint()
        .register_handlers(&mut handlers())
        .expect("register the bench's gex handlers");
    if upcxx::rank_n() != 2 {
        panic!("the upcxx benchmarks need exactly 2 ranks");
    }
    let me = Ptrs::allocate();
    MINE.set(me).expect("allocated once");
    upcxx::barrier(); // handlers registered and pointers published everywhere
    let rank = upcxx::rank_me();
    let peer = Ptrs::from_wire(upcxx::rpc(1 - rank, my_ptrs, ()).wait());
    assert_eq!(
        peer.get_word.where_(),
        1 - rank,
        "pointers from the other rank"
    );
    upcxx::barrier();
    let ctx = Ctx {
        team,
        rank,
        sampler: Sampler::from_env(),
        me,
        peer,
    };

    let atomics = atomic::Atomics::new(&ctx);
    let mut latency = vec![
        figures::raw_pingpong("raw.pingpong_roundtrip", word(ctx.rank1().raw_line)),
        figures::am_short_roundtrip("gex.am_short_roundtrip", team),
        rpc_roundtrip(&ctx),
        dist_object_fetch(&ctx),
        figures::put_pingpong(
            "gex.put_pingpong_8B",
            team,
            owner_addr(team, ctx.peer.gex_flag),
            word(ctx.me.gex_flag),
        ),
        upcxx_rput_pingpong(&ctx),
        figures::get_8b(
            "gex.get_8B",
            team,
            owner_addr(team, ctx.rank1().get_word),
            GET_VALUE,
        ),
        upcxx_rget_8b(&ctx),
        figures::am_medium_rate("gex.am_medium_64B_rate", team),
        common::rpc::rpc_ff_rate("upcxx.rpc_ff_rate", team),
    ];
    latency.extend(atomics.figures(&ctx));
    if std::env::var_os(DIAG).is_some_and(|v| !v.is_empty()) {
        latency.extend(diag(&ctx));
    }
    let mut results = measure(&ctx, latency);
    results.extend(measure(&ctx, bandwidth(&ctx)));
    let futures = vec![then_chain(), when_all_join(), ready_then()];
    results.extend(measure(&ctx, futures));
    results.extend(measure(&ctx, coll::figures(&ctx)));
    atomics.destroy();
    if ctx.rank == 0 {
        common::write_rank_results(&job, &results);
    }
    upcxx::finalize();
}

/// [`figures::measure`] with a UPC++ barrier (which makes user-level progress) ending
/// each phase.
fn measure(ctx: &Ctx, benches: Vec<Bench<'_>>) -> Vec<Measured> {
    figures::measure(ctx.rank, ctx.sampler, upcxx::barrier, benches)
}

/// `upcxx::rpc(1, || (), ()).wait()`: an empty function on rank 1 and the empty reply.
/// The path is checked once with an RPC whose result rank 1 computes.
fn rpc_roundtrip(ctx: &Ctx) -> Bench<'static> {
    let team = ctx.team;
    let mut checked = false;
    Bench::duo(
        "upcxx.rpc_roundtrip",
        Unit::Latency,
        move |iters| {
            let t = time_iters(iters, || {
                upcxx::rpc(1, || (), ()).wait();
            });
            if !checked {
                let x = black_box(0x5eed_1234_u64);
                let got = upcxx::rpc(1, |x: u64| (upcxx::rank_me(), !x), (x,)).wait();
                assert_eq!(got, (1, !x), "rpc round trip returned a wrong result");
                checked = true;
            }
            t
        },
        move || stop_server(team),
        serve_upcxx_until_stopped,
    )
}

/// `fetch(1).wait()` of a `DistObject<u64>` built on both ranks before the figures
/// (and kept for the rest of the job); rank 1 serves as for `rpc_roundtrip`.
fn dist_object_fetch(ctx: &Ctx) -> Bench<'static> {
    let team = ctx.team;
    let object: &'static upcxx::DistObject<u64> = Box::leak(Box::new(upcxx::DistObject::new(
        0xd15_0000 + u64::from(ctx.rank),
    )));
    let mut checked = false;
    Bench::duo(
        "upcxx.dist_object_fetch",
        Unit::Latency,
        move |iters| {
            let t = time_iters(iters, || {
                black_box(object.fetch(1).wait());
            });
            if !checked {
                assert_eq!(
                    object.fetch(1).wait(),
                    0xd15_0001,
                    "fetch read a wrong value"
                );
                checked = true;
            }
            t
        },
        move || stop_server(team),
        serve_upcxx_until_stopped,
    )
}

/// The same protocol with `upcxx::rput(v, gp).wait()`, each side spinning on its own
/// flag through `gp.local()`.
fn upcxx_rput_pingpong(ctx: &Ctx) -> Bench<'static> {
    let mine = word(ctx.me.upc_flag);
    let theirs = ctx.peer.upc_flag;
    let mut n = 1u64;
    let mut expect = 1u64;
    Bench::duo(
        "upcxx.rput_pingpong_8B",
        Unit::Latency,
        move |iters| {
            time_iters(iters, || {
                upcxx::rput(n, theirs).wait();
                let want = n + 1;
                spin_until(|| mine.load(Ordering::Acquire) == want);
                n += 2;
            })
        },
        move || upcxx::rput(u64::MAX, theirs).wait(),
        move || {
            while await_value(mine, expect) != u64::MAX {
                upcxx::rput(expect + 1, theirs).wait();
                expect += 2;
            }
            mine.store(0, Ordering::Relaxed);
        },
    )
}

/// `upcxx::rget(gp).wait()` of the same u64.
fn upcxx_rget_8b(ctx: &Ctx) -> Bench<'static> {
    let src = ctx.rank1().get_word;
    let mut checked = false;
    Bench::solo("upcxx.rget_8B", Unit::Latency, move |iters| {
        let mut v = 0;
        let t = time_iters(iters, || {
            v = upcxx::rget(black_box(src)).wait();
            black_box(v);
        });
        if !checked {
            assert_eq!(v, GET_VALUE, "upcxx rget_8B read wrong data");
            checked = true;
        }
        t
    })
}

const GEX_SEED: u64 = 0x5eed_0003;
const UPC_SEED: u64 = 0x5eed_0004;

/// The 4 MiB of `gp` (rank 1's), through this process's mapping.
///
/// # Safety
/// Nobody may write the range while the slice lives.
unsafe fn area(gp: GlobalPtr<u8>) -> &'static [u8] {
    // SAFETY: BW bytes of a segment block allocated for this; the caller excludes writes.
    unsafe { std::slice::from_raw_parts(gp.local(), BW) }
}

/// gex put_blocking and `upcxx::rput_slice(..).wait()` of 4 MiB from a private
/// page-aligned buffer of rank 0 into rank 1's page-aligned blocks (one per figure, each
/// with its own pattern), checked once by rank 0 and at the end by rank 1.
fn bandwidth(ctx: &Ctx) -> Vec<Bench<'static>> {
    let team = ctx.team;
    let r1 = ctx.rank1();
    let gex_src = page_aligned(BW, 0);
    fill_pattern(gex_src, GEX_SEED);
    let gex_src: &'static [u8] = gex_src;
    let upc_src = page_aligned(BW, 0);
    fill_pattern(upc_src, UPC_SEED);
    let upc_src: &'static [u8] = upc_src;
    let gex_dest = owner_addr(team, r1.gex_bw);
    let upc_dest = r1.upc_bw;
    let (mut gex_checked, mut upc_checked) = (false, false);
    vec![
        Bench::solo("gex.put_bw_4MiB", Unit::Bandwidth(BW), move |iters| {
            let t = time_iters(iters, || {
                team.put_blocking(1, gex_dest, black_box(gex_src), Flags::NONE)
                    .unwrap();
            });
            if !gex_checked {
                // SAFETY: only this figure writes the block, and not meanwhile.
                check_pattern(unsafe { area(r1.gex_bw) }, GEX_SEED, "gex put of 4 MiB");
                gex_checked = true;
            }
            t
        })
        .checked_by_rank1(move || {
            // SAFETY: as above, after rank 0's last put.
            let here = unsafe { area(r1.gex_bw) };
            check_pattern(here, GEX_SEED, "rank 1 reading the gex put of 4 MiB");
        }),
        Bench::solo("upcxx.rput_bw_4MiB", Unit::Bandwidth(BW), move |iters| {
            let t = time_iters(iters, || {
                upcxx::rput_slice(black_box(upc_src), upc_dest).wait();
            });
            if !upc_checked {
                // SAFETY: only this figure writes the block, and not meanwhile.
                check_pattern(unsafe { area(upc_dest) }, UPC_SEED, "upcxx rput of 4 MiB");
                upc_checked = true;
            }
            t
        })
        .checked_by_rank1(move || {
            // SAFETY: as above, after rank 0's last rput.
            let here = unsafe { area(upc_dest) };
            check_pattern(here, UPC_SEED, "rank 1 reading the upcxx rput of 4 MiB");
        }),
    ]
}

/// A chain of `FUTURES_N` `then`s on the non-ready future of a promise, made ready by
/// fulfilling the promise (which runs the whole chain), and the final `wait`; per `then`.
/// The promise is created outside the timed part.
fn then_chain() -> Bench<'static> {
    let mut checked = false;
    Bench::solo(
        "upcxx.then_chain_per_future",
        Unit::PerItem(FUTURES_N),
        move |iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let p = Promise::<u64>::new();
                let t0 = Instant::now();
                let mut f = p.get_future();
                for _ in 0..FUTURES_N {
                    f = f.then(|x: u64| x + 1);
                }
                assert!(!f.ready());
                p.fulfill_result(black_box(1));
                let v = f.wait();
                t += t0.elapsed();
                if !checked {
                    assert_eq!(
                        v,
                        1 + FUTURES_N as u64,
                        "the then chain computed a wrong value"
                    );
                    checked = true;
                }
                black_box(v);
            }
            t
        },
    )
}

/// `when_all` of a `Vec` of `FUTURES_N` futures of promises, the fulfilments that make
/// it ready and the final `wait`; per input future. Creating the promises and their
/// futures is not timed.
fn when_all_join() -> Bench<'static> {
    let mut checked = false;
    Bench::solo(
        "upcxx.when_all_per_future",
        Unit::PerItem(FUTURES_N),
        move |iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let promises: Vec<Promise<u64>> = (0..FUTURES_N).map(|_| Promise::new()).collect();
                let futures: Vec<_> = promises.iter().map(Promise::get_future).collect();
                let t0 = Instant::now();
                let all = upcxx::when_all(futures);
                assert!(!all.ready());
                for (i, p) in promises.iter().enumerate() {
                    p.fulfill_result(i as u64);
                }
                let v = all.wait();
                t += t0.elapsed();
                if !checked {
                    let want: Vec<u64> = (0..FUTURES_N as u64).collect();
                    assert_eq!(v, want, "when_all produced wrong values");
                    checked = true;
                }
                black_box(v);
                drop(promises);
            }
            t
        },
    )
}

/// `make_future(x).then(|v| v + 1).wait()`: a callback on a ready future.
fn ready_then() -> Bench<'static> {
    let mut checked = false;
    Bench::solo("upcxx.ready_future_then", Unit::Latency, move |iters| {
        let mut v = 0;
        let t0 = Instant::now();
        for i in 0..iters {
            v = upcxx::make_future(black_box(i)).then(|x: u64| x + 1).wait();
            black_box(v);
        }
        let t = t0.elapsed();
        if !checked {
            assert_eq!(v, iters, "then on a ready future computed a wrong value");
            checked = true;
        }
        t
    })
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

fn driver() -> i32 {
    // `cargo bench` passes `--bench` (and the user may pass more): nothing to parse.
    let machine = common::machine_note();
    let sampler = Sampler::from_env();
    eprintln!(
        "upcxx bench: a 2-rank job; {} samples of ~{} ms per figure; {machine}",
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    let timeout = Duration::from_secs(600);
    let mut report = Report::new(BENCH, 2);
    match common::run_job(BENCH, JOB, 2, SEGMENT, timeout) {
        Ok(results) => report.add(results),
        Err(e) => report.errors.push(e),
    }

    let raw_rt = "raw.pingpong_roundtrip";
    report.relate("gex.am_short_roundtrip", raw_rt, None);
    report.relate("gex.put_pingpong_8B", raw_rt, None);
    report.relate("gex.get_8B", raw_rt, None);
    report.relate(
        "upcxx.rpc_roundtrip",
        "gex.am_short_roundtrip",
        Some((1.3, TargetIs::Max)),
    );
    report.relate(
        "upcxx.rput_pingpong_8B",
        "gex.put_pingpong_8B",
        Some((1.2, TargetIs::Max)),
    );
    report.relate("upcxx.rget_8B", "gex.get_8B", Some((1.2, TargetIs::Max)));
    report.relate(
        "upcxx.atomic_fetch_add_i64",
        "atomic.fetch_add_i64",
        Some((1.2, TargetIs::Max)),
    );
    report.relate("upcxx.rpc_ff_rate", "gex.am_medium_64B_rate", None);
    report.target_value("upcxx.rpc_ff_rate", RPC_FF_TARGET, TargetIs::Min);
    report.relate("upcxx.rput_bw_4MiB", "gex.put_bw_4MiB", None);
    report.relate(
        "upcxx.dist_object_fetch",
        "upcxx.rpc_roundtrip",
        Some((1.3, TargetIs::Max)),
    );
    let max = Some((COLL_VS_GEX, TargetIs::Max));
    report.relate("upcxx.barrier", "coll.barrier", max);
    report.relate("upcxx.reduce_all_f64", "coll.reduce_all_f64", max);
    // A bandwidth: at most 1.2x the time is at least 1/1.2 of the bandwidth.
    // In place against in place: the root's buffer is the one its peer wrote in the
    // last operation (the roots alternate), so every line a receiver reads is dirty in
    // the other core's cache. That costs the gex call itself 0.6x of the bandwidth it
    // reaches from a source nobody writes, and at times 0.1x (both in-place figures
    // together): only a baseline with the same access pattern measures the layer.
    report.relate(
        "upcxx.broadcast_1MiB",
        "coll.broadcast_inplace_1MiB",
        Some((1.0 / COLL_VS_GEX, TargetIs::Min)),
    );
    // Diagnostics (PGAS_BENCH_DIAG=1; absent otherwise, and then ignored here).
    report.relate("diag.rget_progress_result", "gex.get_8B", None);
    report.relate(
        "diag.rpc_self_roundtrip",
        "diag.gex_am_short_self_roundtrip",
        None,
    );
    report.relate(
        "diag.rpc_ff_self_per_msg",
        "diag.gex_am_medium10_self_per_msg",
        None,
    );
    report.relate(
        "diag.gex_am_medium10_roundtrip",
        "gex.am_short_roundtrip",
        None,
    );
    report.relate(
        "diag.gex_am_medium10_8B_rate",
        "gex.am_medium_64B_rate",
        None,
    );

    report.finish(
        &format!(
            "upcxx benchmarks: ranks 0 and 1 of a 2-rank job, gex baselines on the same team \
             in the same job; {machine}"
        ),
        &[],
    )
}

fn main() {
    if let Some(job) = common::rank_job(JOB) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}
