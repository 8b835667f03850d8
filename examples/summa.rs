//! Dense matrix multiply `C = A·B` (f64) by SUMMA on a √P×√P process grid:
//! `UPCXX_RANKS=4 cargo run --release --example summa [n]` (default n = 512).
//!
//! The ranks form a q×q grid (q = ⌊√P⌋; with a rank count that is not a square, the
//! ranks beyond q² take no part and wait in the final world barrier). Rank (row, col)
//! owns block (row, col) of A, B and C, each b×b with b = ⌈n/q⌉ (n is rounded up to
//! q·b). The product is `summa/grid.rs` (shared with the `app` bench): at step k the
//! owners of A(row, k) and B(k, col) broadcast them along their row and column teams,
//! and every rank accumulates `C(row, col) += A(row, k)·B(k, col)`, the broadcasts of
//! step k + 1 under way while step k computes.
//!
//! The entries of A and B are small integers given by a formula of their indices, so
//! every product and sum is exact in f64, and so is the check: sampled entries of each
//! block against dot products from the formulas, and a weighted sum of every entry of
//! C against the same sum computed serially.
//! Rank 0 prints the time and GFLOP/s and, as the last line, `verified`; any mismatch
//! fails the job.
//!
//! A, B and the four panels take 6·b²·8 bytes of each rank's shared segment (raise
//! `UPCXX_SEGMENT_SIZE` for large n).

#[path = "summa/grid.rs"]
mod grid;

use std::time::Instant;

use grid::Summa;
use upcxx::coll::barrier;
use upcxx::{op_fast_max, Team, COLOR_NONE};

fn main() {
    upcxx::init();
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("matrix size: a number"))
        .unwrap_or(512);
    let me = upcxx::rank_me() as usize;
    let ranks = upcxx::rank_n() as usize;
    let q = ranks.isqrt();
    if q < 2 {
        if me == 0 {
            eprintln!("summa needs at least 4 ranks for a 2x2 grid (got {ranks})");
        }
        upcxx::finalize();
        std::process::exit(2);
    }
    let in_grid = me < q * q;
    let grid = upcxx::world().split(if in_grid { 0 } else { COLOR_NONE }, me as i32);
    if in_grid {
        let bs = n.div_ceil(q);
        if me == 0 && ranks > q * q {
            println!(
                "summa: {ranks} ranks is not a square: using the largest square grid, {q}x{q}; \
                 the other {} idle",
                ranks - q * q
            );
        }
        if me == 0 && bs * q != n {
            println!(
                "summa: n = {n} rounded up to {} (a multiple of {q})",
                bs * q
            );
        }
        run(Summa::new(&grid, q, q, bs), &grid);
        grid.destroy(upcxx::EntryBarrier::User);
    }
    upcxx::barrier();
    if me == 0 {
        println!("verified");
    }
    upcxx::finalize();
}

/// The product on this rank's block, its check and the report.
fn run(mut summa: Summa, grid: &Team) {
    let (n, _, _) = summa.dims();
    let q = grid.rank_n().isqrt();
    barrier(grid);
    let t0 = Instant::now();
    summa.multiply();
    let mine = t0.elapsed().as_secs_f64();
    let secs = upcxx::reduce_all(mine, op_fast_max, grid).wait();

    let check = summa.check();
    if grid.rank_me() == 0 {
        let gflops = summa.flops() / secs / 1e9;
        println!(
            "summa: {n}x{n} f64 on a {q}x{q} grid: {secs:.4} s, {gflops:.2} GFLOP/s; \
             weighted sum of C = {} (serial: {}); {} of {} sampled entries wrong",
            check.total, check.want, check.wrong, check.sampled
        );
        assert!(check.ok(), "the product differs from the serial one");
    }
    summa.free();
}
