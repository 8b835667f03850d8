//! Handler-safe locks (GASNet-EX spec, "Handler-safe locks (HSLs)").
//!
//! An HSL is the one kind of lock that AM handlers may take. While a thread holds one it
//! is in a restricted context: it may not communicate or poll (checked), which is what
//! makes taking the same lock inside a handler safe. Holding is per thread and must be
//! released by the same thread, so the lock has a guard-free `lock`/`unlock` pair as in
//! the spec, plus a guard for scoped use.

use std::sync::atomic::{AtomicUsize, Ordering};

use lock_api::RawMutex as _;

use crate::context;

/// A handler-safe lock (GASNet-EX `gex_HSL_t`).
pub struct Hsl {
    raw: parking_lot::RawMutex,
    /// The holding thread's token ([`thread_token`]), 0 when free: so that a thread
    /// taking a lock it holds, or releasing one it does not, fails with a message
    /// instead of deadlocking or releasing another thread's hold.
    owner: AtomicUsize,
}

/// This thread's token: the address of a thread-local, unique among live threads and
/// never 0.
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

impl Default for Hsl {
    fn default() -> Hsl {
        Hsl::new()
    }
}

impl Hsl {
    /// GASNet-EX `GEX_HSL_INITIALIZER` / `gex_HSL_Init`.
    pub const fn new() -> Hsl {
        Hsl {
            raw: parking_lot::RawMutex::INIT,
            owner: AtomicUsize::new(0),
        }
    }

    /// GASNet-EX `gex_HSL_Lock`.
    ///
    /// # Panics
    /// If this thread holds the lock already (HSLs do not nest; it would deadlock).
    #[track_caller]
    pub fn lock(&self) {
        let span = gasp::span!(GASP_UPC_LOCK, self.gasp_arg());
        let me = thread_token();
        // Relaxed: only this thread stores its own token, so it reads back its own
        // store or another's, never its own token when it does not hold the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            panic!("gex::Hsl::lock: this thread holds the lock already (HSLs do not nest)");
        }
        self.raw.lock();
        self.owner.store(me, Ordering::Relaxed);
        context::hsl_acquired();
        gasp::end!(span, self.gasp_arg());
    }

    /// The lock as the GASP lock events name it (`void *lck`): its address.
    fn gasp_arg(&self) -> usize {
        self as *const Hsl as usize
    }

    /// GASNet-EX `gex_HSL_Trylock`: true if the lock was taken.
    #[track_caller]
    pub fn try_lock(&self) -> bool {
        let span = gasp::span!(GASP_UPC_LOCK_ATTEMPT, self.gasp_arg());
        let ok = self.raw.try_lock();
        if ok {
            self.owner.store(thread_token(), Ordering::Relaxed);
            context::hsl_acquired();
        }
        gasp::end!(span, self.gasp_arg(), i32::from(ok));
        ok
    }

    /// GASNet-EX `gex_HSL_Unlock`.
    ///
    /// # Panics
    /// If this thread does not hold the lock (it is free, or another thread holds it).
    #[track_caller]
    pub fn unlock(&self) {
        let span = gasp::span!(GASP_UPC_UNLOCK, self.gasp_arg());
        if self.owner.load(Ordering::Relaxed) != thread_token() {
            panic!("gex::Hsl::unlock: the lock is not held by this thread");
        }
        self.owner.store(0, Ordering::Relaxed);
        context::hsl_released();
        // SAFETY: this thread holds the lock (its token is the owner's, stored by its
        // own lock or try_lock), so it is released by the thread that took it.
        unsafe { self.raw.unlock() };
        gasp::end!(span, self.gasp_arg());
    }

    /// Locks and returns a guard that unlocks when dropped.
    #[track_caller]
    pub fn guard(&self) -> HslGuard<'_> {
        self.lock();
        HslGuard { hsl: self }
    }
}

impl Drop for Hsl {
    /// GASNet-EX `gex_HSL_Destroy`, which may not destroy a held lock. A lock dropped
    /// while this thread holds it ends the hold's restricted context first, so that a
    /// thread unwinding from a panic is not left unable to communicate; out of a panic,
    /// the drop then fails naming it. A lock another thread holds fails the drop too:
    /// that thread would stay restricted for good.
    fn drop(&mut self) {
        let owner = *self.owner.get_mut();
        if owner == 0 {
            return;
        }
        let mine = owner == thread_token();
        if mine {
            context::hsl_released();
        }
        if !std::thread::panicking() {
            let who = if mine {
                "this thread"
            } else {
                "another thread"
            };
            panic!("gex::Hsl dropped while {who} holds it (gex_HSL_Destroy of a held lock)");
        }
    }
}

/// Unlocks its [`Hsl`] on drop.
pub struct HslGuard<'a> {
    hsl: &'a Hsl,
}

impl Drop for HslGuard<'_> {
    fn drop(&mut self) {
        self.hsl.unlock();
    }
}
