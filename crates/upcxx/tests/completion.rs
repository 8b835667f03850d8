//! Completions (UPC++ spec ch. 7) as `rput` and `rget` deliver them: when notifications
//! happen, what the calls return for each combination of requests, promises, LPCs on
//! other threads, RPCs at the target, and buffered/blocking source completion.

mod common;
use common::{all_gather, panic_text};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use upcxx::{
    current_persona, delete_array, new_array, operation_cx, progress, rank_me, rank_n, remote_cx,
    rget, rget_with, rput, rput_slice_with, rput_with, source_cx, Future, GlobalPtr, Persona,
    PersonaScope, ProgressLevel, Promise,
};

/// Allocates `n` elements on every rank; returns this rank's array and the next rank's.
fn ring<T: bytemuck::Pod + Default>(n: usize) -> (GlobalPtr<T>, GlobalPtr<T>) {
    let mine = new_array::<T>(n);
    let all = all_gather(&mine);
    (mine, all[((rank_me() + 1) % rank_n()) as usize])
}

fn user_progress() {
    progress(ProgressLevel::User);
}

#[test]
fn notifications_wait_for_user_level_progress() {
    // §7.1 ¶14: even when the transfer is complete before the call returns (always, on
    // shared memory), notifications happen only in user-level progress of the initiator.
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<u64>(8);
        let ran = Arc::new(AtomicBool::new(false));
        let ran2 = ran.clone();
        let promise = Promise::<()>::new();
        let op = rput(5u64, next);
        let (src, op2) = rput_slice_with(
            &[1u64, 2],
            next.add(1),
            source_cx::as_future()
                | operation_cx::as_future()
                | operation_cx::as_promise(&promise)
                | operation_cx::as_lpc(&current_persona(), move || {
                    ran2.store(true, Ordering::SeqCst)
                }),
        );
        let got = rget(next);
        let chained = rget(next.add(1)).then(|v| v * 10);
        let promised = promise.finalize();
        let all_pending = |stage: &str| {
            assert!(!op.ready(), "rput future ready {stage}");
            assert!(!src.ready(), "source future ready {stage}");
            assert!(!op2.ready(), "operation future ready {stage}");
            assert!(!got.ready(), "rget future ready {stage}");
            assert!(!chained.ready(), "then-callback ran {stage}");
            assert!(!promised.ready(), "promise fulfilled {stage}");
            assert!(!ran.load(Ordering::SeqCst), "LPC ran {stage}");
        };
        all_pending("when the calls returned");
        // Internal-level progress delivers no notification (§10.1 ¶4).
        progress(ProgressLevel::Internal);
        upcxx::discharge();
        all_pending("after internal progress");
        // But the data are already there (the events happened): seen here through the
        // local team's mapping (on another host, the rget below reads them).
        if next.is_local() {
            // SAFETY: the put completed during its initiation; nobody else writes there.
            assert_eq!(unsafe { next.local().read_volatile() }, 5);
        }
        user_progress();
        assert!(op.ready() && src.ready() && op2.ready() && got.ready() && promised.ready());
        assert!(
            ran.load(Ordering::SeqCst),
            "LPC on this thread's persona ran"
        );
        assert_eq!(got.wait(), 5);
        // The `then` callback was deferred to progress too, and has run by now.
        assert!(chained.ready());
        assert_eq!(chained.wait(), 10);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn return_types_follow_the_requests_in_order() {
    // §7.2.2: no future → (), one → the future, several → a tuple in `|` order; the
    // future's value type is the event's (a get's value, or none).
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<u64>(4);
        rput(41u64, next).wait();
        let p = Promise::<()>::new();
        let () = rput_with(1u64, next.add(1), operation_cx::as_promise(&p));
        let one: Future<()> = rput_with(2u64, next.add(2), operation_cx::as_future());
        let (a, b): (Future<()>, Future<()>) = rput_slice_with(
            &[3u64],
            next.add(3),
            source_cx::as_future() | operation_cx::as_promise(&p) | operation_cx::as_future(),
        );
        let q = Promise::<u64>::new();
        let (x, y, z): (Future<u64>, Future<u64>, Future<u64>) = rget_with(
            next,
            operation_cx::as_future()
                | (operation_cx::as_future() | operation_cx::as_promise(&q))
                | operation_cx::as_future(),
        );
        one.wait();
        a.wait();
        b.wait();
        p.finalize().wait();
        assert_eq!(
            (x.wait(), y.wait(), z.wait(), q.finalize().wait()),
            (41, 41, 41, 41)
        );
        // The values landed where each call put them.
        upcxx::barrier();
        for (i, want) in [41u64, 1, 2, 3].into_iter().enumerate() {
            // SAFETY: the previous rank's puts completed before the barrier.
            assert_eq!(unsafe { mine.add(i).local().read_volatile() }, want);
        }
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn promises_count_one_dependency_per_request() {
    // §5.3, §7.1 ¶8: each as_promise request adds a dependency at initiation and
    // fulfils it at notification; the promise is ready only after all of them.
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<u32>(10);
        let p = Promise::<()>::new();
        // Each put's operation completion also as a future, to see when progress has
        // delivered it (a put to another host completes when its owner answers).
        let mut puts: Vec<Future<()>> = (0..10u32)
            .map(|k| {
                rput_with(
                    k * k,
                    next.add(k as usize),
                    operation_cx::as_promise(&p) | operation_cx::as_future(),
                )
            })
            .collect();
        // Two requests of one call count twice.
        puts.push(rput_slice_with(
            &[7u32],
            next,
            source_cx::as_promise(&p) | operation_cx::as_promise(&p) | operation_cx::as_future(),
        ));
        // 1 initial + 12 registered dependencies; progress fulfils the 12.
        while !puts.iter().all(|f| f.ready()) {
            user_progress();
        }
        assert!(
            !p.get_future().ready(),
            "ready before its initial dependency was fulfilled"
        );
        let done = p.finalize();
        assert!(
            done.ready(),
            "the puts' dependencies were all fulfilled by progress"
        );
        // Before progress, the puts' dependencies keep the promise pending even once its
        // initial one is fulfilled.
        let q = Promise::<()>::new();
        for k in 0..3u32 {
            rput_with(k, next.add(k as usize), operation_cx::as_promise(&q));
        }
        q.fulfill_anonymous(1);
        assert!(
            !q.get_future().ready(),
            "the puts' dependencies were not registered"
        );
        q.get_future().wait();
        // A value-producing event fulfils the promise's result (§7.1 ¶8).
        rput(123u32, next.add(9)).wait();
        let r = Promise::<u32>::new();
        rget_with(next.add(9), operation_cx::as_promise(&r));
        let rf = r.finalize();
        assert!(!rf.ready(), "the get's dependency keeps it pending");
        assert_eq!(rf.wait(), 123);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn a_ready_promise_is_rejected() {
    // §7.2.1 ¶3: the promise's dependency count must be greater than zero.
    gex::testing::spmd(1, || {
        upcxx::init();
        let (mine, _) = ring::<u64>(1);
        let p = Promise::<()>::new();
        let done = p.clone().finalize();
        assert!(done.ready());
        let msg = panic_text(|| rput_with(1u64, mine, operation_cx::as_promise(&p)));
        assert!(
            msg.starts_with("upcxx::rput: the promise of an as_promise completion has a dependency count of zero"),
            "{msg}"
        );
        let msg = panic_text(|| {
            rput_slice_with(
                &[1u64],
                mine,
                source_cx::as_promise(&p) | operation_cx::as_future(),
            )
            .wait()
        });
        assert!(msg.starts_with("upcxx::rput_slice: the promise"), "{msg}");
        delete_array(mine);
        upcxx::finalize();
    });
}

/// §7.1 ¶9 and ¶14: an LPC completion is enlisted on its persona when the event occurs
/// and runs in that persona's user-level progress, whether or not the initiating thread
/// makes any: a worker thread puts and gets on this rank's own memory (complete at
/// initiation wherever the ranks are) with completions aimed at the master persona,
/// then ends without progress; and puts to the next rank, which on another host needs
/// the worker's internal progress to complete at all (§10.3): it discharges, then ends.
#[test]
fn lpc_completions_need_no_progress_of_the_initiator() {
    for n in [1, 2] {
        gex::testing::spmd(n, || {
            upcxx::init();
            let (mine, next) = ring::<u64>(1);
            let master = upcxx::master_persona();
            let got = Arc::new(AtomicU64::new(0));
            let (g1, g2, g3) = (got.clone(), got.clone(), got.clone());
            std::thread::spawn(move || {
                rput_with(
                    5u64,
                    mine,
                    operation_cx::as_lpc(&master, move || {
                        g1.fetch_add(1, Ordering::Relaxed);
                    }),
                );
                rget_with(
                    mine,
                    operation_cx::as_lpc(&master, move |_: u64| {
                        g2.fetch_add(10, Ordering::Relaxed);
                    }),
                );
                // To the next rank, perhaps on another host: the transfer needs this
                // thread's internal progress to complete (§10.3), and `discharge` makes
                // it; the LPC is enlisted at the completion found there.
                rput_with(
                    7u64,
                    next,
                    operation_cx::as_lpc(&master, move || {
                        g3.fetch_add(100, Ordering::Relaxed);
                    }),
                );
                upcxx::discharge();
            })
            .join()
            .unwrap();
            while got.load(Ordering::Relaxed) != 111 {
                progress(ProgressLevel::User);
            }
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

#[test]
fn lpc_completions_run_on_the_target_persona() {
    // §7.1 ¶9: the callback is enlisted on the given persona, here held by another
    // thread; it receives the operation's value, and finds the put's data in place.
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<u64>(2);
        rput(77u64, next.add(1)).wait();
        let worker = Persona::new();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<(String, std::thread::ThreadId, Option<u64>)>();
        let thread = {
            let worker = worker.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let _scope = PersonaScope::new(&worker);
                while !stop.load(Ordering::Acquire) {
                    user_progress();
                    std::thread::yield_now();
                }
                std::thread::current().id()
            })
        };
        let me = std::thread::current().id();
        // Through the local team's mapping, the callback reads the put's data itself.
        let next_addr = next.is_local().then(|| next.local() as usize);
        let tx1 = tx.clone();
        rput_with(
            9u64,
            next,
            operation_cx::as_lpc(&worker, move || {
                // SAFETY: operation completion: the put's write is visible here.
                let v = next_addr.map(|a| unsafe { (a as *const u64).read_volatile() });
                tx1.send(("rput".into(), std::thread::current().id(), v))
                    .unwrap();
            }),
        );
        let tx2 = tx.clone();
        rget_with(
            next.add(1),
            operation_cx::as_lpc(&worker, move |v: u64| {
                tx2.send(("rget".into(), std::thread::current().id(), Some(v)))
                    .unwrap();
            }),
        );
        let tx3 = tx;
        rput_slice_with(
            &[1u64],
            next.add(1),
            source_cx::as_lpc(&worker, move || {
                tx3.send(("source".into(), std::thread::current().id(), None))
                    .unwrap();
            }) | operation_cx::as_future(),
        )
        .wait();
        let mut got: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        stop.store(true, Ordering::Release);
        let worker_thread = thread.join().unwrap();
        assert_ne!(worker_thread, me);
        assert_eq!(got[0].0, "rget");
        assert_eq!(got[0].2, Some(77), "the LPC got the rget's value");
        assert_eq!(got[1].0, "rput");
        if next_addr.is_some() {
            assert_eq!(got[1].2, Some(9), "the put's data were in place");
        } else {
            assert_eq!(rget(next).wait(), 9, "the put's data are in place");
        }
        assert_eq!(got[2].0, "source");
        for (what, thread, _) in &got {
            assert_eq!(
                *thread, worker_thread,
                "{what} LPC ran on the worker persona's thread"
            );
        }
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn lpcs_to_another_thread_run_in_its_progress() {
    // §7.1 ¶9, ¶14: an LPC is enlisted on its persona when the event occurs and runs in
    // that persona's user-level progress: here another thread's, while the initiator
    // makes none.
    gex::testing::spmd(1, || {
        upcxx::init();
        let (mine, _) = ring::<u64>(1);
        let worker = Persona::new();
        let ran = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (worker, ran, stop) = (worker.clone(), ran.clone(), stop.clone());
            std::thread::spawn(move || {
                let _scope = PersonaScope::new(&worker);
                while !stop.load(Ordering::Acquire) {
                    user_progress();
                }
                ran.load(Ordering::SeqCst)
            })
        };
        let ran2 = ran.clone();
        rput_with(
            3u64,
            mine,
            operation_cx::as_lpc(&worker, move || ran2.store(1, Ordering::SeqCst)),
        );
        while ran.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Release);
        assert_eq!(thread.join().unwrap(), 1);
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn buffered_and_blocking_source_completion() {
    // §7.1 ¶15: with as_buffered/as_blocking the source-completion event happens before
    // the call returns (the buffer may be reused at once); other notifications of that
    // event still wait for user-level progress.
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<u32>(512);
        let mut src: Vec<u32> = (0..256).collect();
        let done: Future<()> = rput_slice_with(
            &src,
            next,
            source_cx::as_buffered() | operation_cx::as_future(),
        );
        src.fill(0);
        let (sent, done2) = rput_slice_with(
            &(256..512).collect::<Vec<u32>>(),
            next.add(256),
            source_cx::as_blocking() | source_cx::as_future() | operation_cx::as_future(),
        );
        assert!(
            !sent.ready(),
            "source notification delivered before progress"
        );
        done.wait();
        sent.wait();
        done2.wait();
        let mut back = vec![0u32; 512];
        upcxx::rget_into(next, &mut back).wait();
        assert_eq!(back, (0..512).collect::<Vec<u32>>());
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn completion_objects_can_be_reused() {
    // §7.2 ¶1: a completion object may be copied and passed to several calls.
    gex::testing::spmd(1, || {
        upcxx::init();
        let (mine, _) = ring::<u64>(4);
        let p = Promise::<()>::new();
        let cxs = operation_cx::as_promise(&p) | operation_cx::as_future();
        let futures: Vec<Future<()>> = (0..4u64)
            .map(|i| rput_with(i, mine.add(i as usize), cxs.clone()))
            .collect();
        upcxx::when_all(futures).wait();
        p.finalize().wait();
        for i in 0..4 {
            assert_eq!(rget(mine.add(i)).wait(), i as u64);
        }
        delete_array(mine);
        upcxx::finalize();
    });
}

/// Values the `as_rpc` completions found in place at the target, and how many ran.
static RPC_SEEN_OK: AtomicU64 = AtomicU64::new(0);
static RPC_SEEN_BAD: AtomicU64 = AtomicU64::new(0);

/// The remote completion of the puts of `rpc_completions_run_at_the_target_after_the_data`:
/// checks that the put's values are at the target when it runs, on its master persona.
fn check_landed(first: GlobalPtr<u64>, count: u64, want: u64) {
    let on_master = upcxx::master_persona().active_with_caller();
    let landed = (0..count as usize).all(|i| {
        // SAFETY: the initiator wrote these before sending this RPC; nobody writes them
        // again.
        unsafe { first.add(i).local().read_volatile() == want + i as u64 }
    });
    let counter = if landed && on_master && first.where_() == rank_me() {
        &RPC_SEEN_OK
    } else {
        &RPC_SEEN_BAD
    };
    counter.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn rpc_completions_run_at_the_target_after_the_data() {
    // §7.1 ¶10, §8.2.1 ¶6: the RPC is enlisted on the target's master persona at remote
    // completion, and the put's writes happen before it.
    gex::testing::spmd(3, || {
        upcxx::init();
        const ROUNDS: usize = 50;
        let (mine, next) = ring::<u64>(ROUNDS * 4);
        let me = u64::from(rank_me());
        let mut ops = Vec::new();
        for k in 0..ROUNDS {
            let want = me * 1_000_000 + k as u64 * 100;
            let slot = next.add(k * 4);
            if k % 2 == 0 {
                // A value put: remote completion only, so it returns ().
                let () = rput_with(
                    want,
                    slot,
                    remote_cx::as_rpc(check_landed, (slot, 1u64, want)),
                );
            } else {
                let values = [want, want + 1, want + 2, want + 3];
                ops.push(rput_slice_with(
                    &values,
                    slot,
                    remote_cx::as_rpc(check_landed, (slot, 4u64, want)) | operation_cx::as_future(),
                ));
            }
        }
        upcxx::when_all(ops).wait();
        // Each rank receives ROUNDS checks from the previous rank.
        while RPC_SEEN_OK.load(Ordering::SeqCst) + RPC_SEEN_BAD.load(Ordering::SeqCst)
            < ROUNDS as u64
        {
            user_progress();
        }
        assert_eq!(RPC_SEEN_BAD.load(Ordering::SeqCst), 0);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

static SELF_RPC_RAN: AtomicBool = AtomicBool::new(false);

#[test]
fn rpc_completions_to_self_wait_for_progress() {
    // §9.3 ¶7 via §7.1 ¶10: an RPC is never run synchronously, even to this rank.
    gex::testing::spmd(1, || {
        upcxx::init();
        let (mine, _) = ring::<u64>(1);
        let op = rput_with(
            5u64,
            mine,
            remote_cx::as_rpc(|| SELF_RPC_RAN.store(true, Ordering::SeqCst), ())
                | operation_cx::as_future(),
        );
        assert!(
            !SELF_RPC_RAN.load(Ordering::SeqCst),
            "the RPC ran inside rput"
        );
        op.wait();
        while !SELF_RPC_RAN.load(Ordering::SeqCst) {
            user_progress();
        }
        delete_array(mine);
        upcxx::finalize();
    });
}

static BAR_RAN: AtomicU64 = AtomicU64::new(0);

fn bar(x: i32) -> i32 {
    BAR_RAN.fetch_add(x as u64, Ordering::SeqCst);
    x
}

#[test]
fn the_specs_combined_example() {
    // §7.2 ¶4–¶5: six requests; the three futures come back as a tuple in `|` order.
    gex::testing::spmd(2, || {
        upcxx::init();
        let (mine, next) = ring::<f64>(16);
        let src: Vec<f64> = (0..16).map(f64::from).collect();
        let pro1 = Promise::<()>::new();
        let per1 = current_persona();
        let foo_ran = Arc::new(AtomicBool::new(false));
        let foo = {
            let foo_ran = foo_ran.clone();
            move || {
                foo_ran.store(true, Ordering::SeqCst);
                0
            }
        };
        let cxs = operation_cx::as_promise(&pro1)
            | source_cx::as_future()
            | operation_cx::as_future()
            | operation_cx::as_future()
            | source_cx::as_lpc(&per1, foo)
            | remote_cx::as_rpc(bar, (3,));
        let result: (Future<()>, Future<()>, Future<()>) = rput_slice_with(&src, next, cxs);
        pro1.finalize().wait();
        let (a, b, c) = result;
        a.wait();
        b.wait();
        c.wait();
        assert!(foo_ran.load(Ordering::SeqCst), "the source LPC ran");
        while BAR_RAN.load(Ordering::SeqCst) == 0 {
            user_progress();
        }
        assert_eq!(BAR_RAN.load(Ordering::SeqCst), 3, "bar(3) ran once here");
        let mut back = vec![0.0; 16];
        upcxx::rget_into(next, &mut back).wait();
        assert_eq!(back, src);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

/// §7.1 ¶9 and §10.4 ¶8: an LPC completion aimed at a persona the initiating thread
/// holds is enlisted on the persona, not on the thread: a worker that releases the
/// persona before making progress again leaves the callback to its next holder.
#[test]
fn an_lpc_for_a_held_persona_follows_the_persona() {
    for n in 1..=2 {
        gex::testing::spmd(n, || {
            upcxx::init();
            let mine = new_array::<u64>(1);
            let persona = Persona::new();
            let done = Arc::new(AtomicBool::new(false));
            let (p, d) = (persona.clone(), done.clone());
            std::thread::spawn(move || {
                let _scope = PersonaScope::new(&p);
                let lpc = operation_cx::as_lpc(&p, move || d.store(true, Ordering::Release));
                rput_with(5u64, mine, lpc);
            })
            .join()
            .unwrap();
            let scope = PersonaScope::new(&persona);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while !done.load(Ordering::Acquire) {
                progress(ProgressLevel::User);
                assert!(
                    std::time::Instant::now() < deadline,
                    "the LPC never ran on the persona's next holder"
                );
            }
            drop(scope);
            assert_eq!(rget(mine).wait(), 5);
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

/// Makes user-level progress until `done`, counting the panics it raises (each from a
/// callback it ran, caught here as a program may catch them).
fn progress_catching(mut done: impl FnMut() -> bool) -> usize {
    let mut panics = 0;
    while !done() {
        if std::panic::catch_unwind(user_progress).is_err() {
            panics += 1;
        }
    }
    panics
}

/// A callback that panics (the program may catch the panic where it surfaces, in
/// progress or in the call that readied a promise) has run, and keeps nothing else
/// from running: the other callbacks of its promise run, the notifications queued
/// after it run at the next progress, the LPCs queued after it on its persona too,
/// and the other promise of an operation completed in progress is still notified.
/// On 1 and 2 ranks.
#[test]
fn a_panicking_callback_keeps_the_others_from_nothing() {
    for n in 1..=2 {
        gex::testing::spmd(n, || {
            upcxx::init();
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));

            // Two callbacks of one promise, run as it becomes ready (§5.5 ¶2).
            let p = Promise::<u32>::new();
            let f = p.get_future();
            let _first = f
                .clone()
                .then(|_| -> () { panic!("a callback, on purpose") });
            let second = f.then(|v| v + 1);
            let readied =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.fulfill_result(6)));
            let panics = usize::from(readied.is_err()) + progress_catching(|| second.ready());
            assert_eq!(panics, 1);
            assert_eq!(second.wait(), 7);

            // Notifications of operations complete at initiation, queued in order.
            let gp = new_array::<u64>(2);
            let _first = rput(1u64, gp).then(|()| -> () { panic!("a notification, on purpose") });
            let second = rput(2u64, gp.add(1)).then(|()| 9u32);
            let third = Arc::new(AtomicBool::new(false));
            let ran = third.clone();
            let _third = rput(3u64, gp).then(move |()| ran.store(true, Ordering::Relaxed));
            assert_eq!(progress_catching(|| second.ready()), 1);
            assert_eq!(second.wait(), 9);
            progress_catching(|| third.load(Ordering::Relaxed));

            // LPCs of one persona, queued in order.
            let me = current_persona();
            me.lpc_ff(|| panic!("an LPC, on purpose"));
            let after = me.lpc(|| 5u32);
            assert_eq!(progress_catching(|| after.ready()), 1);
            assert_eq!(after.wait(), 5);

            // An operation completed in progress (a barrier's, with 2 ranks) notifies
            // both its promises there, although the first one's callback panics.
            let (p1, p2) = (Promise::<()>::new(), Promise::<()>::new());
            upcxx::barrier_async_with(
                upcxx::world(),
                operation_cx::as_promise(&p1) | operation_cx::as_promise(&p2),
            );
            let _first = p1
                .finalize()
                .then(|()| -> () { panic!("a promise's, on purpose") });
            let second = p2.finalize();
            assert_eq!(progress_catching(|| second.ready()), 1);

            std::panic::set_hook(previous);
            upcxx::barrier();
            upcxx::delete_array(gp);
            upcxx::finalize();
        });
    }
}
