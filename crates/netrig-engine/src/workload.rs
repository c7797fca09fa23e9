//! The seam where test kinds attach to the data path.

use crate::intake::WorkerIntake;
use crate::TxnParams;
use crate::{EngineError, Flow, FlowSlot, WorkerEnd};
use netrig_proto::{TestKind, TestSpec};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What a worker thread is told besides its flows.
#[derive(Debug, Clone)]
pub struct WorkerControl {
    /// Set when the measured window closes (or the test is aborted): senders
    /// stop, receivers drain what is in flight without counting it in the window.
    pub stop: Arc<AtomicBool>,
    /// How long receivers keep draining after `stop` before giving up on the
    /// peer's end of file.
    pub drain: Duration,
    /// On while the measured window is open: latencies are recorded only then.
    pub recording: Arc<AtomicBool>,
    /// This end's time zero (open-loop schedules start here).
    pub start: std::time::Instant,
    /// The test's id, carried in every UDP datagram.
    pub test_id: u64,
    /// With interim reports, where requesters hand over each period's
    /// latencies; this worker's slot there is `worker`.
    pub intervals: Option<std::sync::Arc<crate::IntervalLatencies>>,
    /// This worker's index among the end's workers.
    pub worker: usize,
}

impl WorkerControl {
    /// A requester worker's latency recording.
    pub(crate) fn latencies(&self) -> crate::latencies::Latencies {
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

    /// Drives flows whose connections come and go, one per transaction,
    /// until `ctl.stop` is set and the transactions in flight are done. The
    /// requester opens its `flows`' connections itself; the responder gets
    /// the peer's through `intake` (and then `flows` holds every flow of the
    /// run, since any connection may land on any worker). Kinds that keep
    /// one connection per flow leave this as it is.
    fn run_transient(
        &self,
        flows: Vec<FlowSlot>,
        intake: Option<WorkerIntake>,
        ctl: &WorkerControl,
    ) -> Result<WorkerEnd, EngineError> {
        let _ = (flows, intake, ctl);
        Err(EngineError::Setup(
            "this test kind keeps one connection per flow; it has no connection-per-transaction flows".into(),
        ))
    }
}

/// The workload for a test kind, configured from its spec.
pub fn workload_for(spec: &TestSpec) -> Arc<dyn Workload> {
    match spec.kind {
        TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpBidir => {
            Arc::new(crate::stream::StreamWorkload {
                message_size: spec.message_size as usize,
                recv_size: spec.recv_size as usize,
                rate_bps: spec.pace.rate_bps,
                pacing: spec.pace.pacing(),
                zerocopy: spec.zerocopy,
            })
        }
        TestKind::TcpRr => Arc::new(crate::rr::RrWorkload {
            txn: TxnParams::from_spec(&spec.rr),
        }),
        TestKind::UdpRr => Arc::new(crate::udp_rr::UdpRrWorkload {
            txn: TxnParams::from_spec(&spec.rr),
            timeout: spec.rr.timeout(),
        }),
        TestKind::UdpStream => Arc::new(crate::udp::UdpStreamWorkload {
            size: spec.message_size as usize,
            rate_bps: spec.pace.rate_bps,
            offload: !spec.udp.no_gso,
            pacing: spec.pace.pacing(),
        }),
        TestKind::TcpCrr => Arc::new(crate::crr::CrrWorkload {
            txn: TxnParams::from_spec(&spec.rr),
            timeout: spec.rr.timeout(),
            accepted_options: spec.remote.clone(),
        }),
    }
}
