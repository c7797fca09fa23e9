//! One run from several client hosts, as the document carries it: each one's part, the start
//! skew, the common window (crate::multi runs and sums them).

use crate::result::TestResult;
use serde::{Deserialize, Serialize};

/// One run from several client hosts: each one's part, the start skew, the common window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsRun {
    /// The instant every client was told to begin at (`--start-at`), seconds since the Unix epoch.
    pub start_at_unix_s: f64,
    /// The spread of the clients' own start times (their results' `started_unix_s`: when each
    /// sent `go`), latest minus earliest, in seconds; absent (with `withheld` saying why) when a
    /// client's result has no start time.
    pub start_skew_s: Option<f64>,
    /// The window over which every client was measuring at once: from the latest window start
    /// (start + `omit_s`) to the earliest window end, seconds since the Unix epoch, and its
    /// length. The sum of rates holds over it; each client's figure is over its own window.
    pub overlap: Option<Overlap>,
    /// Each client's part, in the order of the plan's list.
    pub clients: Vec<ClientPart>,
    /// Figures of the sum that are not given, each with the reason.
    pub withheld: Vec<String>,
}

/// The window every client measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overlap {
    pub start_unix_s: f64,
    pub end_unix_s: f64,
    /// end − start, seconds (0 when the windows did not overlap at all).
    pub length_s: f64,
    /// `length_s` over the shortest client window.
    pub of_shortest_window: f64,
}

/// One client host's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientPart {
    /// The lab host it ran in, and its namespace; the agent's address it went to.
    pub host: String,
    pub namespace: String,
    pub address: String,
    /// When it sent `go` by its clock, seconds since the Unix epoch; and that less the earliest.
    pub started_unix_s: Option<f64>,
    pub start_offset_s: Option<f64>,
    /// Its own figures over its own window (`elapsed_s`): received payload bits/s, bytes,
    /// transactions/s (request/response kinds).
    pub throughput_bps: f64,
    pub bytes: u64,
    pub elapsed_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    /// Its whole result, as `netrig KIND --json` printed it in that host.
    pub result: TestResult,
}
