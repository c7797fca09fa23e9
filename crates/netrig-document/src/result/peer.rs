//! Which software answered at the far end of a test, when it was not a
//! netrig agent: an iperf3 server (`--peer iperf3`, or detected), whose
//! figures are its own report, not netrig's measurement. Absent from a
//! result against a netrig agent, and from every result saved before.

use serde::{Deserialize, Serialize};

/// What a test's client speaks to its server: `--peer` on the command
/// line, `peer` in a plan's `[target]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// A netrig agent, or an iperf3 server when it answers as one (the
    /// stream kinds only; every other kind speaks netrig alone).
    #[default]
    Auto,
    /// A netrig agent only: an iperf3 server is an error, as before.
    Netrig,
    /// An iperf3 server (`iperf3 -s`), spoken to in iperf3's protocol.
    Iperf3,
}

impl Peer {
    /// As `--peer` and a plan's `peer` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Auto => "auto",
            Peer::Netrig => "netrig",
            Peer::Iperf3 => "iperf3",
        }
    }

    /// `--peer`'s values, as typed.
    pub fn parse(text: &str) -> Result<Peer, String> {
        match text {
            "auto" => Ok(Peer::Auto),
            "netrig" => Ok(Peer::Netrig),
            "iperf3" => Ok(Peer::Iperf3),
            _ => Err(format!("{text:?} is not a peer: auto, netrig or iperf3")),
        }
    }
}

/// How the client came to speak the peer's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Chosen {
    /// The user asked for it (`--peer iperf3`, a plan's `peer = "iperf3"`).
    Asked,
    /// `--peer auto`: the server answered netrig's greeting as iperf3 does.
    Detected,
}

/// The far end of a test that was not a netrig agent, and what it reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// "iperf3".
    pub software: String,
    pub chosen: Chosen,
    /// Where the remote end's figures come from: "reported by the server"
    /// (its results exchange, taken as sent), never measured by netrig.
    pub remote_figures: String,
    /// The server's report as it came, converted to netrig's units.
    pub reported: ReportedByServer,
    /// What the result leaves out of the remote end because the server does
    /// not report it, each with that reason.
    pub withheld: Vec<String>,
}

/// The server's results exchange: its CPU and its per-stream figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportedByServer {
    /// The server process's CPU utilisation over its test, in %, as iperf3
    /// computes it (its process's user and system time from getrusage(2)
    /// over the test's wall time): iperf3's figure, not /proc/stat's.
    pub cpu_util_total_pct: f64,
    pub cpu_util_user_pct: f64,
    pub cpu_util_system_pct: f64,
    /// The congestion control the server's sockets used, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// One entry per stream, in the server's stream ids.
    pub streams: Vec<ReportedStream>,
    /// The server's own output (`--get-server-output`): its text, or its
    /// JSON when it runs with `-J`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<serde_json::Value>,
}

/// One stream as the server reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportedStream {
    /// The flow of this result it is (netrig's flow id).
    pub flow: u32,
    /// iperf3's stream id.
    pub stream_id: i32,
    /// Bytes the server received (where it received) or sent (where it
    /// sent) over its measured time.
    pub bytes: u64,
    /// Where the server sent over TCP: its retransmits; -1 where it did not count them.
    pub retransmits: i64,
    /// UDP, where the server received: its jitter (ms), lost and received datagrams.
    pub jitter_ms: f64,
    pub lost_packets: i64,
    pub packets: i64,
    /// The span the server measured, seconds from its own start.
    pub start_s: f64,
    pub end_s: f64,
}
