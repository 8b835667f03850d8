//! The tracer (`GASP_TOOL=trace`, `upcxx-run --trace[=FILE]`).
//!
//! Every event is appended to the thread's buffer as a compact record, and decoded at
//! the end into Chrome trace events (see [`crate::formats`]): START/END pairs become
//! complete events (`X`), initiations of non-blocking operations become async begin/end
//! pairs that end at the sync that retired them (at once, for operations complete at
//! initiation; at the thread's last event, marked unsynced, if no sync did), atomic
//! events become instants, and an RPC's send and execution are joined by a flow (`s`
//! at the send, `f` bound to the enclosing execution, matched by the message id both
//! events carry). Puts and RPC replies have no event on the rank
//! they affect (a put is a copy made by its initiator; a reply completes inside the
//! initiator's progress without an event of its own), so they have no flow.
//!
//! * `record.rs`: the compact record format;
//! * `buffer.rs`: a thread's buffer of records, appended to on the hot path;
//! * `chrome.rs`: the conversion to Chrome trace events, and merging the ranks' parts.
//!
//! A thread that recorded [`GASP_TRACE_LIMIT`] events (default 4 Mi; an interval's record
//! counts two) drops further events and counts them.

mod buffer;
mod chrome;
mod record;

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::slots::{fence, SlotCell, Slots, ThreadSlot};
use super::{Destination, Kind};
use crate::formats::{Trace, TraceInfo, TRACE_TOOL};
use crate::timer::{self, Ticks};
use crate::tool::{Arg, Event, EventType, InitInfo, Tool};
use buffer::ThreadTrace;
use chrome::{json_meta_sort, meta};

pub use chrome::merge;
pub use record::{CHUNK_WORDS, MAX_ARGS};

/// Environment variable: the most events one thread keeps.
pub const GASP_TRACE_LIMIT: &str = "GASP_TRACE_LIMIT";
/// Environment variable: the size in MiB of each thread's first buffer, allocated and
/// touched when the thread registers.
pub const GASP_TRACE_BUFFER: &str = "GASP_TRACE_BUFFER";
/// The default of [`GASP_TRACE_BUFFER`].
pub const DEFAULT_BUFFER_MIB: usize = 32;

thread_local! {
    static SLOT: SlotCell<ThreadTrace> = const { SlotCell::new() };
}

static SLOTS: Slots<ThreadTrace> = Slots::new();

/// The tracer of one rank.
pub struct Tracer {
    info: InitInfo,
    command: Vec<String>,
    measuring: AtomicBool,
    limit: usize,
    buffer_words: usize,
    names: super::EventNames,
    next_async: AtomicU64,
}

impl Tracer {
    /// The tracer of the rank `info` describes (the tool's `gasp_init`, GASP §3.2);
    /// `args` is the program's command line, kept for the trace. Reads
    /// [`GASP_TRACE_LIMIT`] and [`GASP_TRACE_BUFFER`].
    pub fn new(info: &InitInfo, args: &[String]) -> Tracer {
        timer::calibration();
        fence::init();
        let limit = std::env::var(GASP_TRACE_LIMIT)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4 << 20);
        let buffer_mib = std::env::var(GASP_TRACE_BUFFER)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_BUFFER_MIB);
        let tracer = Tracer {
            info: info.clone(),
            command: args.to_vec(),
            measuring: AtomicBool::new(true),
            limit,
            buffer_words: (buffer_mib << 20) / std::mem::size_of::<u64>(),
            names: super::EventNames::default(),
            next_async: AtomicU64::new(0),
        };
        // The initializing thread's buffer, before the program runs.
        tracer.slot();
        tracer
    }

    fn name(&self, tag: u32) -> String {
        self.names.name(tag)
    }

    /// Whether measurement is on (GASP §3.3 `gasp_control`).
    #[inline(always)]
    pub(crate) fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn slot(&self) -> Option<&'static ThreadSlot<ThreadTrace>> {
        SLOT.with(|slot| slot.get(&SLOTS, || ThreadTrace::new(self.limit, self.buffer_words)))
    }
}

impl Tracer {
    /// `gasp_event_notify` as the dispatcher calls it (inlined there).
    #[inline(always)]
    pub(crate) fn notify(
        &self,
        tag: u32,
        ty: EventType,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        let ticks = timer::ticks_now();
        // Ended even when measuring stopped since its START: the interval is drawn.
        if ty != EventType::End && !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        if let Some(mut t) = self.slot().and_then(ThreadSlot::enter) {
            t.push(ticks, None, tag, ty, location, args);
        }
    }

    /// A library interval, at its END (the dispatcher's `Span::end`, inlined there):
    /// `start` is its START's time, taken while measuring. Recorded even when measuring
    /// stopped since: the interval is drawn.
    #[inline(always)]
    pub(crate) fn interval(
        &self,
        start: Ticks,
        tag: u32,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        let ticks = timer::ticks_now();
        if let Some(mut t) = self.slot().and_then(ThreadSlot::enter) {
            if args.is_empty() {
                t.defer(start, ticks, tag, location);
            } else {
                t.push(ticks, Some(start), tag, EventType::End, location, args);
            }
        }
    }
}

impl Tool for Tracer {
    fn event_notify(&self, event: &Event<'_>) {
        self.notify(event.tag, event.ty, event.location, event.args);
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
            t.write_deferred();
            dropped += t.dropped;
            out.push(meta(
                rank,
                tid as u32,
                "thread_name",
                &format!("thread {tid}"),
            ));
            self.convert(&calibration, tid as u32, t.decode(), &t.strings, &mut out);
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
