//! Reply cells: where the value of a pending operation lands without a shared state.
//!
//! The general way for a value to reach a future later is a promise's reference-counted
//! [`State`]: one heap allocation per future, and callbacks and wakers
//! kept in it. The future of a round-trip RPC whose value is small (at most
//! [`CELL_BYTES`], aligned at most 16) needs none of that in the common case, where it is
//! only waited on: it holds a *cell* taken from a pool of its thread, the reply's handler
//! decodes the value straight into the cell, and the future reads it from there. Cells
//! are reused, so the steady state allocates nothing.
//!
//! A cell goes through these stages, all on the thread that made the future (futures
//! are not `Send`; replies received by another thread's poll are passed to this thread
//! first, see `rpc::delivery`):
//!
//! ```text
//!   Free ──claim──▶ Waiting ──value──▶ Arrived(epoch) ──the future takes or drops it──▶ Free
//!                      │
//!                      └──the future is dropped or unpacked──▶ Abandoned ──value──▶ Free
//! ```
//!
//! A value that arrives during progress epoch `e` makes the future ready once this
//! thread's epoch passes `e`: at the next user-level progress (§7.1 ¶14), exactly as an
//! operation completed at initiation; one that user-level progress delivers itself
//! (an operation it finds complete, `thread::arrival_epoch`) is ready in that progress.
//!
//! Besides the replies of round-trip RPCs, cells take the values of operations that
//! complete after their call: `operation_cx::as_future` of a value that fits
//! (`completion/objects.rs`), and `rget`, whose get reads into the cell itself.
//!
//! Whatever a plain cell cannot do goes through a state: when a callback is attached to
//! the future, it is awaited as a `std` future, or it is cloned while the value has not
//! arrived, the cell gets a *forward* state, into which the value is moved (or, while the
//! future that owns the cell still lives, copied) when it arrives, and whose readiness
//! is then signalled at the next user-level progress.
//!
//! A `when_all` over a vector of cell futures (the round trips a program starts in
//! bulk, then joins) needs no forward state per future either: it *joins* each cell that
//! has no value yet to one [`CellJoin`], a counter of the values still to come, and the
//! last value defers the join's completion, which takes every value out of its cell.
//! One allocation per `when_all`, none per future.
//!
//! Cells are never freed: a future may point at one until it is dropped, and they are
//! few (as many as the thread ever had futures pending at once).
//!
//! Cells sit on the promise state (`state.rs`) and the per-thread state (epoch,
//! deferred notifications).

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::rc::Rc;

use super::state::State;
use crate::thread;

/// The largest value, in bytes, a cell holds.
pub(crate) const CELL_BYTES: usize = 32;
/// The strictest alignment a cell's value may have.
const CELL_ALIGN: usize = 16;
/// Cells allocated at once when a thread's pool is empty.
const CHUNK: usize = 32;

/// True if a `T` fits in a cell.
pub(crate) const fn fits<T>() -> bool {
    std::mem::size_of::<T>() <= CELL_BYTES && std::mem::align_of::<T>() <= CELL_ALIGN
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Free,
    /// A future owns the cell; no value yet.
    Waiting,
    /// The value is in the cell since this progress epoch.
    Arrived(u64),
    /// No future owns the cell; it is freed when the value arrives.
    Abandoned,
}

impl Stage {
    /// The word a cell keeps its stage in: the arrival epoch, or one of the three
    /// words above every epoch a thread reaches.
    const FREE: u64 = u64::MAX;
    const WAITING: u64 = u64::MAX - 1;
    const ABANDONED: u64 = u64::MAX - 2;

    #[inline(always)]
    fn word(self) -> u64 {
        match self {
            Stage::Free => Stage::FREE,
            Stage::Waiting => Stage::WAITING,
            Stage::Abandoned => Stage::ABANDONED,
            Stage::Arrived(e) => {
                debug_assert!(e < Stage::ABANDONED, "progress epoch {e} out of range");
                e
            }
        }
    }

    #[inline(always)]
    fn of(word: u64) -> Stage {
        match word {
            Stage::FREE => Stage::Free,
            Stage::WAITING => Stage::Waiting,
            Stage::ABANDONED => Stage::Abandoned,
            e => Stage::Arrived(e),
        }
    }
}

/// A place for one value of a future (see the module documentation). One cache line:
/// a program with thousands of round trips in flight touches each cell's line when
/// the call starts, when its value arrives and when the value is taken, so the stage
/// is kept as one word ([`Stage::word`]) to fit the line.
#[repr(C, align(64))]
pub(crate) struct ReplyCell {
    value: UnsafeCell<MaybeUninit<[u8; CELL_BYTES]>>,
    /// The [`Stage`], as [`Stage::word`].
    stage: Cell<u64>,
    /// `Rc::into_raw` of the forward `State<T>`, if any.
    forward: Cell<*const ()>,
    next_free: Cell<Option<&'static ReplyCell>>,
    /// The `when_all` that counts this cell's value, if any (null if none). Not a
    /// counted reference: the join keeps itself alive while values are to come.
    join: Cell<*const CellJoin>,
}

/// A `when_all` over cell futures (see the module documentation): how many values are
/// still to come, and what to run, at the next user-level progress, once they all are.
/// The cells it counts point at it without a counted reference each: while values are
/// to come, the join holds one to itself, which the last value drops.
pub(super) struct CellJoin {
    left: Cell<usize>,
    finish: Cell<Option<Box<dyn FnOnce()>>>,
    keep: Cell<Option<Rc<CellJoin>>>,
}

impl CellJoin {
    /// A join that cells can be joined to ([`ReplyCell::join`]), then counted with
    /// [`CellJoin::finish_with`].
    pub(super) fn new() -> Rc<CellJoin> {
        Rc::new(CellJoin {
            left: Cell::new(0),
            finish: Cell::new(None),
            keep: Cell::new(None),
        })
    }

    /// Sets how many values the cells joined to it wait for, and what runs once they
    /// all arrived: at the next user-level progress, now deferred if none is to come.
    pub(super) fn finish_with(self: &Rc<Self>, left: usize, finish: Box<dyn FnOnce()>) {
        if left == 0 {
            thread::defer(finish);
        } else {
            self.left.set(left);
            self.finish.set(Some(finish));
            self.keep.set(Some(Rc::clone(self)));
        }
    }

    /// One of the values arrived; the last defers the finish and drops the join's
    /// reference to itself.
    ///
    /// # Safety
    /// `join` must be the join of a cell whose value this is, counted by `finish_with`.
    unsafe fn arrived(join: *const CellJoin) {
        let keep = {
            // SAFETY: the join holds a reference to itself until its last value (the
            // caller's is one of them) arrives, below.
            let join = unsafe { &*join };
            let left = join.left.get() - 1;
            join.left.set(left);
            if left != 0 {
                return;
            }
            if let Some(finish) = join.finish.take() {
                thread::defer(finish);
            }
            join.keep.take()
        };
        drop(keep);
    }
}

const _: () = assert!(std::mem::align_of::<ReplyCell>() >= CELL_ALIGN);
const _: () = assert!(std::mem::size_of::<ReplyCell>() == 64);

thread_local! {
    /// This thread's free cells.
    static FREE: Cell<Option<&'static ReplyCell>> = const { Cell::new(None) };
}

impl ReplyCell {
    fn new() -> ReplyCell {
        ReplyCell {
            value: UnsafeCell::new(MaybeUninit::uninit()),
            stage: Cell::new(Stage::FREE),
            forward: Cell::new(std::ptr::null()),
            next_free: Cell::new(None),
            join: Cell::new(std::ptr::null()),
        }
    }

    /// A cell of this thread's pool, `Waiting` for the value of a new future.
    pub(crate) fn claim() -> &'static ReplyCell {
        let cell = FREE.with(|f| {
            let cell = f.get().unwrap_or_else(grow_pool);
            f.set(cell.next_free.take());
            cell
        });
        debug_assert_eq!(cell.stage(), Stage::Free);
        cell.set_stage(Stage::Waiting);
        cell
    }

    #[inline(always)]
    fn stage(&self) -> Stage {
        Stage::of(self.stage.get())
    }

    #[inline(always)]
    fn set_stage(&self, stage: Stage) {
        self.stage.set(stage.word());
    }

    fn free(&'static self) {
        self.set_stage(Stage::Free);
        FREE.with(|f| self.next_free.set(f.replace(Some(self))));
    }

    fn slot<T>(&self) -> *mut T {
        self.value.get().cast::<T>()
    }

    /// Where the value lies: [`CELL_BYTES`] bytes that a transfer may fill with the
    /// bits of the value before it is delivered (see [`ReplyCell::deliver`]).
    pub(crate) fn storage(&self) -> *mut u8 {
        self.slot::<u8>()
    }

    /// Delivers the value `value` computes (called where the operation completes, on
    /// this thread, outside any callback): through [`PlainCell::arrive`] in the common
    /// case, else [`ReplyCell::arrive`]; if nobody wants the value any more, it is not
    /// computed, and the cell is freed.
    ///
    /// # Safety
    /// As for [`ReplyCell::arrive`].
    #[inline(always)]
    pub(crate) unsafe fn deliver<T: 'static>(&'static self, value: impl FnOnce() -> T) {
        if let Some(plain) = self.plain() {
            // SAFETY: the caller's guarantee.
            unsafe { plain.arrive(value()) };
        } else if self.wanted() {
            // SAFETY: the caller's guarantee.
            unsafe { self.arrive(value()) };
        } else {
            // SAFETY: the value has not arrived (caller) and is unwanted.
            unsafe { self.discard() };
        }
    }

    /// True if the value arrived before this thread's latest user-level progress.
    #[inline]
    pub(super) fn ready(&self) -> bool {
        matches!(self.stage(), Stage::Arrived(e) if e < thread::progress_epoch())
    }

    /// True if the value arrived (the future is ready at the next user-level progress).
    #[inline]
    pub(super) fn arrived(&self) -> bool {
        matches!(self.stage(), Stage::Arrived(_))
    }

    /// The progress epoch of the value's arrival, if it arrived.
    pub(super) fn arrival(&self) -> Option<u64> {
        match self.stage() {
            Stage::Arrived(e) => Some(e),
            _ => None,
        }
    }

    /// True if someone will use the value: if not, it need not even be decoded.
    pub(crate) fn wanted(&self) -> bool {
        self.stage() == Stage::Waiting || !self.forward.get().is_null()
    }

    /// Frees a cell nobody wants the value of any more (see [`ReplyCell::wanted`]),
    /// when the value arrives.
    ///
    /// # Safety
    /// The cell must not have received its value yet, and be unwanted.
    pub(crate) unsafe fn discard(&'static self) {
        debug_assert!(!self.wanted() && self.stage() == Stage::Abandoned);
        self.free();
    }

    /// Frees the cell of an operation that never started (its call failed after
    /// claiming the cell), once the future that owned it is gone: no value will come
    /// to free it. A cell whose future still holds it (one kept past the failed call)
    /// is left to that future.
    ///
    /// # Safety
    /// No value may ever be delivered to the cell, and the caller must run on the
    /// thread whose pool it came from, once.
    pub(crate) unsafe fn release_unanswered(&'static self) {
        if self.stage() == Stage::Abandoned && self.forward.get().is_null() {
            self.free();
        }
    }

    /// The arrived value.
    ///
    /// # Safety
    /// The cell must hold a `T` (`arrived()`), and the caller must be the future that
    /// owns the cell.
    pub(super) unsafe fn peek<T>(&self) -> &T {
        debug_assert!(self.arrived());
        // SAFETY: the caller guarantees an initialized `T` is in the cell, which is
        // aligned for it (`fits::<T>()` was checked when the future was made).
        unsafe { &*self.slot::<T>() }
    }

    /// Moves the arrived value out and frees the cell.
    ///
    /// # Safety
    /// As for [`ReplyCell::peek`]; the future must not use the cell afterwards.
    pub(super) unsafe fn take<T>(&'static self) -> T {
        debug_assert!(self.arrived());
        // SAFETY: an initialized `T` is in the cell (caller), read exactly once here: the
        // cell is freed and will be written before it is read again.
        let v = unsafe { self.slot::<T>().read() };
        self.free();
        v
    }

    /// The future that owns the cell is gone: drops an arrived value and frees the cell,
    /// or leaves the cell for the value to free.
    ///
    /// # Safety
    /// The caller must be the future that owns the cell, of value type `T`.
    pub(super) unsafe fn abandon<T>(&'static self) {
        match self.stage() {
            Stage::Arrived(_) => {
                // SAFETY: an initialized `T` is in the cell; it is dropped once, then the
                // cell is freed.
                unsafe { self.slot::<T>().drop_in_place() };
                self.free();
            }
            Stage::Waiting => self.set_stage(Stage::Abandoned),
            s => unreachable!("a future owns a cell in stage {s:?}"),
        }
    }

    /// Makes `join` count this cell's value when it arrives.
    ///
    /// # Safety
    /// The cell must be `Waiting`, and the caller its future, which the join owns; the
    /// join must count this value (`CellJoin::finish_with`) before any arrives.
    pub(super) unsafe fn join(&self, join: &Rc<CellJoin>) {
        debug_assert_eq!(self.stage(), Stage::Waiting);
        self.join.set(Rc::as_ptr(join));
    }

    /// The forward state of a `Waiting` cell, created if there is none yet.
    ///
    /// # Safety
    /// The cell must be `Waiting` for a `T`, and the caller its future.
    pub(super) unsafe fn forward_state<T: 'static>(&self) -> Rc<State<T>> {
        debug_assert_eq!(self.stage(), Stage::Waiting);
        let raw = self.forward.get().cast::<State<T>>();
        if raw.is_null() {
            let state = State::<T>::new(1);
            self.forward.set(Rc::into_raw(Rc::clone(&state)).cast());
            state
        } else {
            // SAFETY: `raw` came from `Rc::into_raw` of a `State<T>` (above) whose
            // reference the cell still holds; this makes one more.
            unsafe {
                Rc::increment_strong_count(raw);
                Rc::from_raw(raw)
            }
        }
    }

    /// The cell, if it is `Waiting` with no forward state: the common case of a reply's
    /// value, which [`PlainCell::arrive`] delivers with two stores and the join's count.
    #[inline(always)]
    pub(crate) fn plain(&'static self) -> Option<PlainCell> {
        (self.stage.get() == Stage::WAITING && self.forward.get().is_null())
            .then_some(PlainCell(self))
    }

    /// Delivers the value of the future of this cell (called where the reply is
    /// received, on this thread, outside any callback) when the cell is not
    /// [`plain`](ReplyCell::plain) (its future was dropped, or it has a forward state):
    /// into the cell, and into its forward state if it has one, whose readiness is
    /// signalled at the next user-level progress. A plain cell's value goes through
    /// [`PlainCell::arrive`].
    ///
    /// # Safety
    /// The cell must have been claimed for a future of value type `T`, on this thread,
    /// and not yet have received its value.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn arrive<T: 'static>(&'static self, value: T) {
        let join = self.join.replace(std::ptr::null());
        let raw = self.forward.replace(std::ptr::null()).cast::<State<T>>();
        // SAFETY: as in `forward_state`: the cell's own reference, taken back once.
        let forward = (!raw.is_null()).then(|| unsafe { Rc::from_raw(raw) });
        match (self.stage(), forward) {
            (Stage::Waiting, Some(state)) => {
                // The future still owns the cell and a clone of it waits on the state.
                let copy = state.copy_value(&value);
                state.set_value(copy);
                // SAFETY: the cell is aligned and large enough for `T` (`fits`), and holds
                // no value yet.
                unsafe { self.slot::<T>().write(value) };
                self.set_stage(Stage::Arrived(thread::arrival_epoch()));
                thread::defer(Box::new(move || state.satisfy(1, "rpc")));
            }
            (Stage::Abandoned, Some(state)) => {
                state.set_value(value);
                self.free();
                thread::defer(Box::new(move || state.satisfy(1, "rpc")));
            }
            (Stage::Abandoned, None) => self.free(),
            (s, _) => unreachable!("a value arrived for a cell in stage {s:?}"),
        }
        if !join.is_null() {
            // SAFETY: the cell was joined to it, and this is the cell's value.
            unsafe { CellJoin::arrived(join) };
        }
    }
}

/// A cell `Waiting` for its value with no forward state (see [`ReplyCell::plain`]).
pub(crate) struct PlainCell(&'static ReplyCell);

impl PlainCell {
    /// Delivers the value: into the cell, ready at the next user-level progress, and
    /// counted by the cell's join if it has one.
    ///
    /// # Safety
    /// As for [`ReplyCell::arrive`].
    #[inline(always)]
    pub(crate) unsafe fn arrive<T: 'static>(self, value: T) {
        let cell = self.0;
        // SAFETY: the cell is aligned and large enough for `T` (`fits`), and holds no
        // value yet (caller).
        unsafe { cell.slot::<T>().write(value) };
        cell.set_stage(Stage::Arrived(thread::arrival_epoch()));
        let join = cell.join.get();
        if !join.is_null() {
            cell.join.set(std::ptr::null());
            // SAFETY: the cell was joined to it, and this is the cell's value.
            unsafe { CellJoin::arrived(join) };
        }
    }
}

#[cold]
fn grow_pool() -> &'static ReplyCell {
    let chunk: &'static [ReplyCell] = Vec::from_iter((0..CHUNK).map(|_| ReplyCell::new())).leak();
    for pair in chunk.windows(2) {
        pair[0].next_free.set(Some(&pair[1]));
    }
    &chunk[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage survives its one-word form, epochs at the edges included, and no two
    /// stages share a word.
    #[test]
    fn stages_round_trip_through_their_word() {
        let stages = [
            Stage::Free,
            Stage::Waiting,
            Stage::Abandoned,
            Stage::Arrived(0),
            Stage::Arrived(1),
            Stage::Arrived(Stage::ABANDONED - 1),
        ];
        for (i, s) in stages.iter().enumerate() {
            assert_eq!(Stage::of(s.word()), *s);
            for t in &stages[i + 1..] {
                assert_ne!(s.word(), t.word(), "{s:?} and {t:?}");
            }
        }
    }
}
