//! Helpers shared by the multi-rank integration tests (`mod common;` in each file).
#![allow(dead_code)]

pub(crate) mod am;
pub(crate) mod coll;
pub(crate) mod vis;

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

use gex::Team;

thread_local! {
    static EXPECTING: Cell<u32> = const { Cell::new(0) };
}

/// Keeps panics that a test expects (inside [`expect_panic`]) off stderr. Call at the
/// start of a rank body, before `Client::init`, so that the library's hook wraps it.
pub(crate) fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if EXPECTING.with(|e| e.get()) == 0 {
                previous(info);
            }
        }));
    });
}

/// The message of a panic payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Runs `f`, which must panic; returns the panic message.
#[track_caller]
pub(crate) fn panic_message<R>(f: impl FnOnce() -> R) -> String {
    EXPECTING.with(|e| e.set(e.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    EXPECTING.with(|e| e.set(e.get() - 1));
    match r {
        Ok(_) => panic!("expected a panic, but the call returned"),
        Err(p) => panic_text(&*p),
    }
}

/// Runs `f`, which must panic with a message containing every one of `needles`.
#[track_caller]
pub(crate) fn expect_panic<R>(needles: &[&str], f: impl FnOnce() -> R) -> String {
    let msg = panic_message(f);
    for n in needles {
        assert!(
            msg.contains(n),
            "panic message {msg:?} does not contain {n:?}"
        );
    }
    msg
}

/// Like [`panic_message`] but returns `None` instead of failing when `f` returns
/// (for use inside handlers, where the result is recorded and checked later).
pub(crate) fn try_panic_message<R>(f: impl FnOnce() -> R) -> Option<String> {
    EXPECTING.with(|e| e.set(e.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    EXPECTING.with(|e| e.set(e.get() - 1));
    r.err().map(|p| panic_text(&*p))
}

/// True in the test process, false inside a rank of an spmd job.
pub(crate) fn in_test_process() -> bool {
    std::env::var_os(gex::testing::GEX_SPMD_TEST).is_none()
}

/// Base address (in its owner's address space) of every rank's segment.
pub(crate) fn segment_bases(team: &Team) -> Vec<usize> {
    (0..team.size())
        .map(|r| team.segment_bound(r).expect("segment attached").owner_addr)
        .collect()
}

/// Reads a u64 in this rank's own memory with a volatile load.
///
/// # Safety
/// `addr` must be a valid, aligned address of this process.
pub(crate) unsafe fn read_u64(addr: usize) -> u64 {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: the caller guarantees that `addr` is a valid, aligned address.
    unsafe { std::ptr::read_volatile(addr as *const u64) }
}

/// A deterministic byte pattern (a xorshift stream, 8 bytes per step).
pub(crate) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A path under the system temp dir that no other call in this process returns.
fn unique_temp_path(tag: &str) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "gex-it-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// Environment variable through which a test tells its ranks where to record pids.
pub(crate) const PID_DIR_VAR: &str = "GEX_TEST_PID_DIR";

/// A fresh directory for ranks' pid files, created only in the test process.
pub(crate) struct PidDir(pub PathBuf);

impl PidDir {
    pub(crate) fn new(tag: &str) -> PidDir {
        let dir = unique_temp_path(tag);
        if in_test_process() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create pid dir");
        }
        PidDir(dir)
    }

    pub(crate) fn env(&self) -> (String, String) {
        (
            PID_DIR_VAR.to_owned(),
            self.0.to_string_lossy().into_owned(),
        )
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&self.0) {
            for e in rd.flatten() {
                if let Ok(s) = std::fs::read_to_string(e.path()) {
                    if let Ok(p) = s.trim().parse() {
                        v.push(p);
                    }
                }
            }
        }
        v
    }

    /// Asserts that `n` ranks recorded a pid and that none of them is still alive.
    #[track_caller]
    pub(crate) fn assert_all_gone(&self, n: usize) {
        let pids = self.pids();
        assert_eq!(
            pids.len(),
            n,
            "expected {n} ranks to record their pids, got {pids:?}"
        );
        let exe = std::env::current_exe().expect("current exe");
        for pid in pids {
            let proc_dir = PathBuf::from(format!("/proc/{pid}"));
            if !proc_dir.exists() {
                continue;
            }
            // The pid may have been reused by an unrelated process; only a live process
            // running this test binary counts as a survivor.
            let same_exe = std::fs::read_link(proc_dir.join("exe")).is_ok_and(|p| p == exe);
            let zombie = std::fs::read_to_string(proc_dir.join("stat"))
                .map(|s| {
                    s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(true);
            assert!(!same_exe || zombie, "rank process {pid} survived its job");
        }
    }
}

impl Drop for PidDir {
    fn drop(&mut self) {
        if in_test_process() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// In a rank: records this process's pid as `<PID_DIR>/<rank>`.
pub(crate) fn record_pid(rank: u32) {
    if let Some(dir) = std::env::var_os(PID_DIR_VAR) {
        std::fs::write(
            Path::new(&dir).join(rank.to_string()),
            std::process::id().to_string(),
        )
        .expect("write pid file");
    }
}

/// Polls until `done()` holds; fails naming `what` after `secs` seconds.
#[track_caller]
pub(crate) fn poll_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        gex::poll();
    }
}

/// Errors found inside handlers, checked by the rank afterwards (a failing assertion
/// inside a handler would only surface as a panic out of some later poll).
pub(crate) struct Errors(std::sync::Mutex<Vec<String>>);

impl Errors {
    pub(crate) const fn new() -> Errors {
        Errors(std::sync::Mutex::new(Vec::new()))
    }

    pub(crate) fn check(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if v.len() < 20 {
                v.push(what());
            }
        }
    }

    #[track_caller]
    pub(crate) fn assert_none(&self) {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        assert!(v.is_empty(), "errors seen in handlers:\n{}", v.join("\n"));
    }
}

/// A fresh empty directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let dir = unique_temp_path(tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Blocks this thread for good (a rank that waits to be stopped).
pub(crate) fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
