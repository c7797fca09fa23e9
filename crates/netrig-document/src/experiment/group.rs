//! A group's outcome over the plan's arms: its runs, each member's series on the group's clock,
//! responsiveness, estimates and comparisons (crate::group runs and fills them).

use super::estimate::{Comparison, Estimate};
use super::LabPlace;
use crate::result::TestResult;
use serde::{Deserialize, Serialize};

/// One group over the plan's arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupOutcome {
    pub name: String,
    /// The members' names, in the plan's order.
    pub members: Vec<String>,
    pub arms: Vec<GroupArm>,
    /// Each member's figures in each arm against the baseline arm's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<MemberComparison>,
}

/// One arm of a group: its runs (each all the members started together), and each member's
/// estimates over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupArm {
    pub arm: String,
    pub runs: Vec<GroupRun>,
    pub members: Vec<MemberEstimates>,
}

/// One member's estimates over an arm's runs (each run one sample).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberEstimates {
    pub member: String,
    pub estimates: Vec<Estimate>,
    /// With iterations: whether the watched metric's interval narrowed as asked.
    pub confident: Option<bool>,
}

/// One member of a group against the baseline arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberComparison {
    pub member: String,
    pub comparisons: Vec<Comparison>,
}

/// One run of a group: every member started together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRun {
    /// The group's time zero on the wall clock (Unix seconds): when its members were started.
    /// Every `t_s` below counts from it.
    pub started_unix_s: f64,
    pub members: Vec<MemberRun>,
    /// Each request/response member's round trips as responsiveness, idle and under load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responsiveness: Vec<Responsiveness>,
}

/// One member's run within a group run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberRun {
    pub member: String,
    pub kind: String,
    /// When the plan asked it to start, seconds after the group's time zero.
    pub start_s: f64,
    /// Its time zero on the group's clock, measured: its result's `started_unix_s` less the
    /// group's (`null` when its result has none, with the reason in `offset_withheld`).
    pub offset_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_withheld: Option<String>,
    /// With a `[lab]`: where its run went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabPlace>,
    /// Its interval samples on the group's clock (empty when `offset_s` is null).
    pub series: Vec<SeriesPoint>,
    /// Its whole result (absent when it failed: `error` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<TestResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One interval of a member, on the group's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesPoint {
    /// The interval's start and end, seconds after the group's time zero.
    pub start_s: f64,
    pub end_s: f64,
    /// Payload bits/s in the interval (both directions).
    pub throughput_bps: f64,
    /// Request/response: transactions per second, the number timed and their latency (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
}

/// A request/response member's round trips as responsiveness: round trips per minute, 60 / the
/// mean round trip of the transactions completed in the window (the IETF responsiveness
/// draft's RPM and iperf 2's bounceback report it so), idle and under working conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Responsiveness {
    pub member: String,
    /// Before any other member started: its intervals that ended before the first other
    /// member's time zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<RpmWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_withheld: Option<String>,
    /// Under working conditions: its intervals wholly inside the span in which every other
    /// member was measuring (from the last one's first interval to the first one's last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working: Option<RpmWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_withheld: Option<String>,
}

/// Round trips over one window of the group's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpmWindow {
    /// The window: from the first interval's start to the last one's end, group clock.
    pub start_s: f64,
    pub end_s: f64,
    pub intervals: usize,
    /// Transactions completed (round trips timed) in it.
    pub transactions: u64,
    /// Their mean round trip, µs, and the median of the intervals' medians.
    pub mean_rtt_us: f64,
    pub median_interval_p50_us: f64,
    /// 60 / mean round trip (s).
    pub rpm: f64,
}
