//! From runs to estimates and comparisons, with netrig-stats (pure
//! functions; the statistics are explained in docs/STATISTICS.md). Each
//! whole run is one sample; an arm's latency percentile is also read from
//! the histogram of all its runs merged, bucket by bucket.

use crate::metric::{self, Metric};
use crate::plan::Iterations;
use crate::result::TestResult;
use crate::sweep::Point;
use netrig_stats::{ConfidenceLevel, Direction, IterationRule, Summary};
use serde::{Deserialize, Serialize};

pub use crate::experiment::estimate::{Comparison, Estimate, Verdict};

/// The verdict in words, the same for the table, the HTML report and any
/// other text: "better", "worse", "equal within ±5%", "undetermined
/// (interval wider than ±5%)", "undetermined (no interval: ...)".
pub fn verdict_text(c: &Comparison) -> String {
    let margin = |m: f64| format!("±{m}%");
    match c.verdict {
        Verdict::Better => "better".into(),
        Verdict::Worse => "worse".into(),
        Verdict::Equal => match c.equal_within_pct {
            Some(m) => format!("equal within {}", margin(m)),
            None => "equal".into(),
        },
        Verdict::Undetermined if c.p_value.is_none() => "undetermined (too few runs to test)".into(),
        Verdict::Undetermined => match (c.ci_low_pct, c.ci_high_pct, c.equal_within_pct) {
            (Some(_), Some(_), Some(m)) => format!("undetermined (interval wider than {})", margin(m)),
            (Some(_), Some(_), None) => "undetermined".into(),
            _ => "undetermined (no interval)".into(),
        },
    }
}

fn level(percent: f64) -> ConfidenceLevel {
    ConfidenceLevel::from_percent(percent)
        .unwrap_or_else(|_| ConfidenceLevel::from_percent(95.0).expect("95 % is a level"))
}

fn direction(m: &Metric) -> Direction {
    if m.higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    }
}

fn samples(m: &Metric, runs: &[TestResult]) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| (m.get)(r))
        .filter(|v| v.is_finite())
        .collect()
}

/// The percentile of every run's latency histogram merged, in µs.
fn merged_percentile(m: &Metric, runs: &[TestResult]) -> Option<f64> {
    let p = match m.name {
        "latency_p50" => 50.0,
        "latency_p99" => 99.0,
        _ => return None,
    };
    let mut all: Option<netrig_metrics::LatencyRecorder> = None;
    for r in runs {
        let h = r.summary.latency_us.as_ref()?.histogram.as_ref()?;
        let rec = netrig_metrics::LatencyRecorder::from_base64(h, 1 << 20).ok()?;
        match &mut all {
            Some(a) => a.merge(&rec),
            None => all = Some(rec),
        }
    }
    let s = all?.summary();
    Some(if p == 50.0 { s.p50_us } else { s.p99_us })
}

/// `m` over `runs`, each one sample.
pub fn estimate(m: &Metric, runs: &[TestResult], level_pct: f64) -> Estimate {
    let x = samples(m, runs);
    let s = Summary::of(&x).ok();
    let ci = s.as_ref().and_then(|s| s.confidence_interval(level(level_pct)));
    Estimate {
        metric: m.name.into(),
        unit: if m.name.starts_with("sd_") {
            runs.first()
                .map_or(m.unit.to_string(), |r| r.summary.service_demand.unit.clone())
        } else {
            m.unit.into()
        },
        n: x.len(),
        mean: s.as_ref().map_or(f64::NAN, |s| s.mean),
        std_dev: s.as_ref().and_then(|s| s.std_dev),
        min: s.as_ref().map_or(f64::NAN, |s| s.min),
        max: s.as_ref().map_or(f64::NAN, |s| s.max),
        median: s.as_ref().map_or(f64::NAN, |s| s.median),
        level: level_pct,
        ci_low: ci.as_ref().map(|c| c.low),
        ci_high: ci.as_ref().map(|c| c.high),
        half_width_pct: ci.as_ref().and_then(|c| c.half_width_pct),
        merged: merged_percentile(m, runs),
    }
}

/// The metric the iteration rule watches for `runs`.
fn watched(runs: &[TestResult], it: &Iterations) -> Option<&'static Metric> {
    match &it.metric {
        Some(name) => metric::by_name(name),
        None => runs.first().map(metric::headline),
    }
}

/// The iteration rule's answer for `runs`: netperf's `-I` applied to the
/// watched metric. `None` when the runs lack that metric or the plan's
/// iterations make no rule (checked plans always do).
pub fn iteration_status(runs: &[TestResult], it: &Iterations) -> Option<netrig_stats::IterationStatus> {
    let m = watched(runs, it)?;
    let rule = IterationRule::new(it.max as usize, it.min as usize, level(it.level), it.width).ok()?;
    rule.check(&samples(m, runs)).ok()
}

/// netperf's `-I`: whether the watched metric's interval is as narrow as
/// asked (with at least `min` runs), on whichever run that happened, the
/// last allowed one included.
pub fn confident(runs: &[TestResult], it: &Iterations) -> bool {
    iteration_status(runs, it).is_some_and(|s| s.decision == netrig_stats::Decision::Confident)
}

/// The warning for a point whose interval stayed wider than asked after
/// its last allowed run; `None` when it did not (the same rule as
/// [`confident`], so the two never contradict each other).
pub fn not_confident_warning(
    kind: &str,
    point: &Point,
    arm: &str,
    runs: &[TestResult],
    it: &Iterations,
) -> Option<String> {
    let status = iteration_status(runs, it)?;
    if !status.not_confident() {
        return None;
    }
    let m = watched(runs, it).map_or("?", |m| m.name);
    let reached = match status.width_pct {
        Some(w) => format!("is {w:.1}% of its mean wide, wider than the {}% asked", it.width),
        None if status.n < 2 => format!("has no width yet (one run), and {}% was asked", it.width),
        None => format!(
            "has no width in percent (its mean is 0), and {}% was asked",
            it.width
        ),
    };
    Some(format!(
        "{kind} {point} arm {arm}: after {} runs the {}% interval of {m} {reached} \
         (more runs, or a quieter machine)",
        status.n, it.level,
    ))
}

/// The method of a comparison whose percent change has no bounded interval.
pub const UNBOUNDED: &str = "welch (no interval for the percent change: the baseline's mean is not \
     distinguishable from 0 at this level, so Fieller's set is unbounded; more runs, or a steadier baseline)";

/// `arm` against `base` for every metric both have, with no equivalence
/// margin (a comparison that is not significant is undetermined).
pub fn compare(
    base: &crate::experiment::ArmOutcome,
    arm: &crate::experiment::ArmOutcome,
    level_pct: f64,
) -> Vec<Comparison> {
    compare_within(base, arm, level_pct, None)
}

/// `arm` against `base` for every metric both have; a comparison that is
/// not significant is `equal` when its whole interval lies within
/// ±`equal_within_pct` percent.
pub fn compare_within(
    base: &crate::experiment::ArmOutcome,
    arm: &crate::experiment::ArmOutcome,
    level_pct: f64,
    equal_within_pct: Option<f64>,
) -> Vec<Comparison> {
    let runs: Vec<&TestResult> = base.runs.iter().chain(&arm.runs).collect();
    metric::present(&runs)
        .into_iter()
        .map(|m| {
            let (b, a) = (samples(m, &base.runs), samples(m, &arm.runs));
            let mut c = compare_samples(&b, &a, m.higher_is_better, level_pct, equal_within_pct);
            c.metric = m.name.into();
            c.arm = arm.arm.clone();
            c.baseline = base.arm.clone();
            c
        })
        .collect()
}

/// One metric's samples, arm `a` against baseline `b` (names left empty).
fn compare_samples(
    b: &[f64],
    a: &[f64],
    higher_is_better: bool,
    level_pct: f64,
    equal_within_pct: Option<f64>,
) -> Comparison {
    let mut c = Comparison {
        metric: String::new(),
        arm: String::new(),
        baseline: String::new(),
        higher_is_better,
        diff_pct: None,
        ci_low_pct: None,
        ci_high_pct: None,
        p_value: None,
        verdict: Verdict::Undetermined,
        equal_within_pct,
        method: String::new(),
    };
    let direction = if higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    };
    match netrig_stats::compare(b, a, direction, level(level_pct)) {
        Ok(s) => {
            c.p_value = Some(s.test.p_value);
            let verdict = match equal_within_pct {
                Some(m) => s.verdict_within(m),
                None => s.verdict,
            };
            c.verdict = match verdict {
                netrig_stats::Verdict::Better => Verdict::Better,
                netrig_stats::Verdict::Worse => Verdict::Worse,
                netrig_stats::Verdict::Equal => Verdict::Equal,
                netrig_stats::Verdict::Undetermined => Verdict::Undetermined,
            };
            if let Some(p) = &s.percent_change {
                c.diff_pct = Some(p.estimate);
                match p.method {
                    netrig_stats::RatioMethod::Fieller => {
                        c.ci_low_pct = Some(p.ci.low);
                        c.ci_high_pct = Some(p.ci.high);
                        c.method = "welch+fieller".into();
                    }
                    // The delta method's interval ignores how uncertain the baseline is where
                    // it matters most (near a ratio of 0 it looks tight), and is not the
                    // test's inversion, so it could read as decided beside a verdict that is
                    // not: withheld, with the reason.
                    netrig_stats::RatioMethod::Delta => c.method = UNBOUNDED.into(),
                }
            } else {
                c.method = "welch (the baseline's mean is 0: no percent)".into();
            }
        }
        Err(e) => {
            let (bm, am) = (mean(b), mean(a));
            c.diff_pct =
                (bm != 0.0 && bm.is_finite() && am.is_finite()).then(|| (am - bm) / bm.abs() * 100.0);
            c.method = format!("no test: {e}");
        }
    }
    c
}

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        f64::NAN
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// One regression check of a saved comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// The test, point and arm.
    pub what: String,
    pub metric: String,
    pub regressed: bool,
    /// The line to print.
    pub line: String,
}

/// Whether `new` runs are worse than `base` runs by more than `threshold_pct`.
pub fn regression(
    what: &str,
    m: &Metric,
    base: &[TestResult],
    new: &[TestResult],
    threshold_pct: f64,
    level_pct: f64,
) -> Option<Regression> {
    let (b, n) = (samples(m, base), samples(m, new));
    if b.is_empty() || n.is_empty() {
        return None;
    }
    let line_of = |verdict: &str, detail: String| format!("{what}: {} {verdict} ({detail})", m.name);
    Some(
        match netrig_stats::regression_check(&b, &n, direction(m), threshold_pct, level(level_pct)) {
            Ok(r) => {
                let change =
                    r.comparison
                        .percent_change
                        .as_ref()
                        .map_or("no percent change".to_string(), |p| {
                            format!(
                                "{:+.1}% [{:+.1}, {:+.1}] at {}%",
                                p.estimate, p.ci.low, p.ci.high, level_pct
                            )
                        });
                let detail = format!(
                    "{:.4} → {:.4} {}, {change}; threshold {threshold_pct}%",
                    r.comparison.base.mean, r.comparison.arm.mean, m.unit
                );
                Regression {
                    what: what.into(),
                    metric: m.name.into(),
                    regressed: r.regressed(),
                    line: line_of(
                        match r.outcome {
                            netrig_stats::RegressionOutcome::Regressed => "REGRESSED",
                            netrig_stats::RegressionOutcome::NotRegressed => "ok",
                            netrig_stats::RegressionOutcome::Undetermined => "undetermined",
                        },
                        detail,
                    ),
                }
            }
            Err(e) => Regression {
                what: what.into(),
                metric: m.name.into(),
                regressed: false,
                line: line_of(
                    "not checked",
                    format!("{e}: run each side at least twice (--iterations)"),
                ),
            },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A baseline too noisy to tell from 0 at 99 % (one run of four starved) against a steady
    /// arm near 0: the test does not reject no change, so undetermined (it was called a tie),
    /// and no interval of the percent change is shown beside it (the delta method's would be
    /// tight and far from 0).
    #[test]
    fn an_unbounded_percent_change_is_withheld_and_undetermined() {
        let base = [9_000.0, 9_400.0, 8_800.0, 900.0];
        let arm = [95.0, 96.0, 95.5, 95.2];
        let c = compare_samples(&base, &arm, true, 99.0, Some(5.0));
        assert_eq!(c.verdict, Verdict::Undetermined, "{c:?}");
        assert_eq!(verdict_text(&c), "undetermined (no interval)");
        assert_eq!((c.ci_low_pct, c.ci_high_pct), (None, None), "{c:?}");
        assert_eq!(c.method, UNBOUNDED);
        assert!((c.diff_pct.unwrap() + 98.6).abs() < 0.1, "{c:?}");
        assert!(c.p_value.unwrap() >= 0.01, "{c:?}");
        // The same runs at 95 %: significant, and Fieller's interval is bounded and shown.
        let c = compare_samples(&base, &arm, true, 95.0, Some(5.0));
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        assert_eq!(c.method, "welch+fieller");
        assert!(
            c.ci_high_pct.unwrap() < -50.0 && c.p_value.unwrap() < 0.05,
            "{c:?}"
        );
    }

    /// "tie" beside [−82 %, +80 %] read as "equal": not significant is now
    /// equal only when the whole interval lies within the margin asked, and
    /// undetermined when it does not. JSON says so; old documents' "tie"
    /// still reads.
    #[test]
    fn not_shown_different_is_equal_only_within_the_margin() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5];
        let close = [100.2, 100.9, 99.3, 100.4, 99.8];
        let c = compare_samples(&base, &close, true, 95.0, Some(5.0));
        assert_eq!(c.verdict, Verdict::Equal, "{c:?}");
        assert!(
            c.ci_low_pct.unwrap() >= -5.0 && c.ci_high_pct.unwrap() <= 5.0,
            "{c:?}"
        );
        assert_eq!(verdict_text(&c), "equal within ±5%");
        let noisy = [20.0, 180.0, 100.0];
        let c = compare_samples(&base, &noisy, true, 95.0, Some(5.0));
        assert_eq!(c.verdict, Verdict::Undetermined, "{c:?}");
        assert!(
            c.ci_low_pct.unwrap() < -50.0 && c.ci_high_pct.unwrap() > 50.0,
            "{c:?}"
        );
        assert_eq!(verdict_text(&c), "undetermined (interval wider than ±5%)");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["verdict"], "undetermined");
        assert_eq!(json["equal_within_pct"], 5.0);
        let mut old = json.clone();
        old["verdict"] = "tie".into();
        old.as_object_mut().unwrap().remove("equal_within_pct");
        let read: Comparison = serde_json::from_value(old).unwrap();
        assert_eq!(
            (read.verdict, read.equal_within_pct),
            (Verdict::Undetermined, None)
        );
        // One run: no test.
        let c = compare_samples(&base, &[100.0], true, 95.0, Some(5.0));
        assert_eq!(verdict_text(&c), "undetermined (too few runs to test)");
    }
}
