//! The atomics of the lock-free structures, from `std` or, under `cfg(loom)`, from
//! [loom], which runs the structures' tests under every interleaving of their threads
//! (bounded by `LOOM_MAX_PREEMPTIONS`). Code that loom checks imports its atomics
//! from here; everything else uses `std` directly.
//!
//! Loom models the memory of one process: the smp queues' algorithm is checked with
//! the queue in an ordinary allocation. That the algorithm is the same over memory
//! shared between processes (where each rank maps the region at its own address, and
//! only offsets are stored) is covered by the multi-rank stress tests
//! (`tests/faults.rs`: all-to-all floods with more ranks than cores).

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU64, Ordering};
