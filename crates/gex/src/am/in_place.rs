//! A negotiated-payload Medium Request in one call: [`Team::request_medium_in_place`].
//!
//! It is the sequence the GASNet-EX spec ("Negotiated-payload AM APIs") describes for a
//! payload assembled in library memory, `gex_AM_PrepareRequestMedium` with a NULL client
//! buffer, writing at `gex_AM_SrcDescAddr`, then `gex_AM_CommitRequestMedium`, with the
//! interval between Prepare and Commit being the call of a closure. The closure gets
//! the claimed slot of the target's queue itself, so the payload is written once, where
//! the target's handler reads it; it says how many bytes it wrote, or that nothing is to
//! be sent. Unlike a [`SrcDesc`](super::SrcDesc), nothing outlives the call, so the
//! whole of it compiles into its caller: a serializer writing straight into the network
//! pays for no descriptor and no copy. A reported handler's send is reported as a
//! Commit reports it: one `GASP_GEX_AM_REQUEST` interval around the publication, of
//! the bytes written.
//!
//! As between a Prepare and its Commit, the thread may not communicate while the
//! closure runs (the slot it holds may be the one its own sends would wait for); a
//! closure that declines, or panics, gives the slot back as a message the receiver
//! skips (handler index 0), as a dropped `SrcDesc` does.

use super::handler::{AmIndex, AM_INDEX_BASE};
use super::negotiated::release;
#[cfg(feature = "gasp")]
use super::reported::SendSpan;
use super::send::{check_args, reserve};
#[cfg(feature = "gasp")]
use super::table::HANDLERS;
use crate::conduit::{AmHeader, Category, Conduit, Network, Rank, Selected};
use crate::context;
use crate::runtime::Runtime;
use crate::team::Team;
use crate::{Flags, NoOp};

impl Team {
    /// A Medium Request to `handler` on `rank` whose payload `fill` writes in place:
    /// GASNet-EX `gex_AM_PrepareRequestMedium` (no client buffer, `least_payload` 0,
    /// `most_payload` the maximum, `GEX_EVENT_NOW`), then
    /// `gex_AM_CommitRequestMedium` of the `n` bytes `fill` returns `Some(n)` for, with
    /// `args`. `fill` gets the whole payload area ([`Team::max_request_medium`] bytes);
    /// `None` sends nothing (the slot is given back). Returns whether the message was
    /// sent, or `NoOp` if [`Flags::IMMEDIATE`] found no room (`fill` did not run).
    ///
    /// # Panics
    /// As `request_medium` for a bad rank, handler or argument count, and if `fill`
    /// returns more bytes than it was given, or communicates.
    #[inline]
    #[track_caller]
    pub fn request_medium_in_place(
        &self,
        rank: Rank,
        handler: AmIndex,
        args: &[u32],
        flags: Flags,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<bool, NoOp> {
        const CALL: &str = "Team::request_medium_in_place";
        let rt = self.am_runtime(CALL);
        let dest = self.job_rank_of(CALL, rank);
        check_args(rt, CALL, dest, handler, args, AM_INDEX_BASE);
        let out = reserve(rt, dest, Network::Request, flags)?;
        let max = rt.conduit.am_max_medium();
        // SAFETY: the claimed slot's payload area holds am_max_medium() bytes, ours
        // until the commit below (or the guard's).
        let buf = unsafe { std::slice::from_raw_parts_mut(rt.conduit.am_buffer(&out), max) };
        context::enter_prepare(CALL);
        let mut held = Held { rt, out: Some(out) };
        let filled = fill(buf);
        let out = held.out.take().expect("held until here");
        context::leave_prepare();
        let Some(nbytes) = filled else {
            release(rt, Network::Request, out);
            return Ok(false);
        };
        if nbytes > max {
            release(rt, Network::Request, out);
            too_many_bytes(CALL, nbytes, max);
        }
        // Reported as a Commit reports: one interval around the publication.
        #[cfg(feature = "gasp")]
        let site = std::panic::Location::caller();
        #[cfg(feature = "gasp")]
        let span = (gasp::enabled() && HANDLERS.reported(handler)).then(|| {
            SendSpan::new::<false>(
                Network::Request,
                site,
                dest,
                handler,
                Category::Medium,
                nbytes,
            )
        });
        rt.conduit.am_commit(
            out,
            &AmHeader {
                handler,
                category: Category::Medium,
                network: Network::Request,
                args,
                nbytes,
                dest_addr: 0,
            },
        );
        #[cfg(feature = "gasp")]
        if let Some(span) = span {
            span.end(dest, handler, Category::Medium, nbytes);
        }
        Ok(true)
    }
}

/// The slot `fill` is writing: given back if `fill` unwinds.
struct Held {
    rt: &'static Runtime,
    out: Option<<Selected as Conduit>::Outbound>,
}

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            context::leave_prepare();
            release(self.rt, Network::Request, out);
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn too_many_bytes(call: &str, nbytes: usize, max: usize) -> ! {
    panic!(
        "gex::{call}: the payload writer returned {nbytes} bytes, more than the {max} it was given"
    );
}
