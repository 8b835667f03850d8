//! RPCs with completion objects: UPC++ spec §9.3 (the `cxs` variants of `rpc` and
//! `rpc_ff`), with the notifications of §7.1–§7.2.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gex::testing::spmd;
use upcxx::{
    current_persona, operation_cx, progress, rank_me, rank_n, rpc, rpc_ff_with, rpc_with,
    source_cx, Future, Persona, PersonaScope, ProgressLevel, Promise, Rank,
};

mod common;

fn user_progress() {
    progress(ProgressLevel::User);
}

/// Makes user-level progress until `done`.
fn progress_until(mut done: impl FnMut() -> bool) {
    while !done() {
        user_progress();
    }
}

/// §9.3 ¶28–¶29: source completion is notified as a future, operation completion as a
/// future of the function's result, computed on the target; one future per request,
/// in `|` order (§7.2.2). On every rank count from 1 to 5, to every rank.
#[test]
fn futures_give_source_completion_and_the_result() {
    for n in 1..=5 {
        spmd(n, || {
            upcxx::init();
            let me = u64::from(rank_me());
            // The futures of source and operation completion of each call.
            type Call = (Future<()>, Future<(Rank, u64)>);
            let calls: Vec<Call> = (0..rank_n())
                .map(|r| {
                    rpc_with(
                        r,
                        source_cx::as_future() | operation_cx::as_future(),
                        |x: u64| (rank_me(), x + 1),
                        (me * 100 + u64::from(r),),
                    )
                })
                .collect();
            for (r, (sent, done)) in calls.into_iter().enumerate() {
                sent.wait();
                assert_eq!(done.wait(), (r as Rank, me * 100 + r as u64 + 1));
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// §7.1 ¶14–¶15: notifications happen only during user-level progress, even source
/// completion, which happens inside the call.
#[test]
fn notifications_wait_for_user_level_progress() {
    spmd(2, || {
        upcxx::init();
        let (sent, done) = rpc_with(
            1 - rank_me(),
            source_cx::as_future() | operation_cx::as_future(),
            |x: u32| x,
            (5u32,),
        );
        assert!(!sent.ready(), "source notified inside the call");
        assert!(!done.ready(), "operation notified inside the call");
        progress(ProgressLevel::Internal);
        assert!(!sent.ready(), "source notified by internal progress");
        user_progress();
        assert!(
            sent.ready(),
            "source notified at the next user-level progress"
        );
        assert_eq!(done.wait(), 5);
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// §7.1 ¶8: a promise gets one dependency per request, fulfilled with the result; for a
/// function returning `()`, a promise of any type has an anonymous dependency fulfilled
/// (§9.3 ¶24).
#[test]
fn promises_count_every_call() {
    for n in [1, 3, 5] {
        spmd(n, || {
            upcxx::init();
            let all_ran = Promise::<String>::new();
            let sent = Promise::<()>::new();
            for r in 0..rank_n() {
                rpc_with(
                    r,
                    source_cx::as_promise(&sent) | operation_cx::as_promise(&all_ran),
                    || (),
                    (),
                );
            }
            // The result satisfies the initial dependency; the calls, the others.
            all_ran.fulfill_result("every call ran".into());
            sent.finalize().wait();
            assert_eq!(all_ran.get_future().wait(), "every call ran");

            let result = Promise::<u64>::new();
            rpc_with(
                (rank_me() + 1) % rank_n(),
                operation_cx::as_promise(&result),
                |x: u64| x * 3,
                (14u64,),
            );
            assert_eq!(result.finalize().wait(), 42);
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// §7.1 ¶9, §10.4 ¶11–¶13: an LPC request runs the callback with the result on the
/// persona named, here one held by another thread; a source LPC takes no arguments.
#[test]
fn lpcs_run_on_the_persona_named() {
    spmd(2, || {
        upcxx::init();
        let worker = Persona::new();
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (w, stop) = (worker.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let _scope = PersonaScope::new(&w);
                while stop.load(Ordering::Acquire) == 0 {
                    user_progress();
                }
                std::thread::current().id()
            })
        };
        let sources = Arc::new(AtomicUsize::new(0));
        let target = 1 - rank_me();
        for i in 0..4u64 {
            let (got, sources) = (Arc::clone(&got), Arc::clone(&sources));
            rpc_with(
                target,
                source_cx::as_lpc(&current_persona(), move || {
                    sources.fetch_add(1, Ordering::AcqRel);
                }) | operation_cx::as_lpc(&worker, move |v: u64| {
                    got.lock().unwrap().push((v, std::thread::current().id()));
                }),
                |i: u64| 10 * i + u64::from(rank_me()),
                (i,),
            );
        }
        progress_until(|| got.lock().unwrap().len() == 4 && sources.load(Ordering::Acquire) == 4);
        stop.store(1, Ordering::Release);
        let worker_thread = thread.join().unwrap();
        let mut got = got.lock().unwrap().clone();
        got.sort_by_key(|(v, _)| *v);
        let want: Vec<u64> = (0..4).map(|i| 10 * i + u64::from(target)).collect();
        assert_eq!(got.iter().map(|(v, _)| *v).collect::<Vec<_>>(), want);
        assert!(
            got.iter().all(|(_, t)| *t == worker_thread),
            "an operation LPC ran off its persona's thread"
        );
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// §9.3 ¶3 and ¶22: when the function returns a future, operation completion waits for
/// it and produces its value.
#[test]
fn a_returned_future_is_awaited_before_operation_completion() {
    spmd(3, || {
        upcxx::init();
        let next = (rank_me() + 1) % rank_n();
        // The target's function returns the future of an RPC to its own next rank.
        let done = rpc_with(
            next,
            operation_cx::as_future(),
            |x: u64| {
                rpc(
                    (rank_me() + 1) % rank_n(),
                    |x: u64| (rank_me(), x),
                    (x + 1,),
                )
            },
            (7u64,),
        );
        assert_eq!(done.wait(), ((next + 1) % rank_n(), 8));
        upcxx::barrier();
        upcxx::finalize();
    });
}

static RAN: AtomicU64 = AtomicU64::new(0);

/// §9.3 ¶9: `rpc_ff` notifies source completion; the function still runs on the
/// target. From every rank to every rank, on 1 to 5 ranks.
#[test]
fn rpc_ff_notifies_source_completion() {
    for n in 1..=5 {
        spmd(n, || {
            upcxx::init();
            let sent = Promise::<()>::new();
            let futures: Vec<Future<()>> = (0..rank_n())
                .map(|r| {
                    rpc_ff_with(
                        r,
                        source_cx::as_future()
                            | source_cx::as_promise(&sent)
                            | source_cx::as_buffered(),
                        |from: Rank| {
                            RAN.fetch_add(1 << (8 * from), Ordering::AcqRel);
                        },
                        (rank_me(),),
                    )
                })
                .collect();
            assert!(
                futures.iter().all(|f| !f.ready()),
                "notified inside the call"
            );
            upcxx::when_all(futures).wait();
            sent.finalize().wait();
            rpc_ff_with(0, source_cx::as_blocking(), || (), ());
            // One call from each rank.
            let want: u64 = (0..rank_n()).map(|r| 1u64 << (8 * r)).sum();
            progress_until(|| RAN.load(Ordering::Acquire) == want);
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// §7.2.1 ¶3: a promise whose count is zero is refused before anything is sent.
#[test]
fn a_ready_promise_is_refused_before_sending() {
    spmd(1, || {
        upcxx::init();
        let ready = Promise::<()>::new();
        ready.fulfill_anonymous(1);
        let text = common::panic_text(|| {
            rpc_with(
                0,
                operation_cx::as_promise(&ready),
                || {
                    RAN.fetch_add(1, Ordering::AcqRel);
                },
                (),
            );
        });
        assert!(
            text.contains("upcxx::rpc") && text.contains("dependency count"),
            "{text}"
        );
        for _ in 0..3 {
            user_progress();
        }
        assert_eq!(RAN.load(Ordering::Acquire), 0, "the refused call was sent");
        upcxx::finalize();
    });
}

/// A call that fails after its completions were armed (a rank outside the job,
/// arguments that do not serialize) gives back what arming took: a promise's
/// dependency is satisfied again, so the program's `finalize().wait()` returns, and no
/// reply cell stays behind (its `as_future` request's future is dropped with the
/// failing call). On 1 and 2 ranks.
#[test]
fn a_failed_call_leaves_its_promises_as_they_were() {
    for n in 1..=2 {
        spmd(n, || {
            upcxx::init();
            let op = Promise::<u64>::new();
            let src = Promise::<()>::new();
            let text = common::panic_text(|| {
                drop(rpc_with(
                    rank_n(),
                    operation_cx::as_promise(&op) | operation_cx::as_future(),
                    |x: u64| x,
                    (1u64,),
                ));
            });
            assert!(text.contains("upcxx::rpc"), "{text}");
            let text = common::panic_text(|| {
                rpc_with(
                    0,
                    source_cx::as_promise(&src) | operation_cx::as_promise(&op),
                    |_: common::Unserializable| 7u64,
                    (common::Unserializable,),
                );
            });
            assert!(text.contains("could not be serialized"), "{text}");
            let text = common::panic_text(|| {
                rpc_ff_with(
                    0,
                    source_cx::as_promise(&src),
                    |_: common::Unserializable| {},
                    (common::Unserializable,),
                );
            });
            assert!(text.contains("upcxx::rpc_ff"), "{text}");
            // The promises wait on nothing the failed calls took: their own
            // dependencies alone (the initial one and the result's), fulfilled here.
            op.require_anonymous(1);
            op.fulfill_result(5);
            assert_eq!(op.finalize().wait(), 5);
            src.finalize().wait();
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}
