//! What a runtime built on gex (such as UPC++) needs beyond the GASNet-EX API.
//!
//! A runtime layered on gex makes progress of its own (running callbacks, delivering
//! RPCs) around gex's poll, and waits in loops of its own. These are the few calls it
//! needs for that; everything else it uses is the GASNet-EX API at the crate root.

pub use crate::backoff::{oversubscribed, Backoff};
pub use crate::context::{check_may_communicate, in_handler, PrepareScope};
pub use crate::progress::{idle, poll_unreported};

use crate::Event;

/// [`Event::test`] without the report of the event's sync to a GASP tool, for an event
/// inside an operation the runtime reports itself (a UPC++ collective over a gex one):
/// true if complete (the event is then consumed and set to invalid). Does not poll.
///
/// # Panics
/// Where communication is not allowed (in an AM handler, holding a handler-safe lock),
/// as [`Event::test`].
#[inline]
#[track_caller]
pub fn test_unreported(event: &mut Event) -> bool {
    event.test_unreported()
}
