//! Attentiveness: `progress_required` and `discharge`, UPC++ spec §10.3 and §10.5.3.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gex::testing::spmd;
use upcxx::{
    current_persona, default_persona_scope, discharge, discharge_for, progress, progress_required,
    progress_required_for, rank_me, rank_n, rpc_ff, top_persona_scope, GlobalPtr, Persona,
    PersonaScope, ProgressLevel,
};

mod common;

static RPC_RAN: AtomicU64 = AtomicU64::new(0);

/// §10.5.3 ¶7–¶9 and §10.3 ¶1: after `discharge` returns, no progress is required,
/// although RPCs are in flight and LPCs are queued, and `discharge` ran none of them
/// (its progress level is internal). What was sent then reaches its targets without
/// any further call by the sender: rank 0 makes none while the others run its RPCs,
/// which write into its segment.
#[test]
fn after_discharge_no_progress_is_required() {
    // Rank 0 learns that its RPCs ran from the targets' puts while it makes no call.
    if gex::testing::skip_where_rma_needs_progress("puts to a rank that makes no call") {
        return;
    }
    for n in 2..=5 {
        spmd(n, || {
            upcxx::init();
            let flags: GlobalPtr<u64> = upcxx::new_array(rank_n() as usize);
            let flags = common::all_gather(&flags)[0];
            let lpc_ran = Arc::new(AtomicU64::new(0));
            if rank_me() == 0 {
                let held = Persona::new();
                let _scope = PersonaScope::new(&held);
                for p in [&held, &current_persona(), &upcxx::master_persona()] {
                    let lpc_ran = Arc::clone(&lpc_ran);
                    p.lpc_ff(move || {
                        lpc_ran.fetch_add(1, Ordering::AcqRel);
                    });
                }
                let done = upcxx::rput(5u64, flags);
                for r in 1..rank_n() {
                    rpc_ff(
                        r,
                        |flags: GlobalPtr<u64>| {
                            RPC_RAN.fetch_add(1, Ordering::AcqRel);
                            // Dropped: the value is written when the call returns.
                            drop(upcxx::rput(1u64, flags.add(rank_me() as usize)));
                        },
                        (flags,),
                    );
                }
                discharge();
                assert!(!progress_required());
                assert!(!progress_required_for(default_persona_scope()));
                assert_eq!(lpc_ran.load(Ordering::Acquire), 0, "discharge ran an LPC");
                assert!(!done.ready(), "discharge notified a future");
                // No UPC++ call until every target ran its RPC.
                let start = Instant::now();
                let local = flags.local();
                // SAFETY: `local` is this rank's array of `rank_n()` values, which the
                // other ranks write with puts; a volatile read sees their writes.
                let flag = |r: usize| unsafe { local.add(r).read_volatile() };
                while (1..rank_n() as usize).any(|r| flag(r) != 1) {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "an RPC sent before discharge did not arrive"
                    );
                    std::hint::spin_loop();
                }
                done.wait();
                while lpc_ran.load(Ordering::Acquire) < 3 {
                    progress(ProgressLevel::User);
                }
            } else {
                while RPC_RAN.load(Ordering::Acquire) == 0 {
                    progress(ProgressLevel::User);
                }
            }
            upcxx::barrier();
            if rank_me() == 0 {
                upcxx::delete_array(flags);
            }
            upcxx::finalize();
        });
    }
}

/// §10.5.3 ¶7, ¶9: `discharge` makes internal progress only, so it may be called where
/// user-level progress may not, inside a callback.
#[test]
fn discharge_is_allowed_in_the_restricted_context() {
    spmd(1, || {
        upcxx::init();
        let ok = Arc::new(AtomicU64::new(0));
        let ok2 = Arc::clone(&ok);
        current_persona().lpc_ff(move || {
            assert!(upcxx::in_restricted_context());
            discharge_for(top_persona_scope());
            ok2.store(1, Ordering::Release);
        });
        while ok.load(Ordering::Acquire) == 0 {
            progress(ProgressLevel::User);
        }
        upcxx::finalize();
    });
}

/// §10.5.3 ¶2: the scope must be a live one of this thread.
#[test]
fn an_ended_scope_is_refused() {
    spmd(1, || {
        upcxx::init();
        let p = Persona::new();
        let scope = PersonaScope::new(&p);
        let ended = scope.scope_ref();
        drop(scope);
        let text = common::panic_text(|| {
            progress_required_for(ended);
        });
        assert!(
            text.contains("upcxx::progress_required: the persona scope has ended"),
            "{text}"
        );
        let text = common::panic_text(|| discharge_for(ended));
        assert!(
            text.contains("upcxx::discharge: the persona scope has ended"),
            "{text}"
        );
        upcxx::finalize();
    });
}

/// §10.2 and §10.5.3 ¶7: a get from another host, found complete by a user-level
/// progress, notifies its future there, at once, in the restricted context; a callback
/// may then `discharge` (progress level internal), which completes a get the callback
/// started without running that get's callbacks: they wait for the next user-level
/// progress. (On shared memory every get completes at initiation and notifies at the
/// next progress: the same outcome.)
#[test]
fn callbacks_of_completed_gets_run_restricted_and_discharge_runs_none() {
    for n in 1..=3 {
        spmd(n, || {
            use std::cell::Cell;
            use std::rc::Rc;
            upcxx::init();
            let words: GlobalPtr<u64> = upcxx::new_array(1);
            // SAFETY: this rank's own word, read by others after the gather's barrier.
            unsafe { words.local().write(100 + u64::from(rank_me())) };
            let all = common::all_gather(&words);
            let peer = (rank_me() + 1) % rank_n();
            let gp = all[peer as usize];
            let restricted = Rc::new(Cell::new(None));
            let inner_ran = Rc::new(Cell::new(false));
            let inner_ran_in_discharge = Rc::new(Cell::new(None));
            let (r, ran, during) = (
                restricted.clone(),
                inner_ran.clone(),
                inner_ran_in_discharge.clone(),
            );
            // The outer callback returns the inner get's future, so `outer` is ready
            // once that is.
            let outer = upcxx::rget(gp).then(move |v| {
                r.set(Some(upcxx::in_restricted_context()));
                let flag = ran.clone();
                let inner = upcxx::rget(gp).then(move |w| flag.set(w == v));
                discharge();
                during.set(Some(ran.get()));
                inner
            });
            outer.wait();
            assert_eq!(restricted.get(), Some(true), "the callback ran restricted");
            assert_eq!(
                inner_ran_in_discharge.get(),
                Some(false),
                "discharge ran the inner get's callback"
            );
            assert!(inner_ran.get(), "the inner get read its word");
            upcxx::barrier();
            upcxx::delete_array(words);
            upcxx::finalize();
        });
    }
}

/// §10.3 ¶6: `discharge` is `while progress_required() { progress(internal) }`, so
/// internal progress alone completes a get from another host (on shared memory it is
/// complete at initiation), while its notification waits for user-level progress.
#[test]
fn internal_progress_alone_ends_the_need_for_progress() {
    for n in 1..=3 {
        spmd(n, || {
            upcxx::init();
            let word: GlobalPtr<u64> = upcxx::new_(7 + u64::from(rank_me()));
            let peer = (rank_me() + 1) % rank_n();
            let gp = common::all_gather(&word)[peer as usize];
            let got = upcxx::rget(gp);
            let deadline = Instant::now() + Duration::from_secs(30);
            while progress_required() {
                progress(ProgressLevel::Internal);
                assert!(
                    Instant::now() < deadline,
                    "progress(Internal) never completed the get"
                );
            }
            assert!(!got.ready(), "internal progress notified a future");
            assert_eq!(got.wait(), 7 + u64::from(peer));
            upcxx::barrier();
            upcxx::delete_(word);
            upcxx::finalize();
        });
    }
}

/// §10.5.3 ¶3: a callback that user-level progress runs at once, as it finds a get
/// complete, still sees as in flight the gets that progress has yet to look at:
/// `progress_required` counts them there (and `discharge` there advances them).
#[test]
fn callbacks_run_at_once_see_the_operations_still_in_flight() {
    use std::cell::Cell;
    use std::rc::Rc;
    for n in 2..=3 {
        spmd(n, || {
            upcxx::init();
            let word: GlobalPtr<u64> = upcxx::new_(5);
            let peer = (rank_me() + 1) % rank_n();
            let gp = common::all_gather(&word)[peer as usize];
            let (first, second) = (upcxx::Promise::new(), upcxx::Promise::new());
            upcxx::rget_with(gp, upcxx::operation_cx::as_promise(&first));
            upcxx::rget_with(gp, upcxx::operation_cx::as_promise(&second));
            // On shared memory both completed already: nothing is tracked.
            let tracked = progress_required();
            let second_done = Rc::new(Cell::new(false));
            let seen = Rc::new(Cell::new(None));
            let (done, s) = (second_done.clone(), seen.clone());
            let second = second.finalize().then(move |_: u64| done.set(true));
            let first = first
                .finalize()
                .then(move |_: u64| s.set(Some(second_done.get() || progress_required())));
            first.wait();
            second.wait();
            if tracked {
                assert_eq!(
                    seen.get(),
                    Some(true),
                    "a callback saw no operation in flight while the second get was"
                );
            }
            upcxx::barrier();
            upcxx::delete_(word);
            upcxx::finalize();
        });
    }
}
