//! Latency spectra: the latency at each percentile on a "1 in N" axis (x =
//! 1/(1−p)), from the results' whole histograms, merged (never averaged
//! percentiles).

use crate::chart::{Axis, Chart, Series};
use netrig_document::result::TestResult;
use netrig_metrics::LatencyRecorder;

/// Longest histogram read (netrig's encoding is far smaller).
const MAX_LEN: usize = 1 << 20;

/// The histogram of `runs`, merged; None when one has none.
pub fn merged(runs: &[&TestResult]) -> Option<LatencyRecorder> {
    let mut all: Option<LatencyRecorder> = None;
    for r in runs {
        let h = r.summary.latency_us.as_ref()?.histogram.as_ref()?;
        let rec = LatencyRecorder::from_base64(h, MAX_LEN).ok()?;
        match &mut all {
            Some(a) => a.merge(&rec),
            None => all = Some(rec),
        }
    }
    all.filter(|a| !a.is_empty())
}

/// The curve of one histogram: x = 1/(1−p) from 1 to the count (no
/// percentile finer than one transaction in the count), 20 points a decade.
pub fn curve(label: String, colour: usize, h: &LatencyRecorder) -> Series {
    let n = h.len().max(2) as f64;
    let mut points = Vec::new();
    let mut k = 0;
    loop {
        let x = 10f64.powf(k as f64 / 20.0);
        if x >= n {
            break;
        }
        points.push((x, h.quantile_us(1.0 - 1.0 / x)));
        k += 1;
    }
    points.push((n, h.quantile_us(1.0)));
    Series {
        label,
        colour,
        points,
        ..Series::default()
    }
}

/// The ticks of the "1 in N" axis: p0 at 1, p50 at 2, p90 at 10, p99 at 100…
fn ticks(max: f64) -> Vec<(f64, String)> {
    let mut out = vec![(1.0, "p0".to_string()), (2.0, "p50".to_string())];
    let mut x = 10.0;
    let mut nines = 1;
    while x <= max * 1.0001 {
        let p = 100.0 - 100.0 / x;
        let s = format!("{p:.*}", nines.max(2) - 2);
        out.push((x, format!("p{s}")));
        x *= 10.0;
        nines += 1;
    }
    out
}

/// A spectrum of `curves` (label, histogram).
pub fn spectrum(title: String, curves: Vec<(String, LatencyRecorder)>) -> Option<Chart> {
    if curves.is_empty() {
        return None;
    }
    let max = curves.iter().map(|c| c.1.len() as f64).fold(2.0, f64::max);
    Some(Chart {
        title,
        x: Axis {
            label: "percentile (log scale: 1 in N = 1/(1−p))".into(),
            log: true,
            ticks: ticks(max),
        },
        y: Axis {
            label: "latency (µs)".into(),
            ..Axis::default()
        },
        series: curves
            .into_iter()
            .enumerate()
            .map(|(i, (l, h))| curve(l, i, &h))
            .collect(),
        ..Chart::default()
    })
}

/// The spectrum of one request/response result.
pub fn for_result(r: &TestResult) -> Option<Chart> {
    let h = merged(&[r])?;
    let label = format!("{} ({} transactions)", r.test, h.len());
    spectrum(format!("{}: latency spectrum", r.test), vec![(label, h)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks_name_percentiles() {
        let t: Vec<String> = super::ticks(12345.0).into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["p0", "p50", "p90", "p99", "p99.9", "p99.99"]);
    }
}
