//! Remote procedure calls: UPC++ spec ch. 9 (and §6.5 ¶6 for view lifetimes).
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use common::{panic_message, progress_until, Unserializable};
use gex::testing::spmd;
use upcxx::serialization::{make_view, View};
use upcxx::{
    progress, rank_me, rank_n, rpc, rpc_ff, when_all, Future, GlobalPtr, ProgressLevel, Promise,
};

mod common;

/// §9.3 ¶13–¶14: the future gives the function's return value, computed on the target.
#[test]
fn rpc_returns_the_value_computed_on_the_target() {
    for n in 1..=4 {
        spmd(n, || {
            upcxx::init();
            let me = rank_me();
            let futs: Vec<Future<(u32, u64)>> = (0..rank_n())
                .map(|r| {
                    rpc(
                        r,
                        |x: u64| (rank_me(), x * 3),
                        (u64::from(me) + 100 * u64::from(r),),
                    )
                })
                .collect();
            for (r, f) in futs.into_iter().enumerate() {
                let r = r as u32;
                assert_eq!(f.wait(), (r, 3 * (u64::from(me) + 100 * u64::from(r))));
            }
            upcxx::finalize();
        });
    }
}

/// The brief's signature example: several arguments of different types, a closure
/// without captures.
#[test]
fn rpc_with_several_arguments() {
    spmd(2, || {
        upcxx::init();
        let s = String::from("hello");
        let f = rpc(
            1 - rank_me(),
            |x: u64, s: String| x + s.len() as u64,
            (5u64, s),
        );
        assert_eq!(f.wait(), 10);
        // No arguments, and eight.
        assert_eq!(rpc(1 - rank_me(), || 7u8, ()).wait(), 7);
        let eight = rpc(
            1 - rank_me(),
            |a: u8, b: u16, c: u32, d: u64, e: i8, f: String, g: Vec<u32>, h: Option<bool>| {
                format!("{a} {b} {c} {d} {e} {f} {g:?} {h:?}")
            },
            (
                1u8,
                2u16,
                3u32,
                4u64,
                -5i8,
                "six".to_string(),
                vec![7u32],
                Some(true),
            ),
        );
        assert_eq!(eight.wait(), "1 2 3 4 -5 six [7] Some(true)");
        upcxx::finalize();
    });
}

fn add_one(x: i64) -> i64 {
    x + 1
}

/// §6.3: plain functions travel too.
#[test]
fn rpc_of_a_fn_item() {
    spmd(3, || {
        upcxx::init();
        let next = (rank_me() + 1) % rank_n();
        assert_eq!(rpc(next, add_one, (41i64,)).wait(), 42);
        upcxx::finalize();
    });
}

static RAN: AtomicUsize = AtomicUsize::new(0);

/// §9.3 ¶7 and ¶26: the function never runs synchronously, even on the calling rank;
/// it runs during a later user-level progress.
#[test]
fn rpc_to_self_runs_only_during_later_progress() {
    spmd(1, || {
        upcxx::init();
        rpc_ff(
            rank_me(),
            || {
                RAN.fetch_add(1, Ordering::SeqCst);
            },
            (),
        );
        let f = rpc(rank_me(), || RAN.fetch_add(10, Ordering::SeqCst), ());
        assert_eq!(RAN.load(Ordering::SeqCst), 0, "ran inside rpc/rpc_ff");
        progress(ProgressLevel::Internal);
        assert_eq!(
            RAN.load(Ordering::SeqCst),
            0,
            "ran during internal progress"
        );
        assert!(!f.ready());
        progress_until(|| RAN.load(Ordering::SeqCst) == 11);
        assert_eq!(f.wait(), 1);
        upcxx::finalize();
    });
}

thread_local! {
    static ORDER: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// A rank's RPCs to itself, small and fragment-sized alike, run only during user-level
/// progress (§9.3 ¶7), in the order they were sent, with their arguments whole.
#[test]
fn rpcs_to_self_run_in_the_order_sent_at_any_size() {
    for n in [1, 3] {
        spmd(n, || {
            upcxx::init();
            const SENT: u32 = 40;
            for i in 0..SENT {
                // Every third one is larger than one Active Message.
                let big: Vec<u8> = if i.is_multiple_of(3) {
                    (0..200_000u32).map(|j| (j ^ i) as u8).collect()
                } else {
                    Vec::new()
                };
                rpc_ff(
                    rank_me(),
                    |i: u32, big: Vec<u8>| {
                        if i.is_multiple_of(3) {
                            assert_eq!(big.len(), 200_000, "message {i}");
                            assert!(big.iter().zip(0u32..).all(|(&b, j)| b == (j ^ i) as u8));
                        }
                        ORDER.with(|o| o.borrow_mut().push(i));
                    },
                    (i, big),
                );
            }
            assert!(ORDER.with(|o| o.borrow().is_empty()), "ran inside rpc_ff");
            let echo = rpc(
                rank_me(),
                |v: Vec<u64>| v,
                ((0..100_000u64).collect::<Vec<_>>(),),
            );
            progress_until(|| ORDER.with(|o| o.borrow().len()) == SENT as usize);
            ORDER.with(|o| assert!(o.borrow().iter().copied().eq(0..SENT), "{:?}", o.borrow()));
            assert!(echo.wait().into_iter().eq(0..100_000u64));
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

static INNER: AtomicBool = AtomicBool::new(false);

/// §9.3 ¶7: also not synchronously when the caller is itself inside user-level progress
/// (an RPC issuing an RPC to its own rank).
#[test]
fn rpc_issued_during_progress_is_not_run_inside_it() {
    spmd(1, || {
        upcxx::init();
        let f = rpc(
            rank_me(),
            || {
                rpc_ff(rank_me(), || INNER.store(true, Ordering::SeqCst), ());
                for _ in 0..10 {
                    progress(ProgressLevel::Internal);
                }
                INNER.load(Ordering::SeqCst)
            },
            (),
        );
        assert!(!f.wait(), "the inner RPC ran inside the outer one");
        progress_until(|| INNER.load(Ordering::SeqCst));
        upcxx::finalize();
    });
}

thread_local! {
    static PENDING: RefCell<Option<Promise<u64>>> = const { RefCell::new(None) };
}

/// §9.1 ¶3: a function returning a future: the reply waits until that future is ready,
/// and the initiator's future has the inner value (flattened).
#[test]
fn rpc_returning_a_future_replies_when_it_is_ready() {
    for n in [1, 2] {
        spmd(n, || {
            upcxx::init();
            let target = rank_n() - 1;
            if rank_me() == 0 {
                // A ready future is flattened.
                let f: Future<u64> = rpc(target, |x: u64| upcxx::make_future(x + 1), (1u64,));
                assert_eq!(f.wait(), 2);
                // A future that becomes ready only when a later RPC fulfils it.
                let f: Future<u64> = rpc(
                    target,
                    || {
                        let p = Promise::new();
                        let fut = p.get_future();
                        PENDING.with(|s| *s.borrow_mut() = Some(p));
                        fut.then(|v| v * 2)
                    },
                    (),
                );
                for _ in 0..1000 {
                    progress(ProgressLevel::User);
                }
                assert!(!f.ready(), "replied before the returned future was ready");
                rpc_ff(
                    target,
                    |v: u64| {
                        let p = PENDING.with(|s| s.borrow_mut().take()).expect("stored");
                        p.fulfill_result(v);
                    },
                    (21u64,),
                );
                assert_eq!(f.wait(), 42);
            }
            upcxx::finalize();
        });
    }
}

static DELIVERED: AtomicU64 = AtomicU64::new(0);

/// §9.3 ¶6: every rpc_ff is delivered exactly once.
#[test]
fn rpc_ff_is_delivered_exactly_once() {
    for n in 1..=4 {
        spmd(n, || {
            upcxx::init();
            const PER_PEER: u64 = 2000;
            for i in 0..PER_PEER {
                for r in 0..rank_n() {
                    rpc_ff(
                        r,
                        |x: u64| {
                            DELIVERED.fetch_add(x, Ordering::Relaxed);
                        },
                        (1 + (i % 2),),
                    );
                }
            }
            // Each peer sent PER_PEER messages, half with 1 and half with 2.
            let expected = u64::from(rank_n()) * (PER_PEER / 2) * 3;
            progress_until(|| DELIVERED.load(Ordering::Relaxed) >= expected);
            upcxx::barrier();
            for _ in 0..100 {
                progress(ProgressLevel::User);
            }
            assert_eq!(DELIVERED.load(Ordering::Relaxed), expected);
            upcxx::finalize();
        });
    }
}

static RAN_BEFORE_THE_PANIC: AtomicU64 = AtomicU64::new(0);
static RAN_AFTER_THE_PANIC: AtomicU64 = AtomicU64::new(0);

/// An RPC whose function panics has run; the panic leaves the progress call that ran
/// it (and a program may catch it there), and the RPCs queued with it are neither
/// lost nor run twice: the calls before it reply once, those after it run at the next
/// progress. Each rank sends its peer (itself, alone: all three then share one page of
/// its queue) a call, a panicking `rpc_ff` and another call, `rounds` times, and
/// catches the peer's panics in its own progress.
#[test]
fn rpcs_queued_with_one_that_panics_run_once() {
    for n in 1..=3 {
        spmd(n, || {
            upcxx::init();
            let peer = (rank_me() + 1) % rank_n();
            let rounds = 20;
            let mut futures = Vec::new();
            for i in 0..rounds {
                let before = rpc(
                    peer,
                    |x: u64| {
                        RAN_BEFORE_THE_PANIC.fetch_add(1, Ordering::Relaxed);
                        x + 1
                    },
                    (i,),
                );
                rpc_ff(
                    peer,
                    || -> () { panic!("an RPC that panics on purpose") },
                    (),
                );
                let after = rpc(
                    peer,
                    |x: u64| {
                        RAN_AFTER_THE_PANIC.fetch_add(1, Ordering::Relaxed);
                        x * 10
                    },
                    (i,),
                );
                futures.push((i, before, after));
            }
            // The panics are expected: not printed.
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            let mut caught = 0;
            while caught < rounds || futures.iter().any(|(_, b, a)| !b.ready() || !a.ready()) {
                if let Err(e) = std::panic::catch_unwind(|| progress(ProgressLevel::User)) {
                    assert_eq!(panic_message(e), "an RPC that panics on purpose");
                    caught += 1;
                }
            }
            std::panic::set_hook(previous);
            assert_eq!(caught, rounds, "every panicking RPC ran once");
            for (i, before, after) in futures {
                assert_eq!((before.result(), after.result()), (i + 1, i * 10));
            }
            upcxx::barrier();
            assert_eq!(RAN_BEFORE_THE_PANIC.load(Ordering::Relaxed), rounds);
            assert_eq!(RAN_AFTER_THE_PANIC.load(Ordering::Relaxed), rounds);
            upcxx::finalize();
        });
    }
}

/// §5: the future of an `rpc` behaves as any future while its value is on the way:
/// it may be cloned (each copy gets the value), get callbacks, or be dropped (its reply
/// is discarded), before or after the reply arrived.
#[test]
fn rpc_futures_can_be_cloned_chained_or_dropped_before_the_reply() {
    for n in [1, 2] {
        spmd(n, || {
            upcxx::init();
            let peer = (rank_me() + 1) % rank_n();
            let a = rpc(peer, |x: u64| x + 1, (1u64,));
            let a2 = a.clone();
            let b = rpc(peer, |x: u64| x * 10, (2u64,)).then(|v| v + 5);
            drop(rpc(peer, |x: u64| x, (3u64,)));
            // A `()` result has a reply kind of its own; dropped or chained, it completes.
            drop(rpc(peer, |_: u64| (), (4u64,)));
            let e = rpc(peer, || (), ()).then(|()| 7u8);
            // The only remaining copy is the clone.
            let c = rpc(peer, |s: String| s + "!", ("c".to_string(),));
            let c2 = c.clone();
            drop(c);
            // Cloned and chained once the reply is there.
            let d = rpc(peer, || 9u32, ());
            progress_until(|| d.ready());
            let d2 = d.clone();
            let d3 = d.clone().then(|v| v + 1);
            assert_eq!((a.wait(), a2.wait(), b.wait()), (2, 2, 25));
            assert_eq!(c2.wait(), "c!");
            assert_eq!((d.wait(), d2.wait(), d3.wait()), (9, 9, 10));
            assert_eq!(e.wait(), 7);
            // Later calls reuse what the dropped futures held.
            for i in 0..200u64 {
                assert_eq!(rpc(peer, |x: u64| x ^ 0x55, (i,)).wait(), i ^ 0x55);
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// §10.3: a thread that loops on waits for operations complete at initiation (here
/// `rget` of a word that an RPC will set) still runs the RPCs sent to it.
#[test]
fn a_loop_of_waits_on_completed_operations_runs_incoming_rpcs() {
    spmd(2, || {
        upcxx::init();
        let flag: GlobalPtr<u64> = upcxx::new_(0u64);
        let all = common::all_gather(&flag);
        if rank_me() == 0 {
            rpc_ff(
                1,
                |flag: GlobalPtr<u64>| {
                    // SAFETY: rank 1's own word, read by rank 1 only through rget.
                    unsafe { flag.local().write_volatile(1) }
                },
                (all[1],),
            );
        } else {
            let mut reads = 0u64;
            while upcxx::rget(flag).wait() == 0 {
                reads += 1;
                assert!(reads < 100_000_000, "the RPC never ran");
            }
        }
        upcxx::barrier();
        upcxx::delete_(flag);
        upcxx::finalize();
    });
}

/// Arguments and results larger than one Active Message (fragmented and reassembled).
#[test]
fn one_mebibyte_arguments_and_results() {
    for n in [1, 2, 3] {
        spmd(n, || {
            upcxx::init();
            let next = (rank_me() + 1) % rank_n();
            let bytes: Vec<u8> = (0..1 << 20)
                .map(|i: u32| (i * 7 + rank_me()) as u8)
                .collect();
            let words: Vec<u64> = (0..(1 << 17)).map(|i: u64| i * 3 + 1).collect();
            let f = rpc(
                next,
                |from: u32, bytes: Vec<u8>, words: View<'_, u64>| {
                    assert_eq!(bytes.len(), 1 << 20);
                    for (i, b) in bytes.iter().enumerate() {
                        assert_eq!(*b, (i as u32 * 7 + from) as u8, "byte {i}");
                    }
                    assert!(words.in_place());
                    assert_eq!(words.len(), 1 << 17);
                    assert!(words
                        .iter()
                        .enumerate()
                        .all(|(i, w)| *w == i as u64 * 3 + 1));
                    // A 1 MiB result.
                    bytes.iter().rev().copied().collect::<Vec<u8>>()
                },
                (rank_me(), bytes.clone(), make_view(&words)),
            );
            let back = f.wait();
            assert_eq!(back.len(), bytes.len());
            assert!(back.iter().rev().eq(bytes.iter()));
            upcxx::finalize();
        });
    }
}

/// Many RPCs in flight at once, to every rank, joined with when_all.
#[test]
fn many_concurrent_rpcs() {
    for n in [2, 4] {
        spmd(n, || {
            upcxx::init();
            let me = u64::from(rank_me());
            let futs: Vec<Future<u64>> = (0..5000u64)
                .map(|i| {
                    let r = ((me + i) % u64::from(rank_n())) as u32;
                    rpc(
                        r,
                        |i: u64, s: String| i * 2 + s.len() as u64,
                        (i, "x".repeat((i % 50) as usize)),
                    )
                })
                .collect();
            let all = when_all(futs).wait();
            for (i, v) in all.into_iter().enumerate() {
                let i = i as u64;
                assert_eq!(v, i * 2 + i % 50);
            }
            upcxx::finalize();
        });
    }
}

/// An RPC that issues RPCs: the outer returns the inner's future (flattened), so the
/// answer travels 0 -> 1 -> 2 -> 1 -> 0.
#[test]
fn nested_rpcs() {
    for n in [1, 3, 4] {
        spmd(n, || {
            upcxx::init();
            let next = (rank_me() + 1) % rank_n();
            let f = rpc(
                next,
                |hops: u32| {
                    let after = (rank_me() + 1) % rank_n();
                    rpc(
                        after,
                        |hops: u32, via: u32| (hops + 1, via, rank_me()),
                        (hops + 1, rank_me()),
                    )
                },
                (0u32,),
            );
            let (hops, via, last) = f.wait();
            assert_eq!(hops, 2);
            assert_eq!(via, next);
            assert_eq!(last, (next + 1) % rank_n());
            upcxx::finalize();
        });
    }
}

/// A panic-free check that the master persona runs incoming RPCs while this rank waits
/// on something else (a barrier makes user-level progress).
#[test]
fn rpcs_run_while_the_target_waits_in_a_barrier() {
    spmd(2, || {
        upcxx::init();
        static HITS: AtomicUsize = AtomicUsize::new(0);
        if rank_me() == 0 {
            let f = rpc(1, || HITS.fetch_add(1, Ordering::SeqCst) + 1, ());
            assert_eq!(f.wait(), 1);
        }
        upcxx::barrier();
        if rank_me() == 1 {
            assert_eq!(HITS.load(Ordering::SeqCst), 1);
        }
        upcxx::finalize();
    });
}

/// A thread without the master persona may call `rpc`: the target still runs it on its
/// master persona, and the reply completes the future on the calling thread, whichever
/// thread's polling received it.
#[test]
fn rpc_from_another_thread_completes_there() {
    for n in [1, 2] {
        spmd(n, || {
            upcxx::init();
            let peer = (rank_me() + 1) % rank_n();
            let worker = std::thread::spawn(move || {
                let mut sum = 0;
                for i in 0..200u64 {
                    sum += rpc(peer, |x: u64| x + 1, (i,)).wait();
                    // A `()` reply too, whichever thread receives it.
                    rpc(peer, |_: u64| (), (i,)).wait();
                }
                sum
            });
            // The master persona stays here, so this thread must keep making progress.
            while !worker.is_finished() {
                progress(ProgressLevel::User);
            }
            assert_eq!(worker.join().expect("worker"), (1..=200).sum::<u64>());
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

thread_local! {
    static HELD: RefCell<Option<(usize, usize, Promise<u64>)>> = const { RefCell::new(None) };
}

/// §6.5 ¶6: when the function returns a future, the receive buffer behind its views stays
/// valid until that future is ready, even while many more messages arrive.
#[test]
fn view_buffer_lives_until_the_returned_future_is_ready() {
    spmd(2, || {
        upcxx::init();
        if rank_me() == 0 {
            let data: Vec<u64> = (0..300).map(|i| i * 1_000_003).collect();
            let sum: u64 = data.iter().sum();
            let f = rpc(
                1,
                |v: View<'_, u64>| {
                    let p = Promise::new();
                    HELD.with(|h| {
                        *h.borrow_mut() = Some((v.as_ptr() as usize, v.len(), p.clone()))
                    });
                    p.get_future().then(|checked| checked)
                },
                (make_view(&data),),
            );
            // Many more messages, with different data, through the same receive buffers.
            let junk: Vec<u64> = vec![u64::MAX; 300];
            let mut acks = Vec::new();
            for _ in 0..2000 {
                acks.push(rpc(
                    1,
                    |v: View<'_, u64>| v.len() as u64,
                    (make_view(&junk),),
                ));
            }
            for a in acks {
                assert_eq!(a.wait(), 300);
            }
            assert!(!f.ready());
            // Now let the held future finish: it reads the view through its raw pointer.
            rpc_ff(
                1,
                || {
                    let (ptr, len, p) = HELD.with(|h| h.borrow_mut().take()).expect("held");
                    // SAFETY: the RPC that made this view returned a future that is not
                    // ready yet, so the buffer is still alive (§6.5 ¶6).
                    let s = unsafe { std::slice::from_raw_parts(ptr as *const u64, len) };
                    p.fulfill_result(s.iter().fold(0u64, |a, b| a.wrapping_add(*b)));
                },
                (),
            );
            assert_eq!(f.wait(), sum);
        }
        upcxx::finalize();
    });
}

/// Captured state is passed as arguments (DESIGN decision 5); a function that returns a
/// user type with `impl_future_value!`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Reply {
    who: u32,
    what: Vec<String>,
}
upcxx::impl_future_value!(Reply);

#[test]
fn user_types_as_results() {
    spmd(2, || {
        upcxx::init();
        let f = rpc(
            1 - rank_me(),
            |words: Vec<String>| Reply {
                who: rank_me(),
                what: words.into_iter().rev().collect(),
            },
            (vec!["a".to_string(), "b".to_string()],),
        );
        assert_eq!(
            f.wait(),
            Reply {
                who: 1 - rank_me(),
                what: vec!["b".into(), "a".into()]
            }
        );
        upcxx::finalize();
    });
}

/// A serialization failure is reported with the call's name and leaves RPC usable.
#[test]
fn serialization_failure_panics_clearly_and_rpc_still_works() {
    spmd(2, || {
        upcxx::init();
        let err = std::panic::catch_unwind(|| {
            rpc_ff(
                1 - rank_me(),
                |_: u32, _: Unserializable| {},
                (1u32, Unserializable),
            );
        })
        .expect_err("serialization fails");
        let msg = panic_message(err);
        assert!(
            msg.contains("upcxx::rpc_ff: the arguments could not be serialized"),
            "{msg}"
        );
        assert_eq!(rpc(1 - rank_me(), |x: u32| x + 1, (1u32,)).wait(), 2);
        upcxx::finalize();
    });
}

/// Precondition checks name the call (DESIGN decision 9).
#[test]
fn rpc_to_a_rank_out_of_range_panics() {
    spmd(2, || {
        upcxx::init();
        let err = std::panic::catch_unwind(|| {
            drop(rpc(2, || 0u8, ()));
        })
        .expect_err("rank 2 of 2");
        assert!(panic_message(err).contains("upcxx::rpc: rank 2 is out of range"));
        upcxx::finalize();
    });
}

#[test]
#[should_panic(expected = "upcxx::rpc: called before upcxx::init")]
fn rpc_before_init_panics() {
    drop(rpc(0, || 1u8, ()));
}

#[test]
#[should_panic(expected = "upcxx::rpc_ff: called before upcxx::init")]
fn rpc_ff_before_init_panics() {
    rpc_ff(0, || {}, ());
}
