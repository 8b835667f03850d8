//! GASP events of VIS transfers (our `GASP_GEX_VIS_PUT`/`GASP_GEX_VIS_GET`; gasp-1.4
//! has no non-contiguous events), with 1 to 3 ranks: each call reports one interval at
//! its call site with the target, shape, runs and bytes, and the END's handle; the peer
//! completion message a put sends is one of its internals and is not reported.
#![cfg(feature = "gasp")]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gasp::events::*;
use gasp::{Arg, Event, EventType, InitInfo, Tool};
use gex::testing::spmd;
use gex::{AmCategory, AmEntry, AmRole, Client, EventCategory, Flags, Memvec, Segment, Token};

/// One received event: tag, type, line (0 outside this file), arguments.
type Rec = (u32, EventType, u32, Vec<String>);

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Rec>>,
}

struct Shared(Arc<Recorder>);

impl Tool for Shared {
    fn event_notify(&self, e: &Event<'_>) {
        let args = e.args.iter().map(|a| format!("{a:?}")).collect();
        let line = if e.location.file() == file!() {
            e.location.line()
        } else {
            0
        };
        self.0
            .events
            .lock()
            .unwrap()
            .push((e.tag, e.ty, line, args));
    }
    fn control(&self, _on: bool) -> bool {
        true
    }
    fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
        USEREVT_START
    }
}

static NOTIFIED: AtomicUsize = AtomicUsize::new(0);

fn notified(_t: &Token<'_>, _p: &[u8], _a: &[u32]) {
    NOTIFIED.fetch_add(1, Ordering::Relaxed);
}

fn args(target: u32, shape: i32, runs: usize, n: usize) -> Vec<String> {
    [
        Arg::Rank(target),
        Arg::Int(shape),
        Arg::Size(runs),
        Arg::Bytes(n),
    ]
    .iter()
    .map(|a| format!("{a:?}"))
    .collect()
}

fn with_handle(mut a: Vec<String>, handle: u64) -> Vec<String> {
    a.push(format!("{:?}", Arg::Handle(handle)));
    a
}

#[test]
fn every_vis_call_reports_one_interval_at_its_call_site() {
    for n in 1..=3 {
        spmd(n, || {
            let rec = Arc::new(Recorder::default());
            let shared = rec.clone();
            gasp::register_tool(move |_info: &InitInfo, _args| Box::new(Shared(shared)));
            let (client, ep, team) = Client::init("VIS_GASP", Flags::NONE).unwrap();
            let mut table = [AmEntry::payload(
                "notified",
                AmCategory::Medium,
                AmRole::Reply,
                0,
                notified,
            )];
            ep.register_handlers(&mut table).unwrap();
            let _seg = Segment::attach(&team, 1 << 16).unwrap();
            team.barrier();
            let me = team.rank();
            let next = (me + 1) % team.size();
            let base = team.segment_bound(next).unwrap().owner_addr + me as usize * 1024;
            let mark = rec.events.lock().unwrap().len();
            let src = [3u8; 64];
            let mut dst = [0u8; 64];

            gex::vis::set_peer_completion_handler(table[0].index, b"done", Flags::NONE);
            let l1 = line!() + 1;
            team.vector_put_blocking(
                next,
                &[Memvec::new(base, 24)],
                &[&src[..8], &src[8..24]],
                Flags::NONE,
            )
            .unwrap();
            let (a, b) = dst.split_at_mut(4);
            let l2 = line!() + 1;
            team.indexed_get_blocking(
                &mut [a, &mut b[..4]],
                next,
                &[base, base + 16],
                4,
                Flags::NONE,
            )
            .unwrap();
            let l3 = line!() + 3;
            // SAFETY: `src` outlives the event's wait.
            let e = unsafe {
                team.strided_put_nb(next, base, &[16], &src, 0, &[8], 8, &[4], Flags::NONE)
            }
            .unwrap();
            e.wait();
            let l4 = line!() + 3;
            // SAFETY: `dst` is not touched until the NBI wait.
            unsafe {
                team.strided_get_nbi(
                    &mut dst,
                    0,
                    &[8, 16],
                    next,
                    base,
                    &[16, 8],
                    8,
                    &[2, 2],
                    Flags::NONE,
                )
            }
            .unwrap();
            gex::nbi_wait(EventCategory::GET);
            // A no-op still reports its call.
            let l5 = line!() + 1;
            team.strided_put_blocking(next, base, &[8], &src, 0, &[8], 8, &[0], Flags::NONE)
                .unwrap();

            let got: Vec<_> = rec.events.lock().unwrap()[mark..]
                .iter()
                .filter(|e| ![GASP_GEX_AM_HANDLER, GASP_GEX_POLL, GASP_UPC_NB_SYNC].contains(&e.0))
                .cloned()
                .collect();
            let trivial = gasp::events::NB_TRIVIAL;
            // To a segment not mapped here an NB or NBI transfer may still be pending at
            // return (a small one travels as messages to the owner), its handle then an
            // event's or NB_IMPLICIT: only the mapped case fixes the handle.
            let got: Vec<_> = if team.segment_bound(next).unwrap().local_addr.is_some() {
                got
            } else {
                got.into_iter()
                    .map(|mut e| {
                        if e.1 == EventType::End {
                            *e.3.last_mut().unwrap() = format!("{:?}", Arg::Handle(trivial));
                        }
                        e
                    })
                    .collect()
            };
            let pair = |tag, line, a: Vec<String>| {
                vec![
                    (tag, EventType::Start, line, a.clone()),
                    (tag, EventType::End, line, with_handle(a, trivial)),
                ]
            };
            let expected: Vec<_> = [
                pair(GASP_GEX_VIS_PUT, l1, args(next, 0, 3, 24)),
                pair(GASP_GEX_VIS_GET, l2, args(next, 1, 4, 8)),
                pair(GASP_GEX_VIS_PUT, l3, args(next, 2, 4, 32)),
                pair(GASP_GEX_VIS_GET, l4, args(next, 2, 4, 32)),
                pair(GASP_GEX_VIS_PUT, l5, args(next, 2, 0, 0)),
            ]
            .concat();
            assert_eq!(got, expected, "rank {me}");
            team.barrier();
            while NOTIFIED.load(Ordering::Relaxed) < 1 {
                gex::poll();
            }
            client.finalize();
        });
    }
}
