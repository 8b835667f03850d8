//! Floods of Active Messages between every pair of ranks, each network's messages
//! from one sender handled in the order sent ("Active Message (AM)" sections of the
//! spec leave the order open; this library's conduits deliver each network's messages
//! from one sender in order, and its upper layers rely on it).
//!
//! Each rank sends every rank (itself included) a flood of Requests without polling
//! between them: Shorts of 1 and 16 arguments, Mediums from 0 bytes to the maximum
//! (payloads two of which do not fit in one message buffer of the mpi conduit) and
//! Longs, many times the messages flow control lets be in flight to one peer, so
//! senders wait on back-pressure. Each Request handler replies (Short or Medium), so a
//! Reply sent under back-pressure polls for Replies only, which must never run a
//! Request handler (one would run inside another). Every Request and Reply carries its
//! sequence number, checked against the next one due from its sender, and its payload
//! is checked.
//!
//! Run with 1 to 5 ranks and `GEX_MPI_HOST_RANKS=1`: under the mpi conduit
//! (`GEX_TEST_CONDUIT=mpi`) every rank is its own host, so every message between two
//! ranks takes the network path (MPI point-to-point, with message aggregation and
//! credits); under the smp conduit the variable is ignored and the same floods go
//! through the shared-memory queues.
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use common::am::{base, BASES, TEAM};
use common::{pattern, poll_until, Errors};
use gex::am::max_args;
use gex::testing::{spmd_with, SpmdOptions};
use gex::{AmCategory, AmEntry, AmRole, Client, Flags, Lc, LcKind, Segment, Token};

/// Requests from each rank to each rank.
const FLOOD: u32 = 600;
/// Bytes of each Long payload, and the space each one has in the target's segment.
const LONG_LEN: usize = 40;
const LONG_SLOT: usize = 64;
/// Where the Longs from rank `s` land: `LONG_AT + (s * FLOOD + seq) * LONG_SLOT`.
const LONG_AT: usize = 4096;

static ERRORS: Errors = Errors::new();
/// The next Request and Reply sequence number due from each rank.
static NEXT_REQUEST: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static NEXT_REPLY: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static REQUESTS: AtomicUsize = AtomicUsize::new(0);
static REPLIES: AtomicUsize = AtomicUsize::new(0);
/// Set while a Request handler runs.
static IN_REQUEST: AtomicBool = AtomicBool::new(false);
static MAX_MEDIUM: AtomicUsize = AtomicUsize::new(0);
/// Handler indices, set once registered.
static REPLY_SHORT: AtomicUsize = AtomicUsize::new(0);
static REPLY_MEDIUM: AtomicUsize = AtomicUsize::new(0);

/// What the Request `seq` from any rank is: 0 a Short of 1 argument, 1 a Short of 16,
/// 2 and 4 Mediums, 3 a Long.
fn kind(seq: u32) -> u32 {
    seq % 5
}

/// The Medium payload length of Request `seq`: 0, 1, 64, 1000, 3000 bytes and the
/// maximum in turn, 64 for every second Medium.
fn medium_len(seq: u32) -> usize {
    if kind(seq) == 4 {
        return 64;
    }
    let max = MAX_MEDIUM.load(Ordering::Relaxed);
    [0, 1, 64, 1000, 3000, max][(seq as usize / 5) % 6].min(max)
}

/// The Reply to Request `seq`: a Medium of this length for every fourth, else a Short.
fn reply_len(seq: u32) -> Option<usize> {
    seq.is_multiple_of(4)
        .then(|| (seq as usize * 37) % MAX_MEDIUM.load(Ordering::Relaxed))
}

fn seed(src: u32, dst: u32, seq: u32, reply: bool) -> u64 {
    (u64::from(src) << 40) ^ (u64::from(dst) << 32) ^ u64::from(seq) ^ (u64::from(reply) << 63)
}

fn sixteen(src: u32, seq: u32) -> Vec<u32> {
    (0..16u32)
        .map(|j| {
            if j == 0 {
                seq
            } else {
                (src << 20) ^ seq.wrapping_mul(j)
            }
        })
        .collect()
}

fn long_addr(owner: u32, src: u32, seq: u32) -> usize {
    base(owner) + LONG_AT + (src as usize * FLOOD as usize + seq as usize) * LONG_SLOT
}

/// Counts `seq` from `src` in `next`, which must be the number due.
fn in_order(next: &Mutex<Vec<u32>>, src: u32, seq: u32, what: &str) {
    let mut next = next.lock().unwrap();
    let due = next[src as usize];
    ERRORS.check(seq == due, || {
        format!("{what} {seq} from rank {src} handled when {due} was due")
    });
    next[src as usize] = seq + 1;
}

/// Runs a Request handler's body, checking that no other runs around it.
fn request(token: &Token<'_>, seq: u32, body: impl FnOnce(u32)) {
    let src = token.src_rank();
    let nested = IN_REQUEST.swap(true, Ordering::Relaxed);
    ERRORS.check(!nested, || {
        format!("Request {seq} from rank {src} ran inside another Request handler")
    });
    in_order(&NEXT_REQUEST, src, seq, "Request");
    body(src);
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    let me = gex::job_rank();
    match reply_len(seq) {
        Some(len) => token
            .reply_medium(
                REPLY_MEDIUM.load(Ordering::Relaxed) as u8,
                &pattern(seed(me, src, seq, true), len),
                Lc::Now,
                Flags::NONE,
                &[seq, len as u32],
            )
            .unwrap(),
        None => token
            .reply_short(
                REPLY_SHORT.load(Ordering::Relaxed) as u8,
                &[seq],
                Flags::NONE,
            )
            .unwrap(),
    }
    IN_REQUEST.store(nested, Ordering::Relaxed);
}

fn short1(token: &Token<'_>, args: &[u32]) {
    request(token, args[0], |src| {
        ERRORS.check(kind(args[0]) == 0, || {
            format!("Short {} from rank {src}: a Short of 1 argument", args[0])
        });
    });
}

fn short16(token: &Token<'_>, args: &[u32]) {
    request(token, args[0], |src| {
        ERRORS.check(args == sixteen(src, args[0]), || {
            format!("Short {} from rank {src}: wrong arguments", args[0])
        });
    });
}

fn payload(token: &Token<'_>, data: &[u8], args: &[u32]) {
    let (seq, len) = (args[0], args[1] as usize);
    request(token, seq, |src| {
        let me = gex::job_rank();
        let long = token.info().is_long;
        let want_len = if long { LONG_LEN } else { medium_len(seq) };
        ERRORS.check(long == (kind(seq) == 3) && len == want_len, || {
            format!("Request {seq} from rank {src}: long {long}, {len} bytes")
        });
        ERRORS.check(data == pattern(seed(src, me, seq, false), want_len), || {
            format!("Request {seq} from rank {src}: payload differs")
        });
        if long {
            ERRORS.check(token.dest_addr() == long_addr(me, src, seq), || {
                format!("Long {seq} from rank {src}: dest_addr")
            });
        }
    });
}

fn reply_short(token: &Token<'_>, args: &[u32]) {
    let src = token.src_rank();
    in_order(&NEXT_REPLY, src, args[0], "Reply");
    ERRORS.check(reply_len(args[0]).is_none(), || {
        format!("Reply {} from rank {src}: a Short", args[0])
    });
    REPLIES.fetch_add(1, Ordering::Relaxed);
}

fn reply_medium(token: &Token<'_>, data: &[u8], args: &[u32]) {
    let (src, seq) = (token.src_rank(), args[0]);
    in_order(&NEXT_REPLY, src, seq, "Reply");
    let want = reply_len(seq);
    ERRORS.check(
        want == Some(data.len()) && args[1] as usize == data.len(),
        || {
            format!(
                "Reply {seq} from rank {src}: {} bytes, want {want:?}",
                data.len()
            )
        },
    );
    ERRORS.check(
        data == pattern(seed(src, gex::job_rank(), seq, true), data.len()),
        || format!("Reply {seq} from rank {src}: payload differs"),
    );
    REPLIES.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn floods_arrive_in_order_per_pair_and_network() {
    for n in 1..=5 {
        let opts = SpmdOptions {
            env: vec![("GEX_MPI_HOST_RANKS".into(), "1".into())],
            ..SpmdOptions::new(n)
        };
        spmd_with(opts, || {
            let (client, ep, team) = Client::init("AM_ORDER", Flags::NONE).unwrap();
            let mut table = vec![
                AmEntry::short("short1", AmRole::Request, 1, short1),
                AmEntry::short("short16", AmRole::Request, 16, short16),
                AmEntry::payload("payload", AmCategory::MedLong, AmRole::Request, 2, payload),
                AmEntry::short("reply short", AmRole::Reply, 1, reply_short),
                AmEntry::payload(
                    "reply medium",
                    AmCategory::Medium,
                    AmRole::Reply,
                    2,
                    reply_medium,
                ),
            ];
            ep.register_handlers(&mut table).unwrap();
            let [h_short1, h_short16, h_payload, h_reply_short, h_reply_medium] =
                [0, 1, 2, 3, 4].map(|i| table[i].index);
            REPLY_SHORT.store(h_reply_short.into(), Ordering::Relaxed);
            REPLY_MEDIUM.store(h_reply_medium.into(), Ordering::Relaxed);
            let size = team.size();
            let _ = TEAM.set(team);
            let _seg = Segment::attach(&team, 1 << 20).unwrap();
            let _ = BASES.set(common::segment_bases(&team));
            MAX_MEDIUM.store(
                team.max_request_medium(None, LcKind::Now, Flags::NONE, max_args())
                    .min(team.max_reply_medium(None, LcKind::Now, Flags::NONE, max_args())),
                Ordering::Relaxed,
            );
            *NEXT_REQUEST.lock().unwrap() = vec![0; size as usize];
            *NEXT_REPLY.lock().unwrap() = vec![0; size as usize];
            team.barrier(); // every rank's handlers can find the globals
            let me = team.rank();
            for seq in 0..FLOOD {
                for r in 0..size {
                    let data = |len| pattern(seed(me, r, seq, false), len);
                    match kind(seq) {
                        0 => team.request_short(r, h_short1, &[seq], Flags::NONE),
                        1 => team.request_short(r, h_short16, &sixteen(me, seq), Flags::NONE),
                        3 => team.request_long(
                            r,
                            h_payload,
                            &data(LONG_LEN),
                            long_addr(r, me, seq),
                            Lc::Now,
                            Flags::NONE,
                            &[seq, LONG_LEN as u32],
                        ),
                        _ => {
                            let len = medium_len(seq);
                            team.request_medium(
                                r,
                                h_payload,
                                &data(len),
                                Lc::Now,
                                Flags::NONE,
                                &[seq, len as u32],
                            )
                        }
                    }
                    .unwrap();
                }
            }
            let want = size as usize * FLOOD as usize;
            poll_until("every Request and Reply", 60, || {
                REQUESTS.load(Ordering::Relaxed) >= want && REPLIES.load(Ordering::Relaxed) >= want
            });
            team.barrier();
            ERRORS.assert_none();
            assert_eq!(REQUESTS.load(Ordering::Relaxed), want, "Requests handled");
            assert_eq!(REPLIES.load(Ordering::Relaxed), want, "Replies handled");
            assert!(NEXT_REQUEST.lock().unwrap().iter().all(|&s| s == FLOOD));
            assert!(NEXT_REPLY.lock().unwrap().iter().all(|&s| s == FLOOD));
            client.finalize();
        });
    }
}
