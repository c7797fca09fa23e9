//! What the request/response kinds (tcp-rr, tcp-crr, udp-rr) share beyond
//! the engine's transaction machinery.

use netrig_proto::spec::Transactions;
use netrig_report::Side;

/// Open loop: the local CPU includes the pacer spinning up to each due time.
pub(crate) fn open_loop_warnings(t: &Transactions, local: Side<'_>) -> Vec<String> {
    if t.rate().is_some() && t.spin_us() != Some(0) && local.report.cpu.is_some() {
        return vec![
            "open loop: the local CPU and service demand include the pacer spinning up to each request's due \
             time; --spin-us 0 sleeps instead, and the timer's wake-up delay then adds to every latency"
                .into(),
        ];
    }
    Vec::new()
}

/// `--busy-wait` where a worker has more than one flow: refused, not run
/// in the event loop under a label it does not deserve.
pub(crate) fn busy_wait_refused(flows: usize) -> netrig_engine::EngineError {
    netrig_engine::EngineError::Setup(format!(
        "--busy-wait: a worker thread here has {flows} flows; busy-waiting needs one flow per worker \
         thread (-T at least -P, on both ends: the agent's --max-workers may hold it lower)"
    ))
}

/// The watch that bounds a lone worker's waits on its blocking socket
/// (without a kernel timer each: [`netrig_engine::nudge`]); `None`: socket
/// timeouts must bound them.
pub(crate) fn watch_alone() -> Option<netrig_engine::nudge::Watch> {
    netrig_engine::nudge::Watch::new()
        .map_err(|e| log::debug!("waits bounded by socket timeouts: {e}"))
        .ok()
}

/// A worker's control for unit tests: recording from the start, stopped by
/// its `stop`, draining for `drain`.
#[cfg(test)]
pub(crate) fn test_control(drain: std::time::Duration) -> netrig_engine::workload::WorkerControl {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let start = std::time::Instant::now();
    netrig_engine::workload::WorkerControl {
        aborted: Arc::new(AtomicBool::new(false)),
        stop: Arc::new(AtomicBool::new(false)),
        drain,
        recording: Arc::new(AtomicBool::new(true)),
        start,
        clock_ref: start,
        window: None,
        test_id: 0,
        intervals: None,
        worker: 0,
        send_cap: None,
    }
}
