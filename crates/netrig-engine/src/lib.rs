//! The data path, the same on both ends.
//!
//! A test's flows are split over a few worker threads; each worker owns its
//! flows and drives them from its own event loop (the `reactor`, over mio),
//! with no locks and no allocation per message. Workers publish per-flow
//! byte counts in atomics; the [`runner`] samples them on the measurement schedule (omit, intervals,
//! end of window) from the calling thread, so the hot loop never looks at a
//! clock. What a flow does with its socket is a [`Workload`], which each
//! test kind provides from its own module (crate netrig-kinds) with the
//! building blocks here: the [`reactor`], [`pace`]d schedules, the
//! request/response machinery of [`txn`], [`latencies`] and [`sockopt`]. A
//! new test kind is a new workload, not a new branch in the runner.

pub mod addr;
pub mod affinity;
pub mod cap;
pub mod files;
pub mod flow;
pub mod inq;
pub mod intake;
pub mod iperf3_figures;
pub mod latencies;
pub mod lowat;
pub mod msg_stamp;
pub mod notsent;
pub mod nudge;
pub mod pace;
pub mod raw_opt;
pub mod reactor;
pub mod runner;
pub mod sockopt;
pub mod transport;
pub mod txn;
pub mod window_watch;
mod witness;
pub mod workload;

pub use flow::{
    Connector, FirstConnection, Flow, FlowCounters, FlowEnd, FlowSlot, FlowSocket, ScheduleStats,
    TransientEnd, WorkerEnd,
};
pub use latencies::IntervalLatencies;
pub use runner::{run_side, RunControl, RunPlan, SideFlows, SideOutcome};
pub use txn::TxnParams;
pub use witness::SOCKETS_READ;
pub use workload::{TransientWorkload, WorkerControl, Workload};

use thiserror::Error;

/// Failures of the data path.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("flow {flow} ({direction}): {what}: {error}")]
    Flow {
        flow: u32,
        direction: &'static str,
        what: String,
        error: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
    #[error("test aborted: {0}")]
    Aborted(String),
    #[error("no data moved on any flow for {0} s: the peer or the path has stalled")]
    Stalled(u64),
}
