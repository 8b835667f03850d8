//! RPCs addressed by a rank in a team (UPC++ spec §9.2, §9.3: `rpc_ff(team, recipient,
//! ...)` and `rpc(team, recipient, ...)`), on 1 to 5 ranks: the recipient is the
//! process with that rank in the team, not the world rank of the same number.

use std::cell::Cell;

use gex::testing::spmd;
use upcxx::team::world;

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
            upcxx::barrier();
            // Every rank sent one rpc_ff to each member: each received n.
            while HITS.with(Cell::get) < n {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            assert_eq!(HITS.with(Cell::get), n);
            upcxx::barrier();
            reversed.destroy(upcxx::EntryBarrier::User);
            upcxx::finalize();
        });
    }
}
