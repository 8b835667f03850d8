//! Collectives (UPC++ spec ch. 12): barriers, broadcasts and reductions over any team.
//!
//! One file on purpose (the per-type operations are in `coll/ops.rs`): barrier, broadcast
//! and the reductions share the initiation, completion and checking code shown here.
//!
//! ```
//! use upcxx::team::world;
//! use upcxx::{op_fast_add, operation_cx, Promise};
//!
//! upcxx::init();
//! let me = upcxx::rank_me() as u64;
//! let n = upcxx::rank_n() as u64;
//! // Default completion (§7.2.3): a future of the operation's value.
//! assert_eq!(upcxx::reduce_all(me, op_fast_add, world()).wait(), n * (n - 1) / 2);
//! assert_eq!(upcxx::broadcast(me + 7, 0, world()).wait(), 7);
//! // Any closure; other completions as chapter 7 defines them.
//! let got = Promise::new();
//! upcxx::reduce_one_with(me, |a: u64, b: u64| a.max(b), 0, world(), operation_cx::as_promise(&got));
//! let max = got.finalize().wait();
//! assert!(upcxx::rank_me() != 0 || max == n - 1);
//! upcxx::coll::barrier(world());
//! upcxx::finalize();
//! ```
//!
//! # Design
//!
//! * Every collective is one `gex` collective on the team's `gex` team, so collectives
//!   match by call order per team, any number may be in flight, and ranks that call them
//!   in different orders fail the job with `gex`'s message naming the mismatch. The local
//!   team's run on a `gex` team whose members share memory, where `gex` moves the data
//!   through it.
//! * Completion is operation completion only (§12.2), as a future (the default), a
//!   promise or an LPC, requested with the `operation_cx` objects and delivered during
//!   user-level progress of the calling thread (§7.1 ¶14). A collective `gex` has not
//!   finished at return is armed, and each user-level progress tests its event (quietly:
//!   a tool sees the collective, not the `gex` events inside it).
//! * Values and buffers are *DefinitelyTriviallySerializable* (§12.2 ¶25, ¶39), in
//!   `bytemuck`'s terms as for RMA (`rma.rs`, "Element types"): a value is read as
//!   bytes and made again from bytes, so it is [`bytemuck::NoUninit`] and
//!   [`bytemuck::CheckedBitPattern`] (`bool`s and derived enums included: a broadcast
//!   value is checked before it becomes one, a reduction's operands as the operation
//!   takes them); a buffer, written under the caller's pointer, is
//!   [`bytemuck::Pod`]. The size of a broadcast is single-valued, so a
//!   value whose serialized size only the root knows cannot be broadcast in one
//!   collective; wrap plain data in [`Trivial`](crate::Trivial) or send it as bytes.
//! * The value variants keep their source and destination in boxes that the pending
//!   collective owns. The buffer variants take raw pointers, as the spec's do, and are
//!   `unsafe`: the buffers are the collective's until operation completion. The vector
//!   variants (`broadcast_vec`, `reduce_one_vec`, `reduce_all_vec`) are the buffer
//!   variants made safe as `rput_vec` is: the vector is lent to the collective, which
//!   works in place in its elements (a reduction's source and destination are the same
//!   buffer, ¶25) and gives it back with operation completion.
//! * Reduction operations ([`ReduceOp`]) are the `op_fast_*` objects, which reduce with
//!   `gex`'s built-in operations where the type allows, or any closure (see `ops.rs`).
//!
//! # GASP
//!
//! Each call reports one `GASP_UPCXX_*` interval at the caller's location, around the
//! initiation (the wait for completion is the future's); the `gex` events inside are
//! hidden.
//!
//! Collectives sit on teams, completions, futures and progress.

mod ops;

use std::marker::PhantomData;

use bytemuck::{CheckedBitPattern, NoUninit, Pod, Zeroable};

use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, Returned,
};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::{rt, Rank};
use crate::team::{check_collective, check_collective_initiation, Team};
use ops::Lowered;
pub use ops::{
    op_fast_add, op_fast_bit_and, op_fast_bit_or, op_fast_bit_xor, op_fast_max, op_fast_min,
    op_fast_mul, LoweredOp, OpFastAdd, OpFastBitAnd, OpFastBitOr, OpFastBitXor, OpFastMax,
    OpFastMin, OpFastMul, ReduceOp,
};

/// The completion events of [`barrier_async_with`] (§12.2 ¶14): operation, no value.
#[derive(Debug)]
pub enum BarrierAsync {}

impl CompletionEvents for BarrierAsync {
    const NAME: &'static str = "barrier_async";
    type OpValues = ();
}
impl HasOperation for BarrierAsync {}

/// The completion events of [`broadcast_with`] (§12.2 ¶41): operation, producing the `T`.
#[derive(Debug)]
pub struct BroadcastValue<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for BroadcastValue<T> {
    const NAME: &'static str = "broadcast";
    type OpValues = (T,);
}
impl<T: 'static> HasOperation for BroadcastValue<T> {}

/// The completion events of [`broadcast_buffer_with`] (§12.2 ¶41): operation, no value.
#[derive(Debug)]
pub enum BroadcastBuffer {}

impl CompletionEvents for BroadcastBuffer {
    const NAME: &'static str = "broadcast";
    type OpValues = ();
}
impl HasOperation for BroadcastBuffer {}

/// The completion events of [`reduce_one_with`] and [`reduce_all_with`] (§12.2 ¶34):
/// operation, producing the `T`.
#[derive(Debug)]
pub struct ReduceValue<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for ReduceValue<T> {
    const NAME: &'static str = "reduce";
    type OpValues = (T,);
}
impl<T: 'static> HasOperation for ReduceValue<T> {}

/// The completion events of [`reduce_one_buffer_with`] and [`reduce_all_buffer_with`]
/// (§12.2 ¶34): operation, no value.
#[derive(Debug)]
pub enum ReduceBuffer {}

impl CompletionEvents for ReduceBuffer {
    const NAME: &'static str = "reduce";
    type OpValues = ();
}
impl HasOperation for ReduceBuffer {}

/// Waits until every rank of `team` has entered the barrier, making user-level progress
/// (UPC++ `barrier(team)`, §12.2 ¶6). [`crate::barrier`] is the one over the world.
///
/// # Panics
/// If the team is invalid or destroyed, off the master persona's thread (¶7), or in
/// the restricted context.
#[track_caller]
pub fn barrier(team: &Team) {
    const CALL: &str = "barrier";
    let gex = team.gex(CALL);
    check_collective(CALL);
    let id = team.id().to_u64();
    let span = gasp::span!(GASP_UPCXX_BARRIER, id);
    let mut ev = gex.barrier_nb();
    crate::progress::progress_until(|| test_quietly(&mut ev));
    gasp::end!(span, id);
}

/// Starts a barrier over `team` (UPC++ `barrier_async`, §12.2 ¶11); the future is ready
/// once every rank has entered it.
#[track_caller]
pub fn barrier_async(team: &Team) -> Future<()> {
    barrier_async_with(team, operation_cx::as_future())
}

/// [`barrier_async`] with completions: `operation_cx` requests (§12.2 ¶14).
///
/// # Panics
/// If the team is invalid or destroyed, off the master persona's thread (¶7), or if an
/// `as_promise` request's promise is already ready. Unlike [`barrier`], it may be
/// called in the restricted context (a callback, an RPC): it does not wait.
#[track_caller]
pub fn barrier_async_with<C: Completions<BarrierAsync>>(
    team: &Team,
    cxs: C,
) -> Returned<C, BarrierAsync> {
    const CALL: &str = "barrier_async";
    operation_requested::<BarrierAsync, C>();
    let gex = team.gex(CALL);
    check_initiation(CALL, &cxs);
    let id = team.id().to_u64();
    let span = gasp::span!(GASP_UPCXX_BARRIER_ASYNC, id);
    let event = gex.barrier_nb();
    let futures = finish::<BarrierAsync, C, _>(cxs, event, || ());
    gasp::end!(span, id);
    futures
}

/// Broadcasts `value` of rank `root` of `team` to every rank (UPC++ `broadcast(value,
/// root, team)`, §12.2 ¶37): the future's value is the root's; the other ranks' `value`
/// is ignored.
#[track_caller]
pub fn broadcast<T: NoUninit + CheckedBitPattern>(value: T, root: Rank, team: &Team) -> Future<T> {
    broadcast_with(value, root, team, operation_cx::as_future())
}

/// [`broadcast`] with completions: `operation_cx` requests, notified with the value.
///
/// # Panics
/// If `root` is not a rank of the team (§12.2 ¶39), if the team is invalid or
/// destroyed, off the master persona's thread, or if an `as_promise` request's
/// promise is already ready. It may be called in the restricted context.
#[track_caller]
pub fn broadcast_with<T: NoUninit + CheckedBitPattern, C: Completions<BroadcastValue<T>>>(
    value: T,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, BroadcastValue<T>> {
    const CALL: &str = "broadcast";
    operation_requested::<BroadcastValue<T>, C>();
    let gex = team.gex(CALL);
    check_initiation(CALL, &cxs);
    check_root(CALL, root, team);
    let id = team.id().to_u64();
    let size = std::mem::size_of::<T>();
    let span = gasp::span!(GASP_UPCXX_BROADCAST, id, root as i32, size);
    // The value's bytes, in a box of its bits: the root's go out, the others' are
    // overwritten by the root's, and become a value once checked.
    let (bits, buf) = crate::rma::lend_box(Box::new(<T::Bits as Zeroable>::zeroed()));
    let p: *mut u8 = bits.cast();
    // SAFETY: `T::Bits` has `T`'s layout, so the box holds `size` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytemuck::bytes_of(&value).as_ptr(), p, size) };
    // SAFETY: the box is lent to the pending collective (given back by `buf` once the
    // event completed); at the root `src == dst`.
    let event = unsafe { gex.broadcast_nb(root, p, p, size, gex::Flags::NONE) };
    let futures = finish::<BroadcastValue<T>, C, _>(cxs, event, move || {
        (crate::rma::valid::<T>(CALL, buf()),)
    });
    gasp::end!(span, id, root as i32, size);
    futures
}

/// Broadcasts `count` elements at `buffer` of rank `root` to `buffer` of every rank of
/// `team` (UPC++ `broadcast(buffer, count, root, team)`, §12.2 ¶37); the future is ready
/// when the data are in this rank's buffer (at the root: when it may be reused).
///
/// # Safety
/// `buffer` must be valid for `count` elements of reads (at the root) and writes (at
/// the others) until operation completion, and not otherwise accessed meanwhile.
#[track_caller]
pub unsafe fn broadcast_buffer<T: Pod>(
    buffer: *mut T,
    count: usize,
    root: Rank,
    team: &Team,
) -> Future<()> {
    // SAFETY: the caller's contract, passed on.
    unsafe { broadcast_buffer_with(buffer, count, root, team, operation_cx::as_future()) }
}

/// [`broadcast_buffer`] with completions: `operation_cx` requests.
///
/// # Safety
/// As [`broadcast_buffer`].
///
/// # Panics
/// As [`broadcast_with`].
#[track_caller]
pub unsafe fn broadcast_buffer_with<T: Pod, C: Completions<BroadcastBuffer>>(
    buffer: *mut T,
    count: usize,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, BroadcastBuffer> {
    const CALL: &str = "broadcast";
    operation_requested::<BroadcastBuffer, C>();
    let gex = team.gex(CALL);
    check_initiation(CALL, &cxs);
    check_root(CALL, root, team);
    let id = team.id().to_u64();
    let nbytes = bytes_of_count::<T>(CALL, count);
    let span = gasp::span!(GASP_UPCXX_BROADCAST, id, root as i32, nbytes);
    let p = buffer.cast::<u8>();
    // SAFETY: the caller's contract: `buffer` is the collective's until completion.
    let event = unsafe { gex.broadcast_nb(root, p, p, nbytes, gex::Flags::NONE) };
    let futures = finish::<BroadcastBuffer, C, _>(cxs, event, || ());
    gasp::end!(span, id, root as i32, nbytes);
    futures
}

/// Broadcasts `count` elements at `buffer` of rank `root` to `buffer` of every rank of
/// `team`, where each rank's `buffer` lies in its own shared segment (UPC++
/// `broadcast(buffer, count, root, team)`, §12.2 ¶37, with the buffer named by a global
/// pointer); the future is ready when the data are in this rank's buffer (at the root:
/// when the buffer may be written again).
///
/// This is [`broadcast_buffer`] without `unsafe`: the segment stays mapped for the life
/// of the job, so the collective cannot reach memory it does not own; as with
/// [`rput`](crate::rput), ordering other accesses to the buffer before operation
/// completion is the program's (dereferencing [`GlobalPtr::local`] is `unsafe`
/// already). Because the root's source is in its segment, `gex` broadcasts a large
/// buffer over ranks that share memory by direct copies from it.
///
/// ```
/// use upcxx::{coll, world};
///
/// upcxx::init();
/// let buf = upcxx::new_array_with::<u32>(4, |i| i as u32 * (upcxx::rank_me() + 1));
/// coll::broadcast_global(buf, 4, 0, world()).wait();
/// assert_eq!(upcxx::rget(buf.add(3)).wait(), 3);
/// upcxx::delete_array(buf);
/// upcxx::finalize();
/// ```
///
/// # Panics
/// If `buffer` is null or not this rank's (`where_() != rank_me()`), if its `count`
/// elements are not in this rank's segment, as [`broadcast_with`] (a bad root, team or
/// context), or if the ranks disagree on `count` (the job fails, naming the mismatch).
#[track_caller]
pub fn broadcast_global<T: Pod>(
    buffer: GlobalPtr<T>,
    count: usize,
    root: Rank,
    team: &Team,
) -> Future<()> {
    const CALL: &str = "broadcast_global";
    if buffer.is_null() {
        panic!("upcxx::{CALL}: the buffer is the null global pointer");
    }
    let me = crate::rank_me();
    if buffer.where_() != me {
        panic!(
            "upcxx::{CALL}: the buffer is in the segment of rank {}, not of this rank {me} \
             (each rank broadcasts from or into its own segment)",
            buffer.where_()
        );
    }
    let nbytes = bytes_of_count::<T>(CALL, count);
    let Some(local) = rt(CALL).local_range(me, buffer.owner_addr(), nbytes) else {
        panic!(
            "upcxx::{CALL}: {count} elements at {buffer:?} do not lie in this rank's shared segment"
        );
    };
    // SAFETY: `[local, local + nbytes)` is inside this rank's segment (checked above),
    // which stays mapped for the life of the job and which Rust code reaches only
    // through raw pointers; concurrent access is the program's to order, as for RMA.
    unsafe { broadcast_buffer(local as *mut T, count, root, team) }
}

/// Broadcasts the elements of rank `root`'s `buffer` into every rank's `buffer` (UPC++
/// `broadcast(buffer, count, root, team)`, §12.2 ¶37, with the buffer lent to the
/// collective): the future gives each rank its vector back, holding the root's
/// elements, at operation completion. Every rank passes a vector of the same length
/// (the count is single-valued, ¶39); the elements of the other ranks' vectors are
/// overwritten.
///
/// This is [`broadcast_buffer`] without `unsafe`: the vector is the collective's until
/// it comes back, so nothing else can touch its elements meanwhile.
///
/// ```
/// use upcxx::world;
///
/// upcxx::init();
/// let mine = if upcxx::rank_me() == 0 { vec![1.5f64, 2.5, 3.5] } else { vec![0.0; 3] };
/// let got = upcxx::broadcast_vec(mine, 0, world()).wait();
/// assert_eq!(got, [1.5, 2.5, 3.5]);
/// upcxx::finalize();
/// ```
///
/// # Panics
/// As [`broadcast_with`], or if the ranks' vectors differ in length (the job fails,
/// naming the mismatch).
#[track_caller]
pub fn broadcast_vec<T: Pod>(buffer: Vec<T>, root: Rank, team: &Team) -> Future<Vec<T>> {
    broadcast_vec_with(buffer, root, team, operation_cx::as_future())
}

/// [`broadcast_vec`] with completions: `operation_cx` requests, notified with the
/// vector (a promise must be a `Promise<Vec<T>>`, an LPC callback must take the
/// `Vec<T>`).
///
/// # Panics
/// As [`broadcast_vec`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn broadcast_vec_with<T: Pod, C: Completions<BroadcastValue<Vec<T>>>>(
    buffer: Vec<T>,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, BroadcastValue<Vec<T>>> {
    const CALL: &str = "broadcast_vec";
    operation_requested::<BroadcastValue<Vec<T>>, C>();
    let gex = team.gex(CALL);
    check_initiation(CALL, &cxs);
    check_root(CALL, root, team);
    let id = team.id().to_u64();
    let nbytes = std::mem::size_of_val(buffer.as_slice());
    let span = gasp::span!(GASP_UPCXX_BROADCAST, id, root as i32, nbytes);
    let (ptr, give_back) = crate::rma::lend(buffer);
    let p = ptr.cast::<u8>();
    // SAFETY: the vector's buffer holds `nbytes` and is the collective's until the
    // event completes: only `give_back`, called then, makes the vector again.
    let event = unsafe { gex.broadcast_nb(root, p, p, nbytes, gex::Flags::NONE) };
    let futures = finish::<BroadcastValue<Vec<T>>, C, _>(cxs, event, move || (give_back(),));
    gasp::end!(span, id, root as i32, nbytes);
    futures
}

/// Reduces every rank's `value` with `op` to rank `root` of `team` (UPC++
/// `reduce_one(value, op, root, team)`, §12.2 ¶23): the root's future has the result;
/// the others' have their own `value` (the spec leaves it undefined, ¶29).
#[track_caller]
pub fn reduce_one<T: NoUninit + CheckedBitPattern, O: ReduceOp<T>>(
    value: T,
    op: O,
    root: Rank,
    team: &Team,
) -> Future<T> {
    reduce_one_with(value, op, root, team, operation_cx::as_future())
}

/// [`reduce_one`] with completions: `operation_cx` requests, notified with the value.
///
/// # Panics
/// If `root` is not a rank of the team (§12.2 ¶25), if the team is invalid or
/// destroyed, off the master persona's thread, or if an `as_promise` request's
/// promise is already ready. It may be called in the restricted context.
#[track_caller]
pub fn reduce_one_with<
    T: NoUninit + CheckedBitPattern,
    O: ReduceOp<T>,
    C: Completions<ReduceValue<T>>,
>(
    value: T,
    op: O,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<T>> {
    operation_requested::<ReduceValue<T>, C>();
    reduce_value("reduce_one", Some(root), value, op, team, cxs)
}

/// Reduces every rank's `value` with `op`; every rank's future has the result (UPC++
/// `reduce_all(value, op, team)`, §12.2 ¶23), the same bytes on every rank.
#[track_caller]
pub fn reduce_all<T: NoUninit + CheckedBitPattern, O: ReduceOp<T>>(
    value: T,
    op: O,
    team: &Team,
) -> Future<T> {
    reduce_all_with(value, op, team, operation_cx::as_future())
}

/// [`reduce_all`] with completions: `operation_cx` requests, notified with the value.
///
/// # Panics
/// If the team is invalid or destroyed, off the master persona's thread (¶7), or if an
/// `as_promise` request's promise is already ready. Unlike [`barrier`], it may be
/// called in the restricted context (a callback, an RPC): it does not wait.
#[track_caller]
pub fn reduce_all_with<
    T: NoUninit + CheckedBitPattern,
    O: ReduceOp<T>,
    C: Completions<ReduceValue<T>>,
>(
    value: T,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<T>> {
    operation_requested::<ReduceValue<T>, C>();
    reduce_value("reduce_all", None, value, op, team, cxs)
}

/// Reduces `count` elements at `src` of every rank element-wise with `op` into `dst`
/// of rank `root` of `team` (UPC++ `reduce_one(src, dst, count, op, root, team)`,
/// §12.2 ¶23). With one rank, `src` is copied to `dst` (¶27).
///
/// # Safety
/// `src` must be valid for `count` elements of reads, and at the root `dst` for
/// `count` elements of writes, until operation completion, neither otherwise written
/// meanwhile; at the root they may be equal but must not otherwise overlap (¶25).
/// `dst` is ignored off the root.
#[track_caller]
pub unsafe fn reduce_one_buffer<T: Pod, O: ReduceOp<T>>(
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    root: Rank,
    team: &Team,
) -> Future<()> {
    // SAFETY: the caller's contract, passed on.
    unsafe { reduce_one_buffer_with(src, dst, count, op, root, team, operation_cx::as_future()) }
}

/// [`reduce_one_buffer`] with completions: `operation_cx` requests.
///
/// # Safety
/// As [`reduce_one_buffer`].
///
/// # Panics
/// As [`reduce_one_with`].
#[track_caller]
pub unsafe fn reduce_one_buffer_with<T: Pod, O: ReduceOp<T>, C: Completions<ReduceBuffer>>(
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceBuffer> {
    operation_requested::<ReduceBuffer, C>();
    // SAFETY: the caller's contract, passed on.
    unsafe { reduce_buffer("reduce_one", Some(root), src, dst, count, op, team, cxs) }
}

/// Reduces `count` elements at `src` of every rank element-wise with `op` into `dst`
/// of every rank of `team` (UPC++ `reduce_all(src, dst, count, op, team)`, §12.2 ¶23).
///
/// # Safety
/// `src` must be valid for `count` elements of reads and `dst` for `count` elements of
/// writes until operation completion, neither otherwise written meanwhile; they may be
/// equal but must not otherwise overlap (¶25).
#[track_caller]
pub unsafe fn reduce_all_buffer<T: Pod, O: ReduceOp<T>>(
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    team: &Team,
) -> Future<()> {
    // SAFETY: the caller's contract, passed on.
    unsafe { reduce_all_buffer_with(src, dst, count, op, team, operation_cx::as_future()) }
}

/// [`reduce_all_buffer`] with completions: `operation_cx` requests.
///
/// # Safety
/// As [`reduce_all_buffer`].
///
/// # Panics
/// As [`reduce_all_with`].
#[track_caller]
pub unsafe fn reduce_all_buffer_with<T: Pod, O: ReduceOp<T>, C: Completions<ReduceBuffer>>(
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceBuffer> {
    operation_requested::<ReduceBuffer, C>();
    // SAFETY: the caller's contract, passed on.
    unsafe { reduce_buffer("reduce_all", None, src, dst, count, op, team, cxs) }
}

/// Reduces the elements of every rank's `values` element-wise with `op` to rank
/// `root` of `team` (UPC++ `reduce_one(src, dst, count, op, root, team)`, §12.2 ¶23,
/// with one buffer lent to the collective as source and destination, ¶25): the future
/// gives each rank its vector back at operation completion, at the root holding the
/// result, elsewhere its own elements. Every rank passes a vector of the same length
/// (¶25). With one rank the vector comes back as it was (¶27).
///
/// # Panics
/// As [`reduce_one_with`], if the element type has no bytes, or if the ranks' vectors
/// differ in length (the job fails, naming the mismatch).
#[track_caller]
pub fn reduce_one_vec<T: Pod, O: ReduceOp<T>>(
    values: Vec<T>,
    op: O,
    root: Rank,
    team: &Team,
) -> Future<Vec<T>> {
    reduce_one_vec_with(values, op, root, team, operation_cx::as_future())
}

/// [`reduce_one_vec`] with completions: `operation_cx` requests, notified with the
/// vector.
///
/// # Panics
/// As [`reduce_one_vec`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn reduce_one_vec_with<T: Pod, O: ReduceOp<T>, C: Completions<ReduceValue<Vec<T>>>>(
    values: Vec<T>,
    op: O,
    root: Rank,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<Vec<T>>> {
    operation_requested::<ReduceValue<Vec<T>>, C>();
    reduce_vec("reduce_one_vec", Some(root), values, op, team, cxs)
}

/// Reduces the elements of every rank's `values` element-wise with `op` into every
/// rank's `values` (UPC++ `reduce_all(src, dst, count, op, team)`, §12.2 ¶23, with one
/// buffer lent to the collective as source and destination, ¶25): the future gives each
/// rank its vector back, holding the result, at operation completion. Every rank passes
/// a vector of the same length.
///
/// ```
/// use upcxx::{op_fast_add, world};
///
/// upcxx::init();
/// let n = upcxx::rank_n() as u64;
/// let counts = vec![1u64, upcxx::rank_me() as u64];
/// let totals = upcxx::reduce_all_vec(counts, op_fast_add, world()).wait();
/// assert_eq!(totals, [n, n * (n - 1) / 2]);
/// upcxx::finalize();
/// ```
///
/// # Panics
/// As [`reduce_all_with`], if the element type has no bytes, or if the ranks' vectors
/// differ in length (the job fails, naming the mismatch).
#[track_caller]
pub fn reduce_all_vec<T: Pod, O: ReduceOp<T>>(
    values: Vec<T>,
    op: O,
    team: &Team,
) -> Future<Vec<T>> {
    reduce_all_vec_with(values, op, team, operation_cx::as_future())
}

/// [`reduce_all_vec`] with completions: `operation_cx` requests, notified with the
/// vector.
///
/// # Panics
/// As [`reduce_all_vec`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn reduce_all_vec_with<T: Pod, O: ReduceOp<T>, C: Completions<ReduceValue<Vec<T>>>>(
    values: Vec<T>,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<Vec<T>>> {
    operation_requested::<ReduceValue<Vec<T>>, C>();
    reduce_vec("reduce_all_vec", None, values, op, team, cxs)
}

/// Compile-time check that `C` requests operation completion (§7.2.1 ¶2): collectives
/// provide no other event.
#[inline(always)]
fn operation_requested<Ev: CompletionEvents, C: Completions<Ev>>() {
    const {
        assert!(
            completion::requests_op_or_remote::<Ev, C>(),
            "a collective needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
}

#[track_caller]
fn reduce_value<T: NoUninit + CheckedBitPattern, O: ReduceOp<T>, C: Completions<ReduceValue<T>>>(
    call: &'static str,
    root: Option<Rank>,
    value: T,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<T>> {
    let (dst_ptr, dst) = crate::rma::lend_box(Box::new(value));
    // SAFETY: `value` is read during the call; the box is lent to the pending
    // collective (given back by `dst` once the event completed).
    unsafe {
        reduce_at(call, root, &value, dst_ptr, 1, op, team, cxs, move || {
            (dst(),)
        })
    }
}

#[track_caller]
fn reduce_vec<T: Pod, O: ReduceOp<T>, C: Completions<ReduceValue<Vec<T>>>>(
    call: &'static str,
    root: Option<Rank>,
    values: Vec<T>,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceValue<Vec<T>>> {
    // The checks `reduce_at` makes, before the vector is lent: a lent vector is not
    // freed if the call panics.
    team.gex(call);
    check_initiation(call, &cxs);
    if let Some(root) = root {
        check_root(call, root, team);
    }
    let count = values.len();
    let (ptr, give_back) = crate::rma::lend(values);
    // SAFETY: the vector's buffer holds `count` elements, source and destination at
    // once (¶25), and is the collective's until the event completes: only
    // `give_back`, called then, makes the vector again.
    unsafe {
        reduce_at(call, root, ptr, ptr, count, op, team, cxs, move || {
            (give_back(),)
        })
    }
}

#[allow(clippy::too_many_arguments)]
#[track_caller]
unsafe fn reduce_buffer<T: Pod, O: ReduceOp<T>, C: Completions<ReduceBuffer>>(
    call: &'static str,
    root: Option<Rank>,
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    team: &Team,
    cxs: C,
) -> Returned<C, ReduceBuffer> {
    // SAFETY: the caller's contract, passed on.
    unsafe { reduce_at(call, root, src, dst, count, op, team, cxs, || ()) }
}

/// Starts the reduction `call` of `count` elements and arranges `cxs`'s notifications,
/// with `values` at operation completion.
///
/// # Safety
/// `src` readable for `count` elements during the call; `dst` writable for as many,
/// untouched by others, until the event completes (at the root, for `reduce_one`).
#[allow(clippy::too_many_arguments)]
#[track_caller]
unsafe fn reduce_at<T, O, Ev, C, V>(
    call: &'static str,
    root: Option<Rank>,
    src: *const T,
    dst: *mut T,
    count: usize,
    op: O,
    team: &Team,
    cxs: C,
    values: V,
) -> Returned<C, Ev>
where
    T: NoUninit + CheckedBitPattern,
    O: ReduceOp<T>,
    Ev: CompletionEvents,
    C: Completions<Ev>,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    let gex = team.gex(call);
    check_initiation(call, &cxs);
    if let Some(root) = root {
        check_root(call, root, team);
    }
    let size = std::mem::size_of::<T>();
    if size == 0 {
        panic!("upcxx::{call}: the element type has no bytes to reduce");
    }
    bytes_of_count::<T>(call, count);
    let id = team.id().to_u64();
    let lowered = op.lowered(ops::sealed::Token(())).0;
    // Lent, as the buffers are: the user trampoline reads it through `user`'s address.
    let (op_ptr, op) = crate::rma::lend_box(Box::new(op));
    let (dt, gex_op, user) = match lowered {
        Lowered::Builtin(dt, gex_op) => (dt, gex_op, None),
        Lowered::User(gex_op, f) => (gex::ops::Dt::User, gex_op, Some((f, op_ptr as usize))),
    };
    let upc_op = gex_op as i32;
    let (src, dst) = (src.cast::<u8>(), dst.cast::<u8>());
    let flags = gex::Flags::NONE;
    let values = move || {
        drop(op());
        values()
    };
    match root {
        Some(r) => {
            let span = gasp::span!(GASP_UPCXX_REDUCE_ONE, id, r as i32, count, size, upc_op);
            // SAFETY: the caller's contract; the boxed operation whose address `user`
            // carries lives in `values` until the event completed.
            let event =
                unsafe { gex.reduce_to_one_nb(r, dst, src, dt, size, count, gex_op, user, flags) };
            let futures = finish::<Ev, C, _>(cxs, event, values);
            gasp::end!(span, id, r as i32, count, size, upc_op);
            futures
        }
        None => {
            let span = gasp::span!(GASP_UPCXX_REDUCE_ALL, id, count, size, upc_op);
            // SAFETY: as above.
            let event =
                unsafe { gex.reduce_to_all_nb(dst, src, dt, size, count, gex_op, user, flags) };
            let futures = finish::<Ev, C, _>(cxs, event, values);
            gasp::end!(span, id, count, size, upc_op);
            futures
        }
    }
}

/// Notifies `cxs` of operation completion, with `values()`, when `event` completes:
/// at the next user-level progress if it already has.
fn finish<Ev, C, V>(cxs: C, mut event: gex::Event, values: V) -> Returned<C, Ev>
where
    Ev: CompletionEvents,
    C: Completions<Ev>,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    let me = crate::rank_me();
    if event.is_invalid() {
        return cxs.completed_at_initiation(me, values()).into_return();
    }
    let (futures, armed) = cxs.arm();
    completion::notify_when::<Ev, _, _, _>(move || test_quietly(&mut event), me, armed, values);
    futures.into_return()
}

/// Tests `event` without reporting its sync: the collective's own event stands for it.
#[inline]
fn test_quietly(event: &mut gex::Event) -> bool {
    gex::layered::test_unreported(event)
}

/// The checks of a collective's initiation, before it lends or starts anything: the
/// calling thread holds the master persona (§12.1 ¶6), and every completion request
/// can be armed (§7.2.1 ¶3: a ready promise fails the call with nothing started).
#[track_caller]
fn check_initiation<Ev: CompletionEvents, C: Completions<Ev>>(call: &str, cxs: &C) {
    check_collective_initiation(call);
    cxs.check_armable();
}

#[track_caller]
fn check_root(call: &str, root: Rank, team: &Team) {
    let n = team.rank_n();
    if root >= n {
        panic!(
            "upcxx::{call}: root {root} is not a rank of {} ({n} ranks; UPC++ spec §12.2 ¶25, ¶39)",
            team.id()
        );
    }
}

#[track_caller]
fn bytes_of_count<T>(call: &str, count: usize) -> usize {
    count
        .checked_mul(std::mem::size_of::<T>())
        .unwrap_or_else(|| panic!("upcxx::{call}: {count} elements overflow the address space"))
}
