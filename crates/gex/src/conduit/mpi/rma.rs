//! RMA to segments that are not mapped here (another host), on the world window: a
//! blocking put is `MPI_Put` followed by `MPI_Win_flush`, complete at return; a get is
//! `MPI_Rget`, pending until a poll's `MPI_Testsome` finds its request complete (see the
//! parent module's documentation). A get needs no flush (its request completes when the
//! data are here), so it overlaps whatever the caller does next, other gets included.
//! A put's request completes with its source buffer read, not with the data at the
//! target, which only a flush waits for. A non-blocking put of at most [`COPY_MAX`]
//! bytes copies its source into a buffer of its own (the source has been read at
//! return, as gex's put calls promise for every transfer), starts an `MPI_Rput` from it
//! and returns pending; the poll that finds the request complete flushes the target,
//! which by then waits for the transfer's acknowledgement at most, and completes the
//! put. So the transfer overlaps what the caller does next, and the flush (one per
//! target and poll, however many puts it completes) is the only wait left, inside a
//! poll. A larger put is not copied (the copy would cost about what the transfer
//! does): its `MPI_Rput`s start from the source and the call waits for their requests
//! (local completion), leaving the flush to a poll, as GASNet-EX's conduits copy a
//! non-bulk put into bounce buffers only up to a limit (`GASNET_NONBULKPUT_BOUNCE_LIMIT`
//! of the ibv conduit, 64 KiB) and wait for local completion beyond it. A put whose
//! caller keeps the source until the put completes (any local completion but
//! `GEX_EVENT_NOW`; gex then reports local completion with the put's) is neither copied
//! nor waited for, whatever its size.
//!
//! A put or get of at most `GEX_MPI_AM_RMA_MAX` bytes does not come here from gex's
//! RMA calls: the upper half sends it as Active Messages to the owner
//! (`Conduit::am_rma_max`, `gex/rma/remote.rs`), unless it is blocking and the
//! threshold of blocking transfers, measured at attach, is lower (below). With two
//! ranks each its own "host" on one machine (Open MPI's shared-memory transport, `osc
//! rdma`), a blocking put of 8 bytes took 1.67-1.72 µs through `MPI_Put` and its flush
//! against 0.52-0.73 µs by messages, 1 KiB 1.67-1.68 µs against 0.71-0.83 µs, and
//! 2-3.9 KiB about 1.7 µs against 0.9-1.2 µs (gets alike). From a message of about
//! 4,000 bytes on, that transport sends by rendezvous, and the same put by messages
//! took 3.3-4.8 µs: hence the default of 3 KiB. Between hosts joined by TCP only,
//! `osc pt2pt` carries a flushed put as several messages of its own, so messages of ours
//! win there too. On another machine, with Open MPI's `osc ucx` serving the window, a
//! flushed `MPI_Put` of 8 bytes took 0.63-0.91 µs and the put by messages 1.3-1.45 µs:
//! there a blocking transfer is better off through the window (while 64 `rget`s of 8
//! bytes in flight took 0.43 µs each by messages, which gather them, and 0.80 µs each
//! through the window). So, unless the variable is set, the job measures both for a
//! blocking put at attach and chooses the threshold of blocking transfers
//! (`gex/rma/probe.rs`).
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

use super::am::{SendBuf, State};
use super::boot::{check, fatal};
use super::MpiConduit;
use crate::conduit::{AddressError, Completion, OpHandle, Rank};

/// The most bytes one MPI call moves (its counts are `int`s).
const CHUNK: usize = 1 << 30;

/// The largest non-blocking put copied, so that the call returns before its source is
/// read (see the module documentation).
const COPY_MAX: usize = 64 << 10;

impl MpiConduit {
    /// `Conduit::put` of a blocking call to a segment that is not mapped here:
    /// `MPI_Put`s, each flushed. Out of line, so that the shared-memory case of `put`
    /// stays small.
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

    /// `Conduit::put` of a non-blocking call to a segment that is not mapped here:
    /// `MPI_Rput`s (request-based RMA, MPI 4.1 §12.3.5) from a copy of the source, or
    /// from the source itself when `held` or larger than [`COPY_MAX`] (then waited for
    /// unless `held`); pending until a poll has flushed the target after their requests
    /// completed (see the module documentation).
    ///
    /// # Safety
    /// If `held`, `src` must stay valid and unchanged until the returned completion
    /// says the put is complete.
    #[inline(never)]
    pub(super) unsafe fn put_remote_nb(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        held: bool,
    ) -> Result<Completion, AddressError> {
        let disp = self.displacement(dest, dest_addr, src.len())?;
        if src.is_empty() {
            return Ok(Completion::Done);
        }
        let op = Arc::new(OpHandle::awaiting(src.len().div_ceil(CHUNK)));
        // Every MPI call is made under `state` (MPI_THREAD_SERIALIZED); `windows` is
        // always taken after it.
        let mut st = self.serial_live("put");
        let windows = self.windows.lock();
        let w = windows
            .as_ref()
            .unwrap_or_else(|| fatal("RMA before the segments were attached"));
        let copied = !held && src.len() <= COPY_MAX;
        for (i, chunk) in src.chunks(CHUNK).enumerate() {
            let data: Box<[u8]> = if copied { chunk.into() } else { Box::default() };
            let from = if copied { &data[..] } else { chunk };
            // SAFETY: a null request is overwritten by MPI_Rput.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            let mut done = 0;
            // SAFETY: the target range is inside dest's window (checked); `from` is
            // `data`, on the heap and kept with the request until it completes, or the
            // caller's source, read before this call returns (the wait) or kept by the
            // caller until the put completes (`held`).
            unsafe {
                check(
                    ffi::MPI_Rput(
                        from.as_ptr().cast(),
                        from.len() as c_int,
                        ffi::RSMPI_UINT8_T,
                        dest as c_int,
                        (disp + i * CHUNK) as ffi::MPI_Aint,
                        from.len() as c_int,
                        ffi::RSMPI_UINT8_T,
                        w.world,
                        &mut req,
                    ),
                    "MPI_Rput",
                );
                if copied || held {
                    check(
                        ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE),
                        "MPI_Test",
                    );
                } else {
                    check(
                        ffi::MPI_Wait(&mut req, ffi::RSMPI_STATUS_IGNORE),
                        "MPI_Wait",
                    );
                    done = 1;
                }
            }
            if done != 0 {
                st.unflushed.push((dest, op.clone()));
            } else {
                st.track(
                    req,
                    SendBuf::Put {
                        data,
                        dest,
                        op: op.clone(),
                    },
                );
            }
        }
        Ok(Completion::Pending(op))
    }

    /// Flushes the target of every put part whose request has completed (`unflushed`),
    /// each target once, and completes the parts; returns how many.
    pub(super) fn flush_puts(&self, st: &mut State) -> usize {
        let windows = self.windows.lock();
        let w = windows
            .as_ref()
            .unwrap_or_else(|| fatal("RMA before the segments were attached"));
        st.unflushed.sort_unstable_by_key(|&(dest, _)| dest);
        let mut flushed = None;
        for &(dest, _) in &st.unflushed {
            if flushed != Some(dest) {
                // SAFETY: the window is locked (lock_all) for the life of the job.
                unsafe { check(ffi::MPI_Win_flush(dest as c_int, w.world), "MPI_Win_flush") };
                flushed = Some(dest);
            }
        }
        let n = st.unflushed.len();
        for (_, op) in st.unflushed.drain(..) {
            op.part_done();
        }
        n
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
        let mut st = self.serial_live("get");
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
        let _serial = self.serial_live(call);
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
