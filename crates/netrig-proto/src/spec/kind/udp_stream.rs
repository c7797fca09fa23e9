//! udp-stream: datagrams at a set rate, client to agent or (`-R`) agent to
//! client: loss, jitter, reordering, duplicates (iperf3 -u).

use super::{Exchange, KindBounds, KindRules, Transport};
use crate::iperf3::UdpHeader;
use crate::spec::{
    out_of_range, Bounds, Direction, Pace, SpecError, MAX_UDP_PAYLOAD, UDP_BATCH, UDP_BUFFER_MAX,
    UDP_HEADER_LEN,
};
use serde::{Deserialize, Serialize};

/// What every datagram of a udp-stream starts with.
///
/// Not a command-line option of udp-stream: netrig's own peers always use
/// netrig's header; the iperf3 paths (an agent serving an iperf3 client, a
/// client measuring against an iperf3 server) set iperf3's, which the other
/// end expects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DatagramFormat {
    /// netrig's 28-byte header ([`crate::datagram`]): test id, flow,
    /// sequence number from 0, the sender's time since its zero and marks.
    #[default]
    #[serde(rename = "netrig")]
    Netrig,
    /// iperf3's 12-byte header: the sender's clock (seconds, microseconds)
    /// and a 32-bit sequence number from 1.
    #[serde(rename = "iperf3")]
    Iperf3,
    /// iperf3's `--udp-counters-64bit` header: 16 bytes, the sequence
    /// number 64 bits wide.
    #[serde(rename = "iperf3-64")]
    Iperf3Counter64,
}

impl DatagramFormat {
    /// netrig's own header (the default, left out of the spec's JSON).
    pub fn is_netrig(&self) -> bool {
        *self == DatagramFormat::Netrig
    }

    /// Bytes of the header at the start of each datagram.
    pub fn header_len(self) -> u32 {
        match self {
            DatagramFormat::Netrig => UDP_HEADER_LEN,
            DatagramFormat::Iperf3 => UdpHeader::len(false) as u32,
            DatagramFormat::Iperf3Counter64 => UdpHeader::len(true) as u32,
        }
    }

    /// What the header holds, for errors about sizes that cannot hold it.
    fn header_fields(self) -> &'static str {
        match self {
            DatagramFormat::Netrig => "test id, flow, sequence number, timestamp",
            DatagramFormat::Iperf3 => "iperf3's: seconds, microseconds, 32-bit sequence number",
            DatagramFormat::Iperf3Counter64 => "iperf3's: seconds, microseconds, 64-bit sequence number",
        }
    }
}

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
    /// The header every datagram starts with: netrig's (left out of the
    /// JSON, so that netrig's wire and saved results are as they were) or
    /// iperf3's. Not a command-line option: the iperf3 paths set it.
    #[serde(default, skip_serializing_if = "DatagramFormat::is_netrig")]
    pub datagram: DatagramFormat,
}

impl Default for UdpStreamSpec {
    /// Ethernet-sized datagrams (1472 bytes over IPv4), unpaced.
    fn default() -> Self {
        UdpStreamSpec {
            datagram_size: 1472,
            pace: None,
            reverse: false,
            no_gso: false,
            datagram: DatagramFormat::Netrig,
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
        let head = self.datagram.header_len();
        if m < head {
            return Err(out_of_range(
                "-m/--message-size",
                m,
                format!(
                    "{head}..={MAX_UDP_PAYLOAD} for UDP (each datagram carries a {head}-byte header: {})",
                    self.datagram.header_fields()
                ),
            ));
        }
        b.udp_payload("-m/--message-size", m, m, head)?;
        b.pace(self.pace.as_ref())
    }
    /// Batches of up to [`UDP_BATCH`] buffers of [`UDP_BUFFER_MAX`] each way.
    fn worker_buffer_bytes(&self) -> u64 {
        2 * UDP_BATCH * UDP_BUFFER_MAX
    }
    /// Its datagram size (its header to the largest UDP payload) and
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
                f64::from(self.datagram.header_len()),
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
