//! UDP: datagrams, each flow on its own socket.

use super::TransportRules;

pub struct Udp;

impl TransportRules for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }
    fn datagrams(&self) -> bool {
        true
    }
    fn ip_protocol(&self) -> i32 {
        17
    }
    fn loss_counters(&self) -> &'static [(&'static str, &'static str)] {
        &[
            (
                "Udp.RcvbufErrors",
                "UDP datagrams dropped because a socket's receive buffer was full (see -s/-S and net.core.rmem_max)",
            ),
            ("Udp.SndbufErrors", "UDP sends that failed for lack of send buffer"),
            (
                "Udp6.RcvbufErrors",
                "UDP datagrams dropped because a socket's receive buffer was full (see -s/-S and net.core.rmem_max)",
            ),
            ("Udp6.SndbufErrors", "UDP sends that failed for lack of send buffer"),
        ]
    }
}
