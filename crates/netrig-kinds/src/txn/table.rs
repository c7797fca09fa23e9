//! The request/response kinds' table (tcp-rr, udp-rr; tcp-crr adds its
//! own lines and a column), after netperf's TCP_RR and TCP_CRR: the
//! transaction rate and its latency; interim rows of transactions.

use super::TransactionsConfig;
use netrig_report::table::{
    demand_cell, details, fairness_cell, interval_lead, interval_span, one_way_lines, opt, pct_cell, title,
    Layout,
};
use netrig_report::{IntervalResult, LatencyUs, Spread, TestResult};
use std::fmt::Write;

/// Request/response: transactions/s and latency, after netperf's TCP_RR.
pub(crate) static TRANSACTIONS: Layout = Layout {
    summary: |r| render(r, |_, _| {}),
    interval_header: || interval_header(false),
    interval_rows: |i, per_flow| interval_rows(i, per_flow, false),
};

/// Request/response results, after netperf's TCP_RR and TCP_CRR tables;
/// `kind_lines` writes the kind's own lines after the common ones, above
/// the table.
pub(crate) fn render(r: &TestResult, kind_lines: fn(&mut String, &TestResult)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    let c: TransactionsConfig = r.config.kind_part().unwrap_or_default();
    if c.busy_wait {
        let _ = writeln!(
            out,
            "both ends busy-waited (--busy-wait): each polled its socket instead of sleeping until woken, a CPU \
             kept busy per flow on each end (in the CPU figures and service demand)"
        );
    }
    kind_lines(&mut out, r);
    let cpu = &r.summary.cpu;
    let sd = &r.summary.service_demand;
    let (req, resp) = (c.request_size.unwrap_or(0), c.response_size.unwrap_or(0));
    let b = &r.summary.socket_buffers.local;
    let _ = writeln!(
        out,
        "Local /Remote                                                Utilization       Service Demand"
    );
    let _ = writeln!(
        out,
        "Socket Size        Request  Resp.    Elapsed  Trans.          local    remote   local    remote"
    );
    let _ = writeln!(
        out,
        "Send     Recv      Size     Size     Time     Rate            %        %        {:<8} {}",
        sd.unit, sd.unit
    );
    let _ = writeln!(out, "bytes    bytes     bytes    bytes    secs.    per sec");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<8} {:<9} {:<8} {:<8} {:<8.2} {:<15.2} {:<8} {:<8} {:<8} {}",
        opt(b.initial.snd),
        opt(b.initial.rcv),
        req,
        resp,
        r.summary.elapsed_s,
        r.summary.transactions_per_s.unwrap_or(0.0),
        pct_cell(cpu.local_pct),
        pct_cell(cpu.remote_pct),
        demand_cell(sd.local),
        demand_cell(sd.remote)
    );
    let rb = &r.summary.socket_buffers.remote;
    let _ = writeln!(out, "{:<8} {:<9}", opt(rb.initial.snd), opt(rb.initial.rcv));
    if let Some(l) = &r.summary.latency_us {
        let _ = writeln!(
            out,
            "\nlatency (us), {} transactions: mean {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            l.count, l.mean, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    if let Some(o) = &r.summary.one_way_delay {
        one_way_lines(&mut out, o);
    }
    // The failures group of the kind's counts, by the names tcp-crr and the
    // http kind give their reasons.
    if let Some(e) = r.summary.counts.group(netrig_report::model::FAILURES) {
        let n = |k| e.get(k);
        let _ = writeln!(
            out,
            "connect errors (failed transactions, not counted): refused {}  timed out {}  address not available {}  reset {}  other {}",
            n("refused"), n("timed_out"), n("addr_not_available"), n("reset"), n("other")
        );
    }
    if let Some(s) = &r.summary.schedule {
        let _ = writeln!(
            out,
            "open loop at {} tps per flow: {} requests due, {} left more than 1 ms late, at most {:.1} us behind (mean {:.1} us)",
            c.rate.map_or_else(|| "?".into(), |x| format!("{x}")),
            s.due,
            s.late,
            s.max_behind_us,
            s.mean_behind_us
        );
    }
    if r.flows.len() > 1 {
        let tps: Vec<f64> = r.flows.iter().filter_map(|f| f.transactions_per_s).collect();
        let s = Spread::of(&tps);
        let _ = writeln!(
            out,
            "per-flow transactions/s: min {:.2}  median {:.2}  max {:.2}  over {} flows; over bytes moved, {}",
            s.min,
            s.median,
            s.max,
            r.flows.len(),
            fairness_cell(r.summary.directions.first().and_then(|d| d.fairness), r.flows.len() as u32)
        );
    }
    out.push_str(&details(r));
    out
}

/// Interim rows' heads: transactions, their rate and latency, and (`failed`) failures.
pub(crate) fn interval_header(failed: bool) -> String {
    let head = format!(
        "{} {:>12} {:>12} {:>10} {:>10}",
        interval_lead(),
        "Trans",
        "Trans/s",
        "p50 us",
        "p99 us"
    );
    if failed {
        format!("{head} {:>8}", "Failed")
    } else {
        head
    }
}

/// Rows for one interim report: a row per flow when `per_flow`, then the
/// sum with the interval's latency; `failed`: each with its failures.
pub(crate) fn interval_rows(i: &IntervalResult, per_flow: bool, failed: bool) -> String {
    let mut out = String::new();
    let span = interval_span(i);
    let secs = i.end_s - i.start_s;
    let mut trow = |name: String, n: u64, lat: Option<&LatencyUs>, fails: Option<u64>| {
        let (p50, p99) = lat.map_or_else(
            || ("-".to_string(), "-".to_string()),
            |l| (format!("{:.1}", l.p50), format!("{:.1}", l.p99)),
        );
        let _ = write!(
            out,
            "{span:<16} {name:<6} {n:>12} {:>12.1} {p50:>10} {p99:>10}",
            rate(n, secs)
        );
        let _ = if failed {
            writeln!(out, " {:>8}", opt(fails))
        } else {
            writeln!(out)
        };
    };
    if per_flow {
        for f in &i.flows {
            // Latency is kept for all flows together, not per flow.
            trow(
                f.id.to_string(),
                f.transactions.unwrap_or(0),
                None,
                f.failed_transactions,
            );
        }
    }
    let n = i.flows.iter().filter_map(|f| f.transactions).sum();
    trow("sum".to_string(), n, i.latency_us.as_ref(), i.failed_transactions);
    out
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}
