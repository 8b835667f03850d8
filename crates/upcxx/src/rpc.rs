//! Remote procedure calls (UPC++ spec ch. 9).
//!
//! [`rpc`] runs a function on another rank (or this one) and returns a future of its
//! result; [`rpc_ff`] ("fire and forget") does the same without a result. This is
//! Figure 9.1 of the spec:
//!
//! ```
//! upcxx::init();
//! let next = (upcxx::rank_me() + 1) % upcxx::rank_n();
//! let f = upcxx::rpc(
//!     next,
//!     |from: upcxx::Rank| {
//!         println!("Rank {from} told rank {} to say Hello World", upcxx::rank_me());
//!         upcxx::rank_me()
//!     },
//!     (upcxx::rank_me(),),
//! );
//! assert_eq!(f.wait(), next);
//! upcxx::finalize();
//! ```
//!
//! # Functions travel as code addresses
//!
//! Every rank runs the same binary, so a function is sent as the offset of its code from
//! an anchor function in that binary (§6.3); in a position-independent executable the
//! offset is the same in every process. What is sent is not the user's function itself
//! but a *trampoline* monomorphized for it, `run_rpc::<F, A>`, which knows how to
//! decode the arguments, call `F` and send the result back. `F` must therefore be
//! zero-sized, a `fn` item or a closure that captures nothing, so that the target can
//! call it without any of its bytes; this is checked at compile time (in a build, not
//! in `cargo check`). Captured state travels as arguments instead:
//!
//! ```compile_fail,E0080
//! upcxx::init();
//! let n = 5u64;
//! // error: the function must not capture anything ... pass captured state as arguments
//! let f = upcxx::rpc(0, move |x: u64| x + n, (1u64,));
//! ```
//! ```
//! upcxx::init();
//! let n = 5u64;
//! let f = upcxx::rpc(0, |x: u64, n: u64| x + n, (1u64, n));
//! assert_eq!(f.wait(), 6);
//! upcxx::finalize();
//! ```
//!
//! # Arguments
//!
//! The arguments are a tuple (`()`, `(a,)`, `(a, b)`, ... up to 8 elements) of values
//! that implement [`Serialization`] (any serde type, [`View`](crate::serialization::View),
//! [`SeqView`](crate::serialization::SeqView), [`ByRef`](crate::ByRef)); the function
//! takes them as separate parameters, views with a lifetime the function must accept
//! generically (`|v: View<'_, f64>, scale: f64| ...`). A value the caller keeps is
//! passed by reference with [`by_ref`](crate::by_ref) (`(by_ref(key.as_str()),)`),
//! which serializes it from the borrow as UPC++ does its `const&` arguments; the
//! function receives the owned value (`String` for a `str`, `Vec<T>` for a `[T]`).
//! Arguments are serialized before `rpc` returns (§9.3 ¶3, source completion "as
//! buffered"): into this thread's *batch* for the target (`batch.rs`), which gathers
//! its messages to that rank into one Medium Active Message, sent when the batch is
//! full or at the thread's next progress (any wait, `progress`, `discharge`), so an AM
//! carries dozens of small RPCs and their replies; until then `progress_required()` is
//! true (§10.3). A message larger than a batch travels alone, in fragments that the
//! target reassembles past one Medium. There is no size limit besides 4 GiB per
//! message. With `UPCXX_RPC_BATCH_BYTES=0`, each message is its own AM, serialized
//! into the network's slot by a negotiated-payload Medium.
//!
//! # Execution and results
//!
//! The target's AM handler only copies the message into a receive queue of the master
//! persona (see `delivery.rs`; a call to `rank_me()` is serialized into that queue by
//! the caller, without an AM); the function runs during user-level progress of the
//! target's master persona (§9.3 ¶6), never synchronously inside `rpc`, even to
//! `rank_me()` (¶7). If it returns a value, the value is serialized and sent back; if it
//! returns a [`Future`], the reply is sent when that future is ready (¶3), and the
//! receive buffer, with any views into it, stays alive until then (§6.5 ¶6). The
//! initiator's future becomes ready during a later user-level progress of the initiating
//! thread (§9.3 ¶25 says "of the initiating persona"; our futures are bound to the thread
//! that made them, so the reply goes to that thread, and readies the future in its next
//! user-level progress whichever personas it then holds).
//!
//! The return type `R` must implement [`FutureValue`] (done for the standard types; use
//! [`impl_future_value!`](crate::impl_future_value) for your own), and its value type must
//! be a serde type for [`rpc`].
//!
//! # Costs
//!
//! A small RPC allocates nothing in the steady state, and takes no lock when the
//! threads involved are the ones holding the master personas: the arguments are
//! serialized into the thread's batch, the target's handler copies the batch's RPCs
//! into a reused receive page of the master persona's thread in one copy, and the result of [`rpc`],
//! if at most 32 bytes, is decoded by the reply's handler into a reused *reply cell* of
//! the calling thread, which the future reads (see `future/cell.rs`). Larger results
//! use a reference-counted promise state, allocated per call.
//!
//! # Trust
//!
//! The target jumps to the code address a message names. This is sound because every
//! rank runs the same binary and messages come only from ranks of the same job (as in
//! UPC++ and GASNet); the transport is not a security boundary.
//!
//! # Layout
//!
//! Inside `rpc`, imports point one way: `inbox` (receive pages and message headers)
//! and `incoming` (a message being run) are the leaves; `function` (function
//! addresses) and `reply` (reply completion) sit on them; `delivery` (where messages
//! wait and when they run) on those; `wire` (the AM handlers and sends) on `delivery`;
//! this file (the public calls and their trampolines) on all of them. RPC sits on
//! futures, serialization, the runtime state and the per-thread state; personas and
//! user-level progress, above it, call into `delivery`. The exception is `completions`
//! (the calls with completion objects, [`rpc_with`] and [`rpc_ff_with`]), which sits
//! on the completion module, itself above the rest of `rpc`.

mod batch;
mod completions;
mod deferred;
mod delivery;
mod function;
mod inbox;
mod incoming;
mod reply;
mod wire;

use std::rc::Rc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::future::{fits_cell, Future, FutureValue, ReplyCell, State};
use crate::runtime::state::{rt, Rank, Setup};
use crate::serialization::{Error, Reader, Rerun, Serialization, Writer};
pub(crate) use batch::{send_unsent, unsent};
use function::function_offset;
use inbox::{KIND_REPLY, KIND_REPLY_UNIT, KIND_RPC};
use incoming::Incoming;
use reply::{complete_in_cell, complete_in_state, cookie_of};
use wire::{first_arg, send};

pub use completions::{rpc_ff_with, rpc_with, RpcCall, RpcFfCall};
pub(crate) use delivery::{deliver_forwarded_replies, master_released, run_master_rpcs};
pub(crate) use wire::register_handlers;

// ---------------------------------------------------------------------------------------
// Public API

/// The argument tuple of an RPC: `()`, `(A,)`, `(A, B)`, ... up to 8 elements, each
/// [`Serialization`]. Implemented for you; you never implement it.
pub trait RpcArgs {
    /// What the target's function receives, element by element.
    type Deserialized<'de>;

    /// The tuple is `()`: it serializes to nothing.
    #[doc(hidden)]
    const EMPTY: bool;

    #[doc(hidden)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error>;

    #[doc(hidden)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error>;

    /// An element travels as the id of an object ([`Serialization::BY_ID`]).
    #[doc(hidden)]
    const BY_ID: bool;

    #[doc(hidden)]
    fn wait_until_here(
        payload: &[u8],
        make_rerun: &mut dyn FnMut() -> Rerun,
    ) -> Result<bool, Error>;
}

/// A function that can be called by RPC with the argument tuple `A`: any `Fn` of the
/// tuple's (deserialized) element types, for every lifetime of the receive buffer.
/// It must also be zero-sized (checked when `rpc`/`rpc_ff` is instantiated).
pub trait RpcFn<A: RpcArgs>: Sized {
    /// The function's return type: a value, or a future of one.
    type Ret: FutureValue;

    #[doc(hidden)]
    fn invoke<'de>(&self, args: A::Deserialized<'de>) -> Self::Ret;
}

/// The value an [`rpc`] of `F` with arguments `A` produces: `F`'s return type, or the
/// value type of the future it returns.
pub type RpcValue<F, A> = <<F as RpcFn<A>>::Ret as FutureValue>::Value;

macro_rules! rpc_arity {
    ($($T:ident $v:ident $i:tt),*) => {
        impl<$($T: Serialization),*> RpcArgs for ($($T,)*) {
            type Deserialized<'de> = ($($T::Deserialized<'de>,)*);

            const EMPTY: bool = {
                let elements: &[&str] = &[$(stringify!($T)),*];
                elements.is_empty()
            };

            #[inline]
            #[allow(unused_variables)]
            fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                $(self.$i.encode(w)?;)*
                Ok(())
            }

            #[inline]
            #[allow(unused_variables, clippy::unused_unit)]
            fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error> {
                Ok(($($T::decode(r)?,)*))
            }

            const BY_ID: bool = false $(|| $T::BY_ID)*;

            // Only the elements up to the last by-id one are read: reading an element
            // means decoding it (serde has no skipping), and the ones after it (a key,
            // a value) would be decoded, allocated and dropped for nothing.
            #[allow(unused_variables, unused_mut)]
            fn wait_until_here(
                payload: &[u8],
                make_rerun: &mut dyn FnMut() -> Rerun,
            ) -> Result<bool, Error> {
                let by_id: &[bool] = &[$($T::BY_ID),*];
                let mut r = Reader::new(payload);
                $(
                    if !by_id[$i..].contains(&true) {
                        return Ok(false);
                    }
                    if $T::wait_until_here(&mut r, make_rerun)? {
                        return Ok(true);
                    }
                )*
                Ok(false)
            }
        }

        impl<Func, Ret, $($T: Serialization),*> RpcFn<($($T,)*)> for Func
        where
            Func: for<'de> Fn($($T::Deserialized<'de>),*) -> Ret,
            Ret: FutureValue,
        {
            type Ret = Ret;

            #[inline]
            fn invoke<'de>(&self, args: ($($T::Deserialized<'de>,)*)) -> Ret {
                let ($($v,)*) = args;
                self($($v),*)
            }
        }
    };
}

rpc_arity!();
rpc_arity!(A a 0);
rpc_arity!(A a 0, B b 1);
rpc_arity!(A a 0, B b 1, C c 2);
rpc_arity!(A a 0, B b 1, C c 2, D d 3);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);

/// Runs `func(args...)` on `rank` during its master persona's user-level progress, with
/// no reply (UPC++ `rpc_ff`, §9.3). The arguments are serialized before this returns.
/// Progress level: internal.
///
/// # Panics
/// Before `init`; if `rank` is not below `rank_n()`; if an argument fails to serialize.
#[track_caller]
pub fn rpc_ff<F, A>(rank: Rank, func: F, args: A)
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    if crate::reported::enabled() {
        return rpc_ff_reported(rank, func, args);
    }
    rpc_ff_as::<F, A, false>(rank, func, args);
}

/// The reported instance of [`rpc_ff`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation).
#[cold]
#[inline(never)]
#[track_caller]
fn rpc_ff_reported<F: RpcFn<A>, A: RpcArgs>(rank: Rank, func: F, args: A) {
    rpc_ff_as::<F, A, true>(rank, func, args);
}

/// [`rpc_ff`], reporting its GASP event if `REPORT`.
#[inline(always)]
#[track_caller]
fn rpc_ff_as<F: RpcFn<A>, A: RpcArgs, const REPORT: bool>(rank: Rank, func: F, args: A) {
    assert_no_captures::<F>();
    drop(func);
    let entry = function_offset(run_rpc_ff::<F, A>);
    send_ff::<REPORT>(rank, entry, A::EMPTY, |w| args.encode(w));
}

/// Sends the `rpc_ff` whose trampoline is `entry`, its arguments written by `encode`
/// (nothing if `empty`), reporting its GASP event if `REPORT`.
#[inline(always)]
#[track_caller]
fn send_ff<const REPORT: bool>(
    rank: Rank,
    entry: [u32; 2],
    empty: bool,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) {
    let rt = rt("rpc_ff");
    let dest = world_rank("rpc_ff", rt, rank);
    let seq = msg_seq::<REPORT>();
    let span = gasp::span_if!(REPORT, GASP_UPCXX_RPC_SEND, dest, 0, msgid(rt.rank, seq));
    let kind = first_arg(KIND_RPC, seq);
    let sent = send(rt, dest, kind, entry, [0; 4], empty, encode);
    let len = sent
        .unwrap_or_else(|e| panic!("upcxx::rpc_ff: the arguments could not be serialized: {e}"));
    gasp::end!(span, dest, len, msgid(rt.rank, seq));
}

/// An [`rpc_ff`] serialized now and sent later: what `remote_cx::as_rpc` keeps while
/// its operation is in flight. It owns the serialized arguments, so the arguments
/// themselves (a `&DistObject`, a `&Team`, a borrowed slice) need to live only as long
/// as the initiating call, where UPC++ copies them into the completion object (§7.3
/// ¶15: each argument is CopyConstructible, or a `dist_object&` or `team&`).
#[doc(hidden)]
pub struct PreparedRpcFf {
    entry: [u32; 2],
    empty: bool,
    bytes: Vec<u8>,
}

impl PreparedRpcFf {
    /// Serializes `func(args...)`.
    ///
    /// # Panics
    /// If an argument fails to serialize.
    pub(crate) fn new<F: RpcFn<A>, A: RpcArgs>(func: F, args: &A) -> PreparedRpcFf {
        assert_no_captures::<F>();
        drop(func);
        let mut bytes = Vec::new();
        if !A::EMPTY {
            // With no slot, every byte goes to the spill vector.
            let mut w = Writer::new(&mut [], Some(&mut bytes));
            args.encode(&mut w).unwrap_or_else(|e| {
                panic!("upcxx::remote_cx::as_rpc: the arguments could not be serialized: {e}")
            });
        }
        PreparedRpcFf {
            entry: function_offset(run_rpc_ff::<F, A>),
            empty: A::EMPTY,
            bytes,
        }
    }

    /// Sends the call to `rank`'s master persona.
    pub(crate) fn send(self, rank: Rank) {
        let encode = |w: &mut Writer<'_>| w.raw(&self.bytes);
        if crate::reported::enabled() {
            send_ff::<true>(rank, self.entry, self.empty, encode);
        } else {
            send_ff::<false>(rank, self.entry, self.empty, encode);
        }
    }
}

/// The GASP message id of the RPC that rank `sender` numbered `seq`: unique in the job
/// (`sender << 40 | seq`), or 0, "unknown", for `seq` 0 (sent without a tool attached).
fn msgid(sender: Rank, seq: u32) -> u64 {
    if seq == 0 {
        0
    } else {
        u64::from(sender) << 40 | u64::from(seq)
    }
}

/// The sequence number of an RPC this thread is about to send, which travels in its
/// header's spare bits (`wire::first_arg`) and makes its GASP message id: 0 (none)
/// unless the RPC is reported. Unique on this rank until [`wire::SEQ_MAX`] RPCs were
/// numbered, then it wraps.
#[inline(always)]
fn msg_seq<const REPORT: bool>() -> u32 {
    if REPORT {
        numbered_seq()
    } else {
        0
    }
}

/// [`msg_seq`] of a reported RPC: numbers come from a per-thread block, so threads do
/// not share a counter's cache line per call.
fn numbered_seq() -> u32 {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU32, Ordering};

    const BLOCK: u32 = 1 << 10;
    static NEXT_BLOCK: AtomicU32 = AtomicU32::new(0);
    thread_local! {
        /// The next number of this thread's block and the end of the block.
        static BLOCK_LEFT: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    }
    BLOCK_LEFT.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            // Blocks of BLOCK numbers, wrapping within 1..=SEQ_MAX (0 is "none").
            let blocks = wire::SEQ_MAX / BLOCK;
            next = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed) % blocks * BLOCK + 1;
            end = next + BLOCK;
        }
        b.set((next + 1, end));
        next
    })
}

/// Runs `func(args...)` on `rank` during its master persona's user-level progress and
/// returns the future of its result (UPC++ `rpc`, §9.3): ready, during a user-level
/// progress of this thread, once the result is back. If `func` returns a future, the
/// result is that future's value, sent when it is ready. Progress level: internal.
///
/// # Panics
/// Before `init`; if `rank` is not below `rank_n()`; if an argument fails to serialize.
#[track_caller]
pub fn rpc<F, A>(rank: Rank, func: F, args: A) -> Future<RpcValue<F, A>>
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    if crate::reported::enabled() {
        return rpc_reported(rank, func, args);
    }
    rpc_as::<F, A, false>(rank, func, args)
}

/// The reported instance of [`rpc`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation).
#[cold]
#[inline(never)]
#[track_caller]
fn rpc_reported<F, A>(rank: Rank, func: F, args: A) -> Future<RpcValue<F, A>>
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    rpc_as::<F, A, true>(rank, func, args)
}

/// [`rpc`], reporting its GASP event if `REPORT`.
#[inline(always)]
#[track_caller]
fn rpc_as<F, A, const REPORT: bool>(rank: Rank, func: F, args: A) -> Future<RpcValue<F, A>>
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    assert_no_captures::<F>();
    let rt = rt("rpc");
    let dest = world_rank("rpc", rt, rank);
    drop(func);
    let (fut, promise) = if fits_cell::<RpcValue<F, A>>() {
        let cell = ReplyCell::claim();
        // SAFETY: a fresh cell, which only `complete_in_cell::<RpcValue<F, A>>` (named
        // in the message below) will fill.
        let fut = unsafe { Future::from_cell(cell) };
        (fut, cell as *const ReplyCell as usize)
    } else {
        let state = State::<RpcValue<F, A>>::new(1);
        let fut = Future::from_state(Rc::clone(&state));
        (fut, Rc::into_raw(state) as usize)
    };
    let seq = msg_seq::<REPORT>();
    let span = gasp::span_if!(REPORT, GASP_UPCXX_RPC_SEND, dest, 0, msgid(rt.rank, seq));
    let replies = delivery::reply_inbox() as *const inbox::Inbox as usize;
    let cookie = cookie_of(replies as u64, promise as u64);
    let entry = function_offset(run_rpc::<F, A>);
    let kind = first_arg(KIND_RPC, seq);
    let sent = send(rt, dest, kind, entry, cookie, A::EMPTY, |w| args.encode(w));
    let len = match sent {
        Ok(len) => len,
        Err(e) => {
            drop(fut);
            if fits_cell::<RpcValue<F, A>>() {
                // SAFETY: the future that owned the cell is gone (it left the cell
                // abandoned), and nothing was sent, so no value will arrive to free it.
                unsafe { (*(promise as *const ReplyCell)).discard() };
            } else {
                // SAFETY: nothing was sent, so no reply will take this reference back.
                drop(unsafe { Rc::from_raw(promise as *const State<RpcValue<F, A>>) });
            }
            panic!("upcxx::rpc: the arguments could not be serialized: {e}")
        }
    };
    gasp::end!(span, dest, len, msgid(rt.rank, seq));
    fut
}

/// Fails the build for a function object that carries state.
fn assert_no_captures<F>() {
    const {
        assert!(
            std::mem::size_of::<F>() == 0,
            "upcxx::rpc: the function must not capture anything (it is sent as a code \
             address, not as data): pass captured state as RPC arguments instead, e.g. \
             upcxx::rpc(rank, |x: u64, s: String| ..., (x, s))"
        )
    };
}

#[track_caller]
#[inline]
fn world_rank(call: &str, rt: &Setup, rank: Rank) -> Rank {
    // Team-relative ranks will be translated to world ranks here.
    if rank >= rt.size {
        rank_out_of_range(call, rt, rank);
    }
    rank
}

#[cold]
#[inline(never)]
#[track_caller]
fn rank_out_of_range(call: &str, rt: &Setup, rank: Rank) -> ! {
    panic!(
        "upcxx::{call}: rank {rank} is out of range (rank_n() = {})",
        rt.size
    );
}

// ---------------------------------------------------------------------------------------
// Running messages

/// Runs an RPC: decodes the arguments, calls `F`, and passes what it returns (a value
/// or a future) to `finish` (for `rpc`, which sends the reply or arranges for it to be
/// sent when the result is ready), all inside the RPC's `GASP_UPCXX_RPC_EXECUTE` span. The span ends once the
/// reply is on its way rather than before it is sent, which keeps the tool's work for
/// the END off the round trip's critical path.
#[inline(always)]
fn execute<F, A>(msg: &Incoming<'_>, finish: impl FnOnce(F::Ret))
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    if crate::reported::enabled() {
        return execute_reported::<F, A>(msg, finish);
    }
    execute_as::<F, A, false>(msg, finish);
}

/// The reported instance of [`execute`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation).
#[cold]
#[inline(never)]
fn execute_reported<F, A>(msg: &Incoming<'_>, finish: impl FnOnce(F::Ret))
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    execute_as::<F, A, true>(msg, finish);
}

/// [`execute`], reporting its GASP event if `REPORT`.
#[inline(always)]
fn execute_as<F, A, const REPORT: bool>(msg: &Incoming<'_>, finish: impl FnOnce(F::Ret))
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    let args = A::decode(&mut Reader::new(msg.payload)).unwrap_or_else(|e| {
        panic!(
            "upcxx::rpc: the arguments from rank {} do not deserialize: {e}",
            msg.head.src
        )
    });
    // SAFETY: `F` is zero-sized (`assert_no_captures` ran where this trampoline was
    // instantiated) and inhabited (the sender had a value), so the empty byte sequence is
    // a valid `F`. It is not dropped: the sender's value was dropped there.
    let func = std::mem::ManuallyDrop::new(unsafe { std::mem::zeroed::<F>() });
    // The sender's call site is not known here (the header has no word for it): the
    // event's location is this line of upcxx, the same for every RPC, and its msgid
    // names the GASP_UPCXX_RPC_SEND, at the caller's line, that it executes.
    let id = msgid(msg.head.src, msg.head.seq);
    let span = gasp::span_if!(
        REPORT,
        GASP_UPCXX_RPC_EXECUTE,
        msg.head.src,
        msg.payload.len(),
        id
    );
    finish(func.invoke(args));
    gasp::end!(span, msg.head.src, msg.payload.len(), id);
}

/// Trampoline of `rpc_ff::<F, A>`.
///
/// # Safety
/// `msg` must be an RPC message sent by `rpc_ff::<F, A>`.
unsafe fn run_rpc_ff<F: RpcFn<A>, A: RpcArgs>(msg: &Incoming<'_>) {
    if A::BY_ID && deferred::until_here::<A>(msg, run_rpc_ff::<F, A>) {
        return;
    }
    execute::<F, A>(msg, |ret| {
        if let Err(fut) = ret.into_value() {
            let page = msg.hold();
            fut.on_ready(move |_| drop(page));
        }
    });
}

/// Trampoline of `rpc::<F, A>`.
///
/// # Safety
/// `msg` must be an RPC message sent by `rpc::<F, A>`.
unsafe fn run_rpc<F, A>(msg: &Incoming<'_>)
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    if A::BY_ID && deferred::until_here::<A>(msg, run_rpc::<F, A>) {
        return;
    }
    let (src, cookie) = (msg.head.src, msg.head.cookie);
    execute::<F, A>(msg, |ret| match ret.lend_value(|v| reply(src, cookie, v)) {
        Ok(()) => {}
        Err(fut) => {
            let page = msg.hold();
            fut.on_ready(move |v| {
                drop(page);
                reply(src, cookie, &v);
            });
        }
    });
}

fn reply<V: Serialize + DeserializeOwned + 'static>(dest: Rank, cookie: [u32; 4], value: &V) {
    let rt = rt("rpc");
    let entry = if fits_cell::<V>() {
        function_offset(complete_in_cell::<V>)
    } else {
        function_offset(complete_in_state::<V>)
    };
    let unit = std::any::TypeId::of::<V>() == std::any::TypeId::of::<()>();
    let kind = if unit { KIND_REPLY_UNIT } else { KIND_REPLY };
    if let Err(e) = send(rt, dest, first_arg(kind, 0), entry, cookie, unit, |w| {
        value.encode(w)
    }) {
        panic!("upcxx::rpc: the result of the remote function could not be serialized: {e}");
    }
}
