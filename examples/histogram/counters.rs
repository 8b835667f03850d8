//! The distributed histogram of `histogram.rs`, shared with the `app` bench (which
//! includes this file with `#[path]`, so that it measures the example's own code).
//!
//! The counters live in a distributed object: each rank owns the buckets `b` with
//! `b % rank_n() == rank_me()`. A pass draws pseudo-random samples on every rank,
//! hashes each to a bucket and bumps the bucket's counter on its owner with `rpc_ff`,
//! passing the `&DistObject` of the table, which the owner receives as its own member
//! (an update that arrives before its owner built the table waits there until it
//! does). The owners learn how many updates to expect from a `reduce_all` of what every
//! rank sent to each, and make progress until all have arrived. [`Histogram::check`]
//! compares the counts with a `reduce_all` of every rank's own tally, bucket by bucket.

use std::cell::Cell;

use upcxx::{op_fast_add, rank_me, rank_n, rpc_ff, world, DistObject, Rank};

/// The number of buckets of the whole histogram.
pub(crate) const BUCKETS: usize = 1000;

/// One rank's buckets (`b / rank_n()` is the index of bucket `b` at its owner) and the
/// number of updates it received.
struct Counters {
    buckets: Vec<Cell<u64>>,
    received: Cell<u64>,
}

fn owner(bucket: u32) -> Rank {
    bucket % rank_n()
}

/// The bucket of a sample: a multiplicative hash, the same in every process.
pub(crate) fn bucket_of(sample: u64) -> u32 {
    ((sample.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % BUCKETS as u64) as u32
}

/// A small deterministic generator (xorshift64*), seeded per rank.
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator of rank `rank`'s samples.
    pub(crate) fn for_rank(rank: Rank) -> Rng {
        Rng(0x2545_f491 ^ (u64::from(rank) + 1).wrapping_mul(0x9e37_79b9))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Element-wise sum of `local` over every rank.
fn sum_all(local: &[u64]) -> Vec<u64> {
    upcxx::reduce_all_vec(local.to_vec(), op_fast_add, world()).wait()
}

/// This rank's part of the histogram, its sample stream and what it drew so far.
pub(crate) struct Histogram {
    table: DistObject<Counters>,
    rng: Rng,
    /// The samples this rank drew, by bucket, over all passes.
    tally: Vec<u64>,
    /// The updates sent to this rank over all passes.
    expected: u64,
}

/// What [`Histogram::check`] found.
pub(crate) struct Check {
    /// The updates this rank's buckets counted.
    pub(crate) counted: u64,
    /// This rank's buckets whose count differs from the reference.
    pub(crate) wrong: u64,
    /// Every bucket's count, from every rank's tally.
    pub(crate) reference: Vec<u64>,
}

impl Histogram {
    /// This rank's part, every counter zero. Collective.
    pub(crate) fn new() -> Histogram {
        let me = rank_me();
        let owned = (0..BUCKETS as u32).filter(|&b| owner(b) == me).count();
        let table = DistObject::new(Counters {
            buckets: (0..owned).map(|_| Cell::new(0)).collect(),
            received: Cell::new(0),
        });
        Histogram {
            table,
            rng: Rng::for_rank(me),
            tally: vec![0; BUCKETS],
            expected: 0,
        }
    }

    /// Draws `samples` samples and counts each at its bucket's owner, waits for the
    /// updates sent to this rank, then a barrier. Collective.
    pub(crate) fn pass(&mut self, samples: u64) {
        let me = rank_me();
        let mut sent = vec![0u64; rank_n() as usize];
        for _ in 0..samples {
            let bucket = bucket_of(self.rng.next());
            self.tally[bucket as usize] += 1;
            sent[owner(bucket) as usize] += 1;
            rpc_ff(
                owner(bucket),
                |t: &DistObject<Counters>, bucket: u32| {
                    let counter = &t.buckets[(bucket / rank_n()) as usize];
                    counter.set(counter.get() + 1);
                    t.received.set(t.received.get() + 1);
                },
                (&self.table, bucket),
            );
        }
        // The count keeps growing across passes: wait for this pass's updates on top
        // of those of the passes before.
        self.expected += sum_all(&sent)[me as usize];
        while self.table.received.get() < self.expected {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        upcxx::barrier();
    }

    /// Compares this rank's buckets with the sum of every rank's tally, printing each
    /// wrong one. Collective; no pass may run meanwhile.
    pub(crate) fn check(&self) -> Check {
        let (me, n) = (rank_me(), rank_n());
        let reference = sum_all(&self.tally);
        let mut wrong = 0u64;
        let mut counted = 0u64;
        for b in (0..BUCKETS as u32).filter(|&b| owner(b) == me) {
            let got = self.table.buckets[(b / n) as usize].get();
            counted += got;
            if got != reference[b as usize] {
                eprintln!(
                    "rank {me}: bucket {b} counted {got}, expected {}",
                    reference[b as usize]
                );
                wrong += 1;
            }
        }
        Check {
            counted,
            wrong,
            reference,
        }
    }
}
