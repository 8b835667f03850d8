//! The instrumentation macros of the runtime crates (`gex`, `upcxx`; DESIGN decision 8).
//!
//! `gasp::span!(TAG, args)` opens an interval event of the operation the user called
//! (the caller's location comes from `#[track_caller]`, so the macro must be used in a
//! `#[track_caller]` function, outside closures), `gasp::end!(span, args)` closes it,
//! `gasp::atomic!(TAG, args)` reports a point event, `gasp::span_if!(on, TAG, args)` opens a
//! span when `on` (for a site that tested the flag itself); `args` is an array of
//! [`Arg`](crate::Arg) and `TAG` a name from [`events`](crate::events).
//!
//! The calling crate's own `gasp` feature decides whether anything is compiled: the
//! `#[cfg(feature = "gasp")]` in the expansion is evaluated where the macro is used.
//! With the feature on and no tool attached each costs one test of a flag set at
//! initialization; with it off nothing is compiled (the argument expressions are only
//! borrowed inside a closure that is never called, so they still count as used).

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
