//! The runtime side: deciding which events reach the tool, and calling it.
//!
//! # Cost
//!
//! Instrumented operations (in `gex` and `upcxx`, behind their `gasp` feature) first
//! test [`enabled`], one relaxed load of a flag that is set once, at initialization, if a
//! tool is attached: with no tool that is the whole cost, one predictable branch. With
//! the feature off the instrumentation is not compiled at all.
//!
//! With a tool attached, a reported START or END is one call from the instrumented
//! site, [`Span::begin`] or [`Span::end`], into which the built-in tools' event paths
//! are inlined: no dynamic call, no re-entrancy guard (they never call the runtime), no
//! lookup the span already answers (it carries the tag, the call site and the nesting
//! depth to restore from START to END). Other tools go through `dyn Tool` and the
//! guard. A site that is itself reached only with a tool attached (the cold instance
//! of an operation that tested [`enabled`] once) inlines the START instead,
//! [`Span::open`]: for a built-in tool it is a few loads, a store and a clock read,
//! which a call and its register saves would double.
//!
//! A built-in tool records an interval once, at its END: the START only reads the clock
//! into the span, which carries the time to the END, and the END hands the tool both
//! times with the END's arguments (which repeat the START's, GASP §5.4's lists as our
//! table keeps them, and add what is known only at the end). An operation's START is
//! usually on the latency path (before a message leaves, before an RPC's body runs),
//! its END often is not (the reply is already on its way), so the tool's work moves off
//! the path; and one record per interval costs less than two. A tool of the program's
//! or a C library is notified at both ends, as GASP §3 describes.
//!
//! # What reaches the tool
//!
//! An event is reported when all of these hold:
//!
//! * it is not nested in another reported operation of the library on the same thread.
//!   A `upcxx::rput` is one `GASP_UPC_NB_PUT_INIT`, not also the `gex` put that
//!   implements it: every [`Span`] raises a per-thread depth, and events at depth > 0
//!   are library internals. Spans that run user code
//!   ([`Timing::Execute`](events::Timing::Execute): an RPC body, a client's AM handler)
//!   are always reported and reset the depth for their body, so the user's operations
//!   inside them are reported again;
//! * the tool is not already running on this thread (a tool that calls the runtime does
//!   not recurse into itself: GASP §3.2's re-entrancy rule);
//! * the event is in the `--profile-only` list, if one was given (§3.1.2; user events are
//!   never filtered, §3.1.3);
//! * with `--exclude-local` (the spec's `--profile`, §3.1.1, as opposed to its
//!   `--profile-local`, our default), the event is not an access to memory of the local
//!   team (puts and gets whose pointer-to-shared is owned by a rank of
//!   [`InitInfo::local_ranks`]).
//!
//! Measurement control (`control`, §3.3) is the tool's business: the runtime keeps
//! calling, the tool stops measuring.

use std::cell::Cell;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::events::{self, USEREVT_END, USEREVT_START};
use crate::timer::{self, Ticks};
use crate::tool::{Arg, Event, EventType, InitInfo, Language, Tool};
use crate::tools::Selected;

/// Set once, when a tool is attached; never cleared.
static ENABLED: AtomicBool = AtomicBool::new(false);

struct Dispatch {
    tool: Selected,
    info: InitInfo,
    /// `--profile-only`: allowed system tags (indexed by tag), `None` = all.
    only: Option<Vec<bool>>,
    exclude_local: bool,
    /// `only` or `exclude_local` is set: START and ATOMIC events must pass [`admitted`].
    filtering: bool,
    /// The tags the tool gave the user events created before it was attached, in order
    /// of creation (see [`create_event`]).
    early: Vec<u32>,
}

static DISPATCH: OnceLock<Dispatch> = OnceLock::new();

type Factory = Box<dyn FnOnce(&InitInfo, &mut Vec<String>) -> Box<dyn Tool> + Send>;

static FACTORY: Mutex<Option<Factory>> = Mutex::new(None);

static LANGUAGE: Mutex<Option<Language>> = Mutex::new(None);

thread_local! {
    /// Nesting depth of library spans on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The tool is running on this thread.
    static IN_TOOL: Cell<bool> = const { Cell::new(false) };
}

/// The bit of the per-thread depth that instrumentation control sets
/// ([`crate::region`]): with it the depth is never 0, so the thread's library events are
/// not reported, and spans save and restore it with the rest of the depth. An RPC body
/// or handler (an `Execute` span) starts from depth 0, so it is instrumented wherever it
/// runs, as code outside the region's text.
const UNINSTRUMENTED: u32 = 1 << 30;

/// Sets (`on == false`) or clears [`UNINSTRUMENTED`] on this thread; returns whether it
/// was clear (the thread's events were instrumented).
pub(crate) fn set_instrumented(on: bool) -> bool {
    DEPTH.with(|d| {
        let depth = d.get();
        d.set(if on {
            depth & !UNINSTRUMENTED
        } else {
            depth | UNINSTRUMENTED
        });
        depth & UNINSTRUMENTED == 0
    })
}

/// Environment variable naming the tool: `profile`, `trace`, or the path of a C shared
/// library exporting the GASP functions.
pub const GASP_TOOL: &str = "GASP_TOOL";
/// Environment variable naming a `--profile-only` file (event names, one per line).
pub const GASP_PROFILE_ONLY: &str = "GASP_PROFILE_ONLY";
/// Environment variable: `1` leaves out accesses to the local team's memory.
pub const GASP_EXCLUDE_LOCAL: &str = "GASP_EXCLUDE_LOCAL";

/// Whether a tool is attached: the one test instrumented code makes on its fast path.
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Registers the program's own tool; `init` is its `gasp_init`, called once by the
/// runtime's initialization. Takes precedence over `GASP_TOOL`. Call it before the
/// runtime is initialized (`upcxx::init`, `gex::Client::init`).
pub fn register_tool<F>(init: F)
where
    F: FnOnce(&InitInfo, &mut Vec<String>) -> Box<dyn Tool> + Send + 'static,
{
    *FACTORY.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(init));
}

/// Names the language of the program's events; the first call wins (`upcxx::init`
/// calls it before initializing `gex`, which otherwise reports [`Language::Gex`]).
pub fn set_language(language: Language) {
    let mut l = LANGUAGE.lock().unwrap_or_else(|e| e.into_inner());
    l.get_or_insert(language);
}

/// Attaches the tool, if any (GASP §3.2: called by the runtime after its own
/// initialization, before user code communicates). Idempotent. An error names what
/// could not be set up (a tool library that cannot be loaded, an unreadable
/// `--profile-only` file).
pub fn init(rank: u32, ranks: u32, local_ranks: Vec<u32>) -> Result<(), String> {
    if DISPATCH.get().is_some() {
        return Ok(());
    }
    let language = LANGUAGE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or(Language::Gex);
    let info = InitInfo {
        language,
        rank,
        ranks,
        local_ranks,
    };
    let factory = FACTORY.lock().unwrap_or_else(|e| e.into_inner()).take();
    // The tool sees the program's arguments and may change its copy (GASP §3.2); the
    // program's own are not rewritten: a Rust program reads them from the process
    // (`std::env::args`), which the runtime cannot replace.
    let mut args: Vec<String> = std::env::args().collect();
    let tool = match (factory, std::env::var(GASP_TOOL)) {
        (Some(f), _) => Selected::Other(f(&info, &mut args)),
        (None, Ok(name)) if name.is_empty() => return Ok(()),
        (None, Ok(name)) => crate::tools::builtin(&name, &info, &mut args)?,
        (None, Err(_)) => return Ok(()),
    };
    let only = match std::env::var_os(GASP_PROFILE_ONLY) {
        Some(path) => Some(read_only_list(std::path::Path::new(&path))?),
        None => None,
    };
    let exclude_local = std::env::var(GASP_EXCLUDE_LOCAL).is_ok_and(|v| v == "1");
    let early = EARLY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, desc)| tool.as_tool().create_event(name, desc.as_deref()))
        .collect();
    let dispatch = Dispatch {
        tool,
        info,
        filtering: only.is_some() || exclude_local,
        only,
        exclude_local,
        early,
    };
    if DISPATCH.set(dispatch).is_ok() {
        ENABLED.store(true, Ordering::Release);
    }
    Ok(())
}

/// Reads a `--profile-only` file: event names separated by newlines (GASP §3.1.2).
/// Names this implementation does not report are ignored, as the spec allows.
fn read_only_list(path: &std::path::Path) -> Result<Vec<bool>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{GASP_PROFILE_ONLY}={}: {e}", path.display()))?;
    let max = events::EVENTS.last().map_or(0, |e| e.tag) as usize;
    let mut only = vec![false; max + 1];
    for name in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(def) = events::by_name(name) {
            only[def.tag as usize] = true;
        }
    }
    Ok(only)
}

/// The info the tool was initialized with, if one is attached.
pub fn info() -> Option<&'static InitInfo> {
    DISPATCH.get().map(|d| &d.info)
}

/// Tells the tool the run is over (called by the runtime's finalization, after its
/// final barrier). Later events are not reported.
pub fn finish() {
    if let Some(d) = DISPATCH.get() {
        if ENABLED.swap(false, Ordering::AcqRel) {
            in_tool(|| d.tool.as_tool().finish());
        }
    }
}

/// Runs `f` (a call into the tool) unless the tool is already running on this thread,
/// in which case the call is dropped (`None`): the re-entrancy rule of §3.2.
fn in_tool<R>(f: impl FnOnce() -> R) -> Option<R> {
    IN_TOOL.with(|t| {
        if t.replace(true) {
            return None;
        }
        struct Reset<'a>(&'a Cell<bool>);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _reset = Reset(t);
        Some(f())
    })
}

fn admitted(d: &Dispatch, tag: u32, args: &[Arg<'_>]) -> bool {
    if (USEREVT_START..=USEREVT_END).contains(&tag) {
        return true;
    }
    if let Some(only) = &d.only {
        if !only.get(tag as usize).copied().unwrap_or(false) {
            return false;
        }
    }
    !(d.exclude_local && is_access(tag) && names_local_memory(&d.info.local_ranks, args))
}

/// Whether `args` name a global pointer into the memory of a rank of `local_ranks`
/// (sorted; not always a range of ranks).
fn names_local_memory(local_ranks: &[u32], args: &[Arg<'_>]) -> bool {
    args.iter().any(|a| match a {
        Arg::GPtr(g) => local_ranks.binary_search(&g.rank).is_ok(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--exclude-local` leaves out accesses to the ranks of this rank's host only, also
    /// when they are not a range (ranks placed round-robin over hosts).
    #[test]
    fn local_memory_is_that_of_the_hosts_ranks_only() {
        let local = [0, 2];
        let to = |rank| [Arg::Int(1), Arg::GPtr(crate::tool::GPtr { rank, addr: 64 })];
        assert!(names_local_memory(&local, &to(0)));
        assert!(names_local_memory(&local, &to(2)));
        assert!(!names_local_memory(&local, &to(1)));
        assert!(!names_local_memory(&local, &to(3)));
    }

    /// A user event is one `create_event` made: a system event's tag given as one
    /// fails naming the call, whether a tool is attached or not (a tool would read the
    /// values by that event's list).
    #[test]
    #[should_panic(expected = "gasp::event_start: tag 31 is a system event's")]
    fn a_system_tag_is_no_user_event() {
        event_start(UserEvent(events::GASP_UPC_PUT), &[]);
    }

    #[test]
    fn created_events_are_user_events() {
        let e = create_event("x", None);
        event_start(e, &[]);
        event_end(e, &[]);
        event_atomic(e, &[]);
    }
}

fn is_access(tag: u32) -> bool {
    matches!(
        tag,
        events::GASP_UPC_GET
            | events::GASP_UPC_PUT
            | events::GASP_UPC_NB_GET_INIT
            | events::GASP_UPC_NB_PUT_INIT
    )
}

/// Calls the tool with one event. The built-in tools are called directly, without the
/// re-entrancy guard: they never call the runtime, so they cannot cause events.
#[inline(always)]
fn deliver(
    d: &Dispatch,
    tag: u32,
    ty: EventType,
    location: &'static Location<'static>,
    args: &[Arg<'_>],
) {
    match &d.tool {
        Selected::Profile(p) => p.notify(tag, ty, location, args),
        Selected::Trace(t) => t.notify(tag, ty, location, args),
        Selected::Other(t) => deliver_other(&**t, tag, ty, location, args),
    }
}

/// [`deliver`] to a tool of the program's or a C library, which may call the runtime.
#[inline(never)]
fn deliver_other(
    tool: &dyn Tool,
    tag: u32,
    ty: EventType,
    location: &'static Location<'static>,
    args: &[Arg<'_>],
) {
    // Events after `finish` are not reported; a built-in tool drops them itself (its
    // buffers are closed).
    if enabled() {
        let event = Event {
            tag,
            ty,
            location,
            args,
        };
        in_tool(|| tool.event_notify(&event));
    }
}

/// Reports one library event if a tool is attached and admits it.
#[inline(always)]
fn report(tag: u32, ty: EventType, location: &'static Location<'static>, args: &[Arg<'_>]) {
    let Some(d) = DISPATCH.get() else {
        return;
    };
    if d.filtering && !admitted(d, tag, args) {
        return;
    }
    deliver(d, tag, ty, location, args);
}

/// [`Span::begin`] past its fast path: an event to filter, or a tool of the program's or
/// a C library, notified now. `state` is the span's, without the reported bit.
#[cold]
#[inline(never)]
fn start_slow(
    d: &Dispatch,
    tag: u32,
    location: &'static Location<'static>,
    args: &[Arg<'_>],
    state: u64,
) -> Span {
    if d.filtering && !admitted(d, tag, args) {
        return Span::unreported(location, state);
    }
    let measuring = match &d.tool {
        Selected::Profile(p) => p.measuring(),
        Selected::Trace(t) => t.measuring(),
        Selected::Other(t) => {
            deliver_other(&**t, tag, EventType::Start, location, args);
            return Span {
                location,
                state: state | 1,
                start: 0,
            };
        }
    };
    Span::started(location, state, measuring)
}

/// An open interval event of the library: reports START when made (if admitted) and
/// END when [`Span::end`] is called; dropping it without `end` (an unwinding panic)
/// only restores the nesting depth (a built-in tool then records nothing of it).
///
/// Three scalars: the `Option<Span>` an instrumented call site holds is returned
/// through a small stack slot (`None` is the null location).
#[must_use = "a span reports its END event when `end` is called"]
pub struct Span {
    location: &'static Location<'static>,
    /// The tag in the high half; the nesting depth to restore, shifted left once, in the
    /// low half, whose bit 0 says that START was reported.
    state: u64,
    /// The START's time, for a built-in tool (see the module docs).
    start: Ticks,
}

impl Span {
    /// Opens an interval event: reports START with `args` (to a built-in tool, only its
    /// time, which the span carries to the END; see the module docs). Call only when
    /// [`enabled`].
    /// Out of line and cold: instrumented call sites keep only the flag test inline, so
    /// the path with no tool attached is not made larger or slower. A span nested in
    /// another (a library's internal operation) only counts its depth: the runtime makes
    /// many more of those than the user makes operations (every poll of a wait).
    ///
    /// # Safety
    /// `args` are the START (or, for a user event, the values of) list of event `tag`,
    /// of the kinds its list declares ([`crate::events::EVENTS`]): a C tool reads them
    /// by those kinds, a pointer-to-shared through its address. The typed builders of
    /// [`instrument`](crate::instrument) make only such lists.
    #[cold]
    #[inline(never)]
    pub unsafe fn begin(tag: u32, location: &'static Location<'static>, args: &[Arg<'_>]) -> Span {
        // SAFETY: the caller's contract, passed on.
        unsafe { Span::open(tag, location, args) }
    }

    /// [`Span::begin`], inlined: for a call site that is itself only reached while a
    /// tool is attached (a cold instance of an operation for `REPORT = true`, see
    /// [`span_if!`](crate::span_if)), where a call and the register saves of a
    /// function of its own would be most of the cost. Its common path (a built-in
    /// tool, no filter) is a few loads, a store and a clock read; every other case is
    /// a call to a cold function.
    ///
    /// # Safety
    /// As [`Span::begin`].
    #[inline(always)]
    pub unsafe fn open(tag: u32, location: &'static Location<'static>, args: &[Arg<'_>]) -> Span {
        let saved_depth = DEPTH.with(Cell::get);
        let execute = events::runs_user_code(tag);
        DEPTH.with(|c| c.set(if execute { 0 } else { saved_depth + 1 }));
        let state = u64::from(tag) << 32 | u64::from(saved_depth << 1);
        if saved_depth != 0 && !execute {
            return Span::unreported(location, state);
        }
        let Some(d) = DISPATCH.get() else {
            return Span::unreported(location, state);
        };
        let measuring = match &d.tool {
            Selected::Profile(p) if !d.filtering => p.measuring(),
            Selected::Trace(t) if !d.filtering => t.measuring(),
            _ => return start_slow(d, tag, location, args, state),
        };
        Span::started(location, state, measuring)
    }

    /// The span of a START reported to a built-in tool: if it is `measuring`, the
    /// START's time, else unreported.
    #[inline(always)]
    fn started(location: &'static Location<'static>, state: u64, measuring: bool) -> Span {
        if !measuring {
            return Span::unreported(location, state);
        }
        Span {
            location,
            state: state | 1,
            start: timer::ticks_now(),
        }
    }

    /// A span whose START was not reported: its END only restores the depth.
    #[inline(always)]
    fn unreported(location: &'static Location<'static>, state: u64) -> Span {
        Span {
            location,
            state,
            start: 0,
        }
    }

    fn tag(&self) -> u32 {
        (self.state >> 32) as u32
    }

    fn saved_depth(&self) -> u32 {
        self.state as u32 >> 1
    }

    /// Closes the interval: reports END with `args` if START was reported (a built-in
    /// tool records the whole interval here).
    ///
    /// # Safety
    /// `args` are the END list of the span's event, as [`Span::begin`] requires of
    /// its START list.
    #[cold]
    #[inline(never)]
    pub unsafe fn end(self, args: &[Arg<'_>]) {
        DEPTH.with(|c| c.set(self.saved_depth()));
        if self.state & 1 != 0 {
            if let Some(d) = DISPATCH.get() {
                let (tag, location) = (self.tag(), self.location);
                match &d.tool {
                    Selected::Profile(p) => p.interval(self.start, tag, location, args),
                    Selected::Trace(t) => t.interval(self.start, tag, location, args),
                    Selected::Other(t) => {
                        deliver_other(&**t, tag, EventType::End, location, args);
                    }
                }
            }
        }
        std::mem::forget(self);
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        DEPTH.with(|c| c.set(self.saved_depth()));
    }
}

/// Hides the events of the calling thread's library work until the guard is dropped
/// (for a runtime's internal use of its own public operations).
#[must_use = "events are hidden until the guard is dropped"]
pub struct Quiet {
    saved_depth: u32,
}

/// See [`Quiet`]. Inline: the runtime takes one around every poll while a tool is
/// attached.
#[inline]
pub fn quiet() -> Quiet {
    let saved_depth = DEPTH.with(Cell::get);
    DEPTH.with(|c| c.set(saved_depth + 1));
    Quiet { saved_depth }
}

impl Drop for Quiet {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|c| c.set(self.saved_depth));
    }
}

/// Reports an ATOMIC event (if admitted and not nested in a library span). Call only
/// when [`enabled`].
///
/// # Safety
/// `args` are the list of the ATOMIC event `tag`, as [`Span::begin`] requires.
#[cold]
#[inline(never)]
pub unsafe fn atomic(tag: u32, location: &'static Location<'static>, args: &[Arg<'_>]) {
    if DEPTH.with(Cell::get) != 0 {
        return;
    }
    report(tag, EventType::Atomic, location, args);
}

/// `pupc_control` / `gasp_control` (§3.3): turns measurement off (`false`) or on;
/// returns the previous setting (`true` if never called, or with no tool attached).
pub fn control(on: bool) -> bool {
    match DISPATCH.get() {
        Some(d) => in_tool(|| d.tool.as_tool().control(on)).unwrap_or(true),
        None => true,
    }
}

/// A user event (GASP §5.3 `pupc_create_event`), made by [`create_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UserEvent(pub u32);

/// `pupc_create_event`: a tag for a user event named `name`; `desc` is a description
/// or a `printf`-style format of its values. With no tool attached the tags are still
/// distinct (so programs behave the same), they are just never reported.
///
/// An event created before a tool is attached gets a tag above the user range, one
/// per event in order of creation, so that it never equals a tag a tool gives, however
/// the tool numbers its events; the tool, once attached, is told of it
/// (`create_event`), and its events are reported under the tag the tool gave it.
pub fn create_event(name: &str, desc: Option<&str>) -> UserEvent {
    let from_tool = DISPATCH
        .get()
        .and_then(|d| in_tool(|| d.tool.as_tool().create_event(name, desc)));
    UserEvent(from_tool.unwrap_or_else(|| {
        let mut early = EARLY.lock().unwrap_or_else(|e| e.into_inner());
        early.push((name.to_owned(), desc.map(str::to_owned)));
        early_tag(early.len() - 1)
    }))
}

/// User events created while no tool was attached (or by the tool itself, from inside
/// one of its calls), in order of creation.
static EARLY: Mutex<Vec<(String, Option<String>)>> = Mutex::new(Vec::new());

/// The tag of the `i`-th event of [`EARLY`]: above the user range, where no tool's tag
/// lies.
fn early_tag(i: usize) -> u32 {
    u32::try_from(i)
        .ok()
        .and_then(|i| (USEREVT_END + 1).checked_add(i))
        .expect("gasp::create_event: too many user events")
}

/// The tag under which the tool knows user event `tag`: the one it gave an event
/// created before it was attached (`early`, by creation), else `tag` itself. `None`
/// for an event the tool was never told of (created from inside the tool's own calls),
/// which it cannot be shown.
fn tool_tag(early: &[u32], tag: u32) -> Option<u32> {
    if tag <= USEREVT_END {
        return Some(tag);
    }
    early.get((tag - USEREVT_END - 1) as usize).copied()
}

/// `pupc_event_start`: the start of user event `event` at the caller's location, with
/// values matching its format.
#[track_caller]
pub fn event_start(event: UserEvent, values: &[Arg<'_>]) {
    check_user("event_start", event);
    if enabled() {
        user(event, EventType::Start, values, Location::caller());
    }
}

/// `pupc_event_end`.
#[track_caller]
pub fn event_end(event: UserEvent, values: &[Arg<'_>]) {
    check_user("event_end", event);
    if enabled() {
        user(event, EventType::End, values, Location::caller());
    }
}

/// `pupc_event_atomic`.
#[track_caller]
pub fn event_atomic(event: UserEvent, values: &[Arg<'_>]) {
    check_user("event_atomic", event);
    if enabled() {
        user(event, EventType::Atomic, values, Location::caller());
    }
}

/// Fails `call` for a tag that is no user event's: a system event's tag would reach a
/// tool with these values in place of that event's list (§5.4), which it reads by the
/// list's kinds.
#[inline]
#[track_caller]
fn check_user(call: &str, event: UserEvent) {
    if event.0 < USEREVT_START {
        panic!(
            "gasp::{call}: tag {} is a system event's, not a user event's (user events \
             come from create_event, GASP §5.3)",
            event.0
        );
    }
}

fn user(event: UserEvent, ty: EventType, args: &[Arg<'_>], location: &'static Location<'static>) {
    if let Some(d) = DISPATCH.get() {
        if let Some(tag) = tool_tag(&d.early, event.0) {
            deliver(d, tag, ty, location, args);
        }
    }
}
