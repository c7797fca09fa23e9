//! Request/response on persistent TCP connections (netperf TCP_RR, sockperf
//! ping-pong), closed or open loop.
//!
//! The requester sends `request_size` bytes and waits for `response_size`
//! bytes back; the responder answers every whole request it reads. Closed
//! loop keeps `burst` transactions in flight per flow. Open loop (`rate`)
//! issues requests on a schedule whatever the responses do, and times each
//! transaction from when its request was *due*, not from when it left: a
//! stalled responder then shows in the latency instead of silently slowing
//! the generator (coordinated omission). How far sends fell behind their
//! schedule is recorded too.

use crate::flow::SocketHandle;
use crate::flow::{ScheduleStats, WorkerEnd};
use crate::sockopt;
use crate::workload::{WorkerControl, Workload};
use crate::{EngineError, Flow, FlowEnd};
use mio::{Events, Interest, Poll, Token};
use netrig_metrics::LatencyRecorder;
use netrig_proto::report::{BufPair, Role};
use netrig_proto::spec::MAX_IN_FLIGHT;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The request/response workload's parameters.
#[derive(Debug, Clone)]
pub struct RrWorkload {
    pub request_size: usize,
    pub response_size: usize,
    pub burst: u32,
    pub rate: Option<f64>,
    pub poisson: bool,
}

/// A send that starts more than this after it was due counts as late.
const LATE: Duration = Duration::from_millis(1);
/// Token of the worker's timer in its event loop.
const TIMER: Token = Token(usize::MAX);
/// Requests due within this are issued now rather than slept for.
const SPIN: Duration = Duration::from_micros(20);

/// A timerfd in the event loop: epoll's own timeout has millisecond
/// resolution, far too coarse for an open-loop schedule.
pub(crate) struct Timer {
    pub(crate) fd: std::os::fd::OwnedFd,
}

impl Timer {
    pub(crate) fn new() -> io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the result is checked before use.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Precise wake-ups for this thread (the default slack is 50 µs).
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Timer {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Fires once after `after` (at least 1 ns).
    pub(crate) fn arm(&self, after: Duration) {
        use std::os::fd::AsRawFd;
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and pointers.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Consumes an expiry so the descriptor is not readable again until re-armed.
    pub(crate) fn clear(&self) {
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 8];
        // SAFETY: valid descriptor, 8-byte buffer as timerfd requires.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

struct Conn {
    flow: Flow,
    sock: SocketHandle,
    done: bool,
    draining: bool,
    bytes: u64,
    transactions: u64,
    done_at: Option<Instant>,
    final_buffers: Option<BufPair>,
    // Requester.
    /// When each issued transaction started (sent, or due in open loop), oldest first.
    starts: VecDeque<Instant>,
    /// Issued requests not yet completely written (the newest `to_send` of `starts`
    /// in open loop; counted separately in closed loop, where a start is taken at the first byte).
    to_send: u64,
    send_off: usize,
    resp_got: usize,
    next_due: Option<Instant>,
    // Responder.
    req_got: usize,
    owed: u64,
    resp_off: usize,
}

impl Conn {
    fn io_error(&self, what: &str, e: io::Error) -> EngineError {
        EngineError::Flow {
            flow: self.flow.id,
            direction: self.flow.direction.name(),
            what: format!("{what} after {} transactions", self.transactions),
            error: e,
        }
    }

    fn finish(&mut self, poll: &Poll) {
        if !self.done {
            self.done = true;
            self.done_at.get_or_insert_with(Instant::now);
            self.final_buffers
                .get_or_insert_with(|| sockopt::buffers(&self.flow.socket));
            let _ = poll.registry().deregister(&mut self.sock);
        }
    }
}

/// Per-worker state shared by the handlers.
struct Ctx<'a> {
    ctl: &'a WorkerControl,
    latency: LatencyRecorder,
    schedule: ScheduleStats,
    open_loop: bool,
    rng: fastrand::Rng,
}

/// The time to the next request of an open-loop schedule at `rate` per
/// second: fixed, or exponential (a Poisson process).
pub(crate) fn next_gap(rate: f64, poisson: bool, rng: &mut fastrand::Rng) -> Duration {
    let mean = 1.0 / rate.max(1e-9);
    let secs = if poisson {
        // Exponential inter-arrival: -ln(U) / rate, U in (0, 1].
        -(1.0 - rng.f64()).ln() * mean
    } else {
        mean
    };
    Duration::from_secs_f64(secs.min(3600.0))
}

impl RrWorkload {
    fn gap(&self, rng: &mut fastrand::Rng) -> Duration {
        next_gap(self.rate.unwrap_or(1.0), self.poisson, rng)
    }
}

impl Workload for RrWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        let mut poll = Poll::new().map_err(setup)?;
        let open_loop = self.rate.is_some();
        let mut cx = Ctx {
            ctl,
            latency: LatencyRecorder::new(),
            schedule: ScheduleStats::default(),
            open_loop,
            rng: fastrand::Rng::new(),
        };
        let mut timers: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
        let timer = if open_loop {
            let t = Timer::new().map_err(setup)?;
            use std::os::fd::AsRawFd;
            poll.registry()
                .register(
                    &mut mio::unix::SourceFd(&t.fd.as_raw_fd()),
                    TIMER,
                    Interest::READABLE,
                )
                .map_err(setup)?;
            Some(t)
        } else {
            None
        };
        let mut conns = Vec::with_capacity(flows.len());
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.tcp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            poll.registry()
                .register(&mut sock, Token(i), Interest::READABLE | Interest::WRITABLE)
                .map_err(setup)?;
            let requester = flow.role == Role::Requester;
            let mut c = Conn {
                flow,
                sock,
                done: false,
                draining: false,
                bytes: 0,
                transactions: 0,
                done_at: None,
                final_buffers: None,
                starts: VecDeque::with_capacity(if open_loop { 16 } else { self.burst as usize }),
                to_send: 0,
                send_off: 0,
                resp_got: 0,
                next_due: None,
                req_got: 0,
                owed: 0,
                resp_off: 0,
            };
            if requester {
                if open_loop {
                    // A random phase, so that flows do not fire in lockstep.
                    let first = ctl.start + self.gap(&mut cx.rng).mul_f64(cx.rng.f64());
                    c.next_due = Some(first);
                    timers.push(Reverse((first, i)));
                } else {
                    c.to_send = self.burst as u64;
                }
            }
            conns.push(c);
        }
        let request = vec![0x5a_u8; self.request_size.max(1)];
        let response = vec![0xa5_u8; self.response_size.clamp(1, 256 * 1024)];
        let mut rbuf = vec![
            0u8;
            (self.response_size.max(self.request_size) * self.burst.max(1) as usize)
                .clamp(64 * 1024, 4 << 20)
        ];
        let mut events = Events::with_capacity(1024);
        let mut live = conns.len();
        let mut drain_deadline: Option<Instant> = None;

        while live > 0 {
            let now = Instant::now();
            if drain_deadline.is_none() && ctl.stop.load(Ordering::Relaxed) {
                for c in conns.iter_mut().filter(|c| !c.done) {
                    c.final_buffers = Some(sockopt::buffers(&c.flow.socket));
                    if c.flow.role == Role::Requester {
                        // No more requests: the responder sees end of file once it has answered.
                        let _ = c.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                    }
                    c.draining = true;
                }
                timers.clear();
                drain_deadline = Some(now + ctl.drain);
            }
            if drain_deadline.is_some_and(|d| now >= d) {
                break;
            }
            // Open loop: issue every request that is due.
            while let Some(Reverse((due, i))) = timers.peek().copied() {
                if due > Instant::now() + SPIN {
                    break;
                }
                while Instant::now() < due {
                    std::hint::spin_loop();
                }
                timers.pop();
                let c = &mut conns[i];
                if c.done || c.draining {
                    continue;
                }
                if c.starts.len() >= MAX_IN_FLIGHT as usize {
                    // The backlog is full: this request waits, still timed from when it was due.
                    timers.push(Reverse((now + Duration::from_micros(100), i)));
                    continue;
                }
                c.starts.push_back(due);
                c.to_send += 1;
                if ctl.recording.load(Ordering::Relaxed) {
                    cx.schedule.due += 1;
                }
                let next = due + self.gap(&mut cx.rng);
                c.next_due = Some(next);
                timers.push(Reverse((next, i)));
                if self.write_requests(c, &request, &mut cx)? {
                    c.finish(&poll);
                    live -= 1;
                }
            }
            if let (Some(t), Some(Reverse((due, _)))) = (&timer, timers.peek()) {
                t.arm(due.saturating_duration_since(Instant::now()));
            }
            match poll.poll(&mut events, Some(Duration::from_millis(10))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(setup(e)),
            }
            for ev in events.iter() {
                if ev.token() == TIMER {
                    if let Some(t) = &timer {
                        t.clear();
                    }
                    continue;
                }
                let Some(c) = conns.get_mut(ev.token().0) else {
                    continue;
                };
                if c.done {
                    continue;
                }
                let finished = match c.flow.role {
                    Role::Requester => {
                        let mut fin = false;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            fin = self.read_responses(c, &mut rbuf, &mut cx)?;
                        }
                        if !fin && !c.draining {
                            fin = self.write_requests(c, &request, &mut cx)?;
                        }
                        fin
                    }
                    _ => self.serve(c, &mut rbuf, &response)?,
                };
                if finished {
                    c.finish(&poll);
                    live -= 1;
                }
            }
        }
        let flows = conns
            .into_iter()
            .map(|mut c| {
                c.final_buffers
                    .get_or_insert_with(|| sockopt::buffers(&c.flow.socket));
                FlowEnd {
                    id: c.flow.id,
                    total_bytes: c.bytes,
                    done_at: c.done_at,
                    final_buffers: c.final_buffers.unwrap_or_default(),
                    udp: None,
                }
            })
            .collect();
        Ok(WorkerEnd {
            flows,
            latency: Some(cx.latency),
            schedule: open_loop.then_some(cx.schedule),
        })
    }
}

impl RrWorkload {
    /// Writes issued requests until the socket is full. Returns true if the flow ended.
    fn write_requests(&self, c: &mut Conn, request: &[u8], cx: &mut Ctx<'_>) -> Result<bool, EngineError> {
        while c.to_send > 0 && !c.draining {
            let now = Instant::now();
            match c.sock.write(&request[c.send_off..]) {
                Ok(n) => {
                    if c.send_off == 0 {
                        if cx.open_loop {
                            // This request's due time is the to_send-th newest start.
                            let idx = c.starts.len() - c.to_send as usize;
                            let behind = now.saturating_duration_since(c.starts[idx]);
                            if cx.ctl.recording.load(Ordering::Relaxed) {
                                let ns = behind.as_nanos().min(u64::MAX as u128) as u64;
                                cx.schedule.behind_sum_ns += ns as u128;
                                cx.schedule.behind_max_ns = cx.schedule.behind_max_ns.max(ns);
                                if behind > LATE {
                                    cx.schedule.late += 1;
                                }
                            }
                        } else {
                            c.starts.push_back(now);
                        }
                    }
                    c.bytes += n as u64;
                    c.flow.counters.set_bytes(c.bytes);
                    c.send_off += n;
                    if c.send_off == request.len() {
                        c.send_off = 0;
                        c.to_send -= 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(c.io_error("send request", e)),
            }
        }
        Ok(false)
    }

    /// Reads responses; each whole one completes the oldest transaction.
    fn read_responses(&self, c: &mut Conn, buf: &mut [u8], cx: &mut Ctx<'_>) -> Result<bool, EngineError> {
        loop {
            match c.sock.read(buf) {
                Ok(0) => {
                    if c.draining {
                        return Ok(true);
                    }
                    return Err(c.io_error(
                        "the responder closed the connection",
                        io::Error::from(io::ErrorKind::UnexpectedEof),
                    ));
                }
                Ok(n) => {
                    let now = Instant::now();
                    c.bytes += n as u64;
                    c.resp_got += n;
                    let recording = cx.ctl.recording.load(Ordering::Relaxed);
                    while c.resp_got >= self.response_size {
                        c.resp_got -= self.response_size;
                        let Some(t0) = c.starts.pop_front() else {
                            return Err(c.io_error(
                                "a response with no request outstanding",
                                io::Error::from(io::ErrorKind::InvalidData),
                            ));
                        };
                        c.transactions += 1;
                        if recording {
                            cx.latency.record(
                                now.saturating_duration_since(t0).as_nanos().min(u64::MAX as u128) as u64,
                            );
                        }
                        if !cx.open_loop && !c.draining {
                            c.to_send += 1;
                        }
                    }
                    c.flow.counters.set_bytes(c.bytes);
                    c.flow.counters.set_transactions(c.transactions);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if c.draining => return Ok(true),
                Err(e) => return Err(c.io_error("receive response", e)),
            }
        }
    }

    /// Responder: reads requests, answers every whole one. True at end of file.
    fn serve(&self, c: &mut Conn, buf: &mut [u8], response: &[u8]) -> Result<bool, EngineError> {
        let mut eof = false;
        loop {
            match c.sock.read(buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.bytes += n as u64;
                    c.req_got += n;
                    c.owed += (c.req_got / self.request_size) as u64;
                    c.req_got %= self.request_size;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if c.draining => return Ok(true),
                Err(e) => return Err(c.io_error("receive request", e)),
            }
        }
        // Answer what is owed, many responses per call when they queue up.
        while c.owed > 0 {
            let left = c.owed as u128 * self.response_size as u128 - c.resp_off as u128;
            let chunk = left.min(response.len() as u128) as usize;
            match c.sock.write(&response[..chunk]) {
                Ok(n) => {
                    c.bytes += n as u64;
                    let total = c.resp_off + n;
                    let whole = (total / self.response_size) as u64;
                    c.resp_off = total % self.response_size;
                    c.owed -= whole;
                    c.transactions += whole;
                    c.flow.counters.set_bytes(c.bytes);
                    c.flow.counters.set_transactions(c.transactions);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if c.draining || eof => return Ok(true),
                Err(e) => return Err(c.io_error("send response", e)),
            }
        }
        Ok(eof)
    }
}
