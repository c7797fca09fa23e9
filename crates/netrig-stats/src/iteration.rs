//! When to stop repeating a run: netperf's `-i max,min -I level,width`.

use serde::{Deserialize, Serialize};

use crate::{ConfidenceLevel, StatsError, Summary};

/// netperf's iteration rule: repeat the run at least `min` and at most `max` times, and stop
/// as soon as (with at least `min` runs) the confidence interval of the mean at `level` is no
/// wider, in all, than `width_pct` percent of the mean.
///
/// The width is the interval's **whole** width, as netperf defines it: `-I 99,5` asks to be
/// 99% confident that the mean is within ±2.5% of the true mean, so the rule is met when
/// 2 · t(1 − α/2, n − 1) · s / √n ≤ (5 / 100) · |mean| (netperf's `calculate_confidence` in
/// `netlib.c`; its variance, Σx²/n − mean², divided by n − 1 is exactly s²/n). The counting
/// is that of netperf's omni tests (which the classic tests run as): at least `min`
/// runs, at most `max`, inclusive.
///
/// Differences from netperf, deliberate: nothing is silently adjusted (netperf raises `max` to
/// `min`, floors both at 3 and caps them at 30, the length of its table of t); `min` of 0 or
/// `max` below `min` is refused instead, and t comes from the distribution for any df. A `min`
/// of 1 is taken as written: one run has no interval, so the width can first be met at the
/// second run (the rule never pretends one run was confident). Any
/// level in (0, 100) is accepted (netperf takes 95 or 99). A mean of 0 never meets a width in
/// percent, unless the runs are all equal (a zero-width interval meets any width).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRule {
    /// The most runs, inclusive.
    pub max: usize,
    /// The fewest runs, inclusive; at least 1 (the width is first met, if at all, at 2).
    pub min: usize,
    pub level: ConfidenceLevel,
    /// The interval's whole width wanted, in percent of the mean (netperf's second `-I` value).
    pub width_pct: f64,
}

impl IterationRule {
    /// netperf's defaults when only `-I` is given: `-i 10,3 -I 99,5`.
    pub const NETPERF_DEFAULT: Self = Self {
        max: 10,
        min: 3,
        level: ConfidenceLevel::P99,
        width_pct: 5.0,
    };

    /// A rule in netperf's order (`-i max,min -I level,width`). Refuses `min` 0, `max` < `min`,
    /// and a width that is not a positive finite percent. A `min` of 1 is accepted: the width
    /// cannot be met before 2 runs (one run has no interval), so such a rule stops at the
    /// first run from the second on that meets it.
    pub fn new(max: usize, min: usize, level: ConfidenceLevel, width_pct: f64) -> Result<Self, StatsError> {
        if min == 0 {
            return Err(StatsError::InvalidArgument(
                "at least 0 iterations: the rule needs at least 1 run (and 2 for an interval; netperf's floor is 3)"
                    .into(),
            ));
        }
        if max < min {
            return Err(StatsError::InvalidArgument(format!(
                "at most {max} iterations is fewer than at least {min}"
            )));
        }
        if !(width_pct.is_finite() && width_pct > 0.0) {
            return Err(StatsError::InvalidArgument(format!(
                "confidence width {width_pct}% is not a positive percent of the mean"
            )));
        }
        Ok(Self {
            max,
            min,
            level,
            width_pct,
        })
    }

    /// After each run, with the figures of all the runs so far (whole runs, in any order):
    /// whether to run again, and if not, why.
    ///
    /// - [`Decision::Confident`], at least `min` runs and the width is met; stop.
    /// - [`Decision::MaxReached`], `max` runs (or more) without the width; stop, and the runner
    ///   should warn, naming the point and [`IterationStatus::width_pct`], as netperf does
    ///   ("Desired confidence was not achieved within the specified iterations").
    /// - [`Decision::Continue`], otherwise: run again.
    ///
    /// Refuses a NaN or infinite figure, as [`Summary::of`] does. No runs yet is `Continue`.
    pub fn check(&self, samples: &[f64]) -> Result<IterationStatus, StatsError> {
        let n = samples.len();
        let (interval, width_pct) = if n == 0 {
            (None, None)
        } else {
            let summary = Summary::of(samples)?;
            let interval = summary.confidence_interval(self.level);
            let width = interval.as_ref().and_then(|i| i.width_pct());
            (interval, width)
        };
        let met = interval
            .as_ref()
            .is_some_and(|i| i.half_width == 0.0 || i.width_pct().is_some_and(|w| w <= self.width_pct));
        let decision = if n >= self.min && met {
            Decision::Confident
        } else if n >= self.max {
            Decision::MaxReached
        } else {
            Decision::Continue
        };
        Ok(IterationStatus {
            n,
            decision,
            width_pct,
            target_width_pct: self.width_pct,
            level: self.level,
        })
    }
}

/// What [`IterationRule::check`] says after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run again.
    Continue,
    /// Stop: at least `min` runs and the interval is as narrow as asked.
    Confident,
    /// Stop: `max` runs and the interval is still wider than asked; warn.
    MaxReached,
}

/// The rule's answer after `n` runs, with the figures to print.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationStatus {
    /// Runs so far.
    pub n: usize,
    pub decision: Decision,
    /// The interval's whole width reached, in percent of |mean| (netperf's "Confidence
    /// intervals: Throughput: 6.8%"); `None` before 2 runs or when the mean is 0.
    pub width_pct: Option<f64>,
    /// The whole width asked for, in percent of the mean.
    pub target_width_pct: f64,
    pub level: ConfidenceLevel,
}

impl IterationStatus {
    /// Whether to stop running (either reason).
    pub fn stop(&self) -> bool {
        self.decision != Decision::Continue
    }

    /// Whether the runner should warn: stopped at the maximum without the width.
    pub fn not_confident(&self) -> bool {
        self.decision == Decision::MaxReached
    }
}
