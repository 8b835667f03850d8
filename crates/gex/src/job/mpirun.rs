//! The `mpirun` command line of a job on the mpi conduit, shared by `upcxx-run
//! --conduit mpi` and the mpi mode of [`gex::testing`](crate::testing).
//!
//! The launcher is a command prefix: [`GEX_MPIRUN`] when set, split on whitespace (so a
//! multi-host set-up can pass `mpirun --host a:4,b:4 --mca plm_rsh_agent ssh`), else
//! `mpirun --oversubscribe` (any number of ranks on any number of cores), with
//! `--allow-run-as-root` when this process runs as root. [`command`] adds `-n N` and
//! passes each variable the ranks need with `-x NAME`, which exports the launcher's
//! value to ranks on every host (processes on this host inherit it anyway); the
//! options are Open MPI's (`mpirun`/`orterun`), the MPI this stack is built and
//! tested with.
//!
//! `UPCXX_RANKS=N program` with `UPCXX_CONDUIT=mpi` starts the job through the same
//! command ([`super::relaunch_if_requested`]), and so does `upcxx-run` (its
//! `--conduit` defaults to `UPCXX_CONDUIT`).
//!
//! The variables of this host's own launcher (`UPCXX_RANK`, `UPCXX_RANKS`,
//! `GEX_SHM_FD`) are removed from the ranks' environment: with them a rank would take
//! itself for a rank of the smp conduit, or start a job of its own.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Command;

use crate::conduit::smp::region::GEX_SHM_FD;
use crate::env::{UPCXX_RANK, UPCXX_RANKS, UPCXX_SEGMENT_SIZE};

/// Environment variable replacing the default `mpirun` command prefix.
pub const GEX_MPIRUN: &str = "GEX_MPIRUN";
/// Environment variable choosing how a job is started: `smp` (the default: this host's
/// own launcher) or `mpi` (through `mpirun`), for `upcxx-run` and for
/// `UPCXX_RANKS=N program`.
pub const UPCXX_CONDUIT: &str = "UPCXX_CONDUIT";

/// Whether [`UPCXX_CONDUIT`] asks for `mpirun`.
///
/// # Errors
/// If it is set to something other than `smp` or `mpi`.
pub fn mpi_requested() -> Result<bool, String> {
    match std::env::var(UPCXX_CONDUIT).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("" | "smp") => Ok(false),
        Ok("mpi") => Ok(true),
        Ok(v) => Err(format!("{UPCXX_CONDUIT}={v:?}: expected smp or mpi")),
        Err(e) => Err(format!("{UPCXX_CONDUIT}: {e}")),
    }
}

/// The variable capping the mpi conduit's host team (see the conduit's docs); passed
/// on to the ranks when set here.
const GEX_MPI_HOST_RANKS: &str = "GEX_MPI_HOST_RANKS";

/// The launcher's command prefix: [`GEX_MPIRUN`] split on whitespace, or the default
/// (see the [module documentation](self)).
///
/// # Errors
/// If `GEX_MPIRUN` is set but empty or not valid UTF-8.
pub fn prefix() -> Result<Vec<OsString>, String> {
    prefix_from(
        std::env::var_os(GEX_MPIRUN).as_deref(),
        rustix::process::geteuid().is_root(),
    )
}

fn prefix_from(setting: Option<&OsStr>, root: bool) -> Result<Vec<OsString>, String> {
    let Some(v) = setting else {
        let mut words: Vec<OsString> = vec!["mpirun".into(), "--oversubscribe".into()];
        if root {
            words.push("--allow-run-as-root".into());
        }
        return Ok(words);
    };
    let words: Vec<OsString> = v
        .to_str()
        .ok_or_else(|| format!("{GEX_MPIRUN}={v:?} is not valid UTF-8"))?
        .split_whitespace()
        .map(OsString::from)
        .collect();
    if words.is_empty() {
        return Err(format!("{GEX_MPIRUN} is set but names no command"));
    }
    Ok(words)
}

/// `PREFIX OPTIONS -n ranks -x NAME... PROGRAM ARGS...`, with
/// `UPCXX_SEGMENT_SIZE=segment_size` and every pair of `env` set and exported to the
/// ranks, and `GEX_MPI_HOST_RANKS` exported when set.
///
/// # Errors
/// As [`prefix`].
pub fn command(
    options: &[&str],
    ranks: usize,
    segment_size: usize,
    env: &[(OsString, OsString)],
    program: &OsStr,
    args: &[OsString],
) -> Result<Command, String> {
    let prefix = prefix()?;
    let mut cmd = Command::new(&prefix[0]);
    cmd.args(&prefix[1..]).args(options);
    for name in [UPCXX_RANK, UPCXX_RANKS, GEX_SHM_FD] {
        cmd.env_remove(name);
    }
    cmd.args(["-n", &ranks.to_string()]);
    let mut export = |name: &OsStr, value: &OsStr| {
        cmd.env(name, value);
        cmd.arg("-x").arg(name);
    };
    export(
        OsStr::new(UPCXX_SEGMENT_SIZE),
        OsStr::new(&segment_size.to_string()),
    );
    if let Some(v) = std::env::var_os(GEX_MPI_HOST_RANKS) {
        export(OsStr::new(GEX_MPI_HOST_RANKS), &v);
    }
    for (name, value) in env {
        export(name, value);
    }
    cmd.arg(program).args(args);
    Ok(cmd)
}

/// `UPCXX_CONDUIT=mpi UPCXX_RANKS=N program args...`: runs the program as an N-rank
/// job through `mpirun` and exits with its status.
pub(super) fn relaunch(name: &str, ranks: usize, segment_size: usize, program: PathBuf) -> ! {
    if !cfg!(feature = "mpi") {
        eprintln!("{name}: {UPCXX_CONDUIT}=mpi: this program was built without the feature `mpi`");
        std::process::exit(2);
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut cmd = match command(&[], ranks, segment_size, &[], program.as_os_str(), &args) {
        Ok(cmd) => cmd,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    match cmd.status() {
        Ok(status) => std::process::exit(
            status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(1),
        ),
        Err(e) => {
            eprintln!(
                "{name}: cannot start {}: {e}",
                cmd.get_program().to_string_lossy()
            );
            std::process::exit(super::launch_error_exit_code(&e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &Command) -> Vec<String> {
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_prefix_is_the_setting_split_on_whitespace() {
        assert_eq!(
            prefix_from(None, false).unwrap(),
            ["mpirun", "--oversubscribe"]
        );
        assert_eq!(
            prefix_from(None, true).unwrap(),
            ["mpirun", "--oversubscribe", "--allow-run-as-root"]
        );
        let set = OsStr::new(" mpirun  --host a:4,b:4\t--mca plm_rsh_agent ssh ");
        assert_eq!(
            prefix_from(Some(set), true).unwrap(),
            [
                "mpirun",
                "--host",
                "a:4,b:4",
                "--mca",
                "plm_rsh_agent",
                "ssh"
            ]
        );
        let err = prefix_from(Some(OsStr::new("  ")), false).unwrap_err();
        assert_eq!(err, "GEX_MPIRUN is set but names no command");
    }

    #[test]
    fn the_command_exports_what_the_ranks_need() {
        let env = [(OsString::from("A"), OsString::from("1 2"))];
        let cmd = command(
            &["--tag-output"],
            3,
            4096,
            &env,
            OsStr::new("prog"),
            &["-x".into()],
        )
        .unwrap();
        let w = words(&cmd);
        let n = w.iter().position(|a| a == "-n").unwrap();
        assert_eq!(w[n - 1], "--tag-output");
        assert_eq!(w[n + 1], "3");
        assert!(w.windows(2).any(|p| p == ["-x", UPCXX_SEGMENT_SIZE]));
        assert!(w.windows(2).any(|p| p == ["-x", "A"]));
        assert_eq!(w[w.len() - 2..], ["prog", "-x"]);
        let set: Vec<_> = cmd.get_envs().collect();
        assert!(set.contains(&(OsStr::new("A"), Some(OsStr::new("1 2")))));
        assert!(set.contains(&(OsStr::new(UPCXX_SEGMENT_SIZE), Some(OsStr::new("4096")))));
        assert!(set.contains(&(OsStr::new(UPCXX_RANK), None)));
    }
}
