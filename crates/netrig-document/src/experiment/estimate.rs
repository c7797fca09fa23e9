//! A metric's estimate over an arm's runs, and an arm against the baseline: the document's
//! figures (crate::analysis computes them).

use serde::{Deserialize, Serialize};

/// One metric over an arm's runs at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Estimate {
    pub metric: String,
    pub unit: String,
    /// Runs (samples).
    pub n: usize,
    pub mean: f64,
    pub std_dev: Option<f64>,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    /// The confidence level of the interval, in percent.
    pub level: f64,
    /// The interval of the mean (Student's t); `null` with one run.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Its half-width in percent of the mean (netperf's "+/- 2.5%").
    pub half_width_pct: Option<f64>,
    /// Latency percentiles: the percentile of all the runs' histograms
    /// merged (the runs' own percentiles are the samples above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<f64>,
}

/// The verdict of an arm against the baseline for one metric
/// (docs/STATISTICS.md, The verdict): one test decides it, and the percent
/// change's interval is that test inverted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significant at the level, in the better direction.
    Better,
    /// Significant at the level, in the worse direction.
    Worse,
    /// Not significant, and the whole interval of the percent change lies
    /// within ±`equal_within_pct`: the runs show the arms equal within it.
    Equal,
    /// Not significant and the interval reaches beyond ±`equal_within_pct`
    /// (or there is none), or fewer than 2 runs of either arm: the runs
    /// cannot tell. (Documents saved before 0.2 said `tie` for "not
    /// significant"; it reads as this.)
    #[serde(alias = "tie")]
    Undetermined,
}

/// An arm against the baseline for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    pub metric: String,
    pub arm: String,
    pub baseline: String,
    pub higher_is_better: bool,
    /// (arm − baseline) / baseline × 100, and its interval (Fieller's, with
    /// the test's df; withheld when Fieller's is unbounded: see `method`).
    pub diff_pct: Option<f64>,
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    /// The two-sided p-value of the test the verdict follows (Welch's t,
    /// with the df the interval uses): below 1 − level exactly when the
    /// interval excludes 0.
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// The equivalence margin of `equal`, in percent of the baseline: the
    /// experiment's width asked (`iterations.width`); `null` when none
    /// applied (documents saved before it existed).
    #[serde(default)]
    pub equal_within_pct: Option<f64>,
    /// "welch+fieller", or why there is no interval or no test.
    pub method: String,
}
