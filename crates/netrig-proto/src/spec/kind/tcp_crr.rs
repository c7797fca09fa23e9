//! tcp-crr: connect, request, response, close, a new connection per
//! transaction (netperf TCP_CRR).

use super::{Exchange, KindBounds, KindRules, TcpOptions, Transactions, Transport};
use crate::spec::{
    is_default, out_of_range, Bounds, Direction, SpecError, DEFAULT_TXN_TIMEOUT_S, MAX_CRR_IN_FLIGHT,
    TXN_TIMEOUT_RANGE_S,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// tcp-crr's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpCrrSpec {
    pub transactions: Transactions,
    /// `--timeout`: longest a transaction may take, from connect to its
    /// last response byte; the agent gives each connection as long to bring
    /// its request and close. `None`: [`DEFAULT_TXN_TIMEOUT_S`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::timeout_s"
    )]
    pub timeout_s: Option<f64>,
    /// The agent's TCP options.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tcp: TcpOptions,
    /// `--close-first`: which end closes each connection first. Absent
    /// (a client from before the option): the requester.
    #[serde(default, skip_serializing_if = "is_default")]
    pub close_first: CloseFirst,
    /// `--local-ports`: the requester binds each connection to the next
    /// local port of this range in turn (SO_REUSEADDR), as netperf TCP_CRR
    /// does with its `-p`; absent: the kernel picks one at connect().
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::local_ports"
    )]
    pub local_ports: Option<PortRange>,
}

/// A range of local ports, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl PortRange {
    /// How many ports it holds.
    pub fn len(&self) -> u32 {
        u32::from(self.high).saturating_sub(u32::from(self.low)) + 1
    }

    /// Never empty once checked; for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.high < self.low
    }

    /// `LOW-HIGH`, as `--local-ports` takes it.
    pub fn parse(s: &str) -> Result<PortRange, String> {
        let bad = || format!("{s:?}: LOW-HIGH, two port numbers from 1 to 65535 (as 5000-65535)");
        let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
        let port = |p: &str| p.trim().parse::<u16>().map_err(|_| bad());
        let r = PortRange {
            low: port(lo)?,
            high: port(hi)?,
        };
        r.check().map_err(|e| e.to_string())?;
        Ok(r)
    }

    pub(crate) fn check(&self) -> Result<(), SpecError> {
        if self.low == 0 || self.high < self.low {
            return Err(SpecError::Invalid {
                option: "--local-ports",
                value: self.to_string(),
                rule: "LOW-HIGH with 1 <= LOW <= HIGH <= 65535".into(),
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

/// Which end of a tcp-crr connection closes it first, once the response
/// is out, and how: and so which holds its TIME_WAIT (the other end waits
/// for that close).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloseFirst {
    /// The requester (client) closes once it has the response, as neper's
    /// tcp_crr --time-wait: TIME_WAIT on the client, whose ephemeral ports it holds.
    #[default]
    Requester,
    /// The responder (agent) closes right after its response, as netperf's
    /// TCP_CRR and an HTTP/1.0 server: TIME_WAIT on the server, none on
    /// the client, which waits for that close before its next connection.
    Responder,
    /// The requester aborts the connection once it has the response
    /// (SO_LINGER 0: a reset, not a FIN), as neper's tcp_crr by default: no
    /// TIME_WAIT on either end, one segment fewer each way. Only the requester
    /// may: a responder resetting after its response would drop any of it
    /// not yet acknowledged.
    #[serde(rename = "requester-reset")]
    RequesterReset,
}

impl CloseFirst {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseFirst::Requester => "requester",
            CloseFirst::Responder => "responder",
            CloseFirst::RequesterReset => "requester-reset",
        }
    }
}

/// A transaction timeout (`--timeout`), or the default.
pub(crate) fn timeout(timeout_s: Option<f64>) -> Duration {
    Duration::from_secs_f64(timeout_s.unwrap_or(DEFAULT_TXN_TIMEOUT_S))
}

/// Bounds on `--timeout`.
pub(crate) fn check_timeout(timeout_s: Option<f64>) -> Result<(), SpecError> {
    let (lo, hi) = TXN_TIMEOUT_RANGE_S;
    match timeout_s {
        Some(t) if !(t.is_finite() && (lo..=hi).contains(&t)) => {
            Err(out_of_range("--timeout", t, format!("[{lo}, {hi}] seconds")))
        }
        _ => Ok(()),
    }
}

impl TcpCrrSpec {
    /// The transaction timeout.
    pub fn timeout(&self) -> Duration {
        timeout(self.timeout_s)
    }
}

impl KindRules for TcpCrrSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        self.tcp.transport()
    }
    fn exchange(&self) -> Exchange {
        Exchange::ConnectionPerTransaction
    }
    fn in_flight(&self) -> u32 {
        self.transactions.load.connections_in_flight()
    }
    fn tcp(&self) -> Option<&TcpOptions> {
        Some(&self.tcp)
    }
    fn call_sizes(&self) -> (u32, u32) {
        self.transactions.call_sizes()
    }
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
        self.transactions
            .check(b, (MAX_CRR_IN_FLIGHT, " connections per flow"))?;
        if self.transactions.busy_wait {
            return Err(SpecError::Invalid {
                option: "--busy-wait",
                value: "with tcp-crr".into(),
                rule: "a connection per transaction waits in connect and accept; busy-waiting is for tcp-rr and udp-rr"
                    .into(),
            });
        }
        check_timeout(self.timeout_s)?;
        if let Some(r) = &self.local_ports {
            r.check()?;
        }
        self.tcp.check()
    }
    fn worker_buffer_bytes(&self) -> u64 {
        self.transactions.buffer_bytes()
    }
    fn offered(&self) -> super::Offered {
        super::Offered::transactions(&self.transactions)
    }
    fn bounds(&self) -> KindBounds<'_> {
        KindBounds {
            timeout: Some((self.timeout_s, self.timeout())),
            ..self.transactions.bounds()
        }
    }
}
