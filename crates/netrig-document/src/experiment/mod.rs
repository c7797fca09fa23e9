//! The experiment document: the plan, every run's whole result, the
//! set-up and tear-down commands as they ran, and each point's estimates
//! and comparisons. It is what `--json` prints and what `--save` keeps.

pub mod clients;
pub mod command;
pub mod estimate;
pub mod group;
pub mod profile;
pub mod saturation;
pub mod study;

use crate::plan::Plan;
use crate::result::TestResult;
use crate::sweep::Point;
use command::CommandRun;
use estimate::{Comparison, Estimate};
use serde::{Deserialize, Serialize};

/// The experiment document's format; a reader refuses others by name.
pub const FORMAT: &str = "netrig-experiment/1";

/// One experiment, run or being run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub format: String,
    pub netrig_version: String,
    pub plan: Plan,
    /// When it started and ended, seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub finished_unix_s: f64,
    /// False when it stopped early (Ctrl-C, a failed command or run);
    /// `stopped` says why. What completed is all here.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The randomised order's seed (saved, so the order can be replayed).
    pub seed: u64,
    /// Points whose confidence interval did not narrow to the width asked, and the like.
    pub warnings: Vec<String>,
    /// Every set-up and tear-down, in the order they ran.
    pub commands: Vec<CommandRun>,
    pub tests: Vec<TestOutcome>,
    /// The plan's groups (tests started together), each over the arms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<group::GroupOutcome>,
    /// The plan's lab as built (netrig_lab::LabState: hosts, namespaces, addresses, agents,
    /// links, shaped directions and the witness's figures); absent without a `[lab]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<serde_json::Value>,
    /// With a `[study]`: its question answered in words from the measurements (netrig-studies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<study::Answer>,
}

/// One test of the plan, over its points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestOutcome {
    pub kind: String,
    pub args: Vec<String>,
    pub points: Vec<PointOutcome>,
    /// A rate sweep's saturation point, per arm that reached one
    /// ([`crate::saturation`]); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub saturation: Vec<saturation::Saturation>,
}

/// One point of a sweep (or the one point of an unswept test).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointOutcome {
    pub point: Point,
    pub arms: Vec<ArmOutcome>,
    /// Each arm against the baseline, for every metric both have.
    pub comparisons: Vec<Comparison>,
    /// With profiles (`--profile`, `profile = true`): each arm against its baseline per end,
    /// per subsystem group and per function, or why it is withheld.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_differences: Vec<profile::ProfileDifference>,
}

/// One arm at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmOutcome {
    pub arm: String,
    /// Every run's whole result, in the order run.
    pub runs: Vec<TestResult>,
    /// Each metric's estimate over the runs (each run one sample).
    pub estimates: Vec<Estimate>,
    /// With iterations: whether the watched metric's interval narrowed to
    /// the width asked (`null` with one run per point).
    pub confident: Option<bool>,
    /// With a `[lab]`: where this arm's runs went (hosts, path, address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabPlace>,
    /// With several client hosts at once (`clients = ["c1", "c2"]`): per run, in the order of
    /// `runs` (each of which is the clients' sum), each client's part, the start skew and the
    /// window the sum holds over (crate::multi).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<clients::ClientsRun>,
    /// With profiles: per end, how many runs have one, why the others do not, and the runs'
    /// folded stacks merged (each run's own `folded` is emptied: see [`profile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::ArmProfile>,
}

/// Where an arm's runs went in the plan's lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabPlace {
    /// The arm's own shaping of the lab's links (its `shape`): what it set, the `tc` commands
    /// that set it before each run and those that put the lab's shaping back after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<netrig_lab::arm_shape::Change>,
    /// The host the client ran in, and its namespace.
    pub client: String,
    pub client_ns: String,
    /// The host whose agent served the runs.
    pub server: String,
    /// "link" (the server's address on the lab's links) or "loopback" (inside the server's host).
    pub path: String,
    /// The agent's address and port the client used.
    pub address: String,
    /// The link or LAN the address is on (absent for loopback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// With several client hosts at once: all of them (`client` is the first); each one's
    /// namespace and address are in the arm's `clients`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
}

impl ArmOutcome {
    /// The estimate of `metric`, if the runs have it.
    pub fn estimate(&self, metric: &str) -> Option<&Estimate> {
        self.estimates.iter().find(|e| e.metric == metric)
    }
}

impl Experiment {
    /// Reads a saved experiment, refusing another format by name.
    pub fn from_json(text: &str) -> Result<Experiment, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => serde_json::from_value(v).map_err(|e| e.to_string()),
            Some(other) => Err(format!("format {other:?}, not {FORMAT:?} (a newer netrig's?)")),
            None => Err("not a netrig experiment (no \"format\")".into()),
        }
    }
}
