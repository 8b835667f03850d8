//! The MPI calls of the bootstrap, and the error path of every MPI call.

use std::ffi::c_int;

use ::mpi::ffi;

use super::GEX_MPI_HOST_RANKS;

pub(super) fn fatal(msg: &str) -> ! {
    eprintln!("gex: {msg}");
    // SAFETY: aborting the job is valid in any state after MPI_Init.
    unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1) };
    std::process::exit(1)
}

/// Checks the return code of an MPI call.
#[track_caller]
pub(super) fn check(rc: c_int, call: &str) {
    if rc != 0 {
        fatal(&format!("{call} failed ({})", error_string(rc)));
    }
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

pub(super) fn comm_rank_size(comm: ffi::MPI_Comm) -> (c_int, c_int) {
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

pub(super) fn host_cap() -> Option<c_int> {
    let v = std::env::var(GEX_MPI_HOST_RANKS).ok()?;
    match v.trim().parse::<c_int>() {
        Ok(n) if n >= 1 => Some(n),
        _ => fatal(&format!(
            "{GEX_MPI_HOST_RANKS}={v} is not a positive number of ranks"
        )),
    }
}
