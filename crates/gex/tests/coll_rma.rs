//! The GASNet-EX broadcast (`gex_Coll_BroadcastNB`) between neighbourhoods by RMA:
//! a receiver reads the data from its parent's segment where the parent's copy lies
//! there; else each receiver offers its parent in the tree its destination when it
//! lies in its segment, else its team's scratch space, else asks for messages
//! (`coll::broadcast`). On one neighbourhood (the smp conduit, one mpi host) the same
//! calls take the direct copies or the messages, and must deliver the same bytes; run
//! under mpi with `GEX_MPI_HOST_RANKS=1` (every rank its own host) and `=2` (mixed
//! placement), and across namespace hosts (`scripts/multihost.sh`, where the RMA
//! needs the target's progress), to exercise the reads and the puts.
mod common;

use common::coll::{finalize, init};
use gex::coll::{set_algorithm, Algorithm, Kind, BROADCAST_RMA_MIN, BROADCAST_RMA_PIECE};
use gex::testing::spmd;
use gex::Flags;

const ALGORITHMS: [Algorithm; 2] = [Algorithm::Flat, Algorithm::Binomial];

/// A broadcast between neighbourhoods from [`BROADCAST_RMA_MIN`] bytes moves by RMA:
/// read by each child from its parent's copy where that lies in the parent's segment
/// (the root's source in its segment, an inner rank's destination in its segment),
/// else put into each receiver's destination when it lies in the receiver's segment,
/// else in messages (each parent's choice for its edge of the tree). Every root and
/// algorithm, sizes around the switch and past one piece, destinations in every
/// segment or only in some, sources in the root's segment or not; back-to-back broadcasts into the same destinations without a
/// barrier between them, and two in flight at once. On one neighbourhood (the smp
/// conduit, one mpi host) the same calls take the direct copies or the messages.
#[test]
fn a_broadcast_into_the_segments_reaches_every_rank() {
    const BIG: usize = (1 << 20) + 3;
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_BCAST_RMA");
            let seg = gex::Segment::attach(&team, 4 << 20).unwrap();
            let me = team.rank();
            // The segment: two destinations, then the root's source.
            let at = |i: usize| seg.addr().wrapping_add(i * BIG);
            let sizes = [
                BROADCAST_RMA_MIN - 1,
                BROADCAST_RMA_MIN,
                BROADCAST_RMA_MIN + 1,
                BROADCAST_RMA_PIECE + 5,
                BIG,
            ];
            let mut private = [vec![0u8; BIG], vec![0u8; BIG]];
            let mut k = 0u64;
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Broadcast, Some(algorithm));
                // Destinations in every segment, then only on even ranks.
                for some_private in [false, true] {
                    let dst = |i: usize, private: &mut [Vec<u8>; 2]| {
                        if some_private && me % 2 == 1 {
                            private[i].as_mut_ptr()
                        } else {
                            at(i)
                        }
                    };
                    for root in 0..n {
                        for size in sizes {
                            // Back to back: the same destination with other bytes, no
                            // barrier between.
                            for _ in 0..2 {
                                k += 1;
                                let want = common::pattern(k, size);
                                let from_segment = k % 4 < 2;
                                let src = if from_segment {
                                    at(2)
                                } else {
                                    want.as_ptr().cast_mut()
                                };
                                let d = dst(0, &mut private);
                                // SAFETY: `d` and the source area hold BIG bytes, ours
                                // until the event completes; `want` outlives the wait.
                                unsafe {
                                    if me == root && from_segment {
                                        std::ptr::copy_nonoverlapping(want.as_ptr(), src, size);
                                    }
                                    std::ptr::write_bytes(d, 0xEE, size);
                                    team.broadcast_nb(root, d, src, size, Flags::NONE).wait();
                                }
                                // SAFETY: as above, after completion.
                                let got = unsafe { std::slice::from_raw_parts(d, size) };
                                assert!(
                                    got == want,
                                    "{algorithm:?} root {root} size {size} some_private \
                                     {some_private} from_segment {from_segment}"
                                );
                            }
                        }
                        // Two in flight at once, from two roots.
                        let other = (root + 1) % n;
                        let (a, b) = (common::pattern(k + 100, BIG), common::pattern(k + 200, BIG));
                        let (da, db) = (dst(0, &mut private), dst(1, &mut private));
                        // SAFETY: two distinct destinations of BIG bytes; the sources
                        // (Vecs) outlive the waits.
                        let events = unsafe {
                            [
                                team.broadcast_nb(root, da, a.as_ptr(), BIG, Flags::NONE),
                                team.broadcast_nb(other, db, b.as_ptr(), BIG, Flags::NONE),
                            ]
                        };
                        for e in events {
                            e.wait();
                        }
                        // SAFETY: both complete.
                        unsafe {
                            assert!(std::slice::from_raw_parts(da, BIG) == a.as_slice());
                            assert!(std::slice::from_raw_parts(db, BIG) == b.as_slice());
                        }
                    }
                }
            }
            finalize(&team);
        });
    }
}

/// A receiver whose destination lies outside its segment stages a broadcast between
/// neighbourhoods in its team's scratch space (granted at the split, `gex_TM_Split`'s
/// `scratch_addr`) and copies each piece out: private destinations on a split team with
/// scratch space, every root, both algorithms, sizes around the switch and up to the
/// scratch space's size, back to back (the scratch space reused at once), two in flight
/// (one stages, the other takes messages), and one larger than the scratch space
/// (messages). The scratch space is returned at destroy.
#[test]
fn a_broadcast_stages_in_the_team_scratch_space() {
    const SCRATCH: usize = (1 << 20) + 3;
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let world = init("COLL_BCAST_SCRATCH");
            let seg = gex::Segment::attach(&world, 2 << 20).unwrap();
            let team = world
                .split(Some(0), 0, Some((seg.addr(), SCRATCH)))
                .unwrap();
            let me = team.rank();
            let mut k = 0u64;
            let check = |root: u32, size: usize, k: u64| {
                let want = common::pattern(k, size);
                let src = if me == root { want.clone() } else { Vec::new() };
                let mut dst = vec![0xEEu8; size];
                // SAFETY: both buffers outlive the wait.
                unsafe {
                    team.broadcast_nb(root, dst.as_mut_ptr(), src.as_ptr(), size, Flags::NONE)
                }
                .wait();
                assert!(dst == want, "root {root} size {size}");
            };
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Broadcast, Some(algorithm));
                for root in 0..n {
                    for size in [
                        BROADCAST_RMA_MIN - 1,
                        BROADCAST_RMA_MIN,
                        BROADCAST_RMA_PIECE + 5,
                        SCRATCH,
                        SCRATCH + 1,
                    ] {
                        // Back to back, no barrier between.
                        for _ in 0..2 {
                            k += 1;
                            check(root, size, k);
                        }
                    }
                    // Two in flight: one has the scratch space, the other messages.
                    let other = (root + 1) % n;
                    k += 2;
                    let (a, b) = (common::pattern(k, SCRATCH), common::pattern(k + 1, SCRATCH));
                    let (mut da, mut db) = (vec![0u8; SCRATCH], vec![0u8; SCRATCH]);
                    // SAFETY: all four buffers outlive the waits.
                    let events = unsafe {
                        [
                            team.broadcast_nb(
                                root,
                                da.as_mut_ptr(),
                                a.as_ptr(),
                                SCRATCH,
                                Flags::NONE,
                            ),
                            team.broadcast_nb(
                                other,
                                db.as_mut_ptr(),
                                b.as_ptr(),
                                SCRATCH,
                                Flags::NONE,
                            ),
                        ]
                    };
                    for e in events {
                        e.wait();
                    }
                    assert!(da == a && db == b, "two in flight from {root} and {other}");
                }
            }
            team.barrier();
            assert_eq!(team.destroy(), Some((seg.addr(), SCRATCH)));
            finalize(&world);
        });
    }
}
