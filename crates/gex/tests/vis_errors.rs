//! VIS degenerate cases and bad input (GASNet-EX "Strided Puts and Gets",
//! "Degenerate cases" and "Restrictions"), with 1 to 3 ranks: what the spec makes a
//! no-op moves nothing and ignores what it says is ignored; bad input fails naming the
//! call before any byte moves.
mod common;

use common::expect_panic;
use common::pattern;
use common::vis::{init, region, REGION};
use gex::testing::spmd;
use gex::{Flags, Memvec};

/// "Degenerate cases": `elemsz == 0` ignores every other argument; a zero count ignores
/// rank and addresses but still needs the stride arrays; empty lists and zero-length
/// entries move nothing and their addresses are ignored; none of them writes a byte.
#[test]
fn degenerate_cases_move_nothing() {
    for n in [1, 3] {
        spmd(n, || {
            let (client, team, seg, bases) = init("VIS_DEGENERATE");
            let me = team.rank() as usize;
            let mine = seg.addr() as usize + region(team.rank());
            let fill = pattern(me as u64, 256);
            // SAFETY: this rank's own region of its own segment, written by no one else.
            unsafe { std::ptr::copy(fill.as_ptr(), mine as *mut u8, 256) };
            let own = bases[me] + region(team.rank());
            let bad_rank = team.size() + 7;
            let src = [1u8; 64];
            let mut dst = [9u8; 64];
            // elemsz == 0: even the rank, the counts and the stride arrays are ignored.
            team.strided_put_blocking(bad_rank, 0, &[], &src, 999, &[], 0, &[5, 5], Flags::NONE)
                .unwrap();
            team.strided_get_blocking(&mut dst, 999, &[], bad_rank, 0, &[], 0, &[5], Flags::NONE)
                .unwrap();
            // A zero count: rank and addresses ignored, strides must be there.
            team.strided_put_blocking(
                bad_rank,
                0,
                &[1, 1],
                &src,
                999,
                &[1, 1],
                8,
                &[3, 0],
                Flags::NONE,
            )
            .unwrap();
            // SAFETY: nothing is moved at all.
            unsafe {
                team.strided_get_nb(&mut dst, 0, &[8], bad_rank, 1, &[8], 8, &[0], Flags::NONE)
                    .unwrap()
                    .wait();
                team.strided_put_nbi(bad_rank, 1, &[8], &src, 0, &[8], 8, &[0], Flags::NONE)
                    .unwrap();
            }
            expect_panic(
                &[
                    "gex::Team::strided_put_blocking",
                    "fewer than the 2 stride levels",
                ],
                || {
                    team.strided_put_blocking(
                        bad_rank,
                        0,
                        &[1],
                        &src,
                        0,
                        &[1, 1],
                        8,
                        &[3, 0],
                        Flags::NONE,
                    )
                },
            );
            // Empty lists and zero-length entries with addresses far outside any segment.
            let empty: [&[u8]; 0] = [];
            team.vector_put_blocking(team.rank(), &[], &empty, Flags::NONE)
                .unwrap();
            team.vector_put_blocking(team.rank(), &[Memvec::new(1, 0)], &[&[][..]], Flags::NONE)
                .unwrap();
            team.indexed_put_blocking(team.rank(), &[1, 2, 3], 0, &empty, Flags::NONE)
                .unwrap();
            let mut none: [Vec<u8>; 2] = [vec![], vec![]];
            team.indexed_get_blocking(&mut none, team.rank(), &[usize::MAX], 0, Flags::NONE)
                .unwrap();
            team.vector_get_blocking(&mut none, team.rank(), &[], Flags::NONE)
                .unwrap();
            // The rank of a list call is still checked.
            expect_panic(
                &["gex::Team::vector_put_blocking", "not in the team"],
                || team.vector_put_blocking(bad_rank, &[], &empty, Flags::NONE),
            );
            assert_eq!(dst, [9u8; 64]);
            let mut now = vec![0u8; 256];
            team.get_blocking(&mut now, team.rank(), own, Flags::NONE)
                .unwrap();
            assert_eq!(now, fill);
            team.barrier();
            client.finalize();
        });
    }
}

/// Bad input fails naming the call before any byte moves: a shape leaving the segment
/// (forwards or, by a negative stride, backwards), an entry outside it, sizes that
/// overflow, a bad rank, lists of different totals, overlapping destinations, a local
/// shape outside its slice, `ENABLE_LEAF_LC` where it does not apply.
#[test]
fn bad_input_is_refused_before_any_byte_moves() {
    for n in [1, 2] {
        spmd(n, || {
            let (client, team, _seg, bases) = init("VIS_ERRORS");
            let me = team.rank();
            let r = (me + 1) % team.size();
            let seg_end = bases[r as usize] + REGION * team.size() as usize;
            let near_end = seg_end - 64;
            let clean = vec![0x5Au8; 64];
            team.put_blocking(r, near_end, &clean, Flags::NONE).unwrap();
            team.barrier();
            let src = [7u8; 4096];
            let mut dst = [0u8; 4096];
            let put = "gex::Team::strided_put_blocking";
            let get = "gex::Team::strided_get_nb";
            // 8 rows of 16 bytes with stride 16: the last rows pass the segment's end.
            expect_panic(&[put, "outside the segment"], || {
                team.strided_put_blocking(r, near_end, &[16], &src, 0, &[16], 16, &[8], Flags::NONE)
            });
            // A negative stride reaching below the segment's start.
            expect_panic(&[put, "outside the segment"], || {
                team.strided_put_blocking(
                    r,
                    bases[r as usize] + 8,
                    &[-16],
                    &src,
                    0,
                    &[16],
                    8,
                    &[3],
                    Flags::NONE,
                )
            });
            // SAFETY: refused before anything moves.
            expect_panic(&[get, "outside the segment"], || unsafe {
                team.strided_get_nb(
                    &mut dst,
                    0,
                    &[8],
                    r,
                    near_end,
                    &[4096],
                    8,
                    &[2],
                    Flags::NONE,
                )
            });
            expect_panic(&[put, "overflows"], || {
                team.strided_put_blocking(
                    r,
                    near_end,
                    &[1, 1],
                    &src,
                    0,
                    &[1, 1],
                    8,
                    &[usize::MAX / 4, 8],
                    Flags::NONE,
                )
            });
            expect_panic(&[put, "overflows"], || {
                team.strided_put_blocking(
                    r,
                    near_end,
                    &[isize::MAX],
                    &src,
                    0,
                    &[1],
                    1,
                    &[3],
                    Flags::NONE,
                )
            });
            expect_panic(&[put, "not in the team"], || {
                team.strided_put_blocking(team.size(), 0, &[], &src, 0, &[], 8, &[], Flags::NONE)
            });
            expect_panic(&[put, "destination elements overlap"], || {
                team.strided_put_blocking(r, near_end, &[0], &src, 0, &[8], 8, &[2], Flags::NONE)
            });
            expect_panic(
                &[
                    "gex::Team::strided_get_blocking",
                    "destination elements overlap",
                ],
                || {
                    team.strided_get_blocking(
                        &mut dst,
                        0,
                        &[4],
                        r,
                        near_end,
                        &[8],
                        8,
                        &[3],
                        Flags::NONE,
                    )
                },
            );
            expect_panic(&[put, "local shape spans"], || {
                team.strided_put_blocking(
                    r,
                    near_end,
                    &[8],
                    &src[..20],
                    0,
                    &[8],
                    8,
                    &[3],
                    Flags::NONE,
                )
            });
            expect_panic(&[put, "local shape spans"], || {
                team.strided_put_blocking(r, near_end, &[8], &src, 0, &[-8], 8, &[3], Flags::NONE)
            });
            expect_panic(&[put, "ENABLE_LEAF_LC"], || {
                team.strided_put_blocking(
                    r,
                    near_end,
                    &[],
                    &src,
                    0,
                    &[],
                    8,
                    &[],
                    Flags::ENABLE_LEAF_LC,
                )
            });
            // Lists: an entry past the end, totals that differ, overlapping ranges.
            let vput = "gex::Team::vector_put_blocking";
            expect_panic(&[vput, "outside the segment"], || {
                let dsts = [Memvec::new(near_end, 8), Memvec::new(seg_end - 4, 8)];
                team.vector_put_blocking(r, &dsts, &[&src[..16]], Flags::NONE)
            });
            expect_panic(
                &[vput, "the source lists 16 bytes and the destination 8"],
                || {
                    team.vector_put_blocking(
                        r,
                        &[Memvec::new(near_end, 8)],
                        &[&src[..16]],
                        Flags::NONE,
                    )
                },
            );
            expect_panic(&[vput, "overlap"], || {
                let dsts = [Memvec::new(near_end + 8, 8), Memvec::new(near_end + 4, 8)];
                team.vector_put_blocking(r, &dsts, &[&src[..16]], Flags::NONE)
            });
            expect_panic(&["gex::Team::indexed_put_blocking", "overlap"], || {
                team.indexed_put_blocking(
                    r,
                    &[near_end, near_end + 4],
                    8,
                    &[[1u8; 8]; 2],
                    Flags::NONE,
                )
            });
            expect_panic(&["gex::Team::indexed_put_blocking", "one length"], || {
                team.indexed_put_blocking(r, &[near_end], 8, &[&src[..3], &src[..5]], Flags::NONE)
            });
            expect_panic(
                &["gex::Team::indexed_get_blocking", "outside the segment"],
                || {
                    let mut pieces = [[0u8; 8]; 2];
                    team.indexed_get_blocking(&mut pieces, r, &[near_end, seg_end], 8, Flags::NONE)
                },
            );
            expect_panic(&["gex::Team::vector_get_nbi", "ENABLE_LEAF_LC"], || {
                let mut pieces = [[0u8; 8]];
                // SAFETY: refused before anything moves.
                unsafe {
                    team.vector_get_nbi(
                        &mut pieces,
                        r,
                        &[Memvec::new(near_end, 8)],
                        Flags::ENABLE_LEAF_LC,
                    )
                }
            });
            assert_eq!(dst, [0u8; 4096]);
            team.barrier();
            let mut after = vec![0u8; 64];
            team.get_blocking(&mut after, r, near_end, Flags::NONE)
                .unwrap();
            assert_eq!(after, clean, "a refused call wrote to the segment");
            team.barrier();
            client.finalize();
        });
    }
}

/// A source piece whose `AsRef` answers 64 bytes when first asked and none after.
struct Shrinking {
    bytes: Vec<u8>,
    asked: std::cell::Cell<u32>,
}

impl AsRef<[u8]> for Shrinking {
    fn as_ref(&self) -> &[u8] {
        let first = self.asked.get() == 0;
        self.asked.set(self.asked.get() + 1);
        if first {
            &self.bytes
        } else {
            &[]
        }
    }
}

/// An Indexed put measures its local pieces before it moves them: a piece whose safe
/// `AsRef` then answers a shorter slice fails the call naming it, instead of being
/// read past its end.
#[test]
fn an_indexed_put_reads_no_piece_past_its_end() {
    for n in [1, 2] {
        spmd(n, || {
            let (client, team, _seg, bases) = init("VIS_SHRINKING");
            let r = (team.rank() + 1) % team.size();
            let at = bases[r as usize] + region(team.rank());
            let src = [Shrinking {
                bytes: vec![3; 64],
                asked: std::cell::Cell::new(0),
            }];
            expect_panic(
                &["gex::Team::indexed_put_blocking", "64 bytes had 0"],
                || team.indexed_put_blocking(r, &[at], 64, &src, Flags::NONE),
            );
            team.barrier();
            client.finalize();
        });
    }
}
