//! netrig's plots as SVG (docs/PLOTS.md), from the result model and the
//! experiment document, chosen to fit what was measured: a sweep's
//! headline metric against the swept value, one test's per-flow time
//! series, a latency spectrum, a comparison of arms, a rate sweep. Text is
//! SVG text (no font files); colours are mid tones on a transparent
//! background, so a plot reads on light and dark pages. SVG only.

mod chart;
pub mod sweep;

pub use chart::{Axis, Chart, Mark, Series};

use netrig_experiment::document::Experiment;
use netrig_report::TestResult;

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

/// The plots one test's result supports.
pub fn plots_for_result(r: &TestResult) -> Vec<Plot> {
    let _ = r;
    Vec::new()
}

/// The plots an experiment's tests support: per test, the sweep (two or
/// more points).
pub fn plots_for_experiment(e: &Experiment) -> Vec<Plot> {
    let mut out = Vec::new();
    for (i, t) in e.tests.iter().enumerate() {
        let suffix = if e.tests.len() > 1 {
            format!("-{i}-{}", t.kind)
        } else {
            String::new()
        };
        if let Some(c) = sweep::sweep(t) {
            out.extend(plot(format!("sweep{suffix}"), &[c]));
        }
    }
    out
}

#[cfg(test)]
mod tests;
