//! Whether new runs are worse than the baseline's by more than a threshold.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{compare, Comparison, ConfidenceLevel, Direction, RatioMethod, StatsError};

/// The answer of [`regression_check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegressionOutcome {
    /// The whole interval of the percent change lies beyond the threshold, on the worse side.
    Regressed,
    /// The runs do not show a regression beyond the threshold (they may show a smaller one, or
    /// none, or leave one possible: read the interval).
    NotRegressed,
    /// The percent change is not determined: the baseline's mean is 0, or not significantly
    /// different from 0 (Fieller's interval is unbounded).
    Undetermined,
}

/// A regression check's answer with the figures to print (its `Display` is one line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionCheck {
    /// How much worse, in percent of the baseline, counts as a regression.
    pub threshold_pct: f64,
    pub outcome: RegressionOutcome,
    /// The comparison behind it (new runs as the arm).
    pub comparison: Comparison,
}

impl RegressionCheck {
    /// Whether the new runs regressed beyond the threshold.
    pub fn regressed(&self) -> bool {
        self.outcome == RegressionOutcome::Regressed
    }
}

/// Whether `new` is worse than `baseline` by more than `threshold_pct` percent, beyond doubt at
/// `level`: for a metric where higher is better, whether the whole interval of the percent
/// change (new − base)/base × 100 lies below −threshold; where lower is better, above
/// +threshold. The interval is Fieller's (see [`compare_summaries`](crate::compare_summaries));
/// when it would be unbounded the outcome is [`RegressionOutcome::Undetermined`], never a
/// regression.
///
/// A two-sided interval at 95% lying wholly beyond the threshold is a one-sided test at the
/// 2.5% level that the change is worse than the threshold: a regression found this way is
/// rarely a false alarm, and a small true regression with few runs may go unflagged (the
/// interval then straddles the threshold: more runs narrow it).
///
/// Refuses a negative or non-finite threshold, and what [`compare`] refuses.
pub fn regression_check(
    baseline: &[f64],
    new: &[f64],
    direction: Direction,
    threshold_pct: f64,
    level: ConfidenceLevel,
) -> Result<RegressionCheck, StatsError> {
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(StatsError::InvalidArgument(format!(
            "regression threshold {threshold_pct}% is not a percent of 0 or more"
        )));
    }
    let comparison = compare(baseline, new, direction, level)?;
    let outcome = match &comparison.percent_change {
        Some(change) if change.method == RatioMethod::Fieller => {
            let beyond = match direction {
                Direction::HigherIsBetter => change.ci.high < -threshold_pct,
                Direction::LowerIsBetter => change.ci.low > threshold_pct,
            };
            if beyond {
                RegressionOutcome::Regressed
            } else {
                RegressionOutcome::NotRegressed
            }
        }
        _ => RegressionOutcome::Undetermined,
    };
    Ok(RegressionCheck {
        threshold_pct,
        outcome,
        comparison,
    })
}

impl fmt::Display for RegressionCheck {
    /// `-7.30% [-7.92%, -6.68%] at 95%, base 9.414 (n 5) new 8.72667 (n 6), threshold -5%: regressed`:
    /// the percent change and its interval, the means to 6 significant digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.comparison;
        match &c.percent_change {
            Some(p) => write!(f, "{:+.2}% [{:+.2}%, {:+.2}%]", p.estimate, p.ci.low, p.ci.high)?,
            None => write!(f, "no percent change (baseline mean 0)")?,
        }
        if c.percent_change
            .as_ref()
            .is_some_and(|p| p.method == RatioMethod::Delta)
        {
            write!(f, " (delta method)")?;
        }
        let sign = match c.direction {
            Direction::HigherIsBetter => "-",
            Direction::LowerIsBetter => "+",
        };
        let outcome = match self.outcome {
            RegressionOutcome::Regressed => "regressed",
            RegressionOutcome::NotRegressed => "not regressed",
            RegressionOutcome::Undetermined => "undetermined",
        };
        write!(
            f,
            " at {}, base {} (n {}) new {} (n {}), threshold {sign}{}%: {outcome}",
            c.level,
            significant(c.base.mean),
            c.base.n,
            significant(c.arm.mean),
            c.arm.n,
            self.threshold_pct
        )
    }
}

/// `x` rounded to 6 significant digits, for printing (9.414, 8.72667, 12345700000).
fn significant(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}
