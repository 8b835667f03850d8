//! The job's memory is reachable only from inside the job (ARCHITECTURE.md, "Threat
//! model"): the region is an anonymous memory file with no name in any file system,
//! whose descriptor only the launcher and, until they have mapped it, the ranks hold.
//! A process outside the job cannot open it by name; a process of another user cannot
//! reach it through `/proc` either (a process of the same user can, as it can read any
//! memory of that user's processes: the boundary is the user, as for all process
//! memory).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{built, Limited};

/// How the programs these tests start are built.
const BUILD: &str = "cargo test --workspace";

/// How long a job or a shell command of these tests may run.
const LIMIT: Duration = Duration::from_secs(60);

/// Pids of the children of `parent`.
fn children(parent: u32) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect();
    pids.sort();
    pids
}

/// The descriptors of `pid` that are the job region: `(fd, link)`.
fn region_fds(pid: u32) -> Vec<(String, String)> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the fd table")
        .filter_map(|e| {
            let e = e.ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            let link = link.to_string_lossy().into_owned();
            link.contains("memfd:gex-job")
                .then(|| (e.file_name().to_string_lossy().into_owned(), link))
        })
        .collect()
}

/// A 3-rank job that runs long enough to be inspected (its launcher, killed when
/// dropped: the ranks die with it), and its rank pids once each has mapped the region
/// (and so closed its descriptor).
fn running_job() -> (Limited, Vec<u32>) {
    let launcher = Limited::spawn(
        Command::new(built(&["upcxx-run"], BUILD))
            .args(["-n", "3", "--timeout", &LIMIT.as_secs().to_string()])
            .arg(built(&["examples", "soak"], BUILD))
            .arg("30")
            .env_remove("UPCXX_RANKS")
            .env_remove("UPCXX_RANK")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "upcxx-run -n 3 soak 30",
    );
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let ranks = children(launcher.id());
        let mapped = |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.contains("memfd:gex-job"))
                && region_fds(*pid).is_empty()
        };
        if ranks.len() == 3 && ranks.iter().all(mapped) {
            return (launcher, ranks);
        }
        assert!(Instant::now() < end, "the ranks did not map the region");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `script` with `sh` as `uid` (root only can switch); its success.
fn sh_as(uid: Option<u32>, script: &str) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script]);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let out = Limited::spawn(&mut cmd, format!("sh -c {script:?} as {uid:?}"))
        .output_within(LIMIT, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Why these tests skip under `GEX_TEST_CONDUIT=mpi`.
const SMP_REGION: &str = "the smp launcher's job region (memfd, /proc)";

#[test]
fn the_job_region_has_no_name_and_only_the_launcher_holds_it() {
    if gex::testing::skip_unless_smp(SMP_REGION) {
        return;
    }
    let (launcher, ranks) = running_job();
    // No name: nothing in /dev/shm (where shm_open names live) or anywhere else.
    let named: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("gex"))
                .collect()
        })
        .unwrap_or_default();
    assert!(named.is_empty(), "named job memory in /dev/shm: {named:?}");
    assert!(std::fs::File::open("/dev/shm/gex-job").is_err());
    // The launcher holds exactly one descriptor of it, unlinked from the start.
    let held = region_fds(launcher.id());
    assert_eq!(held.len(), 1, "the launcher's region descriptors: {held:?}");
    assert!(held[0].1.ends_with("(deleted)"), "{held:?}");
    // The ranks mapped it and closed their copies (checked by `running_job`), so a
    // program a rank starts inherits nothing.
    for r in &ranks {
        assert!(region_fds(*r).is_empty(), "rank pid {r} holds the region");
    }
    drop(launcher);
}

#[test]
fn another_user_cannot_reach_the_job_memory() {
    if gex::testing::skip_unless_smp(SMP_REGION) {
        return;
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        println!("not root: cannot run a process as another user; not checked");
        return;
    }
    let (launcher, ranks) = running_job();
    let (fd, _) = region_fds(launcher.id())
        .pop()
        .expect("the launcher's descriptor");
    let through_fd = format!("exec 3< /proc/{}/fd/{fd}", launcher.id());
    let through_mem = format!("exec 3< /proc/{}/mem", ranks[0]);
    // The same user can (it may read any of its own processes' memory) ...
    assert!(sh_as(None, &through_fd).0, "the owner opens the region");
    // ... another user cannot, neither through the descriptor nor the rank's memory.
    for script in [&through_fd, &through_mem] {
        let (ok, err) = sh_as(Some(65534), script);
        assert!(!ok, "another user ran `{script}`");
        assert!(err.contains("Permission denied"), "`{script}`: {err}");
    }
    drop(launcher);
}
