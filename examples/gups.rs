//! HPC Challenge RandomAccess (GUPS): `UPCXX_RANKS=4 cargo run --release --example gups
//! [log2 table words per rank]` (default 14).
//!
//! The table is `rank_n() * 2^log` words of `u64`, `2^log` on each rank, initialized
//! to `T[i] = i`. Every rank applies `4 * 2^log` updates `T[k] ^= ran`, where `ran`
//! runs along the HPCC random stream (`x = (x << 1) ^ (x < 0 ? POLY : 0)`, `POLY = 7`)
//! from the start `HPCC_starts(rank * updates per rank)`, so the ranks together walk
//! one stream. HPCC masks `ran` with a power-of-two table size; so that any number of
//! ranks works, the low `log` bits of `ran` give the offset and the bits above them,
//! modulo `rank_n()`, the owner.
//!
//! The update loop runs twice, on two tables:
//! * **atomics**: each update is a remote `bit_xor` of a [`upcxx::AtomicDomain`] on the
//!   owner's word, all completing into one promise;
//! * **rpc**: each rank files its updates by owner and sends each owner a batch of
//!   `BATCH` values at a time with `rpc_ff`; the owner XORs them into its part of the
//!   table. The owners learn from a `reduce_all` how many batches to expect.
//!
//! Verification is HPCC's: the same updates applied a second time return every word to
//! its start, so each rank then counts the words of its part with `T[i] != i`. Any
//! lost or doubled update leaves such a word; both variants must have none. Rank 0
//! prints giga-updates per second for both and, as the last line, `verified`.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use upcxx::{
    op_fast_add, operation_cx, rank_me, rank_n, rpc_ff, world, AtomicDomain, AtomicOp, DistObject,
    GlobalPtr, Promise, Rank,
};

/// HPCC's polynomial and period of the random stream.
const POLY: u64 = 7;
const PERIOD: i64 = 1_317_624_576_693_539_401;
/// Updates per RPC batch.
const BATCH: usize = 1024;

/// One step of the HPCC stream.
fn step(x: u64) -> u64 {
    (x << 1) ^ if (x as i64) < 0 { POLY } else { 0 }
}

/// The `n`-th value of the stream (HPCC's `HPCC_starts`): by repeated squaring in the
/// field the stream walks, so that each rank starts where the previous one's updates
/// end without generating them.
fn starts(mut n: i64) -> u64 {
    while n < 0 {
        n += PERIOD;
    }
    while n > PERIOD {
        n -= PERIOD;
    }
    if n == 0 {
        return 1;
    }
    let mut m2 = [0u64; 64];
    let mut temp = 1u64;
    for m in m2.iter_mut() {
        *m = temp;
        temp = step(step(temp));
    }
    let mut i = 62;
    while i >= 0 && (n >> i) & 1 == 0 {
        i -= 1;
    }
    let mut ran = 2u64;
    while i > 0 {
        let mut t = 0;
        for (j, m) in m2.iter().enumerate() {
            if (ran >> j) & 1 != 0 {
                t ^= m;
            }
        }
        ran = t;
        i -= 1;
        if (n >> i) & 1 != 0 {
            ran = step(ran);
        }
    }
    ran
}

/// Where an update goes: owner and offset.
fn place(ran: u64, log: u32, n: Rank) -> (Rank, usize) {
    let offset = (ran & ((1 << log) - 1)) as usize;
    (((ran >> log) % u64::from(n)) as Rank, offset)
}

/// Applies this rank's updates with remote atomics.
fn run_atomics(ad: &AtomicDomain<u64>, tables: &[GlobalPtr<u64>], log: u32, updates: u64) {
    let n = rank_n();
    let done = Promise::<()>::new();
    let mut ran = starts(i64::from(rank_me()) * updates as i64);
    for _ in 0..updates {
        ran = step(ran);
        let (owner, offset) = place(ran, log, n);
        ad.bit_xor_with(
            tables[owner as usize].add(offset),
            ran,
            Relaxed,
            operation_cx::as_promise(&done),
        );
    }
    done.finalize().wait();
    upcxx::barrier();
}

/// One rank's part of the RPC variant's table, and the batches it has applied.
struct Part {
    words: RefCell<Vec<u64>>,
    batches: Cell<u64>,
}

/// Applies this rank's updates by batches of RPCs to the owners.
fn run_rpc(table: &DistObject<Part>, log: u32, updates: u64, arrived: &mut u64) {
    let n = rank_n();
    let mut pending: Vec<Vec<u64>> = (0..n).map(|_| Vec::with_capacity(BATCH)).collect();
    let mut sent = vec![0u64; n as usize];
    let send = |to: Rank, batch: Vec<u64>, sent: &mut [u64]| {
        sent[to as usize] += 1;
        rpc_ff(
            to,
            |part: &DistObject<Part>, batch: Vec<u64>, log: u32| {
                let mut words = part.words.borrow_mut();
                for ran in batch {
                    words[(ran & ((1 << log) - 1)) as usize] ^= ran;
                }
                part.batches.set(part.batches.get() + 1);
            },
            (table, batch, log),
        );
    };
    let mut ran = starts(i64::from(rank_me()) * updates as i64);
    for _ in 0..updates {
        ran = step(ran);
        let (owner, _) = place(ran, log, n);
        let bucket = &mut pending[owner as usize];
        bucket.push(ran);
        if bucket.len() == BATCH {
            let full = std::mem::replace(bucket, Vec::with_capacity(BATCH));
            send(owner, full, &mut sent);
        }
    }
    for (owner, bucket) in pending.into_iter().enumerate() {
        if !bucket.is_empty() {
            send(owner as Rank, bucket, &mut sent);
        }
    }
    // The count keeps growing across runs: wait for this run's batches on top of
    // those of the runs before.
    *arrived += sum_all(&sent)[rank_me() as usize];
    while table.batches.get() < *arrived {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    upcxx::barrier();
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

/// The words of this rank's part that do not hold their start value.
fn errors(words: impl Iterator<Item = u64>, log: u32) -> u64 {
    let first = u64::from(rank_me()) << log;
    words.zip(first..).filter(|(w, i)| w != i).count() as u64
}

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
    let local = 1usize << log;
    let updates = 4 * local as u64;
    let total_updates = updates * u64::from(n);
    let first = u64::from(me) << log;
    // The stream's jump-ahead agrees with stepping.
    assert_eq!(starts(1000), (0..1000).fold(1, |x, _| step(x)));

    // Atomics, on a table in the shared segment.
    let mine: GlobalPtr<u64> = upcxx::new_array(local);
    for i in 0..local {
        // SAFETY: this rank's own, fresh array; no other rank accesses it before the
        // barrier below.
        unsafe { mine.add(i).local().write(first + i as u64) };
    }
    // Built before the fetches below: construction makes only internal progress
    // (§13.3 ¶8), which would not answer another rank's fetch.
    let mut ad = AtomicDomain::<u64>::new(&[AtomicOp::BitXor, AtomicOp::Load]);
    let pointers = DistObject::new(mine);
    let tables: Vec<GlobalPtr<u64>> = (0..n).map(|r| pointers.fetch(r).wait()).collect();
    upcxx::barrier();
    let start = Instant::now();
    run_atomics(&ad, &tables, log, updates);
    let atomic_time = start.elapsed().as_secs_f64();
    run_atomics(&ad, &tables, log, updates);
    // Read back through the domain: the words are atomics' words for good (§13.1 ¶2).
    let words = (0..local).map(|i| ad.load(mine.add(i), Relaxed).wait());
    let atomic_errors = errors(words, log);

    // RPC batches, on a table of ordinary memory.
    let table = DistObject::new(Part {
        words: RefCell::new((first..first + local as u64).collect()),
        batches: Cell::new(0),
    });
    upcxx::barrier();
    let mut arrived = 0;
    let start = Instant::now();
    run_rpc(&table, log, updates, &mut arrived);
    let rpc_time = start.elapsed().as_secs_f64();
    run_rpc(&table, log, updates, &mut arrived);
    let rpc_errors = errors(table.words.borrow().iter().copied(), log);

    let atomic_errors = upcxx::reduce_all(atomic_errors, op_fast_add, world()).wait();
    let rpc_errors = upcxx::reduce_all(rpc_errors, op_fast_add, world()).wait();
    if me == 0 {
        let words = local as u64 * u64::from(n);
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
    upcxx::barrier();
    ad.destroy(upcxx::EntryBarrier::User);
    drop(table);
    drop(pointers);
    upcxx::delete_array(mine);
    upcxx::finalize();
}
