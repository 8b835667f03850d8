//! Reducing a profile or a trace to a [`Summary`] (the rules are in the parent module's
//! docs).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use super::sites::{Site, SiteTable};
use super::{Input, Interval, LongOp, OpCost, Summary, Timeline, LONGEST_PER_RANK};
use crate::formats::{CommMatrix, Profile, Trace, TraceEvent};

impl Summary {
    /// The summary of a profile: rows summed over call sites, the profile's matrix.
    ///
    /// The rank count is the largest of the declared count and every rank index the file
    /// mentions, so a file with a stale `ranks` still has a place for each row.
    pub fn from_profile(p: &Profile) -> Summary {
        let ranks = profile_ranks(p);
        let mut ops: BTreeMap<String, Vec<OpCost>> = BTreeMap::new();
        let mut sites = SiteTable::default();
        for row in &p.events {
            let cost = &mut ops
                .entry(row.name.clone())
                .or_insert_with(|| vec![OpCost::default(); ranks])[row.rank as usize];
            cost.count = cost.count.saturating_add(row.count);
            cost.total_ns = cost.total_ns.saturating_add(row.total_ns);
            if !row.file.is_empty() {
                let site = Site {
                    file: row.file.clone(),
                    line: row.line,
                    column: row.column,
                };
                let rank = row.rank as usize;
                sites.add(rank, &row.name, &site, row.count, row.total_ns, row.bytes);
            }
        }
        let mut rank_time_ns = p.rank_time_ns.clone();
        rank_time_ns.resize(ranks, 0);
        Summary {
            input: Input::Profile,
            command: p.command.clone(),
            ranks,
            rank_time_ns,
            ops,
            matrix: CommMatrix {
                bytes: square(&p.matrix.bytes, ranks),
                messages: square(&p.matrix.messages, ranks),
            },
            timeline: None,
            dropped: 0,
            sites: sites.into_sorted(),
        }
    }

    /// The summary of a trace: costs, matrix and timeline from its events.
    pub fn from_trace(t: &Trace) -> Summary {
        let events = &t.trace_events;
        let ranks = trace_ranks(t);
        // Stable: events with equal timestamps keep their order in the file, so a `b`
        // written before its zero-length `e` still opens first.
        let mut order: Vec<&TraceEvent> = events.iter().collect();
        order.sort_by(|a, b| a.ts.total_cmp(&b.ts));

        // An initiation the tracer reports both as `b` and as `X`, on one thread at one
        // time: the `X` counts it.
        let initiations: HashSet<(u32, u32, &str, u64)> = events
            .iter()
            .filter(|e| e.ph == "X")
            .map(|e| (e.pid, e.tid, e.name.as_str(), e.ts.to_bits()))
            .collect();
        let mut acc = Accumulator::new(ranks);
        let mut open = OpenAsync::new();
        for e in order {
            let rank = e.pid as usize;
            let ts = us_to_ns(e.ts);
            match e.ph.as_str() {
                "X" => {
                    let end = ts.saturating_add(e.dur.map_or(0, us_to_ns));
                    let site = Site::from_args(&e.args);
                    acc.operation(rank, &e.name, end - ts, site.as_ref(), &e.args);
                    acc.interval(rank, &e.name, ts, end, site);
                    acc.message(rank, &e.name, &e.args, false);
                }
                "b" => {
                    let counted =
                        initiations.contains(&(e.pid, e.tid, e.name.as_str(), e.ts.to_bits()));
                    let site = Site::from_args(&e.args);
                    if !counted {
                        acc.operation(rank, &e.name, 0, site.as_ref(), &e.args);
                        acc.message(rank, &e.name, &e.args, false);
                    }
                    acc.end_ns = acc.end_ns.max(ts);
                    let key = (e.pid, e.cat.as_str(), e.id.as_deref().unwrap_or(""));
                    open.entry(key).or_default().push(Begun {
                        name: &e.name,
                        start: ts,
                        counted,
                        site,
                    });
                }
                "e" => {
                    let key = (e.pid, e.cat.as_str(), e.id.as_deref().unwrap_or(""));
                    if let Some(b) = open.get_mut(&key).and_then(Vec::pop) {
                        if !b.counted {
                            let ns = ts.saturating_sub(b.start);
                            acc.add_time(rank, b.name, ns, b.site.as_ref());
                        }
                        acc.interval(rank, b.name, b.start, ts, b.site);
                    }
                }
                "i" => {
                    let site = Site::from_args(&e.args);
                    acc.operation(rank, &e.name, 0, site.as_ref(), &e.args);
                    acc.message(rank, &e.name, &e.args, true);
                    acc.end_ns = acc.end_ns.max(ts);
                }
                // Flows repeat an operation counted at its X or b; metadata is no
                // operation.
                _ => {}
            }
        }
        // Enclosing intervals first, so that drawing in order leaves nested ones visible.
        for lane in &mut acc.timeline.lanes {
            lane.sort_by_key(|i| (i.start_ns, Reverse(i.end_ns)));
        }
        acc.timeline.end_ns = acc.end_ns;
        acc.timeline.longest = acc.longest.into_iter().map(longest).collect();
        Summary {
            input: Input::Trace,
            command: t.other_data.command.clone(),
            ranks,
            rank_time_ns: vec![acc.end_ns; ranks],
            ops: acc.ops,
            matrix: acc.matrix,
            timeline: Some(acc.timeline),
            dropped: t.other_data.dropped,
            sites: acc.sites.into_sorted(),
        }
    }
}

/// The rank count of a profile: the largest of the declared count and every rank index
/// the file mentions, so a file with a stale `ranks` still has a place for each row.
pub(super) fn profile_ranks(p: &Profile) -> usize {
    [
        p.ranks as usize,
        p.rank_time_ns.len(),
        p.matrix.bytes.len(),
        p.matrix.messages.len(),
    ]
    .into_iter()
    .chain(p.events.iter().map(|r| r.rank as usize + 1))
    .chain(p.matrix.bytes.iter().map(Vec::len))
    .chain(p.matrix.messages.iter().map(Vec::len))
    .max()
    .unwrap_or(0)
}

/// The rank count of a trace: the declared count, every `pid` and every `peer`.
pub(super) fn trace_ranks(t: &Trace) -> usize {
    t.trace_events
        .iter()
        .flat_map(|e| {
            [
                Some(e.pid as usize + 1),
                arg_u64(&e.args, "peer").map(|p| (p as usize).saturating_add(1)),
            ]
        })
        .flatten()
        .chain([t.other_data.ranks as usize])
        .max()
        .unwrap_or(0)
}

/// Async operations begun and not yet ended, by (pid, cat, id), innermost last.
type OpenAsync<'a> = HashMap<(u32, &'a str, &'a str), Vec<Begun<'a>>>;

/// An async operation's `b`.
struct Begun<'a> {
    name: &'a str,
    start: u64,
    /// Whether an `X` of its initiation already counted it.
    counted: bool,
    site: Option<Site>,
}

/// A rank's [`LONGEST_PER_RANK`] longest operations, in order of start (ties: the
/// earlier start is kept).
fn longest(mut ops: Vec<LongOp>) -> Vec<LongOp> {
    keep_longest(&mut ops);
    ops.sort_by_key(|o| (o.start_ns, Reverse(o.end_ns)));
    ops
}

/// Cuts `ops` down to its [`LONGEST_PER_RANK`] longest, in no particular order.
fn keep_longest(ops: &mut Vec<LongOp>) {
    if ops.len() > LONGEST_PER_RANK {
        let key = |o: &LongOp| (Reverse(o.end_ns.saturating_sub(o.start_ns)), o.start_ns);
        ops.select_nth_unstable_by_key(LONGEST_PER_RANK - 1, key);
        ops.truncate(LONGEST_PER_RANK);
    }
}

/// The summary of a trace under construction.
struct Accumulator {
    ranks: usize,
    ops: BTreeMap<String, Vec<OpCost>>,
    matrix: CommMatrix,
    timeline: Timeline,
    kind_index: HashMap<String, usize>,
    end_ns: u64,
    sites: SiteTable,
    /// Per rank, every interval as a candidate for [`Timeline::longest`].
    longest: Vec<Vec<LongOp>>,
}

impl Accumulator {
    fn new(ranks: usize) -> Self {
        Accumulator {
            ranks,
            ops: BTreeMap::new(),
            matrix: CommMatrix {
                bytes: vec![vec![0; ranks]; ranks],
                messages: vec![vec![0; ranks]; ranks],
            },
            timeline: Timeline {
                lanes: vec![Vec::new(); ranks],
                ..Timeline::default()
            },
            kind_index: HashMap::new(),
            end_ns: 0,
            sites: SiteTable::default(),
            longest: vec![Vec::new(); ranks],
        }
    }

    fn cost(&mut self, rank: usize, name: &str) -> &mut OpCost {
        if !self.ops.contains_key(name) {
            self.ops
                .insert(name.to_owned(), vec![OpCost::default(); self.ranks]);
        }
        &mut self.ops.get_mut(name).expect("inserted above")[rank]
    }

    fn operation(
        &mut self,
        rank: usize,
        name: &str,
        ns: u64,
        site: Option<&Site>,
        args: &Map<String, Value>,
    ) {
        let cost = self.cost(rank, name);
        cost.count = cost.count.saturating_add(1);
        cost.total_ns = cost.total_ns.saturating_add(ns);
        if let Some(site) = site {
            let bytes = arg_u64(args, "bytes").unwrap_or(0);
            self.sites.add(rank, name, site, 1, ns, bytes);
        }
    }

    fn add_time(&mut self, rank: usize, name: &str, ns: u64, site: Option<&Site>) {
        let cost = self.cost(rank, name);
        cost.total_ns = cost.total_ns.saturating_add(ns);
        if let Some(site) = site {
            self.sites.add(rank, name, site, 0, ns, 0);
        }
    }

    fn interval(
        &mut self,
        rank: usize,
        name: &str,
        start_ns: u64,
        end_ns: u64,
        site: Option<Site>,
    ) {
        let kind = match self.kind_index.get(name) {
            Some(&k) => k,
            None => {
                let k = self.timeline.kinds.len();
                self.timeline.kinds.push(name.to_owned());
                self.kind_index.insert(name.to_owned(), k);
                k
            }
        };
        self.timeline.lanes[rank].push(Interval {
            start_ns,
            end_ns,
            kind,
        });
        self.longest[rank].push(LongOp {
            start_ns,
            end_ns,
            kind,
            site,
            source: None,
        });
        // Bounded memory however long the trace: cut back whenever it grows past 4×.
        if self.longest[rank].len() >= 4 * LONGEST_PER_RANK {
            keep_longest(&mut self.longest[rank]);
        }
        self.end_ns = self.end_ns.max(end_ns);
    }

    /// Counts the operation `name` in the matrix if its arguments name a peer (and,
    /// when `needs_bytes`, a byte count), unless it is a GASP event other than one
    /// that initiates communication, as the profile's matrix counts them: the run of an
    /// RPC or AM handler names its sender as the peer, an allocation a pointer of this
    /// rank's. (Events of other names, from other tracers, count by their arguments.)
    fn message(&mut self, rank: usize, name: &str, args: &Map<String, Value>, needs_bytes: bool) {
        if crate::events::by_name(name).is_some_and(|e| !crate::events::is_communication(e.tag)) {
            return;
        }
        let Some(peer) = arg_u64(args, "peer") else {
            return;
        };
        let bytes = arg_u64(args, "bytes");
        if needs_bytes && bytes.is_none() {
            return;
        }
        let peer = peer as usize;
        let messages = &mut self.matrix.messages[rank][peer];
        *messages = messages.saturating_add(1);
        let total = &mut self.matrix.bytes[rank][peer];
        *total = total.saturating_add(bytes.unwrap_or(0));
    }
}

/// A non-negative integer argument, written as a JSON number or a decimal string.
fn arg_u64(args: &Map<String, Value>, key: &str) -> Option<u64> {
    match args.get(key)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Trace microseconds to nanoseconds; negative and non-finite times become 0.
fn us_to_ns(us: f64) -> u64 {
    // `as` saturates, and maps NaN to 0.
    (us * 1000.0).round() as u64
}

/// `m` padded (or cut) to `n`×`n`.
fn square(m: &[Vec<u64>], n: usize) -> Vec<Vec<u64>> {
    (0..n)
        .map(|r| {
            let mut row = m.get(r).cloned().unwrap_or_default();
            row.resize(n, 0);
            row
        })
        .collect()
}
