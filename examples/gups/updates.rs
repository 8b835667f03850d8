//! The tables and update passes of `gups.rs`, shared with the `app` bench (which
//! includes this file with `#[path]`, so that it measures the example's own code).
//!
//! The table is `rank_n() * 2^log` words of `u64`, `2^log` on each rank, initialized
//! to `T[i] = i`. A pass applies, on every rank, `4 * 2^log` updates `T[k] ^= ran`,
//! where `ran` runs along the HPCC random stream (`x = (x << 1) ^ (x < 0 ? POLY : 0)`,
//! `POLY = 7`) from the start `HPCC_starts(rank * updates per rank)`, so the ranks
//! together walk one stream. HPCC masks `ran` with a power-of-two table size; so that
//! any number of ranks works, the low `log` bits of `ran` give the offset and the bits
//! above them, modulo `rank_n()`, the owner ([`place`]).
//!
//! Two tables, one per way of updating:
//! * [`Atomics`]: each update is a remote `bit_xor` of a [`upcxx::AtomicDomain`] on the
//!   owner's word, all completing into one promise;
//! * [`Batches`]: each rank files its updates by owner and sends each owner a batch of
//!   [`BATCH`] values at a time with `rpc_ff`; the owner XORs them into its part of the
//!   table. The owners learn from a `reduce_all` how many batches to expect.
//!
//! Verification is HPCC's: applying the same updates again returns every word to its
//! start, so after an even number of passes each rank counts the words of its part
//! with `T[i] != i` ([`Atomics::errors`], [`Batches::errors`]). Any lost or doubled
//! update leaves such a word.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;

use upcxx::{
    op_fast_add, operation_cx, rank_me, rank_n, rpc_ff, world, AtomicDomain, AtomicOp, DistObject,
    GlobalPtr, Promise, Rank,
};

/// HPCC's polynomial and period of the random stream.
const POLY: u64 = 7;
const PERIOD: i64 = 1_317_624_576_693_539_401;
/// Updates per RPC batch.
pub(crate) const BATCH: usize = 1024;

/// One step of the HPCC stream.
pub(crate) fn step(x: u64) -> u64 {
    (x << 1) ^ if (x as i64) < 0 { POLY } else { 0 }
}

/// The `n`-th value of the stream (HPCC's `HPCC_starts`): by repeated squaring in the
/// field the stream walks, so that each rank starts where the previous one's updates
/// end without generating them.
pub(crate) fn starts(mut n: i64) -> u64 {
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

/// Where an update goes in a table of `n` parts of `2^log` words: owner and offset.
pub(crate) fn place(ran: u64, log: u32, n: Rank) -> (Rank, usize) {
    let offset = (ran & ((1 << log) - 1)) as usize;
    (((ran >> log) % u64::from(n)) as Rank, offset)
}

/// Updates each rank applies per pass: four per word of its part, as in HPCC.
pub(crate) fn updates_per_rank(log: u32) -> u64 {
    4 << log
}

/// Where this rank's updates start on the stream.
fn my_start(log: u32) -> u64 {
    starts(i64::from(rank_me()) * updates_per_rank(log) as i64)
}

/// The words of this rank's part that do not hold their start value.
fn errors(words: impl Iterator<Item = u64>, log: u32) -> u64 {
    let first = u64::from(rank_me()) << log;
    words.zip(first..).filter(|(w, i)| w != i).count() as u64
}

/// The table updated by remote atomics: this rank's part in its shared segment.
pub(crate) struct Atomics {
    log: u32,
    mine: GlobalPtr<u64>,
    ad: AtomicDomain<u64>,
    pointers: DistObject<GlobalPtr<u64>>,
    tables: Vec<GlobalPtr<u64>>,
}

impl Atomics {
    /// This rank's part at its start, every part known. Collective.
    pub(crate) fn new(log: u32) -> Atomics {
        let local = 1usize << log;
        let first = u64::from(rank_me()) << log;
        let mine: GlobalPtr<u64> = upcxx::new_array(local);
        for i in 0..local {
            // SAFETY: this rank's own, fresh array; no other rank accesses it before the
            // barrier below.
            unsafe { mine.add(i).local().write(first + i as u64) };
        }
        // Built before the fetches below: construction makes only internal progress
        // (§13.3 ¶8), which would not answer another rank's fetch.
        let ad = AtomicDomain::<u64>::new(&[AtomicOp::BitXor, AtomicOp::Load]);
        let pointers = DistObject::new(mine);
        let tables = (0..rank_n()).map(|r| pointers.fetch(r).wait()).collect();
        upcxx::barrier();
        Atomics {
            log,
            mine,
            ad,
            pointers,
            tables,
        }
    }

    /// Applies this rank's updates of a pass, then a barrier. Collective.
    pub(crate) fn pass(&self) {
        let n = rank_n();
        let done = Promise::<()>::new();
        let mut ran = my_start(self.log);
        for _ in 0..updates_per_rank(self.log) {
            ran = step(ran);
            let (owner, offset) = place(ran, self.log, n);
            self.ad.bit_xor_with(
                self.tables[owner as usize].add(offset),
                ran,
                Relaxed,
                operation_cx::as_promise(&done),
            );
        }
        done.finalize().wait();
        upcxx::barrier();
    }

    /// The words of this rank's part not at their start value, read through the domain
    /// (the words are the atomics' words for good, §13.1 ¶2).
    pub(crate) fn errors(&self) -> u64 {
        let words = (0..1usize << self.log).map(|i| self.ad.load(self.mine.add(i), Relaxed).wait());
        errors(words, self.log)
    }

    /// Destroys the domain and frees this rank's part. Collective.
    pub(crate) fn free(mut self) {
        upcxx::barrier();
        self.ad.destroy(upcxx::EntryBarrier::User);
        drop(self.pointers);
        upcxx::delete_array(self.mine);
    }
}

/// One rank's part of the RPC table, and the batches it has applied.
pub(crate) struct Part {
    words: RefCell<Vec<u64>>,
    batches: Cell<u64>,
}

/// The table updated by batches of RPCs: this rank's part in ordinary memory.
pub(crate) struct Batches {
    log: u32,
    table: DistObject<Part>,
    /// The batches this rank has been sent over all passes so far.
    arrived: u64,
}

impl Batches {
    /// This rank's part at its start. Collective.
    pub(crate) fn new(log: u32) -> Batches {
        let first = u64::from(rank_me()) << log;
        let table = DistObject::new(Part {
            words: RefCell::new((first..first + (1u64 << log)).collect()),
            batches: Cell::new(0),
        });
        upcxx::barrier();
        Batches {
            log,
            table,
            arrived: 0,
        }
    }

    /// Applies this rank's updates of a pass by batches to the owners, waits for the
    /// batches sent to this rank, then a barrier. Collective.
    pub(crate) fn pass(&mut self) {
        let n = rank_n();
        let log = self.log;
        let table = &self.table;
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
        let mut ran = my_start(log);
        for _ in 0..updates_per_rank(log) {
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
        // The count keeps growing across passes: wait for this pass's batches on top
        // of those of the passes before.
        self.arrived += sum_all(&sent)[rank_me() as usize];
        while table.batches.get() < self.arrived {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        upcxx::barrier();
    }

    /// The words of this rank's part not at their start value.
    pub(crate) fn errors(&self) -> u64 {
        errors(self.table.words.borrow().iter().copied(), self.log)
    }
}

/// Element-wise sum of `local` over every rank.
pub(crate) fn sum_all(local: &[u64]) -> Vec<u64> {
    upcxx::reduce_all_vec(local.to_vec(), op_fast_add, world()).wait()
}
