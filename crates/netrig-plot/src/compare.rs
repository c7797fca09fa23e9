//! Comparisons and rate sweeps: each arm's estimate of the headline metric
//! with its interval and its difference from the baseline; achieved
//! against offered transactions/s.

use crate::chart::{Axis, Chart, Mark, Series};
use crate::sweep;
use netrig_experiment::document::{PointOutcome, TestOutcome};

/// Signed percent: "+3.2 %", "−1.0 %".
fn pct(v: f64) -> String {
    if v < 0.0 {
        format!("\u{2212}{:.1}", -v)
    } else {
        format!("+{v:.1}")
    }
}

/// Arms of one point as bars with their intervals, the baseline named,
/// each other arm labelled with its difference and that difference's interval.
pub fn comparison(test: &TestOutcome, p: &PointOutcome) -> Option<Chart> {
    if p.arms.len() < 2 {
        return None;
    }
    let (metric, y_label) = sweep::headline(test)?;
    let baseline = p
        .comparisons
        .first()
        .map(|c| c.baseline.clone())
        .unwrap_or_else(|| p.arms[0].arm.clone());
    let mut series = Vec::new();
    let mut ticks = Vec::new();
    let mut marks = Vec::new();
    for (i, arm) in p.arms.iter().enumerate() {
        let x = i as f64;
        let Some(e) = arm.estimate(metric) else { continue };
        let band = match (e.ci_low, e.ci_high) {
            (Some(lo), Some(hi)) => vec![(x, lo, hi)],
            _ => vec![],
        };
        let top = band.first().map_or(e.mean, |b| b.2);
        let label = if arm.arm == baseline {
            ticks.push((x, format!("{} (baseline)", arm.arm)));
            "baseline".to_string()
        } else {
            ticks.push((x, arm.arm.clone()));
            match p
                .comparisons
                .iter()
                .find(|c| c.metric == metric && c.arm == arm.arm)
            {
                Some(c) => match (c.diff_pct, c.ci_low_pct, c.ci_high_pct) {
                    (Some(d), Some(lo), Some(hi)) => format!("{} % [{}, {}]", pct(d), pct(lo), pct(hi)),
                    (Some(d), _, _) => format!("{} %", pct(d)),
                    _ => String::new(),
                },
                None => String::new(),
            }
        };
        marks.push(Mark {
            at: (x, top),
            label,
            ring: false,
        });
        series.push(Series {
            label: arm.arm.clone(),
            colour: i,
            points: vec![(x, e.mean)],
            band,
            bars: true,
            ..Series::default()
        });
    }
    if series.is_empty() {
        return None;
    }
    let level = p.arms[0].estimate(metric).map_or(95.0, |e| e.level);
    let at = if p.point.values.is_empty() {
        String::new()
    } else {
        format!(" at {}", p.point)
    };
    Some(Chart {
        title: format!("{}{at}: arms against {baseline} ({level} % intervals)", test.kind),
        x: Axis {
            label: "arm".into(),
            ticks,
            ..Axis::default()
        },
        y: Axis {
            label: y_label.into(),
            ..Axis::default()
        },
        series,
        marks,
        ..Chart::default()
    })
}

/// A request/response test with `--rate` swept: achieved transactions/s
/// against offered (rate × flows), y = x dashed, saturation marked.
pub fn rate_sweep(test: &TestOutcome) -> Option<Chart> {
    let (option, x, _, _) = sweep::xs(test)?;
    if option != "--rate" || test.points.len() < 2 {
        return None;
    }
    let arms = test.points.iter().map(|p| p.arms.len()).max().unwrap_or(0);
    let mut series: Vec<Series> = Vec::new();
    for (p, rate) in test.points.iter().zip(&x) {
        for arm in &p.arms {
            let (Some(e), Some(run)) = (arm.estimate("transactions_per_s"), arm.runs.first()) else {
                continue;
            };
            let offered = rate * run.config.flows as f64;
            let name = sweep::series_name(arm, &p.point.values, arms);
            let i = match series.iter().position(|s| s.label == name) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        label: name,
                        colour: series.len(),
                        ..Series::default()
                    });
                    series.len() - 1
                }
            };
            series[i].points.push((offered, e.mean));
            if let (Some(lo), Some(hi)) = (e.ci_low, e.ci_high) {
                series[i].band.push((offered, lo, hi));
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    let marks = series
        .iter()
        .filter_map(|s| {
            let p = s.points.iter().find(|p| p.1 < 0.95 * p.0)?;
            Some(Mark {
                at: *p,
                label: format!("{}: saturated at {} offered", s.label, crate::chart::si(p.0)),
                ring: true,
            })
        })
        .collect();
    Some(Chart {
        title: format!("{}: achieved against offered load", test.kind),
        x: Axis {
            label: "offered (transactions/s: --rate × flows)".into(),
            ..Axis::default()
        },
        y: Axis {
            label: "achieved (transactions/s)".into(),
            ..Axis::default()
        },
        series,
        diagonal: true,
        marks,
        ..Chart::default()
    })
}
