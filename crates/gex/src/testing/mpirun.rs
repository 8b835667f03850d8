//! The mpi mode of [`spmd`](super::spmd): the job started by `mpirun`
//! (`GEX_TEST_CONDUIT=mpi`), so every multi-rank test runs over the mpi conduit.
//!
//! The command is [`crate::job::mpirun::command`] (the launcher prefix from
//! `GEX_MPIRUN`, else `mpirun --oversubscribe`; `srun` works too) with the output
//! tagged (`--tag-output`, `srun --label`), so each line of output says which rank
//! wrote it, and the harness's variables passed to the ranks.
//! No `UPCXX_RANK` is set: that is what makes a rank choose the mpi conduit.
//!
//! `mpirun` keeps Open MPI's session directory in the job's own directory (concurrent
//! jobs race on the shared one), and runs in a process group of its own with its output
//! piped; when it exits,
//! its output is printed through the test's own output (libtest shows it for a failing
//! test, or always with `--nocapture`). On the time limit the harness sends `SIGTERM`
//! to `mpirun` (which ends its ranks and cleans up), and `SIGKILL` to it and every
//! process it started if they are still there after [`TERM_GRACE`].
//!
//! **The report** of a failed job names the rank, in the words of the smp launcher's
//! report where it can: the rank that recorded why it failed (a panic escaping the
//! body, or the conduit's abort: both write `failed-R` in the job's directory, which
//! the conduit finds in `GEX_MPI_FAILURE_DIR`), else the rank that printed the
//! conduit's `gex: rank R failed: ...`, else the rank `mpirun` names (killed by a
//! signal, `MPI_Abort`, a non-zero exit, an MPI error). It ends with that rank's output
//! and `mpirun`'s own lines. The exit code is `mpirun`'s: the `MPI_Abort` code of the
//! failing rank (101 for a panic escaping the body), 124 on the time limit; under
//! `srun`, that of the first rank it reports as exited with an error.

use std::io::Read;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::job::{self, JobOutcome, JobSpec};

/// How long `mpirun` has to end its job after `SIGTERM` before everything is killed.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// Lines of a rank's output (and of `mpirun`'s) quoted in a failure report.
const REPORT_LINES: usize = 60;

/// The file in which rank `rank` records the panic that escaped its body.
pub(super) fn failure_file(dir: &Path, rank: &str) -> std::path::PathBuf {
    dir.join(format!("failed-{rank}"))
}

/// Runs the job through `mpirun` and reports how it ended (`spec.forward_signals` does
/// not apply: `mpirun` handles the signals it receives).
pub(super) fn run(spec: &JobSpec, dir: &Path) -> JobOutcome {
    let name = &spec.name;
    let mut env = spec.env.clone();
    // The ranks see the conduit their test process runs them on (`test_conduit`):
    // ranks on other hosts do not inherit this process's environment.
    env.push((super::GEX_TEST_CONDUIT.into(), "mpi".into()));
    // Nor the launcher of one's own that makes the placement unknown (`mpi_placement`):
    // without it a rank on another host would take itself for one on this host.
    if let Some(launcher) = std::env::var_os(job::mpirun::GEX_MPIRUN) {
        env.push((job::mpirun::GEX_MPIRUN.into(), launcher));
    }
    // Where the conduit of a failing rank writes why (see `failing_rank`).
    #[cfg(feature = "mpi")]
    env.push((
        crate::conduit::mpi::GEX_MPI_FAILURE_DIR.into(),
        dir.as_os_str().to_owned(),
    ));
    let mut cmd = job::mpirun::command(
        &job::mpirun::Options { tag_output: true },
        spec.ranks,
        spec.segment_size,
        &env,
        spec.program.as_os_str(),
        &spec.args,
    )
    .unwrap_or_else(|e| panic!("spmd: {e}"));
    // Open MPI's session directory under the job's own directory: mpirun removes the
    // shared top directory (/tmp/ompi.HOST.UID) when it empties it, so concurrent
    // jobs (libtest runs tests in parallel) could fail to create theirs there.
    cmd.env("OMPI_MCA_orte_tmpdir_base", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "spmd: cannot start {:?} for '{name}': {e} (set GEX_MPIRUN to the launcher \
             command)",
            cmd.get_program()
        )
    });
    let out = collect(child.stdout.take().expect("piped"));
    let err = collect(child.stderr.take().expect("piped"));
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("spmd: wait for mpirun") {
            break status;
        }
        if spec.timeout.is_some_and(|t| start.elapsed() > t) {
            timed_out = true;
            break stop(&mut child);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = untangle(&out.join().unwrap_or_default());
    let err = untangle(&err.join().unwrap_or_default());
    // Through the print macros, so that libtest captures it with the test's output.
    print!("{out}");
    eprint!("{err}");
    let exit_code = if timed_out {
        job::EXIT_TIMEOUT
    } else if let Some(code) = srun_first_exit(&err) {
        // srun's own status is the largest of its ranks', often that of a rank it
        // ended (143); the job's is that of the rank that failed first, as mpirun's.
        code
    } else if let Some(sig) = status.signal() {
        128 + sig
    } else {
        status.code().unwrap_or(1)
    };
    if exit_code == 0 {
        return JobOutcome {
            exit_code,
            failure: None,
        };
    }
    let lines: Vec<&str> = out.lines().chain(err.lines()).collect();
    let unfinished: Vec<usize> = (0..spec.ranks)
        .filter(|r| {
            let r = r.to_string();
            !dir.join(&r).exists() && !failure_file(dir, &r).exists()
        })
        .collect();
    let failed = failing_rank(dir, &lines).or_else(|| match unfinished[..] {
        // mpirun's own message may be lost (Open MPI 4.1 drops some under load); a
        // single rank that neither finished nor recorded a failure is the one whose
        // status mpirun returns.
        [r] if !timed_out => Some((r, format!("exited with code {exit_code}"))),
        _ => None,
    });
    let mut report = match (timed_out, &failed) {
        (true, _) => {
            let running: Vec<String> = unfinished.iter().map(|r| r.to_string()).collect();
            format!(
                "job timed out after {} s (ranks still running: {})",
                spec.timeout.unwrap_or_default().as_secs_f64(),
                running.join(", ")
            )
        }
        (false, Some((r, what))) => format!("rank {r} of {} {what}", spec.ranks),
        (false, None) => format!("mpirun exited with status {exit_code}"),
    };
    if let Some((r, _)) = failed {
        let own: Vec<&str> = lines.iter().filter_map(|l| untag(l, r)).collect();
        quote(&mut report, &format!("output of rank {r}"), &own);
    }
    let launcher: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| tag_rank(l).is_none() && !l.trim().is_empty() && !l.starts_with("---"))
        .collect();
    quote(&mut report, "mpirun", &launcher);
    JobOutcome {
        exit_code,
        failure: Some(report),
    }
}

/// Output of `--tag-output` with each line's tag once: a rank's unbuffered writes (a
/// backtrace, piece by piece) are tagged piece by piece, within one line.
fn untangle(text: &str) -> String {
    let mut clean = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once(">:") {
            Some((tag, rest)) if tag_rank(line).is_some() => {
                let tag = format!("{tag}>:");
                clean.push_str(&tag);
                clean.push_str(&rest.replace(&tag, ""));
            }
            _ => clean.push_str(line),
        }
        clean.push('\n');
    }
    clean
}

/// Reads a pipe to its end on a thread of its own.
fn collect(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Ends a job past its time limit: `SIGTERM` to `mpirun`'s process group, then
/// `SIGKILL` to it and to every process it started.
fn stop(child: &mut Child) -> std::process::ExitStatus {
    let Some(pid) = Pid::from_raw(child.id() as i32) else {
        unreachable!("a child's pid is positive")
    };
    let _ = rustix::process::kill_process_group(pid, Signal::TERM);
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The ranks run in process groups of their own: find them before mpirun goes.
    for p in descendants(child.id()) {
        if let Some(p) = Pid::from_raw(p as i32) {
            let _ = rustix::process::kill_process(p, Signal::KILL);
        }
    }
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    child.wait().expect("spmd: wait for mpirun")
}

/// Every process below `root` in the process tree (from `/proc`).
fn descendants(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse().ok());
            if let Some(ppid) = ppid {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// The rank of a tagged line and the text after the tag: `mpirun --tag-output`'s
/// `[JOB,RANK]<stdout>:TEXT`, or `srun --label`'s `RANK: TEXT` (the rank padded with
/// spaces to the width of the largest).
fn tagged(line: &str) -> Option<(usize, &str)> {
    if let Some(rest) = line.strip_prefix('[') {
        let (ids, after) = rest.split_once(']')?;
        if !after.starts_with("<std") {
            return None;
        }
        let rank = ids.split_once(',')?.1.parse().ok()?;
        return Some((rank, line.split_once(">:").map_or(line, |(_, t)| t)));
    }
    let (label, text) = line.split_once(": ")?;
    let label = label.trim_start();
    if label.is_empty() || !label.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((label.parse().ok()?, text))
}

/// The rank of a tagged line (see [`tagged`]).
fn tag_rank(line: &str) -> Option<usize> {
    tagged(line).map(|(rank, _)| rank)
}

/// The text of `line` if rank `rank` wrote it.
fn untag(line: &str, rank: usize) -> Option<&str> {
    tagged(line).and_then(|(r, text)| (r == rank).then_some(text))
}

/// Which rank failed, and how, as in the smp launcher's report ("failed: WHY",
/// "exited with code N", "was killed by SIGNAL"): a failure the rank recorded (a panic
/// that escaped the body, or the conduit's abort), the conduit's message on stderr, or
/// what `mpirun` says.
fn failing_rank(dir: &Path, lines: &[&str]) -> Option<(usize, String)> {
    let mut recorded: Vec<(usize, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let r = name.to_str()?.strip_prefix("failed-")?.parse().ok()?;
            Some((r, std::fs::read_to_string(e.path()).ok()?))
        })
        .collect();
    recorded.sort();
    // The smp launcher's words for a rank that exited without finalizing.
    let what = |why: &str| match why {
        "exited before finalize" => why.to_owned(),
        _ => format!("failed: {why}"),
    };
    if let Some((r, why)) = recorded.into_iter().next() {
        return Some((r, what(&why)));
    }
    for line in lines.iter().map(|l| tagged(l).map_or(*l, |(_, text)| text)) {
        let Some((r, why)) = line
            .strip_prefix("gex: rank ")
            .and_then(|rest| rest.split_once(" failed: "))
        else {
            continue;
        };
        if let Ok(r) = r.parse() {
            return Some((r, what(why)));
        }
    }
    let after = |line: &str, key: &str| line.split_once(key).map(|(_, rest)| rest.to_owned());
    let number = |s: &str| -> Option<usize> {
        s.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    for (i, line) in lines.iter().enumerate() {
        // "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9
        // (Killed)."
        if let (Some(r), Some(sig)) = (after(line, "process rank "), after(line, "on signal ")) {
            if let (Some(r), Some(sig)) = (number(&r), number(&sig)) {
                let name = signal_hook::low_level::signal_name(sig as i32)
                    .map_or_else(|| format!("signal {sig}"), str::to_owned);
                return Some((r, format!("was killed by {name}")));
            }
        }
        // "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD\nwith
        // errorcode 3."
        if let Some(r) = after(line, "MPI_ABORT was invoked on rank ").and_then(|r| number(&r)) {
            let code = lines
                .get(i + 1)
                .and_then(|l| after(l, "errorcode "))
                .and_then(|c| number(&c));
            let code = code.map_or_else(String::new, |c| format!(" with errorcode {c}"));
            return Some((r, format!("failed: called MPI_Abort{code}")));
        }
        // "Process name: [[31360,1],0]" then "Exit code: 7": a rank that exited.
        if let Some(ids) = after(line, "Process name: [[") {
            let r = ids.split_once("],").and_then(|(_, r)| number(r));
            let code = lines[i + 1..]
                .iter()
                .take(3)
                .find_map(|l| after(l, "Exit code:"))
                .and_then(|c| number(&c));
            if let (Some(r), Some(code)) = (r, code) {
                return Some((r, format!("exited with code {code}")));
            }
        }
        // srun: "srun: error: vm: task 1: Exited with exit code 3", or "...: task 1:
        // Killed" (the signal's description).
        if let Some(rest) = after(line, "srun: error: ").and_then(|l| after(&l, "task ")) {
            if let Some((r, how)) = rest.split_once(": ") {
                if let Ok(r) = r.parse() {
                    let how = match how.strip_prefix("Exited with exit code ") {
                        Some(code) => format!("exited with code {code}"),
                        None => format!("was killed ({how})"),
                    };
                    return Some((r, how));
                }
            }
        }
        // An MPI error: "*** reported by process [1960837121,3]".
        if let Some(ids) = after(line, "reported by process [") {
            if let Some(r) = ids.split_once(',').and_then(|(_, r)| number(r)) {
                return Some((r, "failed: an MPI error (see mpirun's lines)".to_owned()));
            }
        }
    }
    None
}

/// The status of the first rank that `srun` reports as exited with an error
/// (`srun: error: vm: task 1: Exited with exit code 101`).
fn srun_first_exit(err: &str) -> Option<i32> {
    err.lines().find_map(|l| {
        let rest = l.strip_prefix("srun: error: ")?;
        rest.split_once(": Exited with exit code ")?
            .1
            .trim()
            .parse()
            .ok()
    })
}

/// Appends the last [`REPORT_LINES`] of `lines` under a heading.
fn quote(report: &mut String, heading: &str, lines: &[&str]) {
    if lines.is_empty() {
        return;
    }
    report.push_str(&format!("\n--- {heading} ---"));
    for l in &lines[lines.len().saturating_sub(REPORT_LINES)..] {
        report.push('\n');
        report.push_str(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_lines_name_their_rank() {
        let text = "[1,2]<stdout>:hello\n[1,10]<stderr>:x>:y\nplain line\n[a]b";
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.iter().map(|l| tag_rank(l)).collect::<Vec<_>>(),
            [Some(2), Some(10), None, None]
        );
        assert_eq!(untag(lines[0], 2), Some("hello"));
        assert_eq!(untag(lines[1], 10), Some("x>:y"));
        assert_eq!(untag(lines[0], 1), None);
        // srun --label, padded to the widest rank.
        let lines = [
            "0: hello",
            "11: a: b",
            " 3: x",
            "srun: error: vm: task 1: Killed",
        ];
        assert_eq!(
            lines.iter().map(|l| tag_rank(l)).collect::<Vec<_>>(),
            [Some(0), Some(11), Some(3), None]
        );
        assert_eq!(untag(lines[1], 11), Some("a: b"));
    }

    #[test]
    fn the_failing_rank_comes_from_the_conduit_or_mpirun() {
        let dir = std::env::temp_dir().join(format!("gex-mpirun-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lines = [
            "[5,0]<stdout>:running 1 test",
            "[5,2]<stderr>:gex: rank 2 failed: panicked at a.rs:1:2: boom",
        ];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((2, "failed: panicked at a.rs:1:2: boom".to_owned()))
        );
        let lines = [
            "mpirun noticed that process rank 1 with PID 0 on node vm exited on \
                      signal 9 (Killed).",
        ];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((1, "was killed by SIGKILL".to_owned()))
        );
        let lines = [
            "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD",
            "with errorcode 3.",
        ];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((3, "failed: called MPI_Abort with errorcode 3".to_owned()))
        );
        let lines = ["  Process name: [[31360,1],0]", "  Exit code:    7"];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((0, "exited with code 7".to_owned()))
        );
        let lines = ["1: gex: rank 1 failed: exited before finalize"];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((1, "exited before finalize".to_owned()))
        );
        let lines = ["srun: error: vm: task 2: Exited with exit code 3"];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((2, "exited with code 3".to_owned()))
        );
        let lines = ["srun: error: vm: task 0: Killed"];
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((0, "was killed (Killed)".to_owned()))
        );
        let lines = ["[vm:06195] *** reported by process [1960837121,3]"];
        assert_eq!(failing_rank(&dir, &lines).map(|(r, _)| r), Some(3));
        assert_eq!(failing_rank(&dir, &["nothing"]), None);
        // What a rank recorded comes first.
        std::fs::write(failure_file(&dir, "4"), "panicked at b.rs:3:4: bang").unwrap();
        assert_eq!(
            failing_rank(&dir, &lines),
            Some((4, "failed: panicked at b.rs:3:4: bang".to_owned()))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn srun_reports_the_status_of_the_first_failing_rank() {
        let err = "srun: error: vm: task 1: Exited with exit code 101\n\
                   srun: error: vm: tasks 0,2: Terminated\n";
        assert_eq!(srun_first_exit(err), Some(101));
        assert_eq!(
            srun_first_exit("srun: error: vm: tasks 0,2: Killed\n"),
            None
        );
    }

    #[test]
    fn repeated_tags_within_a_line_are_dropped() {
        let text = "[1,0]<stderr>: [1,0]<stderr>:0[1,0]<stderr>:: x\nplain\n";
        assert_eq!(untangle(text), "[1,0]<stderr>: 0: x\nplain\n");
    }
}
