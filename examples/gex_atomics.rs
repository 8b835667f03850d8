//! Remote atomics from every rank on words of every rank, all at once, with the final
//! values checked exactly. Ranks on a word's host update it with CPU atomics through
//! the shared mapping, ranks on other hosts by Active Messages to its owner (the mpi
//! conduit with a host cap); the totals come out exact only if the two paths are
//! atomic with respect to each other. It prints the job's host structure and
//! `verified`.
//!
//! Run as `UPCXX_RANKS=4 gex_atomics`, or, built with the `mpi` feature, as
//! `mpirun -n 4 -x GEX_MPI_HOST_RANKS=2 gex_atomics` (two hosts of two ranks).
//!
//! `gex_atomics outside` instead makes rank 1 aim one atomic at rank 2 (of 3 ranks at
//! least), past its segment, which must fail naming the call before anything is sent.
//!
//! Every rank makes, on the words of every owner `o`, [`ROUNDS`] rounds of:
//! * `FADD 1` on an `i64` counter (blocking, NB and NBI in turn), accumulating the
//!   fetched values, then `ADD` of that sum into a word of rank 0: the fetched values
//!   are distinct and cover `0..n * ROUNDS`, so the sum is known;
//! * on one `u64` word, alternately `FADD 1` and an increment by a `GET` and
//!   compare-and-swap loop (`FCAS`): both paths on one word must count every increment;
//! * `INC` (NBI) on a `u32`, `FADD 0.5` on an `f64` (exact in binary), `FMIN`/`FMAX`
//!   of rank-dependent values on `i32` words, `OR` of the rank's bit on a `u64`;
//! * `SWAP` of a unique tag into one `u64` word: the fetched tags of all ranks and the
//!   final value are each tag once and the initial value, checked by their sum and xor.

use gex::ops::{Dt, Op};
use gex::{AtomicDomain, Client, Event, EventCategory, Flags, Rank, Segment, Team};

/// Rounds per rank and owner.
const ROUNDS: u64 = 150;

/// The words of each owner, by offset in its segment.
const COUNTER: usize = 0; // i64
const MIXED: usize = 8; // u64
const BITS: usize = 16; // u64
const SWAPPED: usize = 24; // u64
const FLOAT: usize = 32; // f64
const INCS: usize = 40; // u32
const LOW: usize = 44; // i32
const HIGH: usize = 48; // i32
/// On rank 0 only: the sums of fetched counters and of fetched tags, their xor.
const FETCHED_SUM: usize = 64; // i64
const TAG_SUM: usize = 72; // u64
const TAG_XOR: usize = 80; // u64

/// The initial value of the swapped word, not a tag.
const SWAP_START: u64 = 1 << 40;

struct Domains {
    i64: AtomicDomain,
    u64: AtomicDomain,
    u32: AtomicDomain,
    i32: AtomicDomain,
    f64: AtomicDomain,
}

fn tag(rank: Rank, owner: Rank, round: u64) -> u64 {
    (u64::from(rank) << 32) | (u64::from(owner) << 20) | round
}

fn main() {
    let (client, _ep, team) = Client::init("ATOMICS", Flags::NONE).expect("gex::Client::init");
    let _seg = Segment::attach(&team, 1 << 16).expect("gex::Segment::attach");
    let (me, n) = (team.rank(), team.size());
    let position = gex::my_position();
    println!(
        "rank {me} of {n}: host {} of {}",
        position.host_set_rank, position.host_set_size
    );
    let ints = Op::FAdd | Op::Add | Op::Inc | Op::Get | Op::Set | Op::FCas | Op::Swap;
    let d = Domains {
        i64: AtomicDomain::create(&team, Dt::I64, ints, Flags::NONE),
        u64: AtomicDomain::create(&team, Dt::U64, ints | Op::Or | Op::Xor, Flags::NONE),
        u32: AtomicDomain::create(&team, Dt::U32, ints, Flags::NONE),
        i32: AtomicDomain::create(
            &team,
            Dt::I32,
            Op::FMin | Op::Max | Op::Set | Op::Get,
            Flags::NONE,
        ),
        f64: AtomicDomain::create(&team, Dt::Dbl, Op::FAdd | Op::Set | Op::Get, Flags::NONE),
    };
    let base = |r: Rank| team.segment_bound(r).expect("attached").owner_addr;

    if std::env::args().nth(1).as_deref() == Some("outside") {
        // Rank 1 fails alone (the others wait until the job is stopped).
        if me == 1 {
            let past = base(2) + team.segment_bound(2).unwrap().size;
            d.i64.op_blocking(2, past, Op::FAdd, 1i64, 0, Flags::NONE);
        }
        team.barrier();
        unreachable!("an atomic outside the segment was made");
    }

    // Each rank sets its own words, with atomics as every later access is.
    let mine = base(me);
    for off in [COUNTER, FETCHED_SUM] {
        d.i64
            .op_blocking(me, mine + off, Op::Set, 0i64, 0, Flags::NONE);
    }
    for off in [MIXED, BITS, TAG_SUM, TAG_XOR] {
        d.u64
            .op_blocking(me, mine + off, Op::Set, 0u64, 0, Flags::NONE);
    }
    d.u64
        .op_blocking(me, mine + SWAPPED, Op::Set, SWAP_START, 0, Flags::NONE);
    d.u32
        .op_blocking(me, mine + INCS, Op::Set, 0u32, 0, Flags::NONE);
    d.i32
        .op_blocking(me, mine + LOW, Op::Set, 0i32, 0, Flags::NONE);
    d.i32
        .op_blocking(me, mine + HIGH, Op::Set, 0i32, 0, Flags::NONE);
    d.f64
        .op_blocking(me, mine + FLOAT, Op::Set, 0.0f64, 0.0, Flags::NONE);
    team.barrier();

    // Each round visits every owner, starting at a different one on every rank, so
    // that every word is hammered by ranks of both hosts at once.
    let (mut fetched_sum, mut tag_sum, mut tag_xor) = (0i64, 0u64, 0u64);
    let owners: Vec<(Rank, usize)> = (0..n).map(|k| (me + k) % n).map(|o| (o, base(o))).collect();
    let (f, s, x) = hammer(&team, &d, &owners);
    fetched_sum += f;
    tag_sum = tag_sum.wrapping_add(s);
    tag_xor ^= x;
    let at0 = base(0);
    d.i64
        .op_blocking(0, at0 + FETCHED_SUM, Op::Add, fetched_sum, 0, Flags::NONE);
    d.u64
        .op_blocking(0, at0 + TAG_SUM, Op::Add, tag_sum, 0, Flags::NONE);
    d.u64
        .op_blocking(0, at0 + TAG_XOR, Op::Xor, tag_xor, 0, Flags::NONE);
    team.barrier();

    check_own(&team, &d, me, n, mine);
    team.barrier();
    if me == 0 {
        println!("{n} ranks: atomics of both paths on shared words");
        println!("verified");
    }
    client.finalize();
}

/// One rank's rounds on the words of every owner `o` (at `b`), each round visiting all
/// owners so that every word is updated by every rank at once; returns the sum of the
/// fetched counters, and the sum and xor of the fetched tags.
fn hammer(team: &Team, d: &Domains, owners: &[(Rank, usize)]) -> (i64, u64, u64) {
    let me = team.rank();
    let (mut fetched, mut tags, mut tag_xor) = (0i64, 0u64, 0u64);
    let mut events: Vec<Event> = Vec::new();
    let mut outs: Vec<Box<i64>> = Vec::new();
    for (round, &(o, b)) in (0..ROUNDS).flat_map(|r| owners.iter().map(move |ob| (r, ob))) {
        match round % 3 {
            0 => {
                fetched += d
                    .i64
                    .op_blocking(o, b + COUNTER, Op::FAdd, 1i64, 0, Flags::NONE)
                    .unwrap()
            }
            1 => {
                let mut out = Box::new(0i64);
                // SAFETY: `out` is kept in `outs` until the event is waited for.
                let e = unsafe {
                    d.i64
                        .op_nb(&mut *out, o, b + COUNTER, Op::FAdd, 1i64, 0, Flags::AD_ACQ)
                };
                events.push(e.expect("no IMMEDIATE"));
                outs.push(out);
            }
            _ => {
                let mut out = Box::new(0i64);
                // SAFETY: `out` is kept in `outs` until nbi_wait below.
                unsafe {
                    d.i64
                        .op_nbi(&mut *out, o, b + COUNTER, Op::FAdd, 1i64, 0, Flags::AD_REL)
                        .expect("no IMMEDIATE");
                }
                outs.push(out);
            }
        }
        if round % 2 == 0 {
            d.u64
                .op_blocking(o, b + MIXED, Op::FAdd, 1u64, 0, Flags::NONE);
        } else {
            let mut seen = d
                .u64
                .op_blocking(o, b + MIXED, Op::Get, 0u64, 0, Flags::NONE)
                .unwrap();
            loop {
                let was = d
                    .u64
                    .op_blocking(o, b + MIXED, Op::FCas, seen, seen + 1, Flags::NONE)
                    .unwrap();
                if was == seen {
                    break;
                }
                seen = was;
            }
        }
        // SAFETY: a non-fetching operation writes no result.
        unsafe {
            d.u32
                .op_nbi(
                    std::ptr::null_mut::<u32>(),
                    o,
                    b + INCS,
                    Op::Inc,
                    0,
                    0,
                    Flags::NONE,
                )
                .expect("no IMMEDIATE");
        }
        d.f64
            .op_blocking(o, b + FLOAT, Op::FAdd, 0.5, 0.0, Flags::NONE);
        let v = (me as i32 + 1) * 1000 + round as i32;
        d.i32.op_blocking(o, b + LOW, Op::FMin, -v, 0, Flags::NONE);
        d.i32.op_blocking(o, b + HIGH, Op::Max, v, 0, Flags::NONE);
        d.u64
            .op_blocking(o, b + BITS, Op::Or, bit(me), 0, Flags::NONE);
        let t = tag(me, o, round);
        let old = d
            .u64
            .op_blocking(o, b + SWAPPED, Op::Swap, t, 0, Flags::NONE)
            .unwrap();
        tags = tags.wrapping_add(old);
        tag_xor ^= old;
    }
    Event::wait_all(&mut events);
    gex::nbi_wait(EventCategory::RMW);
    fetched += outs.iter().map(|o| **o).sum::<i64>();
    (fetched, tags, tag_xor)
}

/// Checks this rank's words (and on rank 0 the sums) against what every rank did.
fn check_own(team: &Team, d: &Domains, me: Rank, n: Rank, mine: usize) {
    let total = u64::from(n) * ROUNDS;
    let get64 = |off| {
        d.u64
            .op_blocking(me, mine + off, Op::Get, 0u64, 0, Flags::NONE)
            .unwrap()
    };
    let counter = d
        .i64
        .op_blocking(me, mine + COUNTER, Op::Get, 0i64, 0, Flags::NONE)
        .unwrap();
    let incs = d
        .u32
        .op_blocking(me, mine + INCS, Op::Get, 0u32, 0, Flags::NONE)
        .unwrap();
    let float = d
        .f64
        .op_blocking(me, mine + FLOAT, Op::Get, 0.0, 0.0, Flags::NONE)
        .unwrap();
    let low = d
        .i32
        .op_blocking(me, mine + LOW, Op::Get, 0, 0, Flags::NONE)
        .unwrap();
    let high = d
        .i32
        .op_blocking(me, mine + HIGH, Op::Get, 0, 0, Flags::NONE)
        .unwrap();
    let top = n as i32 * 1000 + ROUNDS as i32 - 1;
    let want = [
        ("counter", counter as u64, total),
        ("mixed FADD and FCAS", get64(MIXED), total),
        ("INC", u64::from(incs), total),
        ("OR", get64(BITS), (0..n).fold(0, |w, r| w | bit(r))),
        ("FADD 0.5 (doubled)", (float * 2.0) as u64, total),
        ("FMIN (negated)", (-low) as u64, top as u64),
        ("MAX", high as u64, top as u64),
    ];
    let mut bad = false;
    for (what, got, expected) in want {
        if got != expected {
            eprintln!("gex_atomics: rank {me}: {what} is {got}, expected {expected}");
            bad = true;
        }
    }
    if float != total as f64 / 2.0 {
        eprintln!("gex_atomics: rank {me}: the f64 sum is {float}");
        bad = true;
    }
    if me == 0 {
        // Every counter value 0..n*ROUNDS was fetched once on each of the n owners.
        let fetched = d
            .i64
            .op_blocking(0, mine + FETCHED_SUM, Op::Get, 0i64, 0, Flags::NONE)
            .unwrap();
        let per_owner = (total * (total - 1) / 2) as i64;
        if fetched != per_owner * i64::from(n) {
            eprintln!(
                "gex_atomics: the fetched counters sum to {fetched}, expected {}",
                per_owner * i64::from(n)
            );
            bad = true;
        }
        // The fetched tags and the final values are, per owner, the start value and
        // every tag but the last one left in the word.
        let (mut sum, mut xor) = (0u64, 0u64);
        for o in 0..n {
            let b = team.segment_bound(o).unwrap().owner_addr;
            let last = d
                .u64
                .op_blocking(o, b + SWAPPED, Op::Get, 0u64, 0, Flags::NONE)
                .unwrap();
            sum = sum.wrapping_add(SWAP_START).wrapping_sub(last);
            xor ^= SWAP_START ^ last;
            for r in 0..n {
                for round in 0..ROUNDS {
                    sum = sum.wrapping_add(tag(r, o, round));
                    xor ^= tag(r, o, round);
                }
            }
        }
        let (got_sum, got_xor) = (get64(TAG_SUM), get64(TAG_XOR));
        if (got_sum, got_xor) != (sum, xor) {
            eprintln!(
                "gex_atomics: the swapped-out tags sum to {got_sum:#x} (xor {got_xor:#x}), \
                 expected {sum:#x} (xor {xor:#x})"
            );
            bad = true;
        }
    }
    if bad {
        gex::exit(1);
    }
}

/// The bit rank `r` ORs into the word of bits (ranks 64 apart share one).
fn bit(r: u32) -> u64 {
    1 << (r % 64)
}
