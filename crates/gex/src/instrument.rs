//! GASP instrumentation helpers of the gex layer: the argument lists of its events.
//! The macros are `gasp::span!`, `gasp::end!` and `gasp::atomic!` (see
//! `gasp::instrument`); what reaches the tool, and why an operation's internals do not,
//! is explained in `gasp::dispatch`.

pub(crate) use gasp::instrument::NONE;
pub(crate) use gasp::{atomic as gasp_atomic, end as gasp_end, span as gasp_span};

/// The arguments of the barrier events (`int named, int expr`, GASP §5.4.2): gex
/// barriers are anonymous.
pub(crate) const BARRIER_ARGS: [gasp::Arg<'static>; 2] = [gasp::Arg::Int(0), gasp::Arg::Int(0)];

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

/// The arguments of the AM events (`int rank, int handler, int category, size_t nbytes`).
#[cfg_attr(not(feature = "gasp"), allow(dead_code))]
pub(crate) fn am_args(
    rank: crate::Rank,
    handler: crate::AmIndex,
    category: crate::conduit::Category,
    nbytes: usize,
) -> [gasp::Arg<'static>; 4] {
    let category = match category {
        crate::conduit::Category::Short => 0,
        crate::conduit::Category::Medium => 1,
        crate::conduit::Category::Long => 2,
    };
    [
        gasp::Arg::Rank(rank),
        gasp::Arg::Int(i32::from(handler)),
        gasp::Arg::Int(category),
        gasp::Arg::Bytes(nbytes),
    ]
}
