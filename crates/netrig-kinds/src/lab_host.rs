//! What the kinds run from a lab host alone share (half-close, syn-flood: netrig-lab's overload
//! generators as kinds with one end): their refusal of an agent's part, their run on a thread of
//! its own, and a result whose "agent" is the lab's target host.

use netrig_engine::{EngineError, Flow, RunControl, WorkerControl, WorkerEnd, Workload};
use netrig_proto::TestSpec;
use netrig_report::NewConfig;
use netrig_report::{
    AgentInfo, CpuSummary, EndBuffers, KindReport, RunInfo, ServiceDemandSummary, Summary, TestConfig,
    TestResult,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The agent's end of kind `.0`, which has none: it refuses.
pub(crate) struct NoAgentEnd(pub &'static str);

impl Workload for NoAgentEnd {
    fn run_worker(&self, _: Vec<Flow>, _: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        Err(EngineError::Setup(format!(
            "{} runs from a lab host alone: an agent has no part in it",
            self.0
        )))
    }
}

/// Runs `work` on a thread of its own until it ends, telling it to stop
/// (its flag set) once the run is aborted; `Err` if it panicked.
pub(crate) fn run_stoppable<T: Send + 'static>(
    ctl: &RunControl,
    work: impl FnOnce(&AtomicBool) -> T + Send + 'static,
) -> std::thread::Result<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || work(&st));
    while !t.is_finished() {
        if ctl.abort_reason().is_some() {
            stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    t.join()
}

/// A summary of `elapsed_s` with nothing measured: no bytes, directions,
/// socket buffers or service demand, this host's CPU withheld for
/// `cpu_withheld`. A kind sets what it counted beside.
pub(crate) fn summary(elapsed_s: f64, cpu_withheld: &str) -> Summary {
    Summary {
        throughput_bps: 0.0,
        bytes: 0,
        elapsed_s,
        tx_throughput_bps: None,
        rx_throughput_bps: None,
        directions: Vec::new(),
        directions_fairness: None,
        socket_buffers: EndBuffers {
            local: Default::default(),
            remote: Default::default(),
        },
        cpu: CpuSummary {
            local_pct: None,
            remote_pct: None,
            local: None,
            remote: None,
            local_accounted_pct: None,
            remote_accounted_pct: None,
            local_withheld: Some(cpu_withheld.into()),
            remote_withheld: None,
        },
        service_demand: ServiceDemandSummary {
            local: None,
            remote: None,
            unit: "us/tran".into(),
            mss: None,
            local_per_packet_us: None,
            remote_per_packet_us: None,
        },
        transactions: None,
        transactions_per_s: None,
        latency_us: None,
        schedule: None,
        counts: Default::default(),
        send_throughput_bps: None,
        recv_throughput_bps: None,
        udp: None,
        http: None,
        one_way_delay: None,
        half_close: None,
    }
}

/// The lab host a kind ran against: its address (`to`), and its name and
/// its lab's (no agent ran there).
pub(crate) struct Target<'a> {
    pub to: SocketAddr,
    pub host: &'a str,
    pub lab: &'a str,
}

impl Target<'_> {
    /// The run's config: the spec's and `kind`'s, against the target.
    pub(crate) fn config(&self, spec: &TestSpec, kind: &dyn KindReport) -> TestConfig {
        TestConfig::new(
            spec,
            kind,
            RunInfo {
                host: Some(self.to.ip().to_string()),
                port: self.to.port(),
                cpus: None,
                bind: None,
                family: Some(if self.to.is_ipv4() { "ipv4" } else { "ipv6" }.into()),
                local: Default::default(),
                remote: Default::default(),
            },
        )
    }

    /// The result of kind `test` against the target, which stands as its agent.
    pub(crate) fn result(&self, test: &str, config: TestConfig, summary: Summary) -> TestResult {
        TestResult::one_ended(
            test,
            config,
            AgentInfo {
                address: self.to.to_string(),
                software: format!("host {} of lab {} (no agent)", self.host, self.lab),
                protocol_version: 0,
            },
            summary,
        )
    }
}
