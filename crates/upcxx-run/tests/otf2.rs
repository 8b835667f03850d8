//! OTF2 export (feature `otf2`, with the OTF2 library): `upcxx-run --trace=FILE.otf2`
//! on a 3-rank job, and `upcxx-run report FILE --otf2 DIR`, read back with `otf2-print`
//! (Debian `otf2-tools`): one location per rank, a region per operation kind, enter and
//! leave events, RMA and message records.
//!
//! This test binary is its own PGAS program, as in `tools.rs`: the launcher runs it with
//! the arguments that make libtest run [`otf2_rank_program`] alone. Each rank reports,
//! through `gasp`'s runtime side, a put and a get towards the next rank and an RPC's send
//! to it and execution from the previous one.
#![cfg(feature = "otf2")]

use std::panic::Location;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gasp::events::{GASP_UPCXX_RPC_EXECUTE, GASP_UPCXX_RPC_SEND, GASP_UPC_GET, GASP_UPC_PUT};
use gasp::{Arg, GPtr, Span};

const RANKS: u32 = 3;

/// The body of every rank of the job the test launches; not a test of its own.
#[test]
#[ignore = "the program the other tests run as a job through upcxx-run"]
fn otf2_rank_program() {
    if std::env::var_os(gex::job::UPCXX_RANK).is_none() {
        return;
    }
    let (client, _endpoint, team) =
        gex::Client::init("OTF2", gex::Flags::NONE).expect("gex::Client::init");
    let (rank, ranks) = (team.rank(), team.size());
    gasp::dispatch::init(rank, ranks, (0..ranks).collect()).expect("attach the GASP tool");
    let next = (rank + 1) % ranks;
    let prev = (rank + ranks - 1) % ranks;
    let peer = GPtr {
        rank: next,
        addr: 0,
    };
    let put = [Arg::Int(1), Arg::GPtr(peer), Arg::Ptr(0), Arg::Bytes(64)];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(GASP_UPC_PUT, Location::caller(), &put).end(&put) };
    let get = [Arg::Int(1), Arg::Ptr(0), Arg::GPtr(peer), Arg::Bytes(8)];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(GASP_UPC_GET, Location::caller(), &get).end(&get) };
    let send = [Arg::Rank(next), Arg::Bytes(40), Arg::U64(1)];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(GASP_UPCXX_RPC_SEND, Location::caller(), &send).end(&send) };
    let exec = [Arg::Rank(prev), Arg::Bytes(40), Arg::U64(1)];
    // SAFETY: the event's own START and END list (GASP §5.4).
    unsafe { Span::begin(GASP_UPCXX_RPC_EXECUTE, Location::caller(), &exec).end(&exec) };
    gasp::dispatch::finish();
    client.finalize();
    std::process::exit(0);
}

/// A fresh directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("upcxx-run-otf2-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `otf2-print ARGS ANCHOR`'s output; fails the test if it fails.
fn otf2_print(args: &[&str], anchor: &Path) -> String {
    let out = Command::new("otf2-print")
        .args(args)
        .arg(anchor)
        .output()
        .expect("otf2-print (Debian otf2-tools) runs");
    assert!(out.status.success(), "otf2-print failed: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of `events` that start with `kind`.
fn records<'a>(events: &'a str, kind: &str) -> Vec<&'a str> {
    events
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(kind))
        .collect()
}

/// What every archive of the job must show.
fn assert_job_archive(anchor: &Path) {
    let defs = otf2_print(&["-G"], anchor);
    for rank in 0..RANKS {
        assert!(
            defs.lines()
                .any(|l| l.starts_with("LOCATION ") && l.contains(&format!("\"rank {rank}\""))),
            "no location of rank {rank}:\n{defs}"
        );
    }
    for region in ["GASP_UPC_PUT", "GASP_UPC_GET", "GASP_UPCXX_RPC_SEND"] {
        assert!(
            defs.lines()
                .any(|l| l.starts_with("REGION ") && l.contains(&format!("\"{region}\""))),
            "no region {region}:\n{defs}"
        );
    }
    let events = otf2_print(&[], anchor);
    let n = RANKS as usize;
    // Four operations on every rank, each entered and left.
    assert_eq!(records(&events, "ENTER").len(), 4 * n, "{events}");
    assert_eq!(records(&events, "LEAVE").len(), 4 * n, "{events}");
    assert_eq!(records(&events, "RMA_PUT").len(), n, "{events}");
    assert_eq!(records(&events, "RMA_GET").len(), n, "{events}");
    assert_eq!(
        records(&events, "RMA_OP_COMPLETE_BLOCKING").len(),
        2 * n,
        "{events}"
    );
    assert_eq!(records(&events, "MPI_SEND").len(), n, "{events}");
    assert_eq!(records(&events, "MPI_RECV").len(), n, "{events}");
    for put in records(&events, "RMA_PUT") {
        assert!(put.contains("Bytes: 64"), "{put}");
    }
}

#[test]
fn trace_to_an_otf2_file_writes_an_archive_the_otf2_tools_read() {
    let dir = TempDir::new("run");
    let exe = std::env::current_exe().expect("the test executable");
    let out = Command::new(env!("CARGO_BIN_EXE_upcxx-run"))
        .current_dir(&dir.0)
        .env("TMPDIR", &dir.0)
        .env("GASP_TRACE_BUFFER", "1")
        .env_remove("GASP_TOOL")
        .env_remove("GASP_OUT")
        .env_remove(gex::job::UPCXX_RANK)
        .env_remove(gex::job::UPCXX_RANKS)
        .args([
            "-n",
            &RANKS.to_string(),
            "--timeout",
            "60",
            "--trace=job.otf2",
        ])
        .arg(&exe)
        .args([
            "otf2_rank_program",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .output()
        .expect("start upcxx-run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("OTF2 archive written to job.otf2"),
        "{}",
        text(&out)
    );
    assert!(
        dir.0.join("job.json").is_file(),
        "the trace beside the archive"
    );
    assert_job_archive(&dir.0.join("job.otf2"));

    // The same from the trace file, through `report --otf2`.
    let out = Command::new(env!("CARGO_BIN_EXE_upcxx-run"))
        .current_dir(&dir.0)
        .args(["report", "job.json", "--otf2", "again"])
        .output()
        .expect("start upcxx-run report");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_job_archive(&dir.0.join("again/job.otf2"));

    // An archive is never overwritten.
    let out = Command::new(env!("CARGO_BIN_EXE_upcxx-run"))
        .current_dir(&dir.0)
        .args(["report", "job.json", "--otf2", "again"])
        .output()
        .expect("start upcxx-run report");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_profile_is_no_input_for_otf2() {
    let dir = TempDir::new("profile");
    let profile = dir.0.join("p.json");
    std::fs::write(
        &profile,
        r#"{"tool": "upcxx-profile", "version": 1, "command": [], "ranks": 1,
            "rank_time_ns": [1], "events": [], "matrix": {"bytes": [[0]], "messages": [[0]]}}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_upcxx-run"))
        .args(["report"])
        .arg(&profile)
        .arg("--otf2")
        .arg(dir.0.join("out"))
        .output()
        .expect("start upcxx-run report");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("OTF2 needs a trace"),
        "{}",
        text(&out)
    );
}
