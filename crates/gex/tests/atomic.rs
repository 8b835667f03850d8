//! Remote atomics (GASNet-EX "Remote Atomics": "Atomic Domains", `gex_AD_Create`,
//! `gex_AD_Destroy`, `gex_AD_Query*`, CData, "Remote Atomic Operations",
//! `gex_AD_OpNB_*`, `gex_AD_OpNBI_*`) with 1 to 4 ranks: every data type × operation ×
//! flag against a sequential model, on every target rank and in NB, NBI and blocking
//! form; contention on shared words whose final values prove atomicity; split teams
//! and `GEX_FLAG_RANK_IS_JOBRANK`; every erroneous call. The model, contention, NBI
//! and error tests run on both paths: CPU atomics on the mapping, and messages to the
//! owner (`GEX_AD_PATH=am`, the path of targets on other hosts). The GASP events are
//! tested in `atomic_gasp.rs`. One file, past 600 lines: every test here shares the
//! model and the word layout above them.
mod common;

use std::fmt::Debug;

use common::expect_panic;
use gex::ops::{Dt, Op, OpSet};
use gex::testing::{spmd, spmd_outcome, spmd_with, SpmdOptions};
use gex::{nbi_wait, AtomicDomain, AtomicType, Client, EventCategory, Flags, Segment, Team};

const SEG: usize = 256 * gex::PAGE_SIZE;

/// What a test needs of a data type: a sequential model of every operation, written
/// independently of the library's, and sample operands.
trait Model: AtomicType + Debug {
    /// `(op0 fetched, value after)` of `op` on `v` with operands `a`, `b`.
    fn model(op: Op, v: Self, a: Self, b: Self) -> (Self, Self);
    /// `(start, operand1, operand2)` triples that cover the interesting cases.
    fn samples() -> Vec<(Self, Self, Self)>;
    fn same(x: Self, y: Self) -> bool;
}

macro_rules! int_model {
    ($($t:ty),*) => {$(
        impl Model for $t {
            fn model(op: Op, v: $t, a: $t, b: $t) -> ($t, $t) {
                let new = match op.to_nonfetching().unwrap_or(op) {
                    Op::Set => a,
                    Op::Get => v,
                    Op::Cas => if v == a { b } else { v },
                    Op::Add => v.wrapping_add(a),
                    Op::Sub => v.wrapping_sub(a),
                    Op::Mult => v.wrapping_mul(a),
                    Op::Min => if v < a { v } else { a },
                    Op::Max => if v > a { v } else { a },
                    Op::Inc => v.wrapping_add(1),
                    Op::Dec => v.wrapping_sub(1),
                    Op::And => v & a,
                    Op::Or => v | a,
                    Op::Xor => v ^ a,
                    other => unreachable!("{other:?}"),
                };
                (v, new)
            }
            fn samples() -> Vec<($t, $t, $t)> {
                vec![
                    (7 as $t, 3 as $t, 9 as $t),
                    (7 as $t, 7 as $t, 9 as $t),
                    (<$t>::MAX, 2 as $t, <$t>::MIN),
                    (<$t>::MIN, <$t>::MAX, 0 as $t),
                    (0b1100 as $t, 0b1010 as $t, 1 as $t),
                ]
            }
            fn same(x: $t, y: $t) -> bool { x == y }
        }
    )*};
}
int_model!(i32, u32, i64, u64);

macro_rules! float_model {
    ($($t:ty),*) => {$(
        impl Model for $t {
            fn model(op: Op, v: $t, a: $t, b: $t) -> ($t, $t) {
                let new = match op.to_nonfetching().unwrap_or(op) {
                    Op::Set => a,
                    Op::Get => v,
                    Op::Cas => if v.to_bits() == a.to_bits() { b } else { v },
                    Op::Add => v + a,
                    Op::Sub => v - a,
                    Op::Mult => v * a,
                    Op::Min => if v < a { v } else { a },
                    Op::Max => if v > a { v } else { a },
                    Op::Inc => v + 1.0,
                    Op::Dec => v - 1.0,
                    other => unreachable!("{other:?}"),
                };
                (v, new)
            }
            fn samples() -> Vec<($t, $t, $t)> {
                vec![
                    (1.5, 2.25, 8.0),
                    (1.5, 1.5, -3.0),
                    (-0.0, 0.0, 5.0),
                    (<$t>::NAN, 1.0, 2.0),
                    (4.0, <$t>::NAN, 2.0),
                    (<$t>::MAX, <$t>::MAX, <$t>::INFINITY),
                ]
            }
            fn same(x: $t, y: $t) -> bool { x.to_bits() == y.to_bits() }
        }
    )*};
}
float_model!(f32, f64);

/// Every operation valid for atomics on `dt`.
fn all_ops(dt: Dt) -> OpSet {
    Op::ALL
        .into_iter()
        .filter(|op| op.valid_for_atomic(dt))
        .collect()
}

/// Where `writer`'s word for case `case` lies in a target's segment.
fn word(base: usize, writer: u32, case: usize) -> usize {
    base + (writer as usize * 256 + case % 256) * 8
}

/// Runs every operation of `T` with every sample, flag and form on every target rank,
/// each rank in words of its own, and checks the fetched and final values.
fn every_operation<T: Model>(team: &Team, bases: &[usize]) {
    let ad = AtomicDomain::create(team, T::DT, all_ops(T::DT), Flags::NONE);
    let me = team.rank();
    let mut case = 0;
    for tgt in 0..team.size() {
        let mut flag_sets = vec![
            Flags::NONE,
            Flags::AD_ACQ,
            Flags::AD_REL,
            Flags::AD_ACQ | Flags::AD_REL,
            Flags::IMMEDIATE,
        ];
        // The assertion that the target shares memory with us, where it does.
        if gex::nbrhd_info()
            .members
            .contains(&team.translate_rank_to_jobrank(tgt))
        {
            flag_sets.push(Flags::AD_MY_NBRHD);
        }
        if tgt == me {
            flag_sets.push(Flags::AD_MY_RANK | Flags::AD_ACQ);
        }
        for op in ad.ops().iter() {
            for (start, a, b) in T::samples() {
                for (i, flags) in flag_sets.iter().enumerate() {
                    let form = (case + i) % 3;
                    case += 1;
                    let addr = word(bases[tgt as usize], me, case);
                    ad.op_blocking(tgt, addr, Op::Set, start, start, Flags::NONE);
                    let mut out = std::mem::MaybeUninit::<T>::uninit();
                    let fetched = match form {
                        0 if !flags.contains(Flags::IMMEDIATE) => {
                            ad.op_blocking(tgt, addr, op, a, b, *flags)
                        }
                        1 => {
                            // SAFETY: `out` lives until the event is waited for below.
                            let ev =
                                unsafe { ad.op_nb(out.as_mut_ptr(), tgt, addr, op, a, b, *flags) };
                            let ev = ev.expect(
                                "no NoOp: one operation in flight per rank never fills a queue",
                            );
                            // On the mapping it is complete at return; by message it
                            // waits for the owner's reply, which needs a poll.
                            assert_eq!(ev.is_invalid(), !by_messages(team, tgt), "op_nb's event");
                            ev.wait();
                            // SAFETY: written by a fetching operation, now synchronized.
                            op.is_fetching().then(|| unsafe { out.assume_init() })
                        }
                        _ => {
                            // SAFETY: `out` lives until `nbi_wait` below.
                            unsafe { ad.op_nbi(out.as_mut_ptr(), tgt, addr, op, a, b, *flags) }
                                .expect(
                                    "no NoOp: one operation in flight per rank never fills a queue",
                                );
                            nbi_wait(EventCategory::ALL);
                            // SAFETY: as above.
                            op.is_fetching().then(|| unsafe { out.assume_init() })
                        }
                    };
                    let after = ad
                        .op_blocking(tgt, addr, Op::Get, start, start, Flags::NONE)
                        .unwrap();
                    let (want_fetched, want_after) = T::model(op, start, a, b);
                    let what = format!("{:?} {} on {start:?} with {a:?}, {b:?}, flags {:#x}, form {form}, target {tgt}", T::DT, op.name(), flags.bits());
                    assert!(
                        T::same(after, want_after),
                        "{what}: value {after:?}, model {want_after:?}"
                    );
                    match fetched {
                        Some(f) => assert!(
                            op.is_fetching() && T::same(f, want_fetched),
                            "{what}: fetched {f:?}, model {want_fetched:?}"
                        ),
                        None => assert!(!op.is_fetching(), "{what}: nothing fetched"),
                    }
                }
            }
        }
    }
    team.barrier();
    ad.destroy();
}

/// "Remote Atomic Operations", "Semantics of gex_AD_Op*()" and the opcode definitions:
/// every type × operation × sample × flag, NB, NBI and blocking, on every target rank,
/// agrees with the sequential model, including the spec's C expressions for float
/// MIN/MAX with NaN and -0.0 and (F)CAS on bits.
#[test]
fn every_type_operation_and_flag_matches_a_sequential_model() {
    for (n, path) in (1..=4).flat_map(|n| PATHS.map(|p| (n, p))) {
        spmd_with(on_path(n, path), || {
            let (client, _ep, team) = Client::init("AD_MODEL", Flags::NONE).unwrap();
            let _seg = Segment::attach(&team, SEG).unwrap();
            let bases = common::segment_bases(&team);
            every_operation::<i32>(&team, &bases);
            every_operation::<u32>(&team, &bases);
            every_operation::<i64>(&team, &bases);
            every_operation::<u64>(&team, &bases);
            every_operation::<f32>(&team, &bases);
            every_operation::<f64>(&team, &bases);
            client.finalize();
        });
    }
}

const ROUNDS: u64 = 20_000;

/// The paths of operations (`GEX_AD_PATH`): CPU atomics on the mapping, and Active
/// Messages to the owner (the path of targets on other hosts, taken here for all).
const PATHS: [&str; 2] = ["auto", "am"];

/// Whether this rank's operations on `tgt` go as Active Messages: with `GEX_AD_PATH=am`,
/// or because `tgt`'s segment is not mapped here (another host).
fn by_messages(team: &Team, tgt: u32) -> bool {
    std::env::var("GEX_AD_PATH").is_ok_and(|p| p == "am")
        || team
            .segment_bound(tgt)
            .is_some_and(|b| b.local_addr.is_none())
}

fn on_path(n: usize, path: &str) -> SpmdOptions {
    let mut opts = SpmdOptions::new(n);
    opts.env.push(("GEX_AD_PATH".into(), path.into()));
    opts
}

/// "These operations are guaranteed to be atomic with respect to all other accesses to
/// the same target location made using the same AD, from any rank": every rank hammers
/// the same words in rank 0's segment with ADD, INC, XOR, FADD and a CAS loop; the
/// totals come out exact, and the values FINC fetched are all distinct. A racing
/// read-modify-write would lose updates and fail these. On both paths; with fewer
/// rounds where some rank's operations are messages (`GEX_AD_PATH=am`, or ranks on
/// other hosts than rank 0's), as each is then a round trip.
#[test]
fn contention_on_shared_words_loses_no_update() {
    for (n, path) in (2..=4).flat_map(|n| PATHS.map(|p| (n, p))) {
        spmd_with(on_path(n, path), || {
            let (client, _ep, team) = Client::init("AD_CONTEND", Flags::NONE).unwrap();
            // Every rank shares memory with rank 0 exactly when the neighbourhood (the
            // same for all its members) is the whole team: every rank sees the same.
            let one_nbrhd = gex::nbrhd_info().members.len() == team.size() as usize;
            let rounds = if path == "am" || !one_nbrhd {
                ROUNDS / 10
            } else {
                ROUNDS
            };
            let seg = Segment::attach(&team, SEG).unwrap();
            let base = team.segment_bound(0).unwrap().owner_addr;
            let (me, size) = (team.rank(), team.size());
            let u64s = AtomicDomain::create(
                &team,
                Dt::U64,
                Op::Add | Op::Xor | Op::FInc | Op::FCas | Op::Get | Op::Set,
                Flags::NONE,
            );
            let i32s =
                AtomicDomain::create(&team, Dt::I32, Op::Inc | Op::Dec | Op::Get, Flags::NONE);
            let f64s = AtomicDomain::create(&team, Dt::Dbl, Op::FAdd | Op::Get, Flags::NONE);
            let (add, xor, finc, cas, inc, fadd) =
                (base, base + 8, base + 16, base + 24, base + 32, base + 40);
            team.barrier();
            let mut fetched = Vec::with_capacity(rounds as usize);
            let rank_bits = |r: u32, i: u64| {
                (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(r)) | 1 << (r + 40)
            };
            for i in 0..rounds {
                u64s.op_blocking(0, add, Op::Add, u64::from(me) + 1, 0, Flags::NONE);
                u64s.op_blocking(0, xor, Op::Xor, rank_bits(me, i), 0, Flags::NONE);
                fetched.push(
                    u64s.op_blocking(0, finc, Op::FInc, 0u64, 0, Flags::NONE)
                        .unwrap(),
                );
                i32s.op_blocking(
                    0,
                    inc,
                    if i % 3 == 2 { Op::Dec } else { Op::Inc },
                    0i32,
                    0,
                    Flags::NONE,
                );
                f64s.op_blocking(0, fadd, Op::FAdd, 1.0, 0.0, Flags::AD_ACQ | Flags::AD_REL);
                // A CAS loop: an increment by compare-and-swap.
                let mut seen = u64s
                    .op_blocking(0, cas, Op::Get, 0u64, 0, Flags::NONE)
                    .unwrap();
                loop {
                    let old = u64s
                        .op_blocking(0, cas, Op::FCas, seen, seen + 1, Flags::NONE)
                        .unwrap();
                    if old == seen {
                        break;
                    }
                    seen = old;
                }
            }
            // The FINC values of each rank rise (one rank's operations are ordered by
            // their completion) and go to rank 0 for the distinctness check.
            assert!(fetched.windows(2).all(|w| w[0] < w[1]));
            let theirs = base + 4096 + me as usize * rounds as usize * 8;
            team.put_blocking(0, theirs, bytemuck_bytes(&fetched), Flags::NONE)
                .unwrap();
            team.barrier();
            let n = u64::from(size);
            let get = |addr| {
                u64s.op_blocking(0, addr, Op::Get, 0u64, 0, Flags::NONE)
                    .unwrap()
            };
            assert_eq!(get(add), rounds * n * (n + 1) / 2);
            assert_eq!(
                get(xor),
                (0..size).fold(0, |acc, r| (0..rounds)
                    .fold(acc, |x, i| x ^ rank_bits(r, i)))
            );
            assert_eq!(get(finc), rounds * n);
            assert_eq!(get(cas), rounds * n);
            let incs = (0..rounds)
                .map(|i| if i % 3 == 2 { -1 } else { 1 })
                .sum::<i64>()
                * n as i64;
            assert_eq!(
                i64::from(
                    i32s.op_blocking(0, inc, Op::Get, 0i32, 0, Flags::NONE)
                        .unwrap()
                ),
                incs
            );
            assert_eq!(
                f64s.op_blocking(0, fadd, Op::Get, 0.0, 0.0, Flags::NONE)
                    .unwrap(),
                (rounds * n) as f64
            );
            if me == 0 {
                let total = (rounds * n) as usize;
                // SAFETY: the ranks' puts completed before the barrier; nothing writes
                // this part of the segment any more.
                let all = unsafe {
                    std::slice::from_raw_parts((seg.addr() as usize + 4096) as *const u64, total)
                };
                let mut seen = vec![false; total];
                for &v in all {
                    assert!(
                        !std::mem::replace(&mut seen[v as usize], true),
                        "FINC fetched {v} twice"
                    );
                }
            }
            team.barrier();
            for ad in [&u64s, &i32s] {
                ad.destroy();
            }
            f64s.destroy();
            client.finalize();
        });
    }
}

fn bytemuck_bytes(v: &[u64]) -> &[u8] {
    // SAFETY: any u64 is 8 initialized bytes; the slice covers exactly `v`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// `gex_AD_Query*` return what was passed to `gex_AD_Create`; CData is `None` for a new
/// domain and keeps what `gex_AD_SetCData` set; a domain over a split team addresses
/// targets by team rank, or by job rank with `GEX_FLAG_RANK_IS_JOBRANK`.
#[test]
fn queries_cdata_and_split_teams_with_job_ranks() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("AD_QUERY", Flags::NONE).unwrap();
            let _seg = Segment::attach(&team, SEG).unwrap();
            let bases = common::segment_bases(&team);
            let ad =
                AtomicDomain::create(&team, Dt::U32, Op::FAdd | Op::Get, Flags::AD_FAVOR_MY_NBRHD);
            assert_eq!(ad.dt(), Dt::U32);
            assert_eq!(ad.ops(), Op::FAdd | Op::Get);
            assert_eq!(ad.flags(), Flags::AD_FAVOR_MY_NBRHD);
            assert_eq!(ad.team(), team);
            assert!(ad.cdata().is_none());
            ad.set_cdata(Some(std::sync::Arc::new(17u8)));
            assert_eq!(ad.clone().cdata().unwrap().downcast_ref::<u8>(), Some(&17));
            team.barrier();
            ad.destroy();

            // Odd and even job ranks form two teams; each counts in the segment of its
            // last member, addressed by team rank and by job rank.
            let me = team.rank();
            let half = team.split(Some(me % 2), me as i32, None).unwrap();
            let hd = AtomicDomain::create(&half, Dt::I64, Op::Add | Op::Get, Flags::NONE);
            let last = half.size() - 1;
            let last_job = half.translate_rank_to_jobrank(last);
            let counter = bases[last_job as usize] + 4096;
            hd.op_blocking(last, counter, Op::Add, 1i64, 0, Flags::NONE);
            hd.op_blocking(last_job, counter, Op::Add, 10i64, 0, Flags::RANK_IS_JOBRANK);
            half.barrier();
            let got = hd
                .op_blocking(last, counter, Op::Get, 0, 0, Flags::NONE)
                .unwrap();
            assert_eq!(got, 11 * i64::from(half.size()));
            // A job rank of the other team is not a member.
            if team.size() > 1 {
                let other = (me + 1) % 2;
                // SAFETY: ADD does not fetch; the call is refused anyway.
                let outsider = || unsafe {
                    hd.op_nbi(
                        std::ptr::null_mut(),
                        other,
                        counter,
                        Op::Add,
                        1i64,
                        0,
                        Flags::RANK_IS_JOBRANK,
                    )
                };
                let msg = format!("job rank {other}");
                expect_panic(
                    &["gex::AtomicDomain::op_nbi", &msg, "not a member"],
                    outsider,
                );
            }
            half.barrier();
            hd.destroy();
            half.destroy();
            client.finalize();
        });
    }
}

/// Every erroneous call panics naming the call and the rule, before the operation:
/// an operation outside the domain's set, another type, a misaligned or out-of-segment
/// target, a bad rank, a null result for a fetching operation, flags the call does not
/// take, a false `MY_RANK` assertion, a destroyed domain; and creation with an invalid
/// type, operation set or flags. The target word is unchanged afterwards. On both
/// paths: the checks are the initiator's, made before any message is sent.
#[test]
fn erroneous_calls_name_the_call_and_change_nothing() {
    for (n, path) in (1..=3).flat_map(|n| PATHS.map(|p| (n, p))) {
        spmd_with(on_path(n, path), || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("AD_ERRORS", Flags::NONE).unwrap();
            let _seg = Segment::attach(&team, SEG).unwrap();
            let bases = common::segment_bases(&team);
            let (me, size) = (team.rank(), team.size());
            let ad =
                AtomicDomain::create(&team, Dt::I64, Op::FAdd | Op::Get | Op::Set, Flags::NONE);
            let tgt = (me + 1) % size;
            let w = bases[tgt as usize] + 8 * me as usize;
            ad.op_blocking(tgt, w, Op::Set, 5i64, 0, Flags::NONE);
            let mut out = 0i64;
            let o = &mut out as *mut i64;
            let nb = "gex::AtomicDomain::op_nb";
            let nbi = "gex::AtomicDomain::op_nbi";
            // SAFETY: `out` outlives every call made through these; the calls below are
            // refused before anything is written.
            let nb_at = |rank, addr, op, flags| unsafe { ad.op_nb(o, rank, addr, op, 1, 0, flags) };
            // SAFETY: as for `nb_at`.
            let nbi_at =
                |rank, addr, op, flags| unsafe { ad.op_nbi(o, rank, addr, op, 1, 0, flags) };
            expect_panic(
                &[nb, "GEX_OP_SUB is not in the domain's set", "GEX_OP_FADD"],
                || nb_at(tgt, w, Op::Sub, Flags::NONE),
            );
            // SAFETY: refused before anything is written.
            let wrong_type =
                || unsafe { ad.op_nbi(o.cast::<u64>(), tgt, w, Op::FAdd, 1u64, 0, Flags::NONE) };
            expect_panic(
                &[nbi, "type GEX_DT_U64 is not the domain's GEX_DT_I64"],
                wrong_type,
            );
            expect_panic(&[nb, "not aligned for GEX_DT_I64"], || {
                nb_at(tgt, w + 4, Op::FAdd, Flags::NONE)
            });
            let end = bases[tgt as usize] + SEG;
            for bad in [end, bases[tgt as usize] - 8, end + (1 << 20)] {
                expect_panic(&[nb, "outside the segment of rank"], || {
                    nb_at(tgt, bad, Op::FAdd, Flags::NONE)
                });
            }
            for bad in [size, size + 3, u32::MAX] {
                let msg = format!("rank {bad} is not in the domain's team (size {size})");
                expect_panic(&[nbi, &msg], || nbi_at(bad, w, Op::FAdd, Flags::NONE));
                let msg = format!("job rank {bad}");
                expect_panic(&[nbi, &msg], || {
                    nbi_at(bad, w, Op::FAdd, Flags::RANK_IS_JOBRANK)
                });
            }
            // SAFETY: refused before anything is written.
            let null = || unsafe {
                ad.op_nb(std::ptr::null_mut(), tgt, w, Op::FAdd, 1i64, 0, Flags::NONE)
            };
            expect_panic(
                &[nb, "GEX_OP_FADD fetches, but the result location is null"],
                null,
            );
            expect_panic(&[nb, "flags"], || {
                nb_at(tgt, w, Op::FAdd, Flags::AD_MY_RANK | Flags::AD_MY_NBRHD)
            });
            expect_panic(&[nb, "flags"], || {
                nb_at(tgt, w, Op::FAdd, Flags::AD_FAVOR_REMOTE)
            });
            expect_panic(&["gex::AtomicDomain::op_blocking", "IMMEDIATE"], || {
                ad.op_blocking(tgt, w, Op::FAdd, 1i64, 0, Flags::IMMEDIATE)
            });
            if size > 1 {
                let msg = format!("rank {tgt} is not there");
                expect_panic(&[nb, "GEX_FLAG_AD_MY_RANK", &msg], || {
                    nb_at(tgt, w, Op::FAdd, Flags::AD_MY_RANK)
                });
            }
            assert_eq!(
                ad.op_blocking(tgt, w, Op::Get, 0i64, 0, Flags::NONE),
                Some(5),
                "a refused call changed the target"
            );
            assert_eq!(out, 0, "a refused call wrote the result");

            let create = "gex::AtomicDomain::create";
            expect_panic(
                &[
                    create,
                    "GEX_OP_AND is not an atomic operation on GEX_DT_DBL",
                ],
                || AtomicDomain::create(&team, Dt::Dbl, Op::Add | Op::And, Flags::NONE),
            );
            expect_panic(&[create, "GEX_OP_USER"], || {
                AtomicDomain::create(&team, Dt::I32, Op::User, Flags::NONE)
            });
            expect_panic(
                &[create, "GEX_DT_USER is not a data type of remote atomics"],
                || AtomicDomain::create(&team, Dt::User, Op::Add, Flags::NONE),
            );
            expect_panic(&[create, "empty"], || {
                AtomicDomain::create(&team, Dt::I32, OpSet::EMPTY, Flags::NONE)
            });
            expect_panic(&[create, "GEX_FLAG_AD_FAVOR"], || {
                AtomicDomain::create(
                    &team,
                    Dt::I32,
                    Op::Add,
                    Flags::AD_FAVOR_MY_RANK | Flags::AD_FAVOR_REMOTE,
                )
            });
            expect_panic(&[create, "GEX_FLAG_AD_FAVOR"], || {
                AtomicDomain::create(&team, Dt::I32, Op::Add, Flags::AD_ACQ)
            });

            team.barrier();
            let copy = ad.clone();
            ad.destroy();
            let gone = "the atomic domain was destroyed (gex_AD_Destroy)";
            // SAFETY: refused before anything is written.
            let after = || unsafe { copy.op_nb(o, tgt, w, Op::FAdd, 1, 0, Flags::NONE) };
            expect_panic(&[nb, gone], after);
            expect_panic(&["gex::AtomicDomain::op_blocking", gone], || {
                copy.op_blocking(tgt, w, Op::Get, 0i64, 0, Flags::NONE)
            });
            expect_panic(&["gex::AtomicDomain::dt", gone], || copy.dt());
            expect_panic(&["gex::AtomicDomain::cdata", gone], || copy.cdata());
            expect_panic(&["gex::AtomicDomain::destroy", gone], || ad.destroy());
            client.finalize();
        });
    }
}

/// NBI operations count in the spec's categories and in access regions: an NBI
/// operation's result is there after `nbi_wait` of its category (`GEX_EC_PUT` for SET,
/// `GEX_EC_GET` for GET, `GEX_EC_RMW` for the rest) or the region's event.
#[test]
fn nbi_operations_complete_in_their_categories_and_regions() {
    for path in PATHS {
        spmd_with(on_path(2, path), nbi_operations);
    }
}

fn nbi_operations() {
    {
        let (client, _ep, team) = Client::init("AD_NBI", Flags::NONE).unwrap();
        let _seg = Segment::attach(&team, SEG).unwrap();
        let bases = common::segment_bases(&team);
        let me = team.rank();
        let ad = AtomicDomain::create(&team, Dt::U64, Op::Set | Op::Get | Op::FXor, Flags::NONE);
        let w = bases[(1 - me) as usize] + 64 * me as usize;
        let mut got = [0u64; 2];
        // SAFETY: `got` outlives the waits below.
        unsafe {
            ad.op_nbi(
                std::ptr::null_mut(),
                1 - me,
                w,
                Op::Set,
                0b1010u64,
                0,
                Flags::NONE,
            )
            .unwrap();
            nbi_wait(EventCategory::PUT);
            ad.op_nbi(&mut got[0], 1 - me, w, Op::FXor, 0b0110, 0, Flags::NONE)
                .unwrap();
            nbi_wait(EventCategory::RMW);
            gex::nbi_begin_access_region();
            ad.op_nbi(&mut got[1], 1 - me, w, Op::Get, 0, 0, Flags::NONE)
                .unwrap();
            gex::nbi_end_access_region().wait();
        }
        assert_eq!(got, [0b1010, 0b1100]);
        assert!(gex::nbi_test(EventCategory::ALL));
        team.barrier();
        ad.destroy();
        client.finalize();
    }
}

/// `gex_AD_Create`: "The 'dt', 'ops' and 'flags' parameters are each single-valued".
/// Ranks that pass different operation sets fail the job with a message naming the
/// call, instead of creating domains that disagree.
#[test]
fn create_with_different_arguments_fails_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        let (_client, _ep, team) = Client::init("AD_MISMATCH", Flags::NONE).unwrap();
        let ops = if team.rank() == 0 {
            Op::Add | Op::Get
        } else {
            Op::Add | Op::Set
        };
        let _ad = AtomicDomain::create(&team, Dt::I64, ops, Flags::NONE);
        team.barrier();
        unreachable!("the ranks disagree");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(
        report.contains("gex::AtomicDomain::create") && report.contains("different"),
        "{report}"
    );
}

/// An operation refused under `IMMEDIATE` ("Remote Atomic Operations": NB calls "are
/// *permitted* to return GEX_EVENT_NO_OP to indicate that no operation was initiated")
/// did nothing and keeps nothing: while rank 1 stays out of the library, rank 0 sends
/// fetch-adds by messages with `IMMEDIATE` until one is refused (the owner's queue
/// full); once rank 1 polls again, its word counts exactly the operations accepted,
/// and they fetched each count below that once.
#[test]
fn refused_immediate_operation_does_nothing() {
    spmd_with(on_path(2, "am"), || {
        let (client, _ep, team) = Client::init("AD_REFUSED", Flags::NONE).unwrap();
        let _seg = Segment::attach(&team, SEG).unwrap();
        let bases = common::segment_bases(&team);
        let ad = AtomicDomain::create(&team, Dt::U64, OpSet::from(Op::FAdd), Flags::NONE);
        team.barrier();
        if team.rank() == 1 {
            // Out of the library: nothing handles rank 0's requests meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(300));
        } else {
            const LIMIT: usize = 100_000;
            let mut fetched = vec![u64::MAX; LIMIT];
            let mut events = Vec::new();
            let out = fetched.as_mut_ptr();
            for i in 0..LIMIT {
                // SAFETY: `fetched` is not touched again until every event is waited for.
                let sent = unsafe {
                    ad.op_nb(out.add(i), 1, bases[1], Op::FAdd, 1u64, 0, Flags::IMMEDIATE)
                };
                match sent {
                    Ok(ev) => events.push(ev),
                    Err(gex::NoOp) => break,
                }
            }
            let accepted = events.len();
            assert!(accepted < LIMIT, "no fetch-add refused while rank 1 slept");
            for ev in events {
                ev.wait();
            }
            let mut got = fetched[..accepted].to_vec();
            got.sort_unstable();
            assert!(
                got.iter().copied().eq(0..accepted as u64),
                "the accepted fetch-adds fetched {:?}..",
                &got[..got.len().min(8)]
            );
            assert_eq!(
                fetched[accepted],
                u64::MAX,
                "the refused one wrote its result"
            );
            let now = ad.op_blocking(1, bases[1], Op::FAdd, 0u64, 0, Flags::NONE);
            assert_eq!(
                now,
                Some(accepted as u64),
                "rank 1's word after the accepted ones"
            );
        }
        team.barrier();
        client.finalize();
    });
}
