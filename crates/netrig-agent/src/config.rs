//! How an agent listens and what it allows: its operator's options.

use netrig_proto::AgentLimits;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// How an agent listens and what it allows.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Address to listen on. `[::]` listens on IPv6 and IPv4 alike: two
    /// sockets on one port, an IPv6-only one and an IPv4 one (see
    /// `Shared::listeners`).
    pub bind: SocketAddr,
    pub limits: AgentLimits,
    /// Connections that have not finished their greeting yet; when one more
    /// comes, the oldest of the client with the most of them is closed to
    /// make room.
    pub max_pending: usize,
    /// How long a new connection may take to send its greeting, and a
    /// control connection its hello after the welcome.
    pub greeting_timeout: Duration,
    /// Control connections welcomed whose hello is not in yet (they hold no
    /// session place): when one more comes, one of them is closed, the
    /// oldest of the client holding the most ([`crate::admission`]).
    pub max_presessions: usize,
    /// How long a control session may go without asking for a test, from
    /// its welcome or the end of its last test: a deadline that nothing the
    /// client sends renews (a byte every few seconds, refused requests).
    pub idle_timeout: Duration,
    /// Sessions from one client at once (one IPv4 address, or one IPv6 /64).
    pub max_sessions_per_client: u32,
    /// What all running tests may take together.
    pub totals: crate::budget::Totals,
    /// The client networks served (`--allow`); empty: any.
    pub allow: Vec<ipnet::IpNet>,
    /// What the environment report tells a client that did not authenticate.
    pub disclose: crate::Disclose,
    /// The hooks tests may ask for (`--hooks DIR`); `None`: none. The
    /// welcome's limits offer their names (`Agent::bind` writes them there).
    pub hooks: Option<crate::Hooks>,
    /// The agent's key (`--key`) and the clients it serves
    /// (`--authorized-keys`); the default: no key, any client.
    pub auth: netrig_proto::auth::AgentAuth,
    /// Whether its listeners are MPTCP where the kernel makes it (the
    /// default), taking `--mptcp` tests' connections and plain TCP alike;
    /// false: plain TCP (MPTCP tests then fall back to TCP, with a warning).
    pub mptcp_listener: bool,
    /// `--iperf3`: an agent that asks clients to authenticate
    /// (`--authorized-keys`) serves iperf3 clients all the same, which
    /// cannot (docs/IPERF3.md); without it they are refused.
    pub iperf3_unauthenticated: bool,
    /// `--iperf3-port`: a second port (TCP and UDP) that serves iperf3
    /// clients alone (iperf3's own is 5201).
    pub iperf3_port: Option<u16>,
    /// `--allow-profile`: a test that asks for a profile (`--profile`) gets one of this host
    /// over the agent's window: every CPU sampled, every process's functions and names told to
    /// the client. Off: such a test runs, its agent's end withheld with that reason.
    pub allow_profile: bool,
    /// `--metrics-port`: a port (TCP, on the bind address) that serves the agent's counters
    /// at GET /metrics for Prometheus (docs/FLEET.md).
    pub metrics_port: Option<u16>,
    /// `--allow-initiate`, `--initiate-keys`: an authenticated client may ask this agent to
    /// test another agent as its client (protocol 8); `None`: never.
    pub initiate: Option<crate::initiate::InitiateConfig>,
    /// `--name`: the agent's name for itself in its welcome (e.g. its node's).
    pub name: Option<String>,
}

impl AgentConfig {
    pub fn new(bind: SocketAddr) -> Self {
        AgentConfig {
            bind,
            limits: AgentLimits::default(),
            max_pending: 256,
            greeting_timeout: Duration::from_secs(5),
            max_presessions: 64,
            idle_timeout: Duration::from_secs(60),
            max_sessions_per_client: 16,
            totals: crate::budget::Totals::for_host(),
            allow: Vec::new(),
            disclose: crate::Disclose::Full,
            hooks: None,
            auth: Default::default(),
            mptcp_listener: true,
            iperf3_unauthenticated: false,
            iperf3_port: None,
            allow_profile: false,
            metrics_port: None,
            initiate: None,
            name: None,
        }
    }

    /// The default listening address: every IPv6 and IPv4 address.
    pub fn default_bind(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
    }
}
