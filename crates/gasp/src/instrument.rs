//! The instrumentation macros of the runtime crates (`gex`, `upcxx`; DESIGN decision 8).
//!
//! `gasp::span!(TAG, args..)` opens an interval event of the operation the user called
//! (the caller's location comes from `#[track_caller]`, so the macro must be used in a
//! `#[track_caller]` function, outside closures), `gasp::end!(span, args..)` closes it,
//! `gasp::atomic!(TAG, args..)` reports a point event, `gasp::span_if!(on, TAG, args..)`
//! opens a span when `on` (for a site that tested the flag itself); `TAG` is a name from
//! [`events`](crate::events), and `args..` are the arguments of its START, END or ATOMIC
//! list, in the table's order and with its types:
//!
//! ```
//! # use gasp::GPtr;
//! # let (rank, dest, src, n, handle) = (1, 64, 8, 16, 42);
//! let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, GPtr::new(rank, dest), src, n);
//! // .. the put ..
//! gasp::end!(span, 1, GPtr::new(rank, dest), src, n, handle);
//! ```
//!
//! # Typed argument lists
//!
//! The macros pass `args..` to the event's builders in
//! [`events::args`](crate::events::args), generated from the event table as the C header
//! is: `args::GASP_UPC_PUT.start(..)` takes the typed arguments of the START list and
//! returns a [`Start`] typed by the event, `.end(..)` an [`End`]. A typed span
//! ([`Opened`]) opened with an event's `Start` ends only with that event's `End` (so
//! `end!` needs no tag: the span's type names the event), and [`atomic`] takes only an
//! atomic event's `Start`. An event is therefore reported with the argument list the
//! table declares, which the C header tells a C tool; a wrong count or type is a
//! compile error, with the feature on or off. A site that cannot use the macros (one
//! that reports at another call site than its caller's) uses the builders and
//! [`Opened`] directly. The arrays are those a hand-written `[Arg::Int(1), ..]` would
//! be: the builders are inlined and the event types are zero-sized.
//!
//! ```
//! #[track_caller]
//! fn sync(handle: u64) {
//!     let span = gasp::span!(GASP_UPC_NB_SYNC, handle);
//!     // .. the wait ..
//!     gasp::end!(span, handle);
//! }
//! sync(7);
//! ```
//!
//! ```compile_fail
//! // The END list of GASP_UPC_NB_PUT_INIT ends with the operation's handle.
//! let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, gasp::GPtr::new(1, 64), 8, 16);
//! gasp::end!(span, 1, gasp::GPtr::new(1, 64), 8, 16);
//! ```
//!
//! ```compile_fail
//! // The status of an exit is an `int`.
//! gasp::atomic!(GASP_UPC_NONCOLLECTIVE_EXIT, 0usize);
//! ```
//!
//! # Cost
//!
//! The calling crate's own `gasp` feature decides whether anything is compiled: the
//! `#[cfg(feature = "gasp")]` in the expansion is evaluated where the macro is used.
//! With the feature on and no tool attached each costs one test of a flag set at
//! initialization; with it off nothing is compiled (the argument expressions are only
//! passed to the builders inside a closure that is never called, so they are still
//! type-checked and count as used).
//!
//! # The reported instance of an operation
//!
//! The one flag test is still a test, and on the hottest paths (sending an AM or an
//! RPC, running one, a wait's progress) the instrumented code around it costs more
//! than the test: the arguments are computed, kept live across the operation, and the
//! span's state occupies registers and stack even when the span is `None`. Such an
//! operation is written once, as a function generic over `const REPORT: bool` whose
//! reporting is `gasp::span_if!(REPORT, ..)` and `gasp::end!`, and instantiated twice
//! (a sketch, not compiled: `..` stands for the operation's arguments):
//!
//! ```ignore
//! #[inline(always)]
//! #[track_caller]
//! pub fn send(..) {
//!     if gasp::enabled() {             // the one test (under the crate's `gasp` feature)
//!         return send_reported(..);
//!     }
//!     send_as::<false>(..)             // hot: compiles as the uninstrumented build does
//! }
//!
//! #[cold]
//! #[inline(never)]
//! #[track_caller]
//! fn send_reported(..) {
//!     send_as::<true>(..)              // cold: reports
//! }
//!
//! #[inline(always)]
//! #[track_caller]
//! fn send_as<const REPORT: bool>(..) {
//!     let span = gasp::span_if!(REPORT, GASP_GEX_AM_REQUEST, ..);
//!     // .. the operation ..
//!     gasp::end!(span, ..);
//! }
//! ```
//!
//! * The flag is tested once, by the public function, which is inlined into the
//!   caller. The instance for `false` holds no instrumentation at all: `span_if!`'s
//!   condition is the constant `false`, so the span, its arguments and its END are
//!   removed, and the operation compiles to the code of a build without the feature.
//! * The instance for `true` is out of line and `#[cold]`, so that it does not grow the
//!   caller or its register pressure. Being reached only while a tool is attached, it
//!   opens its span inlined ([`Span::open`](crate::Span::open), which `span_if!` uses
//!   where `span!` calls the out-of-line [`Span::begin`](crate::Span::begin)): there the
//!   call and its register saves would be most of the cost.
//! * Both are `#[track_caller]` down to the span, so the event names the user's call.
//!   Arguments that the cold instance would otherwise receive as one struct or enum are
//!   passed as separate scalars: a struct built only to be passed would be built on the
//!   hot path too.
//! * Work that only the reported instance needs (a message id, the registration site of
//!   a handler) is computed under `if REPORT`, so it disappears from the hot instance.
//!
//! A function reached only while a tool is attached (a future's reported wait) uses
//! `gasp::span_if!(true, ..)` for the same inlined opening. The runtime crates refer
//! here instead of repeating this at each site.

use std::panic::Location;

pub use crate::typed::{Atomic, End, Interval, Start, Tagged};
use crate::Span;

/// Stands in for a span of event `E` when the calling crate's `gasp` feature is off: its
/// END arguments are still checked against `E`'s builder.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct NoSpan<E>(pub E);

/// Opens an interval event if a tool is attached; see the [module docs](self).
#[macro_export]
macro_rules! span {
    ($tag:ident $(, $arg:expr)* $(,)?) => {
        $crate::__span!($crate::enabled(), begin, $tag $(, $arg)*)
    };
}

/// Opens an interval event when `$on` is true: [`span!`] for a function reached only
/// with a tool attached (`$on` is then `true`), or one that has tested
/// [`enabled`](crate::enabled) once and is instantiated for both answers (a
/// `const REPORT: bool` parameter), so that the instance for `false` holds no
/// instrumentation at all and compiles as the uninstrumented build does. Where `$on`
/// holds, the span's opening is inlined ([`Span::open`]): such a function is out of
/// line and cold already. See [the reported
/// instance](self#the-reported-instance-of-an-operation).
#[macro_export]
macro_rules! span_if {
    ($on:expr, $tag:ident $(, $arg:expr)* $(,)?) => {
        $crate::__span!($on, open, $tag $(, $arg)*)
    };
}

/// [`span!`] and [`span_if!`]: a span of `$tag` opened with `Opened::$open` when `$on`,
/// with the arguments of its START builder.
#[doc(hidden)]
#[macro_export]
macro_rules! __span {
    ($on:expr, $open:ident, $tag:ident $(, $arg:expr)*) => {{
        #[cfg(feature = "gasp")]
        let span = if $on {
            Some($crate::instrument::Opened::$open(
                ::std::panic::Location::caller(),
                $crate::events::args::$tag.start($($arg),*),
            ))
        } else {
            None
        };
        #[cfg(not(feature = "gasp"))]
        let span = {
            let _ = || {
                let _ = $on;
                let _ = $crate::events::args::$tag.start($($arg),*);
            };
            $crate::instrument::NoSpan($crate::events::args::$tag)
        };
        span
    }};
}

/// Closes a span opened by [`span!`] or [`span_if!`], with the arguments of its event's
/// END builder.
#[macro_export]
macro_rules! end {
    ($span:expr $(, $arg:expr)* $(,)?) => {{
        #[cfg(feature = "gasp")]
        if let Some(span) = $span {
            let event = span.event();
            span.end(event.end($($arg),*));
        }
        #[cfg(not(feature = "gasp"))]
        {
            let span = $span;
            let _ = || {
                let _ = span.0.end($($arg),*);
            };
        }
    }};
}

/// Reports an atomic event if a tool is attached, with the arguments of its builder.
#[macro_export]
macro_rules! atomic {
    ($tag:ident $(, $arg:expr)* $(,)?) => {{
        #[cfg(feature = "gasp")]
        if $crate::enabled() {
            $crate::instrument::atomic(
                ::std::panic::Location::caller(),
                $crate::events::args::$tag.start($($arg),*),
            );
        }
        #[cfg(not(feature = "gasp"))]
        {
            let _ = || {
                let _ = $crate::events::args::$tag.start($($arg),*);
            };
        }
    }};
}

/// A [`Span`] of event `E`: it ends only with `E`'s END arguments. As small as the span
/// (`E` is zero-sized).
#[must_use = "a span reports its END event when `end` is called"]
pub struct Opened<E> {
    span: Span,
    event: E,
}

impl<E: Interval> Opened<E> {
    /// [`Span::begin`] of `E` with its START arguments: out of line, for a site that
    /// tested [`enabled`](crate::enabled) inline.
    #[inline(always)]
    pub fn begin<const N: usize>(location: &'static Location<'static>, start: Start<E, N>) -> Self {
        Opened {
            // SAFETY: `E`'s START list, made by its builder.
            span: unsafe { Span::begin(E::TAG, location, &start.args) },
            event: start.event,
        }
    }

    /// [`Span::open`] of `E` with its START arguments: inlined, for a site reached only
    /// with a tool attached (see [the reported instance](self#the-reported-instance-of-an-operation)).
    #[inline(always)]
    pub fn open<const N: usize>(location: &'static Location<'static>, start: Start<E, N>) -> Self {
        Opened {
            // SAFETY: as in `begin`.
            span: unsafe { Span::open(E::TAG, location, &start.args) },
            event: start.event,
        }
    }

    /// The event, whose `end` builder makes the arguments [`Opened::end`] takes.
    #[inline(always)]
    pub fn event(&self) -> E {
        self.event
    }

    /// Closes the interval: [`Span::end`] with `E`'s END arguments.
    #[inline(always)]
    pub fn end<const N: usize>(self, end: End<E, N>) {
        // SAFETY: `E`'s END list, made by its builder; the span is `E`'s.
        unsafe { self.span.end(&end.args) };
    }
}

/// Reports the ATOMIC event `E` with its arguments ([`dispatch::atomic`](crate::dispatch::atomic)).
/// Call only when [`enabled`](crate::enabled).
#[inline(always)]
pub fn atomic<E: Atomic, const N: usize>(location: &'static Location<'static>, args: Start<E, N>) {
    // SAFETY: `E`'s list, made by its builder.
    unsafe { crate::dispatch::atomic(E::TAG, location, &args.args) };
}
