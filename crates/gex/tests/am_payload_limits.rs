//! Active Message payload sizes ("Maximum payload size queries": `gex_AM_Max*`,
//! `gex_AM_LUB*` and `gex_Token_Max*`), with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::am::{team, TEAM};
use common::{poll_until, Errors};
use gex::am::{lub_reply_long, lub_reply_medium, lub_request_long, lub_request_medium, max_args};
use gex::testing::{spmd, spmd_with, SpmdOptions};
use gex::{AmEntry, AmRole, Client, Flags, LcKind, Segment, Team, Token};

const MB: usize = 1 << 20;

mod limits {
    use super::*;
    pub(crate) static ERRORS: Errors = Errors::new();
    pub(crate) static DONE: AtomicUsize = AtomicUsize::new(0);

    pub(crate) fn query(token: &Token<'_>, _args: &[u32]) {
        let t = team();
        let src = token.src_rank();
        for nargs in [0, 16] {
            for lc in [LcKind::Now, LcKind::Event] {
                let m = token.max_reply_medium(lc, Flags::NONE, nargs);
                let l = token.max_reply_long(lc, Flags::NONE, nargs);
                ERRORS.check(m >= 512 && l >= 512, || format!("token max {m} {l}"));
                ERRORS.check(
                    m == t.max_reply_medium(Some(src), lc, Flags::NONE, nargs),
                    || "token medium".into(),
                );
                ERRORS.check(
                    l == t.max_reply_long(Some(src), lc, Flags::NONE, nargs),
                    || "token long".into(),
                );
                ERRORS.check(lub_reply_medium() <= m && lub_reply_long() <= l, || {
                    "lub in handler".into()
                });
            }
        }
        // The Prepare-least flags: one answers the same maximum, both at once are
        // refused (as by the team queries), naming the call.
        let least = Flags::AM_PREPARE_LEAST_ALLOC;
        let m = token.max_reply_medium(LcKind::Now, least, 1);
        ERRORS.check(
            m == token.max_reply_medium(LcKind::Now, Flags::NONE, 1),
            || "token medium with AM_PREPARE_LEAST_ALLOC".into(),
        );
        let both = least | Flags::AM_PREPARE_LEAST_CLIENT;
        let msg = common::try_panic_message(|| token.max_reply_long(LcKind::Now, both, 1))
            .unwrap_or_default();
        ERRORS.check(
            msg.contains("Token::max_reply_long") && msg.contains("mutually exclusive"),
            || format!("token query with both Prepare-least flags: {msg:?}"),
        );
        let msg =
            common::try_panic_message(|| token.max_reply_medium(LcKind::Now, Flags::NONE, 17))
                .unwrap_or_default();
        ERRORS.check(
            msg.contains("Token::max_reply_medium") && msg.contains("17 arguments"),
            || format!("token query with 17 arguments: {msg:?}"),
        );
        DONE.fetch_add(1, Ordering::Relaxed);
    }
}

/// "Maximum payload size queries": every result is at least 512, non-increasing in
/// the number of arguments, stable, symmetric between two ranks, the same on all ranks
/// for `other_rank == None` (`GEX_RANK_INVALID`), and the LUB queries are at most every
/// Max query. `gex_Token_Max*` in a Request handler agree with the team queries.
#[test]
fn max_payload_queries() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_LIMITS", Flags::NONE).unwrap();
            let mut t = [AmEntry::short("query", AmRole::Request, 0, limits::query)];
            ep.register_handlers(&mut t).unwrap();
            let _ = TEAM.set(team);
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            type Q = fn(&Team, Option<u32>, LcKind, Flags, usize) -> usize;
            let queries: [(&str, Q, usize); 4] = [
                (
                    "max_request_medium",
                    Team::max_request_medium,
                    lub_request_medium(),
                ),
                (
                    "max_reply_medium",
                    Team::max_reply_medium,
                    lub_reply_medium(),
                ),
                (
                    "max_request_long",
                    Team::max_request_long,
                    lub_request_long(),
                ),
                ("max_reply_long", Team::max_reply_long, lub_reply_long()),
            ];
            let lubs = [
                lub_request_medium(),
                lub_reply_medium(),
                lub_request_long(),
                lub_reply_long(),
            ];
            assert_eq!(
                lubs,
                [
                    lub_request_medium(),
                    lub_reply_medium(),
                    lub_request_long(),
                    lub_reply_long()
                ],
                "stable"
            );
            assert!(lubs.iter().all(|&l| l >= 512), "LUBs {lubs:?}");
            let mut summary = Vec::new();
            for (name, q, lub) in queries {
                for lc in [LcKind::Now, LcKind::Group, LcKind::Event] {
                    for flags in [Flags::NONE, Flags::IMMEDIATE] {
                        for other in std::iter::once(None).chain((0..team.size()).map(Some)) {
                            let mut prev = usize::MAX;
                            for nargs in 0..=max_args() {
                                let v = q(&team, other, lc, flags, nargs);
                                assert!(v >= 512, "{name}({other:?}, {lc:?}, {nargs}) = {v}");
                                assert!(v <= prev, "{name} increases with nargs at {nargs}");
                                assert!(
                                    lub <= v,
                                    "LUB {lub} > {name}({other:?}, {lc:?}, {nargs}) = {v}"
                                );
                                assert_eq!(
                                    v,
                                    q(&team, other, lc, flags, nargs),
                                    "{name} is stable"
                                );
                                prev = v;
                            }
                        }
                    }
                }
                summary.push(q(&team, None, LcKind::Now, Flags::NONE, 0) as u64);
                summary.push(q(&team, None, LcKind::Event, Flags::NONE, max_args()) as u64);
            }
            // "numargs must be between 0 and gex_AM_MaxArgs()", and other_rank a member
            // of the team: each query refuses others, naming itself.
            for (name, q, _) in queries {
                common::expect_panic(&[name, "17 arguments", "max_args()"], || {
                    q(&team, None, LcKind::Now, Flags::NONE, max_args() + 1)
                });
                common::expect_panic(&[name, "is not in the team"], || {
                    q(&team, Some(team.size()), LcKind::Now, Flags::NONE, 0)
                });
            }
            summary.extend(lubs.iter().map(|&l| l as u64));
            // Exchange: my summary into slot `me` of every peer, and for symmetry, my
            // query about each peer q into slot `me` of q's second table.
            let me = team.rank() as usize;
            let bytes: Vec<u8> = summary.iter().flat_map(|v| v.to_ne_bytes()).collect();
            for r in 0..team.size() {
                team.put_blocking(r, bases[r as usize] + me * 128, &bytes, Flags::NONE)
                    .unwrap();
                let sym = team.max_request_medium(Some(r), LcKind::Now, Flags::NONE, 3) as u64;
                team.put_val_blocking(r, bases[r as usize] + 4096 + me * 8, sym, 8, Flags::NONE)
                    .unwrap();
            }
            team.barrier();
            for w in 0..team.size() as usize {
                let mut got = vec![0u8; bytes.len()];
                // SAFETY: our segment; written before the barrier.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (seg.addr() as usize + w * 128) as *const u8,
                        got.as_mut_ptr(),
                        got.len(),
                    )
                };
                assert_eq!(got, bytes, "rank {w}'s query results differ from ours");
                // SAFETY: as above.
                let sym = unsafe { common::read_u64(seg.addr() as usize + 4096 + w * 8) };
                assert_eq!(
                    sym as usize,
                    team.max_request_medium(Some(w as u32), LcKind::Now, Flags::NONE, 3),
                    "symmetry with {w}"
                );
            }
            for r in 0..team.size() {
                team.request_short(r, t[0].index, &[], Flags::NONE).unwrap();
            }
            poll_until("queries in handlers", 10, || {
                limits::DONE.load(Ordering::Relaxed) == team.size() as usize
            });
            limits::ERRORS.assert_none();
            client.finalize();
        });
    }
}

/// A message header holds a Long's length in 32 bits: with a segment of 4 GiB or more
/// (sparse, nothing touched) the Long limit stays below 4 GiB, and a larger payload,
/// though its range lies in the segment, is refused naming the call rather than sent
/// with a truncated length.
#[test]
fn longs_stay_below_4_gib_in_larger_segments() {
    const SEGMENT: usize = 5 << 30;
    let opts = SpmdOptions {
        segment_size: SEGMENT,
        ..SpmdOptions::new(1)
    };
    spmd_with(opts, || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("AM_LIMITS", Flags::NONE).unwrap();
        let mut t = [AmEntry::payload(
            "long",
            gex::AmCategory::MedLong,
            AmRole::Request,
            0,
            |_, _, _| {},
        )];
        ep.register_handlers(&mut t).unwrap();
        let seg = Segment::attach(&team, SEGMENT).unwrap();
        let max = team.max_request_long(None, LcKind::Now, Flags::NONE, 0);
        assert_eq!(max, u32::MAX as usize);
        assert_eq!(lub_request_long(), max);
        // The payload is the segment's first bytes (sparse, untouched): the call is
        // refused before it reads them.
        // SAFETY: the segment is mapped for `SEGMENT` bytes, more than `max + 1`, and
        // nothing writes it meanwhile.
        let payload = unsafe { std::slice::from_raw_parts(seg.addr().cast_const(), max + 1) };
        let msg = common::expect_panic(
            &["Team::request_long", "larger than the most a Long"],
            || {
                let _ = team.request_long(
                    0,
                    t[0].index,
                    payload,
                    seg.addr() as usize,
                    gex::Lc::Now,
                    Flags::NONE,
                    &[],
                );
            },
        );
        assert!(msg.contains(&format!("{} bytes", max + 1)), "{msg}");
        client.finalize();
    });
}
