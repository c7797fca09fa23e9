//! What the request/response kinds (tcp-rr, tcp-crr, udp-rr) share beyond
//! the engine's transaction machinery.

pub mod table;

use netrig_proto::spec::Transactions;
use netrig_report::{Side, TestConfig};

/// The request/response kinds' options in the result's config: tcp-rr,
/// tcp-crr and udp-rr share them (`-r`, `--burst`, `--rate`, `--poisson`,
/// `--spin-us`, `--busy-wait`, `--timeout`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TransactionsConfig {
    /// What the client sends per transaction, and what the agent answers (`-r`).
    pub request_size: Option<u32>,
    pub response_size: Option<u32>,
    /// Closed loop: transactions in flight per flow (`--burst`).
    pub burst: Option<u32>,
    /// Open loop: transactions per second per flow (`--rate`); null: closed loop.
    pub rate: Option<f64>,
    pub poisson: Option<bool>,
    /// tcp-crr and udp-rr: longest a transaction may take (`--timeout`); null for tcp-rr.
    pub timeout_s: Option<f64>,
    /// Open loop: the pacer's fixed wake-up lead in µs (`--spin-us`); null
    /// when it is learned from the timer, or for closed loop.
    pub spin_us: Option<u32>,
    /// `--busy-wait`: both ends waited for the peer polling their sockets
    /// instead of sleeping.
    pub busy_wait: bool,
}

impl TransactionsConfig {
    /// The config of `t`, with its timeout if the kind has one; the sizes
    /// are also `c`'s message and receive sizes.
    pub(crate) fn of(t: &Transactions, timeout_s: Option<f64>, c: &mut TestConfig) -> TransactionsConfig {
        c.message_size = t.request_size;
        c.recv_size = t.response_size;
        TransactionsConfig {
            request_size: Some(t.request_size),
            response_size: Some(t.response_size),
            burst: Some(t.burst()),
            rate: t.rate(),
            poisson: Some(t.poisson()),
            timeout_s,
            spin_us: t.spin_us(),
            busy_wait: t.busy_wait,
        }
    }
}

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
