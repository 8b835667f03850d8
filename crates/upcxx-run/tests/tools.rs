//! `upcxx-run --profile`, `--trace` and `--profile-only` end to end: the built launcher
//! runs a multi-rank job under a built-in GASP tool, and the tests read what it leaves
//! behind, and check that it leaves nothing else, neither in its current directory nor
//! in the temporary directory where the ranks put their parts (`gex::job::tool`).
//!
//! Each test runs the launcher in a fresh directory of its own (`cwd`) with `TMPDIR`
//! pointing at another fresh directory (`tmp`), so "nothing left behind" is a listing of
//! two directories that nobody else writes to.
//!
//! # The program the jobs run
//!
//! This test binary is its own PGAS program: the launcher runs it with the arguments
//! that make libtest run [`rank_program`] alone, an ignored test that is the body of
//! every rank. Each rank reports a few events (a user event, a put, a get) and prints
//! where its parts go.
//!
//! `cargo test -p upcxx-run` builds `gex` without its `gasp` feature (upcxx-run does
//! not ask for it; a workspace build turns it on, through the root package), so `gex`
//! neither attaches the tool nor reports events. The program therefore does what an
//! instrumented runtime does, through `gasp`'s runtime side: `gasp::dispatch::init`
//! after `Client::init` (a no-op where `gex` attached the tool already), `gasp::Span`
//! for its system events, `gasp::dispatch::finish` before finalizing. Where `gex` is
//! instrumented its own events may come on top, so the tests accept rows they did not ask
//! for, except where a filter forbids them.

use std::panic::Location;
use std::path::{Path, PathBuf};
use std::process::Command;

use gasp::formats::{Profile, PROFILE_TOOL, TRACE_TOOL};
use gasp::report::Loaded;
use gasp::{Arg, GPtr, Span};

/// The name of the user event every rank reports (rank R reports it R + 1 times).
const USER_EVENT: &str = "upcxx-run tools test phase";
/// A user event the program creates before the tool is attached.
const EARLY_EVENT: &str = "upcxx-run tools test setup";
/// The system events every rank reports once each, towards the next rank.
const PUT: &str = "GASP_UPC_PUT";
const GET: &str = "GASP_UPC_GET";
const PUT_BYTES: usize = 64;
const GET_BYTES: usize = 8;
/// Environment variable: the rank that exits with status 3 after writing its part.
const FAIL_RANK: &str = "UPCXX_RUN_TOOLS_TEST_FAIL_RANK";
/// What each rank prints first: `rank R parts DIR`, DIR being its `GASP_PARTS`.
const PARTS_LINE: &str = "parts ";

/// Why these tests skip under `GEX_TEST_CONDUIT=mpi`: they test this launcher's own
/// job start with a tool (its reports, the parts directories); `--profile` over
/// `mpirun` is tested in the root package's `tests/mpi.rs`.
const SMP_LAUNCHER: &str =
    "upcxx-run's own job start with the GASP tools (tests/mpi.rs has the mpi case)";

/// The body of every rank of the jobs the other tests launch; not a test of its own
/// (run outside a job, it has nothing to do).
#[test]
#[ignore = "the program the other tests run as a job through upcxx-run"]
fn rank_program() {
    if std::env::var_os(gex::job::UPCXX_RANK).is_none() {
        return;
    }
    // Before any tool is attached: the tool learns of it when it is.
    let setup = gasp::create_event(EARLY_EVENT, None);
    let (client, _endpoint, team) =
        gex::Client::init("TOOLS", gex::Flags::NONE).expect("gex::Client::init");
    let (rank, ranks) = (team.rank(), team.size());
    gasp::dispatch::init(rank, ranks, (0..ranks).collect()).expect("attach the GASP tool");
    assert!(
        gasp::dispatch::info().is_some(),
        "rank {rank}: no GASP tool attached"
    );
    println!(
        "rank {rank} {PARTS_LINE}{}",
        std::env::var(gasp::tools::GASP_PARTS).unwrap_or_default()
    );

    let phase = gasp::create_event(USER_EVENT, Some("step %d"));
    assert_ne!(phase, setup, "an event created early shares a tag");
    gasp::event_start(setup, &[]);
    gasp::event_end(setup, &[]);
    for step in 0..=rank {
        gasp::event_start(phase, &[Arg::Int(step as i32)]);
        gasp::event_end(phase, &[Arg::Int(step as i32)]);
    }
    let peer = GPtr {
        rank: (rank + 1) % ranks,
        addr: 0,
    };
    let put = [
        Arg::Int(1),
        Arg::GPtr(peer),
        Arg::Ptr(0),
        Arg::Bytes(PUT_BYTES),
    ];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(gasp::events::GASP_UPC_PUT, Location::caller(), &put).end(&put) };
    let get = [
        Arg::Int(1),
        Arg::Ptr(0),
        Arg::GPtr(peer),
        Arg::Bytes(GET_BYTES),
    ];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(gasp::events::GASP_UPC_GET, Location::caller(), &get).end(&get) };

    gasp::dispatch::finish();
    if std::env::var(FAIL_RANK).is_ok_and(|r| r == rank.to_string()) {
        gex::exit(3);
    }
    client.finalize();
    // Ends the rank before libtest prints a result of its own.
    std::process::exit(0);
}

/// A fresh directory for one test, removed when dropped: `cwd` for the launcher,
/// `tmp` for its `TMPDIR`.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("upcxx-run-tools-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["cwd", "tmp"] {
            std::fs::create_dir_all(dir.join(sub)).expect("create the temporary directory");
        }
        TempDir(dir)
    }

    fn cwd(&self) -> PathBuf {
        self.0.join("cwd")
    }

    fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The launcher's output, as text.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Fails unless the job succeeded.
    fn assert_success(&self) {
        assert_eq!(self.code, Some(0), "{self}");
    }

    /// The parts directories the ranks were given, one per rank that started.
    fn parts_dirs(&self) -> Vec<PathBuf> {
        self.stdout
            .lines()
            .filter_map(|l| l.split_once(PARTS_LINE))
            .map(|(_, dir)| PathBuf::from(dir))
            .collect()
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `upcxx-run -n RANKS TOOL_ARGS... <this binary> rank_program ...` in `dir`.
fn launch(dir: &TempDir, ranks: u32, tool_args: &[&str], env: &[(&str, &str)]) -> Run {
    let exe = std::env::current_exe().expect("the test executable");
    launch_program(dir, ranks, tool_args, env, &exe)
}

/// `upcxx-run -n RANKS TOOL_ARGS... PROGRAM rank_program ...` in `dir`.
fn launch_program(
    dir: &TempDir,
    ranks: u32,
    tool_args: &[&str],
    env: &[(&str, &str)],
    exe: &Path,
) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_upcxx-run"));
    cmd.current_dir(dir.cwd())
        .env("TMPDIR", dir.tmp())
        // One MiB per thread is plenty for these few events (the default is 32).
        .env("GASP_TRACE_BUFFER", "1")
        .envs(env.iter().copied());
    for inherited in [
        gasp::dispatch::GASP_TOOL,
        gasp::dispatch::GASP_PROFILE_ONLY,
        gasp::dispatch::GASP_EXCLUDE_LOCAL,
        gasp::tools::GASP_OUT,
        gasp::tools::GASP_PARTS,
        gex::job::UPCXX_RANK,
        gex::job::UPCXX_RANKS,
        FAIL_RANK,
    ] {
        if !env.iter().any(|(k, _)| *k == inherited) {
            cmd.env_remove(inherited);
        }
    }
    let out = cmd
        .args(["-n", &ranks.to_string(), "--timeout", "60"])
        .args(tool_args)
        .arg(exe)
        .args([
            "rank_program",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .output()
        .expect("start upcxx-run");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let name = e.expect("a directory entry").file_name();
            name.to_string_lossy().into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Fails unless the launcher's directory holds exactly `files` and its temporary
/// directory nothing, and every rank's parts directory is gone.
fn assert_left_only(dir: &TempDir, run: &Run, files: &[&str]) {
    assert_eq!(entries(&dir.cwd()), files, "{run}");
    assert_eq!(entries(&dir.tmp()), Vec::<String>::new(), "{run}");
    for parts in run.parts_dirs() {
        assert!(
            parts.starts_with(dir.tmp()),
            "parts in {} instead of the launcher's temporary directory: {run}",
            parts.display()
        );
        assert!(!parts.exists(), "{} was left behind", parts.display());
    }
}

fn load_profile(path: &Path) -> Profile {
    match gasp::report::load(path) {
        Ok(Loaded::Profile(p)) => p,
        Ok(Loaded::Trace(_)) => panic!("{}: a trace, not a profile", path.display()),
        Err(e) => panic!("{e}"),
    }
}

/// The rows of `name` on `rank`.
fn rows<'a>(
    profile: &'a Profile,
    rank: u32,
    name: &'a str,
) -> impl Iterator<Item = &'a gasp::formats::ProfileRow> {
    profile
        .events
        .iter()
        .filter(move |r| r.rank == rank && r.name == name)
}

/// Fails unless `profile` holds every rank's events, as `rank_program` reports them.
fn assert_rows_of_every_rank(profile: &Profile, ranks: u32) {
    assert_eq!(profile.tool, PROFILE_TOOL);
    assert_eq!(profile.ranks, ranks);
    assert_eq!(profile.rank_time_ns.len(), ranks as usize);
    for rank in 0..ranks {
        let user: u64 = rows(profile, rank, USER_EVENT).map(|r| r.count).sum();
        assert_eq!(user, u64::from(rank) + 1, "{USER_EVENT} on rank {rank}");
        let early: u64 = rows(profile, rank, EARLY_EVENT).map(|r| r.count).sum();
        assert_eq!(early, 1, "{EARLY_EVENT} on rank {rank}");
        let put: Vec<_> = rows(profile, rank, PUT).collect();
        assert_eq!(put.len(), 1, "{PUT} on rank {rank}: {put:?}");
        assert_eq!((put[0].count, put[0].bytes), (1, PUT_BYTES as u64));
    }
}

#[test]
fn profile_is_written_to_upcxx_profile_json_and_summarized() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("profile");
    let run = launch(&dir, 3, &["--profile"], &[]);
    run.assert_success();
    assert_left_only(&dir, &run, &["upcxx-profile.json"]);
    let profile = load_profile(&dir.cwd().join("upcxx-profile.json"));
    assert_rows_of_every_rank(&profile, 3);
    for rank in 0..3 {
        assert_eq!(rows(&profile, rank, GET).count(), 1, "{GET} on rank {rank}");
        // Each rank's row of the matrix comes from its own part.
        let next = ((rank + 1) % 3) as usize;
        let row = rank as usize;
        assert!(
            profile.matrix.bytes[row][next] >= (PUT_BYTES + GET_BYTES) as u64,
            "{:?}",
            profile.matrix
        );
    }
    // The summary table, then where the file is.
    let stderr = &run.stderr;
    assert!(stderr.contains(": 3 ranks, run time "), "{run}");
    let table = stderr
        .find("operation kinds by total time")
        .expect("the summary table");
    let header = stderr[table..].find("\nkind ").expect("the table's header");
    let user = stderr[table..]
        .find(USER_EVENT)
        .expect("a row of the user event");
    assert!(header < user, "{run}");
    assert!(
        stderr
            .lines()
            .any(|l| l == "upcxx-run: profile written to upcxx-profile.json"),
        "{run}"
    );
}

#[test]
fn profile_with_a_file_name_writes_only_that_file() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("profile-named");
    let run = launch(&dir, 2, &["--profile=my-profile.json"], &[]);
    run.assert_success();
    assert_left_only(&dir, &run, &["my-profile.json"]);
    assert_rows_of_every_rank(&load_profile(&dir.cwd().join("my-profile.json")), 2);
    assert!(
        run.stderr
            .contains("upcxx-run: profile written to my-profile.json"),
        "{run}"
    );
}

#[test]
fn trace_is_written_to_upcxx_trace_json_with_events_of_every_rank() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("trace");
    let run = launch(&dir, 3, &["--trace"], &[]);
    run.assert_success();
    assert_left_only(&dir, &run, &["upcxx-trace.json"]);
    let path = dir.cwd().join("upcxx-trace.json");
    let text = std::fs::read_to_string(&path).expect("the trace");
    assert!(text.contains(r#""traceEvents":["#), "{text:.200}");
    let trace = match gasp::report::load(&path) {
        Ok(Loaded::Trace(t)) => t,
        Ok(Loaded::Profile(_)) => panic!("a profile, not a trace"),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(trace.other_data.tool, TRACE_TOOL);
    assert_eq!(trace.other_data.ranks, 3);
    assert!(trace.trace_events.iter().all(|e| e.pid < 3));
    for rank in 0..3 {
        let of_rank = |name: &str| {
            trace
                .trace_events
                .iter()
                .filter(|e| e.pid == rank && e.ph != "M" && e.name == name)
                .count()
        };
        assert_eq!(of_rank(USER_EVENT), rank as usize + 1, "rank {rank}");
        assert_eq!(of_rank(PUT), 1, "rank {rank}");
    }
    let written = format!(
        "upcxx-run: trace of {} events written to upcxx-trace.json",
        trace.trace_events.len()
    );
    assert!(run.stderr.contains(&written), "{run}");
}

#[test]
fn profile_only_keeps_the_listed_event_and_user_events() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("profile-only");
    std::fs::write(dir.cwd().join("only.txt"), format!("{PUT}\n")).expect("write the list");
    let run = launch(&dir, 2, &["--profile", "--profile-only", "only.txt"], &[]);
    run.assert_success();
    assert_left_only(&dir, &run, &["only.txt", "upcxx-profile.json"]);
    let profile = load_profile(&dir.cwd().join("upcxx-profile.json"));
    // User events are never filtered (GASP §3.1.3).
    assert_rows_of_every_rank(&profile, 2);
    let others: Vec<&str> = profile
        .events
        .iter()
        .map(|r| r.name.as_str())
        .filter(|&n| n != PUT && n != USER_EVENT && n != EARLY_EVENT)
        .collect();
    assert_eq!(others, Vec::<&str>::new(), "not in the list");
}

#[test]
fn a_missing_profile_only_list_is_named_and_runs_nothing() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("profile-only-missing");
    let run = launch(
        &dir,
        2,
        &["--profile", "--profile-only", "missing.txt"],
        &[],
    );
    assert_eq!(run.code, Some(2), "{run}");
    assert!(
        run.stderr.contains("--profile-only") && run.stderr.contains("missing.txt"),
        "{run}"
    );
    assert!(run.parts_dirs().is_empty(), "a rank ran: {run}");
    assert_left_only(&dir, &run, &[]);
}

/// A job that cannot start reports why, and nothing about the tool's output (there is
/// none to merge), and leaves nothing behind.
#[test]
fn a_job_that_cannot_start_reports_only_that() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    let dir = TempDir::new("cannot-start");
    let missing = dir.0.join("no-such-program");
    for tool in ["--profile", "--trace"] {
        let run = launch_program(&dir, 2, &[tool], &[], &missing);
        assert_ne!(run.code, Some(0), "{run}");
        assert!(run.stderr.contains("cannot start rank 0 of 2"), "{run}");
        assert!(
            !run.stderr.contains("no profile data") && !run.stderr.contains("no trace data"),
            "a tool's complaint about a job that never ran: {run}"
        );
        assert_left_only(&dir, &run, &[]);
    }
}

#[test]
fn tool_runs_leave_no_parts_or_temporary_files() {
    if gex::testing::skip_unless_smp(SMP_LAUNCHER) {
        return;
    }
    for (tool, file) in [
        ("--profile", "upcxx-profile.json"),
        ("--trace", "upcxx-trace.json"),
    ] {
        let dir = TempDir::new(&format!("clean{tool}"));
        let run = launch(&dir, 2, &[tool], &[]);
        run.assert_success();
        assert_eq!(run.parts_dirs().len(), 2, "every rank reports: {run}");
        assert_left_only(&dir, &run, &[file]);
    }
    // The parts are removed whatever happened to the job.
    let dir = TempDir::new("clean-failed");
    let run = launch(&dir, 2, &["--profile"], &[(FAIL_RANK, "1")]);
    assert_eq!(run.code, Some(3), "{run}");
    assert_left_only(&dir, &run, &["upcxx-profile.json"]);
}
