//! The sweep (`PGAS_BENCH_SWEEP=1 cargo bench --bench coll`): every alternative of
//! broadcast, reduce-to-all, gather-all, exchange, scatter, gather and prefix reduction
//! at block sizes from 8 B to 1 MiB
//! (8 B × 4^k, then 1 MiB), in each job after the suite, so that the automatic
//! selection's crossovers can be set from where the fastest alternative changes.
//!
//! At each size the alternatives of one collective are measured interleaved, as the
//! suite's figures are (`common/figures.rs`), with short samples (1 warm-up and 5
//! measured samples of ~5 ms, unless `PGAS_BENCH_SAMPLES` / `PGAS_BENCH_SAMPLE_MS` say
//! otherwise), so that the sweep takes a few minutes at most. Every alternative is a
//! time per operation; their data is checked as in the suite (`ops.rs`).
//!
//! The alternatives (`sweep.<collective>_<size>.<alternative>` in the jobs' results):
//! * broadcast: the trees forced (`flat`, `binomial`, from private memory, so the tree
//!   runs at every size) against `segment`: the automatic selection from the root's
//!   segment, which copies directly from the root's segment from gex's threshold of the
//!   direct path up (and runs the selected tree below it).
//! * reduce_to_all: `flat`, `binomial`.
//! * gather_all: `dissemination`, `staggered` (LOCAL addressing), `shared` (SINGLE).
//! * exchange: `staggered` (LOCAL), `shared` (SINGLE).
//! * scatter, gather: `flat`, `binomial` (LOCAL), `shared` (SINGLE); the root rotates.
//! * prefix_reduce: `chain`, `doubling` (f64 sums, LOCAL).
//!
//! The driver prints a table per job and collective: the time of each alternative, the
//! fastest and by how much (the runner-up's time over its own), and the alternative the
//! automatic selection picks with LOCAL addressing (`segment` for broadcast) with its
//! time over that of the fastest it could have picked (the SINGLE-only `shared` counts
//! only for itself). The rows go into the JSON under `"sweep"`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::collectives::{collective, Alternative, Choice, Ctx, MAX_BYTES, MOVE_BYTES};
use crate::common::figures::{self, Unit};
use crate::common::{fmt_value, size_name, Measured, Sampler};
use crate::ops::{self, RankOp};
use gex::coll::{self, Kind};
use gex::Rank;

/// Set (to anything but `0`) to run the sweep after the suite.
pub(crate) const BENCH_SWEEP: &str = "PGAS_BENCH_SWEEP";

/// Whether [`BENCH_SWEEP`] asks for the sweep.
pub(crate) fn enabled() -> bool {
    std::env::var(BENCH_SWEEP).is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// The sampler of the sweep: short samples, overridden by the environment.
pub(crate) fn sampler() -> Sampler {
    Sampler {
        warmup: 1,
        samples: 5,
        sample_time: Duration::from_millis(5),
    }
    .with_env()
}

/// A swept collective.
struct Swept {
    /// Its name in the results.
    name: &'static str,
    choice: Choice,
    /// Whether the automatic selection from the root's segment is swept too (`segment`).
    segment: bool,
    /// One operation of `nbytes` per block (the third argument), named by the second,
    /// with the alternative of the fourth forced.
    op: fn(&Ctx, String, usize, Option<Alternative>) -> RankOp,
}

const SWEPT: &[Swept] = &[
    Swept {
        name: "broadcast",
        choice: Choice::Algorithm(Kind::Broadcast),
        segment: true,
        op: ops::broadcast,
    },
    Swept {
        name: "reduce_to_all",
        choice: Choice::Algorithm(Kind::Reduce),
        segment: false,
        op: |ctx, name, nbytes, _| ops::reduce_all(ctx, name, nbytes / 8),
    },
    Swept {
        name: "gather_all",
        choice: Choice::Method(coll::Operation::GatherAll),
        segment: false,
        op: ops::gather_all,
    },
    Swept {
        name: "exchange",
        choice: Choice::Method(coll::Operation::Exchange),
        segment: false,
        op: ops::exchange,
    },
    Swept {
        name: "scatter",
        choice: Choice::Method(coll::Operation::Scatter),
        segment: false,
        op: ops::scatter,
    },
    Swept {
        name: "gather",
        choice: Choice::Method(coll::Operation::Gather),
        segment: false,
        op: ops::gather,
    },
    Swept {
        name: "prefix_reduce",
        choice: Choice::Method(coll::Operation::PrefixReduce),
        segment: false,
        op: |ctx, name, nbytes, _| ops::prefix_reduce(ctx, name, nbytes / 8),
    },
];

/// The name of an alternative of the sweep (`None`: `segment`, the automatic selection
/// of a broadcast from the root's segment).
fn label(alt: Option<Alternative>) -> &'static str {
    alt.map_or("segment", Alternative::name)
}

impl Swept {
    /// What is measured at each size.
    fn variants(&self) -> Vec<Option<Alternative>> {
        let forced = self.choice.alternatives().into_iter().map(Some);
        forced.chain(self.segment.then_some(None)).collect()
    }

    /// The sizes measured on `n` ranks: 8 B × 4^k up to 1 MiB, then 1 MiB, those that
    /// fit in the bench's areas.
    fn sizes(&self, n: usize) -> Vec<usize> {
        let largest = match self.choice {
            Choice::Method(_) => MAX_BYTES.min(MOVE_BYTES / n),
            Choice::Algorithm(_) => MAX_BYTES,
        };
        let mut sizes: Vec<usize> = std::iter::successors(Some(8usize), |s| Some(s * 4))
            .take_while(|&s| s < MAX_BYTES)
            .chain([MAX_BYTES])
            .filter(|&s| s <= largest)
            .collect();
        sizes.dedup();
        sizes
    }

    /// The result of `alt` at `nbytes` (without the suffix of the job's size).
    fn result(&self, nbytes: usize, alt: Option<Alternative>) -> String {
        format!("sweep.{}_{}.{}", self.name, size_name(nbytes), label(alt))
    }

    /// The name of what the automatic selection picks on `n` ranks at `nbytes`, with
    /// LOCAL addressing (for broadcast: `segment`).
    fn selected(&self, n: usize, nbytes: usize) -> &'static str {
        if self.segment {
            label(None)
        } else {
            self.choice.selected(n as Rank, nbytes).name()
        }
    }
}

/// Rank side: measures the sweep; rank 0's results (nothing on the other ranks).
pub(crate) fn measure(ctx: &Ctx) -> Vec<Measured> {
    let world = ctx.world;
    let sampler = sampler();
    let mut results = Vec::new();
    for s in SWEPT {
        for nbytes in s.sizes(world.size() as usize) {
            let benches = s
                .variants()
                .into_iter()
                .map(|alt| {
                    let name = ctx.name(&s.result(nbytes, alt));
                    let op = (s.op)(ctx, name.clone(), nbytes, alt);
                    collective(ctx, name, Unit::Latency, Some((s.choice, alt)), op)
                })
                .collect();
            results.extend(figures::measure(
                world.rank(),
                sampler,
                || world.barrier(),
                benches,
            ));
        }
    }
    results
}

/// Whether `name` is a result of the sweep.
pub(crate) fn is_sweep(name: &str) -> bool {
    name.starts_with("sweep.")
}

/// Driver side: the tables of the sweep of the job of `ranks` ranks whose results
/// (named with `suffix`) are `results`, and its rows for the JSON.
pub(crate) fn analyse(
    results: &[Measured],
    ranks: usize,
    suffix: &str,
) -> (Vec<String>, Vec<Value>) {
    let time = |name: &str| results.iter().find(|m| m.name == name).map(|m| m.value);
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    for s in SWEPT {
        let variants = s.variants();
        let labels: Vec<&str> = variants.iter().map(|&a| label(a)).collect();
        lines.push(format!(
            "\nsweep, {ranks} ranks, {}: time per operation (us)",
            s.name
        ));
        let mut header = format!("{:>7}", "bytes");
        for l in &labels {
            header.push_str(&format!(" {l:>13}"));
        }
        header.push_str(&format!("  {:<24} {}", "fastest (by)", "selected (x best)"));
        lines.push(header);
        for nbytes in s.sizes(ranks) {
            let ns: Vec<Option<f64>> = variants
                .iter()
                .map(|&a| time(&format!("{}{suffix}", s.result(nbytes, a))))
                .collect();
            if ns.iter().all(Option::is_none) {
                continue;
            }
            let mut line = format!("{:>7}", size_name(nbytes));
            for t in &ns {
                let cell = t.map_or("-".to_owned(), |t| fmt_value(t / 1e3));
                line.push_str(&format!(" {cell:>13}"));
            }
            // The alternatives by time, fastest first.
            let mut ranked: Vec<(&str, f64, Option<Alternative>)> = variants
                .iter()
                .zip(&ns)
                .filter_map(|(&a, t)| Some((label(a), (*t)?, a)))
                .collect();
            ranked.sort_by(|x, y| x.1.total_cmp(&y.1));
            let (fastest, best) = (ranked[0].0, ranked[0].1);
            let by = ranked.get(1).map(|r| r.1 / best);
            let selected = s.selected(ranks, nbytes);
            // The fastest the selection could have picked: SINGLE-only alternatives
            // count only when the selection is one.
            let selectable = ranked
                .iter()
                .find(|(l, _, a)| *l == selected || !a.is_some_and(Alternative::single));
            let sel_time = ranked.iter().find(|r| r.0 == selected).map(|r| r.1);
            let sel_ratio = sel_time.zip(selectable).map(|(t, b)| t / b.1);
            line.push_str(&format!(
                "  {:<24} {}",
                match by {
                    Some(by) => format!("{fastest} ({by:.2}x)"),
                    None => fastest.to_owned(),
                },
                match sel_ratio {
                    Some(r) => format!("{selected} ({r:.2}x)"),
                    None => format!("{selected} (-)"),
                }
            ));
            lines.push(line);
            let times: serde_json::Map<String, Value> = labels
                .iter()
                .zip(&ns)
                .filter_map(|(l, t)| Some(((*l).to_owned(), json!((*t)?))))
                .collect();
            rows.push(json!({
                "ranks": ranks,
                "collective": s.name,
                "bytes": nbytes,
                "ns": times,
                "fastest": fastest,
                "runner_up": ranked.get(1).map(|r| r.0),
                "by": by,
                "selected": selected,
                "best_selectable": selectable.map(|b| b.0),
                "selected_vs_best": sel_ratio,
            }));
        }
    }
    (lines, rows)
}
