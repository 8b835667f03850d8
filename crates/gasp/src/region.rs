//! Instrumentation control of a region of code: the Rust form of `#pragma pupc off` …
//! `#pragma pupc on` (GASP 1.4 §5.1; the UPC tool-interface proposal §3.4.1, "directives
//! that allow a user to specify regions of code that should not be instrumented").
//!
//! A UPC compiler leaves the constructs between the two pragmas uninstrumented. Rust
//! has no pragmas and our instrumentation is in the libraries, not inserted by the
//! compiler, so the region is dynamic and per thread: between
//! [`set_instrumentation(false)`](set_instrumentation) and
//! [`set_instrumentation(true)`](set_instrumentation), or for the life of the guard
//! [`instrumentation_off`] returns, the calling thread's `gex` and `upcxx` operations
//! report no events. As the spec requires:
//!
//! * it takes precedence over the command-line controls (`--profile-only`,
//!   `--exclude-local`): nothing in the region is reported, whatever those allow;
//! * it has no effect on user events or on measurement control (§3.1.3: "`#pragma
//!   pupc` shall not change the behavior of the `pupc_create_event` and
//!   `pupc_event_start` functions"): [`crate::event_start`] and the others still
//!   report, and [`crate::control`] is unchanged;
//! * instrumentation is on by default (§5.1: "`#pragma pupc` shall default to `on`").
//!
//! The region is lexical in the sense that matters for RPCs: the body of an RPC (or an
//! AM handler of the program's) that runs on this thread while it is in a region — in a
//! wait or `progress` inside it — is code written elsewhere, and is instrumented.
//! Guards nest: each restores the state it found, so an inner region ending does not
//! turn instrumentation back on inside an outer one.
//!
//! ```
//! let outer = gasp::instrumentation_off();
//! {
//!     let _inner = gasp::instrumentation_off();
//!     // ... nothing reported here ...
//! }
//! // ... still nothing: the outer region is open ...
//! drop(outer);
//! assert!(gasp::set_instrumentation(true)); // instrumented again
//! ```

use std::marker::PhantomData;

use crate::dispatch;

/// `#pragma pupc on` (`true`) or `#pragma pupc off` (`false`) for the calling thread from
/// here on; returns whether the thread was instrumented before.
pub fn set_instrumentation(on: bool) -> bool {
    dispatch::set_instrumented(on)
}

/// Turns instrumentation of the calling thread off until the guard is dropped, which
/// restores the state it found (see the module docs).
pub fn instrumentation_off() -> InstrumentationOff {
    InstrumentationOff {
        was_on: set_instrumentation(false),
        _thread: PhantomData,
    }
}

/// A region of code that is not instrumented, made by [`instrumentation_off`]; its
/// drop restores the state before it. It belongs to the thread that made it.
#[must_use = "instrumentation is off only while the guard lives"]
pub struct InstrumentationOff {
    was_on: bool,
    /// Not `Send`: the state it restores is its thread's.
    _thread: PhantomData<*const ()>,
}

impl Drop for InstrumentationOff {
    fn drop(&mut self) {
        set_instrumentation(self.was_on);
    }
}
