//! The launcher command line of a job on the mpi conduit, shared by `upcxx-run
//! --conduit mpi` and the mpi mode of `gex::testing`.
//!
//! The launcher is a command prefix: [`GEX_MPIRUN`] when set, split on whitespace (so a
//! multi-host set-up can pass `mpirun --host a:4,b:4 --mca plm_rsh_agent ssh`, and a
//! Slurm cluster `srun` or `srun --mpi=pmix`), else `mpirun --oversubscribe` (any number
//! of ranks on any number of cores), with `--allow-run-as-root` when this process runs
//! as root. The prefix's command names the [`Launcher`], whose options differ:
//!
//! * Open MPI's `mpirun` (also `mpiexec`, `orterun`), the MPI this stack is built and
//!   tested with: [`command`] adds `-n N` and passes each variable the ranks need with
//!   `-x NAME`, which exports the launcher's value to ranks on every host (processes on
//!   this host inherit it anyway).
//! * Slurm's `srun`: `--kill-on-bad-exit=1 --export=ALL -n N` (a rank that exits with
//!   an error ends the job, as under `mpirun`; Slurm's default lets the others run on);
//!   the ranks on every node get the launcher's whole environment (`--export=ALL`, said
//!   outright: a batch job's `SLURM_EXPORT_ENV` may change srun's default), so the
//!   variables are only set.
//!
//! A job's time limit is kept here, not by the launcher ([`wait`]): `srun`'s limits are
//! whole minutes, enforced at the scheduler's pace.
//!
//! `UPCXX_RANKS=N program` with `UPCXX_CONDUIT=mpi` starts the job through the same
//! command ([`super::relaunch_if_requested`]), and so does `upcxx-run` (its
//! `--conduit` defaults to `UPCXX_CONDUIT`).
//!
//! The variables of this host's own launcher (`UPCXX_RANK`, `UPCXX_RANKS`,
//! `GEX_SHM_FD`) are removed from the ranks' environment: with them a rank would take
//! itself for a rank of the smp conduit, or start a job of its own.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

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

/// The variables by which an MPI launcher (`mpirun`, `srun`, a PMI or PMIx launcher)
/// shows a process that it is one of its ranks: the mpi conduit is chosen where one is
/// set, and a process that starts a job of its own removes them from that job's
/// environment.
pub const MPI_LAUNCHER_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"];

/// The mpi conduit's settings (see the conduit's docs: the host team's cap, the thread
/// level asked of MPI, the AM path counts, the largest put or get between hosts sent as
/// messages), passed on to the ranks when set here, so
/// that they reach ranks on other hosts too.
pub(crate) const CONDUIT_VARS: [&str; 4] = [
    GEX_MPI_HOST_RANKS,
    GEX_MPI_THREAD,
    GEX_MPI_STATS,
    GEX_MPI_AM_RMA_MAX,
];

/// The pairs of [`CONDUIT_VARS`] that `lookup` finds set.
fn conduit_settings(lookup: impl Fn(&str) -> Option<OsString>) -> Vec<(OsString, OsString)> {
    CONDUIT_VARS
        .iter()
        .filter_map(|&name| Some((OsString::from(name), lookup(name)?)))
        .collect()
}

/// The variable capping the mpi conduit's host team.
pub(crate) const GEX_MPI_HOST_RANKS: &str = "GEX_MPI_HOST_RANKS";
/// The variable that makes each rank of the mpi conduit report at finalize which path
/// carried the AMs it handled (any value but `0`).
pub(crate) const GEX_MPI_STATS: &str = "GEX_MPI_STATS";
/// `single` or `serialized` (the default): the thread level the mpi conduit asks of MPI.
pub(crate) const GEX_MPI_THREAD: &str = "GEX_MPI_THREAD";
/// The largest put or get to another host's segment that the mpi conduit leaves to
/// Active Messages (bytes; larger ones use MPI RMA).
pub(crate) const GEX_MPI_AM_RMA_MAX: &str = "GEX_MPI_AM_RMA_MAX";

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

/// The launcher a command prefix names (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI's `mpirun`, `mpiexec` or `orterun` (any command not named `srun`).
    OpenMpi,
    /// Slurm's `srun`.
    Srun,
}

impl Launcher {
    /// The launcher that `program`, the first word of a prefix, names.
    pub fn of(program: &OsStr) -> Launcher {
        match Path::new(program).file_name() {
            Some(name) if name == "srun" => Launcher::Srun,
            _ => Launcher::OpenMpi,
        }
    }
}

/// What a caller asks of the launcher besides the ranks and their environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Prefix each line of the ranks' output with the rank that wrote it
    /// (`mpirun --tag-output`: `[1,R]<stdout>:`; `srun --label`: `R: `).
    pub tag_output: bool,
}

/// `PREFIX OPTIONS -n ranks [-x NAME...] PROGRAM ARGS...`, with
/// `UPCXX_SEGMENT_SIZE=segment_size` and every pair of `env` set for the ranks (and
/// exported with `-x` under `mpirun`), and the conduit's settings (`CONDUIT_VARS`)
/// passed on when set.
///
/// # Errors
/// As [`prefix`].
pub fn command(
    options: &Options,
    ranks: usize,
    segment_size: usize,
    env: &[(OsString, OsString)],
    program: &OsStr,
    args: &[OsString],
) -> Result<Command, String> {
    // The caller waits for the launcher it starts ([`wait`]).
    super::wait_for_children_here();
    let settings = conduit_settings(|name| std::env::var_os(name));
    Ok(command_from(
        prefix()?,
        options,
        ranks,
        segment_size,
        &[&settings[..], env].concat(),
        program,
        args,
    ))
}

fn command_from(
    prefix: Vec<OsString>,
    options: &Options,
    ranks: usize,
    segment_size: usize,
    env: &[(OsString, OsString)],
    program: &OsStr,
    args: &[OsString],
) -> Command {
    let launcher = Launcher::of(&prefix[0]);
    let mut cmd = Command::new(&prefix[0]);
    cmd.args(&prefix[1..]);
    if options.tag_output {
        cmd.arg(match launcher {
            Launcher::OpenMpi => "--tag-output",
            Launcher::Srun => "--label",
        });
    }
    if launcher == Launcher::Srun {
        // `--export=ALL`: the ranks' settings below travel in srun's environment, which
        // a batch job's `SLURM_EXPORT_ENV` (set by `sbatch --export=NONE`) would drop.
        cmd.arg("--kill-on-bad-exit=1").arg("--export=ALL");
    }
    for name in [UPCXX_RANK, UPCXX_RANKS, GEX_SHM_FD] {
        cmd.env_remove(name);
    }
    cmd.args(["-n", &ranks.to_string()]);
    let mut export = |name: &OsStr, value: &OsStr| {
        cmd.env(name, value);
        if launcher == Launcher::OpenMpi {
            cmd.arg("-x").arg(name);
        }
    };
    export(
        OsStr::new(UPCXX_SEGMENT_SIZE),
        OsStr::new(&segment_size.to_string()),
    );
    for (name, value) in env {
        export(name, value);
    }
    cmd.arg(program).args(args);
    // If this process dies without passing a signal on (SIGKILL), the launcher gets
    // SIGTERM and ends the ranks, rather than running on as an orphan.
    // SAFETY: the closure runs in the child between fork and exec and only makes one
    // system call (prctl), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
            Ok(())
        });
    }
    cmd
}

/// How long [`wait`] gives a launcher between `SIGTERM` and `SIGKILL`: both launchers
/// pass `SIGTERM` on to the ranks and end the job, which takes them a moment.
pub const LAUNCHER_GRACE: Duration = Duration::from_secs(5);

/// How often [`wait`] looks whether the launcher ended.
const LAUNCHER_POLL: Duration = Duration::from_millis(10);

/// Waits for a started launcher to end, for `limit` to pass, or for this process to be
/// interrupted (`SIGINT` or `SIGTERM` sent to it alone, as `kill` or a scheduler sends
/// them; from a terminal the launcher gets `SIGINT` itself): then the launcher gets
/// `SIGTERM`, which it passes on to the ranks, and `SIGKILL` after
/// [`LAUNCHER_GRACE`]. Returns the job's exit code: the launcher's status (128 + the
/// signal that ended it), [`EXIT_TIMEOUT`](super::EXIT_TIMEOUT) when the limit ended
/// the job, or [`EXIT_INTERRUPTED`](super::EXIT_INTERRUPTED) when a signal did (a
/// second one exits at once, as `upcxx-run`'s own jobs do).
///
/// # Errors
/// If waiting for the child fails, or the signal actions cannot be installed.
pub fn wait(child: &mut Child, limit: Option<Duration>) -> io::Result<i32> {
    let code = |status: std::process::ExitStatus| {
        status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1)
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    let _guard = super::SignalGuard::install(&interrupted)?;
    // A limit too far ahead to name is none.
    let deadline = limit.and_then(|limit| Instant::now().checked_add(limit));
    let ended_by = loop {
        if let Some(status) = child.try_wait()? {
            return Ok(code(status));
        }
        if interrupted.load(Ordering::Acquire) {
            break super::EXIT_INTERRUPTED;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break super::EXIT_TIMEOUT;
        }
        std::thread::sleep(LAUNCHER_POLL);
    };
    let pid = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
    let _ = kill_process(pid, Signal::TERM);
    let grace = Instant::now() + LAUNCHER_GRACE;
    while Instant::now() < grace {
        if child.try_wait()?.is_some() {
            return Ok(ended_by);
        }
        std::thread::sleep(LAUNCHER_POLL);
    }
    let _ = child.kill();
    child.wait()?;
    Ok(ended_by)
}

/// `UPCXX_CONDUIT=mpi UPCXX_RANKS=N program args...`: runs the program as an N-rank
/// job through `mpirun` and exits with its status.
pub(super) fn relaunch(name: &str, ranks: usize, segment_size: usize, program: PathBuf) -> ! {
    if !cfg!(feature = "mpi") {
        eprintln!("{name}: {UPCXX_CONDUIT}=mpi: this program was built without the feature `mpi`");
        std::process::exit(2);
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let options = Options::default();
    let mut cmd = match command(
        &options,
        ranks,
        segment_size,
        &[],
        program.as_os_str(),
        &args,
    ) {
        Ok(cmd) => cmd,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    match cmd.spawn().and_then(|mut child| wait(&mut child, None)) {
        Ok(code) => std::process::exit(code),
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
        let options = Options { tag_output: true };
        let prefix = prefix_from(None, false).unwrap();
        let cmd = command_from(
            prefix,
            &options,
            3,
            4096,
            &env,
            OsStr::new("prog"),
            &["-x".into()],
        );
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

    #[test]
    fn the_conduit_settings_that_are_set_are_exported() {
        let settings = conduit_settings(|name| (name != GEX_MPI_STATS).then(|| name.into()));
        let names: Vec<_> = settings.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [GEX_MPI_HOST_RANKS, GEX_MPI_THREAD, GEX_MPI_AM_RMA_MAX]
        );
        let options = Options { tag_output: false };
        let prefix = prefix_from(None, false).unwrap();
        let cmd = command_from(prefix, &options, 2, 4096, &settings, OsStr::new("p"), &[]);
        let w = words(&cmd);
        for name in names {
            assert!(w.windows(2).any(|p| p == ["-x", name]), "{w:?}");
        }
        assert!(!w.iter().any(|a| a == GEX_MPI_STATS), "{w:?}");
    }

    #[test]
    fn srun_gets_its_own_options_and_the_environment_alone() {
        let env = [(OsString::from("A"), OsString::from("1"))];
        let options = Options { tag_output: true };
        let prefix = prefix_from(Some(OsStr::new("/usr/bin/srun --mpi=pmix")), true).unwrap();
        assert_eq!(Launcher::of(&prefix[0]), Launcher::Srun);
        let cmd = command_from(prefix, &options, 2, 4096, &env, OsStr::new("prog"), &[]);
        assert_eq!(
            words(&cmd),
            [
                "/usr/bin/srun",
                "--mpi=pmix",
                "--label",
                "--kill-on-bad-exit=1",
                "--export=ALL",
                "-n",
                "2",
                "prog"
            ]
        );
        let set: Vec<_> = cmd.get_envs().collect();
        assert!(set.contains(&(OsStr::new("A"), Some(OsStr::new("1")))));
        assert!(set.contains(&(OsStr::new(UPCXX_SEGMENT_SIZE), Some(OsStr::new("4096")))));
        assert_eq!(Launcher::of(OsStr::new("mpiexec")), Launcher::OpenMpi);
        assert_eq!(
            Launcher::of(OsStr::new("/opt/srun-wrapper")),
            Launcher::OpenMpi
        );
    }

    #[test]
    fn wait_ends_a_launcher_past_its_limit() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let start = Instant::now();
        let code = wait(&mut child, Some(Duration::from_millis(50))).unwrap();
        assert_eq!(code, super::super::EXIT_TIMEOUT);
        assert!(start.elapsed() < Duration::from_secs(10));
        let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        assert_eq!(wait(&mut child, Some(Duration::from_secs(30))).unwrap(), 7);
        let mut child = Command::new("sh")
            .args(["-c", "kill -9 $$"])
            .spawn()
            .unwrap();
        assert_eq!(wait(&mut child, None).unwrap(), 128 + 9);
    }
}
