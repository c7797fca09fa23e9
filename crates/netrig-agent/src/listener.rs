//! The listening socket, the accept loop and the dispatch of new
//! connections to sessions.

use crate::session::{serve_control, Registry};
use netrig_proto::preamble::ConnKind;
use netrig_proto::{AgentLimits, ControlPreamble, DataHello};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, Read};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How an agent listens and what it allows.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Address to listen on. `[::]` listens on IPv6 and IPv4 alike.
    pub bind: SocketAddr,
    pub limits: AgentLimits,
    /// Connections that have not finished their greeting yet; one more is closed at once.
    pub max_pending: usize,
    /// How long a new connection may take to send its greeting.
    pub greeting_timeout: Duration,
    /// How long a control session may sit idle between tests.
    pub idle_timeout: Duration,
}

impl AgentConfig {
    pub fn new(bind: SocketAddr) -> Self {
        AgentConfig {
            bind,
            limits: AgentLimits::default(),
            max_pending: 256,
            greeting_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
        }
    }

    /// The default listening address: every IPv6 and IPv4 address.
    pub fn default_bind(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot listen on {addr}: {error}{hint}")]
    Listen {
        addr: SocketAddr,
        error: io::Error,
        hint: &'static str,
    },
}

/// A bound agent, not yet accepting.
pub struct Agent {
    listener: TcpListener,
    udp: std::net::UdpSocket,
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub config: AgentConfig,
    pub registry: Registry,
    pub sessions: AtomicUsize,
    pending: AtomicUsize,
    pub shutdown: AtomicBool,
    /// The agent's UDP address (same port as TCP).
    pub udp_local: SocketAddr,
}

impl Agent {
    /// Binds the listening socket. An unspecified IPv6 address is made
    /// dual-stack; where IPv6 is missing it falls back to IPv4.
    pub fn bind(config: AgentConfig) -> Result<Agent, AgentError> {
        // TCP and UDP on the same port number; with port 0 the UDP twin of
        // the TCP port chosen may be taken, so try a few.
        let mut attempt = 0;
        let (listener, udp) = loop {
            attempt += 1;
            let listener = match listen(config.bind) {
                Ok(l) => l,
                Err(e)
                    if config.bind.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                        && e.raw_os_error() == Some(97) =>
                {
                    // EAFNOSUPPORT: a host without IPv6.
                    let v4 = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), config.bind.port());
                    listen(v4).map_err(|e| listen_error(v4, e))?
                }
                Err(e) => return Err(listen_error(config.bind, e)),
            };
            let tcp_addr = listener.local_addr().map_err(|e| listen_error(config.bind, e))?;
            match crate::udp::bind(tcp_addr) {
                Ok(u) => break (listener, u),
                Err(e) if config.bind.port() == 0 && attempt < 10 => {
                    log::debug!("UDP {tcp_addr}: {e}; trying another port");
                }
                Err(e) => return Err(listen_error(tcp_addr, e)),
            }
        };
        let udp_local = udp.local_addr().map_err(|e| listen_error(config.bind, e))?;
        Ok(Agent {
            listener,
            udp,
            shared: Arc::new(Shared {
                config,
                registry: Registry::default(),
                sessions: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                shutdown: AtomicBool::new(false),
                udp_local,
            }),
        })
    }

    fn start_udp(&self) -> Result<(), AgentError> {
        let sock = self
            .udp
            .try_clone()
            .map_err(|e| listen_error(self.shared.udp_local, e))?;
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("netrig-udp".into())
            .spawn(move || crate::udp::intake(sock, shared))
            .map_err(|e| listen_error(self.shared.udp_local, e))?;
        Ok(())
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener has an address")
    }

    /// Accepts connections until the process ends.
    pub fn run(self) {
        if let Err(e) = self.start_udp() {
            log::warn!("{e}: UDP tests will not work");
        }
        accept_loop(self.listener, self.shared)
    }

    /// Runs the agent on a background thread (the embedded default, tests).
    pub fn spawn(self) -> AgentHandle {
        if let Err(e) = self.start_udp() {
            log::warn!("{e}: UDP tests will not work");
        }
        let addr = self.local_addr();
        let shared = self.shared.clone();
        let listener = self.listener;
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("netrig-agent".into())
            .spawn(move || accept_loop(listener, s2))
            .expect("spawn agent thread");
        AgentHandle {
            addr,
            shared,
            thread: Some(thread),
        }
    }
}

/// A running background agent; dropping it stops accepting.
pub struct AgentHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AgentHandle {
    /// Where clients reach it (with an unspecified bind address, use loopback).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sessions being served right now.
    pub fn active_sessions(&self) -> usize {
        self.shared.sessions.load(Ordering::Relaxed)
    }

    pub fn shutdown(&mut self) {
        self.shared.shutdown.store(true, Ordering::Relaxed);
        // Wake the accept loop.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        sock.set_only_v6(false)?;
    }
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    sock.listen(4096)?;
    Ok(sock.into())
}

fn listen_error(addr: SocketAddr, source: io::Error) -> AgentError {
    let hint = match source.kind() {
        io::ErrorKind::AddrInUse => {
            " (another netrig serve, or another program, holds the port: choose another with --port)"
        }
        io::ErrorKind::AddrNotAvailable => " (no interface of this host has that address: check --bind)",
        io::ErrorKind::PermissionDenied => " (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
        _ => "",
    };
    AgentError::Listen {
        addr,
        error: source,
        hint,
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    log::info!(
        "listening on {}",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    for conn in listener.incoming() {
        if shared.shutdown.load(Ordering::Relaxed) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                log::warn!("accept failed: {e}");
                // EMFILE and friends: back off instead of spinning.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.pending.fetch_add(1, Ordering::AcqRel) >= shared.config.max_pending {
            shared.pending.fetch_sub(1, Ordering::AcqRel);
            log::warn!(
                "too many connections still greeting; closing one from {:?}",
                stream.peer_addr().ok()
            );
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("netrig-conn".into())
            .spawn(move || handle_connection(stream, s));
        if let Err(e) = spawned {
            shared.pending.fetch_sub(1, Ordering::AcqRel);
            log::warn!("cannot start a connection thread: {e}");
        }
    }
}

/// Reads a new connection's greeting (bounded in time and size) and hands
/// it to its session.
fn handle_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let greeting = read_greeting(&mut stream, shared.config.greeting_timeout);
    shared.pending.fetch_sub(1, Ordering::AcqRel);
    match greeting {
        Ok(Greeting::Control(p)) => serve_control(stream, &peer, p, &shared),
        Ok(Greeting::Data(h)) => {
            if let Err(e) = shared.registry.deliver(h, stream) {
                log::warn!("{peer}: {e}");
            }
        }
        Err(e) => log::warn!("{peer}: dropped: {e}"),
    }
}

enum Greeting {
    Control(ControlPreamble),
    Data(DataHello),
}

fn read_greeting(stream: &mut TcpStream, timeout: Duration) -> Result<Greeting, String> {
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + timeout;
    let mut read = |buf: &mut [u8]| -> Result<(), String> {
        if std::time::Instant::now() >= deadline {
            return Err(format!("no greeting within {timeout:?}"));
        }
        stream.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!("no greeting within {timeout:?}"),
            io::ErrorKind::UnexpectedEof => "closed before its greeting".to_string(),
            _ => e.to_string(),
        })
    };
    let mut magic = [0u8; 4];
    read(&mut magic)?;
    match ConnKind::from_magic(magic).map_err(|e| e.to_string())? {
        ConnKind::Control => {
            let mut b = [0u8; ControlPreamble::LEN];
            b[..4].copy_from_slice(&magic);
            read(&mut b[4..])?;
            Ok(Greeting::Control(
                ControlPreamble::decode(&b).map_err(|e| e.to_string())?,
            ))
        }
        ConnKind::Data => {
            let mut b = [0u8; DataHello::LEN];
            b[..4].copy_from_slice(&magic);
            read(&mut b[4..])?;
            Ok(Greeting::Data(DataHello::decode(&b).map_err(|e| e.to_string())?))
        }
    }
}
