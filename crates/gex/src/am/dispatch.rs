//! Running an arrived message: find its handler, check the registration's promises, and
//! call it in handler context. [`dispatch`] is what the composition root hands to the
//! runtime for progress to call.

use std::cell::Cell;

use super::handler::{AmEntry, HandlerFn, Token};
#[cfg(feature = "gasp")]
use super::reported::category_arg;
use super::table::HANDLERS;
use crate::conduit::{Inbound, Network};
use crate::context::HandlerScope;
use crate::runtime::{try_runtime, Runtime};

/// Runs one arrived message: finds its handler, checks the registration's promises,
/// and calls it in handler context.
pub(crate) fn dispatch(msg: &Inbound<'_>) {
    let rt = try_runtime().expect("messages are dispatched after init");
    if msg.handler == 0 {
        return; // an abandoned negotiated-payload slot
    }
    let Some(entry) = HANDLERS.get(msg.handler) else {
        handler_error(msg, "no handler is registered at this index");
    };
    if !entry.accepts(msg.category, msg.network) {
        handler_error(
            msg,
            "the handler was not registered for this category of message",
        );
    }
    if entry.nargs != msg.args.len() {
        handler_error(msg, "the number of arguments differs from the registration");
    }
    #[cfg(feature = "gasp")]
    if gasp::enabled() && HANDLERS.reported(msg.handler) {
        return run_reported(rt, msg, entry);
    }
    run::<false>(rt, msg, entry);
}

/// The reported instance of [`run`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation).
#[cfg(feature = "gasp")]
#[cold]
#[inline(never)]
fn run_reported(rt: &'static Runtime, msg: &Inbound<'_>, entry: &'static AmEntry) {
    run::<true>(rt, msg, entry);
}

/// Calls the handler of `msg` in handler context, reporting its GASP event if `REPORT`.
#[inline(always)]
fn run<const REPORT: bool>(rt: &'static Runtime, msg: &Inbound<'_>, entry: &'static AmEntry) {
    let token = Token {
        rt,
        msg,
        entry,
        replied: Cell::new(false),
    };
    let _scope = HandlerScope::enter(msg.network == Network::Request, entry.name);
    // The handler's registration is its call site (the sender's is on another rank).
    #[cfg(feature = "gasp")]
    let span = REPORT.then(|| {
        gasp::instrument::Opened::open(
            HANDLERS.site(msg.handler),
            gasp::events::args::GASP_GEX_AM_HANDLER.start(
                msg.src,
                i32::from(msg.handler),
                category_arg(msg.category),
                msg.payload.len(),
            ),
        )
    });
    match entry.handler {
        HandlerFn::Short(f) => f(&token, msg.args),
        HandlerFn::Payload(f) => f(&token, msg.payload, msg.args),
    }
    #[cfg(feature = "gasp")]
    if let Some(span) = span {
        let event = span.event();
        span.end(event.end(
            msg.src,
            i32::from(msg.handler),
            category_arg(msg.category),
            msg.payload.len(),
        ));
    }
}

#[cold]
fn handler_error(msg: &Inbound<'_>, why: &str) -> ! {
    let name = HANDLERS.get(msg.handler).map_or("?", |e| e.name);
    panic!(
        "gex: AM {:?} {:?} from rank {} for handler {} ({name}) with {} args: {why}",
        msg.category,
        msg.network,
        msg.src,
        msg.handler,
        msg.args.len()
    )
}
