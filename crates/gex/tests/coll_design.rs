//! The collectives of the GASNet collectives design document ("Current proposal":
//! `gasnet_coll_scatter_nb`, `_gather_nb`, `_gather_all_nb`, `_exchange_nb`; UPC's
//! permute and prefix reduction): every operation on 1 to 5 ranks, every root, sizes
//! from 0 B to 1 MiB, each method forced in turn, several in flight, on split teams;
//! the flags ("Argument conventions"), the sync modes ("Synchronization modes") shown
//! with a delayed rank, SINGLE and LOCAL addressing, and AGGREGATE. One file, over 600
//! lines, because every test drives the same table of operations (`Kind`).
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::pattern;
use gex::coll::{set_method, Addr, CollFlags, Method, Operation};
use gex::ops::{Dt, Op};
use gex::testing::spmd;
use gex::{Client, Event, Flags, Rank, Segment, Team};

const MIB: usize = 1 << 20;
const SIZES: [usize; 5] = [0, 1, 7, 3969, 70_001];

fn init(name: &str) -> Team {
    let (_client, _ep, team) = Client::init(name, Flags::NONE).unwrap();
    team
}

fn finalize(team: &Team) {
    team.barrier();
    team.client().finalize();
}

fn flags(input: CollFlags, output: CollFlags, scope: CollFlags) -> CollFlags {
    input | output | scope
}

fn local() -> CollFlags {
    flags(
        CollFlags::IN_MYSYNC,
        CollFlags::OUT_MYSYNC,
        CollFlags::LOCAL,
    )
}

/// A data-movement collective with its single-valued arguments.
#[derive(Debug, Clone)]
enum Kind {
    Scatter(Rank),
    Gather(Rank),
    GatherAll,
    Exchange,
    Permute(Vec<Rank>),
}

impl Kind {
    fn operation(&self) -> Operation {
        match self {
            Kind::Scatter(_) => Operation::Scatter,
            Kind::Gather(_) => Operation::Gather,
            Kind::GatherAll => Operation::GatherAll,
            Kind::Exchange => Operation::Exchange,
            Kind::Permute(_) => Operation::Permute,
        }
    }

    /// The bytes block `from -> to` carries in case `case`.
    fn block(case: u64, from: Rank, to: Rank, nbytes: usize) -> Vec<u8> {
        pattern(case << 20 ^ u64::from(from) << 10 ^ u64::from(to), nbytes)
    }

    /// (source, expected destination) of rank `me` in a team of `n`.
    fn buffers(&self, case: u64, me: Rank, n: Rank, nb: usize) -> (Vec<u8>, Vec<u8>) {
        let b = |f, t| Kind::block(case, f, t, nb);
        let cat = |it: &mut dyn Iterator<Item = Vec<u8>>| it.flatten().collect::<Vec<u8>>();
        match self {
            Kind::Scatter(root) => (
                if me == *root {
                    cat(&mut (0..n).map(|r| b(*root, r)))
                } else {
                    Vec::new()
                },
                b(*root, me),
            ),
            Kind::Gather(root) => (
                b(me, *root),
                if me == *root {
                    cat(&mut (0..n).map(|r| b(r, *root)))
                } else {
                    Vec::new()
                },
            ),
            Kind::GatherAll => (b(me, 0), cat(&mut (0..n).map(|r| b(r, 0)))),
            Kind::Exchange => (
                cat(&mut (0..n).map(|j| b(me, j))),
                cat(&mut (0..n).map(|i| b(i, me))),
            ),
            Kind::Permute(perm) => {
                let from = perm.iter().position(|&p| p == me).unwrap() as Rank;
                (b(me, perm[me as usize]), b(from, me))
            }
        }
    }

    /// Starts the collective.
    ///
    /// # Safety
    /// The buffers behind `dst` and `src` must outlive the event.
    unsafe fn start(
        &self,
        team: &Team,
        dst: Addr<'_>,
        src: Addr<'_>,
        nb: usize,
        f: CollFlags,
    ) -> Event {
        // SAFETY: passed on to the caller.
        unsafe {
            match self {
                Kind::Scatter(root) => team.scatter_nb(*root, dst, src, nb, f),
                Kind::Gather(root) => team.gather_nb(*root, dst, src, nb, f),
                Kind::GatherAll => team.gather_all_nb(dst, src, nb, f),
                Kind::Exchange => team.exchange_nb(dst, src, nb, f),
                Kind::Permute(perm) => team.permute_nb(perm, dst, src, nb, f),
            }
        }
    }
}

/// Every operation with every root of a team of `n` (and two permutations).
fn kinds(n: Rank) -> Vec<Kind> {
    let mut all = vec![Kind::GatherAll, Kind::Exchange];
    for root in 0..n {
        all.push(Kind::Scatter(root));
        all.push(Kind::Gather(root));
    }
    all.push(Kind::Permute((0..n).map(|r| (r + 1) % n).collect()));
    all.push(Kind::Permute((0..n).rev().collect()));
    all
}

/// Runs every kind on `team` with LOCAL addressing, the messages methods of each forced
/// in turn, all of a size in flight at once; checks every destination.
fn local_round(team: &Team, sizes: &[usize], first_case: u64) {
    let case = AtomicU64::new(first_case);
    let (me, n) = (team.rank(), team.size());
    for nb in sizes.iter().copied() {
        for pass in 0..2 {
            let mut kept = Vec::new();
            let mut events = Vec::new();
            for kind in kinds(n) {
                let methods: Vec<Method> = kind
                    .operation()
                    .methods()
                    .iter()
                    .copied()
                    .filter(|&m| m != Method::Shared)
                    .collect();
                set_method(kind.operation(), Some(methods[pass % methods.len()]));
                let c = case.fetch_add(1, Ordering::Relaxed);
                let (src, want) = kind.buffers(c, me, n, nb);
                let mut dst = vec![0xEE; want.len()];
                // SAFETY: the buffers are kept until the events complete below.
                events.push(unsafe {
                    kind.start(
                        team,
                        dst.as_mut_ptr().into(),
                        src.as_ptr().into(),
                        nb,
                        local(),
                    )
                });
                kept.push((kind, methods[pass % methods.len()], src, dst, want));
            }
            Event::wait_all(&mut events);
            for (kind, m, _src, dst, want) in &kept {
                assert!(
                    dst == want,
                    "{kind:?} {m:?} size {nb} on {n} ranks, rank {me}"
                );
            }
        }
    }
    for op in [
        Operation::Scatter,
        Operation::Gather,
        Operation::GatherAll,
        Operation::Exchange,
        Operation::Permute,
    ] {
        set_method(op, None);
    }
}

/// "scatter", "gather", "gather_all", "exchange" and permute with LOCAL addressing:
/// every root, sizes from 0 B past several messages, each method forced, every kind of
/// one size in flight at once; 1 MiB on 1, 2 and 4 ranks.
#[test]
fn data_movement_every_root_size_and_method() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_MOVE");
            local_round(&team, &SIZES, 1);
            if matches!(team.size(), 1 | 2 | 4) {
                local_round(&team, &[MIB], 1000);
            }
            finalize(&team);
        });
    }
}

/// The same on split teams: odd and even ranks (ranks in the same order as their
/// reversed keys), and a team without rank 0, whose other members run it while rank 0
/// belongs to no team.
#[test]
fn data_movement_on_split_teams() {
    spmd(5, || {
        let world = init("DESIGN_SPLIT");
        let me = world.rank();
        let halves = world.split(Some(me % 2), -(me as i32), None).unwrap();
        local_round(&halves, &[0, 5, 5000], 1);
        let without_zero = world.split((me != 0).then_some(0), 0, None);
        assert_eq!(without_zero.is_none(), me == 0);
        if let Some(t) = without_zero {
            local_round(&t, &[3, 9000], 1000);
            t.destroy();
        }
        halves.destroy();
        finalize(&world);
    });
}

/// The segment regions of the SINGLE tests: sources at 0, destinations after.
const SRC_AT: usize = 0;
fn dst_at(n: Rank, nb: usize) -> usize {
    (n as usize * nb).div_ceil(64) * 64 + 64
}

fn attach(team: &Team, bytes: usize) -> (Segment, Vec<usize>) {
    let size = bytes.div_ceil(gex::PAGE_SIZE) * gex::PAGE_SIZE;
    let seg = Segment::attach(team, size).unwrap();
    let bases = common::segment_bases(team);
    (seg, bases)
}

/// SINGLE addressing ("every node provides addresses for the source(s) and
/// destination(s) on all nodes"): owner-space addresses in the segments, each kind with
/// the shared-memory method and with every message method forced, every sync mode.
#[test]
fn single_addressing_shared_and_forced_methods() {
    for n in 1..=4u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_SINGLE");
            let (me, n) = (team.rank(), team.size());
            let (seg, bases) = attach(&team, 2 * (n as usize * MIB + 4096));
            let case = AtomicU64::new(1);
            let modes = [
                (CollFlags::IN_NOSYNC, CollFlags::OUT_NOSYNC),
                (CollFlags::IN_MYSYNC, CollFlags::OUT_MYSYNC),
                (CollFlags::IN_ALLSYNC, CollFlags::OUT_ALLSYNC),
                (CollFlags::IN_MYSYNC, CollFlags::OUT_ALLSYNC),
            ];
            for nb in [0usize, 13, 5000, MIB] {
                for kind in kinds(n) {
                    let methods = kind.operation().methods();
                    for (i, &m) in methods.iter().enumerate() {
                        if nb == MIB && m != Method::Shared {
                            continue;
                        }
                        set_method(kind.operation(), Some(m));
                        let (input, output) = modes[i % modes.len()];
                        let c = case.fetch_add(1, Ordering::Relaxed);
                        let (src, want) = kind.buffers(c, me, n, nb);
                        let (s_off, d_off) = (SRC_AT, dst_at(n, nb));
                        // SAFETY: our own segment; nobody else touches it until the
                        // collective starts (the barrier below).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                src.as_ptr(),
                                seg.addr().add(s_off),
                                src.len(),
                            );
                            std::ptr::write_bytes(seg.addr().add(d_off), 0xEE, want.len());
                        }
                        team.barrier();
                        let srcs: Vec<usize> = bases.iter().map(|b| b + s_off).collect();
                        let dsts: Vec<usize> = bases.iter().map(|b| b + d_off).collect();
                        let f = flags(input, output, CollFlags::SINGLE);
                        // SAFETY: the segment outlives the event.
                        unsafe {
                            kind.start(&team, dsts.as_slice().into(), srcs.as_slice().into(), nb, f)
                        }
                        .wait();
                        // Every rank's sources must stay intact until all are done.
                        team.barrier();
                        // SAFETY: the collective is complete everywhere (barrier).
                        let got = unsafe {
                            std::slice::from_raw_parts(seg.addr().add(d_off), want.len())
                        };
                        assert!(
                            got == want.as_slice(),
                            "{kind:?} {m:?} size {nb} on {n} ranks, rank {me}"
                        );
                    }
                    set_method(kind.operation(), None);
                }
            }
            finalize(&team);
        });
    }
}

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
    for &op in T::OPS {
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
        // SAFETY: both outlive the wait.
        unsafe {
            team.prefix_reduce_nb(
                dst.as_mut_ptr().cast::<u8>().into(),
                src.as_ptr().cast::<u8>().into(),
                T::DT,
                size,
                count,
                op,
                None,
                local(),
            )
        }
        .wait();
        assert_eq!(dst, want, "{:?} {op:?} count {count} rank {me}", T::DT);
    }
}

/// Prefix reduction: every built-in type and operation, zero elements to past a
/// message, chain and doubling forced, against the fold in rank order.
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

/// "There are no default values for these three categories of flags. The client must
/// provide exactly one flag value from each": a missing or doubled category, and an
/// address argument of the other scope, fail naming the call.
#[test]
fn flags_need_exactly_one_of_each_category() {
    spmd(1, || {
        common::quiet_expected_panics();
        let team = init("DESIGN_FLAGS");
        let mut buf = [0u8; 4];
        let p = buf.as_mut_ptr();
        let bad = [
            (
                CollFlags::OUT_MYSYNC | CollFlags::LOCAL,
                "input synchronization",
            ),
            (
                CollFlags::IN_MYSYNC
                    | CollFlags::IN_ALLSYNC
                    | CollFlags::OUT_MYSYNC
                    | CollFlags::LOCAL,
                "input synchronization",
            ),
            (
                CollFlags::IN_MYSYNC | CollFlags::LOCAL,
                "output synchronization",
            ),
            (
                CollFlags::IN_MYSYNC
                    | CollFlags::OUT_NOSYNC
                    | CollFlags::OUT_ALLSYNC
                    | CollFlags::LOCAL,
                "output synchronization",
            ),
            (CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC, "addressing"),
            (
                CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC | CollFlags::LOCAL | CollFlags::SINGLE,
                "addressing",
            ),
        ];
        for (f, what) in bad {
            // SAFETY: never starts (the flags are refused).
            common::expect_panic(&["Team::gather_all_nb", what], || unsafe {
                team.gather_all_nb(p.into(), p.cast_const().into(), 1, f)
            });
        }
        let single = flags(
            CollFlags::IN_MYSYNC,
            CollFlags::OUT_MYSYNC,
            CollFlags::SINGLE,
        );
        // SAFETY: never starts.
        common::expect_panic(&["Team::scatter_nb", "Addr::Single"], || unsafe {
            team.scatter_nb(0, p.into(), p.into(), 1, single)
        });
        finalize(&team);
    });
}

/// Spins (polling) until `f` holds, failing after 20 s.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        gex::poll();
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
    }
}

/// Polls for a while, checking that `f` keeps holding.
fn stays(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(150) {
        gex::poll();
        assert!(f(), "{what}");
    }
}

/// The rank held back in the sync-mode tests, released by a flag in its segment.
struct Held<'a> {
    team: &'a Team,
    seg: &'a Segment,
    bases: Vec<usize>,
}

const FLAG_AT: usize = 0;
const DATA_AT: usize = 4096;

impl Held<'_> {
    fn last(&self) -> Rank {
        self.team.size() - 1
    }

    /// At the held rank: waits for the release.
    fn wait_release(&self) {
        // SAFETY: an aligned u64 of our own segment.
        until(
            "the release",
            || unsafe { common::read_u64(self.seg.addr() as usize + FLAG_AT) } == 1,
        );
    }

    fn release(&self) {
        self.team
            .put_blocking(
                self.last(),
                self.bases[self.last() as usize] + FLAG_AT,
                &1u64.to_ne_bytes(),
                Flags::NONE,
            )
            .unwrap();
    }

    fn reset(&self) {
        // SAFETY: our own segment, before the barrier that starts each case.
        unsafe { std::ptr::write_bytes(self.seg.addr().add(FLAG_AT), 0, 8) };
        self.team.barrier();
    }

    /// This rank's data area.
    fn data(&self, len: usize) -> &[u8] {
        // SAFETY: inside our segment; read while a collective may write it, which the
        // test does on purpose, byte by byte through a volatile read below.
        unsafe { std::slice::from_raw_parts(self.seg.addr().add(DATA_AT), len) }
    }
}

fn read_volatile(bytes: &[u8]) -> Vec<u8> {
    // SAFETY: every byte of the slice is readable.
    bytes
        .iter()
        .map(|b| unsafe { std::ptr::read_volatile(b) })
        .collect()
}

/// IN_ALLSYNC ("Data movement may begin only when all nodes have entered") against
/// IN_MYSYNC and IN_NOSYNC: a scatter from rank 0 while the last rank is held before
/// the call. With ALLSYNC rank 1's destination stays untouched until the last rank
/// enters; with MYSYNC and NOSYNC it is written while that rank is still held.
#[test]
fn in_allsync_moves_nothing_before_every_rank_entered() {
    spmd(3, || {
        let team = init("DESIGN_IN_SYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases,
        };
        for input in [
            CollFlags::IN_ALLSYNC,
            CollFlags::IN_MYSYNC,
            CollFlags::IN_NOSYNC,
        ] {
            held.reset();
            // SAFETY: our own segment; nobody writes it before the collective.
            unsafe { std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8) };
            team.barrier();
            let src: Vec<u8> = (0..24).map(|i| i + 1).collect();
            if me == held.last() {
                held.wait_release();
            }
            let f = flags(input, CollFlags::OUT_MYSYNC, CollFlags::LOCAL);
            // SAFETY: `src` and the segment outlive the wait.
            let ev = unsafe {
                team.scatter_nb(0, seg.addr().add(DATA_AT).into(), src.as_ptr().into(), 8, f)
            };
            if me == 1 {
                if input == CollFlags::IN_ALLSYNC {
                    stays(
                        "IN_ALLSYNC wrote a destination before every rank entered",
                        || read_volatile(held.data(8)) == [0; 8],
                    );
                } else {
                    until("the block of a rank that entered", || {
                        read_volatile(held.data(8)) == [9, 10, 11, 12, 13, 14, 15, 16]
                    });
                }
                held.release();
            }
            ev.wait();
            assert_eq!(
                read_volatile(held.data(8)),
                src[me as usize * 8..me as usize * 8 + 8]
            );
        }
        finalize(&team);
    });
}

/// IN_MYSYNC with SINGLE addressing and the shared-memory method (which reads sources
/// directly): "Data movement in or out of the memory of a given node may begin no
/// earlier than the execution of the collective initiation function on that node".
/// The held rank fills its source only just before its call; the others still get its
/// block, and already have each other's while it is held.
#[test]
fn in_mysync_reads_a_source_only_after_its_owner_entered() {
    spmd(3, || {
        let team = init("DESIGN_IN_MYSYNC");
        let (me, n) = (team.rank(), team.size());
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        set_method(Operation::GatherAll, Some(Method::Shared));
        held.reset();
        let src_at = DATA_AT + 1024;
        // SAFETY: our own segment, before the collective.
        unsafe {
            std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 3 * 8);
            std::ptr::write_bytes(
                seg.addr().add(src_at),
                if me == held.last() { 0 } else { me as u8 + 1 },
                8,
            );
        }
        team.barrier();
        if me == held.last() {
            held.wait_release();
            // SAFETY: our own source, before the call.
            unsafe { std::ptr::write_bytes(seg.addr().add(src_at), me as u8 + 1, 8) };
        }
        let dsts: Vec<usize> = bases.iter().map(|b| b + DATA_AT).collect();
        let srcs: Vec<usize> = bases.iter().map(|b| b + src_at).collect();
        let f = flags(
            CollFlags::IN_MYSYNC,
            CollFlags::OUT_MYSYNC,
            CollFlags::SINGLE,
        );
        // SAFETY: the segment outlives the wait.
        let ev =
            unsafe { team.gather_all_nb(dsts.as_slice().into(), srcs.as_slice().into(), 8, f) };
        if me == 0 {
            until("the blocks of the ranks that entered", || {
                read_volatile(&held.data(16)[8..16]) == [2; 8]
            });
            stays("a block was read before its owner entered", || {
                read_volatile(&held.data(24)[16..]) == [0; 8]
            });
            held.release();
        }
        ev.wait();
        let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 8]).collect();
        assert_eq!(read_volatile(held.data(24)), want);
        finalize(&team);
    });
}

/// OUT_ALLSYNC ("can succeed as soon as all data movement has completed to and from
/// all data areas") against OUT_MYSYNC: a scatter from rank 0 while the last rank is
/// held before the call. With MYSYNC rank 0's event completes while the last rank has
/// not entered (its destination still empty, read one-sidedly); with ALLSYNC it cannot
/// complete before the held rank's block arrived, and then that block is there.
#[test]
fn out_allsync_completes_only_after_every_rank_got_its_data() {
    spmd(3, || {
        let team = init("DESIGN_OUT_SYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        let last = held.last();
        for output in [
            CollFlags::OUT_ALLSYNC,
            CollFlags::OUT_MYSYNC,
            CollFlags::OUT_NOSYNC,
        ] {
            held.reset();
            // SAFETY: our own segment, before the collective.
            unsafe { std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8) };
            team.barrier();
            let src: Vec<u8> = (0..24).map(|i| i + 1).collect();
            if me == last {
                held.wait_release();
            }
            let f = flags(CollFlags::IN_MYSYNC, output, CollFlags::LOCAL);
            // SAFETY: `src` and the segment outlive the wait.
            let mut ev = unsafe {
                team.scatter_nb(0, seg.addr().add(DATA_AT).into(), src.as_ptr().into(), 8, f)
            };
            if me == 0 {
                let mut far = [0u8; 8];
                if output == CollFlags::OUT_ALLSYNC {
                    stays("OUT_ALLSYNC completed before the held rank entered", || {
                        !ev.test()
                    });
                    held.release();
                    ev.wait();
                    team.get_blocking(&mut far, last, bases[last as usize] + DATA_AT, Flags::NONE)
                        .unwrap();
                    assert_eq!(
                        far,
                        [17, 18, 19, 20, 21, 22, 23, 24],
                        "OUT_ALLSYNC completed before all data arrived"
                    );
                } else {
                    until("local completion", || ev.test());
                    team.get_blocking(&mut far, last, bases[last as usize] + DATA_AT, Flags::NONE)
                        .unwrap();
                    assert_eq!(far, [0; 8]);
                    held.release();
                }
            } else {
                ev.wait();
            }
            team.barrier();
            assert_eq!(
                read_volatile(held.data(8)),
                src[me as usize * 8..me as usize * 8 + 8]
            );
        }
        finalize(&team);
    });
}

/// OUT_MYSYNC with the shared-memory method ("all data movement has completed to and
/// from local data areas"): the root of a SINGLE scatter, whose source the others read,
/// cannot complete while a reader is held; with OUT_NOSYNC it completes at once (its
/// source is then synchronized only when every rank has synced).
#[test]
fn out_mysync_waits_for_the_readers_of_a_source() {
    spmd(3, || {
        let team = init("DESIGN_OUT_MYSYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        set_method(Operation::Scatter, Some(Method::Shared));
        let src_at = DATA_AT + 1024;
        for output in [CollFlags::OUT_MYSYNC, CollFlags::OUT_NOSYNC] {
            held.reset();
            // SAFETY: our own segment, before the collective.
            unsafe {
                std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8);
                for i in 0..24 {
                    *seg.addr().add(src_at + i) = i as u8 + 1;
                }
            }
            team.barrier();
            if me == held.last() {
                held.wait_release();
            }
            let dsts: Vec<usize> = bases.iter().map(|b| b + DATA_AT).collect();
            let srcs: Vec<usize> = bases.iter().map(|b| b + src_at).collect();
            let f = flags(CollFlags::IN_MYSYNC, output, CollFlags::SINGLE);
            // SAFETY: the segment outlives the wait.
            let mut ev =
                unsafe { team.scatter_nb(0, dsts.as_slice().into(), srcs.as_slice().into(), 8, f) };
            if me == 0 {
                if output == CollFlags::OUT_MYSYNC {
                    stays(
                        "OUT_MYSYNC completed while a reader of the source was held",
                        || !ev.test(),
                    );
                } else {
                    until("local completion", || ev.test());
                }
                held.release();
            }
            ev.wait();
            team.barrier();
            assert_eq!(
                read_volatile(held.data(8)),
                (me as u8 * 8 + 1..me as u8 * 8 + 9).collect::<Vec<_>>()
            );
        }
        finalize(&team);
    });
}

/// AGGREGATE: "consecutive non-blocking collective initiation calls [are] aggregated
/// into a single collective operation with a single handle". The members return the
/// invalid event; the last member's event completes only when all of them have, here
/// with a held rank that the first member waits for.
#[test]
fn aggregate_completes_with_its_last_member() {
    spmd(3, || {
        let team = init("DESIGN_AGGREGATE");
        let (me, n) = (team.rank(), team.size());
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases,
        };
        held.reset();
        let agg = local() | CollFlags::AGGREGATE;
        let src: Vec<u8> = vec![me as u8 + 1; 4];
        let mut first = vec![0u8; 4 * n as usize];
        let mut second = vec![0u8; 4 * n as usize];
        if me == held.last() {
            held.wait_release();
        }
        // SAFETY: the buffers outlive the wait of the aggregate's event.
        let (e1, e2) = unsafe {
            (
                team.gather_nb(0, first.as_mut_ptr().into(), src.as_ptr().into(), 4, agg),
                team.gather_all_nb(second.as_mut_ptr().into(), src.as_ptr().into(), 4, agg),
            )
        };
        assert!(
            e1.is_invalid() && e2.is_invalid(),
            "members of an aggregate return the invalid event"
        );
        let mut data = vec![0u8; 4];
        // SAFETY: outlives the wait.
        let mut closing = unsafe {
            team.gather_all_nb(data.as_mut_ptr().into(), src.as_ptr().into(), 0, local())
        };
        if me == 0 {
            stays("the aggregate completed before a member could", || {
                !closing.test()
            });
            held.release();
        }
        closing.wait();
        let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 4]).collect();
        assert_eq!(second, want);
        if me == 0 {
            assert_eq!(first, want);
        }
        finalize(&team);
    });
}
