//! One worker's flows and connections, and the event loop's handler that
//! moves them on: the requester's and responder's steps are in their own
//! files (`requester`, `responder`, `steps`, `door`), the blocking paths of
//! one flow alone in `alone` and `lone`.

use super::conn::*;
use super::failure::*;
use super::greeting::*;
use super::params::*;
use mio::{Interest, Registry, Token};
use netrig_engine::cap::SendCap;
use netrig_engine::flow::{FirstConnection, FlowSlot, TransientEnd, WorkerEnd};
use netrig_engine::intake::{Door, DOOR};
use netrig_engine::latencies::Latencies;
use netrig_engine::reactor::{Handler, Io, Now, Ready, IDLE};
use netrig_engine::sockopt;
use netrig_engine::txn::{Moved, Pacer, TIMER};
use netrig_engine::workload::WorkerControl;
use netrig_engine::EngineError;
use netrig_proto::report::Role;
use netrig_proto::spec::MAX_CRR_IN_FLIGHT;
use netrig_proto::DataHello;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Watches a connection in the worker's event loop, as `slot`.
pub(super) fn watch(registry: &Registry, sock: &TcpStream, slot: usize) -> io::Result<()> {
    registry.register(
        &mut mio::unix::SourceFd(&sock.as_raw_fd()),
        Token(slot),
        Interest::READABLE | Interest::WRITABLE,
    )
}

pub(super) struct FlowState {
    pub(super) slot: FlowSlot,
    pub(super) hello: [u8; DataHello::LEN],
    pub(super) in_flight: u32,
    pub(super) failures: Failures,
    pub(super) first: Option<FirstConnection>,
    pub(super) first_done: bool,
}

impl FlowState {
    /// Keeps the figures of the flow's first connection (its buffers and
    /// the options read back), once it is connected; later ones change nothing.
    pub(super) fn note_first(&mut self, sock: &TcpStream) {
        if self.first.is_none() {
            self.first = Some(FirstConnection {
                initial: sockopt::buffers(sock),
                applied: sockopt::applied(sock),
                done: Default::default(),
            });
        }
    }

    /// Counts what a responder's `Answerer::serve` moved.
    pub(super) fn answered(&mut self, moved: &Moved, sock: &TcpStream) {
        self.slot.counters.add_bytes(moved.bytes);
        if moved.transactions > 0 {
            let _ = self.slot.counters.add_transactions(moved.transactions);
            self.note_done(sock);
        }
    }

    /// Counts a requester's transaction whose whole response came at `now`,
    /// its latency from `t0`.
    pub(super) fn completed(&mut self, latency: &mut Latencies, t0: Instant, now: Instant, sock: &TcpStream) {
        if let Some(mark) = self.slot.counters.count_transactions(1) {
            let ns = now.saturating_duration_since(t0).as_nanos();
            latency.record(mark, ns.min(u64::MAX as u128) as u64);
        }
        self.note_done(sock);
    }

    /// Keeps the first connection's buffers once its transaction is done;
    /// later ones change nothing.
    pub(super) fn note_done(&mut self, sock: &TcpStream) {
        if !self.first_done {
            self.first_done = true;
            if let Some(first) = &mut self.first {
                first.done = sockopt::buffers(sock);
            }
        }
    }
}

/// One worker's connections and flows.
pub(super) struct Worker<'a> {
    pub(super) cfg: &'a CrrWorkload,
    pub(super) ctl: &'a WorkerControl,
    /// The responder's intake: the peer's connections, greeting read.
    pub(super) arrivals: Option<Receiver<netrig_engine::intake::Arrival>>,
    /// The responder's listener, when the agent lent it to the run (every
    /// worker of it holds a share), and this worker's copy of its
    /// descriptor, in its event loop (mio's accept takes each connection
    /// non-blocking: no fcntl per connection).
    pub(super) door: Option<(Arc<dyn Door>, mio::net::TcpListener)>,
    pub(super) flows: Vec<FlowState>,
    /// Flow id → index in `flows` (the responder looks up each arrival's flow).
    pub(super) by_id: HashMap<u32, usize>,
    /// The open connections; the index is the mio token.
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) free: Vec<usize>,
    pub(super) live: usize,
    /// (deadline, slot, serial) in the order connections opened, which is
    /// deadline order: every connection gets the same timeout.
    pub(super) deadlines: VecDeque<(Instant, usize, u64)>,
    pub(super) serial: u64,
    pub(super) latency: Latencies,
    pub(super) pacer: Option<Pacer>,
    /// A requester's greeting and request, contiguous: room for the
    /// greeting, which each flow copies in before it writes from it, then
    /// the request. One send(2) a connection, where a writev(2) of the two
    /// costs about 1 µs more (the iovec import and the readv/writev path;
    /// perf, pinned tcp-crr against netperf).
    pub(super) outgoing: Vec<u8>,
    pub(super) response: Vec<u8>,
    pub(super) rbuf: Vec<u8>,
    /// The agent's `--max-rate`, on a responder's answers.
    pub(super) cap: SendCap,
    /// Closed loop: flows whose transaction ended and that start another.
    pub(super) restart: Vec<usize>,
    /// Closed loop: flows whose last start failed at once (refused, no
    /// local port), and when they try again.
    pub(super) retry: Vec<usize>,
    pub(super) retry_at: Option<Instant>,
    pub(super) stopping: bool,
    /// The first error of each reason was logged.
    pub(super) logged: [bool; 5],
    /// The lent listener may have connections queued.
    pub(super) door_due: bool,
    /// accept() failed for want of a resource: not before then.
    pub(super) door_backoff: Option<Instant>,
    /// Connections from the lent listener whose greeting is still coming.
    pub(super) greeting: Greetings,
}

impl Handler for Worker<'_> {
    fn on_ready(&mut self, io: &Io<'_>, slot: usize, ready: Ready) -> Result<(), EngineError> {
        match slot.checked_sub(GREETING_BASE) {
            Some(g) => self.greet(io.registry, g),
            // A connection waiting for bytes (or its end) is not moved on
            // by its socket turning writable (the connect done, an ACK
            // freeing room): that would be a read that finds nothing.
            None if !ready.has_input() && self.waits_to_read(slot) => Ok(()),
            None => self.advance(slot),
        }
    }

    fn on_token(&mut self, io: &Io<'_>, token: Token) -> Result<(), EngineError> {
        // (The intake's WAKE only wakes the poll: on_tick takes the arrivals.)
        if token == DOOR {
            self.door_due = true;
            return self.accept(io.registry);
        }
        if token == TIMER {
            if let Some(p) = &mut self.pacer {
                p.on_timer();
            }
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Duration, EngineError> {
        let now = now.get();
        self.latency.flush();
        // The peer's new connections (an error ends the worker, intake and all).
        if let Some(rx) = self.arrivals.take() {
            while let Ok(a) = rx.try_recv() {
                self.arrive(io.registry, a.hello, a.stream, Taken::Read(a.read_past))?;
            }
            self.arrivals = Some(rx);
        }
        self.accept(io.registry)?;
        if self.greeting.live > 0 {
            self.greeting
                .expire(now, io.registry, self.door.as_ref().map(|(d, _)| &**d));
        }
        self.expire(now);
        // Open loop: start every transaction that is due.
        while let Some((due, i)) = self.pacer.as_mut().and_then(Pacer::next_due) {
            let recording = self.recording();
            let pacer = self.pacer.as_mut().expect("open loop");
            if self.flows[i].in_flight >= MAX_CRR_IN_FLIGHT {
                // Too many connections open: this one waits, still timed from when it was due.
                pacer.defer(i, due);
                continue;
            }
            pacer.issued(i, due, recording);
            pacer.sent(due, Instant::now(), recording);
            self.start(io.registry, i, Some(due))?;
        }
        // Closed loop: replace each transaction that ended. One that fails
        // at once (refused, no local port left) tries again after
        // FAILED_RETRY, so that a lasting failure neither spins a CPU nor
        // counts as many failures as the CPU can make.
        if self.retry_at.is_some_and(|t| now >= t) {
            self.restart.append(&mut self.retry);
            self.retry_at = None;
        }
        let mut again = Vec::new();
        for i in std::mem::take(&mut self.restart) {
            if !self.start(io.registry, i, None)? {
                again.push(i);
            }
        }
        if !again.is_empty() {
            self.retry.extend(again);
            self.retry_at.get_or_insert(now + FAILED_RETRY);
        }
        // (A transaction that ended inside start() already queued its successor.)
        let mut wait = if !self.restart.is_empty() {
            Duration::ZERO
        } else {
            let now = Instant::now();
            let next = self
                .deadlines
                .front()
                .map(|(d, _, _)| *d + Duration::from_millis(1))
                .into_iter()
                .chain(self.retry_at)
                .min();
            next.map_or(IDLE, |d| d.saturating_duration_since(now).min(IDLE))
        };
        if let Some(p) = &mut self.pacer {
            wait = p.arm(wait);
        }
        Ok(wait)
    }

    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        // No new transactions; those in flight finish or time out.
        self.stopping = true;
        self.restart.clear();
        self.retry.clear();
        self.retry_at = None;
        if let Some(p) = &mut self.pacer {
            p.stop();
        }
        self.ctl.drain.min(self.cfg.timeout)
    }

    fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
        self.stopping && self.live == 0
    }

    fn finish(mut self, io: &Io<'_>) -> WorkerEnd {
        // The listener goes back to the agent, out of this event loop first.
        if let Some((door, mut l)) = self.door.take() {
            let _ = io.registry.deregister(&mut l);
            self.greeting.expire(far_future(), io.registry, Some(&*door));
        }
        self.end()
    }
}

impl Worker<'_> {
    /// The worker's figures.
    pub(super) fn end(self) -> WorkerEnd {
        let requester = |f: &FlowState| f.slot.role == Role::Requester;
        // The kind's own figures: each requester's failures by reason.
        let counts = self
            .flows
            .iter()
            .filter(|f| requester(f))
            .map(|f| (f.slot.id, f.failures.counts()))
            .collect();
        WorkerEnd {
            latency: Some(self.latency.into_window()),
            schedule: self.pacer.map(|p| p.stats),
            transient: self
                .flows
                .into_iter()
                .filter(|f| requester(f) || f.first.is_some())
                .map(|f| TransientEnd {
                    id: f.slot.id,
                    first: f.first,
                })
                .collect(),
            counts,
            ..WorkerEnd::default()
        }
    }
}

impl Worker<'_> {
    pub(super) fn recording(&self) -> bool {
        self.ctl.recording.load(Ordering::Relaxed)
    }

    /// Puts a connection in a free slot, and watches it if given the registry.
    pub(super) fn open(
        &mut self,
        registry: Option<&Registry>,
        sock: TcpStream,
        flow: usize,
        step: Step,
        t0: Instant,
    ) -> Result<usize, io::Error> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Some(registry) = registry {
            if let Err(e) = watch(registry, &sock, slot) {
                self.free.push(slot);
                return Err(e);
            }
        }
        self.serial += 1;
        self.deadlines
            .push_back((Instant::now() + self.cfg.timeout, slot, self.serial));
        self.conns[slot] = Some(Conn {
            sock,
            flow,
            step,
            t0,
            serial: self.serial,
        });
        self.live += 1;
        self.flows[flow].in_flight += 1;
        Ok(slot)
    }

    /// Closes a connection (the kernel drops it from the event loop with its descriptor).
    pub(super) fn close(&mut self, slot: usize) -> Option<Conn> {
        let c = self.conns.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.live -= 1;
        self.flows[c.flow].in_flight -= 1;
        Some(c)
    }

    pub(super) fn count_failure(&mut self, i: usize, e: &io::Error) {
        if !self.recording() {
            log::debug!(
                "flow {}: a transaction failed outside the window: {e}",
                self.flows[i].slot.id
            );
            return;
        }
        let why = Failure::of(e);
        self.flows[i].failures.count(why);
        self.flows[i].slot.counters.add_failure();
        let k = why as usize;
        if !self.logged[k] {
            self.logged[k] = true;
            log::warn!(
                "flow {}: a transaction failed ({why:?}): {e}; counted, the flow carries on",
                self.flows[i].slot.id
            );
        }
    }

    /// Closes every connection whose time is up.
    pub(super) fn expire(&mut self, now: Instant) {
        while let Some(&(at, slot, serial)) = self.deadlines.front() {
            let current = matches!(self.conns.get(slot), Some(Some(c)) if c.serial == serial);
            if current && at > now {
                break;
            }
            self.deadlines.pop_front();
            if current {
                self.fail(
                    slot,
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("not done within {:?} (--timeout)", self.cfg.timeout),
                    ),
                );
            }
        }
    }
}
