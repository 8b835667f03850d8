//! The built-in tools (`GASP_TOOL=profile`, `GASP_TOOL=trace`; `upcxx-run --profile`,
//! `--trace`) and what they share: per-thread buffers and the job's output files.
//!
//! # Per-thread buffers
//!
//! Each thread records into a buffer of its own ([`ThreadSlot`]); the hot path takes no
//! lock and does no I/O. A slot is registered in the tool's list when the thread reports
//! its first event (the only lock, once per thread). The slot's `busy` flag is the
//! handshake with [`finish`](crate::Tool::finish), which may run while other threads
//! still report: the writer claims the flag with one atomic swap, the finishing thread
//! closes the list and claims every slot before reading it, so a late writer finds its
//! slot claimed and drops the event instead of racing with the reader.
//!
//! # Output
//!
//! At the end of the run each rank writes its part (`profile-R.json`, `trace-R.json`) to
//! the directory named by `GASP_PARTS`, which the launcher (`gex::job`) creates, merges
//! into the job's file ([`merge_parts`]) and removes. A rank started without a launcher
//! (a one-rank run) writes the job's file itself, to `GASP_OUT` or the default name.

pub mod profile;
pub mod trace;

use std::cell::UnsafeCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    Profile,
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

    pub fn default_file(self) -> &'static str {
        match self {
            Kind::Profile => DEFAULT_PROFILE_FILE,
            Kind::Trace => DEFAULT_TRACE_FILE,
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "profile" => Some(Kind::Profile),
            "trace" => Some(Kind::Trace),
            _ => None,
        }
    }
}

/// The tool `GASP_TOOL=name` selects: a built-in one, or a C library at that path.
pub(crate) fn builtin(
    name: &str,
    info: &InitInfo,
    args: &mut Vec<String>,
) -> Result<Box<dyn Tool>, String> {
    Ok(match Kind::from_name(name) {
        Some(Kind::Profile) => Box::new(profile::Profiler::new(info, args)),
        Some(Kind::Trace) => Box::new(trace::Tracer::new(info, args)),
        None => Box::new(crate::ctool::CTool::load(name, info, args)?),
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

/// One thread's buffer of a built-in tool.
pub(crate) struct ThreadSlot<T> {
    busy: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only accessed by whoever holds `busy` (see `with` and `drain`).
unsafe impl<T: Send> Sync for ThreadSlot<T> {}

impl<T> ThreadSlot<T> {
    pub(crate) fn new(data: T) -> ThreadSlot<T> {
        ThreadSlot {
            busy: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// Runs `f` on the buffer unless the finishing thread has claimed it.
    #[inline]
    pub(crate) fn with(&self, f: impl FnOnce(&mut T)) {
        if self.busy.swap(true, Ordering::Acquire) {
            return;
        }
        // SAFETY: holding `busy` gives exclusive access.
        f(unsafe { &mut *self.data.get() });
        self.busy.store(false, Ordering::Release);
    }
}

/// The registry of a tool's thread slots.
pub(crate) struct Slots<T> {
    list: Mutex<(bool, Vec<Arc<ThreadSlot<T>>>)>,
}

impl<T> Slots<T> {
    pub(crate) const fn new() -> Slots<T> {
        Slots {
            list: Mutex::new((false, Vec::new())),
        }
    }

    /// Adds a new thread's slot; `None` once the tool has finished.
    pub(crate) fn register(&self, data: T) -> Option<Arc<ThreadSlot<T>>> {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.0 {
            return None;
        }
        let slot = Arc::new(ThreadSlot::new(data));
        list.1.push(slot.clone());
        Some(slot)
    }

    /// Closes the registry and hands every slot's contents to `f`, in registration
    /// order (the first thread, normally the one that initialized the runtime, first).
    pub(crate) fn drain(&self, mut f: impl FnMut(usize, &mut T)) {
        let slots = {
            let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
            list.0 = true;
            std::mem::take(&mut list.1)
        };
        for (i, slot) in slots.iter().enumerate() {
            // A writer holds the flag for a few instructions at most.
            while slot.busy.swap(true, Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // SAFETY: we hold `busy` and never release it: the slot is ours from now on.
            f(i, unsafe { &mut *slot.data.get() });
        }
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

pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) {
    let result = std::fs::File::create(path).and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, value)?;
        std::io::Write::flush(&mut w)
    });
    if let Err(e) = result {
        eprintln!("gasp: cannot write {}: {e}", path.display());
    }
}

/// What [`merge_parts`] produced.
#[derive(Debug)]
pub enum Merged {
    Profile(Profile),
    Trace(Trace),
}

/// Merges the parts of a job of `ranks` ranks found in `dir` into the job's file `out`.
/// Ranks without a part (a rank that failed, or a program built without the `gasp`
/// feature) are missing from the result; with no part at all the error says so.
pub fn merge_parts(kind: Kind, dir: &Path, ranks: u32, out: &Path) -> Result<Merged, String> {
    let mut found = 0;
    let merged = match kind {
        Kind::Profile => {
            let mut parts = Vec::new();
            for rank in 0..ranks {
                if let Some(p) = read_part::<Profile>(&part_path(dir, kind, rank))? {
                    parts.push(p);
                    found += 1;
                }
            }
            Merged::Profile(profile::merge(ranks, parts))
        }
        Kind::Trace => {
            let mut parts = Vec::new();
            for rank in 0..ranks {
                if let Some(p) = read_part::<Trace>(&part_path(dir, kind, rank))? {
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

fn read_part<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
