//! The atomics of the tools' thread slots, from `std` or, under `cfg(loom)`, from
//! [loom], which runs the slots' tests under every interleaving of their threads
//! (bounded by `LOOM_MAX_PREEMPTIONS`).
//!
//! Loom models the C++/Rust memory model, not `membarrier(2)`: under `cfg(loom)` the
//! slots use their symmetric handshake (an atomic swap on the writer's side), which
//! loom checks; the asymmetric one (a compiler fence against the finisher's
//! `membarrier`) is covered by the stress test of `tools::slots`, with writers racing
//! the finisher on real threads.

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, Ordering};
#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, Ordering};
