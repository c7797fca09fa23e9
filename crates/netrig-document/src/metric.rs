//! The figures an experiment estimates and compares, each read from one
//! run's whole result (a run is one sample; interim samples never are).

use crate::result::{TestResult, FAILURES};

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
        let e = r.summary.counts.group(FAILURES)?.total() as f64;
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
    m(
        "sd_local_packet",
        "SD local/packet",
        "us/segment",
        false,
        sd_local_per_segment,
    ),
];

/// Streams: the local end's CPU per TCP segment its kernel sent — its busy CPU time over the
/// window (the service demand in µs/KB times the KB moved) divided by the kernel's Tcp.OutSegs
/// of the local end (the witness's "TCP data segments" check: in a lab host, that namespace's
/// own count, the test's data segments with its ACKs; on a shared host, every socket's, which
/// makes it a lower bound). The IPQoS study's service demand per packet, from segments counted
/// rather than µs/KB × MSS (small writes leave segments smaller than the MSS).
fn sd_local_per_segment(r: &TestResult) -> Option<f64> {
    if !streamlike(r) {
        return None;
    }
    let sd = r.summary.service_demand.local?;
    let segments = r
        .witness
        .checks
        .iter()
        .find(|c| c.end == "local" && c.figure == "TCP data segments")?
        .kernel;
    (segments > 0).then(|| sd * r.summary.bytes as f64 / 1024.0 / segments as f64)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #39 (IPQoS): the service demand per packet is the local CPU time over the window
    /// divided by the segments the local kernel sent (Tcp.OutSegs), not µs/KB × MSS.
    #[test]
    fn service_demand_per_packet_is_cpu_time_over_segments_sent() {
        let mut r = crate::fixtures::fixture("tcp-stream");
        let m = by_name("sd_local_packet").expect("the metric");
        r.summary.service_demand.local = Some(2.0); // µs/KB
        r.summary.bytes = 1024 * 1000; // 1,000 KB: 2,000 µs of CPU
        for c in &mut r.witness.checks {
            if c.figure == "TCP data segments" {
                c.kernel = 4000;
            }
        }
        let v = (m.get)(&r).expect("a stream with the kernel's segment count");
        assert!((v - 0.5).abs() < 1e-9, "{v}");
        r.witness.checks.retain(|c| c.figure != "TCP data segments");
        assert_eq!(
            (m.get)(&r),
            None,
            "no segment count: withheld, not guessed from the MSS"
        );
        let rr = crate::fixtures::fixture("tcp-rr");
        assert_eq!(
            (m.get)(&rr),
            None,
            "request/response: no per-packet stream figure"
        );
    }
}
