//! Per-thread buffers of the built-in tools, and the handshake that lets the finishing
//! thread read them while other threads may still report.
//!
//! # The hot path
//!
//! A thread finds its buffer through a thread-local pointer (a [`SlotCell`]: one load
//! and a null test; the thread-local has no destructor, so no lazy registration check
//! either) and records under its slot's `busy` flag. The flag is what [`Slots::drain`]
//! waits for, and it must cost the writer almost nothing: an atomic swap (a locked
//! instruction) costs as much as the rest of a profiler event.
//!
//! So the handshake is asymmetric, as in userspace RCU and folly's asymmetric fences:
//! the writer stores `busy = true`, issues only a compiler fence, and reads the slot's
//! `closed` flag; the finisher stores `closed = true` in every slot, issues a *heavy*
//! fence, `membarrier(2)`, which runs a full memory barrier on every thread of the
//! process (or makes it pass a context switch, which is one), and then waits until each
//! `busy` reads false. The heavy fence orders the finisher's store before every other
//! thread's following loads: either the writer's load of `closed` comes after the
//! barrier on its CPU and sees `true` (the writer drops its event), or its store of
//! `busy` came before and the finisher sees it and waits for the release store that
//! ends the write. Where `membarrier` is not available the writers fall back to the
//! swap (one relaxed load of a flag set at initialization decides).
//!
//! Slots are leaked: a thread keeps a plain pointer to its slot, valid for the rest of
//! the process, and a slot's contents are taken, not freed, by the finisher.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicU8};
// The registry's lock is held for no atomic operation, so under loom (which switches
// threads only at its own operations) it never blocks: std's is enough.
use std::sync::Mutex;

use crate::sync::{fence, spin_loop, AtomicBool, Ordering};

/// One thread's buffer of a built-in tool.
pub(crate) struct ThreadSlot<T> {
    busy: AtomicBool,
    closed: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only accessed by the thread that holds `busy` while `closed` is
// false (its owner, see `with`), or by the finisher after it closed the slot and saw
// `busy` false behind the heavy fence (see `drain`).
unsafe impl<T: Send> Sync for ThreadSlot<T> {}

impl<T> ThreadSlot<T> {
    /// The buffer, unless the finishing thread has claimed it; held until the guard is
    /// dropped. Called only by the thread that registered the slot. A guard rather than
    /// a closure: every part of the event path is then an `inline(always)` function,
    /// inlined even into the cold functions the runtime calls.
    #[inline(always)]
    pub(crate) fn enter(&self) -> Option<Entered<'_, T>> {
        if fence::asymmetric() {
            self.busy.store(true, Ordering::Relaxed);
            // The light side of the asymmetric fence (see the module docs).
            compiler_fence(std::sync::atomic::Ordering::SeqCst);
            if self.closed.load(Ordering::Relaxed) {
                self.busy.store(false, Ordering::Relaxed);
                return None;
            }
        } else {
            // The symmetric handshake: a SeqCst fence between the store of `busy` and
            // the load of `closed`, as the finisher has one between its store of
            // `closed` and its load of `busy`, so that either this load sees `closed`
            // or the finisher sees `busy` (store buffering: without it both could read
            // the old values, as loom showed).
            if self.busy.swap(true, Ordering::Acquire) {
                return None;
            }
            fence(Ordering::SeqCst);
            if self.closed.load(Ordering::Relaxed) {
                self.busy.store(false, Ordering::Relaxed);
                return None;
            }
        }
        Some(Entered(self))
    }
}

/// A thread's hold on its slot ([`ThreadSlot::enter`]).
pub(crate) struct Entered<'a, T>(&'a ThreadSlot<T>);

impl<T> Deref for Entered<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: `busy` is set and `closed` was not: the finisher waits for us.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for Entered<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the guard is the only way to the data while it lives.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for Entered<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// A thread-local pointer to the thread's slot of one tool: null until the thread
/// reports its first event.
pub(crate) struct SlotCell<T: 'static>(Cell<*const ThreadSlot<T>>);

impl<T> SlotCell<T> {
    pub(crate) const fn new() -> SlotCell<T> {
        SlotCell(Cell::new(std::ptr::null()))
    }

    /// The thread's slot, registered with `make` the first time; `None` once the tool
    /// has finished.
    #[inline(always)]
    pub(crate) fn get(
        &self,
        slots: &'static Slots<T>,
        make: impl FnOnce() -> T,
    ) -> Option<&'static ThreadSlot<T>> {
        match self.registered() {
            Some(slot) => Some(slot),
            None => self.register(slots, make),
        }
    }

    /// The thread's slot if it has one (it reported an event).
    #[inline(always)]
    pub(crate) fn registered(&self) -> Option<&'static ThreadSlot<T>> {
        // SAFETY: a non-null pointer came from `Slots::register`, which leaks the slot.
        unsafe { self.0.get().as_ref() }
    }

    #[cold]
    #[inline(never)]
    fn register(
        &self,
        slots: &'static Slots<T>,
        make: impl FnOnce() -> T,
    ) -> Option<&'static ThreadSlot<T>> {
        let slot = slots.register(make)?;
        self.0.set(slot);
        Some(slot)
    }
}

/// The registry of a tool's thread slots.
pub(crate) struct Slots<T: 'static> {
    list: Mutex<(bool, Vec<&'static ThreadSlot<T>>)>,
}

impl<T> Slots<T> {
    pub(crate) const fn new() -> Slots<T> {
        Slots {
            list: Mutex::new((false, Vec::new())),
        }
    }

    /// Adds a new thread's slot (leaked); `None` once the tool has finished.
    fn register(&self, make: impl FnOnce() -> T) -> Option<&'static ThreadSlot<T>> {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.0 {
            return None;
        }
        let slot: &'static ThreadSlot<T> = Box::leak(Box::new(ThreadSlot {
            busy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            data: UnsafeCell::new(make()),
        }));
        list.1.push(slot);
        Some(slot)
    }

    /// Closes the registry and every slot, and hands every slot's contents to `f`, in
    /// registration order (the first thread, normally the one that initialized the
    /// runtime, first). Writers that come later drop their events.
    pub(crate) fn drain(&self, mut f: impl FnMut(usize, &mut T)) {
        let slots = {
            let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
            list.0 = true;
            std::mem::take(&mut list.1)
        };
        for slot in &slots {
            slot.closed.store(true, Ordering::Relaxed);
        }
        fence::heavy();
        for (i, slot) in slots.iter().enumerate() {
            // A writer holds the flag for the few instructions of one event.
            while slot.busy.load(Ordering::Acquire) {
                spin_loop();
            }
            // SAFETY: the slot is closed and no writer is inside it (module docs); no
            // writer enters it again, so it is ours from now on.
            f(i, unsafe { &mut *slot.data.get() });
        }
    }
}

/// The heavy side of the asymmetric fence.
pub(crate) mod fence {
    use super::*;

    const UNKNOWN: u8 = 0;
    /// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, registered.
    const EXPEDITED: u8 = 1;
    /// `membarrier(MEMBARRIER_CMD_GLOBAL)` (slower, needs no registration).
    const GLOBAL: u8 = 2;
    /// No `membarrier`: writers use an atomic swap.
    const NONE: u8 = 3;

    static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);
    /// `MODE` is `EXPEDITED` or `GLOBAL`: what writers test. A setting made once before
    /// any writer runs, not part of the handshake: std's even under loom.
    static ASYMMETRIC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    #[cfg(target_os = "linux")]
    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_int) }
    }

    /// Chooses the fence (once, when a built-in tool is created, before any thread
    /// records).
    pub(crate) fn init() {
        if MODE.load(std::sync::atomic::Ordering::Relaxed) != UNKNOWN {
            return;
        }
        let mode = probe();
        MODE.store(mode, std::sync::atomic::Ordering::Relaxed);
        ASYMMETRIC.store(
            matches!(mode, EXPEDITED | GLOBAL),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    #[cfg(target_os = "linux")]
    fn probe() -> u8 {
        const QUERY: libc::c_int = 0;
        const CMD_GLOBAL: libc::c_int = 1;
        const CMD_PRIVATE_EXPEDITED: libc::c_int = 8;
        const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 16;
        let supported = membarrier(QUERY);
        if supported < 0 {
            return NONE;
        }
        let supported = supported as libc::c_int;
        if supported & CMD_PRIVATE_EXPEDITED != 0 && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        {
            EXPEDITED
        } else if supported & CMD_GLOBAL != 0 {
            GLOBAL
        } else {
            NONE
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn probe() -> u8 {
        NONE
    }

    /// Whether writers may use the light side (a compiler fence).
    #[inline(always)]
    pub(crate) fn asymmetric() -> bool {
        ASYMMETRIC.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A full memory barrier on every thread of the process.
    pub(crate) fn heavy() {
        fence(Ordering::SeqCst);
        #[cfg(target_os = "linux")]
        {
            let cmd = match MODE.load(std::sync::atomic::Ordering::Relaxed) {
                EXPEDITED => 8,
                GLOBAL => 1,
                _ => return,
            };
            if membarrier(cmd) != 0 {
                // It worked at initialization; nothing else can be done safely.
                panic!(
                    "gasp: membarrier failed: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn drain_sees_every_recorded_event_and_writers_stop_after_it() {
        fence::init();
        static SLOTS: Slots<u64> = Slots::new();
        thread_local! {
            static SLOT: SlotCell<u64> = const { SlotCell::new() };
        }
        let recorded = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (recorded, stop) = (recorded.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        SLOT.with(|s| {
                            if let Some(mut n) = s.get(&SLOTS, || 0).and_then(ThreadSlot::enter) {
                                *n += 1;
                                recorded.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut drained = 0;
        SLOTS.drain(|_, n| drained += *n);
        let at_drain = recorded.load(Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert!(drained > 0);
        // Everything counted before the drain returned is in the slots, and nothing is
        // recorded after it.
        assert_eq!(drained, at_drain);
        assert_eq!(recorded.load(Ordering::Relaxed), at_drain);
    }
}

/// The symmetric handshake (the writer's atomic swap; `membarrier` is not modelled, see
/// `crate::sync`) under every interleaving up to `LOOM_MAX_PREEMPTIONS` preemptions.
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p gasp --release --lib loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    /// A writer records `events` events (one increment each) while the finisher
    /// drains: every event a writer recorded is in what the finisher read, and no
    /// writer records once the finisher has read its slot.
    fn writers_race_the_finisher(writers: usize, events: u64) {
        let explored = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = explored.clone();
        loom::model(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let slots: &'static Slots<u64> = Box::leak(Box::new(Slots::new()));
            // Registered up front: the registry's lock is std's (no loom operation
            // inside), so the race checked is the writers' records against the drain.
            let handles: Vec<_> = (0..writers)
                .map(|_| {
                    let slot = slots.register(|| 0).expect("the registry is open");
                    thread::spawn(move || {
                        let mut recorded = 0;
                        for _ in 0..events {
                            if let Some(mut n) = slot.enter() {
                                *n += 1;
                                recorded += 1;
                            }
                        }
                        recorded
                    })
                })
                .collect();
            let mut drained = 0;
            slots.drain(|_, n| drained += *n);
            let recorded: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(drained, recorded, "events recorded but not drained");
        });
        println!(
            "loom: {} interleavings explored",
            explored.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    #[test]
    fn loom_one_writer_races_the_finisher() {
        writers_race_the_finisher(1, 2);
    }

    #[test]
    fn loom_two_writers_race_the_finisher() {
        writers_race_the_finisher(2, 1);
    }
}
