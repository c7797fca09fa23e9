//! `--clients N` for http: each client's share of the load, and the
//! clients' results summed into one (see netrig_run::clients).

use netrig_metrics::latency::LatencyRecorder;
use netrig_proto::spec::kind::{HttpLoad, KindSpec};
use netrig_proto::TestSpec;
use netrig_report::http::HttpClientPart;
use netrig_report::{IntervalResult, LatencyUs, TestResult};

/// The most latency histogram bytes read back from one client.
const MAX_HISTOGRAM: usize = 16 << 20;

/// `total` split `n` ways, client `k`'s part: the first `total % n` get one more.
fn part(total: u64, k: u32, n: u32) -> u64 {
    total / u64::from(n) + u64::from(u64::from(k) < total % u64::from(n))
}

/// Client `k` of `n`: its connections, threads, requests and rate, so that
/// the clients together offer the load one client would.
pub(crate) fn share(spec: &TestSpec, k: u32, n: u32) -> Result<TestSpec, String> {
    let KindSpec::Http(s) = &spec.test else {
        return Err(format!("http was given a {} spec", spec.kind()));
    };
    if spec.flows < n {
        return Err(format!(
            "--clients {n} with -c {}: each client needs a connection at least",
            spec.flows
        ));
    }
    let mut spec = spec.clone();
    let mut own = s.clone();
    let flows = spec.flows;
    spec.flows = part(u64::from(flows), k, n) as u32;
    spec.workers = spec.workers.map(|w| (part(u64::from(w), k, n) as u32).max(1));
    if let Some(r) = own.requests {
        own.requests = Some(part(r, k, n).max(1));
    }
    if let HttpLoad::Open { rate, .. } = &mut own.load {
        *rate /= f64::from(n);
    }
    spec.test = KindSpec::Http(own);
    Ok(spec)
}

/// The requests of a client's schedule that it sent: due in the window, neither unsent at its end
/// nor skipped (the requests its `mean_behind_us` is over).
fn sent_of(sc: &netrig_proto::report::ScheduleReport, r: &TestResult) -> u64 {
    let u = r.summary.http.as_ref().and_then(|h| h.unsent.as_ref());
    sc.due.saturating_sub(u.map_or(0, |u| u.unsent + u.skipped))
}

/// Two means over `n` items each, as one mean over all of them.
fn merge_means((a, na): (f64, u64), (b, nb): (f64, u64)) -> (f64, u64) {
    let n = na + nb;
    let mean = if n > 0 {
        (a * na as f64 + b * nb as f64) / n as f64
    } else {
        0.0
    };
    (mean, n)
}

fn per_s(n: u64, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// The clients' results as one: counts added, rates recomputed over the
/// longest window, latency histograms merged, the schedule's lateness
/// combined; this host's CPU and kernel counters are client 0's (every
/// client ran on this host over the same window: each saw all of them).
pub(crate) fn sum(
    spec: &TestSpec,
    mut parts: Vec<TestResult>,
    addrs: &[String],
) -> Result<TestResult, String> {
    if parts.is_empty() {
        return Err("--clients: no client reported".into());
    }
    let n = parts.len();
    let mut clients = Vec::with_capacity(n);
    for (k, p) in parts.iter().enumerate() {
        let h = p
            .summary
            .http
            .as_ref()
            .ok_or("a client's result has no summary.http")?;
        clients.push(HttpClientPart {
            client: k as u32,
            address: addrs.get(k).cloned().unwrap_or_default(),
            connections: h.connections,
            requests_sent: h.requests_sent,
            responses: h.responses,
            replies_per_s: h.replies_per_s,
            errors: h.errors.total,
        });
    }
    let mut out = parts.remove(0);
    let mut latency: Option<LatencyRecorder> = None;
    let mut add_latency = |l: &Option<LatencyUs>| -> Result<(), String> {
        if let Some(b64) = l.as_ref().and_then(|l| l.histogram.as_ref()) {
            let r = LatencyRecorder::from_base64(b64, MAX_HISTOGRAM)
                .map_err(|e| format!("a client's latency histogram: {e}"))?;
            match &mut latency {
                Some(m) => m.merge(&r),
                None => latency = Some(r),
            }
        }
        Ok(())
    };
    add_latency(&out.summary.latency_us)?;
    let mut sent_of_due = out.summary.schedule.as_ref().map_or(0, |sc| sent_of(sc, &out));
    for p in &parts {
        add_latency(&p.summary.latency_us)?;
        let (a, b) = (&mut out.summary, &p.summary);
        a.bytes += b.bytes;
        a.elapsed_s = a.elapsed_s.max(b.elapsed_s);
        a.transactions = Some(a.transactions.unwrap_or(0) + b.transactions.unwrap_or(0));
        if let (Some(x), Some(y)) = (&mut a.schedule, &b.schedule) {
            // Each client's mean is over the requests it sent of those due, not over all due.
            (x.mean_behind_us, sent_of_due) =
                merge_means((x.mean_behind_us, sent_of_due), (y.mean_behind_us, sent_of(y, p)));
            let due = x.due + y.due;
            x.due = due;
            x.late += y.late;
            x.max_behind_us = x.max_behind_us.max(y.max_behind_us);
        }
        a.counts.add(&b.counts);
        if let (Some(x), Some(y)) = (&mut a.http, &b.http) {
            x.connections += y.connections;
            x.threads += y.threads;
            x.window_s = x.window_s.max(y.window_s);
            x.requests_sent += y.requests_sent;
            x.responses += y.responses;
            x.response_bytes += y.response_bytes;
            x.body_bytes += y.body_bytes;
            x.request_bytes += y.request_bytes;
            x.connections_opened += y.connections_opened;
            for (s, c) in &y.statuses {
                *x.statuses.entry(s.clone()).or_default() += c;
            }
            x.errors.add(&y.errors);
            for (r, n) in &y.tls_errors {
                *x.tls_errors.entry(r.clone()).or_default() += n;
            }
            if let (Some(u), Some(v)) = (&mut x.unsent, &y.unsent) {
                u.unsent += v.unsent;
                u.skipped += v.skipped;
            }
            x.total.add(&y.total);
        }
        // Intervals by index: counts and rates add.
        for iv in &p.intervals {
            match out.intervals.iter_mut().find(|o| o.index == iv.index) {
                Some(o) => add_interval(o, iv),
                None => out.intervals.push(iv.clone()),
            }
        }
        let base = out.workers.local.len() as u32;
        out.workers
            .local
            .extend(p.workers.local.iter().cloned().map(|mut w| {
                w.worker += base;
                w
            }));
        for w in &p.warnings {
            if !out.warnings.contains(w) {
                out.warnings.push(w.clone());
            }
        }
    }
    out.intervals.sort_by_key(|i| i.index);
    let secs = out.summary.elapsed_s;
    let s = &mut out.summary;
    s.throughput_bps = netrig_report::bps(s.bytes, secs);
    s.transactions_per_s = s.transactions.map(|t| per_s(t, secs));
    s.latency_us = latency.filter(|l| !l.is_empty()).map(|l| {
        let wire = netrig_proto::report::measure::LatencySummary::from(&l.summary());
        LatencyUs {
            histogram: Some(l.to_base64()),
            ..LatencyUs::from(&wire)
        }
    });
    let responses = s.transactions.unwrap_or(0);
    s.service_demand.local = s
        .cpu
        .local
        .as_ref()
        .and_then(|u| netrig_metrics::service_demand(u.busy_pct, secs, u.cpus, responses as f64));
    if let Some(h) = &mut s.http {
        h.requests_per_s = per_s(h.requests_sent, h.window_s);
        h.replies_per_s = per_s(h.responses, h.window_s);
        h.classify();
        h.transfer_bps = netrig_report::bps(h.response_bytes, h.window_s);
        h.body_bps = netrig_report::bps(h.body_bytes, h.window_s);
        h.clients = Some(clients);
        h.withheld.push(format!(
            "per-client CPU: the {n} clients share this host; its CPU and kernel counters are client 0's, which saw them all"
        ));
    }
    s.tx_throughput_bps = s.http.as_ref().map(|h| netrig_report::bps(h.request_bytes, secs));
    s.rx_throughput_bps = Some(s.throughput_bps);
    // Each client's totals were judged in its own process against the
    // kernel's readings there; client 0's readings do not bracket the
    // others' runs, so the sum is not judged against them.
    out.witness = netrig_report::witness::WitnessResult {
        withheld: vec![format!(
            "{}: the {n} clients' sum is not checked against the kernel: each client's readings bracket only its \
             own run (each client judged its own totals; a disagreement is among the warnings)",
            netrig_report::witness::CLIENTS_WITHHELD
        )],
        ..Default::default()
    };
    out.config.flows = spec.flows;
    out.config.workers = Some(out.workers.local.len() as u32);
    Ok(out)
}

fn add_interval(o: &mut IntervalResult, i: &IntervalResult) {
    o.bytes += i.bytes;
    o.throughput_bps += i.throughput_bps;
    o.rx_throughput_bps = Some(o.rx_throughput_bps.unwrap_or(0.0) + i.rx_throughput_bps.unwrap_or(0.0));
    o.transactions_per_s = Some(o.transactions_per_s.unwrap_or(0.0) + i.transactions_per_s.unwrap_or(0.0));
    o.failed_transactions = Some(o.failed_transactions.unwrap_or(0) + i.failed_transactions.unwrap_or(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_merge_weighted_by_what_each_is_over() {
        // A client that sent 10 requests 100 µs behind and one that sent 990 on time: 1 µs, not
        // the 50 µs an unweighted mean (or one weighted by equal due counts) would give.
        assert_eq!(merge_means((100.0, 10), (0.0, 990)), (1.0, 1000));
        assert_eq!(merge_means((0.0, 0), (0.0, 0)), (0.0, 0));
        assert_eq!(merge_means((7.0, 0), (3.0, 5)), (3.0, 5));
    }
}
