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
//! A notification is one clock read and a few dozen instructions, inlined into the
//! dispatcher's `Span::begin`/`Span::end` (one call from the instrumented site): the
//! thread's buffer is one thread-local pointer away (`slots.rs`).
//!
//! * A library interval is counted once, at its END (`Profiler::interval`): the
//!   dispatcher's span carries the START's time, and the END's arguments repeat the
//!   START's (our table keeps GASP §5.4's lists so) and add what is known only at the
//!   end (the size of a serialized RPC), so the END reads bytes and peer once. A user
//!   event's START (GASP §5.3, not a span) pushes (time, tag, call site, bytes) on the
//!   stack, and its END pops it; its START counts its bytes, since its END may name
//!   none.
//! * An END with no arguments (a future wait's: where the program resumes after
//!   waiting, usually on a round trip's critical path) is only queued, as (tag, call
//!   site, duration), and counted after the thread's next END with arguments (in a
//!   loop of `rpc(..).wait()`, the next RPC's, after its message left), when the queue
//!   is full, or at finish.
//! * The END finds the row through a small direct-mapped cache keyed by (tag,
//!   call-site address) in front of the hash map (so the steady state does not hash),
//!   and updates it. The row remembers where its event's arguments hold the bytes and
//!   the peer, so an END reads two arguments instead of scanning the list.
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap;

use super::slots::{fence, Entered, SlotCell, Slots};
use super::{Destination, Kind};
use crate::events;
use crate::formats::{CommMatrix, Profile, ProfileRow, PROFILE_TOOL};
use crate::timer::{self, Ticks};
use crate::tool::{Arg, Event, EventType, InitInfo, Tool};

#[derive(Clone, Copy)]
struct Stats {
    location: &'static Location<'static>,
    atomic: bool,
    /// Where the event's arguments hold its bytes ([`arg_bytes`]).
    bytes_at: u8,
    /// Where they hold its peer, for a communication event ([`arg_peer`]); else
    /// [`NO_ARG`].
    peer_at: u8,
    count: u64,
    total: Ticks,
    min: Ticks,
    max: Ticks,
    bytes: u64,
}

/// An argument position: none.
const NO_ARG: u8 = u8::MAX;
/// An argument position: not fixed, look at every argument (user events).
const SCAN: u8 = u8::MAX - 1;

struct Open {
    start: Ticks,
    location: &'static Location<'static>,
    tag: u32,
    /// The bytes the START named: only a user event's (a system event's END repeats
    /// its START's arguments and adds those known only at the end).
    bytes: u64,
}

/// Entries of the direct-mapped row cache (a power of two).
const CACHE: usize = 64;

/// A library interval whose END named no arguments, not yet counted in its row.
#[derive(Clone, Copy)]
struct Deferred {
    location: &'static Location<'static>,
    tag: u32,
    ticks: Ticks,
}

/// Deferred intervals a thread holds at most; one more counts them all first.
const DEFERRED: usize = 32;

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
    /// Intervals to count later ([`ThreadProfile::defer`]); the first
    /// `deferred_len` are set.
    deferred: [Deferred; DEFERRED],
    deferred_len: usize,
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

    /// This thread's tables, unless the profiler has finished.
    #[inline(always)]
    fn thread(&self) -> Option<Entered<'static, ThreadProfile>> {
        let slot = SLOT.with(|slot| slot.get(&SLOTS, || ThreadProfile::new(self.info.ranks)));
        slot?.enter()
    }

    fn event_name(&self, tag: u32) -> String {
        self.names.name(tag)
    }

    /// Whether measurement is on (GASP §3.3 `gasp_control`).
    #[inline(always)]
    pub(crate) fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// A library interval, at its END (the dispatcher's `Span::end`, inlined there):
    /// `start` is its START's time, taken while measuring. Counted even when measuring
    /// stopped since: the interval was begun.
    #[inline(always)]
    pub(crate) fn interval(
        &self,
        start: Ticks,
        tag: u32,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        let now = timer::ticks_now();
        if let Some(mut t) = self.thread() {
            let ticks = now.saturating_sub(start);
            if args.is_empty() {
                t.defer(tag, location, ticks);
            } else {
                t.record(tag, location, false, ticks, args, 0);
                t.catch_up();
            }
        }
    }

    /// `gasp_event_notify` for what is not a library interval (those come to
    /// [`Profiler::interval`]): user events (GASP §5.3), whose START is pushed on the
    /// thread's stack with its time and bytes and popped by their END, and ATOMIC
    /// events. Inlined into the dispatcher, where `ty` is a constant.
    #[inline(always)]
    pub(crate) fn notify(
        &self,
        tag: u32,
        ty: EventType,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        // The only clock read of the event: a START's is its interval's start, an
        // END's its end.
        let now = timer::ticks_now();
        match ty {
            EventType::Start => {
                if self.measuring.load(Ordering::Relaxed) {
                    if let Some(mut t) = self.thread() {
                        t.start(now, tag, location, args);
                    }
                }
            }
            // Ended even when measuring stopped since its START: the interval counts.
            EventType::End => {
                if let Some(mut t) = self.thread() {
                    t.end(now, tag, args);
                }
            }
            EventType::Atomic => {
                if self.measuring.load(Ordering::Relaxed) {
                    if let Some(mut t) = self.thread() {
                        t.record(tag, location, true, 0, args, 0);
                    }
                }
            }
        }
    }
}

impl ThreadProfile {
    fn new(ranks: u32) -> ThreadProfile {
        ThreadProfile {
            open: Vec::with_capacity(16),
            rows: Vec::new(),
            index: FxHashMap::default(),
            cache: [Cached {
                location: 0,
                tag: 0,
                row: 0,
            }; CACHE],
            sent: vec![(0, 0); ranks as usize],
            deferred: [Deferred {
                location: Location::caller(),
                tag: 0,
                ticks: 0,
            }; DEFERRED],
            deferred_len: 0,
        }
    }

    #[inline(always)]
    fn start(
        &mut self,
        now: Ticks,
        tag: u32,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        let bytes = if crate::tool::is_user_event(tag) {
            bytes_of(args)
        } else {
            0
        };
        self.open.push(Open {
            start: now,
            location,
            tag,
            bytes,
        });
    }

    #[inline(always)]
    fn end(&mut self, now: Ticks, tag: u32, args: &[Arg<'_>]) {
        // The innermost open event, almost always the top of the stack.
        let open = match self.open.pop() {
            Some(o) if o.tag == tag => Some(o),
            Some(o) => {
                self.open.push(o);
                self.take_open(tag)
            }
            None => None,
        };
        if let Some(o) = open {
            let elapsed = now.saturating_sub(o.start);
            self.record(o.tag, o.location, false, elapsed, args, o.bytes);
        }
    }

    /// Queues a library interval whose END named no arguments (a wait's, typically):
    /// its row is found and updated later, at the thread's next END with arguments
    /// (see [`ThreadProfile::catch_up`]), when the queue is full, or at the end of
    /// the run. Such an END is where the program resumes after waiting, the part of a
    /// round trip where every instruction counts.
    #[inline(always)]
    fn defer(&mut self, tag: u32, location: &'static Location<'static>, ticks: Ticks) {
        if self.deferred_len == DEFERRED {
            self.count_deferred();
        }
        if let Some(d) = self.deferred.get_mut(self.deferred_len) {
            *d = Deferred {
                location,
                tag,
                ticks,
            };
            self.deferred_len += 1;
        }
    }

    /// Counts the deferred intervals, if any: called after an END with arguments is
    /// counted, and at finish. That END is usually past the latency path (an RPC's or a
    /// put's, after its message left), and the thread's buffer is open already. In a
    /// loop of `rpc(..).wait()` the wait deferred in one turn is counted after the next
    /// RPC left, with the RPC's own END.
    #[inline(always)]
    fn catch_up(&mut self) {
        if self.deferred_len > 0 {
            self.count_deferred();
        }
    }

    /// Counts every deferred interval in its row (latest first: a row's figures do not
    /// depend on the order).
    #[cold]
    #[inline(never)]
    fn count_deferred(&mut self) {
        while self.deferred_len > 0 {
            self.deferred_len -= 1;
            let d = self.deferred[self.deferred_len];
            self.record(d.tag, d.location, false, d.ticks, &[], 0);
        }
    }

    /// Counts one event in its row, and its message in the matrix if it is a
    /// communication event. `args` are the END's (or the ATOMIC's); `start_bytes` the
    /// bytes its START named.
    #[inline(always)]
    fn record(
        &mut self,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
        ticks: Ticks,
        args: &[Arg<'_>],
        start_bytes: u64,
    ) {
        let key = location as *const Location<'static> as usize;
        let slot = (key >> 3 ^ tag as usize).wrapping_mul(0x9e37_79b9) >> 8 & (CACHE - 1);
        let c = self.cache[slot];
        let row = if c.location == key && c.tag == tag {
            c.row
        } else {
            self.row_slow(slot, tag, location, atomic, args)
        };
        let stats = &mut self.rows[row as usize];
        // Some sizes are known only at the END (a serialized RPC's).
        let bytes = arg_bytes(args, stats.bytes_at).max(start_bytes);
        stats.count += 1;
        stats.total += ticks;
        stats.min = stats.min.min(ticks);
        stats.max = stats.max.max(ticks);
        stats.bytes += bytes;
        if stats.peer_at != NO_ARG {
            let cell = arg_peer(args, stats.peer_at).and_then(|p| self.sent.get_mut(p as usize));
            if let Some(cell) = cell {
                cell.0 += bytes;
                cell.1 += 1;
            }
        }
    }

    /// The row of (tag, location), found in or added to the map, and cached at `slot`.
    /// A new row learns where `args` hold the bytes and the peer: a system event's
    /// call site always passes the same kinds of arguments.
    #[cold]
    #[inline(never)]
    fn row_slow(
        &mut self,
        slot: usize,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
        args: &[Arg<'_>],
    ) -> u32 {
        let key = location as *const Location<'static> as usize;
        let rows = &mut self.rows;
        let row = *self.index.entry((tag, key)).or_insert_with(|| {
            let (bytes_at, peer_at) = arg_positions(tag, args);
            rows.push(Stats {
                location,
                atomic,
                bytes_at,
                peer_at,
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

    /// The open START of `tag` below the top of the stack (an END out of order: user
    /// events may interleave), removed.
    #[cold]
    #[inline(never)]
    fn take_open(&mut self, tag: u32) -> Option<Open> {
        let i = self.open.iter().rposition(|o| o.tag == tag)?;
        Some(self.open.remove(i))
    }
}

/// The bytes an event moves ([`Event::bytes`](crate::Event::bytes)), in one pass over
/// short argument lists.
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

/// Where the arguments of a (tag, call site) hold the bytes and the peer:
/// ([`bytes_at`](Stats::bytes_at), [`peer_at`](Stats::peer_at)).
fn arg_positions(tag: u32, args: &[Arg<'_>]) -> (u8, u8) {
    let position = |f: fn(&Arg<'_>) -> bool| {
        args.iter()
            .position(f)
            .and_then(|i| u8::try_from(i).ok())
            .filter(|&i| i < SCAN)
    };
    let sized = args.iter().filter(|a| matches!(a, Arg::Bytes(_))).count();
    let bytes_at = match sized {
        _ if crate::tool::is_user_event(tag) => SCAN,
        0 => NO_ARG,
        1 => position(|a| matches!(a, Arg::Bytes(_))).unwrap_or(SCAN),
        _ => SCAN,
    };
    let peer_at = if events::is_communication(tag) {
        position(|a| matches!(a, Arg::Rank(_)))
            .or_else(|| position(|a| matches!(a, Arg::GPtr(_))))
            .unwrap_or(NO_ARG)
    } else {
        NO_ARG
    };
    (bytes_at, peer_at)
}

/// The bytes of `args`, read at `at` ([`arg_positions`]); a list that does not have
/// them there is summed.
#[inline(always)]
fn arg_bytes(args: &[Arg<'_>], at: u8) -> u64 {
    match at {
        NO_ARG => 0,
        at => match args.get(usize::from(at)) {
            Some(&Arg::Bytes(n)) => n as u64,
            _ => bytes_of(args),
        },
    }
}

/// The peer of `args`, read at `at` ([`arg_positions`]), else found as
/// [`Event::peer`](crate::Event::peer) finds it.
#[inline(always)]
fn arg_peer(args: &[Arg<'_>], at: u8) -> Option<u32> {
    match args.get(usize::from(at)) {
        Some(&Arg::Rank(r)) => Some(r),
        Some(&Arg::GPtr(g)) => Some(g.rank),
        _ => peer_of(args),
    }
}

#[cold]
fn peer_of(args: &[Arg<'_>]) -> Option<u32> {
    let event = Event {
        tag: 0,
        ty: EventType::Atomic,
        location: Location::caller(),
        args,
    };
    event.peer()
}

impl Tool for Profiler {
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
        let ended = timer::ticks_now();
        let calibration = timer::calibration().refine();
        let ns = |t: Ticks| (t as f64 * calibration.ns_per_tick) as u64;
        let ranks = self.info.ranks as usize;
        let rank = self.info.rank as usize;
        let mut table: HashMap<(u32, usize), Stats> = HashMap::new();
        let mut sent = vec![(0u64, 0u64); ranks];
        SLOTS.drain(|_, t| {
            t.catch_up();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: &ThreadProfile, tag: u32) -> Stats {
        let rows: Vec<&Stats> = t
            .index
            .iter()
            .filter(|((k, _), _)| *k == tag)
            .map(|(_, &r)| &t.rows[r as usize])
            .collect();
        assert_eq!(rows.len(), 1, "one row of {tag:#x}");
        *rows[0]
    }

    #[test]
    fn an_interval_counts_the_bytes_and_the_message_its_end_names() {
        let mut t = ThreadProfile::new(2);
        let here = Location::caller();
        for (i, len) in [(0u64, 24usize), (1, 40)] {
            let start = [Arg::Rank(1), Arg::Bytes(0), Arg::U64(i)];
            let end = [Arg::Rank(1), Arg::Bytes(len), Arg::U64(i)];
            t.start(100 * i, events::GASP_UPCXX_RPC_SEND, here, &start);
            t.end(100 * i + 30 + i, events::GASP_UPCXX_RPC_SEND, &end);
        }
        let s = row(&t, events::GASP_UPCXX_RPC_SEND);
        assert_eq!((s.count, s.total, s.min, s.max), (2, 61, 30, 31));
        assert_eq!(s.bytes, 64);
        assert_eq!(t.sent, vec![(0, 0), (64, 2)]);
        assert!(t.open.is_empty());
    }

    #[test]
    fn user_intervals_keep_their_start_bytes_and_may_end_out_of_order() {
        let mut t = ThreadProfile::new(1);
        let (a, b) = (crate::USEREVT_START, crate::USEREVT_START + 1);
        t.start(10, a, Location::caller(), &[Arg::Bytes(8), Arg::Int(1)]);
        t.start(20, b, Location::caller(), &[]);
        t.end(50, a, &[]);
        t.end(60, b, &[Arg::Int(0), Arg::Bytes(3), Arg::Bytes(4)]);
        let (ra, rb) = (row(&t, a), row(&t, b));
        assert_eq!((ra.count, ra.total, ra.bytes), (1, 40, 8));
        assert_eq!((rb.count, rb.total, rb.bytes), (1, 40, 7));
        // User events are no communication.
        assert_eq!(t.sent, vec![(0, 0)]);
        assert!(t.open.is_empty());
    }

    #[test]
    fn deferred_intervals_are_counted_when_caught_up_or_when_the_queue_is_full() {
        let mut t = ThreadProfile::new(1);
        let wait = events::GASP_UPCXX_FUTURE_WAIT;
        let n = DEFERRED as u64 + 5;
        for i in 0..n {
            t.defer(wait, Location::caller(), 10 + i);
        }
        // The queue filled once, and was counted to make room.
        assert_eq!(row(&t, wait).count, DEFERRED as u64);
        assert_eq!(t.deferred_len, 5);
        t.catch_up();
        let s = row(&t, wait);
        assert_eq!((s.count, s.min, s.max), (n, 10, 10 + n - 1));
        assert_eq!(s.total, (10..10 + n).sum::<u64>());
        assert_eq!((s.bytes, t.deferred_len), (0, 0));
    }

    #[test]
    fn an_interval_without_arguments_is_counted_at_the_threads_next_end_with_arguments() {
        // On a thread of its own: slots are per thread.
        std::thread::spawn(|| {
            let info = InitInfo {
                language: crate::Language::Upcxx,
                rank: 0,
                ranks: 2,
                local_ranks: 0..2,
            };
            let p = Profiler::new(&info, &[]);
            let (wait, send) = (events::GASP_UPCXX_FUTURE_WAIT, events::GASP_UPCXX_RPC_SEND);
            let send_args = [Arg::Rank(1), Arg::Bytes(16), Arg::Int(0)];
            let count = |tag: u32| {
                p.thread().map(|t| {
                    t.index
                        .iter()
                        .filter(|((k, _), _)| *k == tag)
                        .map(|(_, &r)| t.rows[r as usize].count)
                        .sum::<u64>()
                })
            };
            for _ in 0..2 {
                p.interval(timer::ticks_now(), wait, Location::caller(), &[]);
            }
            assert_eq!(count(wait), Some(0), "deferred");
            p.interval(timer::ticks_now(), send, Location::caller(), &send_args);
            assert_eq!((count(wait), count(send)), (Some(2), Some(1)));
            assert_eq!(p.thread().map(|t| t.deferred_len), Some(0));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_end_without_its_start_is_ignored() {
        let mut t = ThreadProfile::new(1);
        t.start(10, events::GASP_UPC_BARRIER, Location::caller(), &[]);
        t.end(20, events::GASP_UPCXX_FUTURE_WAIT, &[]);
        assert!(t.rows.is_empty());
        assert_eq!(t.open.len(), 1);
    }
}
