//! A distributed histogram: `UPCXX_RANKS=4 cargo run --release --example histogram
//! [samples per rank]`.
//!
//! The counters live in a distributed object: each rank owns the buckets `b` with
//! `b % rank_n() == rank_me()`. Every rank draws pseudo-random samples, hashes each to
//! a bucket and bumps the bucket's counter on its owner with `rpc_ff`, passing the
//! `&DistObject` of the table, which the owner receives as its own member (an update
//! that arrives before its owner built the table waits there until it does). The
//! owners learn how many updates to expect from a `reduce_all` of what every rank sent
//! to each, and make progress until all have arrived. The counts are then checked
//! against a `reduce_all` of every rank's own tally, bucket by bucket and in total;
//! rank 0 prints the throughput and, as the last line, `verified`.

use std::cell::Cell;
use std::time::Instant;

use upcxx::{op_fast_add, rank_me, rank_n, rpc_ff, world, DistObject, Rank};

/// The number of buckets of the whole histogram.
const BUCKETS: usize = 1000;

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
fn bucket_of(sample: u64) -> u32 {
    ((sample.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % BUCKETS as u64) as u32
}

/// A small deterministic generator (xorshift64*), seeded per rank.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Element-wise sum of `local` over every rank.
fn sum_all(local: &[u64]) -> Vec<u64> {
    let mut total = vec![0u64; local.len()];
    // SAFETY: both buffers live, unaliased, until the reduction completes, which
    // `wait` returns after.
    unsafe {
        upcxx::reduce_all_buffer(
            local.as_ptr(),
            total.as_mut_ptr(),
            local.len(),
            op_fast_add,
            world(),
        )
    }
    .wait();
    total
}

fn main() {
    upcxx::init();
    let samples: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("samples per rank: a number"))
        .unwrap_or(100_000);
    let (me, n) = (rank_me(), rank_n());
    let owned = (0..BUCKETS as u32).filter(|&b| owner(b) == me).count();
    let table = DistObject::new(Counters {
        buckets: (0..owned).map(|_| Cell::new(0)).collect(),
        received: Cell::new(0),
    });

    let mut rng = Rng(0x2545_f491 ^ (u64::from(me) + 1).wrapping_mul(0x9e37_79b9));
    let mut tally = vec![0u64; BUCKETS];
    let mut sent = vec![0u64; n as usize];
    let start = Instant::now();
    for _ in 0..samples {
        let bucket = bucket_of(rng.next());
        tally[bucket as usize] += 1;
        sent[owner(bucket) as usize] += 1;
        rpc_ff(
            owner(bucket),
            |t: &DistObject<Counters>, bucket: u32| {
                let counter = &t.buckets[(bucket / rank_n()) as usize];
                counter.set(counter.get() + 1);
                t.received.set(t.received.get() + 1);
            },
            (&table, bucket),
        );
    }
    let expected = sum_all(&sent)[me as usize];
    while table.received.get() < expected {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    upcxx::barrier();
    let elapsed = start.elapsed();

    let reference = sum_all(&tally);
    let mut wrong = 0u64;
    let mut counted = 0u64;
    for b in (0..BUCKETS as u32).filter(|&b| owner(b) == me) {
        let got = table.buckets[(b / n) as usize].get();
        counted += got;
        if got != reference[b as usize] {
            eprintln!(
                "rank {me}: bucket {b} counted {got}, expected {}",
                reference[b as usize]
            );
            wrong += 1;
        }
    }
    let total = upcxx::reduce_all(counted, op_fast_add, world()).wait();
    let wrong = upcxx::reduce_all(wrong, op_fast_add, world()).wait();
    if me == 0 {
        let all = samples * u64::from(n);
        let lo = reference.iter().min().copied().unwrap_or(0);
        let hi = reference.iter().max().copied().unwrap_or(0);
        println!(
            "{n} ranks, {all} samples into {BUCKETS} buckets ({lo} to {hi} each): {:.0} updates/s",
            all as f64 / elapsed.as_secs_f64()
        );
        if total != all || wrong != 0 {
            eprintln!("histogram: {total} counted of {all}, {wrong} wrong buckets");
            std::process::exit(1);
        }
        println!("verified");
    }
    upcxx::barrier();
    drop(table);
    upcxx::finalize();
}
