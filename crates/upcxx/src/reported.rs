//! Whether and how this layer's operations report GASP events. The events and their
//! argument lists are `gasp::events` (the macros, `gasp::span!`, `gasp::end!` and
//! `gasp::atomic!`, take the arguments its builders declare); what reaches a tool is
//! explained in `gasp::dispatch`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Whether a tool may receive events (always false without this crate's `gasp`
/// feature, which this function's `cfg` evaluates): lets a hot path make its one test
/// and leave all reporting to its reported instance (see `gasp::instrument`).
#[inline(always)]
pub(crate) fn enabled() -> bool {
    #[cfg(feature = "gasp")]
    {
        gasp::enabled()
    }
    #[cfg(not(feature = "gasp"))]
    {
        false
    }
}

/// The handle of the non-blocking operation `event` stands for (GASP §5.4.6):
/// `GASP_NB_TRIVIAL` when it completed during initiation, else a fresh id.
#[inline]
pub(crate) fn nb_handle(event: &gex::Event) -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(gasp::events::NB_IMPLICIT + 1);
    if event.is_invalid() {
        gasp::events::NB_TRIVIAL
    } else {
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}
