//! Figures of two ranks, the memcpy baseline, and the loop that measures figures
//! interleaved, shared by `gex.rs`, `upcxx.rs` (which re-measures the raw and gex figures
//! in its own job, as baselines of the UPC++ ones) and `coll.rs` (whose collective
//! figures every rank of the job takes part in, see [`Bench::team`]).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gex::{Flags, Lc, Rank, Team};

use super::am::{
    await_value, fill_pattern, serve_until_stopped, stop_server, sync_medium, H_MEDIUM, H_PING,
    LAST_PONG, MEDIUM_BYTES,
};
use super::{spin_until, time_iters, Measured, Sampler};

/// How a figure is computed from the time per operation.
#[derive(Clone, Copy)]
pub(crate) enum Unit {
    Latency,
    /// Latency of one of the `n` items an operation handles.
    PerItem(usize),
    Rate(&'static str),
    /// Rate of the `n` items an operation handles.
    ItemRate(&'static str, usize),
    Bandwidth(usize),
}

/// One figure: rank 0 measures, rank 1 may have to take part.
pub(crate) struct Bench<'a> {
    name: String,
    unit: Unit,
    /// Rank 0: performs `iters` operations and returns their time. Each call continues
    /// where the previous one stopped, so rank 1's `serve` needs no iteration count.
    run: Box<dyn FnMut(u64) -> Duration + 'a>,
    /// Rank 0, after the runs of a phase: tells rank 1's `serve` to return.
    stop: Box<dyn FnMut() + 'a>,
    /// Rank 1: takes part until rank 0's `stop`.
    serve: Box<dyn FnMut() + 'a>,
    /// Whether every rank above 1 takes part too, with `serve` as rank 1 does.
    serve_all: bool,
    /// Rank 1, after the last phase: checks the data it received (panics if wrong).
    check1: Box<dyn FnMut() + 'a>,
}

impl<'a> Bench<'a> {
    /// Rank 0 alone (rank 1 waits in the barrier).
    pub(crate) fn solo(
        name: impl Into<String>,
        unit: Unit,
        run: impl FnMut(u64) -> Duration + 'a,
    ) -> Bench<'a> {
        Bench {
            name: name.into(),
            unit,
            run: Box::new(run),
            stop: Box::new(|| {}),
            serve: Box::new(|| {}),
            serve_all: false,
            check1: Box::new(|| {}),
        }
    }

    /// With rank 1 serving until stopped.
    pub(crate) fn duo(
        name: impl Into<String>,
        unit: Unit,
        run: impl FnMut(u64) -> Duration + 'a,
        stop: impl FnMut() + 'a,
        serve: impl FnMut() + 'a,
    ) -> Bench<'a> {
        Bench {
            stop: Box::new(stop),
            serve: Box::new(serve),
            ..Bench::solo(name, unit, run)
        }
    }

    /// With every other rank of the job serving until stopped (a collective, in which
    /// rank 0's `run` tells the others how many operations to join).
    pub(crate) fn team(
        name: impl Into<String>,
        unit: Unit,
        run: impl FnMut(u64) -> Duration + 'a,
        stop: impl FnMut() + 'a,
        serve: impl FnMut() + 'a,
    ) -> Bench<'a> {
        Bench {
            serve_all: true,
            ..Bench::duo(name, unit, run, stop, serve)
        }
    }

    /// A collective figure: every rank performs `op(j)` for the same `j = 0, 1, 2, …`
    /// (the figure's operations, counted over all its phases), each run after
    /// `before()`. Rank 0 times its runs; before each, it publishes in `total` (a word
    /// every rank reads) the number of operations it asked for so far, and the other
    /// ranks, spinning on it, perform the operations up to it, until rank 0 ends the
    /// phase by counting it in `stops`.
    pub(crate) fn collective(
        rank: Rank,
        control: (&'static AtomicU64, &'static AtomicU64),
        name: impl Into<String>,
        unit: Unit,
        mut before: impl FnMut() + 'static,
        mut op: impl FnMut(u64) + 'static,
    ) -> Bench<'static> {
        let (total, stops) = control;
        let mut done = 0u64;
        if rank == 0 {
            let mut stopped = 0u64;
            let run = move |iters: u64| {
                before();
                let start = done;
                done += iters;
                total.store(done, Ordering::Release);
                let t0 = Instant::now();
                for j in start..done {
                    op(j);
                }
                t0.elapsed()
            };
            let stop = move || {
                stopped += 1;
                stops.store(stopped, Ordering::Release);
            };
            Bench::team(name, unit, run, stop, || {})
        } else {
            let mut seen = 0u64;
            let serve = move || loop {
                let (mut s, mut t) = (0, 0);
                // `stops` first: rank 0 stores its last total before it ends the phase.
                spin_until(|| {
                    s = stops.load(Ordering::Acquire);
                    t = total.load(Ordering::Acquire);
                    t > done || s > seen
                });
                if t > done {
                    before();
                    for j in done..t {
                        op(j);
                    }
                    done = t;
                } else {
                    seen = s;
                    return;
                }
            };
            Bench::team(name, unit, |_| Duration::ZERO, || {}, serve)
        }
    }

    pub(crate) fn checked_by_rank1(mut self, check: impl FnMut() + 'a) -> Bench<'a> {
        self.check1 = Box::new(check);
        self
    }
}

/// Measures `benches` interleaved: a calibration phase for each (which starts with one
/// untimed operation, see `Sampler::calibrate`), then `sampler.rounds()` rounds of one
/// sample of each (the first `warmup` rounds discarded), so that a slow stretch of a busy
/// machine hits every figure alike and their ratios stay meaningful. Each phase is rank
/// 0's part, rank 1's part, then `barrier()` on all ranks; ranks other than 0 and 1 spend
/// every phase waiting in that barrier, polling as a real program's idle ranks would,
/// except in the phases of a [`Bench::team`] figure, where they serve as rank 1 does.
/// Returns rank 0's results (nothing on the other ranks).
pub(crate) fn measure(
    rank: u32,
    sampler: Sampler,
    barrier: impl Fn(),
    mut benches: Vec<Bench<'_>>,
) -> Vec<Measured> {
    let mut iters = vec![1u64; benches.len()];
    let mut samples = vec![Vec::new(); benches.len()];
    for round in 0..=sampler.rounds() {
        for (i, b) in benches.iter_mut().enumerate() {
            match rank {
                0 if round == 0 => {
                    iters[i] = sampler.calibrate(&mut |n| (b.run)(n));
                    (b.stop)();
                }
                0 => {
                    let t = (b.run)(iters[i]);
                    (b.stop)();
                    if round > sampler.warmup {
                        samples[i].push(t.as_nanos() as f64 / iters[i] as f64);
                    }
                }
                1 => (b.serve)(),
                _ if b.serve_all => (b.serve)(),
                _ => {}
            }
            barrier();
        }
    }
    if rank == 1 {
        benches.iter_mut().for_each(|b| (b.check1)());
    }
    barrier();
    if rank != 0 {
        return Vec::new();
    }
    benches
        .iter()
        .zip(samples)
        .map(|(b, ns)| match b.unit {
            Unit::Latency => Measured::latency_ns(b.name.clone(), &ns),
            Unit::PerItem(n) => {
                let per: Vec<f64> = ns.iter().map(|&t| t / n as f64).collect();
                Measured::latency_ns(b.name.clone(), &per)
            }
            Unit::Rate(unit) => Measured::rate(b.name.clone(), unit, &ns),
            Unit::ItemRate(unit, n) => {
                let per: Vec<f64> = ns.iter().map(|&t| t / n as f64).collect();
                Measured::rate(b.name.clone(), unit, &per)
            }
            Unit::Bandwidth(bytes) => Measured::bandwidth_gbs(b.name.clone(), bytes, &ns),
        })
        .collect()
}

/// A private, page-aligned buffer of `len` bytes filled with `fill` (so every page is
/// faulted in), for the life of the process. Page alignment matches the segment's, so
/// that copies to and from the segment and the memcpy baseline see the same relative
/// alignment of source and destination (which `rep movsb` is sensitive to).
pub(crate) fn page_aligned(len: usize, fill: u8) -> &'static mut [u8] {
    let layout = std::alloc::Layout::from_size_align(len.max(1), 4096).expect("layout");
    // SAFETY: a non-zero-sized layout; the allocation is checked, fully initialized
    // below before being read, and never freed (leaked for the life of the process).
    unsafe {
        let p = std::alloc::alloc(layout);
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        std::ptr::write_bytes(p, fill, len);
        std::slice::from_raw_parts_mut(p, len)
    }
}

/// `raw.pingpong_roundtrip`: one cache line of rank 1's segment (`line`, as this
/// process maps it) bounced between ranks 0 and 1 with plain atomics: rank 0 stores the
/// odd `n`, rank 1 answers `n + 1`; `u64::MAX` stops rank 1, which then clears the line
/// for the next phase.
pub(crate) fn raw_pingpong(name: impl Into<String>, line: &'static AtomicU64) -> Bench<'static> {
    let mut n = 1u64;
    let mut expect = 1u64;
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| {
            time_iters(iters, || {
                line.store(n, Ordering::Release);
                let want = n + 1;
                spin_until(|| line.load(Ordering::Acquire) == want);
                n += 2;
            })
        },
        move || line.store(u64::MAX, Ordering::Release),
        move || {
            while await_value(line, expect) != u64::MAX {
                line.store(expect + 1, Ordering::Release);
                expect += 2;
            }
            line.store(0, Ordering::Relaxed);
        },
    )
}

/// `gex.am_short_roundtrip`: request_short to rank 1, whose handler replies with
/// reply_short; rank 0 polls until the Pong carrying the same sequence number has run.
pub(crate) fn am_short_roundtrip(name: impl Into<String>, team: Team) -> Bench<'static> {
    let mut seq = 0u32;
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| {
            time_iters(iters, || {
                seq = seq.wrapping_add(1);
                let want = seq;
                team.request_short(1, H_PING, &[want], Flags::NONE).unwrap();
                spin_until(|| {
                    gex::poll();
                    LAST_PONG.load(Ordering::Relaxed) == want
                });
            })
        },
        move || stop_server(team),
        serve_until_stopped,
    )
}

/// `gex.am_medium_64B_rate`: rank 0 streams 64-byte Medium requests to rank 1, which
/// polls; a sample ends when rank 1 confirms it handled them all (and that their
/// payloads were right).
pub(crate) fn am_medium_rate(name: impl Into<String>, team: Team) -> Bench<'static> {
    let mut payload = [0u8; MEDIUM_BYTES];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut sent = 0u64;
    Bench::duo(
        name,
        Unit::Rate("msg/s"),
        move |iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                sent += 1;
                let seq = sent as u32;
                payload[..4].copy_from_slice(&seq.to_le_bytes());
                team.request_medium(1, H_MEDIUM, &payload, Lc::Now, Flags::NONE, &[seq])
                    .unwrap();
            }
            sync_medium(team, sent);
            t0.elapsed()
        },
        move || stop_server(team),
        serve_until_stopped,
    )
}

/// `gex.put_pingpong_8B`: rank 0 puts the odd `n` into rank 1's segment with
/// put_blocking; rank 1 spins on its own segment memory until it sees it and puts
/// `n + 1` into rank 0's segment, where rank 0 spins. `theirs` is the other rank's flag
/// (in its owner's address space, for the put), `mine` this rank's own. `u64::MAX`
/// stops rank 1, which then clears its flag for the next phase.
pub(crate) fn put_pingpong(
    name: impl Into<String>,
    team: Team,
    theirs: usize,
    mine: &'static AtomicU64,
) -> Bench<'static> {
    let mut n = 1u64;
    let mut expect = 1u64;
    Bench::duo(
        name,
        Unit::Latency,
        move |iters| {
            time_iters(iters, || {
                team.put_blocking(1, theirs, &n.to_ne_bytes(), Flags::NONE)
                    .unwrap();
                let want = n + 1;
                spin_until(|| mine.load(Ordering::Acquire) == want);
                n += 2;
            })
        },
        move || {
            team.put_blocking(1, theirs, &u64::MAX.to_ne_bytes(), Flags::NONE)
                .unwrap()
        },
        move || {
            while await_value(mine, expect) != u64::MAX {
                team.put_blocking(0, theirs, &(expect + 1).to_ne_bytes(), Flags::NONE)
                    .unwrap();
                expect += 2;
            }
            mine.store(0, Ordering::Relaxed);
        },
    )
}

/// `gex.get_8B`: get_blocking of the 8 bytes at `src` of rank 1's segment (in rank 1's
/// address space), which hold `expect`; checked once.
pub(crate) fn get_8b(
    name: impl Into<String>,
    team: Team,
    src: usize,
    expect: u64,
) -> Bench<'static> {
    let name = name.into();
    let mut word = [0u8; 8];
    let mut checked = false;
    Bench::solo(name.clone(), Unit::Latency, move |iters| {
        let t = time_iters(iters, || {
            team.get_blocking(black_box(&mut word), 1, src, Flags::NONE)
                .unwrap();
        });
        if !checked {
            assert_eq!(u64::from_ne_bytes(word), expect, "{name} read wrong data");
            checked = true;
        }
        t
    })
}

/// `raw.memcpy_4MiB`: single-core `copy_nonoverlapping` of `bytes` between two private,
/// pre-faulted, page-aligned buffers of rank 0; checked once.
pub(crate) fn raw_memcpy(name: impl Into<String>, bytes: usize) -> Bench<'static> {
    let src = page_aligned(bytes, 0);
    fill_pattern(src, MEMCPY_SEED);
    let dst = page_aligned(bytes, 0xa5);
    let mut checked = false;
    Bench::solo(name, Unit::Bandwidth(bytes), move |iters| {
        let t = time_iters(iters, || {
            // SAFETY: two distinct live buffers of `bytes` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    black_box(src.as_ptr()),
                    black_box(dst.as_mut_ptr()),
                    bytes,
                )
            };
            black_box(&mut *dst);
        });
        if !checked {
            assert!(*dst == *src, "memcpy copied wrong data");
            checked = true;
        }
        t
    })
}

const MEMCPY_SEED: u64 = 0x5eed_0003;
