//! The built-in tools (`GASP_TOOL=profile`, `GASP_TOOL=trace`; `upcxx-run --profile`,
//! `--trace`) and what they share: per-thread buffers and the job's output files.
//!
//! # Per-thread buffers
//!
//! Each thread records into a buffer of its own (`slots.rs`); the hot path takes no
//! lock, does no I/O and no atomic read-modify-write. A slot is registered in the tool's
//! list when the thread reports its first event (the only lock, once per thread).
//! [`finish`](crate::Tool::finish) may run while other threads still report: it closes
//! every slot and waits for writers inside one, so a late writer drops its event instead
//! of racing with the reader.
//!
//! # Output
//!
//! At the end of the run each rank writes its part (`profile-R.json`, `trace-R.json`) to
//! the directory named by `GASP_PARTS`, which the launcher (`gex::job`) creates, merges
//! into the job's file ([`merge_parts`]) and removes. A rank started without a launcher
//! (a one-rank run) writes the job's file itself, to `GASP_OUT` or the default name.

pub mod profile;
mod slots;
pub mod trace;
#[cfg(feature = "tracing")]
pub mod tracing;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::events::{USEREVT_END, USEREVT_START};
use crate::formats::{Profile, Trace};
use crate::tool::{InitInfo, Tool};

/// Directory for the ranks' parts (set by the launcher).
pub const GASP_PARTS: &str = "GASP_PARTS";
/// The job's output file.
pub const GASP_OUT: &str = "GASP_OUT";
/// Default output file of the profiler.
pub const DEFAULT_PROFILE_FILE: &str = "upcxx-profile.json";
/// Default output file of the tracer.
pub const DEFAULT_TRACE_FILE: &str = "upcxx-trace.json";

/// The built-in tool kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The profiler, [`profile::Profiler`].
    Profile,
    /// The tracer, [`trace::Tracer`].
    Trace,
}

impl Kind {
    /// The `GASP_TOOL` value that selects it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Profile => "profile",
            Kind::Trace => "trace",
        }
    }

    /// The job's file when `GASP_OUT` names none.
    pub fn default_file(self) -> &'static str {
        match self {
            Kind::Profile => DEFAULT_PROFILE_FILE,
            Kind::Trace => DEFAULT_TRACE_FILE,
        }
    }

    /// The kind the `GASP_TOOL` value `name` selects, if it names a built-in tool.
    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "profile" => Some(Kind::Profile),
            "trace" => Some(Kind::Trace),
            _ => None,
        }
    }
}

/// A tool `GASP_TOOL` selects: the dispatcher calls the built-in ones directly (their
/// `notify` inlines into it), any other through `dyn Tool`.
///
/// `repr(u8)`: the variant is one byte the dispatcher compares, not a niche in the
/// boxed pointer that takes several instructions to decode.
#[repr(u8)]
pub(crate) enum Selected {
    Profile(profile::Profiler),
    Trace(trace::Tracer),
    Other(Box<dyn Tool>),
}

impl Selected {
    /// The tool as the trait object the rarely used calls go through.
    pub(crate) fn as_tool(&self) -> &dyn Tool {
        match self {
            Selected::Profile(p) => p,
            Selected::Trace(t) => t,
            Selected::Other(t) => &**t,
        }
    }
}

/// The tool `GASP_TOOL=name` selects: a built-in one, or a C library at that path.
pub(crate) fn builtin(
    name: &str,
    info: &InitInfo,
    args: &mut Vec<String>,
) -> Result<Selected, String> {
    Ok(match Kind::from_name(name) {
        Some(Kind::Profile) => Selected::Profile(profile::Profiler::new(info, args)),
        Some(Kind::Trace) => Selected::Trace(trace::Tracer::new(info, args)),
        #[cfg(feature = "tracing")]
        None if name == tracing::TOOL_NAME => {
            Selected::Other(Box::new(tracing::Forwarder::new(info, None)))
        }
        None => Selected::Other(Box::new(crate::ctool::CTool::load(name, info, args)?)),
    })
}

/// The user events a built-in tool created (GASP §3.4), and event names by tag.
#[derive(Default)]
pub(crate) struct EventNames {
    user: Mutex<Vec<String>>,
}

impl EventNames {
    /// `gasp_create_event`: the next user tag, named `name`.
    pub(crate) fn create(&self, name: &str) -> u32 {
        let mut user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        user.push(name.to_owned());
        (USEREVT_START + user.len() as u32 - 1).min(USEREVT_END)
    }

    /// The name of a system or user event.
    pub(crate) fn name(&self, tag: u32) -> String {
        if let Some(def) = crate::events::by_tag(tag) {
            return def.name.to_owned();
        }
        let user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        tag.checked_sub(USEREVT_START)
            .and_then(|i| user.get(i as usize))
            .cloned()
            .unwrap_or_else(|| format!("event {tag}"))
    }
}

/// Where this rank writes: its part in `GASP_PARTS`, or the job's file if it runs alone.
pub(crate) enum Destination {
    Part(PathBuf),
    Job(PathBuf),
}

pub(crate) fn destination(kind: Kind, rank: u32, ranks: u32) -> Destination {
    if let Some(dir) = std::env::var_os(GASP_PARTS) {
        return Destination::Part(part_path(Path::new(&dir), kind, rank));
    }
    let out = std::env::var_os(GASP_OUT)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(kind.default_file()));
    if ranks == 1 {
        Destination::Job(out)
    } else {
        // Not started by our launcher (e.g. by an MPI launcher): one file per rank, a
        // part in the job file's format (`merge_parts` combines such parts).
        let mut name = out.into_os_string();
        name.push(format!(".rank{rank}"));
        Destination::Part(PathBuf::from(name))
    }
}

/// The path of rank `rank`'s part in `dir`.
pub fn part_path(dir: &Path, kind: Kind, rank: u32) -> PathBuf {
    dir.join(format!("{}-{rank}.json", kind.name()))
}

/// Writes `value` to `path` whole or not at all: into a file beside it, renamed to
/// `path` once complete, so that a writer stopped halfway (a rank killed as its job ends)
/// leaves no truncated file for the merge to read.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let result = std::fs::File::create(&partial)
        .and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            serde_json::to_writer(&mut w, value)?;
            std::io::Write::flush(&mut w)
        })
        .and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&partial);
        eprintln!("gasp: cannot write {}: {e}", path.display());
    }
}

/// What [`merge_parts`] produced.
#[derive(Debug)]
pub enum Merged {
    /// The ranks' profiles summed into the job's.
    Profile(Profile),
    /// The ranks' traces joined on one timeline.
    Trace(Trace),
}

/// Merges the parts of a job of `ranks` ranks found in `dir` into the job's file `out`.
/// Ranks without a part (a rank that failed, or a program built without the `gasp`
/// feature), or with one that cannot be read (said on stderr), are missing from the
/// result; with no part at all the error says so.
pub fn merge_parts(kind: Kind, dir: &Path, ranks: u32, out: &Path) -> Result<Merged, String> {
    let mut found = 0;
    let merged = match kind {
        Kind::Profile => {
            let mut parts = Vec::new();
            for rank in 0..ranks {
                if let Some(p) = read_part::<Profile>(&part_path(dir, kind, rank)) {
                    parts.push(p);
                    found += 1;
                }
            }
            Merged::Profile(profile::merge(ranks, parts))
        }
        Kind::Trace => {
            let mut parts = Vec::new();
            for rank in 0..ranks {
                if let Some(p) = read_part::<Trace>(&part_path(dir, kind, rank)) {
                    parts.push(p);
                    found += 1;
                }
            }
            Merged::Trace(trace::merge(ranks, parts))
        }
    };
    if found == 0 {
        return Err(format!(
            "no {} data: no rank reported GASP events (is the program built with the \
             `gasp` feature of upcxx/gex, which is on by default?)",
            kind.name()
        ));
    }
    match &merged {
        Merged::Profile(p) => write_json(out, p),
        Merged::Trace(t) => write_json(out, t),
    }
    Ok(merged)
}

/// A rank's part, if it wrote one that can be read; one that cannot is left out of the
/// merge, said on stderr, rather than costing the other ranks' data.
fn read_part<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let part = match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => Err(e.to_string()),
    };
    part.map_err(|e| eprintln!("gasp: {}: {e}; that rank is left out", path.display()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part that cannot be read (a rank stopped while writing it) is left out; the
    /// other ranks' parts still make the job's file, and a part written is never seen
    /// half-written.
    #[test]
    fn a_broken_part_costs_only_its_rank() {
        let dir = std::env::temp_dir().join(format!("gasp-merge-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let part = Profile {
            tool: crate::formats::PROFILE_TOOL.into(),
            version: 1,
            ranks: 2,
            rank_time_ns: vec![5, 0],
            ..Default::default()
        };
        write_json(&part_path(&dir, Kind::Profile, 0), &part);
        assert!(std::fs::read_dir(&dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".partial")));
        std::fs::write(part_path(&dir, Kind::Profile, 1), b"{\"tool\": \"gasp-prof").unwrap();
        let out = dir.join("profile.json");
        let merged = merge_parts(Kind::Profile, &dir, 2, &out).expect("rank 0's part merges");
        let Merged::Profile(p) = merged else {
            panic!("a profile")
        };
        assert_eq!(p.rank_time_ns[0], 5);
        assert!(out.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn event_names_cover_system_and_user_events() {
        let names = EventNames::default();
        assert_eq!(names.create("solve"), USEREVT_START);
        assert_eq!(names.create("halo"), USEREVT_START + 1);
        assert_eq!(names.name(USEREVT_START + 1), "halo");
        assert_eq!(names.name(crate::events::GASP_UPC_PUT), "GASP_UPC_PUT");
        assert_eq!(
            names.name(USEREVT_START + 7),
            format!("event {}", USEREVT_START + 7)
        );
    }
}
