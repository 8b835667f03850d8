//! UPC++ on ranks of several hosts: which global pointers are local, RMA and atomics to
//! every rank, each checked. It prints each rank's local team and `verified`.
//!
//! Run as `UPCXX_RANKS=4 upcxx_hosts` (one host: every pointer is local), or, built
//! with the `mpi` feature, as `mpirun -n 4 -x GEX_MPI_HOST_RANKS=2 upcxx_hosts` (two
//! hosts of two ranks: a rank reaches the other host's segments only through
//! communication).
//!
//! * `GlobalPtr::is_local` of every rank's array is `local_team_contains` of its rank
//!   (UPC++ spec §3.2: local means in the local team's shared segments), and the local
//!   team is the rank's host.
//! * `rput` of a tag into every rank's array, `rget` of every rank's tags back.
//! * An `atomic_domain<u64>` on every rank's words: `fetch_add` and an increment by
//!   `load` and `compare_exchange` on one word, from ranks on its host and elsewhere at
//!   once; the totals are exact only if both paths are atomic with each other.
//!
//! `upcxx_hosts local-elsewhere` instead makes rank 0 call `GlobalPtr::local` on a
//! pointer to the first rank on another host, which must fail naming the call.

use std::sync::atomic::Ordering::Relaxed;

use upcxx::{
    barrier, local_team, local_team_contains, rank_me, rank_n, rget, rput, AtomicDomain, AtomicOp,
    DistObject, GlobalPtr, Rank,
};

/// Rounds of atomics per rank and owner.
const ROUNDS: u64 = 100;
/// Words of each rank's array: the counter, then one tag slot per rank.
const COUNTER: usize = 0;
const TAGS: usize = 1;

fn tag(from: Rank, to: Rank) -> u64 {
    0x7a60_0000_0000 | (u64::from(from) << 16) | u64::from(to)
}

fn main() {
    upcxx::init();
    let (me, n) = (rank_me(), rank_n());
    let mine: GlobalPtr<u64> = upcxx::new_array(TAGS + n as usize);
    let mut ad = AtomicDomain::<u64>::new(&[
        AtomicOp::FetchAdd,
        AtomicOp::Load,
        AtomicOp::CompareExchange,
    ]);
    let pointers = DistObject::new(mine);
    let all: Vec<GlobalPtr<u64>> = (0..n).map(|r| pointers.fetch(r).wait()).collect();
    barrier();

    let members: Vec<Rank> = (0..n).filter(|&r| local_team_contains(r)).collect();
    assert_eq!(members.len(), local_team().rank_n() as usize);
    println!("rank {me} of {n}: local team {members:?}");
    for (r, gp) in (0..n).zip(&all) {
        assert_eq!(
            gp.is_local(),
            local_team_contains(r),
            "rank {me}: is_local of rank {r}'s array"
        );
    }

    if std::env::args().nth(1).as_deref() == Some("local-elsewhere") {
        // Rank 0 fails alone (the others wait until the job is stopped).
        if me == 0 {
            let Some(far) = (0..n).find(|&r| !local_team_contains(r)) else {
                panic!("upcxx_hosts: every rank is on this host");
            };
            let p = all[far as usize].local();
            unreachable!("GlobalPtr::local gave {p:p} for rank {far} on another host");
        }
        barrier();
        unreachable!("rank 0 went on");
    }

    // RMA: this rank's tag into every array, then every tag back.
    for (r, gp) in (0..n).zip(&all) {
        rput(tag(me, r), gp.add(TAGS + me as usize)).wait();
    }
    barrier();
    let mut bad = 0;
    for (r, gp) in (0..n).zip(&all) {
        for from in 0..n {
            let got = rget(gp.add(TAGS + from as usize)).wait();
            if got != tag(from, r) {
                eprintln!("upcxx_hosts: rank {me}: rank {r}'s slot {from} holds {got:#x}");
                bad += 1;
            }
        }
    }

    // Atomics: every rank on every counter at once, each round visiting every owner
    // (starting at a different one on every rank).
    for round in 0..ROUNDS {
        for k in 0..n {
            let counter = all[((me + k) % n) as usize].add(COUNTER);
            if round % 2 == 0 {
                ad.fetch_add(counter, 1, Relaxed).wait();
            } else {
                let mut seen = ad.load(counter, Relaxed).wait();
                loop {
                    let was = ad.compare_exchange(counter, seen, seen + 1, Relaxed).wait();
                    if was == seen {
                        break;
                    }
                    seen = was;
                }
            }
        }
    }
    barrier();
    let total = ad.load(mine.add(COUNTER), Relaxed).wait();
    if total != u64::from(n) * ROUNDS {
        eprintln!(
            "upcxx_hosts: rank {me}: the counter is {total}, expected {}",
            u64::from(n) * ROUNDS
        );
        bad += 1;
    }
    barrier();
    ad.destroy(upcxx::EntryBarrier::User);
    if bad > 0 {
        std::process::exit(1);
    }
    if me == 0 {
        println!("{n} ranks: is_local, rput, rget and atomics checked");
        println!("verified");
    }
    upcxx::finalize();
}
