//! The end of a rank's MPI ([`MpiConduit::finalize_by`]): what `Conduit::finalize`
//! runs, and `Conduit::end_job` for a rank leaving through `gex::exit(0)` with a
//! deadline (see the parent module's "`gex::exit(0)`").

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ::mpi::ffi;

use super::boot::check;
use super::{abort, am, MpiConduit, SerialGuard, State};

impl MpiConduit {
    /// Finalizes this rank's MPI: waits for its sends, gets and puts, then a barrier of
    /// every rank, after which no rank sends again, then frees the communicators, the
    /// windows and MPI itself.
    ///
    /// With `deadline` (a rank leaving through `gex::exit(0)`), a rank that does not
    /// reach its own finalize by then (it computes, and never waits for communication
    /// again) cannot hold this one: the waits that need the other ranks give up at
    /// `deadline` and end the job with `MPI_Abort` and status 0
    /// ([`abort::end_job_zero`]), and puts in flight are not flushed first (an exit
    /// abandons them, as `gasnet_exit` does; `MPI_Win_unlock_all` completes them once
    /// every rank is here).
    pub(super) fn finalize_by(&self, deadline: Option<Instant>) {
        let mut st = self.serial();
        if st.finalized {
            return;
        }
        st.finalized = true;
        if let Some(host) = self.host.handled() {
            // One write, so that lines of ranks sharing the launcher's stderr stay whole.
            let line = format!(
                "gex: rank {}: AMs handled: {host} from the host queues, {} over MPI in {} \
                 messages\n",
                self.rank, st.net_handled, st.net_messages
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        }
        st.flush();
        // Sends complete once matched; the peers' receives stay posted until they too
        // finalize, so waiting here cannot block on a peer that is gone. A get or put
        // through the window completes once its target has served it, which every rank
        // does while it is inside MPI, as it is from here on (these waits, the flush,
        // the barrier).
        if !complete(&mut st.reqs[am::SEND_BASE..], deadline) {
            self.give_up(st);
        }
        st.reqs.truncate(am::SEND_BASE);
        let sends = std::mem::take(&mut st.sends);
        for sent in sends {
            match sent {
                am::SendBuf::Get(op) => {
                    op.part_done();
                }
                am::SendBuf::Put { dest, op, .. } => st.unflushed.push((dest, op)),
                am::SendBuf::Msg { .. } | am::SendBuf::Control(_) => {}
            }
        }
        if !st.unflushed.is_empty() && deadline.is_none() {
            self.flush_puts(&mut st);
        }
        // Every rank finalizes; after this barrier no rank sends again. It runs on the
        // control channel's communicator, where no other collective runs: a rank that
        // leaves before the others have attached their segments (collectives on
        // `MPI_COMM_WORLD`) cannot pair with those. Nonblocking in every finalize,
        // since a nonblocking collective never matches a blocking one.
        // SAFETY: reading an MPI constant.
        let mut barrier = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: collective over the control communicator, which every rank reaches
        // here and nowhere else.
        unsafe {
            check(
                ffi::MPI_Ibarrier(st.comms[am::CONTROL], &mut barrier),
                "MPI_Ibarrier",
            );
        }
        if !complete(std::slice::from_mut(&mut barrier), deadline) {
            self.give_up(st);
        }
        am::free_receives(&mut st.reqs[..am::SEND_BASE]);
        for comm in st.comms.iter_mut() {
            // SAFETY: a duplicate of the world communicator, its receives completed
            // above and its sends before the barrier.
            unsafe { check(ffi::MPI_Comm_free(comm), "MPI_Comm_free") };
        }
        if let Some(mut w) = self.windows.lock().take() {
            // SAFETY: collective; every rank is here, past its last RMA call, and
            // unlocking completes what is in flight.
            unsafe {
                if w.world != ffi::RSMPI_WIN_NULL {
                    check(ffi::MPI_Win_unlock_all(w.world), "MPI_Win_unlock_all");
                    check(ffi::MPI_Win_free(&mut w.world), "MPI_Win_free");
                }
                check(ffi::MPI_Win_free(&mut w.shared), "MPI_Win_free");
            }
        }
        self.host_mapped.store(false, Ordering::Release);
        // SAFETY: collective over the host team; after the barrier above no rank sends
        // an AM or a signal, so nothing touches the queues again.
        unsafe { check(ffi::MPI_Win_free(&mut st.host_win), "MPI_Win_free") };
        // SAFETY: the last MPI call of this process.
        unsafe { check(ffi::MPI_Finalize(), "MPI_Finalize") };
    }

    /// Ends the job with status 0: the ranks this one waited for did not come in time
    /// after `gex::exit(0)`. Marks the end under way, then releases the conduit's lock
    /// `st` (a failure another thread meets once it has the lock waits for this end).
    fn give_up(&self, st: SerialGuard<'_, State>) -> ! {
        abort::ending_zero();
        drop(st);
        abort::end_job_zero(&format!(
            "gex: rank {}: a rank did not leave within {} s of gex::exit(0) (it made no \
             communication call); ending the job",
            self.rank,
            crate::job::EXIT_GRACE.as_secs()
        ))
    }
}

/// Completes `reqs` (pending or null requests), waiting at most until `deadline` if
/// given; false if it passed first.
fn complete(reqs: &mut [ffi::MPI_Request], deadline: Option<Instant>) -> bool {
    let n = reqs.len() as c_int;
    let Some(deadline) = deadline else {
        // SAFETY: `n` valid requests; statuses ignored.
        unsafe {
            check(
                ffi::MPI_Waitall(n, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE),
                "MPI_Waitall",
            );
        }
        return true;
    };
    loop {
        let mut done = 0;
        // SAFETY: as above.
        unsafe {
            check(
                ffi::MPI_Testall(n, reqs.as_mut_ptr(), &mut done, ffi::RSMPI_STATUSES_IGNORE),
                "MPI_Testall",
            );
        }
        if done != 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
