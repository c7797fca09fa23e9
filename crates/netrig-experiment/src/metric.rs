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

/// A metric of the table below.
const fn m(
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    higher_is_better: bool,
    get: fn(&TestResult) -> Option<f64>,
) -> Metric {
    Metric {
        name,
        label,
        unit,
        higher_is_better,
        get,
    }
}

/// Every metric, headline figures first.
pub static METRICS: &[Metric] = &[
    m("throughput", "Throughput", "10^6bits/s", true, |r| {
        streamlike(r).then_some(r.summary.throughput_bps / 1e6)
    }),
    m("transactions_per_s", "Trans/s", "per s", true, |r| {
        r.summary.transactions_per_s
    }),
    m("offered_per_s", "Offered/s", "per s", true, |r| {
        let s = r.summary.schedule.as_ref()?;
        (r.summary.elapsed_s > 0.0).then(|| s.due as f64 / r.summary.elapsed_s)
    }),
    m("errors_pct", "Errors", "%", false, |r| {
        let e = r.summary.connect_errors.as_ref()?.total() as f64;
        let all = e + r.summary.transactions? as f64;
        (all > 0.0).then(|| 100.0 * e / all)
    }),
    m("latency_p50", "p50", "us", false, |r| {
        r.summary.latency_us.as_ref().map(|l| l.p50)
    }),
    m("latency_p99", "p99", "us", false, |r| {
        r.summary.latency_us.as_ref().map(|l| l.p99)
    }),
    m("loss", "Loss", "%", false, |r| {
        r.summary.udp.as_ref().map(|u| u.loss_pct)
    }),
    m("jitter", "Jitter", "us", false, |r| {
        r.summary.udp.as_ref().and_then(|u| u.jitter_us)
    }),
    m("cpu_local", "CPU local", "%", false, |r| r.summary.cpu.local_pct),
    m("cpu_remote", "CPU remote", "%", false, |r| {
        r.summary.cpu.remote_pct
    }),
    m("cpu_server", "CPU server", "%", false, |r| {
        r.server_host.as_ref()?.cpu.as_ref().map(|c| c.busy_pct)
    }),
    m("sd_server", "SD server", "us/tran", false, |r| {
        r.server_host.as_ref()?.service_demand_us_per_transaction
    }),
    m("sd_local", "SD local", "us/unit", false, |r| {
        r.summary.service_demand.local
    }),
    m("sd_remote", "SD remote", "us/unit", false, |r| {
        r.summary.service_demand.remote
    }),
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
