//! Call sites: which line of the user's program an operation's cost belongs to.
//!
//! Every event carries its call site (GASP §3.2 `filename`, `linenum`, `colnum`; in a
//! trace the `file`, `line`, `column` args), so the report can sum by (operation kind,
//! call site) as well as by kind. [`SiteTable`] does that summing for both inputs; the
//! result is [`Summary::sites`](super::Summary::sites), costliest first.
//!
//! # Source text
//!
//! The recorded `file` is the path the compiler saw (`examples/dht.rs`, relative to the
//! directory the program was built in, or absolute). [`SourceLines`] reads it where the
//! report runs: as given, else under each of the directories it is given, in order. A
//! file that cannot be read (another machine, a dependency's source) simply has no text;
//! files larger than [`MAX_SOURCE_BYTES`] are not read, as no real source file is that
//! large and the report must stay quick.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Source files above this size are not read for their lines.
pub const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// A call site: `file:line:column` of the user's code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// The source file, as the compiler named it.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl Site {
    /// The site a trace event's `args` name, if they name a file.
    pub(crate) fn from_args(args: &Map<String, Value>) -> Option<Site> {
        let file = args.get("file")?.as_str()?;
        if file.is_empty() {
            return None;
        }
        let num = |k| {
            args.get(k)
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0)
        };
        Some(Site {
            file: file.to_owned(),
            line: num("line"),
            column: num("column"),
        })
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One operation kind at one call site, over the whole job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteCost {
    /// The operation kind (the event's name).
    pub name: String,
    /// Where the user's program called it.
    pub site: Site,
    /// Ranks on which it occurred there, ascending.
    pub ranks: Vec<usize>,
    /// The number of operations, summed over the ranks.
    pub count: u64,
    /// Their summed duration, nanoseconds.
    pub total_ns: u64,
    /// The bytes they moved.
    pub bytes: u64,
    /// The text of the site's line, trimmed, once [`super::Summary::read_sources`] found
    /// the file.
    pub source: Option<String>,
}

impl SiteCost {
    /// Mean duration of one operation.
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// Sums operations by (kind, site) while a summary is built.
#[derive(Default)]
pub(super) struct SiteTable {
    rows: HashMap<(String, Site), SiteCost>,
}

impl SiteTable {
    /// Adds `count` operations of `ns` in all and `bytes` on `rank`.
    pub(super) fn add(
        &mut self,
        rank: usize,
        name: &str,
        site: &Site,
        count: u64,
        ns: u64,
        bytes: u64,
    ) {
        let row = self
            .rows
            .entry((name.to_owned(), site.clone()))
            .or_insert_with(|| SiteCost {
                name: name.to_owned(),
                site: site.clone(),
                ranks: Vec::new(),
                count: 0,
                total_ns: 0,
                bytes: 0,
                source: None,
            });
        if count > 0 {
            if let Err(at) = row.ranks.binary_search(&rank) {
                row.ranks.insert(at, rank);
            }
        }
        // Sums of a file's values: saturating, as everywhere in the summary.
        row.count = row.count.saturating_add(count);
        row.total_ns = row.total_ns.saturating_add(ns);
        row.bytes = row.bytes.saturating_add(bytes);
    }

    /// The sites, costliest first: by total time, then count, then kind and site.
    pub(super) fn into_sorted(self) -> Vec<SiteCost> {
        let mut rows: Vec<SiteCost> = self.rows.into_values().collect();
        rows.sort_by(|a, b| {
            (b.total_ns, b.count)
                .cmp(&(a.total_ns, a.count))
                .then_with(|| (&a.name, &a.site).cmp(&(&b.name, &b.site)))
        });
        rows
    }
}

/// Lines of source files, read once each.
pub struct SourceLines {
    roots: Vec<PathBuf>,
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceLines {
    /// Looks files up as given, then under each of `roots` in order.
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Self {
        SourceLines {
            roots: roots.into_iter().collect(),
            files: HashMap::new(),
        }
    }

    /// The trimmed text of `site`'s line, if its file is readable and has that line.
    pub fn line(&mut self, site: &Site) -> Option<String> {
        let roots = &self.roots;
        let lines = self
            .files
            .entry(site.file.clone())
            .or_insert_with(|| read_lines(&site.file, roots));
        let text = lines.as_ref()?.get((site.line as usize).checked_sub(1)?)?;
        Some(text.trim().to_owned())
    }
}

fn read_lines(file: &str, roots: &[PathBuf]) -> Option<Vec<String>> {
    let given = Path::new(file);
    let candidates = std::iter::once(given.to_path_buf()).chain(
        roots
            .iter()
            .filter(|_| given.is_relative())
            .map(|r| r.join(given)),
    );
    for path in candidates {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > MAX_SOURCE_BYTES {
            continue;
        }
        if let Ok(text) = std::fs::read(&path) {
            let text = String::from_utf8_lossy(&text);
            return Some(text.lines().map(str::to_owned).collect());
        }
    }
    None
}
