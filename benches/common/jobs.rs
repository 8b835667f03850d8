//! Jobs: the driver launches ranks of its own executable ([`run_job`]); a rank learns
//! which job it runs ([`rank_job`]) and rank 0 hands its results back
//! ([`write_rank_results`]) in a results file, a JSON document `{"job", "results"}`
//! to which a bench may add its own keys ([`write_rank_file`], [`run_job_file`]; the
//! `mpi` bench adds the figures a job could not measure, and starts some jobs under
//! `mpirun`, with [`results_path`] and [`read_job_file`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::{fmt_value, Measured};

/// Environment variable naming the job a rank process runs (set by [`run_job`]).
pub(crate) const BENCH_JOB: &str = "PGAS_BENCH_JOB";
/// Environment variable holding the file rank 0 writes its results to.
pub(crate) const BENCH_OUT: &str = "PGAS_BENCH_OUT";

/// What a rank process was started to do.
#[derive(Debug, Clone)]
pub(crate) struct RankJob {
    /// The job name given to [`run_job`].
    pub job: String,
    /// Where rank 0 writes its results; `None` when started by hand (for example with
    /// `upcxx-run -n 2 <bench binary>`): rank 0 then prints them.
    pub out: Option<PathBuf>,
}

/// `Some` when this process is a rank of a job (`UPCXX_RANK` set), with the job to run
/// (`default_job` if the driver did not name one).
pub(crate) fn rank_job(default_job: &str) -> Option<RankJob> {
    std::env::var_os(gex::job::UPCXX_RANK)?;
    Some(RankJob::from_env(default_job))
}

impl RankJob {
    /// The job this rank process runs, from [`BENCH_JOB`] and [`BENCH_OUT`]
    /// (`default_job` if the driver did not name one). For a bench whose ranks another
    /// launcher may start ([`rank_job`] tells only gex's own).
    pub(crate) fn from_env(default_job: &str) -> RankJob {
        RankJob {
            job: std::env::var(BENCH_JOB).unwrap_or_else(|_| default_job.to_owned()),
            out: std::env::var_os(BENCH_OUT).map(PathBuf::from),
        }
    }
}

/// Rank 0's side of [`run_job`]: hands `results` to the driver (or prints them when
/// there is no driver).
pub(crate) fn write_rank_results(job: &RankJob, results: &[Measured]) {
    write_rank_file(job, results, Vec::new(), &[]);
}

/// [`write_rank_results`] with the bench's own `extra` keys in the results file; with
/// no driver, `extra_lines` are printed after the results instead.
pub(crate) fn write_rank_file(
    job: &RankJob,
    results: &[Measured],
    extra: Vec<(&str, Value)>,
    extra_lines: &[String],
) {
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
        for line in extra_lines {
            println!("{line}");
        }
        return;
    };
    let mut v = json!({"job": job.job, "results": results.iter().map(Measured::to_json).collect::<Vec<_>>()});
    for (key, value) in extra {
        v[key] = value;
    }
    let text = serde_json::to_string(&v).expect("results serialize");
    std::fs::write(path, text)
        .unwrap_or_else(|e| panic!("cannot write bench results to {}: {e}", path.display()));
}

/// Where rank 0 of job `job` of this driver writes its results file.
pub(crate) fn results_path(bench: &str, job: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "pgas-bench-{bench}-{job}-{}.json",
        std::process::id()
    ))
}

/// The results file at `out` of a job that ended (`failure`: why it failed), parsed;
/// the file is removed.
pub(crate) fn read_job_file(
    job: &str,
    ranks: usize,
    out: &Path,
    failure: Option<String>,
) -> Result<Value, String> {
    let text = std::fs::read_to_string(out);
    let _ = std::fs::remove_file(out);
    if let Some(failure) = failure {
        return Err(format!("job {job} ({ranks} ranks) failed: {failure}"));
    }
    let text = text.map_err(|e| format!("job {job}: rank 0 wrote no results ({e})"))?;
    serde_json::from_str(&text).map_err(|e| format!("job {job}: bad results file: {e}"))
}

/// The measured results of job `job`'s results file.
pub(crate) fn job_results(job: &str, file: &Value) -> Result<Vec<Measured>, String> {
    file.get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("job {job}: results file has no results"))?
        .iter()
        .map(|r| Measured::from_json(r).ok_or_else(|| format!("job {job}: bad result {r}")))
        .collect()
}

/// Runs `ranks` ranks of this executable as job `job` (segment of `segment_size` bytes
/// per rank) and returns what its rank 0 reported. The ranks inherit this process's
/// environment plus [`BENCH_JOB`] and [`BENCH_OUT`]; their output goes to ours.
pub(crate) fn run_job(
    bench: &str,
    job: &str,
    ranks: usize,
    segment_size: usize,
    timeout: Duration,
) -> Result<Vec<Measured>, String> {
    job_results(
        job,
        &run_job_file(bench, job, ranks, segment_size, timeout)?,
    )
}

/// [`run_job`], returning the whole results file.
pub(crate) fn run_job_file(
    bench: &str,
    job: &str,
    ranks: usize,
    segment_size: usize,
    timeout: Duration,
) -> Result<Value, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the bench executable: {e}"))?;
    let out = results_path(bench, job);
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
    read_job_file(job, ranks, &out, outcome.failure.map(|f| f.to_string()))
}
