//! RMA to segments that are not mapped here (another host), on the world window: a put
//! is `MPI_Put` followed by `MPI_Win_flush`, complete at return; a get is `MPI_Rget`,
//! pending until a poll's `MPI_Testsome` finds its request complete (see the parent
//! module's documentation). A get needs no flush (its request completes when the data
//! are here), so it overlaps whatever the caller does next, other gets included; a
//! put's request would complete with its source buffer read, not with the data at the
//! target, which only a flush waits for.
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
use std::sync::Arc;

use ::mpi::ffi;

use super::am::SendBuf;
use super::boot::{check, fatal};
use super::MpiConduit;
use crate::conduit::{AddressError, Completion, OpHandle, Rank};

/// The most bytes one MPI call moves (its counts are `int`s).
const CHUNK: usize = 1 << 30;

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
        for (i, chunk) in src.chunks(CHUNK).enumerate() {
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
                        (disp + i * CHUNK) as ffi::MPI_Aint,
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

    /// `Conduit::get` from a segment that is not mapped here: `MPI_Rget`s (request-based
    /// RMA, MPI 4.1 §12.3.5), complete when their requests are, which every poll tests
    /// with the sends in flight: the get is pending at return unless MPI completed it
    /// at once.
    ///
    /// # Safety
    /// `dest` must be valid for `len` bytes of writes until the returned completion
    /// says the get is complete.
    #[inline(never)]
    pub(super) unsafe fn get_remote(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError> {
        let disp = self.displacement(src, src_addr, len)?;
        if len == 0 {
            return Ok(Completion::Done);
        }
        let op = Arc::new(OpHandle::awaiting(len.div_ceil(CHUNK)));
        // Every MPI call is made under `state` (MPI_THREAD_SERIALIZED); `windows` is
        // always taken after it.
        let mut st = self.serial();
        let windows = self.windows.lock();
        let w = windows
            .as_ref()
            .unwrap_or_else(|| fatal("RMA before the segments were attached"));
        for at in (0..len).step_by(CHUNK) {
            let n = (len - at).min(CHUNK);
            // SAFETY: a null request is overwritten by MPI_Rget.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            let mut done = 0;
            // SAFETY: the source range is inside src's window (checked); the caller
            // guarantees `dest` for `len` bytes until the operation completes, which
            // is when every request has.
            unsafe {
                check(
                    ffi::MPI_Rget(
                        dest.add(at).cast(),
                        n as c_int,
                        ffi::RSMPI_UINT8_T,
                        src as c_int,
                        (disp + at) as ffi::MPI_Aint,
                        n as c_int,
                        ffi::RSMPI_UINT8_T,
                        w.world,
                        &mut req,
                    ),
                    "MPI_Rget",
                );
                check(
                    ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                    "MPI_Test",
                );
            }
            if done != 0 {
                op.part_done();
            } else {
                st.track(req, SendBuf::Get(op.clone()));
            }
        }
        Ok(if op.is_done() {
            Completion::Done
        } else {
            Completion::Pending(op)
        })
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
