//! The HTML page: a header, the top-costs table and the charts, in one file.
//!
//! The page references nothing outside itself (inline CSS, inline SVG, no scripts), so it
//! opens from disk, offline, and can be mailed or archived as is. Every piece of text that
//! comes from the input (command, event names) goes through [`escape`]; the SVG backend
//! escapes the text it draws itself.

use std::fmt::Write as _;

use plotters::style::RGBColor;

use super::charts::{self, Chart, KindColours};
use super::{cost_rows, fmt_bytes, fmt_ns, percent, rank_list, Input, Summary};

/// Rows of the page's top-costs table.
const TABLE_ROWS: usize = 25;

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1040px;color:#222;padding:0 1em}\
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
code{background:#f4f4f4;padding:.1em .3em;border-radius:3px;word-break:break-all}\
table{border-collapse:collapse;font-size:.9em}th,td{padding:.25em .7em;border-bottom:1px solid #e4e4e4}\
th{text-align:left;background:#f7f7f7}td.n{text-align:right;font-variant-numeric:tabular-nums}\
table.facts th{background:none;font-weight:600}\
.note{color:#555;font-size:.9em}.warn{color:#a40}\
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em;font-size:.85em}\
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

fn top_table(page: &mut String, s: &Summary, rows: &[super::CostRow]) {
    if rows.is_empty() {
        let _ = writeln!(page, "<p>No operations recorded.</p>");
        return;
    }
    let run = s.run_ns();
    let _ = writeln!(
        page,
        "<table class=\"costs\">\n<tr><th>kind</th><th>ranks</th><th>count</th>\
         <th>total</th><th>mean</th><th>% of run</th></tr>"
    );
    for r in rows.iter().take(TABLE_ROWS) {
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&r.name),
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
