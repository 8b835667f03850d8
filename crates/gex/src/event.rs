//! Events, local completion and implicit-event (NBI) bookkeeping (GASNet-EX spec,
//! "Events", "Extended API" notes 2a/2b, "NBI Access regions", "Event test/wait").
//!
//! An [`Event`] is the handle of one explicit-event (NB) operation. An operation the
//! conduit finished before returning (every operation on shared memory) yields
//! [`Event::invalid`], the spec's `GEX_EVENT_INVALID`, at no cost; a pending one holds
//! the conduit's operation handles, or for the primordial team's barrier just its epoch
//! (no allocation). `test` never polls; `wait` polls until done.
//!
//! Implicit-event (NBI) operations are tracked per thread, by [`EventCategory`], or in
//! the thread's open access region, whose end yields one event for all of them.
//!
//! A wait that unwinds (a handler run by its polls panicked, and the program caught the
//! panic) consumed its event, but not the operation: a transfer may still read the
//! source or write the destination its `unsafe` NB or NBI call borrowed, and nothing
//! can synchronize it any more. Such buffers stay lent for good: the program must not
//! reuse or free them (leaking them is the safe way out). The wait does not go on
//! waiting while it unwinds to guard them: for an operation that never completes (a
//! collective whose ranks disagree) that would hang a job that is failing.

use std::cell::RefCell;
use std::sync::Arc;

use crate::conduit::{Completion, OpHandle};
use crate::context;
use crate::runtime::{runtime, Runtime};
use crate::team::TeamData;

/// Handle of a non-blocking operation (GASNet-EX `gex_Event_t`).
#[must_use = "an event must be synchronized with test or wait"]
#[derive(Debug, Default)]
pub struct Event {
    state: State,
}

#[derive(Debug, Default)]
enum State {
    /// `GEX_EVENT_INVALID`: nothing left to synchronize.
    #[default]
    Invalid,
    /// One pending operation of the conduit (what every NB RMA call returns): its
    /// handle alone, so that the event costs no allocation of its own.
    One(Arc<OpHandle>),
    /// A pending put that the conduit may read the source of until it completes (its
    /// `lc_opt` was `GEX_EVENT_DEFER` or an event): [`State::One`] whose LC leaf is the
    /// put itself.
    HeldPut(Arc<OpHandle>),
    /// Pending operations of the conduit.
    Ops(Arc<EventState>),
    /// The LC leaf of a [`State::HeldPut`]: the put's completion, under an identity of
    /// its own (see [`Event::gasp_handle`]).
    PutLeaf(Arc<OpHandle>),
    /// The LC leaf of a [`State::Ops`]: its `lc` operations.
    OpsLeaf(Arc<EventState>),
    /// The split-phase barrier of the primordial team with this epoch: waiting for it
    /// is the barrier's wait half (GASP §5.4.2 `GASP_UPC_WAIT`), not the sync of a
    /// non-blocking operation.
    Barrier(u64),
    /// The barrier with this epoch of a split team that barriers through its block of
    /// signal words (`barrier::team`): an operation of the team, synchronized as the
    /// team's other collectives are. The epoch's low 32 bits, so that an event stays two
    /// words (see `barrier::team::is_complete`).
    TeamBarrier(Arc<TeamData>, u32),
}

// An event is two words, returned in registers by every non-blocking call.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Event>() == 16);

#[derive(Debug, Default)]
struct EventState {
    /// The operations whose completion the event stands for.
    ops: Vec<Arc<OpHandle>>,
    /// The local-completion leaf (source buffers reusable): the operations of
    /// `GEX_EVENT_GROUP` puts in an access region.
    lc: Vec<Arc<OpHandle>>,
}

impl Event {
    /// The event of an operation that is already complete (`GEX_EVENT_INVALID`).
    pub const fn invalid() -> Event {
        Event {
            state: State::Invalid,
        }
    }

    pub(crate) fn from_completion(c: Completion) -> Event {
        match c {
            Completion::Done => Event::invalid(),
            Completion::Pending(op) if op.is_done() => Event::invalid(),
            Completion::Pending(op) => Event {
                state: State::One(op),
            },
        }
    }

    /// The event of the primordial team's split-phase barrier of this epoch (invalid if
    /// it is already complete: there is nothing to wait for, as with any operation
    /// complete at return).
    pub(crate) fn barrier(epoch: u64) -> Event {
        if crate::barrier::is_complete(epoch) {
            Event::invalid()
        } else {
            Event {
                state: State::Barrier(epoch),
            }
        }
    }

    /// The event of barrier `epoch` of split team `team` (invalid if it is already
    /// complete).
    pub(crate) fn team_barrier(team: Arc<TeamData>, epoch: u64) -> Event {
        if crate::barrier::team::is_complete(&team, epoch) {
            Event::invalid()
        } else {
            Event {
                state: State::TeamBarrier(team, epoch as u32),
            }
        }
    }

    /// The event of conduit operations that may still be pending, whose LC leaf
    /// completes with `lc` (`GEX_EVENT_INVALID` if none is pending).
    pub(crate) fn from_ops(ops: Vec<Arc<OpHandle>>, lc: Vec<Arc<OpHandle>>) -> Event {
        if ops.iter().chain(&lc).all(|o| o.is_done()) {
            Event::invalid()
        } else {
            Event {
                state: State::Ops(Arc::new(EventState { ops, lc })),
            }
        }
    }

    /// The GASP handle of the operation (GASP §5.4.6): `GASP_NB_TRIVIAL` for an
    /// operation already complete, else an id unique among pending events (an address
    /// for operations; the root's address with its low bit set, which no address has,
    /// for a leaf; a barrier's epoch with the top bit set, which no address has).
    pub(crate) fn gasp_handle(&self) -> u64 {
        match &self.state {
            State::Invalid => gasp::events::NB_TRIVIAL,
            State::One(op) | State::HeldPut(op) => Arc::as_ptr(op) as u64,
            State::Ops(s) => Arc::as_ptr(s) as u64,
            State::PutLeaf(op) => Arc::as_ptr(op) as u64 | 1,
            State::OpsLeaf(s) => Arc::as_ptr(s) as u64 | 1,
            State::Barrier(epoch) => epoch | 1 << 63,
            // Unlike any address and the primordial barrier's (bit 62 alone of the top
            // two), and distinct per team (its shared name's low 30 bits) and epoch.
            State::TeamBarrier(team, epoch) => {
                let name = u64::from(team.shared_name() as u32) & 0x3fff_ffff;
                1 << 62 | name << 32 | u64::from(*epoch)
            }
        }
    }

    /// True for `GEX_EVENT_INVALID`: nothing left to synchronize.
    pub fn is_invalid(&self) -> bool {
        matches!(self.state, State::Invalid)
    }

    #[inline]
    fn is_done(&self) -> bool {
        match &self.state {
            State::Invalid => true,
            State::One(op) | State::HeldPut(op) | State::PutLeaf(op) => op.is_done(),
            State::Ops(s) => s.ops.iter().chain(&s.lc).all(|o| o.is_done()),
            State::OpsLeaf(s) => s.lc.iter().all(|o| o.is_done()),
            State::Barrier(epoch) => crate::barrier::is_complete(*epoch),
            State::TeamBarrier(team, epoch) => crate::barrier::team::is_complete_low(team, *epoch),
        }
    }

    /// GASNet-EX `gex_Event_Test`: true if complete (the event is then consumed and set
    /// to invalid). Does not poll. A test that finds a pending operation complete is its
    /// sync (GASP §5.4.6) and reports it as [`wait`](Event::wait) would, with no wait.
    #[track_caller]
    pub fn test(&mut self) -> bool {
        context::check_may_communicate("Event::test");
        if self.is_done() {
            self.retire();
            true
        } else {
            false
        }
    }

    /// [`test`](Event::test) for a runtime that reports the operation itself
    /// ([`crate::layered::test_unreported`]): the event's sync is not reported.
    #[inline]
    #[track_caller]
    pub(crate) fn test_unreported(&mut self) -> bool {
        context::check_may_communicate("Event::test");
        if self.is_done() {
            *self = Event::invalid();
            true
        } else {
            false
        }
    }

    /// GASNet-EX `gex_Event_Wait`: polls until the operation is complete. Reported as
    /// `GASP_UPC_NB_SYNC`, or as `GASP_UPC_WAIT` for the event of
    /// [`Team::barrier_nb`](crate::Team::barrier_nb) (GASP §5.4.2: the wait half of a
    /// split-phase barrier, whose notify half `barrier_nb` reports). The wait of an
    /// invalid event (an operation complete at return) reports nothing. If the wait
    /// unwinds, the operation's buffers stay lent (see the [module documentation](self)).
    #[track_caller]
    pub fn wait(self) {
        if self.is_invalid() {
            context::check_may_communicate("Event::wait");
            return;
        }
        let rt = runtime("Event::wait");
        context::check_may_communicate("Event::wait");
        self.sync_reported(|| rt.wait_until(|| self.is_done()));
    }

    /// Runs `wait` inside the GASP interval of this pending event's sync (GASP §5.4.6):
    /// `GASP_UPC_NB_SYNC` with its handle, or `GASP_UPC_WAIT` for a barrier's event.
    #[track_caller]
    fn sync_reported(&self, wait: impl FnOnce()) {
        if let State::Barrier(_) = self.state {
            let span = gasp::span!(GASP_UPC_WAIT, 0, 0);
            wait();
            gasp::end!(span, 0, 0);
        } else {
            let handle = self.gasp_handle();
            let span = gasp::span!(GASP_UPC_NB_SYNC, handle);
            wait();
            gasp::end!(span, handle);
        }
    }

    /// Consumes an event found complete: a pending one's sync is reported (no wait),
    /// and the event becomes invalid.
    #[track_caller]
    fn retire(&mut self) {
        if !self.is_invalid() {
            self.sync_reported(|| {});
            *self = Event::invalid();
        }
    }

    /// GASNet-EX `gex_Event_TestSome`: true if at least one event is complete or all are
    /// invalid; completed events are set to invalid (each pending one reported as by
    /// [`test`](Event::test)). Does not poll.
    #[track_caller]
    pub fn test_some(events: &mut [Event]) -> bool {
        context::check_may_communicate("Event::test_some");
        let mut any = events.iter().all(Event::is_invalid);
        for e in events.iter_mut().filter(|e| !e.is_invalid()) {
            if e.is_done() {
                e.retire();
                any = true;
            }
        }
        any
    }

    /// GASNet-EX `gex_Event_WaitSome`: polls until `test_some` succeeds. The wait is
    /// reported as `GASP_GEX_WAIT_SOME` (which of the events will retire it is not known
    /// when it starts), followed by the syncs of the events it found complete.
    #[track_caller]
    pub fn wait_some(events: &mut [Event]) {
        let rt = runtime("Event::wait_some");
        context::check_may_communicate("Event::wait_some");
        if Event::test_some(events) {
            return;
        }
        let count = events.iter().filter(|e| !e.is_invalid()).count();
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        let span = gasp::span!(GASP_GEX_WAIT_SOME, count);
        rt.wait_until(|| events.iter().any(|e| !e.is_invalid() && e.is_done()));
        gasp::end!(span, count);
        let retired = Event::test_some(events);
        debug_assert!(retired, "wait_some ended with an event complete");
    }

    /// GASNet-EX `gex_Event_TestAll`: true if every event is complete (all are then set
    /// to invalid). Completed events are set to invalid either way (each pending one
    /// reported as by [`test`](Event::test)). Does not poll.
    #[track_caller]
    pub fn test_all(events: &mut [Event]) -> bool {
        context::check_may_communicate("Event::test_all");
        let mut all = true;
        for e in events.iter_mut() {
            if e.is_done() {
                e.retire();
            } else {
                all = false;
            }
        }
        all
    }

    /// GASNet-EX `gex_Event_WaitAll`: polls until every event is complete. Reported as
    /// the [`wait`](Event::wait) of each pending event in turn (waiting for all is
    /// waiting for each).
    #[track_caller]
    pub fn wait_all(events: &mut [Event]) {
        let rt = runtime("Event::wait_all");
        context::check_may_communicate("Event::wait_all");
        for e in events.iter_mut().filter(|e| !e.is_invalid()) {
            e.sync_reported(|| rt.wait_until(|| e.is_done()));
            *e = Event::invalid();
        }
    }

    /// GASNet-EX `gex_Event_QueryLeaf`: the leaf event of one category of a root event.
    /// Only [`EventCategory::LC`] (local completion of a put) has leaves. An operation
    /// whose local completion already happened yields an invalid event; a put with
    /// [`Lc::Defer`] or [`Lc::Event`] still in flight, whose source the conduit may
    /// still read, yields an event that completes with the put (so does a VIS put
    /// without [`Flags::ENABLE_LEAF_LC`](crate::Flags::ENABLE_LEAF_LC), whose local
    /// completion is its operation completion), and the event of an
    /// access region ([`nbi_end_access_region`]) one that completes with the
    /// [`Lc::Group`] puts in it. A query creates nothing: every query of one root
    /// yields the same event (its GASP handle included), distinct from the root.
    #[track_caller]
    pub fn query_leaf(&self, category: EventCategory) -> Event {
        if category != EventCategory::LC {
            panic!("gex::Event::query_leaf: only EventCategory::LC has leaf events");
        }
        // A query, not a new object: every query of one root yields the same event
        // (the same state, the same GASP handle), as the spec requires of
        // `gex_Event_QueryLeaf`.
        let state = match &self.state {
            State::HeldPut(op) if !op.is_done() => State::PutLeaf(op.clone()),
            State::Ops(s) if s.lc.iter().any(|o| !o.is_done()) => State::OpsLeaf(s.clone()),
            State::Invalid
            | State::One(_)
            | State::HeldPut(_)
            | State::Ops(_)
            | State::PutLeaf(_)
            | State::OpsLeaf(_)
            | State::Barrier(_)
            | State::TeamBarrier(..) => State::Invalid,
        };
        Event { state }
    }
}

/// Local-completion control of a put or AM payload (GASNet-EX `lc_opt`).
#[derive(Debug)]
pub enum Lc<'a> {
    /// Return only once the source buffer may be reused (`GEX_EVENT_NOW`).
    Now,
    /// Local completion may be as late as the operation's completion (`GEX_EVENT_DEFER`).
    Defer,
    /// Track local completion in the NBI category `LC` or `AM` (`GEX_EVENT_GROUP`).
    Group,
    /// Report local completion through this event (a `gex_Event_t*`).
    Event(&'a mut Event),
}

impl Lc<'_> {
    /// Records that local completion happened before the initiation call returned.
    #[inline]
    pub(crate) fn complete_now(self) {
        if let Lc::Event(e) = self {
            *e = Event::invalid();
        }
    }

    /// Records local completion of a put that read its source before returning if this
    /// is [`Lc::Now`], else held it until `c`, its completion, which is then its local
    /// completion too (for [`Lc::Defer`], the leaf of the put's event: see
    /// [`Lc::put_event`]).
    #[inline]
    pub(crate) fn complete_with(self, c: &Completion) {
        match self {
            Lc::Now | Lc::Defer => {}
            Lc::Event(e) => *e = Event::from_completion(c.clone()),
            Lc::Group => track_nbi(EventCategory::LC, c.clone()),
        }
    }

    /// [`Lc::complete_with`] for an NB put, and the put's event: for [`Lc::Defer`]
    /// and [`Lc::Event`], one whose LC leaf is the put itself ([`Event::query_leaf`]),
    /// the conduit reading the source until the put completes.
    #[inline]
    pub(crate) fn put_event(self, c: Completion) -> Event {
        match (self, c) {
            (lc @ (Lc::Defer | Lc::Event(_)), Completion::Pending(op)) if !op.is_done() => {
                lc.complete_with(&Completion::Pending(op.clone()));
                Event {
                    state: State::HeldPut(op),
                }
            }
            (lc, c) => {
                lc.complete_with(&c);
                Event::from_completion(c)
            }
        }
    }
}

/// Event categories for NBI synchronization (GASNet-EX `gex_EC_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventCategory(u8);

impl EventCategory {
    /// NBI gets (`GEX_EC_GET`).
    pub const GET: EventCategory = EventCategory(1);
    /// NBI puts (`GEX_EC_PUT`).
    pub const PUT: EventCategory = EventCategory(2);
    /// Local completion of AM payloads sent with `GEX_EVENT_GROUP` (`GEX_EC_AM`).
    pub const AM: EventCategory = EventCategory(4);
    /// Local completion of NBI puts sent with `GEX_EVENT_GROUP` (`GEX_EC_LC`).
    pub const LC: EventCategory = EventCategory(8);
    /// NBI atomic operations (`GEX_EC_RMW`).
    pub const RMW: EventCategory = EventCategory(16);
    /// Every category (`GEX_EC_ALL`).
    pub const ALL: EventCategory = EventCategory(31);

    /// Whether every category in `other` is in `self`.
    pub fn contains(self, other: EventCategory) -> bool {
        self.0 & other.0 == other.0
    }

    fn index(self) -> usize {
        self.0.trailing_zeros() as usize
    }
}

impl std::ops::BitOr for EventCategory {
    type Output = EventCategory;
    fn bitor(self, rhs: EventCategory) -> EventCategory {
        EventCategory(self.0 | rhs.0)
    }
}

/// This thread's outstanding implicit-event operations.
#[derive(Default)]
struct NbiState {
    pending: [Vec<Arc<OpHandle>>; 5],
    region: Option<Region>,
}

/// The operations of an open access region, the local completions of its
/// [`Lc::Group`] puts apart (the LC leaf of the region's event).
#[derive(Default)]
struct Region {
    ops: Vec<Arc<OpHandle>>,
    lc: Vec<Arc<OpHandle>>,
}

thread_local! {
    static NBI: RefCell<NbiState> = RefCell::new(NbiState::default());
}

/// Records an NBI operation that did not complete at initiation.
/// The GASP handle of an NBI operation: trivial if it is complete, else the implicit one.
pub(crate) fn nbi_handle(c: &Completion) -> u64 {
    match c {
        Completion::Done => gasp::events::NB_TRIVIAL,
        Completion::Pending(_) => gasp::events::NB_IMPLICIT,
    }
}

pub(crate) fn track_nbi(category: EventCategory, c: Completion) {
    if let Completion::Pending(op) = c {
        NBI.with(|n| {
            let mut n = n.borrow_mut();
            match n.region.as_mut() {
                Some(region) if category == EventCategory::LC => region.lc.push(op),
                Some(region) => region.ops.push(op),
                None => {
                    let ops = &mut n.pending[category.index()];
                    ops.push(op);
                    if ops.len() >= PRUNE_FROM && ops.len().is_power_of_two() {
                        ops.retain(|o| !o.is_done());
                    }
                }
            }
        });
    }
}

/// The length from which a category's list of pending NBI operations drops those that
/// completed, each time it reaches a power of two: a program need not sync every
/// category it starts operations in (the LC of [`Lc::Group`] puts, say, when it
/// syncs their PUT category alone), and the list of one it never syncs would otherwise
/// grow by one entry per operation for good. Amortized, a few instructions per
/// operation; the list holds at most about twice the operations still in flight.
const PRUNE_FROM: usize = 64;

/// Waits for an operation that must complete before the call returns. Inline, so a
/// completion known at compile time (every shared-memory transfer) costs nothing.
#[inline]
pub(crate) fn complete_blocking(rt: &Runtime, c: Completion) {
    if let Completion::Pending(op) = c {
        wait_pending(rt, op);
    }
}

#[inline(never)]
fn wait_pending(rt: &Runtime, op: Arc<OpHandle>) {
    // The operation writes, or reads, the caller's buffer until it completes.
    rt.wait_through_unwind(&|| op.is_done());
}

fn nbi_done(mask: EventCategory) -> bool {
    NBI.with(|n| {
        let mut n = n.borrow_mut();
        let mut done = true;
        for (i, ops) in n.pending.iter_mut().enumerate() {
            if mask.contains(EventCategory(1 << i)) {
                ops.retain(|o| !o.is_done());
                done &= ops.is_empty();
            }
        }
        done
    })
}

/// GASNet-EX `gex_NBI_Test`: true if every NBI operation of the categories in `mask`
/// issued by this thread (outside access regions) is complete. Does not poll. A test
/// that succeeds is the sync of those operations (GASP §5.4.6), reported as
/// [`nbi_wait`]'s, with no wait.
#[track_caller]
pub fn nbi_test(mask: EventCategory) -> bool {
    context::check_may_communicate("nbi_test");
    let done = nbi_done(mask);
    if done {
        implicit_sync_reported(|| {});
    }
    done
}

/// Runs `wait` inside the GASP interval of the sync of this thread's implicit-handle
/// operations (`GASP_UPC_NB_SYNC` of `GASP_NB_IMPLICIT`, GASP §5.4.6).
#[track_caller]
fn implicit_sync_reported(wait: impl FnOnce()) {
    let span = gasp::span!(GASP_UPC_NB_SYNC, gasp::events::NB_IMPLICIT);
    wait();
    gasp::end!(span, gasp::events::NB_IMPLICIT);
}

/// GASNet-EX `gex_NBI_Wait`: polls until `nbi_test(mask)` succeeds.
#[track_caller]
pub fn nbi_wait(mask: EventCategory) {
    let rt = runtime("nbi_wait");
    context::check_may_communicate("nbi_wait");
    implicit_sync_reported(|| rt.wait_until(|| nbi_done(mask)));
}

/// GASNet-EX `gex_NBI_BeginAccessRegion`: until the matching end, this thread's NBI
/// operations are collected into one event instead of their categories. Not in a
/// restricted context (GASNet-EX spec, "Calls from restricted context": none of the
/// NBI calls is among those allowed there).
#[track_caller]
pub fn nbi_begin_access_region() {
    context::check_may_communicate("nbi_begin_access_region");
    NBI.with(|n| {
        let mut n = n.borrow_mut();
        if n.region.is_some() {
            panic!("gex::nbi_begin_access_region: an access region is already open on this thread");
        }
        n.region = Some(Region::default());
    });
}

/// GASNet-EX `gex_NBI_EndAccessRegion`: closes the region and returns the event of all
/// NBI operations issued in it. Not in a restricted context, as the begin.
#[track_caller]
pub fn nbi_end_access_region() -> Event {
    context::check_may_communicate("nbi_end_access_region");
    let region = NBI.with(|n| n.borrow_mut().region.take());
    match region {
        Some(Region { ops, lc }) => Event::from_ops(ops, lc),
        None => panic!("gex::nbi_end_access_region: no access region is open on this thread"),
    }
}

/// True while this thread has an NBI access region open.
pub fn nbi_in_access_region() -> bool {
    NBI.with(|n| n.borrow().region.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Multiple calls with the same argument ... must return the *same* event"
    /// (GASNet-EX, `gex_Event_QueryLeaf`): the leaves of one root share their state and
    /// GASP handle, unlike the root's, and complete with the operations they stand for.
    #[test]
    fn every_query_of_a_root_yields_the_same_leaf() {
        let put = OpHandle::new();
        let (lc, other) = (OpHandle::new(), OpHandle::new());
        let roots = [
            (
                Event {
                    state: State::HeldPut(put.clone()),
                },
                put.clone(),
            ),
            (
                Event {
                    state: State::Ops(Arc::new(EventState {
                        ops: vec![other.clone()],
                        lc: vec![lc.clone()],
                    })),
                },
                lc.clone(),
            ),
        ];
        for (root, op) in roots {
            let (a, b) = (
                root.query_leaf(EventCategory::LC),
                root.query_leaf(EventCategory::LC),
            );
            assert!(!a.is_invalid() && !a.is_done());
            assert_eq!(a.gasp_handle(), b.gasp_handle());
            assert_ne!(a.gasp_handle(), root.gasp_handle());
            assert!(
                a.query_leaf(EventCategory::LC).is_invalid(),
                "a leaf of a leaf"
            );
            op.complete();
            assert!(a.is_done() && b.is_done());
            assert!(
                root.query_leaf(EventCategory::LC).is_invalid(),
                "the leaf of a root whose local completion happened"
            );
        }
        assert!(!other.is_done());
    }

    /// The pending NBI operations of a category that is never synced do not pile up:
    /// the completed ones are dropped as the list grows, the others kept.
    #[test]
    fn an_unsynced_category_keeps_only_its_operations_in_flight() {
        let in_flight: Vec<_> = (0..10).map(|_| OpHandle::new()).collect();
        for op in &in_flight {
            track_nbi(EventCategory::LC, Completion::Pending(op.clone()));
        }
        for _ in 0..100_000 {
            let op = OpHandle::new();
            track_nbi(EventCategory::LC, Completion::Pending(op.clone()));
            op.complete();
        }
        let kept = NBI.with(|n| n.borrow().pending[EventCategory::LC.index()].len());
        assert!(kept < 2 * PRUNE_FROM, "{kept} entries kept");
        let live = NBI.with(|n| {
            n.borrow().pending[EventCategory::LC.index()]
                .iter()
                .filter(|o| !o.is_done())
                .count()
        });
        assert_eq!(live, in_flight.len());
        for op in &in_flight {
            op.complete();
        }
        assert!(nbi_done(EventCategory::LC));
    }
}
