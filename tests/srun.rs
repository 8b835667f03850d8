//! Jobs started by Slurm's `srun` (feature `mpi`): the mpi conduit takes its ranks from
//! Slurm's PMIx as it does from `mpirun`.
//!
//! Run under a Slurm (`scripts/slurm.sh cargo test --features mpi --test srun` starts a
//! one-node one on this machine; `.ci/run` does). Where `srun` cannot start a job (no
//! Slurm, or none answering) each test prints why and that it is skipped.
//!
//! * [`examples_run_under_srun`]: `srun -n N` of `gex_network` (AMs of every category,
//!   puts and gets between every pair, checked) on one host and with every rank its own
//!   host (`GEX_MPI_HOST_RANKS=1`: the network path), and of `dht` and `upcxx_hosts`,
//!   each checking its result; each rank reports which path carried its AMs, which
//!   only the mpi conduit does.
//! * [`upcxx_run_starts_jobs_with_srun`]: `GEX_MPIRUN=srun upcxx-run --conduit mpi`,
//!   and its `--timeout`, which ends a job that runs past it with status 124 and leaves
//!   no rank behind.
//! * [`a_failing_rank_ends_the_job`]: a rank that panics, or that is killed from
//!   outside, while the others wait in barriers: the job ends within [`WITHIN`], non-zero,
//!   naming the rank, with no rank process and no new file in `/dev/shm` left.
//!
//! Build first: `cargo build --features mpi --examples && cargo build -p upcxx-run`.
#![cfg(feature = "mpi")]

mod common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{am_paths, built, Limited};

/// How long one job may run.
const LIMIT: Duration = Duration::from_secs(120);
/// How long a job may take to end once a rank failed.
const WITHIN: Duration = Duration::from_secs(20);

/// One job at a time: the checks for files left in `/dev/shm` compare before and after.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// Whether `srun` can start a job here; prints why not.
fn slurm_here(test: &str) -> bool {
    let ok = Command::new("srun")
        .args(["-n", "1", "--immediate=10", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {test}: srun cannot start a job here (run under scripts/slurm.sh)");
    }
    ok
}

fn example(name: &str) -> PathBuf {
    built(&["examples", name], "cargo build --features mpi --examples")
}

/// How a job ended: its exit code (124 past the limit) and its output.
struct Ended {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ended {
    fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `cmd` (a launcher) to its end within `limit` (failing past it), marked with
/// `mark` (see [`ranks_alive`]).
fn run(mut cmd: Command, mark: &str, limit: Duration) -> Ended {
    // A test run inside a job must not hand its own rank to this one.
    for v in gex::job::mpirun::MPI_LAUNCHER_VARS
        .into_iter()
        .chain(["UPCXX_RANK"])
    {
        cmd.env_remove(v);
    }
    cmd.env("PGAS_SRUN_MARK", mark)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Limited::spawn(&mut cmd, mark)
        .output_within(limit, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    Ended {
        code: out
            .status
            .code()
            .or_else(|| out.status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `srun -n ranks` of an example with `env`; checks that it succeeded.
fn srun(name: &str, ranks: u32, env: &[(&str, &str)]) -> Ended {
    let mut cmd = Command::new("srun");
    cmd.args(["-n", &ranks.to_string()])
        .arg(example(name))
        .env("GEX_MPI_STATS", "1")
        .envs(env.iter().copied());
    let ended = run(cmd, name, LIMIT);
    assert_eq!(ended.code, 0, "srun {name}:\n{}", ended.text());
    ended
}

/// AMs each rank handled from its host queues and over MPI (`GEX_MPI_STATS=1`),
/// checking that every rank reported.
fn paths(ended: &Ended, ranks: u32) -> Vec<(u64, u64)> {
    let all = am_paths(&ended.stderr);
    let reported: Vec<u32> = all.iter().map(|p| p.0).collect();
    assert_eq!(
        reported,
        (0..ranks).collect::<Vec<_>>(),
        "one report per rank:\n{}",
        ended.text()
    );
    all.iter().map(|&(_, host, net, _)| (host, net)).collect()
}

#[test]
fn examples_run_under_srun() {
    if !slurm_here("examples_run_under_srun") {
        return;
    }
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let done = srun("gex_network", 3, &[]);
    assert!(
        done.stdout
            .contains("3 ranks: AMs, puts and gets between every pair verified"),
        "{}",
        done.text()
    );
    assert!(paths(&done, 3)
        .iter()
        .all(|&(host, mpi)| host > 0 && mpi == 0));
    let done = srun("gex_network", 3, &[("GEX_MPI_HOST_RANKS", "1")]);
    assert!(done.stdout.contains("verified"), "{}", done.text());
    // A rank's AMs to itself take its own host queue.
    assert!(paths(&done, 3).iter().all(|&(_, mpi)| mpi > 0));
    let done = srun("dht", 4, &[("GEX_MPI_HOST_RANKS", "2")]);
    assert!(done.stdout.contains("verified"), "{}", done.text());
    assert!(paths(&done, 4)
        .iter()
        .all(|&(host, mpi)| host > 0 && mpi > 0));
    let done = srun("upcxx_hosts", 3, &[("GEX_MPI_HOST_RANKS", "2")]);
    assert!(done.stdout.contains("verified"), "{}", done.text());
}

/// Processes running with `PGAS_SRUN_MARK=mark` (the ranks of a marked job).
fn ranks_alive(mark: &str) -> Vec<u32> {
    let want = format!("PGAS_SRUN_MARK={mark}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == want.as_bytes()))
        })
        .collect()
}

/// Waits up to a few seconds for the ranks of job `mark` to be gone and for `/dev/shm`
/// to hold nothing of ours beyond `before`; panics naming what is left.
///
/// Open MPI's shared-memory transport (`vader`) keeps a file in `/dev/shm` per rank,
/// which its ranks remove in `MPI_Finalize`; for a job that ends otherwise, `mpirun`
/// removes them, but under `srun` nobody does (clusters clear `/dev/shm` in Slurm's
/// epilog; `scripts/slurm.sh` removes them when it stops). Those files are not
/// counted.
fn check_gone(mark: &str, before: &BTreeSet<String>, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive = ranks_alive(mark);
        let shm: Vec<String> = shm_files()
            .difference(before)
            .filter(|name| !name.starts_with("vader_segment."))
            .cloned()
            .collect();
        if alive.is_empty() && shm.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{mark}: left behind: processes {alive:?}, /dev/shm {shm:?}\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn shm_files() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn upcxx_run_starts_jobs_with_srun() {
    if !slurm_here("upcxx_run_starts_jobs_with_srun") {
        return;
    }
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let launcher = built(&["upcxx-run"], "cargo build -p upcxx-run");
    let mut cmd = Command::new(&launcher);
    cmd.args(["--conduit", "mpi", "-n", "3"])
        .arg(example("rpc_hello"))
        .env("GEX_MPIRUN", "srun");
    let done = run(cmd, "upcxx-run", LIMIT);
    assert_eq!(done.code, 0, "{}", done.text());
    for r in 0..3 {
        assert!(
            done.stdout.contains(&format!("rank {r}")),
            "no line of rank {r}:\n{}",
            done.text()
        );
    }
    // The soak runs for a minute; the time limit ends it after 2 s.
    let before = shm_files();
    let mut cmd = Command::new(&launcher);
    cmd.args(["--conduit", "mpi", "-n", "2", "--timeout", "2"])
        .arg(example("soak"))
        .arg("60")
        .env("GEX_MPIRUN", "srun");
    let start = Instant::now();
    let done = run(cmd, "timeout", LIMIT);
    assert_eq!(done.code, gex::job::EXIT_TIMEOUT, "{}", done.text());
    assert!(
        done.stderr.contains("timed out after 2 s"),
        "{}",
        done.text()
    );
    assert!(
        start.elapsed() < WITHIN,
        "ended after {:?}",
        start.elapsed()
    );
    check_gone("timeout", &before, &done.text());
}

/// In a rank of [`a_failing_rank_ends_the_job`]'s jobs (`PGAS_SRUN_FAULT` set): joins
/// the job, records its pid, then rank 1 panics (`panic`) or waits to be killed
/// (`kill`) while the others wait for it in barriers, which only the job's end ends.
fn rank_main(fault: &str) -> ! {
    let (_client, _ep, team) = gex::Client::init("SRUNFAULT", gex::Flags::NONE).unwrap();
    let _seg = gex::Segment::attach(&team, 1 << 20).unwrap();
    team.barrier();
    let dir = PathBuf::from(std::env::var_os("PGAS_SRUN_DIR").unwrap());
    let me = team.rank();
    std::fs::write(
        dir.join(format!("{me}.tmp")),
        std::process::id().to_string(),
    )
    .unwrap();
    std::fs::rename(dir.join(format!("{me}.tmp")), dir.join(me.to_string())).unwrap();
    team.barrier();
    if me == 1 && fault == "panic" {
        panic!("rank {me} gives up");
    }
    loop {
        team.barrier();
    }
}

/// Runs this test binary as a 3-rank `srun` job in which rank 1 fails as `fault` says.
fn faulty_job(fault: &str) -> Ended {
    let dir = std::env::temp_dir().join(format!("pgas-srun-fault-{}-{fault}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let before = shm_files();
    let mut cmd = Command::new("srun");
    cmd.args(["-n", "3"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "a_failing_rank_ends_the_job",
            "--exact",
            "--nocapture",
            "-q",
        ])
        .env("PGAS_SRUN_FAULT", fault)
        .env("PGAS_SRUN_DIR", &dir);
    let mark = format!("fault-{fault}");
    let killer = (fault == "kill").then(|| {
        let dir = dir.clone();
        std::thread::spawn(move || {
            let pid_file = dir.join("1");
            let start = Instant::now();
            while !(pid_file.exists() && dir.join("0").exists() && dir.join("2").exists()) {
                assert!(start.elapsed() < LIMIT, "the ranks did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
            let pid: i32 = std::fs::read_to_string(pid_file).unwrap().parse().unwrap();
            // SAFETY: a plain signal to a rank of this test's job.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            Instant::now()
        })
    });
    let start = Instant::now();
    let done = run(cmd, &mark, LIMIT);
    let fault_at = killer.map_or(start, |k| k.join().unwrap());
    assert!(
        fault_at.elapsed() < WITHIN,
        "{fault}: the job ended {:?} after the fault",
        fault_at.elapsed()
    );
    assert_ne!(done.code, 0, "{fault}: the job succeeded:\n{}", done.text());
    check_gone(&mark, &before, &done.text());
    let _ = std::fs::remove_dir_all(&dir);
    done
}

#[test]
fn a_failing_rank_ends_the_job() {
    if let Some(fault) = std::env::var_os("PGAS_SRUN_FAULT") {
        rank_main(fault.to_str().unwrap());
    }
    if !slurm_here("a_failing_rank_ends_the_job") {
        return;
    }
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let done = faulty_job("panic");
    let text = done.text();
    assert!(
        text.contains("gex: rank 1 failed: panicked at") && text.contains("rank 1 gives up"),
        "{text}"
    );
    let done = faulty_job("kill");
    let text = done.text();
    assert!(text.contains("task 1: Killed"), "{text}");
}
