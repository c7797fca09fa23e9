//! Comparisons and rate sweeps: each arm's estimate of the headline metric
//! with its interval and its difference from the baseline; achieved
//! against offered transactions/s.

use crate::chart::{Axis, Chart, Mark, Series};
use crate::sweep;
use netrig_document::experiment::{PointOutcome, TestOutcome};

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
                Some(c) => {
                    // An arm compared against a baseline of its own (docs/EXPERIMENTS.md) says so.
                    let own = if c.baseline != baseline {
                        format!(" vs {}", c.baseline)
                    } else {
                        String::new()
                    };
                    match (c.diff_pct, c.ci_low_pct, c.ci_high_pct) {
                        (Some(d), Some(lo), Some(hi)) => {
                            format!("{} % [{}, {}]{own}", pct(d), pct(lo), pct(hi))
                        }
                        (Some(d), _, _) => format!("{} %{own}", pct(d)),
                        _ => String::new(),
                    }
                }
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
            // Named under its bar.
            no_legend: true,
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
    let mut latency: Vec<Series> = Vec::new();
    // Each drawn point: (its point, arm, series, offered, achieved).
    let mut knees = Vec::new();
    let mut offered_measured = false;
    for (p, rate) in test.points.iter().zip(&x) {
        for arm in &p.arms {
            let (Some(e), Some(run)) = (arm.estimate("transactions_per_s"), arm.runs.first()) else {
                continue;
            };
            // What the runs say was offered (open loop: requests due in the
            // window); else the option's rate per flow times the flows.
            let measured = arm.estimate("offered_per_s").map(|o| o.mean);
            offered_measured |= measured.is_some();
            let offered = measured.unwrap_or(rate * run.config.flows as f64);
            let name = sweep::series_name(arm, &p.point.values, arms);
            let i = match series.iter().position(|s| s.label == name) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        label: name.clone(),
                        colour: series.len(),
                        ..Series::default()
                    });
                    latency.push(Series {
                        label: format!("{name}: p99 latency"),
                        colour: series.len() - 1,
                        dashed: true,
                        secondary: true,
                        no_legend: true,
                        ..Series::default()
                    });
                    series.len() - 1
                }
            };
            series[i].points.push((offered, e.mean));
            if let (Some(lo), Some(hi)) = (e.ci_low, e.ci_high) {
                series[i].band.push((offered, lo, hi));
            }
            if let Some(l) = arm.estimate("latency_p99") {
                latency[i].points.push((offered, l.mean / 1e3));
            }
            knees.push((p, arm.arm.as_str(), i, offered, e.mean));
        }
    }
    if series.is_empty() {
        return None;
    }
    // The experiment's saturation points (netrig_document::saturation);
    // a document saved before they were recorded: where achieved fell
    // below 95 % of offered.
    let marks: Vec<Mark> = if test.saturation.is_empty() {
        series
            .iter()
            .filter_map(|s| {
                let p = s.points.iter().find(|p| p.1 < 0.95 * p.0)?;
                Some(Mark {
                    at: *p,
                    label: format!("{}: saturated at {} offered", s.label, crate::chart::si(p.0)),
                    ring: true,
                })
            })
            .collect()
    } else {
        test.saturation
            .iter()
            .filter_map(|s| {
                let point = test.points.get(s.point)?;
                let (_, _, i, x, y) = knees.iter().find(|k| std::ptr::eq(k.0, point) && k.1 == s.arm)?;
                Some(Mark {
                    at: (*x, *y),
                    label: format!(
                        "{}: saturated at {} offered",
                        series[*i].label,
                        crate::chart::si(*x)
                    ),
                    ring: true,
                })
            })
            .collect()
    };
    let has_latency = latency.iter().any(|s| !s.points.is_empty());
    if has_latency {
        series.extend(latency.into_iter().filter(|s| !s.points.is_empty()));
    }
    Some(Chart {
        title: format!("{}: achieved against offered load", test.kind),
        x: Axis {
            label: match offered_measured {
                true => "offered (transactions due per second in the window)".into(),
                false => "offered (transactions/s: --rate × flows)".into(),
            },
            ..Axis::default()
        },
        y: Axis {
            label: "achieved (transactions/s)".into(),
            ..Axis::default()
        },
        y2: has_latency.then(|| Axis {
            label: "p99 latency (ms)".into(),
            ..Axis::default()
        }),
        series,
        diagonal: true,
        marks,
        notes: match has_latency {
            true => vec![("p99 latency, ms (right axis)".into(), true)],
            false => vec![],
        },
        ..Chart::default()
    })
}
