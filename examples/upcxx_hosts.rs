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
//! * `rput` of a tag into every rank's array, `rget` of every rank's tags back, one by
//!   one, then all at once (`rget` and `rget_vec` of every rank's tags in flight, and
//!   of every rank's [`BULK`] words, which its owner wrote: a get larger than the mpi
//!   conduit's threshold for messages, so it takes the MPI window; then one
//!   `when_all`).
//! * An `atomic_domain<u64>` on every rank's words: `fetch_add` and an increment by
//!   `load` and `compare_exchange` on one word, from ranks on its host and elsewhere at
//!   once; the totals are exact only if both paths are atomic with each other.
//!
//! `upcxx_hosts local-elsewhere` instead makes rank 0 call `GlobalPtr::local` on a
//! pointer to the first rank on another host, which must fail naming the call.
//!
//! `upcxx_hosts rma-overlap FILE` also checks that gets and puts to another host return
//! before they complete (UPC++ spec §8.2.2: `rget` and `rput` are non-blocking): after
//! the tags are written, the first rank on another host than rank 0 leaves the library,
//! says so by creating FILE's name with the extension `ready` (`FILE.with_extension`:
//! `/tmp/x.flag` gives `/tmp/x.ready`), and stays out until FILE exists; rank 0 starts its
//! `rget` and `rget_vec`s (of the tags, and of the bulk words, which it also gets by
//! `rget_into_vec` and `rget_into_raw`) from that rank, and an
//! `rput_slice` of [`BULK`] words into that rank's landing area, and an `rput_vec`, an
//! `rput_raw` and an `rput_irregular_lent` of [`LARGE`] words each (more than the
//! conduit copies for a put that must finish reading its source before it returns)
//! into landing areas of their own, an `rget_irregular_lent` of the bulk words, and
//! `copy`s of [`BULK`] words both ways between its own host memory and that rank's,
//! once that file exists
//! (polling meanwhile), and creates FILE once they have returned. A transfer that
//! waited inside the call for the far rank's progress (with Open MPI's `osc pt2pt`,
//! every transfer through the window does) would wait for progress that never comes:
//! the rank gives up after [`OVERLAP_WAIT`] and fails the job. After the barrier, the
//! far rank checks its landing areas.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use upcxx::{
    barrier, local_team, local_team_contains, rank_me, rank_n, rget, rget_into_raw, rget_into_vec,
    rget_irregular_lent, rget_vec, rput, rput_irregular_lent, rput_raw, rput_slice, rput_vec,
    when_all, AtomicDomain, AtomicOp, DistObject, GlobalPtr, Rank,
};

/// Rounds of atomics per rank and owner.
const ROUNDS: u64 = 100;
/// Words of each rank's array: the counter, then one tag slot per rank, then the bulk
/// words (at `TAGS + rank_n()`), then the landing areas of `rma-overlap`'s puts
/// ([`BULK`] more words, then three times [`LARGE`], then [`BULK`] words more).
const COUNTER: usize = 0;
const TAGS: usize = 1;
/// Bulk words per rank: 8 KiB, more than the mpi conduit sends as messages (3 KiB).
const BULK: usize = 1024;
/// Words of each of `rma-overlap`'s large puts: 128 KiB, more than the mpi conduit
/// copies (64 KiB) for a put whose source must be read before it returns.
const LARGE: usize = 16 * 1024;
/// How long `rma-overlap`'s far rank waits, out of the library, for rank 0's transfers
/// to return: a bound that only a transfer waiting for that rank inside the call can
/// reach.
const OVERLAP_WAIT: Duration = Duration::from_secs(30);

fn tag(from: Rank, to: Rank) -> u64 {
    0x7a60_0000_0000 | (u64::from(from) << 16) | u64::from(to)
}

/// The bulk words of rank `owner`, which it writes itself.
fn bulk(owner: Rank) -> Vec<u64> {
    (0..BULK as u64)
        .map(|i| 0xb0_0000_0000 | (u64::from(owner) << 20) | i)
        .collect()
}

/// The words of `rma-overlap`'s large put number `put`.
fn large(put: u64) -> Vec<u64> {
    (0..LARGE as u64)
        .map(|i| 0x1a_0000_0000 | (put << 24) | i)
        .collect()
}

fn main() {
    upcxx::init();
    let (me, n) = (rank_me(), rank_n());
    let mine: GlobalPtr<u64> = upcxx::new_array(TAGS + n as usize + 3 * BULK + 3 * LARGE);
    // SAFETY: the bulk words of this rank's own array, which no other rank accesses
    // before the barrier below.
    let words =
        unsafe { std::slice::from_raw_parts_mut(mine.add(TAGS + n as usize).local(), BULK) };
    words.copy_from_slice(&bulk(me));
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

    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("local-elsewhere") {
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
    // The same gets, all in flight at once, and each rank's tags as one vector.
    let each: Vec<_> = (0..n)
        .flat_map(|r| (0..n).map(move |from| (r, from)))
        .map(|(r, from)| rget(all[r as usize].add(TAGS + from as usize)))
        .collect();
    let rows: Vec<_> = all
        .iter()
        .map(|gp| rget_vec(gp.add(TAGS), n as usize))
        .collect();
    let bulks: Vec<_> = all
        .iter()
        .map(|gp| rget_vec(gp.add(TAGS + n as usize), BULK))
        .collect();
    let (each, rows, bulks) = when_all((when_all(each), when_all(rows), when_all(bulks))).wait();
    for (r, (row, words)) in (0..n).zip(rows.iter().zip(&bulks)) {
        let expected: Vec<u64> = (0..n).map(|from| tag(from, r)).collect();
        let single = &each[(r * n) as usize..((r + 1) * n) as usize];
        if *row != expected || single != expected {
            eprintln!("upcxx_hosts: rank {me}: rank {r}'s tags read {row:x?} and {single:x?}");
            bad += 1;
        }
        if *words != bulk(r) {
            eprintln!("upcxx_hosts: rank {me}: rank {r}'s bulk words differ");
            bad += 1;
        }
    }
    if args.get(1).map(String::as_str) == Some("rma-overlap") {
        let file = args.get(2).expect("upcxx_hosts rma-overlap FILE");
        bad += rma_overlap(&all, Path::new(file));
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

/// `rma-overlap` (see the module documentation): rank 0's gets from the first rank on
/// another host, and its put there, must return while that rank makes no progress.
/// Returns the number of wrong values read (by rank 0) or landed (on the far rank).
fn rma_overlap(all: &[GlobalPtr<u64>], file: &Path) -> u32 {
    let (me, n) = (rank_me(), rank_n());
    // Only rank 0 knows which ranks share its host.
    let far = (0..n)
        .find(|&r| !local_team_contains(r))
        .unwrap_or(Rank::MAX);
    let far = upcxx::broadcast(far, 0, upcxx::world()).wait();
    let ready = &file.with_extension("ready");
    let mut bad = 0;
    if far == Rank::MAX {
        if me == 0 {
            println!("rma-overlap: every rank is on rank 0's host, nothing to check");
        }
    } else if me == far {
        // Out of the library from here until rank 0's transfers have returned; rank 0
        // starts them only once told so, so that none is served by a poll of this
        // rank's.
        std::fs::write(ready, b"ready").expect("rma-overlap: cannot create FILE.ready");
        let start = Instant::now();
        while !file.exists() {
            assert!(
                start.elapsed() < OVERLAP_WAIT,
                "upcxx_hosts: rank {me}: rank 0's transfers with this rank did not \
                 return while it made no progress: they waited inside the call"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    } else if me == 0 {
        // Polling meanwhile: the far rank may still be waiting in the broadcast for a
        // message this rank sends only in its next poll.
        let start = Instant::now();
        while !ready.exists() {
            assert!(
                start.elapsed() < OVERLAP_WAIT,
                "upcxx_hosts: rank 0: rank {far} never left the library"
            );
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        let gp = all[far as usize].add(TAGS);
        let one = rget(gp.add(n as usize - 1));
        let row = rget_vec(gp, n as usize);
        let words = rget_vec(gp.add(n as usize), BULK);
        // The same words into memory lent beyond the call: a vector, and through a
        // pointer into one that is not touched until the get completes.
        let lent = rget_into_vec(gp.add(n as usize), vec![0; BULK]);
        let mut through = vec![0u64; BULK];
        // SAFETY: `through` is neither touched nor dropped before `pointed` is ready.
        let pointed = unsafe { rget_into_raw(gp.add(n as usize), through.as_mut_ptr(), BULK) };
        let landed = {
            // Overwritten once the put has returned: it has read its source by then.
            let mut src = bulk(0);
            let put = rput_slice(&src, gp.add(n as usize + BULK));
            src.fill(0);
            put
        };
        // Large puts from memory lent beyond the call: neither copied nor waited for.
        let large_at = gp.add(n as usize + 2 * BULK);
        let lent_put = rput_vec(large(1), large_at);
        let from = large(2);
        // SAFETY: `from` is neither written nor dropped before `raw_put` is ready.
        let raw_put = unsafe { rput_raw(from.as_ptr(), LARGE, large_at.add(LARGE)) };
        // `copy` between this rank's host memory and the far rank's, both ways: from
        // this rank's bulk words, and into its own landing area (which no rank uses).
        let copy_at = large_at.add(3 * LARGE);
        let copied_to = upcxx::copy(all[0].add(TAGS + n as usize), copy_at, BULK);
        let own_landing = all[0].add(TAGS + n as usize + BULK);
        let copied_from = upcxx::copy(gp.add(n as usize), own_landing, BULK);
        // The non-contiguous calls' lent forms, one run each.
        let vis_from = large(3);
        let mut vis_back = vec![0u64; BULK];
        // SAFETY: `vis_from` and `vis_back` are left alone until the futures are ready.
        let (vis_put, vis_got) = unsafe {
            (
                rput_irregular_lent([&vis_from[..]], [(large_at.add(2 * LARGE), LARGE)]),
                rget_irregular_lent([(gp.add(n as usize), BULK)], [&mut vis_back[..]]),
            )
        };
        std::fs::write(file, b"returned").expect("rma-overlap: cannot create FILE");
        let (one, row, words, lent) = when_all((one, row, words, lent, pointed, landed)).wait();
        let given_back =
            when_all((lent_put, raw_put, vis_put, vis_got, copied_to, copied_from)).wait();
        drop((from, vis_from));
        // SAFETY: this rank's own landing area, written by the finished copy.
        let own = unsafe { std::slice::from_raw_parts(own_landing.local(), BULK) };
        if *own != bulk(far) {
            eprintln!("upcxx_hosts: rank 0: copy from rank {far} read wrong words");
            bad += 1;
        }
        if vis_back != bulk(far) {
            eprintln!("upcxx_hosts: rank 0: rget_irregular_lent read wrong words");
            bad += 1;
        }
        if given_back != large(1) {
            eprintln!("upcxx_hosts: rank 0: rput_vec gave back another vector");
            bad += 1;
        }
        let expected: Vec<u64> = (0..n).map(|from| tag(from, far)).collect();
        if one != tag(n - 1, far) || row != expected || words != bulk(far) {
            eprintln!(
                "upcxx_hosts: rank 0: rank {far}'s tags read {one:#x} and {row:x?}, its bulk words {}",
                if words == bulk(far) { "right" } else { "wrong" }
            );
            bad += 1;
        }
        if lent != bulk(far) || through != bulk(far) {
            eprintln!("upcxx_hosts: rank 0: gets into lent memory read wrong words");
            bad += 1;
        }
        println!(
            "rma-overlap: rank 0's gets from and put to rank {far} returned before its \
             progress"
        );
    }
    barrier();
    if me == far {
        // SAFETY: this rank's own landing area, which rank 0's put (complete before the
        // barrier) wrote and no one writes again.
        let landed = unsafe {
            std::slice::from_raw_parts(all[me as usize].add(TAGS + n as usize + BULK).local(), BULK)
        };
        if *landed != bulk(0) {
            eprintln!("upcxx_hosts: rank {me}: rank 0's put did not land");
            bad += 1;
        }
        // SAFETY: as above, the large puts' landing areas.
        let large_landed = unsafe {
            std::slice::from_raw_parts(
                all[me as usize].add(TAGS + n as usize + 2 * BULK).local(),
                3 * LARGE,
            )
        };
        if large_landed[..LARGE] != large(1)
            || large_landed[LARGE..2 * LARGE] != large(2)
            || large_landed[2 * LARGE..] != large(3)
        {
            eprintln!("upcxx_hosts: rank {me}: rank 0's large puts did not land");
            bad += 1;
        }
        // SAFETY: as above, the landing area of rank 0's copy.
        let copied = unsafe {
            std::slice::from_raw_parts(
                all[me as usize]
                    .add(TAGS + n as usize + 2 * BULK + 3 * LARGE)
                    .local(),
                BULK,
            )
        };
        if *copied != bulk(0) {
            eprintln!("upcxx_hosts: rank {me}: rank 0's copy did not land");
            bad += 1;
        }
    }
    if me == 0 {
        let _ = std::fs::remove_file(ready);
    }
    bad
}
