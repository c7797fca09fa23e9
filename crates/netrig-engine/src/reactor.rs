//! The workers' face of the I/O core (crate netrig-io), which owns the
//! event loop itself: the poll, the timer, the stop and the drain's
//! deadline, the retries of an interrupted poll, the tokens. A test kind is
//! a [`Handler`] in the engine's terms (its errors an [`EngineError`], its
//! end a [`WorkerEnd`]); [`Reactor`] runs it on the core's loop, which is
//! described there, turn by turn.

use crate::{EngineError, WorkerEnd};
use mio::{Poll, Registry, Token};
pub use netrig_io::{Io, Now, Ready, IDLE, RESERVED, TIMER};
use std::io;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

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

/// A kind's handler on the core's loop: every call passed on as it is.
struct Kind<H>(H);

impl<H: Handler> netrig_io::Handler for Kind<H> {
    type Error = EngineError;
    type Output = WorkerEnd;

    fn on_ready(&mut self, io: &Io<'_>, index: usize, ready: Ready) -> Result<(), EngineError> {
        self.0.on_ready(io, index, ready)
    }
    fn on_timer(&mut self, io: &Io<'_>) -> Result<(), EngineError> {
        self.0.on_timer(io)
    }
    fn on_token(&mut self, io: &Io<'_>, token: Token) -> Result<(), EngineError> {
        self.0.on_token(io, token)
    }
    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Option<Duration>, EngineError> {
        self.0.on_tick(io, now).map(Some)
    }
    fn on_stop(&mut self, io: &Io<'_>, now: Instant) -> Duration {
        self.0.on_stop(io, now)
    }
    fn is_done(&self, io: &Io<'_>, now: &Now) -> bool {
        self.0.is_done(io, now)
    }
    fn finish(self, io: &Io<'_>) -> WorkerEnd {
        self.0.finish(io)
    }
}

/// One worker's event loop.
pub struct Reactor(netrig_io::Reactor);

fn setup(e: io::Error) -> EngineError {
    EngineError::Setup(format!("worker event loop: {e}"))
}

impl Reactor {
    /// A reactor with its own poll; `timer`: with a timer (a timerfd, for
    /// wake-ups finer than the poll's millisecond timeout).
    pub fn new(timer: bool) -> Result<Reactor, EngineError> {
        netrig_io::Reactor::new(timer).map(Reactor).map_err(setup)
    }

    /// A reactor on a poll made elsewhere (one that already holds a waker).
    pub fn with_poll(poll: Poll, timer: bool) -> Result<Reactor, EngineError> {
        netrig_io::Reactor::with_poll(poll, timer)
            .map(Reactor)
            .map_err(setup)
    }

    pub fn registry(&self) -> &Registry {
        self.0.registry()
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
        handler: H,
        stop: &AtomicBool,
        aborted: Option<&AtomicBool>,
    ) -> Result<WorkerEnd, EngineError> {
        self.0.run(Kind(handler), stop, aborted).map_err(|e| match e {
            netrig_io::LoopError::Poll(e) => setup(e),
            netrig_io::LoopError::Handler(e) => e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind that fails on its first turn, or ends at once with one flow.
    struct Once {
        fail: bool,
    }

    impl Handler for Once {
        fn on_ready(&mut self, _io: &Io<'_>, _index: usize, _ready: Ready) -> Result<(), EngineError> {
            Ok(())
        }
        fn on_tick(&mut self, _io: &Io<'_>, _now: &Now) -> Result<Duration, EngineError> {
            match self.fail {
                true => Err(EngineError::Aborted("on purpose".into())),
                false => Ok(IDLE),
            }
        }
        fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
            Duration::ZERO
        }
        fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
            true
        }
        fn finish(self, _io: &Io<'_>) -> WorkerEnd {
            WorkerEnd {
                schedule: Some(crate::ScheduleStats {
                    due: 7,
                    ..Default::default()
                }),
                ..WorkerEnd::default()
            }
        }
    }

    /// A kind's error and its figures come back from the core's loop as
    /// the kind gave them.
    #[test]
    fn a_kind_runs_on_the_core_as_it_is() {
        let stop = AtomicBool::new(false);
        let end = Reactor::new(false)
            .unwrap()
            .run(Once { fail: false }, &stop)
            .unwrap();
        assert_eq!(end.schedule.map(|s| s.due), Some(7));
        let r = Reactor::new(true).unwrap().run(Once { fail: true }, &stop);
        assert!(
            matches!(&r, Err(EngineError::Aborted(m)) if m == "on purpose"),
            "{r:?}"
        );
    }
}
