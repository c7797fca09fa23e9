//! netrig's plots as SVG (docs/PLOTS.md), from the result model and the
//! experiment document, chosen to fit what was measured: a sweep's
//! headline metric against the swept value, one test's per-flow time
//! series, a latency spectrum, a comparison of arms, a rate sweep. Text is
//! SVG text (no font files); colours are mid tones on a transparent
//! background, so a plot reads on light and dark pages; the legend sits
//! below the panels. A PNG of any plot with [`to_png`].

mod chart;
pub mod client_sum;
pub mod compare;
pub mod delta;
pub mod group;
pub mod latency;
pub mod series;
pub mod sweep;

pub use chart::{Axis, Chart, Layout, Mark, Series};

use netrig_document::experiment::Experiment;
use netrig_document::result::TestResult;

/// One plot: `name` is a file name's stem (`sweep-0`, `timeseries`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    pub name: String,
    pub title: String,
    pub svg: String,
}

/// Width of a plot in SVG pixels, and height of each of its panels.
pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 500;

/// Renders `charts` (one panel each, top to bottom) as a plot named `name`.
pub fn plot(name: impl Into<String>, charts: &[Chart]) -> Option<Plot> {
    let svg = chart::render(charts, WIDTH, HEIGHT).ok()?;
    Some(Plot {
        name: name.into(),
        title: charts.first()?.title.clone(),
        svg,
    })
}

/// Renders `charts` as small multiples, `columns` a row, under `title`,
/// each panel narrower and lower than a plot of its own.
pub fn plot_grid(name: impl Into<String>, title: String, charts: &[Chart], columns: usize) -> Option<Plot> {
    let h = if columns > 1 { HEIGHT * 3 / 5 } else { HEIGHT };
    let (svg, _) = chart::render_grid(Some(&title), charts, columns, WIDTH, h).ok()?;
    Some(Plot {
        name: name.into(),
        title,
        svg,
    })
}

/// The plots one test's result supports: the time series (with `-i`),
/// the latency spectrum (request/response).
pub fn plots_for_result(r: &TestResult) -> Vec<Plot> {
    let mut out = Vec::new();
    if let Some(c) = series::time_series(r) {
        out.extend(plot("timeseries", &c));
    }
    if let Some(c) = latency::for_result(r) {
        out.extend(plot("latency", &[c]));
    }
    out
}

/// Points of a test beyond which no per-point plot is drawn (the sweep
/// shows them).
pub const MAX_POINT_PLOTS: usize = 8;

/// The plots an experiment's tests support: per test, the sweep (two or
/// more points; the rate sweep when `--rate` is swept) and, per point (up
/// to [`MAX_POINT_PLOTS`]), the comparison of its arms (two or more) and
/// the latency spectrum of each arm's runs merged (request/response).
pub fn plots_for_experiment(e: &Experiment) -> Vec<Plot> {
    let mut out = Vec::new();
    for (i, t) in e.tests.iter().enumerate() {
        let suffix = if e.tests.len() > 1 {
            format!("-{i}-{}", t.kind)
        } else {
            String::new()
        };
        if let Some(c) = compare::rate_sweep(t) {
            out.extend(plot(format!("rate{suffix}"), &[c]));
        } else if let Some(c) = sweep::sweep_charts(t) {
            match (c.len(), sweep::sweep_title(t)) {
                (2.., Some(title)) => out.extend(plot_grid(format!("sweep{suffix}"), title, &c, 2)),
                _ => out.extend(plot(format!("sweep{suffix}"), &c)),
            }
        }
        // Several client hosts at once (a lab plan's `clients` arms): the sum against their number.
        if let Some(c) = client_sum::chart(t) {
            out.extend(plot(format!("clients{suffix}"), &[c]));
        }
        if let Some(c) = delta::delta_charts(t) {
            match c.len() {
                1 => out.extend(plot(format!("delta{suffix}"), &c)),
                _ => out.extend(plot_grid(
                    format!("delta{suffix}"),
                    format!("{}: the change each arm makes against its baseline", t.kind),
                    &c,
                    2,
                )),
            }
        }
        if t.points.len() <= MAX_POINT_PLOTS {
            for (j, p) in t.points.iter().enumerate() {
                let at = if t.points.len() > 1 {
                    format!("-{j}")
                } else {
                    String::new()
                };
                let curves: Vec<_> = p
                    .arms
                    .iter()
                    .filter_map(|a| {
                        let h = latency::merged(&a.runs.iter().collect::<Vec<_>>())?;
                        let runs = match a.runs.len() {
                            1 => "1 run".to_string(),
                            n => format!("{n} runs merged"),
                        };
                        Some((format!("{} ({runs})", a.arm), h))
                    })
                    .collect();
                if let Some(c) = compare::comparison(t, p) {
                    out.extend(plot(format!("compare{suffix}{at}"), &[c]));
                }
                let title = format!("{}{}: latency spectrum", t.kind, point_title(&p.point));
                if let Some(c) = latency::spectrum(title, curves) {
                    out.extend(plot(format!("latency{suffix}{at}"), &[c]));
                }
            }
        }
    }
    // Each group's first run per arm: its members on one time axis.
    for (i, g) in e.groups.iter().enumerate() {
        for ga in &g.arms {
            let Some(c) = ga.runs.first().and_then(|r| group::timeline(g, &ga.arm, r)) else {
                continue;
            };
            let arm = if g.arms.len() > 1 {
                format!("-{}", ga.arm)
            } else {
                String::new()
            };
            out.extend(plot(format!("group-{i}{arm}"), &[c]));
        }
    }
    out
}

/// " at -m 64K" of a swept point, "" of an unswept one.
fn point_title(p: &netrig_document::sweep::Point) -> String {
    if p.values.is_empty() {
        String::new()
    } else {
        format!(" at {p}")
    }
}

#[cfg(test)]
mod tests;

/// A plot's SVG rendered to PNG at `scale` (2 for a sharp picture on a
/// high-density screen), its text in the system's sans-serif font; on a
/// white background, so the picture reads anywhere a PNG is pasted.
pub fn to_png(svg: &str, scale: f32) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // The SVG asks for "sans-serif": the system's first sans face stands
    // for it (fontdb's default, Arial, is rarely installed on Linux).
    let sans = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .filter(|n| n.contains("Sans") && !n.contains("Mono"))
        .min_by_key(|n| (n != "DejaVu Sans", n.len()));
    match sans {
        Some(family) => db.set_sans_serif_family(family),
        None => return Err("no sans-serif font on this system for the PNG's text (Debian: apt-get install fonts-dejavu-core)".into()),
    }
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the plot's SVG: {e}"))?;
    let size = tree.size().to_int_size().scale_by(scale).ok_or("an empty plot")?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("a plot too large")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| format!("encoding PNG: {e}"))
}

#[cfg(test)]
mod png_tests {
    /// A plot's PNG is a PNG of its size at the scale asked, with its text
    /// drawn (a font found); without a sans font it says what to install.
    #[test]
    fn a_plot_renders_to_png() {
        let r: netrig_document::result::TestResult = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../netrig-report/tests/fixtures/tcp-rr.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let plot = crate::plots_for_result(&r)
            .into_iter()
            .next()
            .expect("a latency spectrum");
        match crate::to_png(&plot.svg, 2.0) {
            Ok(png) => {
                assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
                assert!(png.len() > 10_000, "{} bytes", png.len());
            }
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "CI installs fonts: {e}");
                assert!(e.contains("fonts-dejavu-core"), "{e}");
                eprintln!("skipped: {e}");
            }
        }
    }
}
