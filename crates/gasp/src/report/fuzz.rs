//! Property tests of what `upcxx-run report` reads: random bytes, and profiles and
//! traces with bytes or JSON values mutated (numbers at their limits, wrong types,
//! missing fields, truncation), are reported on or refused with an error naming the
//! file; never a panic, an overflow or an allocation the file does not justify. Cases:
//! `PROPTEST_CASES` (default 256 per test).

use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::formats::{ProfileRow, TraceEvent, TraceInfo};

const NAMES: [&str; 4] = ["GASP_UPC_GET", "GASP_UPC_PUT", "GASP_UPCXX_RPC", "user"];

fn profile() -> impl Strategy<Value = Profile> {
    (1u32..5)
        .prop_flat_map(|ranks| {
            let row = (
                0..ranks,
                0..NAMES.len(),
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
            )
                .prop_map(|(rank, name, line, count, total_ns)| ProfileRow {
                    rank,
                    name: NAMES[name].into(),
                    kind: "interval".into(),
                    file: "main.rs".into(),
                    line,
                    count,
                    total_ns,
                    ..Default::default()
                });
            let n = ranks as usize;
            (
                Just(ranks),
                prop::collection::vec(any::<u64>(), n),
                prop::collection::vec(row, 0..6),
                prop::collection::vec(prop::collection::vec(0u64..1 << 40, n), n),
            )
        })
        .prop_map(|(ranks, rank_time_ns, events, m)| Profile {
            tool: PROFILE_TOOL.into(),
            version: 1,
            command: vec!["./prog".into()],
            ranks,
            rank_time_ns,
            events,
            matrix: CommMatrix {
                bytes: m.clone(),
                messages: m,
            },
        })
}

fn trace() -> impl Strategy<Value = Trace> {
    let event = (
        0..NAMES.len(),
        prop::sample::select(vec!["X", "b", "e", "i", "s", "f", "M"]),
        0u32..4,
        0u32..2,
        -1.0e3f64..1.0e9,
        prop::option::of(0.0f64..1.0e6),
        prop::option::of(0u32..3),
        prop::option::of((0u64..5, 0u64..1 << 20)),
    )
        .prop_map(|(name, ph, pid, tid, ts, dur, id, peer)| {
            let mut args = serde_json::Map::new();
            if let Some((peer, bytes)) = peer {
                args.insert("peer".into(), json!(peer));
                args.insert("bytes".into(), json!(bytes));
            }
            TraceEvent {
                name: NAMES[name].into(),
                cat: "upcxx".into(),
                ph: ph.into(),
                pid,
                tid,
                ts,
                dur: dur.filter(|_| ph == "X"),
                id: id.map(|i| i.to_string()),
                args,
                ..Default::default()
            }
        });
    prop::collection::vec(event, 0..12).prop_map(|trace_events| Trace {
        trace_events,
        display_time_unit: "ns".into(),
        other_data: TraceInfo {
            tool: TRACE_TOOL.into(),
            version: 1,
            command: vec!["./prog".into()],
            ranks: 4,
            dropped: 0,
            epoch_ns: 0,
        },
    })
}

/// Values that break assumptions: limits, negatives, wrong types, absence.
fn odd_value() -> impl Strategy<Value = Option<Value>> {
    prop::sample::select(vec![
        Some(json!(u64::MAX)),
        Some(json!(u32::MAX)),
        Some(json!(4097)),
        Some(json!(-1)),
        Some(json!(1e308)),
        Some(json!(-1e308)),
        Some(json!(0)),
        Some(json!("18446744073709551615")),
        Some(json!("x")),
        Some(Value::Null),
        Some(json!([])),
        Some(json!({})),
        None,
    ])
}

/// Replaces (or removes, for `None`) the `k`-th value of `v` in depth-first order.
fn mutate(v: &mut Value, k: &mut usize, new: &Option<Value>) -> bool {
    let children: Vec<String> = match v {
        Value::Object(m) => m.keys().cloned().collect(),
        Value::Array(a) => (0..a.len()).map(|i| i.to_string()).collect(),
        _ => return false,
    };
    for key in children {
        if *k == 0 {
            match (v, new) {
                (Value::Object(m), None) => drop(m.remove(&key)),
                (Value::Object(m), Some(x)) => drop(m.insert(key, x.clone())),
                (Value::Array(a), None) => drop(a.remove(key.parse::<usize>().unwrap())),
                (Value::Array(a), Some(x)) => a[key.parse::<usize>().unwrap()] = x.clone(),
                _ => unreachable!(),
            }
            return true;
        }
        *k -= 1;
        let child = match v {
            Value::Object(m) => m.get_mut(&key).unwrap(),
            Value::Array(a) => &mut a[key.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
        if mutate(child, k, new) {
            return true;
        }
    }
    false
}

/// Loads `bytes` as a file and, if accepted, reports on it as `upcxx-run report` does.
fn report_on(bytes: &[u8], draw: bool) -> Result<(), TestCaseError> {
    let path = Path::new("fuzzed.json");
    match parse(path, bytes) {
        Ok(loaded) => {
            let s = loaded.summary();
            prop_assert!(s.ranks <= MAX_RANKS);
            let _ = top_costs(&s, 5);
            let _ = s.run_ns();
            let _ = s.comm_totals();
            if draw {
                prop_assert!(render_html(&s).starts_with("<!DOCTYPE html>"));
            }
        }
        Err(e) => prop_assert!(e.starts_with("fuzzed.json: "), "{e}"),
    }
    Ok(())
}

fn mutated(doc: Value, edits: &[(usize, Option<Value>)], cut: Option<usize>) -> Vec<u8> {
    let mut doc = doc;
    for (k, new) in edits {
        mutate(&mut doc, &mut k.clone(), new);
    }
    let mut bytes = serde_json::to_vec(&doc).unwrap();
    if let Some(c) = cut {
        bytes.truncate(c % (bytes.len() + 1));
    }
    bytes
}

proptest! {
    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        report_on(&bytes, false)?;
        // A JSON object that passes the probe with random contents.
        let mut doc = br#"{"tool":"upcxx-profile","#.to_vec();
        doc.extend_from_slice(&bytes);
        report_on(&doc, false)?;
    }

    #[test]
    fn mutated_profiles(p in profile(),
                        edits in prop::collection::vec((0usize..80, odd_value()), 0..4),
                        cut in prop::option::weighted(0.2, any::<usize>()),
                        draw in prop::bool::weighted(0.1)) {
        let doc = serde_json::to_value(&p).unwrap();
        report_on(&serde_json::to_vec(&doc).unwrap(), draw)?;
        report_on(&mutated(doc, &edits, cut), draw)?;
    }

    #[test]
    fn mutated_traces(t in trace(),
                      edits in prop::collection::vec((0usize..120, odd_value()), 0..4),
                      cut in prop::option::weighted(0.2, any::<usize>()),
                      draw in prop::bool::weighted(0.1)) {
        let doc = serde_json::to_value(&t).unwrap();
        report_on(&serde_json::to_vec(&doc).unwrap(), draw)?;
        report_on(&mutated(doc, &edits, cut), draw)?;
    }
}

#[test]
fn a_rank_beyond_the_limit_is_refused() {
    let mut p = serde_json::to_value(Profile {
        tool: PROFILE_TOOL.into(),
        version: 1,
        ranks: 2,
        ..Default::default()
    })
    .unwrap();
    p["ranks"] = json!(u32::MAX);
    let e = parse(Path::new("p.json"), &serde_json::to_vec(&p).unwrap()).unwrap_err();
    assert!(
        e.contains("names rank 4294967294, more than the 4096 ranks"),
        "{e}"
    );
}
