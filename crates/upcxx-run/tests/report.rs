//! `upcxx-run report` end to end: the built binary on files as the tools write them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PROFILE: &str = r#"{
  "tool": "upcxx-profile", "version": 1, "command": ["./ring", "8"], "ranks": 2,
  "rank_time_ns": [2000000, 2100000],
  "events": [
    {"rank": 0, "name": "GASP_UPC_PUT", "tag": 1, "kind": "interval", "file": "ring.rs",
     "line": 12, "column": 5, "count": 8, "total_ns": 400000, "min_ns": 40000,
     "max_ns": 60000, "bytes": 64},
    {"rank": 1, "name": "GASP_UPC_BARRIER", "tag": 2, "kind": "interval", "file": "ring.rs",
     "line": 20, "column": 5, "count": 1, "total_ns": 900000, "min_ns": 900000,
     "max_ns": 900000, "bytes": 0}
  ],
  "matrix": {"bytes": [[0, 64], [0, 0]], "messages": [[0, 8], [0, 0]]}
}"#;

const TRACE: &str = r#"{
  "traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
    {"name": "rput", "cat": "upcxx", "ph": "X", "pid": 0, "tid": 0, "ts": 1.0, "dur": 2.5,
     "args": {"file": "ring.rs", "line": 12, "column": 5, "peer": 1, "bytes": 64}},
    {"name": "rget", "cat": "upcxx", "ph": "b", "pid": 1, "tid": 0, "ts": 2.0, "id": "1",
     "args": {"peer": 0, "bytes": 8}},
    {"name": "rget", "cat": "upcxx", "ph": "e", "pid": 1, "tid": 0, "ts": 6.0, "id": "1"}
  ],
  "displayTimeUnit": "ns",
  "otherData": {"tool": "upcxx-trace", "version": 1, "command": ["./ring"], "ranks": 2,
                "dropped": 0, "epoch_ns": 0}
}"#;

/// A fresh directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("upcxx-run-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write the input");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn upcxx_run(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_upcxx-run"))
        .arg("report")
        .args(args)
        .output()
        .expect("start upcxx-run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn profile_report_goes_next_to_the_input() {
    let dir = TempDir::new("profile");
    let input = dir.write("upcxx-profile.json", PROFILE);
    let out = upcxx_run(&[&input]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        stdout.contains("kind") && stdout.contains("% of run"),
        "{stdout}"
    );
    let barrier = stdout.find("GASP_UPC_BARRIER").expect("barrier row");
    let put = stdout.find("GASP_UPC_PUT").expect("put row");
    assert!(barrier < put, "costliest first: {stdout}");
    let html = std::fs::read_to_string(dir.0.join("upcxx-profile.html")).expect("the report");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 2);
}

#[test]
fn trace_report_goes_where_asked() {
    let dir = TempDir::new("trace");
    let input = dir.write("upcxx-trace.json", TRACE);
    let output = dir.0.join("out.html");
    let out = upcxx_run(&[&input, Path::new("-o"), &output]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        stdout.contains("rget") && stdout.contains("rput"),
        "{stdout}"
    );
    assert!(stdout.contains("72 B in 2 messages"), "{stdout}");
    let html = std::fs::read_to_string(&output).expect("the report");
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(!dir.0.join("upcxx-trace.html").exists());
}

#[test]
fn unreadable_input_fails_naming_the_file() {
    let dir = TempDir::new("bad");
    let missing = dir.0.join("missing.json");
    let garbage = dir.write("garbage.json", "\u{1}\u{2} not json");
    let foreign = dir.write("foreign.json", r#"{"tool": "perf"}"#);
    for input in [&missing, &garbage, &foreign] {
        let out = upcxx_run(&[input]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{input:?}: {stderr}");
        assert!(stderr.contains(&input.display().to_string()), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(!input.with_extension("html").exists());
    }
}

#[test]
fn report_never_overwrites_its_input() {
    let dir = TempDir::new("same");
    let input = dir.write("p.html", PROFILE);
    let out = upcxx_run(&[&input]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), PROFILE);
}
