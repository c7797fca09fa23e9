//! The figures an experiment estimates and compares, each read from one
//! run's whole result (a run is one sample; interim samples never are).

use netrig_report::TestResult;

/// One figure of a run.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name in plans, documents and `--metric`.
    pub name: &'static str,
    /// What a table's column header says.
    pub label: &'static str,
    pub unit: &'static str,
    /// Whether more is better (throughput) or worse (CPU, latency, loss).
    pub higher_is_better: bool,
    /// The figure, when the run has it.
    pub get: fn(&TestResult) -> Option<f64>,
}

fn streamlike(r: &TestResult) -> bool {
    r.summary.transactions_per_s.is_none()
}

/// Every metric, headline figures first.
pub static METRICS: &[Metric] = &[
    Metric {
        name: "throughput",
        label: "Throughput",
        unit: "10^6bits/s",
        higher_is_better: true,
        get: |r| streamlike(r).then_some(r.summary.throughput_bps / 1e6),
    },
    Metric {
        name: "transactions_per_s",
        label: "Trans/s",
        unit: "per s",
        higher_is_better: true,
        get: |r| r.summary.transactions_per_s,
    },
    Metric {
        name: "latency_p50",
        label: "p50",
        unit: "us",
        higher_is_better: false,
        get: |r| r.summary.latency_us.as_ref().map(|l| l.p50),
    },
    Metric {
        name: "latency_p99",
        label: "p99",
        unit: "us",
        higher_is_better: false,
        get: |r| r.summary.latency_us.as_ref().map(|l| l.p99),
    },
    Metric {
        name: "loss",
        label: "Loss",
        unit: "%",
        higher_is_better: false,
        get: |r| r.summary.udp.as_ref().map(|u| u.loss_pct),
    },
    Metric {
        name: "cpu_local",
        label: "CPU local",
        unit: "%",
        higher_is_better: false,
        get: |r| r.summary.cpu.local_pct,
    },
    Metric {
        name: "cpu_remote",
        label: "CPU remote",
        unit: "%",
        higher_is_better: false,
        get: |r| r.summary.cpu.remote_pct,
    },
    Metric {
        name: "sd_local",
        label: "SD local",
        unit: "us/unit",
        higher_is_better: false,
        get: |r| r.summary.service_demand.local,
    },
    Metric {
        name: "sd_remote",
        label: "SD remote",
        unit: "us/unit",
        higher_is_better: false,
        get: |r| r.summary.service_demand.remote,
    },
];

/// The metric named `name`.
pub fn by_name(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

/// The headline metric of a result's kind: throughput for streams,
/// transactions/s for request/response.
pub fn headline(r: &TestResult) -> &'static Metric {
    if streamlike(r) {
        &METRICS[0]
    } else {
        &METRICS[1]
    }
}

/// The metrics every one of `runs` has.
pub fn present(runs: &[&TestResult]) -> Vec<&'static Metric> {
    METRICS
        .iter()
        .filter(|m| !runs.is_empty() && runs.iter().all(|r| (m.get)(r).is_some_and(f64::is_finite)))
        .collect()
}
