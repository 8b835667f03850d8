//! Instrumentation control of a region (`gasp::instrumentation_off`, the Rust form of
//! gasp-1.4 §5.1 `#pragma pupc off` / `on`) on UPC++ programs of 2 and 3 ranks under the
//! built-in profiler: operations inside a region are not reported, those outside are;
//! nested regions restore the state they found; user events and measurement control
//! are unaffected (§3.1.3); an RPC body that runs on the target is instrumented.
#![cfg(feature = "gasp")]

mod common;

use gasp::events::*;
use gasp::formats::Profile;
use gex::testing::{spmd_outcome, SpmdOptions};
use upcxx::{rank_me, rank_n, GlobalPtr};

const OUTSIDE: u64 = 7;
const INSIDE: u64 = 5;

/// The lines of the program's operations, as rank 0 saw them (the same on every rank).
#[derive(serde::Serialize, serde::Deserialize)]
struct Lines {
    outside: u32,
    inside: u32,
    nested_inner: u32,
    nested_after_inner: u32,
    after_region: u32,
    pair_off: u32,
    rpc_inside: u32,
}

fn profiled(ranks: usize, name: &str) -> Option<Profile> {
    let out = std::env::temp_dir().join(format!("upcxx-{name}-{}.json", std::process::id()));
    let lines_file = out.with_extension("lines");
    let mut opts = SpmdOptions::new(ranks);
    opts.env.push(("GASP_TOOL".into(), "profile".into()));
    opts.env
        .push(("GASP_OUT".into(), out.display().to_string()));
    opts.env
        .push(("REGION_LINES".into(), lines_file.display().to_string()));
    let outcome = spmd_outcome(opts, || {
        upcxx::init();
        let cells: GlobalPtr<u64> = upcxx::new_array(1);
        let all = common::all_gather(&cells);
        let next = all[((rank_me() + 1) % rank_n()) as usize];
        let phase = gasp::create_event("region test phase", None);
        let mut lines = Lines {
            outside: 0,
            inside: 0,
            nested_inner: 0,
            nested_after_inner: 0,
            after_region: 0,
            pair_off: 0,
            rpc_inside: 0,
        };
        for i in 0..OUTSIDE {
            lines.outside = line!() + 1;
            upcxx::rput(i, next).wait();
        }
        {
            let _off = gasp::instrumentation_off();
            for i in 0..INSIDE {
                lines.inside = line!() + 1;
                upcxx::rput(i, next).wait();
                // §3.1.3: user events are still reported inside the region.
                gasp::event_start(phase, &[]);
                gasp::event_end(phase, &[]);
            }
            lines.rpc_inside = line!() + 1;
            let r = upcxx::rpc(next.where_(), |x: u64| x + 1, (1,)).wait();
            assert_eq!(r, 2);
            {
                let _inner = gasp::instrumentation_off();
                lines.nested_inner = line!() + 1;
                upcxx::rput(1, next).wait();
            }
            // The inner region ended inside the outer one: still off.
            lines.nested_after_inner = line!() + 1;
            upcxx::rput(2, next).wait();
            // Measurement control is the tool's, untouched by the region.
            assert!(gasp::control(true));
        }
        lines.after_region = line!() + 1;
        upcxx::rput(3, next).wait();
        // The function pair: off returns the previous state, on turns it back on.
        assert!(gasp::set_instrumentation(false));
        lines.pair_off = line!() + 1;
        upcxx::rput(4, next).wait();
        assert!(!gasp::set_instrumentation(false));
        assert!(!gasp::set_instrumentation(true));
        upcxx::barrier();
        if rank_me() == 0 {
            let path = std::env::var("REGION_LINES").unwrap();
            std::fs::write(path, serde_json::to_vec(&lines).unwrap()).unwrap();
        }
        upcxx::delete_array(cells);
        upcxx::finalize();
    })?;
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.failure);
    let profile = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).unwrap();
    LINES.with(|l| {
        *l.borrow_mut() =
            Some(serde_json::from_slice(&std::fs::read(&lines_file).unwrap()).unwrap())
    });
    std::fs::remove_file(&lines_file).unwrap();
    Some(profile)
}

thread_local! {
    static LINES: std::cell::RefCell<Option<Lines>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn operations_in_an_uninstrumented_region_are_not_reported() {
    for ranks in [2, 3] {
        let Some(p) = profiled(ranks, &format!("region{ranks}")) else {
            continue;
        };
        let lines = LINES.with(|l| l.borrow_mut().take().unwrap());
        let at = |line: u32, tag: u32| -> u64 {
            p.events
                .iter()
                .filter(|r| r.line == line && r.tag == tag && r.file == file!())
                .map(|r| r.count)
                .sum()
        };
        let n = ranks as u64;
        assert_eq!(at(lines.outside, GASP_UPC_NB_PUT_INIT), OUTSIDE * n);
        assert_eq!(at(lines.outside, GASP_UPCXX_FUTURE_WAIT), OUTSIDE * n);
        for (what, line) in [
            ("inside", lines.inside),
            ("nested", lines.nested_inner),
            ("after the inner region", lines.nested_after_inner),
            ("after set_instrumentation(false)", lines.pair_off),
            ("the rpc", lines.rpc_inside),
        ] {
            let reported: Vec<_> = p
                .events
                .iter()
                .filter(|r| r.line == line && r.file == file!())
                .collect();
            assert!(reported.is_empty(), "{what} (line {line}): {reported:?}");
        }
        assert_eq!(at(lines.after_region, GASP_UPC_NB_PUT_INIT), n);
        // User events inside the region were reported.
        let user: u64 = p
            .events
            .iter()
            .filter(|r| r.name == "region test phase")
            .map(|r| r.count)
            .sum();
        assert_eq!(user, INSIDE * n);
        // The RPC sent from inside a region ran on its target, instrumented.
        let executed: u64 = p
            .events
            .iter()
            .filter(|r| r.tag == GASP_UPCXX_RPC_EXECUTE)
            .map(|r| r.count)
            .sum();
        assert_eq!(executed, n);
    }
}
