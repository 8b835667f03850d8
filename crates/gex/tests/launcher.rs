//! Tests of the job launcher (`gex::job`); its front end for tests,
//! `gex::testing::spmd`, is tested in `spmd.rs`.
//!
//! The ranks are this test binary itself, re-executed to run only the `fake_rank_entry`
//! test with `FAKE_RANK_MODE` set: a stand-in for a real PGAS program that maps the job
//! region, records its pid, sets its rank state and then behaves as the mode says (see
//! [`fake_rank`]). Tests that need the launcher in a separate process (to kill it, or
//! interrupt it) run `launcher_entry` the same way.

mod common;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{sleep_forever, TempDir};
use gex::job::RankState;
use gex::job::{self, InheritedRegion, JobOutcome, JobSpec};

/// Why these tests skip under `GEX_TEST_CONDUIT=mpi`: they test the smp launcher
/// itself (`gex::job::run`), which runs the same whatever the spmd jobs run on.
const SMP_LAUNCHER: &str = "tests the smp launcher itself";

const MODE_VAR: &str = "FAKE_RANK_MODE";
const PID_DIR_VAR: &str = "FAKE_PID_DIR";
const LAUNCHER_VAR: &str = "FAKE_LAUNCHER";
const RELAUNCH_VAR: &str = "FAKE_RELAUNCH";
const SIGNALS_VAR: &str = "FAKE_LAUNCHER_SIGNALS";

// ---------------------------------------------------------------------------------------
// Helpers

/// Arguments that make this test binary run only the test `name`, quietly.
fn self_args(name: &str) -> Vec<OsString> {
    [name, "--exact", "--nocapture", "--test-threads=1", "-q"]
        .into_iter()
        .map(OsString::from)
        .collect()
}

/// Where the fake ranks record their pids.
impl TempDir {
    /// The pids the fake ranks recorded, by rank.
    fn pids(&self) -> Vec<(usize, u32)> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir(&self.0).expect("read pid dir") {
            let entry = entry.expect("pid dir entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Ok(rank) = name.parse::<usize>() {
                let pid = std::fs::read_to_string(entry.path()).expect("read pid file");
                pids.push((rank, pid.trim().parse().expect("pid")));
            }
        }
        pids.sort();
        pids
    }

    /// Waits until `n` ranks recorded their pids.
    fn wait_for_pids(&self, n: usize) -> Vec<(usize, u32)> {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let pids = self.pids();
            if pids.len() == n {
                return pids;
            }
            assert!(
                Instant::now() < end,
                "only {} of {n} ranks started",
                pids.len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether `pid` is a live process (zombies count as gone: the orphans of a killed
/// launcher may wait a while to be reaped by init).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        }
    }
}

fn assert_all_gone(pids: &[(usize, u32)], within: Duration) {
    let end = Instant::now() + within;
    loop {
        let alive: Vec<_> = pids.iter().filter(|(_, p)| alive(*p)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < end,
            "ranks still alive (rank, pid): {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn dev_shm() -> BTreeSet<OsString> {
    std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

fn fake_spec(ranks: usize, mode: &str, pid_dir: &TempDir) -> JobSpec {
    let mut spec = JobSpec::new(std::env::current_exe().expect("current exe"), ranks);
    spec.args = self_args("fake_rank_entry");
    spec.segment_size = 1 << 20;
    spec.timeout = Some(Duration::from_secs(20));
    spec.env = vec![
        (MODE_VAR.into(), mode.into()),
        (PID_DIR_VAR.into(), pid_dir.path().into()),
    ];
    spec.name = format!("fake-{mode}");
    spec
}

/// Runs a fake job in this process; returns its outcome, the rank pids and how long the
/// job took. Checks that every rank is gone afterwards.
fn run_fake(
    ranks: usize,
    mode: &str,
    timeout: Option<Duration>,
) -> (JobOutcome, Vec<(usize, u32)>, Duration) {
    let dir = TempDir::new("pids");
    let mut spec = fake_spec(ranks, mode, &dir);
    if timeout.is_some() {
        spec.timeout = timeout;
    }
    let start = Instant::now();
    let outcome = job::run(&spec).expect("job::run");
    let elapsed = start.elapsed();
    let pids = dir.pids();
    // Reaped by `run`: no grace period needed.
    assert_all_gone(&pids, Duration::ZERO);
    (outcome, pids, elapsed)
}

// ---------------------------------------------------------------------------------------
// The fake rank and the launcher process

/// Not a test: when `FAKE_RANK_MODE` is set, this process is a rank of a fake job.
#[test]
fn fake_rank_entry() {
    if let Ok(mode) = std::env::var(MODE_VAR) {
        fake_rank(&mode);
    }
}

/// A stand-in for a PGAS program. `mode` is `WHAT` (every rank does it) or `WHAT:R` (rank
/// R does it after every rank has started; the others wait forever):
/// - `ok`: Running, then Finalized, exit 0;
/// - `noinit`: exit 0 without touching the rank state;
/// - `unjoined:R`: rank R exits 0 without touching the rank state, the others are
///   Running (waiting in `init` for it);
/// - `panic`: record a failure message, exit 101;
/// - `exit3`: exit 3 while Running;
/// - `early0`: exit 0 while Running;
/// - `segv` / `kill`: die of SIGSEGV / SIGKILL;
/// - `sleep`: wait forever;
/// - `stubborn`: ignore SIGTERM and wait forever (every rank).
fn fake_rank(mode: &str) -> ! {
    // Before anything maps it, the region's descriptor is close-on-exec: a program this
    // rank starts does not inherit the job.
    let fd: i32 = std::env::var("GEX_SHM_FD").unwrap().parse().unwrap();
    // SAFETY: F_GETFD on a descriptor number reads its flags, nothing else.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 || flags & libc::FD_CLOEXEC == 0 {
        eprintln!("fake rank: the job region's descriptor {fd} is inherited by exec");
        std::process::exit(97);
    }
    let inherited = InheritedRegion::from_env()
        .expect("map the job region")
        .expect("GEX_SHM_FD and UPCXX_RANK set");
    let region = *inherited.region();
    let rank = inherited.rank();
    let ranks = region.layout().ranks;
    assert_eq!(std::env::var("UPCXX_RANK").unwrap(), rank.to_string());
    assert_eq!(std::env::var("UPCXX_RANKS").unwrap(), ranks.to_string());

    // Exactly one job region is inherited, even with jobs launched concurrently.
    let memfds = std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("memfd:gex-job"))
        .count();
    if memfds != 1 {
        eprintln!("fake rank {rank}: inherited {memfds} job regions");
        std::process::exit(98);
    }

    let (what, target) = match mode.split_once(':') {
        Some((what, r)) => (what, Some(r.parse::<usize>().expect("target rank"))),
        None => (mode, None),
    };
    if what == "stubborn" {
        // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    let joins = match what {
        "noinit" => false,
        "unjoined" => target != Some(rank),
        _ => true,
    };
    if joins {
        region.set_rank_state(rank, RankState::Running);
    }
    // Record the pid: in a file for the test, then in the region for the other ranks.
    let pid = std::process::id();
    let dir = PathBuf::from(std::env::var_os(PID_DIR_VAR).expect("FAKE_PID_DIR"));
    let tmp = dir.join(format!("{rank}.tmp"));
    std::fs::write(&tmp, pid.to_string()).expect("write pid");
    std::fs::rename(&tmp, dir.join(rank.to_string())).expect("rename pid file");
    region.control(rank).pid.store(pid, Ordering::Release);

    match target {
        Some(t) if t != rank => sleep_forever(),
        Some(_) => {
            // Fail only once every rank is up, so that the test knows all the pids.
            let end = Instant::now() + Duration::from_secs(10);
            while (0..ranks).any(|r| region.control(r).pid.load(Ordering::Acquire) == 0) {
                assert!(Instant::now() < end, "peers did not start");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        None => {}
    }
    match what {
        "ok" => {
            region.set_rank_state(rank, RankState::Finalized);
            std::process::exit(0)
        }
        "noinit" | "early0" | "unjoined" => std::process::exit(0),
        "panic" => {
            region.record_failure(
                rank,
                &format!("panicked at tests/launcher.rs:1:1: boom on rank {rank}"),
            );
            std::process::exit(101)
        }
        "exit3" => std::process::exit(3),
        "segv" | "kill" => {
            let sig = if what == "segv" {
                libc::SIGSEGV
            } else {
                libc::SIGKILL
            };
            // SAFETY: restoring the default disposition (Rust's runtime handles SIGSEGV
            // for stack overflows) and raising a signal have no preconditions.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            unreachable!("survived signal {sig}")
        }
        "sleep" | "stubborn" => sleep_forever(),
        other => panic!("unknown fake rank mode {other}"),
    }
}

/// Not a test: when `FAKE_LAUNCHER=RANKS:MODE` is set, this process is a launcher of a
/// fake job (forwarding signals, like `upcxx-run`). Exits with the job's exit code, or
/// 99 if the job region is still mapped or open after `run`.
#[test]
fn launcher_entry() {
    let Ok(what) = std::env::var(LAUNCHER_VAR) else {
        return;
    };
    let (ranks, mode) = what.split_once(':').expect("RANKS:MODE");
    let pid_dir = TempDir(PathBuf::from(
        std::env::var_os(PID_DIR_VAR).expect("FAKE_PID_DIR"),
    ));
    let mut spec = fake_spec(ranks.parse().expect("ranks"), mode, &pid_dir);
    std::mem::forget(pid_dir); // owned by the test that started us
    spec.forward_signals = true;
    spec.name = "fake-launcher".into();
    let signals = std::env::var(SIGNALS_VAR).unwrap_or_default();
    // Start from the dispositions the test asks for, not those the test runner got: a
    // runner started in the background by a non-interactive shell inherits SIGINT
    // ignored, which every process it starts would keep.
    let int = if signals == "ignore-int" {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: setting a signal's disposition to SIG_IGN or SIG_DFL has no
    // preconditions.
    unsafe {
        libc::signal(libc::SIGINT, int);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        if signals == "ignore-chld" {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
        }
    }
    let outcome = job::run(&spec).expect("job::run");
    if signals == "raise-int-after" {
        // SIGINT must have its default action again: this kills the process.
        // SAFETY: raise(3) has no preconditions.
        unsafe { libc::raise(libc::SIGINT) };
        std::thread::sleep(Duration::from_secs(1));
        std::process::exit(97);
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read maps");
    let fds = std::fs::read_dir("/proc/self/fd")
        .expect("read fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.to_string_lossy().contains("memfd:gex-job"))
        .count();
    if maps.contains("memfd:gex-job") || fds != 0 {
        eprintln!(
            "fake-launcher: job region leaked: {fds} fds, mapped: {}",
            maps.contains("memfd:gex-job")
        );
        std::process::exit(99);
    }
    std::process::exit(outcome.exit_code);
}

/// Starts `launcher_entry` as a separate process.
fn spawn_launcher(ranks: usize, mode: &str, pid_dir: &TempDir) -> std::process::Child {
    spawn_launcher_with(ranks, mode, pid_dir, "")
}

/// Starts `launcher_entry` as a separate process, with `FAKE_LAUNCHER_SIGNALS=signals`.
fn spawn_launcher_with(
    ranks: usize,
    mode: &str,
    pid_dir: &TempDir,
    signals: &str,
) -> std::process::Child {
    Command::new(std::env::current_exe().expect("current exe"))
        .args(self_args("launcher_entry"))
        .env(LAUNCHER_VAR, format!("{ranks}:{mode}"))
        .env(PID_DIR_VAR, pid_dir.path())
        .env(SIGNALS_VAR, signals)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn launcher")
}

fn wait_with_stderr(child: std::process::Child) -> (std::process::ExitStatus, String) {
    let out = child.wait_with_output().expect("wait for launcher");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// Launcher tests

#[test]
fn successful_jobs_of_1_to_4_ranks() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let shm_before = dev_shm();
    for ranks in 1..=4 {
        let (outcome, pids, _) = run_fake(ranks, "ok", None);
        assert_eq!(
            outcome,
            JobOutcome {
                exit_code: 0,
                failure: None
            },
            "{ranks} ranks"
        );
        assert_eq!(pids.len(), ranks);
        assert_eq!(
            pids.iter().map(|p| p.0).collect::<Vec<_>>(),
            (0..ranks).collect::<Vec<_>>()
        );
    }
    assert_eq!(dev_shm(), shm_before, "/dev/shm changed");
}

#[test]
fn ranks_that_never_initialize_succeed() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let (outcome, pids, _) = run_fake(3, "noinit", None);
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(pids.len(), 3);
}

/// A rank that exits cleanly without joining the job while the others joined (they
/// wait for it in `init`, collective, forever): the job fails at once, naming it.
#[test]
fn a_rank_that_never_joins_fails_the_job() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (ranks, target) in [(2, 1), (3, 0)] {
        let (outcome, pids, elapsed) = run_fake(ranks, &format!("unjoined:{target}"), None);
        assert_eq!(outcome.exit_code, 1, "{outcome:?}");
        let report = outcome.failure.expect("failure report");
        assert!(
            report.starts_with(&format!("rank {target} of {ranks} exited without joining")),
            "{report}"
        );
        assert_eq!(pids.len(), ranks);
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    }
}

#[test]
fn panicking_rank_is_reported_and_peers_are_stopped() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (ranks, target) in [(1, 0), (2, 1), (3, 2), (4, 1)] {
        let (outcome, pids, elapsed) = run_fake(ranks, &format!("panic:{target}"), None);
        assert_eq!(outcome.exit_code, 101);
        let report = outcome.failure.expect("failure report");
        assert_eq!(
            report,
            format!("rank {target} of {ranks} failed: panicked at tests/launcher.rs:1:1: boom on rank {target}")
        );
        assert_eq!(pids.len(), ranks);
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    }
}

#[test]
fn nonzero_exit_is_reported() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let (outcome, pids, _) = run_fake(3, "exit3:2", None);
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("rank 2 of 3 exited with code 3")
    );
    assert_eq!(pids.len(), 3);

    // Every rank fails at once: the report names one of them.
    let (outcome, _, _) = run_fake(4, "exit3", None);
    assert_eq!(outcome.exit_code, 3);
    assert!(outcome
        .failure
        .unwrap()
        .ends_with("of 4 exited with code 3"));
}

#[test]
fn exit_before_finalize_is_a_failure() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let (outcome, pids, _) = run_fake(2, "early0:0", None);
    assert_eq!(outcome.exit_code, 1);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("rank 0 of 2 exited before finalize")
    );
    assert_eq!(pids.len(), 2);
}

#[test]
fn signals_are_reported_by_name() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let (outcome, pids, _) = run_fake(2, "kill:1", None);
    assert_eq!(outcome.exit_code, 128 + libc::SIGKILL);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("rank 1 of 2 was killed by SIGKILL")
    );
    assert_eq!(pids.len(), 2);

    let (outcome, _, _) = run_fake(1, "segv", None);
    assert_eq!(outcome.exit_code, 128 + libc::SIGSEGV);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("rank 0 of 1 was killed by SIGSEGV")
    );
}

#[test]
fn timeout_stops_the_job() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let (outcome, pids, elapsed) = run_fake(3, "sleep", Some(Duration::from_millis(1500)));
    assert_eq!(outcome.exit_code, 124);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("job timed out after 1.5 s (ranks still running: 0, 1, 2)")
    );
    assert_eq!(pids.len(), 3);
    assert!(elapsed >= Duration::from_millis(1500));
    assert!(
        elapsed < Duration::from_millis(1500 + 1000),
        "took {elapsed:?}"
    );
}

#[test]
fn ranks_ignoring_sigterm_are_killed() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    // Every rank ignores SIGTERM; rank 0 panics once all have started.
    let dir = TempDir::new("stubborn");
    let spec = fake_spec(3, "stubborn", &dir);
    let handle = std::thread::spawn(move || job::run(&spec).expect("job::run"));
    let pids = dir.wait_for_pids(3);
    let start = Instant::now();
    // Make rank 0 fail from outside: its death is the first failure.
    // SAFETY: kill(2) on a rank of the running job, not reaped yet.
    unsafe { libc::kill(pids[0].1 as i32, libc::SIGKILL) };
    let outcome = handle.join().expect("launcher thread");
    let elapsed = start.elapsed();
    assert_eq!(outcome.exit_code, 128 + libc::SIGKILL);
    assert_eq!(
        outcome.failure.as_deref(),
        Some("rank 0 of 3 was killed by SIGKILL")
    );
    assert_all_gone(&pids, Duration::ZERO);
    // SIGTERM is ignored: the launcher waited out the grace period, then killed them.
    assert!(elapsed >= job::TERM_GRACE, "took {elapsed:?}");
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
}

#[test]
fn concurrent_jobs_inherit_only_their_own_region() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    // The fake ranks exit with 98 if they inherited more than one job region.
    let handles: Vec<_> = (0..3)
        .map(|i| std::thread::spawn(move || run_fake(2 + i % 2, "ok", None).0))
        .collect();
    for h in handles {
        let outcome = h.join().expect("job thread");
        assert!(outcome.success(), "{outcome:?}");
    }
}

#[test]
fn bad_specs_are_errors() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("bad");
    let mut spec = fake_spec(0, "ok", &dir);
    let e = job::run(&spec).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);

    spec.ranks = 2;
    spec.segment_size = usize::MAX - 10;
    assert_eq!(
        job::run(&spec).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );

    spec.segment_size = 1 << 20;
    spec.program = dir.path().join("no-such-program");
    let e = job::run(&spec).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("cannot start rank 0 of 2"), "{e}");
    assert_eq!(job::launch_error_exit_code(&e), 127);
}

#[test]
fn launcher_process_releases_the_region() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (mode, code) in [("ok", 0), ("panic:1", 101)] {
        let dir = TempDir::new("proc");
        let (status, stderr) = wait_with_stderr(spawn_launcher(3, mode, &dir));
        assert_eq!(status.code(), Some(code), "{mode}: {stderr}");
        assert_all_gone(&dir.pids(), Duration::ZERO);
    }
}

/// A launcher started with `SIGCHLD` ignored (inherited from a parent that ignores it,
/// which makes the kernel reap children as they exit) still waits for its ranks and
/// reports how they ended: a job that succeeds exits with 0, a failing rank's status
/// comes through.
#[test]
fn a_launcher_ignoring_sigchld_still_waits_for_its_ranks() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (mode, code) in [("ok", 0), ("exit3:1", 3)] {
        let dir = TempDir::new("sigchld");
        let launcher = spawn_launcher_with(3, mode, &dir, "ignore-chld");
        let (status, stderr) = wait_with_stderr(launcher);
        assert_eq!(status.code(), Some(code), "{mode}: {stderr}");
        assert_all_gone(&dir.pids(), Duration::ZERO);
    }
}

#[test]
fn killing_the_launcher_kills_its_ranks() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let shm_before = dev_shm();
    let dir = TempDir::new("sigkill");
    let mut launcher = spawn_launcher(4, "sleep", &dir);
    let pids = dir.wait_for_pids(4);
    launcher.kill().expect("SIGKILL the launcher");
    launcher.wait().expect("reap the launcher");
    assert_all_gone(&pids, Duration::from_secs(1));
    assert_eq!(dev_shm(), shm_before, "/dev/shm changed");
}

#[test]
fn sigint_to_the_launcher_tears_the_job_down() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let dir = TempDir::new("sigint");
        let launcher = spawn_launcher(3, "sleep", &dir);
        let pids = dir.wait_for_pids(3);
        let start = Instant::now();
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(launcher.id() as i32, sig) };
        let (status, stderr) = wait_with_stderr(launcher);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert!(stderr.contains("fake-launcher: interrupted"), "{stderr}");
        assert_all_gone(&pids, Duration::ZERO);
    }
}

/// A second `SIGINT` while the first tears the job down ends the launcher at once
/// (its ranks ignore `SIGTERM`, so the teardown waits out its grace), and the parts
/// directory of a GASP tool run goes with it, the parts in it included.
#[test]
fn a_second_sigint_leaves_no_parts_directory() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("sigtwice");
    let tmp = TempDir::new("sigtwice-tmp");
    let launcher = Command::new(std::env::current_exe().expect("current exe"))
        .args(self_args("launcher_entry"))
        .env(LAUNCHER_VAR, "2:stubborn")
        .env(PID_DIR_VAR, dir.path())
        .env(SIGNALS_VAR, "")
        .env("GASP_TOOL", "profile")
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn launcher");
    let pids = dir.wait_for_pids(2);
    let parts: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .expect("read TMPDIR")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pgas-gasp-"))
        })
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    // A part being written when the signals come.
    std::fs::write(parts[0].join("profile-0.json.partial"), b"{").expect("write a part");
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: as above.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGINT) };
    let (status, stderr) = wait_with_stderr(launcher);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(!parts[0].exists(), "{} is left", parts[0].display());
    assert_all_gone(&pids, Duration::from_secs(2));
}

#[test]
fn signals_behave_as_before_outside_a_forwarding_run() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    use std::os::unix::process::ExitStatusExt;

    // After the job, SIGINT has its default action again.
    let dir = TempDir::new("sigafter");
    let (status, stderr) = wait_with_stderr(spawn_launcher_with(2, "ok", &dir, "raise-int-after"));
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {stderr}");

    // A launcher started with SIGINT ignored keeps ignoring it; SIGTERM still stops it.
    let dir = TempDir::new("sigign");
    let launcher = spawn_launcher_with(2, "sleep", &dir, "ignore-int");
    let pids = dir.wait_for_pids(2);
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        pids.iter().all(|&(_, p)| alive(p)),
        "SIGINT stopped the job"
    );
    // SAFETY: as above.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGTERM) };
    let (status, stderr) = wait_with_stderr(launcher);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_all_gone(&pids, Duration::ZERO);
}

/// Not a test: with `FAKE_RELAUNCH` set, behaves like a program whose communication
/// layer calls `relaunch_if_requested` at init, then acts as a fake rank.
#[test]
fn relaunch_entry() {
    let Ok(mode) = std::env::var(RELAUNCH_VAR) else {
        return;
    };
    job::relaunch_if_requested();
    // Only ranks get here.
    fake_rank(&mode);
}

#[test]
fn relaunch_runs_the_program_as_a_job() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (mode, code) in [("ok", 0), ("exit3:1", 3)] {
        let dir = TempDir::new("relaunch");
        let out = Command::new(std::env::current_exe().expect("current exe"))
            .args(self_args("relaunch_entry"))
            .env(RELAUNCH_VAR, mode)
            .env("UPCXX_RANKS", "3")
            .env_remove("UPCXX_RANK")
            .env("UPCXX_SEGMENT_SIZE", "1M")
            .env(PID_DIR_VAR, dir.path())
            .stdout(Stdio::null())
            .output()
            .expect("run relaunch_entry");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{mode}: {stderr}");
        assert_eq!(dir.pids().len(), 3, "{mode}");
        if code == 3 {
            assert!(
                stderr.contains("rank 1 of 3 exited with code 3"),
                "{stderr}"
            );
        }
    }
}
