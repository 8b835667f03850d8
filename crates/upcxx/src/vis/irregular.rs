//! Irregular puts and gets (§15.2.2–§15.2.3): sequences of runs of any lengths, turned
//! into one `gex` vector transfer.

use bytemuck::{NoUninit, Pod};

use super::{
    bytes_of, check_totals, put_started, reported_get, reported_put, Affinity, Kind, Lend,
    RemoteRun, RgetIrregular, RputIrregular,
};
use crate::completion::{self, operation_cx, Completions, FutureList, Returned};
use crate::future::Future;
use crate::rma::finish_put;
use crate::runtime::state::{rt, Rank};

/// The remote runs of an irregular call as `gex` ranges, their total in elements, and
/// their target.
#[track_caller]
fn remote_runs<T, R: RemoteRun<T>>(
    call: &str,
    runs: impl IntoIterator<Item = R>,
) -> (Vec<gex::Memvec>, usize, Affinity) {
    let mut affinity = Affinity::default();
    let mut total = 0usize;
    let ranges = runs
        .into_iter()
        .map(|run| {
            let (gp, len) = run.run();
            let len = len.unwrap_or_else(|| {
                panic!("upcxx::{call}: a run length is negative or does not fit a usize")
            });
            affinity.run(call, gp, len);
            total = total
                .checked_add(len)
                .unwrap_or_else(|| panic!("upcxx::{call}: the remote runs' total overflows"));
            gex::Memvec::new(gp.owner_addr(), bytes_of::<T>(call, len))
        })
        .collect();
    (ranges, total, affinity)
}

/// Puts `src_runs` (local slices) to `dest_runs` (`(GlobalPtr<T>, n)` pairs) (UPC++
/// `rput_irregular`, §15.2.2) with the default completion: a future of operation
/// completion. The runs of each sequence are one stream of elements in order, and
/// both streams must hold the same number; every destination must be on one process.
///
/// # Panics
/// As described in the [module documentation](super#errors).
#[track_caller]
pub fn rput_irregular<T, S, D>(src_runs: S, dest_runs: D) -> Future<()>
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator,
    D::Item: RemoteRun<T>,
{
    rput_irregular_with(src_runs, dest_runs, operation_cx::as_future())
}

/// [`rput_irregular`] with completions (§15.2.2 ¶15): `source_cx`, `remote_cx` and
/// `operation_cx` requests, with operation or remote completion among them. Source
/// completion happens before the call returns: the runs are borrowed only for it.
///
/// # Panics
/// As [`rput_irregular`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rput_irregular_with<T, S, D, C>(
    src_runs: S,
    dest_runs: D,
    cxs: C,
) -> Returned<C, RputIrregular>
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator,
    D::Item: RemoteRun<T>,
    C: Completions<RputIrregular>,
{
    const CALL: &str = "rput_irregular";
    const {
        assert!(
            completion::requests_op_or_remote::<RputIrregular, C>(),
            "rput_irregular needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, event) = unsafe { put(CALL, src_runs, dest_runs, Lend::Call) };
    finish_put(cxs, rank, event)
}

/// Starts the put of an irregular call: its target and operation event (see
/// [`Lend::put_flags`]).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of the source runs must stay valid, and unwritten,
/// until the put's operation completes.
#[track_caller]
pub(super) unsafe fn put<T, S, D>(
    call: &str,
    src_runs: S,
    dest_runs: D,
    lend: Lend,
) -> (Rank, gex::Event)
where
    T: NoUninit,
    S: IntoIterator,
    S::Item: AsRef<[T]>,
    D: IntoIterator,
    D::Item: RemoteRun<T>,
{
    let rt = rt(call);
    let src: Vec<S::Item> = src_runs.into_iter().collect();
    let pieces: Vec<&[u8]> = src
        .iter()
        .map(|s| bytemuck::cast_slice(s.as_ref()))
        .collect();
    let src_total: usize = src.iter().map(|s| s.as_ref().len()).sum();
    let (dst, dst_total, affinity) = remote_runs::<T, _>(call, dest_runs);
    check_totals(call, src_total, dst_total);
    let rank = affinity.rank(call);
    let runs = pieces.len() + dst.len();
    let bytes = bytes_of::<T>(call, src_total);
    let event = reported_put(rank, Kind::Irregular, runs, bytes, || {
        // SAFETY: with `Lend::Call` the put is locally complete when `put_started`
        // returns, within the borrow of `pieces`; else the caller's obligation.
        put_started(lend, unsafe {
            rt.team.vector_put_nb(rank, &dst, &pieces, lend.put_flags())
        })
    });
    (rank, event)
}

/// Gets `src_runs` (`(GlobalPtr<T>, n)` pairs) into `dest_runs` (local `&mut` slices)
/// (UPC++ `rget_irregular`, §15.2.3) with the default completion: a future of
/// operation completion. The data are in place when the call returns; the future
/// becomes ready at the next user-level progress.
///
/// # Panics
/// As described in the [module documentation](super#errors).
#[track_caller]
pub fn rget_irregular<T, S, D>(src_runs: S, dest_runs: D) -> Future<()>
where
    T: Pod,
    S: IntoIterator,
    S::Item: RemoteRun<T>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
{
    rget_irregular_with(src_runs, dest_runs, operation_cx::as_future())
}

/// [`rget_irregular`] with completions (§15.2.3 ¶15): `operation_cx` requests only.
///
/// # Panics
/// As [`rget_irregular`], or if an `as_promise` request's promise is already ready.
#[track_caller]
pub fn rget_irregular_with<T, S, D, C>(
    src_runs: S,
    dest_runs: D,
    cxs: C,
) -> Returned<C, RgetIrregular>
where
    T: Pod,
    S: IntoIterator,
    S::Item: RemoteRun<T>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
    C: Completions<RgetIrregular>,
{
    const CALL: &str = "rget_irregular";
    const {
        assert!(
            completion::requests_op_or_remote::<RgetIrregular, C>(),
            "rget_irregular needs an operation_cx request (UPC++ spec §7.2.1)"
        )
    };
    cxs.check_armable();
    // SAFETY: lent for the call only.
    let (rank, _complete) = unsafe { get(CALL, src_runs, dest_runs, Lend::Call) };
    cxs.completed_at_initiation(rank, ()).into_return()
}

/// Starts the get of an irregular call: its target and event (invalid with
/// [`Lend::Call`]: the get is complete).
///
/// # Safety
/// With [`Lend::Beyond`], the memory of the destination runs must stay valid, and
/// untouched, until the get's completion.
#[track_caller]
pub(super) unsafe fn get<T, S, D>(
    call: &str,
    src_runs: S,
    dest_runs: D,
    lend: Lend,
) -> (Rank, gex::Event)
where
    T: Pod,
    S: IntoIterator,
    S::Item: RemoteRun<T>,
    D: IntoIterator,
    D::Item: AsMut<[T]>,
{
    let rt = rt(call);
    let (src, src_total, affinity) = remote_runs::<T, _>(call, src_runs);
    let mut dest: Vec<D::Item> = dest_runs.into_iter().collect();
    let dest_total: usize = dest.iter_mut().map(|d| d.as_mut().len()).sum();
    check_totals(call, src_total, dest_total);
    let rank = affinity.rank(call);
    let runs = src.len() + dest.len();
    let mut pieces: Vec<&mut [u8]> = dest
        .iter_mut()
        .map(|d| bytemuck::cast_slice_mut(d.as_mut()))
        .collect();
    let bytes = bytes_of::<T>(call, src_total);
    let event = reported_get(rank, Kind::Irregular, runs, bytes, || {
        let started = match lend {
            Lend::Call => rt
                .team
                .vector_get_blocking(&mut pieces, rank, &src, gex::Flags::NONE)
                .map(|()| gex::Event::invalid()),
            // SAFETY: the caller's obligation.
            Lend::Beyond => unsafe {
                rt.team
                    .vector_get_nb(&mut pieces, rank, &src, gex::Flags::NONE)
            },
        };
        started.unwrap_or_else(|_| unreachable!("gex returns NoOp only for IMMEDIATE"))
    });
    (rank, event)
}
