//! Global pointers (UPC++ spec ch. 3) and memory kinds (§3.2 ¶3, ch. 16).
//!
//! A [`GlobalPtr<T, K>`] names a `T` in the shared segment of some rank: it is the pair
//! *(rank, address)*, where the address is expressed **in the owner's address space**,
//! as UPC++'s raw pointer is. A global pointer is therefore the same value on every
//! rank (§3.1 ¶4: "a global pointer can be viewed from any process to mean the same
//! thing without need for translation"), can be sent anywhere as plain data, and
//! compares, hashes and prints identically everywhere.
//!
//! ```
//! use upcxx::{GlobalPtr, new_array, delete_array};
//!
//! upcxx::init();
//! let gp: GlobalPtr<u64> = new_array::<u64>(4);
//! assert!(gp.is_local() && gp.where_() == upcxx::rank_me());
//! // SAFETY: this rank allocated the array and nobody else knows of it yet.
//! unsafe { *gp.add(2).local() = 7 };
//! assert_eq!((gp + 2) - gp, 2);
//! delete_array(gp);
//! upcxx::finalize();
//! ```
//!
//! # Translation to a local pointer
//!
//! Every rank of the local team (with the smp conduit: every rank of the job) maps
//! every other rank's segment, usually at a different virtual address. [`GlobalPtr::local`]
//! turns the owner-space address into this process's address with the table of peer
//! segments that `init` builds: `addr - owner_base + local_base`. That is O(1), takes no
//! lock and hashes nothing; it checks that the rank exists and that the address lies in
//! that rank's segment (one comparison), so a corrupted pointer fails loudly instead of
//! scribbling over unrelated memory. It cannot tell a pointer to freed memory from a
//! live one (see [`crate::alloc`]).
//!
//! The reverse direction, [`to_global_ptr`] and [`try_global_ptr`], looks the raw
//! pointer up among the local team's segments: this rank's own segment first (the common
//! case), then a table of the others sorted by local address (O(log n)).
//!
//! # Null
//!
//! There is exactly one null pointer per type: rank 0, address 0, kind host, all zero
//! bits (so zeroed memory holds nulls). Every constructor produces this canonical form,
//! and equality, ordering, hashing and printing treat any address-0 pointer as it, so
//! they are consistent with §3.2 ¶75 and ¶87 (all nulls are equal and print alike).
//! [`GlobalPtr::where_`] of null is 0 (the spec leaves it implementation-defined).
//! Pointer arithmetic by a non-zero amount on null panics.
//!
//! # Plain data
//!
//! A pointer is DefinitelyTriviallySerializable (§3.2 ¶6): here [`bytemuck::Pod`], so
//! it is an element type of RMA, collectives and views like any integer, and may be a
//! field of a `Pod` struct stored in a segment (linked structures across ranks). Any
//! bytes make a pointer, and one made of bytes that never held a pointer fails where it
//! is used as any bad pointer does (no such rank, an address outside the segment), with
//! a message naming the call; every null is equal to `null()`, and a kind code that
//! names no kind fails where the kind is asked for.
//!
//! # Differences from C++
//!
//! * `where()` is [`GlobalPtr::where_`] (`where` is a Rust keyword).
//! * The `+`/`-` operators take `isize` (the spec's `ptrdiff_t`) only: with a second
//!   `usize` impl, `gp + 1` would no longer type-check. [`GlobalPtr::add`] and
//!   [`GlobalPtr::sub`] take `usize`; `++`/`--` are `+= 1`/`-= 1`.
//! * `static_pointer_cast`/`reinterpret_pointer_cast` are both [`GlobalPtr::cast`]:
//!   Rust has no class hierarchies whose casts adjust the address.
//! * [`GlobalPtr::dynamic_kind_cast`] and [`try_global_ptr`] return `None` where C++
//!   returns a null pointer, so "not of that kind" and "null" stay distinct.
//! * `std::less` & co. are the [`Ord`] impl, a strict total order by (rank, kind,
//!   address), which is consistent with the spec's partial order within an array.
//!
//! # Memory kinds
//!
//! The kind is a type parameter implementing the sealed [`MemoryKind`] trait: [`Host`]
//! (the default) or [`AnyKind`]. Every pointer also carries the run-time [`KindId`] of
//! the memory it references, as a 16-bit code (host 0, so that null is all zero bits),
//! in what would otherwise be padding (the pointer is 16 bytes either way), so that a
//! `GlobalPtr<T, AnyKind>` knows its [`GlobalPtr::dynamic_kind`]. Device kinds
//! (`cuda_device`, ch. 16: [`CudaDeviceKind`]) add a marker type and a `KindId` and
//! reuse the same layout; a pointer to device memory also carries the device's id in
//! the remaining 16 bits (`device_allocator::device_id`, §16.1.2 ¶41).
//! The kinds are `global_ptr/kind.rs`.
//!
//! # Why one file
//!
//! Beside the kinds, this file is one concept, the [`GlobalPtr`] type: its methods, the
//! translation to and from local pointers, and the standard traits and operators. They
//! all rest on the same (rank, owner-space address, kind) representation and on the same
//! checks and failure messages, so they are kept beside it. Global pointers sit on the
//! runtime state only (the table of peer segments).

use std::marker::PhantomData;
use std::sync::OnceLock;

mod kind;
mod traits;

use crate::runtime::state::{rt, Rank, Setup};
use kind::kinds_convertible;
pub use kind::{AnyKind, CudaDeviceKind, Host, KindId, MemoryKind};

/// A pointer to a `T` in the shared segment of some rank (UPC++ spec §3.2 ¶4
/// `global_ptr<T, Kind>`). See the [module documentation](self).
///
/// Plain data: `Copy`, `Send`, `Sync`, [`bytemuck::Pod`], comparable, hashable and
/// serializable whatever `T` is, because it only names memory and never owns it (§3.2
/// ¶19: dropping it frees nothing; see "Plain data" in the [module documentation](self)).
#[repr(C)]
pub struct GlobalPtr<T, K: MemoryKind = Host> {
    /// Address in the owner's address space; 0 for null.
    addr: usize,
    /// Owner's rank in the world team; 0 for null.
    rank: Rank,
    /// The kind of the referenced memory, as [`KindId::code`]: host (0) for null, so
    /// that null is all zero bits.
    kind: u16,
    /// For device memory, the device's id within its kind (§16.1.2 ¶41 `device_id`);
    /// 0 for host memory.
    device: u16,
    _marker: PhantomData<(fn() -> T, K)>,
}

impl<T, K: MemoryKind> GlobalPtr<T, K> {
    /// UPC++ spec §3.2 ¶10 `global_ptr::kind`: the static kind `K`.
    pub const KIND: KindId = K::ID;

    /// The null global pointer (UPC++ spec §3.2 ¶12 `global_ptr(nullptr)`). Needs no
    /// runtime.
    #[inline]
    pub const fn null() -> Self {
        GlobalPtr {
            addr: 0,
            rank: 0,
            kind: KindId::Host.code(),
            device: 0,
            _marker: PhantomData,
        }
    }

    /// A pointer from its parts, canonicalizing null. `addr` is in `rank`'s address
    /// space. For the runtime (allocation, RMA), which knows the parts are right.
    #[inline]
    pub(crate) const fn from_parts(rank: Rank, addr: usize, kind: KindId) -> Self {
        Self::from_device_parts(rank, addr, kind, 0)
    }

    /// [`from_parts`](Self::from_parts) of memory on device `device` of `kind`.
    #[inline]
    pub(crate) const fn from_device_parts(
        rank: Rank,
        addr: usize,
        kind: KindId,
        device: u16,
    ) -> Self {
        if addr == 0 {
            return Self::null();
        }
        GlobalPtr {
            addr,
            rank,
            kind: kind.code(),
            device,
            _marker: PhantomData,
        }
    }

    /// The id of the device holding the referenced memory (0 for host memory).
    #[inline]
    pub(crate) const fn device(self) -> u16 {
        self.device
    }

    /// The address in the owner's address space (0 for null), e.g. for `gex` RMA,
    /// which takes owner-space addresses.
    #[inline]
    pub(crate) const fn owner_addr(self) -> usize {
        self.addr
    }

    /// UPC++ spec §3.2 ¶37 `is_null`: whether this is the null pointer. Needs no
    /// runtime.
    #[inline]
    pub const fn is_null(self) -> bool {
        self.addr == 0
    }

    /// UPC++ spec §3.2 ¶47 `where()`: the rank (in the world team) with affinity to the
    /// referenced memory; 0 for null (implementation-defined). Needs no runtime.
    #[inline]
    pub const fn where_(self) -> Rank {
        self.rank
    }

    /// UPC++ spec §3.2 ¶31 `dynamic_kind`: the kind of the referenced memory, never
    /// [`KindId::Any`]; [`KindId::Host`] for null (the spec leaves it unspecified).
    ///
    /// # Panics
    /// If the pointer's bytes were read from memory that never held a pointer and name
    /// no kind (a pointer is plain data: any bytes make one, §3.2 ¶6).
    #[inline]
    #[track_caller]
    pub const fn dynamic_kind(self) -> KindId {
        if self.is_null() {
            return KindId::Host;
        }
        match KindId::from_code(self.kind) {
            Some(kind) => kind,
            None => panic!(
                "upcxx::GlobalPtr::dynamic_kind: the pointer names no memory kind (its bytes \
                 were read from memory that never held a global pointer)"
            ),
        }
    }

    /// UPC++ spec §3.2 ¶34 `is_local`: whether this process can load and store the
    /// referenced memory. True for null without consulting the runtime; otherwise true
    /// for host memory of any rank of the local team (with the smp conduit, every rank;
    /// with the mpi conduit, the ranks of this host), false for ranks on other hosts.
    ///
    /// Device memory (a [`KindId`] other than `Host`) is never local: the host cannot
    /// load or store it (the spec leaves this unspecified).
    ///
    /// # Panics
    /// For a non-null host pointer, if UPC++ is not initialized.
    #[inline]
    #[track_caller]
    pub fn is_local(self) -> bool {
        if self.is_null() {
            return true;
        }
        self.kind == KindId::Host.code()
            && rt("GlobalPtr::is_local")
                .peers
                .get(self.rank as usize)
                .is_some_and(|p| p.is_mapped())
    }

    /// UPC++ spec §3.2 ¶43 `local()`: the raw pointer through which this process
    /// reaches the referenced memory; null for null. O(1): one table lookup, no lock.
    ///
    /// Dereferencing the result is `unsafe` as for any raw pointer: the memory may be
    /// written concurrently by other ranks, or freed.
    ///
    /// # Panics
    /// If the pointer is not [`is_local`](Self::is_local) (device memory, a rank on
    /// another host, or a rank outside the job), if its address is outside its owner's
    /// segment, or if UPC++ is not initialized (null needs no runtime).
    #[inline]
    #[track_caller]
    pub fn local(self) -> *mut T {
        if self.is_null() {
            return std::ptr::null_mut();
        }
        if self.kind != KindId::Host.code() {
            not_host("GlobalPtr::local", self.kind);
        }
        let rt = rt("GlobalPtr::local");
        // Length 0: a one-past-the-end pointer of an object at the segment's end is valid.
        match rt.local_range(self.rank, self.addr, 0) {
            Some(local) => local as *mut T,
            None => not_mapped("GlobalPtr::local", rt, self.rank, self.addr),
        }
    }

    /// UPC++ spec §3.2 ¶52 `operator+`: the pointer `n` elements further. `self + n`
    /// with `n: isize` is the same.
    ///
    /// # Panics
    /// If `n != 0` and `self` is null, or if the address overflows.
    #[inline]
    #[track_caller]
    #[allow(clippy::should_implement_trait)] // it is implemented too, for `isize`
    pub fn add(self, n: usize) -> Self {
        match isize::try_from(n) {
            Ok(n) => self.offset_by("GlobalPtr::add", n),
            Err(_) => address_overflow("GlobalPtr::add", self.rank, self.addr),
        }
    }

    /// UPC++ spec §3.2 ¶58 `operator-(ptrdiff_t)`: the pointer `n` elements back.
    /// `self - n` with `n: isize` is the same.
    ///
    /// # Panics
    /// If `n != 0` and `self` is null, or if the address overflows.
    #[inline]
    #[track_caller]
    #[allow(clippy::should_implement_trait)] // it is implemented too, for `isize`
    pub fn sub(self, n: usize) -> Self {
        match isize::try_from(n) {
            Ok(n) => self.offset_by("GlobalPtr::sub", -n),
            Err(_) => address_overflow("GlobalPtr::sub", self.rank, self.addr),
        }
    }

    /// UPC++ spec §3.2 ¶52 `operator+`/¶58 `operator-` with a signed count: the pointer
    /// `n` elements away.
    ///
    /// # Panics
    /// If `n != 0` and `self` is null, or if the address overflows.
    #[inline]
    #[track_caller]
    pub fn offset(self, n: isize) -> Self {
        self.offset_by("GlobalPtr::offset", n)
    }

    #[inline]
    #[track_caller]
    fn offset_by(self, call: &str, n: isize) -> Self {
        if n == 0 {
            return self;
        }
        if self.is_null() {
            null_arithmetic(call, n);
        }
        let size = std::mem::size_of::<T>() as isize;
        match n
            .checked_mul(size)
            .and_then(|bytes| self.addr.checked_add_signed(bytes))
        {
            Some(addr) if addr != 0 => GlobalPtr { addr, ..self },
            _ => address_overflow(call, self.rank, self.addr),
        }
    }

    /// UPC++ spec §3.2 ¶64 `operator-(global_ptr)`: the distance from `origin` to
    /// `self` in elements (`self - origin` is the same). Both must point into (or one
    /// past) the same array; both null gives 0.
    ///
    /// # Panics
    /// If the pointers are on different ranks or of different kinds (only one null,
    /// too), if their distance is not a whole number of elements, or if `T` is
    /// zero-sized (as `<*const T>::offset_from`).
    #[track_caller]
    pub fn offset_from(self, origin: Self) -> isize {
        const CALL: &str = "GlobalPtr::offset_from";
        if self == origin {
            return 0;
        }
        if self.rank != origin.rank
            || self.kind != origin.kind
            || self.device != origin.device
            || self.is_null()
            || origin.is_null()
        {
            panic!(
                "upcxx::{CALL}: {self} and {origin} do not point into the same object \
                 (pointers to different ranks cannot be subtracted)"
            );
        }
        let size = std::mem::size_of::<T>();
        assert!(size != 0, "upcxx::{CALL}: the element type is zero-sized");
        let bytes = (self.addr as isize).wrapping_sub(origin.addr as isize);
        if bytes % size as isize != 0 {
            panic!(
                "upcxx::{CALL}: {self} and {origin} are {bytes} bytes apart, not a multiple \
                 of the element size {size}"
            );
        }
        bytes / size as isize
    }

    /// UPC++ spec §3.2 ¶89 `static_pointer_cast` and `reinterpret_pointer_cast`: the same
    /// address and affinity, as a pointer to `U`.
    #[inline]
    pub const fn cast<U>(self) -> GlobalPtr<U, K> {
        self.retyped()
    }

    /// The same address, affinity and dynamic kind, with other static types.
    #[inline]
    const fn retyped<U, To: MemoryKind>(self) -> GlobalPtr<U, To> {
        GlobalPtr {
            addr: self.addr,
            rank: self.rank,
            kind: self.kind,
            device: self.device,
            _marker: PhantomData,
        }
    }

    /// UPC++ spec §3.2 ¶94 `static_kind_cast<ToKind>`: the same pointer with static kind
    /// `To`. Converting between two different kinds neither of which is [`AnyKind`] is
    /// rejected at compile time (§3.2 ¶96).
    ///
    /// # Panics
    /// If `To` is not [`AnyKind`] and the pointer is non-null and references memory of
    /// another kind (the spec's precondition, ¶95; checked because it is cheap).
    #[inline]
    #[track_caller]
    pub fn static_kind_cast<To: MemoryKind>(self) -> GlobalPtr<T, To> {
        const {
            assert!(
                kinds_convertible(K::ID, To::ID),
                "static_kind_cast between two different kinds, neither of which is AnyKind"
            )
        };
        if To::ID != KindId::Any && !self.is_null() && self.kind != To::ID.code() {
            panic!(
                "upcxx::GlobalPtr::static_kind_cast: {self} references {} memory, not {}",
                KindId::describe(self.kind),
                To::ID
            );
        }
        self.retyped()
    }

    /// UPC++ spec §3.2 ¶94 `dynamic_kind_cast<ToKind>`: the same pointer with static kind
    /// `To`, or `None` if it is non-null and references memory of another kind (where
    /// C++ returns null). Converting between two different kinds neither of which is
    /// [`AnyKind`] is rejected at compile time (§3.2 ¶96).
    #[inline]
    pub fn dynamic_kind_cast<To: MemoryKind>(self) -> Option<GlobalPtr<T, To>> {
        const {
            assert!(
                kinds_convertible(K::ID, To::ID),
                "dynamic_kind_cast between two different kinds, neither of which is AnyKind"
            )
        };
        if To::ID != KindId::Any && !self.is_null() && self.kind != To::ID.code() {
            return None;
        }
        Some(self.retyped())
    }
}

/// UPC++ spec §3.2 ¶16: a pointer of kind [`AnyKind`] from a host pointer.
impl<T> From<GlobalPtr<T, Host>> for GlobalPtr<T, AnyKind> {
    #[inline]
    fn from(p: GlobalPtr<T, Host>) -> Self {
        p.static_kind_cast()
    }
}

/// UPC++ spec §3.2 ¶16: a pointer of kind [`AnyKind`] from a device pointer (the
/// conversion exists from every kind).
impl<T> From<GlobalPtr<T, CudaDeviceKind>> for GlobalPtr<T, AnyKind> {
    #[inline]
    fn from(p: GlobalPtr<T, CudaDeviceKind>) -> Self {
        p.static_kind_cast()
    }
}

/// UPC++ spec §3.2 ¶23 `to_global_ptr`: the global pointer to the object at `ptr`, which
/// must lie in the shared segment of a rank of the local team (its own or a peer's);
/// null gives null.
///
/// # Panics
/// If `*ptr` is not entirely inside such a segment, or if UPC++ is not initialized.
#[track_caller]
pub fn to_global_ptr<T>(ptr: *mut T) -> GlobalPtr<T> {
    const CALL: &str = "to_global_ptr";
    if ptr.is_null() {
        return GlobalPtr::null();
    }
    match lookup(CALL, ptr) {
        Some(gp) => gp,
        None => panic!(
            "upcxx::{CALL}: {ptr:p} ({} bytes) is not inside the shared segment of any rank \
             of the local team",
            std::mem::size_of::<T>()
        ),
    }
}

/// UPC++ spec §3.2 ¶27 `try_global_ptr`: the global pointer to the object at `ptr` if it
/// lies in the shared segment of a rank of the local team, `Some(null)` for null, and
/// `None` otherwise (where C++ returns null).
///
/// # Panics
/// If UPC++ is not initialized (null needs no runtime).
#[track_caller]
pub fn try_global_ptr<T>(ptr: *mut T) -> Option<GlobalPtr<T>> {
    if ptr.is_null() {
        return Some(GlobalPtr::null());
    }
    lookup("try_global_ptr", ptr)
}

/// The pointer to `[ptr, ptr + size_of::<T>())` if some local segment holds all of it.
#[track_caller]
fn lookup<T>(call: &str, ptr: *mut T) -> Option<GlobalPtr<T>> {
    let rt = rt(call);
    let addr = ptr as usize;
    let len = std::mem::size_of::<T>();
    let contains = |local_base: usize, size: usize| {
        addr.checked_sub(local_base)
            .is_some_and(|off| size.checked_sub(len).is_some_and(|room| off <= room))
    };
    let to_global = |rank: Rank| {
        let peer = rt.peers[rank as usize];
        GlobalPtr::from_parts(rank, addr - peer.local_base + peer.owner_base, KindId::Host)
    };
    let me = rt.peers[rt.rank as usize];
    if contains(me.local_base, me.size) {
        return Some(to_global(rt.rank));
    }
    // Segments do not overlap, so only the last one starting at or below `addr` can
    // hold it.
    let by_base = local_index(call);
    let i = by_base.partition_point(|&(base, _)| base <= addr);
    let &(_, rank) = by_base.get(i.checked_sub(1)?)?;
    let peer = rt.peers[rank as usize];
    contains(peer.local_base, peer.size).then(|| to_global(rank))
}

/// The local team's (mapped) segments as (local base, rank), sorted by local base. Built once:
/// the runtime, and so the table of peers, exists once per process.
#[track_caller]
fn local_index(call: &str) -> &'static [(usize, Rank)] {
    static INDEX: OnceLock<Vec<(usize, Rank)>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let rt = rt(call);
        let mut v: Vec<(usize, Rank)> = rt
            .peers
            .iter()
            .zip(0..)
            .filter(|(p, _)| p.is_mapped())
            .map(|(p, r)| (p.local_base, r))
            .collect();
        v.sort_unstable();
        v
    })
}

#[cold]
#[track_caller]
fn not_host(call: &str, code: u16) -> ! {
    panic!(
        "upcxx::{call}: the pointer references {} memory, which this process cannot load or \
         store",
        KindId::describe(code)
    )
}

#[cold]
#[track_caller]
pub(crate) fn bad_rank(call: &str, rank: Rank, size: Rank) -> ! {
    panic!("upcxx::{call}: rank {rank} is not in the job (rank_n() = {size})")
}

/// The failure of `call` on a pointer this process does not map: a rank outside the
/// job, an address outside its owner's segment, or a rank on another host.
#[cold]
#[track_caller]
fn not_mapped(call: &str, rt: &Setup, rank: Rank, addr: usize) -> ! {
    let Some(&(base, size)) = rt.bounds.get(rank as usize) else {
        bad_rank(call, rank, rt.size)
    };
    if addr.wrapping_sub(base) > size {
        outside_segment(call, rank, addr, base, size)
    }
    panic!(
        "upcxx::{call}: rank {rank} is on another host (not in local_team()), so this \
         process cannot load or store its memory at {addr:#x}; use rput/rget, atomics or \
         an rpc (check GlobalPtr::is_local first)"
    )
}

#[cold]
#[track_caller]
fn outside_segment(call: &str, rank: Rank, addr: usize, base: usize, size: usize) -> ! {
    panic!(
        "upcxx::{call}: address {addr:#x} is outside the shared segment of rank {rank} \
         ([{base:#x}, {base:#x}+{size}))"
    )
}

#[cold]
#[track_caller]
fn null_arithmetic(call: &str, n: isize) -> ! {
    panic!("upcxx::{call}: cannot offset a null pointer by {n} elements")
}

#[cold]
#[track_caller]
fn address_overflow(call: &str, rank: Rank, addr: usize) -> ! {
    panic!("upcxx::{call}: the address overflows (rank {rank}, {addr:#x})")
}
