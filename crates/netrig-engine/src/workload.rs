//! The seam where test kinds attach to the data path.

use crate::intake::WorkerIntake;
use crate::{EngineError, Flow, FlowSlot, WorkerEnd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What a worker thread is told besides its flows.
#[derive(Debug, Clone)]
pub struct WorkerControl {
    /// Set when the measured window closes (or the test is aborted): senders
    /// stop, receivers drain what is in flight without counting it in the window.
    pub stop: Arc<AtomicBool>,
    /// Set when the test is aborted (with `stop`): no draining, the worker
    /// ends at once (a stopped or vanished peer must not hold it for the drain).
    pub aborted: Arc<AtomicBool>,
    /// How long receivers keep draining after `stop` before giving up on the
    /// peer's end of file.
    pub drain: Duration,
    /// On while the measured window is open: latencies are recorded only then.
    pub recording: Arc<AtomicBool>,
    /// This end's time zero (open-loop schedules start here).
    pub start: std::time::Instant,
    /// A timed test's measured window on this end's clock, [from, to):
    /// open-loop schedules count the requests due inside it. `None` for a
    /// test counted in bytes.
    pub window: Option<(std::time::Instant, std::time::Instant)>,
    /// The test's id, carried in every UDP datagram.
    pub test_id: u64,
    /// With interim reports, where requesters hand over each period's
    /// latencies; this worker's slot there is `worker`.
    pub intervals: Option<std::sync::Arc<crate::IntervalLatencies>>,
    /// This worker's index among the end's workers.
    pub worker: usize,
    /// This worker's share of the end's cap on what it sends (the agent's
    /// `--max-rate`): every send of the worker spends from a
    /// [`SendCap`](crate::cap::SendCap) made of it. `None`: no cap.
    pub send_cap: Option<crate::cap::CapShare>,
    /// An instant no later than the other end's time zero: receivers count
    /// one-way delay from it ([`crate::runner::RunPlan::clock_ref`]).
    pub clock_ref: std::time::Instant,
}

impl WorkerControl {
    /// A requester worker's latency recording.
    pub fn latencies(&self) -> crate::latencies::Latencies {
        crate::latencies::Latencies::new(self.intervals.clone().map(|i| (i, self.worker)))
    }
}

/// How one test kind drives its flows: each implementation sets up a worker's
/// flows and runs them as a handler of the worker's one event loop (the
/// reactor): no locks, no allocation per message, counters published through
/// [`FlowCounters`](crate::FlowCounters).
pub trait Workload: Send + Sync {
    /// Drives `flows` until they are done (quota sent, end of file seen) or
    /// `ctl.stop` is set and they have drained; called on its own thread.
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError>;
}

/// How a kind whose every transaction opens its own connection drives its
/// flows (tcp-crr): a separate trait, so that only such a kind can be given
/// such flows.
pub trait TransientWorkload: Send + Sync {
    /// Drives flows whose connections come and go, one per transaction,
    /// until `ctl.stop` is set and the transactions in flight are done. The
    /// requester opens its `flows`' connections itself; the responder gets
    /// the peer's through `intake` (and then `flows` holds every flow of the
    /// run, since any connection may land on any worker).
    fn run_transient(
        &self,
        flows: Vec<FlowSlot>,
        intake: Option<WorkerIntake>,
        ctl: &WorkerControl,
    ) -> Result<WorkerEnd, EngineError>;
}
