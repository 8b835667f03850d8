//! GASP argument lists of the UPC++ layer's events (the macros are `gasp::span!`,
//! `gasp::end!`, `gasp::atomic!`; what reaches a tool is explained in `gasp::dispatch`).

use std::sync::atomic::{AtomicU64, Ordering};

use gasp::{Arg, GPtr};

use crate::Rank;

/// The GASP form of a global pointer.
#[inline]
pub(crate) fn gptr(rank: Rank, addr: usize) -> Arg<'static> {
    Arg::GPtr(GPtr {
        rank,
        addr: addr as u64,
    })
}

/// `int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n`.
#[inline]
pub(crate) fn put_args(rank: Rank, addr: usize, src: &[u8]) -> [Arg<'static>; 4] {
    [
        Arg::Int(1),
        gptr(rank, addr),
        Arg::Ptr(src.as_ptr() as usize),
        Arg::Bytes(src.len()),
    ]
}

/// `int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n`.
#[inline]
pub(crate) fn get_args(dst: &[u8], rank: Rank, addr: usize) -> [Arg<'static>; 4] {
    [
        Arg::Int(1),
        Arg::Ptr(dst.as_ptr() as usize),
        gptr(rank, addr),
        Arg::Bytes(dst.len()),
    ]
}

/// `args` and the handle of the operation `event` stands for: `GASP_NB_TRIVIAL` when it
/// completed during initiation, else a fresh id.
#[inline]
pub(crate) fn with_handle(args: [Arg<'static>; 4], event: &gex::Event) -> [Arg<'static>; 5] {
    static NEXT: AtomicU64 = AtomicU64::new(gasp::events::NB_IMPLICIT + 1);
    let handle = if event.is_invalid() {
        gasp::events::NB_TRIVIAL
    } else {
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
    let [a, b, c, d] = args;
    [a, b, c, d, Arg::Handle(handle)]
}

/// Whether a tool may receive events (always false without the `gasp` feature): lets a
/// hot path make its one test and leave all reporting to its out-of-line variant.
#[inline(always)]
pub(crate) fn reporting() -> bool {
    #[cfg(feature = "gasp")]
    {
        gasp::enabled()
    }
    #[cfg(not(feature = "gasp"))]
    {
        false
    }
}
