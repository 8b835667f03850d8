//! One-sided communication: `rput` and `rget` (UPC++ spec ch. 8).
//!
//! ```
//! use upcxx::{operation_cx, source_cx, GlobalPtr};
//!
//! fn exchange(mine: GlobalPtr<f64>, theirs: GlobalPtr<f64>, halo: &[f64]) -> f64 {
//!     // Default completion (§7.2.3): a future of operation completion.
//!     upcxx::rput(1.5, theirs).wait();
//!     // Explicit completions: one future per `as_future`, in `|` order.
//!     let (sent, done) = upcxx::rput_slice_with(
//!         halo,
//!         theirs,
//!         source_cx::as_future() | operation_cx::as_future(),
//!     );
//!     sent.wait(); // `halo` may be modified from here on
//!     done.wait(); // the values are at the target
//!     upcxx::rget(mine).wait()
//! }
//! # upcxx::init();
//! # let (mine, theirs) = (upcxx::new_(0.5), upcxx::new_array::<f64>(2));
//! # assert_eq!(exchange(mine, theirs, &[1.0, 2.0]), 0.5);
//! # assert_eq!(upcxx::rget(theirs.add(1)).wait(), 2.0);
//! # upcxx::delete_(mine);
//! # upcxx::delete_array(theirs);
//! # upcxx::finalize();
//! ```
//!
//! Every call takes a completion object (the `_with` forms) or uses the default,
//! `operation_cx::as_future()` (§7.2.3), and returns what §7.2.2 says: `()`, one
//! future, or a tuple of futures. See [`crate::completion`].
//!
//! # Element types
//!
//! The spec asks for *DefinitelyTriviallySerializable* types (§8.1): types whose bytes
//! are their value. Here each direction asks what it needs of them, in `bytemuck`'s
//! terms:
//!
//! * a put reads the bytes of its values: [`bytemuck::NoUninit`] (no padding: integers,
//!   floats, `bool`, `char`, `#[repr(C)]` structs of such fields without padding,
//!   field-less `#[repr(u8)]`-style enums, all derivable);
//! * a get into a value or vector the operation makes ([`rget`], [`rget_vec`]) checks
//!   the bytes it read before they become values: [`bytemuck::CheckedBitPattern`]
//!   (every [`bytemuck::AnyBitPattern`] type, such as integers, floats and
//!   `#[derive(AnyBitPattern)]` structs, padded or not, with no check at all; `bool`,
//!   `char` and derived enums, checked). Bytes that are no valid `T` (only unsafe code,
//!   or a pointer of another type to the same memory, can have put them there) fail
//!   the get, naming the call and the type;
//! * a get into memory the caller lends ([`rget_into`]) writes bytes under the
//!   caller's borrow, with no chance to check them first: [`bytemuck::Pod`].
//!
//! [`bytemuck::Pod`] types (and `GlobalPtr`) meet all three. A `bool` travels both
//! ways; a padded struct can be got but not put, as its padding bytes are no values:
//!
//! ```
//! # use upcxx::GlobalPtr;
//! #[derive(Clone, Copy, bytemuck::AnyBitPattern)]
//! #[repr(C)]
//! struct Padded { tag: u8, value: u64 }
//!
//! fn flags_and_records(flag: GlobalPtr<bool>, record: GlobalPtr<Padded>) {
//!     upcxx::rput(true, flag).wait();
//!     assert!(upcxx::rget(flag).wait());
//!     let _got: Padded = upcxx::rget(record).wait();
//! }
//! ```
//!
//! ```compile_fail,E0277
//! # use upcxx::GlobalPtr;
//! # #[derive(Clone, Copy, bytemuck::AnyBitPattern)]
//! # #[repr(C)]
//! # struct Padded { tag: u8, value: u64 }
//! fn put_padding(record: GlobalPtr<Padded>, value: Padded) {
//!     upcxx::rput(value, record).wait(); // Padded is not NoUninit
//! }
//! ```
//!
//! # How transfers and notifications happen
//!
//! A transfer to or from a segment this process maps (every rank of the local team, on
//! shared memory; DESIGN decision 2) is a copy made right here after a bounds check
//! against the owner's segment, as UPC++ does for its local team. Anything else goes
//! through the `gex` put and get calls, so the code is right for any conduit: ranks on
//! other hosts, a range outside the segment (which `gex` reports), and every transfer
//! while a GASP tool is attached (the reporting lives on that path; the table of the
//! segments copied to directly is empty then, so the copies test no flag).
//! Notifications are nevertheless delivered only during user-level progress of the
//! calling thread (§7.1 ¶14): the future of `upcxx::rput(v, p)` is not ready when the
//! call returns, even though the value is already at the target; it is at the next
//! `progress()` or inside `wait()`. That future costs no allocation.
//!
//! * **Puts** start with local completion required before return (`gex::Lc::Now`), so
//!   source completion always happens inside the call, as if `as_buffered` were
//!   requested. When the conduit reports the put finished at return (always, on shared
//!   memory), remote and operation notifications are queued at once; otherwise they are
//!   armed and delivered from progress once the put's event completes. A remote RPC
//!   (`remote_cx::as_rpc`) is sent only after the put finished, so the function finds
//!   the data at the target.
//! * **Gets** into a buffer the operation owns ([`rget`], [`rget_vec`]) return at once
//!   from a segment this process does not map (another host), the transfer still in
//!   flight (§8.2.2 ¶1: non-blocking); the value is the future's, or the promise's, or
//!   the LPC's, once a later progress finds the transfer complete. Many such gets
//!   overlap one another. A get into the caller's borrowed buffer ([`rget_into`]) is
//!   complete before the call returns: on a conduit whose gets finish later, the call
//!   waits for it with internal progress (allowed: these calls make internal progress,
//!   §8.2). This is what makes [`rget_into`] safe with an `&mut [T]`: no transfer into
//!   the buffer outlives the borrow.
//!
//! # Errors
//!
//! A null global pointer fails with a panic naming the call. An address range outside
//! the target's segment fails with a message naming the range and the segment (in
//! `gex`, or for a get into a buffer of the operation's, before the buffer is
//! allocated). Both report the caller's location.
//!
//! RMA sits on completions, futures, global pointers and the runtime state.

use std::marker::PhantomData;

use bytemuck::{AnyBitPattern, CheckedBitPattern, NoUninit, Pod, Zeroable};

use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, HasRemote,
    HasSource, Returned,
};
use crate::future::Future;
use crate::global_ptr::{bad_rank, GlobalPtr};
use crate::runtime::state::{rt, Rank, Setup};

/// The completion events of [`rput_with`] (§8.2.1 ¶4–¶5): remote and operation, no
/// values. There is no source completion: the value is copied before the call returns.
#[derive(Debug)]
pub enum RputValue {}

impl CompletionEvents for RputValue {
    const NAME: &'static str = "rput";
    type OpValues = ();
}
impl HasRemote for RputValue {}
impl HasOperation for RputValue {}

/// The completion events of [`rput_slice_with`] (§8.2.1 ¶11–¶13): source, remote and
/// operation, no values.
#[derive(Debug)]
pub enum RputSlice {}

impl CompletionEvents for RputSlice {
    const NAME: &'static str = "rput_slice";
    type OpValues = ();
}
impl HasSource for RputSlice {}
impl HasRemote for RputSlice {}
impl HasOperation for RputSlice {}

/// The completion events of [`rget_with`] (§8.2.2 ¶4): operation, producing the `T`.
#[derive(Debug)]
pub struct RgetValue<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for RgetValue<T> {
    const NAME: &'static str = "rget";
    type OpValues = (T,);
}
impl<T: 'static> HasOperation for RgetValue<T> {}

/// The completion events of [`rget_vec_with`] (§8.2.2 ¶10): operation, producing the
/// vector.
#[derive(Debug)]
pub struct RgetVec<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for RgetVec<T> {
    const NAME: &'static str = "rget_vec";
    type OpValues = (Vec<T>,);
}
impl<T: 'static> HasOperation for RgetVec<T> {}

/// The completion events of [`rget_into_with`] (§8.2.2 ¶10): operation, no values.
#[derive(Debug)]
pub enum RgetInto {}

impl CompletionEvents for RgetInto {
    const NAME: &'static str = "rget_into";
    type OpValues = ();
}
impl HasOperation for RgetInto {}

/// Writes `value` to `dest` (UPC++ `rput(T value, global_ptr<T> dest)`, §8.2.1), with
/// the default completion: the future of operation completion.
///
/// # Panics
/// If `dest` is null or outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rput<T: NoUninit>(value: T, dest: GlobalPtr<T>) -> Future<()> {
    rput_with(value, dest, operation_cx::as_future())
}

/// Writes `value` to `dest`, notifying as `cxs` requests (UPC++ `rput(value, dest,
/// cxs)`, §8.2.1). Accepts `remote_cx` and `operation_cx` requests, at least one of
/// them (§7.2.1 ¶2):
///
/// ```
/// # use upcxx::{operation_cx, remote_cx, GlobalPtr};
/// # fn f(gp: GlobalPtr<u64>) {
/// fn arrived() { println!("rank {} got its value", upcxx::rank_me()); }
/// let done = upcxx::rput_with(7u64, gp, remote_cx::as_rpc(arrived, ()) | operation_cx::as_future());
/// done.wait();
/// # }
/// # upcxx::init();
/// # let gp = upcxx::new_array::<u64>(3);
/// # f(gp);
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// Source completion is not provided (the value is copied at once), so `source_cx`
/// requests do not compile:
///
/// ```compile_fail,E0277
/// # use upcxx::{operation_cx, source_cx, GlobalPtr};
/// # fn f(gp: GlobalPtr<u64>) {
/// let (a, b) = upcxx::rput_with(7u64, gp, source_cx::as_future() | operation_cx::as_future());
/// # }
/// ```
///
/// # Panics
/// If `dest` is null or outside its owner's segment, before `init`, or if an
/// `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rput_with<T: NoUninit, C: Completions<RputValue>>(
    value: T,
    dest: GlobalPtr<T>,
    cxs: C,
) -> Returned<C, RputValue> {
    const {
        assert!(
            completion::requests_op_or_remote::<RputValue, C>(),
            "rput needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rput", dest);
    let event = put("rput", rank, addr, bytemuck::bytes_of(&value));
    finish_put(cxs, rank, event)
}

/// Writes the values of `src` to `src.len()` consecutive elements starting at `dest`
/// (UPC++ `rput(T const* src, global_ptr<T> dest, size_t count)`, §8.2.1), with the
/// default completion: the future of operation completion.
///
/// # Panics
/// If `dest` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rput_slice<T: NoUninit>(src: &[T], dest: GlobalPtr<T>) -> Future<()> {
    rput_slice_with(src, dest, operation_cx::as_future())
}

/// [`rput_slice`] with completions (UPC++ `rput(src, dest, count, cxs)`, §8.2.1).
/// Accepts `source_cx`, `remote_cx` and `operation_cx` requests, with operation or
/// remote completion among them (§7.2.1 ¶2). The source slice is borrowed only for
/// the call: source completion always happens before it returns.
///
/// ```
/// # use upcxx::{operation_cx, source_cx, GlobalPtr};
/// # fn f(gp: GlobalPtr<u64>) {
/// let (src_done, op_done) = upcxx::rput_slice_with(
///     &[1u64, 2, 3], gp, source_cx::as_future() | operation_cx::as_future());
/// # let _ = (src_done, op_done);
/// # }
/// # upcxx::init();
/// # let gp = upcxx::new_array::<u64>(3);
/// # f(gp);
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// Requesting source completion alone leaves the operation's completion unobservable,
/// which §7.2.1 ¶2 forbids; it does not compile:
///
/// ```compile_fail,E0080
/// # use upcxx::{source_cx, GlobalPtr};
/// # fn f(gp: GlobalPtr<u64>) {
/// let src_done = upcxx::rput_slice_with(&[1u64, 2, 3], gp, source_cx::as_future());
/// # }
/// # f(GlobalPtr::null());
/// ```
///
/// # Panics
/// As [`rput_slice`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rput_slice_with<T: NoUninit, C: Completions<RputSlice>>(
    src: &[T],
    dest: GlobalPtr<T>,
    cxs: C,
) -> Returned<C, RputSlice> {
    const {
        assert!(
            completion::requests_op_or_remote::<RputSlice, C>(),
            "rput_slice needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rput_slice", dest);
    let event = put("rput_slice", rank, addr, bytemuck::cast_slice(src));
    finish_put(cxs, rank, event)
}

/// Reads the value at `src` (UPC++ `rget(global_ptr<T> src)`, §8.2.2), with the default
/// completion: a future of the value.
///
/// # Panics
/// If `src` is null or outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rget<T: CheckedBitPattern + 'static>(src: GlobalPtr<T>) -> Future<T> {
    rget_with(src, operation_cx::as_future())
}

/// Reads the value at `src`, delivering it as `cxs` requests (UPC++ `rget(src, cxs)`,
/// §8.2.2): `operation_cx` requests only, at least one. A promise must be a
/// `Promise<T>` and an LPC callback must take the `T`:
///
/// ```
/// # use upcxx::{operation_cx, GlobalPtr, Promise};
/// # fn f(gp: GlobalPtr<u64>) {
/// let p = Promise::<u64>::new();
/// let v = upcxx::rget_with(gp, operation_cx::as_promise(&p) | operation_cx::as_future());
/// assert_eq!(v.wait(), p.finalize().wait());
/// # }
/// # upcxx::init();
/// # let gp = upcxx::new_array::<u64>(3);
/// # f(gp);
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// ```compile_fail,E0277
/// # use upcxx::{operation_cx, GlobalPtr, Promise};
/// # fn f(gp: GlobalPtr<u64>) {
/// let p = Promise::<u32>::new(); // wrong value type
/// upcxx::rget_with(gp, operation_cx::as_promise(&p));
/// # }
/// ```
///
/// # Panics
/// As [`rget`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rget_with<T: CheckedBitPattern + 'static, C: Completions<RgetValue<T>>>(
    src: GlobalPtr<T>,
    cxs: C,
) -> Returned<C, RgetValue<T>> {
    const {
        assert!(
            completion::requests_op_or_remote::<RgetValue<T>, C>(),
            "rget needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rget", src);
    let rt = rt("rget");
    let Some(from) = rt.direct_range(rank, addr, size_of::<T>()) else {
        return get_owned(rt, "rget", rank, addr, 1, cxs, |b: Box<[T::Bits]>| {
            (valid::<T>("rget", b[0]),)
        });
    };
    let mut bits = T::Bits::zeroed();
    // SAFETY: the source range is inside the mapping of `rank`'s segment
    // (`Setup::direct_range`); `bits` is a local of `size_of::<T>()` bytes, any of
    // which make a `T::Bits`.
    unsafe {
        std::ptr::copy(
            from as *const u8,
            (&raw mut bits).cast::<u8>(),
            size_of::<T>(),
        )
    };
    cxs.completed_at_initiation(rank, (valid::<T>("rget", bits),))
        .into_return()
}

/// Reads `count` consecutive elements starting at `src` into a new vector, with the
/// default completion: a future of the vector. The form of UPC++ `rget(src, dest,
/// count)` (§8.2.2) whose destination the operation owns until it completes, so that
/// it may complete after the call returns, as every `rget` may (§8.2.2 ¶1):
/// [`rget_into`] borrows its destination and is complete on return, while gets of
/// `rget_vec` from other hosts overlap one another and the caller's work.
///
/// # Panics
/// If `src` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rget_vec<T: CheckedBitPattern + 'static>(src: GlobalPtr<T>, count: usize) -> Future<Vec<T>> {
    rget_vec_with(src, count, operation_cx::as_future())
}

/// [`rget_vec`] with completions: `operation_cx` requests only, at least one; a
/// promise must be a `Promise<Vec<T>>` and an LPC callback must take the `Vec<T>`.
///
/// # Panics
/// As [`rget_vec`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rget_vec_with<T: CheckedBitPattern + 'static, C: Completions<RgetVec<T>>>(
    src: GlobalPtr<T>,
    count: usize,
    cxs: C,
) -> Returned<C, RgetVec<T>> {
    const {
        assert!(
            completion::requests_op_or_remote::<RgetVec<T>, C>(),
            "rget_vec needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rget_vec", src);
    let rt = rt("rget_vec");
    let Some(len) = count.checked_mul(size_of::<T>()) else {
        too_long("rget_vec", count)
    };
    let Some(from) = rt.direct_range(rank, addr, len) else {
        return get_owned(
            rt,
            "rget_vec",
            rank,
            addr,
            count,
            cxs,
            |b: Box<[T::Bits]>| (valid_vec::<T>("rget_vec", b),),
        );
    };
    let mut bits = vec![T::Bits::zeroed(); count].into_boxed_slice();
    // SAFETY: the source range is inside the mapping of `rank`'s segment
    // (`Setup::direct_range`); `bits` holds `len` bytes, any of which make `T::Bits`.
    unsafe { std::ptr::copy(from as *const u8, bits.as_mut_ptr().cast::<u8>(), len) };
    cxs.completed_at_initiation(rank, (valid_vec::<T>("rget_vec", bits),))
        .into_return()
}

/// Reads `dest.len()` consecutive elements starting at `src` into `dest` (UPC++
/// `rget(global_ptr<T> src, T* dest, size_t count)`, §8.2.2), with the default
/// completion: the future of operation completion.
///
/// The data are in `dest` when the call returns (see the [module documentation](self)),
/// which is what lets it borrow `dest` safely; the future still becomes ready only at
/// the next user-level progress.
///
/// # Panics
/// If `src` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rget_into<T: Pod>(src: GlobalPtr<T>, dest: &mut [T]) -> Future<()> {
    rget_into_with(src, dest, operation_cx::as_future())
}

/// [`rget_into`] with completions (UPC++ `rget(src, dest, count, cxs)`, §8.2.2):
/// `operation_cx` requests only, at least one.
///
/// # Panics
/// As [`rget_into`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rget_into_with<T: Pod, C: Completions<RgetInto>>(
    src: GlobalPtr<T>,
    dest: &mut [T],
    cxs: C,
) -> Returned<C, RgetInto> {
    const {
        assert!(
            completion::requests_op_or_remote::<RgetInto, C>(),
            "rget_into needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rget_into", src);
    get("rget_into", bytemuck::cast_slice_mut(dest), rank, addr);
    cxs.completed_at_initiation(rank, ()).into_return()
}

#[cold]
#[track_caller]
fn outside(call: &str, rt: &Setup, rank: Rank, addr: usize, len: usize) -> ! {
    let (base, size) = rt.bounds[rank as usize];
    panic!(
        "upcxx::{call}: [{addr:#x}, {addr:#x}+{len}) is outside the segment of rank {rank} \
         ([{base:#x}, {base:#x}+{size}))"
    )
}

/// `bits`, read by `call`, as the `T` they make, or a panic naming `call` and the type
/// if they make none. Free for an [`AnyBitPattern`] type (`T::Bits` is `T`, every
/// pattern valid).
#[inline]
#[track_caller]
pub(crate) fn valid<T: CheckedBitPattern + 'static>(call: &str, bits: T::Bits) -> T {
    if !T::is_valid_bit_pattern(&bits) {
        invalid_bits::<T>(call);
    }
    // SAFETY: `T` has the layout of `T::Bits`, and these bits make a valid `T`
    // (`CheckedBitPattern`'s contract).
    unsafe { std::mem::transmute_copy(&bits) }
}

/// [`valid`] of every element of `bits`, as a vector of `T`s.
#[inline]
#[track_caller]
fn valid_vec<T: CheckedBitPattern + 'static>(call: &str, bits: Box<[T::Bits]>) -> Vec<T> {
    if !bits.iter().all(T::is_valid_bit_pattern) {
        invalid_bits::<T>(call);
    }
    // SAFETY: as in `valid`, for each element; the layouts being the same, so are the
    // allocations' (size and alignment).
    unsafe { Box::from_raw(Box::into_raw(bits) as *mut [T]) }.into_vec()
}

#[cold]
#[track_caller]
fn invalid_bits<T>(call: &str) -> ! {
    panic!(
        "upcxx::{call}: the bytes read are not a valid `{}` (only unsafe code, or a pointer \
         of another type to the same memory, can have written them)",
        std::any::type_name::<T>()
    )
}

#[cold]
#[track_caller]
fn too_long(call: &str, count: usize) -> ! {
    panic!("upcxx::{call}: {count} elements do not fit in the address space")
}

/// The owner and owner-space address of `gp`, or a panic naming `call` if it is null.
#[inline]
#[track_caller]
pub(crate) fn target<T>(call: &str, gp: GlobalPtr<T>) -> (Rank, usize) {
    if gp.is_null() {
        null_pointer(call);
    }
    (gp.where_(), gp.owner_addr())
}

#[cold]
#[track_caller]
fn null_pointer(call: &str) -> ! {
    panic!("upcxx::{call}: the global pointer is null")
}

/// Starts a put that is locally complete on return; its event says whether the
/// operation is complete too.
///
/// Into a segment this process maps, with no tool attached, the put is a copy made
/// here, as the communication layer would make it; everything else (other hosts, a
/// range outside the segment, which `gex` reports, and GASP events) takes
/// [`put_through_gex`].
#[inline]
#[track_caller]
fn put(call: &str, rank: Rank, addr: usize, bytes: &[u8]) -> gex::Event {
    let rt = rt(call);
    match rt.direct_range(rank, addr, bytes.len()) {
        Some(dest) => {
            // SAFETY: `[dest, dest + len)` is inside the mapping of `rank`'s segment
            // (`Setup::direct_range`), which stays mapped for the life of the job;
            // `bytes` is a live borrow. Concurrent access by other ranks is the
            // program's to order, as for any put.
            unsafe { std::ptr::copy(bytes.as_ptr(), dest as *mut u8, bytes.len()) };
            gex::Event::invalid()
        }
        _ => put_through_gex(rt, rank, addr, bytes),
    }
}

#[inline(never)]
#[track_caller]
fn put_through_gex(rt: &Setup, rank: Rank, addr: usize, bytes: &[u8]) -> gex::Event {
    // The argument lists are built only when a tool is attached (inside the macros).
    let span = gasp::span!(
        GASP_UPC_NB_PUT_INIT,
        1,
        gasp::GPtr::new(rank, addr),
        bytes.as_ptr() as usize,
        bytes.len()
    );
    // SAFETY: with `Lc::Now` the put has finished reading `bytes` when it returns, so
    // the borrow covers every access to the source.
    let started = unsafe {
        rt.team
            .put_nb(rank, addr, bytes, gex::Lc::Now, gex::Flags::NONE)
    };
    match started {
        Ok(event) => {
            gasp::end!(
                span,
                1,
                gasp::GPtr::new(rank, addr),
                bytes.as_ptr() as usize,
                bytes.len(),
                crate::reported::nb_handle(&event)
            );
            event
        }
        Err(gex::NoOp) => unreachable!("gex returns NoOp only for Flags::IMMEDIATE"),
    }
}

/// Fills `dest` from `[addr, addr + dest.len())` at `rank`; complete on return. As for
/// [`put`], a copy made here from a segment this process maps when no tool is attached.
#[inline]
#[track_caller]
fn get(call: &str, dest: &mut [u8], rank: Rank, addr: usize) {
    let rt = rt(call);
    match rt.direct_range(rank, addr, dest.len()) {
        // SAFETY: the source range is inside the mapping of `rank`'s segment
        // (`Setup::direct_range`); `dest` is a live exclusive borrow.
        Some(src) => unsafe { std::ptr::copy(src as *const u8, dest.as_mut_ptr(), dest.len()) },
        _ => get_through_gex(rt, dest, rank, addr),
    }
}

/// Kept out of line (the transfer is large once inlined), so that the generic calls
/// around it inline into their callers and build the returned futures in registers.
#[inline(never)]
#[track_caller]
fn get_through_gex(rt: &Setup, dest: &mut [u8], rank: Rank, addr: usize) {
    let span = gasp::span!(
        GASP_UPC_NB_GET_INIT,
        1,
        dest.as_ptr() as usize,
        gasp::GPtr::new(rank, addr),
        dest.len()
    );
    match rt.team.get_blocking(dest, rank, addr, gex::Flags::NONE) {
        Ok(()) => {}
        Err(gex::NoOp) => unreachable!("gex returns NoOp only for Flags::IMMEDIATE"),
    }
    gasp::end!(
        span,
        1,
        dest.as_ptr() as usize,
        gasp::GPtr::new(rank, addr),
        dest.len(),
        crate::reported::nb_handle(&gex::Event::invalid())
    );
}

/// A get of `count` elements from `[addr, ..)` at `rank` through `gex`, into a buffer
/// the operation owns: it may complete after the call returns (from a segment on
/// another host), and `cxs` are notified from progress once it has, with `finish` of
/// the buffer (§8.2.2: gets are non-blocking). Out of line, as [`get_through_gex`].
///
/// The buffer is allocated here and freed by `finish`'s caller once the get's event
/// says it is complete; if the job ends with the get still in flight, it is leaked
/// rather than freed under a transfer that may still write into it.
#[inline(never)]
#[track_caller]
fn get_owned<T, Ev, C>(
    rt: &Setup,
    call: &str,
    rank: Rank,
    addr: usize,
    count: usize,
    cxs: C,
    finish: fn(Box<[T]>) -> Ev::OpValues,
) -> Returned<C, Ev>
where
    T: AnyBitPattern,
    Ev: CompletionEvents,
    C: Completions<Ev>,
{
    let len = count * size_of::<T>();
    // Checked before the buffer is allocated, so that a count far too large fails here
    // (naming the range) rather than in the allocator.
    match rt.in_segment(rank, addr, len) {
        Some(true) => {}
        Some(false) => outside(call, rt, rank, addr, len),
        None => bad_rank(call, rank, rt.size),
    }
    // Before anything starts: a request that fails (a promise already ready) leaves
    // nothing behind.
    let (futures, armed) = cxs.arm();
    // A raw pointer, not a `Box` held across the transfer: the transfer writes through
    // it while the closures below own it.
    let buf: *mut [T] = Box::into_raw(vec![T::zeroed(); count].into_boxed_slice());
    let dest = buf.cast::<u8>();
    let span = gasp::span!(
        GASP_UPC_NB_GET_INIT,
        1,
        dest as usize,
        gasp::GPtr::new(rank, addr),
        len
    );
    // SAFETY: `dest` is valid for `len` bytes of writes, and nothing reads or frees it
    // before the event says the get is complete (below).
    let started = unsafe { rt.team.get_nb(dest, rank, addr, len, gex::Flags::NONE) };
    let mut event = match started {
        Ok(event) => event,
        Err(gex::NoOp) => unreachable!("gex returns NoOp only for Flags::IMMEDIATE"),
    };
    gasp::end!(
        span,
        1,
        dest as usize,
        gasp::GPtr::new(rank, addr),
        len,
        crate::reported::nb_handle(&event)
    );
    let take = move || {
        // SAFETY: called once, when the event's test found the get complete (at once
        // for an invalid event, one complete at initiation): `buf` came from
        // `Box::into_raw` and nothing writes it any more.
        finish(unsafe { Box::from_raw(buf) })
    };
    completion::notify_when_outgoing(move || event.test(), rank, armed, take);
    futures.into_return()
}

/// Notifies `cxs` of a put to `rank` whose source completed during initiation and
/// whose operation completion `event` stands for.
#[inline]
pub(crate) fn finish_put<Ev, C>(cxs: C, rank: Rank, mut event: gex::Event) -> Returned<C, Ev>
where
    Ev: CompletionEvents<OpValues = ()>,
    C: Completions<Ev>,
{
    if event.is_invalid() {
        return cxs.completed_at_initiation(rank, ()).into_return();
    }
    let (futures, mut armed) = cxs.arm();
    completion::Armed::source_done(&mut armed);
    completion::notify_when_outgoing(move || event.test(), rank, armed, || ());
    futures.into_return()
}
