//! Tests of the report, from summaries to the text and the page. One file past 600
//! lines: every test builds on the same two fixtures ([`profile`], [`trace`]), so the
//! cases stay side by side rather than split by output.

use serde_json::json;

use super::charts::{downsample, MAX_RECTS};
use super::*;
use crate::formats::{ProfileRow, TraceEvent, TraceInfo};

fn row(rank: u32, name: &str, line: u32, count: u64, total_ns: u64) -> ProfileRow {
    ProfileRow {
        rank,
        name: name.into(),
        kind: "interval".into(),
        file: "main.rs".into(),
        line,
        count,
        total_ns,
        ..Default::default()
    }
}

/// Three ranks; GET on two call sites of rank 0, a barrier on all.
fn profile() -> Profile {
    Profile {
        tool: PROFILE_TOOL.into(),
        version: 1,
        command: vec!["./ring".into(), "--iters".into(), "10".into()],
        ranks: 3,
        rank_time_ns: vec![10_000_000, 9_000_000, 11_000_000],
        events: vec![
            row(0, "GASP_UPC_GET", 10, 4, 4_000),
            row(0, "GASP_UPC_GET", 20, 6, 2_000),
            row(0, "GASP_UPC_BARRIER", 30, 1, 1_000_000),
            row(1, "GASP_UPC_BARRIER", 30, 1, 2_000_000),
            row(2, "GASP_UPC_BARRIER", 30, 1, 3_000_000),
        ],
        matrix: CommMatrix {
            bytes: vec![vec![0, 80, 0], vec![0, 0, 16], vec![8, 0, 0]],
            messages: vec![vec![0, 10, 0], vec![0, 0, 2], vec![1, 0, 0]],
        },
    }
}

fn event(ph: &str, name: &str, pid: u32, ts: f64) -> TraceEvent {
    TraceEvent {
        name: name.into(),
        cat: "upcxx".into(),
        ph: ph.into(),
        pid,
        ts,
        ..Default::default()
    }
}

fn complete(name: &str, pid: u32, ts: f64, dur: f64) -> TraceEvent {
    TraceEvent {
        dur: Some(dur),
        ..event("X", name, pid, ts)
    }
}

fn with_id(mut e: TraceEvent, id: &str) -> TraceEvent {
    e.id = Some(id.into());
    e
}

fn with_args(mut e: TraceEvent, args: serde_json::Value) -> TraceEvent {
    e.args = args.as_object().expect("an object").clone();
    e
}

/// Three ranks. Rank 0: a 2 µs put to 1 (64 B), a 1 µs barrier, two overlapping rgets
/// from 2 (async, same id 7 nested: 1 µs inside 4 µs), an atomic towards 1 with bytes.
/// Rank 1: a barrier, a non-blocking put to 0 (32 B, a 0.5 µs call, done 1 µs after its
/// start). Rank 2: an rget whose `e` is listed before its (earlier) `b`,
/// a never-completed rput, and noise (metadata, flows, a stray `e`).
fn trace() -> Trace {
    let ev = vec![
        event("M", "process_name", 0, 0.0),
        with_args(
            complete("rput", 0, 1.0, 2.0),
            json!({"peer": 1, "bytes": 64, "file": "a.rs"}),
        ),
        complete("barrier", 0, 3.0, 1.0),
        with_args(
            with_id(event("b", "rget", 0, 5.0), "7"),
            json!({"peer": 2, "bytes": 8}),
        ),
        with_args(
            with_id(event("b", "rget", 0, 6.0), "7"),
            json!({"peer": "2", "bytes": "8"}),
        ),
        with_id(event("e", "rget", 0, 7.0), "7"),
        with_id(event("e", "rget", 0, 9.0), "7"),
        with_args(
            event("i", "fetch_add", 0, 9.5),
            json!({"peer": 1, "bytes": 8}),
        ),
        // An atomic without bytes is not counted in the matrix.
        with_args(event("i", "fetch_add", 0, 9.6), json!({"peer": 1})),
        complete("barrier", 1, 3.0, 2.5),
        // A non-blocking put as the built-in tracer writes it: `b` and the initiating
        // call's `X` at one time, the `e` at completion.
        with_args(
            with_id(event("b", "nb_put", 1, 10.0), "1.0"),
            json!({"peer": 0, "bytes": 32}),
        ),
        with_args(
            complete("nb_put", 1, 10.0, 0.5),
            json!({"peer": 0, "bytes": 32}),
        ),
        with_id(event("e", "nb_put", 1, 11.0), "1.0"),
        with_args(
            with_id(event("s", "rput", 0, 1.0), "f1"),
            json!({"peer": 1, "bytes": 64}),
        ),
        with_id(event("f", "rput", 1, 2.5), "f1"),
        with_id(event("e", "rget", 2, 12.0), "3"),
        with_args(
            with_id(event("b", "rget", 2, 4.0), "3"),
            json!({"peer": 0, "bytes": 100}),
        ),
        with_args(
            with_id(event("b", "rput", 2, 13.0), "4"),
            json!({"peer": 1, "bytes": 1}),
        ),
        with_id(event("e", "rput", 2, 14.0), "99"),
    ];
    Trace {
        trace_events: ev,
        display_time_unit: "ns".into(),
        other_data: TraceInfo {
            tool: TRACE_TOOL.into(),
            version: 1,
            command: vec!["./ring".into()],
            ranks: 3,
            dropped: 0,
            epoch_ns: 0,
        },
    }
}

fn oc(count: u64, total_ns: u64) -> OpCost {
    OpCost { count, total_ns }
}

fn cost(s: &Summary, name: &str, rank: usize) -> OpCost {
    s.ops.get(name).map(|v| v[rank]).unwrap_or_default()
}

#[test]
fn profile_summary_sums_call_sites_per_rank_and_kind() {
    let s = Summary::from_profile(&profile());
    assert_eq!(s.input, Input::Profile);
    assert_eq!(s.ranks, 3);
    let get = |r| cost(&s, "GASP_UPC_GET", r);
    assert_eq!(get(0), oc(10, 6_000));
    assert_eq!(get(1), OpCost::default());
    assert_eq!(cost(&s, "GASP_UPC_BARRIER", 2).total_ns, 3_000_000);
    assert_eq!(s.matrix, profile().matrix);
    assert_eq!(s.run_ns(), 30_000_000);
    assert_eq!(s.comm_totals(), (104, 13));
    assert!(s.timeline.is_none());
}

#[test]
fn profile_with_undeclared_ranks_is_padded() {
    let mut p = profile();
    p.ranks = 1;
    p.rank_time_ns.truncate(1);
    p.events.push(row(3, "GASP_UPC_GET", 1, 1, 5));
    let s = Summary::from_profile(&p);
    assert_eq!(s.ranks, 4);
    assert_eq!(s.rank_time_ns, vec![10_000_000, 0, 0, 0]);
    assert!(s.matrix.bytes.iter().all(|r| r.len() == 4));
    assert_eq!(s.matrix.bytes[0][1], 80);
    assert_eq!(cost(&s, "GASP_UPC_GET", 3).count, 1);
}

#[test]
fn trace_summary_counts_complete_async_and_instant_events() {
    let s = Summary::from_trace(&trace());
    assert_eq!(s.input, Input::Trace);
    assert_eq!(s.ranks, 3);
    assert_eq!(cost(&s, "rput", 0), oc(1, 2_000));
    assert_eq!(cost(&s, "barrier", 0), oc(1, 1_000));
    assert_eq!(cost(&s, "barrier", 1), oc(1, 2_500));
    // Counted once, by its initiating call.
    assert_eq!(cost(&s, "nb_put", 1), oc(1, 500));
    // Nested pair with one id: inner 6..7, outer 5..9.
    assert_eq!(cost(&s, "rget", 0), oc(2, 5_000));
    // The `e` sorted after its `b` by time, though listed first.
    assert_eq!(cost(&s, "rget", 2), oc(1, 8_000));
    // Never completed: counted, no time.
    assert_eq!(cost(&s, "rput", 2), oc(1, 0));
    assert_eq!(cost(&s, "fetch_add", 0), oc(2, 0));
    assert!(!s.ops.contains_key("process_name"));
    // The end of the last event, on every rank.
    assert_eq!(s.rank_time_ns, vec![13_000; 3]);
}

#[test]
fn trace_matrix_counts_each_operation_once() {
    let s = Summary::from_trace(&trace());
    // Rank 0: the put (X) and the atomic with bytes towards 1; the flow `s` does not
    // count again, the atomic without bytes not at all.
    assert_eq!(s.matrix.messages[0], vec![0, 2, 2]);
    assert_eq!(s.matrix.bytes[0], vec![0, 72, 16]);
    // Rank 1: the non-blocking put, once though both its `b` and its `X` name the peer.
    assert_eq!(s.matrix.messages[1], vec![1, 0, 0]);
    assert_eq!(s.matrix.bytes[1], vec![32, 0, 0]);
    // Rank 2: counted at each `b`, completed or not.
    assert_eq!(s.matrix.messages[2], vec![1, 1, 0]);
    assert_eq!(s.matrix.bytes[2], vec![100, 1, 0]);
}

/// GASP events that name a peer without initiating communication to it (the run of an
/// RPC, an AM handler, an allocation) are not messages of the matrix; an RPC's send is.
#[test]
fn trace_matrix_counts_initiations_only_of_gasp_events() {
    let mut t = trace();
    let before = Summary::from_trace(&t).matrix;
    for (name, args) in [
        ("GASP_UPCXX_RPC_EXECUTE", json!({"peer": 0, "bytes": 64})),
        ("GASP_GEX_AM_HANDLER", json!({"peer": 0, "bytes": 64})),
        ("GASP_UPC_ALLOC", json!({"peer": 1, "bytes": 1 << 20})),
    ] {
        t.trace_events
            .push(with_args(complete(name, 1, 0.0, 1.0), args));
    }
    assert_eq!(Summary::from_trace(&t).matrix, before);
    t.trace_events.push(with_args(
        complete("GASP_UPCXX_RPC_SEND", 1, 0.0, 1.0),
        json!({"peer": 2, "bytes": 64}),
    ));
    let s = Summary::from_trace(&t);
    assert_eq!(s.matrix.messages[1][2], before.messages[1][2] + 1);
    assert_eq!(s.matrix.bytes[1][2], before.bytes[1][2] + 64);
}

#[test]
fn trace_timeline_has_x_events_and_matched_async_pairs() {
    let s = Summary::from_trace(&trace());
    let t = s.timeline.as_ref().expect("a trace has a timeline");
    let lane = |r: usize| -> Vec<(u64, u64, &str)> {
        t.lanes[r]
            .iter()
            .map(|i| (i.start_ns, i.end_ns, t.kinds[i.kind].as_str()))
            .collect()
    };
    assert_eq!(
        lane(0),
        vec![
            (1_000, 3_000, "rput"),
            (3_000, 4_000, "barrier"),
            (5_000, 9_000, "rget"),
            (6_000, 7_000, "rget"),
        ]
    );
    // The put's extent, then its initiating call.
    assert_eq!(
        lane(1),
        vec![
            (3_000, 5_500, "barrier"),
            (10_000, 11_000, "nb_put"),
            (10_000, 10_500, "nb_put"),
        ]
    );
    assert_eq!(lane(2), vec![(4_000, 12_000, "rget")]);
    assert_eq!(t.end_ns, 13_000);
}

#[test]
fn trace_ranks_cover_every_pid_and_peer() {
    let mut t = trace();
    t.other_data.ranks = 0;
    t.trace_events.push(with_args(
        complete("rput", 1, 0.0, 1.0),
        json!({"peer": 3, "bytes": 5}),
    ));
    let s = Summary::from_trace(&t);
    assert_eq!(s.ranks, 4);
    assert_eq!(s.matrix.bytes[1][3], 5);
}

#[test]
fn cost_rows_order_by_total_time() {
    let s = Summary::from_profile(&profile());
    let rows = cost_rows(&s);
    assert_eq!(rows[0].name, "GASP_UPC_BARRIER");
    assert_eq!(rows[0].ranks, vec![0, 1, 2]);
    assert_eq!(rows[0].total_ns, 6_000_000);
    assert_eq!(rows[0].mean_ns(), 2_000_000);
    assert_eq!(rows[1].name, "GASP_UPC_GET");
    assert_eq!(rows[1].ranks, vec![0]);
    assert_eq!(rows[1].mean_ns(), 600);
}

#[test]
fn top_costs_table() {
    let s = Summary::from_profile(&profile());
    let text = top_costs(&s, 1);
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("kind"))
        .expect("a header line");
    for column in ["ranks", "count", "total", "mean", "% of run"] {
        assert!(lines[header].contains(column), "{text}");
    }
    // Only the costliest kind: 6 ms of a 30 ms job; the call sites follow a blank line.
    let end = lines[header..].iter().position(|l| l.is_empty()).unwrap() + header;
    let body = &lines[header + 1..end];
    assert_eq!(body.len(), 1, "{text}");
    let cols: Vec<&str> = body[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        [
            "GASP_UPC_BARRIER",
            "0-2",
            "3",
            "6.00 ms",
            "2.00 ms",
            "20.0%"
        ]
    );
    assert!(text.contains("./ring --iters 10"));
}

#[test]
fn formatting_helpers() {
    assert_eq!(rank_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    assert_eq!(rank_list(&[]), "-");
    assert_eq!(fmt_ns(999), "999 ns");
    assert_eq!(fmt_ns(12_345), "12.3 µs");
    assert_eq!(fmt_ns(1_500_000_000), "1.50 s");
    assert_eq!(fmt_bytes(1023), "1023 B");
    assert_eq!(fmt_bytes(1536), "1.50 KiB");
    assert_eq!(fmt_bytes(200 << 20), "200 MiB");
    assert_eq!(percent(1, 0), "-");
    assert_eq!(percent(1, 3), "33.3%");
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// No reference leaves the page: the only URL is the SVG namespace.
fn assert_self_contained(page: &str) {
    let urls = count(page, "http://") + count(page, "https://");
    let namespaces = count(page, "xmlns=\"http://www.w3.org/2000/svg\"");
    assert_eq!(urls, namespaces, "external reference in the page");
    for tag in ["<script", "<link", "<img", "<iframe", "@import", "url("] {
        assert!(!page.contains(tag), "{tag} in the page");
    }
}

#[test]
fn html_of_a_profile_has_two_charts() {
    let page = render_html(&Summary::from_profile(&profile()));
    assert_eq!(count(&page, "<html"), 1);
    assert_eq!(count(&page, "<svg"), 2);
    assert!(!page.contains("Timeline"));
    assert!(page.contains("<td>GASP_UPC_BARRIER</td>"));
    assert_self_contained(&page);
}

#[test]
fn html_of_a_trace_has_three_charts() {
    let page = render_html(&Summary::from_trace(&trace()));
    assert_eq!(count(&page, "<html"), 1);
    assert_eq!(count(&page, "</html>"), 1);
    assert_eq!(count(&page, "<svg"), 3);
    assert!(page.contains("Timeline"));
    assert_self_contained(&page);
}

#[test]
fn html_escapes_names_and_command() {
    let mut t = trace();
    t.trace_events[1].name = "<script>alert('x')</script>".into();
    t.other_data.command = vec!["./a".into(), "<b>&".into()];
    let page = render_html(&Summary::from_trace(&t));
    assert!(!page.contains("<script"));
    assert!(!page.contains("<b>&"));
    assert!(page.contains("&lt;script&gt;"));
    assert!(page.contains("&lt;b&gt;&amp;"));
}

#[test]
fn heat_map_labels_small_matrices() {
    let page = render_html(&Summary::from_profile(&profile()));
    assert!(page.contains(">\n80 B\n</text>"), "cell label of 80 bytes");
}

#[test]
fn large_trace_timeline_is_downsampled() {
    let ranks = 8u32;
    let per_rank = 5_000;
    let mut t = trace();
    t.other_data.ranks = ranks;
    t.trace_events = (0..ranks)
        .flat_map(|r| {
            (0..per_rank).map(move |i| {
                let name = if i % 3 == 0 { "put" } else { "get" };
                complete(name, r, i as f64 * 2.0, 1.0)
            })
        })
        .collect();
    let s = Summary::from_trace(&t);
    let page = render_html(&s);
    assert_eq!(count(&page, "<svg"), 3);
    // The timeline's rectangles, less the ones the other charts draw, stay in budget.
    let timeline = &page[page.find("<h2>Timeline").expect("timeline")..];
    assert!(count(timeline, "<rect") <= MAX_RECTS + 100);
    assert!(timeline.contains("40000 operations drawn as"));
}

#[test]
fn downsampling_keeps_the_dominant_kind_per_slice() {
    let iv = |start_ns, end_ns, kind| Interval {
        start_ns,
        end_ns,
        kind,
    };
    // Kind 0 covers slices 0-4 (of 10 over 0..100), kind 1 slice 5 mostly, kind 0 a
    // sliver of slice 5 and kind 1 all of 6-9.
    let lane = [iv(0, 50, 0), iv(50, 52, 0), iv(52, 100, 1), iv(99, 99, 0)];
    let runs = downsample(&lane, &[0, 1], 2, 100, 10);
    assert_eq!(runs, vec![(0, 50, 0), (50, 100, 1)]);
    // Empty slices stay empty.
    let runs = downsample(&[iv(0, 10, 0), iv(90, 91, 1)], &[0, 1], 2, 100, 10);
    assert_eq!(runs, vec![(0, 10, 0), (90, 100, 1)]);
}

#[test]
fn large_heat_maps_merge_ranks() {
    let n = 100;
    let mut s = Summary::from_profile(&profile());
    s.ranks = n;
    s.rank_time_ns = vec![1; n];
    s.matrix.bytes = vec![vec![1; n]; n];
    s.matrix.messages = vec![vec![1; n]; n];
    let chart = charts::comm_heatmap(&s).expect("drawn");
    assert!(chart
        .note
        .expect("a note")
        .contains("100 ranks merged into 64 groups"));
    assert!(count(&chart.svg, "<rect") < 64 * 64 + 200);
}

fn write_temp(name: &str, contents: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("gasp-report-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("write temp file");
    path
}

#[test]
fn load_tells_profiles_and_traces_apart() {
    let p = write_temp("p.json", &serde_json::to_string(&profile()).unwrap());
    let t = write_temp("t.json", &serde_json::to_string(&trace()).unwrap());
    let other = write_temp("o.json", r#"{"tool": "perf", "x": 1}"#);
    let nothing = write_temp("n.json", r#"{"traceEvents": []}"#);
    let garbage = write_temp("g.json", "not json");
    let bad_profile = write_temp("b.json", r#"{"tool": "upcxx-profile", "ranks": "x"}"#);
    assert_eq!(load(&p), Ok(Loaded::Profile(profile())));
    assert_eq!(load(&t), Ok(Loaded::Trace(trace())));
    assert_eq!(load(&t).unwrap().summary(), Summary::from_trace(&trace()));
    for (path, says) in [
        (&other, "written by \"perf\""),
        (&nothing, "no \"tool\" field"),
        (&garbage, "not a JSON object"),
        (&bad_profile, "malformed upcxx-profile"),
    ] {
        let e = load(path).expect_err("rejected");
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        assert!(e.contains(says), "{e}");
        if says != "malformed upcxx-profile" {
            assert!(
                e.contains("upcxx-profile") && e.contains("upcxx-trace"),
                "{e}"
            );
        }
    }
    let missing = std::env::temp_dir().join("gasp-report-does-not-exist.json");
    let e = load(&missing).expect_err("missing");
    assert!(
        e.contains("gasp-report-does-not-exist.json: cannot read"),
        "{e}"
    );
    for f in [p, t, other, nothing, garbage, bad_profile] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn empty_inputs_still_render() {
    let empty_trace = Trace {
        other_data: TraceInfo {
            tool: TRACE_TOOL.into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let s = Summary::from_trace(&empty_trace);
    assert_eq!(s.ranks, 0);
    assert!(top_costs(&s, 10).contains("no operations recorded"));
    assert_eq!(count(&render_html(&s), "<svg"), 3);
    let s = Summary::from_profile(&Profile::default());
    assert_eq!(count(&render_html(&s), "<svg"), 2);
}

/// A temporary source file of `lines`, removed when dropped.
struct SourceFile(std::path::PathBuf);

impl SourceFile {
    fn new(name: &str, lines: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("gasp-report-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, lines.join("\n")).unwrap();
        SourceFile(path)
    }
}

impl Drop for SourceFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn profile_sites_sum_over_ranks_costliest_first() {
    let s = Summary::from_profile(&profile());
    let sites: Vec<(&str, u32, u64, u64, &[usize])> = s
        .sites
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.site.line,
                c.count,
                c.total_ns,
                c.ranks.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        sites,
        [
            ("GASP_UPC_BARRIER", 30, 3, 6_000_000, &[0, 1, 2][..]),
            ("GASP_UPC_GET", 10, 4, 4_000, &[0][..]),
            ("GASP_UPC_GET", 20, 6, 2_000, &[0][..]),
        ]
    );
    assert_eq!(s.sites[1].site.to_string(), "main.rs:10:0");
    assert_eq!(s.sites_of("GASP_UPC_GET").count(), 2);
}

#[test]
fn sources_are_read_under_the_given_roots_and_shown_under_their_sites() {
    let file = SourceFile::new(
        "sites.rs",
        &["fn main() {", "    let v: Vec<u8> = get();", "}"],
    );
    let dir = file.0.parent().unwrap().to_path_buf();
    let mut p = profile();
    for r in &mut p.events {
        r.file = "sites.rs".into();
        r.line = if r.name == "GASP_UPC_GET" { 2 } else { 9 };
    }
    let mut s = Summary::from_profile(&p);
    // Not readable as recorded (relative to the current directory): no text.
    s.read_sources(&mut SourceLines::new([]));
    assert!(s.sites.iter().all(|c| c.source.is_none()));
    s.read_sources(&mut SourceLines::new([dir.join("nowhere"), dir.clone()]));
    let get = s.sites_of("GASP_UPC_GET").next().unwrap();
    assert_eq!(get.source.as_deref(), Some("let v: Vec<u8> = get();"));
    // Line 9 is past the end of the file.
    assert_eq!(s.sites_of("GASP_UPC_BARRIER").next().unwrap().source, None);

    let text = top_costs(&s, 10);
    let at = text
        .lines()
        .position(|l| l.starts_with("sites.rs:2:0"))
        .unwrap();
    assert_eq!(
        text.lines().nth(at + 1),
        Some("    | let v: Vec<u8> = get();"),
        "{text}"
    );
    let html = render_html(&s);
    assert!(
        html.contains("<code>let v: Vec&lt;u8&gt; = get();</code>"),
        "{html}"
    );
}

#[test]
fn html_links_each_kind_to_its_sites() {
    let html = render_html(&Summary::from_profile(&profile()));
    // Barrier is the costliest kind (index 0), GET the next.
    assert!(html.contains("<a href=\"#sites-of-kind-0\">GASP_UPC_BARRIER</a>"));
    assert!(html.contains("<a href=\"#sites-of-kind-1\">GASP_UPC_GET</a>"));
    let at = html
        .find("<h3 id=\"sites-of-kind-1\">GASP_UPC_GET")
        .unwrap();
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    assert_eq!(table.matches("<tr class=\"site\">").count(), 2);
    assert!(table.contains("<code>main.rs:10:0</code>"));
    assert!(!table.contains("main.rs:30:0"));
}

#[test]
fn trace_sites_take_async_time_at_the_end() {
    let site = json!({"file": "t.rs", "line": 4, "column": 2, "peer": 1, "bytes": 16});
    let t = Trace {
        trace_events: vec![
            with_args(with_id(event("b", "rget", 0, 1.0), "1"), site.clone()),
            with_id(event("e", "rget", 0, 4.0), "1"),
            with_args(complete("rput", 1, 2.0, 0.5), site),
        ],
        ..trace()
    };
    let s = Summary::from_trace(&t);
    let rget = s.sites_of("rget").next().unwrap();
    assert_eq!((rget.count, rget.total_ns, rget.bytes), (1, 3_000, 16));
    assert_eq!(rget.site.to_string(), "t.rs:4:2");
    let rput = s.sites_of("rput").next().unwrap();
    assert_eq!((rput.ranks.as_slice(), rput.total_ns), (&[1][..], 500));
    let longest = &s.timeline.as_ref().unwrap().longest;
    assert_eq!(longest[0][0].site.as_ref().map(|s| s.line), Some(4));
}

#[test]
fn longest_keeps_each_ranks_longest_operations_in_order_of_start() {
    // 40 operations on rank 0, the i-th lasting (i * 7 % 40) µs.
    let events: Vec<TraceEvent> = (0..40)
        .map(|i| {
            let mut e = complete("op", 0, 100.0 * i as f64, (i * 7 % 40) as f64);
            e.args = json!({"file": "x.rs", "line": i + 1})
                .as_object()
                .unwrap()
                .clone();
            e
        })
        .collect();
    let s = Summary::from_trace(&Trace {
        trace_events: events,
        ..trace()
    });
    let kept = &s.timeline.as_ref().unwrap().longest[0];
    assert_eq!(kept.len(), LONGEST_PER_RANK);
    let mut want: Vec<u64> = (0..40u64).filter(|i| i * 7 % 40 >= 30).collect();
    want.sort();
    let got: Vec<u64> = kept.iter().map(|o| o.start_ns / 100_000).collect();
    assert_eq!(got, want);
    for o in kept {
        assert_eq!(
            o.site.as_ref().unwrap().line as u64,
            o.start_ns / 100_000 + 1
        );
    }
    let html = render_html(&s);
    let at = html.find("<h3 id=\"longest-rank-0\">").unwrap();
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    assert_eq!(
        table.matches("<tr class=\"site\">").count(),
        LONGEST_PER_RANK
    );
}
