//! Futures and promises (UPC++ spec ch. 5 and Appendix A).
//!
//! A [`Future<T>`] is the eventual value of an operation; a [`Promise<T>`] is the
//! producer side, with a dependency counter. Differences from C++ forced or suggested by
//! Rust, and how the spec's semantics are kept:
//!
//! * `future<A, B, ...>` is `Future<(A, B, ...)>`: one value type, which may be a tuple
//!   (`Future<()>` is `future<>`). C++'s `result_tuple`-style access is just the tuple.
//!   [`FutureElements`] reads a value type back as those type parameters, which is how
//!   [`when_all`] concatenates them (§5.8.1 ¶53): `when_all((Future<()>, Future<u64>))`
//!   is a `Future<u64>`.
//! * Futures are single-threaded (§5.5: "as if the current thread is the only one"), so
//!   they are `Rc`-based and neither `Send` nor `Sync`.
//! * Consumers take values by move: [`Future::wait`] and [`Future::then`] consume the
//!   handle. A future may be cloned when `T: Clone`; each consumer then gets a copy, as
//!   in C++, and the last one gets the original.
//! * Callbacks run exactly where §5.5 says: during `then` on a ready future, or during
//!   the promise fulfilment that makes the future ready.
//! * `then` flattens: a callback returning a `Future<U>` gives `Future<U>`; a callback
//!   returning a value `V` gives `Future<V>`. Which is which is decided by the
//!   [`FutureValue`] trait, implemented for the standard library's value types and for
//!   `GlobalPtr`, `DistId`, `TeamId` and `Team`; implement it for your own types with
//!   [`impl_future_value!`](crate::impl_future_value), or return [`make_future`]`(v)`
//!   from the callback (the way for another crate's types).
//! * A ready future of plain values ([`make_future`], `to_future`) lives inline: no heap
//!   allocation. So does the future of an operation that completed at initiation, which
//!   the spec still requires to stay non-ready until the next user-level progress: it
//!   records the thread's progress epoch and becomes ready when that advances.
//! * The future of a round-trip RPC with a small value holds a *reply cell* from a
//!   per-thread pool, into which the reply is decoded (see `cell.rs`): no allocation
//!   either, unless a callback is attached before the value arrives.
//! * Futures also implement [`std::future::Future`]; [`block_on`](crate::block_on)
//!   drives them with user-level progress, so `async` code can `.await` them.

//!
//! # Layout and the futures ↔ progress knot
//!
//! `state.rs` (the promise state), `cell.rs` (reply cells) and `list.rs` (type-level
//! lists, which completions share) are the leaves;
//! `handle.rs` ([`Future`]) sits on them; `value.rs` (`then` and what its callback may
//! return), `when_all.rs` and `promise.rs` sit on the handle. Futures sit on the
//! per-thread state (`thread.rs`) and, in one
//! place, on user-level progress, which is above them: waiting on a future makes
//! progress (`Future::wait` calls `progress::wait_until` and the poll-skipping
//! `progress_past`), while progress readies futures only by running the callbacks
//! queued for it. That knot is the one cycle between the crate's modules.

mod cell;
mod handle;
pub(crate) mod list;
mod promise;
mod state;
mod value;
mod when_all;

pub(crate) use cell::{fits as fits_cell, ReplyCell};
pub use handle::{make_future, Future};
pub use list::{Append, Cons, FutureList, Nil};
pub(crate) use promise::fulfill_state;
pub use promise::Promise;
pub(crate) use state::State;
pub use value::{to_future, FutureElements, FutureValue};
pub use when_all::{when_all, ConcatElements, WhenAll};
