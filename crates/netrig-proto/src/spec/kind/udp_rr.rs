//! udp-rr: request/response over UDP (netperf UDP_RR), surviving lost datagrams.

use super::tcp_crr::{check_timeout, timeout};
use super::{Exchange, KindBounds, KindRules, Transactions, Transport};
use crate::spec::{
    Bounds, Direction, SpecError, MAX_IN_FLIGHT, MAX_UDP_PAYLOAD, UDP_BATCH, UDP_BUFFER_MAX, UDP_HEADER_LEN,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// udp-rr's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpRrSpec {
    pub transactions: Transactions,
    /// `--timeout`: a request without a response by then is lost. `None`:
    /// [`DEFAULT_TXN_TIMEOUT_S`](crate::spec::DEFAULT_TXN_TIMEOUT_S).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::timeout_s"
    )]
    pub timeout_s: Option<f64>,
}

impl UdpRrSpec {
    /// The transaction timeout.
    pub fn timeout(&self) -> Duration {
        timeout(self.timeout_s)
    }
}

impl KindRules for UdpRrSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        Transport::Udp
    }
    fn exchange(&self) -> Exchange {
        Exchange::Transactions
    }
    /// The largest datagram either end sends: requests and responses carry
    /// netrig's header, so none is shorter than it.
    fn datagram_size(&self) -> Option<u32> {
        let t = &self.transactions;
        Some(t.request_size.max(t.response_size).max(UDP_HEADER_LEN))
    }
    fn udp_answer(&self) -> Option<(u32, u32)> {
        let t = &self.transactions;
        Some((
            t.request_size.max(UDP_HEADER_LEN),
            t.response_size.max(UDP_HEADER_LEN),
        ))
    }
    fn in_flight(&self) -> u32 {
        self.transactions.in_flight()
    }
    fn call_sizes(&self) -> (u32, u32) {
        self.transactions.call_sizes()
    }
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
        let t = &self.transactions;
        t.check(b, (MAX_IN_FLIGHT, ""))?;
        for (v, what) in [(t.request_size, "request"), (t.response_size, "response")] {
            b.udp_payload("-r/--request-response", v, format!("{what} size {v}"), 1)?;
        }
        check_timeout(self.timeout_s)
    }
    fn worker_buffer_bytes(&self) -> u64 {
        let t = &self.transactions;
        2 * UDP_BATCH * UDP_BUFFER_MAX + u64::from(t.request_size) + u64::from(t.response_size)
    }
    fn offered(&self) -> super::Offered {
        super::Offered::transactions(&self.transactions)
    }
    /// Its transactions, each size a UDP payload, and its timeout; its
    /// batches of buffers, a request and a response.
    fn bounds(&self) -> KindBounds<'_> {
        let t = &self.transactions;
        let payload = |option, v: u32| (option, f64::from(v), 1.0, f64::from(MAX_UDP_PAYLOAD));
        KindBounds {
            transactions: Some(t),
            timeout: Some((self.timeout_s, self.timeout())),
            ranges: vec![
                payload("request size", t.request_size),
                payload("response size", t.response_size),
            ],
            buffers: (0, 2 * UDP_BATCH * UDP_BUFFER_MAX + 2 * u64::from(MAX_UDP_PAYLOAD)),
            ..KindBounds::default()
        }
    }
}
