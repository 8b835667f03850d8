//! A soak test: a mixed workload (RPCs, `rpc_ff` floods, puts, gets, allocation and
//! free, barriers, reductions) run for a given time, every result checked, with the
//! private resident memory and `shared_segment_used` of every rank compared at start and
//! end.
//!
//! `UPCXX_RANKS=4 cargo run --release --example soak [SECONDS]` (or `SOAK_SECONDS`;
//! default 10; `SOAK_FLOOD`: `rpc_ff`s per rank and round, default 2000). For an hour: `UPCXX_RANKS=4 cargo run --release --example soak 3600`.
//!
//! A round, on every rank:
//!
//! 1. allocates a block of a size that changes from round to round in its segment,
//!    fills it with a pattern of (rank, round), and publishes it in a distributed object;
//! 2. puts its pattern into the right neighbour's landing area, gets the left
//!    neighbour's block back, and checks both against the pattern;
//! 3. sends round-trip RPCs to every rank, whose results it checks, and a flood of
//!    `rpc_ff`s to pseudo-random ranks; a reduction of the counts sent to each rank
//!    checks that every rank received exactly what was sent to it;
//! 4. frees its blocks.
//!
//! Rank 0 decides, by broadcast, whether another round starts, so all ranks stop
//! together. The start figures are taken after a first round (pools and buffers filled),
//! the end figures after the last. The run fails (exit status 1) on any wrong value, a
//! lost or duplicated message, a segment that does not return to its start usage
//! exactly, or private resident memory that grew by more than [`RSS_TOLERANCE`]. Rank 0 prints
//! the figures, and `verified` last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use upcxx::serialization::serde::{Deserialize, Serialize};
use upcxx::{
    barrier, broadcast, new_array_with, op_fast_add, op_fast_max, reduce_all, rget_into, rpc,
    rpc_ff, rput_slice, world, DistObject, GlobalPtr, Rank,
};

/// Resident memory a rank may gain between the start and end figures: allocator
/// caches and lazily grown buffers settle within it; a leak per round would not.
const RSS_TOLERANCE: u64 = 4 << 20;
/// Words each rank puts into its neighbour per round.
const PUT_WORDS: usize = 512;
/// `rpc_ff`s each rank sends per round, unless `SOAK_FLOOD` says otherwise (the fault
/// tests flood harder, to keep the message queues full).
const FLOOD: u64 = 2_000;

/// `rpc_ff`s this rank received.
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// The pattern word `i` of `rank`'s data in `round`.
fn pattern(rank: Rank, round: u64, i: usize) -> u64 {
    (u64::from(rank) << 48) ^ (round << 20) ^ (i as u64).wrapping_mul(0x9e37_79b9)
}

/// Private resident memory of this process, bytes: resident minus shared pages (Linux
/// `/proc/self/statm`, in pages of 4 KiB). Shared pages are the segments and message
/// queues the ranks map, fixed in size at start: touching more of them as queues run
/// deeper is no growth (the segments' use is checked by `shared_segment_used`), and a
/// leak would show in private memory.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages = |i| -> u64 {
        statm
            .split_whitespace()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .expect("resident and shared pages in statm")
    };
    pages(1).saturating_sub(pages(2)) * 4096
}

/// Each rank's block and landing area of one round.
#[derive(Clone, Serialize, Deserialize)]
#[serde(crate = "upcxx::serialization::serde")]
struct Blocks {
    data: GlobalPtr<u64>,
    len: usize,
    landing: GlobalPtr<u64>,
}

/// One round; returns the number of values checked. Panics on a wrong one.
/// `through`: `RECEIVED` at the end of the previous round, updated.
fn round(round: u64, through: &mut u64, flood: u64) -> u64 {
    let (me, n) = (upcxx::rank_me(), upcxx::rank_n());
    let len = 64 + (round as usize * 97 + me as usize * 31) % 4096;
    let data = new_array_with(len, |i| pattern(me, round, i));
    let landing = new_array_with(PUT_WORDS, |_| 0u64);
    let blocks = DistObject::new(Blocks { data, len, landing });
    let mut checked = 0;

    // Puts to the right, gets from the left.
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let theirs = blocks.fetch(right).wait();
    let mine: Vec<u64> = (0..PUT_WORDS).map(|i| pattern(me, round, i)).collect();
    rput_slice(&mine, theirs.landing).wait();
    let from_left = blocks.fetch(left).wait();
    let mut got = vec![0u64; from_left.len];
    rget_into(from_left.data, &mut got).wait();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(
            *v,
            pattern(left, round, i),
            "rank {me}: get from {left}, word {i}"
        );
    }
    checked += got.len() as u64;
    barrier();
    // SAFETY: the landing area is this rank's, written by the left neighbour's put,
    // which completed before the barrier.
    let landed = unsafe { std::slice::from_raw_parts(landing.local(), PUT_WORDS) };
    for (i, v) in landed.iter().enumerate() {
        assert_eq!(
            *v,
            pattern(left, round, i),
            "rank {me}: put from {left}, word {i}"
        );
    }
    checked += PUT_WORDS as u64;

    // Round trips to every rank.
    let answers: Vec<_> = (0..n)
        .map(|r| {
            rpc(
                r,
                |x: u64| x.wrapping_mul(3) ^ u64::from(upcxx::rank_me()),
                (round + u64::from(me),),
            )
        })
        .collect();
    for (r, f) in answers.into_iter().enumerate() {
        let want = (round + u64::from(me)).wrapping_mul(3) ^ r as u64;
        assert_eq!(f.wait(), want, "rank {me}: rpc to {r}");
        checked += 1;
    }

    // A flood of rpc_ff, counted on arrival, checked by a reduction of the counts sent.
    let mut sent = vec![0u64; n as usize];
    let mut x = 0x2545_f491_4f6c_dd1d ^ (round << 8) ^ u64::from(me);
    for _ in 0..flood {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let to = (x % u64::from(n)) as Rank;
        sent[to as usize] += 1;
        rpc_ff(
            to,
            || {
                RECEIVED.fetch_add(1, Ordering::Relaxed);
            },
            (),
        );
    }
    // Every rank takes part in every reduction (they are collective).
    let totals: Vec<u64> = (0..n as usize)
        .map(|r| reduce_all(sent[r], op_fast_add, world()).wait())
        .collect();
    let expected = totals[me as usize];
    let want = *through + expected;
    while RECEIVED.load(Ordering::Relaxed) < want {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    barrier();
    let received = RECEIVED.load(Ordering::Relaxed);
    assert_eq!(
        received, want,
        "rank {me}: rpc_ff received in round {round}"
    );
    *through = received;
    checked += expected;

    drop(blocks);
    barrier();
    upcxx::delete_array(data);
    upcxx::delete_array(landing);
    checked
}

fn main() {
    upcxx::init();
    let seconds: f64 = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("SOAK_SECONDS").ok())
        .map(|s| s.trim().parse().expect("soak: SECONDS must be a number"))
        .unwrap_or(10.0);
    let me = upcxx::rank_me();

    let flood = std::env::var("SOAK_FLOOD")
        .ok()
        .map(|s| s.trim().parse().expect("soak: SOAK_FLOOD must be a number"))
        .unwrap_or(FLOOD);
    let mut through = 0;
    let mut checked = round(0, &mut through, flood);
    barrier();
    let (rss0, seg0) = (resident_bytes(), upcxx::shared_segment_used());
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut rounds = 1;
    loop {
        let more = u8::from(start.elapsed() < limit);
        if broadcast(more, 0, world()).wait() == 0 {
            break;
        }
        checked += round(rounds, &mut through, flood);
        rounds += 1;
    }
    barrier();
    let (rss1, seg1) = (resident_bytes(), upcxx::shared_segment_used());
    let growth = rss1.saturating_sub(rss0);
    let worst = reduce_all(growth, op_fast_max, world()).wait();
    let seg_changed = reduce_all(u64::from(seg1 != seg0), op_fast_add, world()).wait();
    let total = reduce_all(checked, op_fast_add, world()).wait();
    println!(
        "rank {me}: private resident {} KiB -> {} KiB, segment used {seg0} -> {seg1} bytes",
        rss0 >> 10,
        rss1 >> 10
    );
    barrier();
    let ok = worst <= RSS_TOLERANCE && seg_changed == 0;
    if me == 0 {
        println!(
            "soak: {} ranks, {rounds} rounds in {:.1} s, {total} values checked; \
             largest private resident growth {} KiB (tolerance {} KiB), segments returned to their \
             start usage: {}",
            upcxx::rank_n(),
            start.elapsed().as_secs_f64(),
            worst >> 10,
            RSS_TOLERANCE >> 10,
            seg_changed == 0
        );
        if ok {
            println!("verified");
        }
    }
    upcxx::finalize();
    if !ok {
        eprintln!("soak: rank {me}: memory grew or segment usage changed");
        std::process::exit(1);
    }
}
