//! What the GASP instrumentation costs: `cargo bench --bench gasp`.
//!
//! `gex` and `upcxx` report a GASP event around every public operation when their
//! `gasp` feature is on (the default). This bench measures two operations in four
//! variants:
//!
//! | variant   | build                         | tool                          |
//! |-----------|-------------------------------|-------------------------------|
//! | `off`     | `--no-default-features`: no instrumentation compiled | — |
//! | `notool`  | default features              | none: an operation tests one flag, or none (`rput` and its wait) |
//! | `profile` | default features              | `GASP_TOOL=profile`           |
//! | `trace`   | default features              | `GASP_TOOL=trace`             |
//!
//! | result                      | what (ns per call, rank 0 of a 2-rank job)  | baseline (target)            |
//! |-----------------------------|---------------------------------------------|------------------------------|
//! | `gasp.rput_8B_off`          | `upcxx::rput(v, p).wait()` of a `u64` into rank 1's segment | —           |
//! | `gasp.rput_8B_notool`       | the same                                     | `_off` (≤ 1.05×)             |
//! | `gasp.rput_8B_profile`      | the same                                     | `_off` (≤ off + n × 50 ns)   |
//! | `gasp.rput_8B_trace`        | the same                                     | `_off` (≤ off + n × 100 ns)  |
//! | `gasp.rpc_roundtrip_off`    | `upcxx::rpc(1, empty, ()).wait()`            | —                            |
//! | `gasp.rpc_roundtrip_notool` | the same                                     | `_off` (≤ 1.05×)             |
//! | `gasp.rpc_roundtrip_profile`| the same                                     | `_off` (≤ 1.3×)              |
//! | `gasp.rpc_roundtrip_trace`  | the same                                     | `_off` (≤ 1.4×)              |
//!
//! The rput targets are costs per event: GASP §3 calls each begin, end or atomic
//! notification (`gasp_event_notify`) an event, and the issue allows a profiler 50 ns
//! and a tracer 100 ns per event. One `rput(v, p).wait()` makes `n` of them (a
//! `GASP_UPC_NB_PUT_INIT` and a `GASP_UPCXX_FUTURE_WAIT`, START and END each: `n` = 4),
//! which the driver counts rather than assumes (see *How*). The JSON carries the
//! targets, like every target here, as `target_ratio` (`target_is: "max"`) against the
//! `off` median of the same run: `(off + n × 50) / off` and `(off + n × 100) / off`.
//! The `notool` targets stay 1.05× of `off`; the notes under the table give their cost
//! per event too (the other form of that target: +2 ns). The RPC's targets stay
//! ratios (a round trip makes 6 events, 4 on rank 0 and 2 on rank 1, in about 300 ns).
//!
//! # How
//!
//! One build cannot hold both `off` and the others, so this bench is a driver around a
//! kernel program, `examples/gasp_kernel.rs`. It builds the kernel twice with the cargo
//! that runs it (`$CARGO`), in the same release profile, once with
//! `--no-default-features` into `<target>/gasp-off` and once with the defaults into
//! `<target>/gasp-on`, so the two binaries differ only by the feature. It then runs the
//! kernel as 2-rank jobs (`gex::job::run`): rank 0 times the operations, rank 1 waits
//! in a barrier whose user-level progress runs the RPCs, and rank 0 writes one line of
//! samples to a file this driver reads. For `profile` and `trace` the job's environment
//! names the tool and an output file in a private temporary directory; the launcher
//! merges the ranks' outputs there, this driver looks at the result and deletes it.
//!
//! * **Events per call.** Before the rounds, one job of the instrumented kernel with
//!   `GASP_KERNEL_COUNT` attaches a tool of the kernel's own that counts notifications
//!   and reports how many one call of each operation makes on each rank; the rput
//!   targets use the sum, and the notes under the table print it with the cost per
//!   event of each variant, `(variant - off) / n`.
//! * **Rounds.** Each round runs one job of every variant, in an order that rotates from
//!   round to round. `PGAS_BENCH_SAMPLES=N` (default 9) sets the number of rounds. Up
//!   to as many extra rounds follow while a state faster than the reference state (see
//!   below) recurs, holding [`MIN_STATE_SAMPLES`] samples in all, but lacks samples of
//!   some variant: the fastest state seen is the one to judge, and it can be rare.
//! * **A job.** The kernel warms each operation up and picks its iteration count so that
//!   a sample lasts about `PGAS_BENCH_SAMPLE_MS` (default 10 ms) in that job, then takes
//!   one warm-up and [`SAMPLES_PER_JOB`] measured samples of each operation, alternating
//!   the operations.
//!   A job of any variant lasts about as long, so a trace job records a bounded number
//!   of events.
//! * **The machine's state.** Around each operation's sample (before the rput, between
//!   the two, after the RPC) the kernel probes the machine: a few milliseconds of raw
//!   cache-line ping-pong with rank 1, no library call in the loop. The sample's probe
//!   is the slowest of the three. The states are the clusters of the run's probes
//!   (`common/states.rs`): sorted, a probe more than [`STATE_GAP`] times the one before
//!   it starts a new cluster. Every cluster in which each variant has
//!   [`MIN_STATE_SAMPLES`] samples is *judged*: its medians are compared with its own
//!   `off` median and the targets. The fastest judged state is the *reference state*,
//!   whose figures are the table's and the JSON's; each other judged state gets a note
//!   under the table with its ratios and PASS or MISS, and a faster state too short of
//!   samples to be judged is named with its counts. If no cluster has enough samples,
//!   the reference state is the fastest clusters together, as many as it takes.
//!   The notes also give the reference state's probes, how many samples of each
//!   variant it kept, and the medians of all samples; `PGAS_BENCH_VERBOSE=1` lists
//!   every job's samples with their probes as the jobs end.
//!
//! On this 2-core VM the cost of the same code moves between states from job to job,
//! with where the two ranks run. A probe (a cache-line round trip between them) takes
//! ≈30 ns when they share one core's caches (two hardware threads of one core, by that
//! latency), ≈70 ns on two cores, ≈400 ns when the cores are far apart, and
//! microseconds when the scheduler puts both on one hardware thread. The states are not
//! just slower or faster versions of each other: on one core the two ranks share its
//! pipeline, so every instruction either rank executes (off the latency path too)
//! delays the other, and the instrumentation costs more than on two cores (measured
//! with the profiler attached and its measurement switched on and off between samples
//! of one job: ≈70 ns a round trip against ≈55).
//!
//! A slow state adds the same nanoseconds to every variant, so it hides the
//! instrumentation's cost in a smaller ratio; a job of `off` in one state and one of
//! `profile` in another would make the instrumentation look free, or far too dear.
//! Hence states as clusters: the two fastest are only ≈2.3× apart, so a window of "at
//! most twice the fastest probes" mixed them. Comparing one state's samples compares
//! like with like, and is the stricter judgement when that state is the fastest.
//! Within a state the figures still move by about ±10% from job to job (the spread
//! column), so compare runs on a quiet machine only.
//!
//! The kernel checks the paths it measures (rank 1 reads the last value put in its own
//! memory; an RPC returns a value only rank 1 computes) and reports whether it was
//! built with the feature and whether a tool is attached; the driver checks both
//! against the variant. Under the table the driver lists what the profiler counted on
//! rank 0 in one job, so a reader sees which events the operations produce, and it
//! makes sure the tracer dropped no event (`GASP_TRACE_LIMIT` is raised to fit the
//! job): a trace that drops events measures dropping, not tracing. Likewise a trace
//! whose records outgrow the first buffer measures page faults (a new chunk is touched
//! as it is written, microseconds a page on this VM), so a trace job's
//! `GASP_TRACE_BUFFER` is sized for the records the job can make: the most calls a
//! trace or profile job of the run made so far (a job calls as often as its sample
//! time allows, and the profiler is the faster tool), times the events per call, times
//! [`WORDS_PER_EVENT`], with half again as headroom.

mod common;

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::states::{self, State};
use common::{fmt_value, median, Measured, Report, Sampler, TargetIs, BENCH_OUT};
use serde_json::Value;

const BENCH: &str = "gasp";
/// The kernel's example name.
const KERNEL: &str = "gasp_kernel";
/// The prefix of the kernel's result line.
const LINE_TAG: &str = "GASP_KERNEL ";
/// Each rank's shared segment (the kernel allocates one cache line of it).
const SEGMENT: usize = 16 << 20;
/// Measured samples per operation in one job of a measured round.
const SAMPLES_PER_JOB: usize = 3;
/// Discarded samples per operation at the start of each job.
const WARMUP_PER_JOB: usize = 1;
/// Sample length unless `PGAS_BENCH_SAMPLE_MS` says otherwise.
const DEFAULT_SAMPLE_MS: u64 = 10;
/// Time limit of one job.
const JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// `GASP_TRACE_LIMIT` of the trace jobs, in records per thread: a job of the kernel
/// records far fewer (a few million: ~100 ms of operations at tens of ns per record),
/// so none is dropped; buffers grow only as records arrive.
const TRACE_LIMIT: u64 = 1 << 24;
/// Words of trace buffer per event allowed for: a record is a header word plus the
/// arguments that changed since the thread's previous record, and a library interval
/// (START and END) is one record with its duration; the measured operations take about
/// 1 (rput) to 1.5 (rpc) words an event.
const WORDS_PER_EVENT: f64 = 2.0;
/// The `GASP_TRACE_BUFFER` (MiB) of a trace job when no job has run yet to size it.
const TRACE_BUFFER_MIB_UNSIZED: u64 = 256;
/// Two sorted probes this many times apart belong to different states of the machine
/// (the module docs): 1.5 separates the ≈30 ns state (two hardware threads of one
/// core) from the ≈70 ns one (two cores), while the probes within a state step by a
/// few percent.
const STATE_GAP: f64 = 1.5;
/// Samples each variant needs in a state for its figures to come from that state alone.
const MIN_STATE_SAMPLES: usize = 3;
/// Calls of each operation in the counting job.
const COUNT_CALLS: u64 = 10_000;

/// Environment the driver sets for every job itself; inherited values would change what
/// a variant measures.
const OWN_ENV: &[&str] = &[
    "GASP_TOOL",
    "GASP_OUT",
    "GASP_PROFILE_ONLY",
    "GASP_EXCLUDE_LOCAL",
    "GASP_TRACE_LIMIT",
    "GASP_TRACE_BUFFER",
    "GASP_KERNEL_COUNT",
    "GASP_KERNEL_SAMPLES",
    "GASP_KERNEL_WARMUP",
    "GASP_KERNEL_SAMPLE_MS",
];

/// A build and tool combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Off,
    NoTool,
    Profile,
    Trace,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Off,
        Variant::NoTool,
        Variant::Profile,
        Variant::Trace,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::NoTool => "notool",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
        }
    }

    fn instrumented(self) -> bool {
        self != Variant::Off
    }

    fn has_tool(self) -> bool {
        matches!(self, Variant::Profile | Variant::Trace)
    }

    /// The `GASP_TOOL` value.
    fn tool(self) -> &'static str {
        match self {
            Variant::Off | Variant::NoTool => "",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The two measured operations: the kernel's keys and the result names' stems.
const OPS: [&str; 2] = ["rput_8B", "rpc_roundtrip"];

/// One measured sample of a job.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// The kernel's probe: ns per round trip of a raw cache-line ping-pong with rank 1,
    /// the slowest of the three probes around the sample.
    probe: f64,
    /// ns per call, per operation (in [`OPS`] order).
    ns: [f64; 2],
}

/// What one kernel job reported.
#[derive(Debug)]
struct KernelRun {
    /// Calls made per operation (in [`OPS`] order).
    calls: [u64; 2],
    samples: Vec<Sample>,
}

/// Notifications (events, GASP §3) one call makes, per operation (in [`OPS`] order)
/// and rank.
type EventsPerCall = [[f64; 2]; 2];

/// How to run one job.
struct JobPlan<'a> {
    variant: Variant,
    exe: &'a Path,
    sample_ms: u64,
    /// Distinguishes this job's files in `tmp`.
    tag: String,
    /// `GASP_TRACE_BUFFER` of a trace job, in MiB.
    trace_buffer_mib: u64,
}

/// Event names with their counts.
type EventCounts = Vec<(String, u64)>;

/// Figures taken from the tools' outputs, printed under the table.
#[derive(Default)]
struct ToolNotes {
    /// Rank 0's event counts in the first profile job, most frequent first, and that
    /// job's calls per operation.
    profile: Option<(EventCounts, [u64; 2])>,
    /// Events dropped by the tracer, over all trace jobs.
    trace_dropped: u64,
}

/// A private temporary directory, removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("pgas-bench-gasp-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds the kernel into `target_dir` with or without the default features (the
/// `gasp` feature) and returns the executable.
fn build_kernel(target_dir: &Path, instrumented: bool) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--release", "--example", KERNEL])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir)
        // Artifacts as JSON on stdout (where the executable is), diagnostics as usual.
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if !instrumented {
        cmd.arg("--no-default-features");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    let mut exe = None;
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo's output: {e}"))?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" && msg["target"]["name"] == KERNEL {
            if let Some(path) = msg["executable"].as_str() {
                exe = Some(PathBuf::from(path));
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building {KERNEL} into {} failed ({status})",
            target_dir.display()
        ));
    }
    exe.ok_or_else(|| format!("cargo built no {KERNEL} executable"))
}

/// Runs one 2-rank job of the kernel and returns what rank 0 reported, after checking
/// that the kernel is the variant it should be and looking at the tool's output.
fn run_kernel(plan: &JobPlan<'_>, tmp: &Path, notes: &mut ToolNotes) -> Result<KernelRun, String> {
    let v = plan.variant;
    let out = tmp.join(format!("kernel-{}.txt", plan.tag));
    let tool_out = tmp.join(format!("{}-{}.json", v.tool(), plan.tag));
    let _ = std::fs::remove_file(&out);
    let mut env: Vec<(OsString, OsString)> = vec![
        (BENCH_OUT.into(), out.clone().into()),
        ("GASP_TOOL".into(), v.tool().into()),
        (
            "GASP_KERNEL_WARMUP".into(),
            WARMUP_PER_JOB.to_string().into(),
        ),
        (
            "GASP_KERNEL_SAMPLES".into(),
            SAMPLES_PER_JOB.to_string().into(),
        ),
        (
            "GASP_KERNEL_SAMPLE_MS".into(),
            plan.sample_ms.to_string().into(),
        ),
    ];
    if v.has_tool() {
        env.push(("GASP_OUT".into(), tool_out.clone().into()));
    }
    if v == Variant::Trace {
        env.push(("GASP_TRACE_LIMIT".into(), TRACE_LIMIT.to_string().into()));
        env.push((
            "GASP_TRACE_BUFFER".into(),
            plan.trace_buffer_mib.to_string().into(),
        ));
    }
    let spec = gex::job::JobSpec {
        program: plan.exe.to_path_buf(),
        args: Vec::new(),
        ranks: 2,
        segment_size: SEGMENT,
        timeout: Some(JOB_TIMEOUT),
        env,
        name: format!("bench gasp/{}", v.name()),
        forward_signals: true,
    };
    let outcome = gex::job::run(&spec);
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    let inspected = match v {
        Variant::Profile => profile_counts(&tool_out).map(Some),
        Variant::Trace => trace_dropped(&tool_out).map(|d| {
            notes.trace_dropped += d;
            None
        }),
        _ => Ok(None),
    };
    let _ = std::fs::remove_file(&tool_out);
    let job = format!("{} job {}", v.name(), plan.tag);
    let outcome = outcome.map_err(|e| format!("{job}: cannot start: {e}"))?;
    if let Some(failure) = outcome.failure {
        return Err(format!("{job} failed: {failure}"));
    }
    let text = text.map_err(|e| format!("{job}: rank 0 wrote no results ({e})"))?;
    let run = parse_kernel_line(&text, v).map_err(|e| format!("{job}: {e}"))?;
    match inspected.map_err(|e| format!("{job}: {e}"))? {
        Some(counts) if notes.profile.is_none() => {
            notes.profile = Some((counts, run.calls));
        }
        _ => {}
    }
    Ok(run)
}

/// Runs the counting job (`GASP_KERNEL_COUNT`) of the instrumented kernel `exe`: the
/// events one call of each operation makes on each rank.
fn count_events(exe: &Path, tmp: &Path) -> Result<EventsPerCall, String> {
    let out = tmp.join("kernel-count.txt");
    let _ = std::fs::remove_file(&out);
    let spec = gex::job::JobSpec {
        program: exe.to_path_buf(),
        args: Vec::new(),
        ranks: 2,
        segment_size: SEGMENT,
        timeout: Some(JOB_TIMEOUT),
        env: vec![
            (BENCH_OUT.into(), out.clone().into()),
            ("GASP_KERNEL_COUNT".into(), COUNT_CALLS.to_string().into()),
        ],
        name: "bench gasp/count".to_owned(),
        forward_signals: true,
    };
    let outcome = gex::job::run(&spec).map_err(|e| format!("count job: cannot start: {e}"))?;
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if let Some(failure) = outcome.failure {
        return Err(format!("count job failed: {failure}"));
    }
    let text = text.map_err(|e| format!("count job: rank 0 wrote no results ({e})"))?;
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix(LINE_TAG))
        .ok_or_else(|| format!("count job: no {LINE_TAG}line in the results"))?;
    let r: Value =
        serde_json::from_str(json).map_err(|e| format!("count job: bad results line: {e}"))?;
    let mut events = EventsPerCall::default();
    for (per_rank, op) in events.iter_mut().zip(OPS) {
        let counts = r["notifications"][op]
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| format!("count job: results lack `notifications.{op}`"))?;
        for (n, c) in per_rank.iter_mut().zip(counts) {
            *n = c
                .as_f64()
                .ok_or_else(|| format!("count job: bad count in `notifications.{op}`"))?;
        }
    }
    Ok(events)
}

/// The `GASP_TRACE_BUFFER` (MiB) for a job that makes at most `calls` calls of each
/// operation, `events` events per call: the busier rank's records (module docs).
fn trace_buffer_mib(calls: [u64; 2], events: &EventsPerCall) -> u64 {
    let busiest = (0..2)
        .map(|rank| {
            (0..2)
                .map(|op| calls[op] as f64 * events[op][rank])
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    let bytes = busiest * WORDS_PER_EVENT * 8.0 * 1.5;
    ((bytes / f64::from(1 << 20)).ceil() as u64).max(gasp::tools::trace::DEFAULT_BUFFER_MIB as u64)
}

/// Events per call as counted: whole unless something reports now and then.
fn fmt_events(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.2}")
    }
}

/// Parses the kernel's result line and checks its build and tool against `v`.
fn parse_kernel_line(text: &str, v: Variant) -> Result<KernelRun, String> {
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix(LINE_TAG))
        .ok_or_else(|| format!("no {LINE_TAG}line in the results"))?;
    let r: Value = serde_json::from_str(json).map_err(|e| format!("bad results line: {e}"))?;
    let flag = |k: &str| r[k].as_bool().ok_or_else(|| format!("results lack `{k}`"));
    let (instrumented, tool) = (flag("instrumented")?, flag("tool")?);
    if instrumented != v.instrumented() || tool != v.has_tool() {
        return Err(format!(
            "the kernel reports instrumented={instrumented}, tool attached={tool}, \
             which is not the {} variant",
            v.name()
        ));
    }
    let count = |section: &str, op: &str| {
        r[section][op]
            .as_u64()
            .ok_or_else(|| format!("results lack `{section}.{op}`"))
    };
    let samples = |op: &str| -> Result<Vec<f64>, String> {
        r[op]
            .as_array()
            .ok_or_else(|| format!("results lack `{op}`"))?
            .iter()
            .map(|x| x.as_f64().ok_or_else(|| format!("bad sample in `{op}`")))
            .collect()
    };
    let (probe, rput, rpc) = (samples("probe")?, samples(OPS[0])?, samples(OPS[1])?);
    if probe.len() != rput.len() || rpc.len() != rput.len() {
        return Err("results have lists of samples of different lengths".to_owned());
    }
    Ok(KernelRun {
        calls: [count("calls", OPS[0])?, count("calls", OPS[1])?],
        samples: (probe.into_iter().zip(rput).zip(rpc))
            .map(|((probe, rput), rpc)| Sample {
                probe,
                ns: [rput, rpc],
            })
            .collect(),
    })
}

/// Rank 0's event counts in a merged profile, by event name, most frequent first.
fn profile_counts(path: &Path) -> Result<EventCounts, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("the profiler wrote no {}: {e}", path.display()))?;
    let profile: gasp::formats::Profile = serde_json::from_reader(BufReader::new(file))
        .map_err(|e| format!("bad profile {}: {e}", path.display()))?;
    let mut counts = EventCounts::new();
    for row in profile.events.iter().filter(|r| r.rank == 0) {
        match counts.iter_mut().find(|(name, _)| *name == row.name) {
            Some((_, c)) => *c += row.count,
            None => counts.push((row.name.clone(), row.count)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(counts)
}

/// The `otherData.dropped` count of a merged trace. The file can be hundreds of MB and
/// `otherData` is its last member (`gasp::formats::Trace`), so only the end is read.
fn trace_dropped(path: &Path) -> Result<u64, String> {
    let err = |e: std::io::Error| format!("the tracer's output {}: {e}", path.display());
    let mut file = std::fs::File::open(path).map_err(err)?;
    let len = file.metadata().map_err(err)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(4096)))
        .map_err(err)?;
    let mut tail = String::new();
    file.read_to_string(&mut tail).map_err(err)?;
    let key = "\"dropped\":";
    let at = tail
        .rfind(key)
        .ok_or_else(|| format!("no dropped count at the end of {}", path.display()))?;
    let digits: String = tail[at + key.len()..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .map_err(|_| format!("bad dropped count in {}", path.display()))
}

/// The driver's settings, from the harness's environment variables.
fn settings() -> (usize, u64) {
    let sampler = Sampler::from_env();
    let rounds = sampler.samples.max(1);
    let sample_ms = std::env::var(common::BENCH_SAMPLE_MS)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .unwrap_or(DEFAULT_SAMPLE_MS);
    (rounds, sample_ms)
}

/// The samples of each variant, by variant index.
type Taken = [Vec<Sample>; 4];

/// The probes of each variant's samples (the groups [`states::judged`] compares).
fn probe_groups(taken: &Taken) -> Vec<Vec<f64>> {
    taken
        .iter()
        .map(|samples| samples.iter().map(|s| s.probe).collect())
        .collect()
}

/// The states whose figures the driver reports and judges, fastest first (see the
/// module docs); the first is the reference state of the table.
fn judged_states(taken: &Taken) -> Vec<State> {
    states::judged(&probe_groups(taken), STATE_GAP, MIN_STATE_SAMPLES)
}

/// The clusters faster than the reference state that hold too few samples of some
/// variant to be judged.
fn unjudged_states(taken: &Taken, judged: &[State]) -> Vec<State> {
    let all: Vec<f64> = probe_groups(taken).concat();
    judged
        .first()
        .map(|reference| states::unjudged_faster(&all, STATE_GAP, reference))
        .unwrap_or_default()
}

/// Whether a state faster than the reference one recurs (it holds
/// [`MIN_STATE_SAMPLES`] samples in all) but is short of samples of some variant: more
/// rounds may fill it.
fn faster_state_short(taken: &Taken) -> bool {
    let all: Vec<f64> = probe_groups(taken).concat();
    unjudged_states(taken, &judged_states(taken))
        .iter()
        .any(|s| s.count(&all) >= MIN_STATE_SAMPLES)
}

/// The samples of each variant (by index) and operation (in [`OPS`] order) taken in
/// `state`.
fn samples_in(taken: &Taken, state: &State) -> [[Vec<f64>; 2]; 4] {
    let mut out: [[Vec<f64>; 2]; 4] = Default::default();
    for (v_samples, out) in taken.iter().zip(out.iter_mut()) {
        for s in v_samples.iter().filter(|s| state.contains(s.probe)) {
            for (op_samples, ns) in out.iter_mut().zip(s.ns) {
                op_samples.push(ns);
            }
        }
    }
    out
}

/// The targets of operation `op_i` for `notool`, `profile` and `trace` (in that order)
/// against its `off` median (module docs). The rput targets are per event: without the
/// events per call they are not judged.
fn targets(op_i: usize, off: f64, per_call: Option<f64>) -> [Option<(f64, TargetIs)>; 3] {
    let max = |t: f64| Some((t, TargetIs::Max));
    if op_i == 1 {
        return [max(1.05), max(1.3), max(1.4)];
    }
    match per_call {
        Some(n) => [
            max(1.05),
            max((off + n * 50.0) / off),
            max((off + n * 100.0) / off),
        ],
        None => [max(1.05), None, None],
    }
}

/// How many samples of each variant lie in `state`, as `off 3, notool 2, ...`.
fn counts_in(taken: &Taken, state: &State) -> String {
    let counts: Vec<String> = Variant::ALL
        .iter()
        .zip(probe_groups(taken))
        .map(|(v, probes)| format!("{} {}", v.name(), state.count(&probes)))
        .collect();
    counts.join(", ")
}

/// The note on a judged state other than the reference: its ratios and whether each
/// meets its target; `met` counts `(met, judged)` over all such notes.
fn state_note(
    taken: &Taken,
    state: &State,
    per_call: impl Fn(usize) -> Option<f64>,
    met: &mut (usize, usize),
) -> String {
    let samples = samples_in(taken, state);
    let mut ops = Vec::new();
    for (op_i, op) in OPS.iter().enumerate() {
        let off = median(&samples[Variant::Off.index()][op_i]);
        if !off.is_finite() || off <= 0.0 {
            continue;
        }
        let figures: Vec<String> = Variant::ALL[1..]
            .iter()
            .zip(targets(op_i, off, per_call(op_i)))
            .map(|(&v, target)| {
                let ratio = median(&samples[v.index()][op_i]) / off;
                match target {
                    Some((t, is)) => {
                        let ok = is.holds(ratio, t);
                        met.0 += usize::from(ok);
                        met.1 += 1;
                        let status = if ok { "PASS" } else { "MISS" };
                        format!("{} {ratio:.3}x (<={t:.2}x {status})", v.name())
                    }
                    None => format!("{} {ratio:.3}x", v.name()),
                }
            })
            .collect();
        ops.push(format!(
            "{op} off {} ns, {}",
            fmt_value(off),
            figures.join(", ")
        ));
    }
    format!(
        "also judged, the state of probes {} to {} ns (samples {}): {}",
        fmt_value(state.lo),
        fmt_value(state.hi),
        counts_in(taken, state),
        ops.join("; ")
    )
}

fn driver() -> i32 {
    // `cargo bench` passes `--bench` (and the user may pass more): nothing to parse.
    for name in OWN_ENV {
        std::env::remove_var(name);
    }
    let machine = common::machine_note();
    let (rounds, sample_ms) = settings();
    eprintln!(
        "gasp bench: 2-rank jobs of {KERNEL}, 4 variants x {rounds} rounds (up to {rounds} \
         more while a faster state lacks samples), {SAMPLES_PER_JOB} samples of \
         ~{sample_ms} ms per figure and job; {machine}"
    );
    let mut report = Report::new(BENCH, 2);
    let target = common::target_dir();

    let mut exes = Vec::new();
    for (dir, instrumented) in [("gasp-off", false), ("gasp-on", true)] {
        eprintln!(
            "gasp bench: building {KERNEL} into {}",
            target.join(dir).display()
        );
        match build_kernel(&target.join(dir), instrumented) {
            Ok(exe) => exes.push(exe),
            Err(e) => {
                report.errors.push(e);
                return finish(&report, &machine, &[]);
            }
        }
    }
    let exe = |v: Variant| exes[usize::from(v.instrumented())].as_path();

    let tmp = match TempDir::new() {
        Ok(t) => t,
        Err(e) => {
            report
                .errors
                .push(format!("cannot create a temporary directory: {e}"));
            return finish(&report, &machine, &[]);
        }
    };
    let mut notes = ToolNotes::default();

    eprintln!("gasp bench: counting the events of one call of each operation");
    let events = match count_events(exe(Variant::NoTool), &tmp.0) {
        Ok(events) => Some(events),
        Err(e) => {
            report.errors.push(e);
            None
        }
    };

    // Rounds, the variants' order rotating; extra rounds while a faster state than the
    // reference one recurs without enough samples of every variant.
    let mut taken: Taken = Default::default();
    let verbose = common::verbose();
    // The most calls of each operation a profile or trace job made.
    let mut most_calls = [0u64; 2];
    let mut trace_buffers = (u64::MAX, 0);
    let mut round = 0;
    while round < rounds || (round < 2 * rounds && faster_state_short(&taken)) {
        if round < rounds {
            eprintln!("gasp bench: round {}/{rounds}", round + 1);
        } else {
            eprintln!(
                "gasp bench: extra round {}/{rounds}: a state faster than the reference \
                 one lacks samples of some variant",
                round + 1 - rounds
            );
        }
        for k in 0..Variant::ALL.len() {
            let v = Variant::ALL[(round + k) % Variant::ALL.len()];
            let trace_buffer_mib = match &events {
                Some(events) if most_calls != [0, 0] => trace_buffer_mib(most_calls, events),
                _ => TRACE_BUFFER_MIB_UNSIZED,
            };
            let plan = JobPlan {
                variant: v,
                exe: exe(v),
                sample_ms,
                tag: format!("round{round}"),
                trace_buffer_mib,
            };
            if v == Variant::Trace {
                trace_buffers.0 = trace_buffers.0.min(trace_buffer_mib);
                trace_buffers.1 = trace_buffers.1.max(trace_buffer_mib);
            }
            match run_kernel(&plan, &tmp.0, &mut notes) {
                Ok(run) => {
                    if v.has_tool() {
                        for (most, calls) in most_calls.iter_mut().zip(run.calls) {
                            *most = (*most).max(calls);
                        }
                    }
                    if verbose {
                        for s in &run.samples {
                            eprintln!(
                                "gasp bench: {} job: probe {} ns, {} {} ns, {} {} ns",
                                v.name(),
                                fmt_value(s.probe),
                                OPS[0],
                                fmt_value(s.ns[0]),
                                OPS[1],
                                fmt_value(s.ns[1])
                            );
                        }
                    }
                    taken[v.index()].extend(run.samples);
                }
                Err(e) => report.errors.push(e),
            }
        }
        round += 1;
    }
    drop(tmp);

    // The states judged; the first, the reference state, gives the table's figures.
    let judged = judged_states(&taken);
    let reference = judged.first().copied().unwrap_or(State {
        lo: 0.0,
        hi: f64::INFINITY,
    });
    let samples = samples_in(&taken, &reference);
    for v in Variant::ALL {
        if !taken[v.index()].is_empty() && samples[v.index()][0].is_empty() {
            report.errors.push(format!(
                "no sample of {} was taken in the reference state: no figure",
                v.name()
            ));
        }
    }

    for (op_i, op) in OPS.iter().enumerate() {
        for v in Variant::ALL {
            let s = &samples[v.index()][op_i];
            if !s.is_empty() {
                report.add([Measured::latency_ns(format!("gasp.{op}_{}", v.name()), s)]);
            }
        }
    }
    let off = |op: usize| median(&samples[Variant::Off.index()][op]);
    let (rput_off, rpc_off) = (off(0), off(1));
    let name = |op: &str, v: Variant| format!("gasp.{op}_{}", v.name());
    // Events one call makes, all ranks together.
    let per_call = |op: usize| events.map(|e| e[op][0] + e[op][1]);
    for (op_i, op) in OPS.iter().enumerate() {
        let base = name(op, Variant::Off);
        let off_value = off(op_i);
        if !off_value.is_finite() || off_value <= 0.0 {
            continue;
        }
        for (&v, target) in Variant::ALL[1..]
            .iter()
            .zip(targets(op_i, off_value, per_call(op_i)))
        {
            report.relate(&name(op, v), &base, target);
        }
    }

    let mut lines = Vec::new();
    if !judged.is_empty() {
        let probes: Vec<f64> = {
            let mut p = probe_groups(&taken).concat();
            p.sort_by(f64::total_cmp);
            p
        };
        let kept: Vec<String> = Variant::ALL
            .iter()
            .map(|&v| {
                let (kept, all) = (samples[v.index()][0].len(), taken[v.index()].len());
                format!("{} {kept}/{all}", v.name())
            })
            .collect();
        lines.push(format!(
            "raw ping-pong probe around each sample: fastest {} ns, median {} ns; \
             samples in the reference state (probes {} to {} ns), which the figures are \
             the medians of: {}",
            fmt_value(probes[0]),
            fmt_value(median(&probes)),
            fmt_value(reference.lo),
            fmt_value(reference.hi),
            kept.join(", ")
        ));
        for state in unjudged_states(&taken, &judged) {
            lines.push(format!(
                "not judged, too few samples ({MIN_STATE_SAMPLES} of each variant needed): \
                 the faster state of probes {} to {} ns (samples {})",
                fmt_value(state.lo),
                fmt_value(state.hi),
                counts_in(&taken, &state)
            ));
        }
        let mut met = (0, 0);
        for state in &judged[1..] {
            lines.push(state_note(&taken, state, per_call, &mut met));
        }
        if met.1 > 0 {
            lines.push(format!(
                "targets met in the other judged states: {}/{}",
                met.0, met.1
            ));
        }
        for (op_i, op) in OPS.iter().enumerate() {
            let all: Vec<String> = Variant::ALL
                .iter()
                .map(|&v| {
                    let ns: Vec<f64> = taken[v.index()].iter().map(|s| s.ns[op_i]).collect();
                    format!("{} {} ns", v.name(), fmt_value(median(&ns)))
                })
                .collect();
            lines.push(format!("{op}, medians of all samples: {}", all.join(", ")));
        }
    }
    if let (Some(e), Some(n)) = (events, per_call(0)) {
        lines.push(format!(
            "events per call (counted with a counting tool, rank 0 + rank 1): rput_8B {} + {}, \
             rpc_roundtrip {} + {}",
            fmt_events(e[0][0]),
            fmt_events(e[0][1]),
            fmt_events(e[1][0]),
            fmt_events(e[1][1])
        ));
        lines.push(format!(
            "rput targets are per event: profile <= off + {n} x 50 ns = {} ns, trace <= off + \
             {n} x 100 ns = {} ns",
            fmt_value(rput_off + n * 50.0),
            fmt_value(rput_off + n * 100.0),
            n = fmt_events(n),
        ));
    }
    for (op_i, op) in OPS.iter().enumerate() {
        let base = [rput_off, rpc_off][op_i];
        let n = per_call(op_i).filter(|&n| n > 0.0);
        let extra: Vec<String> = Variant::ALL[1..]
            .iter()
            .map(|&v| {
                let d = median(&samples[v.index()][op_i]) - base;
                let sign = if d >= 0.0 { "+" } else { "" };
                match n {
                    Some(n) => format!(
                        "{} {sign}{} ns ({sign}{} ns per event)",
                        v.name(),
                        fmt_value(d),
                        fmt_value(d / n)
                    ),
                    None => format!("{} {sign}{} ns", v.name(), fmt_value(d)),
                }
            })
            .collect();
        lines.push(format!("{op} over off: {}", extra.join(", ")));
    }
    if let Some((counts, calls)) = &notes.profile {
        let top: Vec<String> = counts
            .iter()
            .take(8)
            .map(|(n, c)| format!("{n} {}", fmt_value(*c as f64)))
            .collect();
        lines.push(format!(
            "events the profiler counted on rank 0 in one job of {} rput and {} rpc calls: {}",
            fmt_value(calls[0] as f64),
            fmt_value(calls[1] as f64),
            top.join(", ")
        ));
    }
    if trace_buffers.1 > 0 {
        lines.push(format!(
            "trace jobs' GASP_TRACE_BUFFER: {} to {} MiB",
            trace_buffers.0, trace_buffers.1
        ));
    }
    if notes.trace_dropped > 0 {
        report.errors.push(format!(
            "the tracer dropped {} events: the trace figures measure dropping, not tracing",
            notes.trace_dropped
        ));
    }
    finish(&report, &machine, &lines)
}

/// Prints the table, the notes `lines` under it and writes the JSON; the exit code.
fn finish(report: &Report, machine: &str, lines: &[String]) -> i32 {
    report.finish(
        &format!(
            "GASP instrumentation overhead: rank 0 of 2-rank jobs of {KERNEL}, the \
             variants interleaved job by job; {machine}"
        ),
        lines,
    )
}

fn main() {
    std::process::exit(driver());
}
