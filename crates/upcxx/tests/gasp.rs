//! GASP events of the UPC++ layer (gasp-1.4 §5.4 mapped to UPC++ operations), with 2 to
//! 4 ranks, as a tool that records them sees them: each operation is reported once, at
//! the user's call site, with the spec's arguments, and not also as the gex operations
//! that implement it; the language is UPC++; promise fulfilments are ATOMIC events. The
//! built-in tools' files are tested in `gasp_tools.rs`.
// The events these tests look for are compiled only with the `gasp` feature (see
// `gasp_off.rs` for the build without it).
#![cfg(feature = "gasp")]

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use gasp::events::*;
use gasp::{Arg, Event, EventType, GPtr, Tool};
use gex::testing::spmd;
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
            let mut events: Vec<Rec> = rec.0.lock().unwrap()[mark..]
                .iter()
                .filter(|r| r.tag != GASP_UPCXX_FUTURE_WAIT)
                .cloned()
                .collect();
            let _ = got;
            // To a segment not mapped here a transfer may still be pending at return (a
            // small one travels as messages to the owner), its handle then an event's:
            // only the mapped case fixes the handle.
            if !next.is_local() {
                for r in events.iter_mut().filter(|r| {
                    r.ty == EventType::End
                        && [GASP_UPC_NB_PUT_INIT, GASP_UPC_NB_GET_INIT].contains(&r.tag)
                }) {
                    *r.args.last_mut().unwrap() = format!("{:?}", Arg::Handle(NB_TRIVIAL));
                }
            }
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
            // One progress call readies it where the put completes at initiation; to
            // another host it takes the owner's answer.
            let mut progress_calls = 0;
            while !f.ready() {
                upcxx::progress(upcxx::ProgressLevel::User);
                progress_calls += 1;
            }
            f.wait();
            assert_eq!(upcxx::make_future(3u64).wait(), 3);
            assert_eq!(waits(mark), Vec::<u32>::new());
            let progress = rec.0.lock().unwrap()[mark..]
                .iter()
                .filter(|r| r.tag == GASP_UPCXX_PROGRESS)
                .count();
            assert_eq!(
                progress,
                2 * progress_calls,
                "each progress call's START and END"
            );

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
