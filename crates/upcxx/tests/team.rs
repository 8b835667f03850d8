//! Teams (UPC++ spec ch. 11) on 1 to 5 ranks: the world and local teams (§11.3.3),
//! `rank_n`, `rank_me`, indexing and `from_world` (§11.3.1 ¶5–¶18), `split` with keys
//! and `color_none` (¶19–¶22), `destroy` (¶30–¶33), `team_id` with `here` and
//! `when_here` (§11.3.2), and what misuse does.

mod common;

use common::{all_gather, panic_text};
use gex::testing::spmd;
use upcxx::{local_team, local_team_contains, rank_me, rank_n, world, EntryBarrier, TeamId};

#[test]
fn the_world_team_is_every_rank_in_order() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let w = world();
            assert_eq!((w.rank_n(), w.rank_me()), (rank_n(), rank_me()));
            for r in 0..rank_n() {
                assert_eq!(w[r], r);
                assert_eq!(w.from_world(r), r);
            }
            assert_eq!(w.id().here().rank_n(), rank_n());
            let ids = all_gather(&w.id().to_u64());
            assert!(ids.iter().all(|&i| i == ids[0]), "{ids:?}");
            upcxx::finalize();
        });
    }
}

/// The local team is the ranks sharing memory with this one (GASNet-EX's neighbourhood,
/// `gex::nbrhd_info`), in world-rank order, under an id of its own: on one host the
/// world (the test of the neighbourhood, `gex/tests/objects.rs`, checks that it is),
/// on several hosts the ranks of this one.
#[test]
fn the_local_team_is_the_ranks_sharing_memory() {
    for ranks in [1, 3] {
        spmd(ranks, || {
            upcxx::init();
            let l = local_team();
            let nbrhd = gex::nbrhd_info().members;
            assert_eq!(l.rank_n() as usize, nbrhd.len());
            assert_eq!(l[l.rank_me()], rank_me());
            assert!((0..l.rank_n()).all(|i| l[i] == nbrhd[i as usize]));
            assert!((0..rank_n()).all(|r| local_team_contains(r) == nbrhd.contains(&r)));
            assert_ne!(l.id(), world().id());
            assert_eq!(l.id().here().rank_n(), l.rank_n());
            upcxx::finalize();
        });
    }
}

/// §11.3.1 ¶22: members of a color are ranked by key, ties by parent rank; a rank with
/// `color_none` gets the invalid team.
#[test]
fn split_ranks_by_key_and_color_none_gets_the_invalid_team() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let n = rank_n();
            // Ranks 0 and 1 of every three share color 0 or 1 by parity; rank 4 sits out.
            let color = if me == 4 {
                upcxx::COLOR_NONE
            } else {
                (me % 2) as i32
            };
            // Reverse order by key; ranks 0 and 1 tie at key 0 with 2 and 3.
            let key = -((me / 2) as i32);
            let t = world().split(color, key);
            if me == 4 {
                assert!(!t.is_valid());
                let msg = panic_text(|| {
                    t.rank_n();
                });
                assert!(msg.contains("color_none"), "{msg}");
            } else {
                let mut expected: Vec<u32> = (0..n.min(4)).filter(|r| r % 2 == me % 2).collect();
                expected.sort_by_key(|&r| (-((r / 2) as i32), r));
                assert_eq!(t.rank_n() as usize, expected.len());
                let members: Vec<u32> = (0..t.rank_n()).map(|r| t[r]).collect();
                assert_eq!(members, expected);
                assert_eq!(t[t.rank_me()], me);
                assert_eq!(t.from_world(me), t.rank_me());
                for w in 0..n {
                    let r = t.from_world_or(w, u32::MAX);
                    assert_eq!(r == u32::MAX, !expected.contains(&w));
                }
                // Same id on every member, different for each color.
                let id = t.id();
                assert_eq!(id.here().rank_n(), t.rank_n());
                let ids = all_gather(&(color, id.to_u64()));
                for &(c, i) in ids.iter().filter(|(c, _)| *c >= 0) {
                    assert_eq!(c == color, i == id.to_u64(), "{ids:?}");
                }
                upcxx::coll::barrier(&t);
                t.destroy(EntryBarrier::User);
            }
            if me == 4 {
                // The others' all_gather is collective over the world.
                let _ = all_gather(&(color, 0u64));
            }
            upcxx::finalize();
        });
    }
}

#[test]
fn splits_of_splits_and_every_entry_barrier() {
    spmd(4, || {
        upcxx::init();
        let me = rank_me();
        let half = world().split((me / 2) as i32, me as i32);
        let single = half.split(half.rank_me() as i32, 0);
        assert_eq!(single.rank_n(), 1);
        assert_eq!(single[0], me);
        single.destroy(EntryBarrier::None);
        let again = half.split(0, -(me as i32));
        assert_eq!(again[0], half[1]);
        again.destroy(EntryBarrier::Internal);
        half.destroy(EntryBarrier::User);
        upcxx::finalize();
    });
}

/// A destroyed team, a rank outside it, world and local teams that cannot be destroyed:
/// each a panic naming the call and the rule.
#[test]
fn misuse_of_teams_fails_naming_the_call() {
    spmd(2, || {
        upcxx::init();
        let t = world().split(0, 0);
        let id = t.id();
        let copy = t.clone();
        t.destroy(EntryBarrier::User);
        let msg = panic_text(|| {
            copy.rank_n();
        });
        assert!(
            msg.contains("team::rank_n") && msg.contains("destroyed"),
            "{msg}"
        );
        let msg = panic_text(|| {
            id.here();
        });
        assert!(
            msg.contains("team_id::here") && msg.contains("destroyed"),
            "{msg}"
        );
        let msg = panic_text(|| {
            upcxx::coll::barrier(&copy);
        });
        assert!(msg.contains("destroyed"), "{msg}");
        let msg = panic_text(|| {
            let _ = world()[2];
        });
        assert!(
            msg.contains("operator[]") && msg.contains("§11.3.1 ¶12"),
            "{msg}"
        );
        let msg = panic_text(|| {
            world().from_world(7);
        });
        assert!(msg.contains("not a world rank"), "{msg}");
        let msg = panic_text(|| world().destroy(EntryBarrier::None));
        assert!(msg.contains("cannot be destroyed"), "{msg}");
        let msg = panic_text(|| local_team().destroy(EntryBarrier::None));
        assert!(msg.contains("cannot be destroyed"), "{msg}");
        let msg = panic_text(|| {
            world().split(-5, 0);
        });
        assert!(msg.contains("color -5"), "{msg}");
        let msg = panic_text(|| {
            TeamId::default().here();
        });
        assert!(msg.contains("invalid"), "{msg}");
        upcxx::finalize();
    });
}

/// §11.3.2 ¶14: `when_here` is ready once this process has made the team. Ids of the
/// teams rank 0 leads are its consecutive `gex` team ids, so the test can name the next
/// team before it exists.
#[test]
fn when_here_is_ready_once_the_team_is_made() {
    for ranks in [1, 3] {
        spmd(ranks, || {
            upcxx::init();
            let first = world().split(0, rank_me() as i32);
            let ready = first.id().when_here();
            assert!(ready.ready());
            let next: TeamId = bytemuck::cast(first.id().to_u64() + 1);
            let f = next.when_here();
            upcxx::progress(upcxx::ProgressLevel::User);
            assert!(!f.ready());
            let second = world().split(0, rank_me() as i32);
            assert_eq!(second.id(), next);
            let got = f.wait();
            assert_eq!(got.id(), next);
            assert_eq!(got.rank_me(), rank_me());
            second.destroy(EntryBarrier::User);
            first.destroy(EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

/// An id that never arrives leaves its future not ready; it holds up nothing else.
#[test]
fn when_here_on_an_id_that_never_arrives_stays_not_ready() {
    spmd(2, || {
        upcxx::init();
        let never: TeamId = bytemuck::cast(u64::from(rank_n() + 9) << 32 | 1);
        let f = never.when_here();
        for _ in 0..10 {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        assert!(!f.ready());
        upcxx::discharge();
        assert!(!upcxx::progress_required());
        upcxx::barrier();
        upcxx::finalize();
    });
}

static SECOND_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// §11.3.1 ¶35: `destroy` without an entry barrier still waits for the other members
/// (internal progress), so it sends this rank's batched RPCs first: a member that
/// waits for one of them before it destroys the team gets it.
#[test]
fn destroy_without_an_entry_barrier_sends_the_rpcs_batched_before_it() {
    use std::sync::atomic::Ordering::SeqCst;
    spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let t = world().split(0, me as i32);
        if me == 0 {
            // The first goes alone, the second waits in this thread's batch.
            upcxx::rpc_ff(1, || (), ());
            upcxx::rpc_ff(1, || SECOND_RAN.store(true, SeqCst), ());
        } else {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !SECOND_RAN.load(SeqCst) {
                upcxx::progress(upcxx::ProgressLevel::User);
                assert!(
                    std::time::Instant::now() < deadline,
                    "rank 0's second RPC never came"
                );
            }
        }
        t.destroy(EntryBarrier::None);
        upcxx::barrier();
        upcxx::finalize();
    });
}
