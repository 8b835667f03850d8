//! The profiler (`GASP_TOOL=profile`, `upcxx-run --profile[=FILE]`).
//!
//! Per thread, a table keyed by (event tag, call site) accumulates count, total/min/max
//! duration and bytes; START events wait on a small per-thread stack for their END (the
//! innermost open event with the same tag). Communication events (puts, gets, RPC and AM
//! sends) also add their bytes and one message to the thread's row of the rank×rank
//! matrix. At the end the threads' tables are summed into this rank's part of the
//! [`Profile`], and the launcher sums the ranks' parts. A thread's table is
//! `table.rs`; this file is the tool around it and the merge of the ranks' parts.
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

mod table;

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use super::slots::{fence, Entered, SlotCell, Slots};
use super::{Destination, Kind};
use crate::formats::{CommMatrix, Profile, ProfileRow, PROFILE_TOOL};
use crate::timer::{self, Ticks};
use crate::tool::{Arg, Event, EventType, InitInfo, Tool};
use table::{Stats, ThreadProfile};

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
    /// The profiler of the rank `info` describes (the tool's `gasp_init`, GASP §3.2);
    /// `args` is the program's command line, kept for the profile.
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
        // A part's matrices are read as they are: cells past either one's shape (a
        // part written by another job size, or edited) count nothing.
        for (src, row) in part.matrix.bytes.iter().enumerate().take(n) {
            for (dst, b) in row.iter().enumerate().take(n) {
                job.matrix.bytes[src][dst] += b;
            }
        }
        for (src, row) in part.matrix.messages.iter().enumerate().take(n) {
            for (dst, m) in row.iter().enumerate().take(n) {
                job.matrix.messages[src][dst] += m;
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
    let mut summary = crate::report::Summary::from_profile(profile);
    // Call sites' lines, from files readable where the launcher runs.
    summary.read_sources(&mut crate::report::SourceLines::new([]));
    crate::report::top_costs(&summary, 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;

    /// A part whose matrices have other shapes than the job's (read from a file that
    /// parses but does not match) is merged cell by cell where they exist, without
    /// failing the merge of the other parts.
    #[test]
    fn a_part_of_another_shape_is_merged_where_it_fits() {
        let part = |bytes: Vec<Vec<u64>>, messages: Vec<Vec<u64>>| Profile {
            tool: PROFILE_TOOL.to_owned(),
            version: 1,
            command: Vec::new(),
            ranks: 2,
            rank_time_ns: vec![1, 1],
            events: Vec::new(),
            matrix: CommMatrix { bytes, messages },
        };
        let good = part(vec![vec![1, 2], vec![3, 4]], vec![vec![1, 1], vec![1, 1]]);
        let short = part(vec![vec![10, 20], vec![30, 40]], vec![vec![5]]);
        let job = merge(2, vec![good, short]);
        assert_eq!(job.matrix.bytes, [[11, 22], [33, 44]]);
        assert_eq!(job.matrix.messages, [[6, 1], [1, 1]]);
    }

    #[test]
    fn an_interval_without_arguments_is_counted_at_the_threads_next_end_with_arguments() {
        // On a thread of its own: slots are per thread.
        std::thread::spawn(|| {
            let info = InitInfo {
                language: crate::Language::Upcxx,
                rank: 0,
                ranks: 2,
                local_ranks: (0..2).collect(),
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
}
