//! Local completion of Active Messages ("NOTE 2: The 'lc_opt' argument for local
//! completion"), with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{pattern, poll_until, Errors};
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmRole, Client, Event, EventCategory, Flags, Lc, Segment, Token};

const MB: usize = 1 << 20;

mod lc {
    use super::*;
    pub(crate) static ERRORS: Errors = Errors::new();
    pub(crate) static RECEIVED: AtomicUsize = AtomicUsize::new(0);
    pub(crate) static REPLIES: AtomicUsize = AtomicUsize::new(0);
    pub(crate) const LONG_LEN: usize = 64 * 1024;
    pub(crate) const GROUP_REPLY: u32 = 99;
    pub(crate) static GROUP_CHECKED: AtomicUsize = AtomicUsize::new(0);

    /// args: [variant]. Medium or Long; the payload is pattern(src, variant).
    pub(crate) fn recv(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let src = token.src_rank();
        let info = token.info();
        if args[0] == GROUP_REPLY {
            // A probe: Replies accept Lc::Now and an event, not Lc::Group.
            ERRORS.check(payload == [1, 2, 3], || "probe payload".into());
            let msg = common::try_panic_message(|| {
                token.reply_medium(info.entry.index, &[4], Lc::Group, Flags::NONE, args)
            });
            ERRORS.check(
                msg.as_deref()
                    .is_some_and(|m| m.contains("Token::reply_medium") && m.contains("Group")),
                || format!("reply with Lc::Group: {msg:?}"),
            );
            GROUP_CHECKED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let len = if info.is_long { LONG_LEN } else { 2000 };
        let seed = ((src as u64) << 32) | args[0] as u64;
        ERRORS.check(payload == pattern(seed, len), || {
            format!(
                "{} from {src} variant {}: payload",
                info.entry.name, args[0]
            )
        });
        if info.is_request {
            RECEIVED.fetch_add(1, Ordering::Relaxed);
            let me = gex::job_rank();
            let p = pattern(((me as u64) << 32) | args[0] as u64, 2000);
            if info.is_long {
                let mut ev = Event::invalid();
                let r =
                    token.reply_medium(info.entry.index, &p, Lc::Event(&mut ev), Flags::NONE, args);
                ERRORS.check(r.is_ok() && ev.is_invalid(), || {
                    "reply with Lc::Event".into()
                });
            } else {
                token
                    .reply_medium(info.entry.index, &p, Lc::Now, Flags::NONE, args)
                    .unwrap();
            }
        } else {
            REPLIES.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// "NOTE 2: The 'lc_opt' argument for local completion": Medium and Long Requests with
/// `GEX_EVENT_NOW`, `GEX_EVENT_GROUP` (synchronized with `gex_NBI_Wait(GEX_EC_AM)`) and
/// an event (complete, then invalid); the source buffer may be overwritten after local
/// completion without changing what the handler sees. `GEX_EVENT_DEFER` is refused for
/// AMs, and `GEX_EVENT_GROUP` for Replies.
#[test]
fn local_completion_options() {
    use lc::*;
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_LC", Flags::NONE).unwrap();
            let mut t = [AmEntry::payload(
                "lc_recv",
                AmCategory::MedLong,
                AmRole::ReqRep,
                1,
                recv,
            )];
            ep.register_handlers(&mut t).unwrap();
            let h = t[0].index;
            let _seg = Segment::attach(&team, 2 * MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            let mut sent = 0;
            for r in 0..team.size() {
                let dest = bases[r as usize] + me as usize * LONG_LEN;
                for variant in 0..3u32 {
                    let seed = ((me as u64) << 32) | variant as u64;
                    // Medium.
                    let mut buf = pattern(seed, 2000);
                    let mut ev = Event::invalid();
                    let lc = match variant {
                        0 => Lc::Now,
                        1 => Lc::Group,
                        _ => Lc::Event(&mut ev),
                    };
                    team.request_medium(r, h, &buf, lc, Flags::NONE, &[variant])
                        .unwrap();
                    if variant == 1 {
                        gex::nbi_wait(EventCategory::AM);
                        assert!(gex::nbi_test(EventCategory::AM));
                    }
                    if variant == 2 {
                        assert!(ev.test(), "local completion event of a Medium");
                        assert!(ev.is_invalid());
                    }
                    buf.iter_mut().for_each(|b| *b = !*b); // reuse after local completion
                    sent += 1;
                    // Long.
                    let mut buf = pattern(seed, LONG_LEN);
                    let mut ev = Event::invalid();
                    let lc = match variant {
                        0 => Lc::Now,
                        1 => Lc::Group,
                        _ => Lc::Event(&mut ev),
                    };
                    team.request_long(r, h, &buf, dest, lc, Flags::NONE, &[variant])
                        .unwrap();
                    if variant == 1 {
                        assert!(gex::nbi_test(EventCategory::AM | EventCategory::LC));
                    }
                    if variant == 2 {
                        ev.wait();
                    }
                    buf.iter_mut().for_each(|b| *b = 0);
                    sent += 1;
                    // Wait for this Long before the next one overwrites `dest`.
                    let want = sent;
                    poll_until("lc replies", 10, || REPLIES.load(Ordering::Relaxed) >= want);
                }
                common::expect_panic(&["Team::request_medium", "Defer"], || {
                    team.request_medium(r, h, &[1, 2, 3], Lc::Defer, Flags::NONE, &[0])
                });
                common::expect_panic(&["Team::request_long", "Defer"], || {
                    team.request_long(r, h, &[1, 2, 3], dest, Lc::Defer, Flags::NONE, &[0])
                });
                team.request_medium(r, h, &[1, 2, 3], Lc::Now, Flags::NONE, &[GROUP_REPLY])
                    .unwrap();
            }
            poll_until("lc replies", 10, || REPLIES.load(Ordering::Relaxed) >= sent);
            let probes = team.size() as usize;
            poll_until("reply probes", 10, || {
                GROUP_CHECKED.load(Ordering::Relaxed) >= probes
            });
            team.barrier();
            assert_eq!(GROUP_CHECKED.load(Ordering::Relaxed), probes);
            assert_eq!(RECEIVED.load(Ordering::Relaxed), sent, "requests received");
            assert_eq!(REPLIES.load(Ordering::Relaxed), sent, "replies received");
            ERRORS.assert_none();
            client.finalize();
        });
    }
}
