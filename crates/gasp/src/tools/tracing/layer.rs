//! The program's `tracing` spans as GASP user events (GASP §5.3).
//!
//! [`UserEventLayer`] is a `tracing_subscriber::Layer`: added to the program's
//! subscriber, it creates one user event per span name (`pupc_create_event`, the first
//! time a span of that callsite is entered) and reports its START when a span is entered
//! and its END when it is exited (`pupc_event_start` / `pupc_event_end`), on the thread
//! that enters it. The profiler and the tracer then show the span by name, with the
//! operations it contains nested in it.
//!
//! The user event's one value (`desc` `"%s"`) is the span's `file:line`, from its
//! metadata. The event's call site, which GASP takes from the caller
//! (`std::panic::Location`), is this layer's: a `Location` cannot be made from a span's
//! metadata.
//!
//! Spans whose target starts with `gasp::` (those of the [`Forwarder`](super::Forwarder))
//! are left out, so that both can be attached at once without feedback.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

use tracing_core::callsite::Identifier;
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::dispatch::UserEvent;
use crate::tool::Arg;

/// A `tracing_subscriber::Layer` reporting the program's spans as GASP user events (see
/// the module docs).
#[derive(Default)]
pub struct UserEventLayer {
    /// Per span callsite: its user event and the value it reports (`file:line`).
    events: Mutex<HashMap<Identifier, (UserEvent, &'static CString)>>,
}

impl UserEventLayer {
    /// A layer with no user events created yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn event_of(
        &self,
        meta: &'static tracing_core::Metadata<'static>,
    ) -> Option<(UserEvent, &'static CString)> {
        if meta.target().starts_with("gasp::") {
            return None;
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let entry = events.entry(meta.callsite()).or_insert_with(|| {
            let event = crate::create_event(meta.name(), Some("%s"));
            let site = format!(
                "{}:{}",
                meta.file().unwrap_or("?"),
                meta.line().unwrap_or(0)
            );
            // Leaked: one per span callsite, and `Arg::Str` borrows for the event only
            // while the value must outlive the lock.
            let site: &'static CString =
                Box::leak(Box::new(CString::new(site).unwrap_or_default()));
            (event, site)
        });
        Some(*entry)
    }
}

impl<S> Layer<S> for UserEventLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !crate::enabled() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            if let Some((event, site)) = self.event_of(span.metadata()) {
                crate::event_start(event, &[Arg::Str(site)]);
            }
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !crate::enabled() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            if let Some((event, site)) = self.event_of(span.metadata()) {
                crate::event_end(event, &[Arg::Str(site)]);
            }
        }
    }
}
