//! RMA to segments that are not mapped here (another host): `MPI_Put` and `MPI_Get` on
//! the world window, each followed by `MPI_Win_flush`, so that every transfer is
//! complete at return (see the parent module's documentation).
//!
//! A put or get of at most `GEX_MPI_AM_RMA_MAX` bytes does not come here from gex's
//! RMA calls: the upper half sends it as Active Messages to the owner
//! (`Conduit::am_rma_max`, `gex/rma/remote.rs`). With two
//! ranks each its own "host" on one machine (Open MPI's shared-memory transport, `osc
//! rdma`), a blocking put of 8 bytes took 1.67-1.72 µs through `MPI_Put` and its flush
//! against 0.52-0.73 µs by messages, 1 KiB 1.67-1.68 µs against 0.71-0.83 µs, and
//! 2-3.9 KiB about 1.7 µs against 0.9-1.2 µs (gets alike). From a message of about
//! 4,000 bytes on, that transport sends by rendezvous, and the same put by messages
//! took 3.3-4.8 µs: hence the default of 3 KiB. Between hosts joined by TCP only,
//! `osc pt2pt` carries a flushed put as several messages of its own, so messages of ours
//! win there too; with an RDMA network a program may prefer the window for more of its
//! transfers, and lower the threshold (0: every transfer takes the window).
//!
//! `MPI_Win_flush` is what a blocking put needs: `MPI_Win_flush_local` completes the
//! origin buffer only, not the transfer at the target. Under Open MPI 4.1 such a
//! window (`MPI_Win_create` over memory we allocated) is served by the `osc rdma`
//! component where `osc ucx` is not used (`osc sm` serves only windows that MPI
//! allocates) and a byte transport with RDMA joins the ranks (shared memory, an RDMA
//! network); between hosts joined by TCP only, `osc rdma` declines and `osc pt2pt`
//! serves it, carrying each operation as messages that the target handles only inside
//! MPI calls: `MPI_Win_flush` then returns once the target has polled (see the parent
//! module's "RMA between hosts needs the target's progress"). The window's info keys that could spare that component work per
//! operation (`same_disp_unit`, `same_size`, `accumulate_ordering=none`) made no
//! difference to a put's cost, so the window is created without info; `no_locks`
//! cannot be given, the window being locked with `MPI_Win_lock_all`. No atomic
//! operation is made on the window (atomics on another host's segment are AMs to its
//! owner), so `osc rdma`'s failure in `MPI_Compare_and_swap` under Open MPI 4.1 does
//! not arise.

use std::ffi::c_int;

use ::mpi::ffi;

use super::boot::{check, fatal};
use super::MpiConduit;
use crate::conduit::{AddressError, Rank};

impl MpiConduit {
    /// `Conduit::put` to a segment that is not mapped here: `MPI_Put`s, each flushed.
    /// Out of line, so that the shared-memory case of `put` stays small.
    #[inline(never)]
    pub(super) fn put_remote(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<(), AddressError> {
        let disp = self.displacement(dest, dest_addr, src.len())?;
        for (i, chunk) in src.chunks(1 << 30).enumerate() {
            self.rma(
                dest,
                // SAFETY: the target range is inside dest's window (checked); the source
                // is read before the flush returns.
                |win| unsafe {
                    ffi::MPI_Put(
                        chunk.as_ptr().cast(),
                        chunk.len() as c_int,
                        ffi::RSMPI_UINT8_T,
                        dest as c_int,
                        (disp + (i << 30)) as ffi::MPI_Aint,
                        chunk.len() as c_int,
                        ffi::RSMPI_UINT8_T,
                        win,
                    )
                },
                "MPI_Put",
            );
        }
        Ok(())
    }

    /// `Conduit::get` from a segment that is not mapped here: `MPI_Get`s, each flushed.
    ///
    /// # Safety
    /// `dest` must be valid for `len` bytes of writes.
    #[inline(never)]
    pub(super) unsafe fn get_remote(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<(), AddressError> {
        let disp = self.displacement(src, src_addr, len)?;
        let mut done = 0;
        while done < len {
            let chunk = (len - done).min(1 << 30);
            self.rma(
                src,
                // SAFETY: the source range is inside src's window (checked); the caller
                // guarantees `dest` for `len` bytes.
                |win| unsafe {
                    ffi::MPI_Get(
                        dest.add(done).cast(),
                        chunk as c_int,
                        ffi::RSMPI_UINT8_T,
                        src as c_int,
                        (disp + done) as ffi::MPI_Aint,
                        chunk as c_int,
                        ffi::RSMPI_UINT8_T,
                        win,
                    )
                },
                "MPI_Get",
            );
            done += chunk;
        }
        Ok(())
    }

    /// Runs an RMA operation on the world window and waits for its completion there.
    pub(super) fn rma(&self, target: Rank, op: impl FnOnce(ffi::MPI_Win) -> c_int, call: &str) {
        // Every MPI call is made under `state` (MPI_THREAD_SERIALIZED); `windows` is
        // always taken after it.
        let _serial = self.serial();
        let windows = self.windows.lock();
        let w = windows
            .as_ref()
            .unwrap_or_else(|| fatal("RMA before the segments were attached"));
        check(op(w.world), call);
        // SAFETY: the window is locked (lock_all) for the life of the job.
        unsafe {
            check(
                ffi::MPI_Win_flush(target as c_int, w.world),
                "MPI_Win_flush",
            )
        };
    }
}
