//! Multi-rank tests inside `cargo test` (and `cargo nextest run`).
//!
//! ```no_run
//! #[test]
//! fn ranks_see_each_other() {
//!     gex::testing::spmd(4, || {
//!         // Runs in each of 4 rank processes.
//!         let (rank, ranks) = gex::testing::launcher_rank().unwrap();
//!         assert!(rank < ranks);
//!     });
//! }
//! ```
//!
//! (Compiled but not run as a doctest: [`spmd`] re-runs the current test binary filtered
//! to the current test, and a doctest is not a libtest binary.)
//!
//! # How it works
//!
//! [`spmd`] called in the test process runs the *current test binary* as an N-rank job
//! ([`crate::job::run`]), filtered to the current test:
//! `<test binary> <test name> --exact --nocapture --test-threads=1 -q`, with
//! `GEX_SPMD_TEST=<test name>` in the environment. In each rank the same test function
//! runs again and reaches the same `spmd` call, which sees `GEX_SPMD_TEST` and runs
//! `body` instead of launching. The test process waits for the job and panics with the
//! launcher's report (which rank failed and how) if any rank fails or the job runs past
//! its time limit.
//!
//! Consequences for test authors:
//! - Code of the test function *before* the `spmd` call runs in every rank too; keep it
//!   free of side effects. A rank process exits as soon as its body returns (status 0)
//!   or panics (status 101, the panic recorded for the report), so code after the call
//!   runs only in the test process.
//! - Several `spmd` calls in one test are allowed: they are numbered in call order
//!   (`GEX_SPMD_CALL`), and a rank runs only the body of the call that launched it.
//! - Each rank reports back that it ran the body (a marker file in a temporary
//!   directory), so a test that libtest filtered out in the ranks fails instead of
//!   passing vacuously.
//! - A panic escaping `body` in a rank is recorded in the job region (as the smp
//!   conduit does for fatal errors), so the report says where it panicked.
//!
//! # Finding the current test's name
//!
//! libtest runs every test on a thread named after the test's path within the crate
//! (e.g. `rma::put_get`), both with several test threads and with `--test-threads=1`,
//! and `cargo nextest run` runs each test in its own process through the same libtest
//! entry point (`<name> --exact --nocapture`), so the thread is named the same way. This
//! name is exactly what `--exact` matches. `spmd` must therefore be called on the test's
//! own thread, not on a thread the test spawned. If the thread name is missing or
//! `main` (a custom harness; libtest's `panic=abort` subprocess mode, where the name is
//! taken from `__RUST_TEST_INVOKE` instead), set [`SpmdOptions::test_name`].
//!
//! Rank output is not captured: each rank prints libtest's short "running 1 test"
//! banner, then whatever the body prints; the rank's harness never prints a result line
//! (the rank exits first), so the only test results in the output are the real ones.
//!
//! # The conduit: smp or mpi
//!
//! [`GEX_TEST_CONDUIT`] chooses how the job starts: `smp` (the default) through
//! [`crate::job::run`], `mpi` through `mpirun` (in a build with gex's feature `mpi`; see
//! `testing/mpirun.rs`), so that the same tests run over the mpi conduit:
//! `GEX_TEST_CONDUIT=mpi cargo test --workspace --features pgas/mpi`. The launcher
//! command is `GEX_MPIRUN` (a command prefix split on whitespace) or `mpirun
//! --oversubscribe`; the conduit's settings (`GEX_MPI_HOST_RANKS`, `GEX_MPI_THREAD`,
//! `GEX_MPI_STATS`) reach the ranks when set. Every
//! [`SpmdOptions`] field applies in both modes. Differences a test can see: a rank
//! under `mpirun` has no `UPCXX_RANK` (use [`launcher_rank`]) and no job region, its
//! output is `mpirun`'s (each line tagged with its rank, shown with the test's output),
//! and a failure report is built from what the ranks and `mpirun` printed (it names the
//! rank and quotes its output, see [`JobOutcome::failure`]). A test about the smp
//! conduit or its launcher themselves starts with [`skip_unless_smp`], one about a
//! single host (every segment mapped) with [`skip_unless_one_host`].

use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::job::{self, InheritedRegion, JobOutcome, JobSpec};

mod mpirun;

/// Environment variable naming the test a rank process runs the body of.
pub const GEX_SPMD_TEST: &str = "GEX_SPMD_TEST";
/// Environment variable numbering the `spmd` call (0, 1, ...) within the test whose body
/// a rank process runs.
pub const GEX_SPMD_CALL: &str = "GEX_SPMD_CALL";
/// Environment variable naming the directory in which each rank records that it ran the
/// body.
pub const GEX_SPMD_DONE_DIR: &str = "GEX_SPMD_DONE_DIR";
/// Environment variable overriding the default time limit of an spmd job, in seconds.
pub const GEX_TEST_TIMEOUT: &str = "GEX_TEST_TIMEOUT";
/// Default time limit of an spmd job.
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Environment variable choosing the conduit of spmd jobs: `smp` (the default) or
/// `mpi` (see the [module documentation](self)).
pub const GEX_TEST_CONDUIT: &str = "GEX_TEST_CONDUIT";

/// The conduit spmd jobs run on ([`GEX_TEST_CONDUIT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestConduit {
    /// Started by [`crate::job::run`], communicating through the job's shared region.
    Smp,
    /// Started by `mpirun`, communicating through MPI.
    Mpi,
}

/// The conduit spmd jobs run on, from [`GEX_TEST_CONDUIT`].
///
/// # Panics
/// If the variable is neither `smp` nor `mpi`, or is `mpi` in a build without gex's
/// feature `mpi`.
pub fn test_conduit() -> TestConduit {
    match std::env::var(GEX_TEST_CONDUIT).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("smp") | Ok("") => TestConduit::Smp,
        Ok("mpi") if cfg!(feature = "mpi") => TestConduit::Mpi,
        Ok("mpi") => panic!(
            "{GEX_TEST_CONDUIT}=mpi: gex was built without its feature `mpi` (build the \
             tests with --features pgas/mpi, or gex/mpi)"
        ),
        Ok(v) => panic!("{GEX_TEST_CONDUIT}={v:?}: expected smp or mpi"),
        Err(e) => panic!("{GEX_TEST_CONDUIT}: {e}"),
    }
}

/// Whether the current test should be skipped because spmd jobs run over the mpi
/// conduit while the test is about the smp conduit or its launcher (`why` says what
/// it needs). A skipped test says so on stderr, past libtest's capture, naming itself:
///
/// ```no_run
/// #[test]
/// fn the_region_is_a_memfd() {
///     if gex::testing::skip_unless_smp("the smp job region") {
///         return;
///     }
///     // ...
/// }
/// ```
///
/// # Panics
/// As [`test_conduit`].
pub fn skip_unless_smp(why: &str) -> bool {
    if test_conduit() == TestConduit::Smp {
        return false;
    }
    skipped(&format!("{GEX_TEST_CONDUIT}=mpi"), why);
    true
}

/// Whether the current test should be skipped because the ranks of its spmd jobs may
/// be on several hosts ([`placement`] is not [`Placement::OneHost`]) while the test is
/// about one host (every rank's segment mapped, one neighbourhood; `why` says what it
/// needs). Said on stderr as by [`skip_unless_smp`]. A test that can check something
/// on every placement compares with the real one (`gex::nbrhd_info`,
/// `Team::segment_bound`) instead.
///
/// # Panics
/// As [`test_conduit`].
pub fn skip_unless_one_host(why: &str) -> bool {
    let cause = match placement() {
        Placement::OneHost => return false,
        Placement::Blocks(_) => job::mpirun::GEX_MPI_HOST_RANKS,
        Placement::Unknown => job::mpirun::GEX_MPIRUN,
    };
    skipped(&format!("{GEX_TEST_CONDUIT}=mpi with {cause} set"), why);
    true
}

/// Whether the current test should be skipped because a put to a rank that does not
/// poll might not land until it does, while the test signals such ranks by RMA (`why`
/// says what for). Said on stderr as by [`skip_unless_smp`].
///
/// Under the mpi conduit a put to another host needs the target's progress: a small
/// one travels as Active Messages that the owner handles when it polls
/// (`GEX_MPI_AM_RMA_MAX`), and a larger one, between hosts joined by TCP alone, is
/// served by Open MPI's `osc pt2pt`, which applies it when the target enters MPI (see
/// the conduit's "RMA between hosts needs the target's progress"). So the test runs
/// only where every rank is on this host (the smp conduit; the default `mpirun`
/// without a host cap), where shared memory carries the puts and they land at once.
///
/// # Panics
/// As [`test_conduit`].
pub fn skip_where_rma_needs_progress(why: &str) -> bool {
    let placement = placement();
    if placement == Placement::OneHost {
        return false;
    }
    skipped(
        &format!("{GEX_TEST_CONDUIT}=mpi with ranks on several hosts ({placement:?})"),
        why,
    );
    true
}

/// How the ranks of a job share hosts, as far as this process can tell before starting
/// it ([`placement`], [`mpi_placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Every rank on this host, sharing memory with every other.
    OneHost,
    /// Hosts of `k` consecutive ranks (the mpi conduit's `GEX_MPI_HOST_RANKS=k`), the
    /// last one possibly smaller; one host when the job has at most `k` ranks.
    Blocks(usize),
    /// Wherever the launcher puts them.
    Unknown,
}

impl Placement {
    /// The host of `rank` in a job of `ranks` ranks and the number of hosts (hosts
    /// numbered by their lowest rank), where known.
    pub fn host_of(self, rank: usize, ranks: usize) -> Option<(usize, usize)> {
        match self {
            Placement::OneHost => Some((0, 1)),
            Placement::Blocks(k) => Some((rank / k, ranks.div_ceil(k))),
            Placement::Unknown => None,
        }
    }
}

/// The placement of the ranks of spmd jobs: on this host under the smp conduit, else
/// [`mpi_placement`].
///
/// # Panics
/// As [`test_conduit`].
pub fn placement() -> Placement {
    match test_conduit() {
        TestConduit::Smp => Placement::OneHost,
        TestConduit::Mpi => mpi_placement(),
    }
}

/// The placement of the ranks of a job started through `mpirun`
/// ([`crate::job::mpirun::command`]): a launcher of one's own (`GEX_MPIRUN`, as
/// `scripts/multihost.sh` sets) may spread them over hosts and this process cannot see
/// where, so [`Placement::Unknown`]; else the default `mpirun` runs them on this host,
/// cut into hosts of `k` ranks by `GEX_MPI_HOST_RANKS=k`.
///
/// # Panics
/// If `GEX_MPI_HOST_RANKS` is not a positive number.
pub fn mpi_placement() -> Placement {
    if std::env::var_os(job::mpirun::GEX_MPIRUN).is_some() {
        return Placement::Unknown;
    }
    match std::env::var(job::mpirun::GEX_MPI_HOST_RANKS) {
        Err(_) => Placement::OneHost,
        Ok(k) => match k.parse::<usize>() {
            Ok(k) if k > 0 => Placement::Blocks(k),
            _ => panic!(
                "{}={k:?} is not a positive number of ranks",
                job::mpirun::GEX_MPI_HOST_RANKS
            ),
        },
    }
}

/// The largest put or get to a segment not mapped here that gex sends as Active
/// Messages to its owner: the mpi conduit's `GEX_MPI_AM_RMA_MAX` or its default (also
/// with every rank on one host, where no segment is out of reach), or for a `blocking`
/// transfer the threshold it measured when the segments were attached, if it did; 0
/// under the smp conduit.
///
/// # Panics
/// Before `gex::Client::init`.
pub fn am_rma_max(blocking: bool) -> usize {
    use crate::conduit::Conduit as _;
    let conduit = &crate::runtime::runtime("gex::testing::am_rma_max").conduit;
    if blocking {
        conduit.am_rma_blocking_max()
    } else {
        conduit.am_rma_max()
    }
}

/// Sets this rank's threshold of blocking transfers to segments not mapped here, as the
/// mpi conduit's measurement at attach does (see [`am_rma_max`]), for tests of the
/// paths; no effect under the smp conduit.
///
/// # Panics
/// Before `gex::Client::init`.
pub fn set_am_rma_blocking_max(max: usize) {
    use crate::conduit::Conduit as _;
    crate::runtime::runtime("gex::testing::set_am_rma_blocking_max")
        .conduit
        .set_am_rma_blocking_max(max, None);
}

/// The handle by which a GASP tool knows `event`'s operation (GASP §5.4.6): what the
/// END of its initiation and its sync report. `GASP_NB_TRIVIAL` for an operation
/// complete at initiation, else an id that only this process's pending events tell
/// apart, so a test that expects the tool's lines learns it here.
pub fn gasp_handle(event: &crate::Event) -> u64 {
    event.gasp_handle()
}

/// How many Active Messages this rank has handled that came over MPI from other hosts
/// (what the mpi conduit reports under `GEX_MPI_STATS` at finalize); 0 under the smp
/// conduit.
///
/// # Panics
/// Before `gex::Client::init`.
pub fn am_handled_over_mpi() -> u64 {
    use crate::conduit::Conduit as _;
    crate::runtime::runtime("gex::testing::am_handled_over_mpi")
        .conduit
        .am_handled_over_network()
}

/// Says on stderr that the current test is skipped, under `condition`, for want of `why`.
fn skipped(condition: &str, why: &str) {
    use std::io::Write as _;
    let name = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_owned();
    // Straight to the file, not through eprintln!: libtest would capture it.
    let _ = writeln!(
        std::io::stderr(),
        "skipped under {condition}: {name}: {why}"
    );
}

/// This process's rank and the job's size as its launcher gave them (`UPCXX_RANK` and
/// `UPCXX_RANKS` of the smp launcher, or the variables of an MPI launcher: `mpirun`'s,
/// PMI's, or `srun`'s PMIx rank with Slurm's task count); `None` outside a job.
pub fn launcher_rank() -> Option<(usize, usize)> {
    let pairs = [
        (job::UPCXX_RANK, job::UPCXX_RANKS),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("PMIX_RANK", "SLURM_NTASKS"),
    ];
    pairs.iter().find_map(|(rank, size)| {
        let rank = std::env::var(rank).ok()?.parse().ok()?;
        let size = std::env::var(size).ok()?.parse().ok()?;
        Some((rank, size))
    })
}

/// How to run an spmd test body.
#[derive(Debug, Clone)]
pub struct SpmdOptions {
    /// Number of ranks.
    pub ranks: usize,
    /// Segment size per rank in bytes.
    pub segment_size: usize,
    /// Time limit of the job.
    pub timeout: Duration,
    /// Extra environment variables for the ranks.
    pub env: Vec<(String, String)>,
    /// For [`spmd_with`]: the test passes only if the job *fails* (and fails if all
    /// ranks succeed). Ignored by [`spmd_outcome`].
    pub expect_failure: bool,
    /// The libtest name of the current test; `None` to detect it (see the module docs).
    pub test_name: Option<String>,
}

impl SpmdOptions {
    /// Options for `ranks` ranks: segment size from `UPCXX_SEGMENT_SIZE` or the default,
    /// time limit from `GEX_TEST_TIMEOUT` (seconds) or 60 s, no extra environment, the
    /// job expected to succeed.
    ///
    /// # Panics
    /// If `UPCXX_SEGMENT_SIZE` or `GEX_TEST_TIMEOUT` is set to an invalid value.
    pub fn new(ranks: usize) -> SpmdOptions {
        let segment_size = match job::segment_size_from_env() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        SpmdOptions {
            ranks,
            segment_size,
            timeout: timeout_from_env(),
            env: Vec::new(),
            expect_failure: false,
            test_name: None,
        }
    }
}

fn timeout_from_env() -> Duration {
    let Some(v) = std::env::var_os(GEX_TEST_TIMEOUT) else {
        return DEFAULT_TEST_TIMEOUT;
    };
    v.to_str()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or_else(|| panic!("{GEX_TEST_TIMEOUT}={v:?} is not a positive number of seconds"))
}

/// Runs `body` in each of `ranks` processes; fails the test (panics with the launcher's
/// report) if any rank fails or the job takes longer than the time limit.
///
/// See the [module documentation](self).
pub fn spmd(ranks: usize, body: impl FnOnce()) {
    spmd_with(SpmdOptions::new(ranks), body)
}

/// [`spmd`] with options. With `opts.expect_failure`, the test passes only if the job
/// fails.
pub fn spmd_with(opts: SpmdOptions, body: impl FnOnce()) {
    let expect_failure = opts.expect_failure;
    let Some(outcome) = spmd_outcome(opts, body) else {
        return;
    };
    match (outcome.failure, expect_failure) {
        (Some(report), false) => panic!("spmd job failed: {report}"),
        (None, true) => panic!("spmd job was expected to fail, but every rank succeeded"),
        _ => {}
    }
}

/// Runs `body` as an spmd job like [`spmd_with`] but returns how the job ended instead of
/// judging it: `Some(outcome)` in the test process, `None` inside a rank (where `body`
/// has run). For tests that expect a job to fail.
///
/// # Panics
/// If the job cannot be started, or if it succeeded but some rank did not run `body`.
pub fn spmd_outcome(opts: SpmdOptions, body: impl FnOnce()) -> Option<JobOutcome> {
    let name = current_test_name(&opts);
    let call = CALLS.with(|c| {
        let n = c.get();
        c.set(n + 1);
        n
    });
    match std::env::var(GEX_SPMD_TEST) {
        Ok(rank_test) if rank_test == name => {
            run_rank_body(call, body);
            None
        }
        Ok(rank_test) => panic!(
            "spmd: this process is a rank of test '{rank_test}' but spmd was called from \
             '{name}'; call spmd on the test's own thread"
        ),
        Err(_) => Some(launch(&opts, &name, call)),
    }
}

thread_local! {
    /// Number of spmd calls made so far on this (test) thread.
    static CALLS: Cell<usize> = const { Cell::new(0) };
    /// The message of the last panic on this thread, as "panicked at LOCATION: MESSAGE".
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn current_test_name(opts: &SpmdOptions) -> String {
    if let Some(name) = &opts.test_name {
        return name.clone();
    }
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => match std::env::var("__RUST_TEST_INVOKE") {
            Ok(name) => name,
            Err(_) => panic!(
                "spmd: cannot tell which test is running (thread name {:?}); call spmd on \
                 the test's own thread, or set SpmdOptions::test_name",
                std::thread::current().name()
            ),
        },
    }
}

/// In the test process: runs the job and checks that every rank ran the body.
fn launch(opts: &SpmdOptions, name: &str, call: usize) -> JobOutcome {
    let conduit = test_conduit();
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("spmd: cannot find the test executable: {e}"));
    let done_dir = DoneDir::create();
    let mut env: Vec<(OsString, OsString)> =
        opts.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    env.push((GEX_SPMD_TEST.into(), name.into()));
    env.push((GEX_SPMD_CALL.into(), call.to_string().into()));
    env.push((GEX_SPMD_DONE_DIR.into(), done_dir.0.clone().into()));
    let args: Vec<OsString> = [name, "--exact", "--nocapture", "--test-threads=1", "-q"]
        .into_iter()
        .map(OsString::from)
        .collect();
    let spec = JobSpec {
        program: exe,
        args,
        ranks: opts.ranks,
        segment_size: opts.segment_size,
        timeout: Some(opts.timeout),
        env,
        name: name.to_owned(),
        forward_signals: false,
    };
    let outcome = match conduit {
        TestConduit::Smp => job::run(&spec),
        TestConduit::Mpi => job::with_tool(&spec, |spec| Ok(mpirun::run(spec, &done_dir.0))),
    }
    .unwrap_or_else(|e| panic!("spmd: cannot run the job of '{name}': {e}"));
    if outcome.success() {
        let missing: Vec<String> = (0..opts.ranks)
            .filter(|r| !done_dir.0.join(r.to_string()).exists())
            .map(|r| r.to_string())
            .collect();
        if !missing.is_empty() {
            panic!(
                "spmd: ranks {} of '{name}' exited successfully without running the body \
                 (did libtest filter the test out?)",
                missing.join(", ")
            );
        }
    }
    outcome
}

/// A fresh temporary directory, removed on drop.
struct DoneDir(PathBuf);

impl DoneDir {
    fn create() -> DoneDir {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = base.join(format!(
                "gex-spmd-{}-{}-{nanos}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::create_dir(&dir) {
                Ok(()) => return DoneDir(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("spmd: cannot create {}: {e}", dir.display()),
            }
        }
        panic!(
            "spmd: cannot create a temporary directory in {}",
            base.display()
        );
    }
}

impl Drop for DoneDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// In a rank process: runs `body` if this is the call that launched the rank, records
/// an escaping panic in the job region, and reports completion.
fn run_rank_body(call: usize, body: impl FnOnce()) {
    let target: usize = std::env::var(GEX_SPMD_CALL)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if call != target {
        return;
    }
    // Mapped before the body runs: the communication layer may close the descriptor.
    let region = match InheritedRegion::from_env() {
        Ok(r) => r,
        Err(e) => panic!("spmd: {e}"),
    };
    let done_dir = std::env::var_os(GEX_SPMD_DONE_DIR).map(PathBuf::from);
    let rank = region
        .as_ref()
        .map(|r| r.rank())
        .or_else(|| launcher_rank().map(|(r, _)| r))
        .map(|r| r.to_string())
        .unwrap_or_default();
    install_panic_recorder();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    match result {
        Ok(()) => {
            if let Some(dir) = &done_dir {
                let marker = dir.join(&rank);
                if let Err(e) = std::fs::write(&marker, b"") {
                    panic!("spmd: cannot write {}: {e}", marker.display());
                }
            }
            exit_rank(0);
        }
        Err(payload) => {
            let message = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| format!("panicked: {}", payload_text(&*payload)));
            if let Some(region) = &region {
                region.region().record_failure(region.rank(), &message);
            } else if let Some(dir) = &done_dir {
                // For the report of the mpi mode (there is no job region).
                let _ = std::fs::write(mpirun::failure_file(dir, &rank), &message);
            }
            // Under mpirun, with MPI initialized: the whole job ends now.
            #[cfg(feature = "mpi")]
            crate::conduit::mpi::abort_job(101);
            exit_rank(101);
        }
    }
}

/// Ends a rank process right after its body, so that the rank's copy of the test
/// harness prints no result lines of its own: the test process reports the job.
fn exit_rank(code: i32) -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}

/// Chains a panic hook that remembers the last panic message of each thread, so that a
/// panic escaping the body can be recorded with its location.
fn install_panic_recorder() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = match info.location() {
            Some(loc) => format!("panicked at {loc}: {}", payload_text(info.payload())),
            None => format!("panicked: {}", payload_text(info.payload())),
        };
        // `try_with`: the hook may run while thread-locals are being destroyed.
        let _ = LAST_PANIC.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                *p = Some(message);
            }
        });
        previous(info);
    }));
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}
