//! The rules of restricted contexts (GASNet-EX spec, "Calls from restricted context").
//!
//! Some contexts are *restricted*: inside an AM handler, while holding a handler-safe
//! lock, and between a Prepare and its Commit. There, communication, polling and waiting
//! are prohibited; only Replies from a Request handler (at most one) are allowed. We
//! track the context per thread and fail such a call with a message naming it, instead
//! of deadlocking later.
//!
//! A leaf: one thread-local word, read by every communication call.

use std::cell::Cell;

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

#[inline]
fn set_context(v: u32) {
    CONTEXT.with(|c| c.set(v))
}

/// Fails a communication call made from a restricted context, naming it `gex::{call}`.
/// Public (through `layered`) for a runtime that carries some operations itself,
/// without gex (UPC++ RPCs to the caller's own rank): they fail where a send would.
#[inline]
#[track_caller]
pub fn check_may_communicate(call: &str) {
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
    /// The handler's registered name, for the check at its end.
    name: &'static str,
}

impl HandlerScope {
    pub(crate) fn enter(is_request: bool, name: &'static str) -> HandlerScope {
        let saved = context();
        let bits = IN_HANDLER | if is_request { IN_REQUEST_HANDLER } else { 0 };
        set_context(saved | bits);
        HandlerScope { saved, name }
    }
}

impl Drop for HandlerScope {
    /// Leaves the handler's context, and fails if the handler returned holding an HSL
    /// it took or between a Prepare and its Commit: the restriction would otherwise be
    /// forgotten with the lock still held or the slot still claimed (the spec's
    /// handlers release what they take, and a Prepare is consumed by its Commit).
    fn drop(&mut self) {
        const HANDLER_BITS: u32 = IN_HANDLER | IN_REQUEST_HANDLER;
        let now = context();
        set_context(self.saved);
        if now & !HANDLER_BITS != self.saved & !HANDLER_BITS && !std::thread::panicking() {
            handler_kept(self.name, now);
        }
    }
}

#[cold]
fn handler_kept(name: &str, now: u32) -> ! {
    let what = if now & IN_PREPARE != 0 {
        "between an AM Prepare and its Commit"
    } else {
        "holding a handler-safe lock it took"
    };
    panic!(
        "gex: AM handler {name} returned {what}; a handler must release what it takes \
         (GASNet-EX spec, \"Calls from restricted context\")"
    )
}

/// Marks the interval between an AM Prepare and its Commit.
#[inline]
pub(crate) fn enter_prepare(call: &str) {
    let ctx = context();
    if ctx & IN_PREPARE != 0 {
        nested_prepare(call);
    }
    set_context(ctx | IN_PREPARE);
}

#[cold]
#[track_caller]
fn nested_prepare(call: &str) -> ! {
    panic!(
        "gex::{call}: Prepare/Commit pairs do not nest (GASNet-EX spec, negotiated-payload AMs)"
    );
}

#[inline]
pub(crate) fn leave_prepare() {
    set_context(context() & !IN_PREPARE);
}

/// The thread counts as between an AM Prepare and its Commit until this is dropped: for
/// a runtime above gex that serializes a message where no network slot is claimed (one
/// to its own rank), so that communicating meanwhile fails as it would while
/// serializing into a slot. `call` names the operation if such scopes are nested.
#[must_use]
pub struct PrepareScope(());

impl PrepareScope {
    /// Enters the scope.
    ///
    /// # Panics
    /// Inside another Prepare/Commit pair or scope.
    #[inline]
    #[track_caller]
    pub fn enter(call: &str) -> PrepareScope {
        enter_prepare(call);
        PrepareScope(())
    }
}

impl Drop for PrepareScope {
    #[inline]
    fn drop(&mut self) {
        leave_prepare();
    }
}

/// True while this thread holds a handler-safe lock.
pub(crate) fn holding_hsl() -> bool {
    context() >= HSL_UNIT
}

/// True between an AM Prepare (or a [`PrepareScope`]) and its end.
pub(crate) fn in_prepare() -> bool {
    context() & IN_PREPARE != 0
}

pub(crate) fn hsl_acquired() {
    set_context(context() + HSL_UNIT);
}

pub(crate) fn hsl_released() {
    set_context(context().saturating_sub(HSL_UNIT));
}
