//! The GASP events of Active Messages: the `category` argument, and the span of a send,
//! whose network names its event.

use std::panic::Location;

use gasp::events::args::{GASP_GEX_AM_REPLY, GASP_GEX_AM_REQUEST};
use gasp::instrument::Opened;

use super::handler::AmIndex;
use crate::conduit::{Category, Network, Rank};

/// The `category` argument of the AM events: 0 Short, 1 Medium, 2 Long.
#[inline(always)]
pub(super) fn category_arg(category: Category) -> i32 {
    match category {
        Category::Short => 0,
        Category::Medium => 1,
        Category::Long => 2,
    }
}

/// The GASP span of an AM send: `GASP_GEX_AM_REQUEST` or `GASP_GEX_AM_REPLY` (one
/// argument list, `int target, int handler, int category, size_t nbytes`).
pub(super) enum SendSpan {
    Request(Opened<GASP_GEX_AM_REQUEST>),
    Reply(Opened<GASP_GEX_AM_REPLY>),
}

impl SendSpan {
    /// Opens the span of a send from `site`: inlined if `INLINE` (in a reported
    /// instance, see `gasp::instrument`), else out of line.
    #[inline(always)]
    pub(super) fn new<const INLINE: bool>(
        network: Network,
        site: &'static Location<'static>,
        dest: Rank,
        handler: AmIndex,
        category: Category,
        nbytes: usize,
    ) -> SendSpan {
        let (handler, category) = (i32::from(handler), category_arg(category));
        match network {
            Network::Request => {
                let start = GASP_GEX_AM_REQUEST.start(dest, handler, category, nbytes);
                SendSpan::Request(if INLINE {
                    Opened::open(site, start)
                } else {
                    Opened::begin(site, start)
                })
            }
            Network::Reply => {
                let start = GASP_GEX_AM_REPLY.start(dest, handler, category, nbytes);
                SendSpan::Reply(if INLINE {
                    Opened::open(site, start)
                } else {
                    Opened::begin(site, start)
                })
            }
        }
    }

    /// Closes the span with the END arguments of its event.
    #[inline(always)]
    pub(super) fn end(self, dest: Rank, handler: AmIndex, category: Category, nbytes: usize) {
        let (handler, category) = (i32::from(handler), category_arg(category));
        match self {
            SendSpan::Request(span) => {
                let event = span.event();
                span.end(event.end(dest, handler, category, nbytes));
            }
            SendSpan::Reply(span) => {
                let event = span.event();
                span.end(event.end(dest, handler, category, nbytes));
            }
        }
    }
}
