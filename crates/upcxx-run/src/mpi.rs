//! `upcxx-run --conduit mpi`: the job started by `mpirun`, a convenience for programs
//! built with the `mpi` feature (gex's mpi conduit).
//!
//! The command becomes `mpirun --oversubscribe -n N [--timeout SECS]
//! -x UPCXX_SEGMENT_SIZE=SIZE PROGRAM ARGS...`: `--oversubscribe` because this launcher
//! runs any number of ranks on any number of cores, and the segment size is passed to
//! every rank (the conduit stops a job whose ranks disagree on it). `mpirun` reports
//! failed ranks and ends the job itself; its exit status is the job's. The GASP tool
//! options are refused with this conduit: merging the ranks' outputs is this
//! launcher's work for the jobs it starts itself. `MPIRUN` names another `mpirun`.

use std::process::Command;

use super::{RunArgs, NAME};

/// Runs the job through `mpirun`; returns its exit status.
pub(super) fn run(args: &RunArgs, segment_size: usize) -> i32 {
    if args.profile.is_some() || args.trace.is_some() || args.tool.is_some() {
        eprintln!("{NAME}: --profile, --trace and --tool are not available with --conduit mpi");
        return 2;
    }
    let mpirun = std::env::var_os("MPIRUN").unwrap_or_else(|| "mpirun".into());
    let mut cmd = Command::new(&mpirun);
    cmd.args(["--oversubscribe", "-n", &args.ranks.to_string()]);
    if let Some(t) = args.timeout {
        // mpirun's timeout is in whole seconds; round up so the job is never cut short.
        cmd.args(["--timeout", &t.as_secs_f64().ceil().max(1.0).to_string()]);
    }
    cmd.args(["-x", &format!("UPCXX_SEGMENT_SIZE={segment_size}")]);
    cmd.args(&args.command);
    match cmd.status() {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!(
                "{NAME}: --conduit mpi: cannot start {}: {e}",
                mpirun.to_string_lossy()
            );
            gex::job::launch_error_exit_code(&e)
        }
    }
}
