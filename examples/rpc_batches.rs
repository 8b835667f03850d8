//! The RPC traffic whose instructions `benches/app.rs` counts (see its "Where the
//! instructions of an RPC go"): `UPCXX_RANKS=2 cargo run --release --example rpc_batches
//! [batches] [ff|rt|am]`.
//!
//! Rank 0 sends batches of [`BATCH`] messages to rank 1, which makes user-level
//! progress until told to stop: `rpc_ff(1, f, (seq,))` (`ff`), round-trip
//! `rpc(1, |x| x + 1, (x,))` (`rt`), or, for reference, gex Medium Requests of the
//! sequence number's 8 bytes (`am`). In `self`, rank 0 sends the `rpc_ff`s of `ff` to
//! itself and runs them (in its own `target_loop`). A batch is smaller than a network queue, so no send waits for
//! room, and between batches rank 0 waits for rank 1 to have run them all: under
//! `valgrind --tool=callgrind --toggle-collect='*send_batch*'
//! --toggle-collect='*target_loop*'`, each side's counts divided by the messages are
//! the cost of one message, the same from run to run. Every message and result is
//! checked.

use std::sync::atomic::{AtomicU64, Ordering};

use gex::{AmCategory, AmEntry, AmRole, Flags, Lc, Token};

/// Messages per batch: fewer than a network queue's slots.
const BATCH: u64 = 200;

/// Rank 1: messages run, in order (rank 1's master persona, or its AM handler).
static RAN: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicU64 = AtomicU64::new(0);

fn count(seq: u64) {
    let n = RAN.load(Ordering::Relaxed) + 1;
    assert_eq!(seq, n, "messages run once each, in order");
    RAN.store(n, Ordering::Relaxed);
}

/// The Medium handler of `am`: the payload is the sequence number.
fn medium(_token: &Token<'_>, payload: &[u8], _args: &[u32]) {
    count(u64::from_le_bytes(payload.try_into().expect("8 bytes")));
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Ff,
    SelfFf,
    Rt,
    Am(gex::AmIndex),
}

/// Sends one batch of messages `first..first + BATCH` (collected apart from the rest).
#[inline(never)]
fn send_batch(mode: Mode, team: gex::Team, first: u64) -> Vec<upcxx::Future<u64>> {
    let seqs = first..first + BATCH;
    match mode {
        Mode::Ff => {
            seqs.for_each(|seq| upcxx::rpc_ff(1, count, (seq,)));
            Vec::new()
        }
        Mode::SelfFf => {
            seqs.for_each(|seq| upcxx::rpc_ff(0, count, (seq,)));
            Vec::new()
        }
        Mode::Rt => seqs.map(|x| upcxx::rpc(1, |x: u64| x + 1, (x,))).collect(),
        Mode::Am(handler) => {
            for seq in seqs {
                team.request_medium(1, handler, &seq.to_le_bytes(), Lc::Now, Flags::NONE, &[])
                    .expect("a blocking Request always succeeds");
            }
            Vec::new()
        }
    }
}

/// User-level progress until `done` (rank 1: until rank 0 says stop).
#[inline(never)]
fn target_loop(done: impl Fn() -> bool) {
    while !done() {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
}

fn main() {
    upcxx::init();
    assert_eq!(upcxx::rank_n(), 2, "run with UPCXX_RANKS=2");
    let mut args = std::env::args().skip(1);
    let batches: u64 = args
        .next()
        .map_or(100, |s| s.parse().expect("batches: a number"));
    let team = upcxx::backend::gex_team();
    let mut table = [AmEntry::payload(
        "rpc_batches medium",
        AmCategory::Medium,
        AmRole::Request,
        0,
        medium,
    )];
    team.endpoint()
        .register_handlers(&mut table)
        .expect("register the Medium handler");
    let mode = match args.next().as_deref().unwrap_or("ff") {
        "ff" => Mode::Ff,
        "self" => Mode::SelfFf,
        "rt" => Mode::Rt,
        "am" => Mode::Am(table[0].index),
        other => panic!("unknown mode {other}: ff, self, rt or am"),
    };
    upcxx::barrier(); // both ranks' handlers are registered
    if upcxx::rank_me() == 0 {
        for b in 0..batches {
            let first = b * BATCH + 1;
            let results = upcxx::when_all(send_batch(mode, team, first)).wait();
            if mode == Mode::Rt {
                assert!(results.iter().zip(first..).all(|(&r, x)| r == x + 1));
            } else if mode == Mode::SelfFf {
                let last = first + BATCH - 1;
                target_loop(|| RAN.load(Ordering::Relaxed) == last);
            } else {
                let ran = upcxx::rpc(1, || RAN.load(Ordering::Relaxed), ()).wait();
                assert_eq!(ran, first + BATCH - 1, "rank 1 ran every message");
            }
        }
        upcxx::rpc_ff(1, || STOP.store(1, Ordering::Relaxed), ());
    } else {
        target_loop(|| STOP.load(Ordering::Relaxed) != 0);
    }
    upcxx::barrier();
    upcxx::finalize();
}
