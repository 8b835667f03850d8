//! The completion-object protocol: how a communication call arms the completion
//! objects it is given, reports its events to them, and computes what it returns
//! (§7.2). Sits on the events and the future lists, and defers notifications to the
//! thread's next user-level progress.

use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::events::{CompletionEvents, OPERATION_EVENT, REMOTE_EVENT};
use crate::future::list::FutureList;
use crate::runtime::state::Rank;
use crate::thread;

/// A completion object that call `Ev` accepts: how the call reports its events, and
/// what it returns (§7.2.2). See the [module documentation](crate::completion).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a completion object that `{Ev}` accepts",
    note = "build completion objects with `source_cx`, `remote_cx` and `operation_cx`, \
            join them with `|`, and request only the events the call provides (UPC++ \
            spec §7.2.1)"
)]
pub trait Completions<Ev: CompletionEvents>: Sized {
    /// The futures this object produces, in `|` order.
    type Futures: FutureList;
    /// The state kept while the operation is in flight (see [`Completions::arm`]).
    type Armed: Armed<Ev>;
    /// The events requested: a mask of [`SOURCE_EVENT`](crate::completion::SOURCE_EVENT), [`REMOTE_EVENT`],
    /// [`OPERATION_EVENT`].
    const EVENTS: u8;
    /// Whether a request asks for source completion before the call returns
    /// (`source_cx::as_buffered`, `as_blocking`, §7.1 ¶11–¶12): a call that could read
    /// its source after returning (a put from memory lent to it) finishes with the source
    /// first.
    const SOURCE_AT_RETURN: bool = false;

    /// Prepares the notifications of an operation whose events will occur later:
    /// returns the futures and the state to notify as they do. Adds a dependency to
    /// every promise named (§7.1 ¶8).
    ///
    /// # Panics
    /// If a promise named has a dependency count of zero (§7.2.1 ¶3).
    fn arm(self) -> (Self::Futures, Self::Armed);

    /// Panics as [`Completions::arm`] would (a promise already ready), without arming
    /// anything: for a call that must fail before its data move and then completes at
    /// initiation ([`Completions::completed_at_initiation`]).
    #[inline]
    #[track_caller]
    fn check_armable(&self) {}

    /// Every event of the operation (to `target`) occurred inside the initiating call,
    /// with operation values `values`: queues the notifications for this thread's next
    /// user-level progress (sending any remote RPC now) and returns the futures.
    #[inline]
    fn completed_at_initiation(self, target: Rank, values: Ev::OpValues) -> Self::Futures {
        let (futures, mut armed) = self.arm();
        armed.source_done();
        armed.remote_done(target);
        armed.operation_done(values);
        futures
    }
}

/// What a call returns for completion object `C` (UPC++'s `RType`, §7.2.2).
pub type Returned<C, Ev> = <<C as Completions<Ev>>::Futures as FutureList>::Return;

/// The notifications of an operation in flight. Each method is called once, on the
/// initiating thread, when its event has occurred (operation last); the notifications
/// are queued for this thread's next user-level progress, except remote RPCs, which
/// are sent at once.
pub trait Armed<Ev: CompletionEvents>: 'static {
    /// Source completion occurred: the source-side resources are no longer in use
    /// (§7.1 ¶2). Queues the source-completion notifications.
    fn source_done(&mut self);
    /// Remote completion occurred: the data have been deposited on `target` (§7.1 ¶3).
    /// Sends the remote-completion RPCs (`remote_cx::as_rpc`), to run on the master
    /// persona of `target` (§7.1 ¶10).
    fn remote_done(&mut self, target: Rank);
    /// Operation completion occurred, producing `values` (§7.1 ¶4): the operation is
    /// complete from the viewpoint of the initiator. Queues the operation-completion
    /// notifications, which receive the values.
    fn operation_done(self, values: Ev::OpValues);
    /// The operation never started: its call failed after arming. Gives back what
    /// arming took from the program (a promise's dependency) and notifies nothing.
    fn abandon(self)
    where
        Self: Sized,
    {
    }
}

impl<Ev: CompletionEvents> Armed<Ev> for () {
    #[inline]
    fn source_done(&mut self) {}
    #[inline]
    fn remote_done(&mut self, _target: Rank) {}
    #[inline]
    fn operation_done(self, _values: Ev::OpValues) {}
}

impl<Ev: CompletionEvents, A: Armed<Ev>, B: Armed<Ev>> Armed<Ev> for (A, B)
where
    Ev::OpValues: Clone,
{
    // Where notifications run at once (a promise's callbacks), one that panics (the
    // program may catch it) keeps none of the others from being notified: each
    // runs, and the first panic continues once both did.
    fn source_done(&mut self) {
        let first = catch_unwind(AssertUnwindSafe(|| self.0.source_done()));
        self.1.source_done();
        first.unwrap_or_else(|panic| resume_unwind(panic))
    }
    fn remote_done(&mut self, target: Rank) {
        let first = catch_unwind(AssertUnwindSafe(|| self.0.remote_done(target)));
        self.1.remote_done(target);
        first.unwrap_or_else(|panic| resume_unwind(panic))
    }
    fn operation_done(self, values: Ev::OpValues) {
        let (a, b) = self;
        let copy = values.clone();
        let first = catch_unwind(AssertUnwindSafe(|| a.operation_done(copy)));
        b.operation_done(values);
        first.unwrap_or_else(|panic| resume_unwind(panic))
    }
    fn abandon(self) {
        self.0.abandon();
        self.1.abandon();
    }
}

/// Runs `start`, the checks and start of an operation whose completions `armed` are;
/// if it unwinds (a check failed), abandons them ([`Armed::abandon`]), so that a failed
/// call leaves no promise waiting on a dependency and no reply cell behind.
#[track_caller]
pub(crate) fn start_armed<Ev, A, R>(armed: A, start: impl FnOnce() -> R) -> (A, R)
where
    Ev: CompletionEvents,
    A: Armed<Ev>,
{
    struct AbandonOnUnwind<Ev: CompletionEvents, A: Armed<Ev>>(Option<A>, PhantomData<fn(Ev)>);
    impl<Ev: CompletionEvents, A: Armed<Ev>> Drop for AbandonOnUnwind<Ev, A> {
        fn drop(&mut self) {
            if let Some(armed) = self.0.take() {
                armed.abandon();
            }
        }
    }
    let mut guard = AbandonOnUnwind::<Ev, A>(Some(armed), PhantomData);
    let started = start();
    let armed = guard.0.take().expect("taken only here or by the unwind");
    (armed, started)
}

/// True if `C` requests operation or remote completion, as §7.2.1 ¶2 requires of a
/// call that provides either. Calls assert it at compile time.
pub const fn requests_op_or_remote<Ev: CompletionEvents, C: Completions<Ev>>() -> bool {
    C::EVENTS & (REMOTE_EVENT | OPERATION_EVENT) != 0
}

/// Runs `armed`'s remote and operation notifications once `done()` is true, testing
/// at each user-level progress of this thread: for operations that finish after their
/// initiating call returns and may wait for other ranks (collectives). `values` gives
/// the operation's values then. They are notified in the progress that finds the
/// operation complete (`thread::track_awaited`).
pub(crate) fn notify_when<Ev, A, D, V>(done: D, target: Rank, armed: A, values: V)
where
    Ev: CompletionEvents,
    A: Armed<Ev>,
    D: FnMut() -> bool + 'static,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    thread::track_awaited(tracker(done, target, armed, values));
}

/// [`notify_when`] for an operation that needs only this thread's progress to
/// complete, such as a put the network finishes later: it is tracked as outgoing work
/// of this thread (`progress_required` is true until it completes), tested at each
/// user-level progress and by `discharge`. The test sends remote notifications and
/// queues the local ones for user-level progress, so it runs no user code. An
/// operation that waits for other ranks must not be tracked: `discharge` would wait
/// for them.
pub(crate) fn notify_when_outgoing<Ev, A, D, V>(done: D, target: Rank, armed: A, values: V)
where
    Ev: CompletionEvents,
    A: Armed<Ev>,
    D: FnMut() -> bool + 'static,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    thread::track_outgoing(tracker(done, target, armed, values));
}

/// The test of a tracked operation: once `done()` is true, runs `armed`'s remote and
/// operation notifications (with `values()`) and returns true, then and after.
fn tracker<Ev, A, D, V>(mut done: D, target: Rank, armed: A, values: V) -> thread::Tracked
where
    Ev: CompletionEvents,
    A: Armed<Ev>,
    D: FnMut() -> bool + 'static,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    let mut armed = Some((armed, values));
    Box::new(move || {
        if !done() {
            return false;
        }
        if let Some((mut armed, values)) = armed.take() {
            armed.remote_done(target);
            // Making the values may drop what the operation kept, user code included
            // (a reduction's operation).
            let values = thread::run_as_callback(values);
            armed.operation_done(values);
        }
        true
    })
}

/// [`notify_when_outgoing`] for an operation whose source completion may also come after
/// the initiating call (a put from memory the caller keeps): `source()` says whether
/// the source-side resources are free, and is tested until it is, before `done()`.
pub(crate) fn notify_when_outgoing_from_source<Ev, A, S, D, V>(
    mut source: S,
    mut done: D,
    target: Rank,
    mut armed: A,
    values: V,
) where
    Ev: CompletionEvents,
    A: Armed<Ev>,
    S: FnMut() -> bool + 'static,
    D: FnMut() -> bool + 'static,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    if source() {
        armed.source_done();
        return notify_when_outgoing(done, target, armed, values);
    }
    let mut armed = Some((armed, values));
    let mut source_done = false;
    thread::track_outgoing(Box::new(move || {
        if !source_done {
            if !source() {
                return false;
            }
            source_done = true;
            if let Some((armed, _)) = armed.as_mut() {
                armed.source_done();
            }
        }
        if !done() {
            return false;
        }
        if let Some((mut armed, values)) = armed.take() {
            armed.remote_done(target);
            armed.operation_done(values());
        }
        true
    }));
}
