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
/// holds, the span's opening is inlined ([`Span::open`](crate::Span::open)): such a
/// function is out of line and cold already.
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
    /// with a tool attached.
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
