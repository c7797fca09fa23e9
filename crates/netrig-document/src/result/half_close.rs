//! `summary.half_close`: half-closed connections left on a server (the kind `half-close`,
//! docs/studies/ia64-overload.md): what the clients did, and the server host's sockets from
//! them by state, counted in its namespace every 100 ms until they were gone.

use serde::{Deserialize, Serialize};

/// The server's sockets from the clients, at one instant (seconds after the run began).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HalfCloseSample {
    pub t_s: f64,
    pub established: u64,
    pub fin_wait1: u64,
    pub fin_wait2: u64,
    pub close_wait: u64,
    pub last_ack: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HalfCloseSummary {
    /// "vanish" (read until the server closed, then gone without a FIN or RST) or "shutdown"
    /// (the write half shut, the connection held unread).
    pub how: String,
    pub connections_asked: u32,
    pub opened: u32,
    pub connect_failures: u32,
    /// Connections whose request or shutdown failed (the server had reset them).
    pub request_failures: u32,
    /// vanish: connections the server had closed before the clients went away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_closed_first: Option<u32>,
    /// Seconds after the run began when the last client went away.
    pub away_at_s: f64,
    /// Seconds from then until none of the server's sockets from the clients was open
    /// (TIME_WAIT aside; 0 when none was left by then); absent when some outlived the watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_after_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_withheld: Option<String>,
    /// Sockets still open at the watch's end.
    pub left_at_end: u64,
    /// The server host's net.ipv4.tcp_fin_timeout (what bounds an orphaned FIN_WAIT2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_fin_timeout_s: Option<u64>,
    /// The peaks of each state over the watch.
    pub peak: HalfCloseSample,
    /// Every sample (every 100 ms; at most 6,000).
    pub samples: Vec<HalfCloseSample>,
}
