//! The segment heap: this rank's shared segment as one heap of headed blocks, with the
//! checks that make a wrong free fail loudly. Sits on the runtime state.
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
//! a PGAS heap can hold very many small objects. Talc is not thread-safe by itself, and
//! UPC++ allows allocation from any thread (progress level "none"), so it sits behind a
//! mutex; only the owning process ever touches its heap, so the lock is process-local.
//!
//! # The shadow: no bookkeeping in the segment
//!
//! Any rank may write any byte of the segment with a safe `rput` (through a pointer to a
//! freed block, or one cast to another type), so nothing this heap relies on may live
//! there: a free-list link or a block length that a peer overwrote would make the
//! allocator write through a garbage pointer. Talc and the block headers therefore run
//! on a *shadow*: a private anonymous mapping of the segment's size (reserved, not
//! committed: the kernel backs only the pages bookkeeping touches), in which offset `o`
//! stands for offset `o` of the segment. Talc hands out shadow blocks; their users get
//! the segment addresses at the same offsets, and never see the shadow. The price is
//! private memory for the pages that hold block boundaries: next to nothing for a heap
//! of large arrays, up to the segment's size for one of blocks smaller than a page.
//! (Out-of-band allocators were measured: `range-alloc` frees and allocates in
//! O(free ranges), 5.6 µs per pair at 100,000 live blocks of mixed sizes;
//! `offset-allocator` needs its node count, and 28 bytes of memory per node, fixed at
//! creation; talc on the shadow stays at talc's 60-170 ns.)
//!
//! # Block header and error detection
//!
//! Every block starts with a 32-byte header in the shadow, right below the shadow twin
//! of the pointer handed out, so that frees need no size argument and
//! [`delete_array`](super::delete_array) knows the length:
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
//! the allocation's. Freeing null does nothing (§4.2 ¶23, ¶28, ¶41, ¶45). As the
//! headers live in the shadow, no write to the segment can forge or spoil one.
//!
//! What cannot be caught cheaply: using a pointer after it was freed
//! ([`GlobalPtr::local`](crate::GlobalPtr::local) on it still translates, and the memory
//! may belong to a new block).
//!

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use rustix::mm;
use talc::base::Talc;
use talc::source::Manual;
use talc::DefaultBinning;

use crate::runtime::state::{rank_me, rt};

/// The minimum alignment of every block (that of `malloc` on 64-bit targets).
const MIN_ALIGN: usize = 16;
/// The largest alignment a block may ask for (one no larger than the segment's size,
/// rounded up to a power of two, is possible).
const MAX_ALIGN: usize = 1 << 30;
/// `MAGIC_LIVE ^ user address` marks a live block.
const MAGIC_LIVE: u64 = 0x5550_4358_4845_4150; // "UPCXHEAP"
/// `MAGIC_FREED ^ user address` marks a freed block (until talc reuses the memory).
const MAGIC_FREED: u64 = 0x4652_4545_4442_4c4b; // "FREEDBLK"

/// What made a block; it must be freed by the matching function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Form {
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
            Form::New => ("new_", "delete_ or delete_unchecked"),
            Form::Array => ("new_array", "delete_array or delete_array_unchecked"),
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

pub(super) struct SegmentHeap {
    /// Talc over the shadow.
    talc: Mutex<Talc<Manual, DefaultBinning>>,
    /// This rank's segment, in this process.
    base: usize,
    /// The shadow: offset `o` of it stands for offset `o` of the segment.
    shadow: usize,
    /// The shadow's and the segment's addresses agree modulo this: the largest
    /// alignment a block can have.
    congruence: usize,
    pub(super) size: usize,
}

static HEAP: OnceLock<SegmentHeap> = OnceLock::new();

/// Sets up the segment heap over this rank's segment (called by `init`).
pub(crate) fn init_heap(base: *mut u8, size: usize) {
    // The shadow starts at the segment's address modulo `congruence`, so that a shadow
    // block aligned to up to that is aligned in the segment too.
    let congruence = size.next_power_of_two().clamp(MIN_ALIGN, MAX_ALIGN);
    let reserve = size + congruence;
    // SAFETY: a fresh private mapping at an address the kernel picks; it is never
    // unmapped (the heap lives as long as the process).
    let map = unsafe {
        mm::mmap_anonymous(
            std::ptr::null_mut(),
            reserve,
            mm::ProtFlags::READ | mm::ProtFlags::WRITE,
            mm::MapFlags::PRIVATE | mm::MapFlags::NORESERVE,
        )
    }
    .unwrap_or_else(|e| {
        panic!(
            "upcxx::init: cannot reserve {reserve} bytes for the segment heap's bookkeeping: {e}"
        )
    }) as usize;
    let shadow = (map + ((base as usize).wrapping_sub(map) & (congruence - 1))) as *mut u8;
    let mut talc = Talc::new(Manual);
    // SAFETY: the shadow is ours alone, mapped for the life of the process, and holds
    // nothing else.
    if unsafe { talc.claim(shadow, size) }.is_none() {
        panic!("upcxx::init: the shared segment ({size} bytes) is too small for the heap");
    }
    let heap = SegmentHeap {
        talc: Mutex::new(talc),
        base: base as usize,
        shadow: shadow as usize,
        congruence,
        size,
    };
    if HEAP.set(heap).is_err() {
        panic!("upcxx::init: the segment heap was set up twice");
    }
}

#[track_caller]
pub(super) fn heap(call: &str) -> &'static SegmentHeap {
    rt(call);
    HEAP.get()
        .expect("init sets up the heap before anyone can allocate")
}

impl SegmentHeap {
    /// The header of the block at segment address `user` (which must be inside the
    /// segment, at least `HEADER` bytes above its base, and 16-aligned).
    fn header(&self, user: usize) -> *const Header {
        (user - self.base + self.shadow - HEADER) as *const Header
    }

    fn lock(&self) -> MutexGuard<'_, Talc<Manual, DefaultBinning>> {
        // Talc cannot be left inconsistent by a panic: none happens while it is locked.
        self.talc.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Allocates a block for `count` elements of `elem_size` bytes aligned to
    /// `elem_align` and writes its header; returns the (local) user pointer, or `None`
    /// if the segment has no room (or the request overflows).
    #[track_caller]
    pub(super) fn alloc(
        &self,
        form: Form,
        count: usize,
        elem_size: usize,
        elem_align: usize,
    ) -> Option<NonNull<u8>> {
        let nbytes = count.saturating_mul(elem_size);
        let span = gasp::span!(GASP_UPC_ALLOC, nbytes);
        let user = self.alloc_block(form, count, elem_size, elem_align);
        gasp::end!(
            span,
            nbytes,
            gasp::GPtr::new(rank_me(), user.map_or(0, |u| u.as_ptr() as usize))
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
        if align > self.congruence {
            return None;
        }
        let align32 = u32::try_from(align).ok()?;
        let span = header_span(align);
        let total = count.checked_mul(elem_size)?.checked_add(span)?;
        let layout = Layout::from_size_align(total, align).ok()?;
        // SAFETY: `total >= span >= HEADER > 0`, as talc requires.
        let base = unsafe { self.lock().allocate(layout) }?;
        let shadow_user = base.as_ptr() as usize + span;
        let user = shadow_user - self.shadow + self.base;
        // SAFETY: the shadow block is `total >= span` bytes, so its header (the `HEADER`
        // bytes below `shadow_user`, at `span - HEADER >= 0`) is inside it; the header is
        // 8-aligned because `span` and the block are. The segment address at the same
        // offset is inside the segment or one past it, so not null.
        unsafe {
            self.header(user).cast_mut().write(Header {
                magic: AtomicU64::new(MAGIC_LIVE ^ user as u64),
                count,
                elem_size,
                align: align32,
                form: form as u32,
            });
            Some(NonNull::new_unchecked(user as *mut u8))
        }
    }

    /// Checks that `user` (local) is a live block of this heap made by `form`, with
    /// elements of `elem` = (size, align) if given, and marks it freed. Returns the
    /// header's element count. Panics naming `call` otherwise.
    #[track_caller]
    pub(super) fn retire(
        &self,
        call: &str,
        user: usize,
        form: Form,
        elem: Option<(usize, usize)>,
    ) -> usize {
        let span = gasp::span!(GASP_UPC_FREE, gasp::GPtr::new(rank_me(), user));
        let count = self.retire_block(call, user, form, elem);
        gasp::end!(span, gasp::GPtr::new(rank_me(), user));
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
        // SAFETY: `user` is inside the segment and at least `HEADER` above its base, so
        // its header lies inside the shadow, which stays mapped; 8-aligned because `user`
        // and the shadow are 16-aligned. Every word of the shadow is a valid `Header`
        // field (integers), written only under this heap's rules.
        let header = unsafe { &*self.header(user) };
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
    pub(super) unsafe fn release(&self, user: usize) {
        // SAFETY: the caller guarantees that `user` is a block, so its header is intact
        // (nobody but the retiring caller touched it since `retire` checked it).
        let (count, elem_size, align) = unsafe {
            let header = &*self.header(user);
            (header.count, header.elem_size, header.align as usize)
        };
        let span = header_span(align);
        // These succeeded when the block was allocated.
        let total = count * elem_size + span;
        let layout = Layout::from_size_align(total, align).expect("a layout that was allocated");
        let block = user - self.base + self.shadow - span;
        // SAFETY: `block` is the shadow base talc returned for exactly this layout, and
        // the block is freed once (`retire` let only one caller through).
        unsafe { self.lock().deallocate(block as *mut u8, layout) };
    }

    /// An upper bound on the bytes in use (UPC++ `shared_segment_used`).
    pub(super) fn used(&self) -> usize {
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
pub(super) fn exhausted(call: &str, heap: &SegmentHeap, count: usize, elem_size: usize) -> ! {
    panic!(
        "upcxx::{call}: shared segment exhausted: no room for {count} x {elem_size} bytes \
         ({} of {} bytes in use); see UPCXX_SEGMENT_SIZE",
        heap.used(),
        heap.size
    )
}

/// Frees a block after the elements (if any) have been dropped, even if dropping
/// panics.
pub(super) struct ReleaseOnDrop {
    pub(super) heap: &'static SegmentHeap,
    pub(super) user: usize,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        // SAFETY: built only right after a successful `retire` of `user`.
        unsafe { self.heap.release(self.user) }
    }
}
