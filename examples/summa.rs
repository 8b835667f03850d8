//! Dense matrix multiply `C = A·B` (f64) by SUMMA on a process grid of all the ranks:
//! `UPCXX_RANKS=4 cargo run --release --example summa [n]` (default n = 512).
//!
//! The P ranks form a pr×pc grid, pr the largest divisor of P that is at most √P and
//! pc = P/pr (2×2 for 4 ranks, 2×3 for 6, 1×P for a prime P). All blocks are b×b with
//! b = ⌈n/pc⌉; rank (row, col) owns block (row, col) of C, which is pr·b × pc·b (n×n,
//! n rounded up to pc·b, on a square grid), and A and B are dealt block-cyclically
//! over the lcm(pr, pc) steps of the inner dimension. The product is `summa/grid.rs`
//! (shared with the `app` bench): at step k the owners of A(row, k) and B(k, col)
//! broadcast them along their row and column teams, and every rank accumulates
//! `C(row, col) += A(row, k)·B(k, col)`, the broadcasts of step k + 1 under way while
//! step k computes.
//!
//! The entries of A and B are small integers given by a formula of their indices, so
//! every product and sum is exact in f64, and so is the check: sampled entries of each
//! block against dot products from the formulas, and a weighted sum of every entry of
//! C against the same sum computed serially.
//! Rank 0 prints the shapes, the time and GFLOP/s and, as the last line, `verified`;
//! any mismatch fails the job.
//!
//! A rank's blocks of A and B and the four panels take `(s/pc + s/pr + 4)·b²·8` bytes
//! of its shared segment, s = lcm(pr, pc) (raise `UPCXX_SEGMENT_SIZE` for large n).

#[path = "summa/grid.rs"]
mod grid;

use std::time::Instant;

use grid::Summa;
use upcxx::coll::barrier;
use upcxx::{op_fast_max, Team};

fn main() {
    upcxx::init();
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("matrix size: a number"))
        .unwrap_or(512);
    let (pr, pc) = grid_shape(upcxx::rank_n() as usize);
    let bs = n.div_ceil(pc);
    let grid = upcxx::world();
    run(Summa::new(grid, pr, pc, bs), grid);
    upcxx::barrier();
    if upcxx::rank_me() == 0 {
        println!("verified");
    }
    upcxx::finalize();
}

/// The grid of `ranks` ranks: pr rows of pc columns, pr the largest divisor of `ranks`
/// that is at most its square root.
fn grid_shape(ranks: usize) -> (usize, usize) {
    let pr = (1..=ranks.isqrt())
        .rev()
        .find(|d| ranks.is_multiple_of(*d))
        .unwrap_or(1);
    (pr, ranks / pr)
}

/// The product on this rank's block, its check and the report.
fn run(mut summa: Summa, grid: &Team) {
    let (m, n, k) = summa.dims();
    let (pr, pc) = grid_shape(grid.rank_n() as usize);
    barrier(grid);
    let t0 = Instant::now();
    summa.multiply();
    let mine = t0.elapsed().as_secs_f64();
    let secs = upcxx::reduce_all(mine, op_fast_max, grid).wait();

    let check = summa.check();
    if grid.rank_me() == 0 {
        let gflops = summa.flops() / secs / 1e9;
        println!(
            "summa: C ({m}x{n}) = A ({m}x{k}) * B ({k}x{n}), f64, on a {pr}x{pc} grid: \
             {secs:.4} s, {gflops:.2} GFLOP/s; weighted sum of C = {} (serial: {}); \
             {} of {} sampled entries wrong",
            check.total, check.want, check.wrong, check.sampled
        );
        assert!(check.ok(), "the product differs from the serial one");
    }
    summa.free();
}
