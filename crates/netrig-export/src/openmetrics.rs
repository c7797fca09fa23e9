//! A run's summary as Prometheus metrics, for a Pushgateway (`--push URL`, docs/FLEET.md
//! "Metrics and the Pushgateway"): each figure in base units with its unit in its name, present
//! only where the result has it (a withheld figure is left out, never pushed as 0), and the
//! grouping labels that say which test it was (kind, target; for an experiment its plan, test,
//! point and arm).
//!
//! An experiment pushes one group per test, point and arm: the mean over that arm's runs of
//! each run's figure, with the runs it is the mean of (`netrig_runs`). A Pushgateway keeps the
//! last push of each group, so pushing every run would leave whichever run came last; the mean
//! is what the experiment measured.

use netrig_document::experiment::Experiment;
use netrig_document::result::TestResult;
use netrig_openmetrics::{Family, Kind, Value};

/// What a push sends: its grouping labels (job `netrig` aside) and its families.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub labels: Vec<(String, String)>,
    pub families: Vec<Family>,
}

/// One figure of a run: its metric's name and help, kind, a label that tells its samples
/// apart (an end), and how it is read from a result.
struct Figure {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    label: Option<(&'static str, &'static str)>,
    get: fn(&TestResult) -> Option<f64>,
}

const fn figure(
    name: &'static str,
    help: &'static str,
    kind: Kind,
    label: Option<(&'static str, &'static str)>,
    get: fn(&TestResult) -> Option<f64>,
) -> Figure {
    Figure {
        name,
        help,
        kind,
        label,
        get,
    }
}

fn streamlike(r: &TestResult) -> bool {
    r.summary.transactions_per_s.is_none()
}

fn latency_s(r: &TestResult, p: fn(&netrig_document::result::LatencyUs) -> f64) -> Option<f64> {
    r.summary.latency_us.as_ref().map(|l| p(l) / 1e6)
}

/// Service demand, when its unit is `unit` (µs per KB for streams, per transaction for
/// request/response).
fn demand(r: &TestResult, unit: &str, local: bool) -> Option<f64> {
    let sd = &r.summary.service_demand;
    (sd.unit == unit).then_some(if local { sd.local } else { sd.remote })?
}

/// Segments the senders' sockets retransmitted, all flows (TCP_INFO's total when each
/// window closed, so over the connection's life); withheld unless every flow has TCP_INFO.
fn retransmits(r: &TestResult) -> Option<f64> {
    if r.flows.is_empty() {
        return None;
    }
    let each: Option<Vec<u32>> = r
        .flows
        .iter()
        .map(|f| f.tcp_info.as_ref().map(|t| t.retransmits_total))
        .collect();
    each.map(|v| v.iter().map(|&n| f64::from(n)).sum())
}

const LOCAL: Option<(&str, &str)> = Some(("end", "local"));
const REMOTE: Option<(&str, &str)> = Some(("end", "remote"));

/// Every figure a push may carry, in the order pushed.
static FIGURES: &[Figure] = &[
    figure("netrig_throughput_bits_per_second", "Payload the receivers got in the measured window, all directions, in bits per second (streams).", Kind::Gauge, None, |r| {
        streamlike(r).then_some(r.summary.throughput_bps)
    }),
    figure("netrig_payload_bytes", "Payload bytes the receiving applications got in the measured window, all directions.", Kind::Counter, None, |r| {
        Some(r.summary.bytes as f64)
    }),
    figure("netrig_window_seconds", "The measured window, in seconds (the longest direction's).", Kind::Gauge, None, |r| {
        Some(r.summary.elapsed_s)
    }),
    figure("netrig_transactions_per_second", "Transactions completed per second in the requester's window (request/response).", Kind::Gauge, None, |r| {
        r.summary.transactions_per_s
    }),
    figure("netrig_transactions", "Transactions completed in the requester's window (request/response).", Kind::Counter, None, |r| {
        r.summary.transactions.map(|t| t as f64)
    }),
    figure("netrig_rtt_mean_seconds", "Mean transaction latency (request sent to response read) in the window, seconds.", Kind::Gauge, None, |r| {
        latency_s(r, |l| l.mean)
    }),
    figure("netrig_rtt_p50_seconds", "Median transaction latency in the window (all workers' histograms merged), seconds.", Kind::Gauge, None, |r| {
        latency_s(r, |l| l.p50)
    }),
    figure("netrig_rtt_p90_seconds", "90th percentile of transaction latency in the window, seconds.", Kind::Gauge, None, |r| {
        latency_s(r, |l| l.p90)
    }),
    figure("netrig_rtt_p99_seconds", "99th percentile of transaction latency in the window, seconds.", Kind::Gauge, None, |r| {
        latency_s(r, |l| l.p99)
    }),
    figure("netrig_rtt_p999_seconds", "99.9th percentile of transaction latency in the window, seconds.", Kind::Gauge, None, |r| {
        latency_s(r, |l| l.p999)
    }),
    figure("netrig_retransmits", "TCP segments the senders' sockets retransmitted (TCP_INFO total_retrans when each window closed), all flows.", Kind::Counter, None, retransmits),
    figure("netrig_udp_loss_ratio", "UDP datagrams lost over those expected, all flows, over the whole test (0 to 1).", Kind::Gauge, None, |r| {
        r.summary.udp.as_ref().map(|u| u.loss_pct / 100.0)
    }),
    figure("netrig_udp_jitter_seconds", "UDP jitter over the receiver's window (mean of RFC 3550's |D|), seconds.", Kind::Gauge, None, |r| {
        r.summary.udp.as_ref().and_then(|u| u.jitter_us).map(|j| j / 1e6)
    }),
    figure("netrig_cpu_utilization_ratio", "Each end's host CPU busy over the window, of all its CPUs (0 to 1).", Kind::Gauge, LOCAL, |r| {
        r.summary.cpu.local_pct.map(|p| p / 100.0)
    }),
    figure("netrig_cpu_utilization_ratio", "", Kind::Gauge, REMOTE, |r| r.summary.cpu.remote_pct.map(|p| p / 100.0)),
    figure("netrig_cpu_service_demand_us_per_kb", "Each end's CPU microseconds per KB (1024 bytes) of payload moved (streams; netperf's service demand).", Kind::Gauge, LOCAL, |r| {
        demand(r, "us/KB", true)
    }),
    figure("netrig_cpu_service_demand_us_per_kb", "", Kind::Gauge, REMOTE, |r| demand(r, "us/KB", false)),
    figure("netrig_cpu_service_demand_us_per_transaction", "Each end's CPU microseconds per transaction (request/response; netperf's service demand).", Kind::Gauge, LOCAL, |r| {
        demand(r, "us/tran", true)
    }),
    figure("netrig_cpu_service_demand_us_per_transaction", "", Kind::Gauge, REMOTE, |r| demand(r, "us/tran", false)),
    figure("netrig_test_start_time_seconds", "When the test began by the client's clock (the instant it sent go), seconds since the Unix epoch.", Kind::Gauge, None, |r| {
        r.started_unix_s
    }),
];

/// The families of `runs` (one run, or an arm's runs): each figure's mean over the runs, where
/// every run has it; with `runs_family`, how many runs that is.
fn families(runs: &[&TestResult], runs_family: bool) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for f in FIGURES {
        let values: Option<Vec<f64>> = runs
            .iter()
            .map(|r| (f.get)(r).filter(|v| v.is_finite()))
            .collect();
        let Some(values) = values.filter(|v| !v.is_empty()) else {
            continue;
        };
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let value = match f.kind {
            // One run's count stays an integer; a mean of counts need not be.
            Kind::Counter if runs.len() == 1 => Value::Int(mean as u64),
            _ => Value::Float(mean),
        };
        let labels: Vec<(&str, &str)> = f.label.into_iter().collect();
        match out.iter_mut().find(|x| x.name == f.name) {
            Some(family) => family.push(&labels, value),
            None => {
                // A family's help is on its first figure, which may be the one withheld.
                let help = FIGURES
                    .iter()
                    .find(|x| x.name == f.name && !x.help.is_empty())
                    .map_or(f.help, |x| x.help);
                out.push(Family::new(f.name, help, f.kind).with(&labels, value))
            }
        }
    }
    if runs_family && !out.is_empty() {
        out.push(
            Family::new(
                "netrig_runs",
                "The runs each figure of this group is the mean of.",
                Kind::Gauge,
            )
            .with(&[], Value::Int(runs.len() as u64)),
        );
    }
    out
}

/// Where a result ran: the `-H` it was given; `embedded` for the in-process loopback agent
/// (its port changes each run, and a group must not); else the agent's address.
fn target(r: &TestResult) -> String {
    match &r.config.host {
        Some(h) => h.clone(),
        None if r.config.embedded => "embedded".into(),
        None => r.agent.address.clone(),
    }
}

/// One run's push: grouped by its kind and target.
pub fn result_group(r: &TestResult) -> Group {
    Group {
        labels: vec![("kind".into(), r.test.clone()), ("target".into(), target(r))],
        families: families(&[r], false),
    }
}

/// An experiment's pushes: one group per test, point and arm that has runs, grouped by the
/// plan's name, the test's place in the plan and its kind, the target, the point and the arm.
pub fn experiment_groups(e: &Experiment) -> Vec<Group> {
    let mut out = Vec::new();
    for (i, t) in e.tests.iter().enumerate() {
        for p in &t.points {
            for a in &p.arms {
                let runs: Vec<&TestResult> = a.runs.iter().collect();
                let Some(first) = runs.first() else {
                    continue;
                };
                let mut labels = vec![
                    ("plan".to_string(), e.plan.name.clone()),
                    ("test".to_string(), i.to_string()),
                    ("kind".to_string(), t.kind.clone()),
                    ("target".to_string(), target(first)),
                    ("arm".to_string(), a.arm.clone()),
                ];
                if !p.point.values.is_empty() {
                    labels.push(("point".into(), p.point.to_string()));
                }
                out.push(Group {
                    labels,
                    families: families(&runs, true),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::fixtures;

    #[test]
    fn a_stream_pushes_its_figures_and_no_withheld_one() {
        let r = fixtures::fixture("tcp-stream");
        let g = result_group(&r);
        let text = netrig_openmetrics::classic(&g.families);
        assert!(
            text.contains(&format!(
                "netrig_throughput_bits_per_second {}",
                r.summary.throughput_bps
            )),
            "{text}"
        );
        assert!(
            !text.contains("netrig_rtt_p99_seconds"),
            "a stream has no latency: {text}"
        );
        assert!(!text.contains("netrig_transactions"), "{text}");
        assert_eq!(g.labels[0], ("kind".to_string(), r.test.clone()));
    }

    #[test]
    fn a_family_keeps_its_help_when_its_first_figure_is_withheld() {
        let mut r = fixtures::fixture("tcp-stream");
        r.summary.cpu.local_pct = None;
        r.summary.cpu.remote_pct = Some(50.0);
        let text = netrig_openmetrics::classic(&result_group(&r).families);
        assert!(
            text.contains("# HELP netrig_cpu_utilization_ratio Each end's host CPU"),
            "{text}"
        );
        assert!(
            text.contains("netrig_cpu_utilization_ratio{end=\"remote\"} 0.5\n"),
            "{text}"
        );
        assert!(
            !text.contains("netrig_cpu_utilization_ratio{end=\"local\"}"),
            "a withheld figure is not pushed: {text}"
        );
    }

    #[test]
    fn a_request_response_run_pushes_its_latency_in_seconds() {
        let r = fixtures::fixture("tcp-rr");
        let l = r.summary.latency_us.clone().expect("tcp-rr has latency");
        let text = netrig_openmetrics::openmetrics(&result_group(&r).families);
        assert!(
            text.contains(&format!("netrig_rtt_p99_seconds {}", l.p99 / 1e6)),
            "{text}"
        );
        assert!(!text.contains("netrig_throughput_bits_per_second"), "{text}");
    }

    #[test]
    fn an_experiment_pushes_each_arms_mean_and_its_runs() {
        let e = fixtures::experiment("tcp-stream", "-m", &["1K", "64K"], &["a", "b"], |p, a, i, r| {
            r.summary.throughput_bps = 1e9 * (1 + p + a) as f64 + i as f64;
        });
        let groups = experiment_groups(&e);
        assert_eq!(groups.len(), 4, "two points of two arms");
        let text = netrig_openmetrics::classic(&groups[3].families);
        assert!(text.contains("netrig_runs 3\n"), "{text}");
        assert!(
            text.contains("netrig_throughput_bits_per_second 3000000001.0\n"),
            "{text}"
        );
        assert!(
            groups[3].labels.contains(&("arm".to_string(), "b".to_string())),
            "{:?}",
            groups[3].labels
        );
    }
}
