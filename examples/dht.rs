//! A distributed hash table over RPC (the UPC++ programmer's guide's first example):
//! `UPCXX_RANKS=4 cargo run --release --example dht [keys per rank]`.
//!
//! Each rank owns the part of the table whose keys hash to it, in a `HashMap` kept in a
//! distributed object, as the guide keeps its `dist_object<unordered_map>`. `insert`
//! and `find` are RPCs to the key's owner that take the `&DistObject` of the map, which
//! the owner receives as its own member. Every rank inserts its keys (all in flight at
//! once, then waits for all with `when_all`), then looks every one of them up and checks
//! the value. Rank 0 prints the throughput and, as the last line, `verified` if every
//! rank found every value it inserted (totals from `reduce_all`); any mismatch makes
//! the job fail.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use upcxx::{op_fast_add, rank_me, rank_n, rpc, when_all, world, DistObject, Future, Rank};

/// This rank's part of the table. RPCs mutate it, so it sits in a `RefCell`: a
/// distributed object gives shared access only.
type Map = DistObject<RefCell<HashMap<String, String>>>;

/// The rank that owns `key`: FNV-1a, the same in every process (unlike `RandomState`).
fn owner(key: &str) -> Rank {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % u64::from(rank_n())) as Rank
}

/// Stores `value` under `key` on its owner; ready once stored.
fn insert(map: &Map, key: String, value: String) -> Future<()> {
    rpc(
        owner(&key),
        |map: &Map, key: String, value: String| {
            map.borrow_mut().insert(key, value);
        },
        (map, key, value),
    )
}

/// Looks `key` up on its owner.
fn find(map: &Map, key: String) -> Future<Option<String>> {
    rpc(
        owner(&key),
        |map: &Map, key: String| map.borrow().get(&key).cloned(),
        (map, key),
    )
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

fn main() {
    upcxx::init();
    let per_rank: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("keys per rank: a number"))
        .unwrap_or(10_000);
    let me = rank_me();
    let map: Map = DistObject::new(RefCell::new(HashMap::new()));
    let mut rng =
        Rng(0x9e37_79b9_7f4a_7c15 ^ (u64::from(me) + 1).wrapping_mul(0x1234_5678_9abc_def1));
    let pairs: Vec<(String, String)> = (0..per_rank)
        .map(|i| {
            let r = rng.next();
            (
                format!("key-{me}-{i}-{r:x}"),
                format!("value-{:x}", r.rotate_left(17)),
            )
        })
        .collect();

    upcxx::barrier();
    let start = Instant::now();
    let inserted: Vec<Future<()>> = pairs
        .iter()
        .map(|(k, v)| insert(&map, k.clone(), v.clone()))
        .collect();
    when_all(inserted).wait();
    upcxx::barrier();
    let insert_time = start.elapsed();

    let start = Instant::now();
    let found: Vec<Future<Option<String>>> =
        pairs.iter().map(|(k, _)| find(&map, k.clone())).collect();
    let values = when_all(found).wait();
    upcxx::barrier();
    let find_time = start.elapsed();

    let mismatches = pairs
        .iter()
        .zip(&values)
        .filter(|((_, want), got)| got.as_deref() != Some(want.as_str()))
        .count() as u64;
    if mismatches > 0 {
        eprintln!("rank {me}: {mismatches} of {per_rank} keys have a wrong or missing value");
    }
    let checked = upcxx::reduce_all(values.len() as u64, op_fast_add, world()).wait();
    let bad = upcxx::reduce_all(mismatches, op_fast_add, world()).wait();

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
