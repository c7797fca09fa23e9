//! The statistics of experiments: pure functions over the figures of whole runs, no I/O.
//!
//! An experiment repeats a test: a point of a sweep until its mean is known well enough
//! (netperf's `-i max,min -I level,width`), or several configurations ("arms") interleaved so
//! that they can be compared. This crate is what the experiment runner asks:
//!
//! - [`Summary::of`] describes one arm's runs: n, mean, sample standard deviation, min, max,
//!   median, and [`Summary::confidence_interval`] of the mean (Student's t, n − 1 degrees of
//!   freedom).
//! - [`IterationRule::check`] says after each run whether to run again, stop because the
//!   interval is narrow enough, or stop at the maximum without it (and then warn).
//! - [`compare`] sets an arm against a baseline arm: the difference of the means with Welch's
//!   unequal-variances t-test and interval, the percent change with Fieller's interval for the
//!   ratio of two means, and a [`Verdict`] from one test that the interval inverts: better,
//!   worse, equal within a margin ([`Comparison::verdict_within`]), or undetermined.
//! - [`regression_check`] says whether new runs are worse than the baseline's by more than a
//!   threshold, beyond reasonable doubt.
//!
//! **One run is one sample.** The figures passed in are each the result of one whole run (its
//! throughput, its transactions per second, its p99 latency...), never the per-interval samples
//! inside a run: those follow one another in time and are autocorrelated, so treating them as
//! independent would understate the variance and make every interval too narrow and every
//! difference look significant. Runs of different arms should be interleaved (A B C A B C...)
//! so that drift in the machine or the network falls on every arm alike.
//!
//! **Inputs must be finite.** A NaN or an infinity is refused with [`StatsError::NonFinite`],
//! naming the sample: such a figure means a broken run (a zero-length window, a division by
//! zero upstream), and skipping it silently would bias the mean, since broken runs are not a
//! random subset of runs. The runner decides what a broken run means (run again, or report it).
//!
//! Every figure that can be undefined is an `Option` (a standard deviation of one sample, a
//! percent of a zero mean, a t statistic over a zero standard error), so no NaN or infinity
//! reaches a result, and every result type serializes to JSON and reads back.
//!
//! The formulas, the reasons for them and the references are in `docs/STATISTICS.md`.
//!
//! ```
//! use netrig_stats::{compare, ConfidenceLevel, Direction, IterationRule, Verdict};
//!
//! // Run a point until netperf's -i 10,3 -I 99,5 is met (the figures stand for whole runs).
//! let rule = IterationRule::NETPERF_DEFAULT;
//! let mut runs = Vec::new();
//! for figure in [9.41, 9.38, 9.45, 9.40, 9.43] {
//!     runs.push(figure);
//!     let status = rule.check(&runs)?;
//!     if status.stop() {
//!         assert!(!status.not_confident()); // else: warn, naming the point
//!         break;
//!     }
//! }
//! assert_eq!(runs.len(), 3);
//!
//! // An arm against the baseline, higher is better.
//! let arm = [8.71, 8.80, 8.65, 8.77, 8.69, 8.74];
//! let c = compare(&runs, &arm, Direction::HigherIsBetter, ConfidenceLevel::P95)?;
//! assert_eq!(c.verdict, Verdict::Worse);
//! let change = c.percent_change.unwrap(); // -7.29%, [-8.04%, -6.55%]
//! assert!(change.ci.contains(change.estimate) && change.ci.high < 0.0);
//! # Ok::<(), netrig_stats::StatsError>(())
//! ```

mod compare;
mod iteration;
mod regression;
mod summary;

pub use compare::{
    compare, compare_summaries, Comparison, Direction, PercentChange, RatioMethod, Test, Verdict, Welch,
};
pub use iteration::{Decision, IterationRule, IterationStatus};
pub use regression::{regression_check, RegressionCheck, RegressionOutcome};
pub use summary::{MeanInterval, Summary};

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// What a statistic refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// No samples at all.
    #[error("no samples")]
    Empty,
    /// A sample is NaN or infinite (`index` counts from 0).
    #[error("sample {index} is {value}: every run's figure must be a finite number")]
    NonFinite { index: usize, value: f64 },
    /// A comparison needs an interval on both sides, so at least two runs of each arm.
    #[error("{which} has {n} run(s): a comparison needs at least 2 runs of each arm")]
    TooFewSamples { which: &'static str, n: usize },
    /// A confidence level outside (0, 100) percent.
    #[error("confidence level {0}% is not between 0 and 100 (exclusive)")]
    InvalidLevel(f64),
    /// An argument out of its range, described.
    #[error("{0}")]
    InvalidArgument(String),
}

/// A two-sided confidence level, in percent: 95 means the interval covers the true value in
/// 95% of experiments (under the model's assumptions).
///
/// Serialized as the bare percent (`95.0`); reading checks the range.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct ConfidenceLevel(f64);

impl ConfidenceLevel {
    /// 95%, netperf's other choice.
    pub const P95: Self = Self(95.0);
    /// 99%, netperf's default for `-I`.
    pub const P99: Self = Self(99.0);

    /// A level in percent, strictly between 0 and 100.
    pub fn from_percent(percent: f64) -> Result<Self, StatsError> {
        if percent.is_finite() && percent > 0.0 && percent < 100.0 {
            Ok(Self(percent))
        } else {
            Err(StatsError::InvalidLevel(percent))
        }
    }

    /// The level in percent (95.0 for 95%).
    pub fn percent(self) -> f64 {
        self.0
    }

    /// α, the probability left outside the interval: 0.05 for 95%.
    pub fn alpha(self) -> f64 {
        (100.0 - self.0) / 100.0
    }

    /// The two-sided critical value of Student's t with `df` degrees of freedom: the
    /// t with P(|T| ≤ t) = level, i.e. the 1 − α/2 quantile (12.706 for 95% and 1 df).
    /// `df` may be fractional (Welch–Satterthwaite). `None` when `df` is not a positive
    /// finite number.
    pub fn t_critical(self, df: f64) -> Option<f64> {
        if !(df.is_finite() && df > 0.0) {
            return None;
        }
        let t = StudentsT::new(0.0, 1.0, df).ok()?;
        // The lower tail's α/2 quantile, negated: asking for 1 − α/2 directly would lose the
        // bits of α/2 in the subtraction from 1.
        Some(-t.inverse_cdf(self.alpha() / 2.0))
    }
}

impl TryFrom<f64> for ConfidenceLevel {
    type Error = StatsError;
    fn try_from(percent: f64) -> Result<Self, StatsError> {
        Self::from_percent(percent)
    }
}

impl From<ConfidenceLevel> for f64 {
    fn from(level: ConfidenceLevel) -> f64 {
        level.0
    }
}

impl std::fmt::Display for ConfidenceLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// A closed interval `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether `x` lies in the interval, ends included.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    /// `high − low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }
}

/// Refuses a non-finite sample, naming it.
fn check_finite(samples: &[f64]) -> Result<(), StatsError> {
    match samples.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            index,
            value: samples[index],
        }),
        None => Ok(()),
    }
}

/// The Welch–Satterthwaite degrees of freedom of a sum of two independent variance estimates
/// `v1` (from `n1` samples) and `v2` (from `n2`): (v1 + v2)² / (v1²/(n1−1) + v2²/(n2−1)).
/// A zero term drops out (the df is then the other's n − 1); `None` when both are zero, when
/// there is no sampling error to have degrees of freedom.
fn welch_df(v1: f64, n1: usize, v2: f64, n2: usize) -> Option<f64> {
    let sum = v1 + v2;
    if sum <= 0.0 {
        return None;
    }
    // In shares of the sum, so that neither tiny nor huge variances underflow or overflow.
    let (w1, w2) = (v1 / sum, v2 / sum);
    let term = |w: f64, n: usize| if w == 0.0 { 0.0 } else { w * w / (n as f64 - 1.0) };
    Some(1.0 / (term(w1, n1) + term(w2, n2)))
}
