//! The HTML page: a header, the top-costs table, the call sites (the costliest, then
//! each kind's own, linked from the kinds table), the charts and, for a trace, each
//! rank's longest operations, in one file. Tables are bounded (`TABLE_ROWS`,
//! `SITE_ROWS`, `SITES_PER_KIND`, `LONGEST_RANKS`), as the charts are.
//!
//! The page references nothing outside itself (inline CSS, inline SVG, no scripts), so it
//! opens from disk, offline, and can be mailed or archived as is. Every piece of text that
//! comes from the input (command, event names) goes through [`escape`]; the SVG backend
//! escapes the text it draws itself.

use std::fmt::Write as _;

use plotters::style::RGBColor;

use super::charts::{self, Chart, KindColours};
use super::{
    cost_rows, fmt_bytes, fmt_ns, percent, rank_list, CostRow, Input, SiteCost, Summary, Timeline,
};

/// Rows of the page's top-costs table; also the number of kinds whose sites are listed.
const TABLE_ROWS: usize = 25;
/// Rows of the costliest-call-sites table.
const SITE_ROWS: usize = 25;
/// Sites listed under each operation kind.
const SITES_PER_KIND: usize = 10;
/// Ranks whose longest operations a trace's page lists.
const LONGEST_RANKS: usize = 16;

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1040px;color:#222;padding:0 1em}\
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
code{background:#f4f4f4;padding:.1em .3em;border-radius:3px;word-break:break-all}\
table{border-collapse:collapse;font-size:.9em}th,td{padding:.25em .7em;border-bottom:1px solid #e4e4e4}\
th{text-align:left;background:#f7f7f7}td.n{text-align:right;font-variant-numeric:tabular-nums}\
table.facts th{background:none;font-weight:600}\
.note{color:#555;font-size:.9em}.warn{color:#a40}\
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em;font-size:.85em}\
tr.src td{border-bottom:1px solid #e4e4e4;padding-top:0}tr.site td{border-bottom:none}\
tr.src code{white-space:pre-wrap;word-break:normal;color:#333;background:#f6f8fa;display:block}\
td.bar{width:12em}td.bar div{background:#ddd;height:.8em;position:relative}\
td.bar span{position:absolute;top:0;height:100%;background:#4a7;min-width:1px}\
h3{font-size:1em;margin:1.4em 0 .4em}\
ul.legend span{display:inline-block;width:.9em;height:.9em;margin-right:.35em;vertical-align:-.1em;border-radius:2px}\
svg{max-width:100%;height:auto}";

/// Escapes `s` for use in HTML text and attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The report as one self-contained HTML page: header (command, ranks, run time,
/// communication totals), the top-costs table, and the charts — time per operation kind
/// per rank, the communication heat map, and for a trace the timeline.
pub fn render_html(summary: &Summary) -> String {
    let rows = cost_rows(summary);
    let colours = KindColours::new(&rows);
    let command = summary.command.join(" ");
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>upcxx-run report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>upcxx-run report</h1>\n",
        escape(&command)
    );
    header(&mut page, summary, &command);

    let _ = writeln!(page, "<h2>Top costs</h2>");
    top_table(&mut page, summary, &rows);
    sites_sections(&mut page, summary, &rows);

    let _ = writeln!(page, "<h2>Time per operation kind and rank</h2>");
    let _ = writeln!(
        page,
        "<p class=\"note\">Total time of each operation kind on each rank. Operations \
         nest (a UPC++ call contains the GASNet-EX calls it makes), so a bar can be taller \
         than the run.</p>"
    );
    chart(&mut page, charts::time_per_rank(summary, &colours));
    legend(&mut page, &colours);

    let _ = writeln!(page, "<h2>Communication matrix</h2>");
    let (bytes, messages) = summary.comm_totals();
    let _ = writeln!(
        page,
        "<p class=\"note\">Bytes moved by operations each rank (row) initiated towards each \
         rank (column); grey cells: none. In all {} in {messages} messages.</p>",
        escape(&fmt_bytes(bytes))
    );
    chart(&mut page, charts::comm_heatmap(summary));

    if let Some(timeline) = &summary.timeline {
        let _ = writeln!(page, "<h2>Timeline</h2>");
        let _ = writeln!(
            page,
            "<p class=\"note\">One lane per rank; each operation spans its start to its \
             completion.</p>"
        );
        chart(&mut page, charts::timeline(timeline, &colours));
        legend(&mut page, &colours);
        longest_section(&mut page, timeline);
    }
    page.push_str("</body>\n</html>\n");
    page
}

fn header(page: &mut String, s: &Summary, command: &str) {
    let run = s.rank_time_ns.iter().copied().max().unwrap_or(0);
    let (bytes, messages) = s.comm_totals();
    let source = match s.input {
        Input::Profile => "profile (upcxx-profile)",
        Input::Trace => "trace (upcxx-trace)",
    };
    let facts = [
        ("Command", format!("<code>{}</code>", escape(command))),
        ("Input", escape(source)),
        ("Ranks", s.ranks.to_string()),
        (
            "Run time",
            escape(&format!("{} (longest rank)", fmt_ns(run))),
        ),
        (
            "Communication",
            escape(&format!("{} in {messages} messages", fmt_bytes(bytes))),
        ),
        ("Operation kinds", s.ops.len().to_string()),
    ];
    let _ = writeln!(page, "<table class=\"facts\">");
    for (k, v) in facts {
        let _ = writeln!(page, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    let _ = writeln!(page, "</table>");
    if s.dropped > 0 {
        let _ = writeln!(
            page,
            "<p class=\"warn\">The tracer dropped {} events because its buffers were \
             full; counts and times below are low.</p>",
            s.dropped
        );
    }
}

fn top_table(page: &mut String, s: &Summary, rows: &[CostRow]) {
    if rows.is_empty() {
        let _ = writeln!(page, "<p>No operations recorded.</p>");
        return;
    }
    let run = s.run_ns();
    let _ = writeln!(
        page,
        "<table class=\"costs\">\n<tr><th>kind</th><th>ranks</th><th>count</th>\
         <th>total</th><th>mean</th><th>% of run</th><th>call sites</th></tr>"
    );
    for (i, r) in rows.iter().take(TABLE_ROWS).enumerate() {
        let sites = s.sites_of(&r.name).count();
        let sites = if sites == 0 {
            "-".to_owned()
        } else {
            format!("<a href=\"#{}\">{sites}</a>", kind_anchor(i))
        };
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{sites}</td></tr>",
            kind_link(s, i, &r.name),
            escape(&rank_list(&r.ranks)),
            r.count,
            escape(&fmt_ns(r.total_ns)),
            escape(&fmt_ns(r.mean_ns())),
            escape(&percent(r.total_ns, run)),
        );
    }
    let _ = writeln!(page, "</table>");
    if rows.len() > TABLE_ROWS {
        let _ = writeln!(
            page,
            "<p class=\"note\">{} of {} operation kinds shown.</p>",
            TABLE_ROWS,
            rows.len()
        );
    }
}

/// The anchor of the `i`th kind's table of call sites.
fn kind_anchor(i: usize) -> String {
    format!("sites-of-kind-{i}")
}

/// The kind's name, linked to its table of call sites if it has one on the page.
fn kind_link(s: &Summary, i: usize, name: &str) -> String {
    if i < TABLE_ROWS && s.sites_of(name).next().is_some() {
        format!("<a href=\"#{}\">{}</a>", kind_anchor(i), escape(name))
    } else {
        escape(name)
    }
}

/// The costliest call sites over all kinds, then each listed kind's own sites.
fn sites_sections(page: &mut String, s: &Summary, rows: &[CostRow]) {
    if s.sites.is_empty() {
        return;
    }
    let index: std::collections::HashMap<&str, usize> = rows
        .iter()
        .take(TABLE_ROWS)
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let link = |name: &str| match index.get(name) {
        Some(&i) => kind_link(s, i, name),
        None => escape(name),
    };
    let _ = writeln!(page, "<h2 id=\"call-sites\">Costliest call sites</h2>");
    let _ = writeln!(
        page,
        "<p class=\"note\">Each operation kind at each line of the program that called \
         it, by total time; the line's text where its file was readable when the report \
         was made.</p>"
    );
    let top: Vec<&SiteCost> = s.sites.iter().take(SITE_ROWS).collect();
    site_table(page, &top, &link);
    if s.sites.len() > SITE_ROWS {
        let _ = writeln!(
            page,
            "<p class=\"note\">{SITE_ROWS} of {} call sites shown.</p>",
            s.sites.len()
        );
    }

    let _ = writeln!(page, "<h2>Call sites by operation kind</h2>");
    for (i, r) in rows.iter().take(TABLE_ROWS).enumerate() {
        let all: Vec<&SiteCost> = s.sites_of(&r.name).collect();
        if all.is_empty() {
            continue;
        }
        let _ = writeln!(
            page,
            "<h3 id=\"{}\">{} <span class=\"note\">({} call sites)</span></h3>",
            kind_anchor(i),
            escape(&r.name),
            all.len()
        );
        let shown = &all[..all.len().min(SITES_PER_KIND)];
        site_table(page, shown, &|name: &str| escape(name));
        if all.len() > shown.len() {
            let _ = writeln!(
                page,
                "<p class=\"note\">{} of {} call sites shown.</p>",
                shown.len(),
                all.len()
            );
        }
    }
}

/// One row per site (site, kind, count, total, mean, bytes, ranks), its source line in
/// a row under it.
fn site_table(page: &mut String, sites: &[&SiteCost], kind: &dyn Fn(&str) -> String) {
    let _ = writeln!(
        page,
        "<table class=\"sites\">\n<tr><th>call site</th><th>kind</th><th>count</th>\
         <th>total</th><th>mean</th><th>bytes</th><th>ranks</th></tr>"
    );
    for site in sites {
        let _ = writeln!(
            page,
            "<tr class=\"site\"><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td>{}</td></tr>",
            escape(&site.site.to_string()),
            kind(&site.name),
            site.count,
            escape(&fmt_ns(site.total_ns)),
            escape(&fmt_ns(site.mean_ns())),
            escape(&fmt_bytes(site.bytes)),
            escape(&rank_list(&site.ranks)),
        );
        source_row(page, site.source.as_deref(), 7);
    }
    let _ = writeln!(page, "</table>");
}

fn source_row(page: &mut String, source: Option<&str>, columns: usize) {
    if let Some(text) = source {
        let _ = writeln!(
            page,
            "<tr class=\"src\"><td colspan=\"{columns}\"><code>{}</code></td></tr>",
            escape(text)
        );
    }
}

/// Per rank, its longest operations in order of start, each with its place in the run
/// drawn as a bar.
fn longest_section(page: &mut String, t: &Timeline) {
    if t.longest.iter().all(Vec::is_empty) {
        return;
    }
    let _ = writeln!(page, "<h2>Longest operations per rank</h2>");
    let _ = writeln!(
        page,
        "<p class=\"note\">Each rank's {} longest operations, in the order they started, \
         with the line that called them.</p>",
        super::LONGEST_PER_RANK
    );
    let span = t.end_ns.max(1) as f64;
    for (rank, ops) in t.longest.iter().enumerate().take(LONGEST_RANKS) {
        if ops.is_empty() {
            continue;
        }
        let _ = writeln!(
            page,
            "<h3 id=\"longest-rank-{rank}\">rank {rank}</h3>\n<table class=\"longest\">\n\
             <tr><th>start</th><th>duration</th><th>in the run</th><th>kind</th>\
             <th>call site</th></tr>"
        );
        for op in ops {
            let left = op.start_ns as f64 * 100.0 / span;
            let width = (op.end_ns.saturating_sub(op.start_ns)) as f64 * 100.0 / span;
            let site = op.site.as_ref().map_or_else(
                || "-".to_owned(),
                |s| format!("<code>{}</code>", escape(&s.to_string())),
            );
            let _ = writeln!(
                page,
                "<tr class=\"site\"><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"bar\"><div><span style=\"left:{left:.2}%;width:{width:.2}%\">\
                 </span></div></td><td>{}</td><td>{site}</td></tr>",
                escape(&fmt_ns(op.start_ns)),
                escape(&fmt_ns(op.end_ns.saturating_sub(op.start_ns))),
                escape(t.kinds.get(op.kind).map_or("?", String::as_str)),
            );
            source_row(page, op.source.as_deref(), 5);
        }
        let _ = writeln!(page, "</table>");
    }
    if t.longest.len() > LONGEST_RANKS {
        let _ = writeln!(
            page,
            "<p class=\"note\">{LONGEST_RANKS} of {} ranks shown.</p>",
            t.longest.len()
        );
    }
}

fn chart(page: &mut String, chart: Result<Chart, String>) {
    match chart {
        Ok(c) => {
            page.push_str("<div class=\"chart\">\n");
            page.push_str(&c.svg);
            page.push_str("</div>\n");
            if let Some(note) = c.note {
                let _ = writeln!(page, "<p class=\"note\">{}.</p>", escape(&note));
            }
        }
        Err(e) => {
            let _ = writeln!(page, "<p class=\"warn\">{}</p>", escape(&e));
        }
    }
}

fn legend(page: &mut String, colours: &KindColours) {
    let _ = writeln!(page, "<ul class=\"legend\">");
    for slot in &colours.slots {
        let RGBColor(r, g, b) = slot.colour;
        let _ = writeln!(
            page,
            "<li><span style=\"background:#{r:02x}{g:02x}{b:02x}\"></span>{}</li>",
            escape(&slot.label)
        );
    }
    let _ = writeln!(page, "</ul>");
}
