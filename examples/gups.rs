//! HPC Challenge RandomAccess (GUPS): `UPCXX_RANKS=4 cargo run --release --example gups
//! [log2 table words per rank]` (default 14).
//!
//! The tables and their update passes are in `gups/updates.rs` (shared with the `app`
//! bench): a table of `rank_n() * 2^log` words, `T[i] = i` at the start, and a pass of
//! `4 * 2^log` updates `T[k] ^= ran` per rank along the HPCC random stream, applied
//! either by remote atomic XORs or by batches of `rpc_ff` to the owners.
//!
//! Each variant runs two passes: the first is timed, the second returns every word to
//! its start (HPCC's verification), after which each rank counts the words of its part
//! with `T[i] != i`. Any lost or doubled update leaves such a word; both variants must
//! have none. Rank 0 prints giga-updates per second for both and, as the last line,
//! `verified`.

#[path = "gups/updates.rs"]
mod updates;

use std::time::Instant;

use upcxx::{op_fast_add, rank_me, rank_n, world};
use updates::{starts, step, updates_per_rank, Atomics, Batches};

fn main() {
    upcxx::init();
    let log: u32 = std::env::args()
        .nth(1)
        .map(|s| {
            s.parse()
                .expect("log2 of the table words per rank: a number")
        })
        .unwrap_or(14);
    assert!(
        (1..=30).contains(&log),
        "gups: log2 table words per rank must be 1 to 30"
    );
    let (me, n) = (rank_me(), rank_n());
    let total_updates = updates_per_rank(log) * u64::from(n);
    // The stream's jump-ahead agrees with stepping.
    assert_eq!(starts(1000), (0..1000).fold(1, |x, _| step(x)));

    // Atomics, on a table in the shared segment.
    let atomics = Atomics::new(log);
    let start = Instant::now();
    atomics.pass();
    let atomic_time = start.elapsed().as_secs_f64();
    atomics.pass();
    let atomic_errors = atomics.errors();

    // RPC batches, on a table of ordinary memory.
    let mut batches = Batches::new(log);
    let start = Instant::now();
    batches.pass();
    let rpc_time = start.elapsed().as_secs_f64();
    batches.pass();
    let rpc_errors = batches.errors();

    let atomic_errors = upcxx::reduce_all(atomic_errors, op_fast_add, world()).wait();
    let rpc_errors = upcxx::reduce_all(rpc_errors, op_fast_add, world()).wait();
    if me == 0 {
        let words = (1u64 << log) * u64::from(n);
        println!("{n} ranks, table of {words} words (2^{log} per rank), {total_updates} updates");
        for (name, time, errs) in [
            ("atomics", atomic_time, atomic_errors),
            ("rpc", rpc_time, rpc_errors),
        ] {
            println!(
                "{name:>8}: {:.6} GUP/s ({time:.3} s), {errs} errors after the second pass",
                total_updates as f64 / time / 1e9
            );
        }
        if atomic_errors != 0 || rpc_errors != 0 {
            eprintln!("gups: {atomic_errors} words wrong with atomics, {rpc_errors} with rpc");
            std::process::exit(1);
        }
        println!("verified");
    }
    atomics.free();
    drop(batches);
    upcxx::finalize();
}
