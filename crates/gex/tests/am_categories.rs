//! Active Message Requests and Replies ("Active Message (AM)" sections of the spec):
//! Short, Medium and Long with every argument count, "AM Token Info" and payload
//! delivery, with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::am::{base, BASES, TEAM};
use common::{pattern, poll_until, Errors};
use gex::am::max_args;
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmRole, Client, Flags, Lc, LcKind, Segment, Token};

const MB: usize = 1 << 20;

mod all_args {
    use super::*;

    pub(crate) static ERRORS: Errors = Errors::new();
    /// Requests and Replies handled, by category (Short, Medium, Long).
    pub(crate) static REQUESTS: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
    pub(crate) static REPLIES: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
    pub(crate) static MAX_MEDIUM: AtomicUsize = AtomicUsize::new(0);

    pub(crate) fn arg(src: u32, dst: u32, cat: u32, nargs: u32, j: u32, reply: bool) -> u32 {
        let x = (src << 24) ^ (dst << 16) ^ (cat << 12) ^ (nargs << 6) ^ j ^ ((reply as u32) << 31);
        x.wrapping_mul(0x9E37_79B1).rotate_left(j + 1) ^ (j.wrapping_mul(0x0101_0101))
    }

    pub(crate) fn args(src: u32, dst: u32, cat: u32, nargs: usize, reply: bool) -> Vec<u32> {
        (0..nargs as u32)
            .map(|j| arg(src, dst, cat, nargs as u32, j, reply))
            .collect()
    }

    /// Medium payload lengths: 0, 1, 512 and the maximum, then assorted.
    pub(crate) fn med_len(nargs: usize, reply: bool) -> usize {
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

    /// Long payload lengths: 0 for no arguments (dest_addr still passed), else varied,
    /// and with 16 arguments more than a message between hosts carries (the mpi
    /// conduit puts that one by RMA, the others travel in their messages). It spills
    /// into the next sender's area for no arguments, which stays empty.
    pub(crate) fn long_len(nargs: usize, reply: bool) -> usize {
        if reply {
            nargs * 77 + 5
        } else if nargs == 16 {
            5000
        } else {
            nargs * 100
        }
    }

    /// Where a Long from `src` with `nargs` arguments lands in the target's segment.
    pub(crate) fn long_off(src: u32, nargs: usize, reply: bool) -> usize {
        (reply as usize) * MB + (src as usize * 17 + nargs) * 4096
    }

    pub(crate) fn seed(src: u32, dst: u32, cat: u32, nargs: usize, reply: bool) -> u64 {
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

    pub(crate) fn short_handler(token: &Token<'_>, args: &[u32]) {
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

    pub(crate) fn payload_handler(token: &Token<'_>, payload: &[u8], args: &[u32]) {
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

mod empty_long {
    use super::*;
    use std::sync::Mutex;

    /// The `dest_addr`s a Long of no bytes carries (null, odd, past any segment, the
    /// top of the address space), by index in the Request's argument.
    pub(crate) const ADDRS: [usize; 4] = [0, 0x13, 1 << 46, usize::MAX - 7];
    pub(crate) const REQUEST: u8 = 180;
    pub(crate) const REPLY: u8 = 181;
    /// What a handler saw: Request or Reply, sender, argument, dest_addr, bytes.
    pub(crate) type Seen = (bool, u32, u32, usize, usize);
    pub(crate) static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

    pub(crate) fn request(t: &Token<'_>, payload: &[u8], args: &[u32]) {
        SEEN.lock()
            .unwrap()
            .push((true, t.src_rank(), args[0], t.dest_addr(), payload.len()));
        // The Reply carries the next address of the list back.
        let next = ADDRS[(args[0] as usize + 1) % ADDRS.len()];
        t.reply_long(REPLY, &[], next, Lc::Now, Flags::NONE, &[args[0]])
            .unwrap();
    }

    pub(crate) fn reply(t: &Token<'_>, payload: &[u8], args: &[u32]) {
        SEEN.lock()
            .unwrap()
            .push((false, t.src_rank(), args[0], t.dest_addr(), payload.len()));
    }
}

/// A Long of no bytes passes its `dest_addr` to the handler as the initiator gave it,
/// null or outside every segment, checked against nothing (GASNet-EX, "Fixed-payload
/// AM APIs", misc semantic strengthening: "even for the degenerate case when
/// nbytes==0"), and so does its Reply; before any segment is bound and after.
#[test]
fn a_long_of_no_bytes_passes_its_dest_addr_as_given() {
    use empty_long::*;
    for n in 1..=4 {
        spmd(n, || {
            let (client, ep, team) = Client::init("AM_EMPTY_LONG", Flags::NONE).unwrap();
            let mut table = [
                AmEntry::payload("empty long", AmCategory::Long, AmRole::Request, 1, request)
                    .at(REQUEST),
                AmEntry::payload(
                    "empty long reply",
                    AmCategory::Long,
                    AmRole::Reply,
                    1,
                    reply,
                )
                .at(REPLY),
            ];
            ep.register_handlers(&mut table).unwrap();
            let (me, size) = (team.rank(), team.size());
            let mut seg = None;
            for phase in 0..2 {
                if phase == 1 {
                    seg = Some(Segment::attach(&team, MB).unwrap());
                }
                SEEN.lock().unwrap().clear();
                team.barrier();
                for r in 0..size {
                    for (i, &addr) in ADDRS.iter().enumerate() {
                        team.request_long(r, REQUEST, &[], addr, Lc::Now, Flags::NONE, &[i as u32])
                            .unwrap();
                    }
                }
                let want = 2 * ADDRS.len() * size as usize;
                poll_until("the Longs of no bytes and their Replies", 10, || {
                    SEEN.lock().unwrap().len() >= want
                });
                let mut seen = std::mem::take(&mut *SEEN.lock().unwrap());
                seen.sort_unstable();
                let mut expected = Vec::new();
                for r in 0..size {
                    for i in 0..ADDRS.len() {
                        let next = ADDRS[(i + 1) % ADDRS.len()];
                        expected.push((true, r, i as u32, ADDRS[i], 0));
                        expected.push((false, r, i as u32, next, 0));
                    }
                }
                expected.sort_unstable();
                assert_eq!(seen, expected, "rank {me}, phase {phase}");
                team.barrier();
            }
            assert!(seg.is_some());
            client.finalize();
        });
    }
}
