//! Multi-rank benchmarks of the `gex` collectives: `cargo bench --bench coll`.
//!
//! The bench process is the driver: it runs this same executable as a 2-rank job and as
//! a 4-rank job (the same suite; the 4-rank results are suffixed `_4ranks`), then prints
//! a table and writes `<target>/bench-results/coll.json` (see `common/mod.rs`; same
//! format as `gex.json`).
//!
//! Every job also measures the physical floor in the same run (as `gex.rs` does):
//! * `raw.pingpong_roundtrip`: ranks 0 and 1 bounce one cache line of rank 1's segment
//!   (mapped in both processes) with plain atomics, no library call.
//! * `raw.memcpy_4MiB`: single-core `copy_nonoverlapping` of 4 MiB between two private,
//!   pre-faulted buffers of rank 0.
//!
//! Every rank of the job takes part in every collective figure; rank 0 times it.
//!
//! | result                          | what                                              | baseline (target)                  |
//! |---------------------------------|---------------------------------------------------|------------------------------------|
//! | `coll.barrier`                  | `Team::barrier_nb().wait()` on the primordial team | raw pingpong (2 ranks: ≤ 1.5×)    |
//! | `coll.barrier.team`             | the same on a team of every rank split from the primordial one (a dissemination barrier through the team's block of signal words) | `coll.barrier` (—) |
//! | `coll.broadcast_8B`             | `broadcast_nb(root, ..).wait()` of 8 bytes from the root's segment, the root rotating over the team | the best alternative (≤ 1.1×) |
//! | `coll.broadcast_1MiB`           | the same with 1 MiB, as bandwidth per receiver    | raw memcpy (≥ 0.5×); the best alternative (time ≤ 1.1×) |
//! | `coll.reduce_all_f64`           | `reduce_to_all_nb(..).wait()` of one f64 with `Op::Add` | the best alternative (≤ 1.1×) |
//! | `coll.reduce_all_1MiB_f64`      | the same with 1 MiB of f64, as bandwidth of each rank's input | the best alternative (time ≤ 1.1×) |
//! | `coll.gather_all_4KiB`          | `gather_all_nb(..).wait()` of 4 KiB per rank, LOCAL addressing, `IN_MYSYNC \| OUT_MYSYNC` | the best alternative (≤ 1.1×) |
//! | `coll.exchange_4KiB`            | `exchange_nb(..).wait()` of 4 KiB per pair of ranks, the same flags | the best alternative (≤ 1.1×) |
//! | `<name>.<alternative>`          | a figure above with an algorithm forced (`coll::set_algorithm`: `flat`, `binomial`) or a method (`coll::set_method`: `dissemination`, `staggered`, `shared`) | the figure with the automatic selection (—) |
//! | `*_4ranks`                      | the same in a 4-rank job                          | the same, of that job (no barrier target) |
//!
//! The figures without a suffix use the automatic selection (`coll::algorithm`,
//! `coll::method`). The target "the selected alternative within 1.1× of the best one"
//! is computed by the driver once it has every figure: the selected figure is related to
//! its fastest alternative (`coll.broadcast_1MiB`, already related to memcpy, carries it
//! as an absolute target, `target_value` in the JSON), and a line per figure under the
//! table says which alternative was selected and how it compares.
//!
//! Where the data comes from (`coll/ops.rs`): a broadcast with the automatic selection
//! reads the root's source from its segment, as a PGAS program broadcasting shared data
//! does, so from gex's threshold of the direct path up (`coll.broadcast_1MiB`) every
//! rank copies straight from the root's segment; the forced trees (`.flat`,
//! `.binomial`) read a private copy, since from the segment the root would copy
//! directly whatever the tree. Gather-all and exchange move between areas of each rank's
//! segment; `.shared`, the design document's method for SINGLE addressing on one host,
//! is measured with SINGLE addresses (every rank's, in the segments), the others with
//! LOCAL. The selection with LOCAL addressing never picks `shared`, so it is left out
//! of the best alternative that the target compares with and reported on its own line.
//!
//! With `PGAS_BENCH_SWEEP=1`, each job then sweeps the alternatives of broadcast,
//! reduce-to-all, gather-all and exchange over block sizes from 8 B to 1 MiB
//! (`coll/sweep.rs`): a table per job and collective under the report, and its rows in
//! the JSON under `"sweep"`, from which the selection's crossovers are set.
//!
//! A broadcast's root rotates (operation `j` is rooted at team rank `j mod n`): each root
//! must have received the previous broadcast before it starts its own, so the time per
//! operation is a broadcast's latency, not the rate at which one root can inject them.
//! Its bandwidth is per receiver: the bytes each receiver gets per second. A reduction's
//! bandwidth counts each rank's input bytes per second.
//!
//! The figures are measured in two groups, latency (with the raw ping-pong) and
//! bandwidth (with memcpy), each interleaved as in `gex.rs`: a calibration phase for each
//! figure, then rounds of one ~30 ms sample of each (medians of 9 samples after 2
//! warm-up rounds). In a collective figure's phase rank 0 publishes, in its segment, how
//! many operations the others must join, so that every rank performs the same number.
//!
//! `coll.barrier.team` is the collective engine's cost over the world barrier's: the
//! same signals, one per round, but each an AM filed with its operation by sequence,
//! and each operation a boxed state with a handle. The engine kept its teams in a
//! hash map by id (SipHash), its operations in a `BTreeMap` by sequence, and looked
//! the team's data up three times per call; on 2 ranks a team barrier took 420 ns,
//! 4.4x `coll.barrier` (whose AM path alone, `GEX_COLL_BARRIER=am`, took 130 ns).
//! Teams now sit in a vector by id, a team's operations in a ring by sequence, the
//! barrier's arrival counts inline, and the data is looked up once: in alternating
//! runs of the same loop (2 ranks, 300,000 barriers each) 184-256 ns against 315-387
//! before, and 1.9x `coll.barrier` in the table of a run in the machine's slow state.
//! A split team's barrier now stores its rounds into a block of signal words of the
//! team's (`gex::barrier::team`), as the world's does, and no longer goes through the
//! engine: in alternating runs of one loop (2 ranks, 200,000 barriers each, the
//! machine in its fast state) 116-118 ns against 186-193, the world's 55-78. Above
//! the world's, each barrier allocated a handle and registered its team for progress;
//! reading what each team waits for before any lock, as the world's `awaiting` word
//! lets it, did not shorten it (114 against 106 ns in alternating runs), so it was not
//! kept. A team's barrier events are now epochs, as the world's (the team and the
//! number of the barrier, complete once the team's count of completed barriers passes
//! it), and a barrier that completes as it starts (its peers all arrived first) does
//! not register the team: under callgrind, with the peers always first, 425
//! instructions per `barrier_nb().wait()` against 770 (the world's 334); in
//! alternating runs (2 ranks, 300,000 barriers, fast state) 85-87 ns against 115-118,
//! the world's 54-57 (1.55x).
//!
//! Data is checked in the first operations of each figure on every rank, so a broken
//! path fails the job instead of reporting a great number: a barrier's ranks each write
//! a word before it and read every other rank's after it; the first `n` broadcasts (one
//! from each root) arrive in a destination poisoned beforehand and must hold the root's
//! pattern; the first reduction's result, over a poisoned destination, must be the exact
//! sum of every rank's input; the first gather-all or exchange must fill every block of
//! a poisoned destination with the right part of its sender's pattern.

#[path = "coll/figures.rs"]
mod collectives;
mod common;
#[path = "coll/ops.rs"]
mod ops;
#[path = "coll/sweep.rs"]
mod sweep;

use std::time::Duration;

use collectives::{barrier, Choice, Collective, Ctx, CHOICES, SEGMENT};
use common::figures::{self, Bench, Unit};
use common::{Measured, RankJob, Report, Sampler, TargetIs};
use gex::{coll, Client, Flags, Segment};

const BENCH: &str = "coll";
/// The suite, run with 2 and with 4 ranks.
const JOB: &str = "full";
/// The ranks of the jobs (the results of jobs of more than 2 ranks are suffixed
/// `_<n>ranks`).
const JOBS: [usize; 2] = [2, 4];
/// The selected alternative's time is at most this multiple of the best one's.
const SELECTED_VS_BEST: f64 = 1.1;

// ---------------------------------------------------------------------------------------
// Rank side
// ---------------------------------------------------------------------------------------

fn rank_main(job: RankJob) {
    let (client, _ep, world) = Client::init("COLLBENCH", Flags::NONE).expect("gex::Client::init");
    if world.size() < 2 {
        panic!("the coll benchmarks need at least 2 ranks");
    }
    let segment = Segment::attach(&world, SEGMENT).expect("attach the segment");
    let split = world
        .split(Some(0), world.rank() as i32, None)
        .expect("every rank passes a color");
    assert_eq!(
        (split.size(), split.rank()),
        (world.size(), world.rank()),
        "the split team holds every rank in order"
    );
    let ctx = Ctx::new(world, segment);
    world.barrier(); // setup is done everywhere

    let mut latency = vec![
        figures::raw_pingpong(ctx.name("raw.pingpong_roundtrip"), ctx.raw_line()),
        barrier(&ctx, "coll.barrier", world, 0),
        barrier(&ctx, "coll.barrier.team", split, 1),
    ];
    let mut bandwidth = vec![figures::raw_memcpy(ctx.name("raw.memcpy_4MiB"), 4 << 20)];
    for choice in CHOICES {
        let group = match choice.unit {
            Unit::Bandwidth(_) => &mut bandwidth,
            _ => &mut latency,
        };
        group.extend(choice.benches(&ctx));
    }
    let mut results = measure(&ctx, latency);
    results.extend(measure(&ctx, bandwidth));
    if sweep::enabled() {
        results.extend(sweep::measure(&ctx));
    }
    if world.rank() == 0 {
        common::write_rank_results(&job, &results);
    }
    split.destroy();
    client.finalize();
}

/// [`figures::measure`] on the primordial team, its barrier ending each phase.
fn measure(ctx: &Ctx, benches: Vec<Bench<'_>>) -> Vec<Measured> {
    let world = ctx.world;
    figures::measure(world.rank(), ctx.sampler, || world.barrier(), benches)
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

fn driver() -> i32 {
    // `cargo bench` passes `--bench` (and the user may pass more): nothing to parse.
    let machine = common::machine_note();
    let sampler = Sampler::from_env();
    eprintln!(
        "coll bench: a 2-rank job, then a 4-rank job; {} samples of ~{} ms per figure; {machine}",
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    if sweep::enabled() {
        let s = sweep::sampler();
        eprintln!(
            "coll bench: then the sweep, {} samples of ~{} ms per alternative and size",
            s.samples,
            s.sample_time.as_millis()
        );
    }
    let timeout = Duration::from_secs(600);
    let mut report = Report::new(BENCH, 2);
    let mut swept = Vec::new();
    for ranks in JOBS {
        match common::run_job(BENCH, JOB, ranks, SEGMENT, timeout) {
            Ok(results) => {
                let (swept_results, suite): (Vec<_>, Vec<_>) =
                    results.into_iter().partition(|m| sweep::is_sweep(&m.name));
                report.add(suite);
                swept.push((ranks, swept_results));
            }
            Err(e) => report.errors.push(e),
        }
    }

    let mut notes = Vec::new();
    for ranks in JOBS {
        let sfx = suffix(ranks);
        let raw_rt = format!("raw.pingpong_roundtrip{sfx}");
        let raw_bw = format!("raw.memcpy_4MiB{sfx}");
        let barrier_target = (ranks == 2).then_some((1.5, TargetIs::Max));
        report.relate(&format!("coll.barrier{sfx}"), &raw_rt, barrier_target);
        report.relate(
            &format!("coll.barrier.team{sfx}"),
            &format!("coll.barrier{sfx}"),
            None,
        );
        report.relate(
            &format!("coll.broadcast_1MiB{sfx}"),
            &raw_bw,
            Some((0.5, TargetIs::Min)),
        );
        for choice in CHOICES {
            notes.extend(relate_to_best(&mut report, choice, ranks));
        }
    }
    if sweep::enabled() {
        let mut rows = Vec::new();
        for (ranks, results) in &swept {
            let (lines, r) = sweep::analyse(results, *ranks, &suffix(*ranks));
            notes.extend(lines);
            rows.extend(r);
        }
        let s = sweep::sampler();
        report.section(
            "sweep",
            serde_json::json!({
                "samples": s.samples,
                "sample_ms": s.sample_time.as_millis() as u64,
                "rows": rows,
            }),
        );
    }

    report.finish(
        &format!(
            "coll benchmarks: every rank of a 2-rank job (*_4ranks: of a 4-rank job) in each \
             collective, timed at rank 0; {machine}"
        ),
        &notes,
    )
}

/// Relates the figure `c` of the job of `ranks` ranks (measured with the automatic
/// selection) to its best alternative with the target [`SELECTED_VS_BEST`] on their
/// times, and the alternatives to it; returns the lines that say how they compare (none
/// when the job reported no such figures). SINGLE-only alternatives (`shared`) are
/// compared on a line of their own, not with the target.
fn relate_to_best(report: &mut Report, c: &Collective, ranks: usize) -> Vec<String> {
    let sfx = suffix(ranks);
    let selected = format!("{}{sfx}", c.name);
    let Some((sel_value, unit)) = value_of(report, &selected) else {
        return Vec::new();
    };
    // Bandwidths are better high, latencies low; a time ratio either way.
    let is_bandwidth = unit == "GB/s";
    let time_ratio = |v: f64, best: f64| if is_bandwidth { best / v } else { v / best };
    let mut best: Option<(String, f64)> = None;
    let mut lines = Vec::new();
    for alt in c.choice.alternatives() {
        let alt_name = format!("{}.{}{sfx}", c.name, alt.name());
        let Some((v, _)) = value_of(report, &alt_name) else {
            continue;
        };
        report.relate(&alt_name, &selected, None);
        if alt.single() {
            lines.push(format!(
                "{alt_name} (SINGLE addressing): {:.3}x the time of the selection with LOCAL",
                time_ratio(v, sel_value)
            ));
            continue;
        }
        let better = match &best {
            None => true,
            Some((_, b)) => time_ratio(v, *b) < 1.0,
        };
        if better {
            best = Some((alt_name, v));
        }
    }
    let Some((best_name, best_value)) = best else {
        return lines;
    };
    let has_baseline = report
        .entries
        .iter()
        .any(|e| e.measured.name == selected && e.baseline.is_some());
    if has_baseline {
        let (bound, is) = if is_bandwidth {
            (best_value / SELECTED_VS_BEST, TargetIs::Min)
        } else {
            (best_value * SELECTED_VS_BEST, TargetIs::Max)
        };
        report.target_value(&selected, bound, is);
    } else {
        let target = if is_bandwidth {
            (1.0 / SELECTED_VS_BEST, TargetIs::Min)
        } else {
            (SELECTED_VS_BEST, TargetIs::Max)
        };
        report.relate(&selected, &best_name, Some(target));
    }
    let mut what = c
        .choice
        .selected(ranks as gex::Rank, c.nbytes)
        .name()
        .to_owned();
    if c.choice == Choice::Algorithm(coll::Kind::Broadcast) {
        what.push_str(" tree, or direct copies from the root's segment when large enough");
    }
    let ratio = time_ratio(sel_value, best_value);
    let status = if ratio <= SELECTED_VS_BEST {
        "PASS"
    } else {
        "MISS"
    };
    lines.insert(
        0,
        format!(
            "{selected}: selected {what}, {ratio:.3}x the time of the best alternative \
             {best_name} (target <= {SELECTED_VS_BEST:.2}x): {status}"
        ),
    );
    lines
}

/// The value and unit of the result `name`.
fn value_of(report: &Report, name: &str) -> Option<(f64, String)> {
    let e = report.entries.iter().find(|e| e.measured.name == name)?;
    Some((e.measured.value, e.measured.unit.clone()))
}

/// The suffix of the results of a job of `ranks` ranks.
fn suffix(ranks: usize) -> String {
    if ranks > 2 {
        format!("_{ranks}ranks")
    } else {
        String::new()
    }
}

fn main() {
    if let Some(job) = common::rank_job(JOB) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}
