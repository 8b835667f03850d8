//! Active Messages ("Active Message (AM)" sections of the spec): handler registration
//! ("gex_EP_RegisterHandlers()"), Short/Medium/Long Requests and Replies with every
//! argument count, "AM Token Info", payload delivery, "Maximum payload size queries",
//! local completion ("NOTE 2: The 'lc_opt' argument for local completion"), IMMEDIATE
//! ("NOTE 1: Return value") and "Negotiated-payload AM APIs", with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use common::{pattern, poll_until, Errors};
use gex::am::{
    lub_reply_long, lub_reply_medium, lub_request_long, lub_request_medium, max_args, RegisterError,
};
use gex::testing::spmd;
use gex::{
    AmCategory, AmEntry, AmRole, Client, Event, EventCategory, Flags, HandlerFn, Lc, LcKind, NoOp,
    Segment, Team, Token,
};

const MB: usize = 1 << 20;

/// Team handle and segment bases for handlers (which may not query bound segments).
static TEAM: OnceLock<Team> = OnceLock::new();
static BASES: OnceLock<Vec<usize>> = OnceLock::new();

fn team() -> Team {
    *TEAM.get().expect("team set")
}

fn base(rank: u32) -> usize {
    BASES.get().expect("bases set")[rank as usize]
}

// ---------------------------------------------------------------------------------------
// Registration

mod registration {
    use super::*;

    pub static HITS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
    pub static ERRORS: Errors = Errors::new();

    pub fn count_short(token: &Token<'_>, args: &[u32]) {
        let e = token.info().entry;
        ERRORS.check(args.len() == e.nargs, || {
            format!("{}: {} args", e.name, args.len())
        });
        ERRORS.check(args.iter().all(|&a| a == e.index as u32), || {
            format!("{}: args {args:?}", e.name)
        });
        let want_cdata = if e.name == "with_cdata" {
            e.index as usize * 3
        } else {
            0
        };
        ERRORS.check(e.cdata == want_cdata, || {
            format!("{}: cdata {}", e.name, e.cdata)
        });
        HITS[e.index as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_payload(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let e = token.info().entry;
        ERRORS.check(payload == [e.index; 3], || {
            format!("{}: payload {payload:?}", e.name)
        });
        count_short(token, args)
    }

    pub fn entry(name: &'static str, nargs: usize) -> AmEntry {
        AmEntry::short(name, AmRole::Request, nargs, count_short)
    }
}

/// "gex_EP_RegisterHandlers()": fixed indices are kept; index 0 ("don't care") entries
/// get, in table order, the highest index still unallocated, written back into the
/// table; fixed indices below `GEX_AM_INDEX_BASE` (128), taken indices, too many
/// arguments and a function of the wrong kind are refused. Every registered handler is
/// then reached by a Request from every rank.
#[test]
fn registration_assigns_indices_from_the_top() {
    use registration::*;
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_REGISTER", Flags::NONE).unwrap();
            let mut first = [entry("fixed255", 1).at(255), entry("fixed253", 2).at(253)];
            ep.register_handlers(&mut first).unwrap();
            assert_eq!(
                (first[0].index, first[1].index),
                (255, 253),
                "fixed indices are kept"
            );

            let mut second = [
                entry("x", 0),
                entry("y", 3).at(250),
                AmEntry::payload("z", AmCategory::Medium, AmRole::Request, 1, count_payload),
                entry("w", max_args()),
            ];
            ep.register_handlers(&mut second).unwrap();
            let got: Vec<u8> = second.iter().map(|e| e.index).collect();
            assert_eq!(
                got,
                [254, 250, 252, 251],
                "don't-care indices from the top, skipping taken ones"
            );
            let mut third = [entry("v", 0)];
            ep.register_handlers(&mut third).unwrap();
            assert_eq!(third[0].index, 249);

            // Errors.
            assert_eq!(
                ep.register_handlers(&mut [entry("low", 0).at(127)]),
                Err(RegisterError::IndexReserved(127))
            );
            assert_eq!(
                ep.register_handlers(&mut [entry("one", 0).at(1)]),
                Err(RegisterError::IndexReserved(1))
            );
            assert_eq!(
                ep.register_handlers(&mut [entry("dup", 0).at(254)]),
                Err(RegisterError::IndexTaken(254))
            );
            assert_eq!(
                ep.register_handlers(&mut [entry("a", 0).at(200), entry("b", 0).at(200)]),
                Err(RegisterError::IndexTaken(200))
            );
            assert_eq!(
                ep.register_handlers(&mut [entry("many", max_args() + 1)]),
                Err(RegisterError::TooManyArgs {
                    name: "many",
                    nargs: max_args() + 1
                })
            );
            let mut wrong = entry("wrong_short", 0);
            wrong.handler = HandlerFn::Payload(count_payload);
            assert_eq!(
                ep.register_handlers(&mut [wrong]),
                Err(RegisterError::WrongFunction {
                    name: "wrong_short"
                })
            );
            let mut wrong = AmEntry::payload(
                "wrong_long",
                AmCategory::Long,
                AmRole::Request,
                0,
                count_payload,
            );
            wrong.handler = HandlerFn::Short(count_short);
            assert_eq!(
                ep.register_handlers(&mut [wrong]),
                Err(RegisterError::WrongFunction { name: "wrong_long" })
            );
            // A refused table registers nothing: 200 and 248 are still free.
            let mut later = [entry("later200", 0).at(200), entry("later", 0)];
            ep.register_handlers(&mut later).unwrap();
            assert_eq!(later[1].index, 248);

            // Every handler is reached, with its registered name and cdata.
            let all: Vec<AmEntry> = first
                .iter()
                .chain(&second)
                .chain(&third)
                .chain(&later)
                .copied()
                .collect();
            // cdata cannot be set after registration, so check it through a second table
            // with cdata = 3 * index at fresh fixed indices.
            let mut with_cdata: Vec<AmEntry> = (140u8..144)
                .map(|i| AmEntry {
                    cdata: i as usize * 3,
                    ..entry("with_cdata", 2).at(i)
                })
                .collect();
            ep.register_handlers(&mut with_cdata).unwrap();
            team.barrier();
            let mut expected = Vec::new();
            for r in 0..team.size() {
                for e in all.iter().chain(&with_cdata) {
                    let args = vec![e.index as u32; e.nargs];
                    match e.category {
                        AmCategory::Short => {
                            team.request_short(r, e.index, &args, Flags::NONE).unwrap()
                        }
                        _ => team
                            .request_medium(r, e.index, &[e.index; 3], Lc::Now, Flags::NONE, &args)
                            .unwrap(),
                    }
                }
            }
            for e in all.iter().chain(&with_cdata) {
                expected.push((e.index, team.size() as usize));
            }
            poll_until("every handler to run", 10, || {
                expected
                    .iter()
                    .all(|&(i, k)| HITS[i as usize].load(Ordering::Relaxed) >= k)
            });
            team.barrier();
            for &(i, k) in &expected {
                assert_eq!(
                    HITS[i as usize].load(Ordering::Relaxed),
                    k,
                    "runs of handler {i}"
                );
            }
            ERRORS.assert_none();
            assert_eq!(
                HITS.iter()
                    .map(|h| h.load(Ordering::Relaxed))
                    .sum::<usize>(),
                expected.len() * team.size() as usize
            );

            // Fill the table: 128 client indices in all, then TableFull.
            let taken = expected.len();
            assert_eq!(taken, 13);
            let mut last = 255u16;
            for k in 0..(128 - taken) {
                let mut t = [entry("filler", 0)];
                ep.register_handlers(&mut t)
                    .unwrap_or_else(|e| panic!("filler {k}: {e}"));
                assert!(
                    (t[0].index as u16) < last && t[0].index >= 128,
                    "filler {k} got {}",
                    t[0].index
                );
                last = t[0].index as u16;
            }
            assert_eq!(
                ep.register_handlers(&mut [entry("full", 0)]),
                Err(RegisterError::TableFull)
            );
            client.finalize();
        });
    }
}

// ---------------------------------------------------------------------------------------
// Every category, network and argument count

mod all_args {
    use super::*;

    pub static ERRORS: Errors = Errors::new();
    /// Requests and Replies handled, by category (Short, Medium, Long).
    pub static REQUESTS: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
    pub static REPLIES: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
    pub static MAX_MEDIUM: AtomicUsize = AtomicUsize::new(0);

    pub fn arg(src: u32, dst: u32, cat: u32, nargs: u32, j: u32, reply: bool) -> u32 {
        let x = (src << 24) ^ (dst << 16) ^ (cat << 12) ^ (nargs << 6) ^ j ^ ((reply as u32) << 31);
        x.wrapping_mul(0x9E37_79B1).rotate_left(j + 1) ^ (j.wrapping_mul(0x0101_0101))
    }

    pub fn args(src: u32, dst: u32, cat: u32, nargs: usize, reply: bool) -> Vec<u32> {
        (0..nargs as u32)
            .map(|j| arg(src, dst, cat, nargs as u32, j, reply))
            .collect()
    }

    /// Medium payload lengths: 0, 1, 512 and the maximum, then assorted.
    pub fn med_len(nargs: usize, reply: bool) -> usize {
        let max = MAX_MEDIUM.load(Ordering::Relaxed);
        let k = if reply { 16 - nargs } else { nargs };
        match k {
            0 => 0,
            1 => 1,
            2 => 512,
            3 => max,
            _ => (k * 211) % max,
        }
    }

    /// Long payload lengths: 0 for no arguments (dest_addr still passed), else varied.
    pub fn long_len(nargs: usize, reply: bool) -> usize {
        if reply {
            nargs * 77 + 5
        } else {
            nargs * 100
        }
    }

    /// Where a Long from `src` with `nargs` arguments lands in the target's segment.
    pub fn long_off(src: u32, nargs: usize, reply: bool) -> usize {
        (reply as usize) * MB + (src as usize * 17 + nargs) * 4096
    }

    pub fn seed(src: u32, dst: u32, cat: u32, nargs: usize, reply: bool) -> u64 {
        ((src as u64) << 40)
            | ((dst as u64) << 32)
            | ((cat as u64) << 16)
            | ((nargs as u64) << 1)
            | reply as u64
    }

    fn check_common(token: &Token<'_>, args: &[u32], cat: u32) -> (u32, u32, usize) {
        let info = token.info();
        let (src, me) = (info.src_rank, gex::job_rank());
        let nargs = args.len();
        let e = info.entry;
        let what = || format!("{} from {src} (cat {cat}, nargs {nargs})", e.name);
        ERRORS.check(src == token.src_rank(), || {
            format!("{}: src_rank {} vs {}", what(), src, token.src_rank())
        });
        ERRORS.check(src < gex::job_size(), || format!("{}: src {src}", what()));
        ERRORS.check(e.nargs == nargs, || {
            format!("{}: entry.nargs {}", what(), e.nargs)
        });
        let want_name = if cat == 0 {
            format!("short{nargs}")
        } else {
            format!("payload{nargs}")
        };
        ERRORS.check(e.name == want_name, || format!("{}: entry.name", what()));
        ERRORS.check(e.cdata == 1000 * cat.min(1) as usize + nargs, || {
            format!("{}: cdata {}", what(), e.cdata)
        });
        ERRORS.check(info.is_long == (cat == 2), || {
            format!("{}: is_long {}", what(), info.is_long)
        });
        let reply = !info.is_request;
        ERRORS.check(
            args == super::all_args::args(src, me, cat, nargs, reply).as_slice(),
            || format!("{}: args {args:x?}", what()),
        );
        (src, me, nargs)
    }

    pub fn short_handler(token: &Token<'_>, args: &[u32]) {
        let (src, me, nargs) = check_common(token, args, 0);
        if token.info().is_request {
            REQUESTS[0].fetch_add(1, Ordering::Relaxed);
            let idx = token.info().entry.index;
            token
                .reply_short(
                    idx,
                    &super::all_args::args(me, src, 0, nargs, true),
                    Flags::NONE,
                )
                .unwrap();
        } else {
            REPLIES[0].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn payload_handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let info = token.info();
        let cat = if info.is_long { 2 } else { 1 };
        let (src, me, nargs) = check_common(token, args, cat);
        let reply = !info.is_request;
        let what = || format!("payload{nargs} from {src} (cat {cat}, reply {reply})");
        let len = if cat == 1 {
            med_len(nargs, reply)
        } else {
            long_len(nargs, reply)
        };
        ERRORS.check(payload.len() == len, || {
            format!("{}: {} bytes, want {len}", what(), payload.len())
        });
        ERRORS.check(
            payload == pattern(seed(src, me, cat, nargs, reply), len),
            || format!("{}: payload differs", what()),
        );
        if cat == 2 {
            let want = base(me) + long_off(src, nargs, reply);
            ERRORS.check(token.dest_addr() == want, || {
                format!(
                    "{}: dest_addr {:#x} want {want:#x}",
                    what(),
                    token.dest_addr()
                )
            });
            ERRORS.check(len == 0 || payload.as_ptr() as usize == want, || {
                format!("{}: payload not at dest_addr", what())
            });
        }
        if info.is_request {
            REQUESTS[cat as usize].fetch_add(1, Ordering::Relaxed);
            let idx = info.entry.index;
            let rargs = super::all_args::args(me, src, cat, nargs, true);
            if cat == 1 {
                let p = pattern(seed(me, src, 1, nargs, true), med_len(nargs, true));
                token
                    .reply_medium(idx, &p, Lc::Now, Flags::NONE, &rargs)
                    .unwrap();
            } else {
                let p = pattern(seed(me, src, 2, nargs, true), long_len(nargs, true));
                let dest = base(src) + long_off(me, nargs, true);
                token
                    .reply_long(idx, &p, dest, Lc::Now, Flags::NONE, &rargs)
                    .unwrap();
            }
        } else {
            REPLIES[cat as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Short, Medium and Long Requests and Replies with every argument count from 0 to
/// `gex_AM_MaxArgs()` (16), between every pair of ranks: the handler sees the
/// arguments, "AM Token Info" (`GEX_TI_SRCRANK`, `GEX_TI_ENTRY`, `GEX_TI_IS_REQ`,
/// `GEX_TI_IS_LONG`), Medium payloads of 0, 1, 512 and max bytes, and Long payloads at
/// `dest_addr` in its segment (including 0-byte Longs: "dest_addr for Long is
/// guaranteed to be passed to the handler as provided").
#[test]
fn every_category_and_argument_count() {
    use all_args::*;
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_ARGS", Flags::NONE).unwrap();
            let mut table: Vec<AmEntry> = Vec::new();
            for k in 0..=max_args() {
                let name: &'static str = Box::leak(format!("short{k}").into_boxed_str());
                table.push(AmEntry {
                    cdata: k,
                    ..AmEntry::short(name, AmRole::ReqRep, k, short_handler)
                });
            }
            for k in 0..=max_args() {
                let name: &'static str = Box::leak(format!("payload{k}").into_boxed_str());
                table.push(AmEntry {
                    cdata: 1000 + k,
                    ..AmEntry::payload(
                        name,
                        AmCategory::MedLong,
                        AmRole::ReqRep,
                        k,
                        payload_handler,
                    )
                });
            }
            ep.register_handlers(&mut table).unwrap();
            let (short_idx, pay_idx) = table.split_at(max_args() + 1);
            let _ = TEAM.set(team);
            let seg = Segment::attach(&team, 4 * MB).unwrap();
            let _ = BASES.set(common::segment_bases(&team));
            MAX_MEDIUM.store(
                team.max_request_medium(None, LcKind::Now, Flags::NONE, max_args()),
                Ordering::Relaxed,
            );
            assert_eq!(
                MAX_MEDIUM.load(Ordering::Relaxed),
                team.max_reply_medium(None, LcKind::Now, Flags::NONE, max_args())
            );
            team.barrier(); // every rank's handlers can find the globals
            let me = team.rank();
            for r in 0..team.size() {
                for k in 0..=max_args() {
                    team.request_short(
                        r,
                        short_idx[k].index,
                        &args(me, r, 0, k, false),
                        Flags::NONE,
                    )
                    .unwrap();
                    let p = pattern(seed(me, r, 1, k, false), med_len(k, false));
                    team.request_medium(
                        r,
                        pay_idx[k].index,
                        &p,
                        Lc::Now,
                        Flags::NONE,
                        &args(me, r, 1, k, false),
                    )
                    .unwrap();
                    let p = pattern(seed(me, r, 2, k, false), long_len(k, false));
                    let dest = base(r) + long_off(me, k, false);
                    team.request_long(
                        r,
                        pay_idx[k].index,
                        &p,
                        dest,
                        Lc::Now,
                        Flags::NONE,
                        &args(me, r, 2, k, false),
                    )
                    .unwrap();
                }
            }
            let want = team.size() as usize * (max_args() + 1);
            poll_until("all replies", 10, || {
                REPLIES.iter().all(|c| c.load(Ordering::Relaxed) >= want)
            });
            team.barrier();
            for c in 0..3 {
                assert_eq!(
                    REQUESTS[c].load(Ordering::Relaxed),
                    want,
                    "requests of category {c}"
                );
                assert_eq!(
                    REPLIES[c].load(Ordering::Relaxed),
                    want,
                    "replies of category {c}"
                );
            }
            ERRORS.assert_none();
            // Long payloads stay in the segment after their handlers ran.
            for src in 0..team.size() {
                for k in 0..=max_args() {
                    for reply in [false, true] {
                        let len = long_len(k, reply);
                        let at = seg.addr() as usize + long_off(src, k, reply);
                        // SAFETY: inside our segment (4 MiB); written before the barrier.
                        let got = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
                        assert!(
                            got == pattern(seed(src, me, 2, k, reply), len),
                            "Long from {src}, {k} args, reply {reply}"
                        );
                    }
                }
            }
            client.finalize();
        });
    }
}

// ---------------------------------------------------------------------------------------
// Payload limits

mod limits {
    use super::*;
    pub static ERRORS: Errors = Errors::new();
    pub static DONE: AtomicUsize = AtomicUsize::new(0);

    pub fn query(token: &Token<'_>, _args: &[u32]) {
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

// ---------------------------------------------------------------------------------------
// Local completion

mod lc {
    use super::*;
    pub static ERRORS: Errors = Errors::new();
    pub static RECEIVED: AtomicUsize = AtomicUsize::new(0);
    pub static REPLIES: AtomicUsize = AtomicUsize::new(0);
    pub const LONG_LEN: usize = 64 * 1024;
    pub const GROUP_REPLY: u32 = 99;
    pub static GROUP_CHECKED: AtomicUsize = AtomicUsize::new(0);

    /// args: [variant]. Medium or Long; the payload is pattern(src, variant).
    pub fn recv(token: &Token<'_>, payload: &[u8], args: &[u32]) {
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

// ---------------------------------------------------------------------------------------
// IMMEDIATE

mod flood {
    use super::*;
    pub static RUNS: AtomicUsize = AtomicUsize::new(0);
    pub fn count(_token: &Token<'_>, args: &[u32]) {
        assert_eq!(args, [7, 8]);
        RUNS.fetch_add(1, Ordering::Relaxed);
    }
}

/// `GEX_FLAG_IMMEDIATE` ("NOTE 1: Return value"): a rank floods its successor, which
/// does not poll, with IMMEDIATE Requests until one returns `Err(NoOp)` (non-zero); then
/// the successor drains its queue and its handler runs exactly once per `Ok` send: a
/// "no op" performs no communication.
#[test]
fn immediate_flood_until_no_op() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_FLOOD", Flags::NONE).unwrap();
            let mut t = [AmEntry::short("flood", AmRole::Request, 2, flood::count)];
            ep.register_handlers(&mut t).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let (me, size) = (team.rank(), team.size());
            let next = (me + 1) % size;
            let prev = (me + size - 1) % size;
            // A peer may still be polling in the attach barrier after we left it. Each
            // rank tells its predecessor by RMA (which needs no polling) that it has
            // stopped polling, and floods its successor only once told so.
            team.put_val_blocking(prev, bases[prev as usize] + 8, 1, 8, Flags::NONE)
                .unwrap();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // SAFETY: the second word of our segment, written by our successor.
            while unsafe { common::read_u64(seg.addr() as usize + 8) } != 1 {
                assert!(std::time::Instant::now() < end, "successor never got ready");
                std::hint::spin_loop();
            }
            // Flood without polling (IMMEDIATE sends never poll).
            let mut ok = 0u64;
            let noop = loop {
                match team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE) {
                    Ok(()) => ok += 1,
                    Err(e) => break e,
                }
                assert!(ok < 1_000_000, "IMMEDIATE never reported back-pressure");
            };
            assert_eq!(noop, NoOp);
            assert!(ok >= 1);
            // More IMMEDIATE sends still find the queue full: nothing was drained.
            for _ in 0..10 {
                assert_eq!(
                    team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE),
                    Err(NoOp)
                );
            }
            // IMMEDIATE Medium and Long are refused the same way.
            assert_eq!(
                team.request_medium(next, t[0].index, &[1], Lc::Now, Flags::IMMEDIATE, &[7, 8]),
                Err(NoOp)
            );
            assert_eq!(
                team.request_long(
                    next,
                    t[0].index,
                    &[1],
                    bases[next as usize],
                    Lc::Now,
                    Flags::IMMEDIATE,
                    &[7, 8]
                ),
                Err(NoOp)
            );
            assert!(matches!(
                team.prepare_request_medium(next, None, 1, 10, Lc::Now, Flags::IMMEDIATE, 2),
                Err(NoOp)
            ));
            // Tell the successor how many got through (RMA needs no polling); it stays
            // zero until then.
            team.put_val_blocking(next, bases[next as usize], ok + 1, 8, Flags::NONE)
                .unwrap();
            let flag = seg.addr() as usize;
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // SAFETY: the first word of our segment, written by our predecessor.
            let expected = loop {
                let v = unsafe { common::read_u64(flag) };
                if v != 0 {
                    break v - 1;
                }
                assert!(
                    std::time::Instant::now() < end,
                    "predecessor never reported"
                );
                std::hint::spin_loop();
            };
            assert_eq!(
                flood::RUNS.load(Ordering::Relaxed),
                0,
                "no handler runs without polling"
            );
            poll_until("the flood to drain", 10, || {
                flood::RUNS.load(Ordering::Relaxed) as u64 >= expected
            });
            for _ in 0..100 {
                gex::poll();
            }
            assert_eq!(
                flood::RUNS.load(Ordering::Relaxed) as u64,
                expected,
                "handler runs == Ok sends"
            );
            // Once drained, IMMEDIATE sends succeed again.
            team.barrier();
            assert_eq!(
                team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE),
                Ok(())
            );
            poll_until("one more", 10, || {
                flood::RUNS.load(Ordering::Relaxed) as u64 == expected + 1
            });
            client.finalize();
        });
    }
}

// ---------------------------------------------------------------------------------------
// Negotiated payload

mod negotiated {
    use super::*;
    pub static ERRORS: Errors = Errors::new();
    pub static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    pub static REPLIES: AtomicUsize = AtomicUsize::new(0);
    pub static MED: AtomicUsize = AtomicUsize::new(0);
    pub static LONG: AtomicUsize = AtomicUsize::new(0);
    pub const CASES: u32 = 5;

    pub fn seed(src: u32, dst: u32, case: u32, reply: bool) -> u64 {
        ((src as u64) << 40) | ((dst as u64) << 20) | ((case as u64) << 1) | reply as u64
    }

    /// Where case `case` Longs from `src` land in the target's segment.
    pub fn long_off(src: u32, case: u32, reply: bool) -> usize {
        (reply as usize) * 4 * MB + (src as usize * CASES as usize + case as usize) * 128 * 1024
    }

    /// args: [case, nbytes]
    pub fn handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
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
                    .prepare_reply_long(None, 4096, 8192, Lc::Now, Flags::NONE, 2)
                    .unwrap();
                let size = sd.size();
                ERRORS.check((4096..=8192).contains(&size), || {
                    format!("reply long lib size {size}")
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
                    .prepare_request_long(r, None, 4096, 65536, Lc::Now, Flags::NONE, 2)
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

mod misuse {
    use super::*;
    pub static RUNS: AtomicUsize = AtomicUsize::new(0);
    pub fn handler(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
        assert_eq!(payload.len(), args[0] as usize);
        RUNS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Misuse of the negotiated-payload calls fails naming the call, and leaves the layer
/// usable: no buffer with an lc other than NOW ("If client_buf is NULL, this argument
/// must also be NULL"), `most < least`, `least` over the maximum, Commit of more than
/// `gex_AM_SrcDescSize`, of the wrong number of arguments or the wrong category, and a
/// SrcDesc dropped without Commit ("must be consumed (exactly once) by a Commit").
#[test]
fn negotiated_payload_misuse() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_MISUSE", Flags::NONE).unwrap();
            let mut t = [AmEntry::payload(
                "misuse",
                AmCategory::MedLong,
                AmRole::Request,
                1,
                misuse::handler,
            )];
            ep.register_handlers(&mut t).unwrap();
            let h = t[0].index;
            let _seg = Segment::attach(&team, MB).unwrap();
            let peer = (team.rank() + 1) % team.size();
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
            common::expect_panic(&["Team::prepare_request_long", "17 arguments"], || {
                team.prepare_request_long(peer, Some(&buf), 1, 10, Lc::Now, Flags::NONE, 17)
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
