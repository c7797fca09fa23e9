//! What the client's sessions share below them, with a netrig agent
//! ([`crate::run`]) and with an iperf3 server ([`crate::iperf3`]): the
//! client's options, the sockets it opens to the server, and this end's
//! report of what it measured.

use crate::ClientError;
use netrig_engine::sockopt::{self, SocketSettings};
use netrig_engine::transport;
use netrig_proto::clock::ClockCheck;
use netrig_proto::report::{AppliedOptions, BufPair, CounterReport, SideReport};
use netrig_proto::spec::Transport;
use netrig_proto::TestSpec;
use netrig_report::SocketOptions;
use socket2::Socket;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

/// Round trips (the connection's opening) added to the wait for a peer's
/// first answer: a slow path's agent is not silent.
pub(crate) const FIRST_REPLY_RTTS: u32 = 4;

/// The datagram size udp-stream uses without `-m` on the path to `addr`
/// ([`crate::Client::default_udp_size`]).
pub(crate) fn default_udp_size(addr: SocketAddr, bind: Option<IpAddr>) -> u32 {
    let mtu = sockopt::path_mtu_to(addr, bind);
    let size = sockopt::default_udp_payload(mtu, addr.is_ipv6(), netrig_proto::spec::MAX_UDP_PAYLOAD);
    log::debug!("path MTU to {addr}: {mtu:?}; default datagram size {size}");
    size
}

/// The client's side of the options.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `-H` as given, for messages and the result; `None` for the embedded agent.
    pub host: Option<String>,
    pub port: u16,
    pub family: crate::Family,
    /// `--bind`: local address of every connection.
    pub bind: Option<IpAddr>,
    /// Options on this end's data sockets.
    pub local: SocketSettings,
    pub connect_timeout: Duration,
    /// `--cpus`: pin this end's worker i to `cpus[i % len]`.
    pub cpus: Option<Vec<u32>>,
    /// The kind sizes its datagrams for the path ([`netrig_kinds::Kind::fit_to_path`]:
    /// udp-stream without `-m`): to [`Client::default_udp_size`] instead of
    /// the spec's size, and the result says so (`config.message_size_default`).
    pub udp_size_default: bool,
    /// This client's key (`--key`) and the agent's to expect (`--agent-key`).
    pub auth: netrig_proto::auth::ClientAuth,
    /// `--start-at`: once set up (connections open, the agent ready), send `go` at this wall-clock
    /// instant, so that several clients begin together (a lab plan's `clients`); waited for
    /// [`MAX_START_WAIT`] at most. Past: at once.
    pub start_at: Option<std::time::SystemTime>,
    /// What the server is (`--peer`): `Auto` probes for an iperf3 server
    /// (only for a kind that can run against one; the caller passes
    /// `Netrig` for the others); `Iperf3` is not connected through [`Client`].
    pub peer: netrig_report::model::peer::Peer,
    /// Ask an iperf3 server for its own output (`--get-server-output`).
    pub server_output: bool,
    /// `--profile`: sample every CPU of this host over the measured window (the result's
    /// `profile`).
    pub profile: bool,
}

/// A connection to the agent at `addr` over `transport` (TCP for the
/// control connection, the test's own for data), `before` applied to its
/// socket before it connects.
pub(crate) fn connect_socket(
    addr: SocketAddr,
    opts: &ClientOptions,
    transport: Transport,
    before: impl FnOnce(&Socket) -> Result<(), ClientError>,
) -> Result<TcpStream, ClientError> {
    let sock = transport::socket(transport, addr).map_err(|error| {
        match transport::unsupported(transport, "client", &error) {
            Some(said) => ClientError::Option(said),
            None => ClientError::Connect { addr, error },
        }
    })?;
    before(&sock)?;
    if let Some(ip) = opts.bind {
        if ip.is_ipv4() != addr.is_ipv4() {
            return Err(ClientError::Option(format!(
                "--bind {ip} is not of the same address family as the agent's address {addr} (use -4 or -6)"
            )));
        }
        sock.bind(&netrig_engine::addr::local_for(ip, addr).into())
            .map_err(|e| ClientError::Option(format!("--bind {ip}: {e}{}", link_local_hint(ip, addr))))?;
    }
    let secs = opts.connect_timeout.as_secs();
    match sock.connect_timeout(&addr.into(), opts.connect_timeout) {
        Ok(()) => Ok(sock.into()),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(ClientError::Refused {
            addr,
            port: addr.port(),
        }),
        Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
            Err(ClientError::ConnectTimeout { addr, secs })
        }
        Err(error) => Err(ClientError::Connect { addr, error }),
    }
}

/// Why a link-local `--bind` may fail: it takes the scope of the agent's
/// address, which must be on the same link.
fn link_local_hint(ip: IpAddr, agent: SocketAddr) -> &'static str {
    match (ip, agent) {
        (IpAddr::V6(v6), SocketAddr::V6(a)) if netrig_engine::addr::needs_scope(&v6) && a.scope_id() == 0 => {
            " (a link-local --bind takes the interface of the agent's address: give -H as fe80::...%eth0)"
        }
        _ => "",
    }
}

pub(crate) fn proto_err(e: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol(e.to_string())
}

/// A long-lived TCP data connection to `addr` with `opts`' local socket
/// options, `greeting` (a netrig data hello, an iperf3 cookie) sent first;
/// `either_parity`: past the point where connect(2) would scan every port of
/// one parity first ([`sockopt::either_port_parity`]).
pub(crate) fn open_stream(
    addr: SocketAddr,
    opts: &ClientOptions,
    greeting: &[u8],
    either_parity: bool,
) -> Result<TcpStream, ClientError> {
    let transport = opts.local.tcp().transport();
    let mut s = connect_socket(addr, opts, transport, |sock| {
        if either_parity {
            sockopt::either_port_parity(sock);
        }
        sockopt::apply_before_connect(sock, &opts.local, "-s/--local-sockbuf")
            .map_err(|e| ClientError::Option(format!("local {e}")))
    })?;
    s.write_all(greeting)
        .map_err(|error| ClientError::Connect { addr, error })?;
    sockopt::apply_connected(&s, &opts.local, false, "-s/--local-sockbuf")
        .map_err(|e| ClientError::Option(format!("local {e}")))?;
    Ok(s)
}

/// A UDP flow's socket: bound like the TCP ones, connected to `addr`,
/// refused when `datagram` cannot pass the path (`flag` names the option
/// that set its size).
pub(crate) fn open_datagrams(
    addr: SocketAddr,
    opts: &ClientOptions,
    datagram: u32,
    flag: &str,
) -> Result<UdpSocket, ClientError> {
    let sock =
        transport::socket(Transport::Udp, addr).map_err(|error| ClientError::Connect { addr, error })?;
    sockopt::apply_before_connect(
        &sock,
        &SocketSettings {
            mss: None,
            ..opts.local.clone()
        },
        "-s/--local-sockbuf",
    )
    .map_err(|e| ClientError::Option(format!("local {e}")))?;
    let local = netrig_engine::addr::local_for(
        opts.bind.unwrap_or(if addr.is_ipv4() {
            IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        }),
        addr,
    );
    sock.bind(&local.into())
        .map_err(|e| ClientError::Option(format!("--bind {}: {e}", local.ip())))?;
    // Do not fragment: a datagram too large for the path is an error, not a silent split.
    let _ = sockopt::set_dont_fragment(&sock, addr.is_ipv6());
    sock.connect(&addr.into())
        .map_err(|error| ClientError::Connect { addr, error })?;
    // The route's MTU is known once connected: refuse datagrams that cannot pass it.
    let overhead = sockopt::udp_overhead(addr.is_ipv6());
    if let Some(mtu) = sockopt::path_mtu(&sock, addr.is_ipv6()).filter(|m| *m > overhead) {
        if datagram > mtu - overhead {
            return Err(ClientError::Option(format!(
                "{flag} {datagram}: the datagram is larger than the path to {addr} allows (MTU {mtu}: at most {} \
                 bytes of UDP payload, and netrig does not fragment); use a smaller {flag}",
                mtu - overhead
            )));
        }
    }
    let udp: UdpSocket = sock.into();
    sockopt::apply_connected(&udp, &opts.local, false, "-s/--local-sockbuf")
        .map_err(|e| ClientError::Option(format!("local {e}")))?;
    Ok(udp)
}

/// What this end measured of a test, and what it read of its host around it.
pub(crate) struct Measured<'m> {
    pub(crate) outcome: &'m netrig_engine::runner::SideOutcome,
    /// The buffers `-s` asked for.
    pub(crate) requested: BufPair,
    /// Each flow's buffers and options read back at set-up.
    pub(crate) setup_info: &'m BTreeMap<u32, (BufPair, AppliedOptions)>,
    pub(crate) counters: Option<CounterReport>,
    pub(crate) environment: netrig_proto::report::measure::Environment,
}

impl Measured<'_> {
    /// This end's report of `spec`'s run; `clocks`: how its one-way delay
    /// reads the two ends' clocks.
    pub(crate) fn report(self, spec: &TestSpec, clocks: ClockCheck) -> SideReport {
        let outcome = self.outcome;
        let one_way = outcome.one_way.clone().map(|mut o| {
            o.clocks = clocks;
            o
        });
        SideReport {
            flows: outcome
                .flows
                .iter()
                .map(|f| f.report(spec, self.requested, self.setup_info.get(&f.id).cloned()))
                .collect(),
            window_s: outcome.window_s,
            warnings: vec![],
            cpu: outcome.cpu.clone(),
            cpu_window_s: outcome.cpu_window_s,
            workers: outcome.workers.clone(),
            counters: self.counters,
            environment: Some(self.environment),
            latency: outcome.latency.clone(),
            latency_histogram: outcome.latency_histogram.clone(),
            schedule: outcome.schedule.clone(),
            witness: outcome.witness.clone(),
            one_way,
            // This end's profile goes straight into the result (run.rs), beside the agent's.
            profile: None,
        }
    }
}

/// Socket settings as the result shows them.
pub(crate) fn shown(s: &SocketSettings) -> SocketOptions {
    SocketOptions {
        sndbuf: s.sndbuf,
        rcvbuf: s.rcvbuf,
        tos: s.tos,
        priority: s.priority,
        nodelay: s.nodelay,
        congestion: s.congestion.clone(),
        mss: s.mss,
        max_pacing_rate_bps: s.max_pacing_rate_bps,
        mptcp: s.mptcp,
    }
}
