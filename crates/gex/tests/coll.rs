//! The GASNet-EX collectives ("Collectives (Coll)": `gex_Coll_BarrierNB`,
//! `gex_Coll_BroadcastNB`, `gex_Coll_ReduceToOneNB`, `gex_Coll_ReduceToAllNB`) over the
//! primordial team and split teams, with 1 to 5 ranks, each algorithm forced in turn.
mod common;

use common::coll::{finalize, init};
use gex::coll::{set_algorithm, Algorithm, Kind};
use gex::ops::{Dt, Op};
use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use gex::{Event, Flags, Team};

const ALGORITHMS: [Algorithm; 2] = [Algorithm::Flat, Algorithm::Binomial];

/// "copies 'nbytes' bytes of data starting at 'src' on rank 'root' of 'tm', to 'dst'
/// on every rank": every root, sizes from 0 B to 1 MiB (past one message, and many),
/// both algorithms; on the root `src == dst` and `src != dst` both work.
#[test]
fn broadcast_from_every_root_every_size_every_algorithm() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_BCAST");
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Broadcast, Some(algorithm));
                for root in 0..n {
                    for size in [0usize, 1, 7, 3968, 3969, 4000, 4001, 70_001, 1 << 20] {
                        let seed = u64::from(root) * 1000 + size as u64;
                        let want = common::pattern(seed, size);
                        let mut dst = vec![0xEEu8; size];
                        let src = if team.rank() == root {
                            want.clone()
                        } else {
                            Vec::new()
                        };
                        // SAFETY: both buffers outlive the wait below.
                        unsafe {
                            team.broadcast_nb(
                                root,
                                dst.as_mut_ptr(),
                                src.as_ptr(),
                                size,
                                Flags::NONE,
                            )
                        }
                        .wait();
                        assert!(dst == want, "{algorithm:?} root {root} size {size}");
                        // In place at the root.
                        let mut buf = if team.rank() == root {
                            want.clone()
                        } else {
                            vec![0; size]
                        };
                        team.broadcast(root, &mut buf);
                        assert!(
                            buf == want,
                            "in place: {algorithm:?} root {root} size {size}"
                        );
                    }
                }
            }
            finalize(&team);
        });
    }
}

/// A rank's contribution for the reductions: distinct per rank and element.
fn contribution(rank: u32, i: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 - (i as i64) * 7919 + if i.is_multiple_of(3) { -5 } else { 11 }
}

/// Every built-in data type with ADD, MIN and MAX (and AND/OR/XOR for the integers),
/// to one (every root) and to all, against the fold computed here; sizes from 1
/// element to past a message.
#[test]
fn reductions_of_every_builtin_type_and_operation() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_REDUCE");
            let me = team.rank();
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Reduce, Some(algorithm));
                for count in [1usize, 5, 1000] {
                    check_type::<i32>(&team, me, n, count, Dt::I32);
                    check_type::<u32>(&team, me, n, count, Dt::U32);
                    check_type::<i64>(&team, me, n, count, Dt::I64);
                    check_type::<u64>(&team, me, n, count, Dt::U64);
                    check_type::<f32>(&team, me, n, count, Dt::Flt);
                    check_type::<f64>(&team, me, n, count, Dt::Dbl);
                }
            }
            finalize(&team);
        });
    }
}

trait Num: Copy + PartialEq + std::fmt::Debug + 'static {
    fn from_i64(v: i64) -> Self;
    fn fold(op: Op, a: Self, b: Self) -> Self;
}

macro_rules! num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn from_i64(v: i64) -> Self { v as $t }
            fn fold(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Add => a.wrapping_add(b),
                    Op::Min => if a < b { a } else { b },
                    Op::Max => if a > b { a } else { b },
                    Op::And => a & b,
                    Op::Or => a | b,
                    Op::Xor => a ^ b,
                    _ => unreachable!(),
                }
            }
        }
    )*};
}
num_int!(i32, u32, i64, u64);

macro_rules! num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            // Small binary fractions: exact in f32, and so are their sums of five.
            fn from_i64(v: i64) -> Self { (v % 4096) as $t / 8.0 }
            fn fold(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Add => a + b,
                    Op::Min => if a < b { a } else { b },
                    Op::Max => if a > b { a } else { b },
                    _ => unreachable!(),
                }
            }
        }
    )*};
}
num_float!(f32, f64);

fn check_type<T: Num>(team: &Team, me: u32, n: u32, count: usize, dt: Dt) {
    let size = std::mem::size_of::<T>();
    let ops: &[Op] = if matches!(dt, Dt::Flt | Dt::Dbl) {
        // Sums of exact binary fractions well inside the mantissa: every order of
        // addition gives the same bits, so the fold here is the reference.
        &[Op::Add, Op::Min, Op::Max]
    } else {
        &[Op::Add, Op::Min, Op::Max, Op::And, Op::Or, Op::Xor]
    };
    for &op in ops {
        let src: Vec<T> = (0..count)
            .map(|i| T::from_i64(contribution(me, i)))
            .collect();
        let want: Vec<T> = (0..count)
            .map(|i| {
                (1..n).fold(T::from_i64(contribution(0, i)), |acc, r| {
                    T::fold(op, acc, T::from_i64(contribution(r, i)))
                })
            })
            .collect();
        let mut all = vec![T::from_i64(0); count];
        // SAFETY: the buffers outlive the wait.
        unsafe {
            team.reduce_to_all_nb(
                all.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                dt,
                size,
                count,
                op,
                None,
                Flags::NONE,
            )
        }
        .wait();
        assert_eq!(all, want, "to all: {dt:?} {op:?} count {count}");
        for root in 0..n {
            let mut one = vec![T::from_i64(-1); count];
            // SAFETY: as above.
            unsafe {
                team.reduce_to_one_nb(
                    root,
                    one.as_mut_ptr().cast(),
                    src.as_ptr().cast(),
                    dt,
                    size,
                    count,
                    op,
                    None,
                    Flags::NONE,
                )
            }
            .wait();
            if me == root {
                assert_eq!(one, want, "to one: {dt:?} {op:?} root {root}");
            } else {
                assert!(
                    one.iter().all(|&v| v == T::from_i64(-1)),
                    "dst of a non-root written"
                );
            }
        }
    }
}

/// An affine map `x -> a*x + b` (mod 2^64), the element of a non-commutative user
/// reduction: composing them in a different order gives a different map.
fn affine(rank: u32) -> [u64; 2] {
    [2 * u64::from(rank) + 3, 5 * u64::from(rank) + 1]
}

/// `right = left then right`: `x -> a_r*(a_l*x + b_l) + b_r`.
fn compose(left: &[u8], right: &mut [u8], count: usize, cdata: usize) {
    assert_eq!(cdata, 0xC0FFEE, "the client data reaches the operation");
    for i in 0..count {
        let l = &left[16 * i..16 * i + 16];
        let r = &mut right[16 * i..16 * i + 16];
        let (al, bl) = (
            u64::from_ne_bytes(l[..8].try_into().unwrap()),
            u64::from_ne_bytes(l[8..].try_into().unwrap()),
        );
        let (ar, br) = (
            u64::from_ne_bytes(r[..8].try_into().unwrap()),
            u64::from_ne_bytes(r[8..].try_into().unwrap()),
        );
        r[..8].copy_from_slice(&ar.wrapping_mul(al).to_ne_bytes());
        r[8..].copy_from_slice(&ar.wrapping_mul(bl).wrapping_add(br).to_ne_bytes());
    }
}

/// `GEX_OP_USER_NC` with `GEX_DT_USER` of 16-byte elements: the result is the maps
/// composed in rank order (`src[0] (+) src[1] ... (+) src[n-1]`), which no other order
/// gives; the client data is passed to every call; both algorithms, to one and to all.
#[test]
fn a_non_commutative_user_operation_combines_in_rank_order() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_USER_NC");
            let me = team.rank();
            let mut want = affine(0);
            for r in 1..n {
                let [a, b] = affine(r);
                want = [
                    a.wrapping_mul(want[0]),
                    a.wrapping_mul(want[1]).wrapping_add(b),
                ];
            }
            let want_bytes: Vec<u8> = want.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let src: Vec<u8> = affine(me).iter().flat_map(|w| w.to_ne_bytes()).collect();
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Reduce, Some(algorithm));
                let mut dst = vec![0u8; 16];
                // SAFETY: the buffers outlive the wait.
                unsafe {
                    team.reduce_to_all_nb(
                        dst.as_mut_ptr(),
                        src.as_ptr(),
                        Dt::User,
                        16,
                        1,
                        Op::UserNc,
                        Some((compose, 0xC0FFEE)),
                        Flags::NONE,
                    )
                }
                .wait();
                assert_eq!(dst, want_bytes, "{algorithm:?}");
                let mut one = vec![0u8; 16];
                // SAFETY: as above.
                unsafe {
                    team.reduce_to_one_nb(
                        n - 1,
                        one.as_mut_ptr(),
                        src.as_ptr(),
                        Dt::User,
                        16,
                        1,
                        Op::UserNc,
                        Some((compose, 0xC0FFEE)),
                        Flags::NONE,
                    )
                }
                .wait();
                if me == n - 1 {
                    assert_eq!(one, want_bytes, "to one, {algorithm:?}");
                }
            }
            finalize(&team);
        });
    }
}

/// Floating-point sums whose value depends on the order of addition: every rank gets
/// the same bits, and a second run of the same reduction gives the same bits again.
#[test]
fn floating_point_results_are_identical_everywhere_and_every_time() {
    for n in 2..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_FP_BITS");
            let me = team.rank();
            let src: Vec<f64> = (0..64)
                .map(|i| 1.0 / (f64::from(me) * 7.0 + f64::from(i) + 3.0))
                .collect();
            let reduce = || {
                let mut out = src.clone();
                team.reduce_to_all(&mut out, Op::Add);
                out.iter().map(|v| v.to_bits()).collect::<Vec<u64>>()
            };
            let first = reduce();
            assert_eq!(reduce(), first, "the same reduction twice");
            let mut lo = first.clone();
            let mut hi = first.clone();
            team.reduce_to_all(&mut lo, Op::Min);
            team.reduce_to_all(&mut hi, Op::Max);
            assert_eq!(lo, hi, "every rank holds the same bits");
            finalize(&team);
        });
    }
}

/// "Multiple collective operations ... may be active concurrently, over multiple teams
/// or over a single team": eight broadcasts and reductions and two barriers started
/// at once on two teams, synchronized in reverse order.
#[test]
fn many_collectives_in_flight_complete_in_any_order() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let world = init("COLL_MANY");
            let me = world.rank();
            let half = world.split(Some(me % 2), 0, None).unwrap();
            let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 10_000]).collect();
            let srcs: Vec<Vec<u8>> = (0..4).map(|k| common::pattern(k, 10_000)).collect();
            let mut sums = vec![[0u64; 300]; 4];
            let adds: Vec<[u64; 300]> = (0..4).map(|k| [u64::from(me) + k; 300]).collect();
            let mut events: Vec<Event> = Vec::new();
            for k in 0..4usize {
                let team = if k % 2 == 0 { &world } else { &half };
                let root = k as u32 % team.size();
                // SAFETY: every buffer outlives the waits below.
                unsafe {
                    events.push(team.broadcast_nb(
                        root,
                        bufs[k].as_mut_ptr(),
                        srcs[k].as_ptr(),
                        10_000,
                        Flags::NONE,
                    ));
                    events.push(team.reduce_to_all_nb(
                        sums[k].as_mut_ptr().cast(),
                        adds[k].as_ptr().cast(),
                        Dt::U64,
                        8,
                        300,
                        Op::Add,
                        None,
                        Flags::NONE,
                    ));
                }
                events.push(team.barrier_nb());
            }
            while let Some(e) = events.pop() {
                e.wait();
            }
            for k in 0..4usize {
                assert!(bufs[k] == srcs[k], "broadcast {k}");
                let members: Vec<u32> = if k % 2 == 0 {
                    (0..n).collect()
                } else {
                    (0..n).filter(|r| r % 2 == me % 2).collect()
                };
                let want: u64 = members.iter().map(|&r| u64::from(r) + k as u64).sum();
                assert!(sums[k].iter().all(|&s| s == want), "reduction {k}");
            }
            finalize(&world);
        });
    }
}

/// Zero bytes and zero elements are valid and complete; a root out of range fails
/// naming the call; an invalid operation for a data type fails naming the call.
#[test]
fn bad_input_and_empty_collectives() {
    for n in 1..=3u32 {
        spmd(n as usize, || {
            common::quiet_expected_panics();
            let team = init("COLL_BAD");
            let mut nothing: [u8; 0] = [];
            team.broadcast(0, &mut nothing);
            let mut none: [u64; 0] = [];
            team.reduce_to_all(&mut none, Op::Add);
            // No bytes with null pointers, as C callers pass them: nothing is read or
            // written, so no pointer need be valid.
            let (null_dst, null_src) = (std::ptr::null_mut::<u8>(), std::ptr::null::<u8>());
            let root = n - 1;
            // SAFETY: no bytes move.
            unsafe {
                team.broadcast_nb(root, null_dst, null_src, 0, Flags::NONE)
                    .wait();
                team.reduce_to_all_nb(
                    null_dst,
                    null_src,
                    Dt::U64,
                    8,
                    0,
                    Op::Add,
                    None,
                    Flags::NONE,
                )
                .wait();
                team.reduce_to_one_nb(
                    root,
                    null_dst,
                    null_src,
                    Dt::U64,
                    8,
                    0,
                    Op::Max,
                    None,
                    Flags::NONE,
                )
                .wait();
            }
            let mut buf = [0u8; 4];
            common::expect_panic(&["Team::broadcast_nb", "root", "not in the team"], || {
                team.broadcast(n, &mut buf)
            });
            let x = [1.0f64];
            let mut y = [0.0f64];
            common::expect_panic(&["reduce_to_all_nb", "GEX_OP_AND", "GEX_DT_DBL"], || {
                // SAFETY: the call fails before it touches the buffers.
                unsafe {
                    team.reduce_to_all_nb(
                        y.as_mut_ptr().cast(),
                        x.as_ptr().cast(),
                        Dt::Dbl,
                        8,
                        1,
                        Op::And,
                        None,
                        Flags::NONE,
                    )
                }
            });
            common::expect_panic(&["reduce_to_one_nb", "root"], || {
                // SAFETY: the call fails before it touches the buffers.
                unsafe {
                    team.reduce_to_one_nb(
                        n + 2,
                        y.as_mut_ptr().cast(),
                        x.as_ptr().cast(),
                        Dt::Dbl,
                        8,
                        1,
                        Op::Add,
                        None,
                        Flags::NONE,
                    )
                }
            });
            finalize(&team);
        });
    }
}

fn panicking_op(_left: &[u8], _right: &mut [u8], _count: usize, _cdata: usize) {
    panic!("this user operation gives up");
}

/// "A user operation that panics: the job ends with the panic's message and the rank,
/// no hang."
#[test]
fn a_panicking_user_operation_ends_the_job_with_its_message() {
    let mut opts = SpmdOptions::new(3);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        let team = init("COLL_PANIC_OP");
        let src = [1u8; 8];
        let mut dst = [0u8; 8];
        // SAFETY: the buffers outlive the wait.
        unsafe {
            team.reduce_to_all_nb(
                dst.as_mut_ptr(),
                src.as_ptr(),
                Dt::User,
                8,
                1,
                Op::User,
                Some((panicking_op, 0)),
                Flags::NONE,
            )
        }
        .wait();
        unreachable!("the operation panics where contributions meet");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(report.contains("this user operation gives up"), "{report}");
    assert!(report.contains("rank 0"), "{report}");
}

/// The barrier of a split team: no member leaves before every member entered; one
/// member is late each time.
#[test]
fn a_team_barrier_waits_for_the_late_member() {
    for n in 2..=5u32 {
        spmd(n as usize, || {
            let world = init("COLL_TEAM_BARRIER");
            let me = world.rank();
            let team = world.split(Some(0), -(me as i32), None).unwrap();
            let seg = gex::Segment::attach(&world, 1 << 20).unwrap();
            let bases = common::segment_bases(&world);
            for k in 1..=6u64 {
                let late = (k as u32) % n;
                if me == late {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    for (r, b) in bases.iter().enumerate() {
                        world
                            .put_val_blocking(r as u32, *b, k, 8, Flags::NONE)
                            .unwrap();
                    }
                }
                team.barrier_nb().wait();
                // SAFETY: a word of our segment, written by the late rank before it
                // entered the barrier.
                let v = unsafe { common::read_u64(seg.addr() as usize) };
                assert_eq!(v, k, "barrier {k} completed before rank {late} entered");
                team.barrier();
            }
            finalize(&world);
        });
    }
}

/// A broadcast whose source lies in the root's segment, as large as the direct path
/// takes (each rank copies straight from the root's segment): every root, both
/// algorithms (the root chooses the direct path either way), the data checked, and
/// the root's source reused at once after its event.
#[test]
fn a_broadcast_from_the_segment_reaches_every_rank() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("COLL_BCAST_SEG");
            let seg = gex::Segment::attach(&team, 4 << 20).unwrap();
            for algorithm in ALGORITHMS {
                set_algorithm(Kind::Broadcast, Some(algorithm));
                for root in 0..n {
                    for size in [16 << 10, 100_003, 1 << 20] {
                        let want = common::pattern(u64::from(root) + size as u64, size);
                        if team.rank() == root {
                            // SAFETY: our own segment, `size` bytes from its start.
                            unsafe {
                                std::ptr::copy_nonoverlapping(want.as_ptr(), seg.addr(), size)
                            };
                        }
                        let mut dst = vec![0u8; size];
                        // SAFETY: the source (in our segment) and `dst` outlive the wait.
                        unsafe {
                            team.broadcast_nb(root, dst.as_mut_ptr(), seg.addr(), size, Flags::NONE)
                        }
                        .wait();
                        assert!(dst == want, "{algorithm:?} root {root} size {size}");
                        if team.rank() == root {
                            // The source may be reused once the root's event completed.
                            // SAFETY: as above.
                            unsafe { std::ptr::write_bytes(seg.addr(), 0xAB, size) };
                        }
                        team.barrier();
                    }
                }
            }
            finalize(&team);
        });
    }
}
