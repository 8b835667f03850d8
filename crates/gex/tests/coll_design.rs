//! The data-movement collectives of the GASNet collectives design document ("Current
//! proposal": `gasnet_coll_broadcast_nb`, `_scatter_nb`, `_gather_nb`,
//! `_gather_all_nb`, `_exchange_nb`; UPC's permute): every operation on 1 to 5 ranks, every root, sizes
//! from 0 B to 1 MiB, each method forced in turn, several in flight, on split teams;
//! LOCAL and SINGLE addressing ("\"Single-valued\" arguments", "Argument conventions");
//! their blocking forms ("Handles").
//! The sync modes and flags are in `coll_design_sync.rs`, the prefix reduction in
//! `coll_design_scan.rs`.
mod common;

use common::coll::{attach, finalize, flags, init, local};

use std::sync::atomic::{AtomicU64, Ordering};

use common::pattern;
use gex::coll::{set_method, Addr, CollFlags, Method, Operation};
use gex::testing::spmd;
use gex::{Event, Rank, Team};

const MIB: usize = 1 << 20;
const SIZES: [usize; 5] = [0, 1, 7, 3969, 70_001];

/// A data-movement collective with its single-valued arguments.
#[derive(Debug, Clone)]
enum Kind {
    Broadcast(Rank),
    Scatter(Rank),
    Gather(Rank),
    GatherAll,
    Exchange,
    Permute(Vec<Rank>),
}

impl Kind {
    fn operation(&self) -> Operation {
        match self {
            Kind::Broadcast(_) => Operation::Broadcast,
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
            Kind::Broadcast(root) => (
                if me == *root { b(*root, 0) } else { Vec::new() },
                b(*root, 0),
            ),
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

    /// Runs the collective's blocking form.
    ///
    /// # Safety
    /// The buffers behind `dst` and `src` must outlive the call.
    unsafe fn run(&self, team: &Team, dst: Addr<'_>, src: Addr<'_>, nb: usize, f: CollFlags) {
        // SAFETY: passed on to the caller.
        unsafe {
            match self {
                Kind::Broadcast(root) => team.coll_broadcast(*root, dst, src, nb, f),
                Kind::Scatter(root) => team.scatter(*root, dst, src, nb, f),
                Kind::Gather(root) => team.gather(*root, dst, src, nb, f),
                Kind::GatherAll => team.gather_all(dst, src, nb, f),
                Kind::Exchange => team.exchange(dst, src, nb, f),
                Kind::Permute(perm) => team.permute(perm, dst, src, nb, f),
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
                Kind::Broadcast(root) => team.coll_broadcast_nb(*root, dst, src, nb, f),
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
        all.push(Kind::Broadcast(root));
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
        Operation::Broadcast,
        Operation::Scatter,
        Operation::Gather,
        Operation::GatherAll,
        Operation::Exchange,
        Operation::Permute,
    ] {
        set_method(op, None);
    }
}

/// No bytes with null buffers, as C callers pass them: every kind with every messages
/// method, and the prefix reduction of no elements, move nothing and complete.
#[test]
fn no_bytes_with_null_buffers() {
    for n in [1, 2, 3] {
        spmd(n, || {
            let team = init("COLL_NULL");
            let (dst, src) = (std::ptr::null_mut::<u8>(), std::ptr::null::<u8>());
            for kind in kinds(team.size()) {
                for &m in kind.operation().methods() {
                    if m == Method::Shared {
                        continue;
                    }
                    set_method(kind.operation(), Some(m));
                    // SAFETY: no bytes move.
                    unsafe { kind.run(&team, dst.into(), src.into(), 0, local()) };
                }
                set_method(kind.operation(), None);
            }
            // SAFETY: as above.
            unsafe {
                let (dt, op) = (gex::ops::Dt::U64, gex::ops::Op::Add);
                team.prefix_reduce(dst.into(), src.into(), dt, 8, 0, op, None, local());
            }
            finalize(&team);
        });
    }
}

/// The blocking forms ("Handles": every initiation function has one): every kind and
/// root on 1 to 5 ranks moves the same data as its non-blocking form, with each output
/// sync mode; `AGGREGATE` in a blocking call, or a blocking call inside an aggregate,
/// fails naming the call (the flags section), before anything starts.
#[test]
fn blocking_forms() {
    for n in 1..=5 {
        spmd(n, || {
            common::quiet_expected_panics();
            let team = init("COLL_BLOCKING");
            let (me, n) = (team.rank(), team.size());
            let outs = [
                CollFlags::OUT_NOSYNC,
                CollFlags::OUT_MYSYNC,
                CollFlags::OUT_ALLSYNC,
            ];
            for (c, kind) in kinds(n).into_iter().enumerate() {
                let nb = [0, 8, 3969][c % 3];
                let (src, want) = kind.buffers(7_000 + c as u64, me, n, nb);
                let mut dst = vec![0xEE; want.len()];
                let f = flags(CollFlags::IN_MYSYNC, outs[c % 3], CollFlags::LOCAL);
                // SAFETY: the buffers outlive the call (and, for OUT_NOSYNC, the
                // barrier below, which every rank reaches after its own call).
                unsafe { kind.run(&team, dst.as_mut_ptr().into(), src.as_ptr().into(), nb, f) };
                assert!(dst == want, "{kind:?} size {nb} on {n} ranks, rank {me}");
                team.barrier();
            }
            let mut word = [0u8; 8];
            let src = [me as u8; 8];
            let msg = common::panic_message(|| {
                // SAFETY: the call fails before anything starts; the buffers are live.
                unsafe {
                    team.gather_all(
                        word.as_mut_ptr().into(),
                        src.as_ptr().into(),
                        0,
                        local() | CollFlags::AGGREGATE,
                    )
                }
            });
            assert!(
                msg.contains("gex::Team::gather_all: AGGREGATE is not allowed"),
                "{msg}"
            );
            let mut all = vec![0u8; n as usize];
            // An aggregate's member returns an event that stands for nothing.
            // SAFETY: `all` and `src` outlive the aggregate's event, waited below.
            let _ = unsafe {
                team.gather_all_nb(
                    all.as_mut_ptr().into(),
                    src.as_ptr().into(),
                    1,
                    local() | CollFlags::AGGREGATE,
                )
            };
            let msg = common::panic_message(|| {
                // SAFETY: as above.
                unsafe { team.exchange(word.as_mut_ptr().into(), src.as_ptr().into(), 0, local()) }
            });
            assert!(
                msg.contains("gex::Team::exchange: a blocking collective inside an aggregate"),
                "{msg}"
            );
            // `coll_init` is a blocking collective too.
            let msg = common::panic_message(|| team.coll_init(&vec![1; n as usize]));
            assert!(
                msg.contains("gex::Team::coll_init: a blocking collective inside an aggregate"),
                "{msg}"
            );
            // The aggregate's last member, non-blocking, closes it.
            // SAFETY: as above.
            unsafe {
                team.gather_all_nb(word.as_mut_ptr().into(), src.as_ptr().into(), 0, local())
            }
            .wait();
            assert_eq!(all, (0..n).map(|r| r as u8).collect::<Vec<_>>());
            finalize(&team);
        });
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

/// `gasnet_coll_broadcast_nb` left to the automatic choice with LOCAL addresses: a
/// source in the root's segment (from 16 KiB, the GASNet-EX broadcast's direct copies
/// from the root's segment) and one outside it, destinations outside the segments and
/// in them (over a team spanning hosts, from 32 KiB, the GASNet-EX broadcast's RMA into
/// the receivers' segments), every root, every pair of sync modes.
#[test]
fn broadcast_automatic_choice_every_root_and_sync_mode() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_BCAST");
            let (me, n) = (team.rank(), team.size());
            // The root's source, then a destination.
            let (seg, _) = attach(&team, 2 * MIB + 4096);
            let seg_dst = seg.addr().wrapping_add(MIB + 4096);
            let inputs = [
                CollFlags::IN_NOSYNC,
                CollFlags::IN_MYSYNC,
                CollFlags::IN_ALLSYNC,
            ];
            let outputs = [
                CollFlags::OUT_NOSYNC,
                CollFlags::OUT_MYSYNC,
                CollFlags::OUT_ALLSYNC,
            ];
            let mut case = 1;
            for root in 0..n {
                for nb in [0usize, 100, 40_000, MIB] {
                    for (input, output) in inputs
                        .iter()
                        .flat_map(|&i| outputs.iter().map(move |&o| (i, o)))
                    {
                        for (in_segment, dst_in_segment) in
                            [(true, false), (false, false), (false, true)]
                        {
                            case += 1;
                            let data = Kind::block(case, root, 0, nb);
                            let src = if in_segment {
                                if me == root {
                                    // SAFETY: our own segment; its readers start after
                                    // this rank's call, and the previous case ended
                                    // with a barrier.
                                    unsafe {
                                        std::ptr::copy_nonoverlapping(data.as_ptr(), seg.addr(), nb)
                                    };
                                }
                                seg.addr().cast_const()
                            } else {
                                data.as_ptr()
                            };
                            let mut private = vec![0xEE; nb];
                            let dst = if dst_in_segment {
                                // SAFETY: the destination area of our segment, MIB bytes,
                                // free since the previous case's barrier.
                                unsafe { std::ptr::write_bytes(seg_dst, 0xEE, nb) };
                                seg_dst
                            } else {
                                private.as_mut_ptr()
                            };
                            let f = flags(input, output, CollFlags::LOCAL);
                            // SAFETY: `src`, its segment and `dst` outlive the wait.
                            unsafe { team.coll_broadcast_nb(root, dst.into(), src.into(), nb, f) }
                                .wait();
                            // SAFETY: `dst` holds `nb` bytes, written by the completed call.
                            let got = unsafe { std::slice::from_raw_parts(dst, nb) };
                            assert!(
                                got == data,
                                "root {root} size {nb} {f:?} in segment {in_segment}, dst in \
                                 segment {dst_in_segment}, rank {me} of {n}"
                            );
                            // OUT_NOSYNC: the root's source is free only once all synced.
                            team.barrier();
                        }
                    }
                }
            }
            finalize(&team);
        });
    }
}
