//! OTF2 export of a trace (`upcxx-run --trace=FILE.otf2`, `upcxx-run report FILE
//! --otf2 DIR`), for Vampir and the other tools that read the Open Trace Format 2.
//!
//! The archive is written through the OTF2 C library (cargo feature `otf2`, which the
//! build script links when it finds the library; `ffi.rs` declares the few functions
//! used). Without it, [`write`](fn@write) says how to get it.
//!
//! # From our trace to OTF2
//!
//! [`Plan::from_trace`] maps the trace ([`gasp::formats::Trace`]) onto OTF2's model:
//!
//! * **locations**: one per rank (location id = rank, in the location group "rank R",
//!   under one system-tree node "job"); a rank's other threads get locations of their
//!   own in the same group;
//! * **regions**: one per operation kind (the event's name), with the paradigm `UPC`;
//! * **enter/leave**: each complete event (`X`) is an `Enter` at its start and a `Leave`
//!   at its end. OTF2 wants every location's regions properly nested and its times
//!   non-decreasing, so an operation that outlives the one enclosing it is cut at the
//!   enclosing one's end (clocks of nested calls can disagree by a tick);
//! * **communication**: an event with a `peer` is a record beside its `Enter`: an RPC's
//!   send (`GASP_UPCXX_RPC_SEND`) an `MpiSend` to the peer and its execution
//!   (`GASP_UPCXX_RPC_EXECUTE`) an `MpiRecv` from it, in the job's communicator (OTF2
//!   has no RPC records; its message records are the ones Vampir draws as lines); a
//!   put or get (a name with `PUT` or `GET`) an `RmaPut`/`RmaGet` of its bytes in the
//!   job's window, completed (`RmaOpCompleteBlocking`) at its `Leave` or, for a
//!   non-blocking one (`b`…`e`), at its completion;
//! * instants (`i`), flows and metadata have no counterpart and are left out.
//!
//! Times are nanoseconds since the trace's epoch (timer resolution 10⁹ per second).

// Without the library only the tests use the plan.
#![cfg_attr(not(otf2_lib), allow(dead_code))]

#[cfg(otf2_lib)]
mod ffi;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use gasp::formats::{Trace, TraceEvent};
use serde_json::Value;

/// One record of a location's event stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Enter(u32),
    Leave(u32),
    MpiSend { to: u32, bytes: u64 },
    MpiRecv { from: u32, bytes: u64 },
    RmaPut { remote: u32, bytes: u64, id: u64 },
    RmaGet { remote: u32, bytes: u64, id: u64 },
    RmaComplete { id: u64 },
}

/// A location: a thread of a rank, and its records in time order.
#[derive(Debug, Default)]
pub(crate) struct Location {
    pub(crate) id: u64,
    pub(crate) rank: u32,
    pub(crate) name: String,
    pub(crate) records: Vec<(u64, Record)>,
}

/// Everything an archive holds, ready to be written.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) ranks: u32,
    /// Region names; a region's id is its index.
    pub(crate) regions: Vec<String>,
    /// Rank threads' locations, by id.
    pub(crate) locations: Vec<Location>,
    /// End of the last record, nanoseconds.
    pub(crate) end_ns: u64,
}

/// What [`write`](fn@write) wrote, for the launcher's message.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) locations: usize,
    pub(crate) regions: usize,
    pub(crate) records: usize,
}

/// Writes `trace` as the OTF2 archive `dir/name.otf2` (with `dir/name/` and
/// `dir/name.def`).
pub(crate) fn write(trace: &Trace, dir: &Path, name: &str) -> Result<Written, String> {
    #[cfg(otf2_lib)]
    {
        let plan = Plan::from_trace(trace);
        ffi::write(&plan, dir, name)?;
        Ok(Written {
            locations: plan.locations.len(),
            regions: plan.regions.len(),
            records: plan.locations.iter().map(|l| l.records.len()).sum(),
        })
    }
    #[cfg(not(otf2_lib))]
    {
        let _ = (trace, dir, name);
        Err(UNAVAILABLE.to_owned())
    }
}

/// Why there is no OTF2 export in this build (empty where there is).
pub(crate) const UNAVAILABLE: &str = if cfg!(otf2_lib) {
    ""
} else if cfg!(feature = "otf2") {
    "OTF2 export is off: the OTF2 library was not found when upcxx-run was built \
     (install libopen-trace-format2-dev and rebuild with --features otf2)"
} else {
    "OTF2 export is off: upcxx-run was built without the feature `otf2` (install \
     libopen-trace-format2-dev and rebuild with --features otf2)"
};

/// Whether this build writes OTF2.
pub(crate) const AVAILABLE: bool = cfg!(otf2_lib);

fn arg_u64(e: &TraceEvent, key: &str) -> Option<u64> {
    match e.args.get(key)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn us_to_ns(us: f64) -> u64 {
    // `as` saturates, and maps NaN to 0.
    (us * 1000.0).round() as u64
}

/// The communication record an event makes at its start, if any.
fn communication(e: &TraceEvent, next_id: &mut u64) -> Option<Record> {
    let peer = u32::try_from(arg_u64(e, "peer")?).ok()?;
    let bytes = arg_u64(e, "bytes").unwrap_or(0);
    let name = e.name.as_str();
    if name.contains("RPC_SEND") {
        Some(Record::MpiSend { to: peer, bytes })
    } else if name.contains("RPC_EXECUTE") {
        Some(Record::MpiRecv { from: peer, bytes })
    } else if name.contains("PUT") || name.contains("GET") {
        *next_id += 1;
        let id = *next_id;
        Some(if name.contains("PUT") {
            Record::RmaPut {
                remote: peer,
                bytes,
                id,
            }
        } else {
            Record::RmaGet {
                remote: peer,
                bytes,
                id,
            }
        })
    } else {
        None
    }
}

impl Plan {
    /// The archive's content (see the module docs).
    pub(crate) fn from_trace(t: &Trace) -> Plan {
        let mut regions: Vec<String> = Vec::new();
        let mut region_of: HashMap<String, u32> = HashMap::new();
        let mut region = |name: &str| -> u32 {
            *region_of.entry(name.to_owned()).or_insert_with(|| {
                regions.push(name.to_owned());
                regions.len() as u32 - 1
            })
        };
        let ranks = t
            .trace_events
            .iter()
            .map(|e| e.pid + 1)
            .chain([t.other_data.ranks])
            .max()
            .unwrap_or(0);
        // Per (rank, thread): complete events, and async records already timed.
        // Initiations the tracer writes both as `b` (the transfer, up to its completion)
        // and as `X` (the initiating call): the `b` carries the RMA records, the `X` is
        // a region only.
        let twins: HashSet<Twin<'_>> = t
            .trace_events
            .iter()
            .filter(|e| e.ph == "b")
            .map(twin)
            .collect();
        let mut complete: BTreeMap<(u32, u32), Vec<&TraceEvent>> = BTreeMap::new();
        let mut timed: BTreeMap<(u32, u32), Vec<(u64, Record)>> = BTreeMap::new();
        let mut open: HashMap<(u32, &str, &str), Vec<u64>> = HashMap::new();
        let mut next_id = 0u64;
        let mut events: Vec<&TraceEvent> = t.trace_events.iter().collect();
        events.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        for e in events {
            let key = (e.pid, e.tid);
            match e.ph.as_str() {
                "X" => complete.entry(key).or_default().push(e),
                "b" => {
                    // A non-blocking put or get: its transfer from initiation to
                    // completion (the initiating call, if traced, is its own `X`).
                    let rma = communication(e, &mut next_id)
                        .filter(|r| matches!(r, Record::RmaPut { .. } | Record::RmaGet { .. }));
                    if let Some(r @ (Record::RmaPut { id, .. } | Record::RmaGet { id, .. })) = rma {
                        timed.entry(key).or_default().push((us_to_ns(e.ts), r));
                        let k = (e.pid, e.cat.as_str(), e.id.as_deref().unwrap_or(""));
                        open.entry(k).or_default().push(id);
                    }
                }
                "e" => {
                    let k = (e.pid, e.cat.as_str(), e.id.as_deref().unwrap_or(""));
                    if let Some(id) = open.get_mut(&k).and_then(Vec::pop) {
                        let r = Record::RmaComplete { id };
                        timed.entry(key).or_default().push((us_to_ns(e.ts), r));
                    }
                }
                _ => {}
            }
        }
        let keys: Vec<(u32, u32)> = {
            let mut k: Vec<_> = complete.keys().chain(timed.keys()).copied().collect();
            k.extend((0..ranks).map(|r| (r, 0)));
            k.sort_unstable();
            k.dedup();
            k
        };
        let mut extra_id = u64::from(ranks);
        let mut end_ns = 0;
        let mut locations = Vec::new();
        for (rank, tid) in keys {
            let mut records = nest(
                complete.remove(&(rank, tid)).unwrap_or_default(),
                &twins,
                &mut region,
                &mut next_id,
            );
            // Async records go in time order among the nested ones; at equal times after
            // them (a stable sort).
            records.extend(timed.remove(&(rank, tid)).unwrap_or_default());
            records.sort_by_key(|&(t, _)| t);
            end_ns = records.last().map_or(end_ns, |&(t, _)| end_ns.max(t));
            let id = if tid == 0 {
                u64::from(rank)
            } else {
                extra_id += 1;
                extra_id - 1
            };
            locations.push(Location {
                id,
                rank,
                name: if tid == 0 {
                    format!("rank {rank}")
                } else {
                    format!("rank {rank} thread {tid}")
                },
                records,
            });
        }
        locations.sort_by_key(|l| l.id);
        Plan {
            ranks,
            regions,
            locations,
            end_ns,
        }
    }
}

/// One thread's complete events as properly nested enter/leave records (see the module
/// docs), each with its communication record after its `Enter`.
/// What identifies an initiation written as both `b` and `X`: rank, thread, name, time.
type Twin<'a> = (u32, u32, &'a str, u64);

fn twin(e: &TraceEvent) -> Twin<'_> {
    (e.pid, e.tid, e.name.as_str(), e.ts.to_bits())
}

fn nest(
    mut ops: Vec<&TraceEvent>,
    twins: &HashSet<Twin<'_>>,
    region: &mut impl FnMut(&str) -> u32,
    next_id: &mut u64,
) -> Vec<(u64, Record)> {
    // Enclosing operations first among equal starts.
    ops.sort_by(|a, b| {
        a.ts.total_cmp(&b.ts)
            .then_with(|| b.dur.unwrap_or(0.0).total_cmp(&a.dur.unwrap_or(0.0)))
    });
    let mut out = Vec::with_capacity(ops.len() * 2);
    // Open regions: (end, region, RMA id to complete at the end).
    let mut stack: Vec<(u64, u32, Option<u64>)> = Vec::new();
    let mut now = 0u64;
    for e in ops {
        let start = us_to_ns(e.ts).max(now);
        while let Some(&(end, r, rma)) = stack.last() {
            if end > start {
                break;
            }
            stack.pop();
            if let Some(id) = rma {
                out.push((end, Record::RmaComplete { id }));
            }
            out.push((end, Record::Leave(r)));
            now = end;
        }
        let start = start.max(now);
        let limit = stack.last().map_or(u64::MAX, |&(end, _, _)| end);
        let end = (us_to_ns(e.ts) + e.dur.map_or(0, us_to_ns)).clamp(start, limit);
        let r = region(&e.name);
        out.push((start, Record::Enter(r)));
        let comm = communication(e, next_id).filter(|c| {
            !(matches!(c, Record::RmaPut { .. } | Record::RmaGet { .. })
                && twins.contains(&twin(e)))
        });
        if let Some(c) = comm {
            out.push((start, c));
        }
        let rma = match comm {
            Some(Record::RmaPut { id, .. } | Record::RmaGet { id, .. }) => Some(id),
            _ => None,
        };
        stack.push((end, r, rma));
        now = start;
    }
    while let Some((end, r, rma)) = stack.pop() {
        if let Some(id) = rma {
            out.push((end, Record::RmaComplete { id }));
        }
        out.push((end, Record::Leave(r)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gasp::formats::TraceInfo;
    use serde_json::json;

    fn x(name: &str, pid: u32, ts: f64, dur: f64, args: Value) -> TraceEvent {
        TraceEvent {
            name: name.into(),
            ph: "X".into(),
            pid,
            ts,
            dur: Some(dur),
            args: args.as_object().cloned().unwrap_or_default(),
            ..Default::default()
        }
    }

    fn trace(events: Vec<TraceEvent>) -> Trace {
        Trace {
            trace_events: events,
            other_data: TraceInfo {
                ranks: 2,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn nested_operations_enter_and_leave_in_order_cut_at_their_parents_end() {
        let t = trace(vec![
            x("outer", 0, 1.0, 10.0, json!({})),
            // Ends 1 µs after its parent: cut at 11 µs.
            x(
                "GASP_UPCXX_RPC_SEND",
                0,
                2.0,
                10.0,
                json!({"peer": 1, "bytes": 8}),
            ),
            x(
                "GASP_UPC_PUT",
                0,
                20.0,
                1.0,
                json!({"peer": 1, "bytes": 64}),
            ),
            x(
                "GASP_UPCXX_RPC_EXECUTE",
                1,
                5.0,
                1.0,
                json!({"peer": 0, "bytes": 8}),
            ),
        ]);
        let p = Plan::from_trace(&t);
        assert_eq!(
            p.regions,
            [
                "outer",
                "GASP_UPCXX_RPC_SEND",
                "GASP_UPC_PUT",
                "GASP_UPCXX_RPC_EXECUTE"
            ]
        );
        assert_eq!(p.locations.len(), 2);
        let r0: Vec<(u64, Record)> = p.locations[0].records.clone();
        assert_eq!(
            r0,
            [
                (1000, Record::Enter(0)),
                (2000, Record::Enter(1)),
                (2000, Record::MpiSend { to: 1, bytes: 8 }),
                (11000, Record::Leave(1)),
                (11000, Record::Leave(0)),
                (20000, Record::Enter(2)),
                (
                    20000,
                    Record::RmaPut {
                        remote: 1,
                        bytes: 64,
                        id: 1
                    }
                ),
                (21000, Record::RmaComplete { id: 1 }),
                (21000, Record::Leave(2)),
            ]
        );
        assert_eq!(
            p.locations[1].records[1],
            (5000, Record::MpiRecv { from: 0, bytes: 8 })
        );
        assert_eq!(p.end_ns, 21000);
    }

    /// A rank 0 non-blocking get of 16 bytes from rank 1, as the tracer writes its
    /// transfer: `b` at 1 µs, `e` at 4 µs.
    fn async_get() -> (TraceEvent, TraceEvent) {
        let mut b = x(
            "GASP_UPC_NB_GET_INIT",
            0,
            1.0,
            0.0,
            json!({"peer": 1, "bytes": 16}),
        );
        b.ph = "b".into();
        b.dur = None;
        b.cat = "upcxx".into();
        b.id = Some("7".into());
        let mut e = b.clone();
        e.ph = "e".into();
        e.ts = 4.0;
        e.args.clear();
        (b, e)
    }

    #[test]
    fn a_non_blocking_get_completes_at_its_end_and_every_rank_has_a_location() {
        let (b, e) = async_get();
        let mut t = trace(vec![b, e]);
        t.other_data.ranks = 3;
        let p = Plan::from_trace(&t);
        let ids: Vec<u64> = p.locations.iter().map(|l| l.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(
            p.locations[0].records,
            [
                (
                    1000,
                    Record::RmaGet {
                        remote: 1,
                        bytes: 16,
                        id: 1
                    }
                ),
                (4000, Record::RmaComplete { id: 1 }),
            ]
        );
    }

    /// The tracer writes a non-blocking get as its transfer (`b`…`e`) and its
    /// initiating call (`X`, same rank, thread, name and time): one RMA operation.
    #[test]
    fn an_initiation_written_twice_is_one_rma_operation() {
        let (b, e) = async_get();
        let call = x(
            "GASP_UPC_NB_GET_INIT",
            0,
            1.0,
            0.5,
            Value::Object(b.args.clone()),
        );
        let p = Plan::from_trace(&trace(vec![call, b, e]));
        let rma: Vec<&Record> = p.locations[0]
            .records
            .iter()
            .map(|(_, r)| r)
            .filter(|r| matches!(r, Record::RmaGet { .. } | Record::RmaComplete { .. }))
            .collect();
        assert_eq!(
            rma,
            [
                &Record::RmaGet {
                    remote: 1,
                    bytes: 16,
                    id: 1
                },
                &Record::RmaComplete { id: 1 }
            ]
        );
    }

    #[cfg(not(otf2_lib))]
    #[test]
    fn without_the_library_writing_says_how_to_get_it() {
        let e = write(&trace(vec![]), Path::new("/nonexistent"), "x").unwrap_err();
        assert!(e.contains("libopen-trace-format2-dev"), "{e}");
    }
}
