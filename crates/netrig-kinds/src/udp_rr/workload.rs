//! Request/response over UDP (netperf UDP_RR), closed or open loop, that
//! survives loss: a request whose response has not come within `timeout` is
//! counted lost and the flow carries on; a response that comes later is
//! counted late, never matched to another request.
//!
//! Requests and responses carry the 28-byte test header (test id, flow,
//! sequence number, timestamp), padded to the sizes asked for; the responder
//! echoes the request's header but for the timestamp, which it replaces with
//! its own. Each timestamp counts ns from its end's time zero: the requester's
//! when it sent the request, the responder's when it read it (one clock read
//! for both its receive and its send); so each end records the one-way delay
//! of the messages it receives (netrig_proto::clock), as udp-stream does, and
//! the two directions' sum is the round trip less nothing but the responder's
//! time from its read to its send.

use mio::{Interest, Token};
use netrig_engine::cap::SendCap;
use netrig_engine::flow::SocketHandle;
use netrig_engine::flow::UdpAccount;
use netrig_engine::latencies::Latencies;
use netrig_engine::reactor::{Handler, Io, Now, Reactor, Ready, IDLE};
use netrig_engine::sockopt;
use netrig_engine::txn::Pacer;
use netrig_engine::workload::{WorkerControl, Workload};
use netrig_engine::TxnParams;
use netrig_engine::{EngineError, Flow, FlowEnd, WorkerEnd};
use netrig_metrics::{OneWayRecorder, SeqSummary};
use netrig_proto::report::Role;
use netrig_proto::spec::{MAX_IN_FLIGHT, UDP_HEADER_LEN};
use netrig_proto::DATA_MAGIC;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const HDR: usize = UDP_HEADER_LEN as usize;
/// How many retired requests a requester remembers, to tell a duplicate
/// response (its request was answered) from a late one (it timed out).
const RESOLVED: usize = 4096;
/// After its window, a responder answers until its flow is this quiet.
const RESPONDER_QUIET: Duration = Duration::from_millis(300);

/// The UDP request/response workload's parameters.
#[derive(Debug, Clone)]
pub struct UdpRrWorkload {
    pub txn: TxnParams,
    /// A request without a response after this long is lost.
    pub timeout: Duration,
}

struct Outstanding {
    seq: u64,
    start: Instant,
    answered: bool,
}

struct UFlow {
    flow: Flow,
    sock: SocketHandle,
    bytes: u64,
    transactions: u64,
    stray: u64,
    // Requester.
    next_seq: u64,
    out: VecDeque<Outstanding>,
    unanswered: u64,
    lost: u64,
    late: u64,
    duplicates: u64,
    out_of_order: u64,
    highest: Option<u64>,
    /// Recently retired requests: (sequence number, answered), oldest first.
    resolved: VecDeque<(u64, bool)>,
    /// When the socket last had something to read.
    last_rx: Instant,
    /// This end's time zero: timestamps count from it.
    zero: Instant,
    /// No later than the other end's zero: one-way delays count from it.
    clock_ref: Instant,
}

impl UFlow {
    fn retire(&mut self, seq: u64, answered: bool) {
        if self.resolved.len() == RESOLVED {
            self.resolved.pop_front();
        }
        self.resolved.push_back((seq, answered));
    }
}

fn sock_err(f: &UFlow, what: &str, e: io::Error) -> EngineError {
    EngineError::Flow {
        flow: f.flow.id,
        direction: f.flow.direction.name(),
        what: format!("{what} after {} transactions", f.transactions),
        error: e,
    }
}

fn send(f: &UFlow, buf: &[u8]) -> io::Result<usize> {
    f.sock.socket().udp()?.send(buf)
}

/// The test id, flow, sequence number and timestamp of a datagram (its
/// header, from netrig_proto::datagram); `None` when it is too short to have one.
fn parse(d: &[u8]) -> Option<(u64, u32, u64, u64)> {
    let h = netrig_proto::datagram::DatagramHeader::decode(d)?;
    Some((h.test_id, h.flow, h.seq, h.sent_ns()))
}

/// Ns from `zero` to `t`, as a timestamp (none of the header's marks).
#[inline]
fn stamp(t: Instant, zero: Instant) -> u64 {
    t.saturating_duration_since(zero).as_nanos() as u64 & !netrig_proto::datagram::STAMP_MARKS
}

impl UdpRrWorkload {
    /// Sends request `next_seq`, timed from `start`. False if the socket was full.
    fn request(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        test_id: u64,
        start: Instant,
    ) -> Result<bool, EngineError> {
        buf[0..8].copy_from_slice(&test_id.to_be_bytes());
        buf[8..12].copy_from_slice(&f.flow.id.to_be_bytes());
        buf[12..20].copy_from_slice(&f.next_seq.to_be_bytes());
        // Open loop times a request from its due time; its stamp is when it left.
        let sent = if self.txn.rate.is_some() {
            Instant::now()
        } else {
            start
        };
        buf[20..28].copy_from_slice(&stamp(sent, f.zero).to_be_bytes());
        match send(f, buf) {
            Ok(n) => {
                f.out.push_back(Outstanding {
                    seq: f.next_seq,
                    start,
                    answered: false,
                });
                f.next_seq += 1;
                f.unanswered += 1;
                f.bytes += n as u64;
                f.flow.counters.set_bytes(f.bytes);
                // Datagrams sent, the kernel's unit (the witness: Udp.OutDatagrams).
                f.flow.counters.set_units(f.next_seq);
                Ok(true)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(false),
            // ICMP port unreachable from an earlier datagram: that request is lost, not the test.
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => Ok(false),
            Err(e) => Err(sock_err(f, "send request", e)),
        }
    }

    /// Counts requests past their timeout as lost. Returns how many.
    fn expire(&self, f: &mut UFlow, now: Instant) -> u64 {
        let mut expired = 0;
        while let Some(o) = f.out.front() {
            let seq = o.seq;
            if o.answered {
                f.out.pop_front();
                f.retire(seq, true);
            } else if now.saturating_duration_since(o.start) >= self.timeout {
                f.out.pop_front();
                f.retire(seq, false);
                f.unanswered -= 1;
                f.lost += 1;
                expired += 1;
            } else {
                break;
            }
        }
        expired
    }

    /// Reads responses (requester) or requests (responder) until the socket is empty.
    #[allow(clippy::too_many_arguments)]
    fn on_readable(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        reply: &mut [u8],
        test_id: u64,
        latency: &mut Latencies,
        closed_loop_refill: &mut u64,
        once: bool,
        cap: &SendCap,
        one_way: &mut OneWayRecorder,
    ) -> Result<(), EngineError> {
        loop {
            let n = match f.sock.socket().udp().and_then(|u| u.recv(buf)) {
                Ok(n) => n,
                // (Interrupted: a lone worker's wait, bounded by its watch.)
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    return Ok(())
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => continue,
                Err(e) => return Err(sock_err(f, "receive", e)),
            };
            let now = Instant::now();
            f.last_rx = now;
            let d = &buf[..n];
            if n >= 4 && d[..4] == DATA_MAGIC {
                continue; // a repeated hello from set-up
            }
            let Some((tid, fid, seq, sent_ns)) =
                parse(d).filter(|(t, fl, ..)| *t == test_id && *fl == f.flow.id)
            else {
                f.stray += 1;
                continue;
            };
            let _ = tid;
            let _ = fid;
            f.bytes += n as u64;
            if f.flow.role == Role::Responder {
                reply[..20].copy_from_slice(&d[..20]);
                reply[20..HDR].copy_from_slice(&stamp(now, f.zero).to_be_bytes());
                match send(f, reply) {
                    Ok(m) => {
                        f.bytes += m as u64;
                        f.transactions += 1;
                        if f.flow.counters.add_transactions(1) {
                            one_way.record_since_ref(sent_ns, stamp(now, f.clock_ref));
                        }
                        f.flow.counters.set_units(f.transactions);
                        // Held to the agent's cap: after a wait, back to the
                        // event loop (requests that came meanwhile wait
                        // there, or are dropped by the kernel).
                        if cap.spend(m) {
                            f.flow.counters.set_bytes(f.bytes);
                            return Ok(());
                        }
                    }
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
                    Err(e) => return Err(sock_err(f, "send response", e)),
                }
            } else {
                match f.out.binary_search_by_key(&seq, |o| o.seq) {
                    Ok(i) if f.out[i].answered => f.duplicates += 1,
                    Ok(i) => {
                        f.out[i].answered = true;
                        f.unanswered -= 1;
                        f.transactions += 1;
                        if f.highest.is_some_and(|h| seq < h) {
                            f.out_of_order += 1;
                        }
                        f.highest = Some(f.highest.map_or(seq, |h| h.max(seq)));
                        if let Some(mark) = f.flow.counters.count_transactions(1) {
                            latency.record(
                                mark,
                                now.saturating_duration_since(f.out[i].start).as_nanos() as u64,
                            );
                            one_way.record_since_ref(sent_ns, stamp(now, f.clock_ref));
                        }
                        *closed_loop_refill += 1;
                    }
                    // A retired request: answered already (a duplicate), or timed out (late).
                    Err(_) if seq < f.next_seq => match f.resolved.binary_search_by_key(&seq, |r| r.0) {
                        Ok(i) if f.resolved[i].1 => f.duplicates += 1,
                        _ => f.late += 1,
                    },
                    Err(_) => f.stray += 1,
                }
            }
            f.flow.counters.set_bytes(f.bytes);
            if once {
                return Ok(());
            }
        }
    }

    /// One closed-loop flow with one request in flight, alone on its worker
    /// (netperf's UDP_RR, sockperf's ping-pong): the worker waits in
    /// recv(2) itself, on a blocking socket whose timeout (a tenth of the
    /// request timeout, 1 to 10 ms) bounds how late it sees a lost request,
    /// the window's close or an abort, instead of in epoll_wait(2) with a
    /// timer. A transaction costs a send and a receive on each end. Counts,
    /// losses, latencies and the drain are the event loop's.
    ///
    /// Why it blocks and is not a handler of the I/O core (netrig-io): the
    /// blocking recv(2) is the fastest path for one flow, measured. Against
    /// the same build with this path turned off (the flow in the reactor), 5
    /// alternating rounds of `udp-rr -l 3` on the shared 2-core machine
    /// (loaded, load average 12) on 2026-11-29: 1.42x the transactions/s
    /// (71.5k against 50.3k, ahead in 4 of 5) at 0.70x the service demand.
    fn run_alone(&self, mut w: Worker<'_>, reactor: &Reactor) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker socket: {e}"));
        let (ctl, test_id) = (w.ctl, w.ctl.test_id);
        let f = &mut w.fl[0];
        let udp = f.flow.socket.udp().map_err(setup)?;
        // --busy-wait: the socket stays non-blocking, and the loop below
        // spins, receiving until something comes.
        let poll = (self.timeout / 10).clamp(Duration::from_millis(1), Duration::from_millis(10));
        // The watchdog's tick is as fine as waits need be but for a short --timeout.
        let watch = (!self.txn.busy_wait && poll >= netrig_engine::nudge::TICK)
            .then(crate::txn::watch_alone)
            .flatten();
        if !self.txn.busy_wait {
            udp.set_nonblocking(false).map_err(setup)?;
            if watch.is_none() {
                udp.set_read_timeout(Some(poll)).map_err(setup)?;
            }
        }
        let requester = f.flow.role == Role::Requester;
        let mut deadline: Option<Instant> = None;
        let mut stopped_at = None;
        loop {
            if ctl.aborted.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if deadline.is_none() && ctl.stop.load(Ordering::Relaxed) {
                // As on_stop: requesters wait out their outstanding requests,
                // responders until their flow has been quiet a while.
                let bound = if requester {
                    self.timeout
                } else {
                    self.timeout + RESPONDER_QUIET
                };
                stopped_at = Some(now);
                deadline = Some(now + bound.min(ctl.drain));
            }
            if let Some(d) = deadline {
                let drained = match requester {
                    true => f.unanswered == 0,
                    false => now.duration_since(f.last_rx) >= RESPONDER_QUIET,
                };
                if drained || now >= d {
                    break;
                }
            }
            w.latency.flush();
            if requester {
                let expired = self.expire(f, now);
                if deadline.is_none() {
                    for _ in 0..expired {
                        self.request(f, &mut w.req, test_id, Instant::now())?;
                    }
                }
            }
            let mut refill = 0;
            netrig_engine::nudge::waiting(watch.as_ref());
            self.on_readable(
                f,
                &mut w.rbuf,
                &mut w.reply,
                test_id,
                &mut w.latency,
                &mut refill,
                true,
                &w.cap,
                &mut w.one_way,
            )?;
            if requester && deadline.is_none() {
                for _ in 0..refill {
                    self.request(f, &mut w.req, test_id, Instant::now())?;
                }
            }
        }
        let io = Io {
            registry: reactor.registry(),
            timer: None,
            stopped_at,
            drain_until: deadline,
        };
        Ok(w.finish(&io))
    }
}

impl Workload for UdpRrWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        // The reactor's timer wakes the loop for the earliest request timeout.
        let mut reactor = Reactor::new(true)?;
        // Open loop: the schedule shared with tcp-rr and tcp-crr.
        let mut pacer = self.txn.pacer(reactor.registry(), ctl.window).map_err(setup)?;
        let mut fl = Vec::with_capacity(flows.len());
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.udp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            reactor
                .registry()
                .register(&mut sock, Token(i), Interest::READABLE)
                .map_err(setup)?;
            if flow.role == Role::Requester {
                if let Some(p) = &mut pacer {
                    p.start(i, ctl.start);
                }
            }
            fl.push(UFlow {
                flow,
                sock,
                bytes: 0,
                transactions: 0,
                stray: 0,
                next_seq: 0,
                out: VecDeque::new(),
                unanswered: 0,
                lost: 0,
                late: 0,
                duplicates: 0,
                out_of_order: 0,
                highest: None,
                resolved: VecDeque::with_capacity(RESOLVED),
                last_rx: Instant::now(),
                zero: ctl.start,
                clock_ref: ctl.clock_ref,
            });
        }
        let mut w = Worker {
            cfg: self,
            ctl,
            open_loop: self.txn.rate.is_some(),
            fl,
            pacer,
            latency: ctl.latencies(),
            req: vec![0x5a_u8; self.txn.request_size.max(HDR)],
            reply: vec![0xa5_u8; self.txn.response_size.max(HDR)],
            rbuf: vec![0u8; 65_536],
            cap: SendCap::of(ctl),
            // Its values count from clock_ref by the monotonic clock; the
            // realtime reference the report gives (the runner's) is its start.
            one_way: OneWayRecorder::new(0),
        };
        // Closed loop: fill the burst.
        if !w.open_loop {
            for f in w.fl.iter_mut().filter(|f| f.flow.role == Role::Requester) {
                for _ in 0..self.txn.burst {
                    self.request(f, &mut w.req, ctl.test_id, Instant::now())?;
                }
            }
        }
        if w.fl.len() == 1 && !w.open_loop && self.txn.burst == 1 {
            return self.run_alone(w, &reactor);
        }
        if self.txn.busy_wait {
            return Err(crate::txn::busy_wait_refused(w.fl.len()));
        }
        reactor.run_worker(w, ctl)
    }
}

/// One worker's flows in the reactor.
struct Worker<'a> {
    cfg: &'a UdpRrWorkload,
    ctl: &'a WorkerControl,
    open_loop: bool,
    fl: Vec<UFlow>,
    pacer: Option<Pacer>,
    latency: Latencies,
    req: Vec<u8>,
    reply: Vec<u8>,
    rbuf: Vec<u8>,
    /// The agent's `--max-rate`, on a responder's answers.
    cap: SendCap,
    /// One-way delays of the messages its flows received in the window.
    one_way: OneWayRecorder,
}

impl Handler for Worker<'_> {
    fn on_ready(&mut self, io: &Io<'_>, index: usize, _ready: Ready) -> Result<(), EngineError> {
        let Some(f) = self.fl.get_mut(index) else {
            return Ok(());
        };
        let (cfg, test_id) = (self.cfg, self.ctl.test_id);
        let mut refill = 0;
        cfg.on_readable(
            f,
            &mut self.rbuf,
            &mut self.reply,
            test_id,
            &mut self.latency,
            &mut refill,
            false,
            &self.cap,
            &mut self.one_way,
        )?;
        if !self.open_loop && !io.draining() && f.flow.role == Role::Requester {
            for _ in 0..refill {
                cfg.request(f, &mut self.req, test_id, Instant::now())?;
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, io: &Io<'_>) -> Result<(), EngineError> {
        io.timer().clear();
        Ok(())
    }

    fn on_token(&mut self, _io: &Io<'_>, token: Token) -> Result<(), EngineError> {
        if token == netrig_engine::txn::TIMER {
            if let Some(p) = &mut self.pacer {
                p.on_timer();
            }
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Duration, EngineError> {
        let now = now.get();
        self.latency.flush();
        let (cfg, test_id) = (self.cfg, self.ctl.test_id);
        let recording = self.ctl.recording.load(Ordering::Relaxed);
        // Timeouts: lost requests are replaced in closed loop.
        for f in self.fl.iter_mut().filter(|f| f.flow.role == Role::Requester) {
            let expired = cfg.expire(f, now);
            if !self.open_loop && !io.draining() {
                for _ in 0..expired {
                    cfg.request(f, &mut self.req, test_id, Instant::now())?;
                }
            }
        }
        // Open loop: send every request that is due, timed from its due time.
        while let Some((due, i)) = self.pacer.as_mut().and_then(Pacer::next_due) {
            let p = self.pacer.as_mut().expect("open loop");
            let f = &mut self.fl[i];
            if f.out.len() >= MAX_IN_FLIGHT as usize {
                p.defer(i, due);
                continue;
            }
            let sent_at = Instant::now();
            if cfg.request(f, &mut self.req, test_id, due)? {
                p.issued(i, due, recording);
                p.sent(due, sent_at, recording);
            } else {
                p.defer(i, due); // the socket was full: still due, still timed from `due`
            }
        }
        // Wake for the next due request and the earliest timeout.
        let mut wait = IDLE;
        if let Some(p) = &mut self.pacer {
            wait = p.arm(wait);
        }
        let next_timeout = self
            .fl
            .iter()
            .filter_map(|f| f.out.front().map(|o| o.start + cfg.timeout))
            .min();
        if let Some(wake) = next_timeout {
            io.timer().arm(wake.saturating_duration_since(Instant::now()));
        }
        Ok(wait)
    }

    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        if let Some(p) = &mut self.pacer {
            p.stop();
        }
        // Requesters wait for outstanding responses (at most one timeout);
        // responders keep answering until their flow has been quiet a while,
        // since the requester's window may close later than ours and requests
        // may still be on their way.
        let bound = if self.fl.iter().any(|f| f.flow.role == Role::Requester) {
            self.cfg.timeout
        } else {
            self.cfg.timeout + RESPONDER_QUIET
        };
        bound.min(self.ctl.drain)
    }

    fn is_done(&self, io: &Io<'_>, now: &Now) -> bool {
        let now = now.get();
        io.draining()
            && !self.fl.iter().any(|f| match f.flow.role {
                Role::Requester => f.unanswered > 0,
                _ => now.duration_since(f.last_rx) < RESPONDER_QUIET,
            })
    }

    fn finish(self, _io: &Io<'_>) -> WorkerEnd {
        let flows = self
            .fl
            .into_iter()
            .map(|mut f| {
                // Still unanswered when the drain ended: lost.
                f.lost += f.unanswered;
                f.unanswered = 0;
                let requester = f.flow.role == Role::Requester;
                let resolved = f.transactions + f.lost;
                FlowEnd {
                    zerocopy: None,
                    reads: None,
                    sends: None,
                    id: f.flow.id,
                    total_bytes: f.bytes,
                    done_at: None,
                    final_buffers: sockopt::buffers(&f.flow.socket),
                    udp: Some(UdpAccount {
                        sent_datagrams: if requester { f.next_seq } else { f.transactions },
                        received: requester.then(|| SeqSummary {
                            received: f.transactions,
                            lost: f.lost,
                            expected: resolved,
                            loss_pct: if resolved > 0 {
                                f.lost as f64 / resolved as f64 * 100.0
                            } else {
                                0.0
                            },
                            out_of_order: f.out_of_order,
                            duplicates: f.duplicates,
                            jitter_us: 0.0,
                            highest_seq: f.highest,
                        }),
                        stray: f.stray,
                        late: f.late,
                        units: 0,
                    }),
                }
            })
            .collect();
        WorkerEnd {
            flows,
            latency: Some(self.latency.into_window()),
            one_way: Some(self.one_way.into_histogram()).filter(|h| !h.is_empty()),
            schedule: self.pacer.map(|p| p.stats),
            ..WorkerEnd::default()
        }
    }
}
