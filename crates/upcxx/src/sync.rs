//! The synchronization of the structures that threads share (the RPC inboxes, the
//! personas' LPC queues), from `std` or, under `cfg(loom)`, from [loom], which runs
//! their tests under every interleaving of their threads (bounded by
//! `LOOM_MAX_PREEMPTIONS`). Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p upcxx --release --lib loom`.
//!
//! The reply cells (`future/cell.rs`) are not here: a cell never leaves its thread
//! (futures are not `Send`); a reply that another thread's poll receives reaches the
//! cell's thread through that thread's RPC inbox, which is.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
