//! Puts (UPC++ spec §8.2.1): of a value ([`rput`]), of a slice the caller lends for
//! the call ([`rput_slice`]), and from memory lent beyond it ([`rput_vec`],
//! [`rput_raw`]). The module documentation of [`crate::rma`] says how they
//! travel and complete.

use std::marker::PhantomData;

use bytemuck::NoUninit;

use super::{check_range, done_here, target, too_long};
use crate::completion::{
    self, operation_cx, Armed, CompletionEvents, Completions, FutureList, HasOperation, HasRemote,
    HasSource, Returned,
};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
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

/// The completion events of [`rput_vec_with`]: remote and operation, producing the
/// vector lent. No source completion: the vector comes back with operation completion.
#[derive(Debug)]
pub struct RputVec<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for RputVec<T> {
    const NAME: &'static str = "rput_vec";
    type OpValues = (Vec<T>,);
}
impl<T: 'static> HasRemote for RputVec<T> {}
impl<T: 'static> HasOperation for RputVec<T> {}

/// The completion events of [`rput_raw_with`] (§8.2.1 ¶11–¶13): source, remote and
/// operation, no values.
#[derive(Debug)]
pub enum RputRaw {}

impl CompletionEvents for RputRaw {
    const NAME: &'static str = "rput_raw";
    type OpValues = ();
}
impl HasSource for RputRaw {}
impl HasRemote for RputRaw {}
impl HasOperation for RputRaw {}

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
    cxs.check_armable();
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
    cxs.check_armable();
    let event = put("rput_slice", rank, addr, bytemuck::cast_slice(src));
    finish_put(cxs, rank, event)
}

/// Writes the elements of `src` to `src.len()` consecutive elements starting at `dest`
/// (UPC++ `rput(src, dest, count)`, §8.2.1, from a buffer lent to the operation), with
/// the default completion: a future of the vector, given back at operation completion.
///
/// Unlike [`rput_slice`], whose source is borrowed for the call only, the vector is
/// the operation's until it completes: to a segment this process does not map
/// (another host) the call neither copies it nor waits for it to be read, however
/// large it is, and the put overlaps the caller's work and other transfers.
///
/// ```
/// # upcxx::init();
/// # let gp = upcxx::new_array::<f64>(4);
/// let mut halo = vec![0.5f64; 4];
/// for step in 0..3 {
///     halo.fill(f64::from(step));
///     halo = upcxx::rput_vec(halo, gp).wait();
/// }
/// assert_eq!(upcxx::rget(gp.add(3)).wait(), 2.0);
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// # Panics
/// If `dest` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub fn rput_vec<T: NoUninit>(src: Vec<T>, dest: GlobalPtr<T>) -> Future<Vec<T>> {
    rput_vec_with(src, dest, operation_cx::as_future())
}

/// [`rput_vec`] with completions: `remote_cx` and `operation_cx` requests, at least one
/// of them (§7.2.1 ¶2); a promise must be a `Promise<Vec<T>>` and an LPC callback must
/// take the `Vec<T>`. No source completion is provided: the vector comes back with
/// operation completion (with remote completion alone, it is dropped then).
///
/// # Panics
/// As [`rput_vec`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub fn rput_vec_with<T: NoUninit, C: Completions<RputVec<T>>>(
    src: Vec<T>,
    dest: GlobalPtr<T>,
    cxs: C,
) -> Returned<C, RputVec<T>> {
    const {
        assert!(
            completion::requests_op_or_remote::<RputVec<T>, C>(),
            "rput_vec needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rput_vec", dest);
    let rt = rt("rput_vec");
    let len = std::mem::size_of_val(src.as_slice());
    if let Some(to) = rt.direct_range(rank, addr, len) {
        return done_here(cxs, rank, move || {
            // SAFETY: `[to, to + len)` is inside the mapping of `rank`'s segment
            // (`Setup::direct_range`); `src` holds `len` bytes.
            unsafe { std::ptr::copy(src.as_ptr().cast::<u8>(), to as *mut u8, len) };
            (src,)
        });
    }
    put_later(rt, "rput_vec", rank, addr, len, cxs, move || {
        let (ptr, give_back) = super::lend(src);
        (ptr.cast_const().cast::<u8>(), move || (give_back(),))
    })
}

/// Writes `count` elements read through `src` to consecutive elements starting at
/// `dest` (UPC++ `rput(T const* src, global_ptr<T> dest, size_t count)`, §8.2.1, with
/// its raw source pointer), with the default completion: the future of operation
/// completion. To a segment this process does not map (another host) the call returns
/// without copying the source or waiting for it to be read, as in C++; source
/// completion (`source_cx`, through [`rput_raw_with`]) says when it may be reused.
///
/// [`rput_vec`] does the same safely, lending an owned vector; [`rput_slice`] borrows
/// its source for the call.
///
/// # Safety
/// `src` must be non-null, properly aligned and valid for reads of `count` elements of
/// `T`, and nothing may write or free that memory until source completion, which
/// happens no later than operation completion: until the future is ready (the promise
/// fulfilled, the LPC run) of the source completion requested, or else of the
/// operation's. A program that drops the future must learn of the completion in another
/// way before it touches the memory again.
///
/// # Panics
/// If `dest` is null or the range is outside its owner's segment, or before `init`.
#[inline]
#[track_caller]
pub unsafe fn rput_raw<T: NoUninit>(src: *const T, count: usize, dest: GlobalPtr<T>) -> Future<()> {
    // SAFETY: the caller's obligations are this call's.
    unsafe { rput_raw_with(src, count, dest, operation_cx::as_future()) }
}

/// [`rput_raw`] with completions: `source_cx`, `remote_cx` and `operation_cx` requests,
/// with operation or remote completion among them (§7.2.1 ¶2). Source completion is
/// notified once the put has read `src`, which may be before its operation completes:
///
/// ```
/// # use upcxx::{operation_cx, source_cx};
/// # upcxx::init();
/// # let gp = upcxx::new_array::<u64>(1024);
/// let mut block = vec![7u64; 1024];
/// // SAFETY: `block` is neither written nor dropped before `sent` is ready.
/// let (sent, done) = unsafe {
///     upcxx::rput_raw_with(
///         block.as_ptr(),
///         block.len(),
///         gp,
///         source_cx::as_future() | operation_cx::as_future(),
///     )
/// };
/// sent.wait();
/// block.fill(0); // the source may be reused from here on
/// done.wait();
/// assert_eq!(upcxx::rget(gp.add(1023)).wait(), 7);
/// # upcxx::delete_array(gp);
/// # upcxx::finalize();
/// ```
///
/// # Safety
/// As [`rput_raw`], until source completion.
///
/// # Panics
/// As [`rput_raw`], or if an `as_promise` request's promise is already ready.
#[inline]
#[track_caller]
pub unsafe fn rput_raw_with<T: NoUninit, C: Completions<RputRaw>>(
    src: *const T,
    count: usize,
    dest: GlobalPtr<T>,
    cxs: C,
) -> Returned<C, RputRaw> {
    const {
        assert!(
            completion::requests_op_or_remote::<RputRaw, C>(),
            "rput_raw needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let (rank, addr) = target("rput_raw", dest);
    let rt = rt("rput_raw");
    let Some(len) = count.checked_mul(size_of::<T>()) else {
        too_long("rput_raw", count)
    };
    if let Some(to) = rt.direct_range(rank, addr, len) {
        return done_here(cxs, rank, || {
            // SAFETY: `[to, to + len)` is inside the mapping of `rank`'s segment
            // (`Setup::direct_range`); `src` is valid for `len` bytes of reads (the
            // caller's obligation).
            unsafe { std::ptr::copy(src.cast::<u8>(), to as *mut u8, len) }
        });
    }
    put_later(rt, "rput_raw", rank, addr, len, cxs, || {
        (src.cast::<u8>(), || ())
    })
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
        // SAFETY: with `Lc::Now` the put has finished reading `bytes` when it returns,
        // so the borrow covers every access to the source.
        _ => unsafe { put_through_gex(rt, rank, addr, bytes, gex::Lc::Now) },
    }
}

/// # Safety
/// `bytes` must stay valid, and unwritten, until the put's local completion as `lc`
/// reports it.
#[inline(never)]
#[track_caller]
unsafe fn put_through_gex(
    rt: &Setup,
    rank: Rank,
    addr: usize,
    bytes: &[u8],
    lc: gex::Lc<'_>,
) -> gex::Event {
    // The argument lists are built only when a tool is attached (inside the macros).
    let span = gasp::span!(
        GASP_UPC_NB_PUT_INIT,
        1,
        gasp::GPtr::new(rank, addr),
        bytes.as_ptr() as usize,
        bytes.len()
    );
    // SAFETY: the caller's obligation.
    let started = unsafe { rt.team.put_nb(rank, addr, bytes, lc, gex::Flags::NONE) };
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
/// whose operation completion `event` stands for. The caller checked `cxs`
/// ([`Completions::check_armable`]) before the put moved any data, so that a request
/// that fails moves nothing.
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

/// A put of `len` bytes to `[addr, ..)` at `rank` through `gex`, from memory that
/// outlives the call: it may complete, and even read its source, after the call
/// returns (to a segment on another host), and `cxs` are notified from progress as it
/// does: source completion once the put's local completion is seen, then remote and
/// operation completion with the values of `take`. Out of line, as
/// [`put_through_gex`].
///
/// The range is checked, and the completions armed (a request that fails, a promise
/// already ready, leaves nothing behind), before `lend` gives the source (valid for
/// `len` bytes of reads, and written by nothing until `take` runs) and `take`, which
/// runs at operation completion; if the job ends with the put in flight, it never runs,
/// so a buffer it would free is leaked rather than freed under a transfer that may
/// still read it.
#[inline(never)]
#[track_caller]
fn put_later<Ev, C, V>(
    rt: &Setup,
    call: &str,
    rank: Rank,
    addr: usize,
    len: usize,
    cxs: C,
    lend: impl FnOnce() -> (*const u8, V),
) -> Returned<C, Ev>
where
    Ev: CompletionEvents,
    C: Completions<Ev>,
    V: FnOnce() -> Ev::OpValues + 'static,
{
    check_range(call, rt, rank, addr, len);
    let (futures, mut armed) = cxs.arm();
    let (src, take) = lend();
    let mut lc = gex::Event::invalid();
    // Source completion asked for at return: the put is locally complete when it
    // returns (gex copies or waits), `lc` staying invalid.
    let lc_opt = if C::SOURCE_AT_RETURN {
        gex::Lc::Now
    } else {
        gex::Lc::Event(&mut lc)
    };
    // SAFETY: `src` is valid for `len` bytes of reads, unwritten until `take` runs
    // (`lend`'s contract), which is after local completion: `lc` is tested first.
    let mut event = unsafe {
        let bytes = std::slice::from_raw_parts(src, len);
        put_through_gex(rt, rank, addr, bytes, lc_opt)
    };
    if event.is_invalid() {
        armed.source_done();
        armed.remote_done(rank);
        armed.operation_done(take());
        return futures.into_return();
    }
    completion::notify_when_outgoing_from_source(
        move || lc.test(),
        move || event.test(),
        rank,
        armed,
        take,
    );
    futures.into_return()
}
