//! tcp-cc: connect, close, a new connection per transaction and no
//! request or response (netperf TCP_CC). The agent closes each connection
//! first, as netperf's netserver does, once it has read its greeting; the
//! client's transaction ends when it sees that close. (The client closing
//! first would not wait on the agent at all: it would run ahead of the
//! agent's accepts, unclocked.)

use super::tcp_crr::{check_timeout, timeout};
use super::{Exchange, KindBounds, KindRules, Load, PortRange, TcpOptions, Transactions, Transport};
use crate::spec::{is_default, Bounds, Direction, SpecError, MAX_CRR_IN_FLIGHT, MAX_RATE, MAX_SPIN_US};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// tcp-cc's options: tcp-crr's but the sizes (there is no data; each
/// connection carries netrig's data greeting alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpCcSpec {
    /// Connections in flight per flow (closed loop), or their schedule.
    pub load: Load,
    /// `--timeout`: longest a transaction may take, from connect to the
    /// connection's end as the requester sees it. `None`:
    /// [`crate::spec::DEFAULT_TXN_TIMEOUT_S`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::timeout_s"
    )]
    pub timeout_s: Option<f64>,
    /// The agent's TCP options.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tcp: TcpOptions,
    /// `--local-ports`, as tcp-crr's (netperf TCP_CC binds them too).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::local_ports"
    )]
    pub local_ports: Option<PortRange>,
}

impl Default for TcpCcSpec {
    /// One connection at a time (netperf's TCP_CC).
    fn default() -> Self {
        TcpCcSpec {
            load: Load::Closed { burst: 1 },
            timeout_s: None,
            tcp: TcpOptions::default(),
            local_ports: None,
        }
    }
}

impl TcpCcSpec {
    /// The transaction timeout.
    pub fn timeout(&self) -> Duration {
        timeout(self.timeout_s)
    }

    /// Its transactions as the connection-per-transaction workload takes
    /// them: no request, no response.
    pub fn transactions(&self) -> Transactions {
        Transactions {
            request_size: 0,
            response_size: 0,
            load: self.load.clone(),
            busy_wait: false,
        }
    }
}

impl KindRules for TcpCcSpec {
    fn exchange(&self) -> Exchange {
        Exchange::ConnectionPerTransaction
    }
    fn in_flight(&self) -> u32 {
        self.load.connections_in_flight()
    }
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        self.tcp.transport()
    }
    fn tcp(&self) -> Option<&TcpOptions> {
        Some(&self.tcp)
    }
    /// Each connection's one send and one receive: the data greeting.
    fn call_sizes(&self) -> (u32, u32) {
        (crate::DataHello::LEN as u32, crate::DataHello::LEN as u32)
    }
    fn check(&self, _: &Bounds<'_>) -> Result<(), SpecError> {
        self.load.check((MAX_CRR_IN_FLIGHT, " connections per flow"))?;
        check_timeout(self.timeout_s)?;
        if let Some(r) = &self.local_ports {
            r.check()?;
        }
        self.tcp.check()
    }
    fn worker_buffer_bytes(&self) -> u64 {
        self.transactions().buffer_bytes()
    }
    fn offered(&self) -> super::Offered {
        super::Offered::transactions(&self.transactions())
    }
    /// Its load (as ranges: it has no sizes), its timeout, 4 MiB of buffers.
    fn bounds(&self) -> KindBounds<'_> {
        let ranges = match self.load {
            Load::Closed { burst } => vec![("--burst", f64::from(burst), 1.0, f64::from(MAX_CRR_IN_FLIGHT))],
            Load::Open { rate, spin_us, .. } => {
                let mut r = vec![("--rate", rate, KindBounds::ABOVE_ZERO, MAX_RATE)];
                r.extend(spin_us.map(|us| ("--spin-us", f64::from(us), 0.0, f64::from(MAX_SPIN_US))));
                r
            }
        };
        KindBounds {
            timeout: Some((self.timeout_s, self.timeout())),
            ranges,
            buffers: (0, 4 << 20),
            ..KindBounds::default()
        }
    }
}
