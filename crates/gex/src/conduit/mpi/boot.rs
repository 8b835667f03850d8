//! The bootstrap of the mpi conduit (its MPI calls, the host team, the checks that the
//! ranks agree), and the error path of every MPI call.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::OnceLock;

use ::mpi::ffi;
use parking_lot::Mutex;

use super::am::State;
use super::host::Host;
use super::serial::Serial;
use super::{
    MpiConduit, AM_RMA_MAX, GEX_MPI_AM_RMA_MAX, GEX_MPI_HOST_RANKS, GEX_MPI_STATS, GEX_MPI_THREAD,
    INIT_THREAD,
};
use crate::conduit::Rank;

pub(super) use super::abort::fatal;

/// Checks the return code of an MPI call (inlined: polls make several calls each).
#[inline]
#[track_caller]
pub(super) fn check(rc: c_int, call: &str) {
    if rc != 0 {
        failed(rc, call);
    }
}

/// Ends the job for MPI call `call`, which returned `rc`.
#[cold]
#[inline(never)]
#[track_caller]
fn failed(rc: c_int, call: &str) -> ! {
    fatal(&format!("{call} failed ({})", error_string(rc)))
}

/// The MPI library's words for error code `rc`, with the code.
pub(super) fn error_string(rc: c_int) -> String {
    let mut text = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters; MPI_Error_string may be
    // called whatever state the failing call left.
    let rc2 = unsafe { ffi::MPI_Error_string(rc, text.as_mut_ptr().cast(), &mut len) };
    if rc2 != 0 || len <= 0 {
        return format!("MPI error {rc}");
    }
    text.truncate(len as usize);
    format!("MPI error {rc}: {}", String::from_utf8_lossy(&text))
}

fn comm_rank_size(comm: ffi::MPI_Comm) -> (c_int, c_int) {
    let (mut r, mut n) = (0, 0);
    // SAFETY: valid communicator, valid out-pointers.
    unsafe {
        check(ffi::MPI_Comm_rank(comm, &mut r), "MPI_Comm_rank");
        check(ffi::MPI_Comm_size(comm, &mut n), "MPI_Comm_size");
    }
    (r, n)
}

/// Gathers one `u64` from every rank of `comm`.
pub(super) fn allgather_u64(comm: ffi::MPI_Comm, value: u64) -> Vec<u64> {
    let (_, n) = comm_rank_size(comm);
    let mut all = vec![0u64; n as usize];
    // SAFETY: one u64 sent, n received into a buffer of n.
    unsafe {
        check(
            ffi::MPI_Allgather(
                (&value as *const u64).cast(),
                1,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr().cast(),
                1,
                ffi::RSMPI_UINT64_T,
                comm,
            ),
            "MPI_Allgather",
        );
    }
    all
}

/// Whether `GEX_MPI_THREAD` asks for `MPI_THREAD_SINGLE`.
fn single_thread() -> bool {
    let Ok(v) = std::env::var(GEX_MPI_THREAD) else {
        return false;
    };
    match v.trim() {
        "single" => true,
        "serialized" | "" => false,
        _ => fatal(&format!(
            "{GEX_MPI_THREAD}={v} is neither single nor serialized"
        )),
    }
}

/// `GEX_MPI_AM_RMA_MAX`: the largest put or get to another host's segment left to
/// messages (see `rma`), if set.
fn am_rma_max() -> Option<usize> {
    let v = std::env::var(GEX_MPI_AM_RMA_MAX).ok()?;
    Some(v.trim().parse::<usize>().unwrap_or_else(|_| {
        fatal(&format!(
            "{GEX_MPI_AM_RMA_MAX}={v} is not a number of bytes"
        ))
    }))
}

fn host_cap() -> Option<c_int> {
    let v = std::env::var(GEX_MPI_HOST_RANKS).ok()?;
    match v.trim().parse::<c_int>() {
        Ok(n) if n >= 1 => Some(n),
        _ => fatal(&format!(
            "{GEX_MPI_HOST_RANKS}={v} is not a positive number of ranks"
        )),
    }
}

/// Joins the job (`Conduit::bootstrap`): initializes MPI, finds this rank's host team,
/// allocates the host's shared memory, checks that the ranks agree on the segment size
/// and posts the receives; returns after a barrier of every rank.
pub(super) fn bootstrap() -> MpiConduit {
    let single_thread = single_thread();
    // SAFETY: reading MPI constants.
    let (required, name) = unsafe {
        if single_thread {
            (ffi::RSMPI_THREAD_SINGLE, "MPI_THREAD_SINGLE")
        } else {
            (ffi::RSMPI_THREAD_SERIALIZED, "MPI_THREAD_SERIALIZED")
        }
    };
    let mut provided = 0;
    // SAFETY: MPI is initialized once per process, here (Client::init refuses a
    // second initialization).
    unsafe {
        check(
            ffi::MPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                required,
                &mut provided,
            ),
            "MPI_Init_thread",
        );
    }
    if provided < required {
        fatal(&format!("the MPI library does not provide {name}"));
    }
    INIT_THREAD.with(|t| t.set(true));
    let world = MpiConduit::world();
    // Failing calls return their error to `check`, which names them; communicators
    // split from the world inherit this.
    // SAFETY: valid communicator and predefined error handler.
    unsafe {
        check(
            ffi::MPI_Comm_set_errhandler(world, ffi::RSMPI_ERRORS_RETURN),
            "MPI_Comm_set_errhandler",
        );
    }
    let (rank, size) = comm_rank_size(world);
    super::abort::abort_at_exit(rank);
    // A library of another MPI than the launcher's starts every process alone (a
    // singleton): the launcher's count says so.
    if let Some(n) =
        crate::env::mpi_launcher_size().filter(|&n| i64::try_from(n) != Ok(i64::from(size)))
    {
        fatal(&format!(
            "the launcher started {n} processes but MPI counts {size} in MPI_COMM_WORLD: \
             is the program linked with the MPI library of the launcher (mpirun, srun)?"
        ));
    }
    let mut node = world;
    // SAFETY: valid communicators and out-pointer.
    unsafe {
        check(
            ffi::MPI_Comm_split_type(
                world,
                ffi::RSMPI_COMM_TYPE_SHARED,
                rank,
                ffi::RSMPI_INFO_NULL,
                &mut node,
            ),
            "MPI_Comm_split_type",
        );
    }
    let host_comm = match host_cap() {
        None => node,
        Some(cap) => {
            let (node_rank, _) = comm_rank_size(node);
            let mut capped = node;
            // SAFETY: valid communicator and out-pointer.
            unsafe {
                check(
                    ffi::MPI_Comm_split(node, node_rank / cap, node_rank, &mut capped),
                    "MPI_Comm_split",
                );
            }
            capped
        }
    };
    let (host_index, _) = comm_rank_size(host_comm);
    let host_ranks: Vec<Rank> = allgather_u64(host_comm, rank as u64)
        .into_iter()
        .map(|r| r as Rank)
        .collect();
    // Hosts are named by their lowest job rank and numbered in that order.
    let leaders = allgather_u64(world, host_ranks[0] as u64);
    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let my_host = distinct
        .binary_search(&(host_ranks[0] as u64))
        .expect("own leader gathered") as Rank;
    // Whole pages, as the smp launcher gives them.
    let max_segment = crate::env::segment_size_from_env()
        .unwrap_or_else(|e| fatal(&format!("rank {rank}: cannot join the job: {e}")))
        .next_multiple_of(crate::PAGE_SIZE);
    // The launcher of the smp conduit sizes every rank alike; under mpirun each rank
    // reads its own environment, so they must be compared.
    let sizes = allgather_u64(world, max_segment as u64);
    if let Some(other) = sizes.iter().position(|&s| s != sizes[0]) {
        if rank == 0 {
            super::abort::say(&format!(
                "gex: the ranks disagree on the segment size ({}): rank 0 has {} \
                 bytes, rank {other} has {}",
                crate::env::UPCXX_SEGMENT_SIZE,
                sizes[0],
                sizes[other]
            ));
        }
        // SAFETY: valid communicator; every rank takes this branch (same data).
        unsafe { check(ffi::MPI_Barrier(world), "MPI_Barrier") };
        fatal("the job cannot start");
    }
    let stats = std::env::var_os(GEX_MPI_STATS).is_some_and(|v| v != "0");
    let (host, host_win) = Host::allocate(
        host_comm,
        &host_ranks,
        host_index as Rank,
        size as Rank,
        stats,
    );
    let comms = [(); 3].map(|()| {
        let mut comm = world;
        // SAFETY: a valid communicator and out-pointer; collective over the job.
        unsafe { check(ffi::MPI_Comm_dup(world, &mut comm), "MPI_Comm_dup") };
        comm
    });
    let st = State::new(size as usize, host_win, comms);
    // Every rank's receives are posted and its queues initialized before anyone
    // sends.
    // SAFETY: valid communicator.
    unsafe { check(ffi::MPI_Barrier(world), "MPI_Barrier") };
    host.joined();
    let remote = host_ranks.len() < size as usize;
    let configured = am_rma_max();
    // Measured only where no rank set the threshold (under mpirun each rank reads its
    // own environment): the measurement ends in a broadcast that every rank must join.
    // Ranks that disagree keep what each has, which is harmless: the initiator of each
    // transfer chooses its path.
    let probe = distinct.len() > 1
        && allgather_u64(world, u64::from(configured.is_none()))
            .iter()
            .all(|&unset| unset == 1);
    MpiConduit {
        rank: rank as Rank,
        size: size as Rank,
        host_comm,
        host_ranks,
        host_index: host_index as Rank,
        host_leaders: distinct.iter().map(|&r| r as Rank).collect(),
        my_host,
        remote,
        max_segment,
        am_rma_max: configured.unwrap_or(AM_RMA_MAX),
        am_rma_blocking_max: AtomicUsize::new(configured.unwrap_or(AM_RMA_MAX)),
        am_rma_probe: probe,
        host,
        host_mapped: AtomicBool::new(true),
        state: Serial::new(st, single_thread),
        windows: Mutex::new(None),
        segments: OnceLock::new(),
        my_segment: OnceLock::new(),
    }
}
