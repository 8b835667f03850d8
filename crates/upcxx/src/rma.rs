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
//! * a get into memory the caller lends ([`rget_into`], [`rget_into_vec`],
//!   [`rget_into_raw`]) writes bytes the caller's `T`s hold, with no chance to check
//!   them first: [`bytemuck::Pod`].
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
//! * **Gets** into memory that outlives the call return at once from a segment this
//!   process does not map (another host), the transfer still in flight (§8.2.2 ¶1:
//!   non-blocking): into a buffer the operation makes ([`rget`], [`rget_vec`]), into a
//!   vector lent to the operation and given back ([`rget_into_vec`], which lets a
//!   program reuse its buffers), or, unsafely, through a pointer ([`rget_into_raw`],
//!   UPC++'s own form). The value is the future's, or the promise's, or the LPC's, once
//!   a later progress finds the transfer complete. Many such gets overlap one another.
//!   A get into the caller's borrowed buffer ([`rget_into`]) is
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

use bytemuck::NoUninit;

use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, HasRemote,
    HasSource, Returned,
};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::{rt, Rank, Setup};

mod get;
pub(crate) use get::valid;
pub use get::{
    rget, rget_into, rget_into_raw, rget_into_raw_with, rget_into_vec, rget_into_vec_with,
    rget_into_with, rget_vec, rget_vec_with, rget_with, RgetInto, RgetIntoRaw, RgetIntoVec,
    RgetValue, RgetVec,
};

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

#[cold]
#[track_caller]
fn outside(call: &str, rt: &Setup, rank: Rank, addr: usize, len: usize) -> ! {
    let (base, size) = rt.bounds[rank as usize];
    panic!(
        "upcxx::{call}: [{addr:#x}, {addr:#x}+{len}) is outside the segment of rank {rank} \
         ([{base:#x}, {base:#x}+{size}))"
    )
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
