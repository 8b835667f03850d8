//! The figures of the `gups`, `summa` and `histogram` examples' kernels (included in
//! `app.rs` with `#[path]`) and their one-process baselines, with the checks of their
//! data after the measurement ([`Kernels::check`]).
//!
//! Each kernel's state lives for the whole job, shared by its figure and its check:
//! the GUPS tables take one pass per operation and are back at their start after an
//! even number (the check adds one pass if needed), the histogram accumulates every
//! pass's counts (checked against every rank's tally), and the SUMMA product is
//! recomputed by each operation (checked after the first and the last). The baselines
//! run the same arithmetic on rank 0 alone, on data of the same size: every update of
//! the whole GUPS table and of the whole histogram, and the block multiply-add of one
//! SUMMA step.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use upcxx::{op_fast_add, world, Rank};

use crate::common::figures::{Bench, Unit};
use crate::common::time_iters;
use crate::{counters, grid, kernel, updates};

/// log2 of each rank's words of the GUPS tables.
const GUPS_LOG: u32 = 14;
/// Histogram samples each rank draws per operation.
const HISTOGRAM_SAMPLES: u64 = 20_000;
/// The SUMMA block size (b×b f64).
const SUMMA_BLOCK: usize = 192;

/// The GUPS tables and the passes they took.
struct Gups {
    atomics: updates::Atomics,
    batches: updates::Batches,
    atomic_passes: u64,
    batch_passes: u64,
}

/// The job's kernel states, for the figures and the checks after them.
pub(crate) struct Kernels {
    gups: Rc<RefCell<Gups>>,
    summa: Rc<RefCell<grid::Summa<'static>>>,
    histogram: Rc<RefCell<counters::Histogram>>,
    /// Rank 0's baselines' states, checked after the measurement.
    local_gups: Rc<RefCell<LocalGups>>,
    local_histogram: Rc<RefCell<LocalHistogram>>,
}

/// The SUMMA grid of `n` ranks: the most nearly square `pr`×`pc` with `pr ≤ pc`.
fn grid_shape(n: usize) -> (usize, usize) {
    let pr = (1..=n.isqrt())
        .rev()
        .find(|&d| n.is_multiple_of(d))
        .unwrap_or(1);
    (pr, n / pr)
}

impl Kernels {
    /// Every kernel's state at its start. Collective.
    pub(crate) fn new() -> Kernels {
        let (pr, pc) = grid_shape(upcxx::rank_n() as usize);
        Kernels {
            gups: Rc::new(RefCell::new(Gups {
                atomics: updates::Atomics::new(GUPS_LOG),
                batches: updates::Batches::new(GUPS_LOG),
                atomic_passes: 0,
                batch_passes: 0,
            })),
            summa: Rc::new(RefCell::new(grid::Summa::new(world(), pr, pc, SUMMA_BLOCK))),
            histogram: Rc::new(RefCell::new(counters::Histogram::new())),
            local_gups: Rc::new(RefCell::new(LocalGups::new())),
            local_histogram: Rc::new(RefCell::new(LocalHistogram::new())),
        }
    }

    /// The figures: each kernel and its baseline.
    pub(crate) fn figures(
        &self,
        rank: Rank,
        control: [(&'static AtomicU64, &'static AtomicU64); 4],
    ) -> Vec<Bench<'static>> {
        vec![
            gups_local_rate(Rc::clone(&self.local_gups)),
            gups(rank, control[0], Rc::clone(&self.gups), false),
            gups(rank, control[1], Rc::clone(&self.gups), true),
            matmul_rate(),
            summa(rank, control[2], Rc::clone(&self.summa)),
            histogram_local_rate(Rc::clone(&self.local_histogram)),
            histogram(rank, control[3], Rc::clone(&self.histogram)),
        ]
    }

    /// Checks every kernel's data after the measurement (panics if wrong), then frees
    /// what the kernels hold. Collective.
    pub(crate) fn check(self) {
        let mut g = Rc::into_inner(self.gups)
            .expect("the figures are gone")
            .into_inner();
        // The same updates twice return every word to its start.
        if g.atomic_passes % 2 == 1 {
            g.atomics.pass();
        }
        if g.batch_passes % 2 == 1 {
            g.batches.pass();
        }
        let atomic = upcxx::reduce_all(g.atomics.errors(), op_fast_add, world()).wait();
        let batch = upcxx::reduce_all(g.batches.errors(), op_fast_add, world()).wait();
        assert_eq!(
            (atomic, batch),
            (0, 0),
            "gups: words not at their start after an even number of passes \
             (atomics, rpc), of {} and {} passes",
            g.atomic_passes,
            g.batch_passes
        );
        g.atomics.free();
        drop(g.batches);

        let summa = Rc::into_inner(self.summa)
            .expect("the figures are gone")
            .into_inner();
        check_summa(&summa);
        summa.free();

        let h = Rc::into_inner(self.histogram)
            .expect("the figures are gone")
            .into_inner();
        let check = h.check();
        let counted = upcxx::reduce_all(check.counted, op_fast_add, world()).wait();
        let wrong = upcxx::reduce_all(check.wrong, op_fast_add, world()).wait();
        let drawn: u64 = check.reference.iter().sum();
        assert!(
            counted == drawn && wrong == 0,
            "histogram: {counted} counted of {drawn} drawn, {wrong} wrong buckets"
        );
        upcxx::barrier();
        drop(h);

        if upcxx::rank_me() == 0 {
            self.local_gups.borrow().check();
            self.local_histogram.borrow().check();
        }
    }
}

/// Panics unless the last SUMMA product is right. Collective.
fn check_summa(summa: &grid::Summa) {
    let check = summa.check();
    assert!(
        check.ok(),
        "summa: weighted sum of C {} (serial: {}), {} of {} sampled entries wrong",
        check.total,
        check.want,
        check.wrong,
        check.sampled
    );
}

/// `app.gups` (`rpc` false: remote atomic XORs) or `app.gups_rpc` (batches of
/// `rpc_ff`): one pass of the GUPS updates on every rank.
fn gups(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    g: Rc<RefCell<Gups>>,
    rpc: bool,
) -> Bench<'static> {
    let per_op = updates::updates_per_rank(GUPS_LOG) as usize * upcxx::rank_n() as usize;
    let name = if rpc { "app.gups_rpc" } else { "app.gups" };
    kernel(
        rank,
        control,
        name,
        Unit::ItemRate("updates/s", per_op),
        move |_| {
            let mut g = g.borrow_mut();
            if rpc {
                g.batches.pass();
                g.batch_passes += 1;
            } else {
                g.atomics.pass();
                g.atomic_passes += 1;
            }
        },
    )
}

/// The whole GUPS table of the job in one process, and the updates applied to it.
struct LocalGups {
    words: Vec<u64>,
    ran: u64,
    applied: u64,
}

impl LocalGups {
    fn new() -> LocalGups {
        let words = (upcxx::rank_n() as u64) << GUPS_LOG;
        LocalGups {
            words: (0..words).collect(),
            ran: updates::starts(0),
            applied: 0,
        }
    }

    /// Applies the next `n` updates of the stream.
    fn apply(&mut self, n: u64) {
        let ranks = upcxx::rank_n();
        for _ in 0..n {
            self.ran = updates::step(self.ran);
            let (owner, offset) = updates::place(self.ran, GUPS_LOG, ranks);
            self.words[((owner as usize) << GUPS_LOG) | offset] ^= self.ran;
        }
        self.applied += n;
    }

    /// Applies every update so far a second time and checks that every word is back
    /// at its start.
    fn check(&self) {
        let mut again = LocalGups {
            words: self.words.clone(),
            ..LocalGups::new()
        };
        again.apply(self.applied);
        let wrong = again
            .words
            .iter()
            .zip(0..)
            .filter(|(&w, i)| w != *i)
            .count();
        assert_eq!(
            wrong, 0,
            "raw.gups_local_rate: {wrong} words not at their start after {} updates twice",
            self.applied
        );
    }
}

/// `raw.gups_local_rate`: rank 0 alone applies the updates of the stream to a local
/// table as large as the job's; per update.
fn gups_local_rate(state: Rc<RefCell<LocalGups>>) -> Bench<'static> {
    Bench::solo(
        "raw.gups_local_rate",
        Unit::Rate("updates/s"),
        move |iters| {
            let mut s = state.borrow_mut();
            let t0 = Instant::now();
            s.apply(iters);
            t0.elapsed()
        },
    )
}

/// `app.summa`: one SUMMA product on the grid of every rank.
fn summa(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    summa: Rc<RefCell<grid::Summa<'static>>>,
) -> Bench<'static> {
    let flops = summa.borrow().flops() as usize;
    kernel(
        rank,
        control,
        "app.summa",
        Unit::ItemRate("flop/s", flops),
        move |j| {
            summa.borrow_mut().multiply();
            if j == 0 {
                check_summa(&summa.borrow());
            }
        },
    )
}

/// `raw.matmul_rate`: rank 0 alone, the block multiply-add of a SUMMA step (b×b, the
/// same code) on local blocks of A and B; flops per second. Checked after each run.
fn matmul_rate() -> Bench<'static> {
    let bs = SUMMA_BLOCK;
    let gen = |f: fn(usize, usize) -> f64| -> Vec<f64> {
        (0..bs * bs).map(|k| f(k / bs, k % bs)).collect()
    };
    let (a, b) = (gen(grid::a), gen(grid::b));
    let mut c = vec![0.0; bs * bs];
    let mut done = 0u64;
    Bench::solo(
        "raw.matmul_rate",
        Unit::ItemRate("flop/s", 2 * bs * bs * bs),
        move |iters| {
            let t = time_iters(iters, || {
                grid::multiply_add(bs, &a, &b, &mut c);
            });
            done += iters;
            // `done` times the block product, exact in f64 (small integers).
            for s in 0..grid::SAMPLES {
                let (i, j) = ((s * 37) % bs, (s * 101) % bs);
                let want = done as f64 * grid::product_entry(i, j, bs);
                assert_eq!(c[i * bs + j], want, "raw.matmul_rate: C({i}, {j})");
            }
            t
        },
    )
}

/// `app.histogram`: every rank draws [`HISTOGRAM_SAMPLES`] samples and counts them at
/// their buckets' owners.
fn histogram(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    h: Rc<RefCell<counters::Histogram>>,
) -> Bench<'static> {
    let per_op = HISTOGRAM_SAMPLES as usize * upcxx::rank_n() as usize;
    kernel(
        rank,
        control,
        "app.histogram",
        Unit::ItemRate("updates/s", per_op),
        move |_| h.borrow_mut().pass(HISTOGRAM_SAMPLES),
    )
}

/// A histogram of rank 0's samples in one process.
struct LocalHistogram {
    counts: Vec<u64>,
    rng: counters::Rng,
    drawn: u64,
}

impl LocalHistogram {
    fn new() -> LocalHistogram {
        LocalHistogram {
            counts: vec![0; counters::BUCKETS],
            rng: counters::Rng::for_rank(0),
            drawn: 0,
        }
    }

    /// Draws and counts `n` samples.
    fn draw(&mut self, n: u64) {
        for _ in 0..n {
            self.counts[counters::bucket_of(self.rng.next()) as usize] += 1;
        }
        self.drawn += n;
    }

    /// Draws the same samples again into a new histogram and compares.
    fn check(&self) {
        let mut again = LocalHistogram::new();
        again.draw(self.drawn);
        assert_eq!(
            self.counts, again.counts,
            "raw.histogram_rate: counts differ from a second draw"
        );
        assert_eq!(self.counts.iter().sum::<u64>(), self.drawn);
    }
}

/// `raw.histogram_rate`: rank 0 alone draws samples and counts them in a local
/// histogram of the same buckets; per sample.
fn histogram_local_rate(state: Rc<RefCell<LocalHistogram>>) -> Bench<'static> {
    Bench::solo(
        "raw.histogram_rate",
        Unit::Rate("updates/s"),
        move |iters| {
            let mut s = state.borrow_mut();
            let t0 = Instant::now();
            s.draw(iters);
            t0.elapsed()
        },
    )
}
