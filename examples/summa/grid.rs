//! SUMMA on a process grid, shared by `summa.rs` and the `app` bench (which includes
//! this file with `#[path]`, so that it measures the example's own code).
//!
//! The ranks of a grid team form `pr` rows of `pc` columns (grid rank `r` is at row
//! `r / pc`, column `r % pc`). All blocks are b×b. C is `pr·b × pc·b` and rank (row,
//! col) owns block (row, col) of it; A is `pr·b × s·b` and B is `s·b × pc·b`, with `s =
//! lcm(pr, pc)` steps, dealt block-cyclically: rank (row, col) owns the blocks A(row, k)
//! with `k % pc == col` and B(k, col) with `k % pr == row`. On a square grid (pr = pc =
//! q) that is one block of each, and the matrices are square. From the grid team,
//! [`Team::split`] makes a row team (ordered by column) and a column team (ordered by
//! row), so the owner of A(row, k) is rank `k % pc` of its row team and the owner of
//! B(k, col) rank `k % pr` of its column team.
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
//! f64. The check ([`Summa::check`]) is exact too: each rank compares a sample of its
//! entries with dot products computed from the formulas, and the grid compares a
//! weighted sum of every entry of C, `Σ_ij u_i c_ij v_j` (a `reduce_all`), with
//! `(uᵀA)·(Bv)`, computed serially in O(n²).
//!
//! A rank's blocks of A and B and the four panels take `(s/pc + s/pr + 4)·b²·8` bytes
//! of its shared segment.

use upcxx::coll::{barrier, broadcast_global};
use upcxx::{op_fast_add, Future, GlobalPtr, Rank, Team};

/// Entry (i, j) of A.
pub(crate) fn a(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 17) as f64 - 8.0
}

/// Entry (i, j) of B.
pub(crate) fn b(i: usize, j: usize) -> f64 {
    ((i * 5 + j * 11) % 13) as f64 - 6.0
}

/// Entries of C each rank checks against a dot product.
pub(crate) const SAMPLES: usize = 64;

fn gcd(x: usize, y: usize) -> usize {
    if y == 0 {
        x
    } else {
        gcd(y, x % y)
    }
}

/// This rank's place in the grid, its blocks and its block of C.
pub(crate) struct Summa<'g> {
    pr: usize,
    pc: usize,
    row: usize,
    col: usize,
    /// Block size.
    bs: usize,
    /// Steps: lcm(pr, pc).
    steps: usize,
    grid: &'g Team,
    row_team: Team,
    col_team: Team,
    /// A(row, k) for k = col, col + pc, …
    my_a: Vec<GlobalPtr<f64>>,
    /// B(k, col) for k = row, row + pr, …
    my_b: Vec<GlobalPtr<f64>>,
    /// Two pairs of panels (A's, B's), for even and odd steps.
    panels: [[GlobalPtr<f64>; 2]; 2],
    c: Vec<f64>,
}

/// What [`Summa::check`] found, over the whole grid.
pub(crate) struct Check {
    /// Sampled entries of C that differ from their dot product.
    pub(crate) wrong: u64,
    /// Entries sampled.
    pub(crate) sampled: u64,
    /// `Σ_ij u_i c_ij v_j` of the parallel product.
    pub(crate) total: f64,
    /// The same, computed serially from the formulas.
    pub(crate) want: f64,
}

impl Check {
    pub(crate) fn ok(&self) -> bool {
        self.wrong == 0 && self.total == self.want
    }
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
pub(crate) fn multiply_add(bs: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for (c_row, a_row) in c.chunks_exact_mut(bs).zip(a.chunks_exact(bs)) {
        for (&aik, b_row) in a_row.iter().zip(b.chunks_exact(bs)) {
            for (cij, &bkj) in c_row.iter_mut().zip(b_row) {
                *cij += aik * bkj;
            }
        }
    }
}

/// Entry (i, j) of A·B where the inner dimension is `k_len`: from the formulas.
pub(crate) fn product_entry(i: usize, j: usize, k_len: usize) -> f64 {
    (0..k_len).map(|k| a(i, k) * b(k, j)).sum()
}

/// The weight of row `i` (`u_i`) and of column `j` (`v_j`) in the checksum: small
/// integers, so that the weighted sums stay exact.
fn u(i: usize) -> f64 {
    (i % 5 + 1) as f64
}

fn v(j: usize) -> f64 {
    (j % 7 + 1) as f64
}

impl<'g> Summa<'g> {
    /// This rank's blocks, on the `pr`×`pc` grid of `grid`'s ranks, with blocks of
    /// `bs`×`bs`. Collective over `grid`.
    pub(crate) fn new(grid: &'g Team, pr: usize, pc: usize, bs: usize) -> Summa<'g> {
        let me = grid.rank_me() as usize;
        assert_eq!(
            grid.rank_n() as usize,
            pr * pc,
            "summa: a {pr}x{pc} grid needs {} ranks",
            pr * pc
        );
        assert!(bs > 0, "summa: empty blocks");
        let (row, col) = (me / pc, me % pc);
        let steps = pr / gcd(pr, pc) * pc;
        let row_team = grid.split(row as i32, col as i32);
        let col_team = grid.split(col as i32, row as i32);
        let my_a = (col..steps)
            .step_by(pc)
            .map(|k| block(bs, row * bs, k * bs, a))
            .collect();
        let my_b = (row..steps)
            .step_by(pr)
            .map(|k| block(bs, k * bs, col * bs, b))
            .collect();
        let panels =
            std::array::from_fn(|_| std::array::from_fn(|_| upcxx::new_array::<f64>(bs * bs)));
        barrier(grid);
        Summa {
            pr,
            pc,
            row,
            col,
            bs,
            steps,
            grid,
            row_team,
            col_team,
            my_a,
            my_b,
            panels,
            c: vec![0.0; bs * bs],
        }
    }

    /// The rows and columns of C, and the inner dimension.
    pub(crate) fn dims(&self) -> (usize, usize, usize) {
        (self.pr * self.bs, self.pc * self.bs, self.steps * self.bs)
    }

    /// Floating-point operations of one product (a multiply and an add per term).
    pub(crate) fn flops(&self) -> f64 {
        let (m, n, k) = self.dims();
        2.0 * m as f64 * n as f64 * k as f64
    }

    /// Computes this rank's block of C = A·B afresh, then a barrier of the grid.
    /// Collective over the grid.
    pub(crate) fn multiply(&mut self) {
        let len = self.bs * self.bs;
        let mut c = std::mem::take(&mut self.c);
        c.fill(0.0);
        let this = &*self;
        // The broadcasts of step k into panel pair k % 2: at a root its own block.
        let start = |k: usize| -> (Future<()>, Future<()>, [GlobalPtr<f64>; 2]) {
            let a_buf = if k % this.pc == this.col {
                this.my_a[k / this.pc]
            } else {
                this.panels[k % 2][0]
            };
            let b_buf = if k % this.pr == this.row {
                this.my_b[k / this.pr]
            } else {
                this.panels[k % 2][1]
            };
            let fa = broadcast_global(a_buf, len, (k % this.pc) as Rank, &this.row_team);
            let fb = broadcast_global(b_buf, len, (k % this.pr) as Rank, &this.col_team);
            (fa, fb, [a_buf, b_buf])
        };
        let mut pending = Some(start(0));
        for k in 0..self.steps {
            let (fa, fb, [a_buf, b_buf]) = pending.take().expect("started in the step before");
            fa.wait();
            fb.wait();
            // Panel pair (k + 1) % 2 was last read in step k - 1, which has finished.
            if k + 1 < self.steps {
                pending = Some(start(k + 1));
            }
            // SAFETY: the broadcasts of step k completed; those of step k + 1 write the
            // other panel pair, and at a root only read its own block.
            let (a_blk, b_blk) = unsafe { (view(a_buf, len), view(b_buf, len)) };
            multiply_add(self.bs, a_blk, b_blk, &mut c);
        }
        self.c = c;
        // Nobody starts the next product's broadcasts into a panel another rank reads.
        barrier(self.grid);
    }

    /// Checks the last product: sampled entries against dot products, and the weighted
    /// sum of all of C against the serial one; printing each wrong entry. Collective
    /// over the grid.
    pub(crate) fn check(&self) -> Check {
        let wrong = self.check_samples();
        let wrong = upcxx::reduce_all(wrong, op_fast_add, self.grid).wait();
        let total = upcxx::reduce_all(self.weighted_sum(), op_fast_add, self.grid).wait();
        Check {
            wrong,
            sampled: (SAMPLES * self.pr * self.pc) as u64,
            total,
            want: self.checksum(),
        }
    }

    /// How many of [`SAMPLES`] entries of this rank's block differ from a dot product
    /// of A's row and B's column computed from the formulas (always including the
    /// block's corners).
    fn check_samples(&self) -> u64 {
        let (bs, (_, _, k_len)) = (self.bs, self.dims());
        let mut wrong = 0;
        for s in 0..SAMPLES {
            let (i, j) = match s {
                0 => (0, 0),
                1 => (bs - 1, bs - 1),
                _ => ((s * 37 + self.row) % bs, (s * 101 + self.col * 7) % bs),
            };
            let (gi, gj) = (self.row * bs + i, self.col * bs + j);
            let want = product_entry(gi, gj, k_len);
            if self.c[i * bs + j] != want {
                eprintln!(
                    "summa: C({gi}, {gj}) = {} on rank {}, expected {want}",
                    self.c[i * bs + j],
                    upcxx::rank_me()
                );
                wrong += 1;
            }
        }
        wrong
    }

    /// `Σ_ij u_i c_ij v_j` over this rank's block of C (global indices).
    fn weighted_sum(&self) -> f64 {
        let bs = self.bs;
        self.c
            .chunks_exact(bs)
            .enumerate()
            .map(|(i, row)| {
                let dot: f64 = row
                    .iter()
                    .enumerate()
                    .map(|(j, &x)| x * v(self.col * bs + j))
                    .sum();
                u(self.row * bs + i) * dot
            })
            .sum()
    }

    /// `Σ_ij u_i c_ij v_j` of the whole product C = A·B, as `(uᵀA)·(Bv)`, serially.
    fn checksum(&self) -> f64 {
        let (m, n, k_len) = self.dims();
        (0..k_len)
            .map(|k| {
                let ua: f64 = (0..m).map(|i| u(i) * a(i, k)).sum();
                let bv: f64 = (0..n).map(|j| b(k, j) * v(j)).sum();
                ua * bv
            })
            .sum()
    }

    /// Frees this rank's blocks and destroys the row and column teams. Collective over
    /// the grid.
    pub(crate) fn free(self) {
        barrier(self.grid);
        self.my_a
            .into_iter()
            .chain(self.my_b)
            .chain(self.panels.into_iter().flatten())
            .for_each(upcxx::delete_array);
        self.row_team.destroy(upcxx::EntryBarrier::User);
        self.col_team.destroy(upcxx::EntryBarrier::User);
    }
}
