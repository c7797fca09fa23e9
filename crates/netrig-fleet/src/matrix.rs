//! A mesh's results: the hosts, the rounds as they ran and one cell per test (a client host
//! against a server host), with each cell's summary figures beside its full result.

use serde::{Deserialize, Serialize};

/// The pattern of a run over many hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every unordered pair once (ordered pairs with `both_directions`).
    Full,
    /// The pairs given, in order.
    Pairs,
    /// Every other host as a client of one server host.
    Star,
}

/// One host of the mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshHost {
    /// As the user or discovery named it (`10.0.0.1`, `agent-3.netrig.svc`, `[::1]:6390`).
    pub name: String,
    /// Its control address, `host:port`.
    pub address: String,
    /// The agent's own name for itself (`netrig serve --name`, e.g. its node), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// One round: tests that ran at once, started together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshRound {
    pub index: usize,
    /// The agreed start, on the orchestrator's clock (seconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_s: Option<f64>,
    /// Its cells (indexes into [`MeshDocument::cells`]).
    pub cells: Vec<usize>,
    /// The largest start skew of its tests, ms (the latest start minus the earliest, on the
    /// orchestrator's clock); absent with fewer than two tests that started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew_ms: Option<f64>,
}

/// One test: `client` (the agent that acted as the client) against `server`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshCell {
    /// Index into [`MeshDocument::hosts`].
    pub client: usize,
    /// Index into [`MeshDocument::hosts`].
    pub server: usize,
    pub round: usize,
    /// Why there is no result (refused, failed, unreachable); absent when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Payload bits/s over the measured window (the result's summary.throughput_bps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    /// Request/response kinds: transactions per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    /// Request/response kinds: the median and 99th percentile round trip, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
    /// TCP: segments the senders retransmitted over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// When its client sent `go`, on the orchestrator's clock, minus the round's agreed start, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset_ms: Option<f64>,
    /// The client agent's clock minus the orchestrator's, ms, as measured over the control
    /// connection, and the bound of that estimate (half the best round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_bound_ms: Option<f64>,
    /// The test's warnings (the witness's among them), as its result says them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The whole result, as `netrig KIND --json` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

/// What `netrig mesh --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshDocument {
    pub netrig_version: String,
    /// The test kind, e.g. `tcp-stream`.
    pub test: String,
    /// Its options, as given after the kind (`-l 10`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    pub pattern: Pattern,
    /// Tests at once per round, at most (absent: as many as the pattern allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Each measured seconds (the spec's length).
    pub length_s: f64,
    pub hosts: Vec<MeshHost>,
    pub rounds: Vec<MeshRound>,
    pub cells: Vec<MeshCell>,
    /// From the first round's start to the last result, seconds.
    pub wall_s: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl MeshCell {
    /// A cell of `client` against `server` in `round`, with nothing measured yet.
    pub fn new(client: usize, server: usize, round: usize) -> MeshCell {
        MeshCell {
            client,
            server,
            round,
            error: None,
            throughput_bps: None,
            transactions_per_s: None,
            latency_p50_us: None,
            latency_p99_us: None,
            retransmits: None,
            start_offset_ms: None,
            clock_offset_ms: None,
            clock_bound_ms: None,
            warnings: Vec::new(),
            result: None,
        }
    }
}

impl MeshDocument {
    /// The test as a command line would give it: `tcp-stream -l 10`.
    pub fn test_line(&self) -> String {
        std::iter::once(self.test.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What `netrig mesh --plan FILE --json` prints: the plan as read, and a mesh document per test
/// of it, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshPlanDocument {
    pub netrig_version: String,
    pub plan: crate::plan::MeshPlan,
    pub meshes: Vec<MeshDocument>,
}
