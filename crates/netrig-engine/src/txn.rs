//! Pieces the request/response workloads share: tcp-rr on persistent
//! connections and tcp-crr with a connection per transaction. The open-loop
//! pacer (its schedule, its timer, how far sends fell behind) and the
//! responder's answering of whole requests live here once; each workload
//! keeps only its own handler of the reactor's events.

use crate::flow::ScheduleStats;
use crate::inq::ReadInq;
use mio::{Registry, Token};
use netrig_proto::spec::Transactions;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// A send that starts more than this after it was due counts as late.
pub const LATE: Duration = Duration::from_millis(1);
/// Token of the pacer's timer in a worker's event loop (the reactor's own
/// timer is [`netrig_io::TIMER`]).
pub const TIMER: Token = netrig_io::reserved(0);
/// Requests due within this are issued now rather than slept for (spinning
/// in [`Pacer::next_due`], the sockets unserved) when the pacer does not wake early.
const SPIN: Duration = Duration::from_micros(20);
/// The same when it wakes early: the event loop's zero-timeout polls spin
/// until then, serving the sockets, so only the last few µs block.
const FINE: Duration = Duration::from_micros(3);
/// Bounds of the learned wake-up lead.
const MIN_LEAD: Duration = Duration::from_micros(10);
const MAX_LEAD: Duration = Duration::from_micros(500);
/// The lead before the timer has woken the loop even once.
const FIRST_LEAD: Duration = Duration::from_micros(100);
/// A learned lead is at most this fraction (1/n) of the mean gap between a
/// worker's requests, so a fast schedule does not spin all the time.
const GAP_SHARE: u32 = 4;
/// How long a request whose flow has no room for it waits before it tries again.
const RETRY: Duration = Duration::from_micros(100);

/// The event loop's timerfd, from the I/O core (crate netrig-io).
pub use netrig_io::Timer;

/// How long before a request is due the pacer's timer fires; the event loop
/// spins from then on (polling its sockets without sleeping). A sleeping
/// thread wakes late (tens of µs on a quiet machine, more on a virtual one),
/// and an open loop times latency from the due time, so without a lead the
/// generator's own wake-up would count as latency of the system under test.
///
/// Learned unless fixed (`--spin-us`): as TCP learns its retransmission
/// timeout, from a smoothed lateness of the timer's wake-ups plus four times
/// their smoothed deviation; bounded to [`MIN_LEAD`]..[`MAX_LEAD`] and to
/// 1/[`GAP_SHARE`] of the mean gap between the worker's requests.
#[derive(Debug, Clone)]
pub struct Lead {
    /// `--spin-us`: a set lead (zero: no early wake-up), never learned or capped.
    fixed: Option<Duration>,
    /// Smoothed wake-up lateness and its mean deviation, in ns; none before
    /// the first wake-up.
    smooth: Option<(f64, f64)>,
    /// At most this (a share of the mean gap between requests).
    cap: Duration,
    /// Wake-ups learned from.
    pub samples: u64,
}

impl Lead {
    /// `None`: learned; `Some(d)`: always `d` (zero: no early wake-up).
    pub fn new(fixed: Option<Duration>) -> Lead {
        Lead {
            fixed,
            smooth: None,
            cap: MAX_LEAD,
            samples: 0,
        }
    }

    /// The schedule now issues one request every `gap` on average.
    pub fn set_mean_gap(&mut self, gap: Duration) {
        self.cap = gap / GAP_SHARE;
    }

    /// The timer fired `late` after the time it was armed for.
    pub fn observe(&mut self, late: Duration) {
        if self.fixed.is_some() {
            return;
        }
        // One long preemption must not hold the lead at its bound for long.
        let x = late.min(2 * MAX_LEAD).as_nanos() as f64;
        self.smooth = Some(match self.smooth {
            None => (x, x / 2.0),
            Some((mean, dev)) => (mean + (x - mean) / 8.0, dev + ((x - mean).abs() - dev) / 4.0),
        });
        self.samples += 1;
    }

    /// How long before a request is due to wake for it.
    pub fn get(&self) -> Duration {
        if let Some(d) = self.fixed {
            return d;
        }
        let learned = match self.smooth {
            None => FIRST_LEAD,
            Some((mean, dev)) => Duration::from_nanos((mean + 4.0 * dev) as u64),
        };
        learned.clamp(MIN_LEAD, MAX_LEAD).min(self.cap)
    }
}

/// Open loop: when each of a worker's flows must issue its next request
/// (`rate` per second per flow, evenly or with exponential gaps), whatever
/// the responses do. A request that cannot be issued when due (its flow has
/// no room) keeps its due time: latency is always timed from when it was due.
/// What the request/response kinds (tcp-rr, tcp-crr, udp-rr) share: the
/// sizes, the closed-loop burst and the open-loop schedule.
#[derive(Debug, Clone)]
pub struct TxnParams {
    pub request_size: usize,
    pub response_size: usize,
    /// Transactions in flight per flow, closed loop.
    pub burst: u32,
    /// Open loop: transactions per second per flow.
    pub rate: Option<f64>,
    pub poisson: bool,
    /// Open loop: how long before a request is due to wake and spin for it
    /// (`None`: learned; zero: no early wake-up).
    pub spin: Option<Duration>,
    /// `--busy-wait`: wait for the peer polling the socket, not sleeping.
    pub busy_wait: bool,
}

impl TxnParams {
    pub fn from_spec(t: &Transactions) -> Self {
        TxnParams {
            request_size: t.request_size as usize,
            response_size: t.response_size as usize,
            burst: t.burst(),
            rate: t.rate(),
            poisson: t.poisson(),
            spin: t.spin(),
            busy_wait: t.busy_wait,
        }
    }

    /// The open-loop schedule, its timer registered with `registry`; `None`
    /// in closed loop. `window`: the measured window whose due requests it
    /// counts ([`WorkerControl::window`](crate::workload::WorkerControl)).
    pub fn pacer(
        &self,
        registry: &Registry,
        window: Option<(Instant, Instant)>,
    ) -> io::Result<Option<Pacer>> {
        self.rate
            .map(|rate| {
                let mut p = Pacer::new(rate, self.poisson, self.spin, registry)?;
                p.window = window;
                Ok(p)
            })
            .transpose()
    }
}

pub struct Pacer {
    rate: f64,
    poisson: bool,
    rng: fastrand::Rng,
    /// (when to look again, when the request is due, flow index), earliest first;
    /// one entry per flow.
    queue: BinaryHeap<Reverse<(Instant, Instant, usize)>>,
    timer: Timer,
    /// When the timer is set to fire, if it is.
    armed_for: Option<Instant>,
    lead: Lead,
    /// Flows on the schedule.
    flows: u32,
    /// The measured window, [from, to): `stats.due` counts the requests due
    /// inside it, issued or not. `None`: those issued while recording.
    window: Option<(Instant, Instant)>,
    /// Schedule keeping while recording.
    pub stats: ScheduleStats,
}

impl Pacer {
    /// A pacer whose timer wakes the event loop of `registry` with [`TIMER`],
    /// `spin` before a request is due (`None`: a learned [`Lead`]).
    pub fn new(rate: f64, poisson: bool, spin: Option<Duration>, registry: &Registry) -> io::Result<Pacer> {
        let timer = Timer::registered(registry, TIMER)?;
        Ok(Pacer {
            rate,
            poisson,
            rng: fastrand::Rng::new(),
            queue: BinaryHeap::new(),
            timer,
            armed_for: None,
            lead: Lead::new(spin),
            flows: 0,
            stats: ScheduleStats::default(),
            window: None,
        })
    }

    fn gap(&mut self) -> Duration {
        let mean = 1.0 / self.rate;
        let secs = if self.poisson {
            // Exponential inter-arrival: -ln(U) / rate, U in (0, 1].
            -(1.0 - self.rng.f64()).ln() * mean
        } else {
            mean
        };
        Duration::from_secs_f64(secs.min(3600.0))
    }

    /// Schedules `flow`'s first request at a random phase after `start`, so
    /// that flows do not fire in lockstep.
    pub fn start(&mut self, flow: usize, start: Instant) {
        let phase = self.rng.f64();
        let first = start + self.gap().mul_f64(phase);
        self.queue.push(Reverse((first, first, flow)));
        self.flows += 1;
        // At most an hour, as gap() bounds one flow's: a rate near 0 is valid.
        let mean = 1.0 / (self.rate * self.flows as f64);
        self.lead.set_mean_gap(Duration::from_secs_f64(mean.min(3600.0)));
    }

    /// The next request that is due now (spinning through its last few µs),
    /// as (due time, flow). The caller issues it and calls [`Pacer::issued`],
    /// or puts it back with [`Pacer::defer`], or drops the flow's schedule.
    pub fn next_due(&mut self) -> Option<(Instant, usize)> {
        let Reverse((at, due, flow)) = *self.queue.peek()?;
        let last = if self.lead.get().is_zero() { SPIN } else { FINE };
        if at > Instant::now() + last {
            return None;
        }
        while Instant::now() < at {
            std::hint::spin_loop();
        }
        self.queue.pop();
        Some((due, flow))
    }

    /// `flow`'s request due at `due` was issued: its next one follows a gap later.
    pub fn issued(&mut self, flow: usize, due: Instant, recording: bool) {
        let counted = match self.window {
            Some((from, to)) => due >= from && due < to,
            None => recording,
        };
        if counted {
            self.stats.due += 1;
        }
        let next = due + self.gap();
        self.queue.push(Reverse((next, next, flow)));
    }

    /// `flow` has no room for its request due at `due`: it tries again shortly,
    /// still timed from `due`.
    pub fn defer(&mut self, flow: usize, due: Instant) {
        self.queue.push(Reverse((Instant::now() + RETRY, due, flow)));
    }

    /// A request due at `due` started to leave at `sent`.
    pub fn sent(&mut self, due: Instant, sent: Instant, recording: bool) {
        if !recording {
            return;
        }
        let behind = sent.saturating_duration_since(due);
        let ns = behind.as_nanos().min(u64::MAX as u128) as u64;
        self.stats.behind_sum_ns += ns as u128;
        self.stats.behind_max_ns = self.stats.behind_max_ns.max(ns);
        if behind > LATE {
            self.stats.late += 1;
        }
    }

    /// No more requests (the window closed). The requests due inside the
    /// window that were never issued (a generator that fell behind its
    /// schedule) count in `stats.due` too: what was offered, not what the
    /// generator managed to send.
    pub fn stop(&mut self) {
        if let Some((from, to)) = self.window {
            let entries: Vec<Instant> = self.queue.drain().map(|Reverse((_, due, _))| due).collect();
            for due in entries {
                self.stats.due += self.slots_between(due, from, to);
            }
        }
        self.queue.clear();
    }

    /// How many of a flow's schedule slots, the first at `first`, fall in
    /// [from, to): exactly for an even schedule; drawn gap by gap for a
    /// Poisson one, the way the schedule would have gone on, and beyond
    /// [`MAX_DRAWN`] draws the rest at the mean rate.
    fn slots_between(&mut self, first: Instant, from: Instant, to: Instant) -> u64 {
        const MAX_DRAWN: u64 = 10_000_000;
        if first >= to {
            return 0;
        }
        if !self.poisson {
            // Slot k is at first + k x gap, as issued() steps it (in whole ns).
            let gap = self.gap().as_nanos().max(1);
            let after = |t: Instant| t.saturating_duration_since(first).as_nanos().div_ceil(gap);
            return (after(to) - after(from)).min(u64::MAX as u128) as u64;
        }
        let (mut t, mut n, mut drawn) = (first, 0u64, 0u64);
        while t < to {
            if drawn == MAX_DRAWN {
                let rest = to.duration_since(t.max(from)).as_secs_f64() * self.rate;
                return n + rest.round() as u64;
            }
            if t >= from {
                n += 1;
            }
            t += self.gap();
            drawn += 1;
        }
        n
    }

    /// Call before polling with timeout `wait`; returns the timeout to use
    /// instead. Arms the timer to fire the lead before the earliest request
    /// is due; once inside the lead, the timeout is zero: the loop spins,
    /// polling its sockets without sleeping, until [`Pacer::next_due`] has it.
    pub fn arm(&mut self, wait: Duration) -> Duration {
        let Some(&Reverse((at, due, _))) = self.queue.peek() else {
            self.disarm();
            return wait;
        };
        let now = Instant::now();
        // A request that had to wait for room retries without spinning.
        let lead = if at == due {
            self.lead.get()
        } else {
            Duration::ZERO
        };
        let wake = at.checked_sub(lead).unwrap_or(at);
        if !lead.is_zero() && wake <= now {
            self.disarm();
            return Duration::ZERO;
        }
        // The timer is already set for then: no system call.
        if self.armed_for != Some(wake) {
            self.timer.arm(wake.saturating_duration_since(now));
            self.armed_for = Some(wake);
        }
        wait
    }

    fn disarm(&mut self) {
        if self.armed_for.take().is_some() {
            self.timer.disarm();
        }
    }

    /// The loop saw [`TIMER`]: consume the expiry and learn how late it woke.
    pub fn on_timer(&mut self) {
        self.timer.clear();
        if let Some(set) = self.armed_for.take() {
            self.lead.observe(Instant::now().saturating_duration_since(set));
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        if self.flows > 0 {
            log::debug!(
                "open-loop pacer: {} flow(s), woke {:?} early (learned from {} timer wake-ups)",
                self.flows,
                self.lead.get(),
                self.lead.samples
            );
        }
    }
}

/// What one call moved on a connection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Moved {
    pub bytes: u64,
    pub transactions: u64,
}

/// The responder's side of a connection: counts request bytes and answers
/// every whole request with a response, many responses per write when they
/// queue up. `limit` bounds the requests one connection may carry (one for
/// tcp-crr).
#[derive(Debug)]
pub struct Answerer {
    request_size: usize,
    response_size: usize,
    limit: u64,
    req_got: usize,
    owed: u64,
    resp_off: usize,
    answered: u64,
    /// One-way delay (tcp-rr), `None` when off (boxed: off the
    /// unstamped path's way).
    stamps: Option<Box<Stamps>>,
}

/// A responder's stamps: the requests' read (`None`: too small to carry
/// one), and the responses' written (`None`: too small).
#[derive(Debug)]
struct Stamps {
    input: Option<crate::msg_stamp::StampIn>,
    out: Option<StampOut>,
    recording: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// A responder's stamped responses: its time zero, and a response it
/// stamps before each is written.
#[derive(Debug)]
struct StampOut {
    zero: Instant,
    resp: Vec<u8>,
}

impl Answerer {
    pub fn new(request_size: usize, response_size: usize, limit: u64) -> Answerer {
        Answerer {
            request_size: request_size.max(1),
            response_size: response_size.max(1),
            limit,
            req_got: 0,
            owed: 0,
            resp_off: 0,
            answered: 0,
            stamps: None,
        }
    }

    /// Times the messages (tcp-rr's one-way delay, see [`crate::msg_stamp`]):
    /// records each request's one-way delay from its stamp while
    /// `recording`, and stamps each response with its send time since
    /// `zero` as its first byte is written. Either only where its
    /// messages are at least 8 bytes.
    pub fn with_stamps(
        mut self,
        zero: Instant,
        clock_ref: Instant,
        recording: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Answerer {
        let input = crate::msg_stamp::StampIn::new(self.request_size, clock_ref);
        let out = (self.response_size >= crate::msg_stamp::STAMP_LEN).then(|| StampOut {
            zero,
            resp: vec![0xa5; self.response_size.min(256 * 1024)],
        });
        self.stamps = (input.is_some() || out.is_some()).then(|| {
            Box::new(Stamps {
                input,
                out,
                recording,
            })
        });
        self
    }

    /// The one-way delays of the requests it read in the window (taken out).
    pub fn take_one_way(&mut self) -> Option<netrig_metrics::LatencyRecorder> {
        let s = self.stamps.as_mut()?.input.as_mut()?;
        let h = std::mem::replace(&mut s.recorder, netrig_metrics::OneWayRecorder::new(0)).into_histogram();
        (!h.is_empty()).then_some(h)
    }

    /// A response (or part of one) still to write: a writable socket is
    /// reason to call `serve` again.
    pub fn owes(&self) -> bool {
        self.owed > 0
    }

    /// Every request it may carry answered, the last response written whole.
    pub fn finished(&self) -> bool {
        self.answered >= self.limit && self.owed == 0 && self.resp_off == 0
    }

    /// `n` request bytes read by the caller (with the connection's
    /// greeting, say): counted as if `serve` had read them.
    pub fn took(&mut self, n: usize) -> Result<(), (&'static str, io::Error)> {
        self.req_got += n;
        self.owed += (self.req_got / self.request_size) as u64;
        self.req_got %= self.request_size;
        if self.answered + self.owed > self.limit
            || (self.req_got > 0 && self.answered + self.owed >= self.limit)
        {
            return Err((
                "receive request",
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("more than the {} request(s) a connection may carry", self.limit),
                ),
            ));
        }
        Ok(())
    }

    /// Reads the requests that have arrived and writes the responses the
    /// socket takes. True at end of file. `moved` counts what moved, also
    /// when an error (named by its step) ends the call. With the last
    /// request it may carry whole and its response owed, it answers without
    /// reading on: what follows (the end of file, or too much) is read by
    /// the next call, once the response is out. Every response byte
    /// written is spent from `cap` (the agent's `--max-rate`).
    pub fn serve(
        &mut self,
        sock: &mut (impl ReadInq + Write),
        buf: &mut [u8],
        response: &[u8],
        moved: &mut Moved,
        cap: &crate::cap::SendCap,
    ) -> Result<bool, (&'static str, io::Error)> {
        let mut eof = false;
        loop {
            if self.owed > 0 && self.answered + self.owed >= self.limit {
                break;
            }
            match sock.read_inq(buf) {
                Ok((0, _)) => {
                    eof = true;
                    break;
                }
                Ok((n, empty)) => {
                    moved.bytes += n as u64;
                    if let Some(st) = &mut self.stamps {
                        if let Some(s) = &mut st.input {
                            let rec = st.recording.load(std::sync::atomic::Ordering::Relaxed);
                            s.feed(&buf[..n.min(buf.len())], Instant::now(), rec);
                        }
                    }
                    self.took(n)?;
                    if empty {
                        break; // (crate::inq: no read that finds nothing)
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(("receive request", e)),
            }
        }
        // Answer what is owed, many responses per call when they queue up.
        while self.owed > 0 {
            let left = self.owed as u128 * self.response_size as u128 - self.resp_off as u128;
            let written = match self.stamps.as_mut().and_then(|s| s.out.as_mut()) {
                // Stamped: one response (or the rest of one) a write, its
                // first 8 bytes its send time.
                Some(out) => {
                    let (size, off) = (self.response_size, self.resp_off);
                    let rest = size - off;
                    let part = if off < crate::msg_stamp::STAMP_LEN {
                        if off == 0 {
                            let t = crate::msg_stamp::ns_since(Instant::now(), out.zero);
                            out.resp[..8].copy_from_slice(&t.to_le_bytes());
                        }
                        &out.resp[off..rest.min(out.resp.len() - off) + off]
                    } else {
                        // Past the stamp: filler.
                        &out.resp[8..8 + rest.min(out.resp.len() - 8)]
                    };
                    sock.write(part)
                }
                None => sock.write(&response[..left.min(response.len() as u128) as usize]),
            };
            match written {
                Ok(n) => {
                    let _ = cap.spend(n);
                    moved.bytes += n as u64;
                    let total = self.resp_off + n;
                    let whole = (total / self.response_size) as u64;
                    self.resp_off = total % self.response_size;
                    self.owed -= whole;
                    self.answered += whole;
                    moved.transactions += whole;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if eof => return Ok(true),
                Err(e) => return Err(("send response", e)),
            }
        }
        Ok(eof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// An in-memory socket: reads from `input`, writes into `out`.
    struct Mem {
        input: std::io::Cursor<Vec<u8>>,
        out: Vec<u8>,
        eof: bool,
    }

    impl Read for Mem {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            match self.input.read(b)? {
                0 if !self.eof => Err(io::ErrorKind::WouldBlock.into()),
                n => Ok(n),
            }
        }
    }

    impl ReadInq for Mem {}

    impl Write for Mem {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.out.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn lead_learns_wake_up_lateness_within_its_bounds() {
        let mut l = Lead::new(None);
        assert_eq!(l.get(), FIRST_LEAD, "before the first wake-up");
        // Steady lateness: the lead settles on it.
        for _ in 0..200 {
            l.observe(us(60));
        }
        assert!(l.get() >= us(60) && l.get() <= us(61), "{:?}", l.get());
        // Jitter raises it above the latest of the wake-ups, not just to their mean.
        for i in 0..200 {
            l.observe(us(if i % 2 == 0 { 40 } else { 80 }));
        }
        assert!(l.get() > us(100), "{:?}", l.get());
        // Bounds: a punctual timer still gets the least lead, a slow one the most.
        for _ in 0..200 {
            l.observe(Duration::ZERO);
        }
        assert_eq!(l.get(), MIN_LEAD);
        for _ in 0..200 {
            l.observe(Duration::from_millis(20));
        }
        assert_eq!(l.get(), MAX_LEAD);
        // One long preemption does not hold the lead at its bound for long.
        let mut l = Lead::new(None);
        for _ in 0..50 {
            l.observe(us(50));
        }
        l.observe(Duration::from_secs(1));
        for _ in 0..60 {
            l.observe(us(50));
        }
        assert!(l.get() < us(60), "{:?}", l.get());
        assert_eq!(l.samples, 111);
    }

    #[test]
    fn lead_is_a_share_of_the_gap_unless_set() {
        let mut l = Lead::new(None);
        for _ in 0..100 {
            l.observe(Duration::from_millis(20));
        }
        l.set_mean_gap(us(400));
        assert_eq!(l.get(), us(400) / GAP_SHARE);
        // Below the least lead too: a fast schedule must not spin all the time.
        l.set_mean_gap(us(20));
        assert_eq!(l.get(), us(20) / GAP_SHARE);
        l.set_mean_gap(Duration::from_secs(1));
        assert_eq!(l.get(), MAX_LEAD);
        // --spin-us: as set, never learned or capped; 0 is no early wake-up.
        for fixed in [Duration::ZERO, us(3000)] {
            let mut l = Lead::new(Some(fixed));
            l.set_mean_gap(us(20));
            l.observe(Duration::from_millis(20));
            assert_eq!((l.get(), l.samples), (fixed, 0));
        }
    }

    /// `--rate` has no lower bound but more than 0: a schedule whose mean
    /// gap is beyond what a Duration holds starts as one an hour apart.
    #[test]
    fn a_rate_near_zero_starts_its_schedule() {
        let poll = mio::Poll::new().unwrap();
        for rate in [1e-20, f64::MIN_POSITIVE, 5e-324] {
            let mut p = Pacer::new(rate, false, None, poll.registry()).unwrap();
            p.start(0, Instant::now());
            p.start(1, Instant::now());
            assert_eq!(p.lead.cap, Duration::from_secs(3600) / GAP_SHARE, "--rate {rate}");
        }
    }

    /// `due` is what was offered: the requests due inside the window,
    /// whether the generator issued them or fell behind and never did.
    #[test]
    fn the_window_counts_every_request_due_in_it_issued_or_not() {
        let poll = mio::Poll::new().unwrap();
        let t0 = Instant::now();
        let (from, to) = (t0 + Duration::from_millis(100), t0 + Duration::from_millis(1100));
        // 10,000/s over a 1 s window, of which the generator issues only the first few.
        let mut p = Pacer::new(10_000.0, false, Some(Duration::ZERO), poll.registry()).unwrap();
        p.window = Some((from, to));
        p.queue.push(Reverse((t0, t0, 0)));
        let mut due = t0;
        for _ in 0..1500 {
            // Issued at once, as a generator keeping up would: those due before `from` do not count.
            let Reverse((_, d, f)) = p.queue.pop().unwrap();
            p.issued(f, d, true);
            due = d;
        }
        assert!(due > from, "1,500 slots of 100 µs pass the window's start");
        assert_eq!(p.stats.due, 500, "slots 1,000 to 1,499 are in the window");
        p.stop();
        assert_eq!(p.stats.due, 10_000, "the 9,500 never issued count too");
        // A Poisson schedule draws the rest: about rate x window.
        let mut p = Pacer::new(10_000.0, true, Some(Duration::ZERO), poll.registry()).unwrap();
        p.window = Some((from, to));
        p.queue.push(Reverse((t0, t0, 0)));
        p.stop();
        assert!((9_500..=10_500).contains(&p.stats.due), "{}", p.stats.due);
        // Without a window (a test counted in bytes), as before: issued while recording.
        let mut p = Pacer::new(10_000.0, false, Some(Duration::ZERO), poll.registry()).unwrap();
        p.issued(0, t0, true);
        p.issued(0, t0, false);
        p.queue.clear();
        p.stop();
        assert_eq!(p.stats.due, 1);
    }

    #[test]
    fn pacer_spins_by_polling_only_inside_its_lead() {
        let poll = mio::Poll::new().unwrap();
        let wait = Duration::from_millis(10);
        // No early wake-up: sleep (on the timer) whatever comes next.
        let mut p = Pacer::new(1.0, false, Some(Duration::ZERO), poll.registry()).unwrap();
        p.start(0, Instant::now() + Duration::from_secs(5));
        assert_eq!(p.arm(wait), wait);
        assert_eq!(p.lead.cap, Duration::from_secs(1) / GAP_SHARE);
        // A lead longer than the wait for the next request: poll without sleeping.
        let mut p = Pacer::new(1000.0, false, Some(Duration::from_secs(10)), poll.registry()).unwrap();
        assert_eq!(p.arm(wait), wait, "nothing scheduled");
        p.start(0, Instant::now());
        assert_eq!(p.arm(wait), Duration::ZERO);
        assert!(p.armed_for.is_none(), "the timer is off while spinning");
        // A request waiting for room retries on the timer, without spinning.
        let (due, flow) = loop {
            if let Some(d) = p.next_due() {
                break d;
            }
        };
        p.defer(flow, due);
        assert_eq!(p.arm(wait), wait);
        assert!(p.armed_for.is_some());
        p.stop();
        assert_eq!(p.arm(wait), wait);
        assert!(p.armed_for.is_none());
    }

    #[test]
    fn answers_whole_requests_only_and_keeps_to_the_limit() {
        let mut a = Answerer::new(3, 5, u64::MAX);
        let mut s = Mem {
            input: std::io::Cursor::new(vec![1; 7]),
            out: vec![],
            eof: false,
        };
        let mut m = Moved::default();
        let resp = [9u8; 64];
        assert!(!a
            .serve(&mut s, &mut [0; 16], &resp, &mut m, &crate::cap::SendCap::none())
            .unwrap());
        assert_eq!((m.transactions, s.out.len(), m.bytes), (2, 10, 17));
        let mut one = Answerer::new(1, 1, 1);
        let mut s = Mem {
            input: std::io::Cursor::new(vec![1; 2]),
            out: vec![],
            eof: true,
        };
        let err = one
            .serve(
                &mut s,
                &mut [0; 16],
                &resp,
                &mut Moved::default(),
                &crate::cap::SendCap::none(),
            )
            .unwrap_err();
        assert!(err.1.to_string().contains("1 request(s)"), "{}", err.1);
        let mut one = Answerer::new(1, 1, 1);
        let mut s = Mem {
            input: std::io::Cursor::new(vec![1]),
            out: vec![],
            eof: true,
        };
        let mut m = Moved::default();
        // Its one request whole: answered before a read more (the end of
        // file is the next call's).
        assert!(!one
            .serve(&mut s, &mut [0; 16], &resp, &mut m, &crate::cap::SendCap::none())
            .unwrap());
        assert_eq!((m.transactions, one.answered, s.out.len()), (1, 1, 1));
        assert!(one.finished());
        assert!(
            one.serve(&mut s, &mut [0; 16], &resp, &mut m, &crate::cap::SendCap::none())
                .unwrap(),
            "end of file"
        );
        // A request read by the caller counts as one read here.
        let mut one = Answerer::new(2, 3, 1);
        one.took(2).unwrap();
        let mut s = Mem {
            input: std::io::Cursor::new(vec![]),
            out: vec![],
            eof: false,
        };
        let mut m = Moved::default();
        assert!(!one
            .serve(&mut s, &mut [0; 16], &resp, &mut m, &crate::cap::SendCap::none())
            .unwrap());
        assert_eq!((m.transactions, s.out.len()), (1, 3));
        assert!(Answerer::new(1, 1, 1).took(2).is_err(), "more than its limit");
    }

    /// Stamped (tcp-rr's one-way delay): the requests' stamps are read across reads that split
    /// them, and recorded only while recording; each response goes out with its own send time in
    /// its first 8 bytes, and its filler after.
    #[test]
    fn a_stamping_answerer_reads_the_requests_stamps_and_stamps_each_response() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let zero = Instant::now();
        let recording = Arc::new(AtomicBool::new(true));
        // Requests of 12 bytes sent "now" by the answerer's clock, so each one-way delay is small.
        let sent = crate::msg_stamp::ns_since(Instant::now(), zero);
        let mut input = Vec::new();
        for _ in 0..5 {
            input.extend_from_slice(&sent.to_le_bytes());
            input.extend_from_slice(&[0x5a; 4]);
        }
        let mut a = Answerer::new(12, 10, u64::MAX).with_stamps(zero, zero, recording.clone());
        let mut s = Mem {
            input: std::io::Cursor::new(input),
            out: vec![],
            eof: false,
        };
        let mut m = Moved::default();
        // A 7-byte buffer: every stamp split across reads.
        let mut buf = [0u8; 7];
        a.serve(
            &mut s,
            &mut buf,
            &[0xa5; 10],
            &mut m,
            &crate::cap::SendCap::none(),
        )
        .unwrap();
        assert_eq!((m.transactions, s.out.len()), (5, 50));
        let after = crate::msg_stamp::ns_since(Instant::now(), zero);
        for r in s.out.chunks(10) {
            let t = u64::from_le_bytes(r[..8].try_into().unwrap());
            assert!(sent <= t && t <= after, "{t} outside {sent}..{after}");
            assert_eq!(&r[8..], &[0xa5; 2]);
        }
        // Not recording: read, not recorded.
        recording.store(false, Ordering::Relaxed);
        s.input = std::io::Cursor::new([sent.to_le_bytes().to_vec(), vec![0; 4]].concat());
        a.serve(
            &mut s,
            &mut buf,
            &[0xa5; 10],
            &mut m,
            &crate::cap::SendCap::none(),
        )
        .unwrap();
        assert_eq!(m.transactions, 6);
        let h = a.take_one_way().expect("the requests' one-way delays");
        assert_eq!(h.len(), 5);
        // Unstamped (1-byte messages, or no with_stamps): nothing recorded, the filler as given.
        let mut plain = Answerer::new(1, 1, u64::MAX).with_stamps(zero, zero, recording);
        assert!(plain.take_one_way().is_none());
    }
}
