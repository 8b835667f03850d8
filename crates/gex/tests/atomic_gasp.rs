//! The GASP events of remote atomics (ours: gasp-1.4 has none for atomics):
//! `GASP_GEX_AD_OP` for every operation, `GASP_GEX_AD_CREATE` and `GASP_GEX_AD_DESTROY`.
// The events are compiled only with the `gasp` feature.
#![cfg(feature = "gasp")]
mod common;

use gex::ops::{Dt, Op};
use gex::testing::spmd;
use gex::{nbi_wait, AtomicDomain, Client, EventCategory, Flags, Segment};

const SEG: usize = 16 * gex::PAGE_SIZE;

/// GASP: every operation reports `GASP_GEX_AD_OP` (target, result, op, type, operands,
/// size; the END adds the handle), creation and destruction their own events, with
/// the caller's location.
#[test]
fn every_atomic_operation_reports_its_gasp_event() {
    use gasp::events::*;
    use gasp::{Arg, Event, EventType, GPtr, InitInfo, Tool};
    use std::sync::{Arc, Mutex};

    /// Tag, type, line and arguments of one event.
    type Seen = (u32, EventType, u32, Vec<String>);
    #[derive(Default)]
    struct Rec(Mutex<Vec<Seen>>);
    struct Shared(Arc<Rec>);
    impl Tool for Shared {
        fn event_notify(&self, e: &Event<'_>) {
            let args = e.args.iter().map(|a| format!("{a:?}")).collect();
            self.0
                 .0
                .lock()
                .unwrap()
                .push((e.tag, e.ty, e.location.line(), args));
        }
        fn control(&self, _on: bool) -> bool {
            true
        }
        fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
            USEREVT_START
        }
    }
    spmd(2, || {
        let rec = Arc::new(Rec::default());
        let shared = rec.clone();
        gasp::register_tool(move |_: &InitInfo, _| Box::new(Shared(shared)));
        let (client, _ep, team) = Client::init("AD_GASP", Flags::NONE).unwrap();
        let _seg = Segment::attach(&team, SEG).unwrap();
        let tgt = 1 - team.rank();
        let w = common::segment_bases(&team)[tgt as usize] + 8 * team.rank() as usize;
        let create_line = line!() + 1;
        let ad = AtomicDomain::create(&team, Dt::I32, Op::FAdd | Op::Inc, Flags::NONE);
        let mut out = 0i32;
        let nb_line = line!() + 2;
        // SAFETY: `out` outlives the wait.
        unsafe { ad.op_nb(&mut out, tgt, w, Op::FAdd, -3, 0, Flags::NONE) }
            .unwrap()
            .wait();
        let nbi_line = line!() + 2;
        // SAFETY: INC does not fetch.
        unsafe { ad.op_nbi(std::ptr::null_mut(), tgt, w, Op::Inc, 0i32, 0, Flags::NONE) }.unwrap();
        nbi_wait(EventCategory::RMW);
        team.barrier();
        let destroy_line = line!() + 1;
        ad.destroy();
        let got = rec.0.lock().unwrap().clone();
        let ours: Vec<_> = got
            .iter()
            .filter(|e| [GASP_GEX_AD_OP, GASP_GEX_AD_CREATE, GASP_GEX_AD_DESTROY].contains(&e.0))
            .cloned()
            .collect();
        let target = GPtr {
            rank: tgt,
            addr: w as u64,
        };
        let op_args = |result: usize, op: Op, a: i32| {
            [
                Arg::GPtr(target),
                Arg::Ptr(result),
                Arg::Int(op.bit() as i32),
                Arg::Int(Dt::I32.bit() as i32),
                Arg::U64(u64::from(a as u32)),
                Arg::U64(0),
                Arg::Bytes(4),
            ]
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
        };
        // On the mapping an operation is done inside its call (GASP_NB_TRIVIAL); to a
        // segment that is not mapped here (another host) it is an Active Message, pending
        // at return: the NB form's handle names its event, the NBI form's is
        // GASP_NB_IMPLICIT (GASP §5.4.6).
        let mapped = team.segment_bound(tgt).unwrap().local_addr.is_some();
        let handle = |h: u64| format!("{:?}", Arg::Handle(h));
        let end_nb = op_args(&out as *const i32 as usize, Op::FAdd, -3);
        let mut end_nbi = op_args(0, Op::Inc, 0);
        end_nbi.push(handle(if mapped { NB_TRIVIAL } else { NB_IMPLICIT }));
        let kinds: Vec<(u32, EventType, u32)> = ours.iter().map(|e| (e.0, e.1, e.2)).collect();
        assert_eq!(
            kinds,
            [
                (GASP_GEX_AD_CREATE, EventType::Start, create_line),
                (GASP_GEX_AD_CREATE, EventType::End, create_line),
                (GASP_GEX_AD_OP, EventType::Start, nb_line),
                (GASP_GEX_AD_OP, EventType::End, nb_line),
                (GASP_GEX_AD_OP, EventType::Start, nbi_line),
                (GASP_GEX_AD_OP, EventType::End, nbi_line),
                (GASP_GEX_AD_DESTROY, EventType::Start, destroy_line),
                (GASP_GEX_AD_DESTROY, EventType::End, destroy_line),
            ]
        );
        assert_eq!(
            ours[2].3,
            op_args(&out as *const i32 as usize, Op::FAdd, -3)
        );
        let (nb_handle, nb_rest) = ours[3].3.split_last().unwrap();
        assert_eq!(nb_rest, end_nb);
        if mapped {
            assert_eq!(*nb_handle, handle(NB_TRIVIAL), "a completed op_nb's handle");
        } else {
            assert!(
                nb_handle.starts_with("Handle(")
                    && ![handle(NB_TRIVIAL), handle(NB_IMPLICIT)].contains(nb_handle),
                "a pending op_nb's handle names its event: {nb_handle}"
            );
        }
        assert_eq!(ours[5].3, end_nbi);
        client.finalize();
    });
}
