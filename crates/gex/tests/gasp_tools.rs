//! The tools that `GASP_TOOL` selects, seen through what they leave (gasp-1.4 §3.1), with
//! 2 to 4 ranks: the built-in profiler's counts and communication matrix, the built-in
//! tracer's JSON with clocks aligned across ranks, a non-collective exit (§5.4.1) as the
//! leaving rank's last traced event, and a tool library that cannot be loaded.
// The events these tests look for are compiled only with the `gasp` feature (see
// `gasp_off.rs` for the build without it).
#![cfg(feature = "gasp")]

use gasp::events::*;
use gasp::formats::{Profile, Trace, TraceEvent};
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{Client, Flags, Segment};

const PUTS: u64 = 5;

fn put_ring() -> u32 {
    let (client, _ep, team) = Client::init("GASPT", Flags::NONE).unwrap();
    let _segment = Segment::attach(&team, 1 << 16).unwrap();
    let next = (team.rank() + 1) % team.size();
    let dest = team.segment_bound(next).unwrap().owner_addr;
    let line = line!() + 2;
    for _ in 0..PUTS {
        team.put_blocking(next, dest, &[3; 16], Flags::NONE)
            .unwrap();
    }
    for _ in 0..3 {
        team.barrier();
    }
    client.finalize();
    line
}

fn tool_options(ranks: usize, tool: &str, out: &std::path::Path) -> SpmdOptions {
    let mut opts = SpmdOptions::new(ranks);
    opts.env.push(("GASP_TOOL".into(), tool.into()));
    opts.env
        .push(("GASP_OUT".into(), out.display().to_string()));
    opts
}

fn out_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}-{}.json", std::process::id()))
}

#[test]
fn the_profile_counts_every_operation() {
    for ranks in [2, 3, 4] {
        let out = out_file("gasp-profile");
        let Some(outcome) = spmd_outcome(tool_options(ranks, "profile", &out), || {
            put_ring();
        }) else {
            continue;
        };
        assert_eq!(outcome.exit_code, 0);
        let text = std::fs::read_to_string(&out).expect("profile written");
        std::fs::remove_file(&out).unwrap();
        let p: Profile = serde_json::from_str(&text).unwrap();
        let n = ranks as u64;
        assert_eq!(p.ranks, ranks as u32);
        let puts: Vec<_> = p.events.iter().filter(|r| r.tag == GASP_UPC_PUT).collect();
        assert_eq!(puts.len(), ranks, "one row per rank (one call site)");
        for row in &puts {
            assert_eq!((row.count, row.bytes), (PUTS, PUTS * 16));
            assert!(row.file.ends_with("gasp_tools.rs"), "{}", row.file);
            assert!(row.min_ns <= row.max_ns && row.total_ns >= row.max_ns);
        }
        let barriers: u64 = p
            .events
            .iter()
            .filter(|r| r.tag == GASP_UPC_BARRIER)
            .map(|r| r.count)
            .sum();
        // Three barriers and the one inside Segment::attach; finalize's barrier is part of
        // its GASP_UPC_COLLECTIVE_EXIT.
        assert_eq!(barriers, 4 * n);
        for src in 0..ranks {
            for dst in 0..ranks {
                let want = if dst == (src + 1) % ranks { PUTS } else { 0 };
                assert_eq!(p.matrix.messages[src][dst], want, "{src} -> {dst}");
                assert_eq!(p.matrix.bytes[src][dst], want * 16);
            }
        }
        assert!(p.rank_time_ns.iter().all(|&t| t > 0));
    }
}

#[test]
fn the_trace_is_valid_json_with_aligned_clocks() {
    let out = out_file("gasp-trace");
    let Some(outcome) = spmd_outcome(tool_options(3, "trace", &out), || {
        put_ring();
    }) else {
        return;
    };
    assert_eq!(outcome.exit_code, 0);
    let text = std::fs::read_to_string(&out).expect("trace written");
    std::fs::remove_file(&out).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert!(value["traceEvents"].is_array());
    let t: Trace = serde_json::from_value(value).unwrap();
    assert_eq!(t.other_data.ranks, 3);
    assert_eq!(t.other_data.dropped, 0);
    let x = |name: &str, pid: u32| -> Vec<(f64, f64)> {
        t.trace_events
            .iter()
            .filter(|e| e.ph == "X" && e.name == name && e.pid == pid)
            .map(|e| (e.ts, e.ts + e.dur.unwrap()))
            .collect()
    };
    for pid in 0..3 {
        assert_eq!(x("GASP_UPC_PUT", pid).len(), PUTS as usize);
        assert!(t.trace_events.iter().any(|e| e.ph == "M" && e.pid == pid));
    }
    assert!(t.trace_events.iter().all(|e| e.ts >= 0.0));
    // No rank leaves a barrier before every rank has entered it: with aligned clocks,
    // each barrier's latest start precedes its earliest end.
    let barriers: Vec<Vec<(f64, f64)>> = (0..3).map(|p| x("GASP_UPC_BARRIER", p)).collect();
    assert!(barriers.iter().all(|b| b.len() == 4));
    for i in 0..4 {
        let last_start = barriers.iter().map(|b| b[i].0).fold(f64::MIN, f64::max);
        let first_end = barriers.iter().map(|b| b[i].1).fold(f64::MAX, f64::min);
        assert!(
            last_start <= first_end + 5.0,
            "barrier {i}: a rank left at {first_end} µs before the last entered at {last_start} µs"
        );
    }
}

/// The line of [`leave`]'s `gex::exit` call, the call site its event names.
const LEAVE_LINE: u32 = line!() + 3;
/// Leaves the job non-collectively with `status`.
fn leave(status: i32) -> ! {
    gex::exit(status)
}

/// GASP §5.4.1: a rank that leaves through `gex::exit` (a non-collective exit) reports
/// one `GASP_UPC_NONCOLLECTIVE_EXIT`, of type `GASP_ATOMIC` (§3.2), carrying its exit
/// status, at the call site, as its last event. The tool hears of it before it is told
/// the run is over: the tracer's part of the rank that left is in the job's trace even
/// though the job fails (the others, stopped in a barrier, leave none).
#[test]
fn a_non_collective_exit_is_reported_with_its_status() {
    const STATUS: i32 = 7;
    for ranks in [2, 3, 4] {
        let out = out_file("gasp-exit");
        let Some(outcome) = spmd_outcome(tool_options(ranks, "trace", &out), || {
            let (_client, _ep, team) = Client::init("GASPX", Flags::NONE).unwrap();
            team.barrier();
            if team.rank() == team.size() - 1 {
                leave(STATUS);
            }
            // Waits for the rank that left until the launcher stops the job.
            team.barrier();
        }) else {
            continue;
        };
        assert_eq!(outcome.exit_code, STATUS, "{:?}", outcome.failure);
        let text = std::fs::read_to_string(&out).expect("trace written");
        std::fs::remove_file(&out).unwrap();
        let t: Trace = serde_json::from_str(&text).unwrap();
        let leaver = ranks as u32 - 1;
        let exits: Vec<&TraceEvent> = t
            .trace_events
            .iter()
            .filter(|e| e.name == "GASP_UPC_NONCOLLECTIVE_EXIT")
            .collect();
        assert_eq!(exits.len(), 1, "{ranks} ranks: {exits:?}");
        let exit = exits[0];
        assert_eq!((exit.ph.as_str(), exit.pid), ("i", leaver), "{exit:?}");
        assert_eq!(exit.args["status"], STATUS, "{exit:?}");
        assert_eq!(exit.args["line"], LEAVE_LINE, "{exit:?}");
        let file = exit.args["file"].as_str().unwrap_or_default();
        assert!(file.ends_with("gasp_tools.rs"), "{file}");
        let later: Vec<&TraceEvent> = t
            .trace_events
            .iter()
            .filter(|e| e.pid == leaver && e.ph != "M" && e.ts > exit.ts)
            .collect();
        assert!(later.is_empty(), "after the exit: {later:?}");
    }
}

#[test]
fn a_missing_tool_library_fails_the_job_with_its_name() {
    let mut opts = SpmdOptions::new(2);
    opts.env
        .push(("GASP_TOOL".into(), "/nonexistent/libtool.so".into()));
    let Some(outcome) = spmd_outcome(opts, || {
        let _ = Client::init("GASPT", Flags::NONE);
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert_ne!(outcome.exit_code, 0);
    for needle in ["Client::init", "GASP_TOOL=/nonexistent/libtool.so"] {
        assert!(report.contains(needle), "{report:?} does not name {needle}");
    }
}
