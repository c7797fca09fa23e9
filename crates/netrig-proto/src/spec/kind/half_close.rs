//! half-close: half-closed connections left on a server from a lab host (netrig-lab's
//! overload::halfclose), as a test kind with one end, so a plan runs it. Refused outside a lab,
//! as the SYN flood; an agent refuses it, as every one-ended kind.

use super::{Exchange, KindRules, Offered, Transport};
use crate::spec::{out_of_range, Bounds, Direction, SpecError};
use serde::{Deserialize, Serialize};

/// Most connections (netrig-lab's half-close has the same bound).
pub const MAX_HALF_CLOSE_CONNECTIONS: u32 = 20_000;
/// The longest watch after the clients went away, seconds.
pub const MAX_HALF_CLOSE_WATCH_S: f64 = 600.0;
/// The longest request, bytes.
pub const MAX_HALF_CLOSE_REQUEST: usize = 8192;

/// How the clients close and go away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HalfCloseHow {
    /// Read until the server closed, then gone without a FIN or RST.
    #[default]
    Vanish,
    /// The write half shut, the connection held unread.
    Shutdown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HalfCloseSpec {
    pub connections: u32,
    #[serde(default)]
    pub how: HalfCloseHow,
    /// The request each sends.
    pub request: String,
    /// Seconds the server's sockets are watched after the clients went away.
    pub watch_s: f64,
    /// The server's port, when not the target's (`--to-port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_port: Option<u16>,
}

impl Default for HalfCloseSpec {
    fn default() -> Self {
        HalfCloseSpec {
            connections: 200,
            how: HalfCloseHow::Vanish,
            request: "GET / HTTP/1.0\r\n\r\n".into(),
            watch_s: 90.0,
            to_port: None,
        }
    }
}

impl KindRules for HalfCloseSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn exchange(&self) -> Exchange {
        Exchange::Transactions
    }
    fn call_sizes(&self) -> (u32, u32) {
        (1, 1)
    }
    fn check(&self, _: &Bounds<'_>) -> Result<(), SpecError> {
        if self.connections == 0 || self.connections > MAX_HALF_CLOSE_CONNECTIONS {
            return Err(out_of_range(
                "-n/--connections",
                self.connections,
                format!("1..={MAX_HALF_CLOSE_CONNECTIONS}"),
            ));
        }
        if !(self.watch_s > 0.0 && self.watch_s <= MAX_HALF_CLOSE_WATCH_S) {
            return Err(out_of_range(
                "--watch",
                self.watch_s,
                format!("(0, {MAX_HALF_CLOSE_WATCH_S}] seconds"),
            ));
        }
        if self.request.is_empty() || self.request.len() > MAX_HALF_CLOSE_REQUEST {
            return Err(out_of_range(
                "--request",
                self.request.len(),
                format!("1..={MAX_HALF_CLOSE_REQUEST} bytes"),
            ));
        }
        if self.to_port == Some(0) {
            return Err(out_of_range("--to-port", 0, "1..=65535"));
        }
        Ok(())
    }
    fn worker_buffer_bytes(&self) -> u64 {
        4096
    }
    /// Its connections, request and watch; 4 KiB of buffers.
    fn bounds(&self) -> super::KindBounds<'_> {
        let mut ranges = vec![
            (
                "--connections",
                f64::from(self.connections),
                1.0,
                f64::from(MAX_HALF_CLOSE_CONNECTIONS),
            ),
            (
                "--request (bytes)",
                self.request.len() as f64,
                1.0,
                MAX_HALF_CLOSE_REQUEST as f64,
            ),
            (
                "--watch",
                self.watch_s,
                super::KindBounds::ABOVE_ZERO,
                MAX_HALF_CLOSE_WATCH_S,
            ),
        ];
        if let Some(p) = self.to_port {
            ranges.push(("--to-port", f64::from(p), 1.0, f64::from(u16::MAX)));
        }
        super::KindBounds {
            ranges,
            buffers: (0, 4096),
            ..Default::default()
        }
    }
    fn offered(&self) -> Offered {
        Offered::SelfClocked
    }
}
