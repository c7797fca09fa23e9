//! The human table's kit, after netperf's classic TCP_STREAM output: the
//! parts several kinds' layouts share (the title, the CPU, worker, TCP_INFO,
//! counter and environment lines, the witness, the interval rows' frame, the
//! quick suite's table). Each kind's own layout is in its folder (crate
//! netrig-kinds: `tcp_stream/table.rs`, `txn/table.rs`, ...), built of these.

use super::TableLayout;
use netrig_document::result::*;
use netrig_proto::Direction;
use std::fmt::Write;

pub fn mbps(bps: f64) -> String {
    format!("{:.2}", bps / 1e6)
}

/// A figure, or "-" where there is none.
pub fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The test's title line.
pub fn title(r: &TestResult) -> String {
    let target = if r.config.embedded {
        format!("{} (embedded agent)", r.agent.address)
    } else {
        format!(
            "{} ({})",
            r.agent.address,
            r.config.host.as_deref().unwrap_or("?")
        )
    };
    let limit = match (r.config.length_s, r.config.bytes) {
        (Some(l), _) => format!("{l} s"),
        (None, Some(b)) => format!("{b} bytes"),
        _ => String::new(),
    };
    let flows = r.config.flows;
    let mut t = format!(
        "{} TEST to {target}: {flows} flow{} per direction, {limit}{}",
        r.test.to_uppercase().replace('-', " "),
        if flows == 1 { "" } else { "s" },
        if r.config.omit_s > 0.0 {
            format!(", first {} s omitted", r.config.omit_s)
        } else {
            String::new()
        }
    );
    let shaped = shaping(r);
    if !shaped.is_empty() {
        t.push_str(&format!("\noptions: {}", shaped.join(", ")));
    }
    if let Some(p) = &r.peer {
        let how = match p.chosen {
            peer::Chosen::Asked => "--peer iperf3",
            peer::Chosen::Detected => "detected: it answered as iperf3 does",
        };
        t.push_str(&format!(
            "\nremote end: an {} server ({how}); its figures, marked {REPORTED}, are {}, not measured by netrig",
            p.software, p.remote_figures
        ));
    }
    t
}

/// The mark on a figure an iperf3 server reported rather than netrig measured.
pub const REPORTED: &str = "[server's report]";

/// The remote end as a row names it: "agent", or an iperf3 server's,
/// marked as its report.
pub fn remote_end(r: &TestResult) -> String {
    match &r.peer {
        Some(p) => format!("{} server {REPORTED}", p.software),
        None => "agent".into(),
    }
}

/// The options that shaped the run beyond sizes and length: marking, TCP
/// options, the kernel's pacing, the workers and their CPUs (a rate and
/// -Z have lines of their own).
fn shaping(r: &TestResult) -> Vec<String> {
    let (l, re) = (&r.config.local, &r.config.remote);
    let mut o = Vec::new();
    let both = |a: Option<String>, b: Option<String>, name: &str, o: &mut Vec<String>| match (a, b) {
        (Some(a), Some(b)) if a == b => o.push(format!("{name} {a}")),
        (a, b) => {
            if let Some(a) = a {
                o.push(format!("{name} {a} (local)"));
            }
            if let Some(b) = b {
                o.push(format!("{name} {b} (remote)"));
            }
        }
    };
    both(
        l.tos.map(|t| format!("{t:#04x} (DSCP {})", t >> 2)),
        re.tos.map(|t| format!("{t:#04x} (DSCP {})", t >> 2)),
        "TOS",
        &mut o,
    );
    both(
        l.priority.map(|p| p.to_string()),
        re.priority.map(|p| p.to_string()),
        "priority",
        &mut o,
    );
    both(
        l.congestion.clone(),
        re.congestion.clone(),
        "congestion control",
        &mut o,
    );
    both(
        l.max_pacing_rate_bps
            .map(|b| format!("{} 10^6bits/s", b as f64 / 1e6)),
        re.max_pacing_rate_bps
            .map(|b| format!("{} 10^6bits/s", b as f64 / 1e6)),
        "max pacing rate",
        &mut o,
    );
    if l.nodelay || re.nodelay {
        o.push("TCP_NODELAY".into());
    }
    if l.mptcp || re.mptcp {
        o.push("MPTCP".into());
    }
    if let Some(m) = l.mss {
        o.push(format!("MSS {m} (local)"));
    }
    if let Some(w) = r.config.workers {
        o.push(format!("{w} worker(s) per end"));
    }
    let list = |c: &[u32]| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if let Some(c) = &r.config.cpus {
        o.push(format!("local CPUs {}", list(c)));
    }
    if let Some(c) = &r.config.remote_cpus {
        o.push(format!("remote CPUs {}", list(c)));
    }
    o
}

/// A layout made of a kind's functions: its summary table, and the header
/// and rows of its interim reports.
#[derive(Debug)]
pub struct Layout {
    pub summary: fn(&TestResult) -> String,
    pub interval_header: fn() -> String,
    pub interval_rows: fn(&IntervalResult, bool) -> String,
}

impl TableLayout for Layout {
    fn render(&self, r: &TestResult) -> String {
        (self.summary)(r)
    }
    fn interval_header(&self) -> String {
        (self.interval_header)()
    }
    fn interval_rows(&self, i: &IntervalResult, per_flow: bool) -> String {
        (self.interval_rows)(i, per_flow)
    }
}

/// A utilisation's cell, or "-" where there is none.
pub fn pct_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// A service demand's cell, or "-" where there is none.
pub fn demand_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

/// Several flows: each direction's spread of per-flow throughput and its
/// fairness, and the fairness between directions.
pub fn spread_lines(out: &mut String, r: &TestResult) {
    for d in &r.summary.directions {
        let s = d.flow_throughput_bps;
        let _ = writeln!(
            out,
            "{} per-flow throughput (10^6bits/sec): min {}  median {}  max {}  over {} flows; {}",
            d.direction.name(),
            mbps(s.min),
            mbps(s.median),
            mbps(s.max),
            d.flows,
            fairness_cell(d.fairness, d.flows)
        );
    }
    if let Some(j) = r.summary.directions_fairness {
        let _ = writeln!(
            out,
            "between directions (tx, rx throughput): Jain's fairness index {j:.3} (1 = equal shares)"
        );
    }
}

/// One-way delay per direction, each with its clock's offset bound, or why
/// it is withheld.
pub fn one_way_lines(out: &mut String, o: &netrig_document::result::OneWayDelay) {
    if let Some(why) = &o.withheld {
        let _ = writeln!(out, "{why}");
        return;
    }
    let bound = o.clock_offset_bound_us.unwrap_or(0.0);
    for (name, f) in [("client -> agent", &o.tx), ("agent -> client", &o.rx)] {
        let Some(f) = f else { continue };
        match (&f.withheld, f.min_us, f.p50_us, f.p99_us, f.max_us) {
            (None, Some(min), Some(p50), Some(p99), Some(max)) => {
                let _ = writeln!(
                    out,
                    "one-way delay {name}: min {min:.1}  p50 {p50:.1}  p99 {p99:.1}  max {max:.1} us (of {} datagrams \
                     received in the window; clock offset +/- {bound:.1} us{}: {})",
                    f.datagrams,
                    match (o.clock_offset_us, o.clock_drift_us) {
                        (Some(off), Some(d)) => format!(", {off:.1} us measured and taken off, drift {d:.1} us"),
                        (Some(off), None) => format!(", {off:.1} us measured and taken off"),
                        _ => String::new(),
                    },
                    o.clock.as_deref().unwrap_or("one clock")
                );
            }
            (why, ..) => {
                let _ = writeln!(
                    out,
                    "one-way delay {name}: withheld: {}",
                    why.as_deref().unwrap_or("not measured")
                );
            }
        }
    }
}

fn same_host(r: &TestResult) -> bool {
    match (&r.environment.local, &r.environment.remote) {
        (Some(l), Some(rm)) => {
            r.config.embedded || (l.hostname == rm.hostname && l.kernel_version == rm.kernel_version)
        }
        _ => false,
    }
}

/// The profile section alone (`--profile`; empty without a profile), for a layout that does
/// not use [`details`] (http's).
pub fn profile(r: &TestResult) -> String {
    let mut out = String::new();
    super::profile::lines(&mut out, r.profile.as_ref());
    out
}

/// CPU split, worker threads, TCP_INFO, kernel counters and environment.
pub fn details(r: &TestResult) -> String {
    let mut out = String::new();
    cpu_lines(&mut out, r);
    super::profile::lines(&mut out, r.profile.as_ref());
    worker_lines(&mut out, r);
    tcp_info_lines(&mut out, r);
    counter_lines(&mut out, r);
    if !r.path_elements.is_empty() {
        let _ = writeln!(out, "\nThe lab's path elements over the test");
        for e in &r.path_elements {
            let _ = writeln!(out, "  {}", e.line());
        }
    }
    out.push_str(&witness_lines(r, "over the same window"));
    environment_lines(&mut out, r);
    out
}

/// Each end's CPU utilisation, split, and service demand per packet.
fn cpu_lines(out: &mut String, r: &TestResult) {
    let cpu = &r.summary.cpu;
    if cpu.local.is_none() && cpu.remote.is_none() {
        return;
    }
    let _ = writeln!(
        out,
        "\nCPU utilization, % of the whole machine over the measured window (/proc/stat)"
    );
    let _ = writeln!(
        out,
        "  {:<7} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>5}  busiest CPU",
        "", "busy", "user", "system", "irq", "softirq", "steal", "CPUs"
    );
    let same = same_host(r);
    for (end, u) in [("local", &cpu.local), ("remote", &cpu.remote)] {
        let Some(u) = u else { continue };
        let busiest = u
            .busiest_cpu
            .map_or_else(|| "-".into(), |c| format!("cpu{c} {:.1}%", u.busiest_cpu_pct));
        let _ = writeln!(
            out,
            "  {end:<7} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>8.2} {:>6.2} {:>5}  {busiest}{}",
            u.busy_pct,
            u.user_pct + u.nice_pct,
            u.system_pct,
            u.irq_pct,
            u.softirq_pct,
            u.steal_pct,
            u.cpus,
            if end == "remote" && same {
                "  (same host as local)"
            } else {
                ""
            }
        );
    }
    let sd = &r.summary.service_demand;
    if let (Some(mss), true) = (
        sd.mss,
        sd.local_per_packet_us.is_some() || sd.remote_per_packet_us.is_some(),
    ) {
        let v = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.3}"));
        let _ = writeln!(
            out,
            "  service demand per packet (estimate at MSS {mss}): local {} us, remote {} us",
            v(sd.local_per_packet_us),
            v(sd.remote_per_packet_us)
        );
    }
}

/// Each end's netrig worker threads: their CPU, flows and pinning.
fn worker_lines(out: &mut String, r: &TestResult) {
    for (end, ws) in [("local", &r.workers.local), ("remote", &r.workers.remote)] {
        if ws.is_empty() {
            continue;
        }
        let cells: Vec<String> = ws
            .iter()
            .map(|w| {
                format!(
                    "worker {} {:.1}% of a CPU ({} flow{}{})",
                    w.worker,
                    w.busy_pct,
                    w.flows,
                    if w.flows == 1 { "" } else { "s" },
                    w.cpu.map_or_else(String::new, |c| format!(", pinned to cpu{c}"))
                )
            })
            .collect();
        let _ = writeln!(out, "  netrig {end}: {}", cells.join(", "));
    }
}

/// The first 16 flows' senders' TCP_INFO when their windows closed.
fn tcp_info_lines(out: &mut String, r: &TestResult) {
    let with_info: Vec<&FlowResult> = r.flows.iter().filter(|f| f.tcp_info.is_some()).take(16).collect();
    if with_info.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nTCP_INFO of each flow's sender when its window closed");
    let _ = writeln!(
        out,
        "  {:>4} {:<3} {:<8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>6} {:>6} {:>6} {:>14}",
        "flow",
        "dir",
        "cc",
        "rtt us",
        "rttvar",
        "cwnd",
        "ssthresh",
        "retrans",
        "reord",
        "pmtu",
        "mss",
        "delivery Mb/s"
    );
    for f in with_info {
        let t = f.tcp_info.as_ref().expect("filtered");
        let ssthresh = if t.snd_ssthresh >= netrig_metrics::tcp_info::TCP_INFINITE_SSTHRESH {
            "inf".to_string()
        } else {
            t.snd_ssthresh.to_string()
        };
        let _ = writeln!(
            out,
            "  {:>4} {:<3} {:<8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>6} {:>6} {:>6} {:>14}",
            f.id,
            f.direction.name(),
            t.congestion_control.as_deref().unwrap_or("-"),
            t.rtt_us,
            t.rttvar_us,
            t.snd_cwnd,
            ssthresh,
            t.retransmits_total,
            t.reordering,
            t.pmtu,
            t.snd_mss,
            delivery_cell(t)
        );
    }
    if r.flows
        .iter()
        .filter_map(|f| f.tcp_info.as_ref())
        .any(|t| t.delivery_rate_app_limited == Some(true))
    {
        let _ = writeln!(
            out,
            "  delivery: the kernel's rate over its last delivery interval; \"app-limited\": the sender had no \
             data waiting then, so that rate measures the application, not the path (the figure is in --json)"
        );
    }
    if r.flows.len() > 16 {
        let _ = writeln!(out, "  ({} more flows in the JSON output)", r.flows.len() - 16);
    }
}

/// Each end's headline kernel counters that changed, and its conntrack table.
fn counter_lines(out: &mut String, r: &TestResult) {
    let mut lines = Vec::new();
    for (end, c) in [("local", &r.counters.local), ("remote", &r.counters.remote)] {
        let Some(c) = c else { continue };
        let changed: Vec<String> = netrig_metrics::counters::HEADLINE
            .iter()
            .filter_map(|k| {
                c.deltas
                    .get(*k)
                    .filter(|v| **v != 0)
                    .map(|v| format!("{k} {v:+}"))
            })
            .collect();
        let ct = c.conntrack.map_or_else(String::new, |ct| {
            format!("; conntrack {} of {}", ct.count, ct.max)
        });
        lines.push(format!(
            "  {end:<7} {}{ct}",
            if changed.is_empty() {
                "no headline counter changed".to_string()
            } else {
                changed.join(", ")
            }
        ));
    }
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "\nKernel counters over the test (/proc/net/snmp, /proc/net/netstat; all changes in --json)"
        );
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
}

/// Each end's machine: kernel, CPUs and the sysctls that bound a test.
fn environment_lines(out: &mut String, r: &TestResult) {
    let env_line = |e: &netrig_document::result::measure::Environment| {
        let s = |k: &str| e.sysctls.get(k).cloned().unwrap_or_else(|| "?".into());
        format!(
            "{} Linux {} {}, {} x {}; rmem_max {} wmem_max {} tcp_rmem [{}] tcp_wmem [{}] cc {} somaxconn {}",
            e.hostname,
            e.kernel,
            e.arch,
            e.cpus_online,
            e.cpu_model.as_deref().unwrap_or("?"),
            s("net.core.rmem_max"),
            s("net.core.wmem_max"),
            s("net.ipv4.tcp_rmem"),
            s("net.ipv4.tcp_wmem"),
            s("net.ipv4.tcp_congestion_control"),
            s("net.core.somaxconn")
        )
    };
    if let Some(e) = &r.environment.local {
        let _ = writeln!(out, "\nlocal:  {}", env_line(e));
    }
    if let Some(e) = &r.environment.remote {
        if same_host(r) {
            let _ = writeln!(out, "remote: same host");
        } else {
            let _ = writeln!(out, "remote: {}", env_line(e));
        }
    }
}

/// Jain's fairness index over a direction's flows, or why there is none.
pub fn fairness_cell(j: Option<f64>, flows: u32) -> String {
    match j {
        Some(j) => format!("Jain's fairness index {j:.3} (1 = equal shares)"),
        None if flows < 2 => "fairness: one flow".into(),
        None => "fairness: - (no flow received anything)".into(),
    }
}

/// TCP_INFO's delivery rate in 10^6 bits/s, or why it is withheld: a rate
/// the kernel flagged app-limited measured what the application offered,
/// and would read as a plausible (and wrong) link rate.
fn delivery_cell(t: &netrig_document::result::measure::TcpInfo) -> String {
    match (t.delivery_rate_bps, t.delivery_rate_app_limited) {
        (None, _) => "-".into(),
        (Some(_), Some(true)) => "app-limited".into(),
        (Some(b), _) => format!("{:.2}", b as f64 / 1e6),
    }
}

/// The interval rows' first columns' heads: the span and the flow.
pub fn interval_lead() -> String {
    format!("{:<16} {:<6}", "Interval (s)", "Flow")
}

/// An interval's span, "0.50-1.00", as its rows begin.
pub fn interval_span(i: &IntervalResult) -> String {
    format!("{:.2}-{:.2}", i.start_s, i.end_s)
}

/// A stream's rows for one interim report: a row per flow (its id and
/// direction) when `per_flow`, then a sum per direction that moved data;
/// after each row's bytes and rate, the kind's cells: `flow_cells` of a
/// flow, `sum_cells` of a direction's sum.
pub fn stream_interval_rows(
    i: &IntervalResult,
    per_flow: bool,
    flow_cells: fn(&IntervalFlow) -> String,
    sum_cells: fn(&IntervalResult, Direction) -> String,
) -> String {
    let mut out = String::new();
    let span = interval_span(i);
    let mut row = |name: String, bytes: u64, bps: f64, rest: String| {
        let _ = writeln!(out, "{span:<16} {name:<6} {bytes:>14} {:>14} {rest}", mbps(bps));
    };
    if per_flow {
        for f in &i.flows {
            let name = format!(
                "{}{}",
                f.id,
                if f.direction == Direction::Tx { "tx" } else { "rx" }
            );
            row(name, f.bytes, f.throughput_bps, flow_cells(f));
        }
    }
    for (d, v) in [
        (Direction::Tx, i.tx_throughput_bps),
        (Direction::Rx, i.rx_throughput_bps),
    ] {
        if let Some(bps) = v {
            let bytes: u64 = i.flows.iter().filter(|f| f.direction == d).map(|f| f.bytes).sum();
            row(format!("sum{}", d.name()), bytes, bps, sum_cells(i, d));
        }
    }
    out
}

/// A summary table of several results (the quick suite).
pub fn render_suite(results: &[TestResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<11} {:>5} {:>14} {:>14} {:>14} {:>10} {:>9} {:>7} {:>7}",
        "Test",
        "Flows",
        "tx 10^6bits/s",
        "rx 10^6bits/s",
        "sum 10^6bits/s",
        "Trans/s",
        "p99 us",
        "loss %",
        "CPU %"
    );
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), mbps);
    let num = |v: Option<f64>, prec: usize| v.map_or_else(|| "-".to_string(), |x| format!("{x:.prec$}"));
    for r in results {
        let s = &r.summary;
        let streamlike = s.transactions_per_s.is_none();
        let _ = writeln!(
            out,
            "{:<11} {:>5} {:>14} {:>14} {:>14} {:>10} {:>9} {:>7} {:>7}",
            r.test,
            r.config.flows,
            cell(s.tx_throughput_bps.filter(|_| streamlike)),
            cell(s.rx_throughput_bps.filter(|_| streamlike)),
            if streamlike {
                mbps(s.throughput_bps)
            } else {
                "-".into()
            },
            num(s.transactions_per_s, 0),
            num(s.latency_us.as_ref().map(|l| l.p99), 1),
            num(s.udp.as_ref().map(|u| u.loss_pct), 3),
            num(s.cpu.local_pct, 1)
        );
    }
    out
}

/// The witness: each figure beside the kernel's count of it (`span`: what
/// the counts are over, "over the same window"), and the checks withheld.
pub fn witness_lines(r: &TestResult, span: &str) -> String {
    let mut out = String::new();
    let w = &r.witness;
    if w.checks.is_empty() && w.withheld.is_empty() {
        return out;
    }
    let secs = w.local.as_ref().map_or(0.0, |l| l.window_s);
    let _ = writeln!(
        out,
        "\nWitness: the kernel's own counts {span} ({secs:.2} s){}",
        if w.shared_counters {
            "; both ends read this host's counters"
        } else {
            ""
        }
    );
    for c in &w.checks {
        let rel = if c.relation == "equal" { "=" } else { "<=" };
        let other = c
            .other
            .filter(|o| *o > 0)
            .map_or_else(String::new, |o| format!(", {o} beyond netrig's traffic"));
        let _ = writeln!(
            out,
            "  {:<7} {:<22} {:>15} {rel} {:>15} {} ({}){other}; ratio {}  {}",
            c.end,
            c.figure,
            c.netrig,
            c.kernel,
            c.kernel_unit,
            c.kernel_source,
            c.ratio.map_or_else(|| "-".into(), |r| format!("{r:.4}")),
            c.verdict
        );
    }
    for why in &w.withheld {
        let _ = writeln!(out, "  withheld: {why}");
    }
    out
}

/// A layout of the kit's parts alone: the title, the flows' spread and the
/// details (netrig-report's tests lay results out with it; the kinds'
/// layouts are theirs, in their folders).
pub static BARE: Layout = Layout {
    summary: |r| {
        let mut out = format!("{}\n", title(r));
        spread_lines(&mut out, r);
        out.push_str(&details(r));
        out
    },
    interval_header: interval_lead,
    interval_rows: |i, per_flow| stream_interval_rows(i, per_flow, |_| String::new(), |_, _| String::new()),
};
