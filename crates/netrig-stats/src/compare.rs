//! An arm against a baseline arm: Welch's t-test and interval for the difference of the means,
//! Fieller's interval for the percent change, and a verdict.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{welch_df, ConfidenceLevel, Interval, StatsError, Summary};

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput, transactions per second.
    HigherIsBetter,
    /// Latency, CPU per byte, loss.
    LowerIsBetter,
}

/// The arm against the baseline, at the comparison's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The difference is significant and in the better direction.
    Better,
    /// The difference is significant and in the worse direction.
    Worse,
    /// Not significant: the interval of the difference contains 0. This says the runs do not
    /// show a difference, not that there is none; how large a difference they leave possible
    /// is the interval of the percent change.
    Tie,
}

/// Welch's unequal-variances t-test of the arm's mean against the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// arm mean − base mean.
    pub difference: f64,
    /// √(s_arm²/n_arm + s_base²/n_base).
    pub std_error: f64,
    /// difference / std_error; `None` when the standard error is 0 (both arms without spread).
    pub t: Option<f64>,
    /// The Welch–Satterthwaite degrees of freedom; `None` when the standard error is 0.
    pub df: Option<f64>,
    /// Two-sided: P(|T| ≥ |t|) under equal means. With a standard error of 0 it is 1 when the
    /// means are equal and 0 when they differ.
    pub p_value: f64,
    /// difference ± t(1 − α/2, df) · std_error (a single point when the standard error is 0).
    pub difference_ci: Interval,
}

/// How the percent change's interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioMethod {
    /// Fieller's interval for the ratio of the means, exact for normal means.
    Fieller,
    /// Fieller's set is unbounded here (the baseline's mean is not significantly different from
    /// 0 at this level), so the interval is the delta method's ratio ± t · se(ratio): a rough
    /// approximation, to be read as "the percent change is not well determined".
    Delta,
}

/// (arm − base) / base × 100, with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PercentChange {
    /// (arm mean − base mean) / base mean × 100.
    pub estimate: f64,
    /// The interval, in percent.
    pub ci: Interval,
    pub method: RatioMethod,
    /// The degrees of freedom of t used for the interval: Welch–Satterthwaite's for the
    /// combination arm − ratio · base at the estimated ratio; `None` when there was no spread.
    pub df: Option<f64>,
}

/// One arm against a baseline arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub level: ConfidenceLevel,
    pub direction: Direction,
    pub base: Summary,
    pub arm: Summary,
    pub welch: Welch,
    /// `None` when the baseline's mean is exactly 0 (no percent of it).
    pub percent_change: Option<PercentChange>,
    pub verdict: Verdict,
}

/// Compares `arm`'s runs with `base`'s: see [`compare_summaries`]. Refuses what
/// [`Summary::of`] refuses, and fewer than 2 runs on either side.
pub fn compare(
    base: &[f64],
    arm: &[f64],
    direction: Direction,
    level: ConfidenceLevel,
) -> Result<Comparison, StatsError> {
    compare_summaries(&Summary::of(base)?, &Summary::of(arm)?, direction, level)
}

/// Compares one arm with the baseline, each described by its runs' [`Summary`].
///
/// - The difference of the means, arm − base, is tested with Welch's t-test: t = d / se with
///   se² = s_arm²/n_arm + s_base²/n_base and the Welch–Satterthwaite df; its interval is
///   d ± t(1 − α/2, df) · se. Welch, not Student's pooled test, because two configurations
///   need not have the same spread, and Welch loses almost nothing when they do.
/// - The percent change, (arm − base)/base × 100, gets Fieller's interval for the ratio of two
///   independent means, with t at the Welch–Satterthwaite df of arm − ratio · base evaluated at
///   the estimated ratio; when Fieller's set is unbounded (the baseline's mean is not
///   significantly different from 0), the delta method's interval instead, flagged
///   [`RatioMethod::Delta`].
/// - The verdict is [`Verdict::Tie`] when the difference's interval contains 0 (p ≥ α), else
///   [`Verdict::Better`] or [`Verdict::Worse`] by `direction`. Near the edge of significance
///   the percent change's interval can disagree with it slightly (its df is evaluated at the
///   estimated ratio, the test's at ratio 1); the verdict is the test's.
///
/// Assumes the runs are independent (one run, one sample) and each arm's figures roughly
/// normal. Refuses fewer than 2 runs on either side.
pub fn compare_summaries(
    base: &Summary,
    arm: &Summary,
    direction: Direction,
    level: ConfidenceLevel,
) -> Result<Comparison, StatsError> {
    let (vb, va) = match (base.variance(), arm.variance()) {
        (Some(vb), Some(va)) => (vb / base.n as f64, va / arm.n as f64),
        (None, _) => {
            return Err(StatsError::TooFewSamples {
                which: "the baseline",
                n: base.n,
            })
        }
        (_, None) => {
            return Err(StatsError::TooFewSamples {
                which: "the arm",
                n: arm.n,
            })
        }
    };
    let welch = welch(base, vb, arm, va, level);
    let percent_change = percent_change(base, vb, arm, va, level);
    let significant = !welch.difference_ci.contains(0.0);
    let verdict = match (significant, welch.difference > 0.0, direction) {
        (false, _, _) => Verdict::Tie,
        (true, true, Direction::HigherIsBetter) | (true, false, Direction::LowerIsBetter) => Verdict::Better,
        (true, _, _) => Verdict::Worse,
    };
    Ok(Comparison {
        level,
        direction,
        base: base.clone(),
        arm: arm.clone(),
        welch,
        percent_change,
        verdict,
    })
}

/// Welch's test; `vb`, `va` are the squared standard errors of the means.
fn welch(base: &Summary, vb: f64, arm: &Summary, va: f64, level: ConfidenceLevel) -> Welch {
    let difference = arm.mean - base.mean;
    let std_error = (va + vb).sqrt();
    let df = welch_df(va, arm.n, vb, base.n);
    let (t, p_value, half_width) = match df {
        Some(df) if std_error > 0.0 => {
            let t = difference / std_error;
            // Both standard errors are finite and one is positive, so df ≥ 1 and finite.
            let dist = StudentsT::new(0.0, 1.0, df).expect("a positive finite df");
            let p = (2.0 * dist.sf(t.abs())).min(1.0);
            let critical = level.t_critical(df).expect("a positive finite df");
            (Some(t), p, critical * std_error)
        }
        _ => (None, if difference == 0.0 { 1.0 } else { 0.0 }, 0.0),
    };
    Welch {
        difference,
        std_error,
        t,
        df: df.filter(|_| std_error > 0.0),
        p_value,
        difference_ci: Interval {
            low: difference - half_width,
            high: difference + half_width,
        },
    }
}

/// Fieller's interval for arm/base (or the delta method's), as a percent change.
fn percent_change(
    base: &Summary,
    vb: f64,
    arm: &Summary,
    va: f64,
    level: ConfidenceLevel,
) -> Option<PercentChange> {
    let (a, b) = (arm.mean, base.mean);
    if b == 0.0 {
        return None;
    }
    let ratio = a / b;
    let estimate = (a - b) / b * 100.0;
    let to_pct = |r: f64| (r - 1.0) * 100.0;
    // The pivot is (a − ρ·b) / √(va + ρ²·vb), taken as t with the Welch–Satterthwaite df of
    // its two terms at ρ = the estimated ratio (Tamhane & Logan 2004). Should both terms be 0
    // there (the arm without spread and a ratio of 0), the difference's df stands in.
    let df = welch_df(va, arm.n, ratio * ratio * vb, base.n).or_else(|| welch_df(va, arm.n, vb, base.n));
    let Some(df) = df else {
        // Neither arm has any spread: the ratio is what it is.
        let ci = Interval {
            low: estimate,
            high: estimate,
        };
        return Some(PercentChange {
            estimate,
            ci,
            method: RatioMethod::Fieller,
            df: None,
        });
    };
    let t = level.t_critical(df).expect("a positive finite df");
    let t2 = t * t;
    // The ρ with (a − ρb)² ≤ t²(va + ρ²vb): (b² − t²vb)ρ² − 2abρ + (a² − t²va) ≤ 0. A bounded
    // interval when the leading coefficient is positive, i.e. g = t²vb/b² < 1.
    let g = t2 * vb / (b * b);
    let (low, high, method) = if g < 1.0 {
        // (ab ± t·√(a²vb + b²va − t²·va·vb)) / (b² − t²vb), the square root's argument being
        // b²va(1 − g) + a²vb ≥ 0.
        let root = t * (b * b * va * (1.0 - g) + a * a * vb).sqrt();
        let denominator = b * b * (1.0 - g);
        (
            (a * b - root) / denominator,
            (a * b + root) / denominator,
            RatioMethod::Fieller,
        )
    } else {
        // Var(a/b) ≈ (va + ρ²vb) / b².
        let se = ((va + ratio * ratio * vb) / (b * b)).sqrt();
        (ratio - t * se, ratio + t * se, RatioMethod::Delta)
    };
    Some(PercentChange {
        estimate,
        ci: Interval {
            low: to_pct(low),
            high: to_pct(high),
        },
        method,
        df: Some(df),
    })
}
