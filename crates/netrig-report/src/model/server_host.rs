//! The server host's view as the result holds it (its figures: crate::server_host reads,
//! judges and renders them).

use super::measure::CpuUsage;
use netrig_proto::report::host::{ConntrackView, CpuSplit, SocketStates};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `server_host`: the whole host's figures, not the server's alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerHost {
    /// The agent that watched, as messages name it ("the agent at 192.0.2.1:6387").
    pub agent: String,
    /// The watch's length on the agent's clock: it brackets the run (set-up
    /// and the run's end included), so it is a little longer than the
    /// run's measured window.
    pub window_s: f64,
    /// Samples of the levels (conntrack, sockets) taken about once a second.
    pub samples: u32,
    /// The watch reached the agent's limit (this many seconds) and covers only those.
    pub limit_s: Option<f64>,
    /// The host's CPU over the watch, % of the whole machine.
    pub cpu: Option<CpuUsage>,
    /// The busiest CPU's split, % of that CPU.
    pub busiest_cpu: Option<CpuSplit>,
    pub cpu_withheld: Option<String>,
    /// µs of the host's busy CPU (all of it, every process's, not only the
    /// server's) over the watch, per transaction the run counted.
    pub service_demand_us_per_transaction: Option<f64>,
    pub service_demand_withheld: Option<String>,
    /// Kernel counter deltas over the watch (`TcpExt.ListenOverflows`, ...).
    pub counters: BTreeMap<String, i64>,
    pub counters_withheld: Option<String>,
    pub conntrack: Option<ConntrackView>,
    pub conntrack_withheld: Option<String>,
    pub sockets: Option<SocketStates>,
    pub sockets_withheld: Option<String>,
    /// The sysctls that bound these figures, as read at the watch's start.
    pub sysctls: BTreeMap<String, u64>,
}
