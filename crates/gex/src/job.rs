//! Running an N-rank job on this host: the launcher behind `upcxx-run`,
//! `UPCXX_RANKS=N prog` and `gex::testing::spmd`.
//!
//! # Design
//!
//! This is the portable front of the launcher: the job spec, monitoring, teardown and
//! failure reports. What a job is made of on this host, the conduit provides below it:
//! the shared-memory region that holds the whole job and how a rank process is started
//! so that it inherits exactly that region and dies with its launcher
//! (`conduit/smp/region.rs`, `conduit/smp/spawn.rs`). [`run`] is the launcher:
//!
//! 1. **Region.** It creates the job's region (an anonymous memory file, so nothing can
//!    be left behind in `/dev/shm` however the job ends).
//! 2. **Ranks.** It spawns the ranks (stdin, stdout and stderr inherited) with the
//!    environment `UPCXX_RANK=r` and `UPCXX_RANKS=N`, plus what the conduit adds to hand
//!    them the region. Each rank dies with the thread that forked it; [`run`] forks from
//!    the calling thread and keeps it inside `run` until every rank is reaped.
//! 3. **Monitoring.** It polls the children every [`POLL_INTERVAL`] with `try_wait`,
//!    sleeping in between. A rank succeeds when it exits with status 0 and its
//!    [`RankState`] is `Finalized` (it finalized the communication layer) or `NotStarted`
//!    (it never initialized it) or `Exited` (it left through `gex::exit(0)`, its own or
//!    another rank's). Everything else is a failure: a non-zero exit status, a
//!    signal, or status 0 while still `Running` ("exited before finalize"). A rank that
//!    called `gex::exit(0)` ends the job: the others leave at their next wait for
//!    communication, and those still running [`EXIT_GRACE`] later are stopped as in a
//!    teardown (the job still ends with 0, the report naming them).
//! 4. **Teardown.** On the first failure, on the time limit, or when the launcher is
//!    interrupted (`SIGINT`/`SIGTERM`, see [`JobSpec::forward_signals`]) it sets the abort
//!    flag in the job header (ranks blocked in communication notice it and stop waiting),
//!    sends `SIGTERM` to every remaining rank, waits up to [`TERM_GRACE`] for them to
//!    exit, sends `SIGKILL` to the rest and reaps them all. The whole job is gone well
//!    within a second of the failure. It then prints a one-line report on stderr and
//!    returns the exit code of the job: 0, the failing rank's status, `128 + signal`,
//!    124 for a timeout, 130 for an interruption.
//!
//! When [`run`] returns, the region is unmapped, the memfd closed and no rank survives.

pub mod mpirun;
mod tool;

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// The job region as a rank and the launcher see it: each rank's state and failure
/// message, and the abort flag (for tools and tests that stand in for a rank).
pub use crate::conduit::smp::layout::{RankState, Region};
pub use crate::conduit::smp::region::InheritedRegion;
use crate::conduit::smp::region::JobRegion;
use crate::conduit::smp::spawn;

pub use crate::conduit::smp::region::GEX_SHM_FD;
pub use crate::env::{
    parse_size, segment_size_from_env, DEFAULT_SEGMENT_SIZE, UPCXX_RANK, UPCXX_RANKS,
    UPCXX_SEGMENT_SIZE,
};

/// How often the launcher polls its ranks for exit.
pub const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// How long the launcher waits after `SIGTERM` before it sends `SIGKILL` to the ranks
/// that are still running.
pub const TERM_GRACE: Duration = Duration::from_millis(300);

/// How long the ranks have to leave after one ended the job with `gex::exit(0)` (those
/// waiting for communication leave at once); the launcher then stops the rest (under
/// an MPI launcher, a leaving rank does, with `MPI_Abort`).
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Exit code of a job that ran past its time limit (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of a job whose launcher was interrupted by `SIGINT` or `SIGTERM`.
pub const EXIT_INTERRUPTED: i32 = 130;

/// What to run: a program, its arguments, how many ranks, and how.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The program every rank runs (looked up in `PATH` if it has no slash).
    pub program: PathBuf,
    /// Arguments passed verbatim to every rank.
    pub args: Vec<OsString>,
    /// Number of ranks (at least 1).
    pub ranks: usize,
    /// Segment size per rank in bytes (rounded up to whole pages).
    pub segment_size: usize,
    /// Time limit for the whole job; `None` for none.
    pub timeout: Option<Duration>,
    /// Extra environment variables for the ranks (on top of the launcher's environment;
    /// `UPCXX_RANK`, `UPCXX_RANKS` and `GEX_SHM_FD` are always set by the launcher).
    pub env: Vec<(OsString, OsString)>,
    /// Prefix of the report printed on stderr, e.g. `upcxx-run` or a test name.
    pub name: String,
    /// Whether `SIGINT` and `SIGTERM` received by this process during [`run`] tear the
    /// job down (reported as "interrupted", exit code 130) instead of using the
    /// process's existing disposition. Meant for processes whose only job is to launch
    /// (the `upcxx-run` CLI, [`relaunch_if_requested`]). Outside `run` the signals keep
    /// their previous behavior (the default action, or the program's own handler), and a
    /// signal that was ignored when the first such job started is never forwarded. A
    /// second signal while the job is being torn down exits the launcher at once with
    /// status 130 (its ranks then die of their death signal), and one after the job has
    /// the signal's previous behavior; either way the parts directory of a GASP tool run
    /// goes first.
    pub forward_signals: bool,
}

impl JobSpec {
    /// A spec for `ranks` ranks of `program` without arguments, with the default segment
    /// size, no time limit, no extra environment, the name `upcxx-run`, and without
    /// signal forwarding.
    pub fn new(program: impl Into<PathBuf>, ranks: usize) -> JobSpec {
        JobSpec {
            program: program.into(),
            args: Vec::new(),
            ranks,
            segment_size: DEFAULT_SEGMENT_SIZE,
            timeout: None,
            env: Vec::new(),
            name: "upcxx-run".to_owned(),
            forward_signals: false,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// The exit code the launcher should exit with: 0 on success, otherwise the first
    /// failing rank's exit status, `128 + signal` if it was killed by a signal, 1 if it
    /// exited with status 0 without finalizing, 124 on timeout, 130 on interruption.
    pub exit_code: i32,
    /// A human-readable report of which rank failed and how (e.g. `rank 1 of 4 failed:
    /// panicked at src/main.rs:10:5: boom`), without the name prefix; `None` on success.
    pub failure: Option<String>,
}

impl JobOutcome {
    /// Whether every rank succeeded.
    pub fn success(&self) -> bool {
        self.failure.is_none()
    }
}

/// Makes a program launch itself: called by the communication layer's initialization.
///
/// If the process was started as `UPCXX_RANKS=N prog args...` (with `UPCXX_RANKS` set
/// and `UPCXX_RANK` unset), runs the current executable (`std::env::current_exe`) with
/// the same arguments as an N-rank job (segment size from `UPCXX_SEGMENT_SIZE`, no time
/// limit, `SIGINT`/`SIGTERM` forwarded) and exits this process with the job's exit code;
/// it never returns then. Invalid settings are reported on stderr and exit with status 2.
///
/// With `UPCXX_CONDUIT=mpi` the job is started through `mpirun` instead (see
/// [`mpirun`]; the program must be built with the feature `mpi`).
///
/// If `UPCXX_RANKS` is unset, or `UPCXX_RANK` is set (this process is a rank of a
/// job), or an MPI launcher started this process, returns normally.
pub fn relaunch_if_requested() {
    // A rank of a job already, or one an MPI launcher started (a `UPCXX_RANKS` left in
    // the environment must not make each of its processes a job of its own).
    if std::env::var_os(UPCXX_RANK).is_some() || crate::env::mpi_launcher_size().is_some() {
        return;
    }
    let Some(ranks) = std::env::var_os(UPCXX_RANKS) else {
        return;
    };
    let exe = std::env::current_exe();
    let name = exe
        .as_ref()
        .ok()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gex".to_owned());
    let ranks = match crate::env::parse_ranks(&ranks) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{name}: invalid {UPCXX_RANKS}: {e}");
            std::process::exit(2);
        }
    };
    let segment_size = match segment_size_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    let program = match exe {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name}: cannot find the current executable to relaunch: {e}");
            std::process::exit(1);
        }
    };
    match mpirun::mpi_requested() {
        Ok(false) => {}
        Ok(true) => mpirun::relaunch(&name, ranks, segment_size, program),
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    }
    let spec = JobSpec {
        program,
        args: std::env::args_os().skip(1).collect(),
        ranks,
        segment_size,
        timeout: None,
        env: Vec::new(),
        name: name.clone(),
        forward_signals: true,
    };
    match run(&spec) {
        Ok(outcome) => std::process::exit(outcome.exit_code),
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(launch_error_exit_code(&e));
        }
    }
}

/// The conventional exit code for a job that could not be started: 127 if the
/// program was not found, 126 if it could not be executed, 1 otherwise.
pub fn launch_error_exit_code(e: &io::Error) -> i32 {
    match e.kind() {
        io::ErrorKind::NotFound => 127,
        io::ErrorKind::PermissionDenied => 126,
        _ => 1,
    }
}

/// Runs `spec.ranks` processes of `spec.program` as one job and waits for it to end.
///
/// See the [module documentation](self) for the protocol. Rank failures, timeouts and
/// interruptions are not errors: they are reported in the returned [`JobOutcome`] (and
/// printed on stderr as `{name}: {report}`). An error means the job could not be set up:
/// an invalid spec, no memory for the region, or a rank that could not be started (then
/// the ranks already started are torn down before returning).
pub fn run(spec: &JobSpec) -> io::Result<JobOutcome> {
    wait_for_children_here();
    with_tool(spec, run_ranks)
}

/// Gives `SIGCHLD` its default action if this process ignores it: a process that
/// ignores it (as inherited from a parent that did) has its children reaped by the
/// kernel as they exit, and a launcher could then neither wait for its ranks (every
/// wait failing with `ECHILD`) nor learn how they ended. Left at the default after: a
/// launcher waits for its children.
pub(crate) fn wait_for_children_here() {
    // SAFETY: reading a disposition, then setting SIGCHLD's to SIG_DFL, have no
    // preconditions.
    unsafe {
        if disposition_is_default(libc::SIGCHLD) == Some(false) {
            libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        }
    }
}

/// Runs the job with `start` under the built-in GASP tool the spec's environment asks
/// for, if any (see `tool.rs`): the tool's variables are added to the spec `start`
/// gets, and the ranks' parts are merged once it returns. Shared by [`run`] and the
/// `mpirun` mode of `gex::testing`.
pub fn with_tool(
    spec: &JobSpec,
    start: impl FnOnce(&JobSpec) -> io::Result<JobOutcome>,
) -> io::Result<JobOutcome> {
    match tool::ToolRun::prepare(spec)? {
        None => start(spec),
        Some(tool) => {
            let mut with_tool = spec.clone();
            with_tool.env.extend(tool.env());
            let outcome = start(&with_tool);
            // A job that could not start wrote nothing to merge: its error alone is the
            // news (dropping `tool` still removes the parts directory).
            if outcome.is_ok() {
                tool.finish(&spec.name, spec.ranks);
            }
            outcome
        }
    }
}

fn run_ranks(spec: &JobSpec) -> io::Result<JobOutcome> {
    let region_file = JobRegion::create(spec.ranks, spec.segment_size)?;
    let region = region_file.region();

    // Installed before the first rank starts so that an early Ctrl-C is not lost.
    let interrupted = Arc::new(AtomicBool::new(false));
    let _signals = if spec.forward_signals {
        Some(SignalGuard::install(&interrupted)?)
    } else {
        None
    };

    let mut ranks = Ranks {
        children: Vec::with_capacity(spec.ranks),
        done: Vec::with_capacity(spec.ranks),
        unjoined: None,
    };
    for r in 0..spec.ranks {
        match spawn_rank(spec, r, &region_file) {
            Ok(child) => {
                ranks.children.push(child);
                ranks.done.push(false);
            }
            Err(e) => {
                region.set_abort();
                ranks.teardown();
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot start rank {r} of {} ({}): {e}",
                        spec.ranks,
                        spec.program.display()
                    ),
                ));
            }
        }
    }

    let start = Instant::now();
    let deadline = spec.timeout.map(|t| start.checked_add(t));
    // The first rank seen to have ended the job with `gex::exit(0)`, and when.
    let mut exited: Option<(usize, Instant)> = None;
    let outcome = loop {
        if interrupted.load(Ordering::Relaxed) {
            break Some((EXIT_INTERRUPTED, "interrupted".to_owned()));
        }
        if let Some(failure) = ranks.poll(&region)? {
            break Some(failure);
        }
        if let Some(failure) = ranks.stranded(&region) {
            break Some(failure);
        }
        if ranks.done.iter().all(|&d| d) {
            break None;
        }
        if exited.is_none() {
            exited = (0..spec.ranks)
                .find(|&r| ranks.done[r] && region.rank_state(r) == RankState::Exited)
                .map(|r| (r, Instant::now()));
        }
        if let Some((r, at)) = exited {
            if at.elapsed() >= EXIT_GRACE {
                let running: Vec<String> = (0..spec.ranks)
                    .filter(|&r| !ranks.done[r])
                    .map(|r| r.to_string())
                    .collect();
                break Some((
                    0,
                    format!(
                        "rank {r} ended the job with gex::exit(0); stopped the ranks still \
                         running {} s later: {}",
                        EXIT_GRACE.as_secs(),
                        running.join(", ")
                    ),
                ));
            }
        }
        if let Some(Some(deadline)) = deadline {
            if Instant::now() >= deadline {
                let running: Vec<String> = (0..spec.ranks)
                    .filter(|&r| !ranks.done[r])
                    .map(|r| r.to_string())
                    .collect();
                let secs = spec.timeout.unwrap_or_default().as_secs_f64();
                break Some((
                    EXIT_TIMEOUT,
                    format!(
                        "job timed out after {secs} s (ranks still running: {})",
                        running.join(", ")
                    ),
                ));
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    };

    match outcome {
        None => Ok(JobOutcome {
            exit_code: 0,
            failure: None,
        }),
        Some((exit_code, report)) => {
            region.set_abort();
            ranks.teardown();
            eprintln!("{}: {report}", spec.name);
            Ok(JobOutcome {
                exit_code,
                // The end of a job by `gex::exit(0)` is no failure, stragglers or not.
                failure: (exit_code != 0).then_some(report),
            })
        }
    }
    // `ranks` is empty of live children here; `region_file` unmaps and closes on drop.
}

fn spawn_rank(spec: &JobSpec, rank: usize, region: &JobRegion) -> io::Result<Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env(UPCXX_RANK, rank.to_string())
        .env(UPCXX_RANKS, spec.ranks.to_string())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    spawn::spawn_rank(cmd, region)
}

/// The ranks of a running job.
struct Ranks {
    children: Vec<Child>,
    /// `done[r]`: rank r has been reaped.
    done: Vec<bool>,
    /// A rank that exited cleanly without ever joining the job (`Client::init`): a
    /// success if no rank joins, since the program does not use the layer.
    unjoined: Option<usize>,
}

impl Ranks {
    /// Reaps the ranks that exited since the last call; returns the failure to report
    /// (exit code and message) if any of them failed.
    fn poll(&mut self, region: &Region) -> io::Result<Option<(i32, String)>> {
        let n = self.children.len();
        // If several ranks failed since the last poll, prefer one that recorded why: the
        // others are likely reacting to it.
        let mut failure: Option<(i32, String, bool)> = None;
        for r in 0..n {
            if self.done[r] {
                continue;
            }
            let status = match self.children[r].try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                Err(e) => {
                    self.teardown();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot wait for rank {r}: {e}"),
                    ));
                }
            };
            self.done[r] = true;
            if status.success() && region.rank_state(r) == RankState::NotStarted {
                self.unjoined.get_or_insert(r);
            }
            if let Some((code, report, has_message)) = classify(region, r, n, status) {
                let better = match &failure {
                    None => true,
                    Some((_, _, had_message)) => has_message && !had_message,
                };
                if better {
                    failure = Some((code, report, has_message));
                }
            }
        }
        Ok(failure.map(|(code, report, _)| (code, report)))
    }

    /// The failure of a job that can never start: a rank joined it (`Client::init`,
    /// collective) while another exited without joining, so the first would wait for
    /// it in `init` forever.
    fn stranded(&self, region: &Region) -> Option<(i32, String)> {
        let gone = self.unjoined?;
        let n = self.children.len();
        let joined =
            (0..n).find(|&r| r != gone && region.rank_state(r) != RankState::NotStarted)?;
        Some((
            1,
            format!(
                "rank {gone} of {n} exited without joining the job (it never called \
                 init), so rank {joined}, which did, cannot start"
            ),
        ))
    }

    /// Stops every rank that is still running: `SIGTERM`, up to [`TERM_GRACE`] to exit,
    /// then `SIGKILL`; reaps them all.
    fn teardown(&mut self) {
        for (child, &done) in self.children.iter().zip(&self.done) {
            if !done {
                // The child is not reaped yet, so its pid cannot have been reused.
                if let Some(pid) = Pid::from_raw(child.id() as i32) {
                    let _ = rustix::process::kill_process(pid, Signal::TERM);
                }
            }
        }
        let grace_end = Instant::now() + TERM_GRACE;
        loop {
            for (child, done) in self.children.iter_mut().zip(self.done.iter_mut()) {
                if !*done && !matches!(child.try_wait(), Ok(None)) {
                    *done = true;
                }
            }
            if self.done.iter().all(|&d| d) || Instant::now() >= grace_end {
                break;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        for (child, done) in self.children.iter_mut().zip(self.done.iter_mut()) {
            if !*done {
                let _ = child.kill();
                let _ = child.wait();
                *done = true;
            }
        }
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        // Only reached with live children if `run` unwinds; never leave ranks behind.
        if !self.done.iter().all(|&d| d) {
            self.teardown();
        }
    }
}

/// How rank `r` of `n` ended, if that is a failure: (exit code, report, whether the
/// rank recorded a failure message).
fn classify(
    region: &Region,
    r: usize,
    n: usize,
    status: ExitStatus,
) -> Option<(i32, String, bool)> {
    let state = region.rank_state(r);
    let message = region.failure_message(r);
    let has_message = message.is_some();
    let who = format!("rank {r} of {n}");
    if let Some(sig) = status.signal() {
        let name = signal_name(sig);
        let report = match message {
            Some(m) => format!("{who} failed: {m} (killed by {name})"),
            None => format!("{who} was killed by {name}"),
        };
        return Some((128 + sig, report, has_message));
    }
    let code = status.code().unwrap_or(1);
    if code != 0 {
        let report = match message {
            Some(m) => format!("{who} failed: {m}"),
            None => format!("{who} exited with code {code}"),
        };
        return Some((code, report, has_message));
    }
    // A clean exit after finalize succeeds even if the rank recorded a message: that
    // was a panic the program caught and recovered from.
    match (state, message) {
        (RankState::Finalized | RankState::NotStarted | RankState::Exited, _) => None,
        (RankState::Running | RankState::Failed, Some(m)) => Some((
            1,
            format!("{who} exited before finalize (last failure recorded: {m})"),
            true,
        )),
        (RankState::Running | RankState::Failed, None) => {
            Some((1, format!("{who} exited before finalize"), false))
        }
    }
}

/// `SIGKILL`, `SIGSEGV`, ... or `signal N` for signals without a name.
fn signal_name(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(name) => name.to_owned(),
        None => format!("signal {sig}"),
    }
}

/// Signals that [`JobSpec::forward_signals`] turns into a teardown of the job.
const FORWARDED_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Number of [`run`] calls currently forwarding signals, in this process.
static FORWARDING: AtomicUsize = AtomicUsize::new(0);

/// The signals of [`FORWARDED_SIGNALS`] this process lets [`run`] handle: those not
/// ignored when the first forwarding job started (a program started with `SIGINT`
/// ignored, like a background job of a script, keeps ignoring it).
static TAKEN_SIGNALS: OnceLock<Vec<libc::c_int>> = OnceLock::new();

/// The current disposition of `sig`: `Some(true)` for the default action, `Some(false)`
/// if it is ignored (or cannot be read), `None` if the program has a handler of its own.
fn disposition_is_default(sig: libc::c_int) -> Option<bool> {
    // SAFETY: sigaction with a null new action only reads the current disposition into
    // `old`, a plain C struct for which all-zero bytes are a valid value.
    let old = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Some(false);
        }
        old
    };
    match old.sa_sigaction {
        libc::SIG_IGN => Some(false),
        libc::SIG_DFL => Some(true),
        _ => None,
    }
}

fn take_signals() -> &'static [libc::c_int] {
    TAKEN_SIGNALS.get_or_init(|| {
        let mut taken = Vec::new();
        for sig in FORWARDED_SIGNALS {
            match disposition_is_default(sig) {
                Some(false) => continue,
                // signal-hook calls the program's own handler after ours.
                None => taken.push(sig),
                Some(true) => {
                    // signal-hook cannot restore the default action once its handler is
                    // installed; emulate it whenever no job is forwarding signals, so
                    // that SIGINT still terminates this process after `run` returns.
                    // SAFETY: the action only loads an atomic and calls signal-hook's
                    // emulation of the default action (sigaction and raise), which are
                    // async-signal-safe.
                    let registered = unsafe {
                        signal_hook::low_level::register(sig, move || {
                            if FORWARDING.load(Ordering::SeqCst) == 0 {
                                tool::remove_parts_in_handler();
                                let _ = signal_hook::low_level::emulate_default_handler(sig);
                            }
                        })
                    };
                    if registered.is_ok() {
                        taken.push(sig);
                    }
                }
            }
        }
        taken
    })
}

/// `SIGINT`/`SIGTERM` actions that set a flag, for the duration of one [`run`].
struct SignalGuard {
    ids: Vec<signal_hook::SigId>,
}

impl SignalGuard {
    fn install(flag: &Arc<AtomicBool>) -> io::Result<SignalGuard> {
        let taken = take_signals();
        FORWARDING.fetch_add(1, Ordering::SeqCst);
        // From here on, dropping the guard undoes what was done.
        let mut guard = SignalGuard { ids: Vec::new() };
        for &sig in taken {
            // First: a second signal while the first is being handled exits at once
            // (the ranks then die of their death signal), leaving no parts directory.
            let first = Arc::clone(flag);
            // SAFETY: the action loads an atomic, removes a directory by system calls
            // (`remove_parts_in_handler`) and calls `_exit`: all async-signal-safe.
            guard.ids.push(unsafe {
                signal_hook::low_level::register(sig, move || {
                    if first.load(Ordering::SeqCst) {
                        tool::remove_parts_in_handler();
                        libc::_exit(EXIT_INTERRUPTED);
                    }
                })
            }?);
            guard
                .ids
                .push(signal_hook::flag::register(sig, Arc::clone(flag))?);
        }
        Ok(guard)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        FORWARDING.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
    }
}
