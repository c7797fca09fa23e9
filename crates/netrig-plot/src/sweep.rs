//! A sweep: the headline metric against the swept option's values, one
//! line per arm with its interval, CPU on a secondary axis.

use crate::chart::{Axis, Chart, Series};
use netrig_document::experiment::{ArmOutcome, TestOutcome};
use netrig_document::metric;

/// A swept value as a number, as its option reads it (netrig-experiment's rule).
pub fn value(option: &str, text: &str) -> Option<f64> {
    netrig_document::sweep::value(option, text)
}

/// The axis label of a swept option, with its unit.
pub fn option_label(option: &str) -> String {
    let unit = match option {
        "-m" | "--message-size" | "-M" | "--recv-size" => "message size, bytes",
        "-s" | "--local-sockbuf" | "-S" | "--remote-sockbuf" => "socket buffer, bytes",
        "-n" | "--bytes" => "bytes",
        "--mss" => "MSS, bytes",
        "-l" | "--length" | "--timeout" => "s",
        "-P" | "--parallel" => "flows",
        "-T" | "--workers" => "workers",
        "-b" | "--bitrate" | "--max-pacing-rate" => "bits/s",
        "--rate" => "transactions/s per flow",
        "--pacing-us" | "--spin-us" => "µs",
        "--burst" => "transactions in flight",
        _ => "",
    };
    if unit.is_empty() {
        option.to_string()
    } else {
        format!("{option} ({unit})")
    }
}

/// The headline metric of a test's runs: its name and axis label.
pub fn headline(test: &TestOutcome) -> Option<(&'static str, &'static str)> {
    let run = test
        .points
        .iter()
        .flat_map(|p| &p.arms)
        .flat_map(|a| &a.runs)
        .next()?;
    let m = metric::headline(run);
    Some(match m.name {
        "throughput" => (m.name, "Throughput (Mbit/s)"),
        _ => (m.name, "Transactions/s"),
    })
}

/// The swept option, each point's x, the ticks, and whether x is log.
pub type Xs = (String, Vec<f64>, Vec<(f64, String)>, bool);

/// Each point's x: the first swept option's value as a number, or, when
/// one is not a number, the point's index. With the option and the ticks.
pub fn xs(test: &TestOutcome) -> Option<Xs> {
    let option = test.points.first()?.point.values.first()?.0.clone();
    let texts: Vec<String> = test
        .points
        .iter()
        .map(|p| p.point.values.first().map(|v| v.1.clone()).unwrap_or_default())
        .collect();
    let nums: Option<Vec<f64>> = texts.iter().map(|t| value(&option, t)).collect();
    let (x, numeric) = match nums {
        Some(v) => (v, true),
        None => ((0..texts.len()).map(|i| i as f64).collect(), false),
    };
    let mut ticks: Vec<(f64, String)> = Vec::new();
    for (v, t) in x.iter().zip(&texts) {
        if !ticks.iter().any(|k| k.0 == *v) {
            ticks.push((*v, t.clone()));
        }
    }
    if numeric && ticks.len() > 12 {
        ticks.clear(); // too many to label: round ticks
    }
    let log = numeric && log_scale(&x);
    Some((option, x, ticks, log))
}

/// Whether swept values are best drawn on a log axis: they span 16× or
/// more (64K..1M), or each is a constant multiple, 2× or more, of the one
/// before (64K..512K*2); values evenly spaced (100..2000:100) stay linear.
pub fn log_scale(values: &[f64]) -> bool {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let (Some(&lo), Some(&hi)) = (v.first(), v.last()) else {
        return false;
    };
    if lo <= 0.0 || v.len() < 2 {
        return false;
    }
    let steps: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
    let even = v.len() > 2 && steps.iter().all(|s| (s - steps[0]).abs() <= 1e-6 * steps[0]);
    let ratios: Vec<f64> = v.windows(2).map(|w| w[1] / w[0]).collect();
    let geometric =
        v.len() > 2 && ratios[0] >= 2.0 && ratios.iter().all(|r| (r / ratios[0] - 1.0).abs() < 0.01);
    !even && (hi / lo >= 16.0 || geometric)
}

/// The legend name of an arm at a point: the arm, and the values of any
/// swept option but the first.
pub fn series_name(arm: &ArmOutcome, values: &[(String, String)], arms: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    if arms > 1 || values.len() <= 1 {
        parts.push(arm.arm.clone());
    }
    parts.extend(values.iter().skip(1).map(|(o, v)| format!("{o} {v}")));
    parts.join(" ")
}

/// Series beyond which one panel is too many to tell apart: then one
/// panel per value of the other swept options (small multiples), an arm
/// a line in each.
pub const MAX_SERIES: usize = 8;

/// The arms of `test`, each once, in the order they first appear.
fn arm_names(test: &TestOutcome) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    for a in test.points.iter().flat_map(|p| &p.arms) {
        if !v.contains(&a.arm.as_str()) {
            v.push(&a.arm);
        }
    }
    v
}

/// The values of the swept options but the first, as words ("-P 4 -s 64K").
fn others(values: &[(String, String)]) -> String {
    values
        .iter()
        .skip(1)
        .map(|(o, v)| format!("{o} {v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `test` wants one panel per value of the other swept options: more than
/// [`MAX_SERIES`] lines (an arm at the other options' values) of two or more arms.
fn wants_facets(test: &TestOutcome, arms: usize) -> bool {
    let lines = test
        .points
        .iter()
        .flat_map(|p| {
            p.arms
                .iter()
                .map(move |a| (a.arm.as_str(), others(&p.point.values)))
        })
        .fold(Vec::<(&str, String)>::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        })
        .len();
    lines > MAX_SERIES && arms > 1 && test.points[0].point.values.len() > 1
}

/// One panel's lines as they are gathered: its name (the other swept options' values; empty
/// for the one panel), each line's headline and each line's CPU, a dashed companion.
struct Facet {
    name: String,
    series: Vec<Series>,
    cpu: Vec<Series>,
}

impl Facet {
    /// The index of the line `name`, added with its CPU companion in `colour` when new.
    fn line(&mut self, name: String, colour: usize) -> usize {
        if let Some(i) = self.series.iter().position(|s| s.label == name) {
            return i;
        }
        self.series.push(Series {
            label: name.clone(),
            colour,
            ..Series::default()
        });
        self.cpu.push(Series {
            label: format!("{name}: CPU local"),
            colour,
            dashed: true,
            secondary: true,
            no_legend: true,
            ..Series::default()
        });
        self.series.len() - 1
    }
}

/// Each point's arms as lines (`metric` with its interval, and CPU) at its `x`, gathered into
/// panels when `facets`, else into one; `arms` as [`arm_names`].
fn gather(test: &TestOutcome, x: &[f64], metric: &str, facets: bool, arms: &[&str]) -> Vec<Facet> {
    let mut panels: Vec<Facet> = Vec::new();
    for (p, x) in test.points.iter().zip(x) {
        let name = if facets {
            others(&p.point.values)
        } else {
            String::new()
        };
        let at = match panels.iter().position(|q| q.name == name) {
            Some(i) => i,
            None => {
                panels.push(Facet {
                    name,
                    series: Vec::new(),
                    cpu: Vec::new(),
                });
                panels.len() - 1
            }
        };
        let panel = &mut panels[at];
        for arm in &p.arms {
            let i = if facets {
                // An arm's colour in every panel.
                let c = arms.iter().position(|a| *a == arm.arm).unwrap_or(0);
                panel.line(arm.arm.clone(), c)
            } else {
                // Without panels, each line its own.
                let c = panel.series.len();
                panel.line(series_name(arm, &p.point.values, arms.len()), c)
            };
            if let Some(e) = arm.estimate(metric) {
                panel.series[i].points.push((*x, e.mean));
                if let (Some(lo), Some(hi)) = (e.ci_low, e.ci_high) {
                    // A rate is never below 0: an interval wide enough to
                    // reach past it is drawn to 0 (the JSON keeps its bound).
                    panel.series[i].band.push((*x, lo.max(0.0), hi));
                }
            }
            if let Some(e) = arm.estimate("cpu_local") {
                panel.cpu[i].points.push((*x, e.mean));
            }
        }
    }
    panels
}

/// Gives panels to compare the same y axes: from 0 to past the highest mean (and its
/// intervals, as one panel would reach: [`crate::chart::BAND_REACH`]), on each side.
fn share_axes(charts: &mut [Chart]) {
    let span = |secondary: bool| {
        let of = |s: &&Series| s.secondary == secondary;
        let series = || charts.iter().flat_map(|c| &c.series).filter(of);
        let mean = series()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0f64, f64::max);
        let band = series()
            .flat_map(|s| s.band.iter().map(|b| b.2))
            .fold(0f64, f64::max);
        let hi = mean.max(band.min(mean * crate::chart::BAND_REACH));
        (0.0, if hi > 0.0 { hi * 1.08 } else { 1.0 })
    };
    let (y, y2) = (span(false), span(true));
    for c in charts {
        c.y_range = Some(y);
        c.y2_range = Some(y2);
    }
}

/// A sweep's title: its headline (`y_label` but its unit) against the first swept `option`.
fn title_of(test: &TestOutcome, option: &str, y_label: &str) -> String {
    let what = y_label.split(" (").next().unwrap_or(y_label);
    format!("{}: {what} against {option}", test.kind)
}

/// The sweep plot of `test`, when it has a swept option and more than one
/// point: one panel, or (more than [`MAX_SERIES`] lines of two or more
/// arms) one panel per value of the other swept options, their y axes
/// shared, each arm one colour throughout.
pub fn sweep_charts(test: &TestOutcome) -> Option<Vec<Chart>> {
    if test.points.len() < 2 {
        return None;
    }
    let (option, x, ticks, log) = xs(test)?;
    let (metric, y_label) = headline(test)?;
    let arms = arm_names(test);
    let faceted = wants_facets(test, arms.len());
    let panels = gather(test, &x, metric, faceted, &arms);
    let has_cpu = panels.iter().any(|p| p.cpu.iter().any(|s| !s.points.is_empty()));
    let title = title_of(test, &option, y_label);
    let mut charts: Vec<Chart> = Vec::new();
    for Facet {
        name,
        mut series,
        cpu,
    } in panels
    {
        series.retain(|s| !s.points.is_empty());
        if series.is_empty() {
            continue;
        }
        if has_cpu {
            series.extend(cpu.into_iter().filter(|s| !s.points.is_empty()));
        }
        charts.push(Chart {
            title: if faceted { name } else { title.clone() },
            x: Axis {
                label: option_label(&option),
                log,
                ticks: ticks.clone(),
            },
            y: Axis {
                label: y_label.to_string(),
                ..Axis::default()
            },
            y2: has_cpu.then(|| Axis {
                label: "CPU local (% of the machine)".to_string(),
                ..Axis::default()
            }),
            series,
            notes: match has_cpu {
                true => vec![("CPU local, % of the machine (right axis)".to_string(), true)],
                false => vec![],
            },
            ..Chart::default()
        });
    }
    if charts.is_empty() {
        return None;
    }
    if charts.len() > 1 {
        share_axes(&mut charts);
    }
    Some(charts)
}

/// The figure's title of a sweep of small multiples.
pub fn sweep_title(test: &TestOutcome) -> Option<String> {
    let (_, y_label) = headline(test)?;
    let option = &test.points.first()?.point.values.first()?.0;
    Some(title_of(test, option, y_label))
}

/// The sweep plot of `test` as one panel (see [`sweep_charts`]).
pub fn sweep(test: &TestOutcome) -> Option<Chart> {
    sweep_charts(test)?.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_units() {
        assert_eq!(value("-m", "64K"), Some(65536.0));
        assert_eq!(value("-m", "1K"), Some(1024.0));
        assert_eq!(value("-b", "10M"), Some(1e7));
        assert_eq!(value("--rate", "2000"), Some(2000.0));
        assert_eq!(value("-P", "4"), Some(4.0));
        assert_eq!(value("--cpus", "0,2"), None);
        assert_eq!(value("-m", "K"), None);
    }
}
