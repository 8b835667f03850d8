//! "Calls from restricted context": what AM handlers and code between an AM Prepare and
//! its Commit may and may not call, checked by the library with a panic naming the
//! call; and panics out of handlers, with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use common::{poll_until, try_panic_message, Errors};
use gex::testing::spmd;
use gex::{
    AmCategory, AmEntry, AmRole, Client, Event, EventCategory, Flags, Lc, LcKind, Segment, Team,
    Token,
};

const MB: usize = 1 << 20;

static TEAM: OnceLock<Team> = OnceLock::new();
static BASES: OnceLock<Vec<usize>> = OnceLock::new();
static INDICES: OnceLock<Vec<u8>> = OnceLock::new();
static ERRORS: Errors = Errors::new();
static REQUESTS: AtomicUsize = AtomicUsize::new(0);
static REPLIES: AtomicUsize = AtomicUsize::new(0);
static PAYLOAD_REPLIES: AtomicUsize = AtomicUsize::new(0);

fn team() -> Team {
    *TEAM.get().unwrap()
}

fn base(r: u32) -> usize {
    BASES.get().unwrap()[r as usize]
}

/// Handler indices: [request, reply, payload request, payload reply, long request].
fn idx(k: usize) -> u8 {
    INDICES.get().unwrap()[k]
}

const IN_HANDLER: &str = "inside an Active Message handler";

/// Calls `f`, which must panic with a message naming `call` and `why`; records an error
/// otherwise.
fn forbidden<R>(call: &str, why: &str, f: impl FnOnce() -> R) {
    let msg = try_panic_message(f);
    ERRORS.check(
        msg.as_deref()
            .is_some_and(|m| m.contains(call) && m.contains(why)),
        || format!("{call} from {why:?}: {msg:?}"),
    );
}

/// Every communication call the spec prohibits in handler context.
fn prohibited_calls(t: Team, why: &str) {
    let me = gex::job_rank();
    let addr = base(me);
    forbidden("Team::request_short", why, || {
        t.request_short(me, idx(0), &[], Flags::NONE)
    });
    forbidden("Team::request_short", why, || {
        t.request_short(me, idx(0), &[], Flags::IMMEDIATE)
    });
    forbidden("Team::request_medium", why, || {
        t.request_medium(me, idx(2), &[1], Lc::Now, Flags::NONE, &[])
    });
    forbidden("Team::request_long", why, || {
        t.request_long(me, idx(2), &[1], addr, Lc::Now, Flags::NONE, &[])
    });
    forbidden("Team::prepare_request_medium", why, || {
        t.prepare_request_medium(me, None, 1, 8, Lc::Now, Flags::NONE, 0)
            .map(|sd| sd.commit_medium(idx(2), 0, &[]))
    });
    forbidden("Team::put_blocking", why, || {
        t.put_blocking(me, addr, &[1], Flags::NONE)
    });
    forbidden("Team::get_blocking", why, || {
        t.get_blocking(&mut [0u8; 4], me, addr, Flags::NONE)
    });
    // SAFETY: with `Lc::Now` the source need only live through the call.
    forbidden("Team::put_nbi", why, || unsafe {
        t.put_nbi(me, addr, &[1], Lc::Now, Flags::NONE)
    });
    // SAFETY: as above.
    forbidden("Team::put_nb", why, || unsafe {
        t.put_nb(me, addr, &[1], Lc::Now, Flags::NONE)
            .map(Event::wait)
    });
    // (names Team::put_blocking, to which it delegates: see errors.rs)
    forbidden("Team::put_", why, || {
        t.put_val_blocking(me, addr, 1, 1, Flags::NONE)
    });
    forbidden("Team::get_val", why, || t.get_val(me, addr, 1, Flags::NONE));
    forbidden("poll", why, gex::poll);
    forbidden("Team::barrier_nb", why, || t.barrier());
    forbidden("Team::barrier_nb", why, || t.barrier_nb().wait());
    forbidden("Team::segment_bound", why, || t.segment_bound(me));
    forbidden("Event::wait", why, || Event::invalid().wait());
    forbidden("Event::test", why, || Event::invalid().test());
    forbidden("Event::wait_all", why, || {
        Event::wait_all(&mut [Event::invalid()])
    });
    forbidden("nbi_wait", why, || gex::nbi_wait(EventCategory::ALL));
    forbidden("nbi_test", why, || gex::nbi_test(EventCategory::ALL));
    forbidden("nbi_begin_access_region", why, gex::nbi_begin_access_region);
    forbidden("nbi_end_access_region", why, gex::nbi_end_access_region);
    forbidden("Segment::attach", why, || {
        Segment::attach(&t, gex::PAGE_SIZE)
    });
    forbidden("Client::finalize", why, || t.client().finalize());
}

/// Queries the spec allows in handler context; checks they work there.
fn allowed_calls(t: Team, token: &Token<'_>) {
    let me = gex::job_rank();
    let ok = try_panic_message(|| {
        assert_eq!(gex::job_size(), t.size());
        assert_eq!(me, t.rank());
        let nb = gex::nbrhd_info();
        assert_eq!(nb.members[nb.my_index as usize], me);
        let _ = gex::host_info();
        let _ = gex::my_position();
        let _ = t.cdata();
        t.client().set_cdata(None);
        let _ = t.endpoint().cdata();
        let seg = t.endpoint().segment().expect("attached");
        assert_eq!(seg.addr() as usize, base(me));
        let _ = seg.cdata();
        let _ = t.client().name();
        assert!(t.max_request_medium(None, LcKind::Now, Flags::NONE, 0) >= 512);
        assert!(gex::am::lub_request_long() >= 512);
        assert!(token.max_reply_medium(LcKind::Now, Flags::NONE, 1) >= 512);
        let _ = token.info();
        let _ = gex::max_segment_size();
        let _ = gex::am::max_args();
    });
    ERRORS.check(ok.is_none(), || {
        format!("an allowed query failed in a handler: {ok:?}")
    });
}

fn request_handler(token: &Token<'_>, args: &[u32]) {
    let t = team();
    let src = token.src_rank();
    allowed_calls(t, token);
    prohibited_calls(t, IN_HANDLER);
    // The one Reply is allowed; a second is not, whatever its kind.
    ERRORS.check(
        token
            .reply_short(idx(1), &[args[0] + 1], Flags::NONE)
            .is_ok(),
        || "the first Reply".into(),
    );
    forbidden("Token::reply_short", "already sent", || {
        token.reply_short(idx(1), &[0], Flags::NONE)
    });
    forbidden("Token::reply_medium", "already sent", || {
        token.reply_medium(idx(3), &[1], Lc::Now, Flags::NONE, &[])
    });
    forbidden("Token::reply_long", "already sent", || {
        token.reply_long(idx(3), &[1], base(src), Lc::Now, Flags::NONE, &[])
    });
    forbidden("Token::prepare_reply_medium", "already sent", || {
        token
            .prepare_reply_medium(None, 1, 8, Lc::Now, Flags::NONE, 0)
            .map(|sd| sd.commit_medium(idx(3), 0, &[]))
    });
    REQUESTS.fetch_add(1, Ordering::Relaxed);
}

fn reply_handler(token: &Token<'_>, args: &[u32]) {
    let t = team();
    ERRORS.check(args[0] == 43, || format!("reply args {args:?}"));
    allowed_calls(t, token);
    prohibited_calls(t, IN_HANDLER);
    let why = "may only be sent from a Request handler";
    forbidden("Token::reply_short", why, || {
        token.reply_short(idx(1), &[0], Flags::NONE)
    });
    forbidden("Token::reply_medium", why, || {
        token.reply_medium(idx(3), &[1], Lc::Now, Flags::NONE, &[])
    });
    forbidden("Token::reply_long", why, || {
        token.reply_long(
            idx(3),
            &[1],
            base(token.src_rank()),
            Lc::Now,
            Flags::NONE,
            &[],
        )
    });
    forbidden("Token::prepare_reply_long", why, || {
        token
            .prepare_reply_long(None, 1, 8, None, Lc::Now, Flags::NONE, 0)
            .map(|sd| sd.commit_long(idx(3), 0, base(token.src_rank()), &[]))
    });
    REPLIES.fetch_add(1, Ordering::Relaxed);
}

/// Payload Request: a negotiated Reply; between its Prepare and Commit, nothing else.
fn payload_request(token: &Token<'_>, payload: &[u8], _args: &[u32]) {
    ERRORS.check(payload == [1, 2, 3], || "payload".into());
    let mut sd = token
        .prepare_reply_medium(None, 4, 4, Lc::Now, Flags::NONE, 0)
        .unwrap();
    prohibited_calls(team(), IN_HANDLER);
    forbidden("Token::reply_short", "already sent", || {
        token.reply_short(idx(1), &[0], Flags::NONE)
    });
    sd.buffer_mut().unwrap().copy_from_slice(&[4, 5, 6, 7]);
    sd.commit_medium(idx(3), 4, &[]);
}

fn payload_reply(_token: &Token<'_>, payload: &[u8], _args: &[u32]) {
    ERRORS.check(payload == [4, 5, 6, 7], || "reply payload".into());
    PAYLOAD_REPLIES.fetch_add(1, Ordering::Relaxed);
}

static LONGS: AtomicUsize = AtomicUsize::new(0);

fn long_request(token: &Token<'_>, payload: &[u8], _args: &[u32]) {
    ERRORS.check(payload == [1, 2, 3], || "long payload".into());
    ERRORS.check(token.dest_addr() == base(gex::job_rank()) + 4096, || {
        "long dest".into()
    });
    LONGS.fetch_add(1, Ordering::Relaxed);
}

fn init(name: &str) -> (Client, Team, Segment) {
    common::quiet_expected_panics();
    let (client, ep, team) = Client::init(name, Flags::NONE).unwrap();
    let mut t = [
        AmEntry::short("ctx_request", AmRole::Request, 1, request_handler),
        AmEntry::short("ctx_reply", AmRole::Reply, 1, reply_handler),
        AmEntry::payload(
            "ctx_preq",
            AmCategory::Medium,
            AmRole::Request,
            0,
            payload_request,
        ),
        AmEntry::payload(
            "ctx_prep",
            AmCategory::Medium,
            AmRole::Reply,
            0,
            payload_reply,
        ),
        AmEntry::payload(
            "ctx_long",
            AmCategory::Long,
            AmRole::Request,
            0,
            long_request,
        ),
    ];
    ep.register_handlers(&mut t).unwrap();
    let _ = INDICES.set(t.iter().map(|e| e.index).collect());
    let _ = TEAM.set(team);
    let seg = Segment::attach(&team, MB).unwrap();
    let _ = BASES.set(common::segment_bases(&team));
    team.barrier(); // every rank's handlers can find the globals
    (client, team, seg)
}

/// In a Request handler: every communication call (Requests, Prepare, put, get, poll,
/// barrier, segment_bound, event test/wait, NBI sync, attach, finalize) fails naming
/// the call; the queries the spec lists (job rank/size, nbrhd/host, CData, `Query*`,
/// `Max*`, `LUB*`, `Token_Info`) work; one Reply is allowed and a second one (of any
/// kind, fixed or negotiated) fails with "already sent". In a Reply handler the same
/// calls fail, and any Reply fails ("a Reply may only be sent from a Request handler").
#[test]
fn handler_context_rules() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, _seg) = init("CTX_HANDLER");
            for r in 0..team.size() {
                team.request_short(r, idx(0), &[42], Flags::NONE).unwrap();
                team.request_medium(r, idx(2), &[1, 2, 3], Lc::Now, Flags::NONE, &[])
                    .unwrap();
            }
            let size = team.size() as usize;
            poll_until("replies", 10, || {
                REPLIES.load(Ordering::Relaxed) >= size
                    && PAYLOAD_REPLIES.load(Ordering::Relaxed) >= size
            });
            team.barrier();
            assert_eq!(REQUESTS.load(Ordering::Relaxed), size);
            assert_eq!(REPLIES.load(Ordering::Relaxed), size);
            assert_eq!(PAYLOAD_REPLIES.load(Ordering::Relaxed), size);
            ERRORS.assert_none();
            // Outside handlers the same calls work again.
            team.put_blocking(
                team.rank(),
                gex::PAGE_SIZE + base(team.rank()),
                &[1],
                Flags::NONE,
            )
            .unwrap();
            gex::poll();
            client.finalize();
        });
    }
}

/// "in the interval between a Prepare and Commit, the client is bound by the same
/// restrictions as in an Active Message Reply handler (ie all communication calls are
/// prohibited). Prepare/commit pairs do not nest": outside any handler, every
/// communication call between a Prepare and its Commit fails naming the call, and works
/// again after the Commit.
#[test]
fn no_communication_between_prepare_and_commit() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, _seg) = init("CTX_PREPARE");
            let me = team.rank();
            let peer = (me + 1) % team.size();
            let buf = [1u8, 2, 3];
            for long in [false, true] {
                let sd = if long {
                    team.prepare_request_long(peer, Some(&buf), 3, 3, None, Lc::Now, Flags::NONE, 0)
                } else {
                    team.prepare_request_medium(peer, Some(&buf), 3, 3, Lc::Now, Flags::NONE, 0)
                }
                .unwrap();
                let between = "between an AM Prepare and its Commit";
                prohibited_calls(team, between);
                forbidden("Team::prepare_request_long", between, || {
                    team.prepare_request_long(peer, None, 1, 1, None, Lc::Now, Flags::NONE, 0)
                        .map(|sd| sd.commit_long(idx(2), 0, 0, &[]))
                });
                ERRORS.assert_none();
                if long {
                    sd.commit_long(idx(4), 3, base(peer) + 4096, &[]);
                } else {
                    sd.commit_medium(idx(2), 3, &[]);
                }
            }
            // After the Commit, communication works again.
            team.request_short(peer, idx(0), &[42], Flags::NONE)
                .unwrap();
            poll_until("replies", 10, || {
                REPLIES.load(Ordering::Relaxed) >= 1
                    && PAYLOAD_REPLIES.load(Ordering::Relaxed) >= 1
                    && LONGS.load(Ordering::Relaxed) >= 1
            });
            team.barrier();
            assert_eq!(LONGS.load(Ordering::Relaxed), 1);
            assert_eq!(PAYLOAD_REPLIES.load(Ordering::Relaxed), 1);
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

mod caught {
    use super::*;
    pub(crate) static RUNS: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static BOOMS: AtomicUsize = AtomicUsize::new(0);

    pub(crate) static GO: AtomicUsize = AtomicUsize::new(0);

    pub(crate) fn go(_token: &Token<'_>, _args: &[u32]) {
        GO.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn maybe_panic(_token: &Token<'_>, args: &[u32]) {
        if args[0] == 0 {
            panic!("boom in handler");
        }
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    /// Polls, catching (and counting) a handler's panic coming out of `gex::poll`.
    pub(crate) fn poll() {
        if let Some(msg) = try_panic_message(gex::poll) {
            assert!(msg.contains("boom in handler"), "unexpected panic: {msg}");
            BOOMS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A panic in a handler propagates out of `gex::poll` in the receiving rank; a program
/// that catches it there can go on: the message's queue slot is freed, so later
/// messages (more than a queue's worth) still get through.
#[test]
fn handler_panic_caught_out_of_poll_leaves_queue_usable() {
    const MORE: usize = 600;
    for n in 1..=3 {
        let opts = gex::testing::SpmdOptions {
            timeout: std::time::Duration::from_secs(20),
            ..gex::testing::SpmdOptions::new(n)
        };
        gex::testing::spmd_with(opts, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("CTX_CAUGHT", Flags::NONE).unwrap();
            let mut t = [AmEntry::short(
                "maybe_panic",
                AmRole::Request,
                1,
                caught::maybe_panic,
            )];
            ep.register_handlers(&mut t).unwrap();
            let _seg = Segment::attach(&team, MB).unwrap();
            let h = t[0].index;
            let me = team.rank();
            let senders = if team.size() == 1 {
                1
            } else {
                team.size() as usize - 1
            };
            // Rank 0 sends the panicking message to itself and catches it in its own
            // poll loop below (a message from another rank could land in any poll,
            // such as a barrier's, outside the catch).
            let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
            if me == 0 {
                team.request_short(0, h, &[0], Flags::NONE).unwrap();
                while caught::BOOMS.load(Ordering::Relaxed) < 1 {
                    caught::poll();
                }
            }
            // Everything below is sent after the panicking message was handled.
            team.barrier();
            if me != 0 || team.size() == 1 {
                // IMMEDIATE sends never poll; we poll (catching) only when refused.
                for k in 1..=MORE {
                    while team.request_short(0, h, &[1], Flags::IMMEDIATE).is_err() {
                        assert!(
                            std::time::Instant::now() < end,
                            "rank 0's queue never drained: {k} of {} messages sent after a caught handler panic",
                            MORE + 1
                        );
                        caught::poll();
                    }
                }
            }
            if me == 0 {
                while caught::RUNS.load(Ordering::Relaxed) < senders * MORE
                    || caught::BOOMS.load(Ordering::Relaxed) < 1
                {
                    assert!(
                        std::time::Instant::now() < end,
                        "rank 0 ran {} handlers and caught {} panics",
                        caught::RUNS.load(Ordering::Relaxed),
                        caught::BOOMS.load(Ordering::Relaxed)
                    );
                    caught::poll();
                }
                assert_eq!(caught::BOOMS.load(Ordering::Relaxed), 1);
            }
            team.barrier();
            assert_eq!(
                caught::RUNS.load(Ordering::Relaxed),
                if me == 0 { senders * MORE } else { 0 }
            );
            client.finalize();
        });
    }
}

mod scoped {
    use super::*;
    pub(crate) static REPLIED: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static REPLY_HANDLER: OnceLock<u8> = OnceLock::new();

    /// Tries a negotiated Reply inside a Prepare scope (refused before a slot is
    /// claimed), then sends its Reply.
    pub(crate) fn request(token: &Token<'_>, _args: &[u32]) {
        let reply = *REPLY_HANDLER.get().unwrap();
        let scope = gex::layered::PrepareScope::enter("test scope");
        let msg = try_panic_message(|| {
            token
                .prepare_reply_medium(None, 8, 8, Lc::Now, Flags::NONE, 0)
                .map(|sd| sd.commit_medium(reply, 0, &[]))
        });
        drop(scope);
        ERRORS.check(
            msg.as_deref().is_some_and(|m| {
                m.contains("Token::prepare_reply_medium")
                    && m.contains("between an AM Prepare and its Commit")
            }),
            || format!("a negotiated Reply inside a Prepare scope: {msg:?}"),
        );
        token.reply_short(reply, &[], Flags::NONE).unwrap();
    }

    pub(crate) fn reply(_token: &Token<'_>, _args: &[u32]) {
        REPLIED.fetch_add(1, Ordering::Relaxed);
    }
}

/// A Reply refused because its handler is between a Prepare and its Commit is refused
/// before it claims a slot of the requester's Reply queue: the Replies sent after it
/// still arrive (a claimed slot never published would stop that queue for good).
#[test]
fn a_reply_refused_inside_a_prepare_keeps_the_reply_queue_moving() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("CTX_SCOPED", Flags::NONE).unwrap();
            let mut t = [
                AmEntry::short("scoped_request", AmRole::Request, 0, scoped::request),
                AmEntry::short("scoped_reply", AmRole::Reply, 0, scoped::reply),
            ];
            ep.register_handlers(&mut t).unwrap();
            let _ = scoped::REPLY_HANDLER.set(t[1].index);
            let _seg = Segment::attach(&team, MB).unwrap();
            let peer = (team.rank() + 1) % team.size();
            for round in 1..=3 {
                team.request_short(peer, t[0].index, &[], Flags::NONE)
                    .unwrap();
                poll_until("the Reply", 10, || {
                    scoped::REPLIED.load(Ordering::Relaxed) >= round
                });
            }
            team.barrier();
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

/// A handler's panic caught out of `gex::poll`, for messages from another rank (on
/// another host under mpirun with one rank per host): more of them than a receiver
/// has receive slots or a sender has credits, and each frees its slot and credit, so
/// the messages after them still arrive.
#[test]
fn handler_panics_caught_for_another_ranks_messages_free_their_slots() {
    const PANICS: usize = 40;
    let opts = gex::testing::SpmdOptions {
        timeout: std::time::Duration::from_secs(30),
        ..gex::testing::SpmdOptions::new(2)
    };
    gex::testing::spmd_with(opts, || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("CTX_CAUGHT_REMOTE", Flags::NONE).unwrap();
        let mut t = [
            AmEntry::short("maybe_panic", AmRole::Request, 1, caught::maybe_panic),
            AmEntry::short("go", AmRole::Request, 0, caught::go),
        ];
        ep.register_handlers(&mut t).unwrap();
        let _seg = Segment::attach(&team, MB).unwrap();
        let h = t[0].index;
        if team.rank() == 1 {
            // Only once rank 0 polls inside its catch (not in a barrier's poll).
            poll_until("rank 0's go", 10, || {
                caught::GO.load(Ordering::Relaxed) >= 1
            });
            // One at a time, each acknowledged, so that each travels alone.
            for k in 0..PANICS {
                team.request_short(0, h, &[0], Flags::NONE).unwrap();
                poll_until("rank 0's acknowledgement", 10, || {
                    caught::GO.load(Ordering::Relaxed) > k + 1
                });
            }
            team.request_short(0, h, &[1], Flags::NONE).unwrap();
        } else {
            team.request_short(1, t[1].index, &[], Flags::NONE).unwrap();
            // Every poll of rank 0 catches, until all arrived; each panic caught is
            // acknowledged.
            let mut acked = 0;
            while caught::BOOMS.load(Ordering::Relaxed) < PANICS
                || caught::RUNS.load(Ordering::Relaxed) < 1
            {
                caught::poll();
                if caught::BOOMS.load(Ordering::Relaxed) > acked {
                    acked += 1;
                    team.request_short(1, t[1].index, &[], Flags::NONE).unwrap();
                }
            }
        }
        team.barrier();
        client.finalize();
    });
}
