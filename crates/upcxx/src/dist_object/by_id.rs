//! `&DistObject<T>` and `&Team` as RPC arguments (§9.3 ¶1): each travels as its id
//! and decodes to this process's object of that id, waiting (see `rpc/deferred.rs`)
//! until it is built here.
//!
//! # How long the target's reference lives
//!
//! The function receives `&'de DistObject<T>` or `&'de Team`, with the lifetime of the
//! receive buffer: it cannot keep the reference past its return (its result type does
//! not depend on `'de`, and it captures nothing). The handle it points to is kept
//! here, in a per-thread list, until the next user-level progress of the thread, which
//! no RPC outlives: RPCs run inside user-level progress, which does not nest (§10.2).
//! So a `DistObject` dropped by the function itself (through some `'static` path) has
//! its value dropped after the function returns, never under it.

use std::any::Any;
use std::cell::RefCell;

use super::{DistId, DistObject};
use crate::serialization::{sealed, Error, Reader, Rerun, Serialization, Writer};
use crate::team::{Team, TeamId};
use crate::thread;

thread_local! {
    /// The handles that RPC arguments being run point to.
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `handle` until this thread's next user-level progress and returns a reference
/// to it that lives as long as the receive buffer of the RPC being run.
fn keep<'de, H: 'static>(handle: H) -> &'de H {
    let boxed = Box::new(handle);
    let ptr: *const H = &*boxed;
    let first = KEPT.with(|k| {
        let mut k = k.borrow_mut();
        k.push(boxed);
        k.len() == 1
    });
    if first {
        thread::defer(Box::new(|| KEPT.with(|k| k.borrow_mut().clear())));
    }
    // SAFETY: the box is not dropped before this thread's next user-level progress
    // runs its deferred work, and only an RPC being run decodes a by-id argument
    // (`deserialize` refuses them; `Reader` is not public), whose `'de` borrow ends
    // when its function returns, within the current user-level progress (see the
    // module docs).
    unsafe { &*ptr }
}

/// The handle of the object `id` names if the last one kept is it and it is still built
/// here: consecutive RPCs on one object (a table's inserts) then share one handle, with
/// no handle cloned, boxed or type-checked again.
fn kept_object<'de, T: 'static>(id: &DistId<T>) -> Option<&'de DistObject<T>> {
    let key = id.key();
    let kept = KEPT.with(|k| {
        k.borrow()
            .last()
            .and_then(|h| h.downcast_ref::<DistObject<T>>())
            .filter(|h| h.id().key() == key)
            .map(|h| h as *const DistObject<T>)
    })?;
    // SAFETY: as in `keep`: the boxed handle stays in `KEPT`, unmoved, until this
    // thread's next user-level progress, which the `'de` borrow does not outlive.
    super::registry::is_here(key).then(|| unsafe { &*kept })
}

impl<T: 'static> sealed::Sealed for &DistObject<T> {}

impl<T: 'static> Serialization for &DistObject<T> {
    type Deserialized<'de> = &'de DistObject<T>;

    const BY_ID: bool = true;

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
        w.serde(&self.id())
    }

    fn decode<'de>(r: &mut Reader<'de>) -> Result<&'de DistObject<T>, Error> {
        let id: DistId<T> = r.serde()?;
        if let Some(kept) = kept_object(&id) {
            return Ok(kept);
        }
        Ok(keep(id.lookup("rpc").unwrap_or_else(|| {
            panic!("upcxx::rpc: {} is not built here", id.key())
        })))
    }

    fn wait_until_here(
        r: &mut Reader<'_>,
        make_rerun: &mut dyn FnMut() -> Rerun,
    ) -> Result<bool, Error> {
        let id: DistId<T> = r.serde()?;
        // Built here: `decode` finds it (and checks its type). Otherwise, a dropped
        // object or one on another thread makes `lookup` panic with the reason.
        if super::registry::is_here(id.key()) || id.lookup("rpc").is_some() {
            return Ok(false);
        }
        super::registry::wait(id.key(), make_rerun());
        Ok(true)
    }
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
