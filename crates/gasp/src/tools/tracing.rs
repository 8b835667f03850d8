//! GASP and the `tracing` ecosystem, both ways (cargo feature `tracing`).
//!
//! * [`Forwarder`], the tool `GASP_TOOL=tracing` selects (or a program registers with
//!   [`register`] / [`register_with`]), hands every event it receives to a `tracing`
//!   subscriber, so any subscriber (`tracing-chrome`, `tracing-opentelemetry`, a log)
//!   sees the program's communication:
//!   - an interval event (GASP §3.2 `GASP_START` … `GASP_END`) is a span, created and
//!     entered at START, exited and closed at the matching END on the same thread;
//!   - an atomic event (`GASP_ATOMIC`) is a `tracing` event;
//!   - the span's or event's name is the GASP event's (`GASP_UPCXX_RPC_SEND`, or a user
//!     event's name, §5.3), its target `gasp::gex`, `gasp::upcxx` or `gasp::user`, its
//!     level `INFO`; its metadata's `file` and `line` are the user's call site (§3.2
//!     `filename`, `linenum`), the field `column` its `colnum`, and the other fields are
//!     the START's arguments by the names of the event table (`target`, `nbytes`,
//!     `msgid`, …; a user event's values are `arg0`, `arg1`, …).
//! * [`layer::UserEventLayer`] goes the other way: a `tracing_subscriber::Layer` that
//!   makes each span of the program (`#[tracing::instrument]`, `info_span!`) a GASP user
//!   event (§5.3: `create_event` once per span name, START when the span is entered, END
//!   when it is exited), so the profiler and the tracer show the program's own phases
//!   beside the communication they contain.
//!
//! # Why callsites are made at run time
//!
//! `tracing` describes each span and event by static metadata registered once (its
//! callsite), which its macros make at compile time. Our events are known only at run
//! time, so the forwarder makes one callsite per (event, call site) pair the first time
//! it meets it and leaks it: there are as many as the program has call sites, and a
//! callsite must live for the whole process anyway (`tracing_core::callsite::register`
//! takes `&'static`). Each thread keeps a cache from the pair to its callsite, so an
//! event costs one hash lookup before the subscriber is called. A callsite in which the
//! subscriber has no interest (`Interest::never`) costs nothing more.
//!
//! # Which subscriber
//!
//! `GASP_TOOL=tracing` and [`register`] forward to the default subscriber where the event
//! happens (the program's global one, or none); [`register_with`] to the given one.

pub mod layer;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use ::tracing::{Dispatch, Level, Metadata};
use rustc_hash::FxHashMap;
use tracing_core::callsite::{self, Callsite, Identifier};
use tracing_core::field::{Field, FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::subscriber::Interest;

use crate::events::{self, Layer};
use crate::tool::{Arg, Event, EventType, GPtr, InitInfo, Tool};

/// The `GASP_TOOL` value that selects the forwarder.
pub const TOOL_NAME: &str = "tracing";

/// Arguments forwarded as fields; an event's later ones are left out.
const MAX_ARGS: usize = 8;

/// Field names of a user event's values.
const USER_ARG_NAMES: [&str; MAX_ARGS] = [
    "arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7",
];

/// Registers the forwarder as the program's tool (see [`crate::register_tool`]),
/// forwarding to the default subscriber where each event happens.
pub fn register() {
    crate::register_tool(|info, _args| Box::new(Forwarder::new(info, None)));
}

/// Registers the forwarder as the program's tool, forwarding to `dispatch` (for example
/// `Dispatch::new(tracing_subscriber::registry().with(layer))`) whatever the thread's
/// default subscriber is.
pub fn register_with(dispatch: Dispatch) {
    crate::register_tool(move |info, _args| Box::new(Forwarder::new(info, Some(dispatch))));
}

/// The GASP tool that forwards events to `tracing` (see the module docs).
pub struct Forwarder {
    dispatch: Option<Dispatch>,
    measuring: AtomicBool,
    /// Names of the user events this tool created, by `tag - USEREVT_START`.
    user_names: Mutex<Vec<&'static str>>,
    rank: u32,
}

impl Forwarder {
    /// The forwarder of rank `info.rank`, to `dispatch` or (`None`) the default
    /// subscriber.
    pub fn new(info: &InitInfo, dispatch: Option<Dispatch>) -> Self {
        Forwarder {
            dispatch,
            measuring: AtomicBool::new(true),
            user_names: Mutex::new(Vec::new()),
            rank: info.rank,
        }
    }

    /// The rank this forwarder reports for.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    fn name(&self, tag: u32) -> &'static str {
        if let Some(def) = events::by_tag(tag) {
            return def.name;
        }
        let names = self.user_names.lock().unwrap_or_else(|e| e.into_inner());
        tag.checked_sub(events::USEREVT_START)
            .and_then(|i| names.get(i as usize).copied())
            .unwrap_or("GASP user event")
    }

    fn forward(&self, event: &Event<'_>) {
        match event.ty {
            EventType::Start => {
                let site = self.callsite(event, Kind::SPAN);
                let span = site.enabled().then(|| {
                    site.with_values(event.location, event.args, |meta, values| {
                        ::tracing::Span::new(meta, values).entered()
                    })
                });
                OPEN.with(|open| open.borrow_mut().push((event.tag, span)));
            }
            EventType::End => {
                // The innermost open span of the same event: dropping it exits and
                // closes it.
                let span = OPEN.with(|open| {
                    let mut open = open.borrow_mut();
                    let at = open.iter().rposition(|(tag, _)| *tag == event.tag)?;
                    Some(open.remove(at))
                });
                drop(span);
            }
            EventType::Atomic => {
                let site = self.callsite(event, Kind::EVENT);
                if site.enabled() {
                    site.with_values(event.location, event.args, |meta, values| {
                        ::tracing::Event::dispatch(meta, values)
                    });
                }
            }
        }
    }

    /// The callsite of `event`'s (tag, call site, kind), made the first time.
    fn callsite(&self, event: &Event<'_>, kind: Kind) -> &'static DynCallsite {
        let key = (
            event.tag,
            event.location as *const Location<'static> as usize,
            kind == Kind::SPAN,
        );
        if let Some(site) = CACHE.with(|c| c.borrow().get(&key).copied()) {
            return site;
        }
        static ALL: OnceLock<Mutex<HashMap<SiteKey, &'static DynCallsite>>> = OnceLock::new();
        let site = *ALL
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert_with(|| DynCallsite::make(self.name(event.tag), event, kind));
        CACHE.with(|c| c.borrow_mut().insert(key, site));
        site
    }
}

/// A callsite's key: the event's tag, its call site's address, whether it is a span.
type SiteKey = (u32, usize, bool);

thread_local! {
    /// Spans of this thread opened at a START, innermost last; `None` where the
    /// subscriber had no interest, so that the END still pairs with its START.
    static OPEN: RefCell<Vec<(u32, Option<::tracing::span::EnteredSpan>)>> =
        const { RefCell::new(Vec::new()) };
    /// This thread's view of the callsites made so far.
    static CACHE: RefCell<FxHashMap<SiteKey, &'static DynCallsite>> =
        RefCell::new(FxHashMap::default());
}

impl Tool for Forwarder {
    fn event_notify(&self, event: &Event<'_>) {
        if !self.measuring.load(Ordering::Relaxed) {
            // §3.3: not measuring. A START still holds its place, so that its END (maybe
            // after measuring resumed) closes nothing else; an END still closes its span.
            match event.ty {
                EventType::Start => OPEN.with(|open| open.borrow_mut().push((event.tag, None))),
                EventType::End => self.forward(event),
                EventType::Atomic => {}
            }
            return;
        }
        match &self.dispatch {
            Some(d) => ::tracing::dispatcher::with_default(d, || self.forward(event)),
            None => self.forward(event),
        }
    }

    fn control(&self, on: bool) -> bool {
        self.measuring.swap(on, Ordering::Relaxed)
    }

    fn create_event(&self, name: &str, _desc: Option<&str>) -> u32 {
        let mut names = self.user_names.lock().unwrap_or_else(|e| e.into_inner());
        // Leaked: a callsite's name is `&'static`; there are at most as many as user
        // event tags.
        let tag = events::USEREVT_START + names.len() as u32;
        if tag <= events::USEREVT_END {
            names.push(Box::leak(name.to_owned().into_boxed_str()));
        }
        tag.min(events::USEREVT_END)
    }
}

/// A `tracing` callsite made at run time for one (event, call site, kind).
struct DynCallsite {
    meta: OnceLock<Metadata<'static>>,
    /// `Interest::never` 0, `sometimes` 1, `always` 2.
    interest: AtomicU8,
    /// The fields in order: `column`, then the arguments.
    fields: OnceLock<Vec<Field>>,
}

impl DynCallsite {
    fn make(name: &'static str, event: &Event<'_>, kind: Kind) -> &'static DynCallsite {
        let def = events::by_tag(event.tag);
        let (target, args): (&'static str, Vec<&'static str>) = match def {
            Some(def) => (
                match def.layer {
                    Layer::Gex => "gasp::gex",
                    Layer::Upcxx => "gasp::upcxx",
                    Layer::User => "gasp::user",
                },
                def.start_arg_names().take(MAX_ARGS).collect(),
            ),
            None => ("gasp::user", USER_ARG_NAMES.to_vec()),
        };
        let names: &'static [&'static str] = Box::leak(
            std::iter::once("column")
                .chain(args)
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        let site: &'static DynCallsite = Box::leak(Box::new(DynCallsite {
            meta: OnceLock::new(),
            interest: AtomicU8::new(1),
            fields: OnceLock::new(),
        }));
        let meta = Metadata::new(
            name,
            target,
            Level::INFO,
            Some(event.location.file()),
            Some(event.location.line()),
            None,
            FieldSet::new(names, Identifier(site)),
            kind,
        );
        let meta = site.meta.get_or_init(|| meta);
        let _ = site.fields.set(meta.fields().iter().collect());
        callsite::register(site);
        site
    }

    fn meta(&'static self) -> &'static Metadata<'static> {
        self.meta.get().expect("set before registration")
    }

    /// Whether the current subscriber wants this callsite's spans or events.
    fn enabled(&'static self) -> bool {
        match self.interest.load(Ordering::Relaxed) {
            0 => false,
            2 => true,
            _ => ::tracing::dispatcher::get_default(|d| d.enabled(self.meta())),
        }
    }

    /// Calls `f` with the metadata and the values of `args` (and `column`).
    fn with_values<R>(
        &'static self,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
        f: impl FnOnce(&'static Metadata<'static>, &::tracing::field::ValueSet<'_>) -> R,
    ) -> R {
        let fields = self.fields.get().expect("set before registration");
        let column = u64::from(location.column());
        let owned: [Owned<'_>; MAX_ARGS] =
            std::array::from_fn(|i| args.get(i).map_or(Owned::None, Owned::from));
        let value = |i: usize| -> Option<&dyn Value> {
            if i == 0 {
                return Some(&column);
            }
            owned.get(i - 1).and_then(Owned::as_value)
        };
        let field = |i: usize| fields.get(i).unwrap_or(&fields[0]);
        // A fixed-size list (what `ValueSet` accepts); entries past the callsite's
        // fields repeat `column` with no value, which records nothing.
        let pairs: [(&Field, Option<&dyn Value>); MAX_ARGS + 1] = std::array::from_fn(|i| {
            if i < fields.len() {
                (field(i), value(i))
            } else {
                (field(0), None)
            }
        });
        let meta = self.meta();
        f(meta, &meta.fields().value_set(&pairs))
    }
}

impl Callsite for DynCallsite {
    fn set_interest(&self, interest: Interest) {
        let v = if interest.is_never() {
            0
        } else if interest.is_always() {
            2
        } else {
            1
        };
        self.interest.store(v, Ordering::Relaxed);
    }

    fn metadata(&self) -> &Metadata<'_> {
        self.meta.get().expect("set before registration")
    }
}

/// An argument as a value `tracing` records.
enum Owned<'a> {
    None,
    I(i64),
    U(u64),
    F(f64),
    S(&'a str),
    G(::tracing::field::DebugValue<GPtr>),
}

impl<'a> Owned<'a> {
    fn from(arg: &Arg<'a>) -> Self {
        match *arg {
            Arg::Int(v) => Owned::I(i64::from(v)),
            Arg::I64(v) => Owned::I(v),
            Arg::Size(v) | Arg::Bytes(v) | Arg::Ptr(v) => Owned::U(v as u64),
            Arg::Rank(v) => Owned::U(u64::from(v)),
            Arg::Handle(v) | Arg::U64(v) => Owned::U(v),
            Arg::F64(v) => Owned::F(v),
            Arg::Str(s) => Owned::S(cstr_text(s)),
            Arg::GPtr(g) => Owned::G(::tracing::field::debug(g)),
        }
    }

    fn as_value(&self) -> Option<&dyn Value> {
        Some(match self {
            Owned::None => return None,
            Owned::I(v) => v,
            Owned::U(v) => v,
            Owned::F(v) => v,
            Owned::S(v) => v,
            Owned::G(g) => g,
        })
    }
}

fn cstr_text(s: &CStr) -> &str {
    s.to_str().unwrap_or("<not UTF-8>")
}
