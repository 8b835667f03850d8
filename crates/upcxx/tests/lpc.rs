//! `persona::lpc`: UPC++ spec §10.5.1 ¶17–¶22.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use gex::testing::spmd;
use upcxx::{current_persona, make_future, Future, Persona, PersonaScope, ProgressLevel};

/// ¶19–¶20: the callback's value comes back as a future, and the callback does not run
/// inside `lpc`, even on a persona the caller holds.
#[test]
fn lpc_returns_the_value_and_never_runs_synchronously() {
    spmd(1, || {
        upcxx::init();
        let ran = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&ran);
        let f: Future<String> = current_persona().lpc(move || {
            r.store(true, Ordering::Release);
            String::from("done")
        });
        assert!(!ran.load(Ordering::Acquire), "ran inside lpc");
        assert!(!f.ready());
        assert_eq!(f.wait(), "done");
        upcxx::finalize();
    });
}

/// ¶19: when the callback returns a future, the target persona waits for it and the
/// future `lpc` returned gets its value. Here the callback, on a worker thread's
/// persona, returns the future of an RPC, which is not ready when it returns.
#[test]
fn lpc_waits_for_a_returned_future() {
    spmd(1, || {
        upcxx::init();
        let worker = Persona::new();
        let stop = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (w, stop) = (worker.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let _scope = PersonaScope::new(&w);
                while stop.load(Ordering::Acquire) == 0 {
                    upcxx::progress(ProgressLevel::User);
                }
            })
        };
        let f: Future<u64> = worker.lpc(|| {
            let reply = upcxx::rpc(0, |x: u64| x + 1, (41u64,));
            assert!(!reply.ready());
            reply
        });
        let g: Future<(u8, char)> = upcxx::lpc(&worker, || make_future((1u8, 'x')));
        assert_eq!(f.wait(), 42);
        assert_eq!(g.wait(), (1, 'x'));
        stop.store(1, Ordering::Release);
        thread.join().unwrap();
        upcxx::finalize();
    });
}
