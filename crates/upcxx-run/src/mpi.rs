//! `upcxx-run --conduit mpi` (or `UPCXX_CONDUIT=mpi`): the job started by `mpirun`, a
//! convenience for programs built with the `mpi` feature (gex's mpi conduit).
//!
//! The command is `gex::job::mpirun::command`: the launcher prefix (`GEX_MPIRUN`, split
//! on whitespace, else `mpirun --oversubscribe`, with `--allow-run-as-root` as root;
//! `GEX_MPIRUN=srun` starts the job with Slurm), then `-n N -x UPCXX_SEGMENT_SIZE -x ...
//! PROGRAM ARGS...` with the segment size set for every rank (the conduit stops a job
//! whose ranks disagree on it) and the GASP tool's variables and the conduit's settings
//! (`GEX_MPI_HOST_RANKS`, `GEX_MPI_THREAD`, `GEX_MPI_STATS`) passed on. The launcher
//! reports failed ranks and ends the job itself (a rank that dies aborts the job naming
//! itself); its exit status is the job's. `--timeout` is kept by
//! `gex::job::mpirun::wait`, which ends the launcher past it (status 124), and passes
//! `SIGINT`/`SIGTERM` sent to `upcxx-run` on to it (status 130). `--profile`
//! and `--trace` work as with the smp conduit: `gex::job::with_tool` gives the ranks a
//! directory for their parts and merges them once `mpirun` returns (the directory must
//! be shared by the hosts of a multi-host job).

use std::io;

use gex::job::{JobOutcome, JobSpec};

/// Runs the job through `mpirun`; returns how it ended (its exit status).
pub(super) fn run(spec: &JobSpec) -> io::Result<JobOutcome> {
    let mut cmd = gex::job::mpirun::command(
        &gex::job::mpirun::Options::default(),
        spec.ranks,
        spec.segment_size,
        &spec.env,
        spec.program.as_os_str(),
        &spec.args,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("--conduit mpi: {e}")))?;
    let mut child = cmd.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--conduit mpi: cannot start {}: {e}",
                cmd.get_program().to_string_lossy()
            ),
        )
    })?;
    let exit_code = gex::job::mpirun::wait(&mut child, spec.timeout)?;
    let launcher = cmd.get_program().to_string_lossy();
    let failure = match exit_code {
        0 => None,
        gex::job::EXIT_TIMEOUT => {
            // The launcher was ended from here: nobody else says why.
            let report = format!(
                "job timed out after {} s",
                spec.timeout.unwrap_or_default().as_secs_f64()
            );
            eprintln!("{}: {report}", spec.name);
            Some(report)
        }
        _ => Some(format!("{launcher} exited with status {exit_code}")),
    };
    Ok(JobOutcome { exit_code, failure })
}
