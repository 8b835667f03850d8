//! Personas (UPC++ spec ch. 10, §10.5).
//!
//! A persona is the target of LPCs (and, for the master persona, of RPCs). Each thread
//! has a stack of personas it currently holds, with its default persona at the bottom; a
//! persona may be held by one thread at a time. [`PersonaScope`] pushes one for a scope;
//! [`top_persona_scope`] and [`default_persona_scope`] name the ends of the stack.
//! The master persona starts on the thread that called `init`; [`liberate_master_persona`]
//! lets another thread take it.
//!
//! Futures are single-threaded. An [`lpc`] to another persona returns a future on the
//! calling thread; its result travels back as an LPC to the calling persona, and is
//! delivered only on the thread that created the future (checked: if the persona moved
//! to another thread meanwhile, delivery fails loudly instead of racing).
//!
//! User-level progress, which runs the LPCs queued on the personas a thread holds, is
//! `progress.rs`, above this module; the progress functions of ch. 10 are re-exported
//! here, where the spec puts them. Personas sit on futures (an LPC's result), on RPC
//! delivery (releasing the master persona hands its queued RPCs on) and on the
//! per-thread state (`thread.rs`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::future::{Future, FutureValue, State};
use crate::sync;
pub use crate::thread::in_restricted_context;
use crate::thread::{look_again, restricted, set_holds_master, shared_work_queued, thread_token};

type Lpc = Box<dyn FnOnce() + Send>;

struct PersonaInner {
    /// Thread token of the thread holding the persona, 0 when none.
    holder: AtomicU64,
    inbox: LpcQueue<Lpc>,
}

/// The LPCs queued on a persona: pushed by any thread, taken in batches by the thread
/// holding it, with a count that tells that thread whether to look without locking.
/// (Generic so that its loom tests can queue plain values.)
struct LpcQueue<T> {
    queue: sync::Mutex<VecDeque<T>>,
    /// Items pushed and not yet taken; incremented after the push, so it may read 0
    /// for an item already queued (the next poll finds it) and, briefly, wrap below
    /// 0 when a take moves an item whose increment has not happened yet.
    queued: sync::AtomicUsize,
}

impl<T> LpcQueue<T> {
    fn new() -> LpcQueue<T> {
        LpcQueue {
            queue: sync::Mutex::new(VecDeque::new()),
            queued: sync::AtomicUsize::new(0),
        }
    }

    fn push(&self, item: T) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(item);
        self.queued.fetch_add(1, sync::Ordering::Release);
    }

    /// True if items may be queued (no lock taken).
    fn nonempty(&self) -> bool {
        self.queued.load(sync::Ordering::Acquire) != 0
    }

    /// Puts `rest`, items taken and not run, back in front of the queue, in order.
    fn give_back(&self, rest: &mut VecDeque<T>) {
        let n = rest.len();
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(item) = rest.pop_back() {
            queue.push_front(item);
        }
        drop(queue);
        self.queued.fetch_add(n, sync::Ordering::Release);
    }

    /// Swaps the queued items into `batch` (empty), which the queue keeps for its next
    /// pushes' storage. Returns how many were taken.
    fn take(&self, batch: &mut VecDeque<T>) -> usize {
        std::mem::swap(
            &mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()),
            batch,
        );
        let n = batch.len();
        self.queued.fetch_sub(n, sync::Ordering::AcqRel);
        n
    }
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
                inbox: LpcQueue::new(),
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
        self.inner.inbox.push(Box::new(f));
        shared_work_queued();
    }

    /// Runs `f` on this persona and returns the future of its result, fulfilled on the
    /// calling persona (UPC++ `persona::lpc`, §10.5.1 ¶17–¶22). If `f` returns a
    /// future, this persona waits for it and the result is its value (the future `f`
    /// returns is this persona's; the one `lpc` returns, the caller's). As for `then`,
    /// the result type implements [`FutureValue`]. `f` never runs inside this call,
    /// even on a persona the caller holds. Callable from any thread.
    pub fn lpc<R, F>(&self, f: F) -> Future<R::Value>
    where
        F: FnOnce() -> R + Send + 'static,
        R: FutureValue,
        R::Value: Send,
    {
        let state = State::<R::Value>::new(1);
        let origin = current_persona();
        let back = ThreadBound::new(Rc::clone(&state));
        self.lpc_ff(move || {
            f().into_future().on_ready(move |r| {
                origin.lpc_ff(move || {
                    let state = back.into_inner("Persona::lpc");
                    crate::future::fulfill_state(&state, r, "Persona::lpc");
                });
            });
        });
        Future::from_state(state)
    }

    /// Runs the LPCs queued on this persona; returns how many ran. The queue is swapped
    /// with an empty one kept per thread, so neither side reallocates in steady state.
    fn drain(&self) -> usize {
        if !self.inner.inbox.nonempty() {
            return 0;
        }
        let mut batch = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
        self.inner.inbox.take(&mut batch);
        let master = is_master(self);
        let mut ran_count = 0;
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            while let Some(f) = batch.pop_front() {
                ran_count += 1;
                restricted(f);
                if master && !crate::thread::holds_master() {
                    // The LPC released the master persona (§10.5.1 ¶33): the rest of
                    // the batch is its next holder's.
                    break;
                }
            }
        }));
        if !batch.is_empty() {
            // An LPC panicked (the program may catch it from progress), or released
            // the persona: the ones after it go back in front of the queue, for the
            // next progress of the thread that holds the persona.
            self.inner.inbox.give_back(&mut batch);
            look_again();
            shared_work_queued();
        }
        if let Err(panic) = ran {
            std::panic::resume_unwind(panic);
        }
        SPARE.with(|s| *s.borrow_mut() = batch);
        ran_count
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

static MASTER: OnceLock<Persona> = OnceLock::new();

thread_local! {
    /// Personas held by this thread; index 0 is the default persona, created on first
    /// use (an empty stack holds no persona anyone could have queued work on).
    static STACK: RefCell<Vec<Persona>> = const { RefCell::new(Vec::new()) };
    /// An empty LPC queue (with capacity) swapped in by `Persona::drain`.
    static SPARE: RefCell<VecDeque<Lpc>> = const { RefCell::new(VecDeque::new()) };
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

/// Runs the LPCs queued on the personas this thread holds, top first.
#[cold]
pub(crate) fn drain_held_personas() -> usize {
    let held = STACK.with(|s| s.borrow().len());
    let mut n = 0;
    for i in (0..held).rev() {
        // Clone only a persona with work queued.
        let busy = STACK.with(|s| {
            s.borrow()
                .get(i)
                .filter(|p| p.inner.inbox.nonempty())
                .cloned()
        });
        if let Some(p) = busy {
            n += p.drain();
        }
    }
    n
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
    crate::runtime::state::check_init("master_persona");
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
    INIT_THREAD.store(thread_token(), Ordering::Relaxed);
    LIBERATED.store(false, Ordering::Relaxed);
}

/// The thread that called `init`, which alone may liberate the master persona, once
/// (§10.5.1 ¶33), and whether it did.
static INIT_THREAD: AtomicU64 = AtomicU64::new(0);
static LIBERATED: AtomicBool = AtomicBool::new(false);

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
    // Work may have been queued for the persona before this thread held it.
    look_again();
    if is_master(p) {
        set_holds_master(true);
    }
}

/// Makes `p`, held by this thread, free for any thread to take. This thread's batched
/// RPCs go out first: they may be the persona's, whose next holder could not send them
/// (batches and the need for progress are this thread's, §10.4 ¶8's hand-off).
fn release(p: &Persona) {
    crate::rpc::send_unsent();
    if is_master(p) {
        set_holds_master(false);
        // Before the store that lets another thread take the persona and its RPCs.
        crate::rpc::master_released();
    }
    p.inner.holder.store(0, Ordering::Release);
}

/// Releases the master persona from the calling thread, so another thread can take it
/// with a [`PersonaScope`] (UPC++ `liberate_master_persona`). The master persona must be
/// at the top of this thread's stack, where `init` put it.
///
/// # Panics
/// Off the thread that called `init`, a second time since `init`, or with the master
/// persona not at the top of the stack (§10.5.1 ¶33).
#[track_caller]
pub fn liberate_master_persona() {
    let master = master_persona();
    if INIT_THREAD.load(Ordering::Relaxed) != thread_token() {
        panic!("upcxx::liberate_master_persona: only the thread that called init may liberate the master persona (UPC++ spec §10.5.1 ¶33)");
    }
    if LIBERATED.load(Ordering::Relaxed) {
        panic!("upcxx::liberate_master_persona: called a second time since init (UPC++ spec §10.5.1 ¶33)");
    }
    with_stack(|s| {
        if s.last() != Some(&master) || s.iter().filter(|p| **p == master).count() != 1 {
            panic!("upcxx::liberate_master_persona: the master persona is not at the top of this thread's persona stack");
        }
        s.pop();
    });
    LIBERATED.store(true, Ordering::Relaxed);
    release(&master);
}

/// Holds a persona on the calling thread for the life of the scope (UPC++
/// `persona_scope`).
pub struct PersonaScope<'a> {
    persona: Persona,
    /// Its place in this thread's persona stack.
    depth: usize,
    released: bool,
    /// The guard of the lock the scope holds, released after the persona (a field,
    /// dropped after [`Drop::drop`] pops it).
    _lock: Option<Box<dyn Held + 'a>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Any value a scope holds until it ends: the guard of the lock it was made with.
trait Held {}
impl<T> Held for T {}

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
        let guard: MutexGuard<'a, ()> = mutex.lock().unwrap_or_else(|e| e.into_inner());
        PersonaScope::push(persona, Some(Box::new(guard)))
    }

    /// Pushes `persona` while `guard`, the guard of a lock the caller took, is held,
    /// and drops the guard when the scope ends, after releasing the persona: UPC++
    /// `persona_scope(mutex, persona)` for a lock of any type (a `parking_lot` or
    /// `spin` mutex, a write guard of a `RwLock`...), as the specification takes any
    /// Lockable.
    ///
    /// ```
    /// # upcxx::init();
    /// let lock = std::sync::RwLock::new(());
    /// let shared = upcxx::Persona::new();
    /// {
    ///     let _scope = upcxx::PersonaScope::with_guard(lock.write().unwrap(), &shared);
    ///     assert!(shared.active_with_caller());
    /// }
    /// assert!(lock.try_write().is_ok(), "the scope's end released the lock");
    /// # upcxx::finalize();
    /// ```
    #[track_caller]
    pub fn with_guard<G: 'a>(guard: G, persona: &Persona) -> PersonaScope<'a> {
        PersonaScope::push(persona, Some(Box::new(guard)))
    }

    #[track_caller]
    fn push(persona: &Persona, lock: Option<Box<dyn Held + 'a>>) -> PersonaScope<'a> {
        let already = persona.active_with_caller();
        acquire(persona, "PersonaScope::new");
        let depth = with_stack(|s| {
            s.push(persona.clone());
            s.len() - 1
        });
        PersonaScope {
            persona: persona.clone(),
            depth,
            released: already,
            _lock: lock,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl PersonaScope<'_> {
    /// This scope, as [`top_persona_scope`] would name it while it is the top one.
    pub fn scope_ref(&self) -> PersonaScopeRef {
        PersonaScopeRef::at(self.depth, &self.persona)
    }
}

impl Drop for PersonaScope<'_> {
    fn drop(&mut self) {
        with_stack(|s| {
            // The place, not only the persona: a persona may be pushed twice, and the
            // older scope ending first would release it while the newer holds it.
            let on_top = s.len() == self.depth + 1 && s.last() == Some(&self.persona);
            if !on_top && !std::thread::panicking() {
                panic!("upcxx::PersonaScope: scopes must end in the reverse order they began");
            }
            s.pop();
        });
        if !self.released {
            release(&self.persona);
        }
    }
}

/// One of the calling thread's persona scopes, as [`top_persona_scope`] and
/// [`default_persona_scope`] return it (UPC++ `persona_scope&`), for
/// [`progress_required_for`](crate::progress_required_for) and
/// [`discharge_for`](crate::discharge_for), which concern the personas from this scope
/// to the top of the stack (§10.5.3).
///
/// A scope is named by its place in the thread's persona stack: every persona on the
/// stack was pushed by a scope, the default persona by the thread's implicit bottom
/// scope and the master persona, on the thread that called `init`, by `init`'s. The
/// reference is not `Send`: it stays on the thread whose scope it names (§10.5.3 ¶2).
/// Used after its scope ended, it fails with a message.
///
/// ```compile_fail,E0277
/// let scope = upcxx::top_persona_scope();
/// std::thread::spawn(move || scope.persona());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersonaScopeRef {
    depth: usize,
    /// The address of the persona the scope pushed.
    persona: usize,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl PersonaScopeRef {
    fn at(depth: usize, persona: &Persona) -> PersonaScopeRef {
        PersonaScopeRef {
            depth,
            persona: Arc::as_ptr(&persona.inner) as usize,
            _not_send: std::marker::PhantomData,
        }
    }

    /// The persona this scope pushed.
    ///
    /// # Panics
    /// Once the scope ended.
    #[track_caller]
    pub fn persona(&self) -> Persona {
        self.personas("PersonaScopeRef::persona")
            .into_iter()
            .next()
            .expect("a live scope has its persona")
    }

    /// The personas of this thread's stack from this scope to the top, bottom first.
    ///
    /// # Panics
    /// Once the scope ended.
    #[track_caller]
    pub(crate) fn personas(&self, call: &str) -> Vec<Persona> {
        with_stack(|s| match s.get(self.depth) {
            Some(p) if Arc::as_ptr(&p.inner) as usize == self.persona => s[self.depth..].to_vec(),
            _ => panic!("upcxx::{call}: the persona scope has ended"),
        })
    }
}

/// The calling thread's most recently constructed persona scope that has not ended
/// (UPC++ `top_persona_scope`, §10.5.2 ¶16): the one that pushed [`current_persona`].
/// Progress level: none.
pub fn top_persona_scope() -> PersonaScopeRef {
    with_stack(|s| PersonaScopeRef::at(s.len() - 1, s.last().expect("default persona")))
}

/// The calling thread's implicit bottom scope, which holds its [`default_persona`] for
/// the life of the thread (UPC++ `default_persona_scope`, §10.5.2 ¶19). Progress
/// level: none.
pub fn default_persona_scope() -> PersonaScopeRef {
    with_stack(|s| PersonaScopeRef::at(0, &s[0]))
}

/// Queues `f` on `persona` (free-function form of [`Persona::lpc_ff`]).
pub fn lpc_ff(persona: &Persona, f: impl FnOnce() + Send + 'static) {
    persona.lpc_ff(f)
}

/// Runs `f` on `persona` (free-function form of [`Persona::lpc`]).
pub fn lpc<R, F>(persona: &Persona, f: F) -> Future<R::Value>
where
    F: FnOnce() -> R + Send + 'static,
    R: FutureValue,
    R::Value: Send,
{
    persona.lpc(f)
}

/// The LPC queue under every interleaving (up to `LOOM_MAX_PREEMPTIONS` preemptions) of
/// threads queueing on a persona and the thread holding it taking batches.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn loom_every_lpc_is_taken_exactly_once() {
        let explored = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&explored);
        loom::model(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let q = Arc::new(LpcQueue::new());
            let senders: Vec<_> = [[1, 2], [3, 4]]
                .into_iter()
                .map(|items| {
                    let q = Arc::clone(&q);
                    loom::thread::spawn(move || items.into_iter().for_each(|i| q.push(i)))
                })
                .collect();
            // The holder polls while the senders run: a batch holds whole pushes.
            let mut got = Vec::new();
            let mut batch = VecDeque::new();
            if q.nonempty() {
                q.take(&mut batch);
                got.extend(batch.drain(..));
            }
            senders.into_iter().for_each(|s| s.join().unwrap());
            // Once the senders are done, the count says so and the rest is there.
            assert!(q.nonempty() || got.len() == 4, "{got:?}");
            q.take(&mut batch);
            got.extend(batch.drain(..));
            assert!(!q.nonempty(), "the count returns to 0");
            // Each sender's items in its order, each exactly once.
            let pos = |x: i32| got.iter().position(|&g| g == x).expect("taken");
            assert!(pos(1) < pos(2) && pos(3) < pos(4), "{got:?}");
            assert_eq!(got.len(), 4, "{got:?}");
        });
        println!(
            "loom: {} interleavings explored",
            explored.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
