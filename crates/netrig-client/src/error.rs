use std::io;
use std::net::SocketAddr;

/// What went wrong, in words that name the host, port or option.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot resolve host {host:?}: {error}")]
    Resolve { host: String, error: io::Error },
    #[error("host {host:?} has no {family} address")]
    NoAddress { host: String, family: &'static str },
    #[error("cannot connect to the agent at {addr}: connection refused (is `netrig serve` running there on port {port}? see -p)")]
    Refused { addr: SocketAddr, port: u16 },
    #[error(
        "cannot connect to {addr}: no answer within {secs} s (a firewall dropping the port, or a wrong -H?)"
    )]
    ConnectTimeout { addr: SocketAddr, secs: u64 },
    #[error("cannot connect to {addr}: {error}")]
    Connect { addr: SocketAddr, error: io::Error },
    #[error("{addr} did not answer like a netrig agent: {detail}")]
    NotAgent { addr: SocketAddr, detail: String },
    /// A server of another tool, recognised from its answer
    /// ([`netrig_proto::neighbour::recognise`]).
    #[error("{addr} is {what}, not a netrig agent: {how} ({advice})")]
    Neighbour {
        addr: SocketAddr,
        what: &'static str,
        how: String,
        advice: &'static str,
    },
    /// An iperf3 server (`--peer iperf3`, or detected) that refused or
    /// failed the test, or broke its protocol: `what` says which, in words.
    #[error("the iperf3 server at {addr} {what}")]
    Iperf3 { addr: SocketAddr, what: String },
    #[error("{0}")]
    Handshake(String),
    /// `agent` as [`crate::Client::agent_name`] says it.
    #[error("{agent} refused the test: {reason}")]
    Rejected { agent: String, reason: String },
    #[error("{0}")]
    Option(String),
    #[error("control connection: {0}")]
    Protocol(String),
    #[error("test failed: {0}")]
    Test(String),
}

impl ClientError {
    /// Errors of input or set-up (bad host, refused, bad option): exit status 2.
    pub fn is_setup(&self) -> bool {
        !matches!(self, ClientError::Protocol(_) | ClientError::Test(_))
    }
}
