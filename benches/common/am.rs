//! The gex Active Message handlers, their state and the data checks shared by the
//! benchmarks that measure gex figures (`gex.rs`, and `upcxx.rs` for its baselines).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use gex::{AmCategory, AmEntry, AmRole, Flags, Team, Token};

use super::spin_until;

/// Handler indices (fixed, so every rank agrees; UPC++ takes the highest free ones).
pub(crate) const H_PING: u8 = 200;
pub(crate) const H_PONG: u8 = 201;
pub(crate) const H_STOP: u8 = 202;
pub(crate) const H_MEDIUM: u8 = 203;
pub(crate) const H_SYNC: u8 = 204;
pub(crate) const H_SYNC_ACK: u8 = 205;

/// Payload size of the Medium stream.
pub(crate) const MEDIUM_BYTES: usize = 64;

/// Rank 0: the sequence number carried back by the last Pong.
pub(crate) static LAST_PONG: AtomicU32 = AtomicU32::new(0);
/// Rank 1: rank 0 finished the current phase.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);
/// Rank 1: Medium requests handled, and how many had a wrong payload.
pub(crate) static MEDIUM_RECEIVED: AtomicU64 = AtomicU64::new(0);
pub(crate) static MEDIUM_BAD: AtomicU64 = AtomicU64::new(0);
/// Rank 0: acknowledgements of Sync received, and what the last one said.
pub(crate) static SYNC_ACKS: AtomicU64 = AtomicU64::new(0);
pub(crate) static ACK_RECEIVED: AtomicU32 = AtomicU32::new(0);
pub(crate) static ACK_BAD: AtomicU32 = AtomicU32::new(0);

pub(crate) fn ping(token: &Token<'_>, args: &[u32]) {
    token.reply_short(H_PONG, &[args[0]], Flags::NONE).unwrap();
}

pub(crate) fn pong(_token: &Token<'_>, args: &[u32]) {
    LAST_PONG.store(args[0], Ordering::Relaxed);
}

pub(crate) fn stop(_token: &Token<'_>, _args: &[u32]) {
    STOP.store(true, Ordering::Relaxed);
}

pub(crate) fn medium(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let ok = payload.len() == MEDIUM_BYTES
        && payload[..4] == args[0].to_le_bytes()
        && payload[MEDIUM_BYTES - 1] == (MEDIUM_BYTES - 1) as u8;
    if !ok {
        MEDIUM_BAD.fetch_add(1, Ordering::Relaxed);
    }
    MEDIUM_RECEIVED.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn sync(token: &Token<'_>, _args: &[u32]) {
    let received = MEDIUM_RECEIVED.load(Ordering::Relaxed) as u32;
    let bad = MEDIUM_BAD.load(Ordering::Relaxed) as u32;
    token
        .reply_short(H_SYNC_ACK, &[received, bad], Flags::NONE)
        .unwrap();
}

pub(crate) fn sync_ack(_token: &Token<'_>, args: &[u32]) {
    ACK_RECEIVED.store(args[0], Ordering::Relaxed);
    ACK_BAD.store(args[1], Ordering::Relaxed);
    SYNC_ACKS.fetch_add(1, Ordering::Release);
}

/// Waits in a plain spin (no library call) until `word` holds `expect` or the stop
/// value; returns what it saw.
#[inline]
pub(crate) fn await_value(word: &AtomicU64, expect: u64) -> u64 {
    let mut v = 0;
    spin_until(|| {
        v = word.load(Ordering::Acquire);
        v == expect || v == u64::MAX
    });
    v
}

/// Rank 1's side of the gex AM figures: poll (running the handlers) until rank 0 says
/// stop.
pub(crate) fn serve_until_stopped() {
    spin_until(|| {
        gex::poll();
        STOP.load(Ordering::Relaxed)
    });
    STOP.store(false, Ordering::Relaxed);
}

pub(crate) fn stop_server(team: Team) {
    team.request_short(1, H_STOP, &[], Flags::NONE).unwrap();
}

/// Asks rank 1 how many Medium requests it handled (they arrive in order, so when the
/// answer comes every earlier one has run) and checks the count and the payloads.
pub(crate) fn sync_medium(team: Team, sent: u64) {
    let acks = SYNC_ACKS.load(Ordering::Acquire);
    team.request_short(1, H_SYNC, &[], Flags::NONE).unwrap();
    spin_until(|| {
        gex::poll();
        SYNC_ACKS.load(Ordering::Acquire) > acks
    });
    let received = ACK_RECEIVED.load(Ordering::Relaxed);
    let bad = ACK_BAD.load(Ordering::Relaxed);
    assert!(
        received == sent as u32 && bad == 0,
        "Medium stream: sent {sent}, rank 1 handled {received} ({bad} with a wrong payload)"
    );
}

pub(crate) fn pattern_byte(seed: u64, i: usize) -> u8 {
    ((i as u64).wrapping_mul(0x9e37_79b9).wrapping_add(seed) >> 5) as u8
}

pub(crate) fn fill_pattern(buf: &mut [u8], seed: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(seed, i);
    }
}

pub(crate) fn check_pattern(buf: &[u8], seed: u64, what: &str) {
    if let Some(i) = (0..buf.len()).find(|&i| buf[i] != pattern_byte(seed, i)) {
        panic!(
            "{what}: wrong data at byte {i} of {}: {:#04x}, expected {:#04x}",
            buf.len(),
            buf[i],
            pattern_byte(seed, i)
        );
    }
}

pub(crate) fn handlers() -> Vec<AmEntry> {
    vec![
        AmEntry::short("bench ping", AmRole::Request, 1, ping).at(H_PING),
        AmEntry::short("bench pong", AmRole::Reply, 1, pong).at(H_PONG),
        AmEntry::short("bench stop", AmRole::Request, 0, stop).at(H_STOP),
        AmEntry::payload(
            "bench medium",
            AmCategory::Medium,
            AmRole::Request,
            1,
            medium,
        )
        .at(H_MEDIUM),
        AmEntry::short("bench sync", AmRole::Request, 0, sync).at(H_SYNC),
        AmEntry::short("bench sync ack", AmRole::Reply, 2, sync_ack).at(H_SYNC_ACK),
    ]
}
