//! An experiment's profiles (`--profile`, `profile = true` in a plan; docs/PROFILE.md,
//! "Experiments"): each arm's folded stacks merged over its runs, and at each point each arm
//! against its baseline per end, per subsystem group and per function, with the interval of the
//! difference over the runs. crate::profile_analysis computes them.
//!
//! Each run's result keeps its own groups and top functions (the figures the differences are
//! made of), but not its folded stacks: 2,000 stacks per end per run would make a 30-run
//! experiment tens of megabytes of lines that mostly repeat. They are merged once per arm here,
//! the flame graph's input, and the run keeps its `folded_total`.

use crate::result::profile::FoldedStack;
use serde::{Deserialize, Serialize};

/// The ends a profile has, as the result names them: the client's and the agent's.
pub const ENDS: [&str; 2] = ["local", "remote"];

/// One arm's profiles over its runs, per end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmProfile {
    pub local: ArmEndProfile,
    pub remote: ArmEndProfile,
}

impl ArmProfile {
    pub fn end(&self, end: &str) -> &ArmEndProfile {
        if end == "remote" {
            &self.remote
        } else {
            &self.local
        }
    }
}

/// One end of an arm's runs: how many were profiled, why the others were not, and their
/// stacks merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmEndProfile {
    /// Runs with a profile at this end.
    pub profiled_runs: usize,
    /// The arm's runs.
    pub runs: usize,
    /// Every sample the profiled runs read, summed (of which `folded` is a part: a differential
    /// flame graph compares the arms' stacks as shares of these).
    #[serde(default)]
    pub samples: u64,
    /// Why the other runs have none, each distinct reason once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// The profiled runs' folded stacks, the same stacks' samples summed over the runs, the
    /// heaviest first, at most [`MAX_ARM_FOLDED`].
    pub folded: Vec<FoldedStack>,
    /// Distinct stacks in the merge (of those the runs kept).
    pub folded_total: u64,
}

/// The stacks an arm keeps per end, merged over its runs.
pub const MAX_ARM_FOLDED: usize = 2_000;

/// One arm against its baseline at one end of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDifference {
    pub arm: String,
    pub baseline: String,
    /// "local" (the client's host) or "remote" (the agent's).
    pub end: String,
    /// The intervals' confidence level, in percent (the plan's `iterations.level`).
    pub level: f64,
    /// Why there is no difference at this end (an arm without profiles there, and the reason
    /// its runs give); absent when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// The runs each side's figures are over.
    pub baseline_runs: usize,
    pub arm_runs: usize,
    /// The unit of every `demand` here: "us/KB" or "us/tran", as the runs' group `demand`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand_unit: Option<String>,
    /// Every subsystem group but idle that either arm's runs sampled, most CPU time first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupDifference>,
    /// The heaviest functions of either arm (by inclusive samples summed over its runs), the
    /// largest rise first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionDifference>,
}

/// A figure's mean per arm over the runs, and arm − baseline with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    pub baseline_mean: f64,
    pub arm_mean: f64,
    /// arm mean − baseline mean.
    pub difference: f64,
    /// The interval of the difference (Welch's t, as the arms' comparisons: docs/STATISTICS.md);
    /// absent with fewer than 2 runs on a side.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub p_value: Option<f64>,
    /// The interval excludes 0: the arms differ at the level.
    pub excludes_zero: bool,
    /// "welch", or why there is no interval.
    pub method: String,
}

/// One subsystem group (docs/PROFILE.md, "The groups").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupDifference {
    pub group: String,
    /// Its share of the busy samples, in percent (the difference in percentage points).
    pub share_of_busy_pct: Difference,
    /// Its CPU time per unit of work (`demand_unit`); absent where a run moved nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Difference>,
}

/// One function: its inclusive CPU time (samples anywhere in the stack × the sampling period)
/// per unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDifference {
    pub name: String,
    pub demand: Difference,
    /// Runs of each side whose top functions did not list it: it counts 0 there (it had fewer
    /// inclusive samples than the run's last listed function).
    pub baseline_runs_absent: usize,
    pub arm_runs_absent: usize,
}
