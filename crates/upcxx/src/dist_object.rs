//! Distributed objects (UPC++ spec ch. 14): one logical object with a member on each
//! rank of a team, and a name, the same on every rank, that finds this rank's member.
//!
//! ```
//! use std::cell::Cell;
//! use upcxx::{DistObject, Rank};
//!
//! upcxx::init();
//! let me = upcxx::rank_me();
//! // Collective over the world: every rank builds its member, here a counter.
//! let hits = DistObject::new(Cell::new(0u64));
//! // A `&DistObject` RPC argument travels as its id and is the target's member when
//! // the function runs; if the target has not built it yet, the call waits there.
//! let next = (me + 1) % upcxx::rank_n();
//! upcxx::rpc(next, |h: &DistObject<Cell<u64>>| h.set(h.get() + 1), (&hits,)).wait();
//! upcxx::barrier();
//! assert_eq!(hits.get(), 1);
//! // The value of another rank's member, by RPC.
//! let prev: Rank = (me + upcxx::rank_n() - 1) % upcxx::rank_n();
//! assert_eq!(hits.fetch(prev).wait().get(), 1);
//! upcxx::finalize();
//! ```
//!
//! # Design
//!
//! * A [`DistObject`] is a handle onto this rank's member: its value, its [`DistId`]
//!   and its team. The handle [`new`](DistObject::new) returns *owns* the member:
//!   dropping it destroys the member here (§14.4 ¶17). [`DistId::here`] and
//!   [`DistId::when_here`] hand out further handles; they keep the value alive but
//!   not the name, which stops finding the member once its owner is dropped. C++
//!   hands out references to the one object instead; Rust values move, so the member
//!   lives behind the handles, and a reference cannot outlive it.
//! * The value is shared, so [`DistObject`] dereferences to `&T` only: an RPC may read
//!   the member during any user-level progress. Mutate it through a `Cell`, `RefCell`
//!   or other interior mutability (`DistObject<RefCell<HashMap<K, V>>>`), as the RPCs
//!   of the UPC++ programming guide mutate their `dist_object`'s map.
//! * The id is the team's [`TeamId`] and the number of the object among the team's
//!   distributed objects in this process, counted at construction. Construction is
//!   collective (§14.4 ¶4), so the n-th object built over a team has the same number on
//!   every member, without communication.
//! * Members live on the thread that holds the master persona (construction and the
//!   RPCs that find them require it, §14.4 ¶4, §9.3 ¶6); handles are not `Send`.
//!
//! # Bad input, and what happens
//!
//! * An RPC naming a member dropped on its target: the target fails, naming the object
//!   ("dropped here"), when the RPC runs; the spec leaves this undefined (§9.3 ¶1).
//! * [`DistId::here`] of a dropped member, or of one not built here yet: a panic naming
//!   which. [`DistId::when_here`] of a dropped member panics too.
//! * [`DistId::when_here`] of an id whose member is never built here (this process is
//!   not a member of the team, or its members never built the object): the future is
//!   never ready, and waiting on it waits forever, as for [`TeamId::when_here`]; an RPC
//!   naming such an object likewise never runs.
//! * [`DistObject::fetch`] from a rank outside the team: a panic at the call.
//! * A name used on a thread other than the one its member lives on (the master
//!   persona moved): a panic naming the rule. A name of one type looked up as
//!   another's (`DistId<T>` deserialized as a `DistId<U>`): a panic naming both.
//!
//! Distributed objects sit on teams, RPC and futures.

mod by_id;
mod registry;

use std::any::Any;
use std::marker::PhantomData;
use std::rc::Rc;

use bytemuck::{Pod, Zeroable};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::future::{make_future, Future, FutureValue, Promise};
use crate::runtime::state::{check_init, Rank};
use crate::team::{check_collective_initiation, world, Team, TeamId};
use crate::thread;
use registry::{Key, Status};

/// A distributed object (UPC++ `dist_object<T>`, §14.4): this rank's member of an
/// object with a member on every rank of a team. See the [module documentation](self).
pub struct DistObject<T: 'static> {
    inner: Rc<Inner<T>>,
    /// Whether this is the handle `new` returned, whose drop destroys the member.
    owner: bool,
}

struct Inner<T> {
    id: DistId<T>,
    team: Team,
    value: T,
    /// Where the object was built: the line its destruction is reported at.
    #[cfg_attr(not(feature = "gasp"), allow(dead_code))]
    built_at: &'static std::panic::Location<'static>,
}

impl<T: 'static> DistObject<T> {
    /// Builds this rank's member of a distributed object over the world team, with
    /// `value` (UPC++ `dist_object(T value)`, §14.4 ¶3). Collective over the world;
    /// makes no progress.
    ///
    /// # Panics
    /// Off the thread holding the master persona (§14.4 ¶4). It may be called in the
    /// restricted context (it makes no progress, ¶6).
    #[track_caller]
    pub fn new(value: T) -> DistObject<T> {
        DistObject::new_in(world(), value)
    }

    /// Builds this rank's member of a distributed object over `team`, with `value`
    /// (UPC++ `dist_object(T value, team&)`, §14.4 ¶3). Collective over `team`: the
    /// n-th object a rank builds over a team is the n-th of every member. The futures of
    /// [`DistId::when_here`] waiting for it are ready, their callbacks run, before this
    /// returns (¶5); the RPCs waiting for it run at the next user-level progress. Makes
    /// no progress.
    ///
    /// # Panics
    /// If `team` is invalid or destroyed, or off the thread holding the master persona
    /// (§14.4 ¶4). It may be called in the restricted context.
    #[track_caller]
    pub fn new_in(team: &Team, value: T) -> DistObject<T> {
        const CALL: &str = "dist_object::dist_object";
        check_init(CALL);
        let team_id = team.id();
        check_collective_initiation(CALL);
        let span = gasp::span!(GASP_UPCXX_DIST_OBJECT_CONSTRUCT, team_id.to_u64());
        let built_at = std::panic::Location::caller();
        let mut value = Some(value);
        let key = registry::register(team_id, |key| {
            let inner: Rc<dyn Any> = Rc::new(Inner {
                id: DistId::of_key(key),
                team: team.clone(),
                value: value.take().expect("made once"),
                built_at,
            });
            inner
        });
        gasp::end!(span, team_id.to_u64(), key.seq);
        DistId::<T>::of_key(key)
            .lookup(CALL)
            .map(|mut handle| {
                handle.owner = true;
                handle
            })
            .expect("registered above")
    }

    /// Another handle onto this member, which keeps the value alive but does not own
    /// the member (dropping it destroys nothing).
    fn share(&self) -> DistObject<T> {
        DistObject {
            inner: Rc::clone(&self.inner),
            owner: false,
        }
    }

    /// The name of this distributed object, the same on every member (UPC++
    /// `dist_object::id`, §14.4 ¶19).
    pub fn id(&self) -> DistId<T> {
        self.inner.id
    }

    /// The team this distributed object is built over (UPC++ `dist_object::team`,
    /// §14.4 ¶22).
    pub fn team(&self) -> &Team {
        &self.inner.team
    }

    /// A future of a copy of the member at `rank` of the object's team (UPC++
    /// `dist_object::fetch`, §14.4 ¶32): an RPC to that rank that returns its value,
    /// waiting there until it is built. The reply is serialized from the member itself,
    /// so `T` need only be serializable (¶32), not `Clone`, and a large member is not
    /// copied before it is sent. Progress level: internal.
    ///
    /// # Panics
    /// If `rank` is not a rank of the team (§14.4 ¶33), or if the team was destroyed.
    /// The target fails if it has dropped its member.
    #[track_caller]
    pub fn fetch(&self, rank: Rank) -> Future<T>
    where
        T: Serialize + DeserializeOwned,
    {
        let team = &self.inner.team;
        let n = team.rank_n();
        if rank >= n {
            panic!(
                "upcxx::dist_object::fetch: rank {rank} is not a rank of {} of {n} ranks \
                 (UPC++ spec §14.4 ¶33)",
                team.id()
            );
        }
        let key = self.inner.id.key();
        let span = gasp::span!(
            GASP_UPCXX_DIST_OBJECT_FETCH,
            key.team.to_u64(),
            key.seq,
            rank
        );
        let copy = crate::rpc::rpc(
            team[rank],
            |obj: &DistObject<T>| Fetched(obj.share()),
            (self,),
        );
        gasp::end!(span, key.team.to_u64(), key.seq, rank);
        copy
    }
}

/// The member an RPC of [`DistObject::fetch`] found, as that RPC returns it: its reply
/// is serialized from the member itself (no `Clone` needed, nothing copied first), and
/// its future is the future of `T` itself, for any `T` (not only the types
/// [`FutureValue`] covers), so `fetch` needs no `then` to unwrap it.
struct Fetched<T: 'static>(DistObject<T>);

impl<T: Serialize + DeserializeOwned + 'static> FutureValue for Fetched<T> {
    type Value = T;
    /// A copy made as the reply makes it, through serialization (an RPC's result
    /// reaches its future by [`lend_value`](FutureValue::lend_value), not here).
    fn into_future(self) -> Future<T> {
        let bytes = crate::serialization::serialize(&*self.0);
        make_future(
            crate::serialization::deserialize::<T>(&bytes)
                .unwrap_or_else(|e| panic!("upcxx::dist_object::fetch: {e}")),
        )
    }

    #[inline]
    fn lend_value<R>(self, reply: impl FnOnce(&T) -> R) -> Result<R, Future<T>> {
        Ok(reply(&self.0))
    }
}

impl<T: 'static> std::ops::Deref for DistObject<T> {
    type Target = T;

    /// This rank's value (UPC++ `dist_object::operator*`, §14.4 ¶29).
    fn deref(&self) -> &T {
        &self.inner.value
    }
}

impl<T: 'static> Drop for DistObject<T> {
    /// Dropping the handle that `new` returned destroys this rank's member (§14.4 ¶17):
    /// its id no longer finds it here, and its value is dropped once no handle (from
    /// [`DistId::here`], or one an RPC being run holds) is left.
    fn drop(&mut self) {
        if self.owner {
            let key = self.inner.id.key();
            #[cfg(feature = "gasp")]
            if gasp::enabled() {
                let event = gasp::events::args::GASP_UPCXX_DIST_OBJECT_DESTROY;
                let args = event.start(key.team.to_u64(), key.seq);
                gasp::instrument::atomic(self.inner.built_at, args);
            }
            registry::unregister(key);
        }
    }
}

impl<T: std::fmt::Debug + 'static> std::fmt::Debug for DistObject<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistObject")
            .field("id", &self.inner.id)
            .field("value", &self.inner.value)
            .finish()
    }
}

/// The name of a distributed object, the same on every member of its team (UPC++
/// `dist_id<T>`, §14.4 ¶37): trivially serializable (send it in an RPC and look the
/// object up on arrival), hashable and ordered. The default value is the invalid id
/// (¶41).
#[repr(C)]
pub struct DistId<T> {
    team: TeamId,
    seq: u64,
    _value: PhantomData<fn() -> T>,
}

impl<T: 'static> DistId<T> {
    fn of_key(key: Key) -> DistId<T> {
        DistId {
            team: key.team,
            seq: key.seq,
            _value: PhantomData,
        }
    }

    fn key(&self) -> Key {
        Key {
            team: self.team,
            seq: self.seq,
        }
    }

    /// Whether this is a valid id (not the default-constructed one).
    pub fn is_valid(&self) -> bool {
        self.team.is_valid()
    }

    /// The id of the team the object is built over.
    pub fn team_id(&self) -> TeamId {
        self.team
    }

    /// A handle onto this process's member of the object (UPC++ `dist_id::here`,
    /// §14.4 ¶47). It does not own the member: dropping it leaves the member alive.
    ///
    /// # Panics
    /// If the id is invalid, if the member is not built here yet or was dropped (¶48),
    /// or if it lives on another thread.
    #[track_caller]
    pub fn here(&self) -> DistObject<T> {
        const CALL: &str = "dist_id::here";
        check_init(CALL);
        self.check_valid(CALL);
        self.lookup(CALL).unwrap_or_else(|| {
            panic!(
                "upcxx::{CALL}: {} is not built here yet (UPC++ spec §14.4 ¶48; when_here \
                 waits for it)",
                self.key()
            )
        })
    }

    /// A future of a handle onto this process's member of the object, ready at once if
    /// it is built, else when it is: inside the constructor (UPC++ `dist_id::when_here`,
    /// §14.4 ¶43, ¶5). An id whose member is never built here gives a future that is
    /// never ready (see the [module documentation](self)).
    ///
    /// # Panics
    /// If the id is invalid, if the member was dropped (¶44), if it lives on another
    /// thread, or off the thread holding the master persona (¶44).
    #[track_caller]
    pub fn when_here(&self) -> Future<DistObject<T>> {
        const CALL: &str = "dist_id::when_here";
        check_init(CALL);
        self.check_valid(CALL);
        if !thread::holds_master() {
            panic!(
                "upcxx::{CALL}: the calling thread does not hold the master persona \
                 (UPC++ spec §14.4 ¶44)"
            );
        }
        if let Some(here) = self.lookup(CALL) {
            return make_future(here);
        }
        let promise = Promise::new();
        let future = promise.get_future();
        let key = self.key();
        registry::when_here(
            key,
            Box::new(move |obj| promise.fulfill_result(handle(key, obj, CALL))),
        );
        future
    }

    /// A handle onto this process's member, `None` if it is not built here yet.
    ///
    /// # Panics
    /// If it was dropped, if it lives on another thread, or if it is not a `T`.
    #[track_caller]
    fn lookup(&self, call: &str) -> Option<DistObject<T>> {
        let key = self.key();
        match registry::status(key) {
            Status::Here(obj) => Some(handle(key, &obj, call)),
            Status::NotYet => None,
            Status::Dropped => panic!(
                "upcxx::{call}: {key} was dropped here (its DistObject was dropped on this \
                 rank before this use of its id; UPC++ spec §14.4 ¶17)"
            ),
            Status::OnOtherThread => panic!(
                "upcxx::{call}: {key} lives on another thread, which held the master \
                 persona when it built it; its id finds it only there (UPC++ spec §14.4 ¶4)"
            ),
        }
    }

    #[track_caller]
    fn check_valid(&self, call: &str) {
        if !self.is_valid() {
            panic!("upcxx::{call}: the dist_id is invalid (default-constructed, §14.4 ¶41)");
        }
    }
}

/// A handle onto the member `obj` named `key`, checked to be a `DistObject<T>`.
#[track_caller]
fn handle<T: 'static>(key: Key, obj: &Rc<dyn Any>, call: &str) -> DistObject<T> {
    let inner = Rc::clone(obj).downcast::<Inner<T>>().unwrap_or_else(|_| {
        panic!(
            "upcxx::{call}: {key} is not a DistObject<{}>: its id was sent as one type and \
             received as another",
            std::any::type_name::<T>()
        )
    });
    DistObject {
        inner,
        owner: false,
    }
}

impl<T> Default for DistId<T> {
    fn default() -> DistId<T> {
        DistId {
            team: TeamId::default(),
            seq: u64::MAX,
            _value: PhantomData,
        }
    }
}

impl<T> Clone for DistId<T> {
    fn clone(&self) -> DistId<T> {
        *self
    }
}

impl<T> Copy for DistId<T> {}

impl<T> PartialEq for DistId<T> {
    fn eq(&self, other: &DistId<T>) -> bool {
        (self.team, self.seq) == (other.team, other.seq)
    }
}

impl<T> Eq for DistId<T> {}

impl<T> PartialOrd for DistId<T> {
    fn partial_cmp(&self, other: &DistId<T>) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for DistId<T> {
    fn cmp(&self, other: &DistId<T>) -> std::cmp::Ordering {
        (self.team, self.seq).cmp(&(other.team, other.seq))
    }
}

impl<T> std::hash::Hash for DistId<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.team, self.seq).hash(state);
    }
}

impl<T> std::fmt::Debug for DistId<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.team.is_valid() {
            return f.write_str("dist_id#invalid");
        }
        write!(f, "dist_id#{}@{}", self.seq, self.team)
    }
}

// SAFETY: all-zero bytes are a valid `DistId` (two integers and a zero-sized marker).
unsafe impl<T: 'static> Zeroable for DistId<T> {}
// SAFETY: `repr(C)` of two `u64`s (`TeamId` is a transparent `u64`) and a zero-sized
// marker: no padding, every bit pattern valid, `Copy` for every `T`.
unsafe impl<T: 'static> Pod for DistId<T> {}

impl<T> Serialize for DistId<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.team, self.seq).serialize(s)
    }
}

impl<'de, T> Deserialize<'de> for DistId<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DistId<T>, D::Error> {
        let (team, seq) = <(TeamId, u64)>::deserialize(d)?;
        Ok(DistId {
            team,
            seq,
            _value: PhantomData,
        })
    }
}
