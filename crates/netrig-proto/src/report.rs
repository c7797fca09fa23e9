//! What each end measured, as it travels from the agent to the client. The
//! client merges the two sides into the one result model (netrig-report).

use crate::Direction;
use serde::{Deserialize, Serialize};

/// What one end did with a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
}

/// Send and receive buffer sizes in bytes, as getsockopt reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufPair {
    pub snd: Option<u32>,
    pub rcv: Option<u32>,
}

/// Socket buffers of one end of a connection: what was asked, what the
/// kernel granted before data flowed, and what it was when the window closed
/// (autotuning changes it when nothing was asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SockBufReport {
    pub requested: BufPair,
    pub initial: BufPair,
    #[serde(rename = "final")]
    pub final_: BufPair,
}

/// One end's account of one flow over the measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    pub id: u32,
    pub direction: Direction,
    pub role: Role,
    /// Payload bytes sent or received inside the measured window.
    pub window_bytes: u64,
    /// Payload bytes sent or received over the whole connection.
    pub total_bytes: u64,
    /// Length of this flow's measured window on this end's clock.
    pub window_s: f64,
    pub socket_buffers: SockBufReport,
    /// Options as the kernel reports them on this end's socket.
    pub applied: AppliedOptions,
}

/// Socket options read back from the kernel once the flow was set up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedOptions {
    /// IP TOS / IPv6 traffic class byte.
    pub tos: Option<u8>,
    pub priority: Option<u32>,
    pub nodelay: Option<bool>,
    pub congestion: Option<String>,
    /// TCP_MAXSEG as getsockopt reports it (the effective MSS once connected).
    pub mss: Option<u32>,
}

/// One interim sample: bytes each of this end's flows moved in the period,
/// in the order of `SideReport::flows` (sent for senders, received for
/// receivers). Times are seconds since this end's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    pub index: u32,
    pub start_s: f64,
    pub end_s: f64,
    pub ids: Vec<u32>,
    pub bytes: Vec<u64>,
}

/// Everything one end measured in one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SideReport {
    pub flows: Vec<FlowReport>,
    /// Length of the measured window on this end's clock (the longest flow's).
    pub window_s: f64,
    pub warnings: Vec<String>,
}
