//! The profiler (`GASP_TOOL=profile`, `upcxx-run --profile[=FILE]`).
//!
//! Per thread, a table keyed by (event tag, call site) accumulates count, total/min/max
//! duration and bytes; START events wait on a small per-thread stack for their END (the
//! innermost open event with the same tag). Communication events (puts, gets, RPC and AM
//! sends) also add their bytes and one message to the thread's row of the rank×rank
//! matrix. At the end the threads' tables are summed into this rank's part of the
//! [`Profile`], and the launcher sums the ranks' parts.
//!
//! # Cost
//!
//! An event is one clock read and a few dozen instructions: the thread's buffer is one
//! thread-local pointer away (`slots.rs`), a START is a push, an END a pop and one row
//! update. Rows are found through a small direct-mapped cache keyed by (tag, call-site
//! address) in front of the hash map, so the steady state does not hash; the map is only
//! consulted when a call site is new or two sites collide in the cache.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap;

use super::slots::{fence, SlotCell, Slots};
use super::{Destination, Kind};
use crate::events;
use crate::formats::{CommMatrix, Profile, ProfileRow, PROFILE_TOOL};
use crate::timer::{self, Ticks};
use crate::tool::{Arg, Event, EventType, InitInfo, Tool};

#[derive(Clone, Copy)]
struct Stats {
    location: &'static Location<'static>,
    atomic: bool,
    count: u64,
    total: Ticks,
    min: Ticks,
    max: Ticks,
    bytes: u64,
}

struct Open {
    tag: u32,
    start: Ticks,
    location: &'static Location<'static>,
    bytes: u64,
    /// The matrix cell the START counted in, if any.
    peer: Option<u32>,
}

/// Entries of the direct-mapped row cache (a power of two).
const CACHE: usize = 64;

/// A row of the cache: the key (tag, call-site address) and the row's index.
#[derive(Clone, Copy)]
struct Cached {
    location: usize,
    tag: u32,
    row: u32,
}

struct ThreadProfile {
    open: Vec<Open>,
    /// The rows, in order of first appearance.
    rows: Vec<Stats>,
    /// Row by (tag, call-site address).
    index: FxHashMap<(u32, usize), u32>,
    cache: [Cached; CACHE],
    /// Per destination rank: (bytes, messages).
    sent: Vec<(u64, u64)>,
}

thread_local! {
    static SLOT: SlotCell<ThreadProfile> = const { SlotCell::new() };
}

static SLOTS: Slots<ThreadProfile> = Slots::new();

/// The profiler of one rank.
pub struct Profiler {
    info: InitInfo,
    command: Vec<String>,
    measuring: AtomicBool,
    started: Ticks,
    names: super::EventNames,
}

impl Profiler {
    pub fn new(info: &InitInfo, args: &[String]) -> Profiler {
        timer::calibration();
        fence::init();
        Profiler {
            info: info.clone(),
            command: args.to_vec(),
            measuring: AtomicBool::new(true),
            started: timer::ticks_now(),
            names: super::EventNames::default(),
        }
    }

    #[inline(always)]
    fn with_thread(&self, f: impl FnOnce(&mut ThreadProfile)) {
        let slot = SLOT.with(|slot| {
            slot.get(&SLOTS, || ThreadProfile {
                open: Vec::with_capacity(16),
                rows: Vec::new(),
                index: FxHashMap::default(),
                cache: [Cached {
                    location: 0,
                    tag: 0,
                    row: 0,
                }; CACHE],
                sent: vec![(0, 0); self.info.ranks as usize],
            })
        });
        if let Some(slot) = slot {
            slot.with(f);
        }
    }

    fn event_name(&self, tag: u32) -> String {
        self.names.name(tag)
    }
}

impl ThreadProfile {
    #[inline(always)]
    fn record(
        &mut self,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
        ticks: Ticks,
        bytes: u64,
    ) {
        let key = location as *const Location<'static> as usize;
        let slot = (key >> 3 ^ tag as usize).wrapping_mul(0x9e37_79b9) >> 8 & (CACHE - 1);
        let c = self.cache[slot];
        let row = if c.location == key && c.tag == tag {
            c.row
        } else {
            self.row_slow(slot, tag, location, atomic)
        };
        let stats = &mut self.rows[row as usize];
        stats.count += 1;
        stats.total += ticks;
        stats.min = stats.min.min(ticks);
        stats.max = stats.max.max(ticks);
        stats.bytes += bytes;
    }

    /// The row of (tag, location), found in or added to the map, and cached at `slot`.
    #[cold]
    #[inline(never)]
    fn row_slow(
        &mut self,
        slot: usize,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
    ) -> u32 {
        let key = location as *const Location<'static> as usize;
        let rows = &mut self.rows;
        let row = *self.index.entry((tag, key)).or_insert_with(|| {
            rows.push(Stats {
                location,
                atomic,
                count: 0,
                total: 0,
                min: Ticks::MAX,
                max: 0,
                bytes: 0,
            });
            rows.len() as u32 - 1
        });
        self.cache[slot] = Cached {
            location: key,
            tag,
            row,
        };
        row
    }

    /// Counts a message and its bytes in the matrix; returns the peer it counted for.
    #[inline(always)]
    fn count_message(&mut self, event: &Event<'_>, bytes: u64) -> Option<u32> {
        if !events::is_communication(event.tag) {
            return None;
        }
        let peer = event.peer()?;
        let cell = self.sent.get_mut(peer as usize)?;
        cell.0 += bytes;
        cell.1 += 1;
        Some(peer)
    }
}

/// The bytes an event moves ([`Event::bytes`]), in one pass over short argument lists.
#[inline(always)]
fn bytes_of(args: &[Arg<'_>]) -> u64 {
    let mut bytes = 0;
    for a in args {
        if let Arg::Bytes(n) = a {
            bytes += *n as u64;
        }
    }
    bytes
}

impl Tool for Profiler {
    #[inline(always)]
    fn event_notify(&self, event: &Event<'_>) {
        let now = timer::ticks_now();
        let measuring = self.measuring.load(Ordering::Relaxed);
        self.with_thread(|t| match event.ty {
            EventType::Start if measuring => {
                let bytes = bytes_of(event.args);
                let peer = t.count_message(event, bytes);
                t.open.push(Open {
                    tag: event.tag,
                    start: now,
                    location: event.location,
                    bytes,
                    peer,
                });
            }
            EventType::End => {
                // The innermost open event, almost always the top of the stack.
                let open = match t.open.last() {
                    Some(o) if o.tag == event.tag => t.open.pop(),
                    _ => t
                        .open
                        .iter()
                        .rposition(|o| o.tag == event.tag)
                        .map(|i| t.open.remove(i)),
                };
                if let Some(open) = open {
                    let elapsed = now.saturating_sub(open.start);
                    // Some sizes are known only at the END (a serialized RPC's).
                    let extra = bytes_of(event.args).saturating_sub(open.bytes);
                    if let Some(cell) = open.peer.and_then(|p| t.sent.get_mut(p as usize)) {
                        cell.0 += extra;
                    }
                    t.record(open.tag, open.location, false, elapsed, open.bytes + extra);
                }
            }
            EventType::Atomic if measuring => {
                let bytes = bytes_of(event.args);
                t.count_message(event, bytes);
                t.record(event.tag, event.location, true, 0, bytes);
            }
            _ => {}
        });
    }

    fn control(&self, on: bool) -> bool {
        self.measuring.swap(on, Ordering::Relaxed)
    }

    fn create_event(&self, name: &str, _desc: Option<&str>) -> u32 {
        self.names.create(name)
    }

    fn finish(&self) {
        let ended = timer::ticks_now();
        let calibration = timer::calibration().refine();
        let ns = |t: Ticks| (t as f64 * calibration.ns_per_tick) as u64;
        let ranks = self.info.ranks as usize;
        let rank = self.info.rank as usize;
        let mut table: HashMap<(u32, usize), Stats> = HashMap::new();
        let mut sent = vec![(0u64, 0u64); ranks];
        SLOTS.drain(|_, t| {
            let rows = std::mem::take(&mut t.rows);
            for (key, row) in std::mem::take(&mut t.index) {
                let s = rows[row as usize];
                table
                    .entry(key)
                    .and_modify(|acc| {
                        acc.count += s.count;
                        acc.total += s.total;
                        acc.min = acc.min.min(s.min);
                        acc.max = acc.max.max(s.max);
                        acc.bytes += s.bytes;
                    })
                    .or_insert(s);
            }
            for (acc, s) in sent.iter_mut().zip(&t.sent) {
                acc.0 += s.0;
                acc.1 += s.1;
            }
        });
        let mut events: Vec<ProfileRow> = table
            .into_iter()
            .map(|((tag, _), s)| ProfileRow {
                rank: rank as u32,
                name: self.event_name(tag),
                tag,
                kind: if s.atomic { "atomic" } else { "interval" }.to_owned(),
                file: s.location.file().to_owned(),
                line: s.location.line(),
                column: s.location.column(),
                count: s.count,
                total_ns: ns(s.total),
                min_ns: if s.atomic { 0 } else { ns(s.min) },
                max_ns: ns(s.max),
                bytes: s.bytes,
            })
            .collect();
        events.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.tag.cmp(&b.tag)));
        let mut matrix = CommMatrix {
            bytes: vec![vec![0; ranks]; ranks],
            messages: vec![vec![0; ranks]; ranks],
        };
        for (dst, (bytes, messages)) in sent.into_iter().enumerate() {
            matrix.bytes[rank][dst] = bytes;
            matrix.messages[rank][dst] = messages;
        }
        let mut rank_time_ns = vec![0; ranks];
        rank_time_ns[rank] = ns(ended - self.started);
        let part = Profile {
            tool: PROFILE_TOOL.to_owned(),
            version: 1,
            command: self.command.clone(),
            ranks: ranks as u32,
            rank_time_ns,
            events,
            matrix,
        };
        match super::destination(Kind::Profile, self.info.rank, self.info.ranks) {
            Destination::Part(path) => super::write_json(&path, &part),
            Destination::Job(path) => {
                let merged = merge(self.info.ranks, vec![part]);
                super::write_json(&path, &merged);
                eprint!("{}", summary(&merged));
                eprintln!("gasp: profile written to {}", path.display());
            }
        }
    }
}

/// Sums the ranks' parts into the job's profile.
pub fn merge(ranks: u32, parts: Vec<Profile>) -> Profile {
    let n = ranks as usize;
    let mut job = Profile {
        tool: PROFILE_TOOL.to_owned(),
        version: 1,
        command: Vec::new(),
        ranks,
        rank_time_ns: vec![0; n],
        events: Vec::new(),
        matrix: CommMatrix {
            bytes: vec![vec![0; n]; n],
            messages: vec![vec![0; n]; n],
        },
    };
    for part in parts {
        if job.command.is_empty() {
            job.command = part.command;
        }
        for (acc, t) in job.rank_time_ns.iter_mut().zip(&part.rank_time_ns) {
            *acc += t;
        }
        job.events.extend(part.events);
        for (src, row) in part.matrix.bytes.iter().enumerate().take(n) {
            for (dst, b) in row.iter().enumerate().take(n) {
                job.matrix.bytes[src][dst] += b;
                job.matrix.messages[src][dst] += part.matrix.messages[src][dst];
            }
        }
    }
    job.events
        .sort_by(|a, b| (a.rank, b.total_ns, a.tag).cmp(&(b.rank, a.total_ns, b.tag)));
    job
}

/// The short table of the costliest events printed at the end of a profiled run (the
/// same table as `upcxx-run report`).
pub fn summary(profile: &Profile) -> String {
    let summary = crate::report::Summary::from_profile(profile);
    crate::report::top_costs(&summary, 10)
}
