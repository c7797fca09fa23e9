//! One arm's runs: the descriptive figures and the confidence interval of the mean.

use serde::{Deserialize, Serialize};

use crate::{check_finite, ConfidenceLevel, StatsError};

/// The figures of a set of runs (each sample one whole run's figure).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many runs.
    pub n: usize,
    /// The arithmetic mean.
    pub mean: f64,
    /// The sample standard deviation, s = √(Σ(x − mean)² / (n − 1)); `None` for one run.
    pub std_dev: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// The middle run's figure; the mean of the two middle ones when n is even.
    pub median: f64,
}

impl Summary {
    /// Describes `samples`, each the figure of one whole run.
    ///
    /// Refuses an empty slice ([`StatsError::Empty`]) and any NaN or infinite sample
    /// ([`StatsError::NonFinite`], naming the first): a non-finite figure is a broken run, and
    /// skipping it would bias the result. All samples equal give a standard deviation of exactly
    /// 0 and a mean of exactly that value.
    pub fn of(samples: &[f64]) -> Result<Self, StatsError> {
        if samples.is_empty() {
            return Err(StatsError::Empty);
        }
        check_finite(samples)?;
        let n = samples.len();
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (min, max) = (sorted[0], sorted[n - 1]);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            // Halves first: the sum of two large figures could overflow.
            sorted[n / 2 - 1] / 2.0 + sorted[n / 2] / 2.0
        };
        let (mean, std_dev) = if min == max {
            // Exactly, where the arithmetic below could leave a rounding residue.
            (min, (n > 1).then_some(0.0))
        } else {
            // Two passes: the sum of squared deviations from the mean, not Σx² − n·mean²,
            // which cancels catastrophically when the spread is small beside the mean (as
            // it is for repeated throughput runs).
            let mean = samples.iter().sum::<f64>() / n as f64;
            let ss: f64 = samples.iter().map(|x| (x - mean) * (x - mean)).sum();
            (mean, (n > 1).then(|| (ss / (n as f64 - 1.0)).sqrt()))
        };
        Ok(Self {
            n,
            mean,
            std_dev,
            min,
            max,
            median,
        })
    }

    /// The sample variance s²; `None` for one run.
    pub fn variance(&self) -> Option<f64> {
        self.std_dev.map(|s| s * s)
    }

    /// The standard error of the mean, s / √n; `None` for one run.
    pub fn std_error(&self) -> Option<f64> {
        self.std_dev.map(|s| s / (self.n as f64).sqrt())
    }

    /// The two-sided confidence interval of the mean at `level`, with Student's t and n − 1
    /// degrees of freedom: mean ± t(1 − α/2, n − 1) · s / √n. `None` for one run (there is no
    /// estimate of the spread). All runs equal give an interval of width 0: the data show no
    /// spread at all, which is what the model can say (a figure quantized to a few values may
    /// do this; more runs are the cure).
    ///
    /// Assumes the runs are independent and their figures roughly normal; the t interval is
    /// robust to moderate non-normality, less so to strong skew with few runs.
    pub fn confidence_interval(&self, level: ConfidenceLevel) -> Option<MeanInterval> {
        let se = self.std_error()?;
        let df = self.n as f64 - 1.0;
        let t = level.t_critical(df)?;
        let half_width = t * se;
        Some(MeanInterval {
            level,
            df,
            t,
            low: self.mean - half_width,
            high: self.mean + half_width,
            half_width,
            half_width_pct: relative_pct(half_width, self.mean),
        })
    }
}

/// `part` as a percent of |`whole`|; `None` when `whole` is 0.
pub(crate) fn relative_pct(part: f64, whole: f64) -> Option<f64> {
    (whole != 0.0).then(|| part / whole.abs() * 100.0)
}

/// A confidence interval of a mean, with how it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeanInterval {
    pub level: ConfidenceLevel,
    /// Degrees of freedom, n − 1.
    pub df: f64,
    /// The critical value used, t(1 − α/2, df).
    pub t: f64,
    pub low: f64,
    pub high: f64,
    /// t · s / √n: the interval is mean ± this.
    pub half_width: f64,
    /// The half-width as a percent of |mean| (netperf's "+/- 2.5%"); `None` when the mean is 0.
    pub half_width_pct: Option<f64>,
}

impl MeanInterval {
    /// The whole width as a percent of |mean|, twice [`half_width_pct`](Self::half_width_pct):
    /// the figure netperf's `-I level,width` asks for and its warning reports.
    pub fn width_pct(&self) -> Option<f64> {
        self.half_width_pct.map(|h| 2.0 * h)
    }

    /// Whether `x` lies in the interval, ends included.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}
