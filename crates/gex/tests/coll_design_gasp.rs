//! The GASP events of the collectives of the GASNet collectives design document
//! (gasp-1.4 §5.4.8: `GASP_UPC_ALL_BROADCAST`, `_SCATTER`, `_GATHER`, `_GATHER_ALL`,
//! `_EXCHANGE`, `_PERMUTE`, `_PREFIX_REDUCE`), with 2 to 4 ranks: the profiler counts
//! each collective once per rank at its call site, and the tracer draws each as one
//! slice per rank, from its initiation to the sync of its event. The multi-image ("i")
//! calls report the event of their plain call, so each round makes those events twice.
// The events are compiled only with the `gasp` feature.
#![cfg(feature = "gasp")]

use gasp::events::*;
use gasp::formats::{Profile, Trace};
use gex::coll::CollFlags;
use gex::ops::{Dt, Op};
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{Client, Flags, Rank};

const ROUNDS: u64 = 3;

/// How many calls of each event one round makes: the plain call, and its "i" call
/// where the document has one (permute and prefix reduction have none).
fn per_round(tag: u32) -> u64 {
    match tag {
        GASP_UPC_ALL_PERMUTE | GASP_UPC_ALL_PREFIX_REDUCE => 1,
        _ => 2,
    }
}

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

/// Per round: each of the design document's collectives once, with LOCAL addresses,
/// then each "i" call with one image per rank.
fn collectives() {
    let (client, _ep, team) = Client::init("COLLDESIGNGASP", Flags::NONE).unwrap();
    let n = team.size();
    team.coll_init(&vec![1; n as usize]);
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
        let (d1, da) = (dst_one.as_mut_ptr(), dst_all.as_mut_ptr());
        let (dsts, srcs) = ([d1], [one.as_ptr().cast_mut()]);
        let (dsts, srcs) = (&dsts[..], &srcs[..]);
        // SAFETY: as above; every list names one image, this rank's.
        unsafe {
            team.broadcasti_nb(0, dsts.into(), one.as_ptr().into(), 8, f)
                .wait();
            team.scatteri_nb(0, dsts.into(), all.as_ptr().into(), 8, f)
                .wait();
            team.gatheri_nb(0, da.into(), srcs.into(), 8, f).wait();
            team.gather_alli_nb([da].as_slice().into(), srcs.into(), 8, f)
                .wait();
            team.exchangei_nb(
                [da].as_slice().into(),
                [all.as_ptr().cast_mut()].as_slice().into(),
                8,
                f,
            )
            .wait();
        }
        assert_eq!(dst_all, vec![round as u8; 8 * n as usize]);
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
            let want = ROUNDS * per_round(tag);
            assert_eq!(counts, vec![want; ranks], "{name}, {ranks} ranks");
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
    for (tag, name) in EVENTS {
        for pid in 0..3 {
            let of = |ph: &str| -> Vec<&str> {
                t.trace_events
                    .iter()
                    .filter(|e| e.pid == pid && e.name == name && e.ph == ph)
                    .map(|e| e.id.as_deref().unwrap())
                    .collect()
            };
            let begins = of("b");
            assert_eq!(
                begins.len() as u64,
                ROUNDS * per_round(tag),
                "{name} on rank {pid}"
            );
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
