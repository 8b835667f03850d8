//! The tracer's output: a thread's records as Chrome trace events (see
//! [`crate::formats`]), and the ranks' parts merged into the job's trace.

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use super::record::{Record, Stored};
use super::Tracer;
use crate::events::{self, Timing, NB_TRIVIAL};
use crate::formats::{Trace, TraceEvent, TraceInfo, TRACE_TOOL};
use crate::timer::{Calibration, Ticks};
use crate::tool::EventType;

pub(super) fn meta(pid: u32, tid: u32, name: &str, value: &str) -> TraceEvent {
    let mut args = Map::new();
    args.insert("name".into(), Value::from(value));
    TraceEvent {
        name: name.to_owned(),
        ph: "M".to_owned(),
        pid,
        tid,
        args,
        ..TraceEvent::default()
    }
}

pub(super) fn json_meta_sort(pid: u32) -> TraceEvent {
    let mut args = Map::new();
    args.insert("sort_index".into(), Value::from(pid));
    TraceEvent {
        name: "process_sort_index".to_owned(),
        ph: "M".to_owned(),
        pid,
        args,
        ..TraceEvent::default()
    }
}

/// An open START on a thread's stack while converting.
struct OpenRecord {
    record: Record,
    async_id: Option<String>,
}

impl Tracer {
    pub(super) fn convert(
        &self,
        cal: &Calibration,
        tid: u32,
        records: impl Iterator<Item = Record>,
        strings: &[String],
        out: &mut Vec<TraceEvent>,
    ) {
        let pid = self.info.rank;
        // Timestamps are absolute CLOCK_MONOTONIC microseconds here; `merge` subtracts
        // the job's epoch.
        let us = |t: Ticks| cal.to_monotonic_ns(t) as f64 / 1000.0;
        let mut stack: Vec<OpenRecord> = Vec::new();
        // Async operations waiting for a sync, by handle.
        let mut pending: Vec<(u64, String, String, String)> = Vec::new();
        let mut last_ts = None;
        for record in records {
            let r = &record;
            last_ts = Some(us(r.ticks));
            let def = events::by_tag(r.tag);
            let cat = def.map_or("user", |d| d.layer.name()).to_owned();
            match r.ty {
                EventType::Start => {
                    let async_id = (def.map(|d| d.timing) == Some(Timing::Initiate)).then(|| {
                        let id =
                            format!("{pid}.{}", self.next_async.fetch_add(1, Ordering::Relaxed));
                        out.push(TraceEvent {
                            name: self.name(r.tag),
                            cat: cat.clone(),
                            ph: "b".to_owned(),
                            pid,
                            tid,
                            ts: us(r.ticks),
                            id: Some(id.clone()),
                            args: args_json(r, def.map(|d| d.start_args), strings),
                            ..TraceEvent::default()
                        });
                        id
                    });
                    if let (Some(d), Some(msg)) = (def, msgid(r)) {
                        let ph = match d.timing {
                            Timing::Execute => Some(("f", Some("e"))),
                            _ if r.tag == events::GASP_UPCXX_RPC_SEND => Some(("s", None)),
                            _ => None,
                        };
                        if let Some((ph, bp)) = ph {
                            out.push(TraceEvent {
                                name: "rpc".to_owned(),
                                cat: "flow".to_owned(),
                                ph: ph.to_owned(),
                                pid,
                                tid,
                                ts: us(r.ticks),
                                id: Some(format!("m{msg}")),
                                bp: bp.map(str::to_owned),
                                ..TraceEvent::default()
                            });
                        }
                    }
                    stack.push(OpenRecord {
                        record: *r,
                        async_id,
                    });
                }
                EventType::End => {
                    let Some(i) = stack.iter().rposition(|o| o.record.tag == r.tag) else {
                        continue;
                    };
                    let open = stack.remove(i);
                    let start = open.record;
                    let mut args = args_json(&start, def.map(|d| d.start_args), strings);
                    for (k, v) in args_json(r, def.map(|d| d.end_args), strings) {
                        args.insert(k, v);
                    }
                    let name = self.name(r.tag);
                    out.push(TraceEvent {
                        name: name.clone(),
                        cat: cat.clone(),
                        ph: "X".to_owned(),
                        pid,
                        tid,
                        ts: us(start.ticks),
                        dur: Some((us(r.ticks) - us(start.ticks)).max(0.0)),
                        args,
                        ..TraceEvent::default()
                    });
                    let handle = handle(r);
                    if let Some(id) = open.async_id {
                        match handle {
                            Some(h) if h != NB_TRIVIAL => pending.push((h, id, name, cat.clone())),
                            _ => out.push(async_end(&name, &cat, pid, tid, us(r.ticks), id)),
                        }
                    } else if def.map(|d| d.timing) == Some(Timing::Sync) {
                        if let Some(h) = handle {
                            let t = us(r.ticks);
                            pending.retain(|(ph, id, name, cat)| {
                                let done = *ph == h;
                                if done {
                                    out.push(async_end(name, cat, pid, tid, t, id.clone()));
                                }
                                !done
                            });
                        }
                    }
                }
                EventType::Atomic => out.push(TraceEvent {
                    name: self.name(r.tag),
                    cat,
                    ph: "i".to_owned(),
                    pid,
                    tid,
                    ts: us(r.ticks),
                    s: Some("t".to_owned()),
                    args: args_json(r, def.map(|d| d.start_args), strings),
                    ..TraceEvent::default()
                }),
            }
        }
        // Operations no sync retired (the program ended without one, or the sync was
        // not measured) end at the thread's last event, marked so: an async begin
        // without its end would be drawn open to the end of the whole trace.
        if let Some(ts) = last_ts {
            for (_, id, name, cat) in pending {
                let mut end = async_end(&name, &cat, pid, tid, ts, id);
                end.args.insert("synced".into(), Value::Bool(false));
                out.push(end);
            }
        }
    }
}

fn async_end(name: &str, cat: &str, pid: u32, tid: u32, ts: f64, id: String) -> TraceEvent {
    TraceEvent {
        name: name.to_owned(),
        cat: cat.to_owned(),
        ph: "e".to_owned(),
        pid,
        tid,
        ts,
        id: Some(id),
        ..TraceEvent::default()
    }
}

fn handle(r: &Record) -> Option<u64> {
    let def = events::by_tag(r.tag)?;
    let names = if r.ty == EventType::End {
        def.end_args
    } else {
        def.start_args
    };
    let i = events::arg_position(names, "handle")?;
    match r.args.get(i)? {
        Stored::U(h) if i < r.nargs as usize => Some(*h),
        _ => None,
    }
}

fn msgid(r: &Record) -> Option<u64> {
    let def = events::by_tag(r.tag)?;
    let i = events::arg_position(def.start_args, "msgid")?;
    // 0: the message's id is not known (no flow can be drawn).
    match r.args.get(i)? {
        Stored::U(m) if i < r.nargs as usize && *m != 0 => Some(*m),
        _ => None,
    }
}

/// The record's arguments by name (system events) or as `arg0..` (user events), plus the
/// call site, peer and bytes.
fn args_json(r: &Record, names: Option<&'static str>, strings: &[String]) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("file".into(), Value::from(r.location.file()));
    map.insert("line".into(), Value::from(r.location.line()));
    map.insert("column".into(), Value::from(r.location.column()));
    let names: Vec<&str> = names
        .map(|n| events::arg_names(n).collect())
        .unwrap_or_default();
    let mut peer = None;
    let mut bytes = None;
    for (i, a) in r.args[..r.nargs as usize].iter().enumerate() {
        let key = names
            .get(i)
            .map_or_else(|| format!("arg{i}"), |n| (*n).to_owned());
        let value = match *a {
            Stored::I(v) => json!(v),
            Stored::U(v) => json!(v),
            Stored::F(v) => json!(v),
            Stored::G(g) => {
                peer.get_or_insert(g.rank);
                json!({"rank": g.rank, "addr": format!("{:#x}", g.addr)})
            }
            Stored::S(i) => json!(strings.get(i as usize).cloned().unwrap_or_default()),
        };
        if matches!(key.as_str(), "target" | "source") {
            if let Stored::U(v) = a {
                peer = Some(*v as u32);
            }
        }
        if matches!(key.as_str(), "n" | "nbytes") {
            if let Stored::U(v) = a {
                bytes = Some(*v);
            }
        }
        map.insert(key, value);
    }
    if let Some(p) = peer {
        map.insert("peer".into(), Value::from(p));
    }
    if let Some(b) = bytes {
        map.insert("bytes".into(), Value::from(b));
    }
    map
}

/// Merges the ranks' parts (absolute timestamps) into the job's trace, whose timestamps
/// count from the job's earliest event.
pub fn merge(ranks: u32, parts: Vec<Trace>) -> Trace {
    let mut command = Vec::new();
    let mut dropped = 0;
    let mut events = Vec::new();
    for part in parts {
        if command.is_empty() {
            command = part.other_data.command;
        }
        dropped += part.other_data.dropped;
        events.extend(part.trace_events);
    }
    let epoch_us = events
        .iter()
        .filter(|e| e.ph != "M")
        .map(|e| e.ts)
        .fold(f64::INFINITY, f64::min);
    let epoch_us = if epoch_us.is_finite() { epoch_us } else { 0.0 };
    for e in &mut events {
        if e.ph != "M" {
            e.ts -= epoch_us;
        }
    }
    Trace {
        trace_events: events,
        display_time_unit: "ns".to_owned(),
        other_data: TraceInfo {
            tool: TRACE_TOOL.to_owned(),
            version: 1,
            command,
            ranks,
            dropped,
            epoch_ns: (epoch_us * 1000.0) as u64,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::panic::Location;

    use super::*;
    use crate::timer;
    use crate::tool::{Arg, GPtr, InitInfo};
    use crate::tools::trace::buffer::ThreadTrace;

    /// GASP §5.4.6: an initiation whose END names a handle other than
    /// `GASP_NB_TRIVIAL` stays open, as an async slice, until the sync of that handle;
    /// a trivial one ends at its initiation's END; one never synced ends at the
    /// thread's last event, marked unsynced. Overlapping operations keep their own ids.
    #[test]
    fn a_non_blocking_operation_is_an_async_slice_up_to_the_sync_of_its_handle() {
        let info = InitInfo {
            language: crate::Language::Gex,
            rank: 2,
            ranks: 4,
            local_ranks: (0..4).collect(),
        };
        let tracer = Tracer::new(&info, &[]);
        let mut t = ThreadTrace::new(usize::MAX, 1 << 12);
        let g = GPtr { rank: 1, addr: 64 };
        let init = |h: u64| {
            [
                Arg::Int(1),
                Arg::GPtr(g),
                Arg::Ptr(8),
                Arg::Bytes(8),
                Arg::Handle(h),
            ]
        };
        let at = Location::caller();
        let t0 = t.start_ticks + 1000;
        let put = events::GASP_UPC_NB_PUT_INIT;
        // Two overlapping puts (handles 42 and 43), a trivial one, the sync of 43, then
        // of 42, and a put (handle 44) nothing syncs.
        t.push(t0 + 10, Some(t0), put, EventType::End, at, &init(42));
        t.push(t0 + 30, Some(t0 + 20), put, EventType::End, at, &init(43));
        t.push(
            t0 + 50,
            Some(t0 + 40),
            put,
            EventType::End,
            at,
            &init(NB_TRIVIAL),
        );
        let sync = events::GASP_UPC_NB_SYNC;
        t.push(
            t0 + 70,
            Some(t0 + 60),
            sync,
            EventType::End,
            at,
            &[Arg::Handle(43)],
        );
        t.push(
            t0 + 90,
            Some(t0 + 80),
            sync,
            EventType::End,
            at,
            &[Arg::Handle(42)],
        );
        t.push(t0 + 110, Some(t0 + 100), put, EventType::End, at, &init(44));
        let cal = timer::calibration();
        let mut out = Vec::new();
        tracer.convert(cal, 0, t.decode(), &t.strings, &mut out);
        let us = |ticks: Ticks| cal.to_monotonic_ns(ticks) as f64 / 1000.0;
        let asyncs: Vec<(&str, f64, &str)> = out
            .iter()
            .filter(|e| e.ph == "b" || e.ph == "e")
            .map(|e| (e.ph.as_str(), e.ts, e.id.as_deref().unwrap()))
            .collect();
        let ids: Vec<&str> = asyncs.iter().filter(|a| a.0 == "b").map(|a| a.2).collect();
        assert_eq!(ids.len(), 4, "one async slice per initiation: {asyncs:?}");
        let (p42, p43, trivial, p44) = (ids[0], ids[1], ids[2], ids[3]);
        assert!(
            ids.iter().enumerate().all(|(i, a)| !ids[..i].contains(a)),
            "own ids"
        );
        let end = |id: &str| {
            let ends: Vec<f64> = asyncs
                .iter()
                .filter(|a| a.0 == "e" && a.2 == id)
                .map(|a| a.1)
                .collect();
            assert_eq!(ends.len(), 1, "one end for {id}: {asyncs:?}");
            ends[0]
        };
        assert_eq!(
            end(trivial),
            us(t0 + 50),
            "a trivial handle ends at its initiation"
        );
        assert_eq!(end(p43), us(t0 + 70), "handle 43 ends at its sync's END");
        assert_eq!(end(p42), us(t0 + 90), "handle 42 ends at its sync's END");
        assert_eq!(
            end(p44),
            us(t0 + 110),
            "an unsynced handle ends at the last event"
        );
        let unsynced: Vec<&TraceEvent> = out
            .iter()
            .filter(|e| e.args.get("synced") == Some(&Value::Bool(false)))
            .collect();
        assert_eq!(unsynced.len(), 1);
        assert_eq!(unsynced[0].id.as_deref(), Some(p44));
        assert!(out
            .iter()
            .filter(|e| e.ph == "b")
            .all(|e| e.pid == 2 && e.name == "GASP_UPC_NB_PUT_INIT"));
    }

    /// The handle of an initiation with many arguments (a reduction's END: nine, the
    /// handle last) is kept, and its async slice ends at the sync of that handle.
    #[test]
    fn a_reductions_handle_ninth_of_its_arguments_is_kept() {
        let info = InitInfo {
            language: crate::Language::Gex,
            rank: 0,
            ranks: 2,
            local_ranks: (0..2).collect(),
        };
        let tracer = Tracer::new(&info, &[]);
        let mut t = ThreadTrace::new(usize::MAX, 1 << 12);
        let at = Location::caller();
        let t0 = t.start_ticks + 1000;
        let end = [
            Arg::Ptr(64),
            Arg::Ptr(128),
            Arg::Int(1),
            Arg::Size(4),
            Arg::Size(8),
            Arg::Ptr(0),
            Arg::Int(0),
            Arg::Int(0),
            Arg::Handle(77),
        ];
        let reduce = events::GASP_UPC_ALL_REDUCE;
        t.push(t0 + 10, Some(t0), reduce, EventType::End, at, &end);
        let sync = events::GASP_UPC_NB_SYNC;
        t.push(
            t0 + 40,
            Some(t0 + 30),
            sync,
            EventType::End,
            at,
            &[Arg::Handle(77)],
        );
        let cal = timer::calibration();
        let mut out = Vec::new();
        tracer.convert(cal, 0, t.decode(), &t.strings, &mut out);
        let us = |ticks: Ticks| cal.to_monotonic_ns(ticks) as f64 / 1000.0;
        let ends: Vec<f64> = out.iter().filter(|e| e.ph == "e").map(|e| e.ts).collect();
        assert_eq!(ends, [us(t0 + 40)], "the slice ends at the handle's sync");
    }
}
