//! tcp-rr: request/response on persistent TCP connections (netperf
//! TCP_RR), and the transactions every request/response kind shares.

use super::{Exchange, KindBounds, KindRules, TcpOptions, Transport};
use crate::spec::{
    is_default, out_of_range, Bounds, Direction, SpecError, MAX_CRR_IN_FLIGHT, MAX_IN_FLIGHT, MAX_RATE,
    MAX_SPIN_US,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How transactions are offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Load {
    /// Closed loop: this many transactions in flight per flow (`--burst`,
    /// netperf's `-b`); each response lets the next request go.
    Closed { burst: u32 },
    /// Open loop: requests leave on schedule whatever the responses do.
    Open {
        /// Transactions per second per flow (`--rate`).
        rate: f64,
        /// Exponential inter-arrival times around `rate` (`--poisson`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        poisson: bool,
        /// Wake this many µs before each request is due and spin until it
        /// is (`--spin-us`); 0: sleep until due; `None`: a lead learned from
        /// how late the requester's timer wakes. Only the requester paces.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::spec::not_null::spin_us"
        )]
        spin_us: Option<u32>,
    },
}

impl Load {
    /// Most connections a flow of a connection-per-transaction kind has
    /// open at once: the closed loop's burst, or the cap an open loop's
    /// backlog may build to.
    pub fn connections_in_flight(&self) -> u32 {
        match *self {
            Load::Closed { burst } => burst,
            Load::Open { .. } => MAX_CRR_IN_FLIGHT,
        }
    }

    /// Bounds on the load: `max_in_flight` bounds `--burst` (with what it
    /// counts, for the message); a rate and its spin within netrig's.
    pub fn check(&self, max_in_flight: (u32, &str)) -> Result<(), SpecError> {
        match *self {
            Load::Closed { burst } => {
                let (max, unit) = max_in_flight;
                if burst == 0 || burst > max.min(MAX_IN_FLIGHT) {
                    return Err(out_of_range("--burst", burst, format!("1..={max}{unit}")));
                }
            }
            Load::Open { rate, spin_us, .. } => {
                if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
                    return Err(out_of_range(
                        "--rate",
                        rate,
                        format!("(0, {MAX_RATE}] transactions/s per flow"),
                    ));
                }
                if let Some(us) = spin_us.filter(|us| *us > MAX_SPIN_US) {
                    return Err(out_of_range("--spin-us", us, format!("0..={MAX_SPIN_US} µs")));
                }
            }
        }
        Ok(())
    }
}

/// What the request/response kinds share: the sizes and the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transactions {
    /// Request size in bytes (`-r REQ,RESP`).
    pub request_size: u32,
    /// Response size in bytes.
    pub response_size: u32,
    pub load: Load,
    /// `--busy-wait`: each end waits for the peer by polling its socket
    /// (non-blocking receives in a loop) instead of sleeping in the kernel:
    /// a CPU kept busy per flow on each end, as sockperf's users compare
    /// polling against sleeping. Closed loop, one transaction in flight,
    /// one flow per worker; not tcp-crr.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy_wait: bool,
}

impl Default for Transactions {
    /// netperf's defaults: 1-byte requests and responses, one in flight.
    fn default() -> Self {
        Transactions {
            request_size: 1,
            response_size: 1,
            load: Load::Closed { burst: 1 },
            busy_wait: false,
        }
    }
}

impl Transactions {
    /// Transactions in flight per flow in closed loop; 1 in open loop (the
    /// schedule decides).
    pub fn burst(&self) -> u32 {
        match self.load {
            Load::Closed { burst } => burst,
            Load::Open { .. } => 1,
        }
    }

    /// Most in flight per flow: the burst, or an open loop's bound on its backlog.
    pub fn in_flight(&self) -> u32 {
        match self.load {
            Load::Closed { burst } => burst,
            Load::Open { .. } => MAX_IN_FLIGHT,
        }
    }

    /// The open-loop rate per flow, if open loop.
    pub fn rate(&self) -> Option<f64> {
        match self.load {
            Load::Open { rate, .. } => Some(rate),
            Load::Closed { .. } => None,
        }
    }

    /// Whether open-loop gaps are exponential.
    pub fn poisson(&self) -> bool {
        matches!(self.load, Load::Open { poisson: true, .. })
    }

    /// The open-loop `--spin-us` as given.
    pub fn spin_us(&self) -> Option<u32> {
        match self.load {
            Load::Open { spin_us, .. } => spin_us,
            Load::Closed { .. } => None,
        }
    }

    /// The open-loop pacer's wake-up lead, if set (`--spin-us`).
    pub fn spin(&self) -> Option<Duration> {
        self.spin_us().map(|us| Duration::from_micros(us.into()))
    }

    /// Bounds on the sizes and the load; `max_in_flight` bounds `--burst`
    /// (with what it counts, for the message).
    pub fn check(&self, b: &Bounds<'_>, max_in_flight: (u32, &str)) -> Result<(), SpecError> {
        for (v, what) in [(self.request_size, "request"), (self.response_size, "response")] {
            b.size("-r/--request-response", v, format!("{what} size {v}"))?;
        }
        if self.busy_wait && self.load != (Load::Closed { burst: 1 }) {
            return Err(SpecError::Invalid {
                option: "--busy-wait",
                value: match self.load {
                    Load::Open { .. } => "with --rate".into(),
                    Load::Closed { burst } => format!("with --burst {burst}"),
                },
                rule: "busy-waiting is for the closed loop with one transaction in flight".into(),
            });
        }
        self.load.check(max_in_flight)
    }

    /// What a flow's calls may have in flight at once: a burst of the larger
    /// of request and response, and never less than 128 KiB (a stream's
    /// default call), which covers an open-loop backlog's usual reach.
    pub fn call_sizes(&self) -> (u32, u32) {
        let most = self.request_size.max(self.response_size);
        let n = most.saturating_mul(self.burst()).max(128 * 1024);
        (n, n)
    }

    /// A TCP request/response kind's bounds: its transactions; a request, a
    /// response and 4 MiB of buffers ([`Transactions::buffer_bytes`]).
    pub fn bounds(&self) -> KindBounds<'_> {
        KindBounds {
            transactions: Some(self),
            buffers: (2, 4 << 20),
            ..KindBounds::default()
        }
    }

    /// Request and response buffers, and a receive buffer for a burst of
    /// responses of at most 4 MiB.
    pub fn buffer_bytes(&self) -> u64 {
        u64::from(self.request_size) + u64::from(self.response_size) + (4 << 20)
    }
}

/// tcp-rr's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpRrSpec {
    pub transactions: Transactions,
    /// The agent's TCP options.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tcp: TcpOptions,
}

impl KindRules for TcpRrSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        self.tcp.transport()
    }
    fn exchange(&self) -> Exchange {
        Exchange::Transactions
    }
    fn tcp(&self) -> Option<&TcpOptions> {
        Some(&self.tcp)
    }
    fn in_flight(&self) -> u32 {
        self.transactions.in_flight()
    }
    fn call_sizes(&self) -> (u32, u32) {
        self.transactions.call_sizes()
    }
    fn transaction_sizes(&self) -> Option<(u32, u32)> {
        Some((self.transactions.request_size, self.transactions.response_size))
    }
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
        self.transactions.check(b, (MAX_IN_FLIGHT, ""))?;
        self.tcp.check()
    }
    fn worker_buffer_bytes(&self) -> u64 {
        self.transactions.buffer_bytes()
    }
    fn offered(&self) -> super::Offered {
        super::Offered::transactions(&self.transactions)
    }
    fn bounds(&self) -> KindBounds<'_> {
        self.transactions.bounds()
    }
}
