//! Multi-rank benchmarks of the `gex` communication layer: `cargo bench --bench gex`.
//!
//! The bench process is the driver: it runs this same executable as a 2-rank job (the
//! full suite) and as a 4-rank job (the latency pair again, with ranks 2 and 3 idle in a
//! barrier as a real program's other ranks would be), then prints a table and writes
//! `<target>/bench-results/gex.json` (see `common/mod.rs`).
//!
//! Every job also measures the physical floor in the same run:
//! * `raw.pingpong_roundtrip`: ranks 0 and 1 bounce one cache line of rank 1's segment
//!   (mapped in both processes) with plain atomics, no library call: the cost of moving
//!   anything between two processes and back.
//! * `raw.pingpong_2lines_roundtrip` (diagnostic): the same with the put ping-pong's
//!   protocol, each side writing a word of the other's segment and spinning on its own.
//! * `raw.memcpy_4MiB`: single-core `copy_nonoverlapping` of 4 MiB between two private,
//!   pre-faulted buffers of rank 0.
//!
//! and relates the gex figures to them:
//!
//! | result                          | what                                              | baseline (target)                  |
//! |---------------------------------|---------------------------------------------------|------------------------------------|
//! | `gex.am_short_roundtrip`        | request_short to rank 1, whose handler does reply_short; rank 0 polls for the reply | raw pingpong (≤ 2.5×) |
//! | `gex.am_medium_64B_rate`        | rank 0 streams 64-byte Medium requests to polling rank 1 | —                            |
//! | `gex.put_pingpong_8B`           | rank 0 puts an 8-byte flag into rank 1's segment, rank 1 spins on its own segment memory and puts it back | raw pingpong (≤ 1.3×; `raw.pingpong_2lines_roundtrip`, related to the same baseline, is this protocol's floor) |
//! | `gex.get_8B`                    | get_blocking of 8 bytes from rank 1               | raw pingpong (—)                   |
//! | `gex.put_bw_<size>`, `gex.get_bw_<size>` | put_blocking/get_blocking, rank 0 ↔ rank 1's segment, 8 B .. 4 MiB | raw memcpy (`put_bw_4MiB` ≥ 0.85×) |
//! | `*_4ranks`                      | the same round trips in a 4-rank job              | the 2-rank figure (AM: ≤ 2.0×)     |
//! | `vis.strided_transpose_put`     | a 1 MiB transposing strided put to rank 1 (`gex/vis.rs`) | `raw.strided_transpose_copy` (≥ 0.7×) |
//! | `vis.indexed_put_64x64B`        | one indexed put of 64 blocks of 64 B to rank 1    | `vis.single_puts_64x64B` (≤ 0.8×)  |
//! | `raw.atomic_fetch_add_i64`      | a CPU fetch-add on a word of a cache line of rank 1's segment that rank 1 keeps touching (`common/atomics.rs`) | — |
//! | `atomic.fetch_add_i64`          | a blocking `GEX_OP_FADD` of an i64 atomic domain on the same line of rank 1's segment | raw fetch-add (≤ 1.5×) |
//! | `atomic.fetch_add_i64_rate`     | both ranks make `GEX_OP_FADD`s on one word of rank 0's segment; operations per second of the job | — |
//!
//! The figures are measured in two groups, latency (with the raw ping-pongs) and
//! bandwidth (with memcpy), each interleaved: a calibration phase for each figure, then
//! rounds of one ~30 ms sample of each (medians of 9 samples after 2 warm-up rounds), so
//! that a slow stretch of a busy machine hits a baseline and the figures compared with it
//! alike. Calibration starts with one untimed operation (`Sampler::calibrate`): the first
//! put into a part of a segment nobody touched yet pays a page fault per 4 KiB page (the
//! kernel allocates shared memory on first touch), ~30 times the copy, and a calibration
//! that timed it would pick a few iterations where ~300 are right; such ~1 ms samples all
//! start with caches the other figures of the round have emptied, and read ~0.6 of the
//! steady state. (On a VM the cost of a cache-line transfer between the two vCPUs can
//! also switch between two levels while the job runs; `PGAS_BENCH_VERBOSE=1` lists every
//! sample, round by round, to see it.)
//!
//! Data is checked once per figure (the pong carries the ping's sequence number, the
//! receiver of the Medium stream checks payloads and counts, gets are compared with
//! what the owner wrote, puts are read back through the owner's mapping and by the
//! owner itself), so a broken path fails the job instead of reporting a great number.

mod common;
#[path = "gex/vis.rs"]
mod vis;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::am::*;
use common::figures::{self, page_aligned, Bench, Unit};
use common::{spin_until, time_iters, Measured, RankJob, Report, Sampler, TargetIs};
use gex::{Client, Flags, Segment, Team};

const BENCH: &str = "gex";
/// The full suite, run with 2 ranks.
const JOB_FULL: &str = "full";
/// The round trips only, run with 4 ranks.
const JOB_LATENCY: &str = "latency";

// Layout of each rank's segment.
/// The cache line of the raw ping-pong (in rank 1's segment).
const RAW_OFF: usize = 0;
/// The flag of the put ping-pong (in both segments).
const FLAG_OFF: usize = 4096;
/// The words of the two-line raw ping-pong (in both segments).
const LINES_OFF: usize = 2 * 4096;
/// 8 bytes that rank 1 writes and rank 0 gets.
const GET_OFF: usize = 3 * 4096;
const GET_VALUE: u64 = 0x0123_4567_89ab_cdef;
/// The atomic figures' lines (`common/atomics.rs`): in rank 1's segment the target
/// line (raw word, gex word, rank 1's word) and rank 1's stop flag; in rank 0's the
/// word of the rate figure and its control words, one line each.
const ATOMIC_OFF: usize = 4 * 4096;
/// What rank 0 gets (`BW_MAX` bytes that rank 1 writes at setup; rank 1's segment).
const GET_AREA: usize = 1 << 20;
/// Where rank 0 puts (rank 1's segment; see `put_offsets`).
const PUT_AREA: usize = 6 << 20;
const BW_MAX: usize = 4 << 20;
const SEGMENT: usize = 16 << 20;

/// Transfer sizes of the bandwidth figures: 8 B .. 2 MiB by powers of 4, and 4 MiB.
const BW_SIZES: [usize; 11] = [
    8,
    32,
    128,
    512,
    2 << 10,
    8 << 10,
    32 << 10,
    128 << 10,
    512 << 10,
    2 << 20,
    4 << 20,
];

// Handler indices (fixed, so every rank agrees).

// ---------------------------------------------------------------------------------------
// Handlers and their state
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// Rank side
// ---------------------------------------------------------------------------------------

/// What every measurement needs.
struct Ctx {
    team: Team,
    segment: Segment,
    sampler: Sampler,
    /// Appended to the names of figures measured in a job of more than 2 ranks.
    suffix: String,
}

impl Ctx {
    fn rank(&self) -> u32 {
        self.team.rank()
    }

    fn name(&self, base: &str) -> String {
        format!("{base}{}", self.suffix)
    }

    /// An atomic word at `offset` of this rank's own segment.
    fn own_word(&self, offset: usize) -> &'static AtomicU64 {
        assert!(offset + 8 <= self.segment.size() && offset & 7 == 0);
        // SAFETY: inside the attached segment (mapped for the life of the process),
        // 8-byte aligned; the segment is only accessed through atomics at this offset.
        unsafe { &*(self.segment.addr().add(offset) as *const AtomicU64) }
    }

    /// An atomic word at `offset` of `rank`'s segment, through this process's mapping.
    fn peer_word(&self, rank: u32, offset: usize) -> &'static AtomicU64 {
        assert!(offset + 8 <= SEGMENT && offset & 7 == 0);
        // SAFETY: as for `own_word`, in the peer's segment mapped into this process.
        unsafe { &*((self.peer_local(rank) + offset) as *const AtomicU64) }
    }

    /// Where `rank`'s segment is mapped in this process.
    fn peer_local(&self, rank: u32) -> usize {
        let b = self.team.segment_bound(rank).expect("segments attached");
        b.local_addr.expect("smp maps every segment")
    }

    /// Address of `offset` in `rank`'s segment, in the owner's address space (for RMA).
    fn remote(&self, rank: u32, offset: usize) -> usize {
        self.team
            .segment_bound(rank)
            .expect("segments attached")
            .owner_addr
            + offset
    }
}

fn rank_main(job: RankJob) {
    let (client, ep, team) = Client::init("GEXBENCH", Flags::NONE).expect("gex::Client::init");
    ep.register_handlers(&mut common::am::handlers())
        .expect("register handlers");
    if team.size() < 2 {
        panic!("the gex benchmarks need at least 2 ranks");
    }
    let segment = Segment::attach(&team, SEGMENT).expect("attach the segment");
    let suffix = if team.size() > 2 {
        format!("_{}ranks", team.size())
    } else {
        String::new()
    };
    let ctx = Ctx {
        team,
        segment,
        sampler: Sampler::from_env(),
        suffix,
    };
    if ctx.rank() == 1 {
        // SAFETY: 8 bytes at GET_OFF of our own segment; nobody else writes them.
        unsafe { (segment.addr().add(GET_OFF) as *mut u64).write_volatile(GET_VALUE) };
        // SAFETY: the get area lies inside our segment; nobody else writes it.
        let area = unsafe { std::slice::from_raw_parts_mut(segment.addr().add(GET_AREA), BW_MAX) };
        fill_pattern(area, GET_SEED);
    }
    team.barrier(); // registration and setup are done everywhere

    // Two groups, each interleaved with its baseline and measured one after the other,
    // so that each group's rounds (and the baseline's samples) span a short stretch.
    let team = ctx.team;
    let other = if ctx.rank() == 0 { 1 } else { 0 };
    let mut latency = vec![figures::raw_pingpong(
        ctx.name("raw.pingpong_roundtrip"),
        ctx.peer_word(1, RAW_OFF),
    )];
    if job.job == JOB_FULL {
        latency.push(raw_pingpong_2lines(&ctx));
    }
    latency.push(figures::am_short_roundtrip(
        ctx.name("gex.am_short_roundtrip"),
        team,
    ));
    let mut results = Vec::new();
    if job.job == JOB_FULL {
        latency.push(figures::am_medium_rate(
            ctx.name("gex.am_medium_64B_rate"),
            team,
        ));
        latency.push(figures::put_pingpong(
            ctx.name("gex.put_pingpong_8B"),
            team,
            ctx.remote(other, FLAG_OFF),
            ctx.own_word(FLAG_OFF),
        ));
        latency.push(figures::get_8b(
            ctx.name("gex.get_8B"),
            team,
            ctx.remote(1, GET_OFF),
            GET_VALUE,
        ));
        latency.extend(atomic_figures(&ctx));
        results.extend(measure(&ctx, latency));
        let mut bandwidth = vec![figures::raw_memcpy(ctx.name("raw.memcpy_4MiB"), BW_MAX)];
        bandwidth.extend(put_bw(&ctx));
        bandwidth.extend(get_bw(&ctx));
        results.extend(measure(&ctx, bandwidth));
        results.extend(measure(&ctx, vis::figures(&ctx)));
    } else {
        results.extend(measure(&ctx, latency));
    }
    if ctx.rank() == 0 {
        common::write_rank_results(&job, &results);
    }
    client.finalize();
}

/// [`figures::measure`] on this job's team, its barrier ending each phase.
fn measure(ctx: &Ctx, benches: Vec<Bench<'_>>) -> Vec<Measured> {
    figures::measure(ctx.rank(), ctx.sampler, || ctx.team.barrier(), benches)
}

/// The atomic figures (collective: every rank creates the domain).
fn atomic_figures(ctx: &Ctx) -> Vec<Bench<'static>> {
    use common::atomics::{self, Line, RateControl};
    let ad = gex::AtomicDomain::create(
        &ctx.team,
        gex::ops::Dt::I64,
        gex::ops::Op::FAdd | gex::ops::Op::Get,
        Flags::NONE,
    );
    let line = |target| Line {
        target: ctx.peer_word(1, ATOMIC_OFF + target),
        touched: ctx.peer_word(1, ATOMIC_OFF + 16),
        stop: ctx.peer_word(1, ATOMIC_OFF + 64),
    };
    let word = |k: usize| ctx.peer_word(0, ATOMIC_OFF + 64 * k);
    let control = RateControl {
        go: word(1),
        iters: word(2),
        done: word(3),
        stop: word(4),
    };
    vec![
        atomics::raw_fetch_add(ctx.name("raw.atomic_fetch_add_i64"), line(0)),
        atomics::gex_fetch_add(
            ctx.name("atomic.fetch_add_i64"),
            ad.clone(),
            ctx.remote(1, ATOMIC_OFF + 8),
            line(8),
        ),
        atomics::gex_fetch_add_rate(
            ctx.name("atomic.fetch_add_i64_rate"),
            ad,
            0,
            ctx.remote(0, ATOMIC_OFF),
            control,
        ),
    ]
}

/// The raw ping-pong with the protocol of `gex.put_pingpong_8B`: rank 0 writes a word
/// of rank 1's segment and spins on a word of its own, rank 1 the other way round (two
/// cache lines, each written by the side that does not read it). A diagnostic floor for
/// the put ping-pong: it needs more cache-line transfers per round trip than one line.
fn raw_pingpong_2lines(ctx: &Ctx) -> Bench<'static> {
    let mut n = 1u64;
    let mut expect = 1u64;
    let (to1, mine0) = (ctx.peer_word(1, LINES_OFF), ctx.own_word(LINES_OFF));
    let (mine1, to0) = (ctx.own_word(LINES_OFF), ctx.peer_word(0, LINES_OFF));
    Bench::duo(
        ctx.name("raw.pingpong_2lines_roundtrip"),
        Unit::Latency,
        move |iters| {
            time_iters(iters, || {
                to1.store(n, Ordering::Release);
                let want = n + 1;
                spin_until(|| mine0.load(Ordering::Acquire) == want);
                n += 2;
            })
        },
        move || to1.store(u64::MAX, Ordering::Release),
        move || {
            while await_value(mine1, expect) != u64::MAX {
                to0.store(expect + 1, Ordering::Release);
                expect += 2;
            }
            mine1.store(0, Ordering::Relaxed);
        },
    )
}

const GET_SEED: u64 = 0x5eed_0001;
const PUT_SEED: u64 = 0x5eed_0002;

/// Where the puts of each size land in rank 1's put area: one range per size, so that
/// each size's data is checked on its own.
fn put_offsets() -> Vec<usize> {
    let mut off = PUT_AREA;
    BW_SIZES
        .iter()
        .map(|&size| {
            let here = off;
            off += size.next_multiple_of(4096);
            assert!(off <= SEGMENT);
            here
        })
        .collect()
}

/// put_blocking of each size from a private page-aligned buffer of rank 0 into rank 1's
/// segment.
/// Rank 0 checks the data once through its mapping of rank 1's segment, and rank 1 checks
/// it in its own memory at the end.
fn put_bw(ctx: &Ctx) -> Vec<Bench<'static>> {
    let team = ctx.team;
    let src = page_aligned(BW_MAX, 0);
    fill_pattern(src, PUT_SEED);
    let src: &'static [u8] = src;
    let peer = ctx.peer_local(1);
    let own = ctx.segment.addr() as usize;
    BW_SIZES
        .iter()
        .zip(put_offsets())
        .map(|(&size, off)| {
            let dest = ctx.remote(1, off);
            let mut checked = false;
            let name = ctx.name(&format!("gex.put_bw_{}", common::size_name(size)));
            Bench::solo(name, Unit::Bandwidth(size), move |iters| {
                let t = time_iters(iters, || {
                    team.put_blocking(1, dest, black_box(&src[..size]), Flags::NONE)
                        .unwrap();
                });
                if !checked {
                    // SAFETY: this size's range of rank 1's segment, mapped here; only
                    // this benchmark writes it, and rank 1 only reads it at the end.
                    let there =
                        unsafe { std::slice::from_raw_parts((peer + off) as *const u8, size) };
                    check_pattern(there, PUT_SEED, &format!("put of {size} bytes"));
                    checked = true;
                }
                t
            })
            .checked_by_rank1(move || {
                // SAFETY: as above, in our own segment, after rank 0's last put.
                let here = unsafe { std::slice::from_raw_parts((own + off) as *const u8, size) };
                check_pattern(
                    here,
                    PUT_SEED,
                    &format!("rank 1 reading the put of {size} bytes"),
                );
            })
        })
        .collect()
}

/// get_blocking of each size from rank 1's segment (what rank 1 wrote at setup) into a
/// private page-aligned buffer of rank 0, checked once.
fn get_bw(ctx: &Ctx) -> Vec<Bench<'static>> {
    let team = ctx.team;
    let src = ctx.remote(1, GET_AREA);
    BW_SIZES
        .iter()
        .map(|&size| {
            let local = page_aligned(size, 0);
            let mut checked = false;
            let name = ctx.name(&format!("gex.get_bw_{}", common::size_name(size)));
            Bench::solo(name, Unit::Bandwidth(size), move |iters| {
                let t = time_iters(iters, || {
                    team.get_blocking(black_box(&mut *local), 1, src, Flags::NONE)
                        .unwrap();
                });
                if !checked {
                    check_pattern(local, GET_SEED, &format!("get of {size} bytes"));
                    checked = true;
                }
                t
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

fn driver() -> i32 {
    // `cargo bench` passes `--bench` (and the user may pass more): nothing to parse.
    let machine = common::machine_note();
    let sampler = Sampler::from_env();
    eprintln!(
        "gex bench: a 2-rank job, then a 4-rank job; {} samples of ~{} ms per figure; {machine}",
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    let timeout = Duration::from_secs(600);
    let mut report = Report::new(BENCH, 2);
    for (job, ranks) in [(JOB_FULL, 2), (JOB_LATENCY, 4)] {
        match common::run_job(BENCH, job, ranks, SEGMENT, timeout) {
            Ok(results) => report.add(results),
            Err(e) => report.errors.push(e),
        }
    }

    let raw_rt = "raw.pingpong_roundtrip";
    let raw_bw = "raw.memcpy_4MiB";
    report.relate("gex.am_short_roundtrip", raw_rt, Some((2.5, TargetIs::Max)));
    report.relate("gex.put_pingpong_8B", raw_rt, Some((1.3, TargetIs::Max)));
    report.relate("gex.get_8B", raw_rt, None);
    report.relate("raw.pingpong_2lines_roundtrip", raw_rt, None);
    for size in BW_SIZES {
        let s = common::size_name(size);
        let target = (size == 4 << 20).then_some((0.85, TargetIs::Min));
        report.relate(&format!("gex.put_bw_{s}"), raw_bw, target);
        report.relate(&format!("gex.get_bw_{s}"), raw_bw, None);
    }
    report.relate(
        "vis.strided_transpose_put",
        "raw.strided_transpose_copy",
        Some((0.7, TargetIs::Min)),
    );
    report.relate(
        "vis.indexed_put_64x64B",
        "vis.single_puts_64x64B",
        Some((0.8, TargetIs::Max)),
    );
    report.relate(
        "atomic.fetch_add_i64",
        "raw.atomic_fetch_add_i64",
        Some((1.5, TargetIs::Max)),
    );
    report.relate("raw.pingpong_roundtrip_4ranks", raw_rt, None);
    report.relate(
        "gex.am_short_roundtrip_4ranks",
        "gex.am_short_roundtrip",
        Some((2.0, TargetIs::Max)),
    );

    report.finish(
        &format!(
            "gex benchmarks: ranks 0 and 1 of a 2-rank job (*_4ranks: of a 4-rank job, ranks 2 \
             and 3 idle in a barrier); {machine}"
        ),
        &[],
    )
}

fn main() {
    if let Some(job) = common::rank_job(JOB_FULL) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}
