//! The report's charts, drawn with `plotters` into SVG strings.
//!
//! Every chart has a fixed width and a height that grows with what it shows, and bounds
//! the number of shapes it emits, so a report of a large job stays a page a browser opens
//! at once: the heat map merges ranks into at most [`MAX_MATRIX_CELLS`] groups per side,
//! the timeline shows at most [`MAX_LANES`] ranks and at most about [`MAX_RECTS`]
//! rectangles. Whenever a chart leaves something out it returns a note saying what, for
//! the page to print under it.
//!
//! Operation kinds get the same colour in every chart ([`KindColours`]): the costliest
//! kinds one colour each, the rest one grey "other".

use std::collections::HashMap;
use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{fmt_bytes, saturating_sum, time_unit, CostRow, Summary, Timeline};

/// Width of every chart, pixels.
const WIDTH: u32 = 1000;
/// Kinds coloured individually; the rest share "other".
const MAX_COLOURED_KINDS: usize = 11;
/// Largest heat map side; more ranks are merged into groups of consecutive ranks.
pub(super) const MAX_MATRIX_CELLS: usize = 64;
/// Largest heat map side that gets a byte count written in each cell.
const MAX_LABELLED_CELLS: usize = 12;
/// Most ranks in the timeline.
pub(super) const MAX_LANES: usize = 128;
/// Most interval rectangles in the timeline.
pub(super) const MAX_RECTS: usize = 20_000;
const LANE_PX: usize = 18;
/// Font of axis labels and descriptions.
const LABELS: (&str, u32) = ("sans-serif", 14);
const OTHER_GREY: RGBColor = RGBColor(170, 170, 170);
const EMPTY_CELL: RGBColor = RGBColor(238, 238, 238);

/// A rectangle of a timeline lane: (start_ns, end_ns, colour slot).
pub(super) type Run = (u64, u64, usize);

/// A drawn chart and, if it leaves anything out, a sentence saying what.
pub(super) struct Chart {
    pub svg: String,
    pub note: Option<String>,
}

/// One legend entry: a colour and the kinds it stands for.
pub(super) struct Slot {
    pub label: String,
    pub colour: RGBColor,
}

/// The colour of each operation kind, shared by all charts.
pub(super) struct KindColours {
    pub slots: Vec<Slot>,
    index: HashMap<String, usize>,
}

impl KindColours {
    /// Colours for `rows` (costliest first): the first [`MAX_COLOURED_KINDS`] get their
    /// own, any others share the last slot, "other".
    pub(super) fn new(rows: &[CostRow]) -> Self {
        let own = if rows.len() > MAX_COLOURED_KINDS {
            MAX_COLOURED_KINDS - 1
        } else {
            rows.len()
        };
        let mut slots: Vec<Slot> = rows[..own]
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (red, green, blue) = Palette99::pick(i).rgb();
                Slot {
                    label: r.name.clone(),
                    colour: RGBColor(red, green, blue),
                }
            })
            .collect();
        if own < rows.len() {
            slots.push(Slot {
                label: format!("other ({} kinds)", rows.len() - own),
                colour: OTHER_GREY,
            });
        }
        let index = rows[..own]
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        KindColours { slots, index }
    }

    /// The slot of kind `name`.
    pub(super) fn slot(&self, name: &str) -> usize {
        self.index
            .get(name)
            .copied()
            .unwrap_or(self.slots.len().saturating_sub(1))
    }
}

fn drawing_error(e: impl std::fmt::Display) -> String {
    format!("the chart could not be drawn: {e}")
}

/// A linear axis over ranks or lanes whose ticks are exactly `ticks` (cell centres),
/// which `plotters`' own numeric axes would place at round numbers instead.
struct IndexAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl IndexAxis {
    fn new(range: Range<f64>, ticks: impl IntoIterator<Item = f64>) -> Self {
        IndexAxis {
            range,
            ticks: ticks.into_iter().collect(),
        }
    }
}

impl Ranged for IndexAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span == 0.0 {
            return limit.0;
        }
        let t = (v - self.range.start) / span;
        limit.0 + ((limit.1 - limit.0) as f64 * t).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Every `step`-th of `0..n`, so that at most about `max` labels are printed.
fn ticks(n: usize, max: usize) -> Vec<usize> {
    (0..n).step_by(n.div_ceil(max).max(1)).collect()
}

/// Stacked bars: per rank, the total time of each operation kind.
pub(super) fn time_per_rank(s: &Summary, colours: &KindColours) -> Result<Chart, String> {
    let n = s.ranks.max(1);
    let mut stacks = vec![vec![0u64; colours.slots.len()]; n];
    for (name, per_rank) in &s.ops {
        let slot = colours.slot(name);
        for (rank, cost) in per_rank.iter().take(n).enumerate() {
            stacks[rank][slot] = stacks[rank][slot].saturating_add(cost.total_ns);
        }
    }
    let top = stacks
        .iter()
        .map(|s| saturating_sum(s.iter().copied()))
        .max()
        .unwrap_or(0);
    let (scale, unit) = time_unit(top);
    let ymax = (top as f64 / scale * 1.05).max(1.0);
    let x_axis = IndexAxis::new(
        -0.5..n as f64 - 0.5,
        ticks(n, 32).into_iter().map(|r| r as f64),
    );

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_axis, 0.0..ymax)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .label_style(LABELS)
            .axis_desc_style(LABELS)
            .disable_x_mesh()
            .x_desc("rank")
            .y_desc(format!("time ({unit})"))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(drawing_error)?;
        for (slot, style) in colours.slots.iter().enumerate() {
            let bars = stacks.iter().enumerate().filter_map(|(rank, stack)| {
                let base = saturating_sum(stack[..slot].iter().copied());
                let top = base.saturating_add(stack[slot]);
                let x = rank as f64;
                (stack[slot] > 0).then(|| {
                    Rectangle::new(
                        [
                            (x - 0.4, base as f64 / scale),
                            (x + 0.4, top as f64 / scale),
                        ],
                        style.colour.filled(),
                    )
                })
            });
            chart.draw_series(bars).map_err(drawing_error)?;
        }
        root.present().map_err(drawing_error)?;
    }
    Ok(Chart { svg, note: None })
}

/// The communication matrix as a heat map of bytes, with a colour scale.
pub(super) fn comm_heatmap(s: &Summary) -> Result<Chart, String> {
    let n = s.ranks.max(1);
    let g = n.min(MAX_MATRIX_CELLS);
    let group = |rank: usize| rank * g / n;
    let first = |k: usize| (k * n).div_ceil(g);
    // A merged group is labelled with its first rank, so the axes still read as ranks.
    let label = |k: usize| first(k).to_string();
    let mut cells = vec![vec![0u64; g]; g];
    for (src, row) in s.matrix.bytes.iter().take(n).enumerate() {
        for (dst, &b) in row.iter().take(n).enumerate() {
            let cell = &mut cells[group(src)][group(dst)];
            *cell = cell.saturating_add(b);
        }
    }
    let max = cells.iter().flatten().copied().max().unwrap_or(0);
    let scale_max = max.max(1) as f64;
    let colour = |v: u64| {
        if v == 0 {
            EMPTY_CELL
        } else {
            ViridisRGB::get_color_normalized(v as f64, 0.0, scale_max)
        }
    };
    let gf = g as f64;
    // Row `src` is drawn at the top for src = 0: y = g − 1 − src.
    let x_axis = IndexAxis::new(0.0..gf, ticks(g, 16).into_iter().map(|k| k as f64 + 0.5));
    let y_axis = IndexAxis::new(
        0.0..gf,
        ticks(g, 32).into_iter().map(|k| (g - 1 - k) as f64 + 0.5),
    );

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 660)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let (left, right) = root.split_horizontally(640);
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(x_axis, y_axis)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .label_style(LABELS)
            .axis_desc_style(LABELS)
            .disable_mesh()
            .x_desc("target rank")
            .y_desc("initiating rank")
            .x_label_formatter(&|x| label(x.floor() as usize))
            .y_label_formatter(&|y| label(g - 1 - y.floor() as usize))
            .draw()
            .map_err(drawing_error)?;
        let gap = if g <= 32 { 1 } else { 0 };
        chart
            .draw_series((0..g * g).map(|i| {
                let (src, dst) = (i / g, i % g);
                let y = (g - 1 - src) as f64;
                let x = dst as f64;
                let mut r = Rectangle::new(
                    [(x, y), (x + 1.0, y + 1.0)],
                    colour(cells[src][dst]).filled(),
                );
                r.set_margin(gap, gap, gap, gap);
                r
            }))
            .map_err(drawing_error)?;
        if g <= MAX_LABELLED_CELLS {
            let font = (48 - 3 * g as i32).clamp(10, 16);
            chart
                .draw_series((0..g * g).filter(|&i| cells[i / g][i % g] > 0).map(|i| {
                    let (src, dst) = (i / g, i % g);
                    let v = cells[src][dst];
                    // Viridis is dark below about 60% of its range.
                    let ink = if (v as f64) < 0.6 * scale_max {
                        WHITE
                    } else {
                        BLACK
                    };
                    let style = ("sans-serif", font)
                        .into_font()
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    let at = (dst as f64 + 0.5, (g - 1 - src) as f64 + 0.5);
                    Text::new(fmt_bytes(v), at, style)
                }))
                .map_err(drawing_error)?;
        }

        let mut bar = ChartBuilder::on(&right)
            .margin_top(12)
            .margin_bottom(62)
            .margin_left(4)
            .right_y_label_area_size(80)
            .build_cartesian_2d(0.0..1.0, 0.0..scale_max)
            .map_err(drawing_error)?;
        bar.configure_mesh()
            .label_style(LABELS)
            .disable_mesh()
            .disable_x_axis()
            .y_labels(8)
            .y_label_formatter(&|v| fmt_bytes(v.round() as u64))
            .draw()
            .map_err(drawing_error)?;
        const STRIPS: usize = 64;
        bar.draw_series((0..STRIPS).map(|i| {
            let lo = scale_max * i as f64 / STRIPS as f64;
            let hi = scale_max * (i + 1) as f64 / STRIPS as f64;
            let c = ViridisRGB::get_color_normalized((lo + hi) / 2.0, 0.0, scale_max);
            Rectangle::new([(0.0, lo), (1.0, hi)], c.filled())
        }))
        .map_err(drawing_error)?;
        root.present().map_err(drawing_error)?;
    }
    let note = (g < n).then(|| {
        format!(
            "{n} ranks merged into {g} groups of consecutive ranks per side; \
             each cell sums the bytes between two groups, labelled by their first rank"
        )
    });
    Ok(Chart { svg, note })
}

/// One lane per rank, operations as rectangles coloured by kind.
pub(super) fn timeline(t: &Timeline, colours: &KindColours) -> Result<Chart, String> {
    let lanes = t.lanes.len().clamp(1, MAX_LANES);
    let shown = &t.lanes[..t.lanes.len().min(lanes)];
    let slot_of: Vec<usize> = t.kinds.iter().map(|k| colours.slot(k)).collect();
    let end = t.end_ns.max(1);
    let (scale, unit) = time_unit(end);
    let plot_px = WIDTH as usize - 100;
    let intervals: usize = shown.iter().map(Vec::len).sum();

    let (runs, cols): (Vec<Vec<Run>>, Option<usize>) = if intervals <= MAX_RECTS {
        // A rectangle is at least a pixel wide, so that short operations show.
        let min_ns = end / plot_px as u64;
        let runs = shown
            .iter()
            .map(|lane| {
                lane.iter()
                    .map(|i| {
                        let stop = i.end_ns.max(i.start_ns.saturating_add(min_ns));
                        (i.start_ns, stop, slot_of[i.kind])
                    })
                    .collect()
            })
            .collect();
        (runs, None)
    } else {
        let cols = (MAX_RECTS / lanes).clamp(1, plot_px);
        let runs = shown
            .iter()
            .map(|lane| downsample(lane, &slot_of, colours.slots.len(), end, cols))
            .collect();
        (runs, Some(cols))
    };
    let rects: usize = runs.iter().map(Vec::len).sum();

    let height = (80 + lanes * LANE_PX).max(200) as u32;
    let lf = lanes as f64;
    let y_axis = IndexAxis::new(
        0.0..lf,
        ticks(lanes, 40)
            .into_iter()
            .map(|r| (lanes - 1 - r) as f64 + 0.5),
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end as f64 / scale, y_axis)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .label_style(LABELS)
            .axis_desc_style(LABELS)
            .disable_y_mesh()
            .x_desc(format!("time ({unit})"))
            .y_desc("rank")
            .y_label_formatter(&|y| format!("{}", lanes - 1 - y.floor() as usize))
            .draw()
            .map_err(drawing_error)?;
        for (slot, style) in colours.slots.iter().enumerate() {
            let boxes = runs.iter().enumerate().flat_map(|(rank, lane)| {
                let y = (lanes - 1 - rank) as f64;
                lane.iter()
                    .filter(move |r| r.2 == slot)
                    .map(move |&(a, b, _)| {
                        Rectangle::new(
                            [(a as f64 / scale, y + 0.15), (b as f64 / scale, y + 0.85)],
                            style.colour.filled(),
                        )
                    })
            });
            chart.draw_series(boxes).map_err(drawing_error)?;
        }
        root.present().map_err(drawing_error)?;
    }

    let mut notes = Vec::new();
    if shown.len() < t.lanes.len() {
        notes.push(format!(
            "ranks 0-{} of {} shown",
            shown.len() - 1,
            t.lanes.len()
        ));
    }
    if let Some(cols) = cols {
        notes.push(format!(
            "{intervals} operations drawn as {rects} rectangles (at most {MAX_RECTS}): \
             each lane is cut into {cols} equal time slices, each slice coloured by the \
             kind that covers most of it, and equal neighbours merged"
        ));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(Chart { svg, note })
}

/// A lane reduced to at most `cols` runs: the span `0..end_ns` is cut into `cols` equal
/// slices, each slice takes the slot whose intervals cover most of it (none if nothing
/// covers it), and neighbouring slices of one slot merge into one run.
///
/// Coverage is accumulated with one difference array per slot, so an interval costs O(1)
/// however many slices it spans.
pub(super) fn downsample(
    lane: &[super::Interval],
    slot_of: &[usize],
    slots: usize,
    end_ns: u64,
    cols: usize,
) -> Vec<Run> {
    let width = end_ns.max(1) as f64 / cols as f64;
    let mut cover = vec![0f64; slots * cols];
    let mut inner = vec![0f64; slots * (cols + 1)];
    for i in lane {
        let slot = slot_of[i.kind];
        let a = (i.start_ns as f64 / width).min(cols as f64);
        // Zero-length operations still mark their slice.
        let b = (i.end_ns as f64 / width).min(cols as f64).max(a + 1e-6);
        let ca = (a as usize).min(cols - 1);
        let cb = (b as usize).min(cols - 1);
        if ca == cb {
            cover[slot * cols + ca] += b - a;
        } else {
            cover[slot * cols + ca] += (ca + 1) as f64 - a;
            cover[slot * cols + cb] += b - cb as f64;
            if cb > ca + 1 {
                inner[slot * (cols + 1) + ca + 1] += 1.0;
                inner[slot * (cols + 1) + cb] -= 1.0;
            }
        }
    }
    for slot in 0..slots {
        let mut running = 0.0;
        for col in 0..cols {
            running += inner[slot * (cols + 1) + col];
            cover[slot * cols + col] += running;
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for col in 0..cols {
        let best = (0..slots)
            .map(|s| (s, cover[s * cols + col]))
            .filter(|&(_, c)| c > 0.0)
            .max_by(|x, y| x.1.total_cmp(&y.1));
        let Some((slot, _)) = best else { continue };
        let start = (col as f64 * width) as u64;
        let stop = ((col + 1) as f64 * width) as u64;
        match runs.last_mut() {
            Some(last) if last.2 == slot && last.1 == start => last.1 = stop,
            _ => runs.push((start, stop, slot)),
        }
    }
    runs
}
