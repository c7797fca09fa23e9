//! A plan's `[study]`: the study it reproduces, its question and what `--quick` reduces
//! (crate::study applies it).

use serde::{Deserialize, Serialize};

/// A plan's `[study]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyPlan {
    /// The study whose answer is written (a module of netrig-studies: "ipqos", "ipfilter",
    /// "scavenger", "gigabit", "ia64").
    pub kind: String,
    /// The study's question, as the report states it.
    pub question: String,
    /// About how long the full form takes, in minutes (stated at the start and in the report).
    pub full_minutes: f64,
    /// What `--quick` changes; absent: [`QuickPlan::default`].
    #[serde(default)]
    pub quick: QuickPlan,
    /// This run was the quick form (set by `--quick`, kept in the saved plan).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ran_quick: bool,
}

/// What `--quick` reduces (each absent field leaves the plan's own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickPlan {
    /// Every test's and group member's length (-l), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<f64>,
    /// Every test's and group member's warm-up left out (--omit), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit: Option<f64>,
    /// Runs per point and arm (the iterations' max and min both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Each sweep thinned to this many of its values: the first, the last and evenly between.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<usize>,
    /// The tests kept (their indices in the plan's `[[test]]`, from 0); absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<Vec<usize>>,
    /// The groups kept, by name; absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    /// The arms kept, by name (the baseline always); absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arms: Option<Vec<String>>,
    /// About how long the quick form takes, in minutes (at most 2 for a study's CI test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<f64>,
}

impl Default for QuickPlan {
    /// For a plan without a `[study.quick]`: 1 s tests, one run per point, sweeps at their ends.
    fn default() -> QuickPlan {
        QuickPlan {
            length: Some(1.0),
            omit: None,
            iterations: Some(1),
            points: Some(2),
            tests: None,
            groups: None,
            arms: None,
            minutes: None,
        }
    }
}
