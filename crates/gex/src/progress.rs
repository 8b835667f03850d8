//! Progress: polling the network and waiting (GASNet-EX `gex_AM_Poll`).
//!
//! GASNet-EX makes progress only inside library calls: every communication call polls,
//! and [`poll`] polls explicitly (there are no hidden threads). A poll runs the arrived
//! messages of both networks through the dispatcher the runtime was given, then calls
//! what was registered to be advanced (the barrier) while it has work under way. Waiting
//! loops spin a little and then yield the processor ([`Backoff`]), so jobs with more
//! ranks than cores keep moving.

use crate::backoff::Backoff;
use crate::conduit::Conduit;
use crate::context::check_may_communicate;
use crate::runtime::{runtime, try_runtime, Runtime};

/// Polls for and runs incoming Active Messages (GASNet-EX `gex_AM_Poll`).
///
/// Prohibited in handler context and while holding a handler-safe lock.
#[track_caller]
pub fn poll() {
    let rt = runtime("poll");
    check_may_communicate("poll");
    let span = gasp::span!(GASP_GEX_POLL);
    rt.progress();
    gasp::end!(span);
}

/// [`poll`] without its own GASP event, for a runtime built on gex whose progress call
/// is the operation a tool should see (UPC++'s internal progress); the handlers it runs
/// report as under [`poll`]. Prohibited where [`poll`] is.
///
/// Returns how many messages it handled (and transfers it found complete, on a conduit
/// whose polls complete transfers), so that a runtime's waiting loop can tell a poll
/// that found work from an idle one: a handler may do all that an arrival needs
/// (deliver a reply) and leave the runtime nothing else to count.
#[inline]
#[track_caller]
pub fn poll_unreported() -> usize {
    let rt = runtime("poll");
    check_may_communicate("poll");
    rt.progress()
}

/// One step of backing off in a wait loop of a runtime layered on gex, as gex's own
/// waits take: if the job is ending (another rank called [`exit`](crate::exit)`(0)`,
/// or the launcher tears the job down) this process leaves the way they do; otherwise
/// it backs off.
pub fn idle(backoff: &mut Backoff) {
    match try_runtime() {
        Some(rt) => rt.idle(backoff),
        None => backoff.snooze(),
    }
}

impl Runtime {
    /// Runs arrived messages of both networks and advances split-phase operations.
    #[inline]
    pub(crate) fn progress(&self) -> usize {
        let n = self.conduit.poll(true, self.dispatch);
        for (advance, work) in self.advance.iter() {
            if work.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                advance(self);
            }
        }
        n
    }

    /// Runs arrived Replies only: used by a Request handler blocked on sending its
    /// Reply, which must not start other Request handlers.
    pub(crate) fn progress_replies(&self) -> usize {
        self.conduit.poll(false, self.dispatch)
    }

    /// Polls until `done` returns true: spin briefly, then yield between polls.
    #[inline]
    pub(crate) fn wait_until(&self, mut done: impl FnMut() -> bool) {
        let mut backoff = Backoff::new();
        while !done() {
            if self.progress() > 0 {
                backoff.reset();
            } else if !done() {
                self.idle(&mut backoff);
            } else {
                break;
            }
        }
    }

    /// [`wait_until`](Self::wait_until) for what names the caller's memory (a transfer
    /// into or out of its buffer, answers that write its frame): if a handler run by
    /// the wait panics and unwinds it (a panic the program may catch), the wait goes on
    /// while the frame unwinds, before the memory is freed. Only for what completes
    /// whatever the other ranks do (answers that come): a wait for a collective would
    /// turn a failing job into a hanging one.
    pub(crate) fn wait_through_unwind(&self, done: &dyn Fn() -> bool) {
        let again = WaitOnUnwind::new(self, done);
        self.wait_until(done);
        drop(again);
    }

    /// One step of backing off in a wait loop.
    pub(crate) fn idle(&self, backoff: &mut Backoff) {
        match self.conduit.ending() {
            None => backoff.snooze(),
            // Another rank called `gex::exit(0)` (`gasnet_exit`, which ends the whole
            // job): this rank leaves the same way.
            Some(0) => crate::exit(0),
            // The launcher is tearing the job down; it already reported why.
            Some(code) => std::process::exit(code),
        }
    }
}

/// Waits for `done` as it drops while its thread unwinds; nothing otherwise. Armed
/// before a call sends what names the caller's memory, so that an unwinding send is
/// covered as well as the wait ([`Runtime::wait_through_unwind`]).
pub(crate) struct WaitOnUnwind<'a> {
    rt: &'a Runtime,
    done: &'a dyn Fn() -> bool,
}

impl<'a> WaitOnUnwind<'a> {
    pub(crate) fn new(rt: &'a Runtime, done: &'a dyn Fn() -> bool) -> WaitOnUnwind<'a> {
        WaitOnUnwind { rt, done }
    }
}

impl Drop for WaitOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.rt.wait_until(self.done);
        }
    }
}
