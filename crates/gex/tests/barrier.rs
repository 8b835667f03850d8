//! The barrier ("Split-phase barrier over a Team", `gex_Coll_BarrierNB`), with 1 to 4
//! ranks.
//!
//! A rank held back until another puts a flag into its segment polls while it waits:
//! progress happens only inside library calls ("_Wait: Polls until success"), and
//! between hosts a put may need the target's progress to land (the mpi conduit's
//! world window under Open MPI's `osc pt2pt` applies it when the target enters MPI),
//! so a rank spinning on its own memory without polling could wait forever.
mod common;

use std::time::{Duration, Instant};

use gex::testing::{spmd, spmd_with, SpmdOptions};
use gex::{Client, Event, Flags, Segment};

const MB: usize = 1 << 20;

/// "can be successfully synchronized only after all members of the team have issued a
/// corresponding call", 50 times in a row, with signals through shared words and
/// through messages: before barrier `k` every rank writes `k`
/// into its own slot of every rank's segment (some ranks after a delay); after it,
/// every slot holds `k` (or `k + 1` from a rank already past the next barrier, never
/// less), so no rank left barrier `k` before all had entered it.
#[test]
fn no_rank_leaves_before_all_entered() {
    for (n, algorithm) in (1..=4).flat_map(|n| [(n, "signal"), (n, "am")]) {
        let mut opts = SpmdOptions::new(n);
        opts.env.push(("GEX_COLL_BARRIER".into(), algorithm.into()));
        spmd_with(opts, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("BAR_ORDER", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let (me, size) = (team.rank() as usize, team.size() as usize);
            for k in 1..=50u64 {
                // A different rank dawdles each time.
                if k as usize % size == me && k % 5 == 0 {
                    std::thread::sleep(Duration::from_millis(20));
                }
                for (r, b) in bases.iter().enumerate() {
                    team.put_val_blocking(r as u32, b + 8 * me, k, 8, Flags::NONE)
                        .unwrap();
                }
                team.barrier();
                for w in 0..size {
                    // SAFETY: a word of our segment, written by rank w's put.
                    let v = unsafe { common::read_u64(seg.addr() as usize + 8 * w) };
                    assert!(
                        v == k || v == k + 1,
                        "after barrier {k}, rank {w}'s slot holds {v}"
                    );
                }
            }
            client.finalize();
        });
    }
}

/// The split-phase barrier: `barrier_nb` returns at once, other work (puts, polling)
/// goes on in between, and the event completes only after every rank issued its call;
/// rank 0 starts it while the others hold back until rank 0 tells them (by RMA) to go.
#[test]
fn split_phase_barrier_with_work_in_between() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("BAR_SPLIT", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            for round in 1..=3u64 {
                let flag = seg.addr() as usize + 4096;
                if me == 0 {
                    let mut ev = team.barrier_nb();
                    let mut done_early = false;
                    let end = Instant::now() + Duration::from_millis(30);
                    let mut work = 0u64;
                    while Instant::now() < end {
                        // Work between the phases: a put to every peer, then poll.
                        for r in 1..team.size() {
                            team.put_val_blocking(r, bases[r as usize] + 8, work, 8, Flags::NONE)
                                .unwrap();
                        }
                        work += 1;
                        gex::poll();
                        done_early |= ev.test();
                    }
                    assert_eq!(
                        done_early,
                        team.size() == 1,
                        "round {round}: barrier done before the others entered"
                    );
                    for r in 1..team.size() {
                        team.put_val_blocking(r, bases[r as usize] + 4096, round, 8, Flags::NONE)
                            .unwrap();
                    }
                    ev.wait();
                } else {
                    // Polling while held back: rank 0's puts need this rank's progress
                    // between hosts (see the module documentation).
                    common::poll_until(&format!("rank 0's release of round {round}"), 10, || {
                        // SAFETY: a word of our segment, written by rank 0.
                        unsafe { common::read_u64(flag) == round }
                    });
                    let ev = team.barrier_nb();
                    // Local work before waiting.
                    let s: u64 = (0..10_000u64).sum();
                    assert_eq!(s, 49_995_000);
                    ev.wait();
                }
            }
            client.finalize();
        });
    }
}

/// "Multiple collective operations ... may be active concurrently ... There is no
/// longer an exception regarding gex_Coll_BarrierNB()": rank 0 starts two barriers
/// before the other ranks enter either; both complete, in order, once they do.
#[test]
fn two_barriers_in_flight_at_once() {
    for n in 1..=4 {
        // The job's limit is the harness's: it covers the start-up too, which across
        // hosts can take seconds; the waits below bound the barriers themselves.
        spmd(n, || {
            let (client, _ep, team) = Client::init("BAR_TWICE", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            if team.rank() == 0 {
                let first = team.barrier_nb();
                let second = team.barrier_nb();
                if team.size() == 1 {
                    assert!(
                        first.is_invalid() && second.is_invalid(),
                        "one-rank barriers complete at once"
                    );
                } else {
                    let mut both = vec![first, second];
                    assert!(
                        !Event::test_some(&mut both),
                        "no barrier completes before the others enter"
                    );
                    for r in 1..team.size() {
                        team.put_val_blocking(r, bases[r as usize], 1, 8, Flags::NONE)
                            .unwrap();
                    }
                    let end = Instant::now() + Duration::from_secs(5);
                    while !Event::test_all(&mut both) {
                        assert!(Instant::now() < end, "the two barriers never completed");
                        gex::poll();
                    }
                }
            } else {
                // Polling while held back, as above.
                // SAFETY: a word of our segment, written by rank 0.
                common::poll_until("rank 0's release", 5, || unsafe {
                    common::read_u64(seg.addr() as usize) == 1
                });
                team.barrier();
                team.barrier();
            }
            // Barriers keep working afterwards.
            team.barrier();
            team.barrier();
            client.finalize();
        });
    }
}

/// Split teams' barriers, through their blocks of signal words or, once every block is
/// taken (more teams alive than blocks) or with `GEX_COLL_BARRIER=am`, through the
/// collective engine: before barrier `k` of a team every member writes a value naming
/// the team's creation and `k` into its own slot of every member's area for the team;
/// after it, every slot of the area holds at least that, so no member left barrier `k`
/// before all had entered it. Teams are made and destroyed across 14 cycles (blocks
/// are freed and taken again), up to 10 alive at once, some with two barriers in
/// flight; the members of a split of the world by parity, or all of them.
#[test]
fn split_team_barriers_hold_every_member_back() {
    /// Teams alive at most at once, each with an area of the segment.
    const SLOTS: usize = 10;
    for (n, algorithm) in (1..=5).flat_map(|n| [(n, "signal"), (n, "am")]) {
        if algorithm == "am" && n % 2 == 0 {
            continue; // the engine's path is the one the other tests take
        }
        let mut opts = SpmdOptions::new(n);
        opts.env.push(("GEX_COLL_BARRIER".into(), algorithm.into()));
        spmd_with(opts, || {
            let (client, _ep, world) = Client::init("BAR_TEAMS", Flags::NONE).unwrap();
            let seg = Segment::attach(&world, MB).unwrap();
            let bases = common::segment_bases(&world);
            let me = world.rank();
            // (team, its area, the cycle that made it)
            let mut alive: Vec<(gex::Team, usize, u64)> = Vec::new();
            for cycle in 1..=14u64 {
                let color = if cycle % 3 == 0 { 0 } else { me % 2 };
                let team = world.split(Some(color), me as i32, None).unwrap();
                let free = (0..SLOTS)
                    .find(|s| alive.iter().all(|(_, a, _)| a != s))
                    .expect("a free area");
                alive.push((team, free, cycle));
                for round in 0..3u64 {
                    for (team, area, made) in &alive {
                        let (tr, size) = (team.rank() as usize, team.size());
                        let value = made << 32 | (round + 1);
                        for r in 0..size {
                            let job = team.translate_rank_to_jobrank(r) as usize;
                            let at = bases[job] + area * 4096 + 8 * tr;
                            world
                                .put_val_blocking(job as u32, at, value, 8, Flags::NONE)
                                .unwrap();
                        }
                        if round == 1 {
                            // Two in flight: the second completes after the first.
                            let first = team.barrier_nb();
                            let second = team.barrier_nb();
                            second.wait();
                            assert!(Event::test_all(&mut [first]), "the earlier barrier");
                        } else {
                            team.barrier();
                        }
                        for w in 0..size as usize {
                            // SAFETY: a word of our segment, written by member w's put.
                            let v = unsafe {
                                common::read_u64(seg.addr() as usize + area * 4096 + 8 * w)
                            };
                            assert!(
                                v >= value,
                                "cycle {cycle}: after barrier {round} of the team made in \
                                 cycle {made}, member {w}'s slot holds {v:#x}, not {value:#x}"
                            );
                        }
                    }
                }
                if alive.len() == SLOTS || cycle % 4 == 0 {
                    // Destroy the oldest few (collective: every rank destroys the same).
                    let k = if alive.len() == SLOTS { 6 } else { 2 };
                    for (team, _, _) in alive.drain(..k) {
                        team.destroy();
                    }
                }
            }
            for (team, _, _) in alive.drain(..) {
                team.destroy();
            }
            world.barrier();
            client.finalize();
        });
    }
}
