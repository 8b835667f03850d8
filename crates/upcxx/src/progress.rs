//! User-level progress (UPC++ spec ch. 10, §10.1–§10.3): on top of personas and RPC
//! delivery.
//!
//! * **Progress levels** (§10.1): internal progress polls the network (incoming RPCs are
//!   queued, handlers run); user-level progress additionally runs what is owed to the
//!   personas this thread holds: queued LPCs and RPCs, and completion notifications. It
//!   happens only inside UPC++ calls (`progress`, `wait`, and calls documented so).
//! * **Restricted context** (§10.2): the callbacks progress runs may not wait or make
//!   user-level progress themselves (the rule and its check are in `thread.rs`).
//!
//! Progress calls down: into the per-thread state (`thread.rs`: epoch, work flags,
//! deferred notifications, the loans of RPCs run), into personas (the LPC queues of
//! those this thread holds) and into RPC delivery (replies forwarded by other threads,
//! the master persona's RPCs). Nothing below calls into it, with one exception, the
//! **futures ↔ progress knot**: waiting on a future makes progress (`Future::wait`
//! calls [`wait_until`], [`progress_past`] and [`wait_past`]), and progress fulfils
//! futures (the callbacks it runs ready them). The second direction goes through boxed
//! callbacks queued on the thread or on personas, so this module imports nothing from
//! `future`.
//!
//! # What progress costs
//!
//! User-level progress is made often (every `wait` makes at least one), so the case
//! where nothing is owed to the thread is kept to a few thread-local cells and one
//! shared word, without locks or allocation:
//!
//! * work that the thread's own calls and handlers queue for it (deferred
//!   notifications, RPCs that its handlers copied for the master persona it holds,
//!   loans to end) sets a thread-local flag;
//! * work that other threads queue where this thread must find it (LPCs, RPCs and
//!   replies received by other threads' polls) bumps one shared counter, and a thread
//!   looks at those queues only when the counter moved since it last did.
//!
//! The futures of operations complete at initiation (shared-memory RMA) need only the
//! next user-level progress to turn ready. A wait on one makes it without polling the
//! network, except every 32nd time, which keeps a loop of such waits attentive to
//! incoming messages (§10.3) while the poll, which costs more than the whole operation,
//! is mostly skipped. `progress()` always polls.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use crate::persona::{drain_held_personas, PersonaScopeRef};
use crate::rpc::{deliver_forwarded_replies, run_master_rpcs};
use crate::thread::{
    self, check_not_restricted, run_deferred, ThreadState, AWAITED_WORK, DEFERRED_WORK, LOAN_WORK,
    OUTGOING_WORK, RPC_WORK, SHARED_WORK, THREAD,
};

/// The level of progress a call makes (UPC++ `progress_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressLevel {
    /// Advance communication only; never run user callbacks.
    Internal,
    /// Also run callbacks, LPCs and RPCs owed to this thread's personas.
    User,
}

/// How many of the user-level progress calls made by waits on already completed
/// operations skip polling the network in a row (see [`progress_past`]).
const POLL_SKIPS: u32 = 31;

/// Makes progress (UPC++ `progress`). `ProgressLevel::User` also runs the callbacks,
/// LPCs and RPCs owed to the personas this thread holds; in the restricted context,
/// where user-level progress "may result in a no-op" (§10.2 ¶2), it makes internal
/// progress only (waiting there, which would spin on such no-ops, is refused).
#[track_caller]
pub fn progress(level: ProgressLevel) {
    crate::runtime::state::check_init("progress");
    if crate::reported::enabled() {
        progress_reported(level);
    } else {
        progress_at(level);
    }
}

#[inline]
#[track_caller]
fn progress_at(level: ProgressLevel) {
    match level {
        ProgressLevel::Internal => {
            internal_progress_advancing();
        }
        ProgressLevel::User if thread::in_restricted_context() => {
            internal_progress_advancing();
        }
        ProgressLevel::User => {
            let worked = user_progress() > 0;
            polite(worked);
        }
    }
}

/// Idle `progress(User)` calls in a row after which, on an oversubscribed host, each
/// idle call yields the processor.
const IDLE_BEFORE_YIELD: u32 = 64;

thread_local! {
    /// `progress(User)` calls in a row that found nothing to do.
    static IDLE_CALLS: Cell<u32> = const { Cell::new(0) };
}

/// Makes a program's own waiting loop (`while !flag { progress(User) }`) polite when
/// this host runs more ranks than it has processors: after [`IDLE_BEFORE_YIELD`] idle
/// calls in a row, each idle call yields, so the rank whose message is awaited gets the
/// processor instead of waiting for the spinner's time slice to end. Waits inside the
/// library back off on their own (`wait_until`); with a processor per rank, nothing
/// changes.
#[inline]
fn polite(worked: bool) {
    if worked {
        IDLE_CALLS.set(0);
        return;
    }
    let idle = IDLE_CALLS.get().saturating_add(1);
    IDLE_CALLS.set(idle);
    if idle > IDLE_BEFORE_YIELD && gex::layered::oversubscribed() {
        std::thread::yield_now();
    }
}

/// The reported instance of [`progress`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation).
#[cold]
#[inline(never)]
#[track_caller]
fn progress_reported(level: ProgressLevel) {
    let level_arg = i32::from(level == ProgressLevel::User);
    let span = gasp::span!(GASP_UPCXX_PROGRESS, level_arg);
    progress_at(level);
    gasp::end!(span, level_arg);
}

/// The runtime's own poll. It reports nothing to a GASP tool, and needs no guard for
/// that: the poll itself is gex's unreported one, and upcxx registers its AM handlers
/// unreported (`rpc::wire`), so neither their runs nor the messages they send are
/// events, and a guard around the poll would hide nothing. Returns how many messages
/// the poll handled.
#[inline]
pub(crate) fn internal_progress() -> usize {
    if gex::layered::in_handler() {
        0
    } else {
        crate::rpc::send_unsent();
        gex::layered::poll_unreported()
    }
}

/// Internal progress as a program asks for it (`progress(Internal)`, `discharge`): the
/// poll, then the operations this thread tracks ([`thread::track_outgoing`]), whose
/// notifications wait for user-level progress. So `progress_required` turns false under
/// `while progress_required() { progress(Internal) }`, §10.3 ¶6's form of `discharge`.
/// Returns how many messages the poll handled plus how many operations completed.
fn internal_progress_advancing() -> usize {
    let n = internal_progress();
    if thread::outgoing_pending() {
        n + thread::advance_outgoing()
    } else {
        n
    }
}

/// Internal progress, then everything owed to this thread's personas. Returns how many
/// messages the poll handled plus how many callbacks, LPCs and RPCs ran: 0 when it
/// found nothing to do. Messages count on their own: a reply's handler delivers it
/// into its future's cell and leaves nothing to run, and a wait that took a stream of
/// replies for idleness would back off into sleeps while its peer's replies queue up.
pub(crate) fn user_progress() -> usize {
    let n = internal_progress() + user_actions();
    // The replies and RPCs that the callbacks sent leave now, not at the next call.
    crate::rpc::send_unsent();
    n
}

/// Makes sure this thread made a user-level progress since epoch `epoch`, in which an
/// operation completed whose future it readies (every shared-memory RMA): a wait on
/// that future (`call`) needs exactly that.
///
/// Such a progress does everything [`user_progress`] does, but when nothing is queued
/// for this thread it polls the network only every `POLL_SKIPS + 1`-th time: nothing
/// the poll could find concerns the awaited future, and the poll would cost more than
/// the whole operation, while polling every so often keeps a loop of such waits
/// attentive to incoming messages (§10.3). The common case is then a few thread-local
/// cells and one shared word.
///
/// # Panics
/// In the restricted context, if a progress is needed.
#[inline]
#[track_caller]
pub(crate) fn progress_past(epoch: u64, call: &str) {
    past::<false>(epoch, call);
}

/// [`progress_past`] for `Future::wait` on a future that completed in `epoch`: when a
/// progress is needed and a GASP tool is attached, it is reported as the wait's
/// `GASP_UPCXX_FUTURE_WAIT` event. That costs the common path nothing: while a tool is
/// attached, `ThreadState::poll_skips` stays 0, so every such progress takes the out-of-line
/// path, which tests the flag (and skips polls by a counter of its own).
#[inline(always)]
#[track_caller]
pub(crate) fn wait_past(epoch: u64) {
    past::<true>(epoch, "Future::wait");
}

#[inline(always)]
#[track_caller]
fn past<const WAIT: bool>(epoch: u64, call: &str) {
    let shared = SHARED_WORK.load(Ordering::Acquire);
    let done = THREAD.with(|h| h.epoch.get() > epoch || skip_poll(h, &h.poll_skips, shared));
    if !done {
        full_progress_past(WAIT, call);
    }
}

/// Counts a user-level progress with nothing to run, which skips the network poll, if
/// `skips` allows one more skip and nothing is queued for this thread (`shared`: the
/// current [`SHARED_WORK`]). False if a full progress is needed.
#[inline(always)]
fn skip_poll(h: &ThreadState, skips: &Cell<u32>, shared: u64) -> bool {
    let left = skips.get();
    if left == 0
        || h.work.get() != 0
        || h.restricted.get() != 0
        || h.seen_shared.get() != shared
        || crate::rpc::unsent()
    {
        return false;
    }
    skips.set(left - 1);
    h.epoch.set(h.epoch.get() + 1);
    true
}

#[cold]
#[track_caller]
fn full_progress_past(wait: bool, call: &str) {
    if crate::reported::enabled() {
        return progress_past_reported(wait, call);
    }
    check_not_restricted(call);
    THREAD.with(|h| h.poll_skips.set(POLL_SKIPS));
    user_progress();
}

/// The reported instance of [`full_progress_past`] (see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation)): the wait's event
/// (`wait`) around the progress, which skips polls as [`progress_past`] does, counting
/// in a cell of its own.
#[cold]
#[inline(never)]
#[track_caller]
fn progress_past_reported(wait: bool, call: &str) {
    thread_local! {
        static TOOL_SKIPS: Cell<u32> = const { Cell::new(0) };
    }
    let progress = || {
        let shared = SHARED_WORK.load(Ordering::Acquire);
        if !TOOL_SKIPS.with(|skips| THREAD.with(|h| skip_poll(h, skips, shared))) {
            check_not_restricted(call);
            TOOL_SKIPS.with(|skips| skips.set(POLL_SKIPS));
            user_progress();
        }
    };
    if wait {
        let span = gasp::span_if!(true, GASP_UPCXX_FUTURE_WAIT);
        progress();
        gasp::end!(span);
    } else {
        progress();
    }
}

/// The user-level part of progress: replies that arrived through other threads are
/// delivered, the epoch advances (readying the futures of operations completed before
/// this call), the loans of the RPCs run since the last one end (what they were lent is
/// dropped, before the notifications queued earlier run: the spec orders neither), the
/// operations this thread tracks are tested (`thread::advance_tracked_notifying`), those
/// found complete notifying at once, then run, in the restricted context, the
/// notifications queued on this thread, the RPCs of
/// the master persona if this thread holds it, and the LPCs queued on each persona the
/// thread holds, top first. What the callbacks queue runs in a later progress call,
/// except LPCs to held personas queued before those are drained and what the
/// notifications of tracked operations queue, which runs with this call's queue.
///
/// With nothing queued this reads a few thread-local cells and one shared word: work
/// queued by this thread's own handlers and calls is flagged in `ThreadState::work`, and work
/// queued by other threads bumps [`SHARED_WORK`].
#[inline]
fn user_actions() -> usize {
    let shared = SHARED_WORK.load(Ordering::Acquire);
    let look = THREAD.with(|h| h.seen_shared.replace(shared) != shared);
    if look {
        deliver_forwarded_replies();
    }
    let (mut work, master) = THREAD.with(|h| {
        h.epoch.set(h.epoch.get() + 1);
        (h.work.replace(0), h.holds_master.get())
    });
    if work & LOAN_WORK != 0 {
        // Before any callback runs, so that a panicking one cannot lose the flag while
        // the loans stay marked (the next loan would not set it again); the other bits
        // go back meanwhile, so that a panicking drop of what was lent loses no work.
        THREAD.with(|h| h.work.set(h.work.get() | work & !LOAN_WORK));
        thread::restricted(thread::end_loans);
        work = THREAD.with(|h| h.work.replace(0));
    }
    let mut n = 0;
    const TRACKED: u8 = OUTGOING_WORK | AWAITED_WORK;
    if work & TRACKED != 0 {
        // First, so that the notifications of the operations that completed (found by
        // the poll just made) run in this progress, not in the next one after another
        // poll: a promise's at once, others below. The other bits go back meanwhile,
        // so that a panicking notification loses none of them (nor the lists' flags).
        THREAD.with(|h| h.work.set(h.work.get() | work & !TRACKED));
        n += thread::advance_tracked_notifying(work);
        // That work, and what the notifications queued, runs below; the lists' flags
        // for the operations still in flight, and loans, are the next progress's.
        const NEXT: u8 = TRACKED | LOAN_WORK;
        work = THREAD.with(|h| {
            let queued = h.work.get();
            h.work.set(queued & NEXT);
            queued & !NEXT
        });
    }
    // A callback run below may panic, and the program catch it: the work it would have
    // left undone is then flagged again, for the next progress.
    let unwinding = TakenWork { work, look };
    if work & DEFERRED_WORK != 0 {
        n += run_deferred();
    }
    let own_rpcs = work & RPC_WORK != 0;
    // Again: a callback run above may have released the master persona (§10.5.1 ¶33),
    // whose RPCs are then its next holder's to run.
    let master = master && thread::holds_master();
    if master && (own_rpcs || look) {
        n += run_master_rpcs(own_rpcs, look);
    }
    if look {
        n += drain_held_personas();
    }
    std::mem::forget(unwinding);
    n
}

/// The work flags and the look at other threads' queues that a user-level progress
/// took: dropped only if a callback it ran panicked (the normal path forgets it),
/// which puts them back, so that the queues' other entries run at the next progress
/// (a flag spared by the panic only makes that progress look at an empty queue).
struct TakenWork {
    work: u8,
    look: bool,
}

impl Drop for TakenWork {
    fn drop(&mut self) {
        THREAD.with(|h| h.work.set(h.work.get() | self.work));
        if self.look {
            thread::look_again();
        }
    }
}

/// Makes user-level progress until `done` is true: spins briefly, then yields the
/// processor (and, when idle for long, naps) so jobs with more ranks than cores keep moving.
pub(crate) fn wait_until(mut done: impl FnMut() -> bool) {
    let mut backoff = gex::layered::Backoff::new();
    while !done() {
        // Check again before backing off: the progress call may itself have made the
        // awaited future ready (operations complete at initiation notify at the next
        // user-level progress).
        if user_progress() > 0 {
            backoff.reset();
        } else if !done() {
            // Leaves if the job is ending, as gex's waits do.
            gex::layered::idle(&mut backoff);
        } else {
            break;
        }
    }
}

/// Makes user-level progress until `done` is true, at least once even if it already
/// is: for the calls that "will invoke user-level progress, so the caller may expect
/// incoming RPCs to fire before it returns" (`barrier`, §12.2 ¶8; `team::split`,
/// §11.3.1 ¶23), whose operation may be complete at initiation (in a team of one, or
/// when every other member arrived first). Backs off as [`wait_until`].
///
/// When `done` holds at once, it makes the user-level part of a progress only: the
/// callers' initiation, `gex`'s `Team::barrier_nb`, has just polled, on every team.
pub(crate) fn progress_until(mut done: impl FnMut() -> bool) {
    if done() {
        user_actions();
        crate::rpc::send_unsent();
    } else {
        wait_until(done);
    }
}

/// Waits for `event`, a `gex` collective's, making internal-level progress only (the
/// `entry_barrier::internal` of a destroy, the barriers of constructors that make
/// internal progress): this thread's batched RPCs go out first, as internal progress
/// sends them, since `gex`'s wait polls the network only. Other ranks may be waiting
/// for them before they join the collective. Nothing joins a batch while `gex` waits:
/// batches gather a thread's own calls, and replies are sent by user-level progress.
pub(crate) fn wait_internal(event: gex::Event) {
    crate::rpc::send_unsent();
    event.wait();
}

/// A barrier over `team` that makes user-level progress while it waits, at least once
/// ([`progress_until`]).
pub(crate) fn barrier_with_progress(team: &gex::Team) {
    let mut ev = team.barrier_nb();
    progress_until(|| ev.test());
}

/// True if operations started by this thread still need its internal progress before
/// their targets can see them complete (UPC++ `progress_required`, §10.3, §10.5.3), for
/// the personas from the top scope down: see [`progress_required_for`].
///
/// Notifications, LPCs and RPCs already queued for user-level progress do not count:
/// internal progress can do nothing for them, and they are where their recipients'
/// user-level progress finds them. What counts: RPCs and replies this thread gathered
/// into batches and has not sent yet (`rpc/batch.rs`), and operations a network
/// completes later while they are in flight (on shared memory every transfer is
/// delivered when it is started). Pending collectives do not count: one completes only
/// once the other ranks took part, so `discharge` could not wait for it, although this
/// rank's polls may still have to relay its messages as they arrive (the master
/// persona, which alone runs collectives, may answer false while it needs progress,
/// §10.5.3 ¶3): a rank with a collective pending keeps making progress until it
/// completes. Progress level: none.
pub fn progress_required() -> bool {
    thread::outgoing_pending() || crate::rpc::unsent()
}

/// [`progress_required`] for the personas of this thread's stack from scope `ps` to
/// the top (UPC++ `progress_required(ps)`, §10.5.3 ¶1–¶5). Operations are tracked per
/// thread, not per persona, so the answer covers every persona the thread holds: it
/// may be true for operations of a persona below `ps`, never false while one of the
/// personas named needs progress. Progress level: none.
///
/// # Panics
/// If the scope has ended.
#[track_caller]
pub fn progress_required_for(ps: PersonaScopeRef) -> bool {
    ps.personas("progress_required");
    progress_required()
}

/// Makes internal progress until [`progress_required`] is false (UPC++ `discharge`,
/// §10.3 ¶5, §10.5.3 ¶7–¶9): every operation this thread started has gone as far as it
/// can without this thread, so a long computation may follow, except pending
/// collectives, which need this rank's progress until they complete (see
/// [`progress_required`]). It runs no callback, LPC or RPC (progress level: internal),
/// so it may be called in the restricted context.
#[track_caller]
pub fn discharge() {
    crate::runtime::state::check_init("discharge");
    let mut backoff = gex::layered::Backoff::new();
    loop {
        if internal_progress_advancing() > 0 {
            backoff.reset();
        }
        if !progress_required() {
            break;
        }
        gex::layered::idle(&mut backoff);
    }
}

/// [`discharge`] for the personas from scope `ps` to the top (UPC++ `discharge(ps)`):
/// as [`progress_required_for`] says, the same as [`discharge`].
///
/// # Panics
/// Before `init`, or if the scope has ended.
#[track_caller]
pub fn discharge_for(ps: PersonaScopeRef) {
    ps.personas("discharge");
    discharge();
}
