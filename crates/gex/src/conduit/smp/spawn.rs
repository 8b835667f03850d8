//! Starting the processes of a job on this host: each child inherits exactly the job's
//! region and dies with its launcher.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use rustix::io::FdFlags;
use rustix::process::Signal;

use super::region::{JobRegion, GEX_SHM_FD};

/// Spawns `cmd` as a rank of the job whose region is `region`.
///
/// The child gets `GEX_SHM_FD`. Between `fork` and `exec` it clears close-on-exec on its
/// own copy of the region's descriptor, so that exactly the ranks of this job inherit
/// it, even while other threads launch other jobs, and asks for
/// `PR_SET_PDEATHSIG = SIGKILL`: if the launcher dies, however it dies, the kernel kills
/// its ranks, so no rank can outlive its launcher and spin forever waiting for peers.
/// The death signal is tied to the *thread* that forked the child: the caller keeps that
/// thread alive until the rank is reaped. The child re-checks its parent after the
/// `prctl`, closing the window in which the launcher could die before the death signal
/// was armed.
pub(crate) fn spawn_rank(mut cmd: Command, region: &JobRegion) -> io::Result<Child> {
    let fd = region.fd().as_raw_fd();
    cmd.env(GEX_SHM_FD, fd.to_string());
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe operations are allowed. It only makes raw system calls through
    // rustix (fcntl, prctl, getppid), allocates nothing and takes no locks; the errors
    // it returns are plain errno values (`io::Error::from(Errno)` does not allocate).
    // `fd` is open in the child, since the child is a copy of this process taken while
    // the caller holds `region`.
    unsafe {
        cmd.pre_exec(move || {
            let fd = BorrowedFd::borrow_raw(fd);
            rustix::io::fcntl_setfd(fd, FdFlags::empty())?;
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from(rustix::io::Errno::SRCH));
            }
            Ok(())
        });
    }
    cmd.spawn()
}
