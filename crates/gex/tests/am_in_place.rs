//! `Team::request_medium_in_place`: a negotiated-payload Medium Request ("Negotiated-
//! payload AM APIs": `gex_AM_PrepareRequestMedium` with no client buffer, then
//! `gex_AM_CommitRequestMedium`) in one call, the payload written into the message slot
//! by a closure; and its misuse. 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{pattern, poll_until, Errors};
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmIndex, AmRole, Client, Flags, Lc, LcKind, Segment, Team, Token};

static ERRORS: Errors = Errors::new();
static RUNS: AtomicUsize = AtomicUsize::new(0);

fn seed(src: u32, dst: u32, i: u32) -> u64 {
    (u64::from(src) << 40) | (u64::from(dst) << 20) | u64::from(i)
}

/// Joins a job as client `name` with [`handler`] registered (its index returned) and a
/// segment attached.
fn join(name: &str) -> (Client, Team, AmIndex, Segment) {
    let (client, ep, team) = Client::init(name, Flags::NONE).unwrap();
    let mut t = [AmEntry::payload(
        "in_place",
        AmCategory::Medium,
        AmRole::Request,
        2,
        handler,
    )];
    ep.register_handlers(&mut t).unwrap();
    let seg = Segment::attach(&team, 1 << 20).unwrap();
    (client, team, t[0].index, seg)
}

/// args: [i, nbytes]: checks the payload that `src` wrote in place for message `i`.
fn handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let (src, me) = (token.info().src_rank, gex::job_rank());
    let (i, nbytes) = (args[0], args[1] as usize);
    ERRORS.check(payload.len() == nbytes, || {
        format!(
            "message {i} from {src}: {} bytes, want {nbytes}",
            payload.len()
        )
    });
    ERRORS.check(payload == &pattern(seed(src, me, i), nbytes)[..], || {
        format!("message {i} from {src}: payload")
    });
    RUNS.fetch_add(1, Ordering::Relaxed);
}

/// Messages of every length up to the maximum arrive whole, with their arguments; the
/// closure gets the whole payload area; messages it declines send nothing and give
/// their slot back (more of them than a queue has slots, so a slot kept would stall
/// the sends after it).
#[test]
fn in_place_requests_arrive_and_declined_ones_send_nothing() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, h, _seg) = join("AM_IN_PLACE");
            let me = team.rank();
            let max = team.max_request_medium(None, LcKind::Now, Flags::NONE, 2);
            let lengths = [0, 1, 7, 16, 17, 100, max - 1, max];
            let mut sent = 0;
            for r in 0..team.size() {
                for (i, &len) in lengths.iter().enumerate() {
                    let i = i as u32;
                    let data = pattern(seed(me, r, i), len);
                    let done = team
                        .request_medium_in_place(r, h, &[i, len as u32], Flags::NONE, |buf| {
                            assert_eq!(buf.len(), max, "the whole payload area");
                            buf[..len].copy_from_slice(&data);
                            Some(len)
                        })
                        .unwrap();
                    assert!(done);
                    sent += 1;
                }
                for _ in 0..600 {
                    let done = team
                        .request_medium_in_place(r, h, &[0, 0], Flags::NONE, |buf| {
                            buf[0] = 0xee;
                            None
                        })
                        .unwrap();
                    assert!(!done);
                }
            }
            team.barrier();
            poll_until("in-place requests", 10, || {
                RUNS.load(Ordering::Relaxed) >= sent
            });
            team.barrier();
            assert_eq!(RUNS.load(Ordering::Relaxed), sent, "declined ones ran");
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

/// Misuse fails naming the call and leaves the layer usable: more bytes than the
/// closure was given, communicating from the closure (as between a Prepare and its
/// Commit), a closure that panics, handler index 0. Each gives its slot back.
#[test]
fn in_place_misuse() {
    for n in [1, 3] {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, team, h, _seg) = join("AM_IN_PLACE_MISUSE");
            let me = team.rank();
            let peer = (me + 1) % team.size();
            let call = "Team::request_medium_in_place";
            for _ in 0..300 {
                common::expect_panic(&[call, "more than"], || {
                    team.request_medium_in_place(peer, h, &[0, 0], Flags::NONE, |buf| {
                        Some(buf.len() + 1)
                    })
                });
                common::expect_panic(&["between an AM Prepare and its Commit"], || {
                    team.request_medium_in_place(peer, h, &[0, 0], Flags::NONE, |_| {
                        let _ = team.request_medium(peer, h, &[], Lc::Now, Flags::NONE, &[0, 0]);
                        Some(0)
                    })
                });
                common::expect_panic(&["on purpose"], || {
                    team.request_medium_in_place(peer, h, &[0, 0], Flags::NONE, |_| {
                        panic!("on purpose")
                    })
                });
            }
            common::expect_panic(&[call, "handler index 0"], || {
                team.request_medium_in_place(peer, 0, &[0, 0], Flags::NONE, |_| Some(0))
            });
            // Still usable: one message arrives, and nothing else ran.
            let data = pattern(seed(me, peer, 9), 33);
            team.request_medium_in_place(peer, h, &[9, 33], Flags::NONE, |buf| {
                buf[..33].copy_from_slice(&data);
                Some(33)
            })
            .unwrap();
            team.barrier();
            poll_until("in-place request", 10, || RUNS.load(Ordering::Relaxed) >= 1);
            team.barrier();
            assert_eq!(
                RUNS.load(Ordering::Relaxed),
                1,
                "misused sends ran no handler"
            );
            ERRORS.assert_none();
            client.finalize();
        });
    }
}
