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
//! # Records
//!
//! What a record costs is mostly the memory it is written to: on a virtual machine the
//! first touch of a page costs microseconds (about half a nanosecond per byte here),
//! more than all the instructions of an event. So records are small and the memory is
//! touched before it is needed:
//!
//! * a record is one header word and the arguments that changed. The header holds the
//!   *site* (an index into the thread's table of distinct (tag, type, call site,
//!   argument kinds), found through a small direct-mapped cache), a mask of the
//!   arguments equal to the same argument of the thread's previous record (left out:
//!   the END of a put repeats its START, a loop repeats its pointers), and the ticks
//!   since the previous record (a clock record carries the absolute time when the gap
//!   does not fit). An argument takes one word, a global pointer two. A library
//!   interval (a span of the dispatcher) is one record, written at its END with the
//!   END's arguments and the interval's duration, that decodes into its START and END:
//!   a `upcxx::rput(v, p).wait()` in a loop takes four words for its four events. It is
//!   written in place, into the chunk's spare room (checked once for the largest
//!   record), by code inlined into the dispatcher's span functions;
//! * an interval whose END names no arguments (a future wait's: where the program
//!   resumes after waiting, usually on a round trip's critical path) is only kept, and
//!   written before the thread's next record (which usually comes once the program has
//!   sent its next message) or at finish;
//! * each thread's first buffer, [`GASP_TRACE_BUFFER`] MiB (default
//!   [`DEFAULT_BUFFER_MIB`]), is allocated and touched when the thread registers (the
//!   initializing thread: when the tool is created), outside the measured program;
//!   further chunks of [`CHUNK_WORDS`] words are allocated as needed and touched as
//!   written.
//!
//! A thread that recorded `GASP_TRACE_LIMIT` events (default 4 Mi; an interval's record
//! counts two) drops further events and counts them.

use std::ffi::CStr;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustc_hash::FxHashMap;
use serde_json::{json, Map, Value};

use super::slots::{fence, SlotCell, Slots, ThreadSlot};
use super::{Destination, Kind};
use crate::events::{self, Timing, NB_TRIVIAL};
use crate::formats::{Trace, TraceEvent, TraceInfo, TRACE_TOOL};
use crate::timer::{self, Calibration, Ticks};
use crate::tool::{Arg, Event, EventType, GPtr, InitInfo, Tool};

/// Arguments kept per record.
pub const MAX_ARGS: usize = 5;
/// Environment variable: the most events one thread keeps.
pub const GASP_TRACE_LIMIT: &str = "GASP_TRACE_LIMIT";
/// Environment variable: the size in MiB of each thread's first buffer, allocated and
/// touched when the thread registers.
pub const GASP_TRACE_BUFFER: &str = "GASP_TRACE_BUFFER";
/// The default of [`GASP_TRACE_BUFFER`].
pub const DEFAULT_BUFFER_MIB: usize = 32;
/// Words of each further chunk of a thread's buffer.
pub const CHUNK_WORDS: usize = 1 << 20;

/// An argument as decoded.
#[derive(Clone, Copy, Debug)]
enum Stored {
    I(i64),
    U(u64),
    F(f64),
    G(GPtr),
    /// Index into the thread's strings.
    S(u32),
}

/// A decoded record.
#[derive(Clone, Copy)]
struct Record {
    ticks: Ticks,
    location: &'static Location<'static>,
    tag: u32,
    ty: EventType,
    nargs: u8,
    args: [Stored; MAX_ARGS],
}

// The header word of a record: site | same-mask | delta ticks.
const SITE_BITS: u32 = 20;
const SITE_MASK: u64 = (1 << SITE_BITS) - 1;
const SAME_SHIFT: u32 = SITE_BITS;
const DELTA_SHIFT: u32 = SITE_BITS + MAX_ARGS as u32;
const DELTA_MAX: u64 = u64::MAX >> DELTA_SHIFT;
/// The site of a clock record, whose next word is the absolute tick count.
const CLOCK: u64 = SITE_MASK;
/// Words a record may take: a clock record, the header, an interval's duration, two
/// per argument.
const RECORD_MAX_WORDS: usize = 4 + 2 * MAX_ARGS;
/// The type field of a site whose records are whole intervals (START and END, see
/// [`ThreadTrace::push`]).
const INTERVAL: u64 = 3;

// Argument kinds, three bits per argument in a site.
const K_INT: u64 = 0;
const K_UNSIGNED: u64 = 1;
const K_FLOAT: u64 = 2;
const K_GPTR: u64 = 3;
const K_STR: u64 = 4;

/// Entries of the direct-mapped site cache (a power of two).
const SITE_CACHE: usize = 256;

/// What records of one site share: the event, its call site, its argument kinds.
#[derive(Clone, Copy)]
struct Site {
    location: &'static Location<'static>,
    /// tag | type << 32 | nargs << 34 | kinds << 37.
    meta: u64,
}

impl Site {
    fn tag(&self) -> u32 {
        self.meta as u32
    }

    /// The type of its records; an interval's are ENDs, each preceded by its START.
    fn ty(&self) -> EventType {
        match self.meta >> 32 & 3 {
            0 => EventType::Start,
            2 => EventType::Atomic,
            _ => EventType::End,
        }
    }

    fn interval(&self) -> bool {
        self.meta >> 32 & 3 == INTERVAL
    }

    fn nargs(&self) -> usize {
        (self.meta >> 34 & 7) as usize
    }

    fn kind(&self, i: usize) -> u64 {
        self.meta >> (37 + 3 * i) & 7
    }
}

struct ThreadTrace {
    /// The chunk being filled.
    current: Vec<u64>,
    /// Full chunks, oldest first.
    full: Vec<Vec<u64>>,
    records: usize,
    limit: usize,
    dropped: u64,
    /// Ticks of the previous record (of the thread's registration at first).
    last_ticks: Ticks,
    start_ticks: Ticks,
    /// Each argument position's last value.
    prev: [[u64; 2]; MAX_ARGS],
    sites: Vec<Site>,
    site_index: FxHashMap<(usize, u64), u32>,
    /// (call-site address, meta, site + 1; 0: empty).
    cache: [(usize, u64, u32); SITE_CACHE],
    strings: Vec<String>,
    /// An interval not written yet ([`ThreadTrace::defer`]).
    deferred: Option<Deferred>,
}

/// A library interval whose END named no arguments, written later.
#[derive(Clone, Copy)]
struct Deferred {
    location: &'static Location<'static>,
    tag: u32,
    start: Ticks,
    end: Ticks,
}

impl ThreadTrace {
    fn new(limit: usize, buffer_words: usize) -> ThreadTrace {
        let now = timer::ticks_now();
        ThreadTrace {
            current: touched(buffer_words),
            full: Vec::new(),
            records: 0,
            limit,
            dropped: 0,
            last_ticks: now,
            start_ticks: now,
            prev: [[0; 2]; MAX_ARGS],
            sites: Vec::new(),
            site_index: FxHashMap::default(),
            cache: [(0, 0, 0); SITE_CACHE],
            strings: Vec::new(),
            deferred: None,
        }
    }

    /// Records an interval whose END named no arguments (a future wait's) later:
    /// before the thread's next record (so records stay in order), or at finish. Such
    /// an END is where the program resumes after waiting, usually on a round trip's
    /// critical path, and the next record usually comes when the program has sent its
    /// next message.
    #[inline(always)]
    fn defer(&mut self, start: Ticks, end: Ticks, tag: u32, location: &'static Location<'static>) {
        self.flush();
        self.deferred = Some(Deferred {
            location,
            tag,
            start,
            end,
        });
    }

    /// Writes the deferred interval, if any, out of line.
    #[inline(always)]
    fn flush(&mut self) {
        if self.deferred.is_some() {
            self.write_deferred();
        }
    }

    /// Writes the deferred interval, if any.
    #[cold]
    #[inline(never)]
    fn write_deferred(&mut self) {
        if let Some(d) = self.deferred.take() {
            self.push(d.end, Some(d.start), d.tag, EventType::End, d.location, &[]);
        }
    }

    /// Appends a record of one event at `ticks`, or with `start`, of a whole interval:
    /// START at `start` and END at `ticks`, with the END's arguments (which repeat the
    /// START's; see the dispatcher's docs), recorded at the END. Such a record has an
    /// [`INTERVAL`] site and the interval's duration after its header, and decodes into
    /// the two events. The deferred interval, if any, is written first.
    #[inline(always)]
    fn push(
        &mut self,
        ticks: Ticks,
        start: Option<Ticks>,
        tag: u32,
        ty: EventType,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        self.flush();
        if self.records >= self.limit {
            self.dropped += 1 + u64::from(start.is_some());
            return;
        }
        if self.current.capacity() - self.current.len() < RECORD_MAX_WORDS {
            self.next_chunk();
        }
        let mut delta = ticks.wrapping_sub(self.last_ticks);
        if delta > DELTA_MAX {
            self.current.push(CLOCK);
            self.current.push(ticks);
            delta = 0;
        }
        self.last_ticks = ticks;
        self.records += 1 + usize::from(start.is_some());
        // The record goes straight into the chunk: its header first (written last, when
        // the site is known), an interval's duration, then the arguments that changed.
        let len = self.current.len();
        let record = &mut self.current.spare_capacity_mut()[..2 + 2 * MAX_ARGS];
        let (mut n, mut same, mut kinds) = (1, 0u64, 0u64);
        let mut ty = ty as u64;
        if let Some(start) = start {
            record[1].write(ticks.saturating_sub(start));
            n = 2;
            ty = INTERVAL;
        }
        let args = &args[..args.len().min(MAX_ARGS)];
        for (i, arg) in args.iter().enumerate() {
            let (kind, w) = match *arg {
                Arg::Int(v) => (K_INT, [i64::from(v) as u64, 0]),
                Arg::I64(v) => (K_INT, [v as u64, 0]),
                Arg::Size(v) | Arg::Bytes(v) | Arg::Ptr(v) => (K_UNSIGNED, [v as u64, 0]),
                Arg::Rank(v) => (K_UNSIGNED, [u64::from(v), 0]),
                Arg::Handle(v) | Arg::U64(v) => (K_UNSIGNED, [v, 0]),
                Arg::F64(v) => (K_FLOAT, [v.to_bits(), 0]),
                Arg::GPtr(g) => (K_GPTR, [u64::from(g.rank), g.addr]),
                Arg::Str(s) => (K_STR, [intern(&mut self.strings, s), 0]),
            };
            kinds |= kind << (3 * i);
            if w == self.prev[i] {
                same |= 1 << i;
            } else {
                self.prev[i] = w;
                record[n].write(w[0]);
                n += 1;
                if kind == K_GPTR {
                    record[n].write(w[1]);
                    n += 1;
                }
            }
        }
        let meta = u64::from(tag) | ty << 32 | (args.len() as u64) << 34 | kinds << 37;
        let site = self.site(location, meta);
        self.current.spare_capacity_mut()[0]
            .write(site | same << SAME_SHIFT | delta << DELTA_SHIFT);
        // SAFETY: the chunk had room for a record after `len` (checked above), and the
        // `n` words from `len` were just written: the header, then the duration and the
        // arguments.
        unsafe { self.current.set_len(len + n) };
    }

    /// The index of the site (location, meta).
    #[inline(always)]
    fn site(&mut self, location: &'static Location<'static>, meta: u64) -> u64 {
        let key = location as *const Location<'static> as usize;
        let slot = ((key >> 3) as u64 ^ meta).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
        let (k, m, site) = self.cache[slot as usize & (SITE_CACHE - 1)];
        if k == key && m == meta && site != 0 {
            return u64::from(site - 1);
        }
        self.site_slow(slot as usize & (SITE_CACHE - 1), location, meta)
    }

    #[cold]
    #[inline(never)]
    fn site_slow(&mut self, slot: usize, location: &'static Location<'static>, meta: u64) -> u64 {
        let key = location as *const Location<'static> as usize;
        let sites = &mut self.sites;
        let site = *self.site_index.entry((key, meta)).or_insert_with(|| {
            sites.push(Site { location, meta });
            sites.len() as u32 - 1
        });
        // Sites beyond the header's field all share its last value; a program does not
        // have a million call sites.
        let site = site.min(CLOCK as u32 - 1);
        self.cache[slot] = (key, meta, site + 1);
        u64::from(site)
    }

    #[cold]
    #[inline(never)]
    fn next_chunk(&mut self) {
        let chunk = std::mem::replace(&mut self.current, Vec::with_capacity(CHUNK_WORDS));
        if !chunk.is_empty() {
            self.full.push(chunk);
        }
    }

    /// The records, oldest first.
    fn decode(&self) -> impl Iterator<Item = Record> + '_ {
        let mut words = self
            .full
            .iter()
            .chain(std::iter::once(&self.current))
            .flat_map(|c| c.iter().copied());
        let mut ticks = self.start_ticks;
        let mut prev = [[0u64; 2]; MAX_ARGS];
        // An interval's START takes the arguments its event's START names.
        let start_nargs: Vec<u8> = self
            .sites
            .iter()
            .map(|s| match events::by_tag(s.tag()) {
                Some(def) => def.start_arg_names().count().min(s.nargs()) as u8,
                None => s.nargs() as u8,
            })
            .collect();
        // The END of the interval whose START was returned last.
        let mut end: Option<Record> = None;
        std::iter::from_fn(move || {
            if let Some(end) = end.take() {
                return Some(end);
            }
            let mut header = words.next()?;
            if header & SITE_MASK == CLOCK {
                ticks = words.next()?;
                header = words.next()?;
            }
            ticks = ticks.wrapping_add(header >> DELTA_SHIFT);
            let site_index = (header & SITE_MASK) as usize;
            let site = self.sites[site_index];
            let duration = if site.interval() { words.next()? } else { 0 };
            let same = header >> SAME_SHIFT;
            let mut args = [Stored::U(0); MAX_ARGS];
            for (i, (arg, prev)) in args.iter_mut().zip(&mut prev).enumerate() {
                if i >= site.nargs() {
                    break;
                }
                let kind = site.kind(i);
                if same >> i & 1 == 0 {
                    prev[0] = words.next()?;
                    prev[1] = if kind == K_GPTR { words.next()? } else { 0 };
                }
                *arg = match kind {
                    K_INT => Stored::I(prev[0] as i64),
                    K_UNSIGNED => Stored::U(prev[0]),
                    K_FLOAT => Stored::F(f64::from_bits(prev[0])),
                    K_GPTR => Stored::G(GPtr {
                        rank: prev[0] as u32,
                        addr: prev[1],
                    }),
                    _ => Stored::S(prev[0] as u32),
                };
            }
            let record = Record {
                ticks,
                location: site.location,
                tag: site.tag(),
                ty: site.ty(),
                nargs: site.nargs() as u8,
                args,
            };
            if !site.interval() {
                return Some(record);
            }
            end = Some(record);
            Some(Record {
                ticks: ticks.wrapping_sub(duration),
                ty: EventType::Start,
                nargs: start_nargs[site_index],
                ..record
            })
        })
    }
}

/// An empty buffer of `words` words whose pages are already touched.
fn touched(words: usize) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(words);
    let bytes = words * std::mem::size_of::<u64>();
    #[cfg(target_os = "linux")]
    {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let page = 4096;
        let start = (v.as_mut_ptr() as usize).next_multiple_of(page);
        let end = (v.as_mut_ptr() as usize + bytes) & !(page - 1);
        if end > start {
            // SAFETY: [start, end) lies inside the allocation `v` owns; populating pages
            // for writing changes no byte of it.
            let r = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_WRITE)
            };
            if r == 0 {
                return v;
            }
        }
    }
    // Older kernels: write a word of every page.
    for w in v.spare_capacity_mut().iter_mut().step_by(512) {
        w.write(0);
    }
    v
}

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

/// The index of a copy of `s` (a user event's string argument; cold: the runtime's
/// events have none, and a call on the hot path would make its loop spill).
#[cold]
#[inline(never)]
fn intern(strings: &mut Vec<String>, s: &CStr) -> u64 {
    strings.push(s.to_string_lossy().into_owned());
    strings.len() as u64 - 1
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
    fn convert(
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
    use super::*;

    fn stored_eq(a: &Stored, b: &Stored) -> bool {
        match (a, b) {
            (Stored::I(x), Stored::I(y)) => x == y,
            (Stored::U(x), Stored::U(y)) => x == y,
            (Stored::F(x), Stored::F(y)) => x.to_bits() == y.to_bits(),
            (Stored::G(x), Stored::G(y)) => x == y,
            (Stored::S(x), Stored::S(y)) => x == y,
            _ => false,
        }
    }

    #[test]
    fn records_decode_to_what_was_recorded() {
        // A small first buffer, so that records continue in further chunks.
        let mut t = ThreadTrace::new(usize::MAX, 64);
        let g = GPtr {
            rank: 3,
            addr: 0xdead_beef_0000,
        };
        let name = c"phase";
        let put = [Arg::Int(1), Arg::GPtr(g), Arg::Ptr(0x1000), Arg::Bytes(8)];
        let put_end = [
            Arg::Int(1),
            Arg::GPtr(g),
            Arg::Ptr(0x1000),
            Arg::Bytes(8),
            Arg::Handle(7),
        ];
        let user = [
            Arg::I64(-5),
            Arg::F64(2.5),
            Arg::Str(name),
            Arg::U64(u64::MAX),
        ];
        // (ticks, tag, type, arguments, which of `want`'s lists they decode to).
        let mut expected = Vec::new();
        let mut ticks = t.start_ticks;
        for i in 0..10_000u64 {
            let (tag, ty, args, want): (u32, EventType, &[Arg<'_>], usize) = match i % 5 {
                0 | 4 => (events::GASP_UPC_NB_PUT_INIT, EventType::Start, &put, 0),
                1 => (events::GASP_UPC_NB_PUT_INIT, EventType::End, &put_end, 1),
                2 => (events::USEREVT_START, EventType::Atomic, &user, 2),
                _ => (events::GASP_UPCXX_FUTURE_WAIT, EventType::End, &[], 3),
            };
            // Mostly small steps; now and then a gap too long for the header.
            ticks += if i % 1000 == 999 { 1 << 45 } else { i % 17 };
            if i % 5 == 4 {
                // A whole interval, recorded at its END with the END's arguments: it
                // decodes into its START, with the arguments the START names, and END.
                let start = ticks - i % 13;
                t.push(
                    ticks,
                    Some(start),
                    tag,
                    EventType::End,
                    Location::caller(),
                    &put_end,
                );
                expected.push((start, tag, EventType::Start, put.len(), 0));
                expected.push((ticks, tag, EventType::End, put_end.len(), 1));
            } else {
                t.push(ticks, None, tag, ty, Location::caller(), args);
                expected.push((ticks, tag, ty, args.len(), want));
            }
        }
        assert!(!t.full.is_empty(), "the records span several chunks");
        let decoded: Vec<Record> = t.decode().collect();
        assert_eq!(decoded.len(), expected.len());
        for (i, (r, &(ticks, tag, ty, nargs, want))) in decoded.iter().zip(&expected).enumerate() {
            assert_eq!(
                (r.ticks, r.tag, r.ty, r.nargs as usize),
                (ticks, tag, ty, nargs),
                "record {i}"
            );
            let want: Vec<Stored> = match want {
                0 => vec![Stored::I(1), Stored::G(g), Stored::U(0x1000), Stored::U(8)],
                1 => vec![
                    Stored::I(1),
                    Stored::G(g),
                    Stored::U(0x1000),
                    Stored::U(8),
                    Stored::U(7),
                ],
                2 => {
                    let Stored::S(s) = r.args[2] else {
                        panic!("a string argument decodes as a string")
                    };
                    assert_eq!(t.strings[s as usize], "phase");
                    vec![
                        Stored::I(-5),
                        Stored::F(2.5),
                        r.args[2],
                        Stored::U(u64::MAX),
                    ]
                }
                _ => vec![],
            };
            for (a, b) in r.args[..r.nargs as usize].iter().zip(&want) {
                assert!(stored_eq(a, b), "record {i}: {a:?} != {b:?}");
            }
            assert_eq!(r.location.file(), file!());
        }
    }

    #[test]
    fn a_deferred_interval_is_written_before_the_next_record_or_at_finish() {
        let mut t = ThreadTrace::new(usize::MAX, 64);
        let t0 = t.start_ticks;
        let (wait, barrier) = (events::GASP_UPCXX_FUTURE_WAIT, events::GASP_UPC_BARRIER);
        let here = Location::caller();
        t.defer(t0 + 1, t0 + 5, wait, here);
        // A second deferred interval writes the first, a record the second.
        t.defer(t0 + 6, t0 + 9, wait, here);
        t.push(t0 + 12, None, barrier, EventType::Start, here, &[]);
        t.defer(t0 + 13, t0 + 20, wait, here);
        assert_eq!(t.decode().count(), 5);
        // At finish.
        t.write_deferred();
        let got: Vec<_> = t.decode().map(|r| (r.ticks - t0, r.tag, r.ty)).collect();
        use EventType::{End, Start};
        assert_eq!(
            got,
            [
                (1, wait, Start),
                (5, wait, End),
                (6, wait, Start),
                (9, wait, End),
                (12, barrier, Start),
                (13, wait, Start),
                (20, wait, End),
            ]
        );
    }

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
            local_ranks: 0..4,
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

    #[test]
    fn a_full_thread_drops_and_counts() {
        let mut t = ThreadTrace::new(3, 64);
        for i in 0..5 {
            t.push(
                t.start_ticks + i,
                None,
                events::GASP_UPC_BARRIER,
                EventType::Start,
                Location::caller(),
                &[],
            );
        }
        assert_eq!((t.decode().count(), t.dropped), (3, 2));
        // A dropped interval is two events.
        let end = t.start_ticks + 9;
        t.push(
            end,
            Some(end - 1),
            events::GASP_UPC_BARRIER,
            EventType::End,
            Location::caller(),
            &[],
        );
        assert_eq!((t.decode().count(), t.dropped), (3, 4));
    }
}
