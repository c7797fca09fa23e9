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

use mio::{Interest, Registry, Token};
use netrig_engine::cap::SendCap;
use netrig_engine::flow::SocketHandle;
use netrig_engine::flow::WorkerEnd;
use netrig_engine::inq::ReadInq;
use netrig_engine::latencies::Latencies;
use netrig_engine::msg_stamp::{ns_since, StampIn, STAMP_LEN};
use netrig_engine::reactor::{Handler, Io, Now, Reactor, Ready, IDLE};
use netrig_engine::sockopt;
use netrig_engine::txn::{Answerer, Moved, Pacer, TIMER};
use netrig_engine::workload::{WorkerControl, Workload};
use netrig_engine::TxnParams;
use netrig_engine::{EngineError, Flow, FlowEnd};
use netrig_proto::report::{BufPair, Role};
use netrig_proto::spec::MAX_IN_FLIGHT;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The request/response workload's parameters.
#[derive(Debug, Clone)]
pub struct RrWorkload {
    pub txn: TxnParams,
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
    /// The responses' send times (one-way delay), when they carry them.
    stamp_in: Option<StampIn>,
    /// The stamp of the request being written (the worker's request buffer
    /// is shared by its connections: put back before each write of it).
    req_stamp: [u8; STAMP_LEN],
    // Responder.
    answer: Answerer,
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

    fn finish(&mut self, registry: &Registry) {
        if !self.done {
            self.done = true;
            self.done_at.get_or_insert_with(Instant::now);
            self.final_buffers
                .get_or_insert_with(|| sockopt::buffers(&self.flow.socket));
            let _ = registry.deregister(&mut self.sock);
        }
    }

    /// What the connection's flow did, once its worker is done with it (its
    /// final buffers read now where they were not before).
    fn end(&mut self) -> FlowEnd {
        let final_buffers = *self
            .final_buffers
            .get_or_insert_with(|| sockopt::buffers(&self.flow.socket));
        FlowEnd {
            zerocopy: None,
            reads: None,
            sends: None,
            id: self.flow.id,
            total_bytes: self.bytes,
            done_at: self.done_at,
            final_buffers,
            udp: None,
        }
    }
}

/// Per-worker state shared by the handlers.
struct Ctx<'a> {
    ctl: &'a WorkerControl,
    latency: Latencies,
    /// Open loop only.
    pacer: Option<Pacer>,
    /// The agent's `--max-rate`, on a responder's answers.
    cap: SendCap,
}

impl Workload for RrWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        let mut reactor = Reactor::new(false)?;
        let open_loop = self.txn.rate.is_some();
        let pacer = self.txn.pacer(reactor.registry(), ctl.window).map_err(setup)?;
        let mut cx = Ctx {
            ctl,
            latency: ctl.latencies(),
            pacer,
            cap: SendCap::of(ctl),
        };
        let mut conns = Vec::with_capacity(flows.len());
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.tcp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            netrig_engine::inq::enable(sock.raw_fd());
            reactor
                .registry()
                .register(&mut sock, Token(i), Interest::READABLE | Interest::WRITABLE)
                .map_err(setup)?;
            let requester = flow.role == Role::Requester;
            let mut c =
                Conn {
                    flow,
                    sock,
                    done: false,
                    draining: false,
                    bytes: 0,
                    transactions: 0,
                    done_at: None,
                    final_buffers: None,
                    starts: VecDeque::with_capacity(if open_loop { 16 } else { self.txn.burst as usize }),
                    to_send: 0,
                    send_off: 0,
                    resp_got: 0,
                    req_stamp: [0; STAMP_LEN],
                    stamp_in: if requester {
                        StampIn::new(self.txn.response_size, ctl.clock_ref)
                    } else {
                        None
                    },
                    answer: Answerer::new(self.txn.request_size, self.txn.response_size, u64::MAX)
                        .with_stamps(ctl.start, ctl.clock_ref, ctl.recording.clone()),
                };
            if requester {
                match &mut cx.pacer {
                    Some(p) => p.start(i, ctl.start),
                    None => c.to_send = self.txn.burst as u64,
                }
            }
            conns.push(c);
        }
        let rbuf_len = (self.txn.response_size.max(self.txn.request_size) * self.txn.burst.max(1) as usize)
            .clamp(64 * 1024, 4 << 20);
        if conns.len() == 1 && cx.pacer.is_none() && self.txn.burst == 1 {
            drop(reactor);
            let c = conns.pop().expect("one connection");
            return self.run_alone(c, cx, vec![0u8; rbuf_len]);
        }
        if self.txn.busy_wait {
            return Err(crate::txn::busy_wait_refused(conns.len()));
        }
        let w = Worker {
            cfg: self,
            live: conns.len(),
            conns,
            cx,
            request: vec![0x5a_u8; self.txn.request_size.max(1)],
            response: vec![0xa5_u8; self.txn.response_size.clamp(1, 256 * 1024)],
            rbuf: vec![0u8; rbuf_len],
        };
        reactor.run_worker(w, ctl)
    }
}

/// One worker's connections in the reactor.
struct Worker<'a> {
    cfg: &'a RrWorkload,
    conns: Vec<Conn>,
    /// Connections not yet done.
    live: usize,
    cx: Ctx<'a>,
    request: Vec<u8>,
    response: Vec<u8>,
    rbuf: Vec<u8>,
}

impl Handler for Worker<'_> {
    fn on_ready(&mut self, io: &Io<'_>, index: usize, ready: Ready) -> Result<(), EngineError> {
        let cfg = self.cfg;
        let Some(c) = self.conns.get_mut(index) else {
            return Ok(());
        };
        if c.done {
            return Ok(());
        }
        let finished = match c.flow.role {
            Role::Requester => {
                let mut fin = false;
                if ready.has_input() {
                    fin = cfg.read_responses(c, &mut self.rbuf, &mut self.cx)?;
                }
                if !fin && !c.draining {
                    fin = cfg.write_requests(c, &mut self.request, &mut self.cx)?;
                }
                fin
            }
            _ => cfg.serve(c, &mut self.rbuf, &self.response, &self.cx.cap)?,
        };
        if finished {
            c.finish(io.registry);
            self.live -= 1;
        }
        Ok(())
    }

    fn on_token(&mut self, _io: &Io<'_>, token: Token) -> Result<(), EngineError> {
        if token == TIMER {
            if let Some(p) = &mut self.cx.pacer {
                p.on_timer();
            }
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &Io<'_>, _now: &Now) -> Result<Duration, EngineError> {
        self.cx.latency.flush();
        let cfg = self.cfg;
        // Open loop: issue every request that is due.
        while let Some((due, i)) = self.cx.pacer.as_mut().and_then(Pacer::next_due) {
            let c = &mut self.conns[i];
            if c.done || c.draining {
                continue;
            }
            let pacer = self.cx.pacer.as_mut().expect("open loop");
            if c.starts.len() >= MAX_IN_FLIGHT as usize {
                // The backlog is full: this request waits, still timed from when it was due.
                pacer.defer(i, due);
                continue;
            }
            c.starts.push_back(due);
            c.to_send += 1;
            pacer.issued(i, due, self.cx.ctl.recording.load(Ordering::Relaxed));
            if cfg.write_requests(c, &mut self.request, &mut self.cx)? {
                c.finish(io.registry);
                self.live -= 1;
            }
        }
        let mut wait = IDLE;
        if let Some(p) = &mut self.cx.pacer {
            wait = p.arm(wait);
        }
        Ok(wait)
    }

    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        for c in self.conns.iter_mut().filter(|c| !c.done) {
            c.final_buffers = Some(sockopt::buffers(&c.flow.socket));
            if c.flow.role == Role::Requester {
                // No more requests: the responder sees end of file once it has answered.
                let _ = c.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
            }
            c.draining = true;
        }
        if let Some(p) = &mut self.cx.pacer {
            p.stop();
        }
        self.cx.ctl.drain
    }

    fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
        self.live == 0
    }

    fn finish(self, _io: &Io<'_>) -> WorkerEnd {
        let mut one_way = None;
        let flows = self
            .conns
            .into_iter()
            .map(|mut c| {
                merge_one_way(&mut one_way, &mut c);
                c.end()
            })
            .collect();
        WorkerEnd {
            flows,
            latency: Some(self.cx.latency.into_window()),
            one_way,
            schedule: self.cx.pacer.map(|p| p.stats),
            ..WorkerEnd::default()
        }
    }
}

/// The one-way delays a connection recorded (its responses' as the
/// requester, its requests' as the responder), added to `all`.
fn merge_one_way(all: &mut Option<netrig_metrics::LatencyRecorder>, c: &mut Conn) {
    let mine = match c.stamp_in.take() {
        Some(s) => Some(s.recorder.into_histogram()).filter(|h| !h.is_empty()),
        None => c.answer.take_one_way(),
    };
    if let Some(h) = mine {
        match all {
            Some(a) => a.merge(&h),
            None => *all = Some(h),
        }
    }
}

/// How often a connection alone on its worker looks at the window's and
/// the test's state while it waits in send(2) or recv(2).
const ALONE_POLL: Duration = Duration::from_millis(10);

/// A blocking socket read once per call: the second read in a call says
/// "would block", so [`Answerer::serve`] answers after each read and
/// returns (its counts reach the flow's counters) instead of reading on.
struct OneRead<'a> {
    sock: &'a mut SocketHandle,
    read: bool,
}

impl Read for OneRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if std::mem::replace(&mut self.read, true) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.sock.read(buf)
    }
}

/// One read a call, so no read that finds nothing to save.
impl netrig_engine::inq::ReadInq for OneRead<'_> {}

impl Write for OneRead<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl RrWorkload {
    /// One closed-loop connection with one transaction in flight, alone on
    /// its worker (netperf's TCP_RR, sockperf's ping-pong): the worker waits
    /// in recv(2) itself, on a blocking socket with a timeout of
    /// [`ALONE_POLL`] to see the window close or the test abort, instead of
    /// in epoll_wait(2). A transaction costs a send and a receive on each
    /// end (the event loop's path adds a poll; since `engine::inq`, no longer
    /// a receive that finds nothing). Counts, latencies and the window are
    /// the event loop's.
    ///
    /// Why it blocks and is not a handler of the I/O core (netrig-io): the
    /// blocking recv(2) is the fastest path for one flow, measured. Against
    /// the same build with this path turned off (the flow in the reactor), 5
    /// alternating rounds of `tcp-rr -l 3` on the shared 2-core machine
    /// (loaded, load average 12) on 2026-11-29: 1.35x the transactions/s
    /// (35.0k against 26.0k, ahead in 3 of 5) at 0.74x the service demand.
    fn run_alone(&self, mut c: Conn, mut cx: Ctx<'_>, mut buf: Vec<u8>) -> Result<WorkerEnd, EngineError> {
        let watch = self.alone_socket(&c)?;
        let waiting = || netrig_engine::nudge::waiting(watch.as_ref());
        let ctl = cx.ctl;
        let mut deadline: Option<Instant> = None;
        // The window closed: stop asking (the requester), drain until the
        // peer's end of file or the drain's deadline. False: give up now.
        let mut go_on = |c: &mut Conn| -> bool {
            if ctl.aborted.load(Ordering::Relaxed) {
                return false;
            }
            if ctl.stop.load(Ordering::Relaxed) {
                match deadline {
                    None => {
                        c.final_buffers = Some(sockopt::buffers(&c.flow.socket));
                        if c.flow.role == Role::Requester {
                            let _ = c.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                        }
                        c.draining = true;
                        deadline = Some(Instant::now() + ctl.drain);
                    }
                    Some(d) => return Instant::now() < d,
                }
            }
            true
        };
        let mut request = vec![0x5a_u8; self.txn.request_size.max(1)];
        let response = vec![0xa5_u8; self.txn.response_size.clamp(1, 256 * 1024)];
        'conn: while go_on(&mut c) {
            cx.latency.flush();
            if c.flow.role != Role::Requester {
                let mut moved = Moved::default();
                let mut one = OneRead {
                    sock: &mut c.sock,
                    read: false,
                };
                waiting();
                let r = c.answer.serve(&mut one, &mut buf, &response, &mut moved, &cx.cap);
                c.bytes += moved.bytes;
                c.transactions += moved.transactions;
                c.flow.counters.set_bytes(c.bytes);
                let _ = c.flow.counters.add_transactions(moved.transactions);
                match r {
                    Ok(true) => break,
                    Ok(false) => continue,
                    Err(_) if c.draining => break,
                    Err((what, e)) => return Err(c.io_error(what, e)),
                }
            }
            // The requester: one request, then its whole response.
            if !c.draining {
                let mut off = 0;
                let mut t0 = None;
                while off < request.len() {
                    // The transaction starts as its first bytes go: before
                    // the call, as the event loop's path times it (on
                    // loopback the call itself carries the request to the
                    // responder, who may answer before it returns).
                    let now = Instant::now();
                    if off == 0 && request.len() >= STAMP_LEN {
                        request[..8].copy_from_slice(&ns_since(now, ctl.start).to_le_bytes());
                    }
                    waiting();
                    match c.sock.write(&request[off..]) {
                        Ok(n) => {
                            t0.get_or_insert(now);
                            off += n;
                            c.bytes += n as u64;
                            c.flow.counters.set_bytes(c.bytes);
                        }
                        Err(e)
                            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
                        {
                            if !go_on(&mut c) {
                                break 'conn;
                            }
                            if c.draining && t0.is_none() {
                                continue 'conn; // nothing of it left: no transaction begun
                            }
                        }
                        // Shut down for the drain halfway through a request.
                        Err(_) if c.draining => break 'conn,
                        Err(e) => return Err(c.io_error("send request", e)),
                    }
                }
                c.starts.push_back(t0.expect("a whole request was written"));
            }
            while c.resp_got < self.txn.response_size || c.starts.is_empty() {
                waiting();
                match c.sock.read(&mut buf) {
                    Ok(0) if c.draining => break 'conn,
                    Ok(0) => {
                        return Err(c.io_error(
                            "the responder closed the connection",
                            io::Error::from(io::ErrorKind::UnexpectedEof),
                        ))
                    }
                    Ok(n) => {
                        c.bytes += n as u64;
                        c.resp_got += n;
                        c.flow.counters.set_bytes(c.bytes);
                        if let Some(s) = &mut c.stamp_in {
                            s.feed(&buf[..n], Instant::now(), ctl.recording.load(Ordering::Relaxed));
                        }
                    }
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                        if !go_on(&mut c) {
                            break 'conn;
                        }
                    }
                    Err(_) if c.draining => break 'conn,
                    Err(e) => return Err(c.io_error("receive response", e)),
                }
            }
            let now = Instant::now();
            while self.complete_one(&mut c, now, &mut cx)? {}
        }
        c.done_at.get_or_insert_with(Instant::now);
        let mut one_way = None;
        merge_one_way(&mut one_way, &mut c);
        Ok(WorkerEnd {
            flows: vec![c.end()],
            latency: Some(cx.latency.into_window()),
            one_way,
            schedule: None,
            ..WorkerEnd::default()
        })
    }

    /// Readies a connection alone on its worker for [`Self::run_alone`]: a
    /// blocking socket whose waits the returned watch bounds or, without
    /// one, timeouts of [`ALONE_POLL`].
    fn alone_socket(&self, c: &Conn) -> Result<Option<netrig_engine::nudge::Watch>, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker socket: {e}"));
        let tcp = c.flow.socket.tcp().map_err(setup)?;
        // --busy-wait: the socket stays non-blocking, and the loops of
        // run_alone spin on WouldBlock, checking the window and the abort each time.
        let watch = (!self.txn.busy_wait).then(crate::txn::watch_alone).flatten();
        if !self.txn.busy_wait {
            tcp.set_nonblocking(false).map_err(setup)?;
            if watch.is_none() {
                tcp.set_write_timeout(Some(ALONE_POLL)).map_err(setup)?;
                tcp.set_read_timeout(Some(ALONE_POLL)).map_err(setup)?;
            }
        }
        Ok(watch)
    }

    /// Completes the oldest transaction if its whole response has come
    /// (counted, its latency recorded); false if none has.
    fn complete_one(&self, c: &mut Conn, now: Instant, cx: &mut Ctx<'_>) -> Result<bool, EngineError> {
        if c.resp_got < self.txn.response_size {
            return Ok(false);
        }
        c.resp_got -= self.txn.response_size;
        let Some(t0) = c.starts.pop_front() else {
            return Err(c.io_error(
                "a response with no request outstanding",
                io::Error::from(io::ErrorKind::InvalidData),
            ));
        };
        c.transactions += 1;
        if let Some(mark) = c.flow.counters.count_transactions(1) {
            cx.latency.record(
                mark,
                now.saturating_duration_since(t0).as_nanos().min(u64::MAX as u128) as u64,
            );
        }
        Ok(true)
    }

    /// Writes issued requests until the socket is full. Returns true if the flow ended.
    fn write_requests(
        &self,
        c: &mut Conn,
        request: &mut [u8],
        cx: &mut Ctx<'_>,
    ) -> Result<bool, EngineError> {
        while c.to_send > 0 && !c.draining {
            let now = Instant::now();
            if request.len() >= STAMP_LEN && c.send_off < STAMP_LEN {
                // Its send time, as its first byte goes (one-way delay); the
                // rest of a request begun, its own stamp again.
                if c.send_off == 0 {
                    c.req_stamp = ns_since(now, cx.ctl.start).to_le_bytes();
                }
                request[..STAMP_LEN].copy_from_slice(&c.req_stamp);
            }
            match c.sock.write(&request[c.send_off..]) {
                Ok(n) => {
                    if c.send_off == 0 {
                        match &mut cx.pacer {
                            Some(p) => {
                                // This request's due time is the to_send-th newest start.
                                let idx = c.starts.len() - c.to_send as usize;
                                p.sent(c.starts[idx], now, cx.ctl.recording.load(Ordering::Relaxed));
                            }
                            None => c.starts.push_back(now),
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
            match c.sock.read_inq(buf) {
                Ok((0, _)) => {
                    if c.draining {
                        return Ok(true);
                    }
                    return Err(c.io_error(
                        "the responder closed the connection",
                        io::Error::from(io::ErrorKind::UnexpectedEof),
                    ));
                }
                Ok((n, empty)) => {
                    let now = Instant::now();
                    if let Some(s) = &mut c.stamp_in {
                        s.feed(&buf[..n], now, cx.ctl.recording.load(Ordering::Relaxed));
                    }
                    c.bytes += n as u64;
                    c.resp_got += n;
                    while self.complete_one(c, now, cx)? {
                        if cx.pacer.is_none() && !c.draining {
                            c.to_send += 1;
                        }
                    }
                    c.flow.counters.set_bytes(c.bytes);
                    if empty {
                        return Ok(false); // (netrig_engine::inq)
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if c.draining => return Ok(true),
                Err(e) => return Err(c.io_error("receive response", e)),
            }
        }
    }

    /// Responder: reads requests, answers every whole one. True at end of file.
    fn serve(
        &self,
        c: &mut Conn,
        buf: &mut [u8],
        response: &[u8],
        cap: &SendCap,
    ) -> Result<bool, EngineError> {
        let mut moved = Moved::default();
        let r = c.answer.serve(&mut c.sock, buf, response, &mut moved, cap);
        c.bytes += moved.bytes;
        c.transactions += moved.transactions;
        c.flow.counters.set_bytes(c.bytes);
        let _ = c.flow.counters.add_transactions(moved.transactions);
        match r {
            Ok(eof) => Ok(eof),
            Err(_) if c.draining => Ok(true),
            Err((what, e)) => Err(c.io_error(what, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::Direction;
    use std::net::{TcpListener, TcpStream};

    /// A one-flow worker of either role whose peer goes silent (connected,
    /// never a byte, never a close) waits in recv(2) on a blocking socket
    /// without a socket timeout; stopped, it drains and ends by the drain's
    /// deadline, because the watch interrupts the wait. Unwatched, it would
    /// wait for as long as the peer stays silent.
    #[test]
    fn a_lone_worker_with_a_silent_peer_ends_at_its_drain() {
        assert!(
            crate::txn::watch_alone().is_some(),
            "the watch is what this tests"
        );
        for role in [Role::Requester, Role::Responder] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (_silent, _) = l.accept().unwrap();
            let flow = Flow::new(0, Direction::Tx, role, ours, None);
            let counters = flow.counters.clone();
            let wl = RrWorkload {
                txn: TxnParams::from_spec(&Default::default()),
            };
            let drain = Duration::from_millis(200);
            let ctl = crate::txn::test_control(drain);
            let stop = ctl.stop.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(wl.run_worker(vec![flow], &ctl).map(|_| ()));
            });
            std::thread::sleep(Duration::from_millis(300));
            let stopped = Instant::now();
            stop.store(true, Ordering::Relaxed);
            let end = rx.recv_timeout(Duration::from_secs(10));
            let took = stopped.elapsed();
            assert!(end.is_ok(), "{role:?}: still waiting 10 s after the stop");
            // The drain, then at most a few of the watch's 10-ms ticks (a busy host: a second).
            assert!(
                took >= drain && took < drain + Duration::from_secs(1),
                "{role:?}: ended {took:?} after the stop, the drain being {drain:?}"
            );
            assert_eq!(counters.transactions(), 0, "{role:?}");
        }
    }
}
