//! Shared-segment allocation (UPC++ spec ch. 4).
//!
//! Each rank allocates from its own shared segment and only from its own: [`new_`],
//! [`new_array`] and [`allocate`] return [`GlobalPtr`]s with affinity to the calling
//! rank, which any rank may then use, and only the allocating rank may free them
//! ([`delete_`], [`delete_array`], [`deallocate`]). Out of memory is never undefined:
//! the `try_` forms (the spec's `std::nothrow` overloads) and [`allocate`] return
//! `None`, and [`new_`]/[`new_array`] panic with a message saying how full the segment
//! is, as C++ throws `std::bad_alloc`.
//!
//! ```
//! use upcxx::{delete_, delete_unchecked, new_, GlobalPtr};
//!
//! upcxx::init();
//! let gp: GlobalPtr<[f64; 4]> = new_([1.5; 4]);
//! // SAFETY: this rank owns the object and nobody else has seen the pointer.
//! assert_eq!(unsafe { (*gp.local())[3] }, 1.5);
//! delete_(gp); // frees the block
//!
//! let s: GlobalPtr<String> = new_(String::from("shared"));
//! // SAFETY: nobody else has seen the pointer, so the object is still the String that
//! // `new_` built.
//! unsafe { delete_unchecked(s) }; // drops the String, frees the block
//! upcxx::finalize();
//! ```
//!
//! The heap, its block headers and what a free checks are `alloc/heap.rs`; none of its
//! bookkeeping lives in the segment, so no write to the segment can corrupt it. Allocation
//! sits on global pointers and the runtime state.
//!
//! # Differences from C++
//!
//! * `new_<T>(args...)` takes the value: `new_(T::new(args))`. The `nothrow` overloads
//!   are [`try_new_`] and [`try_new_array`] (returning `Option`, the value dropped on
//!   failure).
//! * [`delete_`] and [`delete_array`] take only types without a destructor (drop glue):
//!   any rank may overwrite the segment with a safe `rput`, so a destructor could run on
//!   bytes that are no valid `T` (a `String` whose pointer a peer replaced). For types
//!   with one, [`delete_unchecked`] and [`delete_array_unchecked`] drop and free, and
//!   are `unsafe`: the program vouches that the object is intact.
//! * [`new_array`] needs `T: Default` (the spec's DefaultConstructible);
//!   [`new_array_with`] builds each element with a closure. If a constructor panics, the
//!   elements built so far are dropped in reverse order and the block is freed (§4.2
//!   ¶14).
//! * The spec's `void* allocate(size, alignment)` is [`allocate`], returning a
//!   `GlobalPtr<u8>`; `allocate<T, alignment>(n)` is [`allocate_typed_aligned`], and
//!   [`allocate_typed`] with the default alignment, `align_of::<T>()`. All are freed by
//!   [`deallocate`]. The precondition that `size` be a multiple of the alignment
//!   is not needed and not enforced.
//! * Every block is aligned to at least 16 bytes, as `malloc` is, and to at most the
//!   segment's size rounded up to a power of two, or 1 GiB.
//! * [`shared_segment_size`] and [`shared_segment_used`] come from later UPC++ releases
//!   (not draft 10).

mod heap;

use std::mem::{align_of, size_of};
use std::ptr::NonNull;

use crate::global_ptr::{GlobalPtr, KindId};
use crate::runtime::state::rt;
use heap::{exhausted, heap, Form, ReleaseOnDrop, SegmentHeap};

pub(crate) use heap::init_heap;

/// The global pointer to `user`, a local address in this rank's segment.
#[inline]
#[track_caller]
fn to_global<T>(call: &str, user: NonNull<u8>) -> GlobalPtr<T> {
    let rt = rt(call);
    let me = rt.peers[rt.rank as usize];
    let addr = user.as_ptr() as usize - me.local_base + me.owner_base;
    GlobalPtr::from_parts(rt.rank, addr, KindId::Host)
}

/// The local address of `gp`, which must be non-null and owned by this rank.
#[inline]
#[track_caller]
fn own_local<T>(call: &str, gp: GlobalPtr<T>) -> usize {
    let rt = rt(call);
    if gp.where_() != rt.rank {
        panic!(
            "upcxx::{call}: {gp} has affinity to rank {}; only the rank that allocated it \
             (not rank {}) may free it",
            gp.where_(),
            rt.rank
        );
    }
    let me = rt.peers[rt.rank as usize];
    gp.owner_addr()
        .wrapping_sub(me.owner_base)
        .wrapping_add(me.local_base)
}

/// UPC++ spec §4.2 ¶6 `new_(std::nothrow, args...)`: moves `value` into a new block of
/// this rank's shared segment; `None` (dropping `value`) if the segment is full.
#[track_caller]
pub fn try_new_<T>(value: T) -> Option<GlobalPtr<T>> {
    const CALL: &str = "new_";
    let heap = heap(CALL);
    let user = heap.alloc(Form::New, 1, size_of::<T>(), align_of::<T>())?;
    // SAFETY: a fresh block with room for one `T`, aligned for it.
    unsafe { user.cast::<T>().write(value) };
    Some(to_global(CALL, user))
}

/// UPC++ spec §4.2 ¶1 `new_(args...)`: moves `value` into a new block of this rank's
/// shared segment.
///
/// # Panics
/// If the segment is full (where C++ throws `std::bad_alloc`), or UPC++ is not
/// initialized.
#[track_caller]
pub fn new_<T>(value: T) -> GlobalPtr<T> {
    match try_new_(value) {
        Some(gp) => gp,
        None => exhausted("new_", heap("new_"), 1, size_of::<T>()),
    }
}

/// UPC++ spec §4.2 ¶16 `new_array(n, std::nothrow)`: a new array of `n` default
/// values in this rank's shared segment; `None` if the segment is full.
#[track_caller]
pub fn try_new_array<T: Default>(n: usize) -> Option<GlobalPtr<T>> {
    try_new_array_with(n, |_| T::default())
}

/// UPC++ spec §4.2 ¶11 `new_array(n)`: a new array of `n` default values in this
/// rank's shared segment.
///
/// # Panics
/// If the segment is full (where C++ throws `std::bad_alloc`), or UPC++ is not
/// initialized.
#[track_caller]
pub fn new_array<T: Default>(n: usize) -> GlobalPtr<T> {
    new_array_with(n, |_| T::default())
}

/// [`new_array`] with element `i` built by `init(i)`, e.g. `|_| value.clone()`.
///
/// # Panics
/// As [`new_array`]; a panic of `init` propagates after the elements built so far are
/// dropped in reverse order and the block freed (§4.2 ¶14).
#[track_caller]
pub fn new_array_with<T>(n: usize, init: impl FnMut(usize) -> T) -> GlobalPtr<T> {
    match try_new_array_with(n, init) {
        Some(gp) => gp,
        None => exhausted("new_array", heap("new_array"), n, size_of::<T>()),
    }
}

/// [`try_new_array`] with element `i` built by `init(i)`; `None` if the segment is full
/// (`init` is then never called).
#[track_caller]
pub fn try_new_array_with<T>(n: usize, mut init: impl FnMut(usize) -> T) -> Option<GlobalPtr<T>> {
    const CALL: &str = "new_array";
    let heap = heap(CALL);
    let user = heap.alloc(Form::Array, n, size_of::<T>(), align_of::<T>())?;

    /// Undoes a partly built array if `init` panics.
    struct Partial<T> {
        heap: &'static SegmentHeap,
        first: *mut T,
        built: usize,
    }
    impl<T> Drop for Partial<T> {
        fn drop(&mut self) {
            let user = self.first as usize;
            self.heap.retire("new_array", user, Form::Array, None);
            let _release = ReleaseOnDrop {
                heap: self.heap,
                user,
            };
            for i in (0..self.built).rev() {
                // SAFETY: elements `0..built` were written and not yet dropped.
                unsafe { self.first.add(i).drop_in_place() };
            }
        }
    }

    let mut partial = Partial {
        heap,
        first: user.as_ptr().cast::<T>(),
        built: 0,
    };
    while partial.built < n {
        let value = init(partial.built);
        // SAFETY: the block has room for `n` aligned `T`s; element `built` is unwritten.
        unsafe { partial.first.add(partial.built).write(value) };
        partial.built += 1;
    }
    std::mem::forget(partial);
    Some(to_global(CALL, user))
}

/// UPC++ spec §4.2 ¶21 `delete_`: frees the block of the object `gp` points to, which
/// has no destructor to run (`T` has no drop glue: a type with one does not compile
/// here; see [`delete_unchecked`]). Does nothing for null.
///
/// # Panics
/// If `gp` was not returned by [`new_`]/[`try_new_`] on this rank for a type of `T`'s
/// size and alignment, or was already freed (see the [module docs](self) for what is
/// detected), or UPC++ is not initialized.
///
/// A type with a destructor is refused when the program is built:
///
/// ```compile_fail,E0080
/// let s = upcxx::new_(String::from("shared"));
/// upcxx::delete_(s);
/// ```
#[track_caller]
pub fn delete_<T>(gp: GlobalPtr<T>) {
    const {
        assert!(
            !std::mem::needs_drop::<T>(),
            "upcxx::delete_: the type has a destructor, which would run on bytes any rank \
             may have overwritten; free it with the unsafe delete_unchecked"
        )
    };
    // SAFETY: `T` has no drop glue: dropping it does nothing, whatever its bytes.
    unsafe { free_block("delete_", Form::New, gp) }
}

/// `delete_` for a type with a destructor: drops the object `gp` points to and frees
/// its block. Does nothing for null.
///
/// # Safety
/// The object must still be a valid `T`: since [`new_`] built it, nothing (no `rput`,
/// atomic, copy or pointer of another type, on any rank) may have written its bytes
/// but as a valid `T`. Dropping it on this thread must be sound (`T: Send`, or built
/// on this thread).
///
/// # Panics
/// As [`delete_`]. A panic of `T`'s destructor propagates after the block is freed.
#[track_caller]
pub unsafe fn delete_unchecked<T>(gp: GlobalPtr<T>) {
    // SAFETY: the caller's contract.
    unsafe { free_block("delete_unchecked", Form::New, gp) }
}

/// Drops the elements of a `form` block (`New`: one, `Array`: its length) and frees
/// it, for `call`.
///
/// # Safety
/// As [`delete_unchecked`], for every element.
#[track_caller]
unsafe fn free_block<T>(call: &str, form: Form, gp: GlobalPtr<T>) {
    if gp.is_null() {
        return;
    }
    let heap = heap(call);
    let user = own_local(call, gp);
    let n = heap.retire(call, user, form, Some((size_of::<T>(), align_of::<T>())));
    let _release = ReleaseOnDrop { heap, user };
    // SAFETY: `retire` proved this is a live block of `form` holding `n` initialized
    // elements (one for `new_`) of `T`'s size and alignment, and made this the only
    // caller freeing it; the caller's contract: they are still valid, fit to drop here.
    unsafe { std::ptr::slice_from_raw_parts_mut(user as *mut T, n).drop_in_place() };
}

/// UPC++ spec §4.2 ¶26 `delete_array`: frees the block of the array `gp` points to,
/// whose elements have no destructor to run (`T` has no drop glue: a type with one does
/// not compile here; see [`delete_array_unchecked`]). Does nothing for null.
///
/// # Panics
/// If `gp` was not returned by [`new_array`] (or its variants) on this rank for a type
/// of `T`'s size and alignment, or was already freed, or UPC++ is not initialized.
#[track_caller]
pub fn delete_array<T>(gp: GlobalPtr<T>) {
    const {
        assert!(
            !std::mem::needs_drop::<T>(),
            "upcxx::delete_array: the type has a destructor, which would run on bytes any \
             rank may have overwritten; free it with the unsafe delete_array_unchecked"
        )
    };
    // SAFETY: `T` has no drop glue: dropping the elements does nothing, whatever their
    // bytes.
    unsafe { free_block("delete_array", Form::Array, gp) }
}

/// `delete_array` for an element type with a destructor: drops every element of the
/// array `gp` points to and frees its block. Does nothing for null.
///
/// # Safety
/// Every element must still be a valid `T`, as for [`delete_unchecked`].
///
/// # Panics
/// As [`delete_array`]. A panic of `T`'s destructor propagates after the remaining
/// elements are dropped and the block is freed.
#[track_caller]
pub unsafe fn delete_array_unchecked<T>(gp: GlobalPtr<T>) {
    // SAFETY: the caller's contract.
    unsafe { free_block("delete_array_unchecked", Form::Array, gp) }
}

/// UPC++ spec §4.2 ¶31 `allocate(size, alignment)`: `size` uninitialized bytes aligned
/// to `align` (and to at least 16) in this rank's shared segment; `None` if the segment
/// is full, or `align` is above the segment's size rounded up to a power of two, or
/// above 1 GiB.
///
/// # Panics
/// If `align` is not a power of two, or UPC++ is not initialized.
#[track_caller]
pub fn allocate(size: usize, align: usize) -> Option<GlobalPtr<u8>> {
    const CALL: &str = "allocate";
    if !align.is_power_of_two() {
        panic!("upcxx::{CALL}: alignment {align} is not a power of two");
    }
    let heap = heap(CALL);
    let user = heap.alloc(Form::Raw, size, 1, align)?;
    Some(to_global(CALL, user))
}

/// UPC++ spec §4.2 ¶35 `allocate<T>(n)`: uninitialized room for `n` values of `T` in
/// this rank's shared segment; `None` if the segment is full.
///
/// # Panics
/// If UPC++ is not initialized.
#[track_caller]
pub fn allocate_typed<T>(n: usize) -> Option<GlobalPtr<T>> {
    allocate_typed_aligned(n, align_of::<T>())
}

/// UPC++ spec §4.2 ¶35 `allocate<T, alignment>(n)`: as [`allocate_typed`], aligned to
/// `align` as well as to `T`'s own alignment (and to at least 16); `None` if the
/// segment is full.
///
/// # Panics
/// If `align` is not a power of two, or UPC++ is not initialized.
#[track_caller]
pub fn allocate_typed_aligned<T>(n: usize, align: usize) -> Option<GlobalPtr<T>> {
    const CALL: &str = "allocate";
    if !align.is_power_of_two() {
        panic!("upcxx::{CALL}: alignment {align} is not a power of two");
    }
    let heap = heap(CALL);
    let user = heap.alloc(Form::Raw, n, size_of::<T>(), align.max(align_of::<T>()))?;
    Some(to_global(CALL, user))
}

/// UPC++ spec §4.2 ¶39, ¶43 `deallocate`: frees a block from [`allocate`],
/// [`allocate_typed`] or [`allocate_typed_aligned`] (of any element type) without
/// dropping anything. Does nothing for null.
///
/// # Panics
/// If `gp` was not returned by [`allocate`]/[`allocate_typed`] on this rank, or was
/// already freed, or UPC++ is not initialized.
#[track_caller]
pub fn deallocate<T>(gp: GlobalPtr<T>) {
    const CALL: &str = "deallocate";
    if gp.is_null() {
        return;
    }
    let heap = heap(CALL);
    let user = own_local(CALL, gp);
    heap.retire(CALL, user, Form::Raw, None);
    // SAFETY: `retire` just succeeded for `user`.
    unsafe { heap.release(user) };
}

/// The size in bytes of this rank's shared segment (UPC++ `shared_segment_size`, from
/// UPC++ releases after spec draft 10).
///
/// # Panics
/// If UPC++ is not initialized.
#[track_caller]
pub fn shared_segment_size() -> usize {
    heap("shared_segment_size").size
}

/// An upper bound on the bytes of this rank's shared segment in use: allocated
/// blocks with their headers and padding, and the heap's own metadata (UPC++
/// `shared_segment_used`, from UPC++ releases after spec draft 10).
///
/// # Panics
/// If UPC++ is not initialized.
#[track_caller]
pub fn shared_segment_used() -> usize {
    heap("shared_segment_used").used()
}
