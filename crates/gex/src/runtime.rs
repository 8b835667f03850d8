//! The process-wide state of the communication layer, created once by `Client::init`.
//!
//! It holds what every operation reaches: the conduit, and what progress must run
//! besides the conduit's poll. It knows nothing of the parts that register there (the
//! AM dispatcher, the barrier): the composition root, client initialization
//! (`init.rs`), hands them in, so this module sits below all of them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::conduit::{Inbound, Selected};

/// Work that progress advances while something is under way (a split-phase barrier, and
/// later the collectives): called on every poll while any registrant says it is active.
pub(crate) type Advance = fn(&Runtime);

/// Process-wide state of the communication layer. See the module documentation.
pub(crate) struct Runtime {
    /// The transport.
    pub(crate) conduit: Selected,
    /// Runs one arrived message (the AM layer's dispatcher).
    pub(crate) dispatch: fn(&Inbound<'_>),
    /// What progress advances besides running messages, each with how much work it
    /// has under way: progress calls only those with work. There are few registrants,
    /// so an idle poll pays one load each, and announcing work changes only the
    /// registrant's own word.
    pub(crate) advance: Box<[(Advance, AtomicUsize)]>,
    /// Whether this rank has finalized (or exited): no message may be sent from here
    /// on, and none that needs an answer would get one.
    pub(crate) finalized: AtomicBool,
}

impl Runtime {
    pub(crate) fn new(
        conduit: Selected,
        dispatch: fn(&Inbound<'_>),
        advance: Vec<Advance>,
    ) -> Runtime {
        Runtime {
            conduit,
            dispatch,
            advance: advance
                .into_iter()
                .map(|f| (f, AtomicUsize::new(0)))
                .collect(),
            finalized: AtomicBool::new(false),
        }
    }

    /// Registrant `f` started work that progress must advance.
    pub(crate) fn start_advancing(&self, f: Advance) {
        self.registered(f).fetch_add(1, Ordering::Relaxed);
    }

    /// Registrant `f` finished the work it announced.
    pub(crate) fn stop_advancing(&self, f: Advance) {
        self.registered(f).fetch_sub(1, Ordering::Relaxed);
    }

    /// Registrant `f` has work under way, or none: for a registrant that counts its
    /// work itself under a lock of its own, so that announcing it is a plain store
    /// rather than a locked read-modify-write. Not to be mixed with
    /// [`start_advancing`](Self::start_advancing) for the same registrant.
    #[inline]
    pub(crate) fn set_advancing(&self, f: Advance, busy: bool) {
        self.registered(f)
            .store(usize::from(busy), Ordering::Relaxed);
    }

    #[inline]
    fn registered(&self, f: Advance) -> &AtomicUsize {
        self.advance
            .iter()
            .find(|(g, _)| std::ptr::fn_addr_eq(*g, f))
            .map(|(_, n)| n)
            .expect("the composition root registered it")
    }
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, or a panic naming `call` if `Client::init` has not run or this rank has
/// finalized.
#[inline]
#[track_caller]
pub(crate) fn runtime(call: &str) -> &'static Runtime {
    match RUNTIME.get() {
        Some(rt) if !rt.finalized.load(std::sync::atomic::Ordering::Relaxed) => rt,
        Some(_) => finalized(call),
        None => not_initialized(call),
    }
}

#[cold]
#[track_caller]
fn finalized(call: &str) -> ! {
    panic!("gex::{call}: called after Client::finalize (or gex::exit): the communication layer is gone")
}

#[cold]
#[track_caller]
fn not_initialized(call: &str) -> ! {
    panic!("gex::{call}: the communication layer is not initialized (call gex::Client::init first)")
}

/// The runtime, if `Client::init` has run.
pub(crate) fn try_runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// Makes `rt` the process's runtime (once).
pub(crate) fn install(rt: Runtime) -> &'static Runtime {
    if RUNTIME.set(rt).is_err() {
        panic!("gex::Client::init: a client already exists in this process");
    }
    RUNTIME.get().expect("just set")
}
