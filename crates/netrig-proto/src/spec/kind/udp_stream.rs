//! udp-stream: datagrams at a set rate, client to agent or (`-R`) agent to
//! client: loss, jitter, reordering, duplicates (iperf3 -u).

use super::{Exchange, KindBounds, KindRules, Transport};
use crate::spec::{
    Bounds, Direction, Pace, SpecError, MAX_UDP_PAYLOAD, UDP_BATCH, UDP_BUFFER_MAX, UDP_HEADER_LEN,
};
use serde::{Deserialize, Serialize};

/// udp-stream's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpStreamSpec {
    /// UDP payload bytes per datagram (`-m`).
    pub datagram_size: u32,
    /// Sending rate per flow (`-b`, `--pacing-us`); `None`: as fast as possible.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::pace"
    )]
    pub pace: Option<Pace>,
    /// The agent sends and the client receives (`-R`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// One datagram per message, no UDP GSO/GRO (`--no-gso`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_gso: bool,
}

impl Default for UdpStreamSpec {
    /// Ethernet-sized datagrams (1472 bytes over IPv4), unpaced.
    fn default() -> Self {
        UdpStreamSpec {
            datagram_size: 1472,
            pace: None,
            reverse: false,
            no_gso: false,
        }
    }
}

impl KindRules for UdpStreamSpec {
    fn directions(&self) -> &'static [Direction] {
        if self.reverse {
            &[Direction::Rx]
        } else {
            &[Direction::Tx]
        }
    }
    fn transport(&self) -> Transport {
        Transport::Udp
    }
    fn exchange(&self) -> Exchange {
        Exchange::Stream
    }
    fn counts_bytes(&self) -> bool {
        true
    }
    fn datagram_size(&self) -> Option<u32> {
        Some(self.datagram_size)
    }
    fn call_sizes(&self) -> (u32, u32) {
        (self.datagram_size, self.datagram_size)
    }
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
        let m = self.datagram_size;
        b.size("-m/--message-size", m, m)?;
        b.udp_payload("-m/--message-size", m, m, UDP_HEADER_LEN)?;
        b.pace(self.pace.as_ref())
    }
    /// Batches of up to [`UDP_BATCH`] buffers of [`UDP_BUFFER_MAX`] each way.
    fn worker_buffer_bytes(&self) -> u64 {
        2 * UDP_BATCH * UDP_BUFFER_MAX
    }
    /// Its datagram size (netrig's header to the largest UDP payload) and
    /// rate; its batches of buffers.
    fn bounds(&self) -> KindBounds<'_> {
        let m = self.datagram_size;
        KindBounds {
            pace: self.pace.as_ref(),
            calls: Some((m, m)),
            sizes: vec![("-m", m)],
            ranges: vec![(
                "-m",
                f64::from(m),
                f64::from(UDP_HEADER_LEN),
                f64::from(MAX_UDP_PAYLOAD),
            )],
            buffers: (0, 2 * UDP_BATCH * UDP_BUFFER_MAX),
            ..KindBounds::default()
        }
    }
    fn offered(&self) -> super::Offered {
        super::Offered::stream(self.pace.as_ref(), self.directions())
    }
}
