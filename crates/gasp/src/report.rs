//! `upcxx-run report`: what a profile or a trace says about a run.
//!
//! The two files the tools write ([`crate::formats`]) answer the same three questions in
//! different detail, so the report first reduces either of them to one [`Summary`] and
//! draws everything from that:
//!
//! * **where the time went**: per rank and per operation kind (the event's name), the
//!   number of operations and their total duration ([`Summary::ops`]);
//! * **who talked to whom**: the rank×rank communication matrix, bytes and messages,
//!   row = the rank that initiated the operation ([`Summary::matrix`]);
//! * **when** (trace only): per rank, the intervals the operations occupied
//!   ([`Summary::timeline`]).
//! * **which line of the program**: per operation kind and call site (GASP §3.2
//!   `filename`, `linenum`, `colnum`), the same sums ([`Summary::sites`]), with the
//!   line's text once [`Summary::read_sources`] found the file; for a trace, each rank's
//!   longest operations with their sites ([`Timeline::longest`]).
//!
//! # From a profile
//!
//! Rows are summed over call sites into (rank, name); the matrix is the profile's own.
//! A rank's run time is the profile's `rank_time_ns`.
//!
//! # From a trace
//!
//! Events are taken in time order (`ts`, ties in file order), by phase:
//!
//! * `X` (complete): one operation of `dur`, on rank `pid`;
//! * `b` … `e` (async): the extent of a non-blocking operation, from initiation to
//!   completion, drawn in the timeline. The `e` closes the latest still-open `b` with the
//!   same `(pid, cat, id)` (so nested pairs sharing an id close innermost first); an `e`
//!   that closes nothing is ignored. The operation itself is counted once: by the `X` of
//!   its initiating call where the trace has one (an `X` with the `b`'s pid, tid, name
//!   and `ts`, as the built-in tracer writes), which makes its time the time the rank
//!   spent in the call, as in a profile; otherwise by the `b`, with the time `e.ts −
//!   b.ts` (zero, and no interval, if it never ends);
//! * `i` (instant, the GASP atomic events): one operation of zero time;
//! * `s`, `f` (flows) and `M` (metadata): not operations, ignored.
//!
//! The matrix counts each operation once, where it is counted above: an `X`, or a `b`
//! without an `X`, whose `args` name a `peer` adds one message from `pid` to `peer`, plus
//! `args.bytes` bytes if present. An `i` event counts only if it carries both `peer` and
//! `bytes`. `e`, `s` and `f` never count, as they repeat an operation counted elsewhere.
//! If one transfer is reported at two layers (a UPC++ call and the GASNet-EX call under
//! it, both with `peer`), both count; the profile's matrix, kept by the tools themselves,
//! has no such overlap. All ranks share one clock, so every rank's run time is the
//! trace's span (the end of its last event).
//!
//! Operations nest (a UPC++ call around the GASNet-EX calls it makes) and non-blocking
//! ones overlap other work, so a rank's summed operation time can exceed its run time;
//! "% of run" is a share of the job's total rank-time, not of a partition of it.
//!
//! # Output
//!
//! [`top_costs`] is a plain-text table for the terminal (operation kinds, then call
//! sites with their source lines), [`render_html`] one self-contained HTML page (inline
//! CSS, inline SVG charts drawn with `plotters`, no external references) that opens from
//! disk anywhere: the kinds table links each kind to the table of its call sites.
//!
//! ```
//! use gasp::formats::{CommMatrix, Profile, ProfileRow, PROFILE_TOOL};
//! use gasp::report::{render_html, top_costs, Summary};
//!
//! let row = |rank, name: &str, count, total_ns| ProfileRow {
//!     rank,
//!     name: name.into(),
//!     kind: "interval".into(),
//!     count,
//!     total_ns,
//!     ..Default::default()
//! };
//! let profile = Profile {
//!     tool: PROFILE_TOOL.into(),
//!     version: 1,
//!     command: vec!["./stencil".into()],
//!     ranks: 2,
//!     rank_time_ns: vec![1_000_000, 1_000_000],
//!     events: vec![row(0, "GASP_UPC_PUT", 10, 300_000), row(1, "GASP_UPC_PUT", 10, 100_000)],
//!     matrix: CommMatrix {
//!         bytes: vec![vec![0, 80], vec![80, 0]],
//!         messages: vec![vec![0, 10], vec![10, 0]],
//!     },
//! };
//! let summary = Summary::from_profile(&profile);
//! assert_eq!(summary.ops["GASP_UPC_PUT"][0].total_ns, 300_000);
//! assert!(top_costs(&summary, 5).contains("GASP_UPC_PUT"));
//! assert!(render_html(&summary).starts_with("<!DOCTYPE html>"));
//! ```

mod charts;
#[cfg(test)]
mod fuzz;
mod html;
mod sites;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::formats::{CommMatrix, Profile, Trace, PROFILE_TOOL, TRACE_TOOL};

pub use html::render_html;
pub use sites::{Site, SiteCost, SourceLines, MAX_SOURCE_BYTES};

/// Per rank, how many of its longest operations a trace's summary keeps
/// ([`Timeline::longest`]).
pub const LONGEST_PER_RANK: usize = 10;

/// A file [`load`] recognized.
#[derive(Clone, Debug, PartialEq)]
pub enum Loaded {
    /// A job profile (`"tool": "upcxx-profile"`).
    Profile(Profile),
    /// A job trace (`"otherData": {"tool": "upcxx-trace"}`).
    Trace(Trace),
}

impl Loaded {
    /// The summary of this input ([`Summary::from_profile`] or [`Summary::from_trace`]).
    pub fn summary(&self) -> Summary {
        match self {
            Loaded::Profile(p) => Summary::from_profile(p),
            Loaded::Trace(t) => Summary::from_trace(t),
        }
    }
}

/// The two fields that tell the files apart; everything else is skipped unparsed.
#[derive(Deserialize)]
struct Probe {
    tool: Option<String>,
    #[serde(rename = "otherData")]
    other_data: Option<ProbeInfo>,
}

#[derive(Deserialize)]
struct ProbeInfo {
    tool: Option<String>,
}

/// What [`load`] accepts, for its error messages.
const EXPECTED: &str = "expected a profile (\"tool\": \"upcxx-profile\") or a trace \
                        (\"otherData\": {\"tool\": \"upcxx-trace\"})";

/// The most ranks a report shows: its summary holds ranks×ranks matrices, so a file
/// that names a larger rank (a corrupt one, most likely) is refused rather than made to
/// allocate them.
pub const MAX_RANKS: usize = 4096;

/// Reads a profile or a trace, telling them apart by their `tool` field.
///
/// Errors name the file and say what was expected.
pub fn load(path: impl AsRef<Path>) -> Result<Loaded, String> {
    let path = path.as_ref();
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse(path, &data)
}

/// [`load`] of a file's contents, `path` naming it in errors.
pub fn parse(path: &Path, data: &[u8]) -> Result<Loaded, String> {
    let loaded = parse_any(path, data)?;
    let ranks = match &loaded {
        Loaded::Profile(p) => summary::profile_ranks(p),
        Loaded::Trace(t) => summary::trace_ranks(t),
    };
    if ranks > MAX_RANKS {
        return Err(format!(
            "{}: names rank {}, more than the {MAX_RANKS} ranks a report shows",
            path.display(),
            ranks - 1
        ));
    }
    Ok(loaded)
}

fn parse_any(path: &Path, data: &[u8]) -> Result<Loaded, String> {
    let shown = path.display();
    let probe: Probe = serde_json::from_slice(data)
        .map_err(|e| format!("{shown}: not a JSON object ({e}); {EXPECTED}"))?;
    let trace_tool = probe.other_data.and_then(|o| o.tool);
    if probe.tool.as_deref() == Some(PROFILE_TOOL) {
        serde_json::from_slice(data)
            .map(Loaded::Profile)
            .map_err(|e| format!("{shown}: malformed {PROFILE_TOOL} file: {e}"))
    } else if trace_tool.as_deref() == Some(TRACE_TOOL) {
        serde_json::from_slice(data)
            .map(Loaded::Trace)
            .map_err(|e| format!("{shown}: malformed {TRACE_TOOL} file: {e}"))
    } else {
        let found = match (probe.tool, trace_tool) {
            (Some(t), _) | (None, Some(t)) => format!("written by \"{t}\""),
            (None, None) => "has no \"tool\" field".to_owned(),
        };
        Err(format!("{shown}: {found}; {EXPECTED}"))
    }
}

/// Which kind of file a [`Summary`] was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A [`Profile`]: per-call-site statistics, no timeline.
    Profile,
    /// A [`Trace`]: every event, with the timeline.
    Trace,
}

impl Input {
    /// `"profile"` or `"trace"`, as the report names its input.
    pub fn name(self) -> &'static str {
        match self {
            Input::Profile => "profile",
            Input::Trace => "trace",
        }
    }
}

/// Number and total duration of one operation kind on one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCost {
    /// The number of operations.
    pub count: u64,
    /// Their summed duration, nanoseconds.
    pub total_ns: u64,
}

/// A run reduced to what the report shows (see the module docs for how each input maps
/// onto it).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The kind of file it was made from.
    pub input: Input,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Number of ranks; every per-rank vector below has this length.
    pub ranks: usize,
    /// Per rank, the run time in nanoseconds.
    pub rank_time_ns: Vec<u64>,
    /// Per operation kind (event name), per rank.
    pub ops: BTreeMap<String, Vec<OpCost>>,
    /// `ranks`×`ranks`, row = initiating rank.
    pub matrix: CommMatrix,
    /// Present for a trace.
    pub timeline: Option<Timeline>,
    /// Events the tracer dropped (its buffers were full); 0 for a profile.
    pub dropped: u64,
    /// Every (operation kind, call site), costliest first ([`SiteCost`]).
    pub sites: Vec<SiteCost>,
}

/// Per rank, the intervals its operations occupied (from a trace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Operation kinds; [`Interval::kind`] indexes this.
    pub kinds: Vec<String>,
    /// One lane per rank, intervals in order of start, longest first among equal starts.
    pub lanes: Vec<Vec<Interval>>,
    /// End of the last event, nanoseconds since the trace epoch.
    pub end_ns: u64,
    /// Per rank, its [`LONGEST_PER_RANK`] longest operations, in order of start.
    pub longest: Vec<Vec<LongOp>>,
}

/// One of a rank's longest operations, with where the program called it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LongOp {
    /// Its extent, nanoseconds since the trace epoch.
    pub start_ns: u64,
    /// Where it ended.
    pub end_ns: u64,
    /// The operation kind, an index into [`Timeline::kinds`].
    pub kind: usize,
    /// The call site, where the trace names one.
    pub site: Option<Site>,
    /// The text of the site's line (see [`Summary::read_sources`]).
    pub source: Option<String>,
}

/// One operation's extent on its rank's lane, nanoseconds since the trace epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Where the operation started.
    pub start_ns: u64,
    /// Where it ended.
    pub end_ns: u64,
    /// The operation kind, an index into [`Timeline::kinds`].
    pub kind: usize,
}

impl Summary {
    /// The job's total rank-time: the sum of the ranks' run times.
    pub fn run_ns(&self) -> u64 {
        saturating_sum(self.rank_time_ns.iter().copied())
    }

    /// Fills in the source text of every call site whose file `lines` can read.
    pub fn read_sources(&mut self, lines: &mut SourceLines) {
        for s in &mut self.sites {
            s.source = lines.line(&s.site);
        }
        for op in self
            .timeline
            .iter_mut()
            .flat_map(|t| &mut t.longest)
            .flatten()
        {
            op.source = op.site.as_ref().and_then(|site| lines.line(site));
        }
    }

    /// The call sites of one operation kind, costliest first.
    pub fn sites_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a SiteCost> + 'a {
        self.sites.iter().filter(move |s| s.name == name)
    }

    /// Total bytes and messages in the matrix.
    pub fn comm_totals(&self) -> (u64, u64) {
        let sum = |m: &Vec<Vec<u64>>| saturating_sum(m.iter().flatten().copied());
        (sum(&self.matrix.bytes), sum(&self.matrix.messages))
    }
}

/// One operation kind over the whole job: a line of the top-costs table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostRow {
    /// The operation kind (the event's name).
    pub name: String,
    /// Ranks on which the kind occurred, ascending.
    pub ranks: Vec<usize>,
    /// The number of operations, summed over the ranks.
    pub count: u64,
    /// Their summed duration, nanoseconds.
    pub total_ns: u64,
}

impl CostRow {
    /// Mean duration of one operation.
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// Every operation kind, costliest first: by total time, then by count, then by name.
pub fn cost_rows(summary: &Summary) -> Vec<CostRow> {
    let mut rows: Vec<CostRow> = summary
        .ops
        .iter()
        .map(|(name, per_rank)| CostRow {
            name: name.clone(),
            ranks: (0..per_rank.len())
                .filter(|&r| per_rank[r].count > 0)
                .collect(),
            count: saturating_sum(per_rank.iter().map(|c| c.count)),
            total_ns: saturating_sum(per_rank.iter().map(|c| c.total_ns)),
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.total_ns, b.count)
            .cmp(&(a.total_ns, a.count))
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// `part` as a percentage of `whole`, or `-` when there is no whole.
/// The sum of `values`, or `u64::MAX` where it would overflow: the counts and times of
/// a file are summed as read, and a file may hold anything.
pub(crate) fn saturating_sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A readable plain-text table of the `n` costliest operation kinds: kind, the ranks it
/// occurred on, count, total time, mean time, and total as a share of the job's
/// rank-time; then the `n` costliest call sites (site, kind, ranks, count, total, mean,
/// bytes), each followed by its line's text (`    | ...`) where it is known.
pub fn top_costs(summary: &Summary, n: usize) -> String {
    let rows = cost_rows(summary);
    let run = summary.run_ns();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} of `{}`: {} ranks, run time {} per rank (max), {} operation kinds",
        summary.input.name(),
        summary.command.join(" "),
        summary.ranks,
        fmt_ns(summary.rank_time_ns.iter().copied().max().unwrap_or(0)),
        rows.len(),
    );
    let (bytes, messages) = summary.comm_totals();
    let _ = writeln!(
        out,
        "communication: {} in {messages} messages",
        fmt_bytes(bytes)
    );
    if summary.dropped > 0 {
        let _ = writeln!(
            out,
            "warning: the tracer dropped {} events (buffers full); totals are low",
            summary.dropped
        );
    }
    let _ = writeln!(out);
    if rows.is_empty() {
        let _ = writeln!(out, "no operations recorded");
        return out;
    }
    let header = ["kind", "ranks", "count", "total", "mean", "% of run"].map(String::from);
    let cells: Vec<[String; 6]> = rows
        .iter()
        .take(n)
        .map(|r| {
            [
                r.name.clone(),
                rank_list(&r.ranks),
                r.count.to_string(),
                fmt_ns(r.total_ns),
                fmt_ns(r.mean_ns()),
                percent(r.total_ns, run),
            ]
        })
        .collect();
    let _ = writeln!(
        out,
        "top {} of {} operation kinds by total time",
        cells.len(),
        rows.len()
    );
    text_table(&mut out, &header, &cells, 2, &[]);

    let sites: Vec<&SiteCost> = summary.sites.iter().take(n).collect();
    if sites.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\ntop {} of {} call sites by total time",
        sites.len(),
        summary.sites.len()
    );
    let header = [
        "call site",
        "kind",
        "ranks",
        "count",
        "total",
        "mean",
        "bytes",
    ]
    .map(String::from);
    let cells: Vec<[String; 7]> = sites
        .iter()
        .map(|s| {
            [
                s.site.to_string(),
                s.name.clone(),
                rank_list(&s.ranks),
                s.count.to_string(),
                fmt_ns(s.total_ns),
                fmt_ns(s.mean_ns()),
                fmt_bytes(s.bytes),
            ]
        })
        .collect();
    let sources: Vec<Option<&str>> = sites.iter().map(|s| s.source.as_deref()).collect();
    text_table(&mut out, &header, &cells, 3, &sources);
    out
}

/// Writes `header` and `cells` in aligned columns, the first `left` columns
/// left-aligned (names), the others right-aligned (numbers). A row's entry in `below`,
/// if any, is printed under it, indented (a call site's source line).
fn text_table<const N: usize>(
    out: &mut String,
    header: &[String; N],
    cells: &[[String; N]],
    left: usize,
    below: &[Option<&str>],
) {
    let mut width = header.clone().map(|h| h.chars().count());
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let below = std::iter::once(None).chain(below.iter().copied().chain(std::iter::repeat(None)));
    for (row, under) in std::iter::once(header).chain(cells).zip(below) {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(width).enumerate() {
            if i < left {
                let _ = write!(line, "{c:<w$}  ");
            } else {
                let _ = write!(line, "{c:>w$}  ");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
        if let Some(text) = under {
            let _ = writeln!(out, "    | {text}");
        }
    }
}

/// Ranks as compact ranges: `0-3,6,8-9`.
pub(crate) fn rank_list(ranks: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            let _ = write!(out, "{}", ranks[i]);
        } else {
            let _ = write!(out, "{}-{}", ranks[i], ranks[j]);
        }
        i = j + 1;
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

/// A duration with three significant digits and a unit: `812 ns`, `12.5 µs`, `1.20 s`.
pub(crate) fn fmt_ns(ns: u64) -> String {
    let (scale, unit) = time_unit(ns);
    if scale == 1.0 {
        format!("{ns} ns")
    } else {
        format!("{} {unit}", three_digits(ns as f64 / scale))
    }
}

/// The unit in which `ns` reads best, as (nanoseconds per unit, name).
pub(crate) fn time_unit(ns: u64) -> (f64, &'static str) {
    match ns {
        0..=999 => (1.0, "ns"),
        1_000..=999_999 => (1e3, "µs"),
        1_000_000..=999_999_999 => (1e6, "ms"),
        _ => (1e9, "s"),
    }
}

/// A byte count in binary units: `64 B`, `1.50 KiB`, `12.0 MiB`.
pub(crate) fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{} {}", three_digits(value), UNITS[unit])
    }
}

fn three_digits(v: f64) -> String {
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
