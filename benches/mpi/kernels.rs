//! The gex and UPC++ figures of the `mpi` bench, written to run unchanged on every path:
//! the smp conduit, the mpi conduit within a host and between hosts. Nothing here reads
//! or writes another rank's segment through a mapping (which ranks on other hosts do not
//! have): data moves only through gex calls, rank 1 takes part by polling
//! (`common::am::serve_until_stopped`) or by making UPC++ progress, and the collective
//! figures learn how many operations to join from an Active Message, not from a word of
//! shared memory as in `coll.rs`.
//!
//! Each rank's [`Area`] is a block of its segment; the ranks exchange their blocks'
//! addresses with an AM at setup.

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use gex::ops::{Dt, Op};
use gex::{AmEntry, AmRole, AtomicDomain, Flags, Team, Token};
use upcxx::GlobalPtr;

use crate::common::am::{check_pattern, fill_pattern, serve_until_stopped, stop_server, STOP};
use crate::common::figures::{self, page_aligned, Bench, Unit};
use crate::common::rpc;
use crate::common::{spin_until, time_iters};
use crate::launch::Unsupported;
use crate::{BCAST_BYTES, BW_BYTES, BW_SEED, GET_VALUE};

/// Handler indices of this bench (below `common::am`'s, which start at 200).
const H_ADDR: u8 = 196;
const H_GO: u8 = 197;

/// Offsets in each rank's area.
const PUT_OFF: usize = 0;
const GET_OFF: usize = 64;
const FADD_OFF: usize = 128;
const ARRIVE_OFF: usize = 192;
const RPUT_OFF: usize = 256;
const PUT_NB_OFF: usize = 320;
const BW_OFF: usize = 4096;
const BCAST_SRC: usize = BW_OFF + BW_BYTES;
const BCAST_DST: usize = BCAST_SRC + BCAST_BYTES;
/// The runs of the indexed figures: [`VIS_RUNS`] runs of [`VIS_RUN`] bytes,
/// [`VIS_STRIDE`] bytes apart.
const VIS_OFF: usize = BCAST_DST + BCAST_BYTES;
const VIS_RUNS: usize = 1000;
const VIS_RUN: usize = 8;
const VIS_STRIDE: usize = 16;
/// Bytes of each rank's area.
pub(crate) const AREA_BYTES: usize = VIS_OFF + VIS_RUNS * VIS_STRIDE;
const BCAST_SEED: u64 = 0x5eed_0c00;
const POISON: u8 = 0xee;

/// The other rank's area (its address in its owner's address space), set by `addr`.
static PEER_AREA: AtomicU64 = AtomicU64::new(0);
static PEER_AREA_SET: AtomicBool = AtomicBool::new(false);
/// Rank 1: operations of a collective figure that rank 0 asked for and rank 1 has not
/// begun yet.
static GO_PENDING: AtomicU64 = AtomicU64::new(0);

fn addr(_token: &Token<'_>, args: &[u32]) {
    PEER_AREA.store(
        u64::from(args[0]) | u64::from(args[1]) << 32,
        Ordering::Relaxed,
    );
    PEER_AREA_SET.store(true, Ordering::Release);
}

fn go(_token: &Token<'_>, args: &[u32]) {
    GO_PENDING.fetch_add(
        u64::from(args[0]) | u64::from(args[1]) << 32,
        Ordering::Release,
    );
}

/// This bench's handlers (with `common::am::handlers`).
pub(crate) fn handlers() -> Vec<AmEntry> {
    let mut h = crate::common::am::handlers();
    h.push(AmEntry::short("mpi bench area", AmRole::Request, 2, addr).at(H_ADDR));
    h.push(AmEntry::short("mpi bench go", AmRole::Request, 2, go).at(H_GO));
    h
}

fn halves(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// This rank's block of its segment and the other rank's.
#[derive(Clone, Copy)]
pub(crate) struct Area {
    pub(crate) team: Team,
    /// This rank's area, in this process.
    mine: *mut u8,
    /// The other rank's area, in its owner's address space (for gex calls).
    peer: usize,
}

impl Area {
    /// Collective: prepares this rank's area at `mine` (`AREA_BYTES` of its segment)
    /// and learns the other rank's. `barrier` is the job's barrier.
    pub(crate) fn exchange(team: Team, mine: *mut u8, barrier: impl Fn()) -> Area {
        let rank = team.rank();
        // SAFETY: the caller gives AREA_BYTES of this rank's segment, which nobody
        // accesses before the barrier below.
        unsafe {
            std::ptr::write_bytes(mine, 0, AREA_BYTES);
            (mine.add(GET_OFF) as *mut u64).write(GET_VALUE);
            let src = std::slice::from_raw_parts_mut(mine.add(BCAST_SRC), BCAST_BYTES);
            fill_pattern(src, BCAST_SEED + u64::from(rank));
        }
        barrier(); // handlers registered everywhere
        let [lo, hi] = halves(mine as u64);
        team.request_short(1 - rank, H_ADDR, &[lo, hi], Flags::NONE)
            .expect("request_short of the area's address");
        spin_until(|| {
            gex::poll();
            PEER_AREA_SET.load(Ordering::Acquire)
        });
        barrier();
        Area {
            team,
            mine,
            peer: PEER_AREA.load(Ordering::Relaxed) as usize,
        }
    }

    fn rank(&self) -> u32 {
        self.team.rank()
    }

    fn own_word(&self, off: usize) -> u64 {
        // SAFETY: inside this rank's area, 8-byte aligned.
        unsafe { (self.mine.add(off) as *const u64).read_volatile() }
    }

    fn own(&self, off: usize, len: usize) -> &'static mut [u8] {
        assert!(off + len <= AREA_BYTES);
        // SAFETY: inside this rank's area, which lives as long as the job.
        unsafe { std::slice::from_raw_parts_mut(self.mine.add(off), len) }
    }
}

/// Rank 1 polls until rank 0's stop: its part of the figures rank 0 acts in alone (gex
/// RMA needs no help from the target; an AM-based path would).
fn solo_polled(
    name: String,
    unit: Unit,
    team: Team,
    run: impl FnMut(u64) -> std::time::Duration + 'static,
) -> Bench<'static> {
    Bench::duo(
        name,
        unit,
        run,
        move || stop_server(team),
        serve_until_stopped,
    )
}

/// `put_8B`: `put_blocking` of 8 bytes into rank 1's area, or (`blocking` false)
/// `put_nb_8B`: `put_nb` of them, its event waited for (the non-blocking path, which
/// `rput_8B` takes), at an offset of its own; the last value put is read back with
/// `get_blocking` once, and rank 1 checks it in its own memory at the end.
fn put_8b(a: Area, name: String, blocking: bool) -> Bench<'static> {
    let mut n = 0u64;
    let mut checked = false;
    let team = a.team;
    let off = if blocking { PUT_OFF } else { PUT_NB_OFF };
    let dest = a.peer + off;
    let what = name.clone();
    solo_polled(name.clone(), Unit::Latency, team, move |iters| {
        let t = time_iters(iters, || {
            n += 1;
            let word = n.to_ne_bytes();
            if blocking {
                team.put_blocking(1, dest, &word, Flags::NONE).unwrap();
            } else {
                // SAFETY: `Lc::Now`: the source is read before the call returns.
                unsafe { team.put_nb(1, dest, &word, gex::Lc::Now, Flags::NONE) }
                    .unwrap()
                    .wait();
            }
        });
        if !checked {
            let mut back = [0u8; 8];
            team.get_blocking(&mut back, 1, dest, Flags::NONE).unwrap();
            assert_eq!(u64::from_ne_bytes(back), n, "{name}: wrong data");
            checked = true;
        }
        t
    })
    .checked_by_rank1(move || {
        // Rank 1 has no count of rank 0's puts; it checks that they arrived.
        assert_ne!(a.own_word(off), 0, "{what}: rank 1 received no put");
    })
}

/// `put_bw_1MiB`: `put_blocking` of [`BW_BYTES`] from a private buffer into rank 1's
/// area, as bandwidth; read back once, and checked by rank 1 at the end.
fn put_bw(a: Area, name: String) -> Bench<'static> {
    let team = a.team;
    let src = page_aligned(BW_BYTES, 0);
    fill_pattern(src, BW_SEED);
    let src: &'static [u8] = src;
    let dest = a.peer + BW_OFF;
    let mut checked = false;
    let what = name.clone();
    solo_polled(name, Unit::Bandwidth(BW_BYTES), team, move |iters| {
        let t = time_iters(iters, || {
            team.put_blocking(1, dest, black_box(src), Flags::NONE)
                .unwrap();
        });
        if !checked {
            let back = page_aligned(BW_BYTES, 0);
            team.get_blocking(back, 1, dest, Flags::NONE).unwrap();
            check_pattern(back, BW_SEED, &format!("{what} read back"));
            checked = true;
        }
        t
    })
    .checked_by_rank1(move || {
        check_pattern(a.own(BW_OFF, BW_BYTES), BW_SEED, "put_bw: rank 1's memory");
    })
}

/// `get_8B`: `get_blocking` of the 8 bytes rank 1 wrote at setup, or (`blocking`
/// false) `get_nb_8B`: `get_nb` of them, its event waited for (the non-blocking path,
/// which `rget_8B` takes); checked once.
fn get_8b(a: Area, name: String, blocking: bool) -> Bench<'static> {
    let team = a.team;
    let src = a.peer + GET_OFF;
    let mut word = [0u8; 8];
    let mut checked = false;
    solo_polled(name.clone(), Unit::Latency, team, move |iters| {
        let t = time_iters(iters, || {
            if blocking {
                team.get_blocking(black_box(&mut word), 1, src, Flags::NONE)
                    .unwrap();
            } else {
                // SAFETY: `word` lives and is untouched until the wait.
                unsafe { team.get_nb(black_box(word.as_mut_ptr()), 1, src, 8, Flags::NONE) }
                    .unwrap()
                    .wait();
            }
        });
        if !checked {
            assert_eq!(u64::from_ne_bytes(word), GET_VALUE, "{name}: wrong data");
            checked = true;
        }
        t
    })
}

/// `rget_8B`: `upcxx::rget` of the word rank 1 wrote at setup, waited for, each value
/// checked; rank 1 makes user-level progress (a get from another host is served by its
/// polls).
fn rget_8b(name: String, team: Team, word: GlobalPtr<u64>) -> Bench<'static> {
    let what = name.clone();
    rpc::round_trips(name, team, move || {
        assert_eq!(upcxx::rget(word).wait(), GET_VALUE, "{what}: wrong data");
    })
}

/// `rput_8B`: `upcxx::rput` of 8 bytes into rank 1's area, waited for (operation
/// completion); rank 1 makes user-level progress; the last value is read back once,
/// and rank 1 checks that puts arrived.
fn rput_8b(a: Area, name: String, word: GlobalPtr<u64>) -> Bench<'static> {
    let what = name.clone();
    let mut n = 0u64;
    let mut checked = false;
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| {
            let t = time_iters(iters, || {
                n += 1;
                upcxx::rput(n, word).wait();
            });
            if !checked {
                assert_eq!(upcxx::rget(word).wait(), n, "{what}: wrong data");
                checked = true;
            }
            t
        },
        move || stop_server(a.team),
        rpc::serve_upcxx_until_stopped,
    )
    .checked_by_rank1(move || {
        assert_ne!(a.own_word(RPUT_OFF), 0, "rput_8B: rank 1 received no put");
    })
}

/// Gets in flight at once in `rget_8B_x64`.
const RGETS_IN_FLIGHT: u64 = 64;

/// `rget_8B_x64`: the same gets [`RGETS_IN_FLIGHT`] at a time, all started before one
/// `when_all` waits for them (UPC++ gets are non-blocking, §8.2.2); time per get, every
/// value checked.
fn rget_8b_x64(name: String, team: Team, word: GlobalPtr<u64>) -> Bench<'static> {
    let what = name.clone();
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| {
            let t0 = Instant::now();
            let mut left = iters;
            while left > 0 {
                let k = left.min(RGETS_IN_FLIGHT);
                let gets: Vec<_> = (0..k).map(|_| upcxx::rget(word)).collect();
                let got = upcxx::when_all(gets).wait();
                assert!(got.iter().all(|&v| v == GET_VALUE), "{what}: wrong data");
                left -= k;
            }
            t0.elapsed()
        },
        move || stop_server(team),
        rpc::serve_upcxx_until_stopped,
    )
}

/// The owner addresses of the indexed figures' runs in rank 1's area.
fn vis_runs(a: Area) -> Vec<usize> {
    (0..VIS_RUNS)
        .map(|i| a.peer + VIS_OFF + i * VIS_STRIDE)
        .collect()
}

/// `indexed_put_1000x8B`: one `indexed_put_blocking` of the runs into rank 1's area
/// (between hosts, messages of runs: `rma/remote.rs`), every run holding the sample's
/// number; read back with an indexed get once and checked.
fn indexed_put(a: Area, name: String) -> Bench<'static> {
    let team = a.team;
    let dst = vis_runs(a);
    let mut n = 0u64;
    let mut checked = false;
    solo_polled(name.clone(), Unit::Latency, team, move |iters| {
        n += 1;
        let src = vec![n.to_ne_bytes(); VIS_RUNS];
        let t = time_iters(iters, || {
            team.indexed_put_blocking(1, &dst, VIS_RUN, black_box(&src), Flags::NONE)
                .unwrap();
        });
        if !checked {
            let mut back = vec![[0u8; VIS_RUN]; VIS_RUNS];
            team.indexed_get_blocking(&mut back, 1, &dst, VIS_RUN, Flags::NONE)
                .unwrap();
            assert!(back == src, "{name}: wrong data read back");
            checked = true;
        }
        t
    })
}

/// `indexed_get_1000x8B`: one `indexed_get_blocking` of the runs from rank 1's area;
/// every get finds the runs of one indexed put (each writes one value into all), or
/// none yet, which it checks.
fn indexed_get(a: Area, name: String) -> Bench<'static> {
    let team = a.team;
    let src = vis_runs(a);
    let mut runs = vec![[0u8; VIS_RUN]; VIS_RUNS];
    solo_polled(name.clone(), Unit::Latency, team, move |iters| {
        let t = time_iters(iters, || {
            team.indexed_get_blocking(black_box(&mut runs), 1, &src, VIS_RUN, Flags::NONE)
                .unwrap();
        });
        assert!(
            runs.iter().all(|r| *r == runs[0]),
            "{name}: the runs hold different puts"
        );
        t
    })
}

/// `fetch_add_i64`: a blocking `GEX_OP_FADD` of 1 on a word of rank 1's area, with rank
/// 1 polling; nobody else adds to it, so each returns the previous one's value plus one.
fn fetch_add(a: Area, ad: AtomicDomain, name: String) -> Bench<'static> {
    let target = a.peer + FADD_OFF;
    let mut next = 0i64;
    solo_polled(name.clone(), Unit::Latency, a.team, move |iters| {
        time_iters(iters, || {
            let old = ad
                .op_blocking(1, target, Op::FAdd, 1i64, 0, Flags::NONE)
                .expect("FADD fetches");
            assert_eq!(old, next, "{name}: wrong value fetched");
            next += 1;
        })
    })
}

/// Whether this rank can make gex atomics on the other rank's area: the atomic path of
/// a conduit that cannot reach the target panics (before anything moves) naming the
/// call; the panic is caught and its message returned. Both ranks probe each other, so
/// an AM-based path finds its target polling.
pub(crate) fn probe_atomics(a: Area, ad: &AtomicDomain) -> Result<(), String> {
    let target = a.peer + FADD_OFF;
    let peer = 1 - a.rank();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ad.op_blocking(peer, target, Op::Get, 0i64, 0, Flags::NONE)
    }));
    std::panic::set_hook(quiet);
    match r {
        Ok(Some(0)) => Ok(()),
        Ok(v) => panic!("gex atomic GET of a zeroed word returned {v:?}"),
        Err(p) => Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "gex atomics panicked".to_owned())),
    }
}

/// An atomic domain over the job's team for [`fetch_add`] (collective).
pub(crate) fn atomic_domain(team: &Team) -> AtomicDomain {
    AtomicDomain::create(team, Dt::I64, Op::FAdd | Op::Get, Flags::NONE)
}

/// A collective figure: before timing, rank 0 tells rank 1 with an AM how many
/// operations to join; both perform `op(j)` for the same `j = 0, 1, 2, …`.
/// Rank 1 polls for that count or for the stop (which arrives after every count, AMs
/// between two ranks being handled in order).
fn collective(
    team: Team,
    name: String,
    unit: Unit,
    op: impl FnMut(u64) + 'static,
) -> Bench<'static> {
    let op = Rc::new(RefCell::new(op));
    let serve_op = op.clone();
    let mut done = 0u64;
    let mut served = 0u64;
    Bench::duo(
        name,
        unit,
        move |iters| {
            let [lo, hi] = halves(iters);
            team.request_short(1, H_GO, &[lo, hi], Flags::NONE).unwrap();
            let mut op = op.borrow_mut();
            let t0 = Instant::now();
            for j in done..done + iters {
                op(j);
            }
            done += iters;
            t0.elapsed()
        },
        move || stop_server(team),
        move || loop {
            let (mut pending, mut stop) = (0, false);
            spin_until(|| {
                gex::poll();
                // The stop first: the counts it follows are then seen too.
                stop = STOP.load(Ordering::Acquire);
                pending = GO_PENDING.load(Ordering::Acquire);
                pending > 0 || stop
            });
            if pending > 0 {
                GO_PENDING.fetch_sub(pending, Ordering::AcqRel);
                let mut op = serve_op.borrow_mut();
                for j in served..served + pending {
                    op(j);
                }
                served += pending;
            } else {
                STOP.store(false, Ordering::Relaxed);
                return;
            }
        },
    )
}

/// `barrier`: `Team::barrier_nb().wait()`; before the first, each rank puts 1 into the
/// other's arrival word, which it must find set after it.
fn barrier(a: Area, name: String) -> Bench<'static> {
    let team = a.team;
    let other = 1 - a.rank();
    let what = name.clone();
    collective(team, name, Unit::Latency, move |j| {
        if j == 0 {
            team.put_blocking(other, a.peer + ARRIVE_OFF, &1u64.to_ne_bytes(), Flags::NONE)
                .unwrap();
        }
        team.barrier_nb().wait();
        if j == 0 {
            assert_eq!(
                a.own_word(ARRIVE_OFF),
                1,
                "{what}: rank {} left before rank {other} entered",
                a.rank()
            );
        }
    })
}

/// `broadcast_1MiB`: `Team::broadcast_nb` of [`BCAST_BYTES`] from the root's area into
/// every rank's, operation `j` rooted at rank `j mod 2`; the first two (one per root)
/// land in a poisoned destination and are checked on both ranks.
fn broadcast(a: Area, name: String) -> Bench<'static> {
    let team = a.team;
    let src = a.own(BCAST_SRC, BCAST_BYTES).as_ptr();
    let dst = a.own(BCAST_DST, BCAST_BYTES);
    let what = name.clone();
    collective(team, name, Unit::Latency, move |j| {
        let root = (j % 2) as u32;
        if j < 2 {
            dst.fill(POISON);
        }
        // SAFETY: `src` (never written after setup) and `dst` are distinct ranges of
        // this rank's area, used by nothing else until the event completes.
        unsafe { team.broadcast_nb(root, dst.as_mut_ptr(), src, BCAST_BYTES, Flags::NONE) }.wait();
        if j < 2 {
            let w = format!("{what}: rank {} receiving from {root}", team.rank());
            check_pattern(dst, BCAST_SEED + u64::from(root), &w);
        }
    })
}

/// What the gex and UPC++ figures of one job need.
pub(crate) struct Figures {
    pub(crate) area: Area,
    /// Rank 1's area as a UPC++ global pointer, for the UPC++ get figures.
    pub(crate) peer_area: GlobalPtr<u8>,
    /// `Ok` when gex atomics reach the other rank's segment (see [`probe_atomics`]).
    pub(crate) atomics: Result<AtomicDomain, String>,
}

/// The figures of one job in the order they are measured, named `<prefix><figure>`,
/// and those it cannot measure.
pub(crate) fn figures(f: &Figures, prefix: &str) -> (Vec<Bench<'static>>, Vec<Unsupported>) {
    let n = |s: &str| format!("{prefix}{s}");
    let a = f.area;
    let mut unsupported = Vec::new();
    let mut v = vec![
        figures::am_short_roundtrip(n("am_short_roundtrip"), a.team),
        rpc::rpc_u64_roundtrip(n("rpc_roundtrip"), a.team),
        figures::am_medium_rate(n("am_medium_rate"), a.team),
    ];
    v.push(put_8b(a, n("put_8B"), true));
    v.push(get_8b(a, n("get_8B"), true));
    v.push(put_8b(a, n("put_nb_8B"), false));
    v.push(get_8b(a, n("get_nb_8B"), false));
    let word = f.peer_area.add(GET_OFF).cast::<u64>();
    v.push(rget_8b(n("rget_8B"), a.team, word));
    v.push(rget_8b_x64(n("rget_8B_x64"), a.team, word));
    v.push(rput_8b(
        a,
        n("rput_8B"),
        f.peer_area.add(RPUT_OFF).cast::<u64>(),
    ));
    v.push(put_bw(a, n("put_bw_1MiB")));
    v.push(indexed_put(a, n("indexed_put_1000x8B")));
    v.push(indexed_get(a, n("indexed_get_1000x8B")));
    match &f.atomics {
        Ok(ad) => v.push(fetch_add(a, ad.clone(), n("fetch_add_i64"))),
        Err(why) => unsupported.push(Unsupported {
            name: n("fetch_add_i64"),
            why: why.clone(),
        }),
    }
    v.push(barrier(a, n("barrier")));
    v.push(broadcast(a, n("broadcast_1MiB")));
    (v, unsupported)
}
