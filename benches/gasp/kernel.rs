//! Building the kernel (`examples/gasp_kernel.rs`) with and without the `gasp` feature,
//! and running it as 2-rank jobs: a measured job of one variant, the counting job, and
//! reading what the tools left.

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::BENCH_OUT;
use crate::variant::{Variant, OPS};

/// The kernel's example name.
pub(crate) const KERNEL: &str = "gasp_kernel";
/// The prefix of the kernel's result line.
pub(crate) const LINE_TAG: &str = "GASP_KERNEL ";
/// Each rank's shared segment (the kernel allocates one cache line of it).
pub(crate) const SEGMENT: usize = 16 << 20;
/// Measured samples per operation in one job of a measured round.
pub(crate) const SAMPLES_PER_JOB: usize = 3;
/// Discarded samples per operation at the start of each job.
pub(crate) const WARMUP_PER_JOB: usize = 1;
/// Time limit of one job.
pub(crate) const JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// `GASP_TRACE_LIMIT` of the trace jobs, in records per thread: a job of the kernel
/// records far fewer (a few million: ~100 ms of operations at tens of ns per record),
/// so none is dropped; buffers grow only as records arrive.
pub(crate) const TRACE_LIMIT: u64 = 1 << 24;
/// Words of trace buffer per event allowed for: a record is a header word plus the
/// arguments that changed since the thread's previous record, and a library interval
/// (START and END) is one record with its duration; the measured operations take about
/// 1 (rput) to 1.5 (rpc) words an event.
pub(crate) const WORDS_PER_EVENT: f64 = 2.0;
/// The `GASP_TRACE_BUFFER` (MiB) of a trace job when no job has run yet to size it.
pub(crate) const TRACE_BUFFER_MIB_UNSIZED: u64 = 256;
/// Calls of each operation in the counting job.
pub(crate) const COUNT_CALLS: u64 = 10_000;

/// One measured sample of a job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// The kernel's probe: ns per round trip of a raw cache-line ping-pong with rank 1,
    /// the slowest of the three probes around the sample.
    pub(crate) probe: f64,
    /// ns per call, per operation (in [`OPS`] order).
    pub(crate) ns: [f64; 2],
}

/// What one kernel job reported.
#[derive(Debug)]
pub(crate) struct KernelRun {
    /// Calls made per operation (in [`OPS`] order).
    pub(crate) calls: [u64; 2],
    pub(crate) samples: Vec<Sample>,
}

/// Notifications (events, GASP §3) one call makes, per operation (in [`OPS`] order)
/// and rank.
pub(crate) type EventsPerCall = [[f64; 2]; 2];

/// How to run one job.
pub(crate) struct JobPlan<'a> {
    pub(crate) variant: Variant,
    pub(crate) exe: &'a Path,
    pub(crate) sample_ms: u64,
    /// Distinguishes this job's files in `tmp`.
    pub(crate) tag: String,
    /// `GASP_TRACE_BUFFER` of a trace job, in MiB.
    pub(crate) trace_buffer_mib: u64,
}

/// Event names with their counts.
pub(crate) type EventCounts = Vec<(String, u64)>;

/// Figures taken from the tools' outputs, printed under the table.
#[derive(Default)]
pub(crate) struct ToolNotes {
    /// Rank 0's event counts in the first profile job, most frequent first, and that
    /// job's calls per operation.
    pub(crate) profile: Option<(EventCounts, [u64; 2])>,
    /// Events dropped by the tracer, over all trace jobs.
    pub(crate) trace_dropped: u64,
}

/// A private temporary directory, removed with everything in it when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new() -> std::io::Result<TempDir> {
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
pub(crate) fn build_kernel(target_dir: &Path, instrumented: bool) -> Result<PathBuf, String> {
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
pub(crate) fn run_kernel(
    plan: &JobPlan<'_>,
    tmp: &Path,
    notes: &mut ToolNotes,
) -> Result<KernelRun, String> {
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
pub(crate) fn count_events(exe: &Path, tmp: &Path) -> Result<EventsPerCall, String> {
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
pub(crate) fn trace_buffer_mib(calls: [u64; 2], events: &EventsPerCall) -> u64 {
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

/// Parses the kernel's result line and checks its build and tool against `v`.
pub(crate) fn parse_kernel_line(text: &str, v: Variant) -> Result<KernelRun, String> {
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
pub(crate) fn profile_counts(path: &Path) -> Result<EventCounts, String> {
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
pub(crate) fn trace_dropped(path: &Path) -> Result<u64, String> {
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
