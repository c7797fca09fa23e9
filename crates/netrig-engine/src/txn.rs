//! Pieces the request/response workloads share: tcp-rr on persistent
//! connections and tcp-crr with a connection per transaction. The open-loop
//! pacer (its schedule, its timer, how far sends fell behind) and the
//! responder's answering of whole requests live here once; each workload
//! keeps only its own event loop.

use crate::flow::ScheduleStats;
use mio::{Interest, Registry, Token};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// A send that starts more than this after it was due counts as late.
pub(crate) const LATE: Duration = Duration::from_millis(1);
/// Token of the pacer's timer in a worker's event loop.
pub(crate) const TIMER: Token = Token(usize::MAX);
/// Requests due within this are issued now rather than slept for.
const SPIN: Duration = Duration::from_micros(20);
/// How long a request whose flow has no room for it waits before it tries again.
const RETRY: Duration = Duration::from_micros(100);

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

/// Open loop: when each of a worker's flows must issue its next request
/// (`rate` per second per flow, evenly or with exponential gaps), whatever
/// the responses do. A request that cannot be issued when due (its flow has
/// no room) keeps its due time: latency is always timed from when it was due.
pub(crate) struct Pacer {
    rate: f64,
    poisson: bool,
    rng: fastrand::Rng,
    /// (when to look again, when the request is due, flow index), earliest first;
    /// one entry per flow.
    queue: BinaryHeap<Reverse<(Instant, Instant, usize)>>,
    timer: Timer,
    /// Schedule keeping while recording.
    pub(crate) stats: ScheduleStats,
}

impl Pacer {
    /// A pacer whose timer wakes the event loop of `registry` with [`TIMER`].
    pub(crate) fn new(rate: f64, poisson: bool, registry: &Registry) -> io::Result<Pacer> {
        use std::os::fd::AsRawFd;
        let timer = Timer::new()?;
        registry.register(
            &mut mio::unix::SourceFd(&timer.fd.as_raw_fd()),
            TIMER,
            Interest::READABLE,
        )?;
        Ok(Pacer {
            rate,
            poisson,
            rng: fastrand::Rng::new(),
            queue: BinaryHeap::new(),
            timer,
            stats: ScheduleStats::default(),
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
    pub(crate) fn start(&mut self, flow: usize, start: Instant) {
        let phase = self.rng.f64();
        let first = start + self.gap().mul_f64(phase);
        self.queue.push(Reverse((first, first, flow)));
    }

    /// The next request that is due now (spinning through its last few µs),
    /// as (due time, flow). The caller issues it and calls [`Pacer::issued`],
    /// or puts it back with [`Pacer::defer`], or drops the flow's schedule.
    pub(crate) fn next_due(&mut self) -> Option<(Instant, usize)> {
        let Reverse((at, due, flow)) = *self.queue.peek()?;
        if at > Instant::now() + SPIN {
            return None;
        }
        while Instant::now() < at {
            std::hint::spin_loop();
        }
        self.queue.pop();
        Some((due, flow))
    }

    /// `flow`'s request due at `due` was issued: its next one follows a gap later.
    pub(crate) fn issued(&mut self, flow: usize, due: Instant, recording: bool) {
        if recording {
            self.stats.due += 1;
        }
        let next = due + self.gap();
        self.queue.push(Reverse((next, next, flow)));
    }

    /// `flow` has no room for its request due at `due`: it tries again shortly,
    /// still timed from `due`.
    pub(crate) fn defer(&mut self, flow: usize, due: Instant) {
        self.queue.push(Reverse((Instant::now() + RETRY, due, flow)));
    }

    /// A request due at `due` started to leave at `sent`.
    pub(crate) fn sent(&mut self, due: Instant, sent: Instant, recording: bool) {
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

    /// No more requests (the window closed).
    pub(crate) fn stop(&mut self) {
        self.queue.clear();
    }

    /// Arms the timer for the earliest request; call before polling.
    pub(crate) fn arm(&self) {
        if let Some(Reverse((at, _, _))) = self.queue.peek() {
            self.timer.arm(at.saturating_duration_since(Instant::now()));
        }
    }

    /// The loop saw [`TIMER`]: consume the expiry.
    pub(crate) fn on_timer(&self) {
        self.timer.clear();
    }
}

/// What one call moved on a connection.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Moved {
    pub bytes: u64,
    pub transactions: u64,
}

/// The responder's side of a connection: counts request bytes and answers
/// every whole request with a response, many responses per write when they
/// queue up. `limit` bounds the requests one connection may carry (one for
/// tcp-crr).
#[derive(Debug)]
pub(crate) struct Answerer {
    request_size: usize,
    response_size: usize,
    limit: u64,
    req_got: usize,
    owed: u64,
    resp_off: usize,
    answered: u64,
}

impl Answerer {
    pub(crate) fn new(request_size: usize, response_size: usize, limit: u64) -> Answerer {
        Answerer {
            request_size: request_size.max(1),
            response_size: response_size.max(1),
            limit,
            req_got: 0,
            owed: 0,
            resp_off: 0,
            answered: 0,
        }
    }

    /// Reads the requests that have arrived and writes the responses the
    /// socket takes. True at end of file. `moved` counts what moved, also
    /// when an error (named by its step) ends the call.
    pub(crate) fn serve(
        &mut self,
        sock: &mut (impl Read + Write),
        buf: &mut [u8],
        response: &[u8],
        moved: &mut Moved,
    ) -> Result<bool, (&'static str, io::Error)> {
        let mut eof = false;
        loop {
            match sock.read(buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    moved.bytes += n as u64;
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
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(("receive request", e)),
            }
        }
        // Answer what is owed, many responses per call when they queue up.
        while self.owed > 0 {
            let left = self.owed as u128 * self.response_size as u128 - self.resp_off as u128;
            let chunk = left.min(response.len() as u128) as usize;
            match sock.write(&response[..chunk]) {
                Ok(n) => {
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

    impl Write for Mem {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.out.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
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
        assert!(!a.serve(&mut s, &mut [0; 16], &resp, &mut m).unwrap());
        assert_eq!((m.transactions, s.out.len(), m.bytes), (2, 10, 17));
        let mut one = Answerer::new(1, 1, 1);
        let mut s = Mem {
            input: std::io::Cursor::new(vec![1; 2]),
            out: vec![],
            eof: true,
        };
        let err = one
            .serve(&mut s, &mut [0; 16], &resp, &mut Moved::default())
            .unwrap_err();
        assert!(err.1.to_string().contains("1 request(s)"), "{}", err.1);
        let mut one = Answerer::new(1, 1, 1);
        let mut s = Mem {
            input: std::io::Cursor::new(vec![1]),
            out: vec![],
            eof: true,
        };
        let mut m = Moved::default();
        assert!(
            one.serve(&mut s, &mut [0; 16], &resp, &mut m).unwrap(),
            "end of file"
        );
        assert_eq!((m.transactions, one.answered), (1, 1));
    }
}
