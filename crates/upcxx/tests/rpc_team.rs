//! RPCs addressed by a rank in a team (UPC++ spec §9.2, §9.3: `rpc_ff(team, recipient,
//! [cxs,] ...)` and `rpc(team, recipient, [cxs,] ...)`), on 1 to 5 ranks: the
//! recipient is the process with that rank in the team, not the world rank of the same
//! number.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use gex::testing::spmd;
use upcxx::team::world;

mod common;

thread_local! {
    static HITS: Cell<u32> = const { Cell::new(0) };
}

#[test]
fn a_team_rank_names_the_member_of_that_team() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            upcxx::init();
            let me = upcxx::rank_me();
            // Every rank in one team, in reverse world order: team rank r is world
            // rank n - 1 - r.
            let reversed = world().split(0, -(me as i32));
            for r in 0..n {
                let world_rank = upcxx::rpc_in(&reversed, r, || upcxx::rank_me(), ()).wait();
                assert_eq!(world_rank, n - 1 - r);
                upcxx::rpc_ff_in(&reversed, r, || HITS.with(|h| h.set(h.get() + 1)), ());
            }
            // The same with completions: the result through a promise, and the
            // rpc_ff's source completion.
            for r in 0..n {
                let p = upcxx::Promise::<u32>::new();
                upcxx::rpc_in_with(
                    &reversed,
                    r,
                    upcxx::operation_cx::as_promise(&p),
                    || upcxx::rank_me(),
                    (),
                );
                assert_eq!(p.finalize().wait(), n - 1 - r);
                let sent: upcxx::Future<()> = upcxx::rpc_ff_in_with(
                    &reversed,
                    r,
                    upcxx::source_cx::as_future(),
                    || HITS.with(|h| h.set(h.get() + 1)),
                    (),
                );
                sent.wait();
            }
            upcxx::barrier();
            // Every rank sent two rpc_ffs to each member: each received 2n.
            while HITS.with(Cell::get) < 2 * n {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            assert_eq!(HITS.with(Cell::get), 2 * n);
            upcxx::barrier();
            // A rank outside the team fails naming it, at the caller's line.
            let location = Arc::new(Mutex::new(String::new()));
            let previous = std::panic::take_hook();
            let loc = location.clone();
            std::panic::set_hook(Box::new(move |info| {
                *loc.lock().unwrap() = info.location().map(|l| l.file().to_owned()).unwrap();
            }));
            let msg = common::panic_text(|| {
                upcxx::rpc_ff_in_with(&reversed, n, upcxx::source_cx::as_future(), || (), ()).wait()
            });
            std::panic::set_hook(previous);
            assert!(msg.contains(&format!("rank {n} is not in")), "{msg}");
            assert!(location.lock().unwrap().ends_with("tests/rpc_team.rs"));
            reversed.destroy(upcxx::EntryBarrier::User);
            upcxx::finalize();
        });
    }
}
