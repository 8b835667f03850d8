//! The report: each result related to its baseline and target, printed as a table and
//! written as JSON under the target directory.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::Measured;

/// Set (non-empty) to list every sample under the table.
pub(crate) const BENCH_VERBOSE: &str = "PGAS_BENCH_VERBOSE";

/// Whether [`BENCH_VERBOSE`] asks for every sample to be listed.
pub(crate) fn verbose() -> bool {
    std::env::var_os(BENCH_VERBOSE).is_some_and(|v| !v.is_empty())
}

/// Which way a target bounds the ratio to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetIs {
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
    pub(crate) fn holds(self, x: f64, t: f64) -> bool {
        match self {
            TargetIs::Max => x <= t,
            TargetIs::Min => x >= t,
        }
    }
}

/// A result of the report with what it is compared to.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
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
pub(crate) struct Report {
    pub bench: String,
    pub ranks: usize,
    pub entries: Vec<Entry>,
    /// Failures to mention under the table (jobs that did not complete).
    pub errors: Vec<String>,
    /// Further keys of the JSON document, after `results` ([`Report::section`]).
    pub sections: Map<String, Value>,
}

impl Report {
    pub(crate) fn new(bench: &str, ranks: usize) -> Report {
        Report {
            bench: bench.to_owned(),
            ranks,
            entries: Vec::new(),
            errors: Vec::new(),
            sections: Map::new(),
        }
    }

    /// Appends results (in order).
    pub(crate) fn add(&mut self, results: impl IntoIterator<Item = Measured>) {
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
    pub(crate) fn relate(&mut self, name: &str, baseline: &str, target: Option<(f64, TargetIs)>) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.measured.name == name) {
            e.baseline = Some(baseline.to_owned());
            e.target = target;
        }
    }

    /// Gives `name` an absolute target `(value, Max|Min)` on its own value, in its unit.
    /// Unknown names are ignored, as in [`Report::relate`].
    pub(crate) fn target_value(&mut self, name: &str, value: f64, is: TargetIs) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.measured.name == name) {
            e.target_value = Some((value, is));
        }
    }

    /// Adds `key` to the JSON document, holding `value` (what a bench measures besides
    /// its results: the coll bench's sweep).
    pub(crate) fn section(&mut self, key: &str, value: Value) {
        self.sections.insert(key.to_owned(), value);
    }

    /// The measured value of result `name`, if the run has it.
    pub(crate) fn value_of(&self, name: &str) -> Option<f64> {
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
    pub(crate) fn target_met(&self, e: &Entry) -> Option<bool> {
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
    /// (`"max"`/`"min"`, bounding `value` itself, in `unit`). The sections
    /// ([`Report::section`]) follow `results`.
    pub(crate) fn to_json(&self) -> Value {
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
        let mut doc = json!({"bench": self.bench, "ranks": self.ranks, "results": results});
        if let Value::Object(o) = &mut doc {
            o.extend(self.sections.clone());
        }
        doc
    }

    /// Prints the table on stdout.
    pub(crate) fn print_table(&self, title: &str) {
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
    pub(crate) fn finish(&self, title: &str, notes: &[String]) -> i32 {
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
    pub(crate) fn write_json(&self) -> std::io::Result<PathBuf> {
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
pub(crate) fn machine_note() -> String {
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
pub(crate) fn fmt_value(v: f64) -> String {
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
pub(crate) fn target_dir() -> PathBuf {
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
pub(crate) fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes & ((1 << 10) - 1) == 0 {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}
