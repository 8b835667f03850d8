//! The distributed hash table of `dht.rs`, shared with the `app` bench (which includes
//! this file with `#[path]`, so that it measures the example's own code).
//!
//! Each rank owns the part of the table whose keys hash to it, in a map kept in a
//! distributed object, as the UPC++ programmer's guide keeps its
//! `dist_object<unordered_map>`. `insert` and `find` are RPCs to the key's owner that
//! take the `&DistObject` of the map, which the owner receives as its own member, and
//! the key and value as string views ([`make_str_view`], UPC++ `view<char>`): they are
//! serialized from the caller's strings, which it keeps, and the owner reads them in
//! the message. The owner copies them only into what it keeps ([`store`]): a key it
//! does not hold yet into a new string, a value into the buffer of the value it
//! replaces (grown if the new one is longer); a lookup copies nothing.

use std::cell::RefCell;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};
use upcxx::serialization::{make_str_view, StrView};
use upcxx::{rank_n, rpc, when_all, DistObject, Future, Rank};

/// This rank's part of the table. RPCs mutate it, so it sits in a `RefCell`: a
/// distributed object gives shared access only. The keys are this program's own, not
/// an adversary's, so the map uses the fast Fx hash rather than the DoS-resistant
/// default.
pub(crate) type Map = DistObject<RefCell<FxHashMap<String, String>>>;

/// This rank's part of a new, empty table. Collective (it builds a distributed object).
pub(crate) fn new_map() -> Map {
    DistObject::new(RefCell::new(FxHashMap::default()))
}

/// The rank that owns `key`: the same in every process (unlike `RandomState`), and
/// independent of the map's own hash, so that the keys a rank owns still spread over all
/// of its map's buckets. The Fx hash of the key's bytes (a few words' work, where a
/// byte-at-a-time hash such as FNV costs some hundred instructions for a key of thirty
/// bytes), from another seed, then MurmurHash3's 64-bit finalizer, which makes every
/// bit of the result depend on every bit of the hash, so that the owner and the map's
/// bucket are not related.
pub(crate) fn owner(key: &str) -> Rank {
    let mut hasher = FxHasher::with_seed(0x9e37_79b9);
    hasher.write(key.as_bytes());
    let mut h = hasher.finish();
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h % u64::from(rank_n())) as Rank
}

/// Stores `value` under `key` in this rank's part of the table: a new key and its value
/// are copied into new strings; the value of a key already there is overwritten in its
/// own buffer, which grows only if the new value is longer.
pub(crate) fn store(map: &mut FxHashMap<String, String>, key: &str, value: &str) {
    match map.get_mut(key) {
        Some(old) => {
            old.clear();
            old.push_str(value);
        }
        None => {
            map.insert(key.to_owned(), value.to_owned());
        }
    }
}

/// Stores `value` under `key` on its owner; ready once stored.
pub(crate) fn insert(map: &Map, key: &str, value: &str) -> Future<()> {
    rpc(
        owner(key),
        |map: &Map, key: StrView<'_>, value: StrView<'_>| {
            store(&mut map.borrow_mut(), &key, &value);
        },
        (map, make_str_view(key), make_str_view(value)),
    )
}

/// Looks `key` up on its owner.
pub(crate) fn find(map: &Map, key: &str) -> Future<Option<String>> {
    rpc(
        owner(key),
        |map: &Map, key: StrView<'_>| map.borrow().get(&*key).cloned(),
        (map, make_str_view(key)),
    )
}

/// Inserts every pair (all in flight at once, then one `when_all`), then waits in a
/// barrier until every rank has, serving their inserts meanwhile. Collective. Never
/// inlined, so that a profiler can be told to count this phase alone (see the `app`
/// bench).
#[inline(never)]
pub(crate) fn insert_all(map: &Map, pairs: &[(String, String)]) {
    let inserted: Vec<Future<()>> = pairs.iter().map(|(k, v)| insert(map, k, v)).collect();
    when_all(inserted).wait();
    upcxx::barrier();
}

/// Looks every key of `pairs` up (all in flight at once, then one `when_all`), then waits
/// in a barrier as [`insert_all`] does; returns the values found. Collective.
#[inline(never)]
pub(crate) fn find_all(map: &Map, pairs: &[(String, String)]) -> Vec<Option<String>> {
    let found: Vec<Future<Option<String>>> = pairs.iter().map(|(k, _)| find(map, k)).collect();
    let values = when_all(found).wait();
    upcxx::barrier();
    values
}

/// Rank `rank`'s `n` key-value pairs: distinct across ranks, the same on every run.
pub(crate) fn pairs(rank: Rank, n: u64) -> Vec<(String, String)> {
    let mut rng =
        Rng(0x9e37_79b9_7f4a_7c15 ^ (u64::from(rank) + 1).wrapping_mul(0x1234_5678_9abc_def1));
    (0..n)
        .map(|i| {
            let r = rng.next();
            (
                format!("key-{rank}-{i}-{r:x}"),
                format!("value-{:x}", r.rotate_left(17)),
            )
        })
        .collect()
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
