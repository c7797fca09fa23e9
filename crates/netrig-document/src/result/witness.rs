//! The witness in the result: each of netrig's figures beside the kernel's own count of the
//! same thing (netrig-report's `witness` judges them; docs/RESULTS.md, "The witness").

use netrig_proto::report::WitnessReport;
use serde::{Deserialize, Serialize};

/// One of netrig's figures beside the kernel's count of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessCheck {
    /// `local` or `remote`.
    pub end: String,
    /// What netrig counted, e.g. "UDP messages sent".
    pub figure: String,
    pub netrig: u64,
    pub netrig_unit: String,
    pub kernel: u64,
    /// Where the kernel's count comes from, e.g. "Udp.OutDatagrams".
    pub kernel_source: String,
    pub kernel_unit: String,
    /// netrig / kernel; null when the kernel counted nothing.
    pub ratio: Option<f64>,
    /// `equal` (the same count) or `bound` (the kernel's also counts other traffic).
    pub relation: String,
    /// How far apart the two may be and still agree, in netrig's unit.
    pub tolerance: u64,
    /// For a bound: what the kernel counted beyond netrig's traffic (in
    /// the kernel's unit), i.e. other traffic; null for an equality.
    pub other: Option<u64>,
    /// `agrees`, or `disagrees` (netrig's figure cannot be right, or the
    /// kernel's count is not of the same thing).
    pub verdict: String,
}

/// The witness as the result carries it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WitnessResult {
    pub checks: Vec<WitnessCheck>,
    /// What each end read (null where it did not).
    pub local: Option<WitnessReport>,
    pub remote: Option<WitnessReport>,
    /// True when both ends read the same host counters (one host, one
    /// network namespace): their host checks are the same and shown once.
    pub shared_counters: bool,
    /// Checks that could not be made, each with the reason (the http kind:
    /// the server host's, without `--server-agent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
}
