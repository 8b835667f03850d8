//! The teams this process knows by id (what [`TeamId::here`](super::TeamId::here) and
//! [`when_here`](super::TeamId::when_here) look up), the ids of the teams it destroyed,
//! and the futures waiting for a team to arrive.
//!
//! The waiting futures are the calling thread's: `when_here` and `split` are both called
//! by the thread holding the master persona (§11.3.2 ¶13, §11.3.1 ¶20), so the split
//! that creates a team finds them there, and futures are single-threaded anyway.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use super::{Team, TeamId};
use crate::future::{make_future, Future, Promise};
use crate::thread;

#[derive(Default)]
struct Known {
    teams: HashMap<TeamId, Team>,
    destroyed: HashSet<TeamId>,
}

static KNOWN: Mutex<Option<Known>> = Mutex::new(None);

thread_local! {
    static WAITING: RefCell<HashMap<TeamId, Vec<Promise<Team>>>> = RefCell::new(HashMap::new());
}

fn known() -> MutexGuard<'static, Option<Known>> {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a team this process has just created; readies the futures waiting for it at
/// this thread's next user-level progress.
pub(super) fn insert(team: &Team) {
    let id = team.state.id;
    known()
        .get_or_insert_with(Known::default)
        .teams
        .insert(id, team.clone());
    let waiting = WAITING.with(|w| w.borrow_mut().remove(&id));
    for promise in waiting.into_iter().flatten() {
        let team = team.clone();
        thread::defer(Box::new(move || promise.fulfill_result(team)));
    }
}

/// Forgets a destroyed team.
pub(super) fn remove(id: TeamId) {
    let mut known = known();
    let known = known.get_or_insert_with(Known::default);
    known.teams.remove(&id);
    known.destroyed.insert(id);
}

pub(super) fn lookup(id: TeamId) -> Option<Team> {
    known().as_ref()?.teams.get(&id).cloned()
}

fn was_destroyed(id: TeamId) -> bool {
    known().as_ref().is_some_and(|k| k.destroyed.contains(&id))
}

/// The failure of a lookup of `id`, which this process does not know.
#[cold]
#[track_caller]
pub(super) fn absent(call: &str, id: TeamId) -> ! {
    if was_destroyed(id) {
        panic!("upcxx::{call}: {id} was destroyed (team::destroy, UPC++ spec §11.3.2 ¶9)")
    }
    panic!(
        "upcxx::{call}: this process has no team {id}: it is not a member, or has not \
         finished creating it (UPC++ spec §11.3.2 ¶9; when_here waits for it)"
    )
}

/// The future of [`TeamId::when_here`](super::TeamId::when_here).
#[track_caller]
pub(super) fn when_here(call: &str, id: TeamId) -> Future<Team> {
    if let Some(team) = lookup(id) {
        return make_future(team);
    }
    if was_destroyed(id) {
        absent(call, id);
    }
    let promise = Promise::new();
    let future = promise.get_future();
    WAITING.with(|w| w.borrow_mut().entry(id).or_default().push(promise));
    future
}
