//! `upcxx-run report` on a real program's profile and trace: the call sites (`file:line:col`
//! of the user's code, GASP §3.2 `filename`/`linenum`/`colnum`) in the terminal summary
//! and the HTML page, with the text of their lines, and the page as a browser shows it.
//!
//! The dht example runs on 3 ranks under `upcxx-run --profile` / `--trace`, in a
//! directory of its own (so the launcher cannot read the sources); `upcxx-run report`
//! then finds them through `--source-dir` (the workspace root, where the compiler's
//! relative paths such as `examples/dht.rs` start).
//!
//! The browser test renders the page with headless Chromium (`--dump-dom`) and reads the
//! DOM it dumps. Without `chromium` on the PATH it prints why and passes; CI installs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `target/<profile>/NAME`, `target/<profile>/examples/NAME`: built by `cargo test
/// --workspace` (the launcher for its own tests, the examples for the root package's).
fn built(relative: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let path = dir.join(relative);
    assert!(
        path.exists(),
        "{} was not built: run `cargo test --workspace` (or `cargo build -p upcxx-run \
         --example dht` first)",
        path.display()
    );
    path
}

/// A fresh directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gasp-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn check(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} exited with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn upcxx_run(dir: &Path) -> Command {
    let mut cmd = Command::new(built("upcxx-run"));
    cmd.current_dir(dir)
        .env("TMPDIR", dir)
        .env_remove("GASP_TOOL")
        .env_remove("GASP_OUT")
        .env_remove("UPCXX_RANK")
        .env_remove("UPCXX_RANKS");
    cmd
}

/// Runs the dht example on 3 ranks under `tool_arg`, then `upcxx-run report` on what it
/// wrote; returns the report's stdout and the HTML page's path.
fn dht_report(dir: &TempDir, tool_arg: &str, file: &str) -> (String, PathBuf) {
    let out = upcxx_run(&dir.0)
        .args(["-n", "3", "--timeout", "120", tool_arg])
        .arg(built("examples/dht"))
        .arg("100")
        .output()
        .expect("start upcxx-run");
    let stdout = check("the dht job", &out);
    assert!(stdout.contains("verified"), "{stdout}");
    let html = dir.0.join("report.html");
    let out = upcxx_run(&dir.0)
        .args(["report", file, "-o"])
        .arg(&html)
        .arg("--top")
        .arg("40")
        .arg("--source-dir")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("start upcxx-run report");
    (check("upcxx-run report", &out), html)
}

/// The text of `site`'s line (`file:line:col`) in the workspace, trimmed.
fn source_line(site: &str) -> String {
    let mut parts = site.rsplitn(3, ':');
    let (_col, line, file) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
    let line: usize = line.parse().expect("a line number");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    text.lines()
        .nth(line - 1)
        .expect("the line")
        .trim()
        .to_owned()
}

/// The call-site table of the terminal summary: (site, kind, count, source text).
fn summary_sites(stdout: &str) -> Vec<(String, String, u64, Option<String>)> {
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("call site"))
        .unwrap_or_else(|| panic!("no call-site table:\n{stdout}"));
    let mut rows = Vec::new();
    for line in &lines[header + 1..] {
        if let Some(text) = line.strip_prefix("    | ") {
            let last: &mut (String, String, u64, Option<String>) =
                rows.last_mut().expect("a source line under a row");
            last.3 = Some(text.to_owned());
        } else if line.trim().is_empty() {
            break;
        } else {
            let cols: Vec<&str> = line.split_whitespace().collect();
            rows.push((
                cols[0].to_owned(),
                cols[1].to_owned(),
                cols[3].parse().expect("a count"),
                None,
            ));
        }
    }
    rows
}

#[test]
fn profile_summary_names_the_programs_lines() {
    let dir = TempDir::new("profile");
    let (stdout, html) = dht_report(&dir, "--profile=p.json", "p.json");
    let sites = summary_sites(&stdout);
    // Each rank inserts and then finds 100 keys: two RPC call sites in the example's
    // table (`examples/dht/table.rs`, in
    // `insert` and `find`), 300 sends each.
    let sends: Vec<_> = sites
        .iter()
        .filter(|s| s.1 == "GASP_UPCXX_RPC_SEND" && s.0.starts_with("examples/dht/table.rs:"))
        .collect();
    assert_eq!(sends.len(), 2, "{stdout}");
    for send in &sends {
        assert_eq!(send.2, 300, "{stdout}");
        assert_eq!(send.3.as_deref(), Some("rpc("), "{stdout}");
    }
    // Every line shown is the line the site names.
    let mut shown = 0;
    for (site, _, _, source) in &sites {
        if let Some(source) = source {
            assert_eq!(*source, source_line(site), "{site}");
            shown += 1;
        }
    }
    assert!(shown >= 3, "{stdout}");

    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(page.contains("<h2 id=\"call-sites\">Costliest call sites</h2>"));
    for send in &sends {
        assert!(
            page.contains(&format!("<code>{}</code>", send.0)),
            "{} not on the page",
            send.0
        );
    }
    assert!(page.contains("<tr class=\"src\"><td colspan=\"7\"><code>rpc(</code></td></tr>"));
    // The kinds table links each kind to its own table of sites.
    for anchor in page.split("href=\"#").skip(1) {
        let id = &anchor[..anchor.find('"').expect("a closed attribute")];
        assert!(page.contains(&format!("id=\"{id}\"")), "#{id} goes nowhere");
    }
    assert!(page.contains("href=\"#sites-of-kind-"));
}

#[test]
fn trace_report_lists_each_ranks_longest_operations_with_their_sites() {
    let dir = TempDir::new("trace");
    let (stdout, html) = dht_report(&dir, "--trace=t.json", "t.json");
    let sites = summary_sites(&stdout);
    assert!(
        sites
            .iter()
            .any(|s| s.1 == "GASP_UPCXX_RPC_SEND" && s.3.as_deref() == Some("rpc(")),
        "{stdout}"
    );
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(page.contains("Longest operations per rank"));
    for rank in 0..3 {
        let at = page
            .find(&format!("<h3 id=\"longest-rank-{rank}\">"))
            .unwrap_or_else(|| panic!("no longest operations of rank {rank}"));
        let table = &page[at..at + page[at..].find("</table>").expect("its table")];
        let rows = table.matches("<tr class=\"site\">").count();
        assert_eq!(rows, gasp::report::LONGEST_PER_RANK, "rank {rank}: {table}");
        assert!(table.contains("<code>examples/dht"), "{table}");
    }
}

/// The rows of the tables of class `class` in a dumped DOM, as their cells' text.
fn dom_rows(dom: &str, row_class: &str) -> Vec<Vec<String>> {
    let open = format!("<tr class=\"{row_class}\">");
    dom.split(&open)
        .skip(1)
        .map(|rest| {
            let row = &rest[..rest.find("</tr>").expect("a closed row")];
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let cell = &cell[cell.find('>').expect("a tag") + 1..];
                    let cell = &cell[..cell.find("</td>").unwrap_or(cell.len())];
                    strip_tags(cell)
                })
                .collect()
        })
        .collect()
}

fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn a_browser_shows_the_call_sites_and_their_lines() {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok())
    else {
        eprintln!(
            "skipped: no chromium on the PATH (CI installs it; locally `apt-get install \
             chromium`)"
        );
        return;
    };
    let dir = TempDir::new("browser");
    let (stdout, html) = dht_report(&dir, "--profile=p.json", "p.json");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.0.join("chromium").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("start chromium");
    let dom = check("chromium --dump-dom", &out);
    assert!(dom.contains("Costliest call sites"), "{dom}");

    // What the browser shows in the site rows is what the terminal summary says.
    let sites = dom_rows(&dom, "site");
    let sources = dom_rows(&dom, "src");
    assert!(!sites.is_empty() && !sources.is_empty(), "{dom}");
    for (site, kind, count, source) in summary_sites(&stdout).iter().take(10) {
        let row = sites
            .iter()
            .find(|r| r[0] == *site && r[1] == *kind)
            .unwrap_or_else(|| panic!("{site} {kind} not shown"));
        assert_eq!(row[2], count.to_string(), "{site} {kind}");
        if let Some(source) = source {
            assert!(
                sources.iter().any(|r| r[0] == *source),
                "{source} not shown"
            );
        }
    }
    let rpc = sites
        .iter()
        .filter(|r| r[1] == "GASP_UPCXX_RPC_SEND" && r[0].starts_with("examples/dht/table.rs:"))
        .count();
    // Under their kind, if not also among the costliest sites.
    assert!(rpc >= 2, "{dom}");
    assert!(sources.iter().any(|r| r[0] == "rpc("), "{dom}");
}
