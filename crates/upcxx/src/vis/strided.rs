//! Strided puts and gets (§15.2.6–§15.2.7): one `gex` strided transfer with the
//! element as its contiguous unit and `Dim` stride levels.

use bytemuck::{NoUninit, Pod};

use super::{put_started, reported_get, reported_put, Kind, Lend, RgetStrided, RputStrided};
use crate::completion::{self, operation_cx, Completions, FutureList, Returned};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::rma::{finish_put, target};
use crate::runtime::state::{rt, Rank};

/// Panics naming `call` if the stride of a dimension that steps (its extent above 1)
/// is not a multiple of `T`'s alignment (every address of the shape must be a `T`'s,
/// §15.2.6 ¶2 and ¶4). The stride of a dimension of extent 0 or 1 enters no address
/// (its index is 0 or there is none), so any value is fine there.
#[track_caller]
fn check_strides<T>(call: &str, strides: &[isize], extents: &[usize]) {
    let align = std::mem::align_of::<T>() as isize;
    let stepping = strides.iter().zip(extents).filter(|&(_, &e)| e > 1);
    if let Some((s, _)) = stepping.into_iter().find(|&(&s, _)| s % align != 0) {
        panic!(
            "upcxx::{call}: the stride of {s} bytes is not a multiple of the alignment of \
             the element type ({align} bytes): the addresses would be misaligned"
        );
    }
}

/// The rank and address of the remote base of a shape: a null pointer names none, which
/// only a shape that moves nothing (an extent of 0) may have; it then counts as this
/// rank's, as a call with no run at all does (gex ignores the addresses of such a
/// shape).
#[track_caller]
fn shape_target<T>(call: &str, base: GlobalPtr<T>, extents: &[usize]) -> (Rank, usize) {
    if base.is_null() && extents.contains(&0) {
        (crate::rank_me(), 0)
    } else {
        target(call, base)
    }
}

/// The number of elements a shape of these extents holds, for GASP (`0` if it
/// overflows: `gex` refuses such a shape).
fn elements(extents: &[usize]) -> usize {
    extents
        .iter()
        .try_fold(1usize, |n, &e| n.checked_mul(e))
        .unwrap_or(0)
}

/// The byte offset of element `index` of a slice of `T`, or a panic naming `call`
/// (whether the shape around it fits the slice is `gex`'s check).
#[track_caller]
fn base_offset<T>(call: &str, index: usize) -> usize {
    index
        .checked_mul(std::mem::size_of::<T>())
        .unwrap_or_else(|| panic!("upcxx::{call}: the base element {index} overflows"))
}

/// Puts a `Dim`-dimensional section (UPC++ `rput_strided`, §15.2.6) with the default
/// completion: for every index vector `i` below `extents`, the element at byte offset
/// `dotprod(i, src_strides)` from `src[src_base]` goes to byte offset
/// `dotprod(i, dest_strides)` from `dest_base`. Strides may be negative or zero on the
/// source side and may transpose. `Dim == 0` puts the one element `src[src_base]`.
///
/// # Panics
/// As described in the [module documentation](super#errors); also if the shape around
/// `src[src_base]` leaves `src`.
#[track_caller]
pub fn rput_strided<const DIM: usize, T: NoUninit>(
    src: &[T],
    src_base: usize,
    src_strides: [isize; DIM],
    dest_base: GlobalPtr<T>,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
) -> Future<()> {
    rput_strided_with(
        src,
        src_base,
        src_strides,
        dest_base,
        dest_strides,
        extents,
        operation_cx::as_future(),
    )
}

/// [`rput_strided`] with completions (§15.2.6 ¶10–12): `source_cx`, `remote_cx` and
/// `operation_cx` requests, with operation or remote completion among them. Source
/// completion happens before the call returns.
///
/// # Panics
/// As [`rput_strided`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rput_strided_with<const DIM: usize, T: NoUninit, C: Completions<RputStrided>>(
    src: &[T],
    src_base: usize,
    src_strides: [isize; DIM],
    dest_base: GlobalPtr<T>,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    cxs: C,
) -> Returned<C, RputStrided> {
    const CALL: &str = "rput_strided";
    const {
        assert!(
            completion::requests_op_or_remote::<RputStrided, C>(),
            "rput_strided needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, event) = unsafe {
        put(
            CALL,
            src,
            src_base,
            src_strides,
            dest_base,
            dest_strides,
            extents,
            Lend::Call,
        )
    };
    finish_put(cxs, rank, event)
}

/// Starts the put of a strided call: its target and operation event (see
/// [`Lend::put_flags`]).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of `src` must stay valid, and unwritten, until the
/// put's operation completes.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub(super) unsafe fn put<const DIM: usize, T: NoUninit>(
    call: &str,
    src: &[T],
    src_base: usize,
    src_strides: [isize; DIM],
    dest_base: GlobalPtr<T>,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    lend: Lend,
) -> (Rank, gex::Event) {
    let rt = rt(call);
    check_strides::<T>(call, &src_strides, &extents);
    check_strides::<T>(call, &dest_strides, &extents);
    let (rank, addr) = shape_target(call, dest_base, &extents);
    let base = base_offset::<T>(call, src_base);
    let bytes: &[u8] = bytemuck::cast_slice(src);
    let elems = elements(&extents);
    let size = std::mem::size_of::<T>();
    let event = reported_put(
        rank,
        Kind::Strided,
        elems,
        elems.saturating_mul(size),
        || {
            // SAFETY: with `Lend::Call` the put is locally complete when `put_started`
            // returns, within the borrow of `src`; else the caller's obligation.
            put_started(lend, unsafe {
                rt.team.strided_put_nb(
                    rank,
                    addr,
                    &dest_strides,
                    bytes,
                    base,
                    &src_strides,
                    size,
                    &extents,
                    lend.put_flags(),
                )
            })
        },
    );
    (rank, event)
}

/// Gets a `Dim`-dimensional section (UPC++ `rget_strided`, §15.2.7) with the default
/// completion: the reverse of [`rput_strided`], from `src_base` on its owner into
/// `dest` around `dest[dest_base]`. The data are in place when the call returns.
///
/// # Panics
/// As described in the [module documentation](super#errors); also if the shape around
/// `dest[dest_base]` leaves `dest`.
#[track_caller]
pub fn rget_strided<const DIM: usize, T: Pod>(
    src_base: GlobalPtr<T>,
    src_strides: [isize; DIM],
    dest: &mut [T],
    dest_base: usize,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
) -> Future<()> {
    rget_strided_with(
        src_base,
        src_strides,
        dest,
        dest_base,
        dest_strides,
        extents,
        operation_cx::as_future(),
    )
}

/// [`rget_strided`] with completions (§15.2.7 ¶8): `operation_cx` requests only.
///
/// # Panics
/// As [`rget_strided`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rget_strided_with<const DIM: usize, T: Pod, C: Completions<RgetStrided>>(
    src_base: GlobalPtr<T>,
    src_strides: [isize; DIM],
    dest: &mut [T],
    dest_base: usize,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    cxs: C,
) -> Returned<C, RgetStrided> {
    const CALL: &str = "rget_strided";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetStrided, C>(),
            "rget_strided needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, _complete) = unsafe {
        get(
            CALL,
            src_base,
            src_strides,
            dest,
            dest_base,
            dest_strides,
            extents,
            Lend::Call,
        )
    };
    cxs.completed_at_initiation(rank, ()).into_return()
}

/// Starts the get of a strided call: its target and event (invalid with
/// [`Lend::Call`]: the get is complete).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of `dest` must stay valid, and untouched, until
/// the get's completion.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub(super) unsafe fn get<const DIM: usize, T: Pod>(
    call: &str,
    src_base: GlobalPtr<T>,
    src_strides: [isize; DIM],
    dest: &mut [T],
    dest_base: usize,
    dest_strides: [isize; DIM],
    extents: [usize; DIM],
    lend: Lend,
) -> (Rank, gex::Event) {
    let rt = rt(call);
    check_strides::<T>(call, &src_strides, &extents);
    check_strides::<T>(call, &dest_strides, &extents);
    let (rank, addr) = shape_target(call, src_base, &extents);
    let base = base_offset::<T>(call, dest_base);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dest);
    let elems = elements(&extents);
    let size = std::mem::size_of::<T>();
    let event = reported_get(
        rank,
        Kind::Strided,
        elems,
        elems.saturating_mul(size),
        || {
            let started = match lend {
                Lend::Call => rt
                    .team
                    .strided_get_blocking(
                        bytes,
                        base,
                        &dest_strides,
                        rank,
                        addr,
                        &src_strides,
                        size,
                        &extents,
                        gex::Flags::NONE,
                    )
                    .map(|()| gex::Event::invalid()),
                // SAFETY: the caller's obligation.
                Lend::Beyond => unsafe {
                    rt.team.strided_get_nb(
                        bytes,
                        base,
                        &dest_strides,
                        rank,
                        addr,
                        &src_strides,
                        size,
                        &extents,
                        gex::Flags::NONE,
                    )
                },
            };
            started.unwrap_or_else(|_| unreachable!("gex returns NoOp only for IMMEDIATE"))
        },
    );
    (rank, event)
}
