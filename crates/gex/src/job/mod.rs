//! Running an N-rank job on this host: the launcher behind `upcxx-run`,
//! `UPCXX_RANKS=N prog` and [`crate::testing::spmd`].
//!
//! # Design
//!
//! A job is `ranks` child processes of one program plus one shared-memory region that
//! holds the whole job (see [`crate::conduit::smp::layout`]). [`run`] is the launcher:
//!
//! 1. **Region.** It creates the region as an anonymous memory file
//!    (`memfd_create("gex-job", MFD_CLOEXEC)`), sizes it with `ftruncate`, maps it
//!    `MAP_SHARED` and writes the job header. A memfd has no name in any file system, so
//!    nothing can ever be left behind in `/dev/shm` — not when a rank crashes, not when the
//!    launcher is killed with `SIGKILL`: the kernel frees the memory when the last process
//!    that maps it or holds its descriptor goes away. The descriptor is opened close-on-exec
//!    so that no unrelated program started by this process (for instance another job
//!    launched concurrently from another thread) inherits it.
//! 2. **Ranks.** It spawns the ranks with `std::process::Command` (stdin, stdout and
//!    stderr inherited) and the environment `UPCXX_RANK=r`, `UPCXX_RANKS=N`,
//!    `GEX_SHM_FD=fd`. Between `fork` and `exec` each child clears close-on-exec on its
//!    own copy of the descriptor, so that exactly the ranks of this job inherit it, and
//!    asks for `PR_SET_PDEATHSIG = SIGKILL`: if the launcher dies, however it dies, the
//!    kernel kills its ranks, so no rank can outlive its launcher and spin forever waiting
//!    for peers. (The death signal is tied to the *thread* that forked the child; [`run`]
//!    forks from the calling thread and keeps it inside `run` until every rank is reaped.)
//!    A child re-checks its parent after the `prctl`, closing the window in which the
//!    launcher could die before the death signal was armed.
//! 3. **Monitoring.** It polls the children every [`POLL_INTERVAL`] with `try_wait`,
//!    sleeping in between. A rank succeeds when it exits with status 0 and its
//!    [`RankState`] is `Finalized` (it finalized the communication layer) or `NotStarted`
//!    (it never initialized it). Everything else is a failure: a non-zero exit status, a
//!    signal, or status 0 while still `Running` ("exited before finalize").
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

mod tool;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustix::fs::MemfdFlags;
use rustix::io::FdFlags;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::process::{Pid, Signal};

use crate::conduit::smp::layout::{
    JobHeader, JobLayout, RankState, Region, DEFAULT_SEGMENT_SIZE, HEADER_SIZE, MAGIC, PAGE,
};

/// Environment variable holding the job rank (0-based) of a rank process.
pub const UPCXX_RANK: &str = "UPCXX_RANK";
/// Environment variable holding the number of ranks of the job. Set by the launcher in
/// every rank; set by the user (without [`UPCXX_RANK`]) to make a program launch itself
/// as a job (see [`relaunch_if_requested`]).
pub const UPCXX_RANKS: &str = "UPCXX_RANKS";
/// Environment variable holding the descriptor number of the job region's memfd, which
/// every rank inherits from the launcher.
pub const GEX_SHM_FD: &str = "GEX_SHM_FD";
/// Environment variable giving the segment size per rank (e.g. `64M`, `2G`), used when
/// no size is given explicitly. See [`parse_size()`].
pub const UPCXX_SEGMENT_SIZE: &str = "UPCXX_SEGMENT_SIZE";

/// How often the launcher polls its ranks for exit.
pub const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// How long the launcher waits after `SIGTERM` before it sends `SIGKILL` to the ranks
/// that are still running.
pub const TERM_GRACE: Duration = Duration::from_millis(300);

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
    /// status 130 (its ranks then die of their death signal).
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

/// Parses a size such as `4096`, `64K`, `64M`, `2G`, `1GiB` or `1.5 MB` into bytes.
///
/// Units are binary: `K`, `KB` and `KiB` all mean 1024 bytes, `M` 1024², and so on. The
/// size must be greater than zero and fit in `usize`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".to_owned());
    }
    let bytes = parse_size::Config::new()
        .with_binary()
        .parse_size(t)
        .map_err(|e| format!("invalid size '{s}': {e} (expected e.g. 4096, 64M, 2G, 1GiB)"))?;
    if bytes == 0 {
        return Err(format!("invalid size '{s}': must be greater than zero"));
    }
    usize::try_from(bytes).map_err(|_| format!("invalid size '{s}': too large"))
}

/// The segment size per rank from `UPCXX_SEGMENT_SIZE`, or
/// [`DEFAULT_SEGMENT_SIZE`] if it is unset or empty.
pub fn segment_size_from_env() -> Result<usize, String> {
    match std::env::var_os(UPCXX_SEGMENT_SIZE) {
        None => Ok(DEFAULT_SEGMENT_SIZE),
        Some(v) if v.is_empty() => Ok(DEFAULT_SEGMENT_SIZE),
        Some(v) => {
            let v = v
                .to_str()
                .ok_or_else(|| format!("{UPCXX_SEGMENT_SIZE} is not valid UTF-8"))?;
            parse_size(v).map_err(|e| format!("{UPCXX_SEGMENT_SIZE}: {e}"))
        }
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
/// If `UPCXX_RANKS` is unset or `UPCXX_RANK` is set (this process is a rank of a
/// job), returns normally.
pub fn relaunch_if_requested() {
    if std::env::var_os(UPCXX_RANK).is_some() {
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
    let ranks = match parse_ranks(&ranks) {
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

fn parse_ranks(v: &OsStr) -> Result<usize, String> {
    let s = v.to_str().ok_or("not valid UTF-8")?.trim();
    match s.parse::<usize>() {
        Ok(0) => Err("the number of ranks must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a number of ranks")),
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
    match tool::ToolRun::prepare(spec)? {
        None => run_ranks(spec),
        Some(tool) => {
            let mut with_tool = spec.clone();
            with_tool.env.extend(tool.env());
            let outcome = run_ranks(&with_tool);
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
    let layout = checked_layout(spec.ranks, spec.segment_size)?;
    let region_file = JobRegion::create(layout)?;
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
    };
    for r in 0..spec.ranks {
        match spawn_rank(spec, r, region_file.fd.as_raw_fd()) {
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
    let outcome = loop {
        if interrupted.load(Ordering::Relaxed) {
            break Some((EXIT_INTERRUPTED, "interrupted".to_owned()));
        }
        if let Some(failure) = ranks.poll(&region)? {
            break Some(failure);
        }
        if ranks.done.iter().all(|&d| d) {
            break None;
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
                failure: Some(report),
            })
        }
    }
    // `ranks` is empty of live children here; `region_file` unmaps and closes on drop.
}

/// The layout of a job, refusing sizes that overflow or cannot be mapped.
fn checked_layout(ranks: usize, segment_size: usize) -> io::Result<JobLayout> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    if ranks == 0 {
        return Err(invalid("the number of ranks must be at least 1".to_owned()));
    }
    if u32::try_from(ranks).is_err() {
        return Err(invalid(format!("too many ranks: {ranks}")));
    }
    // JobLayout::new rounds up without overflow checks: check the same sums here.
    let stride = segment_size
        .checked_add(PAGE)
        .and_then(|s| s.checked_add(JobLayout::SEGMENT_OFFSET));
    let total = stride
        .and_then(|s| s.checked_mul(ranks))
        .and_then(|s| s.checked_add(HEADER_SIZE))
        .filter(|&t| t <= isize::MAX as usize);
    if total.is_none() {
        return Err(invalid(format!(
            "a job of {ranks} ranks with a segment of {segment_size} bytes each is too large"
        )));
    }
    Ok(JobLayout::new(ranks, segment_size))
}

/// The launcher's memfd and its mapping; unmapped and closed on drop.
struct JobRegion {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    layout: JobLayout,
}

impl JobRegion {
    fn create(layout: JobLayout) -> io::Result<JobRegion> {
        let ctx = |what: &str, e: rustix::io::Errno| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("cannot {what} the job region: {e}"))
        };
        let len = layout.total_size();
        let fd = rustix::fs::memfd_create("gex-job", MemfdFlags::CLOEXEC)
            .map_err(|e| ctx("create", e))?;
        rustix::fs::ftruncate(&fd, len as u64).map_err(|e| ctx("size", e))?;
        // SAFETY: a fresh shared mapping of a file we own, at an address the kernel
        // chooses; nothing else in this process refers to that memory.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|e| ctx("map", e))?;
        let job = JobRegion {
            fd,
            base: base.cast(),
            len,
            layout,
        };
        job.region().init_header();
        Ok(job)
    }

    fn region(&self) -> Region {
        // SAFETY: `base` is a live, writable, shared mapping of `layout.total_size()`
        // bytes that lives as long as `self`, and `run` uses the Region only while it
        // holds `self`.
        unsafe { Region::new(self.base, self.layout) }
    }
}

impl Drop for JobRegion {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `create`, and no
        // reference into it outlives `self` (see `region`).
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
        // `fd` is closed when the field drops.
    }
}

fn spawn_rank(spec: &JobSpec, rank: usize, fd: RawFd) -> io::Result<Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env(UPCXX_RANK, rank.to_string())
        .env(UPCXX_RANKS, spec.ranks.to_string())
        .env(GEX_SHM_FD, fd.to_string())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe operations are allowed. It only makes raw system calls through
    // rustix (fcntl, prctl, getppid), allocates nothing and takes no locks; the errors
    // it returns are plain errno values (`io::Error::from(Errno)` does not allocate).
    // `fd` is open in the child, since the child is a copy of this process taken while
    // `run` holds the descriptor.
    unsafe {
        cmd.pre_exec(move || {
            // Only this child's copy of the memfd loses close-on-exec, so only the ranks of
            // this job inherit it, even if other threads launch jobs concurrently.
            let fd = BorrowedFd::borrow_raw(fd);
            rustix::io::fcntl_setfd(fd, FdFlags::empty())?;
            // Die with the launcher (precisely: with the thread that forked us).
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // If the launcher died before the prctl above, the death signal will never
            // come: we have been reparented already, so give up now.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from(rustix::io::Errno::SRCH));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// The ranks of a running job.
struct Ranks {
    children: Vec<Child>,
    /// `done[r]`: rank r has been reaped.
    done: Vec<bool>,
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
        (RankState::Finalized | RankState::NotStarted, _) => None,
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
            // (the ranks then die of their death signal).
            guard
                .ids
                .push(signal_hook::flag::register_conditional_shutdown(
                    sig,
                    EXIT_INTERRUPTED,
                    Arc::clone(flag),
                )?);
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

/// The job region as mapped by a rank, from the descriptor it inherited from the
/// launcher; unmapped on drop.
///
/// This is what a rank process (the smp conduit, or [`crate::testing`] inside a rank)
/// uses to reach the region. It leaves the descriptor open.
#[derive(Debug)]
pub struct InheritedRegion {
    region: Region,
    rank: usize,
    len: usize,
}

impl InheritedRegion {
    /// Maps the region named by `GEX_SHM_FD`, for the rank given by `UPCXX_RANK`.
    ///
    /// Returns `Ok(None)` if this process was not started by a launcher (either
    /// variable unset), and an error if the variables are invalid or the descriptor is
    /// not a job region of this layout version.
    pub fn from_env() -> io::Result<Option<InheritedRegion>> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
        let (Some(fd), Some(rank)) = (std::env::var_os(GEX_SHM_FD), std::env::var_os(UPCXX_RANK))
        else {
            return Ok(None);
        };
        let fd: RawFd = fd
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&fd: &RawFd| fd >= 0)
            .ok_or_else(|| invalid(format!("invalid {GEX_SHM_FD}: {fd:?}")))?;
        let rank: usize = rank
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| invalid(format!("invalid {UPCXX_RANK}: {rank:?}")))?;
        // SAFETY: the launcher passed this descriptor number, open, to this process. If
        // the variable is stale the descriptor may be closed (fstat fails) or another
        // file (rejected by the size and magic checks below); it is only borrowed for
        // the duration of this function and never closed here.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let size = rustix::fs::fstat(fd)
            .map_err(|e| invalid(format!("{GEX_SHM_FD}: cannot stat the job region: {e}")))?
            .st_size;
        let len = usize::try_from(size)
            .ok()
            .filter(|&l| l >= HEADER_SIZE)
            .ok_or_else(|| invalid(format!("{GEX_SHM_FD} is not a job region")))?;
        let base = map_shared(fd, len)?;
        // SAFETY: the header lies at offset 0 of a mapping of at least HEADER_SIZE bytes,
        // page aligned, and is only accessed through atomics.
        let header = unsafe { &*(base as *const JobHeader) };
        let unmap = |msg: String| {
            // SAFETY: `base`/`len` is the mapping just created, not used afterwards.
            let _ = unsafe { rustix::mm::munmap(base.cast(), len) };
            Err(invalid(msg))
        };
        if header.magic.load(Ordering::Acquire) != MAGIC {
            return unmap(format!("{GEX_SHM_FD} is not a job region of this version"));
        }
        let ranks = header.ranks.load(Ordering::Relaxed) as usize;
        let segment_size = header.segment_size.load(Ordering::Relaxed) as usize;
        let layout = JobLayout::new(ranks, segment_size);
        if layout.total_size() > len || rank >= ranks {
            return unmap(format!(
                "job region does not match: {len} bytes, {ranks} ranks, rank {rank}"
            ));
        }
        Ok(Some(InheritedRegion {
            // SAFETY: `base` maps `len >= layout.total_size()` bytes, shared and writable,
            // and lives until `self` drops; the Region is only handed out by reference.
            region: unsafe { Region::new(base, layout) },
            rank,
            len,
        }))
    }

    /// The region, valid while `self` lives.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
}

impl Drop for InheritedRegion {
    fn drop(&mut self) {
        // SAFETY: the mapping created in `from_env`; references handed out by `region`
        // borrow `self`, so none outlives it.
        let _ = unsafe { rustix::mm::munmap(self.region.base().cast(), self.len) };
    }
}

fn map_shared(fd: impl AsFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping at an address the kernel chooses.
    let base = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("cannot map the job region: {e}"))
    })?;
    Ok(base.cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MB"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size(" 16k "), Ok(16 << 10));
        assert!(parse_size("").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("-1M").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("64Q").is_err());
    }

    #[test]
    fn ranks() {
        assert_eq!(parse_ranks(OsStr::new("4")), Ok(4));
        assert!(parse_ranks(OsStr::new("0")).is_err());
        assert!(parse_ranks(OsStr::new("four")).is_err());
    }

    #[test]
    fn layout_limits() {
        assert!(checked_layout(0, 4096).is_err());
        assert!(checked_layout(2, usize::MAX).is_err());
        assert!(checked_layout(usize::MAX / 2, 1 << 20).is_err());
        assert_eq!(
            checked_layout(3, 1 << 20).unwrap(),
            JobLayout::new(3, 1 << 20)
        );
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
    }
}
