//! Batches of RPCs (`rpc/batch.rs`): a thread's messages to a rank travel together in
//! one AM, sent when the batch fills, at the thread's next progress, or when it exits
//! (the first message after a progress goes out at once, alone).
//! A batched message is an operation that needs its initiator's internal progress
//! (UPC++ spec §10.3 ¶1): `progress_required` says so until it is sent, and the
//! messages of one thread still run in the order sent, whatever their sizes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gex::testing::{spmd, spmd_outcome, spmd_with, SpmdOptions};
use upcxx::serialization::{make_view, View};
use upcxx::{
    discharge, local_team_contains, new_array, progress_required, rank_me, rank_n, rpc, rpc_ff,
    GlobalPtr, ProgressLevel, Rank,
};

mod common;

/// Ranks the order test runs on at most: more than the batches a thread keeps (8), so
/// a send to a ninth rank sends another rank's batch first.
const MAX_RANKS: usize = 10;

/// Per sender: the sequence number its next message must carry.
static NEXT: [AtomicU64; MAX_RANKS] = [const { AtomicU64::new(0) }; MAX_RANKS];
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static OUT_OF_ORDER: AtomicBool = AtomicBool::new(false);

/// Runs an RPC from `src` carrying its `seq`-th message to this rank, and a payload of
/// `seq`-dependent bytes, which it checks.
fn arrive(src: Rank, seq: u64, payload: View<'_, u8>) {
    let want = NEXT[src as usize].fetch_add(1, Ordering::Relaxed);
    let payload = payload.as_slice();
    let bytes_ok = payload
        .iter()
        .copied()
        .enumerate()
        .all(|(i, b)| b == (i as u64 ^ seq) as u8);
    if want != seq || payload.len() != size(src, seq) || !bytes_ok {
        OUT_OF_ORDER.store(true, Ordering::Relaxed);
    }
    RECEIVED.fetch_add(1, Ordering::Relaxed);
}

/// The payload size of message `seq` from `src`: mostly short, some empty, and every
/// 37th larger than a batch (which travels alone, or in fragments past 64 KiB).
fn size(src: Rank, seq: u64) -> usize {
    match (seq + u64::from(src)) % 37 {
        0 => 5000 + (seq as usize % 3) * 40_000,
        k if k % 5 == 0 => 0,
        k => (k as usize * 13) % 200,
    }
}

const PER_PEER: u64 = 400;

/// Every rank sends [`PER_PEER`] messages to every other rank, interleaved, then every
/// rank checks it ran each sender's messages in order, complete and intact.
fn run_in_order() {
    upcxx::init();
    let (me, n) = (rank_me(), rank_n());
    for seq in 0..PER_PEER {
        for dest in (0..n).filter(|&d| d != me) {
            let bytes: Vec<u8> = (0..size(me, seq)).map(|i| (i as u64 ^ seq) as u8).collect();
            rpc_ff(dest, arrive, (me, seq, make_view(&bytes)));
        }
    }
    let expected = PER_PEER * u64::from(n - 1);
    common::progress_until(|| RECEIVED.load(Ordering::Relaxed) == expected);
    assert!(
        !OUT_OF_ORDER.load(Ordering::Relaxed),
        "rank {me}: a message out of order"
    );
    upcxx::barrier();
    upcxx::finalize();
}

#[test]
fn each_threads_messages_run_in_order_across_batches() {
    for n in [2, 3, 5, MAX_RANKS] {
        spmd(n, run_in_order);
    }
}

/// The smallest batches (many sent full, most large messages spilling out of one) and
/// none (every message its own AM) keep the same order.
#[test]
fn small_batches_and_none_keep_the_order() {
    for bytes in ["256", "0"] {
        for n in [2, 4] {
            let mut opts = SpmdOptions::new(n);
            opts.env = vec![("UPCXX_RPC_BATCH_BYTES".into(), bytes.into())];
            spmd_with(opts, run_in_order);
        }
    }
}

static RAN: AtomicU64 = AtomicU64::new(0);

/// §10.3 ¶1–¶5: the first message after a progress goes out at once; those after it
/// wait in their batches, so they require progress until `discharge` (or any progress)
/// sends them. (`discharge.rs` checks that what was sent then arrives with no further
/// call by the sender.)
#[test]
fn a_batched_rpc_requires_progress_until_sent() {
    for n in 2..=5 {
        spmd(n, || {
            upcxx::init();
            upcxx::barrier();
            assert!(!progress_required());
            if rank_me() == 0 {
                for r in (1..rank_n()).chain(1..rank_n()) {
                    rpc_ff(
                        r,
                        || {
                            RAN.fetch_add(1, Ordering::Relaxed);
                        },
                        (),
                    );
                }
                assert!(progress_required(), "a batched rpc_ff needs progress");
                discharge();
                assert!(!progress_required());
            } else {
                common::progress_until(|| RAN.load(Ordering::Relaxed) == 2);
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// A thread that sends and exits without making progress: what it batched is sent as
/// it exits, and runs.
#[test]
fn a_thread_sends_its_batches_as_it_exits() {
    spmd(2, || {
        upcxx::init();
        if rank_me() == 0 {
            std::thread::spawn(|| {
                for i in 0..10u64 {
                    rpc_ff(
                        1,
                        |i: u64| {
                            RAN.fetch_add(i, Ordering::Relaxed);
                        },
                        (i,),
                    );
                }
            })
            .join()
            .expect("the sending thread");
        } else {
            common::progress_until(|| RAN.load(Ordering::Relaxed) == 45);
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// Round trips in flight to several ranks at once: the calls and their replies travel
/// in batches both ways, and every result comes back to its own future.
#[test]
fn round_trips_in_flight_get_their_own_results() {
    for n in 2..=5 {
        spmd(n, || {
            upcxx::init();
            let (me, n) = (rank_me(), rank_n());
            let calls: Vec<_> = (0..2000u64)
                .map(|i| {
                    let dest = (me + 1 + (i % u64::from(n)) as Rank) % n;
                    (i, dest, rpc(dest, |i: u64| (i * 3, rank_me()), (i,)))
                })
                .collect();
            for (i, dest, f) in calls {
                assert_eq!(f.wait(), (i * 3, dest));
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// A setting that is not a number of bytes is named when UPC++ starts.
#[test]
fn a_bad_batch_size_is_named() {
    let mut opts = SpmdOptions::new(1);
    opts.env = vec![("UPCXX_RPC_BATCH_BYTES".into(), "lots".into())];
    let Some(outcome) = spmd_outcome(opts, || {
        upcxx::init();
        upcxx::finalize();
    }) else {
        return;
    };
    let report = outcome.failure.expect("init fails");
    assert!(
        report.contains("UPCXX_RPC_BATCH_BYTES=\"lots\" is not a number of bytes"),
        "{report}"
    );
}

/// RPCs rank 0 queues to itself and runs in one drain in
/// [`a_drain_takes_in_what_peers_send`].
const DRAIN: u64 = 4096;
/// Rank 0's words that both ranks reach through their mappings: rank 0 started its
/// drain, and how many `rpc_ff`s rank 1 has sent it.
static WORDS: OnceLock<GlobalPtr<u64>> = OnceLock::new();
/// The calls of the drain that found rank 1 behind (0 when it never was).
static BEHIND: AtomicU64 = AtomicU64::new(0);
/// Rank 1's calls that ran on rank 0.
static FROM_1: AtomicU64 = AtomicU64::new(0);

/// Word `i` of [`WORDS`], through this process's mapping of rank 0's segment.
fn shared_word(words: GlobalPtr<u64>, i: usize) -> &'static AtomicU64 {
    let p = words.add(i).local();
    assert!(!p.is_null(), "rank 0's segment is mapped here");
    // SAFETY: an aligned u64 of rank 0's segment, mapped for the life of the process,
    // which the test only accesses through atomics.
    unsafe { &*(p as *const AtomicU64) }
}

/// When rank 0's drain gives up waiting for rank 1 (set on rank 0 before it starts).
static DEADLINE: OnceLock<Instant> = OnceLock::new();

/// Call `i` of rank 0's drain: waits, making no progress, until rank 1 has sent `i / 4`
/// calls (at most until [`DEADLINE`]; a call past it gives up at once and counts as
/// behind).
fn drained(i: u64) {
    let words = *WORDS.get().expect("rank 0 set its words");
    let sent = shared_word(words, 1);
    let deadline = *DEADLINE.get().expect("rank 0 set its deadline");
    while sent.load(Ordering::Acquire) < i / 4 {
        if Instant::now() > deadline {
            BEHIND.fetch_add(1, Ordering::Relaxed);
            return;
        }
        std::hint::spin_loop();
    }
}

/// A user-level progress that runs many RPCs polls the network meanwhile (§10.2), so
/// that a peer is not kept waiting for room in this rank's queues for the whole drain.
/// Rank 0 queues [`DRAIN`] RPCs to itself and runs them in one progress call, call
/// `i` waiting until rank 1, sending `rpc_ff`s to rank 0 one AM each (no batches), has
/// sent `i / 4` of them: 1,024 by the end, four times what rank 0's queue holds, so
/// rank 1 gets there only if the drain takes its messages in as it runs.
#[test]
fn a_drain_takes_in_what_peers_send() {
    let mut opts = SpmdOptions::new(2);
    opts.env = vec![("UPCXX_RPC_BATCH_BYTES".into(), "0".into())];
    spmd_with(opts, || {
        upcxx::init();
        let me = rank_me();
        if me == 0 {
            WORDS.set(new_array::<u64>(2)).expect("set once");
        }
        let words = rpc(0, || *WORDS.get().expect("set before"), ()).wait();
        if !local_team_contains(1 - me) {
            eprintln!("skipped: the two ranks must share a host to reach each other's words");
            upcxx::barrier();
            upcxx::finalize();
            return;
        }
        upcxx::barrier();
        let sends = DRAIN / 4;
        if me == 0 {
            DEADLINE
                .set(Instant::now() + Duration::from_secs(10))
                .expect("set once");
            for i in 0..DRAIN {
                rpc_ff(0, drained, (i,));
            }
            shared_word(words, 0).store(1, Ordering::Release);
            upcxx::progress(ProgressLevel::User);
            let behind = BEHIND.load(Ordering::Relaxed);
            assert_eq!(
                behind,
                0,
                "{behind} calls of the drain gave up waiting for rank 1's sends (it sent {})",
                shared_word(words, 1).load(Ordering::Acquire)
            );
            common::progress_until(|| FROM_1.load(Ordering::Relaxed) == sends);
        } else {
            while shared_word(words, 0).load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            for k in 1..=sends {
                rpc_ff(0, || FROM_1.fetch_add(1, Ordering::Relaxed), ());
                shared_word(words, 1).store(k, Ordering::Release);
            }
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// Rank 0's words in [`flood`]: rank 1 may start, and how many `rpc_ff`s rank 1 has
/// sent.
static FLOOD_WORDS: OnceLock<GlobalPtr<u64>> = OnceLock::new();
/// The calls of other ranks that ran here.
static FLOOD_RAN: AtomicU64 = AtomicU64::new(0);

/// Rank 1's `rpc_ff`s to rank 0 in [`flood`]: of 256 payload bytes each, about 12 to a
/// batch, so rank 0's Request queue (256 slots, one batch each) holds about 3,100 of
/// them: five times that, so that rank 1 finishes only if rank 0 takes its messages in
/// while it floods.
const FLOOD_FROM_1: u64 = 16_384;
/// The most `rpc_ff`s rank 0 sends while it waits for rank 1 to finish: a poll every few
/// batches lets rank 1 finish within a few tens of thousands (7,500 to 40,000 on 2 and
/// on 10 ranks here); this many take about 64 MB of the other ranks' inboxes.
const FLOOD_FROM_0_MAX: u64 = 1_000_000;

/// A thread that sends batch after batch without calling progress still polls the
/// network now and then (`rpc/batch.rs`: internal progress, which an RPC's initiation
/// may make), so a peer whose queue to it is full is not kept waiting until its flood
/// ends. Rank 1 sends [`FLOOD_FROM_1`] `rpc_ff`s to rank 0, more than rank 0's queue
/// holds, while rank 0 sends `rpc_ff`s to the other ranks in turn and makes no progress
/// until rank 1 has sent all of its (or until [`FLOOD_FROM_0_MAX`]): rank 1's waits for
/// room poll, and the other ranks wait in a broadcast, which polls, so rank 0's own
/// sends never wait for room, and only rank 0's polls among its sends let rank 1
/// finish. Then every rank runs all the calls sent to it. On 2 ranks rank 0's batches
/// fill; on 10 each is sent as a message to another rank takes it over (a thread keeps
/// 8), before it fills.
fn flood(ranks: usize) {
    spmd(ranks, || {
        upcxx::init();
        let (me, n) = (rank_me(), rank_n());
        if me == 0 {
            FLOOD_WORDS.set(new_array::<u64>(2)).expect("set once");
        }
        let words = rpc(0, || *FLOOD_WORDS.get().expect("set before"), ()).wait();
        // Ranks 0 and 1 signal each other through rank 0's words.
        let shared = upcxx::broadcast(u8::from(local_team_contains(1)), 0, upcxx::world());
        if shared.wait() == 0 {
            eprintln!("skipped: ranks 0 and 1 must share a host to reach each other's words");
            upcxx::barrier();
            upcxx::finalize();
            return;
        }
        upcxx::barrier();
        let sent_by_0 = match me {
            0 => {
                let (start, sent_by_1) = (shared_word(words, 0), shared_word(words, 1));
                start.store(1, Ordering::Release);
                let mut sent = 0;
                while sent_by_1.load(Ordering::Acquire) < FLOOD_FROM_1 && sent < FLOOD_FROM_0_MAX {
                    let dest = 1 + (sent % u64::from(n - 1)) as Rank;
                    rpc_ff(dest, || FLOOD_RAN.fetch_add(1, Ordering::Relaxed), ());
                    sent += 1;
                }
                let done = sent_by_1.load(Ordering::Acquire);
                let sent = upcxx::broadcast(sent, 0, upcxx::world()).wait();
                assert_eq!(
                    done,
                    FLOOD_FROM_1,
                    "rank 1's sends still waited for room after rank 0 sent {sent} calls \
                     without progress ({} destinations)",
                    n - 1
                );
                sent
            }
            1 => {
                let (start, sent_by_1) = (shared_word(words, 0), shared_word(words, 1));
                while start.load(Ordering::Acquire) == 0 {
                    std::hint::spin_loop();
                }
                let payload = [7u8; 256];
                for k in 1..=FLOOD_FROM_1 {
                    rpc_ff(
                        0,
                        |bytes: View<'_, u8>| {
                            assert!(bytes.as_slice().iter().all(|&b| b == 7));
                            FLOOD_RAN.fetch_add(1, Ordering::Relaxed)
                        },
                        (make_view(&payload[..]),),
                    );
                    sent_by_1.store(k, Ordering::Release);
                }
                upcxx::broadcast(0, 0, upcxx::world()).wait()
            }
            _ => upcxx::broadcast(0, 0, upcxx::world()).wait(),
        };
        // Rank 0 sent its `i`th call to rank `1 + i % (n - 1)`.
        let expected = if me == 0 {
            FLOOD_FROM_1
        } else {
            let others = u64::from(n - 1);
            sent_by_0 / others + u64::from(u64::from(me - 1) < sent_by_0 % others)
        };
        common::progress_until(|| FLOOD_RAN.load(Ordering::Relaxed) == expected);
        upcxx::barrier();
        upcxx::finalize();
    });
}

#[test]
fn a_flood_of_sends_takes_in_what_peers_send() {
    flood(2);
}

/// More destinations than a thread keeps batches for: batches leave before they fill.
#[test]
fn a_flood_to_many_ranks_takes_in_what_peers_send() {
    flood(MAX_RANKS);
}
