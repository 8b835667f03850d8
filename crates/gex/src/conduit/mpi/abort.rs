//! The end of a rank that dies before `MPI_Finalize`.
//!
//! **A rank that dies takes the job down.** Whatever ends a rank before
//! `MPI_Finalize` (an MPI error, a fatal check, a panic that ends the program, a
//! non-zero [`crate::exit`], or returning from `main` without finalizing) prints
//! `gex: rank R failed: WHY` on stderr and calls `MPI_Abort`, so `mpirun` kills every
//! rank at once and exits non-zero naming the rank, instead of the others waiting for
//! it. The exits the library does not see (`main` returning, a panic unwinding out of
//! `main`, `std::process::exit`) reach [`abort_job`] through an `atexit` handler
//! registered right after `MPI_Init`, with the message of the last failure the rank
//! recorded ([`record_failure`]: the panic hook records every panic, and only the
//! message printed at the end says it was fatal). A rank killed by a signal is
//! `mpirun`'s to notice; it ends the job the same way. `MPI_Abort` is called without
//! the conduit's lock: the rank is dying, and waiting for a lock held by another of
//! its threads could hang it. Before aborting the rank pauses for [`FORWARD_PAUSE`]:
//! `mpirun` forwards the ranks' output, and an abort can overtake the line that says
//! why. When [`GEX_MPI_FAILURE_DIR`] is set (the mpi mode of `gex::testing`), the
//! message also goes to the file `failed-R` there, where a launcher finds it however
//! `mpirun` treats the output (the smp conduit records it in the job region instead).
//!
//! One end before `MPI_Finalize` is not a failure: a rank leaving through
//! `gex::exit(0)` whose job the other ranks did not end in time aborts it with status
//! 0 ([`end_job_zero`], from `finalize`); a failure another of its threads meets
//! meanwhile does not report or abort again.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

use ::mpi::ffi;

/// Environment variable naming a directory where a failing rank writes why, to
/// `failed-RANK` (see the module docs).
pub(crate) const GEX_MPI_FAILURE_DIR: &str = "GEX_MPI_FAILURE_DIR";
/// How long a failing rank waits between printing why and aborting.
const FORWARD_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// This rank's number in `MPI_COMM_WORLD`, once known (-1 before).
static WORLD_RANK: AtomicI32 = AtomicI32::new(-1);
/// The last failure this rank recorded.
static FAILURE: Mutex<Option<String>> = Mutex::new(None);
/// Set when this rank ends the job with status 0 ([`end_job_zero`]): no failure to
/// report at exit.
static ENDING_ZERO: AtomicBool = AtomicBool::new(false);

/// Whether MPI is initialized and not yet finalized in this process.
fn mpi_live() -> bool {
    let (mut init, mut fin) = (0, 0);
    // SAFETY: both calls are valid at any time, with valid out-pointers.
    unsafe {
        ffi::MPI_Initialized(&mut init);
        ffi::MPI_Finalized(&mut fin);
    }
    init != 0 && fin == 0
}

/// This rank's number for messages: from MPI once known, else from the launcher's
/// environment, else `?`.
fn rank_text() -> String {
    match WORLD_RANK.load(Ordering::Relaxed) {
        r if r >= 0 => r.to_string(),
        _ => ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .unwrap_or_else(|| "?".to_owned()),
    }
}

/// Remembers why this rank may be about to die (see the module docs).
pub(super) fn record_failure(message: &str) {
    let mut f = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    *f = Some(message.to_owned());
}

/// Called once MPI is initialized and the rank is known: from now on an exit before
/// `MPI_Finalize` aborts the job.
pub(super) fn abort_at_exit(rank: c_int) {
    extern "C" fn at_exit() {
        if !ENDING_ZERO.load(Ordering::Acquire) {
            abort_job(1);
        }
    }
    WORLD_RANK.store(rank, Ordering::Relaxed);
    // SAFETY: registers a plain function; it runs at most once, at exit.
    if unsafe { libc::atexit(at_exit) } != 0 {
        fatal("cannot register the exit handler (atexit)");
    }
}

/// If MPI is live (initialized, not finalized), prints why this rank fails (the last
/// recorded failure, else "exited before finalize") and aborts the job with `code`
/// (the exit status `mpirun` reports); otherwise returns.
pub(crate) fn abort_job(code: i32) {
    if !mpi_live() {
        return;
    }
    if ENDING_ZERO.load(Ordering::Acquire) {
        // This rank is ending the job with status 0 on another thread: its abort is
        // under way, and this thread's would race it (and change the status).
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    let why = FAILURE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| "exited before finalize".to_owned());
    let rank = rank_text();
    if let Some(dir) = std::env::var_os(GEX_MPI_FAILURE_DIR) {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("failed-{rank}")),
            &why,
        );
    }
    say(&format!("gex: rank {rank} failed: {why}"));
    std::thread::sleep(FORWARD_PAUSE);
    // SAFETY: MPI is live; aborting is valid from any state then.
    unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code) };
}

/// Marks this rank as ending the job with status 0 ([`end_job_zero`]), before it
/// releases the conduit's lock: from then on a failure on another thread does not
/// abort with another status.
pub(crate) fn ending_zero() {
    ENDING_ZERO.store(true, Ordering::Release);
}

/// Ends the job with status 0 after a `gex::exit(0)` that the other ranks did not
/// follow in time (`finalize`, which called [`ending_zero`] first): prints `line`,
/// pauses as a failing rank does, and aborts with 0, which `mpirun` exits with.
/// Called without the conduit's lock.
pub(crate) fn end_job_zero(line: &str) -> ! {
    ending_zero();
    say(line);
    std::thread::sleep(FORWARD_PAUSE);
    // SAFETY: MPI is live (this rank has not finalized it); aborting is valid then.
    unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 0) };
    std::process::exit(0)
}

/// Ends the job: prints `gex: rank R failed: MSG` and aborts (or exits, before
/// `MPI_Init`).
pub(crate) fn fatal(msg: &str) -> ! {
    record_failure(msg);
    abort_job(1);
    say(&format!("gex: rank {} failed: {msg}", rank_text()));
    std::process::exit(1)
}

/// Prints `line` to standard error in one write: `mpirun` forwards every rank's output
/// to one stream, and `eprintln!` on unbuffered stderr writes each formatted piece on
/// its own, so lines of ranks failing together could interleave mid-line.
pub(crate) fn say(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}
