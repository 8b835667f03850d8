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
//! ```no_run
//! use upcxx::{delete_, new_, GlobalPtr};
//!
//! upcxx::init();
//! let gp: GlobalPtr<String> = new_(String::from("shared"));
//! // SAFETY: this rank owns the object and nobody else has seen the pointer.
//! assert_eq!(unsafe { &*gp.local() }, "shared");
//! delete_(gp); // drops the String, frees the block
//! upcxx::finalize();
//! ```
//!
//! # The heap
//!
//! The whole segment that `init` attaches is one heap, managed by
//! [`talc`](https://docs.rs/talc): a dlmalloc-style allocator with boundary tags and
//! size-binned free lists, built to manage a caller-supplied region (`Talc::claim`) and
//! to fail with `None` rather than abort when it is full. It was chosen over
//! `linked_list_allocator` (the other established allocator for a fixed region)
//! because that one's first-fit search and sorted free list make allocation *and*
//! freeing O(free blocks), while talc allocates in near-constant time and frees in O(1);
//! a PGAS heap can hold very many small objects. Talc's own metadata (its bin heads)
//! lives at the start of the segment. Talc is not thread-safe by itself, and UPC++
//! allows allocation from any thread (progress level "none"), so it sits behind a
//! mutex; only the owning process ever touches its heap, so the lock is process-local.
//!
//! # Block header and error detection
//!
//! Every block starts with a 32-byte header, right below the pointer handed out, so
//! that frees need no size argument and [`delete_array`] knows the length:
//!
//! ```text
//!   block base (talc)            header (32 B)                   user pointer (16-aligned)
//!   | padding to the alignment | magic | count | elem size | align, form | elements ...
//! ```
//!
//! `magic` is a constant XOR the user address while the block is live, and is replaced
//! (atomically, so two threads cannot both free one block) when it is freed. Freeing
//! therefore catches, with a panic naming the call: a pointer of another rank; a pointer
//! outside the heap or not at the start of a block; a block already freed (unless its
//! memory has since been handed out again at exactly the same address, which looks
//! live); freeing with the wrong function (`delete_` on a `new_array` block, etc.); and
//! `delete_`/`delete_array` with an element type of a different size or alignment than
//! the allocation's. Freeing null does nothing (§4.2 ¶23, ¶28, ¶41, ¶45).
//!
//! What cannot be caught cheaply: using a pointer after it was freed
//! ([`GlobalPtr::local`] on it still translates, and the memory may belong to a new
//! block), and corruption of a header by a stray write from any rank.
//!
//! # Differences from C++
//!
//! * `new_<T>(args...)` takes the value: `new_(T::new(args))`. The `nothrow` overloads
//!   are [`try_new_`] and [`try_new_array`] (returning `Option`, the value dropped on
//!   failure).
//! * [`new_array`] needs `T: Default` (the spec's DefaultConstructible);
//!   [`new_array_with`] builds each element with a closure. If a constructor panics, the
//!   elements built so far are dropped in reverse order and the block is freed (§4.2
//!   ¶14).
//! * The spec's `void* allocate(size, alignment)` is [`allocate`], returning a
//!   `GlobalPtr<u8>`; `allocate<T, alignment>(n)` is [`allocate_typed`] (alignment
//!   `align_of::<T>()`; for more, use [`allocate`] and [`GlobalPtr::cast`]). Both are
//!   freed by [`deallocate`]. The precondition that `size` be a multiple of the alignment
//!   is not needed and not enforced.
//! * Every block is aligned to at least 16 bytes, as `malloc` is.
//! * [`shared_segment_size`] and [`shared_segment_used`] come from later UPC++ releases
//!   (not draft 10).

use std::alloc::Layout;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use talc::base::Talc;
use talc::source::Manual;
use talc::DefaultBinning;

use crate::global_ptr::{GlobalPtr, KindId};
use crate::runtime::state::{rank_me, rt};

/// The minimum alignment of every block (that of `malloc` on 64-bit targets).
const MIN_ALIGN: usize = 16;
/// `MAGIC_LIVE ^ user address` marks a live block.
const MAGIC_LIVE: u64 = 0x5550_4358_4845_4150; // "UPCXHEAP"
/// `MAGIC_FREED ^ user address` marks a freed block (until talc reuses the memory).
const MAGIC_FREED: u64 = 0x4652_4545_4442_4c4b; // "FREEDBLK"

/// What made a block; it must be freed by the matching function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Form {
    New = 1,
    Array = 2,
    Raw = 3,
}

impl Form {
    fn from_u32(v: u32) -> Option<Form> {
        match v {
            1 => Some(Form::New),
            2 => Some(Form::Array),
            3 => Some(Form::Raw),
            _ => None,
        }
    }

    /// The functions that allocate and free a block of this form.
    fn functions(self) -> (&'static str, &'static str) {
        match self {
            Form::New => ("new_", "delete_"),
            Form::Array => ("new_array", "delete_array"),
            Form::Raw => ("allocate", "deallocate"),
        }
    }
}

/// The block header, right below the user pointer.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    /// Elements (`New`: 1, `Array`: the length, `Raw`: as allocated).
    count: usize,
    elem_size: usize,
    /// The alignment of the block (at least `MIN_ALIGN`).
    align: u32,
    form: u32,
}

const HEADER: usize = size_of::<Header>();
const _: () = assert!(MIN_ALIGN >= align_of::<Header>());

/// The bytes from the block base to the user pointer for a block aligned to `align`.
#[inline]
fn header_span(align: usize) -> usize {
    HEADER.next_multiple_of(align)
}

struct SegmentHeap {
    talc: Mutex<Talc<Manual, DefaultBinning>>,
    /// This rank's segment, in this process.
    base: usize,
    size: usize,
}

static HEAP: OnceLock<SegmentHeap> = OnceLock::new();

/// Sets up the segment heap over this rank's segment (called by `init`).
pub(crate) fn init_heap(base: *mut u8, size: usize) {
    let mut talc = Talc::new(Manual);
    // SAFETY: `init` hands over the segment it just attached, which stays mapped for the
    // life of the process; nothing else in this process allocates in it.
    if unsafe { talc.claim(base, size) }.is_none() {
        panic!("upcxx::init: the shared segment ({size} bytes) is too small for the heap");
    }
    let heap = SegmentHeap {
        talc: Mutex::new(talc),
        base: base as usize,
        size,
    };
    if HEAP.set(heap).is_err() {
        panic!("upcxx::init: the segment heap was set up twice");
    }
}

#[track_caller]
fn heap(call: &str) -> &'static SegmentHeap {
    rt(call);
    HEAP.get()
        .expect("init sets up the heap before anyone can allocate")
}

impl SegmentHeap {
    fn lock(&self) -> MutexGuard<'_, Talc<Manual, DefaultBinning>> {
        // Talc cannot be left inconsistent by a panic: none happens while it is locked.
        self.talc.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Allocates a block for `count` elements of `elem_size` bytes aligned to
    /// `elem_align` and writes its header; returns the (local) user pointer, or `None`
    /// if the segment has no room (or the request overflows).
    #[track_caller]
    fn alloc(
        &self,
        form: Form,
        count: usize,
        elem_size: usize,
        elem_align: usize,
    ) -> Option<NonNull<u8>> {
        let nbytes = count.saturating_mul(elem_size);
        let span = gasp::span!(GASP_UPC_ALLOC, [gasp::Arg::Size(nbytes)]);
        let user = self.alloc_block(form, count, elem_size, elem_align);
        gasp::end!(
            span,
            [
                gasp::Arg::Size(nbytes),
                crate::instrument::gptr(rank_me(), user.map_or(0, |u| u.as_ptr() as usize))
            ]
        );
        user
    }

    fn alloc_block(
        &self,
        form: Form,
        count: usize,
        elem_size: usize,
        elem_align: usize,
    ) -> Option<NonNull<u8>> {
        let align = elem_align.max(MIN_ALIGN);
        let align32 = u32::try_from(align).ok()?;
        let span = header_span(align);
        let total = count.checked_mul(elem_size)?.checked_add(span)?;
        let layout = Layout::from_size_align(total, align).ok()?;
        // SAFETY: `total >= span >= HEADER > 0`, as talc requires.
        let base = unsafe { self.lock().allocate(layout) }?;
        // SAFETY: the block is `total >= span` bytes, so the user pointer is inside or
        // one past it, and the header (the `HEADER` bytes below it, at `span - HEADER >=
        // 0`) inside it; the header is 8-aligned because `span` and the block are.
        unsafe {
            let user = base.as_ptr().add(span);
            user.sub(HEADER).cast::<Header>().write(Header {
                magic: AtomicU64::new(MAGIC_LIVE ^ user as u64),
                count,
                elem_size,
                align: align32,
                form: form as u32,
            });
            Some(NonNull::new_unchecked(user))
        }
    }

    /// Checks that `user` (local) is a live block of this heap made by `form`, with
    /// elements of `elem` = (size, align) if given, and marks it freed. Returns the
    /// header's element count. Panics naming `call` otherwise.
    #[track_caller]
    fn retire(&self, call: &str, user: usize, form: Form, elem: Option<(usize, usize)>) -> usize {
        let span = gasp::span!(GASP_UPC_FREE, [crate::instrument::gptr(rank_me(), user)]);
        let count = self.retire_block(call, user, form, elem);
        gasp::end!(span, [crate::instrument::gptr(rank_me(), user)]);
        count
    }

    #[track_caller]
    fn retire_block(
        &self,
        call: &str,
        user: usize,
        form: Form,
        elem: Option<(usize, usize)>,
    ) -> usize {
        let in_heap = user >= self.base + HEADER && user <= self.base + self.size;
        if !in_heap || user & (MIN_ALIGN - 1) != 0 {
            not_a_block(
                call,
                user,
                form,
                "it is not the start of a block of this rank's heap",
            );
        }
        // SAFETY: the header lies inside the segment (checked above), which stays mapped,
        // and is 8-aligned because `user` is 16-aligned.
        let header = unsafe { &*((user - HEADER) as *const Header) };
        let live = MAGIC_LIVE ^ user as u64;
        let magic = header.magic.load(Ordering::Acquire);
        if magic != live {
            let why = if magic == MAGIC_FREED ^ user as u64 {
                "it was already freed"
            } else {
                "it was already freed, or was never allocated"
            };
            not_a_block(call, user, form, why);
        }
        let found = Form::from_u32(header.form).unwrap_or(form);
        if found != form {
            let (alloc_fn, free_fn) = found.functions();
            panic!("upcxx::{call}: {user:#x} was allocated by {alloc_fn}; free it with {free_fn}");
        }
        if let Some((size, align)) = elem {
            let align = align.max(MIN_ALIGN);
            if header.elem_size != size || header.align as usize != align {
                panic!(
                    "upcxx::{call}: {user:#x} holds elements of {} bytes aligned to {}, but \
                     the element type has {size} bytes aligned to {align}",
                    header.elem_size, header.align
                );
            }
        }
        if header
            .magic
            .compare_exchange(
                live,
                MAGIC_FREED ^ user as u64,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            not_a_block(call, user, form, "another thread freed it at the same time");
        }
        header.count
    }

    /// Returns a retired block to talc.
    ///
    /// # Safety
    /// `user` was returned by `alloc` and has been `retire`d by the caller.
    unsafe fn release(&self, user: usize) {
        // SAFETY: the caller guarantees that `user` is a block, so its header is intact
        // (nobody but the retiring caller touched it since `retire` checked it).
        let (count, elem_size, align) = unsafe {
            let header = &*((user - HEADER) as *const Header);
            (header.count, header.elem_size, header.align as usize)
        };
        let span = header_span(align);
        // These succeeded when the block was allocated.
        let total = count * elem_size + span;
        let layout = Layout::from_size_align(total, align).expect("a layout that was allocated");
        // SAFETY: `user - span` is the base talc returned for exactly this layout, and the
        // block is freed once (`retire` let only one caller through).
        unsafe { self.lock().deallocate((user - span) as *mut u8, layout) };
    }

    /// An upper bound on the bytes in use (UPC++ `shared_segment_used`).
    fn used(&self) -> usize {
        let talc = self.lock();
        let c = talc.counters();
        self.size - c.available_bytes
    }
}

#[cold]
#[track_caller]
fn not_a_block(call: &str, user: usize, form: Form, why: &str) -> ! {
    let (alloc_fn, _) = form.functions();
    panic!(
        "upcxx::{call}: {user:#x} is not a live block allocated by {alloc_fn} on this rank: {why}"
    )
}

#[cold]
#[track_caller]
fn exhausted(call: &str, heap: &SegmentHeap, count: usize, elem_size: usize) -> ! {
    panic!(
        "upcxx::{call}: shared segment exhausted: no room for {count} x {elem_size} bytes \
         ({} of {} bytes in use); see UPCXX_SEGMENT_SIZE",
        heap.used(),
        heap.size
    )
}

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

/// Frees a block after the elements (if any) have been dropped, even if dropping
/// panics.
struct ReleaseOnDrop {
    heap: &'static SegmentHeap,
    user: usize,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        // SAFETY: built only right after a successful `retire` of `user`.
        unsafe { self.heap.release(self.user) }
    }
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

/// UPC++ spec §4.2 ¶21 `delete_`: drops the object `gp` points to and frees its block.
/// Does nothing for null.
///
/// # Panics
/// If `gp` was not returned by [`new_`]/[`try_new_`] on this rank for a type of `T`'s
/// size and alignment, or was already freed (see the [module docs](self) for what is
/// detected), or UPC++ is not initialized. A panic of `T`'s destructor propagates after
/// the block is freed.
#[track_caller]
pub fn delete_<T>(gp: GlobalPtr<T>) {
    const CALL: &str = "delete_";
    if gp.is_null() {
        return;
    }
    let heap = heap(CALL);
    let user = own_local(CALL, gp);
    heap.retire(
        CALL,
        user,
        Form::New,
        Some((size_of::<T>(), align_of::<T>())),
    );
    let _release = ReleaseOnDrop { heap, user };
    // SAFETY: `retire` proved this is a live `new_` block of a `T`-sized, `T`-aligned
    // object, which `new_` initialized, and made this the only caller freeing it.
    unsafe { (user as *mut T).drop_in_place() };
}

/// UPC++ spec §4.2 ¶26 `delete_array`: drops every element of the array `gp` points to
/// and frees its block. Does nothing for null.
///
/// # Panics
/// If `gp` was not returned by [`new_array`] (or its variants) on this rank for a type
/// of `T`'s size and alignment, or was already freed, or UPC++ is not initialized. A
/// panic of `T`'s destructor propagates after the remaining elements are dropped and
/// the block is freed.
#[track_caller]
pub fn delete_array<T>(gp: GlobalPtr<T>) {
    const CALL: &str = "delete_array";
    if gp.is_null() {
        return;
    }
    let heap = heap(CALL);
    let user = own_local(CALL, gp);
    let n = heap.retire(
        CALL,
        user,
        Form::Array,
        Some((size_of::<T>(), align_of::<T>())),
    );
    let _release = ReleaseOnDrop { heap, user };
    // SAFETY: `retire` proved this is a live `new_array` block of `n` initialized
    // elements of `T`'s size and alignment, and made this the only caller freeing it.
    unsafe { std::ptr::slice_from_raw_parts_mut(user as *mut T, n).drop_in_place() };
}

/// UPC++ spec §4.2 ¶31 `allocate(size, alignment)`: `size` uninitialized bytes aligned
/// to `align` (and to at least 16) in this rank's shared segment; `None` if the segment
/// is full.
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
    const CALL: &str = "allocate";
    let heap = heap(CALL);
    let user = heap.alloc(Form::Raw, n, size_of::<T>(), align_of::<T>())?;
    Some(to_global(CALL, user))
}

/// UPC++ spec §4.2 ¶39, ¶43 `deallocate`: frees a block from [`allocate`] or
/// [`allocate_typed`] (of any element type) without dropping anything. Does nothing
/// for null.
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
