//! The built-in GASP tools on UPC++ programs (gasp-1.4 §3.3, with 2 to 4 ranks): a
//! profile's totals match the program's operation counts made while measuring, a
//! trace joins each RPC's send and execution by a flow across ranks, a thread's last
//! wait is kept by both tools, and measurement control decides what is counted.
// The tools see events only with the `gasp` feature (see `gasp_off.rs` for the build
// without it).
#![cfg(feature = "gasp")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use gasp::events::*;
use gasp::formats::{Profile, Trace, TraceEvent};
use gex::testing::{spmd_outcome, SpmdOptions};
use upcxx::{rank_me, rank_n, GlobalPtr};

const ITERS: u64 = 20;

/// Runs `body` as a job of `ranks` ranks with the built-in `tool` (`"profile"` or
/// `"trace"`), checks that it succeeded, and returns the job's output file, parsed;
/// `None` in the ranks' own processes. `name` keeps the files of tests running at
/// once apart.
fn with_tool<T: serde::de::DeserializeOwned>(
    tool: &str,
    name: &str,
    ranks: usize,
    body: impl FnOnce(),
) -> Option<T> {
    let out = std::env::temp_dir().join(format!("upcxx-{name}-{}.json", std::process::id()));
    let mut opts = SpmdOptions::new(ranks);
    opts.env.push(("GASP_TOOL".into(), tool.into()));
    opts.env
        .push(("GASP_OUT".into(), out.display().to_string()));
    if tool == "trace" {
        opts.env.push(("GASP_TRACE_BUFFER".into(), "1".into()));
    }
    let outcome = spmd_outcome(opts, body)?;
    assert_eq!(outcome.exit_code, 0);
    let parsed = serde_json::from_str(&std::fs::read_to_string(&out).expect(tool)).unwrap();
    std::fs::remove_file(&out).unwrap();
    Some(parsed)
}

#[test]
fn a_profile_of_a_upcxx_program_counts_its_operations() {
    for ranks in [2, 3, 4] {
        let Some(p) = with_tool::<Profile>("profile", "profile", ranks, || {
            upcxx::init();
            let cells: GlobalPtr<u64> = upcxx::new_array(4);
            let all = common::all_gather(&cells);
            let next = all[((rank_me() + 1) % rank_n()) as usize];
            for i in 0..ITERS {
                upcxx::rput(i, next).wait();
                upcxx::rget(next.add(1)).wait();
                upcxx::rpc((rank_me() + 1) % rank_n(), |x: u64| x + 1, (i,)).wait();
            }
            upcxx::barrier();
            upcxx::delete_array(cells);
            upcxx::finalize();
        }) else {
            continue;
        };
        let count = |tag: u32| -> u64 {
            p.events
                .iter()
                .filter(|r| r.tag == tag)
                .map(|r| r.count)
                .sum()
        };
        let n = ranks as u64;
        assert_eq!(count(GASP_UPC_NB_PUT_INIT), ITERS * n);
        assert_eq!(count(GASP_UPC_NB_GET_INIT), ITERS * n);
        assert_eq!(count(GASP_UPCXX_RPC_SEND), ITERS * n);
        assert_eq!(count(GASP_UPCXX_RPC_EXECUTE), ITERS * n);
        assert_eq!(count(GASP_UPCXX_FUTURE_WAIT), 3 * ITERS * n);
        for internal in [
            GASP_UPC_PUT,
            GASP_UPC_GET,
            GASP_GEX_POLL,
            GASP_GEX_AM_REQUEST,
        ] {
            assert_eq!(
                count(internal),
                0,
                "gex internals are hidden: {internal:#x}"
            );
        }
        assert_eq!(count(GASP_GEX_AM_HANDLER) + count(GASP_GEX_AM_REPLY), 0);
        let rpc_bytes: u64 = p
            .events
            .iter()
            .filter(|r| r.tag == GASP_UPCXX_RPC_SEND)
            .map(|r| r.bytes)
            .sum();
        assert!(
            rpc_bytes >= ITERS * n,
            "each call carries its serialized argument"
        );
        assert_eq!(count(GASP_UPC_ALLOC), n);
        assert_eq!(count(GASP_UPC_FREE), n);
        assert_eq!(count(GASP_UPC_COLLECTIVE_EXIT), n);
        for src in 0..ranks {
            let dst = (src + 1) % ranks;
            assert_eq!(p.matrix.messages[src][dst], 3 * ITERS, "{src} -> {dst}");
            assert!(p.matrix.bytes[src][dst] > 2 * ITERS * 8);
        }
    }
}

/// The `rpc_ff`s this rank has run.
static FF_RUN: AtomicU64 = AtomicU64::new(0);

fn count_ff() {
    FF_RUN.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn a_trace_draws_one_flow_from_each_rpc_send_to_its_execution() {
    for ranks in [2, 3, 4] {
        let Some(t) = with_tool::<Trace>("trace", "trace", ranks, || {
            upcxx::init();
            let n = rank_n();
            for i in 0..ITERS {
                upcxx::rpc((rank_me() + 1) % n, |x: u64| x + 1, (i,)).wait();
                // No payload: a Short AM carries it.
                upcxx::rpc_ff((rank_me() + n - 1) % n, count_ff, ());
                // To itself.
                upcxx::rpc(rank_me(), || rank_me(), ()).wait();
            }
            // A barrier does not wait for rpc_ffs in flight, and finalize leaves them
            // undefined (§2 ¶11): the program waits for its own.
            while FF_RUN.load(Ordering::Relaxed) < ITERS {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            upcxx::barrier();
            upcxx::finalize();
        }) else {
            continue;
        };
        let msgid = |e: &TraceEvent| e.args["msgid"].as_u64().expect("a msgid argument");
        let sends: Vec<&TraceEvent> = t
            .trace_events
            .iter()
            .filter(|e| e.ph == "X" && e.name == "GASP_UPCXX_RPC_SEND")
            .collect();
        let executions: Vec<&TraceEvent> = t
            .trace_events
            .iter()
            .filter(|e| e.ph == "X" && e.name == "GASP_UPCXX_RPC_EXECUTE")
            .collect();
        assert_eq!(sends.len() as u64, 3 * ITERS * ranks as u64);
        assert_eq!(executions.len(), sends.len());
        let flows = |ph: &str| -> std::collections::HashMap<String, &TraceEvent> {
            let all: Vec<&TraceEvent> = t
                .trace_events
                .iter()
                .filter(|e| e.cat == "flow" && e.ph == ph)
                .collect();
            let by_id: std::collections::HashMap<String, &TraceEvent> = all
                .iter()
                .map(|e| (e.id.clone().expect("a flow has an id"), *e))
                .collect();
            assert_eq!(by_id.len(), all.len(), "flow ids ({ph}) are unique");
            by_id
        };
        let (starts, finishes) = (flows("s"), flows("f"));
        assert_eq!(starts.len(), sends.len(), "one flow start per RPC");
        assert_eq!(finishes.len(), sends.len(), "one flow finish per RPC");
        for send in &sends {
            let id = msgid(send);
            assert_eq!(id >> 40, u64::from(send.pid), "the id names the sender");
            let target = send.args["target"].as_u64().unwrap();
            let key = format!("m{id}");
            let s = starts.get(&key).expect("a flow starts at each send");
            assert_eq!((s.pid, s.tid, s.ts), (send.pid, send.tid, send.ts));
            let f = finishes.get(&key).expect("the flow finishes");
            assert_eq!(f.pid as u64, target, "at the RPC's target");
            assert_eq!(f.bp.as_deref(), Some("e"), "bound to the enclosing slice");
            let exec = executions
                .iter()
                .find(|e| msgid(e) == id)
                .expect("the execution carries the send's id");
            assert_eq!(exec.pid as u64, target);
            assert_eq!(exec.args["source"].as_u64(), Some(u64::from(send.pid)));
            assert_eq!((f.pid, f.tid, f.ts), (exec.pid, exec.tid, exec.ts));
        }
    }
}

/// The complete events (slices) of `rank` named `name`, in time order.
fn slices<'a>(t: &'a Trace, rank: usize, name: &str) -> Vec<&'a TraceEvent> {
    let mut v: Vec<&TraceEvent> = t
        .trace_events
        .iter()
        .filter(|e| e.ph == "X" && e.pid as usize == rank && e.name == name)
        .collect();
    v.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    v
}

/// A wait's interval (an END with no arguments) is written by the tracer before the
/// thread's next record: one that nothing follows, measurement being off after it, is
/// written at finish.
#[test]
fn a_trace_keeps_a_threads_last_wait() {
    for ranks in [2, 3, 4] {
        let Some(t) = with_tool::<Trace>("trace", "last", ranks, || {
            upcxx::init();
            upcxx::rpc((rank_me() + 1) % rank_n(), || {}, ()).wait();
            gasp::control(false);
            upcxx::barrier();
            upcxx::finalize();
        }) else {
            continue;
        };
        for rank in 0..ranks {
            assert_eq!(
                slices(&t, rank, "GASP_UPCXX_RPC_SEND").len(),
                1,
                "rank {rank}"
            );
            let waits = slices(&t, rank, "GASP_UPCXX_FUTURE_WAIT");
            assert_eq!(waits.len(), 1, "rank {rank}");
            // Nothing of the rank's was drawn after it.
            let wait_end = waits[0].ts + waits[0].dur.expect("a duration");
            let later: Vec<&TraceEvent> = t
                .trace_events
                .iter()
                .filter(|e| e.ph == "X" && e.pid as usize == rank && e.ts > wait_end)
                .collect();
            assert!(later.is_empty(), "rank {rank}: {later:?}");
        }
    }
}

/// The profiler's twin of [`a_trace_keeps_a_threads_last_wait`]: a wait's END (no
/// arguments) is queued until the thread's next END with arguments; here none comes
/// (measurement is off by the barrier), so only finish counts it.
#[test]
fn a_profile_counts_a_threads_last_wait() {
    for ranks in [2, 3, 4] {
        let Some(p) = with_tool::<Profile>("profile", "plast", ranks, || {
            upcxx::init();
            upcxx::rpc((rank_me() + 1) % rank_n(), || {}, ()).wait();
            gasp::control(false);
            upcxx::barrier();
            upcxx::finalize();
        }) else {
            continue;
        };
        for rank in 0..ranks as u32 {
            let count = |tag: u32| -> u64 {
                p.events
                    .iter()
                    .filter(|r| r.rank == rank && r.tag == tag)
                    .map(|r| r.count)
                    .sum()
            };
            assert_eq!(count(GASP_UPCXX_RPC_SEND), 1, "rank {rank}");
            assert_eq!(count(GASP_UPCXX_FUTURE_WAIT), 1, "rank {rank}");
        }
    }
}

/// GASP §3.3 (`pupc_control`, §5.2): with measurement off the profiler measures nothing,
/// system or user events, until it is turned on again; `control` returns the previous
/// setting. Each rank makes `MEASURED` operations of each kind (a put, an ATOMIC promise
/// fulfilment, a user event's START and END), `UNMEASURED` more with measurement off,
/// then `RESUMED` more with it on: its profile counts `MEASURED + RESUMED` of each, and
/// its row of the matrix as many messages.
#[test]
fn a_profile_counts_only_what_happens_while_measuring() {
    const MEASURED: u64 = 5;
    const UNMEASURED: u64 = 7;
    const RESUMED: u64 = 3;
    for ranks in [2, 3, 4] {
        let Some(p) = with_tool::<Profile>("profile", "control", ranks, || {
            upcxx::init();
            let cells: GlobalPtr<u64> = upcxx::new_array(1);
            let all = common::all_gather(&cells);
            let next = all[((rank_me() + 1) % rank_n()) as usize];
            let phase = gasp::create_event("phase", None);
            let operations = |n: u64| {
                for i in 0..n {
                    upcxx::rput(i, next).wait();
                    upcxx::Promise::<()>::new().fulfill_anonymous(1);
                    gasp::event_start(phase, &[]);
                    gasp::event_end(phase, &[]);
                }
            };
            operations(MEASURED);
            assert!(gasp::control(false), "measuring until now");
            operations(UNMEASURED);
            assert!(!gasp::control(true), "not measuring until now");
            operations(RESUMED);
            upcxx::barrier();
            upcxx::delete_array(cells);
            upcxx::finalize();
        }) else {
            continue;
        };
        for rank in 0..ranks {
            let count = |name: &str| -> u64 {
                p.events
                    .iter()
                    .filter(|r| r.rank as usize == rank && r.name == name)
                    .map(|r| r.count)
                    .sum()
            };
            for name in [
                "GASP_UPC_NB_PUT_INIT",
                "GASP_UPCXX_PROMISE_FULFILL",
                "phase",
            ] {
                assert_eq!(count(name), MEASURED + RESUMED, "rank {rank}: {name}");
            }
            let next = (rank + 1) % ranks;
            assert_eq!(
                p.matrix.messages[rank][next],
                MEASURED + RESUMED,
                "{rank} -> {next}"
            );
        }
    }
}

/// The built-in tools take a library interval's START time when it begins and record
/// the interval at its END (`gasp::dispatch`): an RPC body's operations lie inside the
/// execution that runs them, and an interval is kept if, and only if, it began while
/// measuring (GASP §3.3), whatever `control` says by its END.
#[test]
fn intervals_are_drawn_from_their_start_and_kept_if_begun_while_measuring() {
    for ranks in [2, 3, 4] {
        let Some(t) = with_tool::<Trace>("trace", "nest", ranks, || {
            upcxx::init();
            let cells: GlobalPtr<u64> = upcxx::new_array(2);
            let all = common::all_gather(&cells);
            let next_rank = (rank_me() + 1) % rank_n();
            let next = all[next_rank as usize];
            // Each body runs on `next_rank` and puts into that rank's own cells (the
            // reply waits for the put's future). The previous rank's three calls run
            // there one after the other (it waits for each), and nothing else turns
            // measurement on or off there.
            upcxx::rpc(next_rank, |p: GlobalPtr<u64>| upcxx::rput(7, p), (next,)).wait();
            let stop = |p: GlobalPtr<u64>| {
                gasp::control(false);
                upcxx::rput(8, p)
            };
            upcxx::rpc(next_rank, stop, (next,)).wait();
            let resume = |p: GlobalPtr<u64>| {
                gasp::control(true);
                upcxx::rput(9, p.add(1))
            };
            upcxx::rpc(next_rank, resume, (next,)).wait();
            upcxx::barrier();
            upcxx::delete_array(cells);
            upcxx::finalize();
        }) else {
            continue;
        };
        for rank in 0..ranks {
            let executions = slices(&t, rank, "GASP_UPCXX_RPC_EXECUTE");
            let puts = slices(&t, rank, "GASP_UPC_NB_PUT_INIT");
            // The third execution began with measurement off (the second body turned it
            // off); the second ended with it off, and is kept.
            assert_eq!(executions.len(), 2, "rank {rank}: {executions:?}");
            // The second body's put came after it turned measurement off.
            assert_eq!(puts.len(), 2, "rank {rank}: {puts:?}");
            let addr = |e: &TraceEvent| {
                let a = e.args["dst"]["addr"].as_str().expect("a dst address");
                u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap()
            };
            assert_eq!(
                addr(puts[1]),
                addr(puts[0]) + 8,
                "rank {rank}: first p, then p + 1"
            );
            let end = |e: &TraceEvent| e.ts + e.dur.expect("a complete event has a duration");
            // Timestamps are microseconds in f64: a nanosecond of rounding.
            let within = |inner: &TraceEvent, outer: &TraceEvent| {
                inner.tid == outer.tid
                    && inner.ts >= outer.ts - 1e-3
                    && end(inner) <= end(outer) + 1e-3
            };
            assert!(
                within(puts[0], executions[0]),
                "rank {rank}: the body's put inside its execution: {:?} in {:?}",
                puts[0],
                executions[0]
            );
            assert!(
                puts[1].ts > end(executions[1]),
                "rank {rank}: the third body's put after the kept executions"
            );
        }
    }
}
