//! Progress, the process-wide runtime, and the rules of restricted contexts.
//!
//! GASNet-EX makes progress only inside library calls: every communication call polls,
//! and [`poll`] polls explicitly (there are no hidden threads). Waiting loops spin a
//! little and then yield the processor, so jobs with more ranks than cores keep moving.
//!
//! Some contexts are *restricted* (GASNet-EX spec, "Calls from restricted context"):
//! inside an AM handler, while holding a handler-safe lock, and between a Prepare and
//! its Commit. There, communication, polling and waiting are prohibited; only Replies
//! from a Request handler (at most one) are allowed. We track the context per thread
//! and fail such a call with a message naming it, instead of deadlocking later.

use std::cell::Cell;
use std::sync::OnceLock;

use crate::am::HandlerTable;
use crate::barrier::BarrierState;
use crate::conduit::{Active, Conduit};

/// Process-wide state of the communication layer, created by `Client::init`.
pub(crate) struct Runtime {
    pub conduit: Active,
    pub handlers: HandlerTable,
    pub barrier: BarrierState,
    pub objects: crate::client::Objects,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, or a panic naming `call` if `Client::init` has not run.
#[inline]
#[track_caller]
pub(crate) fn runtime(call: &str) -> &'static Runtime {
    match RUNTIME.get() {
        Some(rt) => rt,
        None => not_initialized(call),
    }
}

#[cold]
#[track_caller]
fn not_initialized(call: &str) -> ! {
    panic!("gex::{call}: the communication layer is not initialized (call gex::Client::init first)")
}

pub(crate) fn try_runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

pub(crate) fn install(rt: Runtime) -> &'static Runtime {
    if RUNTIME.set(rt).is_err() {
        panic!("gex::Client::init: a client already exists in this process");
    }
    RUNTIME.get().expect("just set")
}

/// Bits of the per-thread context word.
const IN_HANDLER: u32 = 1;
const IN_REQUEST_HANDLER: u32 = 2;
const IN_PREPARE: u32 = 4;
/// Each held handler-safe lock adds this much.
const HSL_UNIT: u32 = 1 << 8;

thread_local! {
    static CONTEXT: Cell<u32> = const { Cell::new(0) };
}

#[inline]
fn context() -> u32 {
    CONTEXT.with(|c| c.get())
}

fn set_context(v: u32) {
    CONTEXT.with(|c| c.set(v))
}

/// Fails a communication call made from a restricted context.
#[inline]
#[track_caller]
pub(crate) fn check_may_communicate(call: &str) {
    let ctx = context();
    if ctx != 0 {
        restricted(call, ctx);
    }
}

#[cold]
#[track_caller]
fn restricted(call: &str, ctx: u32) -> ! {
    let place = if ctx & IN_HANDLER != 0 {
        "inside an Active Message handler (only a Reply from a Request handler is allowed there)"
    } else if ctx & IN_PREPARE != 0 {
        "between an AM Prepare and its Commit"
    } else {
        "while holding a handler-safe lock"
    };
    panic!("gex::{call}: communication is not allowed {place} (GASNet-EX spec, \"Calls from restricted context\")")
}

/// True while this thread runs an AM handler.
#[inline]
pub fn in_handler() -> bool {
    context() & IN_HANDLER != 0
}

/// Marks this thread as running a handler until the guard drops.
pub(crate) struct HandlerScope {
    saved: u32,
}

impl HandlerScope {
    pub fn enter(is_request: bool) -> HandlerScope {
        let saved = context();
        let bits = IN_HANDLER | if is_request { IN_REQUEST_HANDLER } else { 0 };
        set_context(saved | bits);
        HandlerScope { saved }
    }
}

impl Drop for HandlerScope {
    fn drop(&mut self) {
        set_context(self.saved);
    }
}

/// Marks the interval between an AM Prepare and its Commit.
pub(crate) fn enter_prepare(call: &str) {
    let ctx = context();
    if ctx & IN_PREPARE != 0 {
        panic!("gex::{call}: Prepare/Commit pairs do not nest (GASNet-EX spec, negotiated-payload AMs)");
    }
    set_context(ctx | IN_PREPARE);
}

pub(crate) fn leave_prepare() {
    set_context(context() & !IN_PREPARE);
}

/// True while this thread holds a handler-safe lock.
pub(crate) fn holding_hsl() -> bool {
    context() >= HSL_UNIT
}

pub(crate) fn hsl_acquired() {
    set_context(context() + HSL_UNIT);
}

pub(crate) fn hsl_released() {
    set_context(context().saturating_sub(HSL_UNIT));
}

/// Polls for and runs incoming Active Messages (GASNet-EX `gex_AM_Poll`).
///
/// Prohibited in handler context and while holding a handler-safe lock.
#[track_caller]
pub fn poll() {
    let rt = runtime("poll");
    check_may_communicate("poll");
    let span = crate::instrument::gasp_span!(GASP_GEX_POLL, crate::instrument::NONE);
    rt.progress();
    crate::instrument::gasp_end!(span, crate::instrument::NONE);
}

/// [`poll`] without its own GASP event, for a runtime built on gex whose progress call
/// is the operation a tool should see (UPC++'s internal progress); the handlers it runs
/// report as under [`poll`]. Prohibited where [`poll`] is.
#[inline]
#[track_caller]
pub fn poll_unreported() {
    let rt = runtime("poll");
    check_may_communicate("poll");
    rt.progress();
}

/// How a waiting loop backs off while nothing happens: it spins for a few polls (a
/// reply from a rank on another core arrives within a microsecond), then yields the
/// processor between polls (another rank of an oversubscribed job may need it), and
/// after about a millisecond of idleness sleeps briefly between polls, so idle ranks
/// (waiting in a barrier, say) leave the cores to the ranks that are working.
#[derive(Debug, Default)]
pub struct Backoff {
    idle: u32,
}

impl Backoff {
    const SPINS: u32 = 64;
    const YIELDS: u32 = 64 + 2000;
    const NAP: std::time::Duration = std::time::Duration::from_micros(50);

    pub const fn new() -> Backoff {
        Backoff { idle: 0 }
    }

    /// Something happened: start over with spinning.
    #[inline]
    pub fn reset(&mut self) {
        self.idle = 0;
    }

    /// Nothing happened in the last poll: wait a little before the next one.
    #[inline]
    pub fn snooze(&mut self) {
        self.idle = self.idle.saturating_add(1);
        if self.idle < Self::SPINS {
            std::hint::spin_loop();
        } else if self.idle < Self::YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Self::NAP);
        }
    }
}

impl Runtime {
    /// Runs arrived messages of both networks and advances split-phase operations.
    #[inline]
    pub(crate) fn progress(&self) -> usize {
        let n = self.conduit.poll(true, &mut |msg| crate::am::dispatch(msg));
        if self.barrier.active() {
            crate::barrier::advance(self);
        }
        n
    }

    /// Runs arrived Replies only: used by a Request handler blocked on sending its
    /// Reply, which must not start other Request handlers.
    pub(crate) fn progress_replies(&self) -> usize {
        self.conduit
            .poll(false, &mut |msg| crate::am::dispatch(msg))
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

    /// One step of backing off in a wait loop.
    pub(crate) fn idle(&self, backoff: &mut Backoff) {
        if self.conduit.aborted() {
            // The launcher is tearing the job down; it already reported why.
            std::process::exit(1);
        }
        backoff.snooze();
    }
}
