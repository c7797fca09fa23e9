//! One event loop for every loop of netrig: the [`Reactor`] owns the mio
//! poll, its events buffer, an optional timer, the switch from running to
//! draining when told to stop and the drain's deadline, and the retries of
//! an interrupted poll; a loop's own logic is a [`Handler`] that reacts to
//! what the reactor reports: a source ready, the timer fired, a reserved
//! token, a turn of the loop, the stop. The loop is generic over the handler
//! (static dispatch, no `dyn` per event) and allocates nothing once it runs.
//!
//! One turn:
//!
//! 1. if `stop` has just been seen, [`Handler::on_stop`], which says how
//!    long the drain may last;
//! 2. [`Handler::on_tick`]: the handler's own work (requests due, timeouts,
//!    paced sends, accepts), which returns how long the poll may sleep;
//! 3. the loop ends if [`Handler::is_done`] says so (all flows finished, or
//!    drained), the drain's deadline has passed or `aborted` is set,
//!    whichever comes first;
//! 4. poll (an interrupted poll starts the turn again), then
//!    [`Handler::on_woken`], each event ([`Handler::on_ready`] for a source
//!    registered under its index, [`Handler::on_timer`] for the reactor's
//!    timer, [`Handler::on_token`] for the handler's other reserved tokens:
//!    a pacer's timer, a waker, a listener), and [`Handler::on_events_done`].
//!
//! Tokens: sources take their index, below [`RESERVED`]; the reserved ones
//! are the reactor's [`TIMER`] at the bottom and a loop's own from the top
//! down, [`reserved`]`(0)` to [`reserved`]`(14)`.
//!
//! The reactor reads the clock only when it must (at stop, and each turn of
//! a drain, for its deadline); a turn's time is a [`Now`] that reads the
//! clock on first use, so a loop whose hot path needs no time (an unpaced
//! stream's sender) reads none.

use crate::timer::Timer;
use mio::event::Event;
use mio::{Events, Poll, Registry, Token};
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Tokens from here up are reserved for timers, wakers and listeners;
/// sources below it are reported by index to [`Handler::on_ready`].
pub const RESERVED: usize = usize::MAX - 15;
/// The reactor's timer: the lowest reserved token.
pub const TIMER: Token = Token(RESERVED);
/// How long a turn sleeps when the handler has nothing sooner to wake for.
pub const IDLE: Duration = Duration::from_millis(10);

/// A loop's own reserved token `n` (0 to 14), counted down from the top
/// (`usize::MAX - n`), clear of the reactor's [`TIMER`].
pub const fn reserved(n: usize) -> Token {
    assert!(
        n < usize::MAX - RESERVED,
        "a loop has 15 reserved tokens of its own"
    );
    Token(usize::MAX - n)
}

/// What the reactor lends a handler on each call: the registry (to register
/// or drop sources), its timer, and whether the loop was told to stop.
pub struct Io<'a> {
    pub registry: &'a Registry,
    pub timer: Option<&'a Timer>,
    /// When the stop was seen (the window closed), if it has been.
    pub stopped_at: Option<Instant>,
    /// The drain's deadline, once stopped.
    pub drain_until: Option<Instant>,
}

impl Io<'_> {
    /// The window has closed: senders stop, receivers drain.
    pub fn draining(&self) -> bool {
        self.stopped_at.is_some()
    }

    /// The drain's deadline has passed at `now`.
    pub fn drain_over(&self, now: Instant) -> bool {
        self.drain_until.is_some_and(|d| now >= d)
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

/// The earliest of a turn's deadlines, as the poll's timeout: the one place
/// a loop's deadlines become how long it may sleep. None: no deadline, the
/// poll waits for an event.
#[derive(Debug, Clone, Copy)]
pub struct Wake {
    now: Instant,
    wait: Option<Duration>,
}

impl Wake {
    /// No deadline yet, as seen at `now`.
    pub fn new(now: Instant) -> Wake {
        Wake { now, wait: None }
    }

    /// Wake within `d` at the latest.
    pub fn after(&mut self, d: Duration) {
        self.wait = Some(self.wait.map_or(d, |w| w.min(d)));
    }

    /// Wake at `t` at the latest (now if it has passed).
    pub fn at(&mut self, t: Instant) {
        self.after(t.saturating_duration_since(self.now));
    }

    /// How long the poll may sleep.
    pub fn wait(&self) -> Option<Duration> {
        self.wait
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

/// Why a loop ended before its handler finished.
#[derive(Debug)]
pub enum LoopError<E> {
    /// Waiting for events failed (not an interruption, which is retried).
    Poll(io::Error),
    /// The handler failed.
    Handler(E),
}

/// A loop's side of the reactor. Every method runs on the loop's thread,
/// between polls.
pub trait Handler {
    /// What a failing callback returns; it ends the loop.
    type Error;
    /// What the loop comes to, from [`Handler::finish`].
    type Output;

    /// Source `index` (its token) is ready.
    fn on_ready(&mut self, io: &Io<'_>, index: usize, ready: Ready) -> Result<(), Self::Error>;

    /// The reactor's timer fired.
    fn on_timer(&mut self, io: &Io<'_>) -> Result<(), Self::Error> {
        let _ = io;
        Ok(())
    }

    /// A reserved token other than the reactor's timer ([`reserved`]).
    fn on_token(&mut self, io: &Io<'_>, token: Token) -> Result<(), Self::Error> {
        let _ = (io, token);
        Ok(())
    }

    /// A poll returned, before its events.
    fn on_woken(&mut self, io: &Io<'_>) {
        let _ = io;
    }

    /// A poll's events have all been handled.
    fn on_events_done(&mut self, io: &Io<'_>) -> Result<(), Self::Error> {
        let _ = io;
        Ok(())
    }

    /// Each turn, before the poll: the handler's own work. Returns how long
    /// the poll may wait (None: until an event).
    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Option<Duration>, Self::Error>;

    /// The loop was told to stop: senders stop, receivers begin to drain.
    /// Returns the longest the drain may last.
    fn on_stop(&mut self, io: &Io<'_>, now: Instant) -> Duration;

    /// True when the loop has nothing left to do: every flow finished
    /// (before the stop, e.g. a byte quota sent) or drained.
    fn is_done(&self, io: &Io<'_>, now: &Now) -> bool;

    /// What the loop comes to, once it has ended.
    fn finish(self, io: &Io<'_>) -> Self::Output;
}

/// One thread's event loop.
pub struct Reactor {
    poll: Poll,
    events: Events,
    timer: Option<Timer>,
}

impl Reactor {
    /// A reactor with its own poll; `timer`: with a timer (a timerfd, for
    /// wake-ups finer than the poll's millisecond timeout).
    pub fn new(timer: bool) -> io::Result<Reactor> {
        Reactor::with_poll(Poll::new()?, timer)
    }

    /// A reactor on a poll made elsewhere (one that already holds a waker
    /// or listeners under reserved tokens).
    pub fn with_poll(poll: Poll, timer: bool) -> io::Result<Reactor> {
        let timer = match timer {
            true => Some(Timer::registered(poll.registry(), TIMER)?),
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

    /// Runs `handler` until it is done, `aborted` is set (at once, without
    /// draining), or `stop` is set and it has drained or its drain's
    /// deadline has passed; then what it comes to.
    pub fn run<H: Handler>(
        &mut self,
        mut handler: H,
        stop: &AtomicBool,
        aborted: Option<&AtomicBool>,
    ) -> Result<H::Output, LoopError<H::Error>> {
        let mut stopped_at: Option<Instant> = None;
        let mut deadline: Option<Instant> = None;
        loop {
            let now = Now::default();
            let wait = {
                if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
                    let t = now.get();
                    stopped_at = Some(t);
                    let io = self.io(stopped_at, None);
                    deadline = Some(t + handler.on_stop(&io, t));
                }
                let io = self.io(stopped_at, deadline);
                let wait = handler.on_tick(&io, &now).map_err(LoopError::Handler)?;
                if handler.is_done(&io, &now)
                    || deadline.is_some_and(|d| now.get() >= d)
                    || aborted.is_some_and(|a| a.load(Ordering::Relaxed))
                {
                    break;
                }
                wait
            };
            match self.poll.poll(&mut self.events, wait) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LoopError::Poll(e)),
            }
            let io = Io {
                registry: self.poll.registry(),
                timer: self.timer.as_ref(),
                stopped_at,
                drain_until: deadline,
            };
            handler.on_woken(&io);
            for ev in self.events.iter() {
                match ev.token() {
                    TIMER => handler.on_timer(&io),
                    Token(t) if t >= RESERVED => handler.on_token(&io, Token(t)),
                    Token(i) => handler.on_ready(&io, i, Ready::of(ev)),
                }
                .map_err(LoopError::Handler)?;
            }
            handler.on_events_done(&io).map_err(LoopError::Handler)?;
        }
        Ok(handler.finish(&self.io(stopped_at, deadline)))
    }

    fn io(&self, stopped_at: Option<Instant>, drain_until: Option<Instant>) -> Io<'_> {
        Io {
            registry: self.poll.registry(),
            timer: self.timer.as_ref(),
            stopped_at,
            drain_until,
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
        type Error = String;
        type Output = ();

        fn on_ready(&mut self, _io: &Io<'_>, index: usize, ready: Ready) -> Result<(), String> {
            self.seen.ready.push((index, ready));
            Ok(())
        }

        fn on_timer(&mut self, io: &Io<'_>) -> Result<(), String> {
            io.timer().clear();
            self.seen.timers += 1;
            Ok(())
        }

        fn on_tick(&mut self, io: &Io<'_>, _now: &Now) -> Result<Option<Duration>, String> {
            self.seen.ticks += 1;
            if io.draining() {
                self.seen.drain_ticks += 1;
            }
            if self.fail_on == Some(self.seen.ticks) {
                return Err("failed on purpose".into());
            }
            if let Some((_, every)) = self.timers {
                io.timer().arm(every);
            }
            Ok(Some(self.wait))
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

        fn finish(self, _io: &Io<'_>) {}
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
        Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
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
        Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
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
        Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
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
        Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
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
        Reactor::new(true).unwrap().run(h, &stop, None).unwrap();
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
        reactor.run(h, &stop, None).unwrap();
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
        let r = Reactor::new(false).unwrap().run(h, &stop, None);
        assert!(matches!(r, Err(LoopError::Handler(_))));
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
            Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
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

    /// The earliest deadline wins; one that has passed wakes at once; none
    /// leaves the poll to wait for an event.
    #[test]
    fn wake_takes_the_earliest_deadline() {
        let now = Instant::now();
        let mut w = Wake::new(now);
        assert_eq!(w.wait(), None);
        w.after(Duration::from_millis(100));
        w.at(now + Duration::from_millis(30));
        w.at(now + Duration::from_millis(60));
        assert_eq!(w.wait(), Some(Duration::from_millis(30)));
        w.at(now - Duration::from_millis(5));
        assert_eq!(w.wait(), Some(Duration::ZERO));
    }

    /// A loop's own tokens are reserved, apart from the timer and each other.
    #[test]
    fn reserved_tokens_stay_clear_of_sources_and_the_timer() {
        let tokens: Vec<Token> = (0..15).map(reserved).collect();
        for (i, t) in tokens.iter().enumerate() {
            assert!(t.0 > RESERVED && *t != TIMER, "{t:?}");
            assert!(!tokens[i + 1..].contains(t));
        }
        assert_eq!(reserved(0), Token(usize::MAX));
    }

    /// A handler that records the order of its calls around a poll.
    struct Order {
        calls: Vec<&'static str>,
    }

    impl Handler for Order {
        type Error = String;
        type Output = Vec<&'static str>;

        fn on_ready(&mut self, _io: &Io<'_>, _index: usize, _ready: Ready) -> Result<(), String> {
            self.calls.push("ready");
            Ok(())
        }
        fn on_woken(&mut self, _io: &Io<'_>) {
            self.calls.push("woken");
        }
        fn on_events_done(&mut self, _io: &Io<'_>) -> Result<(), String> {
            self.calls.push("done");
            Ok(())
        }
        fn on_tick(&mut self, _io: &Io<'_>, _now: &Now) -> Result<Option<Duration>, String> {
            self.calls.push("tick");
            // No deadline: the poll waits for the source.
            Ok(None)
        }
        fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
            Duration::ZERO
        }
        fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
            self.calls.contains(&"done")
        }
        fn finish(self, _io: &Io<'_>) -> Vec<&'static str> {
            self.calls
        }
    }

    /// After a poll: woken, its events, done; a poll without a deadline
    /// waits for the event.
    #[test]
    fn a_poll_is_followed_by_woken_events_and_done() {
        let (a, b) = UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut reactor = Reactor::new(false).unwrap();
        reactor
            .registry()
            .register(
                &mut mio::unix::SourceFd(&b.as_raw_fd()),
                Token(0),
                Interest::READABLE,
            )
            .unwrap();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            a.send(b"x").unwrap();
        });
        let stop = AtomicBool::new(false);
        let calls = reactor.run(Order { calls: Vec::new() }, &stop, None).unwrap();
        sender.join().unwrap();
        assert_eq!(calls, ["tick", "woken", "ready", "done", "tick"]);
    }

    /// A stop with no drain ends the loop in the turn that sees it.
    #[test]
    fn a_stop_without_a_drain_ends_at_once() {
        let stop = AtomicBool::new(true);
        let mut seen = Seen::default();
        let mut h = Counting::new(&mut seen);
        h.drain = Duration::ZERO;
        Reactor::new(false).unwrap().run(h, &stop, None).unwrap();
        assert_eq!((seen.stops, seen.ticks), (1, 1));
    }
}
