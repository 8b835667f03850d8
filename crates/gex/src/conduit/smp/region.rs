//! The one owner of the job region: creating it (launcher and single-rank jobs),
//! inheriting it (a rank), mapping it, validating it, and the environment variable that
//! passes it from the launcher to the ranks.
//!
//! The region is one anonymous memory file (`memfd_create("gex-job", MFD_CLOEXEC)`).
//! A memfd has no name in any file system, so nothing can ever be left behind in
//! `/dev/shm`, not when a rank crashes, not when the launcher is killed with `SIGKILL`:
//! the kernel frees the memory when the last process that maps it or holds its
//! descriptor goes away. The descriptor is created close-on-exec so that no unrelated
//! program started by this process inherits it; `spawn` clears that flag in
//! exactly the children that are ranks of the job.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use rustix::fs::MemfdFlags;
use rustix::mm::{MapFlags, ProtFlags};

use super::layout::{JobHeader, JobLayout, Region, HEADER_SIZE, MAGIC, PAGE};
use crate::env::UPCXX_RANK;

/// Environment variable holding the descriptor number of the job region's memfd, which
/// every rank inherits from the launcher.
pub const GEX_SHM_FD: &str = "GEX_SHM_FD";

/// A shared read-write mapping of a whole job region; unmapped on drop.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide shared memory, only unmapped on drop; all shared
// state reached through it is atomic or owned by one rank (see `layout`).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the whole memory file `fd` shared and read-write.
    fn new(fd: impl AsFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh shared mapping at an address the kernel chooses cannot alias
        // memory this process already uses.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("cannot map the job region: {e}"))
        })?;
        Ok(Mapping {
            base: base.cast(),
            len,
        })
    }

    /// The region laid out as `layout` over this mapping.
    ///
    /// The caller keeps `self` alive as long as it uses the region: a `Region` is an
    /// address, not an owner.
    fn region(&self, layout: JobLayout) -> Region {
        debug_assert!(layout.total_size() <= self.len);
        // SAFETY: the mapping covers `layout.total_size()` bytes, shared and writable,
        // for as long as the caller keeps `self` (see above).
        unsafe { Region::new(self.base, layout) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `new`, and no region
        // handed out by `region` outlives its owner (see there).
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// The layout of a job, refusing sizes that overflow or cannot be mapped.
pub(crate) fn checked_layout(ranks: usize, segment_size: usize) -> io::Result<JobLayout> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    if ranks == 0 {
        return Err(invalid("the number of ranks must be at least 1".to_owned()));
    }
    if u32::try_from(ranks).is_err() {
        return Err(invalid(format!("too many ranks: {ranks}")));
    }
    // JobLayout::new rounds up without overflow checks: check the same sums here.
    let stride = segment_size
        .checked_add(PAGE)
        .and_then(|s| s.checked_add(JobLayout::SEGMENT_OFFSET));
    let total = stride
        .and_then(|s| s.checked_mul(ranks))
        .and_then(|s| s.checked_add(HEADER_SIZE))
        .filter(|&t| t <= isize::MAX as usize);
    if total.is_none() {
        return Err(invalid(format!(
            "a job of {ranks} ranks with a segment of {segment_size} bytes each is too large"
        )));
    }
    Ok(JobLayout::new(ranks, segment_size))
}

/// A job region created by this process (the launcher's, or a single-rank job's own):
/// the memfd and its mapping, with the header written. Unmapped and closed on drop.
#[derive(Debug)]
pub(crate) struct JobRegion {
    fd: OwnedFd,
    mapping: Mapping,
    layout: JobLayout,
}

impl JobRegion {
    /// Creates, sizes and maps the region of a job of `ranks` ranks with segments of
    /// `segment_size` bytes, and writes its header.
    pub(crate) fn create(ranks: usize, segment_size: usize) -> io::Result<JobRegion> {
        let layout = checked_layout(ranks, segment_size)?;
        let ctx = |what: &str, e: rustix::io::Errno| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("cannot {what} the job region: {e}"))
        };
        let fd = rustix::fs::memfd_create("gex-job", MemfdFlags::CLOEXEC)
            .map_err(|e| ctx("create", e))?;
        rustix::fs::ftruncate(&fd, layout.total_size() as u64).map_err(|e| ctx("size", e))?;
        let mapping = Mapping::new(&fd, layout.total_size())?;
        let job = JobRegion {
            fd,
            mapping,
            layout,
        };
        job.region().init_header();
        Ok(job)
    }

    /// The region, valid while `self` lives.
    pub(crate) fn region(&self) -> Region {
        self.mapping.region(self.layout)
    }

    /// The memfd, for `spawn::spawn_rank`.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The job region as mapped by a rank, from the descriptor it inherited from the
/// launcher; unmapped on drop. It leaves the descriptor open (see
/// [`InheritedRegion::close_descriptor`]).
#[derive(Debug)]
pub struct InheritedRegion {
    /// Keeps `region` mapped.
    _mapping: Mapping,
    region: Region,
    rank: usize,
    fd: RawFd,
}

impl InheritedRegion {
    /// Maps the region named by `GEX_SHM_FD`, for the rank given by `UPCXX_RANK`.
    ///
    /// Returns `Ok(None)` if this process was not started by a launcher (either
    /// variable unset), and an error if the variables are invalid or the descriptor is
    /// not a job region of this layout version.
    pub fn from_env() -> io::Result<Option<InheritedRegion>> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
        let (Some(fd), Some(rank)) = (std::env::var_os(GEX_SHM_FD), std::env::var_os(UPCXX_RANK))
        else {
            return Ok(None);
        };
        let fd: RawFd = fd
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&fd: &RawFd| fd >= 0)
            .ok_or_else(|| invalid(format!("invalid {GEX_SHM_FD}: {fd:?}")))?;
        let rank: usize = rank
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| invalid(format!("invalid {UPCXX_RANK}: {rank:?}")))?;
        // SAFETY: the launcher passed this descriptor number, open, to this process. If
        // the variable is stale the descriptor may be closed (fstat fails) or another
        // file (rejected by the size and magic checks below); it is only borrowed for
        // the duration of this function and never closed here.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let size = rustix::fs::fstat(borrowed)
            .map_err(|e| invalid(format!("{GEX_SHM_FD}: cannot stat the job region: {e}")))?
            .st_size;
        let len = usize::try_from(size)
            .ok()
            .filter(|&l| l >= HEADER_SIZE)
            .ok_or_else(|| invalid(format!("{GEX_SHM_FD} is not a job region")))?;
        let mapping = Mapping::new(borrowed, len)?;
        // SAFETY: the header lies at offset 0 of a mapping of at least HEADER_SIZE
        // bytes, page aligned, and is only accessed through atomics.
        let header = unsafe { &*(mapping.base as *const JobHeader) };
        if header.magic.load(Ordering::Acquire) != MAGIC {
            return Err(invalid(format!(
                "{GEX_SHM_FD} is not a job region of this version"
            )));
        }
        let ranks = header.ranks.load(Ordering::Relaxed) as usize;
        let segment_size = header.segment_size.load(Ordering::Relaxed) as usize;
        // The header is another process's writing: sums of its fields must not overflow.
        let layout = checked_layout(ranks, segment_size)
            .map_err(|e| invalid(format!("{GEX_SHM_FD}: the job header is corrupt: {e}")))?;
        if layout.total_size() > len || rank >= ranks {
            return Err(invalid(format!(
                "job region does not match: {len} bytes, {ranks} ranks, rank {rank}"
            )));
        }
        Ok(Some(InheritedRegion {
            region: mapping.region(layout),
            _mapping: mapping,
            rank,
            fd,
        }))
    }

    /// The region, valid while `self` lives.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Closes the inherited descriptor (the mapping stays), so that programs this rank
    /// starts do not inherit the job.
    pub fn close_descriptor(&self) {
        // SAFETY: the launcher passed this descriptor for the rank to own, and
        // `from_env` checked that it is the job's memfd; nothing else in the process
        // uses the number (the mapping does not need it).
        drop(unsafe { OwnedFd::from_raw_fd(self.fd) });
    }
}

/// Sets close-on-exec on the job region's descriptor as a rank's process starts, before
/// `main`: the launcher clears it for `exec`, and `init` closes the descriptor, but a
/// program the rank starts before `init` (or without ever calling it) would otherwise
/// inherit the job's memory and keep all of it alive after the job. An entry of
/// `.init_array` rather than a dependency that wraps one: it is a static and a function.
#[used]
#[link_section = ".init_array"]
static CLOSE_REGION_ON_EXEC: extern "C" fn() = close_region_on_exec;

extern "C" fn close_region_on_exec() {
    // Before `main` only the environment (`environ`, set before constructors run), the
    // allocator and system calls are used. Nothing is done unless both variables of a
    // launcher are set and the descriptor is a job region's memfd (by its name, which
    // `JobRegion::create` gives it).
    if std::env::var_os(UPCXX_RANK).is_none() {
        return;
    }
    let Some(fd) = std::env::var_os(GEX_SHM_FD)
        .and_then(|v| v.to_str()?.trim().parse::<RawFd>().ok())
        .filter(|&fd| fd >= 0)
    else {
        return;
    };
    let is_region = std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|target| {
        target
            .as_os_str()
            .as_encoded_bytes()
            .starts_with(b"/memfd:gex-job")
    });
    if is_region {
        // SAFETY: borrowed for one system call; the number names the job's memfd.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
}

/// The region of a job this process belongs to, and what keeps it mapped.
pub(super) enum Joined {
    /// Inherited from a launcher.
    Inherited(InheritedRegion),
    /// Created for a job of this one rank.
    Own(JobRegion),
}

impl Joined {
    /// Joins the job described by the environment, or creates a one-rank job of
    /// `segment_size` bytes when no launcher started this process.
    pub(super) fn from_env(segment_size: impl FnOnce() -> io::Result<usize>) -> io::Result<Joined> {
        if let Some(inherited) = InheritedRegion::from_env()? {
            inherited.close_descriptor();
            return Ok(Joined::Inherited(inherited));
        }
        if std::env::var_os(UPCXX_RANK).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{UPCXX_RANK} is set but {GEX_SHM_FD} is not: start the job with upcxx-run"
                ),
            ));
        }
        // A build whose conduit does not speak MPI started by an MPI launcher: every
        // process would run alone as rank 0 of 1. (With the `mpi` feature such a start
        // selects the mpi conduit and never comes here.)
        if let Some(n) = crate::env::mpi_launcher_size().filter(|&n| n > 1) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "started by an MPI launcher as one of {n} processes, but this program \
                     was built without the `mpi` feature, so each process would run alone: \
                     rebuild it with `--features mpi`, or start it with upcxx-run"
                ),
            ));
        }
        Ok(Joined::Own(JobRegion::create(1, segment_size()?)?))
    }

    /// The region and this process's rank in it.
    pub(super) fn region(&self) -> (Region, usize) {
        match self {
            Joined::Inherited(r) => (*r.region(), r.rank()),
            Joined::Own(r) => (r.region(), 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_limits() {
        assert!(checked_layout(0, 4096).is_err());
        assert!(checked_layout(2, usize::MAX).is_err());
        assert!(checked_layout(usize::MAX / 2, 1 << 20).is_err());
        assert_eq!(
            checked_layout(3, 1 << 20).unwrap(),
            JobLayout::new(3, 1 << 20)
        );
    }
}
