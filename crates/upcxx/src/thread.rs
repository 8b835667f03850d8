//! What upcxx keeps per thread: the thread's token, its user-level progress epoch, its
//! restricted-context depth, whether it holds the master persona, and the signals by
//! which the layers below progress (futures, completions, RPC delivery, personas) tell
//! the thread's next user-level progress what they queued for it.
//!
//! * **Restricted context** (§10.2): callbacks run by user-level progress may not wait
//!   or make user-level progress themselves; doing so fails with a message naming the
//!   call instead of deadlocking. [`restricted`] runs such a callback; the calls that
//!   wait check [`check_not_restricted`].
//! * **Work signals**: work a thread queues for itself (deferred notifications, RPCs its
//!   handlers copied for the master persona it holds, loans to end) sets a flag in its
//!   [`ThreadState`]; work queued where other threads must find it bumps one shared
//!   counter. Progress (`progress.rs`, "What progress costs") reads both.
//!
//! * **Outgoing operations**: operations this thread started that need its progress to
//!   complete (a put the network finishes later) are tracked, so that internal progress
//!   can advance them without running user code (`discharge`, §10.5.3).
//! * **Awaited operations**: collectives, which complete only once the other ranks
//!   took part, are tracked apart: user-level progress alone tests them, and neither
//!   `progress_required` nor `discharge` waits for them (see [`track_awaited`]).
//! * **Loans until the next progress**: what an RPC being run was lent (the handle of
//!   a `&DistObject` or `&Team` argument, `dist_object/by_id.rs`) is kept until the
//!   thread's next user-level progress, which no RPC outlives ([`lend_until_progress`],
//!   [`keep_until_progress`], [`end_loans`]).
//!
//! A leaf module: it imports nothing from the crate, so every layer may signal progress
//! without depending on it.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::LocalKey;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// Bumped after work is queued where any thread may have to find it: an LPC, an RPC in
/// the shared inbox, a reply received by another thread's poll. A thread whose
/// user-level progress sees the value it saw last time skips looking at those queues.
pub(crate) static SHARED_WORK: AtomicU64 = AtomicU64::new(0);

/// A `seen_shared` value [`SHARED_WORK`] never takes: the next progress looks.
const LOOK: u64 = u64::MAX;

/// The per-thread state every progress call reads: plain cells in a `const`-initialized
/// thread-local without a destructor, so reaching it is one memory access.
pub(crate) struct ThreadState {
    /// This thread's token (see [`thread_token`]); 0 until first asked for.
    token: Cell<u64>,
    /// Count of user-level progress calls by this thread.
    pub(crate) epoch: Cell<u64>,
    /// Depth of callbacks being run by user-level progress.
    pub(crate) restricted: Cell<u32>,
    /// What was queued for this thread's next user-level progress by the thread itself:
    /// a mask of [`DEFERRED_WORK`], [`RPC_WORK`], [`OUTGOING_WORK`], [`LOAN_WORK`] and
    /// [`AWAITED_WORK`].
    pub(crate) work: Cell<u8>,
    /// This thread holds the master persona.
    pub(crate) holds_master: Cell<bool>,
    /// Waits on completed operations that may still skip the network poll (see
    /// `progress::progress_past`).
    pub(crate) poll_skips: Cell<u32>,
    /// The value of [`SHARED_WORK`] when this thread last looked at its shared queues.
    pub(crate) seen_shared: Cell<u64>,
    /// User-level progress is advancing this thread's tracked operations, outside any
    /// callback: their notifications may run at once ([`notify`]).
    notify_now: Cell<bool>,
    /// The state of the last entry of `DEFERRED` while that entry is a
    /// [`Deferred::Satisfy`] owed since epoch `tail_epoch` (null otherwise), and the
    /// satisfactions deferred onto it since it was pushed, not yet added to its count:
    /// a deferral onto the same state in the same epoch is a compare and an increment
    /// here, without reaching the queue ([`defer_satisfy`]).
    tail: Cell<*const ()>,
    tail_epoch: Cell<u64>,
    tail_extra: Cell<usize>,
}

thread_local! {
    pub(crate) static THREAD: ThreadState = const {
        ThreadState {
            token: Cell::new(0),
            epoch: Cell::new(0),
            restricted: Cell::new(0),
            work: Cell::new(0),
            holds_master: Cell::new(false),
            poll_skips: Cell::new(0),
            seen_shared: Cell::new(LOOK),
            notify_now: Cell::new(false),
            tail: Cell::new(std::ptr::null()),
            tail_epoch: Cell::new(0),
            tail_extra: Cell::new(0),
        }
    };
    /// Notifications owed to this thread, run at its next user-level progress.
    static DEFERRED: RefCell<VecDeque<Deferred>> = const { RefCell::new(VecDeque::new()) };
    /// Operations this thread started whose completion it must still observe: each
    /// entry tests its operation and, once complete, notifies and returns true.
    static OUTGOING: RefCell<VecDeque<Tracked>> = const { RefCell::new(VecDeque::new()) };
    /// Operations this thread started that complete with other ranks' progress, whose
    /// completion it must still observe, as in `OUTGOING`.
    static AWAITED: RefCell<VecDeque<Tracked>> = const { RefCell::new(VecDeque::new()) };
}

/// An operation in flight (see [`track_outgoing`] and [`track_awaited`]): tests it and,
/// once it completed, notifies and returns true.
pub(crate) type Tracked = Box<dyn FnMut() -> bool>;

/// A list of [`Tracked`] operations.
type TrackedList = LocalKey<RefCell<VecDeque<Tracked>>>;

/// A number unique to this thread for the life of the process.
pub(crate) fn thread_token() -> u64 {
    THREAD.with(|h| match h.token.get() {
        0 => {
            let t = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            h.token.set(t);
            t
        }
        t => t,
    })
}

/// The number of user-level progress calls this thread has made.
#[inline]
pub(crate) fn progress_epoch() -> u64 {
    THREAD.with(|h| h.epoch.get())
}

/// The progress epoch to record for a value delivered now into a reply cell
/// (`future/cell.rs`), whose future is ready once this thread's epoch passes it: the
/// previous epoch while user-level progress notifies at once
/// ([`advance_tracked_notifying`], after the epoch advanced), so that the future is
/// ready in this progress, as a promise fulfilled there is; the current one otherwise
/// (internal progress, a reply's handler), ready at the next user-level progress.
#[inline]
pub(crate) fn arrival_epoch() -> u64 {
    THREAD.with(|h| h.epoch.get() - u64::from(h.notify_now.get()))
}

/// [`ThreadState::work`]: notifications were deferred.
pub(crate) const DEFERRED_WORK: u8 = 1;
/// [`ThreadState::work`]: this thread's handlers queued RPCs for the master persona it
/// holds.
pub(crate) const RPC_WORK: u8 = 2;
/// [`ThreadState::work`]: operations tracked by [`track_outgoing`] are in flight.
pub(crate) const OUTGOING_WORK: u8 = 4;
/// [`ThreadState::work`]: RPCs run on this thread were lent what must live until the
/// next user-level progress, which ends the loans ([`end_loans`]).
pub(crate) const LOAN_WORK: u8 = 8;
/// [`ThreadState::work`]: operations tracked by [`track_awaited`] are in flight.
pub(crate) const AWAITED_WORK: u8 = 16;

/// A notification owed to this thread.
enum Deferred {
    /// Runs a closure.
    Call(Box<dyn FnOnce()>),
    /// Satisfies `count` dependencies of a promise's state ([`defer_satisfy`]).
    Satisfy {
        deps: Rc<dyn Dependencies>,
        count: usize,
    },
}

/// The dependency counter of a promise's state (`future/state.rs`), so that a
/// notification that only satisfies dependencies needs no closure.
pub(crate) trait Dependencies {
    /// Satisfies `count` dependencies as `Promise::fulfill_anonymous` does.
    fn satisfy_anonymous(&self, count: usize);
}

/// Runs `f` at this thread's next user-level progress.
pub(crate) fn defer(f: Box<dyn FnOnce()>) {
    DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        fold_tail(&mut d);
        d.push_back(Deferred::Call(f));
    });
    THREAD.with(|h| h.work.set(h.work.get() | DEFERRED_WORK));
}

/// Satisfies one dependency of `deps` at this thread's next user-level progress, as
/// [`defer`] of a closure doing it would, without allocating: consecutive deferrals
/// on the same state made between two progress calls become one entry (thousands of
/// operations completing into one promise cost a count), which runs where the first
/// of them would have.
#[inline]
pub(crate) fn defer_satisfy(deps: Rc<dyn Dependencies>) {
    let at = Rc::as_ptr(&deps).cast::<()>();
    let epoch = THREAD.with(|h| {
        let epoch = h.epoch.get();
        if h.tail.get() == at && h.tail_epoch.get() == epoch {
            h.tail_extra.set(h.tail_extra.get() + 1);
            None
        } else {
            Some(epoch)
        }
    });
    if let Some(epoch) = epoch {
        defer_satisfy_queued(deps, epoch);
    }
}

/// [`defer_satisfy`] past its check of the last entry's state: a new entry, which the
/// deferrals onto the same state that follow in this epoch join. (Only the tail joins
/// them: an entry the tail no longer names may be running in this progress call, which
/// must not take newer notifications along.)
#[inline(never)]
fn defer_satisfy_queued(deps: Rc<dyn Dependencies>, epoch: u64) {
    let at = Rc::as_ptr(&deps).cast::<()>();
    DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        fold_tail(&mut d);
        d.push_back(Deferred::Satisfy { deps, count: 1 });
    });
    THREAD.with(|h| {
        h.tail.set(at);
        h.tail_epoch.set(epoch);
        h.work.set(h.work.get() | DEFERRED_WORK);
    });
}

/// Adds the satisfactions counted in [`ThreadState::tail_extra`] to the last entry of
/// `d`, which they belong to, and forgets that entry: whatever changes the queue next
/// (a push, the run of its entries) calls this first.
fn fold_tail(d: &mut VecDeque<Deferred>) {
    THREAD.with(|h| {
        h.tail.set(std::ptr::null());
        let extra = h.tail_extra.replace(0);
        if extra > 0 {
            match d.back_mut() {
                Some(Deferred::Satisfy { count, .. }) => *count += extra,
                _ => unreachable!("satisfactions counted for a last entry that is not one"),
            }
        }
    });
}

/// Runs `f`, a local notification: at once, in the restricted context, when user-level
/// progress is advancing this thread's tracked operations
/// ([`advance_tracked_notifying`]), which saves queuing it; else at the next
/// user-level progress ([`defer`]), as from internal progress (which runs no user code)
/// and from initiation calls (which notify no earlier than the next progress, §7.1
/// ¶14). What `f` runs may itself call `discharge`, whose advance must defer: `f` runs
/// with the flag down.
pub(crate) fn notify(f: impl FnOnce() + 'static) {
    if THREAD.with(|h| h.notify_now.get()) {
        with_notify_now(false, true, || restricted(f));
    } else {
        defer(Box::new(f));
    }
}

/// [`notify`] of one dependency of `deps` satisfied, deferred by [`defer_satisfy`].
#[inline]
pub(crate) fn notify_satisfy(deps: Rc<dyn Dependencies>) {
    if THREAD.with(|h| h.notify_now.get()) {
        with_notify_now(false, true, || restricted(|| deps.satisfy_anonymous(1)));
    } else {
        defer_satisfy(deps);
    }
}

/// Runs `f` with [`ThreadState::notify_now`] at `during`, then (also if `f` unwinds)
/// at `after`.
fn with_notify_now<R>(during: bool, after: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            THREAD.with(|h| h.notify_now.set(self.0));
        }
    }
    THREAD.with(|h| h.notify_now.set(during));
    let _restore = Restore(after);
    f()
}

/// Runs, in the restricted context, the notifications deferred before this call (those
/// they defer wait for the next call); returns how many ran.
#[cold]
pub(crate) fn run_deferred() -> usize {
    let pending = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        fold_tail(&mut d);
        d.len()
    });
    let mut n = 0;
    for _ in 0..pending {
        let Some(next) = DEFERRED.with(|d| d.borrow_mut().pop_front()) else {
            break;
        };
        match next {
            Deferred::Call(f) => restricted(f),
            Deferred::Satisfy { deps, count } => {
                restricted(|| deps.satisfy_anonymous(count));
            }
        }
        n += 1;
    }
    n
}

/// Tracks an operation this thread started that needs its progress to complete:
/// `advance` tests it and, once it completed, sends what the operation owes its target
/// and queues the local notifications, and returns true. It must run no user code, so
/// that internal progress ([`advance_outgoing`]) may call it (§10.3, §10.5.3). Every
/// user-level progress advances the tracked operations while any remain
/// ([`OUTGOING_WORK`]).
pub(crate) fn track_outgoing(advance: Tracked) {
    OUTGOING.with(|o| o.borrow_mut().push_back(advance));
    THREAD.with(|h| h.work.set(h.work.get() | OUTGOING_WORK));
}

/// Tracks an operation this thread started that completes only once other ranks took
/// part (a collective): `advance` tests it and, once it completed, notifies and returns
/// true. Only user-level progress advances it ([`AWAITED_WORK`]), notifying at once
/// ([`notify`]), so that its future is ready in the progress that found it complete.
///
/// It does not make `progress_required` true, and `discharge` does not wait for it,
/// although this rank's polls may still have to relay the collective's messages as the
/// others arrive: waiting for it would wait for the other ranks, which may be waiting
/// for this one. §10.5.3 ¶3 allows the answer: only the master persona runs
/// collectives (§12.1 ¶6), and for it `false` means the master persona "may or may not
/// require further internal-progress".
pub(crate) fn track_awaited(advance: Tracked) {
    AWAITED.with(|o| o.borrow_mut().push_back(advance));
    THREAD.with(|h| h.work.set(h.work.get() | AWAITED_WORK));
}

/// Advances, from user-level progress outside any callback, the tracked operations of
/// the lists `work` flags ([`OUTGOING_WORK`], [`AWAITED_WORK`]) once each: the local
/// notifications of those that completed run at once ([`notify`]). Returns how many
/// operations completed. The lists still holding operations are flagged for the next
/// progress, also if a notification unwinds.
pub(crate) fn advance_tracked_notifying(work: u8) -> usize {
    /// Flags each list that holds operations.
    struct Reflag;
    impl Drop for Reflag {
        fn drop(&mut self) {
            for (flag, list) in TRACKED_LISTS {
                if list.with(|o| !o.borrow().is_empty()) {
                    THREAD.with(|h| h.work.set(h.work.get() | flag));
                }
            }
        }
    }
    // Counted before either pass: an operation that a notification of this pass
    // starts is tested from the next progress on, as one started by the program is.
    let counts = TRACKED_LISTS.map(|(flag, list)| {
        if work & flag != 0 {
            list.with(|o| o.borrow().len())
        } else {
            0
        }
    });
    let _reflag = Reflag;
    with_notify_now(true, false, || {
        (counts.iter().zip(TRACKED_LISTS))
            .map(|(&count, (_, list))| advance(list, count))
            .sum()
    })
}

/// The lists of tracked operations and their flags in [`ThreadState::work`].
const TRACKED_LISTS: [(u8, &TrackedList); 2] =
    [(OUTGOING_WORK, &OUTGOING), (AWAITED_WORK, &AWAITED)];

/// True while operations tracked by [`track_outgoing`] are in flight: this thread's
/// progress is required for them to complete (UPC++ `progress_required`).
pub(crate) fn outgoing_pending() -> bool {
    OUTGOING.with(|o| !o.borrow().is_empty())
}

/// Advances the operations tracked by [`track_outgoing`] once each, dropping those
/// that completed; returns how many did (see [`advance`]).
pub(crate) fn advance_outgoing() -> usize {
    advance(&OUTGOING, OUTGOING.with(|o| o.borrow().len()))
}

/// Advances the first `count` operations of `list` once each, dropping those that
/// completed; returns how many did. Each leaves the list only while it is advanced: a
/// callback that one of them notifies at once (and what it calls, `progress_required`,
/// `discharge`) sees the others still in flight, and may advance those that are
/// outgoing itself (an operation advanced twice in one pass is tested twice, no more).
fn advance(list: &'static TrackedList, count: usize) -> usize {
    let mut completed = 0;
    for _ in 0..count {
        let Some(mut advance) = list.with(|o| o.borrow_mut().pop_front()) else {
            break;
        };
        if advance() {
            completed += 1;
        } else {
            list.with(|o| o.borrow_mut().push_back(advance));
        }
    }
    completed
}

/// Runs `f`, user code that a tracked operation's completion runs besides its
/// notifications (the drop of what the operation kept, such as a reduction's
/// operation), as a callback is run: in the restricted context, notifying nothing at
/// once.
pub(crate) fn run_as_callback<R>(f: impl FnOnce() -> R) -> R {
    let now = THREAD.with(|h| h.notify_now.get());
    with_notify_now(false, now, || restricted(f))
}

/// Tells this thread's next user-level progress that its handlers queued RPCs for the
/// master persona it holds.
#[inline]
pub(crate) fn note_rpcs_queued() {
    THREAD.with(|h| h.work.set(h.work.get() | RPC_WORK));
}

/// Makes this thread's next user-level progress look at the queues other threads fill,
/// where work it knew of is left.
pub(crate) fn look_again() {
    THREAD.with(|h| h.seen_shared.set(LOOK));
}

/// Tells every thread's next user-level progress to look at the queues other threads
/// fill (call after queuing there).
pub(crate) fn shared_work_queued() {
    SHARED_WORK.fetch_add(1, Ordering::Release);
}

/// True if this thread holds the master persona.
#[inline]
pub(crate) fn holds_master() -> bool {
    THREAD.with(|h| h.holds_master.get())
}

/// Records whether this thread holds the master persona.
pub(crate) fn set_holds_master(holds: bool) {
    THREAD.with(|h| h.holds_master.set(holds));
}

thread_local! {
    /// Whether something was lent to an RPC since this thread's last user-level
    /// progress.
    static LENT: Cell<bool> = const { Cell::new(false) };
    /// What [`keep_until_progress`] keeps: dropped at the next user-level progress.
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Marks a reference lent to the RPC being run, valid until this thread's next
/// user-level progress: the first time since the last one, flags the next one to end
/// the loans ([`LOAN_WORK`]; a flag, not a deferred closure, because a rank serving
/// one call on a distributed object per progress, such as a `fetch`, would pay for the
/// queue's entry each time).
#[inline]
pub(crate) fn lend_until_progress() {
    if !LENT.get() {
        LENT.set(true);
        THREAD.with(|h| h.work.set(h.work.get() | LOAN_WORK));
    }
}

/// Whether something was lent since this thread's last user-level progress.
#[inline]
pub(crate) fn lent() -> bool {
    LENT.get()
}

/// Keeps `value`, lent to the RPC being run, until this thread's next user-level
/// progress ([`lend_until_progress`]); dropped at once at thread exit, when no RPC
/// runs.
pub(crate) fn keep_until_progress(value: Box<dyn Any>) {
    lend_until_progress();
    let mut value = Some(value);
    let _ = KEPT.try_with(|k| k.borrow_mut().extend(value.take()));
    drop(value);
}

/// Ends the loans: run by user-level progress when [`LOAN_WORK`] is set, as a callback
/// (dropping what was kept may drop a user's value). No RPC holds a loan then.
pub(crate) fn end_loans() {
    LENT.set(false);
    let kept = KEPT.with(|k| std::mem::take(&mut *k.borrow_mut()));
    drop(kept);
}

/// Runs `f` as a callback of user-level progress: in the restricted context (§10.2).
#[inline]
pub(crate) fn restricted<R>(f: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            THREAD.with(|h| h.restricted.set(h.restricted.get() - 1));
        }
    }
    THREAD.with(|h| h.restricted.set(h.restricted.get() + 1));
    let _leave = Leave;
    f()
}

/// True inside a callback run by user-level progress (§10.2).
#[inline]
pub fn in_restricted_context() -> bool {
    THREAD.with(|h| h.restricted.get() > 0)
}

/// Fails, naming `call`, in the restricted context (§10.2).
#[inline]
#[track_caller]
pub(crate) fn check_not_restricted(call: &str) {
    if in_restricted_context() {
        restricted_context_violation(call);
    }
}

#[cold]
#[track_caller]
fn restricted_context_violation(call: &str) -> ! {
    panic!(
        "upcxx::{call}: not allowed in the restricted context (inside a callback, LPC or \
         RPC run by progress), where waiting could deadlock (UPC++ spec §10.2)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each `satisfy_anonymous` call's count.
    #[derive(Default)]
    struct Log(RefCell<Vec<usize>>);

    impl Dependencies for Log {
        fn satisfy_anonymous(&self, count: usize) {
            self.0.borrow_mut().push(count);
        }
    }

    /// What user-level progress does before it runs the deferred notifications.
    fn next_progress_call() {
        THREAD.with(|h| h.epoch.set(h.epoch.get() + 1));
    }

    #[test]
    fn deferrals_between_two_progress_calls_become_one_entry() {
        let log = Rc::new(Log::default());
        for _ in 0..3 {
            defer_satisfy(log.clone());
        }
        next_progress_call();
        assert_eq!(run_deferred(), 1);
        assert_eq!(*log.0.borrow(), [3]);
        assert_eq!(run_deferred(), 0);
    }

    #[test]
    fn deferrals_of_other_states_or_after_a_closure_stay_apart() {
        let (a, b) = (Rc::new(Log::default()), Rc::new(Log::default()));
        defer_satisfy(a.clone());
        defer_satisfy(b.clone());
        defer_satisfy(a.clone());
        next_progress_call();
        assert_eq!(run_deferred(), 3);
        assert_eq!(*a.0.borrow(), [1, 1]);
        assert_eq!(*b.0.borrow(), [1]);
    }

    /// Deferrals counted onto the last entry stay with it when a closure is queued
    /// behind it, and a later deferral onto the same state starts a new entry.
    #[test]
    fn deferrals_counted_before_a_closure_stay_with_their_entry() {
        let log = Rc::new(Log::default());
        for _ in 0..3 {
            defer_satisfy(log.clone());
        }
        let seen = log.clone();
        defer(Box::new(move || assert_eq!(*seen.0.borrow(), [3])));
        defer_satisfy(log.clone());
        defer_satisfy(log.clone());
        next_progress_call();
        assert_eq!(run_deferred(), 3);
        assert_eq!(*log.0.borrow(), [3, 2]);
    }

    /// An entry owed before the running progress call must not take a notification
    /// deferred during that call: the newer one waits for the next progress, as a
    /// closure deferred there would.
    #[test]
    fn a_deferral_made_while_notifications_run_waits_for_the_next_progress() {
        let log = Rc::new(Log::default());
        let again = log.clone();
        defer(Box::new(move || defer_satisfy(again)));
        defer_satisfy(log.clone());
        next_progress_call();
        // The closure runs first and defers while the older entry is still queued.
        assert_eq!(run_deferred(), 2);
        assert_eq!(*log.0.borrow(), [1]);
        next_progress_call();
        assert_eq!(run_deferred(), 1);
        assert_eq!(*log.0.borrow(), [1, 1]);
    }
}
