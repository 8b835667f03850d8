//! GASP events of non-contiguous transfers (UPC++ ch. 15; our `GASP_UPCXX_VIS_PUT` and
//! `GASP_UPCXX_VIS_GET`, since GASP has no non-contiguous events), with 1 to 3 ranks:
//! each call is one interval at the user's call site with the target, shape, runs and
//! bytes, and the `gex` VIS operation inside it is not reported.
#![cfg(feature = "gasp")]

mod common;

use std::sync::Arc;

use common::recorder::{Rec, Recorder, Shared};
use gasp::events::*;
use gasp::{Arg, EventType};
use gex::testing::spmd;
use upcxx::{rank_me, rank_n, GlobalPtr};

fn pair(tag: u32, line: u32, args: [Arg<'_>; 4]) -> Vec<Rec> {
    let start: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let mut end = start.clone();
    end.push(format!("{:?}", Arg::Handle(NB_TRIVIAL)));
    vec![
        (tag, EventType::Start, line, start),
        (tag, EventType::End, line, end),
    ]
}

#[test]
fn each_call_is_one_interval_at_the_call_site() {
    for n in 1..=3 {
        spmd(n, || {
            let rec = Arc::new(Recorder::default());
            let shared = rec.clone();
            gasp::register_tool(move |_info, _| Box::new(Shared(shared)));
            upcxx::init();
            let mine: GlobalPtr<u64> = upcxx::new_array(64);
            let all = common::all_gather(&mine);
            let next = all[((rank_me() + 1) % rank_n()) as usize];
            let r = next.where_();
            let src = [5u64; 16];
            let mut dst = [0u64; 16];
            let mark = rec.0.lock().unwrap().len();
            let l1 = line!() + 1;
            let f1 = upcxx::rput_irregular([&src[..3], &src[3..8]], [(next, 8usize)]);
            let l2 = line!() + 1;
            let f2 = upcxx::rget_regular([next, next.add(4)], 4, dst[..8].chunks_mut(4), 4);
            let l3 = line!() + 1;
            let f3 = upcxx::rput_strided(&src, 0, [8, 32], next.add(16), [32, 8], [4, 2]);
            let l4 = line!() + 1;
            let f4 = upcxx::rget_strided(next.add(16), [8], &mut dst, 0, [8], [6]);
            let mut got: Vec<Rec> = rec.0.lock().unwrap()[mark..].to_vec();
            // To a segment not mapped here a transfer may still be pending at return (a
            // small one travels as messages to the owner), its handle then an event's:
            // only the mapped case fixes the handle.
            if !next.is_local() {
                for e in got.iter_mut().filter(|e| e.1 == EventType::End) {
                    *e.3.last_mut().unwrap() = format!("{:?}", Arg::Handle(NB_TRIVIAL));
                }
            }
            let expected = [
                pair(
                    GASP_UPCXX_VIS_PUT,
                    l1,
                    [Arg::Rank(r), Arg::Int(0), Arg::Size(3), Arg::Bytes(64)],
                ),
                pair(
                    GASP_UPCXX_VIS_GET,
                    l2,
                    [Arg::Rank(r), Arg::Int(1), Arg::Size(4), Arg::Bytes(64)],
                ),
                pair(
                    GASP_UPCXX_VIS_PUT,
                    l3,
                    [Arg::Rank(r), Arg::Int(2), Arg::Size(8), Arg::Bytes(64)],
                ),
                pair(
                    GASP_UPCXX_VIS_GET,
                    l4,
                    [Arg::Rank(r), Arg::Int(2), Arg::Size(6), Arg::Bytes(48)],
                ),
            ]
            .concat();
            assert_eq!(got, expected, "rank {}", rank_me());
            upcxx::when_all((f1, f2, f3, f4)).wait();
            upcxx::barrier();
            upcxx::delete_array(mine);
            upcxx::finalize();
        });
    }
}
