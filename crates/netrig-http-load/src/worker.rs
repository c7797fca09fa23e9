//! One load thread: its connections on one mio event loop.
//!
//! The hot path is written here by hand (no async runtime, no allocation
//! per request): one read buffer per thread, the request's bytes shared,
//! counts in plain integers published to atomics for interval samples.

use crate::parse::{ParseError, Response, ResponseParser};
use crate::{Cause, Config, Counts, Ended, Error, IntervalSample, Load, Report, Schedule, Shared, ThreadCpu};
use mio::net::TcpStream;
use mio::{Interest, Poll, Token};
use netrig_io::{Handler, Io, LoopError, Now, Reactor, Ready, Wake};
use netrig_metrics::LatencyRecorder;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often requests in flight are checked against the timeout.
const TIMEOUT_SCAN: Duration = Duration::from_millis(10);
/// A connection whose connect failed waits this long before the next try
/// (closed loop), so a refusing server is not hammered in a tight loop.
const RETRY_AFTER: Duration = Duration::from_millis(10);
/// The read buffer of one thread.
const READ_BUF: usize = 64 * 1024;

/// What one thread does.
pub(crate) struct Plan {
    server: SocketAddr,
    bind: Option<std::net::IpAddr>,
    request: Arc<[u8]>,
    head_request: bool,
    conns: u32,
    new_conn: bool,
    /// This thread's share of the rate.
    rate: Option<(f64, bool)>,
    timeout: Duration,
    bounds: crate::Bounds,
    tls: Option<crate::tls::Tls>,
    nodelay: bool,
    omit: Duration,
    duration: Duration,
    counted: bool,
    seed: u64,
}

impl Plan {
    pub(crate) fn new(c: &Config, i: usize, threads: usize, conns: u32) -> Plan {
        Plan {
            server: c.server,
            bind: c.bind,
            request: Arc::from(c.request.as_slice()),
            head_request: c.head_request,
            conns,
            new_conn: c.new_conn,
            rate: match c.load {
                Load::Closed => None,
                Load::Open { rate, poisson } => Some((rate / threads as f64, poisson)),
            },
            timeout: c.timeout,
            bounds: c.bounds,
            tls: c.tls.clone(),
            nodelay: c.nodelay,
            omit: c.omit,
            duration: c.duration,
            counted: c.requests.is_some(),
            seed: 0x9e37_79b9_7f4a_7c15 ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No socket.
    Closed,
    Connecting,
    /// Connected, no request on it.
    Ready,
    /// Writing the request from this offset.
    Sending(usize),
    /// The request is written; the response is coming.
    Receiving,
}

struct Conn {
    sock: Option<TcpStream>,
    tls: Option<Box<rustls::ClientConnection>>,
    phase: Phase,
    parser: ResponseParser,
    /// A request is assigned to it.
    busy: bool,
    /// Where its latency is timed from.
    origin: Instant,
    /// Its timeout.
    deadline: Instant,
}

/// One thread's end of the run.
pub(crate) struct End {
    window: Counts,
    total: Counts,
    latency: LatencyRecorder,
    schedule: Option<Schedule>,
    behind_sum_us: f64,
    behind_n: u64,
    last_done: Option<Instant>,
    cpu: ThreadCpu,
    abandoned: u64,
    budget_left: bool,
    tls_errors: std::collections::BTreeMap<String, u64>,
}

pub(crate) struct Worker {
    p: Plan,
    index: usize,
    /// The thread's event loop, until it runs. Open loop: with the core's
    /// timer, which wakes the poll when the next request is due, to the
    /// microsecond (epoll's own timeout rounds up to the millisecond, which
    /// would add up to 1 ms of the generator's lateness to each latency).
    reactor: Option<Reactor>,
    /// The loop's registry (a handle on the reactor's poll).
    registry: mio::Registry,
    conns: Vec<Conn>,
    buf: Vec<u8>,
    /// Open loop: connections free for the next request.
    idle: Vec<usize>,
    /// Closed loop: connections to start again after a failed connect.
    retry: VecDeque<(Instant, usize)>,
    /// Open loop: due times of requests waiting for a connection.
    backlog: VecDeque<Instant>,
    next_due: Option<Instant>,
    rng: fastrand::Rng,
    in_flight: usize,
    window_start: Instant,
    window_end: Option<Instant>,
    end: End,
    stopping: bool,
    /// HTTPS: TLS failures not yet added to the shared count; whether the
    /// last was the server's certificate; whether this thread has told the
    /// others that a handshake succeeded.
    tls_fresh: u64,
    tls_cert: bool,
    tls_ok_told: bool,
}

impl Worker {
    pub(crate) fn new(p: Plan, index: usize, _shared: &Shared) -> Result<Worker, Error> {
        let poll = Poll::new().map_err(|e| Error::Thread(format!("epoll: {e}")))?;
        let conns = (0..p.conns)
            .map(|_| Conn {
                sock: None,
                tls: None,
                phase: Phase::Closed,
                parser: ResponseParser::new(p.bounds, p.head_request),
                busy: false,
                origin: Instant::now(),
                deadline: Instant::now(),
            })
            .collect();
        let now = Instant::now();
        let registry = poll
            .registry()
            .try_clone()
            .map_err(|e| Error::Thread(format!("epoll: {e}")))?;
        let reactor =
            Reactor::with_poll(poll, p.rate.is_some()).map_err(|e| Error::Thread(format!("timerfd: {e}")))?;
        Ok(Worker {
            index,
            reactor: Some(reactor),
            registry,
            conns,
            buf: vec![0; READ_BUF],
            idle: Vec::new(),
            retry: VecDeque::new(),
            backlog: VecDeque::new(),
            next_due: None,
            rng: fastrand::Rng::with_seed(p.seed),
            in_flight: 0,
            window_start: now,
            window_end: None,
            end: End {
                window: Counts::default(),
                total: Counts::default(),
                latency: LatencyRecorder::new(),
                schedule: p.rate.map(|_| Schedule::default()),
                behind_sum_us: 0.0,
                behind_n: 0,
                last_done: None,
                cpu: ThreadCpu {
                    thread: index as u32,
                    connections: p.conns,
                    cpu_s: 0.0,
                    busy_pct: 0.0,
                },
                abandoned: 0,
                budget_left: false,
                tls_errors: Default::default(),
            },
            stopping: false,
            tls_fresh: 0,
            tls_cert: false,
            tls_ok_told: false,
            p,
        })
    }

    fn in_window(&self, t: Instant) -> bool {
        t >= self.window_start && self.window_end.is_none_or(|e| t < e)
    }

    pub(crate) fn run(mut self, shared: &Shared) -> Result<End, Error> {
        let start = *shared.start.get().expect("the start is set before go");
        let cpu0 = netrig_io::thread_cpu_time();
        self.window_start = start + self.p.omit;
        self.window_end = (!self.p.counted).then(|| start + self.p.duration);
        let open = self.p.rate.is_some();
        if open {
            self.next_due = Some(start);
            self.idle = (0..self.conns.len()).rev().collect();
            if !self.p.new_conn {
                // Connected ahead, as wrk2 does: the schedule's first
                // requests do not wait for handshakes.
                for i in 0..self.conns.len() {
                    if let Err(c) = self.connect(i, start) {
                        self.fail(i, c, Instant::now());
                    }
                }
            }
        } else {
            for i in 0..self.conns.len() {
                self.start_request(i, shared, Instant::now());
            }
        }
        let mut reactor = self.reactor.take().expect("a worker runs once");
        let running = Running {
            next_scan: start + TIMEOUT_SCAN,
            done: false,
            w: self,
            shared,
            open,
            start,
            cpu0,
        };
        reactor.run(running, &shared.stop, None).map_err(|e| match e {
            LoopError::Poll(e) => Error::Thread(format!("epoll_wait: {e}")),
            LoopError::Handler(never) => match never {},
        })
    }

    /// The run's end, once the loop has ended: what was left in flight or
    /// unsent, the schedule's lateness, the thread's CPU.
    fn end_of_run(mut self, shared: &Shared, start: Instant, cpu0: Duration) -> End {
        let now = Instant::now();
        self.end.abandoned = self.in_flight as u64;
        if let Some(s) = &mut self.end.schedule {
            let (ws, we) = (self.window_start, self.window_end);
            s.unsent += self
                .backlog
                .iter()
                .filter(|d| **d >= ws && we.is_none_or(|e| **d < e))
                .count() as u64;
            s.mean_behind_us = if self.end.behind_n > 0 {
                self.end.behind_sum_us / self.end.behind_n as f64
            } else {
                0.0
            };
        }
        self.end.budget_left = shared
            .budget
            .as_ref()
            .is_some_and(|b| b.load(Ordering::Relaxed) > 0);
        let cpu_s = (netrig_io::thread_cpu_time().saturating_sub(cpu0)).as_secs_f64();
        let ran = (now - start).as_secs_f64();
        self.end.cpu.cpu_s = cpu_s;
        self.end.cpu.busy_pct = if ran > 0.0 { cpu_s / ran * 100.0 } else { 0.0 };
        self.publish(shared);
        self.end
    }

    /// The loop ends now: stopping, with nothing in flight or past the
    /// drain's deadline; or, counted, every request of the budget answered.
    fn finished(&self, io: &Io<'_>, shared: &Shared, now: Instant) -> bool {
        match io.draining() {
            true => self.in_flight == 0 || io.drain_over(now),
            false => {
                self.p.counted && self.in_flight == 0 && self.backlog.is_empty() && self.budget_gone(shared)
            }
        }
    }

    /// Adds this thread's TLS failures to the shared count; when they reach
    /// the limit before any handshake succeeded anywhere, the run stops with
    /// the commonest reason (every connection fails the same way: curl and
    /// wrk stop too).
    fn tls_give_up(&mut self, shared: &Shared) {
        let n = shared.tls_failed.fetch_add(self.tls_fresh, Ordering::Relaxed) + self.tls_fresh;
        self.tls_fresh = 0;
        if n >= shared.tls_give_up && !shared.tls_ok.load(Ordering::Relaxed) {
            if let Some((reason, _)) = self.end.tls_errors.iter().max_by_key(|(_, n)| **n) {
                let _ = shared.fatal.set((reason.clone(), self.tls_cert));
            }
            shared.stop.store(true, Ordering::Relaxed);
        }
    }

    fn budget_gone(&self, shared: &Shared) -> bool {
        shared
            .budget
            .as_ref()
            .is_some_and(|b| b.load(Ordering::Relaxed) == 0)
    }

    fn publish(&self, shared: &Shared) {
        let l = &shared.live[self.index];
        let t = &self.end.total;
        l.sent.store(t.sent, Ordering::Relaxed);
        l.responses.store(t.responses, Ordering::Relaxed);
        l.successes.store(t.successes, Ordering::Relaxed);
        l.bytes_in.store(t.bytes_in, Ordering::Relaxed);
        l.errors.store(t.errors.total(), Ordering::Relaxed);
    }

    /// Open loop: requests due by `now` join the backlog, and waiting ones
    /// go out on free connections.
    fn schedule(&mut self, shared: &Shared, now: Instant) {
        let Some((rate, poisson)) = self.p.rate else {
            return;
        };
        while let Some(due) = self.next_due {
            if due > now {
                break;
            }
            if !shared.take() {
                self.next_due = None;
                break;
            }
            let in_window = self.in_window(due);
            if let Some(s) = &mut self.end.schedule {
                if in_window {
                    s.due += 1;
                }
                if self.backlog.len() >= crate::MAX_BACKLOG {
                    if in_window {
                        s.skipped += 1;
                    }
                } else {
                    self.backlog.push_back(due);
                }
            }
            let gap = if poisson {
                -(1.0 - self.rng.f64()).ln() / rate
            } else {
                1.0 / rate
            };
            self.next_due = Some(due + Duration::from_secs_f64(gap));
        }
        while !self.backlog.is_empty() {
            let Some(i) = self.idle.pop() else { break };
            let due = self.backlog.pop_front().expect("not empty");
            let behind = now.saturating_duration_since(due);
            if self.in_window(due) {
                let s = self.end.schedule.as_mut().expect("open loop");
                let us = behind.as_secs_f64() * 1e6;
                if behind > crate::LATE {
                    s.late += 1;
                }
                s.max_behind_us = s.max_behind_us.max(us);
                self.end.behind_sum_us += us;
                self.end.behind_n += 1;
            }
            self.assign(i, due, now);
        }
    }

    /// Closed loop: connection `i` starts its next request, if any is left.
    fn start_request(&mut self, i: usize, shared: &Shared, now: Instant) {
        if self.stopping || !shared.take() {
            return;
        }
        self.assign(i, now, now);
    }

    /// A request, timed from `origin`, goes on connection `i`.
    fn assign(&mut self, i: usize, origin: Instant, now: Instant) {
        let c = &mut self.conns[i];
        c.busy = true;
        c.origin = origin;
        c.deadline = now + self.p.timeout;
        self.in_flight += 1;
        match c.phase {
            Phase::Closed => {
                if let Err(cause) = self.connect(i, now) {
                    self.fail(i, cause, now);
                }
            }
            Phase::Connecting => {}
            Phase::Ready => {
                self.begin_send(i);
                self.drive(i, now);
            }
            Phase::Sending(_) | Phase::Receiving => unreachable!("a busy connection is not given a request"),
        }
    }

    fn connect(&mut self, i: usize, now: Instant) -> Result<(), Cause> {
        let mut s = match self.p.bind {
            None => TcpStream::connect(self.p.server),
            Some(ip) => connect_from(ip, self.p.server),
        }
        .map_err(|e| Cause::of(&e))?;
        if self.p.nodelay {
            let _ = s.set_nodelay(true);
        }
        self.registry
            .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| Cause::of(&e))?;
        let c = &mut self.conns[i];
        c.sock = Some(s);
        c.phase = Phase::Connecting;
        c.parser.reset();
        if !c.busy {
            c.deadline = now + self.p.timeout;
        }
        Ok(())
    }

    fn begin_send(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.phase = Phase::Sending(0);
        if let Some(t) = &mut c.tls {
            // rustls keeps it until the handshake lets it go.
            let _ = t.writer().write_all(&self.p.request);
        }
    }

    fn on_ready(&mut self, i: usize, shared: &Shared) {
        let now = Instant::now();
        if self.conns[i].phase == Phase::Connecting {
            let c = &mut self.conns[i];
            let Some(s) = &c.sock else { return };
            match s.take_error() {
                Ok(Some(e)) | Err(e) => return self.after_fail(i, Cause::of(&e), shared, now),
                Ok(None) => {}
            }
            match s.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => return self.after_fail(i, Cause::of(&e), shared, now),
            }
            self.end.total.connections += 1;
            if now >= self.window_start && self.window_end.is_none_or(|e| now < e) {
                self.end.window.connections += 1;
            }
            if let Some(t) = &self.p.tls {
                match t.connect() {
                    Ok(tc) => c.tls = Some(Box::new(tc)),
                    Err(e) => {
                        let cause = self.tls_failure(&e);
                        return self.after_fail(i, cause, shared, now);
                    }
                }
            }
            c.phase = Phase::Ready;
            if c.busy {
                self.begin_send(i);
            } else if self.p.tls.is_some() {
                // Handshake ahead of the first request.
                if let Err(cause) = self.pump_tls(i) {
                    return self.after_fail(i, cause, shared, now);
                }
                return;
            } else {
                return;
            }
        }
        self.drive_shared(i, shared, now);
    }

    fn drive(&mut self, i: usize, now: Instant) {
        // Only called right after a request is assigned: no completion can
        // need the shared state before the connection is read.
        if let Err(cause) = self.send(i, now) {
            self.fail(i, cause, now);
        }
    }

    fn drive_shared(&mut self, i: usize, shared: &Shared, now: Instant) {
        if let Err(cause) = self.send(i, now) {
            return self.after_fail(i, cause, shared, now);
        }
        self.receive(i, shared);
    }

    fn pump_tls(&mut self, i: usize) -> Result<crate::tls::Pumped, Cause> {
        let c = &mut self.conns[i];
        let (Some(t), Some(s)) = (&mut c.tls, &mut c.sock) else {
            return Ok(crate::tls::Pumped::Blocked);
        };
        match crate::tls::pump(t, s) {
            Ok(p) => Ok(p),
            Err(e) => Err(self.tls_failure(&e)),
        }
    }

    /// A TLS connection's error: rustls's refusals counted by reason (and
    /// toward giving up), the socket's by errno.
    fn tls_failure(&mut self, e: &io::Error) -> Cause {
        let Some(reason) = crate::tls::reason(e) else {
            return tls_cause(e);
        };
        *self.end.tls_errors.entry(reason).or_default() += 1;
        self.tls_fresh += 1;
        self.tls_cert = e
            .get_ref()
            .and_then(|x| x.downcast_ref::<rustls::Error>())
            .is_some_and(crate::tls::is_certificate);
        Cause::Other
    }

    /// Writes what is left of the request.
    fn send(&mut self, i: usize, now: Instant) -> Result<(), Cause> {
        let Phase::Sending(off) = self.conns[i].phase else {
            if self.conns[i].tls.is_some() && self.conns[i].sock.is_some() {
                self.pump_tls(i)?;
            }
            return Ok(());
        };
        let len = self.p.request.len();
        if self.conns[i].tls.is_some() {
            self.pump_tls(i)?;
            let t = self.conns[i].tls.as_ref().expect("tls");
            if t.is_handshaking() || t.wants_write() {
                return Ok(());
            }
        } else {
            let mut off = off;
            let c = &mut self.conns[i];
            let s = c.sock.as_mut().expect("a sending connection has a socket");
            while off < len {
                match s.write(&self.p.request[off..]) {
                    Ok(0) => return Err(Cause::Reset),
                    Ok(n) => off += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        c.phase = Phase::Sending(off);
                        return Ok(());
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Cause::of(&e)),
                }
            }
        }
        self.conns[i].phase = Phase::Receiving;
        self.end.total.sent += 1;
        self.end.total.bytes_out += len as u64;
        if self.in_window(now) {
            self.end.window.sent += 1;
            self.end.window.bytes_out += len as u64;
        }
        Ok(())
    }

    /// Reads what the connection has and parses it.
    fn receive(&mut self, i: usize, shared: &Shared) {
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.receive_into(i, shared, &mut buf);
        self.buf = buf;
        if let Err(cause) = r {
            self.after_fail(i, cause, shared, Instant::now());
        }
    }

    fn receive_into(&mut self, i: usize, shared: &Shared, buf: &mut [u8]) -> Result<(), Cause> {
        loop {
            if self.conns[i].sock.is_none() {
                return Ok(());
            }
            let tls = self.conns[i].tls.is_some();
            let pumped = if tls { Some(self.pump_tls(i)?) } else { None };
            let c = &mut self.conns[i];
            let r = match (&mut c.tls, &mut c.sock) {
                (Some(t), _) => match t.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => match pumped {
                        Some(crate::tls::Pumped::Eof) => Ok(0),
                        Some(crate::tls::Pumped::More) => continue,
                        _ => return Ok(()),
                    },
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                    other => other,
                },
                (None, Some(s)) => s.read(buf),
                (None, None) => return Ok(()),
            };
            let n = match r {
                Ok(0) => {
                    return self.closed_by_server(i, shared);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(if tls { tls_cause(&e) } else { Cause::of(&e) }),
            };
            let mut at = 0;
            while at < n {
                if !self.conns[i].busy || self.conns[i].phase != Phase::Receiving {
                    // Bytes before the request was written, or after its
                    // response: nobody asked for them.
                    return Err(Cause::BadResponse);
                }
                let (took, done) = self.conns[i].parser.feed(&buf[at..n]).map_err(bad)?;
                at += took;
                if let Some(resp) = done {
                    // Bytes after the response nobody asked for (HTTP/1.1, one request at a
                    // time): this request's exchange was bad. Said before complete(), which may
                    // write the next request, so that the error is charged to this one.
                    if at < n {
                        return Err(Cause::BadResponse);
                    }
                    self.complete(i, resp, shared);
                    if self.conns[i].sock.is_none() || self.conns[i].phase == Phase::Closed {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The server closed the connection.
    fn closed_by_server(&mut self, i: usize, shared: &Shared) -> Result<(), Cause> {
        let c = &mut self.conns[i];
        if c.busy && c.phase == Phase::Receiving {
            match c.parser.eof() {
                Ok(Some(resp)) => {
                    self.complete(i, resp, shared);
                    self.close(i);
                    return Ok(());
                }
                Ok(None) | Err(ParseError::Truncated) => return Err(Cause::Reset),
                Err(_) => return Err(Cause::BadResponse),
            }
        }
        if c.busy {
            return Err(Cause::Reset);
        }
        // An idle keep-alive connection the server let go.
        self.close(i);
        if self.p.rate.is_none() {
            // Closed loop: an idle connection is one whose requests are over.
        }
        Ok(())
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if let Some(mut s) = c.sock.take() {
            let _ = self.registry.deregister(&mut s);
        }
        c.tls = None;
        c.phase = Phase::Closed;
        c.parser.reset();
    }

    /// A whole response on connection `i`.
    fn complete(&mut self, i: usize, r: Response, shared: &Shared) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        c.busy = false;
        c.phase = Phase::Ready;
        self.in_flight -= 1;
        let latency = now.saturating_duration_since(c.origin);
        let bytes = r.head_bytes + r.body_bytes;
        let in_window = now >= self.window_start && self.window_end.is_none_or(|e| now < e);
        for (counts, counted) in [(&mut self.end.total, true), (&mut self.end.window, in_window)] {
            if !counted {
                continue;
            }
            counts.responses += 1;
            counts.successes += u64::from((200..400).contains(&r.status));
            counts.bytes_in += bytes;
            counts.body_bytes += r.body_bytes;
            *counts.statuses.entry(r.status).or_default() += 1;
        }
        if self.in_window(now) {
            self.end
                .latency
                .record(latency.as_nanos().min(u128::from(u64::MAX)) as u64);
        }
        self.end.last_done = Some(now);
        if self.p.tls.is_some() && !self.tls_ok_told {
            shared.tls_ok.store(true, Ordering::Relaxed);
            self.tls_ok_told = true;
        }
        if r.close || self.p.new_conn {
            self.close(i);
        }
        self.next_after(i, shared, now);
    }

    /// Connection `i` is free again: its next request (closed loop), or
    /// back to the pool (open loop).
    fn next_after(&mut self, i: usize, shared: &Shared, now: Instant) {
        if self.p.rate.is_some() {
            self.idle.push(i);
            if !self.stopping {
                self.schedule(shared, now);
            }
        } else {
            self.start_request(i, shared, now);
        }
    }

    /// A failure on connection `i`: counted, the connection closed.
    fn fail(&mut self, i: usize, cause: Cause, now: Instant) {
        let busy = self.conns[i].busy;
        let connecting = self.conns[i].phase == Phase::Connecting || self.conns[i].sock.is_none();
        self.close(i);
        self.conns[i].busy = false;
        if busy {
            self.in_flight -= 1;
            self.end.total.errors.count(cause);
            if self.in_window(now) {
                self.end.window.errors.count(cause);
            }
            self.end.last_done = Some(now);
        } else if connecting && self.p.rate.is_some() {
            // A connect ahead of any request failed: counted, once.
            self.end.total.errors.count(cause);
            if self.in_window(now) {
                self.end.window.errors.count(cause);
            }
        }
        if self.p.rate.is_none() {
            let at = if connecting { now + RETRY_AFTER } else { now };
            self.retry.push_back((at, i));
        } else if busy {
            // Open loop: back to the pool it was taken from (a connection
            // without a request never left it).
            self.idle.push(i);
        }
    }

    /// [`Worker::fail`], then the connection's next request.
    fn after_fail(&mut self, i: usize, cause: Cause, shared: &Shared, now: Instant) {
        self.fail(i, cause, now);
        if self.p.rate.is_some() && !self.stopping {
            self.schedule(shared, now);
        }
    }

    fn scan_timeouts(&mut self, shared: &Shared, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let waiting = c.busy || c.phase == Phase::Connecting;
            if waiting && now >= c.deadline {
                self.after_fail(i, Cause::Timeout, shared, now);
            }
        }
    }
}

/// A worker while its loop runs, with what the loop needs beside it.
struct Running<'a> {
    w: Worker,
    shared: &'a Shared,
    /// Open loop (a rate), else closed.
    open: bool,
    start: Instant,
    /// The thread's CPU clock at the start.
    cpu0: Duration,
    /// When requests in flight are next checked against the timeout.
    next_scan: Instant,
    /// This turn found the loop [finished](Worker::finished), before its
    /// timeout scan (whose failures wait for the next turn's look).
    done: bool,
}

/// One load thread on the I/O core: each turn issues what is due (open
/// loop) or retries failed connects (closed loop), checks timeouts and
/// sleeps until the next deadline; the stop drains what is in flight for up
/// to the request timeout.
impl Handler for Running<'_> {
    type Error = std::convert::Infallible;
    type Output = End;

    fn on_ready(&mut self, _io: &Io<'_>, i: usize, _ready: Ready) -> Result<(), Self::Error> {
        if i < self.w.conns.len() {
            self.w.on_ready(i, self.shared);
        }
        Ok(())
    }

    fn on_events_done(&mut self, _io: &Io<'_>) -> Result<(), Self::Error> {
        self.w.publish(self.shared);
        if self.w.tls_fresh > 0 {
            self.w.tls_give_up(self.shared);
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Option<Duration>, Self::Error> {
        let (w, shared, now) = (&mut self.w, self.shared, now.get());
        if !io.draining() {
            if self.open {
                w.schedule(shared, now);
            } else {
                while let Some(&(at, i)) = w.retry.front() {
                    if at > now {
                        break;
                    }
                    w.retry.pop_front();
                    w.start_request(i, shared, now);
                }
            }
        }
        self.done = w.finished(io, shared, now);
        if self.done {
            return Ok(Some(Duration::ZERO));
        }
        if now >= self.next_scan {
            w.scan_timeouts(shared, now);
            self.next_scan = now + TIMEOUT_SCAN;
        }
        let mut wake = Wake::new(now);
        wake.at(self.next_scan);
        if !io.draining() {
            if let Some(d) = w.next_due {
                match io.timer {
                    // The timer wakes the poll at `d`; the poll's own
                    // timeout stays a millisecond behind, as a backstop.
                    Some(t) => {
                        t.arm_at(d);
                        wake.after(d.saturating_duration_since(now) + Duration::from_millis(1));
                    }
                    None => wake.at(d),
                }
            }
            if let Some(&(at, _)) = w.retry.front() {
                wake.at(at);
            }
        }
        Ok(wake.wait())
    }

    /// The stop: no new requests; those in flight get up to the timeout.
    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        self.w.stopping = true;
        self.w.p.timeout
    }

    fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
        self.done
    }

    fn finish(self, _io: &Io<'_>) -> End {
        self.w.end_of_run(self.shared, self.start, self.cpu0)
    }
}

fn bad(_: ParseError) -> Cause {
    Cause::BadResponse
}

fn tls_cause(e: &io::Error) -> Cause {
    if e.raw_os_error().is_some() {
        Cause::of(e)
    } else {
        Cause::Other
    }
}

/// The threads' ends merged into the run's report.
pub(crate) fn merge(c: &Config, start: Instant, ends: Vec<End>, intervals: Vec<IntervalSample>) -> Report {
    let mut window = Counts::default();
    let mut total = Counts::default();
    let mut latency = LatencyRecorder::new();
    let mut schedule: Option<Schedule> = None;
    let mut behind = (0.0, 0u64);
    let mut threads = Vec::new();
    let mut last: Option<Instant> = None;
    let mut abandoned = 0;
    let mut budget_left = false;
    let mut tls_errors = std::collections::BTreeMap::new();
    for e in ends {
        for (r, n) in &e.tls_errors {
            *tls_errors.entry(r.clone()).or_default() += n;
        }
        window.add(&e.window);
        total.add(&e.total);
        latency.merge(&e.latency);
        if let Some(s) = &e.schedule {
            let m = schedule.get_or_insert_with(Schedule::default);
            m.due += s.due;
            m.late += s.late;
            m.skipped += s.skipped;
            m.unsent += s.unsent;
            m.max_behind_us = m.max_behind_us.max(s.max_behind_us);
            behind.0 += e.behind_sum_us;
            behind.1 += e.behind_n;
        }
        threads.push(e.cpu);
        last = last.max(e.last_done);
        abandoned += e.abandoned;
        budget_left |= e.budget_left;
    }
    if let Some(s) = &mut schedule {
        s.mean_behind_us = if behind.1 > 0 {
            behind.0 / behind.1 as f64
        } else {
            0.0
        };
    }
    let (window_s, ended) = match c.requests {
        None => ((c.duration - c.omit).as_secs_f64(), Ended::Duration),
        Some(_) => {
            let w = last.map_or(0.0, |l| (l - start).as_secs_f64());
            let cut = budget_left
                || abandoned > 0
                || window.responses + window.errors.total() < c.requests.unwrap_or(0);
            (w, if cut { Ended::CountCutShort } else { Ended::Count })
        }
    };
    Report {
        window_start_s: c.omit.as_secs_f64(),
        window_s,
        window,
        total,
        latency,
        schedule,
        intervals,
        threads,
        ended,
        tls_errors,
        abandoned,
        cpu: Err("not measured".into()),
    }
}

/// A non-blocking connect from `ip` (any port: the kernel picks one at
/// connect time, IP_BIND_ADDRESS_NO_PORT, so one address's ports serve every
/// server address). EADDRNOTAVAIL when its ports are used up.
fn connect_from(ip: std::net::IpAddr, server: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let s = Socket::new(
        Domain::for_address(server),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: a live socket, and a c_int option whose size is given. A
        // kernel without the option binds a port at once: fewer connections
        // per address, nothing wrong.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    s.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    match s.connect(&SockAddr::from(server)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(std::net::TcpStream::from(s)))
}
