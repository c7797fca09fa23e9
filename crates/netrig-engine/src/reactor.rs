//! One event loop for every worker: the [`Reactor`] owns the mio poll, its
//! events buffer, an optional timer, the switch from running to draining
//! when the window closes and the drain's deadline, and the retries of an
//! interrupted poll; a test kind is a [`Handler`] that reacts to what the
//! reactor reports: a source ready, the timer fired, a turn of the loop, the
//! window closed. The loop is generic over the handler (static dispatch, no
//! `dyn` per event) and allocates nothing once it runs.
//!
//! One turn:
//!
//! 1. if the window has just closed (`stop`), [`Handler::on_stop`], which
//!    says how long the drain may last;
//! 2. [`Handler::on_tick`]: the kind's own work (requests due, timeouts,
//!    paced sends), which returns how long the poll may sleep;
//! 3. the loop ends if [`Handler::is_done`] says so (all flows finished, or
//!    drained) or the drain's deadline has passed, whichever comes first;
//! 4. poll (an interrupted poll starts the turn again), then each event:
//!    [`Handler::on_ready`] for a source registered under its index,
//!    [`Handler::on_timer`] for the reactor's timer, [`Handler::on_token`]
//!    for the kind's other reserved tokens (a pacer's timer, an intake's
//!    waker).
//!
//! The reactor reads the clock only when it must (at stop, and each turn of
//! a drain, for its deadline); a turn's time is a [`Now`] that reads the
//! clock on first use, so a kind whose hot path needs no time (an unpaced
//! stream's sender) reads none.

use crate::txn::Timer;
use crate::{EngineError, WorkerEnd};
use mio::event::Event;
use mio::{Events, Poll, Registry, Token};
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The reactor's timer (the pacer's has `txn::TIMER`, an intake's waker
/// `intake::WAKE`).
pub const TIMER: Token = Token(usize::MAX - 2);
/// Tokens from here up are reserved for timers and wakers; sources below it
/// are reported by index to [`Handler::on_ready`].
pub const RESERVED: usize = usize::MAX - 15;
/// How long a turn sleeps when the handler has nothing sooner to wake for.
pub const IDLE: Duration = Duration::from_millis(10);

/// What the reactor lends a handler on each call: the registry (to register
/// or drop sources), its timer, and whether the window has closed.
pub struct Io<'a> {
    pub registry: &'a Registry,
    pub timer: Option<&'a Timer>,
    /// When the window closed (`stop` was seen), if it has.
    pub stopped_at: Option<Instant>,
}

impl Io<'_> {
    /// The window has closed: senders stop, receivers drain.
    pub fn draining(&self) -> bool {
        self.stopped_at.is_some()
    }

    /// The reactor's timer; the handler asked for one when it made the reactor.
    pub fn timer(&self) -> &Timer {
        self.timer.expect("this reactor was made with a timer")
    }
}

/// The time of one turn of the loop, read from the clock on first use only:
/// a turn that needs no time (an unpaced stream's whose receivers have no
/// watermark on) reads no clock.
#[derive(Default)]
pub struct Now(Cell<Option<Instant>>);

impl Now {
    /// This turn's time: the clock's the first time it is asked.
    pub fn get(&self) -> Instant {
        match self.0.get() {
            Some(t) => t,
            None => {
                let t = Instant::now();
                self.0.set(Some(t));
                t
            }
        }
    }
}

/// Readiness of a source, as the poll reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    pub readable: bool,
    pub writable: bool,
    pub read_closed: bool,
    pub error: bool,
}

impl Ready {
    fn of(ev: &Event) -> Ready {
        Ready {
            readable: ev.is_readable(),
            writable: ev.is_writable(),
            read_closed: ev.is_read_closed(),
            error: ev.is_error(),
        }
    }

    /// Something to read: data, end of file or an error to collect.
    pub fn has_input(self) -> bool {
        self.readable || self.read_closed || self.error
    }
}

/// A test kind's side of one worker's event loop. Every method runs on the
/// worker's thread, between polls.
pub trait Handler {
    /// Source `index` (its token) is ready.
    fn on_ready(&mut self, io: &Io<'_>, index: usize, ready: Ready) -> Result<(), EngineError>;

    /// The reactor's timer fired.
    fn on_timer(&mut self, io: &Io<'_>) -> Result<(), EngineError> {
        let _ = io;
        Ok(())
    }

    /// A reserved token other than the reactor's timer (from [`RESERVED`] up).
    fn on_token(&mut self, io: &Io<'_>, token: Token) -> Result<(), EngineError> {
        let _ = (io, token);
        Ok(())
    }

    /// Each turn, before the poll: the kind's own work. Returns how long
    /// the poll may wait.
    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Duration, EngineError>;

    /// The window closed: senders stop, receivers begin to drain. Returns
    /// the longest the drain may last.
    fn on_stop(&mut self, io: &Io<'_>, now: Instant) -> Duration;

    /// True when the worker has nothing left to do: every flow finished
    /// (before the window closed, e.g. a byte quota sent) or drained.
    fn is_done(&self, io: &Io<'_>, now: &Now) -> bool;

    /// The worker's figures, once the loop has ended.
    fn finish(self, io: &Io<'_>) -> WorkerEnd;
}

/// One worker's event loop.
pub struct Reactor {
    poll: Poll,
    events: Events,
    timer: Option<Timer>,
}

fn setup(e: io::Error) -> EngineError {
    EngineError::Setup(format!("worker event loop: {e}"))
}

impl Reactor {
    /// A reactor with its own poll; `timer`: with a timer (a timerfd, for
    /// wake-ups finer than the poll's millisecond timeout).
    pub fn new(timer: bool) -> Result<Reactor, EngineError> {
        Reactor::with_poll(Poll::new().map_err(setup)?, timer)
    }

    /// A reactor on a poll made elsewhere (one that already holds a waker).
    pub fn with_poll(poll: Poll, timer: bool) -> Result<Reactor, EngineError> {
        let timer = match timer {
            true => Some(Timer::registered(poll.registry(), TIMER).map_err(setup)?),
            false => None,
        };
        Ok(Reactor {
            poll,
            events: Events::with_capacity(1024),
            timer,
        })
    }

    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// [`Reactor::run`] for a worker: its `stop`, and its `aborted`, which
    /// ends the loop at once, without draining.
    pub fn run_worker<H: Handler>(
        &mut self,
        handler: H,
        ctl: &crate::workload::WorkerControl,
    ) -> Result<WorkerEnd, EngineError> {
        self.run_until(handler, &ctl.stop, Some(&ctl.aborted))
    }

    /// Runs `handler` until it is done, or `stop` is set and it has drained
    /// or its drain's deadline has passed; then its figures.
    pub fn run<H: Handler>(&mut self, handler: H, stop: &AtomicBool) -> Result<WorkerEnd, EngineError> {
        self.run_until(handler, stop, None)
    }

    fn run_until<H: Handler>(
        &mut self,
        mut handler: H,
        stop: &AtomicBool,
        aborted: Option<&AtomicBool>,
    ) -> Result<WorkerEnd, EngineError> {
        let mut stopped_at: Option<Instant> = None;
        let mut deadline: Option<Instant> = None;
        loop {
            let now = Now::default();
            let wait = {
                if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
                    let t = now.get();
                    stopped_at = Some(t);
                    let io = self.io(stopped_at);
                    deadline = Some(t + handler.on_stop(&io, t));
                }
                let io = self.io(stopped_at);
                let wait = handler.on_tick(&io, &now)?;
                if handler.is_done(&io, &now)
                    || deadline.is_some_and(|d| now.get() >= d)
                    || aborted.is_some_and(|a| a.load(Ordering::Relaxed))
                {
                    break;
                }
                wait
            };
            match self.poll.poll(&mut self.events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(setup(e)),
            }
            let io = Io {
                registry: self.poll.registry(),
                timer: self.timer.as_ref(),
                stopped_at,
            };
            for ev in self.events.iter() {
                match ev.token() {
                    TIMER => handler.on_timer(&io)?,
                    Token(t) if t >= RESERVED => handler.on_token(&io, Token(t))?,
                    Token(i) => handler.on_ready(&io, i, Ready::of(ev))?,
                }
            }
        }
        Ok(handler.finish(&self.io(stopped_at)))
    }

    fn io(&self, stopped_at: Option<Instant>) -> Io<'_> {
        Io {
            registry: self.poll.registry(),
            timer: self.timer.as_ref(),
            stopped_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Interest;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;

    /// What the counting handler saw.
    #[derive(Default)]
    struct Seen {
        ticks: u32,
        drain_ticks: u32,
        stops: u32,
        timers: u32,
        ready: Vec<(usize, Ready)>,
        stopped: Option<Instant>,
    }

    /// A handler that counts what the reactor reports and says it is done
    /// when told to.
    struct Counting<'a> {
        seen: &'a mut Seen,
        /// Poll timeout it asks for.
        wait: Duration,
        /// How long the drain may last.
        drain: Duration,
        /// Drained after this many turns of draining.
        drained_after: Option<u32>,
        /// Done (before any stop) after this many turns.
        done_after: Option<u32>,
        /// Done after this many timer expiries; arms the timer this often.
        timers: Option<(u32, Duration)>,
        /// Done once this many readiness reports came.
        readies: Option<usize>,
        /// Fails on this turn.
        fail_on: Option<u32>,
    }

    impl<'a> Counting<'a> {
        fn new(seen: &'a mut Seen) -> Self {
            Counting {
                seen,
                wait: Duration::from_millis(1),
                drain: Duration::from_secs(5),
                drained_after: None,
                done_after: None,
                timers: None,
                readies: None,
                fail_on: None,
            }
        }
    }

    impl Handler for Counting<'_> {
        fn on_ready(&mut self, _io: &Io<'_>, index: usize, ready: Ready) -> Result<(), EngineError> {
            self.seen.ready.push((index, ready));
            Ok(())
        }

        fn on_timer(&mut self, io: &Io<'_>) -> Result<(), EngineError> {
            io.timer().clear();
            self.seen.timers += 1;
            Ok(())
        }

        fn on_tick(&mut self, io: &Io<'_>, _now: &Now) -> Result<Duration, EngineError> {
            self.seen.ticks += 1;
            if io.draining() {
                self.seen.drain_ticks += 1;
            }
            if self.fail_on == Some(self.seen.ticks) {
                return Err(EngineError::Setup("failed on purpose".into()));
            }
            if let Some((_, every)) = self.timers {
                io.timer().arm(every);
            }
            Ok(self.wait)
        }

        fn on_stop(&mut self, io: &Io<'_>, now: Instant) -> Duration {
            assert!(io.draining());
            self.seen.stops += 1;
            self.seen.stopped = Some(now);
            self.drain
        }

        fn is_done(&self, io: &Io<'_>, _now: &Now) -> bool {
            let s = &self.seen;
            (io.draining() && self.drained_after.is_some_and(|n| s.drain_ticks >= n))
                || self.done_after.is_some_and(|n| s.ticks >= n)
                || self.timers.is_some_and(|(n, _)| s.timers >= n)
                || self.readies.is_some_and(|n| s.ready.len() >= n)
        }

        fn finish(self, _io: &Io<'_>) -> WorkerEnd {
            WorkerEnd::default()
        }
    }

    fn stop_after(d: Duration) -> std::sync::Arc<AtomicBool> {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            s.store(true, Ordering::Relaxed);
        });
        stop
    }

    /// Stop flips the loop into draining once; the drain ends as soon as
    /// the handler says it has drained, long before the deadline.
    #[test]
    fn stop_drains_until_the_handler_has_drained() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.drained_after = Some(3);
        let stop = stop_after(Duration::from_millis(30));
        let t0 = Instant::now();
        Reactor::new(false).unwrap().run(h, &stop).unwrap();
        assert_eq!(seen.stops, 1);
        assert_eq!(seen.drain_ticks, 3, "drained after three turns of draining");
        assert!(seen.ticks > seen.drain_ticks, "ran before the stop");
        assert!(seen.stopped.unwrap() >= t0 + Duration::from_millis(30));
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "did not wait for the deadline"
        );
    }

    /// A handler that never drains is stopped at the drain's deadline.
    #[test]
    fn drain_ends_at_its_deadline() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.drain = Duration::from_millis(60);
        let stop = AtomicBool::new(true);
        Reactor::new(false).unwrap().run(h, &stop).unwrap();
        let drained = seen.stopped.unwrap().elapsed();
        assert_eq!(seen.stops, 1);
        assert!(drained >= Duration::from_millis(60), "ended early: {drained:?}");
        assert!(drained < Duration::from_millis(500), "ended late: {drained:?}");
        assert!(seen.drain_ticks > 1);
    }

    /// Whichever comes first: drained before the deadline, or the deadline.
    #[test]
    fn the_deadline_wins_when_draining_takes_longer() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.drain = Duration::from_millis(20);
        h.wait = Duration::from_millis(10);
        h.drained_after = Some(1000);
        let stop = AtomicBool::new(true);
        Reactor::new(false).unwrap().run(h, &stop).unwrap();
        assert!(seen.drain_ticks < 1000);
        assert!(seen.stopped.unwrap().elapsed() < Duration::from_millis(500));
    }

    /// Flows that finish before the window closes end the loop; no stop.
    #[test]
    fn done_before_the_stop_ends_without_draining() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.done_after = Some(5);
        let stop = AtomicBool::new(false);
        Reactor::new(false).unwrap().run(h, &stop).unwrap();
        assert_eq!((seen.ticks, seen.stops, seen.drain_ticks), (5, 0, 0));
    }

    /// The timer wakes a poll that would sleep far longer.
    #[test]
    fn the_timer_wakes_the_loop() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.wait = Duration::from_secs(5);
        h.timers = Some((3, Duration::from_millis(2)));
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        Reactor::new(true).unwrap().run(h, &stop).unwrap();
        assert_eq!(seen.timers, 3);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    /// A source is reported by its index with its readiness.
    #[test]
    fn ready_sources_are_reported_by_index() {
        let (a, b) = UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        a.send(b"x").unwrap();
        let reactor = Reactor::new(false).unwrap();
        reactor
            .registry()
            .register(
                &mut mio::unix::SourceFd(&b.as_raw_fd()),
                Token(7),
                Interest::READABLE,
            )
            .unwrap();
        let mut reactor = reactor;
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.readies = Some(1);
        h.wait = Duration::from_secs(5);
        let stop = AtomicBool::new(false);
        reactor.run(h, &stop).unwrap();
        assert_eq!(seen.ready[0].0, 7);
        assert!(seen.ready[0].1.readable && seen.ready[0].1.has_input());
    }

    /// An error from the handler ends the loop with it.
    #[test]
    fn a_handler_error_ends_the_loop() {
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.fail_on = Some(2);
        let stop = AtomicBool::new(false);
        let r = Reactor::new(false).unwrap().run(h, &stop);
        assert!(matches!(r, Err(EngineError::Setup(_))));
        assert_eq!(seen.ticks, 2);
    }

    /// A turn's time is read once, when first asked.
    #[test]
    fn a_turn_reads_the_clock_once() {
        let before = Instant::now();
        let now = Now::default();
        std::thread::sleep(Duration::from_millis(2));
        let t = now.get();
        assert!(
            t >= before + Duration::from_millis(2),
            "read when asked, not when made"
        );
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(now.get(), t);
    }

    extern "C" fn ignore(_: libc::c_int) {}

    /// A signal interrupts the poll (EINTR): the loop turns again instead of
    /// failing or sleeping on.
    #[test]
    fn an_interrupted_poll_turns_again() {
        // SAFETY: installs a handler that does nothing, without SA_RESTART.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            // SAFETY: plain call.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            let mut seen = Seen::default();
            let mut h = Counting::new(&mut seen);
            h.wait = Duration::from_secs(10);
            h.done_after = Some(2);
            let stop = AtomicBool::new(false);
            let t0 = Instant::now();
            Reactor::new(false).unwrap().run(h, &stop).unwrap();
            (seen.ticks, t0.elapsed())
        });
        let thread = rx.recv().unwrap() as libc::pthread_t;
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: the thread is alive (it polls for 10 s).
        unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
        let (ticks, took) = worker.join().unwrap();
        assert_eq!(ticks, 2);
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}
