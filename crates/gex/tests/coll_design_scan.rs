//! The prefix reduction of the GASNet collectives design document (UPC's
//! `upc_all_prefix_reduce`; "Bulk vs. non-bulk alignment", "OPEN ISSUE: Computational
//! collectives"): every built-in type and operation and a non-commutative user
//! operation, on 1 to 5 ranks, each method forced in turn.
mod common;

use common::coll::{finalize, init, local};

use gex::coll::{set_method, Method, Operation};
use gex::ops::{Dt, Op};
use gex::testing::spmd;
use gex::{Rank, Team};

/// A contribution for the prefix reductions: distinct per rank and element, small
/// enough that sums of five are exact in `f32`.
fn value(rank: Rank, i: usize) -> i64 {
    (i64::from(rank) + 1) * 37 - (i as i64 % 50) * 3 + if i.is_multiple_of(3) { -5 } else { 11 }
}

trait Num: Copy + PartialEq + std::fmt::Debug {
    const DT: Dt;
    const OPS: &'static [Op];
    fn from_i64(v: i64) -> Self;
    fn fold(op: Op, a: Self, b: Self) -> Self;
}

macro_rules! num_int {
    ($($t:ty => $dt:ident),*) => {$(
        impl Num for $t {
            const DT: Dt = Dt::$dt;
            const OPS: &'static [Op] = &[Op::Add, Op::Mult, Op::Min, Op::Max, Op::And, Op::Or, Op::Xor];
            fn from_i64(v: i64) -> Self { v as $t }
            fn fold(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Add => a.wrapping_add(b),
                    Op::Mult => a.wrapping_mul(b),
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
num_int!(i32 => I32, u32 => U32, i64 => I64, u64 => U64);

macro_rules! num_float {
    ($($t:ty => $dt:ident),*) => {$(
        impl Num for $t {
            const DT: Dt = Dt::$dt;
            const OPS: &'static [Op] = &[Op::Add, Op::Min, Op::Max];
            fn from_i64(v: i64) -> Self { v as $t / 8.0 }
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
num_float!(f32 => Flt, f64 => Dbl);

fn check_scan<T: Num>(team: &Team, count: usize) {
    let (me, size) = (team.rank(), std::mem::size_of::<T>());
    for (k, &op) in T::OPS.iter().enumerate() {
        let src: Vec<T> = (0..count).map(|i| T::from_i64(value(me, i))).collect();
        let want: Vec<T> = (0..count)
            .map(|i| {
                (1..=me).fold(T::from_i64(value(0, i)), |acc, r| {
                    T::fold(op, acc, T::from_i64(value(r, i)))
                })
            })
            .collect();
        let mut dst = src.clone();
        dst.iter_mut().for_each(|d| *d = T::from_i64(-1));
        let (d, s) = (dst.as_mut_ptr().cast::<u8>(), src.as_ptr().cast::<u8>());
        // SAFETY: both outlive the wait (the call, for the blocking form, which every
        // other operation uses).
        unsafe {
            if k % 2 == 0 {
                team.prefix_reduce_nb(d.into(), s.into(), T::DT, size, count, op, None, local())
                    .wait();
            } else {
                team.prefix_reduce(d.into(), s.into(), T::DT, size, count, op, None, local());
            }
        }
        assert_eq!(dst, want, "{:?} {op:?} count {count} rank {me}", T::DT);
    }
}

/// Prefix reduction: every built-in type and operation, zero elements to past a
/// message, chain and doubling forced, against the fold in rank order; every other
/// operation by the blocking form.
#[test]
fn prefix_reduce_every_builtin_type_and_operation() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_SCAN");
            for m in [Method::Chain, Method::Doubling] {
                set_method(Operation::PrefixReduce, Some(m));
                for count in [0usize, 1, 5, 1200] {
                    check_scan::<i32>(&team, count);
                    check_scan::<u32>(&team, count);
                    check_scan::<i64>(&team, count);
                    check_scan::<u64>(&team, count);
                    check_scan::<f32>(&team, count);
                    check_scan::<f64>(&team, count);
                }
            }
            finalize(&team);
        });
    }
}

/// Multiplies 2x2 matrices of wrapping `u32` (16 bytes an element): associative, not
/// commutative. `y = x * y`.
fn matmul(left: &[u8], right_and_out: &mut [u8], count: usize, cdata: usize) {
    assert_eq!(cdata, 0xC0FFEE);
    for e in 0..count {
        let get = |b: &[u8], i: usize| {
            u32::from_ne_bytes(b[e * 16 + i * 4..e * 16 + i * 4 + 4].try_into().unwrap())
        };
        let x: Vec<u32> = (0..4).map(|i| get(left, i)).collect();
        let y: Vec<u32> = (0..4).map(|i| get(right_and_out, i)).collect();
        let z = [
            x[0].wrapping_mul(y[0])
                .wrapping_add(x[1].wrapping_mul(y[2])),
            x[0].wrapping_mul(y[1])
                .wrapping_add(x[1].wrapping_mul(y[3])),
            x[2].wrapping_mul(y[0])
                .wrapping_add(x[3].wrapping_mul(y[2])),
            x[2].wrapping_mul(y[1])
                .wrapping_add(x[3].wrapping_mul(y[3])),
        ];
        for (i, v) in z.iter().enumerate() {
            right_and_out[e * 16 + i * 4..e * 16 + i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
        }
    }
}

fn matrix(rank: Rank, e: usize) -> [u32; 4] {
    let r = rank + 2;
    [r, e as u32 + 1, 3 * r + 1, 1]
}

/// A non-commutative user operation (`GEX_OP_USER_NC`, matrix products): rank `r`
/// gets `M0 * M1 * … * Mr`, which only the rank order gives; every method, and user
/// element sizes across messages.
#[test]
fn prefix_reduce_non_commutative_combines_in_rank_order() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_SCAN_NC");
            let me = team.rank();
            for m in [Method::Chain, Method::Doubling] {
                set_method(Operation::PrefixReduce, Some(m));
                for count in [1usize, 3, 600] {
                    let bytes = |mats: &[[u32; 4]]| -> Vec<u8> {
                        mats.iter()
                            .flatten()
                            .flat_map(|v| v.to_ne_bytes())
                            .collect()
                    };
                    let src = bytes(&(0..count).map(|e| matrix(me, e)).collect::<Vec<_>>());
                    let mut want = bytes(&(0..count).map(|e| matrix(0, e)).collect::<Vec<_>>());
                    for r in 1..=me {
                        // want = want * M_r: the left operand is the prefix.
                        let mut right =
                            bytes(&(0..count).map(|e| matrix(r, e)).collect::<Vec<_>>());
                        matmul(&want, &mut right, count, 0xC0FFEE);
                        want = right;
                    }
                    let mut dst = vec![0u8; src.len()];
                    // SAFETY: both outlive the wait.
                    unsafe {
                        team.prefix_reduce_nb(
                            dst.as_mut_ptr().into(),
                            src.as_ptr().into(),
                            Dt::User,
                            16,
                            count,
                            Op::UserNc,
                            Some((matmul, 0xC0FFEE)),
                            local(),
                        )
                    }
                    .wait();
                    assert!(dst == want, "{m:?} count {count} rank {me}");
                }
            }
            finalize(&team);
        });
    }
}
