//! A distributed histogram: `UPCXX_RANKS=4 cargo run --release --example histogram
//! [samples per rank]`.
//!
//! The histogram is in `histogram/counters.rs` (shared with the `app` bench): counters
//! in a distributed object, each rank owning the buckets `b` with `b % rank_n() ==
//! rank_me()`, bumped by `rpc_ff` from every rank that draws a sample of them. Every
//! rank draws its samples in one pass; the counts are then checked against a
//! `reduce_all` of every rank's own tally, bucket by bucket and in total; rank 0 prints
//! the throughput and, as the last line, `verified`.

#[path = "histogram/counters.rs"]
mod counters;

use std::time::Instant;

use counters::{Histogram, BUCKETS};
use upcxx::{op_fast_add, rank_me, rank_n, world};

fn main() {
    upcxx::init();
    let samples: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("samples per rank: a number"))
        .unwrap_or(100_000);
    let (me, n) = (rank_me(), rank_n());
    let mut histogram = Histogram::new();
    let start = Instant::now();
    histogram.pass(samples);
    let elapsed = start.elapsed();

    let check = histogram.check();
    let total = upcxx::reduce_all(check.counted, op_fast_add, world()).wait();
    let wrong = upcxx::reduce_all(check.wrong, op_fast_add, world()).wait();
    if me == 0 {
        let all = samples * u64::from(n);
        let lo = check.reference.iter().min().copied().unwrap_or(0);
        let hi = check.reference.iter().max().copied().unwrap_or(0);
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
    drop(histogram);
    upcxx::finalize();
}
