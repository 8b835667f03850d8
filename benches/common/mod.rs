//! The harness shared by the multi-rank benchmarks (`benches/*.rs`, `harness = false`).
//!
//! A benchmark binary plays two parts:
//!
//! * **Driver** (started by `cargo bench --bench NAME`, no `UPCXX_RANK` in the
//!   environment): it launches one or more jobs of its own executable with
//!   [`run_job`], collects what rank 0 of each job measured, relates results to their
//!   baselines and targets in a [`Report`], prints the table and writes
//!   `<target>/bench-results/NAME.json`.
//! * **Rank** (started by the driver's job, [`rank_job`] returns `Some`): it runs the
//!   measurements of the job named in [`BENCH_JOB`] and rank 0 hands them back with
//!   [`write_rank_results`].
//!
//! Measurements use [`Sampler`]: calibrate an iteration count so that one sample lasts
//! about [`Sampler::sample_time`], run a few warm-up samples, then
//! [`Sampler::samples`] measured samples; the reported value is the median. On a busy
//! machine, interleave the measurements that are compared with each other (one sample of
//! each per round, [`Sampler::rounds`]) so that a slow stretch hits all of them alike.
//!
//! Benchmarks report, they do not assert: a missed target is printed as `MISS` and
//! recorded in the JSON, and the run still succeeds. A rank that finds wrong data
//! (a broken communication path) panics, which fails its job.
#![allow(dead_code)]

pub mod am;
pub mod figures;
pub mod states;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// Environment variable naming the job a rank process runs (set by [`run_job`]).
pub const BENCH_JOB: &str = "PGAS_BENCH_JOB";
/// Environment variable holding the file rank 0 writes its results to.
pub const BENCH_OUT: &str = "PGAS_BENCH_OUT";
/// Overrides the number of measured samples per result (default 9).
pub const BENCH_SAMPLES: &str = "PGAS_BENCH_SAMPLES";
/// Overrides the target duration of one sample in milliseconds (default 30).
pub const BENCH_SAMPLE_MS: &str = "PGAS_BENCH_SAMPLE_MS";
/// Set (non-empty) to list every sample under the table.
pub const BENCH_VERBOSE: &str = "PGAS_BENCH_VERBOSE";

/// Whether [`BENCH_VERBOSE`] asks for every sample to be listed.
pub fn verbose() -> bool {
    std::env::var_os(BENCH_VERBOSE).is_some_and(|v| !v.is_empty())
}

// ---------------------------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------------------------

/// One measured quantity as a rank reports it: the median `value` of `samples`.
#[derive(Debug, Clone)]
pub struct Measured {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub samples: Vec<f64>,
}

impl Measured {
    /// From samples of any unit; the value is their median.
    pub fn new(name: impl Into<String>, unit: impl Into<String>, samples: Vec<f64>) -> Measured {
        Measured {
            name: name.into(),
            value: median(&samples),
            unit: unit.into(),
            samples,
        }
    }

    /// Latency in ns from samples of nanoseconds per operation.
    pub fn latency_ns(name: impl Into<String>, ns_per_op: &[f64]) -> Measured {
        Measured::new(name, "ns", ns_per_op.to_vec())
    }

    /// Bandwidth in GB/s (10^9 bytes/s) from samples of ns per operation of `bytes` bytes.
    pub fn bandwidth_gbs(name: impl Into<String>, bytes: usize, ns_per_op: &[f64]) -> Measured {
        let s = ns_per_op.iter().map(|&ns| bytes as f64 / ns).collect();
        Measured::new(name, "GB/s", s)
    }

    /// A rate in operations per second from samples of ns per operation.
    pub fn rate(name: impl Into<String>, unit: &str, ns_per_op: &[f64]) -> Measured {
        let s = ns_per_op.iter().map(|&ns| 1e9 / ns).collect();
        Measured::new(name, unit, s)
    }

    /// (max - min) / median of the samples: how noisy the figure is.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = self
            .samples
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        if self.samples.is_empty() || self.value == 0.0 {
            0.0
        } else {
            (hi - lo) / self.value.abs()
        }
    }

    fn to_json(&self) -> Value {
        json!({"name": self.name, "value": self.value, "unit": self.unit, "samples": self.samples})
    }

    fn from_json(v: &Value) -> Option<Measured> {
        Some(Measured {
            name: v.get("name")?.as_str()?.to_owned(),
            value: v.get("value")?.as_f64()?,
            unit: v.get("unit")?.as_str()?.to_owned(),
            samples: v
                .get("samples")?
                .as_array()?
                .iter()
                .filter_map(Value::as_f64)
                .collect(),
        })
    }
}

/// The median (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// How many samples to take and how long each lasts.
#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    /// Discarded samples after calibration.
    pub warmup: usize,
    /// Measured samples (odd, so the median is one of them).
    pub samples: usize,
    /// Target duration of one sample.
    pub sample_time: Duration,
}

impl Default for Sampler {
    fn default() -> Sampler {
        Sampler {
            warmup: 2,
            samples: 9,
            sample_time: Duration::from_millis(30),
        }
    }
}

impl Sampler {
    /// The defaults, overridden by [`BENCH_SAMPLES`] and [`BENCH_SAMPLE_MS`].
    pub fn from_env() -> Sampler {
        let mut s = Sampler::default();
        let var = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if let Some(n) = var(BENCH_SAMPLES).filter(|&n| n > 0) {
            s.samples = n as usize;
        }
        if let Some(ms) = var(BENCH_SAMPLE_MS).filter(|&ms| ms > 0) {
            s.sample_time = Duration::from_millis(ms);
        }
        s
    }

    /// Measures an operation: `run(iters)` performs `iters` operations and returns how
    /// long they took (timed by the caller with `Instant`, so it can leave setup and
    /// teardown out). Returns the nanoseconds per operation of each measured sample.
    pub fn ns_per_op(&self, mut run: impl FnMut(u64) -> Duration) -> Vec<f64> {
        let iters = self.calibrate(&mut run);
        for _ in 0..self.warmup {
            run(iters);
        }
        (0..self.samples)
            .map(|_| run(iters).as_nanos() as f64 / iters as f64)
            .collect()
    }

    /// Warm-up and measured samples together: the number of rounds of a schedule that
    /// interleaves several measurements (one sample of each per round; the first
    /// [`Sampler::warmup`] rounds are discarded), so that all their samples, and so the
    /// ratios between their medians, come from the same stretches of time.
    pub fn rounds(&self) -> usize {
        self.warmup + self.samples
    }

    /// An iteration count for which one `run(iters)` lasts about `sample_time`.
    ///
    /// One untimed `run(1)` comes first, so that one-time costs stay out of the count:
    /// the first touch of memory (a put into a part of a segment nobody wrote yet pays a
    /// page fault per 4 KiB page, ~30 times the copy) would otherwise pass for the cost
    /// of every operation, and the count come out ~30 times too small. Samples that
    /// short are dominated by their cold start (the other figures of a round empty the
    /// caches) and read ~0.6 of the steady state.
    pub fn calibrate(&self, run: &mut impl FnMut(u64) -> Duration) -> u64 {
        let target = self.sample_time.as_secs_f64();
        run(1);
        let mut iters = 1u64;
        loop {
            let t = run(iters).as_secs_f64();
            if t >= target / 8.0 || iters >= 1 << 40 {
                let scaled = (iters as f64 * target / t.max(1e-9)).ceil();
                return (scaled as u64).max(1);
            }
            // Grow fast while runs are far too short, carefully near the target.
            iters *= if t < target / 100.0 { 10 } else { 2 };
        }
    }
}

/// Times `iters` calls of `op` with `Instant`.
#[inline]
pub fn time_iters(iters: u64, mut op: impl FnMut()) -> Duration {
    let t0 = Instant::now();
    for _ in 0..iters {
        op();
    }
    t0.elapsed()
}

/// Unsuccessful checks between two yields of [`spin_until`] (a power of two).
pub const SPINS_PER_YIELD: u32 = 256;
const _: () = assert!(SPINS_PER_YIELD.is_power_of_two());

/// Spins until `done()` holds: a busy loop with the CPU's spin hint that yields the
/// processor every [`SPINS_PER_YIELD`] unsuccessful checks (several microseconds), so
/// that a waiter sharing a core with the process it waits for (more runnable processes
/// than cores) cannot starve it for a whole time slice. While both sides have a core,
/// a round trip is far shorter than that and the yield never happens.
#[inline]
pub fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins & (SPINS_PER_YIELD - 1) == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Jobs: the driver launches ranks of its own executable
// ---------------------------------------------------------------------------------------

/// What a rank process was started to do.
#[derive(Debug, Clone)]
pub struct RankJob {
    /// The job name given to [`run_job`].
    pub job: String,
    /// Where rank 0 writes its results; `None` when started by hand (for example with
    /// `upcxx-run -n 2 <bench binary>`): rank 0 then prints them.
    pub out: Option<PathBuf>,
}

/// `Some` when this process is a rank of a job (`UPCXX_RANK` set), with the job to run
/// (`default_job` if the driver did not name one).
pub fn rank_job(default_job: &str) -> Option<RankJob> {
    std::env::var_os(gex::job::UPCXX_RANK)?;
    Some(RankJob {
        job: std::env::var(BENCH_JOB).unwrap_or_else(|_| default_job.to_owned()),
        out: std::env::var_os(BENCH_OUT).map(PathBuf::from),
    })
}

/// Rank 0's side of [`run_job`]: hands `results` to the driver (or prints them when
/// there is no driver).
pub fn write_rank_results(job: &RankJob, results: &[Measured]) {
    let Some(path) = &job.out else {
        for m in results {
            println!(
                "{:<36} {:>14} {:<6} (spread {:.0}%)",
                m.name,
                fmt_value(m.value),
                m.unit,
                m.spread() * 100.0
            );
        }
        return;
    };
    let v = json!({"job": job.job, "results": results.iter().map(Measured::to_json).collect::<Vec<_>>()});
    let text = serde_json::to_string(&v).expect("results serialize");
    std::fs::write(path, text)
        .unwrap_or_else(|e| panic!("cannot write bench results to {}: {e}", path.display()));
}

/// Runs `ranks` ranks of this executable as job `job` (segment of `segment_size` bytes
/// per rank) and returns what its rank 0 reported. The ranks inherit this process's
/// environment plus [`BENCH_JOB`] and [`BENCH_OUT`]; their output goes to ours.
pub fn run_job(
    bench: &str,
    job: &str,
    ranks: usize,
    segment_size: usize,
    timeout: Duration,
) -> Result<Vec<Measured>, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the bench executable: {e}"))?;
    let out = std::env::temp_dir().join(format!(
        "pgas-bench-{bench}-{job}-{}.json",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&out);
    let spec = gex::job::JobSpec {
        program: exe,
        args: Vec::new(),
        ranks,
        segment_size,
        timeout: Some(timeout),
        env: vec![
            (OsString::from(BENCH_JOB), OsString::from(job)),
            (OsString::from(BENCH_OUT), out.clone().into_os_string()),
        ],
        name: format!("bench {bench}/{job}"),
        forward_signals: true,
    };
    let outcome = gex::job::run(&spec).map_err(|e| format!("cannot start job {job}: {e}"))?;
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if let Some(failure) = outcome.failure {
        return Err(format!("job {job} ({ranks} ranks) failed: {failure}"));
    }
    let text = text.map_err(|e| format!("job {job}: rank 0 wrote no results ({e})"))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("job {job}: bad results file: {e}"))?;
    v.get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("job {job}: results file has no results"))?
        .iter()
        .map(|r| Measured::from_json(r).ok_or_else(|| format!("job {job}: bad result {r}")))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Report: baselines, targets, table, JSON
// ---------------------------------------------------------------------------------------

/// Which way a target bounds the ratio to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetIs {
    /// `ratio <= target_ratio` (latencies).
    Max,
    /// `ratio >= target_ratio` (bandwidths, rates).
    Min,
}

impl TargetIs {
    fn as_str(self) -> &'static str {
        match self {
            TargetIs::Max => "max",
            TargetIs::Min => "min",
        }
    }

    /// Whether `x` is within the bound `t`.
    pub fn holds(self, x: f64, t: f64) -> bool {
        match self {
            TargetIs::Max => x <= t,
            TargetIs::Min => x >= t,
        }
    }
}

/// A result of the report with what it is compared to.
#[derive(Debug, Clone)]
pub struct Entry {
    pub measured: Measured,
    pub baseline: Option<String>,
    pub target: Option<(f64, TargetIs)>,
    /// An absolute target on the value itself, in its unit (`value <= t` or
    /// `value >= t`), for figures with no baseline to be a ratio of (a message rate,
    /// say); set with [`Report::target_value`]. Independent of `baseline`/`target`: an
    /// entry with both must meet both.
    pub target_value: Option<(f64, TargetIs)>,
}

/// The results of one benchmark binary.
#[derive(Debug, Clone)]
pub struct Report {
    pub bench: String,
    pub ranks: usize,
    pub entries: Vec<Entry>,
    /// Failures to mention under the table (jobs that did not complete).
    pub errors: Vec<String>,
}

impl Report {
    pub fn new(bench: &str, ranks: usize) -> Report {
        Report {
            bench: bench.to_owned(),
            ranks,
            entries: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Appends results (in order).
    pub fn add(&mut self, results: impl IntoIterator<Item = Measured>) {
        self.entries
            .extend(results.into_iter().map(|measured| Entry {
                measured,
                baseline: None,
                target: None,
                target_value: None,
            }));
    }

    /// Compares `name` with `baseline` (another result), with an optional target
    /// `(ratio, Max|Min)` on `value / baseline_value`. Unknown names are ignored (a job
    /// that failed reports no results).
    pub fn relate(&mut self, name: &str, baseline: &str, target: Option<(f64, TargetIs)>) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.measured.name == name) {
            e.baseline = Some(baseline.to_owned());
            e.target = target;
        }
    }

    /// Gives `name` an absolute target `(value, Max|Min)` on its own value, in its unit.
    /// Unknown names are ignored, as in [`Report::relate`].
    pub fn target_value(&mut self, name: &str, value: f64, is: TargetIs) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.measured.name == name) {
            e.target_value = Some((value, is));
        }
    }

    fn value_of(&self, name: &str) -> Option<f64> {
        self.entries
            .iter()
            .find(|e| e.measured.name == name)
            .map(|e| e.measured.value)
    }

    /// `(baseline value, ratio)` of an entry whose baseline is present.
    fn ratio(&self, e: &Entry) -> Option<(f64, f64)> {
        let b = self.value_of(e.baseline.as_deref()?)?;
        Some((b, e.measured.value / b))
    }

    /// `Some(met)` for an entry with a ratio target and a baseline, or with an absolute
    /// target ([`Entry::target_value`]), or both (then both must be met); `None` when it
    /// has no target, or a ratio target whose baseline is missing.
    pub fn target_met(&self, e: &Entry) -> Option<bool> {
        let by_ratio = match e.target {
            Some((t, is)) => Some(is.holds(self.ratio(e)?.1, t)),
            None => None,
        };
        let by_value = e.target_value.map(|(t, is)| is.holds(e.measured.value, t));
        match (by_ratio, by_value) {
            (Some(a), Some(b)) => Some(a && b),
            (a, b) => a.or(b),
        }
    }

    /// The JSON document: `{"bench", "ranks", "results": [...]}` (see the module docs
    /// of the bench for the keys). Every result has `name`, `value`, `unit`; one related
    /// to a baseline also `baseline`, `baseline_value`, `ratio`; one with a ratio target
    /// `target_ratio` and `target_is` (`"max"`/`"min"`, bounding `ratio`); one with an
    /// absolute target ([`Report::target_value`]) `target_value` and `target_value_is`
    /// (`"max"`/`"min"`, bounding `value` itself, in `unit`).
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("name".into(), json!(e.measured.name));
                o.insert("value".into(), json!(e.measured.value));
                o.insert("unit".into(), json!(e.measured.unit));
                if let (Some(b), Some((bv, ratio))) = (&e.baseline, self.ratio(e)) {
                    o.insert("baseline".into(), json!(b));
                    o.insert("baseline_value".into(), json!(bv));
                    o.insert("ratio".into(), json!(ratio));
                }
                if let Some((t, is)) = e.target {
                    o.insert("target_ratio".into(), json!(t));
                    o.insert("target_is".into(), json!(is.as_str()));
                }
                if let Some((t, is)) = e.target_value {
                    o.insert("target_value".into(), json!(t));
                    o.insert("target_value_is".into(), json!(is.as_str()));
                }
                Value::Object(o)
            })
            .collect();
        json!({"bench": self.bench, "ranks": self.ranks, "results": results})
    }

    /// Prints the table on stdout.
    pub fn print_table(&self, title: &str) {
        let mut out = String::new();
        let w = self
            .entries
            .iter()
            .map(|e| e.measured.name.len())
            .chain(
                self.entries
                    .iter()
                    .filter_map(|e| e.baseline.as_ref().map(String::len)),
            )
            .max()
            .unwrap_or(4)
            .max(8);
        // The target column is 8 wide unless an absolute target needs more.
        let tw = self
            .entries
            .iter()
            .map(|e| target_text(e).len())
            .max()
            .unwrap_or(0)
            .max(8);
        out.push_str(&format!("\n{title}\n"));
        let header = format!(
            "{:<w$}  {:>14} {:<6} {:>7}  {:<w$}  {:>8}  {:>tw$}  {}",
            "name", "median", "unit", "spread", "baseline", "ratio", "target", "status"
        );
        out.push_str(&header);
        out.push('\n');
        out.push_str(&"-".repeat(header.len()));
        out.push('\n');
        let (mut met, mut with_target) = (0, 0);
        for e in &self.entries {
            let m = &e.measured;
            let ratio = self.ratio(e);
            let target = target_text(e);
            let status = match self.target_met(e) {
                Some(true) => "PASS",
                Some(false) => "MISS",
                None if e.target.is_some() || e.target_value.is_some() => "n/a",
                None => "",
            };
            if let Some(ok) = self.target_met(e) {
                with_target += 1;
                met += ok as usize;
            }
            let spread = match m.spread() * 100.0 {
                s if s >= 999.5 => ">999%".to_owned(),
                s => format!("{s:.0}%"),
            };
            out.push_str(&format!(
                "{:<w$}  {:>14} {:<6} {:>7}  {:<w$}  {:>8}  {:>tw$}  {}\n",
                m.name,
                fmt_value(m.value),
                m.unit,
                spread,
                e.baseline.as_deref().unwrap_or(""),
                ratio.map_or(String::new(), |(_, r)| format!("{r:.3}x")),
                target,
                status
            ));
        }
        out.push_str(&format!(
            "\nvalues are medians; spread = (max - min) / median over the samples; \
             targets met: {met}/{with_target} (benchmarks report, they do not fail on a miss)\n"
        ));
        if verbose() {
            out.push_str("\nsamples:\n");
            for e in &self.entries {
                let s: Vec<String> = e.measured.samples.iter().map(|&x| fmt_value(x)).collect();
                out.push_str(&format!("{:<w$}  {}\n", e.measured.name, s.join(" ")));
            }
        }
        for e in &self.errors {
            out.push_str(&format!("ERROR: {e}\n"));
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }

    /// Ends a bench: prints the table under `title` (with the errors) and `notes` under
    /// it, writes the JSON and returns the bench's exit code: 1 if a job failed or the
    /// JSON could not be written, 0 otherwise (a missed target is no failure).
    pub fn finish(&self, title: &str, notes: &[String]) -> i32 {
        self.print_table(title);
        for line in notes {
            println!("{line}");
        }
        match self.write_json() {
            Ok(path) => println!("results: {}", path.display()),
            Err(e) => {
                eprintln!("cannot write the results file: {e}");
                return 1;
            }
        }
        i32::from(!self.errors.is_empty())
    }

    /// Writes `<target dir>/bench-results/<bench>.json` and returns its path.
    pub fn write_json(&self) -> std::io::Result<PathBuf> {
        let dir = target_dir().join("bench-results");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{}.json", self.bench));
        let text = serde_json::to_string_pretty(&self.to_json()).expect("report serializes");
        std::fs::write(&path, text + "\n")?;
        Ok(path)
    }
}

/// The target column of an entry: `<=1.20x` for a ratio target, `>=7,000,000` for an
/// absolute one (in the entry's unit), both separated by a space.
fn target_text(e: &Entry) -> String {
    let bound = |is: TargetIs| match is {
        TargetIs::Max => "<=",
        TargetIs::Min => ">=",
    };
    let ratio = e.target.map(|(t, is)| format!("{}{t:.2}x", bound(is)));
    let value = e
        .target_value
        .map(|(t, is)| format!("{}{}", bound(is), fmt_value(t)));
    match (ratio, value) {
        (Some(r), Some(v)) => format!("{r} {v}"),
        (r, v) => r.or(v).unwrap_or_default(),
    }
}

/// A line describing how busy the machine is (1-minute load average from
/// `/proc/loadavg` against the CPU count), for the report: latency figures between
/// processes that spin are only meaningful while each has a core.
pub fn machine_note() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    match load {
        Some(l) if cpus > 0 && l >= cpus as f64 / 2.0 => format!(
            "{cpus} CPUs, load average {l:.2} at start: other processes compete for the \
             cores, expect noisy figures"
        ),
        Some(l) => format!("{cpus} CPUs, load average {l:.2} at start"),
        None => format!("{cpus} CPUs"),
    }
}

/// A number with about four significant digits, grouped in thousands when large.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 10_000.0 {
        let s = format!("{:.0}", v.abs());
        let mut g = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                g.push(',');
            }
            g.push(c);
        }
        if v < 0.0 {
            g.insert(0, '-');
        }
        g
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set, else `target/` of the workspace
/// this bench belongs to. A relative `CARGO_TARGET_DIR` is relative to where cargo was
/// started: the shell's `PWD` (cargo runs the bench in the package root but leaves `PWD`
/// alone), else the current directory.
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let p = PathBuf::from(d);
        if p.is_absolute() {
            return p;
        }
        let start = std::env::var_os("PWD")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute() && d.is_dir())
            .or_else(|| std::env::current_dir().ok());
        return start.map_or(p.clone(), |d| d.join(&p));
    }
    workspace_root(Path::new(env!("CARGO_MANIFEST_DIR"))).join("target")
}

/// The nearest ancestor of `package_dir` (itself included) whose `Cargo.toml`
/// declares a `[workspace]`; `package_dir` if there is none.
fn workspace_root(package_dir: &Path) -> PathBuf {
    package_dir
        .ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
        })
        .unwrap_or(package_dir)
        .to_path_buf()
}

/// Human-readable size for result names: `8B`, `2KiB`, `4MiB`.
pub fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes & ((1 << 10) - 1) == 0 {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}
