//! A distributed hash table over RPC (the UPC++ programmer's guide's first example):
//! `UPCXX_RANKS=4 cargo run --release --example dht [keys per rank]`.
//!
//! The table is in `dht/table.rs` (shared with the `app` bench): each rank owns the
//! keys that hash to it, and `insert` and `find` are RPCs to the key's owner with the
//! key and value passed as string views, which the owner reads in the message and
//! copies only into what it stores. Every rank inserts its keys (all in flight at
//! once, then waits for all with `when_all`), then looks every one of them up and checks
//! the value. Rank 0 prints the throughput and, as the last line, `verified` if every
//! rank found every value it inserted (totals from `reduce_all_vec`); any mismatch makes
//! the job fail.

#[path = "dht/table.rs"]
mod table;

use std::time::Instant;

use table::{find_all, insert_all, new_map, pairs};
use upcxx::{op_fast_add, rank_me, rank_n, world};

fn main() {
    upcxx::init();
    let per_rank: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("keys per rank: a number"))
        .unwrap_or(10_000);
    let me = rank_me();
    let map = new_map();
    let pairs = pairs(me, per_rank);

    upcxx::barrier();
    let start = Instant::now();
    insert_all(&map, &pairs);
    let insert_time = start.elapsed();

    let start = Instant::now();
    let values = find_all(&map, &pairs);
    let find_time = start.elapsed();

    let mismatches = pairs
        .iter()
        .zip(&values)
        .filter(|((_, want), got)| got.as_deref() != Some(want.as_str()))
        .count() as u64;
    if mismatches > 0 {
        eprintln!("rank {me}: {mismatches} of {per_rank} keys have a wrong or missing value");
    }
    // Both totals in one reduction, element by element.
    let totals = vec![values.len() as u64, mismatches];
    let totals = upcxx::reduce_all_vec(totals, op_fast_add, world()).wait();
    let (checked, bad) = (totals[0], totals[1]);

    if me == 0 {
        let ops = per_rank * u64::from(rank_n());
        println!(
            "{} ranks, {ops} inserts: {:.0} ops/s; {ops} finds: {:.0} ops/s",
            rank_n(),
            ops as f64 / insert_time.as_secs_f64(),
            ops as f64 / find_time.as_secs_f64()
        );
        if checked != ops || bad != 0 {
            eprintln!("dht: {bad} mismatches in {checked} checked keys (expected {ops})");
            std::process::exit(1);
        }
        println!("verified");
    }
    let failed = mismatches > 0;
    upcxx::barrier();
    drop(map);
    upcxx::finalize();
    if failed {
        std::process::exit(1);
    }
}
