//! GASP instrumentation of the public operations (DESIGN decision 8).
//!
//! `gasp_span!(TAG, args..)` opens an interval event of the operation the user called
//! (the caller's location comes from `#[track_caller]`), `gasp_end!(span, args)`
//! closes it, `gasp_atomic!(TAG, args)` reports a point event. With the `gasp`
//! feature (on by default) and no tool attached each costs one test of a flag set at
//! initialization; without the feature nothing is compiled (the argument expressions
//! are only borrowed inside a closure that is never called, so they stay "used").
//! `args` is an array of `gasp::Arg`.
//! What reaches the tool, and why an operation's internals do not, is explained in
//! `gasp::dispatch`.

/// Stands in for a span when the `gasp` feature is off.
#[cfg(not(feature = "gasp"))]
pub(crate) struct NoSpan;

macro_rules! gasp_span {
    ($tag:ident, $args:expr) => {{
        #[cfg(feature = "gasp")]
        let span = if ::gasp::enabled() {
            Some(::gasp::Span::begin(
                ::gasp::events::$tag,
                ::std::panic::Location::caller(),
                &$args,
            ))
        } else {
            None
        };
        #[cfg(not(feature = "gasp"))]
        let span = {
            let _ = || {
                let _ = &$args;
            };
            $crate::instrument::NoSpan
        };
        span
    }};
}

macro_rules! gasp_end {
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

macro_rules! gasp_atomic {
    ($tag:ident, $args:expr) => {{
        #[cfg(feature = "gasp")]
        if ::gasp::enabled() {
            ::gasp::dispatch::atomic(
                ::gasp::events::$tag,
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

pub(crate) use {gasp_atomic, gasp_end, gasp_span};

/// The GASP form of a remote address: job rank and owner-space address.
#[inline]
pub(crate) fn gptr(rank: crate::Rank, addr: usize) -> gasp::Arg<'static> {
    gasp::Arg::GPtr(gasp::GPtr {
        rank,
        addr: addr as u64,
    })
}

/// The arguments of a put (`int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n`).
#[inline]
pub(crate) fn put_args(
    rank: crate::Rank,
    dest: usize,
    src: usize,
    n: usize,
) -> [gasp::Arg<'static>; 4] {
    [
        gasp::Arg::Int(1),
        gptr(rank, dest),
        gasp::Arg::Ptr(src),
        gasp::Arg::Bytes(n),
    ]
}

/// The arguments of a get (`int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n`).
#[inline]
pub(crate) fn get_args(
    dst: usize,
    rank: crate::Rank,
    src: usize,
    n: usize,
) -> [gasp::Arg<'static>; 4] {
    [
        gasp::Arg::Int(1),
        gasp::Arg::Ptr(dst),
        gptr(rank, src),
        gasp::Arg::Bytes(n),
    ]
}

/// `args` followed by the non-blocking handle (the END of an NB/NBI initiation).
#[inline]
pub(crate) fn with_handle(args: [gasp::Arg<'static>; 4], handle: u64) -> [gasp::Arg<'static>; 5] {
    let [a, b, c, d] = args;
    [a, b, c, d, gasp::Arg::Handle(handle)]
}

/// No arguments.
pub(crate) const NONE: [gasp::Arg<'static>; 0] = [];
