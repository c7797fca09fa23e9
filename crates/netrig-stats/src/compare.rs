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
///
/// One rule decides it, the test of "no change" in [`Comparison::test`]: the arm is better or
/// worse when that test rejects no change, which happens exactly when the percent change's
/// interval (the same test inverted) excludes 0 %. Otherwise the runs did not show a
/// difference, and they are either `Equal` (the whole interval lies within an equivalence
/// margin the caller names, [`Comparison::verdict_within`]) or `Undetermined` (the interval is
/// too wide to tell, or there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The difference is significant and in the better direction.
    Better,
    /// The difference is significant and in the worse direction.
    Worse,
    /// Not significant, and the whole interval of the percent change lies within ±margin: the
    /// runs show the arms equal to within that margin.
    Equal,
    /// Not significant, and the interval of the percent change reaches beyond the margin (or
    /// there is no bounded one): the runs cannot tell, which is not "equal".
    Undetermined,
}

/// The test of no change that the verdict follows: Welch's statistic t = d / se, with t
/// distributed at the smaller of Welch–Satterthwaite's df at ratio 1 (Welch's test's) and at
/// the estimated ratio (the percent change interval's, Tamhane & Logan), so that the test, its
/// p-value, the difference's interval and the percent change's interval are one construction
/// and cannot disagree: p < α exactly when neither interval contains "no change".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Test {
    /// difference / std_error; `None` when the standard error is 0.
    pub t: Option<f64>,
    /// The df of the test and of both intervals; `None` when the standard error is 0.
    pub df: Option<f64>,
    /// Two-sided P(|T_df| ≥ |t|); 1 or 0 without spread, as in [`Welch::p_value`].
    pub p_value: f64,
    /// difference ± t(1 − α/2, df) · std_error.
    pub difference_ci: Interval,
    /// Whether the test rejects no change at the level (p < α; the intervals exclude 0).
    pub significant: bool,
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
    /// The degrees of freedom of t used for the interval: the test's ([`Test::df`]), the
    /// smaller of Welch–Satterthwaite's for arm − ratio · base at the estimated ratio and at
    /// ratio 1; `None` when there was no spread.
    pub df: Option<f64>,
}

/// One arm against a baseline arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub level: ConfidenceLevel,
    pub direction: Direction,
    pub base: Summary,
    pub arm: Summary,
    /// Welch's test as textbooks and SciPy compute it (df at ratio 1), for reference.
    pub welch: Welch,
    /// The test the verdict follows (see [`Test`]).
    pub test: Test,
    /// `None` when the baseline's mean is exactly 0 (no percent of it).
    pub percent_change: Option<PercentChange>,
    /// Better, worse, or (with no equivalence margin) undetermined; see
    /// [`Comparison::verdict_within`] for equal.
    pub verdict: Verdict,
}

impl Comparison {
    /// The verdict with an equivalence margin of ±`margin_pct` percent of the baseline: better
    /// or worse when the test is significant (whatever the size of the change: a significant
    /// +0.2 % is better, not equal); otherwise equal when the whole interval of the percent
    /// change (a bounded Fieller interval, which then contains 0) lies within ±margin, and
    /// undetermined when it does not or there is none.
    pub fn verdict_within(&self, margin_pct: f64) -> Verdict {
        if self.test.significant {
            return self.verdict;
        }
        match &self.percent_change {
            Some(p)
                if p.method == RatioMethod::Fieller && p.ci.low >= -margin_pct && p.ci.high <= margin_pct =>
            {
                Verdict::Equal
            }
            _ => Verdict::Undetermined,
        }
    }
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
/// - The verdict follows one test of no change ([`Test`]): Welch's t with the smaller of the
///   two df above, so that the percent change's interval excludes 0 exactly when the test is
///   significant. Significant: [`Verdict::Better`] or [`Verdict::Worse`] by `direction`; not:
///   [`Verdict::Undetermined`] here, and [`Comparison::verdict_within`] says whether the runs
///   show the arms equal within a margin. (With Welch's df for the test and the ratio's for the
///   interval, the two disagreed near the edge: an interval excluding 0 beside "not shown".)
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
    // One df for the test and both intervals: the smaller of Welch's (at ratio 1) and the
    // ratio's at the estimated ratio, so the verdict, p and the intervals agree.
    let ratio_df = (base.mean != 0.0)
        .then(|| {
            let r = arm.mean / base.mean;
            welch_df(va, arm.n, r * r * vb, base.n)
        })
        .flatten();
    let df = match (welch.df, ratio_df) {
        (Some(w), Some(r)) => Some(w.min(r)),
        (w, r) => w.or(r).filter(|_| welch.std_error > 0.0),
    };
    let test = test(&welch, df, level);
    let percent_change = percent_change(base, vb, arm, va, level, df.or(ratio_df));
    let verdict = match (test.significant, welch.difference > 0.0, direction) {
        (false, _, _) => Verdict::Undetermined,
        (true, true, Direction::HigherIsBetter) | (true, false, Direction::LowerIsBetter) => Verdict::Better,
        (true, _, _) => Verdict::Worse,
    };
    Ok(Comparison {
        level,
        direction,
        base: base.clone(),
        arm: arm.clone(),
        welch,
        test,
        percent_change,
        verdict,
    })
}

/// The test of no change at `df` (see [`Test`]).
fn test(welch: &Welch, df: Option<f64>, level: ConfidenceLevel) -> Test {
    let d = welch.difference;
    match df {
        Some(df) if welch.std_error > 0.0 => {
            let t = d / welch.std_error;
            let dist = StudentsT::new(0.0, 1.0, df).expect("a positive finite df");
            let p_value = (2.0 * dist.sf(t.abs())).min(1.0);
            let critical = level.t_critical(df).expect("a positive finite df");
            let half = critical * welch.std_error;
            Test {
                t: Some(t),
                df: Some(df),
                p_value,
                difference_ci: Interval {
                    low: d - half,
                    high: d + half,
                },
                // The very comparison Fieller's quadratic makes at ratio 1: (a − b)² > t²(va + vb).
                significant: t.abs() > critical,
            }
        }
        _ => Test {
            t: None,
            df: None,
            p_value: welch.p_value,
            difference_ci: welch.difference_ci,
            significant: d != 0.0,
        },
    }
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
    df: Option<f64>,
) -> Option<PercentChange> {
    let (a, b) = (arm.mean, base.mean);
    if b == 0.0 {
        return None;
    }
    let ratio = a / b;
    let estimate = (a - b) / b * 100.0;
    let to_pct = |r: f64| (r - 1.0) * 100.0;
    // The pivot is (a − ρ·b) / √(va + ρ²·vb), taken as t with the test's df: the smaller of
    // the Welch–Satterthwaite df of its two terms at ρ = the estimated ratio (Tamhane & Logan
    // 2004) and at ρ = 1 (where the pivot is Welch's t), so that ρ = 1 is outside the interval
    // exactly when the test rejects it.
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
