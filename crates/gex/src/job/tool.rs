//! Running a job under a built-in GASP tool (`GASP_TOOL=profile` or `trace`, set by
//! `upcxx-run --profile`/`--trace` or inherited by `UPCXX_RANKS=N prog`).
//!
//! The launcher gives the ranks a private directory (`GASP_PARTS`) for their parts,
//! merges the parts into the job's file (`GASP_OUT`, default `upcxx-profile.json` /
//! `upcxx-trace.json`) once the ranks have exited, prints the profile's summary, and
//! removes the directory whatever happened to the job. A C tool (`GASP_TOOL=/path`)
//! needs none of this: each rank's tool writes what it wants.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use gasp::tools::{self, Kind, Merged, GASP_OUT, GASP_PARTS};

use super::JobSpec;

/// A job's built-in tool: where its parts go and where the merged file goes.
pub(super) struct ToolRun {
    kind: Kind,
    parts: PathBuf,
    out: PathBuf,
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
        Ok(Some(ToolRun {
            kind,
            parts: parts_dir()?,
            out,
        }))
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
        let _ = std::fs::remove_dir_all(&self.parts);
    }
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
