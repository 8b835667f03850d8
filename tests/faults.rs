//! Injected faults: real workloads run as jobs under the launcher (`upcxx-run`), and a
//! rank is killed, stopped, or the launcher itself is killed, at a random moment.
//!
//! * [`a_killed_rank_ends_the_job`]: 50 runs of the dht, stencil and soak (a loop of
//!   broadcasts, reductions and barriers with RPCs, puts and gets) examples on 2 to 5
//!   ranks; a random rank gets `SIGKILL` at a random moment. Every run must end within
//!   1 s of the kill, with a non-zero status and the dead rank named, no rank process
//!   left, and nothing new in `/dev/shm`.
//! * [`a_stopped_rank_is_ended_by_the_timeout`]: `SIGSTOP` instead, under `--timeout`:
//!   the job ends with status 124 within 1 s of the timeout, the stopped rank killed.
//! * [`a_killed_launcher_takes_its_ranks_down`]: `SIGKILL` to the launcher: every rank
//!   is gone within 1 s.
//! * [`eight_ranks_flood_each_other_without_loss`]: 8 ranks (more than this machine's
//!   cores, usually) flood each other with `rpc_ff` hard enough to keep the 256-slot
//!   queues full; the soak example counts every message (exactly once, by reduction).
//!
//! A full segment heap is `crates/upcxx/tests/alloc.rs` (`exhaustion_is_reported` on
//! one rank, `a_full_heap_on_every_rank_is_an_error_the_job_survives` on three): the
//! program gets `None` (or a panic naming the call), keeps communicating, frees, and
//! allocates again.
//!
//! Randomness comes from `FAULT_SEED` (printed on failure), or the clock.
//!
//! The programs are the examples and the launcher built by `cargo test --workspace`.

mod common;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::built;

/// How the programs these tests start are built: the whole suite builds the examples
/// and the launcher.
const BUILD: &str = "cargo test --workspace";

/// Why the fault tests of the smp launcher skip under `GEX_TEST_CONDUIT=mpi` (the mpi
/// conduit's are `tests/mpi_faults.rs`).
const SMP_FAULTS: &str = "faults of the smp launcher (1 s teardown, its --timeout and reports)";

/// How long after the fault the job must be over.
const WITHIN: Duration = Duration::from_secs(1);
/// Runs of the kill test.
const KILL_RUNS: usize = 50;

/// xorshift64*: the tests' random choices, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("FAULT_SEED={seed}");
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// A job under the launcher.
struct Job {
    launcher: Child,
    ranks: usize,
    what: String,
}

impl Job {
    fn start(ranks: usize, extra: &[&str], program: &str, args: &[&str]) -> Job {
        let mut cmd = Command::new(built(&["upcxx-run"], BUILD));
        cmd.arg("-n")
            .arg(ranks.to_string())
            .args(extra)
            .arg(built(&["examples", program], BUILD))
            .args(args)
            .env_remove("UPCXX_RANKS")
            .env_remove("UPCXX_RANK")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Job {
            launcher: cmd.spawn().expect("upcxx-run starts"),
            ranks,
            what: format!("{program} {args:?} on {ranks} ranks"),
        }
    }

    /// The rank processes (the launcher's children), once all have started, by pid.
    fn rank_pids(&self) -> Vec<u32> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = children(self.launcher.id());
            if pids.len() == self.ranks {
                return pids;
            }
            assert!(Instant::now() < end, "{}: ranks did not start", self.what);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until the launcher exits, at most until `deadline`; its status and error
    /// output, or None (the launcher is then killed).
    fn wait_until(mut self, deadline: Instant) -> Option<(std::process::ExitStatus, String)> {
        loop {
            if let Some(status) = self.launcher.try_wait().expect("wait for upcxx-run") {
                let mut err = String::new();
                use std::io::Read;
                self.launcher
                    .stderr
                    .take()
                    .expect("piped")
                    .read_to_string(&mut err)
                    .expect("read stderr");
                return Some((status, err));
            }
            if Instant::now() >= deadline {
                let _ = self.launcher.kill();
                let _ = self.launcher.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Pids of the processes whose parent is `parent` (from `/proc/*/stat`).
fn children(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let Ok(entry) = entry else { continue };
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            pids.push(pid);
        }
    }
    pids.sort();
    pids
}

/// Whether `pid` is a live process: a zombie is dead (it runs nothing and holds no
/// memory; reaping it is its new parent's business, and in a container `init` may not).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// Waits until none of `pids` exists, at most until `deadline`; those left.
fn wait_gone(pids: &[u32], deadline: Instant) -> Vec<u32> {
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn signal(pid: u32, sig: libc::c_int) -> bool {
    // SAFETY: kill takes a pid and a signal number and touches no memory of ours.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

/// Whether process `pid` has exited (gone, or a zombie not reaped yet).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        // The state follows the command name, which is in parentheses.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The job's objects in `/dev/shm` (there should never be any: the region is a memfd).
fn dev_shm() -> BTreeSet<OsString> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.file_name()))
                .filter(|n| {
                    let n = n.to_string_lossy();
                    n.contains("gex") || n.contains("upcxx")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The rank order of `pid` among the launcher's children: ranks are spawned in order,
/// so the n-th smallest pid is rank n unless pids wrapped; the launcher's message is
/// checked for the rank number it reports, which must be one whose pid was killed.
fn rank_of(pid: u32, pids: &[u32]) -> usize {
    pids.iter().position(|&p| p == pid).expect("a rank pid")
}

#[test]
fn a_killed_rank_ends_the_job() {
    if gex::testing::skip_unless_smp(SMP_FAULTS) {
        return;
    }
    let mut rng = Rng::new();
    let shm_before = dev_shm();
    let workloads: [(&str, &[&str]); 3] = [
        ("dht", &["200000"]),
        ("stencil", &["1000000"]),
        ("soak", &["20"]),
    ];
    let (mut injected, mut attempts) = (0, 0);
    while injected < KILL_RUNS {
        attempts += 1;
        assert!(
            attempts < 4 * KILL_RUNS,
            "too many jobs ended before the kill"
        );
        let (program, args) = workloads[injected % workloads.len()];
        let ranks = 2 + rng.below(4) as usize;
        let job = Job::start(ranks, &[], program, args);
        let what = job.what.clone();
        let pids = job.rank_pids();
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        let victim = pids[rng.below(ranks as u64) as usize];
        let killed_at = Instant::now();
        // A rank that has exited but is not reaped yet still takes the signal.
        if exited(victim) || !signal(victim, libc::SIGKILL) {
            // The job ended first (the kill found no process): not a fault.
            let _ = job.wait_until(Instant::now() + Duration::from_secs(30));
            continue;
        }
        let Some((status, err)) = job.wait_until(killed_at + WITHIN) else {
            panic!("{what}: still running 1 s after rank pid {victim} was killed");
        };
        let ended = killed_at.elapsed();
        assert!(
            !status.success(),
            "{what}: exit status {status} after a kill"
        );
        // The launcher names the rank the kernel killed; ranks are numbered in spawn
        // order, which is pid order here unless pids wrapped around.
        let named =
            (0..ranks).any(|r| err.contains(&format!("rank {r} of {ranks} was killed by SIGKILL")));
        assert!(named, "{what}: the killed rank is not named:\n{err}");
        if pids.windows(2).all(|w| w[0] < w[1]) {
            let r = rank_of(victim, &pids);
            assert!(
                err.contains(&format!("rank {r} of {ranks} was killed by SIGKILL")),
                "{what}: rank {r} was killed:\n{err}"
            );
        }
        let left = wait_gone(&pids, killed_at + WITHIN);
        assert!(left.is_empty(), "{what}: ranks {left:?} outlived the job");
        assert!(ended <= WITHIN, "{what}: ended {ended:?} after the kill");
        injected += 1;
    }
    assert_eq!(dev_shm(), shm_before, "objects left in /dev/shm");
    println!("faults: {injected} ranks killed in {attempts} jobs, every job ended within 1 s");
}

#[test]
fn a_stopped_rank_is_ended_by_the_timeout() {
    if gex::testing::skip_unless_smp(SMP_FAULTS) {
        return;
    }
    let mut rng = Rng::new();
    for ranks in [2, 3, 5] {
        let job = Job::start(ranks, &["--timeout", "2"], "soak", &["30"]);
        let what = job.what.clone();
        let started = Instant::now();
        let pids = job.rank_pids();
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        let victim = pids[rng.below(ranks as u64) as usize];
        assert!(signal(victim, libc::SIGSTOP), "{what}: stop a rank");
        let timeout_at = started + Duration::from_secs(2);
        let Some((status, err)) = job.wait_until(timeout_at + WITHIN) else {
            signal(victim, libc::SIGKILL);
            panic!("{what}: still running 1 s after its timeout with a stopped rank");
        };
        assert_eq!(status.code(), Some(124), "{what}: status {status}\n{err}");
        assert!(err.contains("timed out after 2 s"), "{what}:\n{err}");
        let left = wait_gone(&pids, Instant::now() + WITHIN);
        assert!(left.is_empty(), "{what}: ranks {left:?} outlived the job");
    }
}

#[test]
fn a_killed_launcher_takes_its_ranks_down() {
    if gex::testing::skip_unless_smp(SMP_FAULTS) {
        return;
    }
    let mut rng = Rng::new();
    for ranks in [2, 4] {
        let mut job = Job::start(ranks, &[], "soak", &["30"]);
        let pids = job.rank_pids();
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        let killed_at = Instant::now();
        job.launcher.kill().expect("kill the launcher");
        job.launcher.wait().expect("reap the launcher");
        let left = wait_gone(&pids, killed_at + WITHIN);
        assert!(
            left.is_empty(),
            "ranks {left:?} of {ranks} outlived their launcher by 1 s"
        );
    }
}

#[test]
fn eight_ranks_flood_each_other_without_loss() {
    // 20 000 rpc_ff per rank and round, against queues of 256 slots: senders find the
    // queues full and must keep draining their own to make progress.
    let mut cmd = Command::new(built(&["upcxx-run"], BUILD));
    cmd.args(["-n", "8", "--timeout", "120"])
        .arg(built(&["examples", "soak"], BUILD))
        .arg("2")
        .env("SOAK_FLOOD", "20000")
        .env_remove("UPCXX_RANKS")
        .env_remove("UPCXX_RANK");
    let out = cmd.output().expect("upcxx-run starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "soak on 8 ranks: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Rank 0's last word; under mpirun (UPCXX_CONDUIT=mpi) each rank's output is
    // forwarded on its own, so another rank's line may follow it.
    let under_mpirun = std::env::var("UPCXX_CONDUIT").as_deref() == Ok("mpi");
    let verified = if under_mpirun {
        stdout.lines().any(|l| l == "verified")
    } else {
        stdout.lines().last() == Some("verified")
    };
    assert!(verified, "{stdout}");
}
