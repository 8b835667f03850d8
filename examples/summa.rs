//! Dense matrix multiply `C = A·B` (f64) by SUMMA on a √P×√P process grid:
//! `UPCXX_RANKS=4 cargo run --release --example summa [n]` (default n = 512).
//!
//! The ranks form a q×q grid (q = ⌊√P⌋; with a rank count that is not a square, the
//! ranks beyond q² take no part and wait in the final world barrier). Rank (row, col)
//! owns block (row, col) of A, B and C, each b×b with b = ⌈n/q⌉ (n is rounded up to
//! q·b). From the grid team, [`Team::split`] makes a row team (ordered by column) and a
//! column team (ordered by row), so the rank that owns block column k of A is rank k
//! of its row team and the one that owns block row k of B is rank k of its column team.
//!
//! Step k of SUMMA: the owner of A(row, k) broadcasts it along its row team, the owner
//! of B(k, col) broadcasts it along its column team, and every rank accumulates
//! `C(row, col) += A(row, k)·B(k, col)`. The broadcasts are `coll::broadcast_global` of
//! blocks in the shared segment: a root broadcasts straight from its own block, the
//! others receive into a panel. Panels are double-buffered, so the broadcasts of step
//! k + 1 are under way while step k computes.
//!
//! The entries of A and B are small integers given by a formula of their indices, so
//! every rank generates its blocks independently and every product and sum is exact in
//! f64. The check is exact too: each rank compares a sample of its entries with dot
//! products computed from the formulas, and rank 0 compares a weighted sum of every
//! entry of C, `Σ_ij u_i c_ij v_j` (a `reduce_all` over the grid), with `(uᵀA)·(Bv)`,
//! computed serially in O(n²).
//! Rank 0 prints the time and GFLOP/s and, as the last line, `verified`; any mismatch
//! fails the job.
//!
//! A, B and the four panels take 6·b²·8 bytes of each rank's shared segment (raise
//! `UPCXX_SEGMENT_SIZE` for large n).

use std::time::Instant;

use upcxx::coll::{barrier, broadcast_global};
use upcxx::{op_fast_add, op_fast_max, Future, GlobalPtr, Rank, Team, COLOR_NONE};

/// Entry (i, j) of A.
fn a(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 17) as f64 - 8.0
}

/// Entry (i, j) of B.
fn b(i: usize, j: usize) -> f64 {
    ((i * 5 + j * 11) % 13) as f64 - 6.0
}

/// Entries of C this rank checks against a dot product.
const SAMPLES: usize = 64;

/// This rank's place in the grid.
struct Grid {
    q: usize,
    row: usize,
    col: usize,
    /// Block size.
    bs: usize,
    grid: Team,
    row_team: Team,
    col_team: Team,
}

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
        let (row, col) = (me / q, me % q);
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
        let row_team = grid.split(row as i32, col as i32);
        let col_team = grid.split(col as i32, row as i32);
        let g = Grid {
            q,
            row,
            col,
            bs,
            grid,
            row_team,
            col_team,
        };
        run(&g);
        g.row_team.destroy(upcxx::EntryBarrier::User);
        g.col_team.destroy(upcxx::EntryBarrier::User);
        g.grid.destroy(upcxx::EntryBarrier::User);
    }
    upcxx::barrier();
    if me == 0 {
        println!("verified");
    }
    upcxx::finalize();
}

/// A new b×b block of this rank's segment with entry (i, j) = `f(i0 + i, j0 + j)`.
fn block(bs: usize, i0: usize, j0: usize, f: fn(usize, usize) -> f64) -> GlobalPtr<f64> {
    upcxx::try_new_array_with(bs * bs, |k| f(i0 + k / bs, j0 + k % bs)).unwrap_or_else(|| {
        panic!(
            "summa: no room for a {bs}x{bs} block in the shared segment \
             (raise UPCXX_SEGMENT_SIZE)"
        )
    })
}

/// This rank's `len` elements at `gp`, read-only.
///
/// # Safety
/// No collective may write the range while the slice lives.
unsafe fn view<'a>(gp: GlobalPtr<f64>, len: usize) -> &'a [f64] {
    // SAFETY: the caller's contract; `gp` is this rank's allocation of `len` elements.
    unsafe { std::slice::from_raw_parts(gp.local(), len) }
}

/// `c += a·b` for b×b row-major blocks (i-k-j order: the inner loop streams a row of
/// `b` into a row of `c`).
fn multiply_add(bs: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for (c_row, a_row) in c.chunks_exact_mut(bs).zip(a.chunks_exact(bs)) {
        for (&aik, b_row) in a_row.iter().zip(b.chunks_exact(bs)) {
            for (cij, &bkj) in c_row.iter_mut().zip(b_row) {
                *cij += aik * bkj;
            }
        }
    }
}

/// The SUMMA product on this rank's block, its check and the report.
fn run(g: &Grid) {
    let (q, bs) = (g.q, g.bs);
    let len = bs * bs;
    let n = q * bs;
    let my_a = block(bs, g.row * bs, g.col * bs, a);
    let my_b = block(bs, g.row * bs, g.col * bs, b);
    let panels: [[GlobalPtr<f64>; 2]; 2] =
        std::array::from_fn(|_| std::array::from_fn(|_| upcxx::new_array::<f64>(len)));
    let mut c = vec![0.0; len];

    // The broadcasts of step k into panel pair k % 2: at a root its own block.
    let start = |k: usize| -> (Future<()>, Future<()>, [GlobalPtr<f64>; 2]) {
        let a_buf = if g.col == k { my_a } else { panels[k % 2][0] };
        let b_buf = if g.row == k { my_b } else { panels[k % 2][1] };
        let fa = broadcast_global(a_buf, len, k as Rank, &g.row_team);
        let fb = broadcast_global(b_buf, len, k as Rank, &g.col_team);
        (fa, fb, [a_buf, b_buf])
    };

    barrier(&g.grid);
    let t0 = Instant::now();
    let mut pending = Some(start(0));
    for k in 0..q {
        let (fa, fb, [a_buf, b_buf]) = pending.take().expect("started in the step before");
        fa.wait();
        fb.wait();
        // Panel pair (k + 1) % 2 was last read in step k - 1, which has finished.
        if k + 1 < q {
            pending = Some(start(k + 1));
        }
        // SAFETY: the broadcasts of step k completed; those of step k + 1 write the
        // other panel pair, and at a root only read its own block.
        let (a_blk, b_blk) = unsafe { (view(a_buf, len), view(b_buf, len)) };
        multiply_add(bs, a_blk, b_blk, &mut c);
    }
    barrier(&g.grid);
    let mine = t0.elapsed().as_secs_f64();
    let secs = upcxx::reduce_all(mine, op_fast_max, &g.grid).wait();

    let wrong = check_samples(g, &c);
    let wrong = upcxx::reduce_all(wrong, op_fast_add, &g.grid).wait();
    let total = upcxx::reduce_all(weighted_sum(g, &c), op_fast_add, &g.grid).wait();
    if g.grid.rank_me() == 0 {
        let want = checksum(n);
        let gflops = 2.0 * (n as f64).powi(3) / secs / 1e9;
        println!(
            "summa: {n}x{n} f64 on a {q}x{q} grid: {secs:.4} s, {gflops:.2} GFLOP/s; \
             weighted sum of C = {total} (serial: {want}); {wrong} of {} sampled entries wrong",
            SAMPLES * q * q
        );
        assert!(
            wrong == 0 && total == want,
            "the product differs from the serial one"
        );
    }
    barrier(&g.grid);
    upcxx::delete_array(my_a);
    upcxx::delete_array(my_b);
    panels.into_iter().flatten().for_each(upcxx::delete_array);
}

/// How many of `SAMPLES` entries of this rank's block differ from a dot product of A's
/// row and B's column computed from the formulas (always including the block's corners).
fn check_samples(g: &Grid, c: &[f64]) -> u64 {
    let (bs, n) = (g.bs, g.q * g.bs);
    let mut wrong = 0;
    for s in 0..SAMPLES {
        let (i, j) = match s {
            0 => (0, 0),
            1 => (bs - 1, bs - 1),
            _ => ((s * 37 + g.row) % bs, (s * 101 + g.col * 7) % bs),
        };
        let (gi, gj) = (g.row * bs + i, g.col * bs + j);
        let want: f64 = (0..n).map(|k| a(gi, k) * b(k, gj)).sum();
        if c[i * bs + j] != want {
            eprintln!(
                "summa: C({gi}, {gj}) = {} on rank {}, expected {want}",
                c[i * bs + j],
                upcxx::rank_me()
            );
            wrong += 1;
        }
    }
    wrong
}

/// The weight of row `i` (`u_i`) and of column `j` (`v_j`) in the checksum: small
/// integers, so that the weighted sums stay exact.
fn u(i: usize) -> f64 {
    (i % 5 + 1) as f64
}

fn v(j: usize) -> f64 {
    (j % 7 + 1) as f64
}

/// `Σ_ij u_i c_ij v_j` over this rank's block of C (global indices).
fn weighted_sum(g: &Grid, c: &[f64]) -> f64 {
    let bs = g.bs;
    c.chunks_exact(bs)
        .enumerate()
        .map(|(i, row)| {
            let dot: f64 = row
                .iter()
                .enumerate()
                .map(|(j, &x)| x * v(g.col * bs + j))
                .sum();
            u(g.row * bs + i) * dot
        })
        .sum()
}

/// `Σ_ij u_i c_ij v_j` of the n×n product C = A·B, as `(uᵀA)·(Bv)`, serially.
fn checksum(n: usize) -> f64 {
    (0..n)
        .map(|k| {
            let ua: f64 = (0..n).map(|i| u(i) * a(i, k)).sum();
            let bv: f64 = (0..n).map(|j| b(k, j) * v(j)).sum();
            ua * bv
        })
        .sum()
}
