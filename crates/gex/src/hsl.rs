//! Handler-safe locks (GASNet-EX spec, "Handler-safe locks (HSLs)").
//!
//! An HSL is the one kind of lock that AM handlers may take. While a thread holds one it
//! is in a restricted context: it may not communicate or poll (checked), which is what
//! makes taking the same lock inside a handler safe. Holding is per thread and must be
//! released by the same thread, so the lock has a guard-free `lock`/`unlock` pair as in
//! the spec, plus a guard for scoped use.

use lock_api::RawMutex as _;

use crate::context;

/// A handler-safe lock (GASNet-EX `gex_HSL_t`).
pub struct Hsl {
    raw: parking_lot::RawMutex,
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
        }
    }

    /// GASNet-EX `gex_HSL_Lock`.
    #[track_caller]
    pub fn lock(&self) {
        let span = gasp::span!(GASP_UPC_LOCK, self.gasp_arg());
        self.raw.lock();
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
            context::hsl_acquired();
        }
        gasp::end!(span, self.gasp_arg(), i32::from(ok));
        ok
    }

    /// GASNet-EX `gex_HSL_Unlock`.
    ///
    /// # Panics
    /// If the lock is not held.
    #[track_caller]
    pub fn unlock(&self) {
        let span = gasp::span!(GASP_UPC_UNLOCK, self.gasp_arg());
        if !self.raw.is_locked() {
            panic!("gex::Hsl::unlock: the lock is not held");
        }
        context::hsl_released();
        // SAFETY: the lock is held (checked above); HSLs are released by the thread
        // that took them, as the spec requires of the client.
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

/// Unlocks its [`Hsl`] on drop.
pub struct HslGuard<'a> {
    hsl: &'a Hsl,
}

impl Drop for HslGuard<'_> {
    fn drop(&mut self) {
        self.hsl.unlock();
    }
}
