//! Progress and personas: UPC++ spec ch. 10.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::panic_message;
use gex::testing::spmd;
use upcxx::{
    current_persona, default_persona, master_persona, Persona, PersonaScope, ProgressLevel,
};

mod common;

/// §10.5: the thread that called init holds the master persona on top of its default.
#[test]
fn init_thread_holds_the_master_persona() {
    spmd(2, || {
        upcxx::init();
        assert_eq!(current_persona(), master_persona());
        assert_ne!(default_persona(), master_persona());
        assert!(master_persona().active_with_caller());
        assert!(default_persona().active_with_caller());
        upcxx::finalize();
    });
}

/// §10.5.2: an LPC runs during user-level progress of the thread holding the target
/// persona, not synchronously, and its result returns to the caller's persona.
#[test]
fn lpc_runs_on_the_target_persona_thread() {
    spmd(1, || {
        upcxx::init();
        let worker = Persona::new();
        let w = worker.clone();
        let stop = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let _scope = PersonaScope::new(&w);
            let me = std::thread::current().id();
            while s.load(Ordering::Acquire) == 0 {
                upcxx::progress(ProgressLevel::User);
            }
            me
        });
        let f = worker.lpc(|| (std::thread::current().id(), 6 * 7));
        let (ran_on, v) = f.wait();
        assert_eq!(v, 42);
        stop.store(1, Ordering::Release);
        assert_eq!(ran_on, handle.join().unwrap());
        assert_ne!(ran_on, std::thread::current().id());
        upcxx::finalize();
    });
}

#[test]
fn lpc_ff_waits_for_user_progress() {
    spmd(1, || {
        upcxx::init();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        upcxx::lpc_ff(&current_persona(), move || {
            h.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 0, "not synchronous");
        upcxx::progress(ProgressLevel::Internal);
        assert_eq!(
            hits.load(Ordering::Relaxed),
            0,
            "internal progress runs no callbacks"
        );
        upcxx::progress(ProgressLevel::User);
        assert_eq!(hits.load(Ordering::Relaxed), 1);
        upcxx::finalize();
    });
}

/// §10.2 ¶2-3: inside a callback run by progress, user-level progress is a no-op (the
/// call makes internal progress only: an LPC queued there waits for the next user-level
/// progress outside), and waiting, which would spin on such no-ops, fails with a clear
/// message.
#[test]
fn waiting_in_the_restricted_context_fails() {
    spmd(1, || {
        upcxx::init();
        let msg = Arc::new(Mutex::new(String::new()));
        let m = Arc::clone(&msg);
        let inner = Arc::new(AtomicUsize::new(0));
        let (i, i2) = (Arc::clone(&inner), Arc::clone(&inner));
        upcxx::lpc_ff(&current_persona(), move || {
            assert!(upcxx::in_restricted_context());
            upcxx::lpc_ff(&current_persona(), move || {
                i2.fetch_add(1, Ordering::Relaxed);
            });
            upcxx::progress(ProgressLevel::User);
            assert_eq!(i.load(Ordering::Relaxed), 0, "no user-level progress here");
            let e = std::panic::catch_unwind(|| upcxx::Promise::<()>::new().get_future().wait());
            *m.lock().unwrap() = panic_message(e.unwrap_err());
        });
        upcxx::progress(ProgressLevel::User);
        while inner.load(Ordering::Relaxed) == 0 {
            upcxx::progress(ProgressLevel::User);
        }
        let msg = msg.lock().unwrap().clone();
        assert!(msg.contains("restricted context"), "{msg}");
        assert!(!upcxx::in_restricted_context());
        upcxx::finalize();
    });
}

/// §10.5.1: a persona is held by one thread at a time; the mutex variant takes turns.
#[test]
fn persona_scopes_exclude_other_threads() {
    spmd(1, || {
        upcxx::init();
        let p = Persona::new();
        let scope = PersonaScope::new(&p);
        assert_eq!(current_persona(), p);
        let p2 = p.clone();
        let e = std::thread::spawn(move || {
            std::panic::catch_unwind(|| {
                let _s = PersonaScope::new(&p2);
            })
            .map_err(panic_message)
        })
        .join()
        .unwrap();
        assert!(e.unwrap_err().contains("held by another thread"));
        drop(scope);
        assert_eq!(current_persona(), master_persona());

        let lock = Arc::new(Mutex::new(()));
        let count = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (p, lock, count) = (p.clone(), Arc::clone(&lock), Arc::clone(&count));
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _s = PersonaScope::with_mutex(&lock, &p);
                        assert!(p.active_with_caller());
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(count.load(Ordering::Relaxed), 150);

        // The same with a lock of another type, its guard held by the scope: the
        // persona is released before the guard, so the next thread to take the lock
        // finds it free.
        let rw = Arc::new(std::sync::RwLock::new(()));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (p, rw, count) = (p.clone(), Arc::clone(&rw), Arc::clone(&count));
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _s = PersonaScope::with_guard(rw.write().unwrap(), &p);
                        assert!(p.active_with_caller());
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(count.load(Ordering::Relaxed), 300);
        upcxx::finalize();
    });
}

/// §10.5.3: liberating the master persona lets another thread drive progress for it.
#[test]
fn master_persona_can_move_to_another_thread() {
    spmd(2, || {
        upcxx::init();
        upcxx::liberate_master_persona();
        assert_ne!(current_persona(), master_persona());
        let rank = std::thread::spawn(|| {
            let _s = PersonaScope::new(&master_persona());
            upcxx::barrier();
            upcxx::rank_me()
        })
        .join()
        .unwrap();
        assert_eq!(rank, upcxx::rank_me());
        let _s = PersonaScope::new(&master_persona());
        upcxx::finalize();
    });
}

/// Futures implement std::future::Future; block_on drives them with progress: an LPC's,
/// a ready one, an RPC's (a reply cell filled by a message) and an RMA's complete at
/// initiation (ready after the next progress), on 1 and 2 ranks.
#[test]
fn futures_can_be_awaited() {
    for n in [1, 2] {
        spmd(n, || {
            upcxx::init();
            let f = current_persona().lpc(|| 5u32);
            let v = upcxx::block_on(async move {
                let a = f.await;
                let b = upcxx::make_future(a + 1).await;
                a + b
            });
            assert_eq!(v, 11);
            let next = (upcxx::rank_me() + 1) % upcxx::rank_n();
            let word = upcxx::new_(0u64);
            let v = upcxx::block_on(async move {
                let x = upcxx::rpc(next, |x: u64| x + 1, (41,)).await;
                upcxx::rput(x, word).await;
                upcxx::rget(word).await
            });
            assert_eq!(v, 42);
            upcxx::barrier();
            upcxx::delete_(word);
            upcxx::finalize();
        });
    }
}

#[test]
fn calls_before_init_fail_clearly() {
    let e = std::panic::catch_unwind(upcxx::rank_me).unwrap_err();
    assert!(panic_message(e).contains("upcxx::rank_me: called before upcxx::init"));
    let e = std::panic::catch_unwind(|| upcxx::progress(ProgressLevel::User)).unwrap_err();
    assert!(panic_message(e).contains("before upcxx::init"));
}

/// §2.2: init and finalize nest; only the last finalize ends UPC++.
#[test]
fn init_and_finalize_are_reference_counted() {
    for n in 1..=4 {
        spmd(n, || {
            upcxx::init();
            upcxx::init();
            assert!(upcxx::initialized());
            upcxx::finalize();
            assert!(upcxx::initialized());
            assert!(upcxx::rank_me() < upcxx::rank_n());
            assert_eq!(upcxx::rank_n() as usize, n);
            upcxx::finalize();
            assert!(!upcxx::initialized());
            let e = std::panic::catch_unwind(upcxx::rank_me).unwrap_err();
            assert!(panic_message(e).contains("after upcxx::finalize"));
        });
    }
}

/// §10.5.1: persona scopes end in the reverse order they began; one that ends while a
/// later scope is still active fails with a message, also when both pushed the same
/// persona (the older one ending first would release the persona the newer holds).
#[test]
fn scopes_that_end_out_of_order_fail() {
    spmd(1, || {
        upcxx::init();
        let out_of_order = |same: bool| {
            std::thread::spawn(move || {
                let p = Persona::new();
                let q = Persona::new();
                let older = PersonaScope::new(&p);
                let newer = PersonaScope::new(if same { &p } else { &q });
                let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(older)));
                std::mem::forget(newer);
                panic_message(e.expect_err("the older scope ended first"))
            })
            .join()
            .unwrap()
        };
        for same in [false, true] {
            let msg = out_of_order(same);
            assert!(msg.contains("reverse order"), "{msg}");
        }
        upcxx::finalize();
    });
}

static BATCHED_RAN: AtomicUsize = AtomicUsize::new(0);

/// §10.4 ¶8: a thread that initiates under the master persona and releases it leaves
/// nothing behind: its batched RPCs go out as it releases the persona, so the next
/// holder's barrier does not wait for a message the first thread would send.
#[test]
fn releasing_the_master_persona_sends_the_rpcs_batched_under_it() {
    spmd(2, || {
        upcxx::init();
        let me = upcxx::rank_me();
        if me == 0 {
            upcxx::rpc_ff(1, || (), ());
            upcxx::rpc_ff(
                1,
                || {
                    BATCHED_RAN.fetch_add(1, Ordering::SeqCst);
                },
                (),
            );
            upcxx::liberate_master_persona();
            std::thread::spawn(|| {
                let _s = PersonaScope::new(&master_persona());
                upcxx::discharge();
                upcxx::barrier();
            })
            .join()
            .unwrap();
            let _s = PersonaScope::new(&master_persona());
            upcxx::finalize();
        } else {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while BATCHED_RAN.load(Ordering::SeqCst) == 0 {
                upcxx::progress(ProgressLevel::User);
                assert!(
                    std::time::Instant::now() < deadline,
                    "rank 0's batched RPC never came"
                );
            }
            upcxx::barrier();
            upcxx::finalize();
        }
    });
}

/// §12.2 ¶7, §2.2 ¶9: the world's `barrier` and `finalize` are collectives of the master
/// persona's thread, as `coll::barrier(world())` is: another thread is refused.
#[test]
fn barrier_and_finalize_need_the_master_persona() {
    spmd(1, || {
        upcxx::init();
        let msgs = std::thread::spawn(|| {
            [
                panic_message(std::panic::catch_unwind(upcxx::barrier).unwrap_err()),
                panic_message(std::panic::catch_unwind(upcxx::finalize).unwrap_err()),
            ]
        })
        .join()
        .unwrap();
        for (msg, call) in msgs.iter().zip(["barrier", "finalize"]) {
            assert!(
                msg.contains(&format!("upcxx::{call}")) && msg.contains("master persona"),
                "{msg}"
            );
        }
        upcxx::finalize();
    });
}

static RAN_WITH_MASTER: Mutex<Vec<bool>> = Mutex::new(Vec::new());

/// §10.5.1 ¶24 and ¶33: a callback that releases the master persona (from the thread
/// that called init) leaves the RPCs queued for it to the persona's next holder; the
/// progress call that ran the callback does not run them without the persona.
#[test]
fn rpcs_wait_for_the_master_personas_next_holder() {
    spmd(1, || {
        upcxx::init();
        let word = upcxx::new_(0u64);
        // Complete at initiation: its callback runs at the next user-level progress.
        let released = upcxx::rput(1u64, word).then(|()| upcxx::liberate_master_persona());
        upcxx::rpc_ff(
            0,
            || {
                let held = master_persona().active_with_caller();
                RAN_WITH_MASTER.lock().unwrap().push(held);
            },
            (),
        );
        upcxx::progress(ProgressLevel::User);
        assert!(released.ready(), "the callback ran");
        std::thread::spawn(|| {
            let _s = PersonaScope::new(&master_persona());
            while RAN_WITH_MASTER.lock().unwrap().is_empty() {
                upcxx::progress(ProgressLevel::User);
            }
        })
        .join()
        .unwrap();
        assert_eq!(*RAN_WITH_MASTER.lock().unwrap(), [true]);
        let _s = PersonaScope::new(&master_persona());
        upcxx::delete_(word);
        upcxx::finalize();
    });
}

/// The end of the two tests below, after this thread queued a `what` (RPC or LPC)
/// that releases the master persona and three that record `(i, whether the master
/// persona is held)` in `ran`: the first progress runs the releasing one alone; a new
/// thread that takes the persona runs the three, holding it, in order; then this
/// thread takes the persona back and finalizes.
fn the_next_holder_runs_the_rest(what: &str, ran: &'static Mutex<Vec<(u32, bool)>>) {
    upcxx::progress(ProgressLevel::User);
    assert!(
        !master_persona().active_with_caller(),
        "the first {what} released the master persona"
    );
    assert_eq!(*ran.lock().unwrap(), []);
    std::thread::spawn(|| {
        let _s = PersonaScope::new(&master_persona());
        while ran.lock().unwrap().len() < 3 {
            upcxx::progress(ProgressLevel::User);
        }
    })
    .join()
    .unwrap();
    assert_eq!(*ran.lock().unwrap(), [(0, true), (1, true), (2, true)]);
    let _s = PersonaScope::new(&master_persona());
    upcxx::finalize();
}

static RAN_AFTER_RELEASE: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());

/// §10.5.1 ¶24: an RPC that releases the master persona leaves the RPCs queued after it
/// (here in the same page of the queue) to the persona's next holder, in their order;
/// the rest of the page does not run on the thread that no longer holds it.
#[test]
fn rpcs_after_one_that_releases_the_master_persona_wait_for_its_next_holder() {
    spmd(2, || {
        upcxx::init();
        let me = upcxx::rank_me();
        upcxx::rpc_ff(me, upcxx::liberate_master_persona, ());
        for i in 0..3u32 {
            upcxx::rpc_ff(
                me,
                |i: u32| {
                    let held = master_persona().active_with_caller();
                    RAN_AFTER_RELEASE.lock().unwrap().push((i, held));
                },
                (i,),
            );
        }
        the_next_holder_runs_the_rest("RPC", &RAN_AFTER_RELEASE);
    });
}

static LPCS_AFTER_RELEASE: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());

/// §10.5.1 ¶33, as for RPCs: an LPC that releases the master persona leaves the LPCs of
/// the master persona queued after it to the persona's next holder, in their order;
/// none runs on the thread that no longer holds the persona.
#[test]
fn lpcs_after_one_that_releases_the_master_persona_wait_for_its_next_holder() {
    spmd(1, || {
        upcxx::init();
        let master = master_persona();
        master.lpc_ff(upcxx::liberate_master_persona);
        for i in 0..3u32 {
            master.lpc_ff(move || {
                let held = master_persona().active_with_caller();
                LPCS_AFTER_RELEASE.lock().unwrap().push((i, held));
            });
        }
        the_next_holder_runs_the_rest("LPC", &LPCS_AFTER_RELEASE);
    });
}

static ORDER_AFTER_RELEASE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static HANDED_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The rest of the page of an RPC that releases the master persona is handed over with
/// the persona, before another thread can take it: a thread that takes it while that
/// RPC still runs runs them first, then the RPCs queued after them (here one that the
/// releasing RPC sent, into a later page), so the RPCs run in the order they were sent.
#[test]
fn a_released_master_persona_comes_with_the_rest_of_the_page() {
    spmd(1, || {
        upcxx::init();
        let me = upcxx::rank_me();
        upcxx::rpc_ff(
            me,
            || {
                upcxx::rpc_ff(
                    upcxx::rank_me(),
                    || ORDER_AFTER_RELEASE.lock().unwrap().push(2),
                    (),
                );
                upcxx::liberate_master_persona();
                HANDED_OVER.store(true, Ordering::Release);
                // The next holder runs what it was handed while this RPC still runs.
                let start = std::time::Instant::now();
                while ORDER_AFTER_RELEASE.lock().unwrap().len() < 2
                    && start.elapsed() < std::time::Duration::from_secs(10)
                {
                    std::thread::yield_now();
                }
            },
            (),
        );
        upcxx::rpc_ff(me, || ORDER_AFTER_RELEASE.lock().unwrap().push(1), ());
        let taker = std::thread::spawn(|| {
            while !HANDED_OVER.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let _s = PersonaScope::new(&master_persona());
            while ORDER_AFTER_RELEASE.lock().unwrap().len() < 2 {
                upcxx::progress(ProgressLevel::User);
            }
        });
        upcxx::progress(ProgressLevel::User);
        taker.join().unwrap();
        assert_eq!(*ORDER_AFTER_RELEASE.lock().unwrap(), [1, 2]);
        let _s = PersonaScope::new(&master_persona());
        upcxx::finalize();
    });
}

/// §10.5.1 ¶33: only the thread that called `init` may liberate the master persona,
/// and only once since `init`; anything else is refused naming the rule.
#[test]
fn only_the_init_thread_liberates_the_master_persona_once() {
    spmd(1, || {
        upcxx::init();
        upcxx::liberate_master_persona();
        let msg = std::thread::spawn(|| {
            let _s = PersonaScope::new(&master_persona());
            panic_message(std::panic::catch_unwind(upcxx::liberate_master_persona).unwrap_err())
        })
        .join()
        .unwrap();
        assert!(msg.contains("only the thread that called init"), "{msg}");
        let scope = PersonaScope::new(&master_persona());
        let msg =
            panic_message(std::panic::catch_unwind(upcxx::liberate_master_persona).unwrap_err());
        assert!(msg.contains("a second time"), "{msg}");
        drop(scope);
        let _s = PersonaScope::new(&master_persona());
        upcxx::finalize();
    });
}
