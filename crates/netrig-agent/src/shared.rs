//! What the accept loop, the UDP intake, the sessions and the runs holding
//! the listener share: one per agent.

use crate::admission::{PrePool, Slots};
use crate::config::AgentConfig;
use crate::doorway::Doorway;
use crate::registry::Registry;
use mio::net::TcpListener as MioListener;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub(crate) struct Shared {
    /// The listening sockets, each the accept loop's or lent to a run (see
    /// the module `door`): the bind address's, or with `[::]` (the default) an
    /// IPv6-only socket and an IPv4 one on the same port, so that IPv4
    /// clients' connections are AF_INET sockets rather than v4-mapped
    /// AF_INET6 ones, which cost the kernel about 1 % more per connection
    /// (tcp-crr, every end on one CPU: CHANGELOG, #12). At most two, the
    /// first the one named in messages.
    pub listeners: Vec<MioListener>,
    /// Lending the listener to a run, and the connections given back.
    pub doorway: Doorway,
    pub config: AgentConfig,
    pub registry: Registry,
    /// The sessions' places, by client (see [`crate::peer::client_key`]),
    /// and how many are held.
    pub slots: Arc<Slots>,
    /// Control connections waiting for their hello.
    pub pre: Arc<PrePool>,
    pub budget: crate::budget::Budget,
    pub shutdown: AtomicBool,
    /// The agent's UDP address (same port as TCP).
    pub udp_local: SocketAddr,
    /// iperf3 tests waiting for their streams.
    pub iperf3: crate::iperf3_routes::Routes,
    /// Accepts that failed (out of descriptors?), for sessions to tell why.
    pub accept_failures: crate::accept_failures::AcceptFailures,
    /// The counters `--metrics-port` serves.
    pub metrics: crate::metrics::Counters,
}
