//! The instrumentation macros of the runtime crates (`gex`, `upcxx`; DESIGN decision 8).
//!
//! `gasp::span!(TAG, args)` opens an interval event of the operation the user called
//! (the caller's location comes from `#[track_caller]`, so the macro must be used in a
//! `#[track_caller]` function, outside closures), `gasp::end!(span, args)` closes it,
//! `gasp::atomic!(TAG, args)` reports a point event, `gasp::span_if!(on, TAG, args)` opens a
//! span when `on` (for a site that tested the flag itself); `args` is an array of
//! [`Arg`] and `TAG` a name from [`events`](crate::events).
//!
//! # Typed argument lists
//!
//! An event's arguments are built by its builders in [`events::args`](crate::events::args),
//! generated from the event table as the C header is: `args::GASP_UPC_PUT.start(..)`
//! takes the typed arguments of the START list and returns a [`Start`] typed by the
//! event, `.end(..)` an [`End`]. A typed span ([`Opened`]) opened with an event's
//! `Start` ends only with that event's `End`, and [`atomic`] takes only an atomic
//! event's `Start`; so an event is reported with the argument list the table declares,
//! and the C header says what a C tool receives. The arrays are those a hand-written
//! `[Arg::Int(1), ..]` would be: the builders are inlined and the event types are
//! zero-sized.
//!
//! # Cost
//!
//! The calling crate's own `gasp` feature decides whether anything is compiled: the
//! `#[cfg(feature = "gasp")]` in the expansion is evaluated where the macro is used.
//! With the feature on and no tool attached each costs one test of a flag set at
//! initialization; with it off nothing is compiled (the argument expressions are only
//! borrowed inside a closure that is never called, so they still count as used).
//!
//! # The reported instance of an operation
//!
//! The one flag test is still a test, and on the hottest paths (sending an AM or an
//! RPC, running one, a wait's progress) the instrumented code around it costs more
//! than the test: the arguments are computed, kept live across the operation, and the
//! span's state occupies registers and stack even when the span is `None`. Such an
//! operation is written once, as a function generic over `const REPORT: bool` whose
//! reporting is `gasp::span_if!(REPORT, ..)` and `gasp::end!`, and instantiated twice:
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

use std::marker::PhantomData;
use std::panic::Location;

use crate::{Arg, Span};

/// Stands in for a span when the calling crate's `gasp` feature is off.
#[doc(hidden)]
pub struct NoSpan;

/// Opens an interval event if a tool is attached; see the [module docs](self).
#[macro_export]
macro_rules! span {
    ($tag:ident, $args:expr) => {
        $crate::__span!($crate::enabled(), begin, $tag, $args)
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
    ($on:expr, $tag:ident, $args:expr) => {
        $crate::__span!($on, open, $tag, $args)
    };
}

/// [`span!`] and [`span_if!`]: a span opened with `Span::$open` when `$on`.
#[doc(hidden)]
#[macro_export]
macro_rules! __span {
    ($on:expr, $open:ident, $tag:ident, $args:expr) => {{
        #[cfg(feature = "gasp")]
        let span = if $on {
            Some($crate::Span::$open(
                $crate::events::$tag,
                ::std::panic::Location::caller(),
                &$args,
            ))
        } else {
            None
        };
        #[cfg(not(feature = "gasp"))]
        let span = {
            let _ = || {
                let _ = $on;
                let _ = &$args;
            };
            $crate::instrument::NoSpan
        };
        span
    }};
}

/// Closes a span opened by [`span!`].
#[macro_export]
macro_rules! end {
    ($span:expr, $args:expr) => {{
        #[cfg(feature = "gasp")]
        if let Some(span) = $span {
            span.end(&$args);
        }
        #[cfg(not(feature = "gasp"))]
        {
            let _ = $span;
            let _ = || {
                let _ = &$args;
            };
        }
    }};
}

/// Reports an atomic event if a tool is attached.
#[macro_export]
macro_rules! atomic {
    ($tag:ident, $args:expr) => {{
        #[cfg(feature = "gasp")]
        if $crate::enabled() {
            $crate::dispatch::atomic(
                $crate::events::$tag,
                ::std::panic::Location::caller(),
                &$args,
            );
        }
        #[cfg(not(feature = "gasp"))]
        {
            let _ = || {
                let _ = &$args;
            };
        }
    }};
}

/// No arguments.
pub const NONE: [crate::Arg<'static>; 0] = [];

/// An event of the table: its tag. Implemented by the event types of
/// [`events::args`](crate::events::args).
pub trait Tagged: Copy {
    /// The event's tag.
    const TAG: u32;
}

/// An event reported as START and END around an operation.
pub trait Interval: Tagged {}

/// An event reported as one ATOMIC event.
pub trait Atomic: Tagged {}

/// The arguments of event `E`'s START (or ATOMIC) event, from its `start` builder.
#[derive(Clone, Copy, Debug)]
pub struct Start<E, const N: usize> {
    event: E,
    args: [Arg<'static>; N],
}

/// The arguments of event `E`'s END event, from its `end` builder.
#[derive(Clone, Copy, Debug)]
pub struct End<E, const N: usize> {
    args: [Arg<'static>; N],
    event: PhantomData<E>,
}

impl<E: Tagged, const N: usize> Start<E, N> {
    /// For the builders of [`events::args`](crate::events::args) only.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new(event: E, args: [Arg<'static>; N]) -> Self {
        Start { event, args }
    }

    /// The arguments, as the tool receives them.
    #[inline(always)]
    pub fn args(&self) -> &[Arg<'static>] {
        &self.args
    }
}

impl<E: Tagged, const N: usize> End<E, N> {
    /// For the builders of [`events::args`](crate::events::args) only.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new(_event: E, args: [Arg<'static>; N]) -> Self {
        End {
            args,
            event: PhantomData,
        }
    }

    /// The arguments, as the tool receives them.
    #[inline(always)]
    pub fn args(&self) -> &[Arg<'static>] {
        &self.args
    }
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
            span: Span::begin(E::TAG, location, &start.args),
            event: start.event,
        }
    }

    /// [`Span::open`] of `E` with its START arguments: inlined, for a site reached only
    /// with a tool attached (see [the reported instance](self#the-reported-instance-of-an-operation)).
    #[inline(always)]
    pub fn open<const N: usize>(location: &'static Location<'static>, start: Start<E, N>) -> Self {
        Opened {
            span: Span::open(E::TAG, location, &start.args),
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
        self.span.end(&end.args);
    }
}

/// Reports the ATOMIC event `E` with its arguments ([`dispatch::atomic`](crate::dispatch::atomic)).
/// Call only when [`enabled`](crate::enabled).
#[inline(always)]
pub fn atomic<E: Atomic, const N: usize>(location: &'static Location<'static>, args: Start<E, N>) {
    crate::dispatch::atomic(E::TAG, location, &args.args);
}
