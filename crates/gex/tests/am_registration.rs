//! Active Message handler registration ("gex_EP_RegisterHandlers()"): the indices a table
//! gets, the tables refused, and every registered handler reached with its name and
//! cdata ("AM Token Info", `GEX_TI_ENTRY`), with 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{poll_until, Errors};
use gex::am::{max_args, RegisterError};
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmRole, Client, Flags, HandlerFn, Lc, Token};

mod registration {
    use super::*;

    pub(crate) static HITS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
    pub(crate) static ERRORS: Errors = Errors::new();

    pub(crate) fn count_short(token: &Token<'_>, args: &[u32]) {
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

    pub(crate) fn count_payload(token: &Token<'_>, payload: &[u8], args: &[u32]) {
        let e = token.info().entry;
        ERRORS.check(payload == [e.index; 3], || {
            format!("{}: payload {payload:?}", e.name)
        });
        count_short(token, args)
    }

    pub(crate) fn entry(name: &'static str, nargs: usize) -> AmEntry {
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
