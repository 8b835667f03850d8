//! The build without the `gasp` feature (gasp-1.4 §3.1.1: code compiled without
//! `--profile` carries no instrumentation): the runtime attaches no tool, neither one
//! the program registers nor the one `GASP_TOOL` names, so its operations reach no
//! tool. `cargo test -p gex --no-default-features` runs this file (`.ci/run` does);
//! with the feature, `gasp.rs` tests the events instead.
#![cfg(not(feature = "gasp"))]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use gasp::{Event, InitInfo, Tool};
use gex::testing::spmd;
use gex::{Client, Flags, Segment};

static INITS: AtomicUsize = AtomicUsize::new(0);
static EVENTS: AtomicUsize = AtomicUsize::new(0);

struct Counter;

impl Tool for Counter {
    fn event_notify(&self, _event: &Event<'_>) {
        EVENTS.fetch_add(1, Ordering::Relaxed);
    }

    fn control(&self, _on: bool) -> bool {
        true
    }

    fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
        gasp::events::USEREVT_START
    }
}

#[test]
fn without_the_feature_no_tool_is_attached_and_nothing_is_reported() {
    for ranks in [1, 2, 3] {
        spmd(ranks, || {
            std::env::set_var(gasp::dispatch::GASP_TOOL, "profile");
            gasp::register_tool(|_info: &InitInfo, _args| {
                INITS.fetch_add(1, Ordering::Relaxed);
                Box::new(Counter)
            });
            let (client, _ep, team) = Client::init("GASPOFF", Flags::NONE).unwrap();
            let _segment = Segment::attach(&team, 1 << 16).unwrap();
            let bases = common::segment_bases(&team);
            team.barrier();
            let next = (team.rank() + 1) % team.size();
            team.put_val_blocking(
                next,
                bases[next as usize] + 8 * team.rank() as usize,
                7,
                8,
                Flags::NONE,
            )
            .unwrap();
            team.barrier();
            let mut word = [0u8; 8];
            team.get_blocking(&mut word, next, bases[next as usize], Flags::NONE)
                .unwrap();
            team.barrier_nb().wait();
            gex::poll();
            assert!(gasp::dispatch::info().is_none(), "a tool was attached");
            assert!(!gasp::enabled(), "instrumentation is on");
            assert_eq!(INITS.load(Ordering::Relaxed), 0, "gasp_init was called");
            assert_eq!(EVENTS.load(Ordering::Relaxed), 0, "a tool received events");
            client.finalize();
        });
    }
}
