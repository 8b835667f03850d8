//! The GASP events of teams and collectives (gasp-1.4 §5.4.8 `GASP_UPC_ALL_*`, and the
//! table's `GASP_GEX_COLL_*` / `GASP_GEX_TM_*` where UPC has none), with 2 to 4 ranks:
//! the profiler counts each collective once per rank at its call site, and the tracer
//! draws each as one slice per rank, from its initiation to the sync of its event.
// The events are compiled only with the `gasp` feature.
#![cfg(feature = "gasp")]

use gasp::events::*;
use gasp::formats::{Profile, Trace};
use gex::ops::{Dt, Op};
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{Client, Flags};

const ROUNDS: u64 = 3;

/// Per round: a broadcast, a reduction to all, a reduction to one and a barrier on a
/// split team of every rank; one split and one destroy in all.
fn collectives() {
    let (client, _ep, world) = Client::init("COLLGASP", Flags::NONE).unwrap();
    let team = world.split(Some(0), 0, None).unwrap();
    for round in 0..ROUNDS {
        let mut buf = vec![round as u8; 100];
        team.broadcast(0, &mut buf);
        let mut sum = [1u64];
        team.reduce_to_all(&mut sum, Op::Add);
        assert_eq!(sum[0], u64::from(team.size()));
        let src = [2u64];
        let mut dst = [0u64];
        // SAFETY: the buffers outlive the wait.
        unsafe {
            team.reduce_to_one_nb(
                0,
                dst.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                Dt::U64,
                8,
                1,
                Op::Add,
                None,
                Flags::NONE,
            )
        }
        .wait();
        team.barrier_nb().wait();
    }
    team.destroy();
    client.finalize();
}

fn run(ranks: usize, tool: &str) -> Option<String> {
    let out = std::env::temp_dir().join(format!(
        "coll-gasp-{tool}-{ranks}-{}.json",
        std::process::id()
    ));
    let mut opts = SpmdOptions::new(ranks);
    opts.env.push(("GASP_TOOL".into(), tool.into()));
    opts.env
        .push(("GASP_OUT".into(), out.display().to_string()));
    let outcome = spmd_outcome(opts, collectives)?;
    assert_eq!(outcome.exit_code, 0);
    let text = std::fs::read_to_string(&out).expect("tool output written");
    std::fs::remove_file(&out).unwrap();
    Some(text)
}

#[test]
fn the_profiler_counts_each_collective_once_per_rank() {
    for ranks in [2usize, 3, 4] {
        let Some(text) = run(ranks, "profile") else {
            continue;
        };
        let p: Profile = serde_json::from_str(&text).unwrap();
        let count = |tag: u32| -> Vec<u64> {
            (0..ranks as u32)
                .map(|r| {
                    p.events
                        .iter()
                        .filter(|e| e.tag == tag && e.rank == r)
                        .map(|e| e.count)
                        .sum()
                })
                .collect()
        };
        for (tag, name, want) in [
            (GASP_UPC_ALL_BROADCAST, "broadcast", ROUNDS),
            (GASP_GEX_COLL_REDUCE_TO_ALL, "reduce to all", ROUNDS),
            (GASP_UPC_ALL_REDUCE, "reduce to one", ROUNDS),
            (GASP_GEX_COLL_BARRIER, "team barrier", ROUNDS),
            (GASP_GEX_TM_SPLIT, "split", 1),
            (GASP_GEX_TM_DESTROY, "destroy", 1),
        ] {
            assert_eq!(count(tag), vec![want; ranks], "{name}, {ranks} ranks");
        }
        let bcast = p
            .events
            .iter()
            .find(|e| e.tag == GASP_UPC_ALL_BROADCAST)
            .unwrap();
        assert!(
            bcast.file.ends_with("coll_gasp.rs"),
            "reported at the caller's line: {}",
            bcast.file
        );
    }
}

#[test]
fn the_tracer_draws_one_slice_per_rank_for_each_collective() {
    let Some(text) = run(3, "trace") else {
        return;
    };
    let t: Trace = serde_json::from_str(&text).unwrap();
    for name in [
        "GASP_UPC_ALL_BROADCAST",
        "GASP_GEX_COLL_REDUCE_TO_ALL",
        "GASP_UPC_ALL_REDUCE",
        "GASP_GEX_COLL_BARRIER",
    ] {
        for pid in 0..3 {
            let of = |ph: &str| -> Vec<&str> {
                t.trace_events
                    .iter()
                    .filter(|e| e.pid == pid && e.name == name && e.ph == ph)
                    .map(|e| e.id.as_deref().unwrap())
                    .collect()
            };
            let begins = of("b");
            assert_eq!(begins.len() as u64, ROUNDS, "{name} on rank {pid}");
            let ends = of("e");
            for id in &begins {
                assert_eq!(
                    ends.iter().filter(|e| *e == id).count(),
                    1,
                    "{name} {id}: one end"
                );
            }
        }
    }
}
