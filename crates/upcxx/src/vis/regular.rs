//! Regular puts and gets (§15.2.4–§15.2.5): sequences of runs of one length per side,
//! turned into one `gex` indexed transfer.

use bytemuck::{NoUninit, Pod};

use super::{
    bytes_of, check_totals, put_started, reported_get, reported_put, Affinity, Kind, Lend,
    RgetRegular, RputRegular,
};
use crate::completion::{self, operation_cx, Completions, FutureList, Returned};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::rma::finish_put;
use crate::runtime::state::{rt, Rank};

/// The remote runs of a regular call: their owner-space addresses, total and target.
#[track_caller]
fn remote_starts<T>(
    call: &str,
    runs: impl IntoIterator<Item = GlobalPtr<T>>,
    run_length: usize,
) -> (Vec<usize>, usize, Affinity) {
    let mut affinity = Affinity::default();
    let starts: Vec<usize> = runs
        .into_iter()
        .map(|gp| {
            affinity.run(call, gp, run_length);
            gp.owner_addr()
        })
        .collect();
    let total = starts
        .len()
        .checked_mul(run_length)
        .unwrap_or_else(|| panic!("upcxx::{call}: the remote runs' total overflows"));
    (starts, total, affinity)
}

/// Panics naming `call` unless every local run of a regular call has `run_length`
/// elements (§15.2.4 ¶7).
#[track_caller]
fn check_run_lengths(call: &str, lens: impl Iterator<Item = usize>, run_length: usize) {
    for len in lens {
        if len != run_length {
            panic!(
                "upcxx::{call}: a local run has {len} elements; every run of a regular call \
                 has the run length given ({run_length})"
            );
        }
    }
}

/// Puts `src_runs` (local slices of `src_run_length` elements each) to `dest_runs`
/// (global pointers to runs of `dest_run_length` elements) (UPC++ `rput_regular`,
/// §15.2.4) with the default completion. The totals must be equal.
///
/// # Panics
/// As described in the [module documentation](super#errors), or if a local run's
/// length is not `src_run_length`.
#[track_caller]
pub fn rput_regular<T, S, D>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
) -> Future<()>
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator<Item = GlobalPtr<T>>,
{
    rput_regular_with(
        src_runs,
        src_run_length,
        dest_runs,
        dest_run_length,
        operation_cx::as_future(),
    )
}

/// [`rput_regular`] with completions (§15.2.4 ¶10–12), as for
/// [`rput_irregular_with`](super::rput_irregular_with).
///
/// # Panics
/// As [`rput_regular`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rput_regular_with<T, S, D, C>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    cxs: C,
) -> Returned<C, RputRegular>
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator<Item = GlobalPtr<T>>,
    C: Completions<RputRegular>,
{
    const CALL: &str = "rput_regular";
    const {
        assert!(
            completion::requests_op_or_remote::<RputRegular, C>(),
            "rput_regular needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, event) = unsafe {
        put(
            CALL,
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            Lend::Call,
        )
    };
    finish_put(cxs, rank, event)
}

/// Starts the put of a regular call: its target and operation event (see
/// [`Lend::put_flags`]).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of the source runs must stay valid, and unwritten,
/// until the put's operation completes.
#[track_caller]
pub(super) unsafe fn put<T, S, D>(
    call: &str,
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    lend: Lend,
) -> (Rank, gex::Event)
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator<Item = GlobalPtr<T>>,
{
    let rt = rt(call);
    let src: Vec<S::Item> = src_runs.into_iter().collect();
    check_run_lengths(call, src.iter().map(|s| s.as_ref().len()), src_run_length);
    let pieces: Vec<&[u8]> = src
        .iter()
        .map(|s| bytemuck::cast_slice(s.as_ref()))
        .collect();
    let src_total = src
        .len()
        .checked_mul(src_run_length)
        .unwrap_or_else(|| panic!("upcxx::{call}: the source runs' total overflows"));
    let (dst, dst_total, affinity) = remote_starts(call, dest_runs, dest_run_length);
    check_totals(call, src_total, dst_total);
    let rank = affinity.rank(call);
    let runs = pieces.len() + dst.len();
    let (bytes, run_bytes) = (
        bytes_of::<T>(call, src_total),
        bytes_of::<T>(call, dest_run_length),
    );
    let event = reported_put(rank, Kind::Regular, runs, bytes, || {
        // SAFETY: with `Lend::Call` the put is locally complete when `put_started`
        // returns, within the borrow of `pieces`; else the caller's obligation.
        put_started(lend, unsafe {
            rt.team
                .indexed_put_nb(rank, &dst, run_bytes, &pieces, lend.put_flags())
        })
    });
    (rank, event)
}

/// Gets `src_runs` (global pointers to runs of `src_run_length` elements) into
/// `dest_runs` (local `&mut` slices of `dest_run_length` elements each) (UPC++
/// `rget_regular`, §15.2.5) with the default completion.
///
/// # Panics
/// As described in the [module documentation](super#errors), or if a local run's
/// length is not `dest_run_length`.
#[track_caller]
pub fn rget_regular<T, S, D>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
) -> Future<()>
where
    T: Pod,
    S: IntoIterator<Item = GlobalPtr<T>>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
{
    rget_regular_with(
        src_runs,
        src_run_length,
        dest_runs,
        dest_run_length,
        operation_cx::as_future(),
    )
}

/// [`rget_regular`] with completions (§15.2.5 ¶10): `operation_cx` requests only.
///
/// # Panics
/// As [`rget_regular`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rget_regular_with<T, S, D, C>(
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    cxs: C,
) -> Returned<C, RgetRegular>
where
    T: Pod,
    S: IntoIterator<Item = GlobalPtr<T>>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
    C: Completions<RgetRegular>,
{
    const CALL: &str = "rget_regular";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetRegular, C>(),
            "rget_regular needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, _complete) = unsafe {
        get(
            CALL,
            src_runs,
            src_run_length,
            dest_runs,
            dest_run_length,
            Lend::Call,
        )
    };
    cxs.completed_at_initiation(rank, ()).into_return()
}

/// Starts the get of a regular call: its target and event (invalid with [`Lend::Call`]:
/// the get is complete).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of the destination runs must stay valid, and
/// untouched, until the get's completion.
#[track_caller]
pub(super) unsafe fn get<T, S, D>(
    call: &str,
    src_runs: S,
    src_run_length: usize,
    dest_runs: D,
    dest_run_length: usize,
    lend: Lend,
) -> (Rank, gex::Event)
where
    T: Pod,
    S: IntoIterator<Item = GlobalPtr<T>>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
{
    let rt = rt(call);
    let (src, src_total, affinity) = remote_starts(call, src_runs, src_run_length);
    let mut dest: Vec<D::Item> = dest_runs.into_iter().collect();
    check_run_lengths(
        call,
        dest.iter_mut().map(|d| d.as_mut().len()),
        dest_run_length,
    );
    let dest_total = dest
        .len()
        .checked_mul(dest_run_length)
        .unwrap_or_else(|| panic!("upcxx::{call}: the destination runs' total overflows"));
    check_totals(call, src_total, dest_total);
    let rank = affinity.rank(call);
    let runs = src.len() + dest.len();
    let mut pieces: Vec<&mut [u8]> = dest
        .iter_mut()
        .map(|d| bytemuck::cast_slice_mut(d.as_mut()))
        .collect();
    let (bytes, run_bytes) = (
        bytes_of::<T>(call, src_total),
        bytes_of::<T>(call, src_run_length),
    );
    let event = reported_get(rank, Kind::Regular, runs, bytes, || {
        let started = match lend {
            Lend::Call => rt
                .team
                .indexed_get_blocking(&mut pieces, rank, &src, run_bytes, gex::Flags::NONE)
                .map(|()| gex::Event::invalid()),
            // SAFETY: the caller's obligation.
            Lend::Beyond => unsafe {
                rt.team
                    .indexed_get_nb(&mut pieces, rank, &src, run_bytes, gex::Flags::NONE)
            },
        };
        started.unwrap_or_else(|_| unreachable!("gex returns NoOp only for IMMEDIATE"))
    });
    (rank, event)
}
