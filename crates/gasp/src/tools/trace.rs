//! The tracer (`GASP_TOOL=trace`, `upcxx-run --trace[=FILE]`).
//!
//! Every event is appended to the thread's buffer as a fixed-size [`Record`] (timestamp
//! in ticks, tag, type, call site, up to [`MAX_ARGS`] arguments). Buffers are allocated
//! in chunks of [`CHUNK`] records, the first when the thread reports its first event; a
//! thread that fills `GASP_TRACE_LIMIT` records (default 4 Mi) drops further events and
//! counts them. At the end, each thread's records are turned into Chrome trace events
//! (see [`crate::formats`]): START/END pairs become complete events (`X`), initiations of
//! non-blocking operations become async begin/end pairs that end at the sync that
//! retired them (or at once, for operations complete at initiation), atomic events
//! become instants, and an RPC's send and execution are joined by a flow.

use std::ffi::CStr;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{Destination, Kind, Slots, ThreadSlot};
use crate::events::{self, Timing, NB_TRIVIAL};
use crate::formats::{Trace, TraceEvent, TraceInfo, TRACE_TOOL};
use crate::timer::{self, Calibration, Ticks};
use crate::tool::{Arg, Event, EventType, GPtr, InitInfo, Tool};

/// Arguments kept per record.
pub const MAX_ARGS: usize = 5;
/// Records per buffer chunk.
pub const CHUNK: usize = 16 * 1024;
/// Environment variable: the most records one thread keeps.
pub const GASP_TRACE_LIMIT: &str = "GASP_TRACE_LIMIT";

#[derive(Clone, Copy, Debug)]
enum Stored {
    I(i64),
    U(u64),
    F(f64),
    G(GPtr),
    /// Index into the thread's strings.
    S(u32),
}

#[derive(Clone, Copy)]
struct Record {
    ticks: Ticks,
    location: &'static Location<'static>,
    tag: u32,
    ty: EventType,
    nargs: u8,
    args: [Stored; MAX_ARGS],
}

struct ThreadTrace {
    chunks: Vec<Vec<Record>>,
    len: usize,
    limit: usize,
    dropped: u64,
    strings: Vec<String>,
}

impl ThreadTrace {
    #[inline]
    fn push(&mut self, record: Record) {
        if self.len >= self.limit {
            self.dropped += 1;
            return;
        }
        let need_chunk = self.chunks.last().is_none_or(|c| c.len() == c.capacity());
        if need_chunk {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks.last_mut().expect("pushed above").push(record);
        self.len += 1;
    }
}

thread_local! {
    static SLOT: std::cell::OnceCell<Option<Arc<ThreadSlot<ThreadTrace>>>> =
        const { std::cell::OnceCell::new() };
}

static SLOTS: Slots<ThreadTrace> = Slots::new();

/// The tracer of one rank.
pub struct Tracer {
    info: InitInfo,
    command: Vec<String>,
    measuring: AtomicBool,
    limit: usize,
    names: super::EventNames,
    next_async: AtomicU64,
}

impl Tracer {
    pub fn new(info: &InitInfo, args: &[String]) -> Tracer {
        timer::calibration();
        let limit = std::env::var(GASP_TRACE_LIMIT)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4 << 20);
        Tracer {
            info: info.clone(),
            command: args.to_vec(),
            measuring: AtomicBool::new(true),
            limit,
            names: super::EventNames::default(),
            next_async: AtomicU64::new(0),
        }
    }

    fn name(&self, tag: u32) -> String {
        self.names.name(tag)
    }
}

impl Tool for Tracer {
    fn event_notify(&self, event: &Event<'_>) {
        let ticks = timer::ticks_now();
        if event.ty != EventType::End && !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        SLOT.with(|slot| {
            let slot = slot.get_or_init(|| {
                SLOTS.register(ThreadTrace {
                    chunks: Vec::new(),
                    len: 0,
                    limit: self.limit,
                    dropped: 0,
                    strings: Vec::new(),
                })
            });
            let Some(slot) = slot else { return };
            slot.with(|t| {
                let mut args = [Stored::U(0); MAX_ARGS];
                let mut nargs = 0;
                for (dst, arg) in args.iter_mut().zip(event.args) {
                    *dst = match *arg {
                        Arg::Int(v) => Stored::I(i64::from(v)),
                        Arg::I64(v) => Stored::I(v),
                        Arg::Size(v) | Arg::Bytes(v) | Arg::Ptr(v) => Stored::U(v as u64),
                        Arg::Rank(v) => Stored::U(u64::from(v)),
                        Arg::Handle(v) | Arg::U64(v) => Stored::U(v),
                        Arg::F64(v) => Stored::F(v),
                        Arg::GPtr(g) => Stored::G(g),
                        Arg::Str(s) => Stored::S(intern(&mut t.strings, s)),
                    };
                    nargs += 1;
                }
                t.push(Record {
                    ticks,
                    location: event.location,
                    tag: event.tag,
                    ty: event.ty,
                    nargs,
                    args,
                });
            });
        });
    }

    fn control(&self, on: bool) -> bool {
        self.measuring.swap(on, Ordering::Relaxed)
    }

    fn create_event(&self, name: &str, _desc: Option<&str>) -> u32 {
        self.names.create(name)
    }

    fn finish(&self) {
        let calibration = timer::calibration().refine();
        let rank = self.info.rank;
        let mut out = vec![meta(rank, 0, "process_name", &format!("rank {rank}"))];
        out.push(json_meta_sort(rank));
        let mut dropped = 0;
        SLOTS.drain(|tid, t| {
            dropped += t.dropped;
            out.push(meta(
                rank,
                tid as u32,
                "thread_name",
                &format!("thread {tid}"),
            ));
            let records = t.chunks.iter().flatten();
            self.convert(&calibration, tid as u32, records, &t.strings, &mut out);
        });
        let part = Trace {
            trace_events: out,
            display_time_unit: "ns".to_owned(),
            other_data: TraceInfo {
                tool: TRACE_TOOL.to_owned(),
                version: 1,
                command: self.command.clone(),
                ranks: self.info.ranks,
                dropped,
                epoch_ns: 0,
            },
        };
        match super::destination(Kind::Trace, rank, self.info.ranks) {
            Destination::Part(path) => super::write_json(&path, &part),
            Destination::Job(path) => {
                super::write_json(&path, &merge(self.info.ranks, vec![part]));
                eprintln!("gasp: trace written to {}", path.display());
            }
        }
    }
}

fn intern(strings: &mut Vec<String>, s: &CStr) -> u32 {
    strings.push(s.to_string_lossy().into_owned());
    strings.len() as u32 - 1
}

fn meta(pid: u32, tid: u32, name: &str, value: &str) -> TraceEvent {
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

fn json_meta_sort(pid: u32) -> TraceEvent {
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
    fn convert<'a>(
        &self,
        cal: &Calibration,
        tid: u32,
        records: impl Iterator<Item = &'a Record>,
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
        for r in records {
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
