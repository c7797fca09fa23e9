//! The one chart this crate draws, in its variants: x against y for some
//! series, each a line with markers, optionally with an interval (a band),
//! dashed, or on a secondary y axis; plus marks (a dashed y = x line, a
//! labelled point). Every plot module fills a [`Chart`] and [`draw`]s it.

use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Text, axes and the legend's frame: a mid grey, readable on light and dark pages.
pub const INK: RGBColor = RGBColor(0x88, 0x88, 0x88);

/// Series colours: mid tones that stand out on white and on near-black,
/// no two alike (Tableau's ten, its grey left out for a dark cyan).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x42, 0x85, 0xf4), // blue
    RGBColor(0xf2, 0x8e, 0x2b), // orange
    RGBColor(0x59, 0xa1, 0x4f), // green
    RGBColor(0xe1, 0x57, 0x59), // red
    RGBColor(0xb0, 0x7a, 0xa1), // purple
    RGBColor(0x76, 0xb7, 0xb2), // teal
    RGBColor(0xed, 0xc9, 0x48), // yellow
    RGBColor(0xff, 0x9d, 0xa7), // pink
    RGBColor(0x9c, 0x75, 0x5f), // brown
    RGBColor(0x1f, 0x9e, 0xb8), // dark cyan
];

/// The `i`th series colour: the palette's, then hues a golden angle apart
/// (mid tones still, each different from every other).
pub fn colour(i: usize) -> RGBColor {
    if let Some(c) = PALETTE.get(i) {
        return *c;
    }
    let k = (i - PALETTE.len()) as f64;
    let hue = (k * 137.508 + 20.0) % 360.0;
    // Lightness steps too, so hues that come round again differ.
    let light = [0.55, 0.45, 0.65][(i - PALETTE.len()) / 3 % 3];
    let c = HSLColor(hue / 360.0, 0.6, light).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

pub const FONT: &str = "sans-serif";

/// One line of a chart.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
    /// The interval at each point: (x, low, high), drawn as a translucent
    /// band and error bars.
    pub band: Vec<(f64, f64, f64)>,
    pub dashed: bool,
    /// Bars from 0 (with the interval as error bars), not a line.
    pub bars: bool,
    /// On the secondary (right) y axis.
    pub secondary: bool,
    /// No legend entry of its own (a dashed companion of a line of its
    /// colour, named once by a note of the chart).
    pub no_legend: bool,
}

/// An axis: its label (with the unit) and, when wanted, its own ticks.
#[derive(Debug, Clone, Default)]
pub struct Axis {
    pub label: String,
    /// Logarithmic (x only: values are drawn at log10).
    pub log: bool,
    /// Ticks at these values with these labels; empty: chosen here.
    pub ticks: Vec<(f64, String)>,
}

/// A labelled point drawn over the series (the saturation point).
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: (f64, f64),
    pub label: String,
    /// Ring the point (else the label alone, above it).
    pub ring: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    /// The secondary y axis, when a series uses it.
    pub y2: Option<Axis>,
    pub series: Vec<Series>,
    /// Draw y = x, dashed (offered against achieved).
    pub diagonal: bool,
    pub marks: Vec<Mark>,
    /// Legend entries in ink: (text, dashed), e.g. "CPU local (right
    /// axis)" for every dashed companion line.
    pub notes: Vec<(String, bool)>,
    /// The y axes' ranges, when panels share them (small multiples).
    pub y_range: Option<(f64, f64)>,
    pub y2_range: Option<(f64, f64)>,
}

/// A rectangle in SVG pixels: (left, top, right, bottom).
pub type Rect = (i32, i32, i32, i32);

/// Where a rendered figure put things: each panel's plotting area (inside
/// the axes) and each legend's box.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub plots: Vec<Rect>,
    pub legends: Vec<Rect>,
}

/// One legend entry: its text, colour, and a line (dashed or not) or a
/// filled box.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub label: String,
    pub colour: RGBColor,
    pub dashed: bool,
    pub bar: bool,
    /// A thin line (y = x), not a series' 2 px.
    pub thin: bool,
}

/// The legend entries of `charts`, each label once, in order: the
/// diagonal, the series (but those without an entry), then the notes.
pub fn entries(charts: &[Chart]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut push = |e: Entry| {
        if !e.label.is_empty() && !out.iter().any(|o| o.label == e.label) {
            out.push(e);
        }
    };
    for c in charts {
        if c.diagonal {
            push(Entry {
                label: "y = x".into(),
                colour: INK,
                dashed: false,
                bar: false,
                thin: true,
            });
        }
        for s in c.series.iter().filter(|s| !s.no_legend && !s.points.is_empty()) {
            push(Entry {
                label: s.label.clone(),
                colour: colour(s.colour),
                dashed: s.dashed,
                bar: s.bars,
                thin: false,
            });
        }
    }
    for c in charts {
        for (n, dashed) in &c.notes {
            push(Entry {
                label: n.clone(),
                colour: INK,
                dashed: *dashed,
                bar: false,
                thin: false,
            });
        }
    }
    out
}

/// Legend text's size in pixels, and a generous width per character of
/// it (sans-serif at 12 px: most glyphs are narrower).
const LEGEND_FONT: u32 = 13;
const LEGEND_CHAR: i32 = 7;
const LEGEND_ROW: i32 = 20;
/// Width of an entry's sample line and the gap after its text.
const SAMPLE: i32 = 22;
const GAP: i32 = 26;

/// Lays `entries` out in rows across `width` pixels from `left`: each
/// entry's (x, row); and the number of rows.
pub fn legend_rows(entries: &[Entry], left: i32, width: i32) -> (Vec<(i32, i32)>, i32) {
    let mut at = Vec::new();
    let (mut x, mut row) = (left, 0);
    for e in entries {
        let w = SAMPLE + e.label.chars().count() as i32 * LEGEND_CHAR;
        if x > left && x + w > left + width {
            x = left;
            row += 1;
        }
        at.push((x, row));
        x += w + GAP;
    }
    (at, if entries.is_empty() { 0 } else { row + 1 })
}

fn legend_height(entries: &[Entry], width: i32) -> i32 {
    match legend_rows(entries, 0, width - 2 * LEGEND_LEFT).1 {
        0 => 0,
        rows => rows * LEGEND_ROW + 12,
    }
}

const LEGEND_LEFT: i32 = 64;
const TITLE: i32 = 34;

/// Draws `charts` one above the other into an SVG of `width` × `height`
/// per chart, transparent background, text as SVG text; the legend below
/// the panels, outside the data.
pub fn render(charts: &[Chart], width: u32, height: u32) -> Result<String, String> {
    render_grid(None, charts, 1, width, height).map(|r| r.0)
}

/// Draws `charts` as a grid of `columns` (small multiples) under `title`,
/// each panel `width / columns` × `height`, the legend (each label once)
/// below them all. The SVG and where its parts went.
pub fn render_grid(
    title: Option<&str>,
    charts: &[Chart],
    columns: usize,
    width: u32,
    height: u32,
) -> Result<(String, Layout), String> {
    let columns = columns.clamp(1, charts.len().max(1));
    let rows = charts.len().max(1).div_ceil(columns);
    let legend = entries(charts);
    let top = if title.is_some() { TITLE } else { 0 };
    let legend_h = legend_height(&legend, width as i32);
    let total = top + rows as i32 * height as i32 + legend_h;
    let mut layout = Layout::default();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, total as u32)).into_drawing_area();
        if let Some(t) = title {
            root.draw(&Text::new(
                t.to_string(),
                (width as i32 / 2, 10),
                (FONT, 18)
                    .into_font()
                    .color(&INK)
                    .pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Top,
                    )),
            ))
            .map_err(|e| e.to_string())?;
        }
        let w = width / columns as u32;
        for (i, chart) in charts.iter().enumerate() {
            let (r, c) = (i / columns, i % columns);
            let at = (c as i32 * w as i32, top + r as i32 * height as i32);
            let area = root.clone().shrink(at, (w, height));
            let (xr, yr) = draw(chart, &area, title.is_some()).map_err(|e| e.to_string())?;
            layout.plots.push((xr.start, yr.start, xr.end, yr.end));
        }
        if !legend.is_empty() {
            let y0 = top + rows as i32 * height as i32;
            let (at, _) = legend_rows(&legend, LEGEND_LEFT, width as i32 - 2 * LEGEND_LEFT);
            draw_legend(&root, &legend, &at, y0 + 4).map_err(|e| e.to_string())?;
            layout.legends.push((0, y0, width as i32, y0 + legend_h));
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok((drop_empty_lines(&svg), layout))
}

fn draw_legend(
    root: &DrawingArea<SVGBackend, Shift>,
    legend: &[Entry],
    at: &[(i32, i32)],
    y0: i32,
) -> Result<(), DrawError> {
    for (e, (x, row)) in legend.iter().zip(at) {
        let y = y0 + row * LEGEND_ROW + LEGEND_ROW / 2;
        let style = e.colour.stroke_width(if e.thin { 1 } else { 2 });
        let text = (FONT, LEGEND_FONT)
            .into_font()
            .color(&INK)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Center,
            ));
        if e.bar {
            root.draw(&Rectangle::new(
                [(*x, y - 5), (*x + 16, y + 5)],
                e.colour.mix(0.75).filled(),
            ))?;
        } else if e.dashed {
            root.draw(&PathElement::new([(*x, y), (*x + 6, y)], style))?;
            root.draw(&PathElement::new([(*x + 10, y), (*x + 16, y)], style))?;
        } else {
            root.draw(&PathElement::new([(*x, y), (*x + 16, y)], style))?;
        }
        root.draw(&Text::new(e.label.clone(), (*x + SAMPLE, y), text))?;
    }
    Ok(())
}

/// The SVG without its lines of no length (a dash that ended where it
/// began): they draw nothing, and the PNG's renderer warns of each
/// ("path stroking failed").
fn drop_empty_lines(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    for line in svg.split_inclusive('\n') {
        let empty = line.trim_start().starts_with("<polyline")
            && line
                .split_once("points=\"")
                .and_then(|(_, r)| r.split_once('"'))
                .is_some_and(|(p, _)| {
                    let mut it = p.split_whitespace();
                    let first = it.next();
                    it.all(|q| Some(q) == first)
                });
        if !empty {
            out.push_str(line);
        }
    }
    out
}

/// A linear f64 axis whose ticks are exactly the ones given.
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.lo..self.hi).map(v, limit)
    }
    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

fn tx(axis: &Axis, v: f64) -> f64 {
    if axis.log {
        v.max(f64::MIN_POSITIVE).log10()
    } else {
        v
    }
}

/// Round numbers with SI prefixes: 1500 → "1.5K", 65536 → "65.5K".
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (d, p) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "K")
    } else {
        (1.0, "")
    };
    let x = v / d;
    let s = if x.fract().abs() < 1e-9 || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{p}")
}

/// About `n` round ticks over `lo..hi` (already transformed for a log axis:
/// then at powers of 10, and 2 and 5 between them when there are few).
fn auto_ticks(axis: &Axis, lo: f64, hi: f64) -> Vec<(f64, String)> {
    if axis.log {
        let mut out = Vec::new();
        let decades = (hi - lo).max(0.0);
        let mults: &[f64] = if decades < 2.5 { &[1.0, 2.0, 5.0] } else { &[1.0] };
        for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
            for m in mults {
                let v = m * 10f64.powi(e);
                let t = v.log10();
                if t >= lo - 1e-9 && t <= hi + 1e-9 {
                    out.push((t, si(v)));
                }
            }
        }
        return out;
    }
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 {
        out.push((v, si(v)));
        v += step;
    }
    out
}

fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + if lo.abs() > 0.0 { lo.abs() * 0.1 } else { 1.0 };
    }
    (lo, hi + (hi - lo) * 0.08)
}

/// How far above the highest mean (×) the y axis reaches for intervals;
/// an interval beyond it is cut at the axis, its end uncapped.
pub const BAND_REACH: f64 = 2.0;

/// Intervals' error bars: a vertical line from low to high with caps
/// `$cap` pixels either side.
macro_rules! whiskers {
    ($ctx:ident . $draw:ident, $band:expr, $style:expr, $cap:expr, $px:expr) => {{
        let (style, cap) = ($style, $cap);
        // An interval narrower than a pixel has its caps alone (a line of
        // no length draws nothing, and the PNG renderer warns of it).
        let px = $px;
        let long: Vec<_> = $band.iter().filter(|b| px(b.0, b.1) != px(b.0, b.2)).collect();
        $ctx.$draw(
            long.iter()
                .map(|b| PathElement::new([(b.0, b.1), (b.0, b.2)], style)),
        )?;
        // An end cut at the axis has no cap: the interval goes on.
        for end in [1, 2] {
            $ctx.$draw($band.iter().filter(|b| !(end == 2 && b.3)).map(|b| {
                let y = if end == 1 { b.1 } else { b.2 };
                EmptyElement::at((b.0, y)) + PathElement::new([(-cap, 0), (cap, 0)], style)
            }))?;
        }
    }};
}

/// A panel's ranges: x (transformed for a log axis, with its margin), the primary y axis's and
/// the secondary's.
struct Ranges {
    x: (f64, f64),
    y: (f64, f64),
    y2: (f64, f64),
}

impl Ranges {
    fn of(chart: &Chart) -> Ranges {
        Ranges {
            x: x_range(chart),
            y: y_range(chart, false),
            y2: y_range(chart, true),
        }
    }

    /// The range of the y axis `s` is drawn on.
    fn y_of(&self, s: &Series) -> (f64, f64) {
        if s.secondary {
            self.y2
        } else {
            self.y
        }
    }
}

/// The x axis's range: the points' and the ticks'. No margin past the data but a little each
/// side, for markers (half a category for bars).
fn x_range(chart: &Chart) -> (f64, f64) {
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| tx(&chart.x, p.0)))
        .chain(chart.x.ticks.iter().map(|t| tx(&chart.x, t.0)))
        .collect();
    let (mut x0, mut x1) = range(xs.iter().copied(), false);
    let bars = chart.series.iter().any(|s| s.bars);
    let pad = if bars { 0.5 } else { (x1 - x0) * 0.03 };
    if bars {
        x1 = xs.iter().copied().fold(x0, f64::max);
    }
    x0 -= pad;
    x1 += pad;
    (x0, x1)
}

/// The range of the primary y axis, or of the `secondary`: the panels' shared one when given.
fn y_range(chart: &Chart, secondary: bool) -> (f64, f64) {
    let mut v: Vec<f64> = Vec::new();
    for s in chart.series.iter().filter(|s| s.secondary == secondary) {
        v.extend(s.points.iter().map(|p| p.1));
        v.extend(s.band.iter().map(|b| b.1));
    }
    // Intervals reach up to the axis no further than a little past
    // the highest mean: an interval of a few scattered runs would
    // otherwise flatten every line to the floor.
    let top = v.iter().copied().filter(|v| v.is_finite()).fold(0f64, f64::max);
    for s in chart.series.iter().filter(|s| s.secondary == secondary) {
        v.extend(s.band.iter().map(|b| b.2.min(top * BAND_REACH)));
    }
    if chart.diagonal && !secondary {
        v.extend(chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    }
    let shared = if secondary { chart.y2_range } else { chart.y_range };
    shared.unwrap_or_else(|| range(v.into_iter(), true))
}

/// The x axis's ticks: the chart's own (transformed for a log axis), else round ones.
fn x_ticks(chart: &Chart, (x0, x1): (f64, f64)) -> Vec<(f64, String)> {
    if chart.x.ticks.is_empty() {
        auto_ticks(&chart.x, x0, x1)
    } else {
        chart
            .x
            .ticks
            .iter()
            .map(|(v, l)| (tx(&chart.x, *v), l.clone()))
            .collect()
    }
}

fn text(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&INK)
}

/// What drawing a panel fails with (plotters' errors, boxed).
type DrawError = Box<dyn std::error::Error>;

/// A panel's coordinates: x with its own ticks, the primary y axis and the secondary.
type Panel<'a, 'b> = DualCoordChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<Ticked, RangedCoordf64>,
    Cartesian2d<Ticked, RangedCoordf64>,
>;

/// Draws a panel's caption, axes and grid into `area`; `small` as [`draw`]'s.
fn axes<'a, 'b>(
    chart: &Chart,
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    small: bool,
    r: &Ranges,
) -> Result<Panel<'a, 'b>, DrawError> {
    let ((x0, x1), (y0, y1), (z0, z1)) = (r.x, r.y, r.y2);
    let ticks = x_ticks(chart, r.x);
    let key: Vec<f64> = ticks.iter().map(|t| t.0).collect();
    let label_of = |v: &f64| {
        ticks
            .iter()
            .find(|t| (t.0 - v).abs() < 1e-9 * (1.0 + v.abs()))
            .map(|t| t.1.clone())
            .unwrap_or_default()
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&chart.title, text(if small { 15 } else { 18 }))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64);
    if chart.y2.is_some() {
        builder.right_y_label_area_size(64);
    }
    // The secondary coordinate first: it takes the right label area, so
    // the primary's labels are not drawn there too.
    let mut ctx = builder
        .build_cartesian_2d(
            Ticked {
                lo: x0,
                hi: x1,
                ticks: key.clone(),
            },
            y0..y1,
        )?
        .set_secondary_coord(
            Ticked {
                lo: x0,
                hi: x1,
                ticks: key,
            },
            z0..z1,
        );
    ctx.configure_mesh()
        .x_desc(chart.x.label.as_str())
        .y_desc(chart.y.label.as_str())
        .x_label_formatter(&label_of)
        .y_label_formatter(&|v| si(*v))
        .axis_style(INK)
        .bold_line_style(INK.mix(0.2))
        .light_line_style(INK.mix(0.08))
        .label_style(text(12))
        .axis_desc_style(text(14))
        .draw()?;
    if let Some(y2) = &chart.y2 {
        ctx.configure_secondary_axes()
            .y_desc(y2.label.as_str())
            .y_label_formatter(&|v| si(*v))
            .axis_style(INK)
            .label_style(text(12))
            .axis_desc_style(text(14))
            .draw()?;
    }
    Ok(ctx)
}

/// Draws series `s` on its y axis (`lo..hi`, where its intervals are cut): bars from 0 with
/// error bars, or its band, error bars, line and markers.
fn plot_series(ctx: &mut Panel, chart: &Chart, s: &Series, (lo, hi): (f64, f64)) -> Result<(), DrawError> {
    let c = colour(s.colour);
    let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (tx(&chart.x, p.0), p.1)).collect();
    // (x, low, high, high cut at the axis)
    let band: Vec<(f64, f64, f64, bool)> = s
        .band
        .iter()
        .map(|b| (tx(&chart.x, b.0), b.1.clamp(lo, hi), b.2.clamp(lo, hi), b.2 > hi))
        .collect();
    if s.bars {
        ctx.draw_series(
            pts.iter()
                .map(|p| Rectangle::new([(p.0 - 0.3, 0.0), (p.0 + 0.3, p.1)], c.mix(0.75).filled())),
        )?;
        whiskers!(ctx.draw_series, band, INK.stroke_width(2), 7, |x: f64, y: f64| {
            ctx.backend_coord(&(x, y))
        });
        return Ok(());
    }
    macro_rules! series {
        ($draw:ident, $px:expr) => {{
            if band.len() > 1 {
                let mut poly: Vec<(f64, f64)> = band.iter().map(|b| (b.0, b.2)).collect();
                poly.extend(band.iter().rev().map(|b| (b.0, b.1)));
                ctx.$draw(std::iter::once(Polygon::new(poly, c.mix(0.18).filled())))?;
            }
            whiskers!(ctx.$draw, band, c.stroke_width(1), 4, $px);
            // One point draws no line (its marker shows it), still with its legend.
            let line = if pts.len() > 1 { pts.clone() } else { Vec::new() };
            if s.dashed {
                ctx.$draw(DashedLineSeries::new(line, 7, 5, c.stroke_width(2)))?;
            } else {
                ctx.$draw(LineSeries::new(line, c.stroke_width(2)))?;
            }
            if pts.len() <= 60 {
                ctx.$draw(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
            }
        }};
    }
    if s.secondary {
        series!(draw_secondary_series, |x: f64, y: f64| ctx
            .borrow_secondary()
            .backend_coord(&(x, y)))
    } else {
        series!(draw_series, |x: f64, y: f64| ctx.backend_coord(&(x, y)))
    }
    Ok(())
}

/// Draws the chart's marks: each a labelled point, ringed or not.
fn draw_marks(ctx: &mut Panel, chart: &Chart) -> Result<(), DrawError> {
    for m in &chart.marks {
        let p = (tx(&chart.x, m.at.0), m.at.1);
        let ring = Circle::new(
            (0, 0),
            7,
            if m.ring {
                INK.stroke_width(2)
            } else {
                TRANSPARENT.into()
            },
        );
        // Left of a ring (it is often at the right edge), centred over a bar.
        let w = m.label.chars().count() as i32 * 6;
        let at = if m.ring { (-w - 4, -24) } else { (-w / 2, -18) };
        ctx.draw_series([EmptyElement::at(p) + ring + Text::new(m.label.clone(), at, text(12))])?;
    }
    Ok(())
}

/// Draws one panel; its plotting area's pixel ranges (x, y). `small`: a
/// panel of a grid under the figure's title (a smaller caption).
#[allow(clippy::type_complexity)]
fn draw(
    chart: &Chart,
    area: &DrawingArea<SVGBackend, Shift>,
    small: bool,
) -> Result<(std::ops::Range<i32>, std::ops::Range<i32>), DrawError> {
    let r = Ranges::of(chart);
    let mut ctx = axes(chart, area, small, &r)?;
    if chart.diagonal {
        // Inside both axes' ranges: plotters clamps a point outside them
        // (it does not clip the line), which would bend y = x.
        let (lo, hi) = (r.x.0.max(r.y.0), r.x.1.min(r.y.1));
        // Thin and solid: the dashed lines are the right axis's.
        ctx.draw_series(LineSeries::new([(lo, lo), (hi, hi)], INK.stroke_width(1)))?;
    }
    for s in &chart.series {
        plot_series(&mut ctx, chart, s, r.y_of(s))?;
    }
    draw_marks(&mut ctx, chart)?;
    Ok(ctx.plotting_area().get_pixel_range())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legend's box is below every panel's plotting area, however
    /// many entries (they wrap into rows) and panels.
    #[test]
    fn the_legend_box_is_outside_every_plotting_area() {
        for (n, columns) in [(1, 1), (3, 1), (5, 2), (24, 1)] {
            let charts: Vec<Chart> = (0..columns.max(1) + n % 2)
                .map(|p| Chart {
                    title: format!("panel {p}"),
                    series: (0..n)
                        .map(|i| Series {
                            label: format!("a long series name {i}"),
                            colour: i,
                            points: vec![(1.0, i as f64), (2.0, 2.0 * i as f64)],
                            ..Series::default()
                        })
                        .collect(),
                    ..Chart::default()
                })
                .collect();
            let (svg, layout) = render_grid(Some("t"), &charts, columns, 900, 400).unwrap();
            assert_eq!(layout.plots.len(), charts.len());
            let [legend] = layout.legends[..] else {
                panic!("one legend: {layout:?}")
            };
            for p in &layout.plots {
                assert!(legend.1 >= p.3, "legend {legend:?} over the plot {p:?}");
            }
            let height: i32 = svg
                .split_once("height=\"")
                .and_then(|(_, r)| r.split_once('"'))
                .and_then(|(h, _)| h.parse().ok())
                .unwrap();
            assert!(
                legend.3 <= height,
                "the legend {legend:?} inside the SVG ({height})"
            );
            let rows = legend_rows(&entries(&charts), 0, 900 - 2 * LEGEND_LEFT).1;
            assert_eq!(legend.3 - legend.1, rows * LEGEND_ROW + 12);
            assert!(n < 10 || rows > 1, "{n} entries wrap");
        }
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(65536.0), "65.5K");
        assert_eq!(si(1024.0), "1.02K");
        assert_eq!(si(1000.0), "1K");
        assert_eq!(si(2.5e9), "2.5G");
        assert_eq!(si(12.0), "12");
        assert_eq!(si(0.5), "0.5");
    }
}
