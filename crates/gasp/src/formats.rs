//! The files the built-in tools write: the job profile and the job trace.
//!
//! These types are the contract between the tools (which write them, one part per rank,
//! merged by the launcher) and `upcxx-run report` (which reads them). Both files are JSON.
//!
//! # Profile (`upcxx-profile.json`)
//!
//! One [`Profile`]: per rank, per event kind and per source location, the number of
//! events, their total/min/max duration and the bytes they moved, plus the rank×rank
//! communication matrix. Times are nanoseconds.
//!
//! # Trace (`upcxx-trace.json`)
//!
//! The Chrome trace-event format (the "JSON Object Format" that Perfetto UI and
//! `chrome://tracing` open), as a [`Trace`]:
//!
//! * `pid` is the rank, `tid` a small per-rank thread number (0 = the thread that
//!   initialized the runtime); metadata events (`ph: "M"`) name them `rank R` / `thread T`.
//! * Blocking operations are complete events (`ph: "X"`, `ts` + `dur`).
//! * Non-blocking operations are async events (`ph: "b"` at initiation, `ph: "e"` at
//!   completion, same `cat` and `id`), so overlapping operations do not break nesting.
//! * Atomic events (`GASP_ATOMIC`) are instant events (`ph: "i"`, `s: "t"`).
//! * A message and its remote effect are joined by a flow (`ph: "s"` on the sender,
//!   `ph: "f"`, `bp: "e"` on the target, same `id`).
//! * `ts` and `dur` are microseconds (floating point) since the earliest event of the
//!   job; all ranks share one clock (`CLOCK_MONOTONIC` of the host), so the ranks'
//!   timelines are aligned.
//! * Every event's `args` hold `file`, `line`, `column` of the user's call site and, where
//!   the event has them, `peer` (the other rank) and `bytes`, plus the event's GASP
//!   arguments by name.

use serde::{Deserialize, Serialize};

/// The `tool` field of a profile file.
pub const PROFILE_TOOL: &str = "upcxx-profile";

/// The `tool` field (in `otherData`) of a trace file.
pub const TRACE_TOOL: &str = "upcxx-trace";

/// A job's profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`PROFILE_TOOL`].
    pub tool: String,
    /// Format version, 1.
    pub version: u32,
    /// The program and its arguments, as rank 0 saw them.
    pub command: Vec<String>,
    /// Number of ranks in the job.
    pub ranks: u32,
    /// Per rank: nanoseconds from tool initialization to the end of the run.
    pub rank_time_ns: Vec<u64>,
    /// One row per (rank, event, call site); ranks without data have no rows.
    pub events: Vec<ProfileRow>,
    /// `bytes[src][dst]` and `messages[src][dst]`: operations that rank `src` initiated
    /// towards rank `dst` (puts, gets, RPCs, AMs) and the payload bytes they moved, in
    /// either direction (a get of 8 bytes from `dst` counts 8 bytes at `[src][dst]`).
    pub matrix: CommMatrix,
}

/// Statistics of one event kind at one call site on one rank.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileRow {
    /// The rank the events occurred on.
    pub rank: u32,
    /// The event's symbolic name, e.g. `GASP_UPC_NB_PUT_INIT`, or a user event's name.
    pub name: String,
    /// The event's tag (GASP §3.5; a user event's as `create_event` returned it).
    pub tag: u32,
    /// `"interval"` (START/END pairs) or `"atomic"`.
    pub kind: String,
    /// The source file of the user's call site (GASP §3.2 `filename`).
    pub file: String,
    /// The line of the call site (GASP §3.2 `linenum`).
    pub line: u32,
    /// The column of the call site (GASP §3.2 `colnum`).
    pub column: u32,
    /// The number of events (START/END pairs, or ATOMIC events).
    pub count: u64,
    /// Sum of END − START, nanoseconds (0 for atomic events).
    pub total_ns: u64,
    /// Minimum of END − START, nanoseconds (0 for atomic events).
    pub min_ns: u64,
    /// Maximum of END − START, nanoseconds (0 for atomic events).
    pub max_ns: u64,
    /// Bytes moved by these events (0 where the event moves none).
    pub bytes: u64,
}

/// The rank×rank communication matrix of a profile (row = initiating rank).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommMatrix {
    /// `bytes[src][dst]`: payload bytes moved by the operations `src` initiated towards
    /// `dst`.
    pub bytes: Vec<Vec<u64>>,
    /// `messages[src][dst]`: the number of operations `src` initiated towards `dst`.
    pub messages: Vec<Vec<u64>>,
}

/// A job's trace, in the Chrome trace-event JSON object format.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The events of all ranks, with metadata events (`M`) naming the ranks and threads.
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<TraceEvent>,
    /// Always `"ns"`.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: String,
    /// The job: tool, command, ranks, dropped events, epoch.
    #[serde(rename = "otherData")]
    pub other_data: TraceInfo,
}

/// Job-level facts stored in a trace's `otherData`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Always [`TRACE_TOOL`].
    pub tool: String,
    /// Format version, 1.
    pub version: u32,
    /// The program and its arguments, as rank 0 saw them.
    pub command: Vec<String>,
    /// Number of ranks in the job.
    pub ranks: u32,
    /// Events dropped because a per-thread buffer was full (0 normally).
    pub dropped: u64,
    /// `CLOCK_MONOTONIC` nanoseconds of `ts == 0`.
    pub epoch_ns: u64,
}

/// One trace event (fields as the Chrome trace-event format names them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// The event's symbolic name or a user event's name (a metadata event's kind, such
    /// as `process_name`, for `M`).
    pub name: String,
    /// Category: `"gex"`, `"upcxx"` or `"user"`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cat: String,
    /// Phase: `X`, `b`, `e`, `i`, `s`, `f` or `M`.
    pub ph: String,
    /// Rank.
    pub pid: u32,
    /// The thread's number on its rank (0 = the thread that initialized the runtime).
    pub tid: u32,
    /// Microseconds since the trace epoch.
    #[serde(default)]
    pub ts: f64,
    /// Duration in microseconds (`X` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// Async and flow id, as a string (`b`/`e`/`s`/`f`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Instant scope: `"t"` (the thread) on `i` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// Flow binding point: `"e"` (the enclosing slice) on `f` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bp: Option<String>,
    /// The call site (`file`, `line`, `column`), `peer` and `bytes` where the event has
    /// them, and the event's GASP arguments by name; a metadata event's value.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub args: serde_json::Map<String, serde_json::Value>,
}
