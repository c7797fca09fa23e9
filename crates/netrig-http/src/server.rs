//! The server: one mio event loop per worker thread, each with its own SO_REUSEPORT listener (or
//! one listener all workers share), owning its connections.
//!
//! The response path is written by hand (heads formatted straight into a reused buffer, bodies
//! written from one static pattern with writev, no allocation per request): a framework's
//! response types and per-request buffers cost speed here, and the server's speed is one of the
//! issue's goals (bench/http-server-vs-nginx.sh).
//!
//! Memory per connection: an idle connection owns no buffer. Each drive of a connection borrows
//! the worker's read and write buffers; only bytes left over (a head not yet complete, requests
//! pipelined behind a blocked answer, an answer the socket did not take) are copied into buffers
//! of the connection's own, sized to what is left (doubling up to the read bound).

use crate::parse::{self, Method, ParseLimits, Parsed, Route};
use crate::stats::{bump, Close, Refusal, Snapshot, WorkerCounts};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Poll, Token, Waker};
use netrig_io::{Handler, Io, LoopError, Now, Reactor, Ready, Wake};
use slab::Slab;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

const LISTENER: Token = netrig_io::reserved(1);
const WAKER: Token = netrig_io::reserved(2);
/// Answers smaller than this are copied whole into the write buffer (one write per answer, or
/// per batch of pipelined answers); larger bodies are written from the pattern with writev.
const COPY_BODY: u64 = 16 * 1024;
/// Pipelined requests are not parsed further while this much of earlier answers is unsent.
const OUT_HIGH: usize = 32 * 1024;
/// How long a connection closed by the server after a refusal may still drain what the client
/// sends (so the answer is not lost to a reset), at most.
const LINGER: Duration = Duration::from_secs(2);
/// How often deadlines are checked.
const SWEEP: Duration = Duration::from_millis(100);
/// Pause after accept() fails (EMFILE...), as the agent's.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The body of `/bytes/N`: byte i is `b'a' + i % 26` (so a misplaced or lost chunk shows).
pub fn body_byte(i: u64) -> u8 {
    b'a' + (i % 26) as u8
}

const PATTERN_LEN: usize = 64 * 1024;
static PATTERN: [u8; PATTERN_LEN + 26] = {
    let mut p = [0u8; PATTERN_LEN + 26];
    let mut i = 0;
    while i < p.len() {
        p[i] = b'a' + (i % 26) as u8;
        i += 1;
    }
    p
};

/// The next bytes of a body at offset `off` with `left` bytes to go.
fn pattern(off: u64, left: u64) -> &'static [u8] {
    let start = (off % 26) as usize;
    &PATTERN[start..start + (left.min(PATTERN_LEN as u64) as usize)]
}

/// The bounds a server keeps (each a command-line option; docs/HTTP.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// `--max-body`: the largest `/bytes/N`.
    pub max_body: u64,
    /// `--max-header-bytes`: a request head's bytes.
    pub max_header_bytes: usize,
    /// `--header-timeout`: from a head's first byte to its end.
    pub header_timeout: Duration,
    /// `--idle-timeout`: from an answer's last byte (or the accept) to the next head's first byte.
    pub idle_timeout: Duration,
    /// `--send-timeout`: an answer may make no progress (the client not reading) this long.
    pub send_timeout: Duration,
    /// `--max-connections`: open at once, all workers together; beyond it closed at once (503).
    pub max_connections: usize,
    /// `--max-requests-per-connection`: the answer to the last says `Connection: close`.
    pub max_requests_per_connection: Option<u64>,
    /// `--max-delay`: the longest `delay_ms`.
    pub max_delay: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_body: 64 << 20,
            max_header_bytes: 8 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(30),
            max_connections: 16_384,
            max_requests_per_connection: None,
            max_delay: Duration::from_secs(60),
        }
    }
}

impl Bounds {
    pub fn parse_limits(&self) -> ParseLimits {
        ParseLimits {
            max_header_bytes: self.max_header_bytes,
            max_body: self.max_body,
            max_delay_ms: self.max_delay.as_millis().min(u64::MAX as u128) as u64,
        }
    }
    /// The most bytes of requests a connection holds unparsed (beyond it the server stops
    /// reading that connection until it has answered what it holds).
    pub fn read_bound(&self) -> usize {
        (self.max_header_bytes + 1).max(64 * 1024)
    }
}

/// How the workers listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// A listening socket per worker on the same port (SO_REUSEPORT): the kernel spreads new
    /// connections over them.
    ReusePort,
    /// One listening socket in every worker's event loop: whichever wakes first accepts.
    Shared,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub threads: usize,
    pub listener: Listener,
    /// listen(2)'s backlog (the kernel caps it at net.core.somaxconn).
    pub backlog: i32,
    pub bounds: Bounds,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The client networks served (`netrig serve --allow`, beside the agent); empty: any.
    /// Others get 403 (plain HTTP) or nothing (HTTPS) and are closed.
    pub allow: Vec<ipnet::IpNet>,
}

/// Whether `allow` lets `ip` in (an IPv4-mapped address counts as IPv4; empty: any).
fn allowed(allow: &[ipnet::IpNet], ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    allow.is_empty() || allow.iter().any(|n| n.contains(&ip))
}

impl ServerConfig {
    pub fn new(bind: SocketAddr) -> Self {
        ServerConfig {
            bind,
            threads: 1,
            listener: Listener::ReusePort,
            backlog: 4096,
            bounds: Bounds::default(),
            tls: None,
            allow: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source} (another program holds the port? choose another with --http-port/--port)")]
    Listen { addr: SocketAddr, source: io::Error },
    #[error("--threads {0}: must be between 1 and 1024")]
    Threads(usize),
    #[error("cannot set up worker {worker}: {source}")]
    Worker { worker: usize, source: io::Error },
}

struct Shared {
    counts: Vec<Arc<WorkerCounts>>,
    open: AtomicUsize,
    shutdown: AtomicBool,
    /// Nanoseconds since `start` until which every worker pauses.
    stall_until: AtomicU64,
    stalls: AtomicU64,
    start: Instant,
    wakers: Vec<Waker>,
}

impl Shared {
    fn snapshot(&self) -> Snapshot {
        Snapshot::sum(
            &self.counts,
            self.start.elapsed().as_secs_f64(),
            self.stalls.load(Relaxed),
        )
    }
}

/// A running server. Dropping it shuts it down.
pub struct Server {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Server {
    /// Binds and starts the workers.
    pub fn start(config: ServerConfig) -> Result<Server, ServerError> {
        if config.threads == 0 || config.threads > 1024 {
            return Err(ServerError::Threads(config.threads));
        }
        let listeners = listen(&config)?;
        let addr = listeners[0].local_addr().map_err(|source| ServerError::Listen {
            addr: config.bind,
            source,
        })?;
        let mut polls = Vec::new();
        let mut wakers = Vec::new();
        for worker in 0..config.threads {
            let poll = Poll::new().map_err(|source| ServerError::Worker { worker, source })?;
            let waker = Waker::new(poll.registry(), WAKER)
                .map_err(|source| ServerError::Worker { worker, source })?;
            polls.push(poll);
            wakers.push(waker);
        }
        let shared = Arc::new(Shared {
            counts: (0..config.threads)
                .map(|_| Arc::new(WorkerCounts::default()))
                .collect(),
            open: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            stall_until: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            start: Instant::now(),
            wakers,
        });
        let mut threads = Vec::new();
        for (worker, (poll, std_listener)) in polls.into_iter().zip(listeners).enumerate() {
            let mut listener = TcpListener::from_std(std_listener);
            poll.registry()
                .register(&mut listener, LISTENER, Interest::READABLE)
                .map_err(|source| ServerError::Worker { worker, source })?;
            let registry = poll
                .registry()
                .try_clone()
                .map_err(|source| ServerError::Worker { worker, source })?;
            let reactor =
                Reactor::with_poll(poll, false).map_err(|source| ServerError::Worker { worker, source })?;
            let w = Worker {
                registry,
                next_sweep: Instant::now() + SWEEP,
                listener,
                conns: Slab::new(),
                accept_retry: None,
                ctx: Ctx {
                    counts: shared.counts[worker].clone(),
                    shared: shared.clone(),
                    limits: config.bounds.parse_limits(),
                    bounds: config.bounds.clone(),
                    tls: config.tls.clone(),
                    allow: config.allow.clone(),
                    rscratch: vec![0; config.bounds.read_bound()],
                    wscratch: Vec::with_capacity(OUT_HIGH + COPY_BODY as usize + 1024),
                    now: Instant::now(),
                    date: DateCache::default(),
                    timers: BinaryHeap::new(),
                    next_id: 0,
                    last_accept_log: None,
                },
            };
            let t = std::thread::Builder::new()
                .name(format!("http-{worker}"))
                .spawn(move || w.run(reactor))
                .map_err(|source| ServerError::Worker { worker, source })?;
            threads.push(t);
        }
        Ok(Server {
            shared,
            threads,
            addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counts of all workers, summed now.
    pub fn stats(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// Pauses every worker for `d` from now (no accept, read, write or timer; what arrives
    /// waits in the kernel), as a whole-server stall. A stall asked during another extends it
    /// to the later end.
    pub fn stall(&self, d: Duration) {
        let until = (self.shared.start.elapsed() + d).as_nanos() as u64;
        self.shared.stall_until.fetch_max(until, Relaxed);
        self.shared.stalls.fetch_add(1, Relaxed);
        for w in &self.shared.wakers {
            let _ = w.wake();
        }
    }

    /// Stops every worker (their connections closed) and waits for them.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Waits for the workers (they run until [`Server::shutdown`] from another handle, which
    /// does not exist: this is for a server that runs until the process ends).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// A handle that can stall the server and read its counts from another thread.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    fn stop(&mut self) {
        self.shared.shutdown.store(true, Relaxed);
        for w in &self.shared.wakers {
            let _ = w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stalls the server and reads its counts from any thread.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    pub fn stats(&self) -> Snapshot {
        self.shared.snapshot()
    }
    pub fn stall(&self, d: Duration) {
        let until = (self.shared.start.elapsed() + d).as_nanos() as u64;
        self.shared.stall_until.fetch_max(until, Relaxed);
        self.shared.stalls.fetch_add(1, Relaxed);
        for w in &self.shared.wakers {
            let _ = w.wake();
        }
    }
}

fn listen(config: &ServerConfig) -> Result<Vec<std::net::TcpListener>, ServerError> {
    use socket2::{Domain, Socket, Type};
    let err = |source| ServerError::Listen {
        addr: config.bind,
        source,
    };
    let one = |addr: SocketAddr, reuseport: bool| -> io::Result<std::net::TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        if reuseport {
            s.set_reuse_port(true)?;
        }
        if addr.is_ipv6() {
            s.set_only_v6(false)?;
        }
        s.bind(&addr.into())?;
        s.listen(config.backlog)?;
        s.set_nonblocking(true)?;
        Ok(s.into())
    };
    match config.listener {
        Listener::Shared => {
            let l = one(config.bind, false).map_err(err)?;
            (0..config.threads).map(|_| l.try_clone().map_err(err)).collect()
        }
        Listener::ReusePort => {
            let first = one(config.bind, true).map_err(err)?;
            let addr = first.local_addr().map_err(err)?;
            let mut all = vec![first];
            for _ in 1..config.threads {
                all.push(one(addr, true).map_err(err)?);
            }
            Ok(all)
        }
    }
}

/// What a worker's connections share.
struct Ctx {
    counts: Arc<WorkerCounts>,
    shared: Arc<Shared>,
    limits: ParseLimits,
    bounds: Bounds,
    tls: Option<Arc<rustls::ServerConfig>>,
    allow: Vec<ipnet::IpNet>,
    /// The read buffer a connection borrows when it holds no bytes of its own.
    rscratch: Vec<u8>,
    /// The write buffer a connection borrows when it has nothing unsent.
    wscratch: Vec<u8>,
    now: Instant,
    date: DateCache,
    /// Delayed answers: (due, connection key, connection id).
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_id: u64,
    last_accept_log: Option<Instant>,
}

struct Worker {
    /// The loop's registry (a handle on the reactor's poll).
    registry: mio::Registry,
    /// When deadlines are next checked.
    next_sweep: Instant,
    listener: TcpListener,
    conns: Slab<Conn>,
    accept_retry: Option<Instant>,
    ctx: Ctx,
}

impl Worker {
    /// Serves until the server shuts down.
    fn run(self, mut reactor: Reactor) {
        let shared = self.ctx.shared.clone();
        if let Err(LoopError::Poll(e)) = reactor.run(self, &shared.shutdown, None) {
            log::error!("http worker: poll failed: {e}");
        }
    }

    /// A whole-server stall: this thread does nothing until it ends (in
    /// slices, so a shutdown is still seen).
    fn sit_out_stall(&self) {
        let shared = &self.ctx.shared;
        while !shared.shutdown.load(Relaxed) {
            let stall = shared.stall_until.load(Relaxed);
            let elapsed = shared.start.elapsed().as_nanos() as u64;
            if elapsed >= stall {
                return;
            }
            std::thread::sleep(Duration::from_nanos(stall - elapsed).min(Duration::from_millis(20)));
        }
    }

    fn accept(&mut self) {
        if self.accept_retry.is_some() {
            return;
        }
        loop {
            match self.listener.accept() {
                Ok((mut sock, peer)) => {
                    if !allowed(&self.ctx.allow, peer.ip()) {
                        self.ctx.counts.refusal(Refusal::OutsideAllow);
                        if self.ctx.tls.is_none() {
                            let body = format!(
                                "this server serves only clients from {} (the agent's --allow); {} is not among them\n",
                                self.ctx.allow.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
                                peer.ip()
                            );
                            let mut out = Vec::new();
                            head(&mut out, 403, body.len() as u64, TEXT, false, 1, &self.ctx.date);
                            out.extend_from_slice(body.as_bytes());
                            if let Ok(n) = sock.write(&out) {
                                bump(&self.ctx.counts.bytes_sent, n as u64);
                            }
                            self.ctx.counts.response(403);
                        }
                        continue;
                    }
                    let shared = &self.ctx.shared;
                    if shared.open.fetch_add(1, Relaxed) >= self.ctx.bounds.max_connections {
                        shared.open.fetch_sub(1, Relaxed);
                        self.ctx.counts.refusal(Refusal::OverConnectionLimit);
                        if self.ctx.tls.is_none() {
                            let body = format!(
                                "{} connections are open, this server's --max-connections\n",
                                self.ctx.bounds.max_connections
                            );
                            let mut out = Vec::new();
                            head(&mut out, 503, body.len() as u64, TEXT, false, 1, &self.ctx.date);
                            out.extend_from_slice(body.as_bytes());
                            if let Ok(n) = sock.write(&out) {
                                bump(&self.ctx.counts.bytes_sent, n as u64);
                            }
                            self.ctx.counts.response(503);
                        }
                        continue;
                    }
                    let _ = sock.set_nodelay(true);
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    if let Err(e) =
                        self.registry
                            .register(&mut sock, Token(key), Interest::READABLE | Interest::WRITABLE)
                    {
                        log::warn!("http: cannot register a connection: {e}");
                        self.ctx.shared.open.fetch_sub(1, Relaxed);
                        continue;
                    }
                    let tls = match &self.ctx.tls {
                        Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
                            Ok(c) => Some(Box::new(c)),
                            Err(e) => {
                                log::warn!("http: TLS session: {e}");
                                self.ctx.shared.open.fetch_sub(1, Relaxed);
                                continue;
                            }
                        },
                        None => None,
                    };
                    self.ctx.next_id += 1;
                    entry.insert(Conn {
                        sock,
                        tls,
                        id: self.ctx.next_id,
                        rbuf: Vec::new(),
                        rpos: 0,
                        rend: 0,
                        out: Vec::new(),
                        out_pos: 0,
                        body_left: 0,
                        body_off: 0,
                        delayed: None,
                        closing: None,
                        lingering: false,
                        read_eof: false,
                        served: 0,
                        deadline: None,
                    });
                    bump(&self.ctx.counts.accepted, 1);
                    self.conns[key].update_deadline(&self.ctx);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if e.kind() == io::ErrorKind::Interrupted
                        || e.kind() == io::ErrorKind::ConnectionAborted =>
                {
                    continue
                }
                Err(e) => {
                    self.ctx.counts.refusal(Refusal::AcceptFailed);
                    let now = self.ctx.now;
                    if self
                        .ctx
                        .last_accept_log
                        .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
                    {
                        self.ctx.last_accept_log = Some(now);
                        log::warn!("http: accept failed: {e} (retrying every 50 ms; RLIMIT_NOFILE?)");
                    }
                    self.accept_retry = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn drive(&mut self, k: usize) {
        let Some(c) = self.conns.get_mut(k) else { return };
        match c.drive(&mut self.ctx) {
            Ok(()) => {
                if c.delayed.as_ref().is_some_and(|d| !d.queued) {
                    let d = c.delayed.as_mut().expect("checked");
                    d.queued = true;
                    self.ctx.timers.push(Reverse((d.due, k, c.id)));
                }
                c.update_deadline(&self.ctx);
            }
            Err(cause) => self.close(k, cause),
        }
    }

    fn close(&mut self, k: usize, cause: Close) {
        let mut c = self.conns.remove(k);
        let _ = self.registry.deregister(&mut c.sock);
        self.ctx.shared.open.fetch_sub(1, Relaxed);
        self.ctx.counts.close(cause);
    }

    fn sweep(&mut self) {
        let now = self.ctx.now;
        let mut expired = Vec::new();
        for (k, c) in self.conns.iter() {
            if let Some((at, kind)) = c.deadline {
                if at <= now {
                    expired.push((k, kind));
                }
            }
        }
        for (k, kind) in expired {
            let cause = match kind {
                Deadline::Idle => Close::IdleTimeout,
                Deadline::Header => {
                    let c = &mut self.conns[k];
                    c.refuse_now(
                        408,
                        &format!(
                            "the request head did not end within {} s (--header-timeout)\n",
                            self.ctx.bounds.header_timeout.as_secs_f64()
                        ),
                        &mut self.ctx,
                    );
                    self.ctx.counts.refusal(Refusal::HeaderTimeout);
                    Close::HeaderTimeout
                }
                Deadline::Send => Close::SendTimeout,
                Deadline::Linger => self.conns[k].closing.unwrap_or(Close::Server),
            };
            self.close(k, cause);
        }
    }
}

/// A worker on the I/O core: connections by their slab key, the listener
/// and the waker on reserved tokens; delayed answers, a failed accept's
/// retry and the deadline sweep between polls.
impl Handler for Worker {
    type Error = std::convert::Infallible;
    type Output = ();

    fn on_ready(&mut self, _io: &Io<'_>, k: usize, _ready: Ready) -> Result<(), Self::Error> {
        self.drive(k);
        Ok(())
    }

    fn on_token(&mut self, _io: &Io<'_>, token: Token) -> Result<(), Self::Error> {
        if token == LISTENER {
            self.accept();
        }
        Ok(())
    }

    fn on_woken(&mut self, _io: &Io<'_>) {
        self.ctx.now = Instant::now();
        self.ctx.date.refresh();
    }

    /// What came due while the poll slept: a failed accept's retry, delayed
    /// answers, the deadline sweep.
    fn on_events_done(&mut self, _io: &Io<'_>) -> Result<(), Self::Error> {
        let now = self.ctx.now;
        if self.accept_retry.is_some_and(|r| r <= now) {
            self.accept_retry = None;
            self.accept();
        }
        while let Some(&Reverse((due, k, id))) = self.ctx.timers.peek() {
            if due > now {
                break;
            }
            self.ctx.timers.pop();
            let Some(c) = self.conns.get_mut(k) else { continue };
            if c.id != id {
                continue;
            }
            if let Some(d) = c.delayed.as_mut() {
                d.ready = true;
                self.drive(k);
            }
        }
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP;
            self.sweep();
        }
        Ok(())
    }

    fn on_tick(&mut self, _io: &Io<'_>, _now: &Now) -> Result<Option<Duration>, Self::Error> {
        self.sit_out_stall();
        let mut wake = Wake::new(Instant::now());
        if !self.conns.is_empty() {
            wake.at(self.next_sweep);
        }
        if let Some(Reverse((due, _, _))) = self.ctx.timers.peek() {
            wake.at(*due);
        }
        if let Some(r) = self.accept_retry {
            wake.at(r);
        }
        Ok(wake.wait())
    }

    /// Shutting down: no drain.
    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        Duration::ZERO
    }

    /// Shut down, seen at the turn's start or during a stall.
    fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
        self.ctx.shared.shutdown.load(Relaxed)
    }

    fn finish(mut self, _io: &Io<'_>) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close(k, Close::Shutdown);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    Idle,
    Header,
    Send,
    Linger,
}

struct Delayed {
    req: parse::Request,
    due: Instant,
    /// Its timer is set.
    queued: bool,
    /// Its timer has fired: answer it.
    ready: bool,
}

struct Conn {
    sock: TcpStream,
    tls: Option<Box<rustls::ServerConnection>>,
    id: u64,
    /// Bytes read and not yet consumed: `rbuf[rpos..rend]`. Empty (no allocation) when the
    /// connection holds none between drives.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Bytes of answers not yet written: `out[out_pos..]`, then `body_left` bytes of the
    /// pattern from `body_off`.
    out: Vec<u8>,
    out_pos: usize,
    body_left: u64,
    body_off: u64,
    /// A request answered when its delay is over; nothing after it is parsed until then.
    delayed: Option<Delayed>,
    /// Close once everything is written, for this cause.
    closing: Option<Close>,
    /// Written everything, shut the write side, draining what the client still sends.
    lingering: bool,
    read_eof: bool,
    served: u64,
    deadline: Option<(Instant, Deadline)>,
}

enum ReadOutcome {
    Data(usize),
    Eof,
    /// The read bound is reached: nothing more is read until some of it is answered.
    Full,
}

impl Conn {
    /// Reads, answers and writes until the socket would block, an answer waits on its delay,
    /// or the connection must close (Err, with the cause).
    fn drive(&mut self, ctx: &mut Ctx) -> Result<(), Close> {
        let borrowed_r = self.rbuf.is_empty();
        if borrowed_r {
            std::mem::swap(&mut self.rbuf, &mut ctx.rscratch);
            self.rpos = 0;
            self.rend = 0;
        }
        let borrowed_w = self.out.capacity() == 0;
        if borrowed_w {
            std::mem::swap(&mut self.out, &mut ctx.wscratch);
            self.out.clear();
            self.out_pos = 0;
        }
        let r = self.drive_inner(ctx);
        let bound = ctx.bounds.read_bound();
        if borrowed_r {
            let left = self.rend - self.rpos;
            let own = if left == 0 {
                Vec::new()
            } else {
                let mut v = vec![0; (left * 2).clamp(1024, bound).max(left)];
                v[..left].copy_from_slice(&self.rbuf[self.rpos..self.rend]);
                v
            };
            ctx.rscratch = std::mem::replace(&mut self.rbuf, own);
            self.rpos = 0;
            self.rend = left;
        } else if self.rpos == self.rend {
            self.rbuf = Vec::new();
            self.rpos = 0;
            self.rend = 0;
        }
        if borrowed_w {
            let own = if self.out_pos < self.out.len() {
                self.out[self.out_pos..].to_vec()
            } else {
                Vec::new()
            };
            let mut scratch = std::mem::replace(&mut self.out, own);
            scratch.clear();
            ctx.wscratch = scratch;
            self.out_pos = 0;
        } else if self.out_pos == self.out.len() {
            self.out = Vec::new();
            self.out_pos = 0;
        }
        r
    }

    fn drive_inner(&mut self, ctx: &mut Ctx) -> Result<(), Close> {
        if self.lingering {
            return self.linger(ctx);
        }
        loop {
            let answered = self.produce(ctx);
            if !self.flush(ctx)? {
                return Ok(());
            }
            if answered && self.closing.is_none() {
                // Everything written: more buffered requests may be answered now.
                continue;
            }
            if let Some(cause) = self.closing {
                if self.delayed.is_none() {
                    if self.read_eof || (self.rpos == self.rend && cause == Close::Server) {
                        return Err(cause);
                    }
                    // Unread requests may follow: shut the write side and drain them a while,
                    // so the answer is not lost to a reset.
                    self.lingering = true;
                    self.rpos = self.rend;
                    let _ = self.sock.shutdown(std::net::Shutdown::Write);
                    self.deadline = Some((ctx.now + LINGER, Deadline::Linger));
                    return self.linger(ctx);
                }
            }
            if self.delayed.is_some() {
                return Ok(());
            }
            if self.read_eof {
                return Err(if self.rpos == self.rend {
                    Close::Peer
                } else {
                    Close::Io
                });
            }
            match self.read(ctx) {
                Ok(ReadOutcome::Data(n)) => bump(&ctx.counts.bytes_received, n as u64),
                Ok(ReadOutcome::Eof) => self.read_eof = true,
                Ok(ReadOutcome::Full) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(Close::Tls),
                Err(_) => return Err(Close::Io),
            }
        }
    }

    fn linger(&mut self, ctx: &mut Ctx) -> Result<(), Close> {
        let cause = self.closing.unwrap_or(Close::Server);
        let mut sink = [0u8; 4096];
        loop {
            match self.sock.read(&mut sink) {
                Ok(0) => return Err(cause),
                Ok(n) => bump(&ctx.counts.bytes_received, n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(cause),
            }
        }
    }

    fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Parses and answers the requests buffered, in order, while earlier answers are not
    /// piling up. Whether it answered (or refused) anything.
    fn produce(&mut self, ctx: &mut Ctx) -> bool {
        let mut answered = false;
        if self.delayed.as_ref().is_some_and(|d| d.ready) {
            let d = self.delayed.take().expect("checked");
            self.respond(&d.req, ctx);
            answered = true;
        }
        while self.closing.is_none()
            && self.delayed.is_none()
            && self.body_left == 0
            && self.pending_out() < OUT_HIGH
            && self.rpos < self.rend
        {
            match parse::parse(&self.rbuf[self.rpos..self.rend], &ctx.limits) {
                Parsed::Partial => return answered,
                Parsed::Error(e) => {
                    ctx.counts.refusal(match e {
                        parse::HeadError::HeaderTooLarge { .. } => Refusal::HeaderTooLarge,
                        parse::HeadError::RequestLineTooLong { .. } => Refusal::RequestLineTooLong,
                        parse::HeadError::TooManyHeaders => Refusal::TooManyHeaders,
                        parse::HeadError::Version => Refusal::Version,
                        parse::HeadError::Malformed(_) => Refusal::Malformed,
                        parse::HeadError::Body(_)
                        | parse::HeadError::TransferEncoding
                        | parse::HeadError::ContentLength => Refusal::Body,
                    });
                    let body = format!("{e}\n");
                    head(
                        &mut self.out,
                        e.status(),
                        body.len() as u64,
                        TEXT,
                        false,
                        1,
                        &ctx.date,
                    );
                    self.out.extend_from_slice(body.as_bytes());
                    ctx.counts.response(e.status());
                    self.rpos = self.rend;
                    self.closing = Some(Close::BadRequest);
                    self.deadline = None;
                    return true;
                }
                Parsed::Complete(mut req) => {
                    let len = req.len;
                    self.rpos += len;
                    self.deadline = None;
                    self.served += 1;
                    if ctx
                        .bounds
                        .max_requests_per_connection
                        .is_some_and(|m| self.served >= m)
                    {
                        req.keep_alive = false;
                    }
                    match req.route {
                        Route::Bytes { delay_ms, .. } if delay_ms > 0 => {
                            self.delayed = Some(Delayed {
                                due: ctx.now + Duration::from_millis(delay_ms),
                                req,
                                queued: false,
                                ready: false,
                            });
                            return answered;
                        }
                        _ => {
                            self.respond(&req, ctx);
                            answered = true;
                        }
                    }
                }
            }
        }
        answered
    }

    /// Queues the answer to a request.
    fn respond(&mut self, req: &parse::Request, ctx: &mut Ctx) {
        let keep = req.keep_alive;
        let get = req.method != Method::Head; // whether the body is sent
        let status = match &req.route {
            Route::Bytes { len, .. } => {
                head(&mut self.out, 200, *len, OCTETS, keep, req.minor, &ctx.date);
                if get {
                    if *len <= COPY_BODY {
                        self.out.extend_from_slice(pattern(0, *len));
                    } else {
                        self.body_left = *len;
                        self.body_off = 0;
                    }
                }
                200
            }
            Route::Stats => {
                let body = serde_json::to_vec(&ctx.shared.snapshot()).unwrap_or_default();
                head(
                    &mut self.out,
                    200,
                    body.len() as u64 + 1,
                    JSON,
                    keep,
                    req.minor,
                    &ctx.date,
                );
                if get {
                    self.out.extend_from_slice(&body);
                    self.out.push(b'\n');
                }
                200
            }
            Route::NotFound => {
                let body: &[u8] = b"not found: this server serves /bytes/N and /.netrig/stats\n";
                head(
                    &mut self.out,
                    404,
                    body.len() as u64,
                    TEXT,
                    keep,
                    req.minor,
                    &ctx.date,
                );
                if get {
                    self.out.extend_from_slice(body);
                }
                404
            }
            Route::Refused { status, reason } => {
                ctx.counts.refusal(if *status == 413 {
                    Refusal::BodyTooLarge
                } else {
                    Refusal::BadTarget
                });
                head(
                    &mut self.out,
                    *status,
                    reason.len() as u64 + 1,
                    TEXT,
                    keep,
                    req.minor,
                    &ctx.date,
                );
                if get {
                    self.out.extend_from_slice(reason.as_bytes());
                    self.out.push(b'\n');
                }
                *status
            }
        };
        bump(&ctx.counts.requests, 1);
        ctx.counts.response(status);
        if !keep {
            self.closing = Some(Close::Server);
        }
    }

    /// An answer written at once, best effort, before the connection is closed (408).
    fn refuse_now(&mut self, status: u16, reason: &str, ctx: &mut Ctx) {
        if self.pending_out() > 0
            || self.body_left > 0
            || self.tls.as_ref().is_some_and(|t| t.is_handshaking())
        {
            // Mid-answer there is no place for it; mid-handshake no channel.
            return;
        }
        let mut out = Vec::new();
        head(&mut out, status, reason.len() as u64, TEXT, false, 1, &ctx.date);
        out.extend_from_slice(reason.as_bytes());
        ctx.counts.response(status);
        let n = match &mut self.tls {
            None => self.sock.write(&out).unwrap_or(0),
            Some(tls) => {
                let n = tls.writer().write(&out).unwrap_or(0);
                let _ = tls.write_tls(&mut self.sock);
                n
            }
        };
        bump(&ctx.counts.bytes_sent, n as u64);
    }

    /// Writes what is queued. Ok(true) when everything is written, Ok(false) when the socket
    /// would block.
    fn flush(&mut self, ctx: &mut Ctx) -> Result<bool, Close> {
        if self.tls.is_some() {
            return self.flush_tls(ctx);
        }
        loop {
            let head = &self.out[self.out_pos..];
            let body = pattern(self.body_off, self.body_left);
            if head.is_empty() && body.is_empty() {
                self.out.clear();
                self.out_pos = 0;
                return Ok(true);
            }
            let r = if body.is_empty() {
                self.sock.write(head)
            } else if head.is_empty() {
                self.sock.write(body)
            } else {
                self.sock
                    .write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
            };
            match r {
                Ok(0) => return Err(Close::Io),
                Ok(n) => {
                    bump(&ctx.counts.bytes_sent, n as u64);
                    self.advance(n);
                    if matches!(self.deadline, Some((_, Deadline::Send))) {
                        self.deadline = None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Io),
            }
        }
    }

    fn advance(&mut self, mut n: usize) {
        let h = (self.out.len() - self.out_pos).min(n);
        self.out_pos += h;
        n -= h;
        self.body_off += n as u64;
        self.body_left -= n as u64;
    }

    fn flush_tls(&mut self, ctx: &mut Ctx) -> Result<bool, Close> {
        let tls = self.tls.as_mut().expect("a TLS connection");
        loop {
            // Plaintext into rustls, as much as its buffer takes.
            loop {
                let head = &self.out[self.out_pos..];
                let chunk = if head.is_empty() {
                    pattern(self.body_off, self.body_left)
                } else {
                    head
                };
                if chunk.is_empty() {
                    break;
                }
                match tls.writer().write(chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        bump(&ctx.counts.bytes_sent, n as u64);
                        let h = (self.out.len() - self.out_pos).min(n);
                        self.out_pos += h;
                        self.body_off += (n - h) as u64;
                        self.body_left -= (n - h) as u64;
                    }
                    Err(_) => return Err(Close::Tls),
                }
            }
            let mut progressed = false;
            while tls.wants_write() {
                match tls.write_tls(&mut self.sock) {
                    Ok(0) => return Err(Close::Io),
                    Ok(_) => progressed = true,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Err(Close::Io),
                }
            }
            if progressed && matches!(self.deadline, Some((_, Deadline::Send))) {
                self.deadline = None;
            }
            if self.out_pos == self.out.len() && self.body_left == 0 {
                self.out.clear();
                self.out_pos = 0;
                return Ok(true);
            }
            if !progressed {
                // rustls takes no plaintext yet (handshake under way) and has nothing to send.
                return Ok(false);
            }
        }
    }

    /// Reads into `rbuf[rend..]`, making room first (compacting, or growing up to the bound).
    fn read(&mut self, ctx: &mut Ctx) -> io::Result<ReadOutcome> {
        let bound = ctx.bounds.read_bound();
        if self.rend == self.rbuf.len() {
            if self.rpos > 0 {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            } else if self.rbuf.len() < bound {
                let n = (self.rbuf.len() * 2).clamp(1024, bound);
                self.rbuf.resize(n, 0);
            } else {
                return Ok(ReadOutcome::Full);
            }
        }
        let spare = &mut self.rbuf[self.rend..];
        let n = match &mut self.tls {
            None => self.sock.read(spare)?,
            Some(tls) => read_tls(tls, &mut self.sock, spare)?,
        };
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        self.rend += n;
        Ok(ReadOutcome::Data(n))
    }

    fn update_deadline(&mut self, ctx: &Ctx) {
        let now = ctx.now;
        let b = &ctx.bounds;
        let want = if self.lingering {
            Deadline::Linger
        } else if self.pending_out() > 0 || self.body_left > 0 {
            Deadline::Send
        } else if self.delayed.is_some() {
            self.deadline = None;
            return;
        } else if self.tls.as_ref().is_some_and(|t| t.is_handshaking()) {
            // A TLS handshake is part of the first head: within --header-timeout of the accept.
            Deadline::Header
        } else if self.rpos == self.rend {
            Deadline::Idle
        } else {
            Deadline::Header
        };
        if self.deadline.is_some_and(|(_, k)| k == want) {
            return;
        }
        let after = match want {
            Deadline::Idle => b.idle_timeout,
            Deadline::Header => b.header_timeout,
            Deadline::Send => b.send_timeout,
            Deadline::Linger => LINGER,
        };
        self.deadline = Some((now + after, want));
    }
}

/// Reads plaintext from a TLS connection, reading records from the socket as needed (and
/// writing what the handshake has to say). InvalidData for a TLS failure.
fn read_tls(tls: &mut rustls::ServerConnection, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match tls.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
        match tls.read_tls(sock) {
            Ok(0) => return Ok(0),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = tls.process_new_packets() {
            let _ = tls.write_tls(sock);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        while tls.wants_write() {
            match tls.write_tls(sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
    }
}

const TEXT: &[u8] = b"text/plain";
const OCTETS: &[u8] = b"application/octet-stream";
const JSON: &[u8] = b"application/json";

/// A response head, written by hand into `out`.
fn head(out: &mut Vec<u8>, status: u16, len: u64, ctype: &[u8], keep: bool, minor: u8, date: &DateCache) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(reason(status));
    out.extend_from_slice(b"\r\nServer: netrig\r\nDate: ");
    out.extend_from_slice(&date.text);
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(ctype);
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    if !keep {
        out.extend_from_slice(b"\r\nConnection: close");
    } else if minor == 0 {
        out.extend_from_slice(b"\r\nConnection: keep-alive");
    }
    out.extend_from_slice(b"\r\n\r\n");
}

fn reason(status: u16) -> &'static [u8] {
    match status {
        200 => b"200 OK",
        400 => b"400 Bad Request",
        403 => b"403 Forbidden",
        404 => b"404 Not Found",
        405 => b"405 Method Not Allowed",
        408 => b"408 Request Timeout",
        413 => b"413 Content Too Large",
        414 => b"414 URI Too Long",
        431 => b"431 Request Header Fields Too Large",
        501 => b"501 Not Implemented",
        503 => b"503 Service Unavailable",
        505 => b"505 HTTP Version Not Supported",
        _ => b"500 Internal Server Error",
    }
}

/// The Date header's value, formatted once a second.
struct DateCache {
    secs: u64,
    text: [u8; 29],
}

impl Default for DateCache {
    fn default() -> Self {
        let mut d = DateCache {
            secs: u64::MAX,
            text: [b' '; 29],
        };
        d.refresh();
        d
    }
}

impl DateCache {
    fn refresh(&mut self) {
        let secs = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.secs {
            self.secs = secs;
            self.text = http_date(secs);
        }
    }
}

/// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
pub fn http_date(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
    ];
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = (yoe + era * 400 + i64::from(m <= 2)).clamp(0, 9999) as u64;
    let mut t = [b' '; 29];
    t[..3].copy_from_slice(DAYS[(days + 4).rem_euclid(7) as usize]);
    t[3] = b',';
    let two = |t: &mut [u8], at: usize, v: u64| {
        t[at] = b'0' + (v / 10 % 10) as u8;
        t[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut t, 5, d as u64);
    t[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    two(&mut t, 12, y / 100);
    two(&mut t, 14, y % 100);
    two(&mut t, 17, sod / 3600);
    t[19] = b':';
    two(&mut t, 20, sod / 60 % 60);
    t[22] = b':';
    two(&mut t, 23, sod % 60);
    t[26..29].copy_from_slice(b"GMT");
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_imf_fixdate() {
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn the_pattern_continues_across_chunks() {
        let mut off = 0u64;
        let mut left = 200_000u64;
        while left > 0 {
            let p = pattern(off, left);
            for (i, &b) in p.iter().enumerate() {
                assert_eq!(b, body_byte(off + i as u64));
            }
            // Take an uneven part, as a short write would.
            let n = (p.len() as u64).min(7_777);
            off += n;
            left -= n;
        }
    }
}
