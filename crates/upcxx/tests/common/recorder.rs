//! A GASP tool that records every event it is notified of, for the tests of what an
//! operation reports (tag, event type, the caller's line, arguments).

use std::sync::{Arc, Mutex};

use gasp::events::USEREVT_START;
use gasp::{Event, EventType, Tool};

/// One recorded event: tag, type, line and arguments (as `Debug` text).
pub(crate) type Rec = (u32, EventType, u32, Vec<String>);

/// The events recorded so far.
#[derive(Default)]
pub(crate) struct Recorder(pub(crate) Mutex<Vec<Rec>>);

/// The tool: registered with `gasp::register_tool(move |_, _| Box::new(Shared(rec)))`.
pub(crate) struct Shared(pub(crate) Arc<Recorder>);

impl Tool for Shared {
    fn event_notify(&self, e: &Event<'_>) {
        let args = e.args.iter().map(|a| format!("{a:?}")).collect();
        self.0
             .0
            .lock()
            .unwrap()
            .push((e.tag, e.ty, e.location.line(), args));
    }
    fn control(&self, _on: bool) -> bool {
        true
    }
    fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
        USEREVT_START
    }
}
