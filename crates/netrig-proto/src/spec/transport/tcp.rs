//! TCP: a byte stream per connection.

use super::TransportRules;

pub struct Tcp;

/// TCP's losses, also MPTCP's (its subflows are TCP connections).
pub(super) const TCP_LOSSES: &[(&str, &str)] = &[
    (
        "TcpExt.ListenOverflows",
        "listen-queue overflows: a listener's accept queue was full (raise its backlog and net.core.somaxconn)",
    ),
    ("TcpExt.ListenDrops", "connection requests dropped at a listener"),
    (
        "TcpExt.TCPRcvQDrop",
        "TCP segments dropped because a socket's receive queue was full",
    ),
    (
        "TcpExt.TCPBacklogDrop",
        "TCP segments dropped because a socket's backlog was full",
    ),
];

impl TransportRules for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn datagrams(&self) -> bool {
        false
    }
    fn ip_protocol(&self) -> i32 {
        6
    }
    fn loss_counters(&self) -> &'static [(&'static str, &'static str)] {
        TCP_LOSSES
    }
}
