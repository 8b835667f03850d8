//! The non-contiguous calls with local runs lent beyond the call (UPC++ spec ch. 15, as
//! C++ calls them: with pointers the caller keeps valid): `rput_irregular_lent`,
//! `rget_irregular_lent`, `rput_regular_lent`, `rget_regular_lent`, `rput_strided_lent`,
//! `rget_strided_lent`, and their `_with` forms.
//!
//! Each takes the arguments of the call of its name without `_lent`, but its local runs
//! are slices the transfer may read (a put) or write (a get) after the call returns:
//! to a rank whose segment this process does not map (another host), a put returns
//! before it has read its source and a get before it has filled its destination, so
//! that transfers overlap one another and the caller's work. The calls are unsafe: the
//! caller keeps that memory valid, and leaves it alone, until the completion notified
//! says the transfer is done with it (source completion for a put, operation
//! completion for a get; a put's source completion is notified with its operation
//! completion). The completions are armed before the transfer starts, so a request
//! that fails (a promise already ready) leaves no transfer behind; a call that then
//! fails its checks (and whose panic the program catches) gives back what arming took,
//! so that a promise it was given does not wait for a transfer that never started.
//!
//! ```
//! # upcxx::init();
//! # let grid = upcxx::new_array::<f64>(64);
//! // Two columns of an 8×8 grid of another rank, in flight together.
//! let mut west = [0.0f64; 8];
//! let mut east = [0.0f64; 8];
//! // SAFETY: `west` and `east` are left alone until the futures are ready.
//! let (w, e) = unsafe {
//!     (
//!         upcxx::rget_strided_lent::<1, f64>(grid, [64], &mut west, 0, [8], [8]),
//!         upcxx::rget_strided_lent::<1, f64>(grid.add(7), [64], &mut east, 0, [8], [8]),
//!     )
//! };
//! upcxx::when_all((w, e)).wait();
//! # upcxx::delete_array(grid);
//! # upcxx::finalize();
//! ```

use bytemuck::{NoUninit, Pod};

use super::{
    irregular, regular, strided, Lend, RemoteRun, RgetIrregularLent, RgetRegularLent,
    RgetStridedLent, RputIrregularLent, RputRegularLent, RputStridedLent,
};
use crate::completion::{self, operation_cx, CompletionEvents, Completions, FutureList, Returned};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::Rank;

/// Arms `cxs`, then starts the put (`start`: its target and operation event, `gex`
/// reading the runs until the operation completes), and notifies source, remote and
/// operation completion once the event completes.
#[track_caller]
fn put_lent<Ev, C>(cxs: C, start: impl FnOnce() -> (Rank, gex::Event)) -> Returned<C, Ev>
where
    Ev: CompletionEvents<OpValues = ()>,
    C: Completions<Ev>,
{
    let (futures, armed) = cxs.arm();
    let (armed, (rank, mut event)) = completion::start_armed(armed, start);
    if C::SOURCE_AT_RETURN {
        // The runs are read until the operation completes: source completion before
        // return (§7.1 ¶11–¶12) waits for it.
        crate::progress::wait_internal(std::mem::take(&mut event));
    }
    completion::notify_when_outgoing_from_source(move || event.test(), || true, rank, armed, || ());
    futures.into_return()
}

/// Arms `cxs`, then starts the get (`start`: its target and event), and notifies
/// operation completion once the event completes.
#[track_caller]
fn get_lent<Ev, C>(cxs: C, start: impl FnOnce() -> (Rank, gex::Event)) -> Returned<C, Ev>
where
    Ev: CompletionEvents<OpValues = ()>,
    C: Completions<Ev>,
{
    let (futures, armed) = cxs.arm();
    let (armed, (rank, mut event)) = completion::start_armed(armed, start);
    completion::notify_when_outgoing(move || event.test(), rank, armed, || ());
    futures.into_return()
}

/// [`rput_irregular`](super::rput_irregular) from source runs lent beyond the call,
/// with the default completion: a future of operation completion.
///
/// # Safety
/// The memory of every source run must stay valid, and nothing may write or free it,
/// until source completion, which happens no later than operation completion (here,
/// until the future is ready).
///
/// # Panics
/// As [`rput_irregular`](super::rput_irregular).
#[track_caller]
pub unsafe fn rput_irregular_lent<'a, T, S, D>(src_runs: S, dest_runs: D) -> Future<()>
where
    T: NoUninit,
    S: IntoIterator<Item = &'a [T]>,
    D: IntoIterator,
    D::Item: RemoteRun<T>,
{
    // SAFETY: the caller's obligations are this call's.
    unsafe { rput_irregular_lent_with(src_runs, dest_runs, operation_cx::as_future()) }
}

/// [`rput_irregular_lent`] with completions: those of
/// [`rput_irregular_with`](super::rput_irregular_with), source completion notified with
/// operation completion (the transfer may read the runs until then).
///
/// # Safety
/// As [`rput_irregular_lent`], until source completion (or, if none is requested,
/// operation completion) is notified.
///
/// # Panics
/// As [`rput_irregular_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rput_irregular_lent_with<'a, T, S, D, C>(
    src_runs: S,
    dest_runs: D,
    cxs: C,
) -> Returned<C, RputIrregularLent>
where
    T: NoUninit,
    S: IntoIterator<Item = &'a [T]>,
    D: IntoIterator,
    D::Item: RemoteRun<T>,
    C: Completions<RputIrregularLent>,
{
    const CALL: &str = "rput_irregular_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RputIrregularLent, C>(),
            "rput_irregular_lent needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    put_lent(cxs, || unsafe {
        irregular::put(CALL, src_runs, dest_runs, Lend::Beyond)
    })
}

/// [`rget_irregular`](super::rget_irregular) into destination runs lent beyond the
/// call, with the default completion: a future of operation completion.
///
/// # Safety
/// The memory of every destination run must stay valid, and nothing may read, write or
/// free it, until operation completion is notified (here, until the future is ready).
///
/// # Panics
/// As [`rget_irregular`](super::rget_irregular).
#[track_caller]
pub unsafe fn rget_irregular_lent<'a, T, S, D>(src_runs: S, dest_runs: D) -> Future<()>
where
    T: Pod,
    S: IntoIterator,
    S::Item: RemoteRun<T>,
    D: IntoIterator<Item = &'a mut [T]>,
{
    // SAFETY: the caller's obligations are this call's.
    unsafe { rget_irregular_lent_with(src_runs, dest_runs, operation_cx::as_future()) }
}

/// [`rget_irregular_lent`] with completions: `operation_cx` requests only.
///
/// # Safety
/// As [`rget_irregular_lent`], until every requested operation completion is notified.
///
/// # Panics
/// As [`rget_irregular_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rget_irregular_lent_with<'a, T, S, D, C>(
    src_runs: S,
    dest_runs: D,
    cxs: C,
) -> Returned<C, RgetIrregularLent>
where
    T: Pod,
    S: IntoIterator,
    S::Item: RemoteRun<T>,
    D: IntoIterator<Item = &'a mut [T]>,
    C: Completions<RgetIrregularLent>,
{
    const CALL: &str = "rget_irregular_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetIrregularLent, C>(),
            "rget_irregular_lent needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    get_lent(cxs, || unsafe {
        irregular::get(CALL, src_runs, dest_runs, Lend::Beyond)
    })
}

/// [`rput_regular`](super::rput_regular) from source runs lent beyond the call, with
/// the default completion.
///
/// # Safety
/// As [`rput_irregular_lent`].
///
/// # Panics
/// As [`rput_regular`](super::rput_regular).
#[track_caller]
pub unsafe fn rput_regular_lent<'a, T, S, D>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
) -> Future<()>
where
    T: NoUninit,
    S: IntoIterator<Item = &'a [T]>,
    D: IntoIterator<Item = GlobalPtr<T>>,
{
    // SAFETY: the caller's obligations are this call's.
    unsafe {
        rput_regular_lent_with(
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            operation_cx::as_future(),
        )
    }
}

/// [`rput_regular_lent`] with completions, as for [`rput_irregular_lent_with`].
///
/// # Safety
/// As [`rput_irregular_lent_with`].
///
/// # Panics
/// As [`rput_regular_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rput_regular_lent_with<'a, T, S, D, C>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    cxs: C,
) -> Returned<C, RputRegularLent>
where
    T: NoUninit,
    S: IntoIterator<Item = &'a [T]>,
    D: IntoIterator<Item = GlobalPtr<T>>,
    C: Completions<RputRegularLent>,
{
    const CALL: &str = "rput_regular_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RputRegularLent, C>(),
            "rput_regular_lent needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    put_lent(cxs, || unsafe {
        regular::put(
            CALL,
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            Lend::Beyond,
        )
    })
}

/// [`rget_regular`](super::rget_regular) into destination runs lent beyond the call,
/// with the default completion.
///
/// # Safety
/// As [`rget_irregular_lent`].
///
/// # Panics
/// As [`rget_regular`](super::rget_regular).
#[track_caller]
pub unsafe fn rget_regular_lent<'a, T, S, D>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
) -> Future<()>
where
    T: Pod,
    S: IntoIterator<Item = GlobalPtr<T>>,
    D: IntoIterator<Item = &'a mut [T]>,
{
    // SAFETY: the caller's obligations are this call's.
    unsafe {
        rget_regular_lent_with(
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            operation_cx::as_future(),
        )
    }
}

/// [`rget_regular_lent`] with completions: `operation_cx` requests only.
///
/// # Safety
/// As [`rget_irregular_lent_with`].
///
/// # Panics
/// As [`rget_regular_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rget_regular_lent_with<'a, T, S, D, C>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    cxs: C,
) -> Returned<C, RgetRegularLent>
where
    T: Pod,
    S: IntoIterator<Item = GlobalPtr<T>>,
    D: IntoIterator<Item = &'a mut [T]>,
    C: Completions<RgetRegularLent>,
{
    const CALL: &str = "rget_regular_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetRegularLent, C>(),
            "rget_regular_lent needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    get_lent(cxs, || unsafe {
        regular::get(
            CALL,
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            Lend::Beyond,
        )
    })
}

/// [`rput_strided`](super::rput_strided) from a source lent beyond the call, with the
/// default completion.
///
/// # Safety
/// The memory of `src` must stay valid, and nothing may write or free it, until source
/// completion, which happens no later than operation completion (here, until the future
/// is ready).
///
/// # Panics
/// As [`rput_strided`](super::rput_strided).
#[track_caller]
pub unsafe fn rput_strided_lent<const DIM: usize, T: NoUninit>(
    src: &[T],
    src_base: usize,
    src_strides: [isize; DIM],
    dest_base: GlobalPtr<T>,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
) -> Future<()> {
    // SAFETY: the caller's obligations are this call's.
    unsafe {
        rput_strided_lent_with(
            src,
            src_base,
            src_strides,
            dest_base,
            dest_strides,
            extents,
            operation_cx::as_future(),
        )
    }
}

/// [`rput_strided_lent`] with completions: those of
/// [`rput_strided_with`](super::rput_strided_with), source completion notified with
/// operation completion (the transfer may read `src` until then).
///
/// # Safety
/// As [`rput_strided_lent`], until source completion (or, if none is requested,
/// operation completion) is notified.
///
/// # Panics
/// As [`rput_strided_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rput_strided_lent_with<const DIM: usize, T: NoUninit, C>(
    src: &[T],
    src_base: usize,
    src_strides: [isize; DIM],
    dest_base: GlobalPtr<T>,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    cxs: C,
) -> Returned<C, RputStridedLent>
where
    C: Completions<RputStridedLent>,
{
    const CALL: &str = "rput_strided_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RputStridedLent, C>(),
            "rput_strided_lent needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    put_lent(cxs, || unsafe {
        strided::put(
            CALL,
            src,
            src_base,
            src_strides,
            dest_base,
            dest_strides,
            extents,
            Lend::Beyond,
        )
    })
}

/// [`rget_strided`](super::rget_strided) into a destination lent beyond the call, with
/// the default completion.
///
/// # Safety
/// The memory of `dest` must stay valid, and nothing may read, write or free it, until
/// operation completion is notified (here, until the future is ready).
///
/// # Panics
/// As [`rget_strided`](super::rget_strided).
#[track_caller]
pub unsafe fn rget_strided_lent<const DIM: usize, T: Pod>(
    src_base: GlobalPtr<T>,
    src_strides: [isize; DIM],
    dest: &mut [T],
    dest_base: usize,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
) -> Future<()> {
    // SAFETY: the caller's obligations are this call's.
    unsafe {
        rget_strided_lent_with(
            src_base,
            src_strides,
            dest,
            dest_base,
            dest_strides,
            extents,
            operation_cx::as_future(),
        )
    }
}

/// [`rget_strided_lent`] with completions: `operation_cx` requests only.
///
/// # Safety
/// As [`rget_strided_lent`], until every requested operation completion is notified.
///
/// # Panics
/// As [`rget_strided_lent`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub unsafe fn rget_strided_lent_with<const DIM: usize, T: Pod, C>(
    src_base: GlobalPtr<T>,
    src_strides: [isize; DIM],
    dest: &mut [T],
    dest_base: usize,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    cxs: C,
) -> Returned<C, RgetStridedLent>
where
    C: Completions<RgetStridedLent>,
{
    const CALL: &str = "rget_strided_lent";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetStridedLent, C>(),
            "rget_strided_lent needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    // SAFETY: the caller's obligations.
    get_lent(cxs, || unsafe {
        strided::get(
            CALL,
            src_base,
            src_strides,
            dest,
            dest_base,
            dest_strides,
            extents,
            Lend::Beyond,
        )
    })
}
