//! The figures of remote atomics, shared by `gex.rs` (which measures them against the raw
//! CPU fetch-add) and `upcxx.rs` (which re-measures the gex one as the baseline of
//! `upcxx.atomic_fetch_add_i64`).
//!
//! The latency figures target a word of one cache line of rank 1's segment while rank 1
//! keeps touching another word of that line (a fetch-add, then a short pause), as a
//! counter shared between two processes would be: `raw.atomic_fetch_add_i64` is that
//! fetch-add made directly on the mapping, the floor of any implementation on one host.
//!
//! How often an operation finds the line in the other core's cache depends on the
//! machine: on a 2-core AMD EPYC virtual machine the raw fetch-add took 2.3-2.5 ns, an
//! access to the operation's own cache nearly every time, and `atomic.fetch_add_i64`
//! 7.2-12 ns (4.3-5.0x, against the 1.5x target): the library's own cost per operation,
//! which a line moving between the cores at every operation would hide. Counted by
//! callgrind over a loop of 100,000 blocking `FADD`s on the other rank's word (2 ranks),
//! one operation takes 94 instructions, the loop's included: the spec's checks of the
//! domain, type, operation, flags, rank and alignment (16), the segment's bounds and the
//! translation to this process's mapping (about 30), the runtime's and the thread's
//! state (about 15), the GASP check, and the fetch-add itself. The 1.5x target leaves
//! room for a few instructions beside the CPU's fetch-add, not for those checks. With
//! rank 1 touching the line without pause, the raw figure rose to 8-10 ns and the gex
//! one to 39-43 ns: the longer an operation, the likelier the line left in between.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gex::ops::Op;
use gex::{AtomicDomain, Flags};

use super::figures::{Bench, Unit};
use super::{spin_until, time_iters};

/// Where a latency figure operates: the target word and the words rank 1 uses.
#[derive(Clone, Copy)]
pub(crate) struct Line {
    /// The word rank 0 adds to, through this process's mapping.
    pub(crate) target: &'static AtomicU64,
    /// Another word of the same cache line, which rank 1 keeps adding to.
    pub(crate) touched: &'static AtomicU64,
    /// Rank 0 sets it to stop rank 1 (on another line).
    pub(crate) stop: &'static AtomicU64,
}

/// Rank 1's part of the latency figures: touch the line until stopped.
pub(crate) fn touch_until_stopped(line: Line) {
    while line.stop.load(Ordering::Acquire) == 0 {
        line.touched.fetch_add(1, Ordering::Relaxed);
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
    line.stop.store(0, Ordering::Release);
}

/// Rank 0 checks once that `fetch` returns consecutive values: nobody else adds to the
/// target word, so each fetch-add must read what the previous one left.
fn checked_run(line: Line, mut fetch_add: impl FnMut() -> u64) -> impl FnMut(u64) -> Duration {
    let mut checked = false;
    move |iters| {
        let t = time_iters(iters, || {
            black_box(fetch_add());
        });
        if !checked {
            let before = line.target.load(Ordering::Acquire);
            assert_eq!(fetch_add(), before, "a fetch-add read a wrong value");
            assert_eq!(
                line.target.load(Ordering::Acquire),
                before + 1,
                "a fetch-add was lost"
            );
            checked = true;
        }
        t
    }
}

/// A latency figure of `fetch_add` on `line`'s target word, with rank 1 touching the
/// line: the shape of every fetch-add figure.
pub(crate) fn fetch_add_latency<'a>(
    name: impl Into<String>,
    line: Line,
    fetch_add: impl FnMut() -> u64 + 'a,
) -> Bench<'a> {
    Bench::duo(
        name,
        Unit::Latency,
        checked_run(line, fetch_add),
        move || line.stop.store(1, Ordering::Release),
        move || touch_until_stopped(line),
    )
}

/// `raw.atomic_fetch_add_i64`: a CPU fetch-add on the target word of rank 1's line.
pub(crate) fn raw_fetch_add(name: impl Into<String>, line: Line) -> Bench<'static> {
    fetch_add_latency(name, line, move || {
        line.target.fetch_add(1, Ordering::AcqRel)
    })
}

/// `atomic.fetch_add_i64`: a blocking `GEX_OP_FADD` of the i64 domain `ad` on the
/// target word, `addr` in rank 1's address space.
pub(crate) fn gex_fetch_add(
    name: impl Into<String>,
    ad: AtomicDomain,
    addr: usize,
    line: Line,
) -> Bench<'static> {
    fetch_add_latency(name, line, move || {
        ad.op_blocking(1, addr, Op::FAdd, 1i64, 0, Flags::NONE)
            .expect("FADD fetches") as u64
    })
}

/// The control words of [`gex_fetch_add_rate`], in rank 0's segment, each on a line of
/// its own.
#[derive(Clone, Copy)]
pub(crate) struct RateControl {
    /// Incremented by rank 0 to start a run of `iters` operations on every rank.
    pub(crate) go: &'static AtomicU64,
    pub(crate) iters: &'static AtomicU64,
    /// The ranks other than 0 that finished the run.
    pub(crate) done: &'static AtomicU64,
    /// Incremented by rank 0 to end a phase.
    pub(crate) stop: &'static AtomicU64,
}

/// `atomic.fetch_add_i64_rate`: every rank of the job makes `GEX_OP_FADD`s on one word
/// (`addr`, in `owner`'s segment) as fast as it can; operations per second over the
/// job. Rank 0 starts each run, makes its share and waits for the others'; it checks
/// once that the word grew by exactly the operations made.
pub(crate) fn gex_fetch_add_rate(
    name: impl Into<String>,
    ad: AtomicDomain,
    owner: u32,
    addr: usize,
    ctl: RateControl,
) -> Bench<'static> {
    let ranks = u64::from(ad.team().size());
    let serving = ad.clone();
    let add = move |ad: &AtomicDomain, iters: u64| {
        for _ in 0..iters {
            black_box(ad.op_blocking(owner, addr, Op::FAdd, 1i64, 0, Flags::NONE));
        }
    };
    let get = {
        let ad = ad.clone();
        move || {
            ad.op_blocking(owner, addr, Op::Get, 0i64, 0, Flags::NONE)
                .expect("GET fetches")
        }
    };
    let mut checked = false;
    let (mut seen_go, mut seen_stop) = (0, 0);
    Bench::team(
        name,
        Unit::Rate("op/s"),
        move |iters| {
            let before = get();
            ctl.done.store(0, Ordering::Relaxed);
            ctl.iters.store(iters, Ordering::Relaxed);
            let t0 = Instant::now();
            ctl.go.fetch_add(1, Ordering::Release);
            add(&ad, iters);
            spin_until(|| ctl.done.load(Ordering::Acquire) == ranks - 1);
            // The figure is the time per operation of the whole job.
            let t = t0.elapsed() / ranks as u32;
            if !checked {
                assert_eq!(
                    get() - before,
                    (iters * ranks) as i64,
                    "fetch-adds were lost"
                );
                checked = true;
            }
            t
        },
        move || {
            ctl.stop.fetch_add(1, Ordering::Release);
        },
        move || loop {
            spin_until(|| {
                ctl.go.load(Ordering::Acquire) != seen_go
                    || ctl.stop.load(Ordering::Acquire) != seen_stop
            });
            let go = ctl.go.load(Ordering::Acquire);
            if go != seen_go {
                seen_go = go;
                add(&serving, ctl.iters.load(Ordering::Relaxed));
                ctl.done.fetch_add(1, Ordering::Release);
            } else {
                seen_stop = ctl.stop.load(Ordering::Acquire);
                return;
            }
        },
    )
}
