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
//! * **Puts** from a value or a borrowed slice ([`rput`], [`rput_slice`]) start with
//!   local completion required before return (`gex::Lc::Now`), so source completion
//!   always happens inside the call, as if `as_buffered` were requested. Puts from
//!   memory lent beyond the call, a vector given back at operation completion
//!   ([`rput_vec`]) or, unsafely, a pointer ([`rput_raw`], UPC++'s own form, whose
//!   source completion is notified when the put's local completion is seen), ask for
//!   local completion as an event instead: to another host the conduit neither copies
//!   nor waits for the source, however large. When the conduit reports the put
//!   finished at return (always, on shared memory), remote and operation notifications
//!   are queued at once; otherwise they are armed and delivered from progress once the
//!   put's event completes. A remote RPC (`remote_cx::as_rpc`) is sent only after the
//!   put finished, so the function finds the data at the target.
//! * **Gets** into memory that outlives the call return at once from a segment this
//!   process does not map (another host), the transfer still in flight (§8.2.2 ¶1:
//!   non-blocking): into a buffer the operation makes ([`rget`], [`rget_vec`]), into a
//!   vector lent to the operation and given back ([`rget_into_vec`], which lets a
//!   program reuse its buffers), or, unsafely, through a pointer ([`rget_into_raw`],
//!   UPC++'s own form). The value is the future's, or the promise's, or the LPC's, once
//!   a later progress finds the transfer complete. Many such gets overlap one another.
//!   The future of a plain `rget(p)` of a value that fits a reply cell (as an RPC's
//!   result does, `future/cell.rs`) is fed by the get itself: it reads into the cell,
//!   and progress finding it complete checks the bits there as a `T`: no buffer, promise
//!   or state, only the record that progress tests (and `gex`'s handle).
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
//! `gex`, or, for a transfer that may outlive the call, here, naming the call, before
//! a buffer is allocated or a completion armed). Both report the caller's location. A
//! request that fails (a promise already ready) fails the call before anything moves
//! (as in [`crate::vis`]).
//!
//! RMA sits on completions, futures, global pointers and the runtime state.

use crate::completion::{CompletionEvents, Completions, FutureList, Returned};
use crate::global_ptr::{bad_rank, GlobalPtr};
use crate::runtime::state::{Rank, Setup};

mod get;
mod put;
pub(crate) use get::valid;
pub use get::{
    rget, rget_into, rget_into_raw, rget_into_raw_with, rget_into_vec, rget_into_vec_with,
    rget_into_with, rget_vec, rget_vec_with, rget_with, RgetInto, RgetIntoRaw, RgetIntoVec,
    RgetValue, RgetVec,
};
pub(crate) use put::finish_put;
pub use put::{
    rput, rput_raw, rput_raw_with, rput_slice, rput_slice_with, rput_vec, rput_vec_with, rput_with,
    RputRaw, RputSlice, RputValue, RputVec,
};

/// Makes the transfer (`transfer`: a copy made here, complete when it returns, giving
/// the operation's values) and notifies `cxs` of an operation completed at initiation
/// (allocation-free for futures). The requests are checked first, so that one that
/// fails (a promise already ready) moves nothing.
#[inline]
#[track_caller]
fn done_here<Ev, C>(cxs: C, rank: Rank, transfer: impl FnOnce() -> Ev::OpValues) -> Returned<C, Ev>
where
    Ev: CompletionEvents,
    C: Completions<Ev>,
{
    cxs.check_armable();
    let values = transfer();
    cxs.completed_at_initiation(rank, values).into_return()
}

/// Lends `v`'s buffer to an operation that may outlive the call (`rput_vec`,
/// `rget_into_vec`, the vector collectives): its parts, not the vector, are held while
/// the operation reads or writes through the pointer, and the closure, called once at
/// operation completion, makes the vector again. If it is never called, the buffer leaks
/// rather than being freed under the operation.
pub(crate) fn lend<T: 'static>(v: Vec<T>) -> (*mut T, impl FnOnce() -> Vec<T> + 'static) {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, length, capacity) = (v.as_mut_ptr(), v.len(), v.capacity());
    let give_back = move || {
        // SAFETY: the parts of a vector that was not dropped, made into one vector once
        // (the closure is `FnOnce`), when the operation no longer touches it.
        unsafe { Vec::from_raw_parts(ptr, length, capacity) }
    };
    (ptr, give_back)
}

/// Lends a boxed value to an operation that writes or reads it through the pointer
/// after the call (a value collective's buffer, a reduction's operation), as [`lend`]
/// lends a vector: the pointer, not the box, is held meanwhile (moving a box asserts
/// that nothing else reaches its value), and the closure, called once at operation
/// completion, gives the value back. If it is never called, the value leaks rather
/// than being freed under the operation.
pub(crate) fn lend_box<T: 'static>(b: Box<T>) -> (*mut T, impl FnOnce() -> T + 'static) {
    let ptr = Box::into_raw(b);
    let give_back = move || {
        // SAFETY: the pointer of a box given up above, made into a box once (the closure
        // is `FnOnce`), when the operation no longer touches it.
        *unsafe { Box::from_raw(ptr) }
    };
    (ptr, give_back)
}

/// Panics naming `call` unless `[addr, addr + len)` is inside the segment of `rank`, a
/// rank of the job.
#[inline]
#[track_caller]
fn check_range(call: &str, rt: &Setup, rank: Rank, addr: usize, len: usize) {
    match rt.in_segment(rank, addr, len) {
        Some(true) => {}
        Some(false) => outside(call, rt, rank, addr, len),
        None => bad_rank(call, rank, rt.size),
    }
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
