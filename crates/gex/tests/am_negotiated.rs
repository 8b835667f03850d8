//! Negotiated-payload Active Messages ("Negotiated-payload AM APIs": `gex_AM_Prepare*`,
//! `gex_AM_SrcDesc*`, `gex_AM_Commit*`), Longs prepared with their `dest_addr`, and
//! their misuse, with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::am::{base, BASES, TEAM};
use common::{pattern, poll_until, Errors};
use gex::testing::spmd;
use gex::{
    AmCategory, AmEntry, AmIndex, AmRole, Client, Event, Flags, Lc, LcKind, NoOp, Segment, Team,
    Token,
};

const MB: usize = 1 << 20;

mod negotiated {
    use super::*;
    pub(crate) static ERRORS: Errors = Errors::new();
    pub(crate) static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static REPLIES: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static MED: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static LONG: AtomicUsize = AtomicUsize::new(0);
    pub(crate) const CASES: u32 = 5;

    pub(crate) fn seed(src: u32, dst: u32, case: u32, reply: bool) -> u64 {
        ((src as u64) << 40) | ((dst as u64) << 20) | ((case as u64) << 1) | reply as u64
    }

    /// Where case `case` Longs from `src` land in the target's segment.
    pub(crate) fn long_off(src: u32, case: u32, reply: bool) -> usize {
        (reply as usize) * 4 * MB + (src as usize * CASES as usize + case as usize) * 128 * 1024
    }

    /// args: [case, nbytes]
    pub(crate) fn handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let info = token.info();
        let (src, me, case, nbytes) = (info.src_rank, gex::job_rank(), args[0], args[1] as usize);
        let reply = !info.is_request;
        let what = || {
            format!(
                "case {case} from {src} (reply {reply}, long {})",
                info.is_long
            )
        };
        ERRORS.check(payload.len() == nbytes, || {
            format!("{}: {} bytes, want {nbytes}", what(), payload.len())
        });
        ERRORS.check(
            payload == &pattern(seed(src, me, case, reply), nbytes)[..],
            || format!("{}: payload", what()),
        );
        if info.is_long {
            let want = base(me) + long_off(src, case, reply);
            ERRORS.check(token.dest_addr() == want, || {
                format!("{}: dest_addr", what())
            });
        }
        if reply {
            REPLIES.fetch_add(1, Ordering::Relaxed);
            return;
        }
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let p = pattern(seed(me, src, case, true), 200_000);
        let dest = base(src) + long_off(me, case, true);
        let (med, long) = (
            MED.load(Ordering::Relaxed) as u8,
            LONG.load(Ordering::Relaxed) as u8,
        );
        match case {
            // Reply Medium from a client buffer.
            0 | 4 => {
                let buf = &p[..700];
                let sd = token
                    .prepare_reply_medium(Some(buf), 1, 700, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                ERRORS.check(std::ptr::eq(sd.addr(), buf.as_ptr()), || {
                    "reply client buf addr".into()
                });
                let size = sd.size();
                ERRORS.check((1..=700).contains(&size), || format!("reply size {size}"));
                sd.commit_medium(med, size, &[case, size as u32]);
            }
            // Reply Medium in a library buffer.
            1 => {
                let mut sd = token
                    .prepare_reply_medium(None, 100, 200, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                let size = sd.size();
                ERRORS.check((100..=200).contains(&size), || {
                    format!("reply lib size {size}")
                });
                ERRORS.check((sd.addr() as usize).is_multiple_of(16), || {
                    "reply lib buffer alignment".into()
                });
                let b = sd.buffer_mut().expect("library buffer");
                ERRORS.check(b.len() == size, || "buffer_mut length".into());
                b.copy_from_slice(&p[..size]);
                sd.commit_medium(med, size, &[case, size as u32]);
            }
            // Reply Long from a client buffer, with an lc event.
            2 => {
                let buf = &p[..100_000];
                let mut ev = Event::invalid();
                let sd = token
                    .prepare_reply_long(
                        Some(buf),
                        1000,
                        100_000,
                        None,
                        Lc::Event(&mut ev),
                        Flags::NONE,
                        2,
                    )
                    .unwrap();
                let size = sd.size();
                ERRORS.check((1000..=100_000).contains(&size), || {
                    format!("reply long size {size}")
                });
                sd.commit_long(long, size - 1, dest, &[case, size as u32 - 1]);
                ERRORS.check(ev.is_invalid(), || "reply long lc event".into());
            }
            // Reply Long in a library buffer.
            _ => {
                let mut sd = token
                    .prepare_reply_long(None, 4096, 8192, None, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                let size = sd.size();
                ERRORS.check((4096..=8192).contains(&size), || {
                    format!("reply long lib size {size}")
                });
                ERRORS.check((sd.addr() as usize).is_multiple_of(16), || {
                    "reply long lib buffer alignment".into()
                });
                let b = sd.buffer_mut().expect("library buffer");
                b.copy_from_slice(&p[..size]);
                sd.commit_long(long, size / 2, dest, &[case, (size / 2) as u32]);
            }
        }
    }
}

/// "Negotiated-payload AM APIs": `gex_AM_Prepare{Request,Reply}{Medium,Long}` with a
/// client buffer (`gex_AM_SrcDescAddr` is that buffer) and without (a library buffer,
/// aligned), `gex_AM_SrcDescSize` between least and most payload, and Commit with
/// `nbytes <= size` (including 0); the receiver sees exactly the committed bytes.
#[test]
fn negotiated_payload() {
    use negotiated::*;
    for n in 1..=4 {
        spmd(n, || {
            let (client, ep, team, _seg) = {
                common::quiet_expected_panics();
                let (client, ep, team) = Client::init("AM_NEGOTIATE", Flags::NONE).unwrap();
                let mut t = [
                    AmEntry::payload("neg_medium", AmCategory::Medium, AmRole::ReqRep, 2, handler),
                    AmEntry::payload("neg_long", AmCategory::Long, AmRole::ReqRep, 2, handler),
                ];
                ep.register_handlers(&mut t).unwrap();
                MED.store(t[0].index as usize, Ordering::Relaxed);
                LONG.store(t[1].index as usize, Ordering::Relaxed);
                let _ = TEAM.set(team);
                let seg = Segment::attach(&team, 8 * MB).unwrap();
                let _ = BASES.set(common::segment_bases(&team));
                team.barrier(); // every rank's handlers can find the globals
                (client, ep, team, seg)
            };
            let _ = ep;
            let (med, long) = (
                MED.load(Ordering::Relaxed) as u8,
                LONG.load(Ordering::Relaxed) as u8,
            );
            let me = team.rank();
            let max_med = team.max_request_medium(None, LcKind::Now, Flags::NONE, 2);
            for r in 0..team.size() {
                let p = |case| pattern(seed(me, r, case, false), 200_000);
                // Case 0: Medium from a client buffer.
                let buf = p(0)[..1000].to_vec();
                let mut sd = team
                    .prepare_request_medium(r, Some(&buf), 16, 1000, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                assert_eq!(
                    sd.addr() as *const u8,
                    buf.as_ptr(),
                    "SrcDescAddr is the client buffer"
                );
                let size = sd.size();
                assert!((16..=1000).contains(&size), "size {size}");
                assert!(sd.buffer_mut().is_none());
                sd.commit_medium(med, size - 3, &[0, size as u32 - 3]);
                // Case 1: Medium in a library buffer, most beyond the maximum.
                let mut sd = team
                    .prepare_request_medium(r, None, 512, 10 * MB, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                let size = sd.size();
                assert!(
                    size >= 512 && size <= max_med,
                    "size {size} (max {max_med})"
                );
                assert_eq!(sd.addr() as usize % 16, 0, "library buffer alignment");
                let b = sd.buffer_mut().expect("library buffer");
                assert_eq!(b.len(), size);
                b.copy_from_slice(&p(1)[..size]);
                sd.commit_medium(med, size, &[1, size as u32]);
                // Case 2: Long from a client buffer, local completion by event.
                let buf = p(2)[..100_000].to_vec();
                let mut ev = Event::invalid();
                let sd = team
                    .prepare_request_long(
                        r,
                        Some(&buf),
                        1,
                        100_000,
                        None,
                        Lc::Event(&mut ev),
                        Flags::NONE,
                        2,
                    )
                    .unwrap();
                assert_eq!(sd.addr() as *const u8, buf.as_ptr());
                let size = sd.size();
                assert!((1..=100_000).contains(&size));
                sd.commit_long(
                    long,
                    size,
                    base(r) + long_off(me, 2, false),
                    &[2, size as u32],
                );
                assert!(ev.test(), "lc event after Commit");
                // Case 3: Long in a library buffer.
                let mut sd = team
                    .prepare_request_long(r, None, 4096, 65536, None, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                let size = sd.size();
                assert!((4096..=65536).contains(&size));
                assert_eq!(sd.addr() as usize % 16, 0);
                sd.buffer_mut().unwrap().copy_from_slice(&p(3)[..size]);
                sd.commit_long(
                    long,
                    size - 100,
                    base(r) + long_off(me, 3, false),
                    &[3, size as u32 - 100],
                );
                // Case 4: commit 0 bytes.
                let buf = p(4)[..10].to_vec();
                let sd =
                    team.prepare_request_medium(r, Some(&buf), 1, 10, Lc::Now, Flags::IMMEDIATE, 2);
                let sd = match sd {
                    Ok(sd) => sd,
                    Err(NoOp) => team
                        .prepare_request_medium(r, Some(&buf), 1, 10, Lc::Now, Flags::NONE, 2)
                        .unwrap(),
                };
                sd.commit_medium(med, 0, &[4, 0]);
            }
            let want = team.size() as usize * CASES as usize;
            poll_until("negotiated replies", 10, || {
                REPLIES.load(Ordering::Relaxed) >= want
            });
            team.barrier();
            assert_eq!(REQUESTS.load(Ordering::Relaxed), want);
            assert_eq!(REPLIES.load(Ordering::Relaxed), want);
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

mod in_place {
    use super::*;
    pub(crate) static ERRORS: Errors = Errors::new();
    pub(crate) static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static REPLIES: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static HANDLER: AtomicUsize = AtomicUsize::new(0);
    /// Bytes of each Long: more than the 64 KiB of a library buffer.
    pub(crate) const BYTES: usize = 200 << 10;

    /// Where the Longs from `src` land in the target's segment.
    pub(crate) fn off(src: u32, reply: bool) -> usize {
        (reply as usize) * 2 * MB + src as usize * (256 << 10)
    }

    /// Where each rank's segment is mapped here, if it is (found before any Prepare:
    /// the query may not be made between a Prepare and its Commit, nor in a handler).
    pub(crate) static MAPPINGS: std::sync::OnceLock<Vec<Option<usize>>> =
        std::sync::OnceLock::new();

    /// Where `rank`'s segment at `off` is mapped here, if it is.
    pub(crate) fn mapped(rank: u32, off: usize) -> Option<*mut u8> {
        MAPPINGS.get().expect("mappings set")[rank as usize].map(|a| (a + off) as *mut u8)
    }

    /// A Long prepared for `dest_addr` at `rank`'s `off`: checks that the library chose
    /// the destination itself where it is mapped here (and its whole size), a buffer
    /// of its own elsewhere; fills it with `p` and commits it.
    pub(crate) fn fill_and_commit(sd: gex::SrcDesc<'_>, rank: u32, off: usize, p: &[u8]) {
        let mut sd = sd;
        let size = sd.size();
        match mapped(rank, off) {
            Some(at) => {
                ERRORS.check(sd.addr() == at, || {
                    format!("to {rank}: not the destination")
                });
                ERRORS.check(size == BYTES, || format!("to {rank}: size {size}"));
            }
            None => ERRORS.check((1..=64 << 10).contains(&size), || {
                format!("to {rank}, not mapped: size {size}")
            }),
        }
        sd.buffer_mut()
            .expect("a library buffer")
            .copy_from_slice(&p[..size]);
        let h = HANDLER.load(Ordering::Relaxed) as u8;
        sd.commit_long(h, size, base(rank) + off, &[size as u32]);
    }

    /// args: [nbytes]
    pub(crate) fn handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let info = token.info();
        let (src, me, reply) = (info.src_rank, gex::job_rank(), !info.is_request);
        let nbytes = args[0] as usize;
        ERRORS.check(
            payload == &pattern(seed(src, me, reply), nbytes)[..],
            || format!("from {src} (reply {reply}): payload"),
        );
        ERRORS.check(token.dest_addr() == base(me) + off(src, reply), || {
            format!("from {src} (reply {reply}): dest_addr")
        });
        if reply {
            REPLIES.fetch_add(1, Ordering::Relaxed);
            return;
        }
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let at = off(me, true);
        let sd = token
            .prepare_reply_long(
                None,
                1,
                BYTES,
                Some(base(src) + at),
                Lc::Now,
                Flags::NONE,
                1,
            )
            .unwrap();
        fill_and_commit(sd, src, at, &pattern(seed(me, src, true), BYTES));
    }

    pub(crate) fn seed(src: u32, dst: u32, reply: bool) -> u64 {
        0x1a_0000_0000 | ((src as u64) << 20) | ((dst as u64) << 4) | reply as u64
    }
}

/// `gex_AM_Prepare{Request,Reply}Long`'s `dest_addr` ("GASNet may use this value to
/// guide its choice of outputs (addr and size)"): without a client buffer, a Long to a
/// rank whose segment is mapped here is assembled at its destination (the SrcDesc's
/// address, of all `most_payload` bytes, not the 64 KiB of a library buffer; up to the
/// segment's end), elsewhere in a buffer of the library's; the handler finds the
/// payload either way. A Commit given another `dest_addr` ("required to pass the same
/// value to the Commit call") fails naming the call. 1 to 4 ranks.
#[test]
fn longs_prepared_with_their_destination_are_assembled_there() {
    use in_place::*;
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_IN_PLACE", Flags::NONE).unwrap();
            let mut t = [AmEntry::payload(
                "in_place",
                AmCategory::Long,
                AmRole::ReqRep,
                1,
                handler,
            )];
            ep.register_handlers(&mut t).unwrap();
            HANDLER.store(t[0].index as usize, Ordering::Relaxed);
            let _ = TEAM.set(team);
            let seg = Segment::attach(&team, 4 * MB).unwrap();
            let _ = BASES.set(common::segment_bases(&team));
            let maps = (0..team.size())
                .map(|r| team.segment_bound(r).expect("attached").local_addr)
                .collect();
            let _ = MAPPINGS.set(maps);
            team.barrier();
            let me = team.rank();
            for r in 0..team.size() {
                let at = off(me, false);
                let sd = team
                    .prepare_request_long(
                        r,
                        None,
                        1,
                        BYTES,
                        Some(base(r) + at),
                        Lc::Now,
                        Flags::NONE,
                        1,
                    )
                    .unwrap();
                fill_and_commit(sd, r, at, &pattern(seed(me, r, false), BYTES));
            }
            // The segment's end bounds the size; another dest_addr at Commit fails.
            let end = base(me) + seg.size();
            let sd = team
                .prepare_request_long(me, None, 1, 4096, Some(end - 1008), Lc::Now, Flags::NONE, 1)
                .unwrap();
            assert_eq!(sd.size(), 1008);
            assert_eq!(Some(sd.addr()), mapped(me, seg.size() - 1008));
            common::expect_panic(&["SrcDesc::commit_long", "given to Prepare"], move || {
                sd.commit_long(t[0].index, 8, end - 992, &[8])
            });
            // A destination not aligned for any data type is no buffer the library
            // may offer ("suitably aligned to hold any data type"): it offers its own.
            let sd = team
                .prepare_request_long(me, None, 1, 4096, Some(end - 1000), Lc::Now, Flags::NONE, 1)
                .unwrap();
            assert_ne!(Some(sd.addr()), mapped(me, seg.size() - 1000));
            assert!((sd.addr() as usize).is_multiple_of(16), "{:p}", sd.addr());
            common::expect_panic(&["SrcDesc::commit_long", "given to Prepare"], move || {
                sd.commit_long(t[0].index, 8, end - 992, &[8])
            });
            poll_until("the in-place replies", 10, || {
                REPLIES.load(Ordering::Relaxed) >= team.size() as usize
            });
            team.barrier();
            assert_eq!(REQUESTS.load(Ordering::Relaxed), team.size() as usize);
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

mod misuse {
    use super::*;
    pub(crate) static RUNS: AtomicUsize = AtomicUsize::new(0);
    pub(crate) fn handler(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
        assert_eq!(payload.len(), args[0] as usize);
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    /// A client named `name` with [`handler`] registered and a segment attached: the
    /// client, its team, the handler's index and the next rank.
    pub(crate) fn setup(name: &str) -> (Client, Team, AmIndex, u32) {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init(name, Flags::NONE).unwrap();
        let mut t = [AmEntry::payload(
            "misuse",
            AmCategory::MedLong,
            AmRole::Request,
            1,
            handler,
        )];
        ep.register_handlers(&mut t).unwrap();
        Segment::attach(&team, MB).unwrap();
        (client, team, t[0].index, (team.rank() + 1) % team.size())
    }
}

/// Misuse of the negotiated-payload calls fails naming the call, and leaves the layer
/// usable: no buffer with an lc other than NOW ("If client_buf is NULL, this argument
/// must also be NULL"), `most < least`, `least` over the maximum, a client buffer
/// shorter than `least` (the size offered lies "in the range defined by the minimum and
/// maximum lengths"), Commit of more than
/// `gex_AM_SrcDescSize`, of the wrong number of arguments or the wrong category, a
/// SrcDesc dropped without Commit ("must be consumed (exactly once) by a Commit"), and
/// the `AM_PREPARE_LEAST_*` flags in a fixed-payload send ("Invalid in
/// gex_AM_{Request,Reply}{Medium,Long}*() calls") or both in one query ("mutually
/// exclusive").
#[test]
fn negotiated_payload_misuse() {
    for n in 1..=2 {
        spmd(n, || {
            let (client, team, h, peer) = misuse::setup("AM_MISUSE");
            let max = team.max_request_medium(None, LcKind::Now, Flags::NONE, 1);
            let buf = vec![1u8; 100];
            let mut sent = 0;
            common::expect_panic(&["Team::prepare_request_medium", "Lc::Now"], || {
                team.prepare_request_medium(peer, None, 1, 10, Lc::Group, Flags::NONE, 1)
                    .map(|sd| sd.commit_medium(h, 0, &[0]))
            });
            common::expect_panic(&["Team::prepare_request_medium", "less than"], || {
                team.prepare_request_medium(peer, Some(&buf), 10, 5, Lc::Now, Flags::NONE, 1)
                    .map(|sd| sd.commit_medium(h, 0, &[0]))
            });
            common::expect_panic(&["Team::prepare_request_medium", "exceeds"], || {
                team.prepare_request_medium(peer, None, max + 1, max + 1, Lc::Now, Flags::NONE, 1)
                    .map(|sd| sd.commit_medium(h, 0, &[0]))
            });
            // A client buffer that cannot hold least_payload: the size offered must
            // lie between least_payload and most_payload.
            common::expect_panic(
                &[
                    "Team::prepare_request_medium",
                    "client buffer of 4 bytes",
                    "shorter",
                ],
                || {
                    team.prepare_request_medium(
                        peer,
                        Some(&buf[..4]),
                        8,
                        50,
                        Lc::Now,
                        Flags::NONE,
                        1,
                    )
                    .map(|sd| sd.commit_medium(h, 0, &[0]))
                },
            );
            common::expect_panic(&["Team::prepare_request_long", "17 arguments"], || {
                team.prepare_request_long(peer, Some(&buf), 1, 10, None, Lc::Now, Flags::NONE, 17)
                    .map(|sd| sd.commit_long(h, 0, 0, &[0]))
            });
            // Each failed Commit below frees its slot; the layer stays usable.
            let sd = team
                .prepare_request_medium(peer, Some(&buf), 1, 50, Lc::Now, Flags::NONE, 1)
                .unwrap();
            let size = sd.size();
            common::expect_panic(&["SrcDesc::commit_medium", "exceeds"], move || {
                sd.commit_medium(h, size + 1, &[0])
            });
            let sd = team
                .prepare_request_medium(peer, Some(&buf), 1, 50, Lc::Now, Flags::NONE, 1)
                .unwrap();
            common::expect_panic(&["SrcDesc::commit_medium", "arguments"], move || {
                sd.commit_medium(h, 1, &[1, 2])
            });
            let sd = team
                .prepare_request_medium(peer, Some(&buf), 1, 50, Lc::Now, Flags::NONE, 1)
                .unwrap();
            common::expect_panic(&["SrcDesc::commit_long", "Medium"], move || {
                sd.commit_long(h, 1, 0, &[1])
            });
            let sd = team
                .prepare_request_medium(peer, None, 1, 50, Lc::Now, Flags::NONE, 1)
                .unwrap();
            common::expect_panic(&["SrcDesc", "without Commit"], move || drop(sd));
            // The payload queries' flags: refused by a fixed-payload send, exclusive with
            // each other in a query.
            let least = Flags::AM_PREPARE_LEAST_CLIENT;
            common::expect_panic(&["Team::request_medium", "payload queries"], || {
                team.request_medium(peer, h, &buf[..9], Lc::Now, least, &[9])
            });
            let both = least | Flags::AM_PREPARE_LEAST_ALLOC;
            common::expect_panic(&["Team::max_request_long", "mutually exclusive"], || {
                team.max_request_long(None, LcKind::Now, both, 1)
            });
            // Still usable: a prepared send and a fixed one both arrive.
            let sd = team
                .prepare_request_medium(peer, Some(&buf), 1, 50, Lc::Now, Flags::NONE, 1)
                .unwrap();
            sd.commit_medium(h, 7, &[7]);
            team.request_medium(peer, h, &buf[..9], Lc::Now, Flags::NONE, &[9])
                .unwrap();
            sent += 2;
            team.barrier();
            poll_until("misuse handlers", 10, || {
                misuse::RUNS.load(Ordering::Relaxed) >= sent
            });
            team.barrier();
            assert_eq!(
                misuse::RUNS.load(Ordering::Relaxed),
                sent,
                "abandoned SrcDescs run no handler"
            );
            client.finalize();
        });
    }
}

/// "Maximum payload size queries" with `GEX_FLAG_AM_PREPARE_LEAST_{CLIENT,ALLOC}`: the
/// largest `least_payload` of a Prepare, which a Prepare accepts (and one more it
/// refuses), with a client buffer and with one the library provides; the flags are
/// ignored by the Prepare itself. A library-provided Long buffer is as large as asked
/// up to 64 KiB, and larger only when `least_payload` asks for more.
#[test]
fn prepare_least_queries() {
    for n in 1..=2 {
        spmd(n, || {
            let (client, team, h, peer) = misuse::setup("AM_LEAST");
            let at = common::segment_bases(&team)[peer as usize];
            let mut sent = 0;
            for flags in [
                Flags::AM_PREPARE_LEAST_CLIENT,
                Flags::AM_PREPARE_LEAST_ALLOC,
            ] {
                let medium = team.max_request_medium(Some(peer), LcKind::Now, flags, 1);
                let long = team.max_request_long(Some(peer), LcKind::Now, flags, 1);
                assert!(medium >= 512 && long >= medium, "{medium} {long}");
                let big = vec![3u8; medium];
                let client_buf = (flags == Flags::AM_PREPARE_LEAST_CLIENT).then_some(&big[..]);
                let sd = team
                    .prepare_request_medium(peer, client_buf, medium, medium, Lc::Now, flags, 1)
                    .unwrap();
                assert_eq!(sd.size(), medium);
                sd.commit_medium(h, 0, &[0]);
                sent += 1;
                let over = vec![3u8; medium + 1];
                common::expect_panic(&["Team::prepare_request_medium", "exceeds"], || {
                    team.prepare_request_medium(
                        peer,
                        client_buf.map(|_| &over[..]),
                        medium + 1,
                        medium + 1,
                        Lc::Now,
                        flags,
                        1,
                    )
                    .map(|sd| sd.commit_medium(h, 0, &[0]))
                });
                common::expect_panic(&["Team::prepare_request_long", "exceeds"], || {
                    team.prepare_request_long(
                        peer,
                        None,
                        long + 1,
                        long + 1,
                        None,
                        Lc::Now,
                        flags,
                        1,
                    )
                    .map(|sd| sd.commit_long(h, 0, 0, &[0]))
                });
            }
            // A buffer the library provides for a Long: up to 64 KiB unless asked for
            // more.
            let sd = team
                .prepare_request_long(peer, None, 0, usize::MAX, None, Lc::Now, Flags::NONE, 1)
                .unwrap();
            assert_eq!(sd.size(), 64 << 10);
            sd.commit_long(h, 0, at, &[0]);
            let sd = team
                .prepare_request_long(
                    peer,
                    None,
                    100 << 10,
                    usize::MAX,
                    None,
                    Lc::Now,
                    Flags::NONE,
                    1,
                )
                .unwrap();
            assert_eq!(sd.size(), 100 << 10);
            sd.commit_long(h, 0, at, &[0]);
            sent += 2;
            team.barrier();
            poll_until("the prepared sends' handlers", 10, || {
                misuse::RUNS.load(Ordering::Relaxed) >= sent
            });
            client.finalize();
        });
    }
}
