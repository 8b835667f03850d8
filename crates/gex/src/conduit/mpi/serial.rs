//! The lock of the mpi conduit's state (see `MpiConduit::state`): a spin lock whose
//! waiters yield, which under `MPI_THREAD_SINGLE` takes no locked instruction.
//!
//! Hand-written because no lock crate has this mode: under `GEX_MPI_THREAD=single`
//! only the thread that initialized MPI may communicate (the conduit checks it before
//! every acquisition), so the lock only has to catch a thread re-entering it, which a
//! plain flag does. A locked compare-and-swap, as a spin lock takes, waits on x86 for
//! every store before it to leave the store buffer, such as the message MPI has just
//! written into a peer's shared-memory mailbox; every poll and every AM sent takes the
//! lock, a few times per message.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A value behind a lock (see the module documentation).
pub(super) struct Serial<T> {
    held: AtomicBool,
    /// Only one thread ever takes the lock (`MPI_THREAD_SINGLE`).
    single: bool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, of which there is at most one at a
// time (a compare-and-swap of `held`, or, with `single`, one thread, the caller's
// guarantee to `lock`).
unsafe impl<T: Send> Sync for Serial<T> {}

/// Access to the value while the lock is held; released when dropped. It stays on the
/// thread that took it (not `Send`, as `std::sync::MutexGuard`): a single thread's lock
/// relies on that.
pub(super) struct SerialGuard<'a, T> {
    lock: &'a Serial<T>,
    _not_send: PhantomData<*mut T>,
}

// SAFETY: a shared guard lends only `&T`, which may be shared when `T` is `Sync`.
unsafe impl<T: Sync> Sync for SerialGuard<'_, T> {}

impl<T> Serial<T> {
    pub(super) fn new(value: T, single: bool) -> Serial<T> {
        Serial {
            held: AtomicBool::new(false),
            single,
            value: UnsafeCell::new(value),
        }
    }

    /// Whether only one thread may ever take the lock (`MPI_THREAD_SINGLE`).
    #[inline]
    pub(super) fn single(&self) -> bool {
        self.single
    }

    /// Takes the lock: waits, yielding the processor, while another thread holds it
    /// (it may be waiting in MPI for a peer's progress).
    ///
    /// # Safety
    /// Where the lock was made `single`, no other thread takes it, ever.
    #[inline]
    pub(super) unsafe fn lock(&self) -> SerialGuard<'_, T> {
        if self.single {
            assert!(
                !self.held.load(Ordering::Relaxed),
                "gex: the mpi conduit's state lock taken twice by its one thread"
            );
            self.held.store(true, Ordering::Relaxed);
        } else {
            while self
                .held
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                while self.held.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
            }
        }
        SerialGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }
}

impl<T> Deref for SerialGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held (see `Sync`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SerialGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held (see `Sync`).
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SerialGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Serial;

    /// Threads that each add under the lock many times lose no addition.
    #[test]
    fn the_lock_excludes_other_threads() {
        let lock = Serial::new(0u64, false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        // SAFETY: not `single`.
                        let mut g = unsafe { lock.lock() };
                        let v = *g;
                        std::hint::black_box(&mut *g);
                        *g = v + 1;
                    }
                });
            }
        });
        // SAFETY: not `single`.
        assert_eq!(*unsafe { lock.lock() }, 40_000);
    }

    /// With one thread, the lock is a flag, released by the guard.
    #[test]
    fn a_single_threads_lock_is_released_by_its_guard() {
        let lock = Serial::new(0u32, true);
        for _ in 0..3 {
            // SAFETY: this thread alone takes it.
            *unsafe { lock.lock() } += 1;
        }
        // SAFETY: as above.
        assert_eq!(*unsafe { lock.lock() }, 3);
    }

    /// With one thread, taking the lock twice (which would hang a spin lock) panics.
    #[test]
    #[should_panic(expected = "taken twice")]
    fn a_single_threads_lock_panics_when_taken_twice() {
        let lock = Serial::new((), true);
        // SAFETY: this thread alone takes it.
        let _held = unsafe { lock.lock() };
        // SAFETY: as above.
        let _again = unsafe { lock.lock() };
    }
}
