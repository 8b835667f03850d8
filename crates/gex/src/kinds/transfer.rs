//! Transfers that name device memory of any rank by (rank, device address):
//! [`put`], [`get`] and [`copy`]. An address of this rank is found in `registry`;
//! another rank's segment on this host is mapped here (`ipc`) and reached by one device
//! copy; any other is reached by Active Messages to its owner (`remote`).

use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::Team;

use super::{ipc, registry, remote, DeviceAddr, End, KindError, Mk, BOUNCE};

/// Puts `src` into the device memory at `dst` of rank `rank` of `team`: a device
/// segment of that rank must hold `[dst, dst + src.len())`. Complete at return; the
/// owner's part runs when it makes progress (an AM to it), unless it is this rank.
///
/// # Panics
/// If `rank` is not a rank of `team`, or from a restricted context (a handler).
#[track_caller]
pub fn put(team: &Team, rank: Rank, dst: DeviceAddr, src: &[u8]) -> Result<(), KindError> {
    put_in("gex::kinds::put", team, rank, dst, src)
}

#[track_caller]
fn put_in(
    call: &'static str,
    team: &Team,
    rank: Rank,
    dst: DeviceAddr,
    src: &[u8],
) -> Result<(), KindError> {
    let (rt, rank) = start(call, team, rank);
    let len = src.len();
    if len == 0 {
        return Ok(());
    }
    let reached = reach(rt, call, rank, dst, len, true, |mk, at| {
        // SAFETY: this process reaches the range (`reach`), kept so meanwhile.
        unsafe { mk.0.dev.copy(call, End::Device(at), End::Host(src), len) }
    });
    match reached {
        Some(done) => done,
        None if rank == rt.conduit.rank() => Err(not_found(call, dst, rank)),
        None => remote::put(rt, call, rank, dst, src),
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
    get_in("gex::kinds::get", team, rank, src, dst)
}

#[track_caller]
fn get_in(
    call: &'static str,
    team: &Team,
    rank: Rank,
    src: DeviceAddr,
    dst: &mut [u8],
) -> Result<(), KindError> {
    let (rt, rank) = start(call, team, rank);
    let len = dst.len();
    if len == 0 {
        return Ok(());
    }
    let reached = reach(rt, call, rank, src, len, true, |mk, at| {
        // SAFETY: as in `put_in`.
        unsafe {
            mk.0.dev
                .copy(call, End::HostMut(&mut *dst), End::Device(at), len)
        }
    });
    match reached {
        Some(done) => done,
        None if rank == rt.conduit.rank() => Err(not_found(call, src, rank)),
        None => remote::get(rt, call, rank, src, dst),
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
                    // on different ranks they do not overlap.
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
        get_in(CALL, team, src_rank, src + done as u64, buf)?;
        put_in(CALL, team, dst_rank, dst + done as u64, buf)?;
        done += n;
    }
    Ok(())
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
