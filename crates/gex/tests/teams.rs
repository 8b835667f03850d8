//! Teams (GASNet-EX "Operations on gex_TM_t": `gex_TM_Split`, the queries,
//! `gex_TM_SetCData`/`QueryCData`, `gex_TM_TranslateRankToJobrank` /
//! `TranslateJobrankToRank`, `gex_TM_Destroy`), with 1 to 5 ranks.
mod common;

use std::sync::Arc;

use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use gex::{Client, Flags, Segment, Team};

const MB: usize = 1 << 20;

fn init(name: &str) -> (Client, Team) {
    let (client, _ep, team) = Client::init(name, Flags::NONE).unwrap();
    (client, team)
}

/// "Within each newly created team, ranks are assigned (contiguously from zero) by
/// increasing order of the 'key' argument ... ties are broken by ranks in the
/// 'parent_tm' team": split by parity with keys that reverse the order, and with equal
/// keys that keep it; translations both ways; a rank that passes no color gets no team.
#[test]
fn split_orders_members_by_key_then_parent_rank() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let (client, world) = init("TM_SPLIT");
            let me = world.rank();
            let color = me % 2;
            let expected: Vec<u32> = (0..n).filter(|r| r % 2 == color).collect();

            // key = -rank: members in decreasing parent rank.
            let rev = world
                .split(Some(color), -(me as i32), None)
                .expect("a color was given");
            let mut order = expected.clone();
            order.reverse();
            assert_eq!(rev.size() as usize, order.len());
            assert_eq!(
                rev.rank() as usize,
                order.iter().position(|&r| r == me).unwrap()
            );
            for (r, &job) in order.iter().enumerate() {
                assert_eq!(rev.translate_rank_to_jobrank(r as u32), job);
                assert_eq!(rev.translate_jobrank_to_rank(job), Some(r as u32));
            }
            for other in (0..n).filter(|r| r % 2 != color) {
                assert_eq!(rev.translate_jobrank_to_rank(other), None, "not a member");
            }
            assert!(!rev.is_primordial());

            // Equal keys: parent order.
            let same = world.split(Some(color), 7, None).unwrap();
            for (r, &job) in expected.iter().enumerate() {
                assert_eq!(same.translate_rank_to_jobrank(r as u32), job);
            }

            // Rank 0 passes no color.
            let without_zero = world.split((me != 0).then_some(0), 0, None);
            assert_eq!(without_zero.is_none(), me == 0);
            if let Some(t) = without_zero {
                assert_eq!(t.size(), n - 1);
                assert_eq!(t.rank(), me - 1);
                assert_eq!(t.translate_rank_to_jobrank(0), 1);
            }
            world.barrier();
            client.finalize();
        });
    }
}

/// A split of a split: the halves of the odd/even teams, translated to job ranks.
#[test]
fn a_split_of_a_split() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let (client, world) = init("TM_SPLIT2");
            let me = world.rank();
            let parity = world.split(Some(me % 2), 0, None).unwrap();
            let half = parity.size().div_ceil(2);
            let quarter = parity
                .split(Some(u32::from(parity.rank() >= half)), 0, None)
                .unwrap();
            let parity_members: Vec<u32> = (0..n).filter(|r| r % 2 == me % 2).collect();
            let mine: Vec<u32> = parity_members
                .iter()
                .enumerate()
                .filter(|(i, _)| (*i as u32 >= half) == (parity.rank() >= half))
                .map(|(_, &r)| r)
                .collect();
            assert_eq!(quarter.size() as usize, mine.len());
            for (r, &job) in mine.iter().enumerate() {
                assert_eq!(quarter.translate_rank_to_jobrank(r as u32), job);
            }
            // Collectives work on the grandchild team.
            let mut sum = [u64::from(me)];
            quarter.reduce_to_all(&mut sum, gex::ops::Op::Add);
            assert_eq!(sum[0], mine.iter().map(|&r| u64::from(r)).sum::<u64>());
            world.barrier();
            client.finalize();
        });
    }
}

/// Client data is per team; a rank outside the team is an invalid rank naming the call.
#[test]
fn client_data_and_bad_ranks() {
    for n in [1usize, 3] {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, world) = init("TM_CDATA");
            let me = world.rank();
            let team = world.split(Some(0), 0, None).unwrap();
            assert!(team.cdata().is_none());
            team.set_cdata(Some(Arc::new(me + 100)));
            assert!(world.cdata().is_none(), "the world's data is its own");
            let got = team.cdata().unwrap();
            assert_eq!(*got.downcast_ref::<u32>().unwrap(), me + 100);
            common::expect_panic(
                &["Team::translate_rank_to_jobrank", "not in the team"],
                || team.translate_rank_to_jobrank(n as u32),
            );
            common::expect_panic(&["Team::split", "not a non-negative int"], || {
                team.split(Some(u32::MAX), 0, None)
            });
            assert_eq!(
                team.split_scratch_size(Some(0), 0, gex::coll::ScratchQuery::Min),
                0
            );
            // Scratch space serves the broadcast between hosts: some is recommended to
            // a member, none to one that gets no team.
            assert!(team.split_scratch_size(Some(0), 0, gex::coll::ScratchQuery::Recommended) > 0);
            assert_eq!(
                team.split_scratch_size(None, 0, gex::coll::ScratchQuery::Recommended),
                0
            );
            world.barrier();
            client.finalize();
        });
    }
}

/// `gex_TM_Destroy` is collective, returns the scratch space granted at the split
/// (which must lie in the bound segment), and a destroyed team is an error naming the
/// call; the primordial team is not destroyable.
#[test]
fn destroy_returns_scratch_and_the_team_is_gone() {
    for n in 1..=4usize {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, world) = init("TM_DESTROY");
            let seg = Segment::attach(&world, MB).unwrap();
            // Scratch space must lie in the bound segment ("within the bound segment
            // of the endpoint"): past its end, or private memory, is refused.
            let past_end = seg.addr().wrapping_add(MB - 100);
            common::expect_panic(&["Team::split", "scratch", "bound segment"], || {
                world.split(Some(0), 0, Some((past_end, 4096)))
            });
            let mut private = [0u8; 64];
            common::expect_panic(&["Team::split", "scratch", "bound segment"], || {
                world.split(Some(0), 0, Some((private.as_mut_ptr(), 64)))
            });
            let scratch = (seg.addr(), 4096);
            let team = world.split(Some(0), 0, Some(scratch)).unwrap();
            let mut v = [1u32];
            team.reduce_to_all(&mut v, gex::ops::Op::Add);
            assert_eq!(v[0], n as u32);
            let copy = team;
            assert_eq!(team.destroy(), Some(scratch));
            common::expect_panic(&["Team::barrier_nb", "destroyed"], || copy.barrier_nb());
            common::expect_panic(&["Team::cdata", "destroyed"], || copy.cdata());
            common::expect_panic(&["Team::destroy", "primordial"], || world.destroy());
            // A new split after a destroy gets a fresh team.
            let again = world.split(Some(1), 0, None).unwrap();
            again.barrier();
            assert_eq!(again.destroy(), None);
            world.barrier();
            client.finalize();
        });
    }
}

/// Two teams of one job run collectives at the same time without mixing their
/// messages: the odd and the even ranks each broadcast and reduce within their team.
#[test]
fn sibling_teams_run_collectives_at_once() {
    for n in 2..=5u32 {
        spmd(n as usize, || {
            let (client, world) = init("TM_SIBLINGS");
            let me = world.rank();
            let team = world.split(Some(me % 2), 0, None).unwrap();
            for round in 0..20u8 {
                let mut buf = vec![0u8; 5000];
                if team.rank() == 0 {
                    buf.fill(round.wrapping_mul(3).wrapping_add(me as u8 % 2));
                }
                team.broadcast(0, &mut buf);
                let root_job = team.translate_rank_to_jobrank(0);
                assert!(buf
                    .iter()
                    .all(|&b| b == round.wrapping_mul(3).wrapping_add(root_job as u8 % 2)));
                let mut x = [u64::from(me) + u64::from(round)];
                team.reduce_to_all(&mut x, gex::ops::Op::Max);
                let max = (0..n).filter(|r| r % 2 == me % 2).max().unwrap();
                assert_eq!(x[0], u64::from(max) + u64::from(round));
                team.barrier();
            }
            world.barrier();
            client.finalize();
        });
    }
}

/// Ranks that call different collectives at the same point of a team's call order:
/// the job fails with a message saying so, instead of a wrong result.
#[test]
fn mismatched_collectives_fail_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        let (_client, world) = init("TM_MISMATCH");
        let team = world.split(Some(0), 0, None).unwrap();
        // Rank 1 broadcasts (as the root it is done once its data left) while rank 0
        // waits in a reduction for a contribution that never comes: rank 0 receives
        // the broadcast's message instead.
        if team.rank() == 0 {
            let mut x = [1u64];
            team.reduce_to_all(&mut x, gex::ops::Op::Add);
        } else {
            let mut buf = [0u8; 8];
            team.broadcast(1, &mut buf);
        }
        world.barrier();
        unreachable!("the ranks disagree");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(report.contains("different collective"), "{report}");
}

/// The report of a job of `n` ranks, with `GEX_COLL_BARRIER` set to `barrier`, in
/// which `order` places collectives differently on different ranks of the primordial
/// team or, with `split`, of a team of every rank split from it; `None` where the
/// harness skips it.
fn misordered_job(
    n: usize,
    barrier: &str,
    split: bool,
    order: impl FnOnce(&Team, &mut [u8; 8]),
) -> Option<String> {
    let mut opts = SpmdOptions::new(n);
    opts.expect_failure = true;
    opts.env = vec![("GEX_COLL_BARRIER".into(), barrier.into())];
    let outcome = spmd_outcome(opts, move || {
        let (_client, world) = init("TM_BARRIER_ORDER");
        let team = if split {
            world.split(Some(0), 0, None).unwrap()
        } else {
            world
        };
        order(&team, &mut [0u8; 8]);
        world.barrier();
        unreachable!("the ranks disagree");
    })?;
    Some(outcome.failure.expect("the job fails"))
}

/// A barrier outside the collective engine (the primordial team's, and a split
/// team's through its block of signal words, or the engine's own with
/// `GEX_COLL_BARRIER=am`) that ranks place differently among the team's other
/// collectives: rank 1 broadcasts then barriers, rank 0 barriers then broadcasts. Rank
/// 1's broadcast reaches rank 0 counting one barrier fewer than rank 0's does, and the
/// job fails with a message saying so.
#[test]
fn a_barrier_out_of_place_fails_the_job() {
    for (split, env) in [(false, ""), (true, ""), (true, "am")] {
        let Some(report) = misordered_job(2, env, split, |team, buf| {
            team.barrier();
            if team.rank() == 0 {
                team.barrier();
                team.broadcast(1, buf);
            } else {
                team.broadcast(1, buf);
                team.barrier();
            }
        }) else {
            continue;
        };
        assert!(
            report.contains("different collective") && report.contains("barriers"),
            "split {split}, GEX_COLL_BARRIER={env:?}: {report}"
        );
    }
}

/// A barrier outside the collective engine that a rank places before a broadcast it
/// roots, while the other members place it after: they wait in the broadcast for the
/// root's data, the root in the barrier for their signals, and no message of either
/// operation crosses. The root's signal tells rank 1 how many collectives the root
/// started before its barrier, and the job fails with a message saying so instead of
/// hanging. The primordial team and a split team, on 2, 3 and 5 ranks.
#[test]
fn a_barrier_placed_where_a_peer_waits_in_a_collective_fails_the_job() {
    for n in [2, 3, 5] {
        for split in [false, true] {
            let Some(report) = misordered_job(n, "", split, |team, buf| {
                team.broadcast(0, buf);
                team.barrier();
                if team.rank() == 0 {
                    team.barrier();
                    team.broadcast(0, buf);
                } else {
                    team.broadcast(0, buf);
                    team.barrier();
                }
            }) else {
                continue;
            };
            assert!(
                report.contains("Team::broadcast")
                    && report.contains("started a barrier where this rank started"),
                "{n} ranks, split {split}: {report}"
            );
        }
    }
}

/// `shared_id` names a team the same way on every member, differs between teams, and
/// the primordial team's is 0.
#[test]
fn every_member_agrees_on_a_teams_shared_id() {
    for n in 1..=4u32 {
        spmd(n as usize, || {
            let (client, world) = init("TM_SHARED_ID");
            assert_eq!(world.shared_id(), 0);
            let a = world.split(Some(world.rank() % 2), 0, None).unwrap();
            let b = world.split(Some(0), 0, None).unwrap();
            assert_ne!(a.shared_id(), b.shared_id());
            let mut ids = [a.shared_id(), b.shared_id()];
            let mut lo = ids;
            b.reduce_to_all(&mut ids, gex::ops::Op::Max);
            b.reduce_to_all(&mut lo, gex::ops::Op::Min);
            assert_eq!(ids[1], lo[1], "every member names b alike");
            if n > 1 {
                assert_ne!(ids[0], lo[0], "the two halves are different teams");
            }
            world.barrier();
            client.finalize();
        });
    }
}
