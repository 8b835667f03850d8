//! The rod of `stencil.rs` and its time steps, shared with the `app` bench (which
//! includes this file with `#[path]`, so that it measures the example's own code).
//!
//! The rod of `ranks × LOCAL` points is cut into one block per rank. Each rank keeps its
//! block, plus a ghost cell at either end, in its shared segment, twice: the current and
//! the next time step. A step updates the block from the current buffer into the next
//! and then writes the block's two edge values into the neighbours' ghost cells of
//! *their* next buffer with `rput`. Each put carries a `remote_cx::as_rpc` completion
//! that counts the arrival at the neighbour once the value is there (UPC++ spec §8.2.1:
//! the write happens before the RPC), so a rank starts step `t + 1` as soon as both of
//! its ghosts for it have landed: no barrier per step.
//!
//! Why two buffers are enough: a rank can run at most one step ahead of a neighbour (it
//! needs the neighbour's edge value of the previous step), so when the left neighbour
//! writes our next buffer's ghost during its step `t`, we are reading only the current
//! buffer, and the value it overwrites there was consumed a step ago.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use upcxx::{operation_cx, remote_cx, Future, GlobalPtr, ProgressLevel};

/// Points per rank.
pub(crate) const LOCAL: usize = 4096;
/// Diffusion number (stable for ≤ 0.5).
const ALPHA: f64 = 0.25;
/// Fixed temperatures beyond the rod's ends (Dirichlet boundaries).
const LEFT_END: f64 = 100.0;
const RIGHT_END: f64 = -20.0;

/// Ghost values received from the left and the right neighbour, counted by the
/// `as_rpc` completions of their puts.
static FROM_LEFT: AtomicU64 = AtomicU64::new(0);
static FROM_RIGHT: AtomicU64 = AtomicU64::new(0);

/// This rank's two buffers, for neighbours to ask for (one rod per process).
static BUFFERS: OnceLock<[GlobalPtr<f64>; 2]> = OnceLock::new();

/// This rank's block of the rod, and where its neighbours keep theirs.
pub(crate) struct Rod {
    bufs: [GlobalPtr<f64>; 2],
    left: Option<[GlobalPtr<f64>; 2]>,
    right: Option<[GlobalPtr<f64>; 2]>,
    /// On rank 0, every rank's buffers, which [`Rod::verify`] reads (fetched up front,
    /// so that verifying needs no other rank's progress).
    all: Vec<[GlobalPtr<f64>; 2]>,
    /// Steps taken so far.
    t: usize,
}

/// The remote completion of a ghost-cell put: runs at the receiver once the value is
/// in place.
fn ghost_arrived(from_left: bool) {
    let counter = if from_left { &FROM_LEFT } else { &FROM_RIGHT };
    counter.fetch_add(1, Ordering::Release);
}

/// The temperature of point `i` of the rod at the start: rough, so that every halo
/// exchange matters.
fn initial(i: usize) -> f64 {
    ((i * 37) % 101) as f64 - 50.0
}

/// Answers a neighbour's request for this rank's buffers.
fn buffers() -> [GlobalPtr<f64>; 2] {
    *BUFFERS.get().expect("set before the barrier")
}

/// One Jacobi step: `next[i]` for the points `1..=n` of `cur` (which has ghost cells at
/// `0` and `n + 1`); `next` holds only the `n` points.
fn step(cur: &[f64], next: &mut [f64]) {
    for (i, out) in next.iter_mut().enumerate() {
        let (l, c, r) = (cur[i], cur[i + 1], cur[i + 2]);
        *out = c + ALPHA * (l - 2.0 * c + r);
    }
}

/// Makes user-level progress (running the arrival RPCs) until `counter` reaches `n`.
fn wait_for(counter: &AtomicU64, n: usize) {
    while counter.load(Ordering::Acquire) < n as u64 {
        upcxx::progress(ProgressLevel::User);
    }
}

impl Rod {
    /// This rank's block at time 0, its neighbours' buffers known. Collective; once per
    /// process.
    pub(crate) fn new() -> Rod {
        let me = upcxx::rank_me();
        let ranks = upcxx::rank_n();
        let bufs: [GlobalPtr<f64>; 2] = [upcxx::new_array(LOCAL + 2), upcxx::new_array(LOCAL + 2)];
        // SAFETY: this rank's own fresh array; nobody else knows of it yet.
        let first = unsafe { std::slice::from_raw_parts_mut(bufs[0].local().add(1), LOCAL) };
        for (i, x) in first.iter_mut().enumerate() {
            *x = initial(me as usize * LOCAL + i);
        }
        // The outer ghost cells of the rod's end blocks hold the boundary values for
        // good; the others start with the neighbours' first values (which every rank
        // can compute), and receive later steps' values by `rput`.
        let left_ghost = if me == 0 {
            LEFT_END
        } else {
            initial(me as usize * LOCAL - 1)
        };
        let right_ghost = if me + 1 == ranks {
            RIGHT_END
        } else {
            initial((me as usize + 1) * LOCAL)
        };
        for b in bufs {
            // SAFETY: as above.
            unsafe {
                b.local().write(left_ghost);
                b.local().add(LOCAL + 1).write(right_ghost);
            }
        }
        BUFFERS.set(bufs).expect("one rod per process");
        upcxx::barrier();
        let left = (me > 0).then(|| upcxx::rpc(me - 1, buffers, ()).wait());
        let right = (me + 1 < ranks).then(|| upcxx::rpc(me + 1, buffers, ()).wait());
        let all = if me == 0 {
            (0..ranks)
                .map(|r| upcxx::rpc(r, buffers, ()).wait())
                .collect()
        } else {
            Vec::new()
        };
        upcxx::barrier();
        Rod {
            bufs,
            left,
            right,
            all,
            t: 0,
        }
    }

    /// Points updated per step over the whole job.
    pub(crate) fn points() -> usize {
        upcxx::rank_n() as usize * LOCAL
    }

    /// Runs `n` more time steps of this rank's block.
    pub(crate) fn steps(&mut self, n: usize) {
        for t in self.t..self.t + n {
            self.step(t);
        }
        self.t += n;
    }

    fn step(&self, t: usize) {
        // The ghosts of the current buffer come from the neighbours' step t - 1.
        if self.left.is_some() {
            wait_for(&FROM_LEFT, t);
        }
        if self.right.is_some() {
            wait_for(&FROM_RIGHT, t);
        }
        let (cur, next) = (self.bufs[t % 2], self.bufs[(t + 1) % 2]);
        // SAFETY: nobody writes the current buffer during this step (its ghosts arrived
        // above, and the neighbours' next writes go to the other buffer), and nobody
        // else touches the points of the next buffer; the neighbours may be writing
        // its ghost cells, which `next` leaves out.
        let (cur, next) = unsafe {
            (
                std::slice::from_raw_parts(cur.local(), LOCAL + 2),
                std::slice::from_raw_parts_mut(next.local().add(1), LOCAL),
            )
        };
        step(cur, next);
        let mut puts: Vec<Future<()>> = Vec::with_capacity(2);
        if let Some(l) = self.left {
            // Our first point is the left neighbour's right ghost.
            let ghost = l[(t + 1) % 2].add(LOCAL + 1);
            puts.push(upcxx::rput_with(
                next[0],
                ghost,
                remote_cx::as_rpc(ghost_arrived, (false,)) | operation_cx::as_future(),
            ));
        }
        if let Some(r) = self.right {
            let ghost = r[(t + 1) % 2];
            puts.push(upcxx::rput_with(
                next[LOCAL - 1],
                ghost,
                remote_cx::as_rpc(ghost_arrived, (true,)) | operation_cx::as_future(),
            ));
        }
        upcxx::when_all(puts).wait();
    }

    /// Rank 0: gets every rank's block and compares the rod with the same steps run
    /// serially on the whole rod; panics if they differ. Returns the serial rod's
    /// temperatures at its quarter points. Every rank must have taken the same steps and
    /// none may step meanwhile; the other ranks need not make progress.
    pub(crate) fn verify(&self) -> [f64; 3] {
        assert_eq!(upcxx::rank_me(), 0, "stencil: only rank 0 verifies");
        let ranks = upcxx::rank_n() as usize;
        let n = ranks * LOCAL;
        let mut parallel = vec![0.0; n];
        for (theirs, block) in self.all.iter().zip(parallel.chunks_mut(LOCAL)) {
            upcxx::rget_into(theirs[self.t % 2].add(1), block).wait();
        }
        let mut cur: Vec<f64> = (0..n + 2).map(|i| initial(i.saturating_sub(1))).collect();
        cur[0] = LEFT_END;
        cur[n + 1] = RIGHT_END;
        let mut next = cur.clone();
        for _ in 0..self.t {
            step(&cur, &mut next[1..=n]);
            std::mem::swap(&mut cur, &mut next);
        }
        let worst = parallel
            .iter()
            .zip(&cur[1..=n])
            .map(|(p, s)| (p - s).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-12,
            "stencil: the parallel result differs from the serial one by {worst}"
        );
        [cur[n / 4], cur[n / 2], cur[3 * n / 4]]
    }

    /// Frees this rank's buffers. Collective.
    pub(crate) fn free(self) {
        upcxx::barrier();
        for b in self.bufs {
            upcxx::delete_array(b);
        }
    }
}
