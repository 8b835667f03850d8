//! Puts (UPC++ spec §8.2.1): of a value ([`rput`]) and of a slice the caller lends for
//! the call ([`rput_slice`]). The module documentation of [`crate::rma`] says how they
//! travel and complete.

use bytemuck::NoUninit;

use super::target;
use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, HasRemote,
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
    let event = put("rput_slice", rank, addr, bytemuck::cast_slice(src));
    finish_put(cxs, rank, event)
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
        _ => put_through_gex(rt, rank, addr, bytes),
    }
}

#[inline(never)]
#[track_caller]
fn put_through_gex(rt: &Setup, rank: Rank, addr: usize, bytes: &[u8]) -> gex::Event {
    // The argument lists are built only when a tool is attached (inside the macros).
    let span = gasp::span!(
        GASP_UPC_NB_PUT_INIT,
        1,
        gasp::GPtr::new(rank, addr),
        bytes.as_ptr() as usize,
        bytes.len()
    );
    // SAFETY: with `Lc::Now` the put has finished reading `bytes` when it returns, so
    // the borrow covers every access to the source.
    let started = unsafe {
        rt.team
            .put_nb(rank, addr, bytes, gex::Lc::Now, gex::Flags::NONE)
    };
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
/// whose operation completion `event` stands for.
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
