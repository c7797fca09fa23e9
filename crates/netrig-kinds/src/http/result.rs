//! The load generator's report as netrig's result model.

use super::Http;
use netrig_http_load::{Config, Ended, IntervalSample, Report};
use netrig_proto::report::counts::{Counts, KindCounts, FAILURES};
use netrig_proto::report::{CounterReport, ScheduleReport, WorkerCpu};
use netrig_proto::spec::kind::HttpSpec;
use netrig_proto::TestSpec;
use netrig_report::http::{HttpErrors, HttpSummary, HttpTotals, HttpUnsent};
use netrig_report::measure::CpuUsage;
use netrig_report::NewConfig;
use netrig_report::{
    AgentInfo, CpuSummary, EndBuffers, IntervalResult, LatencyUs, PerEnd, RunInfo, ServiceDemandSummary,
    Summary, TestConfig, TestResult,
};
use std::net::SocketAddr;

fn per_s(n: u64, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// One interval sample as the result's interval.
pub(crate) fn interval(i: &IntervalSample) -> IntervalResult {
    let s = i.end_s - i.start_s;
    IntervalResult {
        index: i.index,
        start_s: i.start_s,
        end_s: i.end_s,
        bytes: i.bytes_in,
        throughput_bps: netrig_report::bps(i.bytes_in, s),
        tx_throughput_bps: None,
        rx_throughput_bps: Some(netrig_report::bps(i.bytes_in, s)),
        tx_fairness: None,
        rx_fairness: None,
        directions_fairness: None,
        // Successful replies (2xx, 3xx), as the summary's transactions.
        transactions_per_s: Some(per_s(i.successes, s)),
        retransmits: None,
        udp: None,
        failed_transactions: Some(i.errors),
        latency_us: None,
        flows: Vec::new(),
    }
}

/// Requests sent per second in an interval (the table shows it beside replies/s).
pub(crate) fn errors_of(e: &netrig_http_load::Errors) -> HttpErrors {
    HttpErrors {
        client_timeout: e.client_timeout,
        connect_refused: e.connect_refused,
        connect_reset: e.connect_reset,
        no_local_port: e.no_local_port,
        no_descriptor: e.no_descriptor,
        bad_response: e.bad_response,
        other: e.other,
        total: e.total(),
    }
}

/// The run's result.
pub(crate) fn assemble(
    spec: &TestSpec,
    s: &HttpSpec,
    c: &Config,
    server: SocketAddr,
    r: &Report,
    counters: Option<CounterReport>,
) -> TestResult {
    let secs = r.window_s;
    let mut withheld = vec![
        "interval latency percentiles: not kept per interval (the window's histogram is in summary.latency_us)"
            .to_string(),
        format!(
            "{}: not watched (--server-agent HOST asks the netrig agent on the server's host; counters.local is this host's)",
            netrig_report::server_host::SERVER_NOT_WATCHED
        ),
    ];
    let latency_us = if r.latency.is_empty() {
        withheld.push("latency: no response completed in the window".into());
        None
    } else {
        let wire = netrig_proto::report::measure::LatencySummary::from(&r.latency.summary());
        Some(LatencyUs {
            histogram: Some(r.latency.to_base64()),
            ..LatencyUs::from(&wire)
        })
    };
    let (cpu_local, cpu_reason) = this_cpu(r);
    if let Some(why) = &cpu_reason {
        withheld.push(format!("this host's CPU: {why}"));
    }
    // Per successful reply: a 404 answered fast is not the work asked for.
    let demand = cpu_local
        .as_ref()
        .and_then(|u| netrig_metrics::service_demand(u.busy_pct, secs, u.cpus, r.window.successes as f64));
    if cpu_local.is_some() && demand.is_none() {
        withheld.push("service demand: no successful (2xx or 3xx) response in the window".into());
    }
    let cpu = CpuSummary {
        local_pct: cpu_local.as_ref().map(|u| u.busy_pct),
        remote_pct: None,
        local: cpu_local,
        remote: None,
        local_accounted_pct: None,
        remote_accounted_pct: None,
        local_withheld: cpu_reason,
        remote_withheld: None,
    };
    let service_demand = ServiceDemandSummary {
        local: demand,
        remote: None,
        unit: "us/tran".into(),
        mss: None,
        local_per_packet_us: None,
        remote_per_packet_us: None,
    };
    let http = http_summary(s, c, r, withheld);
    let summary = summary(r, http, latency_us, cpu, service_demand);
    TestResult {
        intervals: r.intervals.iter().map(interval).collect(),
        counters: PerEnd {
            local: counters,
            remote: None,
        },
        workers: PerEnd {
            local: workers(c, r),
            remote: Vec::new(),
        },
        ..TestResult::one_ended(
            "http",
            config(spec, c, server, r),
            AgentInfo {
                address: server.to_string(),
                software: "any HTTP server (no agent)".into(),
                protocol_version: 0,
            },
            summary,
        )
    }
}

/// This host's CPU over the window, or why it is withheld.
fn this_cpu(r: &Report) -> (Option<CpuUsage>, Option<String>) {
    let secs = r.window_s;
    match &r.cpu {
        Ok(_) if secs < 0.5 => (
            None,
            Some(format!(
                "a window of {secs:.3} s is too short for /proc/stat, which counts in 10 ms ticks (0.5 s at least)"
            )),
        ),
        Ok(u) => {
            let wire = netrig_proto::report::measure::CpuUsage::from(u);
            match netrig_report::checks::cpu_resolution_of(&wire, Some(secs), None) {
                netrig_report::checks::CpuResolution::Withheld(why) => (None, Some(why)),
                _ => (Some(CpuUsage::from(&wire)), None),
            }
        }
        Err(e) => (None, Some(e.clone())),
    }
}

/// `summary.http`: the window's requests, replies, bytes and errors, and
/// the whole run's totals; `withheld` says what it could not measure.
fn http_summary(s: &HttpSpec, c: &Config, r: &Report, withheld: Vec<String>) -> HttpSummary {
    let w = &r.window;
    let secs = r.window_s;
    let statuses = w.statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let open = c.load != netrig_http_load::Load::Closed;
    let mut http = HttpSummary {
        load: if open { "open" } else { "closed" }.into(),
        new_conn: c.new_conn,
        connections: c.connections,
        threads: r.threads.len() as u32,
        window_start_s: r.window_start_s,
        window_s: secs,
        ended: match r.ended {
            Ended::Duration => "duration",
            Ended::Count => "count",
            Ended::CountCutShort => "count_cut_short",
        }
        .into(),
        rate_asked: s.rate(),
        requests_sent: w.sent,
        requests_per_s: per_s(w.sent, secs),
        responses: w.responses,
        replies_per_s: per_s(w.responses, secs),
        response_bytes: w.bytes_in,
        transfer_bps: netrig_report::bps(w.bytes_in, secs),
        body_bytes: w.body_bytes,
        body_bps: netrig_report::bps(w.body_bytes, secs),
        request_bytes: w.bytes_out,
        connections_opened: w.connections,
        statuses,
        errors: errors_of(&w.errors),
        unsent: r.schedule.as_ref().map(|sc| HttpUnsent {
            unsent: sc.unsent,
            skipped: sc.skipped,
            rule: format!(
                "late: sent more than 1 ms after due; unsent: due in the window, not sent when it closed; \
                 skipped: due while {} requests already waited on its thread",
                netrig_http_load::MAX_BACKLOG
            ),
        }),
        total: HttpTotals {
            requests_sent: r.total.sent,
            request_bytes: r.total.bytes_out,
            responses: r.total.responses,
            response_bytes: r.total.bytes_in,
            connections_opened: r.total.connections,
            errors: r.total.errors.total(),
            abandoned: r.abandoned,
        },
        tls_errors: r.tls_errors.clone(),
        withheld,
        clients: None,
        ..Default::default()
    };
    http.classify();
    http
}

/// The result's summary: the window's figures, `http` among them.
fn summary(
    r: &Report,
    http: HttpSummary,
    latency_us: Option<LatencyUs>,
    cpu: CpuSummary,
    service_demand: ServiceDemandSummary,
) -> Summary {
    let w = &r.window;
    let secs = r.window_s;
    let e = &w.errors;
    Summary {
        throughput_bps: netrig_report::bps(w.bytes_in, secs),
        bytes: w.bytes_in,
        elapsed_s: secs,
        tx_throughput_bps: Some(netrig_report::bps(w.bytes_out, secs)),
        rx_throughput_bps: Some(netrig_report::bps(w.bytes_in, secs)),
        directions: Vec::new(),
        directions_fairness: None,
        socket_buffers: EndBuffers {
            local: Default::default(),
            remote: Default::default(),
        },
        cpu,
        service_demand,
        // The successful replies (2xx, 3xx): what a rate sweep's
        // saturation and plots follow (all replies are in summary.http).
        transactions: Some(http.success_responses),
        transactions_per_s: Some(http.success_per_s),
        latency_us,
        schedule: r.schedule.as_ref().map(|sc| ScheduleReport {
            due: sc.due,
            late: sc.late,
            max_behind_us: sc.max_behind_us,
            mean_behind_us: sc.mean_behind_us,
        }),
        // Its failed requests as tcp-crr says its failed transactions, by the same reasons.
        counts: KindCounts::one(
            FAILURES,
            Counts::of([
                ("refused", e.connect_refused),
                ("timed_out", e.client_timeout),
                ("addr_not_available", e.no_local_port),
                ("reset", e.connect_reset),
                ("other", e.no_descriptor + e.bad_response + e.other),
            ]),
        ),
        send_throughput_bps: None,
        recv_throughput_bps: None,
        udp: None,
        http: Some(http),
        one_way_delay: None,
        half_close: None,
    }
}

/// The run's config: the spec's, against `server`, with the requests' size
/// and the load's threads.
fn config(spec: &TestSpec, c: &Config, server: SocketAddr, r: &Report) -> TestConfig {
    let mut config = TestConfig::new(
        spec,
        &crate::kind::Def(Http),
        RunInfo {
            host: Some(server.ip().to_string()),
            port: server.port(),
            cpus: c.cpus.clone(),
            bind: None,
            family: Some(if server.is_ipv4() { "ipv4" } else { "ipv6" }.into()),
            local: Default::default(),
            remote: Default::default(),
        },
    );
    config.message_size = c.request.len() as u32;
    config.set_kind_part(&crate::txn::TransactionsConfig {
        request_size: Some(c.request.len() as u32),
        ..config.kind_part().unwrap_or_default()
    });
    config.workers = Some(r.threads.len() as u32);
    config
}

/// The load's threads as the result's workers, each on its CPU of `--cpus`.
fn workers(c: &Config, r: &Report) -> Vec<WorkerCpu> {
    r.threads
        .iter()
        .map(|t| WorkerCpu {
            worker: t.thread,
            flows: t.connections,
            cpu_s: t.cpu_s,
            busy_pct: t.busy_pct,
            cpu: c.cpus.as_ref().map(|l| l[t.thread as usize % l.len()]),
            last_cpu: None,
        })
        .collect()
}

/// What the figures say that a reader should not miss.
pub(crate) fn warnings(s: &HttpSpec, r: &TestResult) -> Vec<String> {
    let mut w = Vec::new();
    let Some(h) = &r.summary.http else { return w };
    if h.errors.total > 0 {
        let e = &h.errors;
        w.push(format!(
            "{} request(s) failed in the window: client timeout {}, connect refused {}, connect reset {}, \
             no local port {}, no descriptor {}, bad response {}, other {}",
            e.total,
            e.client_timeout,
            e.connect_refused,
            e.connect_reset,
            e.no_local_port,
            e.no_descriptor,
            e.bad_response,
            e.other
        ));
    }
    if !h.tls_errors.is_empty() {
        let n: u64 = h.tls_errors.values().sum();
        let by: Vec<String> = h.tls_errors.iter().map(|(r, n)| format!("{n}: {r}")).collect();
        w.push(format!(
            "{n} HTTPS connection(s) failed TLS over the run: {} (-k/--insecure takes any certificate, \
             --cacert FILE trusts the CA in FILE)",
            by.join("; ")
        ));
    }
    if let Some(w_) = error_replies_warning(h) {
        w.push(w_);
    }
    if h.server_error_responses > 0 {
        w.push(format!(
            "{} response(s) with a 5xx status (by status: summary.http.statuses)",
            h.server_error_responses
        ));
    }
    if h.ended == "count_cut_short" {
        w.push(format!(
            "-n {} was not reached within -d/-l {} s",
            s.requests.unwrap_or(0),
            r.config.length_s.unwrap_or(0.0)
        ));
    }
    if let (Some(rate), Some(sc)) = (h.rate_asked, &r.summary.schedule) {
        let achieved = h.requests_per_s;
        if achieved < rate * 0.99 {
            w.push(format!(
                "open loop: {achieved:.1} requests/s sent of {rate} asked ({:.1} %): {} due, {} late, {} unsent \
                 at the window's end, {} skipped; more connections (-c) or threads (-t) may keep up",
                achieved / rate * 100.0,
                sc.due,
                sc.late,
                h.unsent.as_ref().map_or(0, |u| u.unsent),
                h.unsent.as_ref().map_or(0, |u| u.skipped),
            ));
        }
    }
    for t in &r.workers.local {
        if t.busy_pct >= 90.0 {
            w.push(format!(
                "load thread {} was {:.0} % busy: the generator may be the bottleneck (add -t, or clients)",
                t.worker, t.busy_pct
            ));
        }
    }
    if h.total.abandoned > 0 {
        w.push(format!(
            "{} request(s) were still unanswered when the drain after the window ended (--timeout)",
            h.total.abandoned
        ));
    }
    w
}

/// More than half the replies in the window had a status other than 2xx or
/// 3xx: the reply rate is mostly errors (a wrong --path, a server that
/// refuses), so it is said, with the commonest statuses and the rate that
/// counts only successes.
pub(crate) fn error_replies_warning(h: &netrig_report::http::HttpSummary) -> Option<String> {
    if h.responses == 0 || h.non_success_responses * 2 <= h.responses {
        return None;
    }
    let mut bad: Vec<(&String, &u64)> = h
        .statuses
        .iter()
        .filter(|(s, _)| !netrig_report::http::is_success(s.parse().unwrap_or(0)))
        .collect();
    bad.sort_by(|a, b| b.1.cmp(a.1));
    let top: Vec<String> = bad.iter().take(3).map(|(s, n)| format!("{s}: {n}")).collect();
    Some(format!(
        "{} of {} responses ({:.1} %) in the window had a status other than 2xx or 3xx ({}): the server \
         answered mostly errors; successful replies {:.2}/s of {:.2}/s in all (check --path or --url)",
        h.non_success_responses,
        h.responses,
        h.non_success_responses as f64 * 100.0 / h.responses as f64,
        top.join(", "),
        h.success_per_s,
        h.replies_per_s
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_report::http::HttpSummary;

    fn summary(statuses: &[(&str, u64)]) -> HttpSummary {
        let mut h = HttpSummary {
            window_s: 2.0,
            responses: statuses.iter().map(|s| s.1).sum(),
            statuses: statuses.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            ..Default::default()
        };
        h.replies_per_s = h.responses as f64 / h.window_s;
        h.classify();
        h
    }

    /// A server that answers 404 to everything is said to, with the rate
    /// of successful replies (none); a few 404s among 200s are not.
    #[test]
    fn mostly_error_replies_are_named() {
        let w = error_replies_warning(&summary(&[("404", 72_866)])).expect("warned");
        assert!(w.contains("72866 of 72866") && w.contains("404: 72866"), "{w}");
        assert!(w.contains("successful replies 0.00/s of 36433.00/s"), "{w}");
        let w = error_replies_warning(&summary(&[("200", 10), ("404", 30), ("500", 20)])).expect("warned");
        assert!(w.contains("404: 30, 500: 20"), "{w}");
        assert!(error_replies_warning(&summary(&[("200", 60), ("404", 40)])).is_none());
        assert!(error_replies_warning(&summary(&[])).is_none());
    }
}
