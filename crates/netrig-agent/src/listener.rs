//! The listening socket, the accept loop and the dispatch of new
//! connections to sessions.
//!
//! One thread owns the listener and every connection that has not finished
//! its greeting yet, in a mio event loop: no thread per connection, so a
//! test that opens tens of thousands of connections a second (each with a
//! 32-byte data hello) costs the agent a few system calls per connection.
//! A control connection, once greeted, gets a thread of its own for its
//! session; a data connection is handed to its session's channel directly.

use crate::config::AgentConfig;
use crate::doorway::LISTENERS;
use crate::peer::{allowed, canonical_ip, client_key};
use crate::rate_limit::{RateLimit, WARNINGS_PER_SECOND};
use crate::registry::Registry;
use crate::session::serve_control;
use crate::shared::Shared;
use mio::net::TcpListener as MioListener;
use mio::net::TcpStream as MioStream;
use mio::{Interest, Poll, Token};
use netrig_io::{Handler, Io, LoopError, Now, Reactor, Ready, Wake};
use netrig_proto::iperf3::{Cookie, COOKIE_LEN};
use netrig_proto::{ControlPreamble, DataHello};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    poll: Poll,
    udp: std::net::UdpSocket,
    /// `--iperf3-port`'s sockets, until the agent runs.
    iperf3_port: Option<crate::iperf3::Port>,
    /// `--metrics-port`'s socket, until the agent runs.
    metrics_port: Option<TcpListener>,
    pub(crate) shared: Arc<Shared>,
}

impl Agent {
    /// Binds the listening sockets. An unspecified IPv6 address gets an
    /// IPv4 socket on the same port beside it; where IPv6 is missing it
    /// falls back to IPv4 alone. The limits'
    /// hooks are the configuration's, whatever the limits said.
    pub fn bind(mut config: AgentConfig) -> Result<Agent, AgentError> {
        crate::memory::keep_large_blocks_mapped();
        config.limits.hooks = config
            .hooks
            .as_ref()
            .map_or_else(Vec::new, |h| h.names().to_vec());
        // A test cannot have more workers than all tests together.
        config.limits.max_workers = config.limits.max_workers.min(config.totals.max_workers());
        config.limits.hook_timeout_s = config
            .hooks
            .as_ref()
            .map(|h| h.timeout().as_secs_f64().ceil() as u64);
        // TCP and UDP on the same port number; with port 0 the UDP twin of
        // the TCP port chosen may be taken, so try a few.
        let mut attempt = 0;
        let (listeners, udp) = loop {
            attempt += 1;
            let listeners = match listen_all(config.bind, config.mptcp_listener) {
                Ok(l) => l,
                // Port 0: the IPv4 twin of the IPv6 port chosen may be taken.
                Err((addr, e))
                    if config.bind.port() == 0 && attempt < 10 && e.kind() == io::ErrorKind::AddrInUse =>
                {
                    log::debug!("{addr}: {e}; trying another port");
                    continue;
                }
                Err((addr, e)) => return Err(listen_error(addr, e)),
            };
            let tcp_addr = listeners[0]
                .local_addr()
                .map_err(|e| listen_error(config.bind, e))?;
            match crate::udp::bind(tcp_addr) {
                Ok(u) => break (listeners, u),
                Err(e) if config.bind.port() == 0 && attempt < 10 => {
                    log::debug!("UDP {tcp_addr}: {e}; trying another port");
                }
                Err(e) => return Err(listen_error(tcp_addr, e)),
            }
        };
        let udp_local = udp.local_addr().map_err(|e| listen_error(config.bind, e))?;
        let (poll, listeners) = event_loop(listeners).map_err(|e| listen_error(udp_local, e))?;
        let doorway =
            crate::doorway::Doorway::new(&poll, HANDBACK).map_err(|e| listen_error(udp_local, e))?;
        let max_presessions = config.max_presessions;
        let iperf3_port = match config.iperf3_port {
            Some(port) => Some(
                bind_iperf3_port(config.bind, port, config.mptcp_listener)
                    .map_err(|(addr, e)| listen_error(addr, e))?,
            ),
            None => None,
        };
        let metrics_port = match config.metrics_port {
            Some(port) => Some(
                crate::metrics_http::bind(config.bind, port).map_err(|(addr, e)| listen_error(addr, e))?,
            ),
            None => None,
        };
        Ok(Agent {
            poll,
            udp,
            iperf3_port,
            metrics_port,
            shared: Arc::new(Shared {
                listeners,
                doorway,
                budget: crate::budget::Budget::new(config.totals),
                config,
                registry: Registry::default(),
                slots: Default::default(),
                pre: Arc::new(crate::admission::PrePool::new(max_presessions)),
                shutdown: AtomicBool::new(false),
                udp_local,
                iperf3: Default::default(),
                accept_failures: Default::default(),
                metrics: Default::default(),
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
            .spawn(move || crate::udp::intake(sock, shared, false))
            .map_err(|e| listen_error(self.shared.udp_local, e))?;
        Ok(())
    }

    /// Every listening socket's address: with `[::]`, the IPv6 one and the
    /// IPv4 one beside it.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.shared
            .listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.listeners[0]
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The iperf3 port's address (`--iperf3-port`), if it has one.
    pub fn iperf3_addr(&self) -> Option<SocketAddr> {
        self.iperf3_port
            .as_ref()
            .and_then(crate::iperf3::Port::local_addr)
    }

    /// The metrics port's address (`--metrics-port`), if it has one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_port.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Accepts connections until the process ends.
    pub fn run(mut self) {
        if let Some(l) = self.metrics_port.take() {
            if let Err(e) = crate::metrics_http::start(l, self.shared.clone()) {
                log::warn!("cannot serve the metrics port (--metrics-port): {e}");
            }
        }
        if let Err(e) = self.start_udp() {
            log::warn!("{e}: UDP tests will not work");
        }
        if let Some(p) = self.iperf3_port.take() {
            if let Err(e) = p.start(&self.shared) {
                log::warn!("cannot serve the iperf3 port: {e}");
            }
        }
        Acceptor::run(self.poll, self.shared)
    }

    /// Runs the agent on a background thread (the embedded default, tests).
    pub fn spawn(self) -> AgentHandle {
        let addr = self.local_addr();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("netrig-agent".into())
            .spawn(move || self.run())
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
        self.shared.slots.len()
    }

    pub fn shutdown(&mut self) {
        self.shared.shutdown.store(true, Ordering::Relaxed);
        // Wake the accept loop (it also looks at the flag at least every
        // MAX_WAIT, should this connection fail).
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

/// The listeners for `bind`: itself, or for `[::]` an IPv6-only socket and
/// an IPv4 one on its port (IPv4 alone on a host without IPv6). A failure
/// names the address that failed. `mptcp`: MPTCP listeners where the kernel makes them.
fn listen_all(bind: SocketAddr, mptcp: bool) -> Result<Vec<TcpListener>, (SocketAddr, io::Error)> {
    let listen = |addr, only_v6| listen(addr, only_v6, mptcp);
    if bind.ip() != IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
        return Ok(vec![listen(bind, false).map_err(|e| (bind, e))?]);
    }
    let v4 = |port| SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port);
    let six = match listen(bind, true) {
        Ok(l) => l,
        // EAFNOSUPPORT: a host without IPv6.
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            return Ok(vec![
                listen(v4(bind.port()), false).map_err(|e| (v4(bind.port()), e))?
            ]);
        }
        Err(e) => return Err((bind, e)),
    };
    let port = six.local_addr().map_err(|e| (bind, e))?.port();
    let four = listen(v4(port), false).map_err(|e| (v4(port), e))?;
    Ok(vec![six, four])
}

/// `--iperf3-port`'s sockets: `bind`'s address on `port`, TCP as the
/// agent's own port and UDP. A failure names the address.
fn bind_iperf3_port(
    bind: SocketAddr,
    port: u16,
    mptcp: bool,
) -> Result<crate::iperf3::Port, (SocketAddr, io::Error)> {
    let addr = SocketAddr::new(bind.ip(), port);
    let tcp = listen_all(addr, mptcp)?;
    let at = tcp[0].local_addr().map_err(|e| (addr, e))?;
    let udp = crate::udp::bind(at).map_err(|e| (at, e))?;
    Ok(crate::iperf3::Port::new(tcp, udp))
}

fn listen(addr: SocketAddr, only_v6: bool, mptcp: bool) -> io::Result<TcpListener> {
    netrig_engine::transport::listen(addr, only_v6, 4096, mptcp)
}

/// The accept loop's poller, with the listeners registered in it.
fn event_loop(listeners: Vec<TcpListener>) -> io::Result<(Poll, Vec<MioListener>)> {
    let poll = Poll::new()?;
    let mut mio = Vec::with_capacity(listeners.len());
    for (i, l) in listeners.into_iter().enumerate() {
        l.set_nonblocking(true)?;
        let l = MioListener::from_std(l);
        crate::doorway::watch(poll.registry(), &l, i)?;
        mio.push(l);
    }
    Ok((poll, mio))
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

/// The waker's: connections a run that holds the listener gave back, or
/// the listener given back.
const HANDBACK: Token = netrig_io::reserved(1);
/// The longest the loop sleeps: bounds how late it sees `shutdown`.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// How long a connection from outside `--allow` may take to send the four
/// bytes that say whether it reads netrig's refusal or iperf3's; then it is
/// told netrig's. (Entries expire in their order of arrival, so one may
/// wait behind another's longer greeting timeout.)
const OUTSIDER_WAIT: Duration = Duration::from_millis(200);
/// How long to stop accepting after accept fails (out of descriptors, memory).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

enum Greeting {
    Control(ControlPreamble),
    Data(DataHello),
    /// An iperf3 client's cookie: its control connection, or one of its
    /// test's data connections (the cookie says which: [`crate::iperf3`]).
    Iperf3(Cookie),
}

/// The longest greeting: an iperf3 cookie (netrig's are 8 and 32 bytes).
const GREETING_MAX: usize = COOKIE_LEN;

/// How long the greeting that begins with `first` is: an iperf3 cookie's
/// length once its first four bytes are base32 letters, else netrig's
/// ([`netrig_proto::preamble::greeting_len`]). On the iperf3 port
/// (`iperf3_only`), nothing but an iperf3 cookie.
fn greeting_len(first: &[u8], iperf3_only: bool) -> Result<usize, String> {
    match first.first_chunk::<4>() {
        Some(m) if netrig_proto::preamble::iperf3_cookie_start(*m) => Ok(COOKIE_LEN),
        Some(_) if iperf3_only => {
            Err("not an iperf3 client, on the agent's iperf3 port (--iperf3-port)".into())
        }
        _ => netrig_proto::preamble::greeting_len(first).map_err(|e| e.to_string()),
    }
}

/// What reading a greeting came to so far.
enum Progress {
    Waiting,
    Done(Greeting),
    Failed(String),
    /// From outside `--allow`: its first four bytes are in, which say how
    /// to tell it so ([`tell_outsider`]).
    Outsider,
}

/// A connection that has not finished its greeting.
struct Pending {
    stream: MioStream,
    peer: SocketAddr,
    /// Tells this connection from a later one in the same slot.
    id: u64,
    deadline: Instant,
    buf: [u8; GREETING_MAX],
    len: usize,
    /// It came to the iperf3 port (`--iperf3-port`): iperf3 alone is served.
    iperf3_only: bool,
    /// From outside `--allow`: read only as far as its first four bytes.
    outsider: bool,
    /// What was read from the connection before it came here (a run
    /// holding the listener gave it back: at most a DataHello's length and
    /// `READ_AHEAD`), taken before the socket's bytes; `taken` of it so far.
    read: Vec<u8>,
    taken: usize,
}

impl Pending {
    /// Reads what has arrived of the greeting, never a byte past it: what
    /// follows belongs to the session (and so does what was read past it
    /// before: [`Pending::past`]).
    fn advance(&mut self) -> Progress {
        loop {
            if self.outsider && self.len >= 4 {
                return Progress::Outsider;
            }
            // Until the kind is known, no more than the shorter greeting.
            let want = match greeting_len(&self.buf[..self.len], self.iperf3_only) {
                Ok(n) => n,
                Err(e) => return Progress::Failed(e),
            };
            if self.len >= want {
                return self.decode();
            }
            if let Some(read) = self.read.get(self.taken..).filter(|r| !r.is_empty()) {
                let k = read.len().min(want - self.len);
                self.buf[self.len..self.len + k].copy_from_slice(&read[..k]);
                self.len += k;
                self.taken += k;
                continue;
            }
            match self.stream.read(&mut self.buf[self.len..want]) {
                Ok(0) => return Progress::Failed("closed before its greeting".into()),
                Ok(n) => self.len += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Waiting,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Progress::Failed(e.to_string()),
            }
        }
    }

    /// What was read before it came here past its greeting (whole).
    fn past(&self) -> &[u8] {
        self.read.get(self.taken..).unwrap_or_default()
    }

    fn decode(&self) -> Progress {
        if let Some(c) = self
            .buf
            .first_chunk::<COOKIE_LEN>()
            .filter(|_| self.len == COOKIE_LEN)
        {
            return match Cookie::parse(c) {
                Ok(c) => Progress::Done(Greeting::Iperf3(c)),
                Err(e) => Progress::Failed(e.to_string()),
            };
        }
        let decoded = if self.buf[..4] == netrig_proto::preamble::CONTROL_MAGIC {
            self.buf
                .first_chunk::<{ ControlPreamble::LEN }>()
                .map(|b| ControlPreamble::decode(b).map(Greeting::Control))
        } else {
            self.buf
                .first_chunk::<{ DataHello::LEN }>()
                .map(|b| DataHello::decode(b).map(Greeting::Data))
        };
        match decoded {
            Some(Ok(g)) => Progress::Done(g),
            Some(Err(e)) => Progress::Failed(e.to_string()),
            None => Progress::Failed("greeting too short".into()),
        }
    }
}

/// The accept loop: the listener and the connections still greeting.
struct Acceptor {
    /// The loop's registry (a handle on the reactor's poll).
    registry: mio::Registry,
    shared: Arc<Shared>,
    /// Listeners to accept on, by index: readable, or to try again after a back-off.
    accept_due: [bool; 2],
    /// Connections still greeting, by token; never more than `max_pending`.
    slots: Vec<Option<Pending>>,
    free: Vec<usize>,
    live: usize,
    /// (slot, id) in the order of their deadlines (all get the same
    /// timeout); entries of connections gone since are skipped, and
    /// compacted away before they outnumber the live ones.
    order: VecDeque<(usize, u64)>,
    next_id: u64,
    /// Accept failed (out of descriptors?): not before then.
    backoff_until: Option<Instant>,
    full_log: RateLimit,
    accept_log: RateLimit,
    drop_log: RateLimit,
    deny_log: RateLimit,
    refuse_log: RateLimit,
    /// Which connections from outside --allow are told so.
    refusals: Refusals,
    /// Connections still greeting, by client ([`client_key`]).
    per_key: HashMap<IpAddr, u32>,
}

impl Acceptor {
    fn new(registry: mio::Registry, shared: Arc<Shared>) -> Self {
        Acceptor {
            registry,
            shared,
            // Connections may have queued before the loop started.
            accept_due: [true; 2],
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            order: VecDeque::new(),
            next_id: 0,
            backoff_until: None,
            full_log: RateLimit::new("connections still greeting", 1),
            accept_log: RateLimit::new("failed accepts", 1),
            drop_log: RateLimit::new("dropped connections", WARNINGS_PER_SECOND),
            deny_log: RateLimit::new("connections from outside --allow", WARNINGS_PER_SECOND),
            refuse_log: RateLimit::new("refused sessions", WARNINGS_PER_SECOND),
            refusals: Refusals::default(),
            per_key: HashMap::new(),
        }
    }

    /// Runs the accept loop on `poll` until the agent shuts down.
    fn run(poll: Poll, shared: Arc<Shared>) {
        // Said once, at debug level: `netrig serve` prints its own line.
        for l in &shared.listeners {
            log::debug!(
                "listening on {}",
                l.local_addr().map(|a| a.to_string()).unwrap_or_default()
            );
        }
        let started = poll
            .registry()
            .try_clone()
            .and_then(|registry| Ok((registry, Reactor::with_poll(poll, false)?)));
        let (registry, mut reactor) = match started {
            Ok(r) => r,
            Err(e) => return log::error!("accept loop: cannot start: {e}; not accepting"),
        };
        let acceptor = Acceptor::new(registry, shared.clone());
        if let Err(LoopError::Poll(e)) = reactor.run(acceptor, &shared.shutdown, None) {
            log::error!("accept loop: waiting for events failed: {e}; no longer accepting");
        }
    }

    /// Accepts on listener `i` until its queue is empty. True when it
    /// stopped on an error and must try again after the back-off.
    fn accept_all(&mut self, i: usize) -> bool {
        loop {
            match self.shared.listeners[i].accept() {
                Ok((stream, peer)) => self.admit(stream, peer, Vec::new(), false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                // The peer gave up while queued, or a signal: the next one.
                Err(e) if netrig_engine::intake::accept_again(&e) => {}
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS and friends: back off instead of spinning.
                    let queued =
                        netrig_metrics::tcp_info::accept_queue(self.shared.listeners[i].as_fd()).ok();
                    self.shared.accept_failures.record(&e, queued);
                    let now = Instant::now();
                    if self.accept_log.allow(now) {
                        log::warn!("accept failed: {e}; not accepting for {ACCEPT_BACKOFF:?}");
                    }
                    self.backoff_until = Some(now + ACCEPT_BACKOFF);
                    return true;
                }
            }
        }
    }

    /// A new connection: its greeting often came with it; if not, it waits
    /// in a slot, the oldest waiting one making room if all are taken.
    /// (A connection a run gives back comes here too, with what the run
    /// read of it: `read`.)
    fn admit(&mut self, mut stream: MioStream, peer: SocketAddr, mut read: Vec<u8>, iperf3_only: bool) {
        let now = Instant::now();
        let outsider = !allowed(&self.shared.config.allow, peer.ip());
        if outsider {
            self.shared.metrics.refused(crate::metrics::Refusal::Allow);
            if self.deny_log.allow(now) {
                log::warn!("{peer}: closed: not in the networks the agent serves (its --allow)");
            }
            if !self.refusals.allow(client_key(peer.ip()), now) {
                return;
            }
            // Its first four bytes say whether it reads netrig's answer or
            // iperf3's; until they come, it waits as a greeting does.
            let mut b = [0u8; 4];
            if let Some(want) = 4usize.checked_sub(read.len()).filter(|&w| w > 0) {
                if let Ok(n) = stream.read(&mut b[..want]) {
                    read.extend_from_slice(&b[..n]);
                }
            }
            if read.len() >= 4 || iperf3_only {
                return tell_outsider(stream, peer, &self.shared.config.allow, &read, iperf3_only);
            }
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut p = Pending {
            stream,
            peer,
            id,
            deadline: now
                + if outsider {
                    OUTSIDER_WAIT
                } else {
                    self.shared.config.greeting_timeout
                },
            buf: [0; GREETING_MAX],
            len: 0,
            iperf3_only,
            outsider,
            read,
            taken: 0,
        };
        match p.advance() {
            Progress::Waiting => {}
            Progress::Done(g) => {
                let past = p.past().to_vec();
                return self.dispatch(p.stream, peer, g, past);
            }
            Progress::Failed(e) => return self.dropped(peer, &e),
            Progress::Outsider => {
                let allow = &self.shared.config.allow;
                return tell_outsider(p.stream, peer, allow, &p.buf[..p.len], iperf3_only);
            }
        }
        if self.live >= self.shared.config.max_pending {
            let evicted = self.evict_oldest();
            if self.full_log.allow(now) {
                let max = self.shared.config.max_pending;
                match evicted {
                    Some(old) => log::warn!(
                        "too many connections still greeting ({max}); closing the oldest, from {old}"
                    ),
                    None => {
                        log::warn!("too many connections still greeting ({max}); closing one from {peer}")
                    }
                }
            }
            if evicted.is_none() {
                return;
            }
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        if let Err(e) = self
            .registry
            .register(&mut p.stream, Token(slot), Interest::READABLE)
        {
            self.free.push(slot);
            return self.dropped(peer, &format!("cannot wait for its greeting: {e}"));
        }
        *self.per_key.entry(client_key(peer.ip())).or_default() += 1;
        self.slots[slot] = Some(p);
        self.live += 1;
        self.order.push_back((slot, id));
        if self.order.len() > 2 * self.live + 64 {
            let slots = &self.slots;
            self.order
                .retain(|&(s, id)| matches!(&slots[s], Some(p) if p.id == id));
        }
    }

    fn on_readable(&mut self, slot: usize) {
        let Some(p) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        match p.advance() {
            Progress::Waiting => {}
            Progress::Done(g) => {
                if let Some(p) = self.remove(slot) {
                    let past = p.past().to_vec();
                    self.dispatch(p.stream, p.peer, g, past);
                }
            }
            Progress::Failed(e) => {
                if let Some(p) = self.remove(slot) {
                    self.dropped(p.peer, &e);
                }
            }
            Progress::Outsider => {
                if let Some(p) = self.remove(slot) {
                    let first = &p.buf[..p.len];
                    tell_outsider(p.stream, p.peer, &self.shared.config.allow, first, p.iperf3_only);
                }
            }
        }
    }

    /// Takes a connection out of the loop.
    fn remove(&mut self, slot: usize) -> Option<Pending> {
        let mut p = self.slots.get_mut(slot)?.take()?;
        let _ = self.registry.deregister(&mut p.stream);
        self.free.push(slot);
        self.live -= 1;
        let key = client_key(p.peer.ip());
        if let Some(n) = self.per_key.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.per_key.remove(&key);
            }
        }
        Some(p)
    }

    /// The connection waiting longest, dropping stale entries on the way.
    fn oldest(&mut self) -> Option<&Pending> {
        while let Some(&(slot, id)) = self.order.front() {
            if matches!(&self.slots[slot], Some(p) if p.id == id) {
                return self.slots[slot].as_ref();
            }
            self.order.pop_front();
        }
        None
    }

    /// Closes the connection waiting longest of the client with the most
    /// waiting (one address cannot push others' greetings out); returns its peer.
    fn evict_oldest(&mut self) -> Option<SocketAddr> {
        self.oldest()?;
        let (&greediest, _) = self.per_key.iter().max_by_key(|(_, &n)| n)?;
        let slots = &self.slots;
        let at = self.order.iter().position(
            |&(s, id)| matches!(&slots[s], Some(p) if p.id == id && client_key(p.peer.ip()) == greediest),
        )?;
        let (slot, _) = self.order.remove(at)?;
        self.remove(slot).map(|p| p.peer)
    }

    /// Closes connections whose greeting is overdue.
    fn expire(&mut self, now: Instant) {
        while self.oldest().is_some_and(|p| p.deadline <= now) {
            if let Some(p) = self.order.pop_front().and_then(|(slot, _)| self.remove(slot)) {
                if p.outsider {
                    // Silent: told in netrig's words, as before it could be iperf3.
                    let first = &p.buf[..p.len];
                    tell_outsider(p.stream, p.peer, &self.shared.config.allow, first, p.iperf3_only);
                    continue;
                }
                let timeout = self.shared.config.greeting_timeout;
                self.dropped(p.peer, &format!("no greeting within {timeout:?}"));
            }
        }
    }

    fn dropped(&mut self, peer: SocketAddr, why: &str) {
        if self.drop_log.allow(Instant::now()) {
            log::warn!("{peer}: dropped: {why}");
        }
    }

    /// Hands a greeted connection on, in blocking mode as sessions expect:
    /// a control connection to a session thread of its own, a data
    /// connection to the session that waits for it (which never blocks);
    /// `past`: what was read of it past its greeting (by a run holding the
    /// listener), which goes with it.
    fn dispatch(&mut self, stream: MioStream, peer: SocketAddr, greeting: Greeting, past: Vec<u8>) {
        let mut stream = TcpStream::from(stream);
        // A session's place is taken here, before its thread exists; a
        // refusal is written while the socket is still non-blocking (it is
        // small: into an empty buffer, or not at all).
        let admitted = match &greeting {
            Greeting::Control(p) => match crate::session::negotiate_version(p) {
                Ok(v) => Some(v),
                Err((answer, why)) => {
                    self.shared.metrics.refused(crate::metrics::Refusal::Version);
                    if self.refuse_log.allow(Instant::now()) {
                        log::warn!("{peer}: refused: {why}");
                    }
                    let _ = stream.write(&answer);
                    return;
                }
            },
            Greeting::Data(_) => None,
            Greeting::Iperf3(cookie) => return self.dispatch_iperf3(stream, peer, *cookie, past),
        };
        match greeting {
            Greeting::Control(_) => {
                if let Err(e) = stream.set_nonblocking(false) {
                    return self.dropped(peer, &format!("cannot make the socket blocking: {e}"));
                }
                let version = admitted.expect("a control greeting was admitted");
                let handle = match stream.try_clone() {
                    Ok(h) => h,
                    Err(e) => return self.dropped(peer, &format!("cannot hold the connection: {e}")),
                };
                // A place among those waiting for their hello (no session place yet).
                let key = client_key(peer.ip());
                let (pre, closed) = self.shared.pre.enter(key, handle, Instant::now());
                if let Some(k) = closed {
                    if self.full_log.allow(Instant::now()) {
                        log::warn!(
                            "closed the oldest control connection of {} waiting for its hello, to make room \
                             (at most {} wait, an eighth of them from one client)",
                            crate::admission::whose(k),
                            self.shared.config.max_presessions
                        );
                    }
                }
                let shared = self.shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("netrig-session".into())
                    .spawn(move || {
                        serve_control(stream, &past, &peer.to_string(), key, version, shared, pre)
                    });
                if let Err(e) = spawned {
                    log::warn!("{peer}: cannot start a session thread: {e}");
                }
            }
            Greeting::Data(h) => {
                // Non-blocking still: the registry makes a set-up connection
                // blocking; a run's worker wants it as it is.
                match self.shared.registry.deliver(h, stream, peer, past.len()) {
                    Ok(()) => {}
                    Err(e) if e.late => log::debug!("{peer}: {e}"),
                    Err(e) => {
                        if self.drop_log.allow(Instant::now()) {
                            log::warn!("{peer}: {e}");
                        }
                    }
                }
            }
            Greeting::Iperf3(_) => {}
        }
    }

    /// An iperf3 client's connection: one of its test's data connections
    /// when a test waits for its cookie, else a control connection, which
    /// gets a session thread of its own (and, until its parameters are in,
    /// a place among the connections that hold no session yet).
    fn dispatch_iperf3(&mut self, stream: TcpStream, peer: SocketAddr, cookie: Cookie, past: Vec<u8>) {
        // An iperf3 client sends nothing past its cookie before the server
        // answers (a data connection before TEST_START).
        if !past.is_empty() {
            return self.dropped(peer, "an iperf3 connection sent bytes past its cookie unasked");
        }
        if self.shared.iperf3.is_test(cookie.as_bytes()) {
            if let Err(e) = self.shared.iperf3.deliver_tcp(cookie.as_bytes(), stream, peer) {
                self.dropped(peer, &e);
            }
            return;
        }
        if let Err(e) = stream.set_nonblocking(false) {
            return self.dropped(peer, &format!("cannot make the socket blocking: {e}"));
        }
        let handle = match stream.try_clone() {
            Ok(h) => h,
            Err(e) => return self.dropped(peer, &format!("cannot hold the connection: {e}")),
        };
        let (pre, closed) = self
            .shared
            .pre
            .enter(client_key(peer.ip()), handle, Instant::now());
        if let (Some(k), true) = (closed, self.full_log.allow(Instant::now())) {
            log::warn!(
                "closed the oldest connection of {} waiting for its hello or iperf3 parameters, to make room",
                crate::admission::whose(k)
            );
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("netrig-iperf3".into())
            .spawn(move || crate::iperf3::serve(stream, cookie, peer, shared, pre));
        if let Err(e) = spawned {
            log::warn!("{peer}: cannot start an iperf3 session thread: {e}");
        }
    }
}

/// The accept loop on the I/O core: each turn accepts what is due,
/// closes overdue greetings and sleeps until the next deadline; `shutdown`
/// ends it at once.
impl Handler for Acceptor {
    type Error = std::convert::Infallible;
    type Output = ();

    fn on_ready(&mut self, _io: &Io<'_>, slot: usize, _ready: Ready) -> Result<(), Self::Error> {
        if !self.shutting_down() {
            self.on_readable(slot);
        }
        Ok(())
    }

    fn on_token(&mut self, _io: &Io<'_>, token: Token) -> Result<(), Self::Error> {
        match token {
            _ if self.shutting_down() => {}
            t if t == LISTENERS[0] => self.accept_due[0] = true,
            t if t == LISTENERS[1] => self.accept_due[1] = true,
            HANDBACK => {
                // The listener may be back, with connections queued.
                self.accept_due = [true; 2];
                for r in self.shared.doorway.returned() {
                    self.admit(MioStream::from_std(r.stream), r.peer, r.read, r.iperf3_only);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &Io<'_>, _now: &Now) -> Result<Option<Duration>, Self::Error> {
        if io.draining() {
            return Ok(Some(Duration::ZERO));
        }
        let now = Instant::now();
        if let Some(i) = self.shared.doorway.lent() {
            // A run holds that listener and accepts; what it does not
            // keep comes back through HANDBACK, and so does the listener.
            self.accept_due[i] = false;
        }
        let due = self.accept_due.contains(&true);
        if due && !matches!(self.backoff_until, Some(t) if now < t) {
            self.backoff_until = None;
            for i in 0..self.accept_due.len() {
                if self.accept_due[i] && i < self.shared.listeners.len() {
                    self.accept_due[i] = self.accept_all(i);
                }
            }
        }
        let now = Instant::now();
        self.expire(now);
        for l in [
            &mut self.full_log,
            &mut self.accept_log,
            &mut self.drop_log,
            &mut self.deny_log,
            &mut self.refuse_log,
        ] {
            l.tick(now);
        }
        let mut wake = Wake::new(now);
        wake.after(MAX_WAIT);
        if let Some(p) = self.oldest() {
            wake.at(p.deadline);
        }
        if let (true, Some(t)) = (self.accept_due.contains(&true), self.backoff_until) {
            wake.at(t);
        }
        Ok(wake.wait())
    }

    /// Shut down: no drain, no more accepts.
    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        Duration::ZERO
    }

    fn is_done(&self, io: &Io<'_>, _now: &Now) -> bool {
        io.draining()
    }

    fn finish(self, _io: &Io<'_>) {}
}

impl Acceptor {
    /// The agent is shutting down: what a poll brought is left alone, as
    /// the loop ends before its next turn.
    fn shutting_down(&self) -> bool {
        self.shared.shutdown.load(Ordering::Relaxed)
    }
}

/// Connections from outside `--allow` told why they are closed: at most
/// [`Refusals::PER_SECOND`] a second in all and [`Refusals::PER_CLIENT`] a
/// second per client (an IPv4 address, an IPv6 /64); the others are closed
/// without a word, as before. The answer is one small frame to a peer that
/// completed a TCP handshake: no amplification.
#[derive(Default)]
struct Refusals {
    since: Option<Instant>,
    told: HashMap<IpAddr, u32>,
    total: u32,
}

impl Refusals {
    const PER_SECOND: u32 = 50;
    const PER_CLIENT: u32 = 2;

    fn allow(&mut self, key: IpAddr, now: Instant) -> bool {
        if self
            .since
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1))
        {
            self.since = Some(now);
            self.told.clear();
            self.total = 0;
        }
        if self.total >= Self::PER_SECOND {
            return false;
        }
        let n = self.told.entry(key).or_default();
        if *n >= Self::PER_CLIENT {
            return false;
        }
        *n += 1;
        self.total += 1;
        true
    }
}

/// Tells a connection from outside `--allow` so (an `error` frame, which
/// clients of every protocol version read in place of a welcome; an iperf3
/// client, by its `first` bytes or its port, ACCESS_DENIED), then closes
/// it. What it sent already is read first (at most a greeting's worth,
/// without waiting) so that the close is a FIN, not a reset that could
/// overtake the answer.
fn tell_outsider(
    mut stream: MioStream,
    peer: SocketAddr,
    allow: &[ipnet::IpNet],
    first: &[u8],
    iperf3_only: bool,
) {
    let _ = stream.read(&mut [0u8; GREETING_MAX]);
    // An iperf3 client reads a state: ACCESS_DENIED, which it prints as
    // its "busy" error (iperf3 has no word for an address not served).
    let iperf3 = first
        .first_chunk::<4>()
        .is_some_and(|m| netrig_proto::preamble::iperf3_cookie_start(*m));
    if iperf3 || iperf3_only {
        let _ = stream.write(&[netrig_proto::iperf3::State::AccessDenied.byte()]);
        return;
    }
    let nets = allow.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
    let answer = netrig_proto::encode_frame(&netrig_proto::AgentMsg::Error {
        message: format!(
            "this agent serves only clients from {nets} (its --allow); this client's address {} is not among \
             them",
            canonical_ip(peer.ip())
        ),
    });
    // Into an empty send buffer: all of it or nothing, never a wait.
    let _ = stream.write(&answer);
}

#[cfg(test)]
mod access_tests {
    use super::*;

    /// Answers to connections from outside --allow: 2 a second per client,
    /// 50 in all, counted again each second.
    #[test]
    fn refusals_are_told_a_few_a_second_per_client_and_in_all() {
        let mut r = Refusals::default();
        let t = Instant::now();
        let ip = |n: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        assert!(r.allow(ip(1), t) && r.allow(ip(1), t));
        assert!(!r.allow(ip(1), t), "a third from one client in the same second");
        let told = (2..100).filter(|&n| r.allow(ip(n), t)).count();
        assert_eq!(told, 48, "50 in all");
        let later = t + Duration::from_millis(1001);
        assert!(r.allow(ip(1), later), "a new second");
    }
}
