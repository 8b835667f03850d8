//! Transfers that name device memory of any rank by (rank, device address):
//! [`put`], [`get`] and [`copy`], complete at return, and [`put_nb`], [`get_nb`] and
//! [`copy_nb`], which leave a transfer by messages in flight ([`Transfer`]). An address
//! of this rank is found in `registry`; another rank's segment on this host is mapped
//! here (`ipc`) and reached by one device copy, made during the call; any other is
//! reached by Active Messages to its owner (`remote`).

use std::fmt;
use std::sync::Arc;

use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::Team;

use super::remote::Pending;
use super::{ipc, registry, remote, DeviceAddr, End, KindError, Mk, BOUNCE};

/// A transfer of device memory started by [`put_nb`], [`get_nb`] or [`copy_nb`]:
/// complete once [`test`](Transfer::test) gives its outcome. One this process made by
/// a device copy of its own was complete at return; one by messages to the owner
/// completes with the owner's last answer, in this process's progress, and reports
/// then what the owner could not do (an address outside its segments).
#[must_use = "a transfer may still be in flight: test or wait for it"]
pub struct Transfer {
    in_flight: Option<InFlight>,
}

struct InFlight {
    pending: Arc<Pending>,
    call: &'static str,
    /// The owner (job rank) and the device address, for the error.
    rank: Rank,
    addr: DeviceAddr,
}

impl fmt::Debug for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.in_flight {
            None => f.write_str("Transfer(complete at initiation)"),
            Some(t) => write!(
                f,
                "Transfer({}, rank {} at {:#x}, {})",
                t.call,
                t.rank,
                t.addr,
                if t.pending.is_done() {
                    "complete"
                } else {
                    "in flight"
                }
            ),
        }
    }
}

impl Transfer {
    /// A transfer complete at initiation.
    fn done() -> Transfer {
        Transfer { in_flight: None }
    }

    fn by_messages(
        pending: Arc<Pending>,
        call: &'static str,
        rank: Rank,
        addr: DeviceAddr,
    ) -> Transfer {
        Transfer {
            in_flight: Some(InFlight {
                pending,
                call,
                rank,
                addr,
            }),
        }
    }

    /// Whether the transfer was complete when the call that started it returned.
    pub fn completed_at_initiation(&self) -> bool {
        self.in_flight.is_none()
    }

    /// The transfer's outcome if it is complete, `None` while it is in flight. Does not
    /// poll; may be asked again.
    pub fn test(&self) -> Option<Result<(), KindError>> {
        match &self.in_flight {
            None => Some(Ok(())),
            Some(t) => t.pending.outcome(t.call, t.rank, t.addr),
        }
    }

    /// Polls until the transfer is complete; its outcome. Also when a handler run
    /// meanwhile panics, the wait goes on until the owner's last answer, so that no
    /// answer writes into memory the unwinding frees.
    ///
    /// # Panics
    /// From a restricted context (a handler).
    #[track_caller]
    pub fn wait(self) -> Result<(), KindError> {
        if let Some(t) = &self.in_flight {
            const CALL: &str = "gex::kinds::Transfer::wait";
            let rt = crate::runtime::runtime(CALL);
            crate::context::check_may_communicate(CALL);
            struct Unwinding<'a>(&'a Runtime, &'a Pending);
            impl Drop for Unwinding<'_> {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        self.0.wait_until(|| self.1.is_done());
                    }
                }
            }
            let _unwinding = Unwinding(rt, &t.pending);
            rt.wait_until(|| t.pending.is_done());
        }
        self.test().expect("a transfer waited for is complete")
    }
}

/// Puts `src` into the device memory at `dst` of rank `rank` of `team`: a device
/// segment of that rank must hold `[dst, dst + src.len())`. Complete at return; the
/// owner's part runs when it makes progress (an AM to it), unless it is this rank.
///
/// # Panics
/// If `rank` is not a rank of `team`, or from a restricted context (a handler).
#[track_caller]
pub fn put(team: &Team, rank: Rank, dst: DeviceAddr, src: &[u8]) -> Result<(), KindError> {
    put_in("gex::kinds::put", team, rank, dst, src)?.wait()
}

/// [`put`], leaving a transfer by messages in flight: `src` is read (copied into the
/// messages) before this returns, and the owner's answers complete the [`Transfer`].
/// An error found here (a range of this rank outside its segments) is returned at
/// once; one the owner finds is the transfer's outcome.
///
/// # Panics
/// As [`put`].
#[track_caller]
pub fn put_nb(team: &Team, rank: Rank, dst: DeviceAddr, src: &[u8]) -> Result<Transfer, KindError> {
    put_in("gex::kinds::put_nb", team, rank, dst, src)
}

#[track_caller]
fn put_in(
    call: &'static str,
    team: &Team,
    rank: Rank,
    dst: DeviceAddr,
    src: &[u8],
) -> Result<Transfer, KindError> {
    let (rt, rank) = start(call, team, rank);
    let len = src.len();
    if len == 0 {
        return Ok(Transfer::done());
    }
    let reached = reach(rt, call, rank, dst, len, true, |mk, at| {
        // SAFETY: this process reaches the range (`reach`), kept so meanwhile.
        unsafe { mk.0.dev.copy(call, End::Device(at), End::Host(src), len) }
    });
    match reached {
        Some(done) => done.map(|()| Transfer::done()),
        None if rank == rt.conduit.rank() => Err(not_found(call, dst, rank)),
        None => Ok(Transfer::by_messages(
            remote::put(rt, call, rank, dst, src),
            call,
            rank,
            dst,
        )),
    }
}

/// Gets the device memory at `src` of rank `rank` of `team` into `dst`: a device
/// segment of that rank must hold `[src, src + dst.len())`. Complete at return, as
/// [`put`].
///
/// # Panics
/// As [`put`].
#[track_caller]
pub fn get(team: &Team, rank: Rank, src: DeviceAddr, dst: &mut [u8]) -> Result<(), KindError> {
    get_into("gex::kinds::get", team, rank, src, dst)
}

/// [`get`] into `len` bytes at `dst`, leaving a transfer by messages in flight: the
/// owner's answers write `dst` and complete the [`Transfer`]. Errors as
/// [`put_nb`]'s.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes, and nothing else accesses them, until the
/// transfer is complete, also when the [`Transfer`] is dropped before.
///
/// # Panics
/// As [`put`].
#[track_caller]
pub unsafe fn get_nb(
    team: &Team,
    rank: Rank,
    src: DeviceAddr,
    dst: *mut u8,
    len: usize,
) -> Result<Transfer, KindError> {
    // SAFETY: the caller's guarantee.
    unsafe { get_in("gex::kinds::get_nb", team, rank, src, dst, len) }
}

/// [`get`] under `call`: complete at return.
#[track_caller]
fn get_into(
    call: &'static str,
    team: &Team,
    rank: Rank,
    src: DeviceAddr,
    dst: &mut [u8],
) -> Result<(), KindError> {
    // SAFETY: `dst` is borrowed until the transfer is complete: `wait` waits for it,
    // also when it unwinds.
    unsafe { get_in(call, team, rank, src, dst.as_mut_ptr(), dst.len()) }?.wait()
}

/// [`get_nb`] under `call`.
///
/// # Safety
/// As [`get_nb`].
#[track_caller]
unsafe fn get_in(
    call: &'static str,
    team: &Team,
    rank: Rank,
    src: DeviceAddr,
    dst: *mut u8,
    len: usize,
) -> Result<Transfer, KindError> {
    let (rt, rank) = start(call, team, rank);
    if len == 0 {
        return Ok(Transfer::done());
    }
    let reached = reach(rt, call, rank, src, len, true, |mk, at| {
        // SAFETY: as in `put_in`; `dst` holds `len` writable bytes (the caller's
        // guarantee).
        unsafe {
            let to = std::slice::from_raw_parts_mut(dst, len);
            mk.0.dev.copy(call, End::HostMut(to), End::Device(at), len)
        }
    });
    match reached {
        Some(done) => done.map(|()| Transfer::done()),
        None if rank == rt.conduit.rank() => Err(not_found(call, src, rank)),
        // SAFETY: the caller's guarantee.
        None => Ok(Transfer::by_messages(
            unsafe { remote::get(rt, call, rank, src, dst, len) },
            call,
            rank,
            src,
        )),
    }
}

/// Copies `len` bytes of device memory from `src` of rank `src_rank` to `dst` of rank
/// `dst_rank` (ranks of `team`): one device copy when this process reaches both ranges
/// (its own segments on one device, or segments of this host mapped here), else in
/// pieces through host memory of this rank ([`get`], then [`put`]). Complete at return;
/// the ranges of one segment must not overlap.
///
/// # Panics
/// As [`put`].
#[track_caller]
pub fn copy(
    team: &Team,
    dst_rank: Rank,
    dst: DeviceAddr,
    src_rank: Rank,
    src: DeviceAddr,
    len: usize,
) -> Result<(), KindError> {
    const CALL: &str = "gex::kinds::copy";
    let (rt, dst_job) = start(CALL, team, dst_rank);
    let (_, src_job) = start(CALL, team, src_rank);
    if len == 0 {
        return Ok(());
    }
    let me = rt.conduit.rank();
    if dst_job == me && src_job == me {
        let direct = registry::with(dst, len, |dmk, dbase| {
            registry::with(src, len, |smk, sbase| {
                if !dmk.same_device(smk) {
                    return None;
                }
                if dbase == sbase && dst < src + len as u64 && src < dst + len as u64 {
                    return Some(Err(KindError::Overlap {
                        call: CALL,
                        dst: (dst - dbase) as usize,
                        src: (src - sbase) as usize,
                        len,
                    }));
                }
                // SAFETY: live segments of one device hold both ranges, which do not
                // overlap.
                Some(unsafe {
                    dmk.0
                        .dev
                        .copy(CALL, End::Device(dst), End::Device(src), len)
                })
            })
        });
        match direct {
            None => return Err(not_found(CALL, dst, dst_job)),
            Some(None) => return Err(not_found(CALL, src, src_job)),
            Some(Some(Some(r))) => return r,
            Some(Some(None)) => {} // two devices: through host memory
        }
    }
    if dst_job == src_job && dst_job != me && dst < src + len as u64 && src < dst + len as u64 {
        // Another rank's ranges that overlap (of one segment: a segment holds each whole
        // range): refused as for this rank's, before a device copy that may not overlap.
        let low = dst.min(src);
        return Err(KindError::Overlap {
            call: CALL,
            dst: (dst - low) as usize,
            src: (src - low) as usize,
            len,
        });
    }
    if dst_job != me || src_job != me {
        // One device copy when this process reaches both ranges (its own segments, or
        // segments of this host's other processes mapped here) with devices of one
        // class; a driver that refuses it leaves the copy to host memory below. The
        // segments are mapped first, one at a time (mapping one takes the table's
        // write lock, which the nested lookups below hold for reading).
        for (rank, addr) in [(dst_job, dst), (src_job, src)] {
            reach(rt, CALL, rank, addr, len, true, |_, _| ());
        }
        let direct = reach(rt, CALL, dst_job, dst, len, false, |dmk, d| {
            reach(rt, CALL, src_job, src, len, false, |smk, s| {
                (dmk.class() == smk.class()).then(|| {
                    // SAFETY: both ranges are reached here and kept so meanwhile;
                    // on different ranks they do not overlap, on one they were
                    // checked above.
                    unsafe { dmk.0.dev.copy(CALL, End::Device(d), End::Device(s), len) }
                })
            })
        });
        if let Some(Some(Some(Ok(())))) = direct {
            return Ok(());
        }
    }
    let mut bounce = vec![0u8; len.min(BOUNCE)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(BOUNCE);
        let buf = &mut bounce[..n];
        get_into(CALL, team, src_rank, src + done as u64, buf)?;
        put_in(CALL, team, dst_rank, dst + done as u64, buf)?.wait()?;
        done += n;
    }
    Ok(())
}

/// [`copy`], leaving in flight a copy whose source this process reaches (its own
/// segment, or one of this host mapped here) into device memory of a rank it does not:
/// the source is read into host memory here and put by messages ([`put_nb`]), so the
/// copy is done with the source at return and completes with the owner's answers.
/// Copies of at most 4 MiB only (the host memory it takes); any other copy is
/// [`copy`]'s, complete at return.
///
/// # Panics
/// As [`put`].
#[track_caller]
pub fn copy_nb(
    team: &Team,
    dst_rank: Rank,
    dst: DeviceAddr,
    src_rank: Rank,
    src: DeviceAddr,
    len: usize,
) -> Result<Transfer, KindError> {
    const CALL: &str = "gex::kinds::copy_nb";
    let (rt, dst_job) = start(CALL, team, dst_rank);
    let (_, src_job) = start(CALL, team, src_rank);
    let far = dst_job != rt.conduit.rank()
        && reach(rt, CALL, dst_job, dst, len, true, |_, _| ()).is_none();
    if far && (1..=BOUNCE).contains(&len) {
        let mut staged = vec![0u8; len];
        let read = reach(rt, CALL, src_job, src, len, true, |mk, at| {
            // SAFETY: this process reaches the range (`reach`), kept so meanwhile.
            unsafe {
                mk.0.dev
                    .copy(CALL, End::HostMut(&mut staged), End::Device(at), len)
            }
        });
        if let Some(read) = read {
            read?;
            let sent = remote::put(rt, CALL, dst_job, dst, &staged);
            return Ok(Transfer::by_messages(sent, CALL, dst_job, dst));
        }
    }
    copy(team, dst_rank, dst, src_rank, src, len).map(|()| Transfer::done())
}

/// Runs `f` with a device of this process and the address here of `[addr, addr +
/// len)` of job rank `rank`'s device memory, if this process reaches it: a segment of
/// its own, or one of another process of this host mapped here (asking the owner for
/// it first when `may_ask`; see `ipc::with`, whose lock rules nested calls follow).
fn reach<R>(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    addr: DeviceAddr,
    len: usize,
    may_ask: bool,
    f: impl FnOnce(&Mk, DeviceAddr) -> R,
) -> Option<R> {
    if rank == rt.conduit.rank() {
        registry::with(addr, len, |mk, _| f(mk, addr))
    } else {
        ipc::with(rt, call, rank, addr, len, may_ask, f)
    }
}

/// The runtime and the job rank of `rank` of `team`, for a call that may communicate.
#[track_caller]
fn start(call: &'static str, team: &Team, rank: Rank) -> (&'static Runtime, Rank) {
    let rt = crate::runtime::runtime(call);
    crate::context::check_may_communicate(call);
    (rt, team.job_rank_of(call, rank))
}

fn not_found(call: &'static str, addr: DeviceAddr, rank: Rank) -> KindError {
    KindError::NotDeviceMemory {
        call,
        addr,
        kind: format!("a device segment of rank {rank}"),
    }
}
