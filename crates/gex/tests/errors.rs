//! Erroneous calls fail with a panic naming the call and what was wrong: ranks outside
//! the team ("rank == GEX_RANK_INVALID is *not* permitted", "Requires 0 <= rank <
//! gex_TM_QuerySize(tm)"), addresses outside the target's segment, oversized payloads,
//! too many arguments, and calls before `Client::init`.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{expect_panic, poll_until};
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmRole, Client, Flags, Lc, LcKind, Segment, Token};

const SEG: usize = 16 * gex::PAGE_SIZE;
static RUNS: AtomicUsize = AtomicUsize::new(0);

fn sink(_token: &Token<'_>, _payload: &[u8], _args: &[u32]) {
    RUNS.fetch_add(1, Ordering::Relaxed);
}

fn short_sink(_token: &Token<'_>, _args: &[u32]) {
    RUNS.fetch_add(1, Ordering::Relaxed);
}

/// A rank equal to the team size (or larger) is refused by every call that takes one.
#[test]
fn invalid_rank_names_the_call() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("ERR_RANK", Flags::NONE).unwrap();
            let mut t = [
                AmEntry::short("short_sink", AmRole::Request, 0, short_sink),
                AmEntry::payload("sink", AmCategory::MedLong, AmRole::Request, 0, sink),
            ];
            ep.register_handlers(&mut t).unwrap();
            let (hs, hp) = (t[0].index, t[1].index);
            let _seg = Segment::attach(&team, SEG).unwrap();
            let addr = team.segment_bound(0).unwrap().owner_addr;
            let size = team.size();
            for bad in [size, size + 1, u32::MAX] {
                let what = format!("rank {bad} is not in the team (size {size})");
                let w = what.as_str();
                expect_panic(&["gex::Team::request_short", w], || {
                    team.request_short(bad, hs, &[], Flags::NONE)
                });
                expect_panic(&["gex::Team::request_medium", w], || {
                    team.request_medium(bad, hp, &[1], Lc::Now, Flags::NONE, &[])
                });
                expect_panic(&["gex::Team::request_long", w], || {
                    team.request_long(bad, hp, &[1], addr, Lc::Now, Flags::NONE, &[])
                });
                expect_panic(&["gex::Team::put_blocking", w], || {
                    team.put_blocking(bad, addr, &[1], Flags::NONE)
                });
                expect_panic(&["gex::Team::get_blocking", w], || {
                    team.get_blocking(&mut [0u8; 1], bad, addr, Flags::NONE)
                });
                // SAFETY: with `Lc::Now` the source need only live through the call.
                expect_panic(&["gex::Team::put_nbi", w], || unsafe {
                    team.put_nbi(bad, addr, &[1], Lc::Now, Flags::NONE)
                });
                // SAFETY: the bad rank is refused before the get starts, so the
                // temporary destination is never written.
                expect_panic(&["gex::Team::get_nb", w], || unsafe {
                    team.get_nb([0u8; 1].as_mut_ptr(), bad, addr, 1, Flags::NONE)
                        .map(gex::Event::wait)
                });
                expect_panic(&["gex::Team::get_val", w], || {
                    team.get_val(bad, addr, 4, Flags::NONE)
                });
                expect_panic(&["gex::Team::segment_bound", w], || team.segment_bound(bad));
                expect_panic(&["gex::Team::prepare_request_medium", w], || {
                    team.prepare_request_medium(bad, None, 1, 1, Lc::Now, Flags::NONE, 0)
                        .map(|sd| sd.commit_medium(hp, 0, &[]))
                });
            }
            // Nothing was sent.
            team.barrier();
            for _ in 0..10 {
                gex::poll();
            }
            assert_eq!(RUNS.load(Ordering::Relaxed), 0);
            client.finalize();
        });
    }
}

/// Addresses just past the end of the target's segment, ranges that cross its end, and
/// addresses before its start are refused by put, get and Long Requests, naming the
/// call and "outside the segment"; the last byte and a 0-byte range at the very end are
/// fine.
#[test]
fn out_of_segment_names_the_call() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("ERR_SEGMENT", Flags::NONE).unwrap();
            let mut t = [AmEntry::payload(
                "sink",
                AmCategory::MedLong,
                AmRole::Request,
                0,
                sink,
            )];
            ep.register_handlers(&mut t).unwrap();
            let h = t[0].index;
            let _seg = Segment::attach(&team, SEG).unwrap();
            let bases = common::segment_bases(&team);
            let mut sent = 0;
            for r in 0..team.size() {
                let b = bases[r as usize];
                let end = b + SEG;
                let outside = "outside the segment";
                for (addr, len) in [
                    (end, 1),
                    (end - 4, 8),
                    (end - 1, 2),
                    (b - 1, 1),
                    (b - 8, 16),
                    (end + 4096, 1),
                    (b, SEG + 1),
                ] {
                    let buf = vec![0u8; len];
                    expect_panic(&["gex::Team::put_blocking", outside], || {
                        team.put_blocking(r, addr, &buf, Flags::NONE)
                    });
                    expect_panic(&["gex::Team::get_blocking", outside], || {
                        team.get_blocking(&mut vec![0u8; len], r, addr, Flags::NONE)
                    });
                    // SAFETY: with `Lc::Now` the source need only live through the call.
                    expect_panic(&["gex::Team::put_nb", outside], || unsafe {
                        team.put_nb(r, addr, &buf, Lc::Now, Flags::NONE)
                            .map(gex::Event::wait)
                    });
                    // SAFETY: the range is refused before the get starts, so the
                    // temporary destination is never written.
                    expect_panic(&["gex::Team::get_nbi", outside], || unsafe {
                        team.get_nbi(vec![0u8; len].as_mut_ptr(), r, addr, len, Flags::NONE)
                    });
                    expect_panic(&["gex::Team::request_long", outside], || {
                        team.request_long(r, h, &buf, addr, Lc::Now, Flags::NONE, &[])
                    });
                    // (SrcDesc::commit_long: see commit_long_out_of_segment_leaves_queue_usable)
                    if len <= 8 && addr >= b {
                        expect_panic(&["gex::Team::get_val", outside], || {
                            team.get_val(r, addr, len, Flags::NONE)
                        });
                    }
                }
                // At the edges: fine.
                team.get_blocking(&mut [0u8; 1], r, end - 1, Flags::NONE)
                    .unwrap();
                team.get_blocking(&mut [], r, end, Flags::NONE).unwrap();
                team.get_blocking(&mut vec![0u8; SEG], r, b, Flags::NONE)
                    .unwrap();
                team.request_long(r, h, &[], end, Lc::Now, Flags::NONE, &[])
                    .unwrap();
                sent += 1;
            }
            poll_until("the 0-byte Longs", 10, || {
                RUNS.load(Ordering::Relaxed) >= team.size() as usize
            });
            team.barrier();
            assert_eq!(
                RUNS.load(Ordering::Relaxed),
                sent,
                "only the valid Longs ran handlers"
            );
            client.finalize();
        });
    }
}

/// A Medium payload over `gex_AM_MaxRequestMedium`, more than `gex_AM_MaxArgs()`
/// arguments, handler index 0, and RMA before the peer has a segment are refused.
#[test]
fn oversized_payloads_and_bad_arguments() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("ERR_SIZES", Flags::NONE).unwrap();
            let mut t = [
                AmEntry::payload("sink", AmCategory::MedLong, AmRole::ReqRep, 0, sink),
                AmEntry::short("short_sink", AmRole::Request, 0, short_sink),
            ];
            ep.register_handlers(&mut t).unwrap();
            let (h, hs) = (t[0].index, t[1].index);
            let me = team.rank();
            // Before attach: no segment anywhere.
            expect_panic(&["gex::Team::put_blocking", "has no bound segment"], || {
                team.put_blocking(me, 4096, &[1], Flags::NONE)
            });
            expect_panic(&["gex::Team::request_long", "has no bound segment"], || {
                team.request_long(me, h, &[1], 4096, Lc::Now, Flags::NONE, &[])
            });
            let _seg = Segment::attach(&team, SEG).unwrap();
            let max = team.max_request_medium(Some(me), LcKind::Now, Flags::NONE, 0);
            let big = vec![0u8; max + 1];
            expect_panic(
                &["gex::Team::request_medium", "exceeds the Medium maximum"],
                || team.request_medium(me, h, &big, Lc::Now, Flags::NONE, &[]),
            );
            expect_panic(
                &["gex::Team::request_medium", "exceeds the Medium maximum"],
                || team.request_medium(me, h, &vec![0u8; 10 * max], Lc::Now, Flags::NONE, &[]),
            );
            let args = [0u32; 17];
            expect_panic(&["gex::Team::request_short", "17 arguments"], || {
                team.request_short(me, hs, &args, Flags::NONE)
            });
            expect_panic(&["gex::Team::request_medium", "17 arguments"], || {
                team.request_medium(me, h, &[], Lc::Now, Flags::NONE, &args)
            });
            expect_panic(&["gex::Team::request_short", "index 0"], || {
                team.request_short(me, 0, &[], Flags::NONE)
            });
            // Max-sized Medium is fine.
            team.request_medium(me, h, &big[..max], Lc::Now, Flags::NONE, &[])
                .unwrap();
            poll_until("the max Medium", 10, || RUNS.load(Ordering::Relaxed) == 1);
            team.barrier();
            client.finalize();
        });
    }
}

/// What a Reply to one of the library's own handlers from a client's Request handler
/// says (`None`: it was sent).
static LIBRARY_REPLY: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// A client's Request handler that tries to Reply to index 2, one of the library's
/// handlers (below `AM_INDEX_BASE`), and then replies properly.
fn replies_to_the_library(token: &Token<'_>, _args: &[u32]) {
    if !token.info().is_request {
        return;
    }
    let msg = common::try_panic_message(|| {
        token.reply_medium(2, &[0; 8], Lc::Now, Flags::NONE, &[0, 0, 8, 0])
    });
    *LIBRARY_REPLY.lock().unwrap() = Some(msg.unwrap_or_default());
    token
        .reply_short(token.info().entry.index, &[], Flags::NONE)
        .unwrap();
}

/// A client's messages may name only a client's handlers (`GEX_AM_INDEX_BASE` to 255):
/// the library's own, below, trust their arguments (an address to write, an operation
/// to count), so a Request or Reply of the client that names one fails naming the
/// call, on every path a message leaves by, before anything is sent.
#[test]
fn client_messages_may_not_name_the_librarys_handlers() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("ERR_LIBRARY", Flags::NONE).unwrap();
            let mut t = [
                AmEntry::payload("sink", AmCategory::MedLong, AmRole::Request, 0, sink),
                AmEntry::short("replier", AmRole::ReqRep, 0, replies_to_the_library),
            ];
            ep.register_handlers(&mut t).unwrap();
            let _seg = Segment::attach(&team, SEG).unwrap();
            let peer = (team.rank() + 1) % team.size();
            let at = team.segment_bound(peer).unwrap().owner_addr;
            let own = "is one of the library's own";
            for h in [1, 2, 127] {
                expect_panic(&["gex::Team::request_short", own], || {
                    team.request_short(peer, h, &[0, 0], Flags::NONE)
                });
                expect_panic(&["gex::Team::request_medium", own], || {
                    team.request_medium(peer, h, &[0; 8], Lc::Now, Flags::NONE, &[0; 4])
                });
                expect_panic(&["gex::Team::request_long", own], || {
                    team.request_long(peer, h, &[0; 8], at, Lc::Now, Flags::NONE, &[0; 4])
                });
                expect_panic(&["gex::Team::request_medium_in_place", own], || {
                    team.request_medium_in_place(peer, h, &[0; 4], Flags::NONE, |_| Some(8))
                });
                let sd = team
                    .prepare_request_medium(peer, None, 8, 8, Lc::Now, Flags::NONE, 4)
                    .unwrap();
                expect_panic(&["gex::SrcDesc::commit_medium", own], move || {
                    sd.commit_medium(h, 8, &[0; 4])
                });
            }
            // The layer is still usable, and a client handler's Reply to a library
            // handler is refused too.
            team.request_short(peer, t[1].index, &[], Flags::NONE)
                .unwrap();
            poll_until("the replier's answer", 10, || {
                LIBRARY_REPLY.lock().unwrap().is_some()
            });
            let msg = LIBRARY_REPLY.lock().unwrap().clone().unwrap();
            assert!(
                msg.contains("gex::Token::reply_medium") && msg.contains(own),
                "a client handler's Reply to handler 2: {msg:?}"
            );
            team.barrier();
            client.finalize();
        });
    }
}

/// The value-based puts name themselves in their errors (not the call they delegate to).
#[test]
fn value_puts_name_themselves() {
    spmd(1, || {
        common::quiet_expected_panics();
        let (client, _ep, team) = Client::init("ERR_VALNAME", Flags::NONE).unwrap();
        let _seg = Segment::attach(&team, SEG).unwrap();
        let end = team.segment_bound(0).unwrap().owner_addr + SEG;
        let msg = expect_panic(&["outside the segment"], || {
            team.put_val_blocking(0, end, 1, 4, Flags::NONE)
        });
        assert!(msg.starts_with("gex::Team::put_val_blocking:"), "{msg}");
        let msg = expect_panic(&["not in the team"], || {
            team.put_val_blocking(1, end - 8, 1, 4, Flags::NONE)
        });
        assert!(msg.starts_with("gex::Team::put_val_blocking:"), "{msg}");
        let msg = expect_panic(&["outside the segment"], || {
            team.put_val_nbi(0, end, 1, 4, Flags::NONE)
        });
        assert!(msg.starts_with("gex::Team::put_val_nbi:"), "{msg}");
        client.finalize();
    });
}

/// Calls before `Client::init` fail saying the layer is not initialized, naming the
/// call. (Runs in the test process itself, which never initializes; `Team`, `Client`
/// and `Endpoint` values only come from `Client::init`, so their methods cannot be
/// reached before it.)
#[test]
fn calls_before_init() {
    common::quiet_expected_panics();
    let ni = "not initialized";
    expect_panic(&["gex::job_rank", ni], gex::job_rank);
    expect_panic(&["gex::job_size", ni], gex::job_size);
    expect_panic(&["gex::max_segment_size", ni], gex::max_segment_size);
    expect_panic(&["gex::nbrhd_info", ni], gex::nbrhd_info);
    expect_panic(&["gex::host_info", ni], gex::host_info);
    expect_panic(&["gex::my_position", ni], gex::my_position);
    expect_panic(&["gex::poll", ni], gex::poll);
    expect_panic(&["gex::nbi_wait", ni], || {
        gex::nbi_wait(gex::EventCategory::ALL)
    });
    expect_panic(
        &["gex::lub_request_medium", ni],
        gex::am::lub_request_medium,
    );
    expect_panic(&["gex::lub_reply_long", ni], gex::am::lub_reply_long);
    expect_panic(&["gex::Event::wait_all", ni], || {
        gex::Event::wait_all(&mut [])
    });
    // Pure local operations need no runtime.
    assert!(gex::Event::invalid().is_invalid());
    assert!(gex::nbi_test(gex::EventCategory::ALL));
    let l = gex::Hsl::new();
    assert!(l.try_lock());
    l.unlock();
}

/// Calls after `Client::finalize` fail saying so and naming the call, instead of
/// reaching a conduit that finalized (under `mpirun`, MPI after `MPI_Finalize`).
#[test]
fn calls_after_finalize() {
    spmd(2, || {
        common::quiet_expected_panics();
        let (client, _ep, team) = Client::init("ERR_AFTER", Flags::NONE).unwrap();
        let peer = (team.rank() + 1) % team.size();
        client.finalize();
        let gone = "called after Client::finalize";
        expect_panic(&["gex::poll", gone], gex::poll);
        expect_panic(&["gex::job_rank", gone], gex::job_rank);
        expect_panic(&["gex::Team::barrier", gone], || team.barrier());
        expect_panic(&["gex::Team::request_short", gone], || {
            team.request_short(peer, 0, &[], Flags::NONE).unwrap()
        });
    });
}

/// A negotiated Long whose Commit names an address outside the target's segment fails
/// naming `SrcDesc::commit_long`, and leaves the target's queue usable: later messages
/// to that rank still arrive.
#[test]
fn commit_long_out_of_segment_leaves_queue_usable() {
    let opts = gex::testing::SpmdOptions {
        timeout: std::time::Duration::from_secs(15),
        ..gex::testing::SpmdOptions::new(2)
    };
    gex::testing::spmd_with(opts, || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("ERR_COMMIT", Flags::NONE).unwrap();
        let mut t = [
            AmEntry::payload("sink", AmCategory::MedLong, AmRole::Request, 0, sink),
            AmEntry::short("short_sink", AmRole::Request, 0, short_sink),
        ];
        ep.register_handlers(&mut t).unwrap();
        let (h, hs) = (t[0].index, t[1].index);
        let _seg = Segment::attach(&team, SEG).unwrap();
        let peer = (team.rank() + 1) % team.size();
        let end = team.segment_bound(peer).unwrap().owner_addr + SEG;
        let buf = [1u8; 8];
        let sd = team
            .prepare_request_long(peer, Some(&buf), 8, 8, None, Lc::Now, Flags::NONE, 0)
            .unwrap();
        expect_panic(
            &["gex::SrcDesc::commit_long", "outside the segment"],
            move || sd.commit_long(h, 8, end - 4, &[]),
        );
        team.request_short(peer, hs, &[], Flags::NONE).unwrap();
        poll_until(
            "a Short sent after the failed Commit (the failed Commit's slot was never published)",
            5,
            || RUNS.load(Ordering::Relaxed) >= 1,
        );
        team.barrier();
        assert_eq!(RUNS.load(Ordering::Relaxed), 1);
        client.finalize();
    });
}
