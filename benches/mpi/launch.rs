//! Starting the jobs of the `mpi` bench and handing their results back: the smp job
//! through gex's own launcher (`common::run_job_file`), the mpi jobs through `mpirun`
//! (or the command in `GEX_MPIRUN`), and the results file every rank 0 writes
//! (`common::write_rank_file`), which besides the measured figures names those the job
//! could not measure (key `unsupported`).

use std::ffi::OsString;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    self, Measured, RankJob, BENCH_JOB, BENCH_OUT, BENCH_SAMPLES, BENCH_SAMPLE_MS,
};

/// The conduit's cap on the host team (`crates/gex/src/conduit/mpi.rs`).
pub(crate) const GEX_MPI_HOST_RANKS: &str = "GEX_MPI_HOST_RANKS";
/// The thread level the conduit asks of MPI (`single` or `serialized`).
pub(crate) const GEX_MPI_THREAD: &str = "GEX_MPI_THREAD";

/// A figure a job did not measure, and why (the operation is not available on its
/// path): reported as such, never as a number.
#[derive(Debug, Clone)]
pub(crate) struct Unsupported {
    pub(crate) name: String,
    pub(crate) why: String,
}

/// `Some` when this process is a rank of a job: started by gex's launcher
/// (`UPCXX_RANK`) or by an MPI launcher; the job is the one named in [`BENCH_JOB`], else
/// `default_job`. Started by hand (`mpirun -n 2 <bench binary>`), rank 0 prints its
/// results.
pub(crate) fn rank_job(default_job: &str) -> Option<RankJob> {
    let mpi = gex::job::mpirun::MPI_LAUNCHER_VARS
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    common::rank_job(default_job).or_else(|| mpi.then(|| RankJob::from_env(default_job)))
}

/// Rank 0's side: hands `results` and `unsupported` to the driver, or prints them.
pub(crate) fn write_rank_results(job: &RankJob, results: &[Measured], unsupported: &[Unsupported]) {
    let listed = unsupported
        .iter()
        .map(|u| json!({"name": u.name, "why": u.why}))
        .collect();
    let lines: Vec<String> = unsupported
        .iter()
        .map(|u| format!("{:<36} unsupported: {}", u.name, u.why))
        .collect();
    common::write_rank_file(
        job,
        results,
        vec![("unsupported", Value::Array(listed))],
        &lines,
    );
}

/// What a job reported.
pub(crate) type JobResults = (Vec<Measured>, Vec<Unsupported>);

/// The results and the unsupported figures of job `job`'s results file.
fn read_results(job: &str, file: &Value) -> Result<JobResults, String> {
    let results = common::job_results(job, file)?;
    let unsupported = file
        .get("unsupported")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|u| Unsupported {
            name: u["name"].as_str().unwrap_or("?").to_owned(),
            why: u["why"].as_str().unwrap_or("?").to_owned(),
        })
        .collect();
    Ok((results, unsupported))
}

/// Runs `ranks` ranks of this executable as job `job` with gex's own launcher (the smp
/// conduit), as `common::run_job` does.
pub(crate) fn run_smp_job(
    bench: &str,
    job: &str,
    ranks: usize,
    segment_size: usize,
    timeout: Duration,
) -> Result<JobResults, String> {
    let file = common::run_job_file(bench, job, ranks, segment_size, timeout)?;
    read_results(job, &file)
}

/// The launch prefix (`gex::job::mpirun`: `GEX_MPIRUN` split at white space, else
/// `mpirun --oversubscribe`, with `--allow-run-as-root` as root), for the banner.
pub(crate) fn mpirun_prefix() -> Result<Vec<String>, String> {
    Ok(gex::job::mpirun::prefix()?
        .into_iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect())
}

/// Runs `ranks` ranks of this executable under the MPI launcher as job `job`, with
/// `env` set in every rank (exported to the local ranks, and forwarded with `-x` to
/// ranks on other hosts); the job's output is shown as it comes.
pub(crate) fn run_mpi_job(
    bench: &str,
    job: &str,
    ranks: usize,
    segment_size: usize,
    env: &[(&str, String)],
    timeout: Duration,
) -> Result<JobResults, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the bench executable: {e}"))?;
    let out = common::results_path(bench, job);
    let _ = std::fs::remove_file(&out);
    // Every rank runs the same sampling rounds, so the driver's settings go to all:
    // ranks on other hosts do not inherit its environment.
    let sampling = [BENCH_SAMPLES, BENCH_SAMPLE_MS]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)));
    let all: Vec<(OsString, OsString)> = env
        .iter()
        .map(|(k, v)| (*k, v.clone()))
        .chain(sampling)
        .chain([
            (BENCH_JOB, job.to_owned()),
            (BENCH_OUT, out.to_string_lossy().into_owned()),
        ])
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let mut cmd = gex::job::mpirun::command(
        &Default::default(),
        ranks,
        segment_size,
        &all,
        exe.as_os_str(),
        &[],
    )?;
    // A driver itself started under an MPI launcher must not hand its rank to the job.
    for v in gex::job::mpirun::MPI_LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    let launcher = cmd.get_program().to_string_lossy().into_owned();
    let code = cmd
        .spawn()
        .and_then(|mut child| gex::job::mpirun::wait(&mut child, Some(timeout)))
        .map_err(|e| format!("cannot run job {job} with {launcher}: {e}"))?;
    let failure = match code {
        0 => None,
        gex::job::EXIT_TIMEOUT => Some(format!("{launcher}: timed out after {timeout:?}")),
        _ => Some(format!("{launcher} exited with status {code}")),
    };
    read_results(job, &common::read_job_file(job, ranks, &out, failure)?)
}
