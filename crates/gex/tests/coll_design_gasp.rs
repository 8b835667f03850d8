//! The GASP events of the collectives of the GASNet collectives design document
//! (gasp-1.4 §5.4.8: `GASP_UPC_ALL_BROADCAST`, `_SCATTER`, `_GATHER`, `_GATHER_ALL`,
//! `_EXCHANGE`, `_PERMUTE`, `_PREFIX_REDUCE`), with 2 to 4 ranks: the profiler counts
//! each collective once per rank at its call site, and the tracer draws each as one
//! slice per rank, from its initiation to the sync of its event.
// The events are compiled only with the `gasp` feature.
#![cfg(feature = "gasp")]

use gasp::events::*;
use gasp::formats::{Profile, Trace};
use gex::coll::CollFlags;
use gex::ops::{Dt, Op};
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{Client, Flags, Rank};

const ROUNDS: u64 = 3;

/// The events of the design document's collectives, with their names in the trace.
const EVENTS: [(u32, &str); 7] = [
    (GASP_UPC_ALL_BROADCAST, "GASP_UPC_ALL_BROADCAST"),
    (GASP_UPC_ALL_SCATTER, "GASP_UPC_ALL_SCATTER"),
    (GASP_UPC_ALL_GATHER, "GASP_UPC_ALL_GATHER"),
    (GASP_UPC_ALL_GATHER_ALL, "GASP_UPC_ALL_GATHER_ALL"),
    (GASP_UPC_ALL_EXCHANGE, "GASP_UPC_ALL_EXCHANGE"),
    (GASP_UPC_ALL_PERMUTE, "GASP_UPC_ALL_PERMUTE"),
    (GASP_UPC_ALL_PREFIX_REDUCE, "GASP_UPC_ALL_PREFIX_REDUCE"),
];

/// Per round: each of the design document's collectives once, with LOCAL addresses.
fn collectives() {
    let (client, _ep, team) = Client::init("COLLDESIGNGASP", Flags::NONE).unwrap();
    let n = team.size();
    let f = CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC | CollFlags::LOCAL;
    let perm: Vec<Rank> = (0..n).map(|r| (r + 1) % n).collect();
    for round in 0..ROUNDS {
        let one = [round as u8; 8];
        let all = vec![round as u8; 8 * n as usize];
        let mut dst_one = [0u8; 8];
        let mut dst_all = vec![0u8; 8 * n as usize];
        let src = [1u64];
        let mut sum = [0u64];
        // SAFETY: every buffer outlives the wait of its event.
        unsafe {
            let (d1, da) = (dst_one.as_mut_ptr(), dst_all.as_mut_ptr());
            team.coll_broadcast_nb(0, d1.into(), one.as_ptr().into(), 8, f)
                .wait();
            team.scatter_nb(0, d1.into(), all.as_ptr().into(), 8, f)
                .wait();
            team.gather_nb(0, da.into(), one.as_ptr().into(), 8, f)
                .wait();
            team.gather_all_nb(da.into(), one.as_ptr().into(), 8, f)
                .wait();
            team.exchange_nb(da.into(), all.as_ptr().into(), 8, f)
                .wait();
            team.permute_nb(&perm, d1.into(), one.as_ptr().into(), 8, f)
                .wait();
            team.prefix_reduce_nb(
                sum.as_mut_ptr().cast::<u8>().into(),
                src.as_ptr().cast::<u8>().into(),
                Dt::U64,
                8,
                1,
                Op::Add,
                None,
                f,
            )
            .wait();
        }
        assert_eq!(sum[0], u64::from(team.rank()) + 1);
    }
    team.barrier();
    client.finalize();
}

fn run(ranks: usize, tool: &str) -> Option<String> {
    let out = std::env::temp_dir().join(format!(
        "coll-design-gasp-{tool}-{ranks}-{}.json",
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
fn the_profiler_counts_each_design_collective_once_per_rank_at_its_call_site() {
    for ranks in [2usize, 3, 4] {
        let Some(text) = run(ranks, "profile") else {
            continue;
        };
        let p: Profile = serde_json::from_str(&text).unwrap();
        for (tag, name) in EVENTS {
            let counts: Vec<u64> = (0..ranks as u32)
                .map(|r| {
                    p.events
                        .iter()
                        .filter(|e| e.tag == tag && e.rank == r)
                        .map(|e| e.count)
                        .sum()
                })
                .collect();
            assert_eq!(counts, vec![ROUNDS; ranks], "{name}, {ranks} ranks");
            for e in p.events.iter().filter(|e| e.tag == tag) {
                assert!(
                    e.file.ends_with("coll_design_gasp.rs"),
                    "{name} reported at the caller's line, not at {}",
                    e.file
                );
            }
        }
    }
}

#[test]
fn the_tracer_draws_one_slice_per_rank_for_each_design_collective() {
    let Some(text) = run(3, "trace") else {
        return;
    };
    let t: Trace = serde_json::from_str(&text).unwrap();
    for (_, name) in EVENTS {
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
