//! The distributed objects this process has built, by id (what [`DistId::here`] and
//! [`DistId::when_here`] look up, and what an RPC argument decodes to), the numbering
//! of each team's objects, and what waits for an object to be built.
//!
//! An object's value lives on the thread that built it, which held the master persona
//! (§14.4 ¶4), and so are its entry, its `when_here` waiters and its lookups: the thread
//! that runs RPCs and calls `here` holds the master persona too. The RPCs waiting for an
//! object belong to the master persona, which may move between threads before the
//! object is built (§10.5.3), so they are kept for the whole process and run by the
//! thread that builds it. What every thread may ask, which
//! ids were numbered and which of them are alive on which thread, is kept behind a lock,
//! so that a lookup on a thread the object does not live on fails with a message rather
//! than waiting forever.
//!
//! [`DistId::here`]: super::DistId::here
//! [`DistId::when_here`]: super::DistId::when_here

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use crate::serialization::Rerun;
use crate::team::TeamId;
use crate::thread;

/// The name of a distributed object: its team and its number among the team's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub team: TeamId,
    pub seq: u64,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dist_object #{} of {}", self.seq, self.team)
    }
}

#[derive(Default)]
struct Numbering {
    /// The number the next object built over each team gets.
    next: HashMap<TeamId, u64>,
    /// The thread (`thread::thread_token`) of each object alive in this process.
    live: HashMap<Key, u64>,
    /// RPCs whose arguments name an object not built yet, run at the next user-level
    /// progress of the thread that builds it: kept here, not per thread, because they
    /// belong to the master persona, which may move to another thread meanwhile.
    reruns: HashMap<Key, Vec<Rerun>>,
}

static NUMBERING: Mutex<Option<Numbering>> = Mutex::new(None);

fn numbering() -> MutexGuard<'static, Option<Numbering>> {
    NUMBERING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A callback that gets the object once it is built (a `when_here` promise).
type Arrival = Box<dyn FnOnce(&Rc<dyn Any>)>;

thread_local! {
    /// The objects of this thread, by name: an `Rc<Inner<T>>` each. Every RPC with a
    /// `&DistObject` argument looks its object up here, so the map hashes with Fx, not
    /// the DoS-resistant default: the keys are ids the job itself numbered.
    static OBJECTS: RefCell<FxHashMap<Key, Rc<dyn Any>>> = RefCell::new(FxHashMap::default());
    /// `when_here` futures of this thread, readied by the constructor.
    static ARRIVALS: RefCell<FxHashMap<Key, Vec<Arrival>>> = RefCell::new(FxHashMap::default());
}

/// Where an object stands in this process, as seen from the calling thread.
pub(super) enum Status {
    /// Built on this thread and not dropped.
    Here(Rc<dyn Any>),
    /// Not built here yet (or never will be, if this process is not a member).
    NotYet,
    /// Built and dropped.
    Dropped,
    /// Alive on another thread, which held the master persona when it built it.
    OnOtherThread,
}

/// Whether the object named `key` is built on this thread and not dropped (what an RPC
/// argument checks when the object is not the one in hand, `by_id.rs`).
#[inline]
pub(super) fn is_here(key: Key) -> bool {
    OBJECTS.with(|o| o.borrow().contains_key(&key))
}

pub(super) fn status(key: Key) -> Status {
    if let Some(obj) = OBJECTS.with(|o| o.borrow().get(&key).cloned()) {
        return Status::Here(obj);
    }
    let numbering = numbering();
    let Some(n) = numbering.as_ref() else {
        return Status::NotYet;
    };
    if n.live.contains_key(&key) {
        Status::OnOtherThread
    } else if n.next.get(&key.team).is_some_and(|&next| key.seq < next) {
        Status::Dropped
    } else {
        Status::NotYet
    }
}

/// Numbers and records a new object of `team`, made by `make` from its name; runs the
/// `when_here` callbacks waiting for it now and queues the RPCs waiting for it for this
/// thread's next user-level progress (§14.4 ¶5).
pub(super) fn register(team: TeamId, make: impl FnOnce(Key) -> Rc<dyn Any>) -> Key {
    let (key, reruns) = {
        let mut numbering = numbering();
        let n = numbering.get_or_insert_with(Numbering::default);
        let next = n.next.entry(team).or_insert(0);
        let key = Key { team, seq: *next };
        *next += 1;
        n.live.insert(key, thread::thread_token());
        (key, n.reruns.remove(&key))
    };
    let obj = make(key);
    OBJECTS.with(|o| o.borrow_mut().insert(key, Rc::clone(&obj)));
    for rerun in reruns.into_iter().flatten() {
        thread::defer(rerun);
    }
    let arrivals = ARRIVALS.with(|a| a.borrow_mut().remove(&key));
    for arrival in arrivals.into_iter().flatten() {
        arrival(&obj);
    }
    key
}

/// Forgets a dropped object: its name no longer finds it here, nor through the handle
/// RPC arguments keep in hand (`by_id.rs`).
pub(super) fn unregister(key: Key) {
    // `try_with`: an owner kept in a thread-local of the program may be dropped after
    // this thread's table is gone, at the thread's (or the process's) end, where `with`
    // would panic inside a destructor and abort.
    let obj = OBJECTS
        .try_with(|o| o.borrow_mut().remove(&key))
        .ok()
        .flatten();
    if let Some(n) = numbering().as_mut() {
        n.live.remove(&key);
    }
    // The value may run code when dropped: not while the tables are borrowed.
    drop(obj);
    super::by_id::forget(key);
}

/// Runs `rerun` at the user-level progress after the object `key` is built here.
pub(super) fn wait(key: Key, rerun: Rerun) {
    let mut numbering = numbering();
    let n = numbering.get_or_insert_with(Numbering::default);
    n.reruns.entry(key).or_default().push(rerun);
}

/// Calls `arrival` with the object `key` when it is built here.
pub(super) fn when_here(key: Key, arrival: Arrival) {
    ARRIVALS.with(|a| a.borrow_mut().entry(key).or_default().push(arrival));
}
