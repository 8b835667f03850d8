//! `&DistObject<T>` and `&Team` as RPC arguments (§9.3 ¶1): each travels as its id
//! and decodes to this process's object of that id, waiting (see `rpc/deferred.rs`)
//! until it is built here.
//!
//! # How long the target's reference lives
//!
//! The function receives `&'de DistObject<T>` or `&'de Team`, with the lifetime of the
//! receive buffer: it cannot keep the reference past its return (its result type does
//! not depend on `'de`, and it captures nothing). The handle it points to is kept
//! here until the next user-level progress of the thread, which no RPC outlives: RPCs
//! run inside user-level progress, which does not nest (§10.2). So a `DistObject`
//! dropped by the function itself (through some `'static` path) has its value dropped
//! after the function returns, never under it.
//!
//! # The object of the last call, in hand
//!
//! Every RPC with a `&DistObject` argument looks its object up twice: once to see
//! whether it must wait for it (`wait_until_here`), once to decode it. Calls in a row
//! mostly name one object (a table's inserts), so each thread keeps the handle of the
//! object it last decoded, with its key and type, in [`LAST`]: a call naming that
//! object again compares two words and a type id and lends the same handle, with no
//! registry lookup, no handle cloned or boxed and no `Any` downcast. We chose this
//! over an index by id, which would still hash per call, because the one cached entry
//! covers the common case at the cost of a comparison and is kept valid by one rule:
//! dropping an object's owner ([`super::registry::unregister`]) calls [`forget`], so a
//! cached handle is always that of an object built on this thread and alive (a later
//! call on a dropped object misses and fails, naming it, as before). The cache is per
//! thread, as the registry's objects are, so an object on another thread is never
//! found through it. A key names one object for the life of the process (numbers are
//! never reused), so the key and the type decide.
//!
//! A handle in the cache may be lent to a call being run; once lent, replacing or
//! forgetting it keeps it until the next user-level progress
//! (`thread::keep_until_progress`) rather than dropping it under the call (an RPC with
//! two `&DistObject` arguments replaces the first one's handle while decoding the
//! second). When nothing is lent, a forgotten handle is dropped at once, so an
//! object's value is dropped when the last handle outside this module goes, as without
//! the cache.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};

use super::registry::Key;
use super::{DistId, DistObject};
use crate::serialization::{sealed, Error, Reader, Rerun, Serialization, Writer};
use crate::team::{Team, TeamId};
use crate::thread;

/// The object of the last `&DistObject` argument decoded on this thread.
#[derive(Clone, Copy)]
struct Last {
    key: Key,
    /// `TypeId::of::<T>()` of the `DistObject<T>` at `handle`.
    ty: TypeId,
    /// The handle, owned by [`LAST_OWNED`].
    handle: *const (),
}

thread_local! {
    /// The object of the last call; read by every `&DistObject` argument, so it has
    /// no destructor and a constant initializer (no lazy-initialization check).
    static LAST: Cell<Option<Last>> = const { Cell::new(None) };
    /// Owns the handle [`LAST`] points to: a `Box<DistObject<T>>`.
    static LAST_OWNED: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Drops `handle`, or keeps it until the next user-level progress if a call may hold
/// a reference to it.
fn retire(handle: Box<dyn Any>) {
    if thread::lent() {
        thread::keep_until_progress(handle);
    }
}

/// Keeps `handle` until this thread's next user-level progress and returns a reference
/// to it that lives as long as the receive buffer of the RPC being run.
fn keep<'de, H: 'static>(handle: H) -> &'de H {
    let boxed = Box::new(handle);
    let ptr: *const H = &*boxed;
    thread::keep_until_progress(boxed);
    // SAFETY: the box is not dropped before this thread's next user-level progress
    // runs `thread::end_loans`, and only an RPC being run decodes a by-id argument
    // (`deserialize` refuses them; `Reader` is not public), whose `'de` borrow ends
    // when its function returns, within the current user-level progress (see the
    // module docs).
    unsafe { &*ptr }
}

/// The cached handle of the object named `key`, if it is a `DistObject<T>`.
#[inline(always)]
fn cached<'de, T: 'static>(key: Key) -> Option<&'de DistObject<T>> {
    let last = LAST.get()?;
    if last.key != key || last.ty != TypeId::of::<T>() {
        return None;
    }
    thread::lend_until_progress();
    // SAFETY: `LAST_OWNED` owns the handle while `LAST` points to it; once lent, it is
    // not dropped before this thread's next user-level progress (`retire`), which the
    // `'de` borrow does not outlive (see `keep`). It is a `DistObject<T>`: `ty` says so.
    Some(unsafe { &*last.handle.cast::<DistObject<T>>() })
}

/// Makes `handle` the cached one and lends it.
fn cache<'de, T: 'static>(handle: DistObject<T>) -> &'de DistObject<T> {
    let key = handle.id().key();
    let boxed = Box::new(handle);
    let ptr: *const DistObject<T> = &*boxed;
    let old = LAST_OWNED.with(|o| o.borrow_mut().replace(boxed));
    LAST.set(Some(Last {
        key,
        ty: TypeId::of::<T>(),
        handle: ptr.cast(),
    }));
    if let Some(old) = old {
        retire(old);
    }
    thread::lend_until_progress();
    // SAFETY: as in `cached`.
    unsafe { &*ptr }
}

/// Forgets the cached handle if it is the object `key`'s, which is being destroyed:
/// its name no longer finds it here.
pub(super) fn forget(key: Key) {
    if LAST.get().is_none_or(|last| last.key != key) {
        return;
    }
    LAST.set(None);
    // An owner dropped at thread exit may outlive `LAST_OWNED`, which then dropped the
    // handle already.
    if let Ok(Some(old)) = LAST_OWNED.try_with(|o| o.borrow_mut().take()) {
        retire(old);
    }
}

/// Reads a `DistId` as [`write_id`] writes it.
#[inline(always)]
fn read_id<T: 'static>(r: &mut Reader<'_>) -> Result<DistId<T>, Error> {
    let team: TeamId = bytemuck::cast(r.varint()?);
    let seq = r.varint()?;
    Ok(DistId::of_key(Key { team, seq }))
}

/// Writes `id` as its serde form does (two varints), without a serializer.
#[inline]
fn write_id<T: 'static>(w: &mut Writer<'_>, id: DistId<T>) -> Result<(), Error> {
    w.varint(id.team.to_u64())?;
    w.varint(id.seq)
}

impl<T: 'static> sealed::Sealed for &DistObject<T> {}

impl<T: 'static> Serialization for &DistObject<T> {
    type Deserialized<'de> = &'de DistObject<T>;

    const BY_ID: bool = true;

    #[inline(always)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        write_id(w, self.id())
    }

    // Always inlined: its common case (the object in hand) is a few compares, less
    // than a call's own cost; the rest is out of line.
    #[inline(always)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<&'de DistObject<T>, Error> {
        let id: DistId<T> = read_id(r)?;
        match cached(id.key()) {
            Some(handle) => Ok(handle),
            None => Ok(look_up(id)),
        }
    }

    #[inline(always)]
    fn wait_until_here(
        r: &mut Reader<'_>,
        make_rerun: &mut dyn FnMut() -> Rerun,
    ) -> Result<bool, Error> {
        let id: DistId<T> = read_id(r)?;
        if LAST.get().is_some_and(|last| last.key == id.key()) {
            return Ok(false);
        }
        Ok(wait_unless_here(id, make_rerun))
    }
}

/// `decode` of an object not in the cache: looks it up and caches it.
#[cold]
#[inline(never)]
fn look_up<'de, T: 'static>(id: DistId<T>) -> &'de DistObject<T> {
    let handle = id
        .lookup("rpc")
        .unwrap_or_else(|| panic!("upcxx::rpc: {} is not built here", id.key()));
    cache(handle)
}

/// `wait_until_here` of an object not in the cache: if it is not built here yet,
/// arranges for the call to run again once it is, and returns true.
#[cold]
#[inline(never)]
fn wait_unless_here<T: 'static>(id: DistId<T>, make_rerun: &mut dyn FnMut() -> Rerun) -> bool {
    // Built here: `decode` finds it (and checks its type). Otherwise, a dropped object
    // or one on another thread makes `lookup` panic with the reason.
    let key = id.key();
    if super::registry::is_here(key) || id.lookup("rpc").is_some() {
        return false;
    }
    super::registry::wait(key, make_rerun());
    true
}

impl sealed::Sealed for &Team {}

impl Serialization for &Team {
    type Deserialized<'de> = &'de Team;

    const BY_ID: bool = true;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.serde(&self.id())
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<&'de Team, Error> {
        let id: TeamId = r.serde()?;
        let team = id.when_here().into_ready().unwrap_or_else(|_| {
            panic!("upcxx::rpc: {id} is not built here");
        });
        Ok(keep(team))
    }

    fn wait_until_here(
        r: &mut Reader<'_>,
        make_rerun: &mut dyn FnMut() -> Rerun,
    ) -> Result<bool, Error> {
        let id: TeamId = r.serde()?;
        let team = id.when_here();
        if team.ready() {
            return Ok(false);
        }
        let rerun = make_rerun();
        team.on_ready(move |_| rerun());
        Ok(true)
    }
}
