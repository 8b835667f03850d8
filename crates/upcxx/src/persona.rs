//! Progress and personas (UPC++ spec ch. 10).
//!
//! * **Progress levels** (§10.1): internal progress polls the network (incoming RPCs are
//!   queued, handlers run); user-level progress additionally runs what is owed to the
//!   personas this thread holds: queued LPCs and RPCs, and completion notifications. It
//!   happens only inside UPC++ calls (`progress`, `wait`, and calls documented so).
//! * **Restricted context** (§10.2): callbacks run by user-level progress may not wait
//!   or make user-level progress themselves; doing so fails with a message naming the
//!   call instead of deadlocking.
//! * **Personas** (§10.5): a persona is the target of LPCs (and, for the master persona,
//!   of RPCs). Each thread has a stack of personas it currently holds, with its default
//!   persona at the bottom; a persona may be held by one thread at a time.
//!   [`PersonaScope`] pushes one for a scope. The master persona starts on the thread
//!   that called `init`; [`liberate_master_persona`] lets another thread take it.
//!
//! Futures are single-threaded. An [`lpc`] to another persona returns a future on the
//! calling thread; its result travels back as an LPC to the calling persona, and is
//! delivered only on the thread that created the future (checked: if the persona moved
//! to another thread meanwhile, delivery fails loudly instead of racing).
//!
//! # What progress costs
//!
//! User-level progress is made often (every `wait` makes at least one), so the case
//! where nothing is owed to the thread is kept to a few thread-local cells and one
//! shared word, without locks or allocation:
//!
//! * work that the thread's own calls and handlers queue for it (deferred
//!   notifications, RPCs that its handlers copied for the master persona it holds) sets
//!   a thread-local flag;
//! * work that other threads queue where this thread must find it (LPCs, RPCs and
//!   replies received by other threads' polls) bumps one shared counter, and a thread
//!   looks at those queues only when the counter moved since it last did.
//!
//! The futures of operations complete at initiation (shared-memory RMA) need only the
//! next user-level progress to turn ready. A wait on one makes it without polling the
//! network, except every 32nd time, which keeps a loop of such waits attentive to
//! incoming messages (§10.3) while the poll, which costs more than the whole operation,
//! is mostly skipped. `progress()` always polls.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::future::{Future, State};

/// The level of progress a call makes (UPC++ `progress_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressLevel {
    /// Advance communication only; never run user callbacks.
    Internal,
    /// Also run callbacks, LPCs and RPCs owed to this thread's personas.
    User,
}

type Lpc = Box<dyn FnOnce() + Send>;

struct PersonaInner {
    /// Thread token of the thread holding the persona, 0 when none.
    holder: AtomicU64,
    inbox: Mutex<VecDeque<Lpc>>,
    queued: AtomicUsize,
}

/// A UPC++ persona: a target for LPCs, held by at most one thread at a time.
#[derive(Clone)]
pub struct Persona {
    inner: Arc<PersonaInner>,
}

impl std::fmt::Debug for Persona {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Persona({:p})", Arc::as_ptr(&self.inner))
    }
}

impl PartialEq for Persona {
    fn eq(&self, other: &Persona) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Persona {}

impl Default for Persona {
    fn default() -> Persona {
        Persona::new()
    }
}

impl Persona {
    /// A new persona, held by no thread.
    pub fn new() -> Persona {
        Persona {
            inner: Arc::new(PersonaInner {
                holder: AtomicU64::new(0),
                inbox: Mutex::new(VecDeque::new()),
                queued: AtomicUsize::new(0),
            }),
        }
    }

    /// True if the calling thread holds this persona (UPC++ `persona::active_with_caller`).
    pub fn active_with_caller(&self) -> bool {
        self.inner.holder.load(Ordering::Acquire) == thread_token()
    }

    /// Queues `f` to run on this persona during the user-level progress of the thread
    /// holding it (UPC++ `persona::lpc_ff`). Callable from any thread.
    pub fn lpc_ff(&self, f: impl FnOnce() + Send + 'static) {
        self.inner
            .inbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Box::new(f));
        self.inner.queued.fetch_add(1, Ordering::Release);
        shared_work_queued();
    }

    /// Runs `f` on this persona and returns the future of its result, fulfilled on the
    /// calling persona (UPC++ `persona::lpc`).
    pub fn lpc<R, F>(&self, f: F) -> Future<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let state = State::<R>::new(1);
        let origin = current_persona();
        let back = ThreadBound::new(Rc::clone(&state));
        self.lpc_ff(move || {
            let r = f();
            origin.lpc_ff(move || {
                let state = back.into_inner("Persona::lpc");
                crate::future::fulfill_state(&state, r, "Persona::lpc");
            });
        });
        Future::from_state(state)
    }

    /// Runs the LPCs queued on this persona; returns how many ran. The queue is swapped
    /// with an empty one kept per thread, so neither side reallocates in steady state.
    fn drain(&self) -> usize {
        if self.inner.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut batch = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
        std::mem::swap(
            &mut *self.inner.inbox.lock().unwrap_or_else(|e| e.into_inner()),
            &mut batch,
        );
        let n = batch.len();
        self.inner.queued.fetch_sub(n, Ordering::AcqRel);
        while let Some(f) = batch.pop_front() {
            restricted(f);
        }
        SPARE.with(|s| *s.borrow_mut() = batch);
        n
    }
}

/// A value that may be moved between threads but only used on the thread that made it.
/// Dropped elsewhere, it is leaked rather than touched.
struct ThreadBound<T> {
    thread: u64,
    value: std::mem::ManuallyDrop<T>,
}

// SAFETY: the value is only accessed (into_inner, drop) on the thread that created it;
// anywhere else it is neither read nor dropped, only moved as bytes.
unsafe impl<T> Send for ThreadBound<T> {}

impl<T> ThreadBound<T> {
    fn new(value: T) -> ThreadBound<T> {
        ThreadBound {
            thread: thread_token(),
            value: std::mem::ManuallyDrop::new(value),
        }
    }

    #[track_caller]
    fn into_inner(mut self, call: &str) -> T {
        if self.thread != thread_token() {
            panic!(
                "upcxx::{call}: a completion for a future created on another thread arrived \
                 here (the persona moved between threads while the operation was in flight)"
            );
        }
        // SAFETY: taken once; `self` is forgotten so Drop does not touch it again.
        let v = unsafe { std::mem::ManuallyDrop::take(&mut self.value) };
        std::mem::forget(self);
        v
    }
}

impl<T> Drop for ThreadBound<T> {
    fn drop(&mut self) {
        if self.thread == thread_token() {
            // SAFETY: on the owning thread, dropped exactly once.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.value) };
        }
    }
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
static MASTER: OnceLock<Persona> = OnceLock::new();

/// Bumped after work is queued where any thread may have to find it: an LPC, an RPC in
/// the shared inbox, a reply received by another thread's poll. A thread whose
/// user-level progress sees the value it saw last time skips looking at those queues.
static SHARED_WORK: AtomicU64 = AtomicU64::new(0);

/// A `seen_shared` value [`SHARED_WORK`] never takes: the next progress looks.
const LOOK: u64 = u64::MAX;

/// How many of the user-level progress calls made by waits on already completed
/// operations skip polling the network in a row (see [`progress_past`]).
const POLL_SKIPS: u32 = 31;

/// The per-thread state every progress call reads: plain cells in a `const`-initialized
/// thread-local without a destructor, so reaching it is one memory access.
struct Hot {
    /// This thread's token (see [`thread_token`]); 0 until first asked for.
    token: Cell<u64>,
    /// Count of user-level progress calls by this thread.
    epoch: Cell<u64>,
    /// Depth of callbacks being run by user-level progress.
    restricted: Cell<u32>,
    /// What was queued for this thread's next user-level progress by the thread itself:
    /// a mask of [`DEFERRED_WORK`] and [`RPC_WORK`].
    work: Cell<u8>,
    /// This thread holds the master persona.
    holds_master: Cell<bool>,
    /// Waits on completed operations that may still skip the network poll.
    poll_skips: Cell<u32>,
    /// The value of [`SHARED_WORK`] when this thread last looked at its shared queues.
    seen_shared: Cell<u64>,
}

thread_local! {
    static HOT: Hot = const {
        Hot {
            token: Cell::new(0),
            epoch: Cell::new(0),
            restricted: Cell::new(0),
            work: Cell::new(0),
            holds_master: Cell::new(false),
            poll_skips: Cell::new(0),
            seen_shared: Cell::new(LOOK),
        }
    };
    /// Personas held by this thread; index 0 is the default persona, created on first
    /// use (an empty stack holds no persona anyone could have queued work on).
    static STACK: RefCell<Vec<Persona>> = const { RefCell::new(Vec::new()) };
    /// An empty LPC queue (with capacity) swapped in by `Persona::drain`.
    static SPARE: RefCell<VecDeque<Lpc>> = const { RefCell::new(VecDeque::new()) };
    /// Notifications owed to this thread, run at its next user-level progress.
    static DEFERRED: RefCell<VecDeque<Box<dyn FnOnce()>>> = const { RefCell::new(VecDeque::new()) };
}

fn new_default_persona() -> Persona {
    let p = Persona::new();
    p.inner.holder.store(thread_token(), Ordering::Release);
    p
}

/// Runs `f` on this thread's persona stack, creating the default persona first if needed.
fn with_stack<R>(f: impl FnOnce(&mut Vec<Persona>) -> R) -> R {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_empty() {
            s.push(new_default_persona());
        }
        f(&mut s)
    })
}

/// A number unique to this thread for the life of the process.
fn thread_token() -> u64 {
    HOT.with(|h| match h.token.get() {
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
    HOT.with(|h| h.epoch.get())
}

/// [`Hot::work`]: notifications were deferred.
const DEFERRED_WORK: u8 = 1;
/// [`Hot::work`]: this thread's handlers queued RPCs for the master persona it holds.
const RPC_WORK: u8 = 2;

/// Runs `f` at this thread's next user-level progress.
pub(crate) fn defer(f: Box<dyn FnOnce()>) {
    DEFERRED.with(|d| d.borrow_mut().push_back(f));
    HOT.with(|h| h.work.set(h.work.get() | DEFERRED_WORK));
}

/// Tells this thread's next user-level progress that its handlers queued RPCs for the
/// master persona it holds.
#[inline]
pub(crate) fn note_rpcs_queued() {
    HOT.with(|h| h.work.set(h.work.get() | RPC_WORK));
}

/// Makes this thread's next user-level progress look at the queues other threads fill,
/// where work it knew of is left.
pub(crate) fn look_again() {
    HOT.with(|h| h.seen_shared.set(LOOK));
}

/// Tells every thread's next user-level progress to look at the queues other threads
/// fill (call after queuing there).
pub(crate) fn shared_work_queued() {
    SHARED_WORK.fetch_add(1, Ordering::Release);
}

/// True if this thread holds the master persona.
#[inline]
pub(crate) fn holds_master() -> bool {
    HOT.with(|h| h.holds_master.get())
}

/// Runs `f` as a callback of user-level progress: in the restricted context (§10.2).
#[inline]
pub(crate) fn restricted<R>(f: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            HOT.with(|h| h.restricted.set(h.restricted.get() - 1));
        }
    }
    HOT.with(|h| h.restricted.set(h.restricted.get() + 1));
    let _leave = Leave;
    f()
}

/// True inside a callback run by user-level progress (§10.2).
#[inline]
pub fn in_restricted_context() -> bool {
    HOT.with(|h| h.restricted.get() > 0)
}

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

/// Makes progress (UPC++ `progress`). `ProgressLevel::User` also runs the callbacks,
/// LPCs and RPCs owed to the personas this thread holds; it may not be called in the
/// restricted context.
#[track_caller]
pub fn progress(level: ProgressLevel) {
    crate::runtime::check_init("progress");
    if crate::instrument::reporting() {
        progress_reported(level);
    } else {
        progress_at(level);
    }
}

#[inline]
#[track_caller]
fn progress_at(level: ProgressLevel) {
    match level {
        ProgressLevel::Internal => internal_progress(),
        ProgressLevel::User => {
            check_not_restricted("progress(User)");
            user_progress();
        }
    }
}

/// [`progress`] reported as its GASP event (out of line: one flag test on the
/// common path).
#[cold]
#[inline(never)]
#[track_caller]
fn progress_reported(level: ProgressLevel) {
    let level_arg = [gasp::Arg::Int(i32::from(level == ProgressLevel::User))];
    let span = gasp::span!(GASP_UPCXX_PROGRESS, level_arg);
    progress_at(level);
    gasp::end!(span, level_arg);
}

/// The runtime's own poll. It reports nothing to a GASP tool, and needs no guard for
/// that: the poll itself is gex's unreported one, and upcxx registers its AM handlers
/// unreported (`rpc::wire`), so neither their runs nor the messages they send are
/// events. (A guard raising the nesting depth around the poll hid nothing and cost
/// ≈8 ns a round trip with a tool attached and measurement off.)
#[inline]
pub(crate) fn internal_progress() {
    if !gex::layered::in_handler() {
        gex::layered::poll_unreported();
    }
}

/// Internal progress, then everything owed to this thread's personas. Returns how many
/// callbacks, LPCs and RPCs ran.
pub(crate) fn user_progress() -> usize {
    internal_progress();
    user_actions()
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
/// attached, `Hot::poll_skips` stays 0, so every such progress takes the out-of-line
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
    let done = HOT.with(|h| h.epoch.get() > epoch || skip_poll(h, &h.poll_skips, shared));
    if !done {
        full_progress_past(WAIT, call);
    }
}

/// Counts a user-level progress with nothing to run, which skips the network poll, if
/// `skips` allows one more skip and nothing is queued for this thread (`shared`: the
/// current [`SHARED_WORK`]). False if a full progress is needed.
#[inline(always)]
fn skip_poll(h: &Hot, skips: &Cell<u32>, shared: u64) -> bool {
    let left = skips.get();
    if left == 0 || h.work.get() != 0 || h.restricted.get() != 0 || h.seen_shared.get() != shared {
        return false;
    }
    skips.set(left - 1);
    h.epoch.set(h.epoch.get() + 1);
    true
}

#[cold]
#[track_caller]
fn full_progress_past(wait: bool, call: &str) {
    if crate::instrument::reporting() {
        return progress_past_reported(wait, call);
    }
    check_not_restricted(call);
    HOT.with(|h| h.poll_skips.set(POLL_SKIPS));
    user_progress();
}

/// [`full_progress_past`] while a tool is attached: the wait's event (`wait`) around
/// the progress, which skips polls as [`progress_past`] does, counting in a cell of
/// its own.
#[cold]
#[inline(never)]
#[track_caller]
fn progress_past_reported(wait: bool, call: &str) {
    thread_local! {
        static TOOL_SKIPS: Cell<u32> = const { Cell::new(0) };
    }
    let progress = || {
        let shared = SHARED_WORK.load(Ordering::Acquire);
        if !TOOL_SKIPS.with(|skips| HOT.with(|h| skip_poll(h, skips, shared))) {
            check_not_restricted(call);
            TOOL_SKIPS.with(|skips| skips.set(POLL_SKIPS));
            user_progress();
        }
    };
    if wait {
        let span = gasp::span_if!(true, GASP_UPCXX_FUTURE_WAIT, gasp::instrument::NONE);
        progress();
        gasp::end!(span, gasp::instrument::NONE);
    } else {
        progress();
    }
}

/// The user-level part of progress: replies that arrived through other threads are
/// delivered, the epoch advances (readying the futures of operations completed before
/// this call), then run, in the restricted context, the notifications queued on this
/// thread, the RPCs of the master persona if this thread holds it, and the LPCs queued on
/// each persona the thread holds, top first. What the callbacks queue runs in a later
/// progress call, except LPCs to held personas queued before those are drained.
///
/// With nothing queued this reads a few thread-local cells and one shared word: work
/// queued by this thread's own handlers and calls is flagged in `Hot::work`, and work
/// queued by other threads bumps [`SHARED_WORK`].
#[inline]
fn user_actions() -> usize {
    let shared = SHARED_WORK.load(Ordering::Acquire);
    let look = HOT.with(|h| h.seen_shared.replace(shared) != shared);
    if look {
        crate::rpc::deliver_forwarded_replies();
    }
    let (work, master) = HOT.with(|h| {
        h.epoch.set(h.epoch.get() + 1);
        (h.work.replace(0), h.holds_master.get())
    });
    let mut n = 0;
    if work & DEFERRED_WORK != 0 {
        n += run_deferred();
    }
    let own_rpcs = work & RPC_WORK != 0;
    if master && (own_rpcs || look) {
        n += crate::rpc::run_master_rpcs(own_rpcs, look);
    }
    if look {
        n += drain_held_personas();
    }
    n
}

#[cold]
fn run_deferred() -> usize {
    let pending = DEFERRED.with(|d| d.borrow().len());
    let mut n = 0;
    for _ in 0..pending {
        let Some(f) = DEFERRED.with(|d| d.borrow_mut().pop_front()) else {
            break;
        };
        restricted(f);
        n += 1;
    }
    n
}

/// Runs the LPCs queued on the personas this thread holds, top first.
#[cold]
fn drain_held_personas() -> usize {
    let held = STACK.with(|s| s.borrow().len());
    let mut n = 0;
    for i in (0..held).rev() {
        // Clone only a persona with work queued.
        let busy = STACK.with(|s| {
            s.borrow()
                .get(i)
                .filter(|p| p.inner.queued.load(Ordering::Acquire) > 0)
                .cloned()
        });
        if let Some(p) = busy {
            n += p.drain();
        }
    }
    n
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
            backoff.snooze();
        } else {
            break;
        }
    }
}

/// The persona at the top of this thread's stack (UPC++ `current_persona`).
pub fn current_persona() -> Persona {
    with_stack(|s| s.last().expect("default persona").clone())
}

/// This thread's default persona (UPC++ `default_persona`).
pub fn default_persona() -> Persona {
    with_stack(|s| s[0].clone())
}

/// The master persona: the target of RPCs (UPC++ `master_persona`).
#[track_caller]
pub fn master_persona() -> Persona {
    crate::runtime::check_init("master_persona");
    MASTER.get().expect("created by init").clone()
}

fn is_master(p: &Persona) -> bool {
    MASTER.get() == Some(p)
}

/// Creates the master persona and makes the calling thread hold it (called at the start
/// of `init`, so that the RPCs that arrive while `init` waits for the other ranks are
/// already queued for it).
pub(crate) fn adopt_master() {
    let master = MASTER.get_or_init(Persona::new).clone();
    acquire(&master, "init");
    with_stack(|s| s.push(master));
}

fn acquire(p: &Persona, call: &str) {
    let me = thread_token();
    match p
        .inner
        .holder
        .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => {}
        Err(h) if h == me => {}
        Err(_) => panic!("upcxx::{call}: the persona is held by another thread"),
    }
    HOT.with(|h| {
        // Work may have been queued for the persona before this thread held it.
        h.seen_shared.set(LOOK);
        if is_master(p) {
            h.holds_master.set(true);
        }
    });
}

/// Makes `p`, held by this thread, free for any thread to take.
fn release(p: &Persona) {
    if is_master(p) {
        HOT.with(|h| h.holds_master.set(false));
        // Before the store that lets another thread take the persona and its RPCs.
        crate::rpc::master_released();
    }
    p.inner.holder.store(0, Ordering::Release);
}

/// Releases the master persona from the calling thread, so another thread can take it
/// with a [`PersonaScope`] (UPC++ `liberate_master_persona`). The master persona must be
/// at the top of this thread's stack, where `init` put it.
#[track_caller]
pub fn liberate_master_persona() {
    let master = master_persona();
    with_stack(|s| {
        if s.last() != Some(&master) || s.iter().filter(|p| **p == master).count() != 1 {
            panic!("upcxx::liberate_master_persona: the master persona is not at the top of this thread's persona stack");
        }
        s.pop();
    });
    release(&master);
}

/// Holds a persona on the calling thread for the life of the scope (UPC++
/// `persona_scope`).
pub struct PersonaScope<'a> {
    persona: Persona,
    released: bool,
    _lock: Option<MutexGuard<'a, ()>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> PersonaScope<'a> {
    /// Pushes `persona` on this thread's stack.
    ///
    /// # Panics
    /// If another thread holds the persona.
    #[track_caller]
    pub fn new(persona: &Persona) -> PersonaScope<'static> {
        PersonaScope::push(persona, None)
    }

    /// Locks `mutex`, then pushes `persona`; both are released when the scope ends
    /// (UPC++ `persona_scope(mutex, persona)`). Threads sharing a persona this way
    /// take turns instead of failing.
    pub fn with_mutex(mutex: &'a Mutex<()>, persona: &Persona) -> PersonaScope<'a> {
        let guard = mutex.lock().unwrap_or_else(|e| e.into_inner());
        PersonaScope::push(persona, Some(guard))
    }

    #[track_caller]
    fn push(persona: &Persona, lock: Option<MutexGuard<'a, ()>>) -> PersonaScope<'a> {
        let already = persona.active_with_caller();
        acquire(persona, "PersonaScope::new");
        with_stack(|s| s.push(persona.clone()));
        PersonaScope {
            persona: persona.clone(),
            released: already,
            _lock: lock,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for PersonaScope<'_> {
    fn drop(&mut self) {
        with_stack(|s| {
            if s.last() != Some(&self.persona) && !std::thread::panicking() {
                panic!("upcxx::PersonaScope: scopes must end in the reverse order they began");
            }
            s.pop();
        });
        if !self.released {
            release(&self.persona);
        }
    }
}

/// Queues `f` on `persona` (free-function form of [`Persona::lpc_ff`]).
pub fn lpc_ff(persona: &Persona, f: impl FnOnce() + Send + 'static) {
    persona.lpc_ff(f)
}

/// Runs `f` on `persona` (free-function form of [`Persona::lpc`]).
pub fn lpc<R, F>(persona: &Persona, f: F) -> Future<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    persona.lpc(f)
}

/// True if operations started by this thread still need internal progress to complete
/// (UPC++ `progress_required`). On shared memory every transfer completes when it is
/// started, so this is true only while this thread has queued notifications, LPCs or
/// RPCs.
pub fn progress_required() -> bool {
    let deferred = DEFERRED.with(|d| !d.borrow().is_empty());
    let queued = STACK.with(|s| {
        s.borrow()
            .iter()
            .any(|p| p.inner.queued.load(Ordering::Acquire) > 0)
    });
    deferred || queued || (holds_master() && crate::rpc::master_rpcs_queued())
}

/// Makes the progress needed so that this thread's outstanding operations no longer
/// depend on it (UPC++ `discharge`).
#[track_caller]
pub fn discharge() {
    crate::runtime::check_init("discharge");
    internal_progress();
}
