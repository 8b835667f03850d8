//! GASP events of the UPC++ layer (gasp-1.4 §5.4 mapped to UPC++ operations), with 2 to
//! 4 ranks: each operation is reported once, at the user's call site, with the spec's
//! arguments, and not also as the gex operations that implement it; the language is
//! UPC++; promise fulfilments are ATOMIC events; a profile's totals match the program's
//! operation counts made while measuring (§3.3); a trace joins each RPC's send and
//! execution by a flow across ranks.
// The events these tests look for are compiled only with the `gasp` feature (see
// `gasp_off.rs` for the build without it).
#![cfg(feature = "gasp")]

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use gasp::events::*;
use gasp::formats::{Profile, Trace, TraceEvent};
use gasp::{Arg, Event, EventType, GPtr, Tool};
use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use upcxx::{rank_me, rank_n, GlobalPtr};

#[derive(Clone, Debug, PartialEq)]
struct Rec {
    tag: u32,
    ty: EventType,
    line: u32,
    args: Vec<String>,
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Rec>>);

struct Shared(Arc<Recorder>);

impl Tool for Shared {
    fn event_notify(&self, e: &Event<'_>) {
        self.0 .0.lock().unwrap().push(Rec {
            tag: e.tag,
            ty: e.ty,
            line: e.location.line(),
            args: e.args.iter().map(|a| format!("{a:?}")).collect(),
        });
    }
    fn control(&self, _on: bool) -> bool {
        true
    }
    fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
        USEREVT_START
    }
}

fn install() -> Arc<Recorder> {
    static REC: OnceLock<Arc<Recorder>> = OnceLock::new();
    let rec = REC.get_or_init(Arc::default).clone();
    let shared = rec.clone();
    gasp::register_tool(move |info, _| {
        assert_eq!(info.language, gasp::Language::Upcxx);
        Box::new(Shared(shared))
    });
    rec
}

fn expect(tag: u32, ty: EventType, line: u32, args: &[Arg<'_>]) -> Rec {
    Rec {
        tag,
        ty,
        line,
        args: args.iter().map(|a| format!("{a:?}")).collect(),
    }
}

fn pair(tag: u32, line: u32, start: &[Arg<'_>], end: &[Arg<'_>]) -> [Rec; 2] {
    [
        expect(tag, EventType::Start, line, start),
        expect(tag, EventType::End, line, end),
    ]
}

/// The GASP form of a pointer owned by `rank` at `addr` in the owner's address space.
fn gptr(rank: u32, addr: usize) -> Arg<'static> {
    Arg::GPtr(GPtr {
        rank,
        addr: addr as u64,
    })
}

#[test]
fn each_operation_is_one_event_at_the_call_site() {
    for ranks in [2, 3] {
        spmd(ranks, || {
            let rec = install();
            upcxx::init();
            let cell: GlobalPtr<u64> = upcxx::new_(0u64);
            // The owner's address of each cell is its local address on its owner.
            let all = common::all_gather(&(cell, cell.local() as usize));
            let next_rank = (rank_me() + 1) % rank_n();
            let (next, next_addr) = all[next_rank as usize];
            let mark = rec.0.lock().unwrap().len();
            let value = 42u64;
            let put_line = line!() + 1;
            upcxx::rput(value, next).wait();
            let get_line = line!() + 1;
            let got = upcxx::rget(next).wait();
            let alloc_line = line!() + 1;
            let block = upcxx::allocate(64, 16).unwrap();
            let free_line = line!() + 1;
            upcxx::deallocate(block);
            let barrier_line = line!() + 1;
            upcxx::barrier();
            let events: Vec<Rec> = rec.0.lock().unwrap()[mark..]
                .iter()
                .filter(|r| r.tag != GASP_UPCXX_FUTURE_WAIT)
                .cloned()
                .collect();
            let _ = got;
            // rput takes the value by copy: its source address is the library's.
            let src = events
                .iter()
                .find(|r| r.tag == GASP_UPC_NB_PUT_INIT)
                .map(|r| r.args[2].clone())
                .unwrap_or_default();
            assert!(src.starts_with("Ptr("), "{src}");
            let src: usize = src[4..src.len() - 1].parse().unwrap();
            let put = [
                Arg::Int(1),
                gptr(next_rank, next_addr),
                Arg::Ptr(src),
                Arg::Bytes(8),
            ];
            let mut put_end = put.to_vec();
            put_end.push(Arg::Handle(NB_TRIVIAL));
            let b = [Arg::Int(0), Arg::Int(0)];
            let mut expected = Vec::new();
            expected.extend(pair(GASP_UPC_NB_PUT_INIT, put_line, &put, &put_end));
            // The get's destination is internal to rget: compare it apart.
            let get_events: Vec<Rec> = events
                .iter()
                .filter(|r| r.tag == GASP_UPC_NB_GET_INIT)
                .cloned()
                .collect();
            assert_eq!(get_events.len(), 2);
            assert!(get_events.iter().all(|r| r.line == get_line));
            assert_eq!(
                get_events[0].args[2],
                format!("{:?}", gptr(next_rank, next_addr))
            );
            assert_eq!(get_events[0].args[3], "Bytes(8)");
            assert_eq!(
                get_events[1].args[4],
                format!("{:?}", Arg::Handle(NB_TRIVIAL))
            );
            expected.extend(get_events);
            let me = rank_me();
            let block_arg = gptr(me, block.local() as usize);
            expected.extend(pair(
                GASP_UPC_ALLOC,
                alloc_line,
                &[Arg::Size(64)],
                &[Arg::Size(64), block_arg],
            ));
            expected.extend(pair(GASP_UPC_FREE, free_line, &[block_arg], &[block_arg]));
            expected.extend(pair(GASP_UPC_BARRIER, barrier_line, &b, &b));
            assert_eq!(events, expected, "rank {me}");
            upcxx::delete_(cell);
            upcxx::finalize();
        });
    }
}

/// `GASP_UPCXX_FUTURE_WAIT` spans a wait that finds its future not ready (the time it
/// spends making progress), at the wait's call site; a wait on a ready future reports
/// nothing, as waiting takes no time then. Many waits in a row are each reported (the
/// progress they make skips polls by a count of its own while a tool is attached).
#[test]
fn waits_on_futures_not_ready_are_reported_at_their_call_site() {
    for ranks in [2, 4] {
        spmd(ranks, || {
            let rec = install();
            upcxx::init();
            let cell: GlobalPtr<u64> = upcxx::new_(0u64);
            let all = common::all_gather(&cell);
            let next_rank = (rank_me() + 1) % rank_n();
            let next = all[next_rank as usize];
            let mark = rec.0.lock().unwrap().len();
            let waits = |from: usize| -> Vec<u32> {
                rec.0.lock().unwrap()[from..]
                    .iter()
                    .filter(|r| r.tag == GASP_UPCXX_FUTURE_WAIT)
                    .map(|r| r.line)
                    .collect()
            };
            let put_wait = line!() + 1;
            upcxx::rput(1u64, next).wait();
            let rpc_wait = line!() + 1;
            assert_eq!(upcxx::rpc(next_rank, |x: u64| x + 1, (1u64,)).wait(), 2);
            assert_eq!(waits(mark), [put_wait, put_wait, rpc_wait, rpc_wait]);

            // Ready before the wait: a progress readied it, or it was made ready.
            let mark = rec.0.lock().unwrap().len();
            let f = upcxx::rput(2u64, next);
            upcxx::progress(upcxx::ProgressLevel::User);
            f.wait();
            assert_eq!(upcxx::make_future(3u64).wait(), 3);
            assert_eq!(waits(mark), Vec::<u32>::new());
            let progress = rec.0.lock().unwrap()[mark..]
                .iter()
                .filter(|r| r.tag == GASP_UPCXX_PROGRESS)
                .count();
            assert_eq!(progress, 2, "the progress call's START and END");

            let mark = rec.0.lock().unwrap().len();
            let loop_wait = line!() + 2;
            for i in 0..100u64 {
                upcxx::rput(i, next).wait();
            }
            let lines = waits(mark);
            assert_eq!(lines.len(), 200);
            assert!(lines.iter().all(|&l| l == loop_wait));
            upcxx::barrier();
            assert_eq!(upcxx::rget(cell).wait(), 99);
            upcxx::delete_(cell);
            upcxx::finalize();
        });
    }
}

/// `GASP_UPCXX_PROMISE_FULFILL`, an implementation-specific event (GASP §5.5) of type
/// `GASP_ATOMIC` (§3.2): each `Promise::fulfill_anonymous` and `fulfill_result` is one
/// event at its call site (§3.2's `linenum`), whose `count` (the event table's one
/// argument) is the number of dependencies it satisfies. One made in an RPC body is
/// reported too, by the rank that runs the body.
#[test]
fn each_promise_fulfilment_is_one_atomic_event_with_its_count() {
    for ranks in [2, 3, 4] {
        spmd(ranks, || {
            let rec = install();
            upcxx::init();
            let next = (rank_me() + 1) % rank_n();
            // Taken before the barrier: the previous rank's RPC may run here as soon as
            // that rank leaves it.
            let mark = rec.0.lock().unwrap().len();
            upcxx::barrier();
            let anonymous = upcxx::Promise::<()>::new();
            anonymous.require_anonymous(3);
            let one_line = line!() + 2;
            for _ in 0..2 {
                anonymous.fulfill_anonymous(1);
            }
            let two_line = line!() + 1;
            anonymous.fulfill_anonymous(2);
            assert!(
                anonymous.get_future().ready(),
                "1 + 3 dependencies satisfied"
            );
            let valued = upcxx::Promise::new();
            let result_line = line!() + 1;
            valued.fulfill_result(rank_me());
            assert_eq!(valued.get_future().wait(), rank_me());
            let body_line = line!() + 2;
            let body = || {
                upcxx::Promise::new().fulfill_result(rank_me());
            };
            upcxx::rpc(next, body, ()).wait();
            upcxx::barrier();
            let (in_body, here): (Vec<Rec>, Vec<Rec>) = rec.0.lock().unwrap()[mark..]
                .iter()
                .filter(|r| r.tag == GASP_UPCXX_PROMISE_FULFILL)
                .cloned()
                .partition(|r| r.line == body_line);
            let fulfil = |line: u32, count: usize| {
                expect(
                    GASP_UPCXX_PROMISE_FULFILL,
                    EventType::Atomic,
                    line,
                    &[Arg::Size(count)],
                )
            };
            let me = rank_me();
            assert_eq!(
                here,
                [
                    fulfil(one_line, 1),
                    fulfil(one_line, 1),
                    fulfil(two_line, 2),
                    fulfil(result_line, 1),
                ],
                "rank {me}"
            );
            assert_eq!(
                in_body,
                [fulfil(body_line, 1)],
                "rank {me}: the previous rank's RPC"
            );
            upcxx::finalize();
        });
    }
}

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

#[test]
fn a_trace_draws_one_flow_from_each_rpc_send_to_its_execution() {
    for ranks in [2, 3, 4] {
        let Some(t) = with_tool::<Trace>("trace", "trace", ranks, || {
            upcxx::init();
            let n = rank_n();
            for i in 0..ITERS {
                upcxx::rpc((rank_me() + 1) % n, |x: u64| x + 1, (i,)).wait();
                // No payload: a Short AM carries it.
                upcxx::rpc_ff((rank_me() + n - 1) % n, || {}, ());
                // To itself.
                upcxx::rpc(rank_me(), || rank_me(), ()).wait();
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
