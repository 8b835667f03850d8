//! Gets (UPC++ spec §8.2.2): into a value or vector the operation makes ([`rget`],
//! [`rget_vec`]), and into memory the caller lends ([`rget_into`]). The module
//! documentation of [`crate::rma`] says how they travel and complete.

use std::marker::PhantomData;

use bytemuck::{AnyBitPattern, CheckedBitPattern, Pod, Zeroable};

use super::{check_range, done_here, target, too_long};
use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, Returned,
};
use crate::future::{fits_cell, Future, ReplyCell};
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::{rt, Rank, Setup};
use crate::thread;

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

/// The completion events of [`rget_into_vec_with`] (§8.2.2 ¶10): operation, producing
/// the vector lent.
#[derive(Debug)]
pub struct RgetIntoVec<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for RgetIntoVec<T> {
    const NAME: &'static str = "rget_into_vec";
    type OpValues = (Vec<T>,);
}
impl<T: 'static> HasOperation for RgetIntoVec<T> {}

/// The completion events of [`rget_into_raw_with`] (§8.2.2 ¶10): operation, no values.
#[derive(Debug)]
pub enum RgetIntoRaw {}

impl CompletionEvents for RgetIntoRaw {
    const NAME: &'static str = "rget_into_raw";
    type OpValues = ();
}
impl HasOperation for RgetIntoRaw {}

/// The completion events of [`rget_into_with`] (§8.2.2 ¶10): operation, no values.
#[derive(Debug)]
pub enum RgetInto {}

impl CompletionEvents for RgetInto {
    const NAME: &'static str = "rget_into";
    type OpValues = ();
}
impl HasOperation for RgetInto {}

/// Reads the value at `src` (UPC++ `rget(global_ptr<T> src)`, §8.2.2), with the default
/// completion: a future of the value.
///
/// # Panics
/// If `src` is null or outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rget<T: CheckedBitPattern + 'static>(src: GlobalPtr<T>) -> Future<T> {
    if !fits_cell::<T>() {
        return rget_with(src, operation_cx::as_future());
    }
    // `rget_with`'s paths for a future, but a get through `gex` lands in the future's
    // reply cell: no buffer, promise or state of its own.
    let (rank, addr) = target("rget", src);
    let rt = rt("rget");
    match rt.direct_range(rank, addr, size_of::<T>()) {
        Some(from) => Future::after_progress(read_direct::<T>(from)),
        None => rget_into_cell(rt, rank, addr),
    }
}

/// The value at `from`, which lies inside the mapping of a segment.
#[inline(always)]
#[track_caller]
fn read_direct<T: CheckedBitPattern + 'static>(from: usize) -> T {
    let mut bits = T::Bits::zeroed();
    // SAFETY: the source range is inside the mapping of a segment
    // (`Setup::direct_range`); `bits` is a local of `size_of::<T>()` bytes, any of
    // which make a `T::Bits`.
    unsafe {
        std::ptr::copy(
            from as *const u8,
            (&raw mut bits).cast::<u8>(),
            size_of::<T>(),
        )
    };
    valid::<T>("rget", bits)
}

/// [`rget`] through `gex` (from another host, or while a GASP tool is attached) of a
/// `T` that fits a reply cell: the get writes into the cell of the future it returns,
/// and its completion, found by a test at each user-level progress, delivers the value
/// there (checked as a `T`), ready at the next one. The cell is freed only by that
/// delivery (a dropped future leaves it to the value), so the get never writes into a
/// cell that holds something else.
#[inline(never)]
#[track_caller]
fn rget_into_cell<T: CheckedBitPattern + 'static>(
    rt: &Setup,
    rank: Rank,
    addr: usize,
) -> Future<T> {
    check_range("rget", rt, rank, addr, size_of::<T>());
    let cell = ReplyCell::claim();
    // SAFETY: a fresh cell, which only the completion below fills, with a `T`.
    let future = unsafe { Future::from_cell(cell) };
    let dest = cell.storage();
    // SAFETY: the cell's storage holds a `T` (`fits_cell`), and nothing reads or frees
    // it before the event says the get is complete (below).
    let mut event = unsafe { start_get(rt, rank, addr, dest, size_of::<T>()) };
    thread::track_outgoing(Box::new(move || {
        if !event.test() {
            return false;
        }
        // SAFETY: the get is complete: the storage holds the bits it read, and the cell
        // was claimed for this `T` and has no value yet.
        unsafe {
            let bits = dest.cast::<T::Bits>().read_unaligned();
            cell.deliver(|| valid::<T>("rget", bits));
        }
        true
    }));
    future
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
    cxs.completed_at_initiation(rank, (read_direct::<T>(from),))
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
/// The data are in `dest` when the call returns (see the [module documentation](crate::rma)),
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
    cxs.check_armable();
    get("rget_into", bytemuck::cast_slice_mut(dest), rank, addr);
    cxs.completed_at_initiation(rank, ()).into_return()
}

/// Reads `buf.len()` consecutive elements starting at `src` into `buf`, which the
/// operation owns until it completes, and gives it back: the form of UPC++ `rget(src,
/// dest, count)` (§8.2.2) that reuses a buffer, with the default completion, a future
/// of the buffer. As for [`rget_vec`], from a segment this process does not map
/// (another host) the call returns with the transfer in flight, so that gets overlap
/// one another and the caller's work; unlike it, no buffer is allocated.
///
/// ```
/// # upcxx::init();
/// # let gp = upcxx::new_array::<u64>(4);
/// let mut halo = vec![0u64; 4];
/// for _ in 0..3 {
///     halo = upcxx::rget_into_vec(gp, halo).wait();
/// }
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// # Panics
/// If `src` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rget_into_vec<T: Pod>(src: GlobalPtr<T>, buf: Vec<T>) -> Future<Vec<T>> {
    rget_into_vec_with(src, buf, operation_cx::as_future())
}

/// [`rget_into_vec`] with completions: `operation_cx` requests only, at least one; a
/// promise must be a `Promise<Vec<T>>` and an LPC callback must take the `Vec<T>`.
///
/// # Panics
/// As [`rget_into_vec`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rget_into_vec_with<T: Pod, C: Completions<RgetIntoVec<T>>>(
    src: GlobalPtr<T>,
    mut buf: Vec<T>,
    cxs: C,
) -> Returned<C, RgetIntoVec<T>> {
    const {
        assert!(
            completion::requests_op_or_remote::<RgetIntoVec<T>, C>(),
            "rget_into_vec needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rget_into_vec", src);
    let rt = rt("rget_into_vec");
    // The bytes of an existing vector: the product does not overflow.
    let len = buf.len() * size_of::<T>();
    let Some(from) = rt.direct_range(rank, addr, len) else {
        return get_later(rt, "rget_into_vec", rank, addr, len, cxs, move || {
            let (ptr, give_back) = super::lend(buf);
            (ptr.cast::<u8>(), move || (give_back(),))
        });
    };
    done_here(cxs, rank, move || {
        // SAFETY: the source range is inside the mapping of `rank`'s segment
        // (`Setup::direct_range`); `buf` holds `len` bytes, any of which make a `T`
        // (`Pod`).
        unsafe { std::ptr::copy(from as *const u8, buf.as_mut_ptr().cast::<u8>(), len) };
        (buf,)
    })
}

/// Reads `count` consecutive elements starting at `src` into `dest` (UPC++ `rget(src,
/// dest, count)`, §8.2.2, with its raw destination pointer), with the default
/// completion: the future of operation completion. From a segment this process does not
/// map (another host) the call returns with the transfer in flight, as in C++.
///
/// [`rget_into_vec`] does the same safely, lending an owned buffer; [`rget_into`]
/// borrows its destination and is complete on return.
///
/// # Safety
/// `dest` must be non-null, properly aligned and valid for writes of `count` elements
/// of `T`, and nothing may read, write or free that memory until operation completion
/// is notified (the future is ready, the promise fulfilled or the LPC run). A program
/// that drops the future must learn of the completion in another way before it
/// touches the memory again.
///
/// # Panics
/// If `src` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub unsafe fn rget_into_raw<T: Pod>(src: GlobalPtr<T>, dest: *mut T, count: usize) -> Future<()> {
    // SAFETY: the caller's obligations are this call's.
    unsafe { rget_into_raw_with(src, dest, count, operation_cx::as_future()) }
}

/// [`rget_into_raw`] with completions: `operation_cx` requests only, at least one.
///
/// # Safety
/// As [`rget_into_raw`], until every requested operation completion is notified.
///
/// # Panics
/// As [`rget_into_raw`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub unsafe fn rget_into_raw_with<T: Pod, C: Completions<RgetIntoRaw>>(
    src: GlobalPtr<T>,
    dest: *mut T,
    count: usize,
    cxs: C,
) -> Returned<C, RgetIntoRaw> {
    const {
        assert!(
            completion::requests_op_or_remote::<RgetIntoRaw, C>(),
            "rget_into_raw needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rget_into_raw", src);
    let rt = rt("rget_into_raw");
    let Some(len) = count.checked_mul(size_of::<T>()) else {
        too_long("rget_into_raw", count)
    };
    let Some(from) = rt.direct_range(rank, addr, len) else {
        return get_later(rt, "rget_into_raw", rank, addr, len, cxs, || {
            (dest.cast::<u8>(), || ())
        });
    };
    done_here(cxs, rank, || {
        // SAFETY: the source range is inside the mapping of `rank`'s segment
        // (`Setup::direct_range`); `dest` is valid for `len` bytes of writes (the
        // caller's obligation).
        unsafe { std::ptr::copy(from as *const u8, dest.cast::<u8>(), len) }
    })
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

/// Fills `dest` from `[addr, addr + dest.len())` at `rank`; complete on return. As for
/// [`super::put`], a copy made here from a segment this process maps when no tool is attached.
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
/// the operation owns, allocated here: see [`get_later`], whose `take` hands the buffer
/// to `finish`.
#[inline]
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
    get_later(rt, call, rank, addr, count * size_of::<T>(), cxs, || {
        // A raw pointer, not a `Box` held across the transfer: the transfer writes
        // through it while the closure owns it.
        let buf: *mut [T] = Box::into_raw(vec![T::zeroed(); count].into_boxed_slice());
        let take = move || {
            // SAFETY: called once, when the get is complete; `buf` came from
            // `Box::into_raw` and nothing writes it any more.
            finish(unsafe { Box::from_raw(buf) })
        };
        (buf.cast::<u8>(), take)
    })
}

/// A get of `len` bytes from `[addr, ..)` at `rank` through `gex`, into memory that
/// outlives the call: it may complete after the call returns (from a segment on another
/// host), and `cxs` are notified from progress once it has, with the values of `take`
/// (§8.2.2: gets are non-blocking). Out of line, as [`get_through_gex`].
///
/// The range is checked, and the completions armed (a request that fails, a promise
/// already ready, leaves nothing behind), before `lend` gives the destination (valid for
/// `len` bytes of writes, and touched by nothing else until `take` runs) and `take`.
/// `take` runs once the get's event says it is complete; if the job ends with the get
/// still in flight, it never runs, so a buffer it would free is leaked rather than freed
/// under a transfer that may still write into it.
#[inline(never)]
#[track_caller]
fn get_later<Ev, C, V>(
    rt: &Setup,
    call: &str,
    rank: Rank,
    addr: usize,
    len: usize,
    cxs: C,
    lend: impl FnOnce() -> (*mut u8, V),
) -> Returned<C, Ev>
where
    Ev: CompletionEvents,
    C: Completions<Ev>,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    // Checked before a buffer is allocated, so that a count far too large fails here
    // (naming the range) rather than in the allocator.
    check_range(call, rt, rank, addr, len);
    let (futures, armed) = cxs.arm();
    let (dest, take) = lend();
    // SAFETY: `dest` is valid for `len` bytes of writes, and nothing reads or frees it
    // before the event says the get is complete (below).
    let mut event = unsafe { start_get(rt, rank, addr, dest, len) };
    completion::notify_when_outgoing(move || event.test(), rank, armed, take);
    futures.into_return()
}

/// Starts a get of `len` bytes from `[addr, ..)` at `rank` (a checked range) into
/// `dest` through `gex`, reported as GASP's non-blocking get initiation.
///
/// # Safety
/// `dest` must be valid for `len` bytes of writes, and not be read or freed until the
/// event says the get is complete.
#[inline(always)]
#[track_caller]
unsafe fn start_get(rt: &Setup, rank: Rank, addr: usize, dest: *mut u8, len: usize) -> gex::Event {
    let span = gasp::span!(
        GASP_UPC_NB_GET_INIT,
        1,
        dest as usize,
        gasp::GPtr::new(rank, addr),
        len
    );
    // SAFETY: the caller's guarantee.
    let started = unsafe { rt.team.get_nb(dest, rank, addr, len, gex::Flags::NONE) };
    let event = match started {
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
    event
}
