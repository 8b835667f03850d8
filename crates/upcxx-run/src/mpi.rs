//! `upcxx-run --conduit mpi` (or `UPCXX_CONDUIT=mpi`): the job started by `mpirun`, a
//! convenience for programs built with the `mpi` feature (gex's mpi conduit).
//!
//! The command is `gex::job::mpirun::command`: the launcher prefix (`GEX_MPIRUN`, split
//! on whitespace, else `mpirun --oversubscribe`, with `--allow-run-as-root` as root),
//! then `[--timeout SECS] -n N -x UPCXX_SEGMENT_SIZE -x ... PROGRAM ARGS...` with the
//! segment size set for every rank (the conduit stops a job whose ranks disagree on it)
//! and the GASP tool's variables and `GEX_MPI_HOST_RANKS` passed on. `mpirun` reports
//! failed ranks and ends the job itself (a rank that dies aborts the job naming
//! itself); its exit status is the job's. `--profile` and `--trace` work as with the smp
//! conduit: `gex::job::with_tool` gives the ranks a directory for their parts and
//! merges them once `mpirun` returns (the directory must be shared by the hosts of a
//! multi-host job).

use std::io;
use std::os::unix::process::ExitStatusExt as _;

use gex::job::{JobOutcome, JobSpec};

/// Runs the job through `mpirun`; returns how it ended (its exit status).
pub(super) fn run(spec: &JobSpec) -> io::Result<JobOutcome> {
    // mpirun's timeout is in whole seconds; round up so the job is never cut short.
    let timeout = spec
        .timeout
        .map(|t| t.as_secs_f64().ceil().max(1.0).to_string());
    let mut options = Vec::new();
    if let Some(t) = &timeout {
        options.extend(["--timeout", t.as_str()]);
    }
    let mut cmd = gex::job::mpirun::command(
        &options,
        spec.ranks,
        spec.segment_size,
        &spec.env,
        spec.program.as_os_str(),
        &spec.args,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("--conduit mpi: {e}")))?;
    let status = cmd.status().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--conduit mpi: cannot start {}: {e}",
                cmd.get_program().to_string_lossy()
            ),
        )
    })?;
    let exit_code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(JobOutcome {
        exit_code,
        failure: (exit_code != 0).then(|| format!("mpirun exited with status {exit_code}")),
    })
}
