//! What several integration tests share (`mod common;` in each; `mod.rs`, not
//! `common.rs`, so that cargo does not take it for a test of its own).
//!
//! [`Limited`]: a child process the test waits for only so long, killing it past that
//! (and when the test lets go of it, panicking or not), so that a job that does not end
//! fails its test instead of hanging the suite. [`built`]: a program of this build (the
//! launcher, an example). [`am_paths`]: the mpi conduit's report of its AM paths.
// Each test uses what it needs of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::mpsc;
use std::time::Duration;

/// How long [`Limited::output_within`] waits for the output of a killed process: its
/// pipes stay open while a process it started still holds them.
const GRACE: Duration = Duration::from_secs(5);

/// `target/<profile>/` joined with `path` (`["upcxx-run"]`, `["examples", "dht"]`),
/// which must exist; `how` says how to build it.
pub(crate) fn built(path: &[&str], how: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let path: PathBuf = path.iter().fold(dir.to_path_buf(), |p, c| p.join(c));
    assert!(
        path.exists(),
        "{} was not built: run `{how}` first",
        path.display()
    );
    path
}

/// Per rank, the AMs it handled from its host queues and over MPI, and the MPI messages
/// that carried the latter, as the mpi conduit reports them under `GEX_MPI_STATS=1`,
/// in rank order.
pub(crate) fn am_paths(stderr: &str) -> Vec<(u32, u64, u64, u64)> {
    let mut paths: Vec<(u32, u64, u64, u64)> = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("gex: rank ").nth(1)?;
            let (rank, rest) = rest.split_once(": AMs handled: ")?;
            let (host, rest) = rest.split_once(" from the host queues, ")?;
            let (net, rest) = rest.split_once(" over MPI in ")?;
            let messages = rest.strip_suffix(" messages")?;
            Some((
                rank.parse().ok()?,
                host.parse().ok()?,
                net.parse().ok()?,
                messages.parse().ok()?,
            ))
        })
        .collect();
    paths.sort_unstable();
    paths
}

/// A child process, killed when dropped unless it ended.
pub(crate) struct Limited {
    child: Option<Child>,
    what: String,
}

impl Limited {
    /// Starts `cmd` (its standard streams as the caller set them); `what` names it in
    /// failures.
    pub(crate) fn spawn(cmd: &mut Command, what: impl Into<String>) -> Limited {
        let what = what.into();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        Limited {
            child: Some(child),
            what,
        }
    }

    /// The process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.as_ref().expect("not yet waited for").id()
    }

    /// Waits at most `limit` for the process to end and returns its output (the
    /// streams the caller piped). Past `limit`, kills the processes `also_kill` (for
    /// instance the ranks of a launcher, which would otherwise hold its output open)
    /// and the process itself, with `SIGKILL`, and returns a failure that holds what
    /// it printed.
    pub(crate) fn output_within(
        mut self,
        limit: Duration,
        also_kill: &[u32],
    ) -> Result<Output, String> {
        let child = self.child.take().expect("waited for once");
        let pid = child.id();
        // Waits on a thread, so that a process that does not end is killed, not
        // waited for.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        if let Ok(out) = rx.recv_timeout(limit) {
            return Ok(out.unwrap_or_else(|e| panic!("{}: cannot wait: {e}", self.what)));
        }
        for &p in also_kill.iter().chain([&pid]) {
            // SAFETY: a plain signal. `pid` is our child, not yet reaped (the thread
            // still waits for it), so its id is not reused; the others are processes
            // of the caller's job.
            unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
        }
        let printed = match rx.recv_timeout(GRACE) {
            Ok(Ok(out)) => format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            _ => "(its output is still held open)".to_owned(),
        };
        Err(format!(
            "{}: still running after {limit:?}, killed\n{printed}",
            self.what
        ))
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
