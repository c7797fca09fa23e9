//! A sweep: the headline metric against the swept option's values, one
//! line per arm with its interval, CPU on a secondary axis.

use crate::chart::{Axis, Chart, Series};
use netrig_experiment::document::{ArmOutcome, TestOutcome};
use netrig_experiment::metric;

/// A swept value as a number, as its option reads it (netrig-experiment's rule).
pub fn value(option: &str, text: &str) -> Option<f64> {
    netrig_experiment::sweep::value(option, text)
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
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, 0f64), |a, v| (a.0.min(*v), a.1.max(*v)));
    let log = numeric && lo > 0.0 && hi / lo > 16.0;
    Some((option, x, ticks, log))
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

/// The sweep plot of `test`, when it has a swept option and more than one point.
pub fn sweep(test: &TestOutcome) -> Option<Chart> {
    if test.points.len() < 2 {
        return None;
    }
    let (option, x, ticks, log) = xs(test)?;
    let (metric, y_label) = headline(test)?;
    let arms = test.points.iter().map(|p| p.arms.len()).max().unwrap_or(0);
    let mut series: Vec<Series> = Vec::new();
    let mut cpu: Vec<Series> = Vec::new();
    for (p, x) in test.points.iter().zip(&x) {
        for arm in &p.arms {
            let name = series_name(arm, &p.point.values, arms);
            let at = match series.iter().position(|s| s.label == name) {
                Some(i) => i,
                None => {
                    let c = series.len();
                    series.push(Series {
                        label: name.clone(),
                        colour: c,
                        ..Series::default()
                    });
                    cpu.push(Series {
                        label: format!("{name}: CPU local"),
                        colour: c,
                        dashed: true,
                        secondary: true,
                        ..Series::default()
                    });
                    c
                }
            };
            if let Some(e) = arm.estimate(metric) {
                series[at].points.push((*x, e.mean));
                if let (Some(lo), Some(hi)) = (e.ci_low, e.ci_high) {
                    // A rate is never below 0: an interval wide enough to
                    // reach past it is drawn to 0 (the JSON keeps its bound).
                    series[at].band.push((*x, lo.max(0.0), hi));
                }
            }
            if let Some(e) = arm.estimate("cpu_local") {
                cpu[at].points.push((*x, e.mean));
            }
        }
    }
    let has_cpu = cpu.iter().any(|s| !s.points.is_empty());
    series.retain(|s| !s.points.is_empty());
    if series.is_empty() {
        return None;
    }
    if has_cpu {
        series.extend(cpu.into_iter().filter(|s| !s.points.is_empty()));
    }
    let what = y_label.split(" (").next().unwrap_or(y_label);
    Some(Chart {
        title: format!("{}: {what} against {option}", test.kind),
        x: Axis {
            label: option_label(&option),
            log,
            ticks,
        },
        y: Axis {
            label: y_label.to_string(),
            ..Axis::default()
        },
        y2: has_cpu.then(|| Axis {
            label: "CPU local (% of the machine), dashed".to_string(),
            ..Axis::default()
        }),
        series,
        ..Chart::default()
    })
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
