//! `gasp`: the GASP 1.4 performance-tool interface of the PGAS stack
//! (`gasp-1.4.txt`, with the timers of the UPC tool-interface proposal §3.5).
//!
//! `gex` and `upcxx` report an event for every public operation (START and END around
//! it, or one ATOMIC), with the user's file, line and column (`#[track_caller]`) and the
//! spec's arguments; this crate decides what reaches the tool and hosts the tools.
//!
//! ```no_run
//! // A program's own events (GASP §5.3), visible in any tool's output:
//! let phase = gasp::create_event("solve", Some("iteration %d"));
//! for i in 0..10 {
//!     gasp::event_start(phase, &[gasp::Arg::Int(i)]);
//!     // ... work ...
//!     gasp::event_end(phase, &[gasp::Arg::Int(i)]);
//! }
//! ```
//!
//! The map of the crate:
//! * [`events`]: the event table (tags, argument lists, and the typed argument builders
//!   generated from them); [`header`] renders `include/gasp_upcxx.h` from it.
//!   `include/gasp.h` is the spec's §3.5 header.
//! * [`instrument`]: the macros `gex` and `upcxx` report their events with.
//! * [`tool`]: the [`Tool`] trait (the tool side of §3.2–3.4) and what it receives.
//! * [`dispatch`]: which events reach the tool; user events; measurement control.
//! * [`ctool`]: C tools loaded at run time (`GASP_TOOL=/path/libtool.so`).
//! * [`tools`]: the built-in profiler and tracer, and merging the ranks' outputs.
//! * [`timer`]: global timers. [`formats`]: the files the tools write; [`report`]:
//!   reading them back (`upcxx-run report`).
//!
//! # Choosing a tool
//!
//! At initialization the runtime attaches, in order of preference, the tool the
//! program registered ([`register_tool`]) or the one `GASP_TOOL` names: `profile`,
//! `trace` or a C library's path. `GASP_PROFILE_ONLY=FILE` limits the system events
//! reported to the names in FILE (§3.1.2 `--profile-only`); `GASP_EXCLUDE_LOCAL=1`
//! leaves out accesses to the local team's memory (§3.1.1 `--profile`; the default is
//! `--profile-local`). `upcxx-run --profile`, `--trace`, `--tool`, `--profile-only` and
//! `--exclude-local` set these for every rank.

pub mod ctool;
pub mod dispatch;
pub mod events;
pub mod formats;
pub mod header;
pub mod instrument;
pub mod report;
pub mod timer;
pub mod tool;
pub mod tools;

pub use dispatch::{
    control, create_event, enabled, event_atomic, event_end, event_start, register_tool,
    set_language, Span, UserEvent,
};
pub use events::{USEREVT_END, USEREVT_START};
pub use timer::{tick_granularity_us, ticks_now, ticks_to_ns, ticks_to_us, Ticks};
pub use tool::{Arg, Event, EventType, GPtr, InitInfo, Language, Tool};
