//! Running a job under a built-in GASP tool (`GASP_TOOL=profile` or `trace`, set by
//! `upcxx-run --profile`/`--trace` or inherited by `UPCXX_RANKS=N prog`).
//!
//! The launcher gives the ranks a private directory (`GASP_PARTS`) for their parts,
//! merges the parts into the job's file (`GASP_OUT`, default `upcxx-profile.json` /
//! `upcxx-trace.json`) once the ranks have exited, prints the profile's summary, and
//! removes the directory whatever happened to the job, and also when a signal ends a
//! launcher (a second `SIGINT` during a teardown, one while the parts merge). A C tool
//! (`GASP_TOOL=/path`) needs none of this: each rank's tool writes what it wants.

use std::ffi::{c_char, CStr, CString, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use gasp::tools::{self, Kind, Merged, GASP_OUT, GASP_PARTS};

use super::JobSpec;

/// A job's built-in tool: where its parts go and where the merged file goes.
pub(super) struct ToolRun {
    kind: Kind,
    parts: PathBuf,
    out: PathBuf,
    /// Whether the signal actions that end a launcher remove `parts`.
    on_signal: bool,
}

/// The value of `name` for the ranks: the spec's own setting, else the launcher's.
fn setting(spec: &JobSpec, name: &str) -> Option<OsString> {
    spec.env
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os(name))
}

impl ToolRun {
    /// The tool run `spec` asks for, with its parts directory created; `None` without a
    /// built-in tool.
    pub(super) fn prepare(spec: &JobSpec) -> io::Result<Option<ToolRun>> {
        let Some(kind) = setting(spec, gasp::dispatch::GASP_TOOL)
            .and_then(|v| v.to_str().and_then(Kind::from_name))
        else {
            return Ok(None);
        };
        let out = setting(spec, GASP_OUT)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(kind.default_file()));
        let mut run = ToolRun {
            kind,
            parts: parts_dir()?,
            out,
            on_signal: false,
        };
        if spec.forward_signals {
            run.remove_on_signal();
        }
        Ok(Some(run))
    }

    /// Has the signal actions that end a launcher ([`remove_parts_in_handler`]) remove
    /// the parts directory first. Only for a launcher ([`JobSpec::forward_signals`]):
    /// it runs one job at a time, and the actions know one directory.
    fn remove_on_signal(&mut self) {
        if let Ok(path) = CString::new(self.parts.as_os_str().as_bytes()) {
            // Leaked: a handler may read it at any moment, and a few bytes per job are
            // cheaper than a way to know when none does.
            let old = PARTS_ON_SIGNAL.swap(path.into_raw(), Ordering::SeqCst);
            debug_assert!(old.is_null(), "one tool job at a time per launcher");
            self.on_signal = true;
        }
    }

    /// The environment the ranks need.
    pub(super) fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            (GASP_PARTS.into(), self.parts.clone().into_os_string()),
            (GASP_OUT.into(), self.out.clone().into_os_string()),
        ]
    }

    /// Merges the parts into the job's file and reports where it is (and, for a
    /// profile, the summary table) on stderr, prefixed with `name`.
    pub(super) fn finish(self, name: &str, ranks: usize) {
        match tools::merge_parts(self.kind, &self.parts, ranks as u32, &self.out) {
            Ok(Merged::Profile(profile)) => {
                eprint!("{}", tools::profile::summary(&profile));
                eprintln!("{name}: profile written to {}", self.out.display());
            }
            Ok(Merged::Trace(trace)) => {
                let dropped = trace.other_data.dropped;
                if dropped > 0 {
                    eprintln!(
                        "{name}: the trace dropped {dropped} events (raise GASP_TRACE_LIMIT)"
                    );
                }
                eprintln!(
                    "{name}: trace of {} events written to {} (open it in ui.perfetto.dev)",
                    trace.trace_events.len(),
                    self.out.display()
                );
            }
            Err(e) => eprintln!("{name}: {e}"),
        }
    }
}

/// A new directory for the ranks' parts, readable and writable by this user only, and
/// made by this call: a name that exists already (another job's, or one another user
/// made to have the ranks write through links of theirs) is passed over for the next.
fn parts_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    loop {
        let parts = std::env::temp_dir().join(format!(
            "pgas-gasp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&parts) {
            Ok(()) => return Ok(parts),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", parts.display()),
                ))
            }
        }
    }
}

impl Drop for ToolRun {
    fn drop(&mut self) {
        if self.on_signal {
            PARTS_ON_SIGNAL.store(std::ptr::null_mut(), Ordering::SeqCst);
        }
        let _ = std::fs::remove_dir_all(&self.parts);
    }
}

/// The parts directory of the launcher's running tool job, for the signal actions that
/// end the launcher: a leaked C string, or null.
static PARTS_ON_SIGNAL: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Removes the launcher's parts directory, if it has one, from a signal action that
/// is about to end the process: a second `SIGINT` or `SIGTERM` during a teardown, or
/// one after the job while the parts merge, which then has the default action (the
/// ranks write only `<tool>-<rank>.json` and its `.partial`, so the directory holds
/// files alone). Async-signal-safe: system calls on a buffer of the stack, written by
/// hand because `std::fs::remove_dir_all` allocates.
pub(super) fn remove_parts_in_handler() {
    use rustix::fs::{openat, unlinkat, AtFlags, Mode, OFlags, RawDir, CWD};

    let path = PARTS_ON_SIGNAL.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if path.is_null() {
        return;
    }
    // SAFETY: a leaked `CString`, never freed.
    let path = unsafe { CStr::from_ptr(path) };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    if let Ok(dir) = openat(CWD, path, flags, Mode::empty()) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
        let mut entries = RawDir::new(&dir, &mut buf);
        while let Some(Ok(entry)) = entries.next() {
            let name = entry.file_name();
            if name != c"." && name != c".." {
                let _ = unlinkat(&dir, name, AtFlags::empty());
            }
        }
    }
    let _ = unlinkat(CWD, path, AtFlags::REMOVEDIR);
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// The parts directory is new, private to this user, and a name that exists
    /// already (whoever made it) is passed over.
    #[test]
    fn a_parts_directory_is_made_fresh_and_private() {
        let first = parts_dir().unwrap();
        let mode = std::fs::metadata(&first).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", first.display());
        // The name after `first`'s, made by someone else beforehand.
        let name = first.file_name().unwrap().to_str().unwrap();
        let (stem, n) = name.rsplit_once('-').unwrap();
        let taken = first.with_file_name(format!("{stem}-{}", n.parse::<usize>().unwrap() + 1));
        std::fs::create_dir(&taken).unwrap();
        let second = parts_dir().unwrap();
        assert!(second != first && second != taken, "{}", second.display());
        for d in [first, taken, second] {
            std::fs::remove_dir(d).unwrap();
        }
    }
}
