//! `gasp`: the GASP 1.4 performance-tool interface of the PGAS stack
//! (`gasp-1.4.txt`, with the timers of the UPC tool-interface proposal §3.5).
//!
//! `gex` and `upcxx` report an event for every public operation (START and END around
//! it, or one ATOMIC), with the user's file, line and column (`#[track_caller]`) and the
//! spec's arguments; this crate decides what reaches the tool and hosts the tools.
//!
//! ```
//! // A program's own events (GASP §5.3), visible in any tool's output:
//! let phase = gasp::create_event("solve", Some("iteration %d"));
//! for i in 0..10 {
//!     gasp::event_start(phase, &[gasp::Arg::Int(i)]);
//!     // ... work ...
//!     gasp::event_end(phase, &[gasp::Arg::Int(i)]);
//! }
//! ```
//!
//! With no tool attached, `create_event` still hands out distinct tags and the other
//! calls report nothing. A tool is a [`Tool`]; this one, registered by the program,
//! counts what it receives. The runtime attaches it in its initialization
//! ([`dispatch::init`], which `upcxx::init` and `gex::Client::init` call; here called
//! directly, for a one-rank job without them):
//!
//! ```
//! use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
//! use gasp::{Arg, Event, EventType, Tool};
//!
//! static STARTS: AtomicU32 = AtomicU32::new(0);
//! static ENDS: AtomicU32 = AtomicU32::new(0);
//!
//! /// Counts the events it receives while measuring.
//! struct Counter {
//!     on: AtomicBool,
//! }
//!
//! impl Tool for Counter {
//!     fn event_notify(&self, event: &Event<'_>) {
//!         if !self.on.load(Relaxed) {
//!             return; // §3.3: not measuring
//!         }
//!         match event.ty {
//!             EventType::Start => STARTS.fetch_add(1, Relaxed),
//!             EventType::End => ENDS.fetch_add(1, Relaxed),
//!             EventType::Atomic => 0,
//!         };
//!     }
//!     fn control(&self, on: bool) -> bool {
//!         self.on.swap(on, Relaxed)
//!     }
//!     fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
//!         gasp::USEREVT_START
//!     }
//! }
//!
//! gasp::register_tool(|info, _args| {
//!     assert_eq!((info.rank, info.ranks), (0, 1));
//!     Box::new(Counter { on: AtomicBool::new(true) })
//! });
//! gasp::dispatch::init(0, 1, vec![0]).unwrap();
//! assert!(gasp::enabled());
//!
//! let phase = gasp::create_event("solve", None);
//! assert_eq!(phase.0, gasp::USEREVT_START);
//! gasp::event_start(phase, &[Arg::Int(1)]);
//! gasp::event_end(phase, &[Arg::Int(1)]);
//! assert!(gasp::control(false)); // measuring until now
//! gasp::event_start(phase, &[Arg::Int(2)]);
//! assert_eq!((STARTS.load(Relaxed), ENDS.load(Relaxed)), (1, 1));
//! ```
//!
//! The map of the crate:
//! * [`events`]: the event table (tags, argument lists, and the typed argument builders
//!   generated from them); [`header`] renders `include/gasp_upcxx.h` from it.
//!   `include/gasp.h` is the spec's §3.5 header.
//! * [`instrument`]: the macros `gex` and `upcxx` report their events with.
//! * [`tool`]: the [`Tool`] trait (the tool side of §3.2–3.4) and what it receives.
//! * [`dispatch`]: which events reach the tool; user events; measurement control.
//! * [`region`]: instrumentation control of a region (`#pragma pupc off`/`on`, §5.1).
//! * [`ctool`]: C tools loaded at run time (`GASP_TOOL=/path/libtool.so`).
//! * [`tools`]: the built-in profiler and tracer, and merging the ranks' outputs.
//! * [`timer`]: global timers. [`formats`]: the files the tools write; [`report`]:
//!   reading them back (`upcxx-run report`).
//!
//! # Choosing a tool
//!
//! At initialization the runtime attaches, in order of preference, the tool the
//! program registered ([`register_tool`]) or the one `GASP_TOOL` names: `profile`,
//! `trace`, `tracing` (with the cargo feature `tracing`: `tools::tracing`, which also
//! has the `tracing` layer that reports the program's spans as user events) or a C
//! library's path. `GASP_PROFILE_ONLY=FILE` limits the system events
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
pub mod region;
pub mod report;
mod sync;
pub mod timer;
pub mod tool;
pub mod tools;
pub mod typed;

pub use dispatch::{
    control, create_event, enabled, event_atomic, event_end, event_start, register_tool,
    set_language, Span, UserEvent,
};
pub use events::{USEREVT_END, USEREVT_START};
pub use region::{instrumentation_off, set_instrumentation, InstrumentationOff};
pub use timer::{tick_granularity_us, ticks_now, ticks_to_ns, ticks_to_us, Ticks};
pub use tool::{Arg, Event, EventType, GPtr, InitInfo, Language, Tool};
