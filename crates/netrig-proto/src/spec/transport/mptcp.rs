//! MPTCP (RFC 8684): a byte stream over one or more TCP subflows, chosen by
//! `--mptcp` for the TCP kinds. A connection whose peer (or a middlebox)
//! does not take MPTCP falls back to plain TCP; the witness keeps the
//! kernel's MPTcpExt counters so a report shows which it was.

use super::tcp::TCP_LOSSES;
use super::TransportRules;

pub struct Mptcp;

impl TransportRules for Mptcp {
    fn name(&self) -> &'static str {
        "mptcp"
    }
    fn datagrams(&self) -> bool {
        false
    }
    /// IPPROTO_MPTCP.
    fn ip_protocol(&self) -> i32 {
        262
    }
    fn option(&self) -> Option<&'static str> {
        Some("--mptcp")
    }
    fn loss_counters(&self) -> &'static [(&'static str, &'static str)] {
        TCP_LOSSES
    }
    /// The handshakes (MP_CAPABLE, MP_JOIN), the fallbacks to TCP, and
    /// MPTCP's own retransmissions and dropped DSS data.
    fn witness_counters(&self) -> &'static [&'static str] {
        &[
            "MPTcpExt.MPCapableSYNRX",
            "MPTcpExt.MPCapableSYNTX",
            "MPTcpExt.MPCapableSYNACKRX",
            "MPTcpExt.MPCapableACKRX",
            "MPTcpExt.MPCapableFallbackACK",
            "MPTcpExt.MPCapableFallbackSYNACK",
            "MPTcpExt.MPFallbackTokenInit",
            "MPTcpExt.MPTCPRetrans",
            "MPTcpExt.MPJoinSynRx",
            "MPTcpExt.MPJoinAckRx",
            "MPTcpExt.DSSNotMatching",
        ]
    }
    /// A SYN-ACK with MP_CAPABLE at the connecting end, the third ACK with
    /// it at the accepting one: the handshake done as MPTCP.
    fn handshakes(&self) -> Option<[&'static str; 2]> {
        Some(["MPTcpExt.MPCapableSYNACKRX", "MPTcpExt.MPCapableACKRX"])
    }
    fn fallbacks(&self) -> &'static [&'static str] {
        &[
            "MPTcpExt.MPCapableFallbackACK",
            "MPTcpExt.MPCapableFallbackSYNACK",
        ]
    }
}
