//! The human table, after netperf's classic TCP_STREAM output.

use crate::model::*;
use netrig_proto::report::BufPair;
use netrig_proto::Direction;
use std::fmt::Write;

fn mbps(bps: f64) -> String {
    format!("{:.2}", bps / 1e6)
}

fn opt(v: Option<u32>) -> String {
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
    format!(
        "{} TEST to {target}: {flows} flow{} per direction, {limit}{}",
        r.test.to_uppercase().replace('-', " "),
        if flows == 1 { "" } else { "s" },
        if r.config.omit_s > 0.0 {
            format!(", first {} s omitted", r.config.omit_s)
        } else {
            String::new()
        }
    )
}

/// (receiving end, sending end) of a flow.
fn ends(f: &FlowResult) -> (&FlowEnd, &FlowEnd) {
    match f.direction {
        Direction::Tx => (&f.remote, &f.local),
        Direction::Rx => (&f.local, &f.remote),
    }
}

/// The result table (without interval rows, which are printed as they come).
pub fn render(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    let multi = r.flows.len() > 1;
    let lead = |a: &str, b: &str| {
        if multi {
            format!("{a:>5} {b:<3} ")
        } else {
            String::new()
        }
    };
    let _ = writeln!(out, "{}Recv     Send     Send", lead("", ""));
    let _ = writeln!(out, "{}Socket   Socket   Message  Elapsed", lead("", ""));
    let _ = writeln!(
        out,
        "{}Size     Size     Size     Time     Throughput",
        lead("", "")
    );
    let _ = writeln!(
        out,
        "{}bytes    bytes    bytes    secs.    10^6bits/sec",
        lead("Flow", "Dir")
    );
    let _ = writeln!(out);
    let show_flows = !multi || r.flows.len() <= 64;
    if show_flows {
        for f in &r.flows {
            let (rx, tx) = ends(f);
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {}",
                lead(&f.id.to_string(), f.direction.name()),
                opt(rx.socket_buffers.initial.rcv),
                opt(tx.socket_buffers.initial.snd),
                r.config.message_size,
                f.elapsed_s,
                mbps(f.throughput_bps)
            );
        }
    }
    if multi {
        for d in &r.summary.directions {
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {}",
                lead("sum", d.direction.name()),
                "",
                "",
                "",
                d.elapsed_s,
                mbps(d.throughput_bps)
            );
        }
        if r.summary.directions.len() > 1 {
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {}",
                lead("sum", "all"),
                "",
                "",
                "",
                r.summary.elapsed_s,
                mbps(r.summary.throughput_bps)
            );
        }
        let _ = writeln!(out);
        for d in &r.summary.directions {
            let s = d.flow_throughput_bps;
            let _ = writeln!(
                out,
                "{} per-flow throughput (10^6bits/sec): min {}  median {}  max {}  over {} flows",
                d.direction.name(),
                mbps(s.min),
                mbps(s.median),
                mbps(s.max),
                d.flows
            );
        }
    }
    let _ = writeln!(out);
    for d in &r.summary.directions {
        let _ = writeln!(
            out,
            "{}: sender sent {} bytes in {:.2} s ({} 10^6bits/sec); receiver got {} bytes in {:.2} s",
            d.direction.name(),
            d.sender_bytes,
            d.sender_elapsed_s,
            mbps(d.sender_throughput_bps),
            d.bytes,
            d.elapsed_s
        );
    }
    let b = &r.summary.socket_buffers;
    let _ = writeln!(out, "socket buffers (bytes)   requested    initial      final");
    let mut line =
        |name: &str, pick: fn(&BufPair) -> Option<u32>, s: &netrig_proto::report::SockBufReport| {
            let _ = writeln!(
                out,
                "  {name:<22} {:<12} {:<12} {}",
                opt(pick(&s.requested)),
                opt(pick(&s.initial)),
                opt(pick(&s.final_))
            );
        };
    line("local  SO_SNDBUF", |p| p.snd, &b.local);
    line("local  SO_RCVBUF", |p| p.rcv, &b.local);
    line("remote SO_SNDBUF", |p| p.snd, &b.remote);
    line("remote SO_RCVBUF", |p| p.rcv, &b.remote);
    out
}

/// Header for interval rows.
pub fn interval_header() -> String {
    format!(
        "{:<16} {:<5} {:>14} {:>14}",
        "Interval (s)", "Flow", "Bytes", "10^6bits/sec"
    )
}

/// Rows for one interim report: a row per flow when `per_flow`, then a sum per direction.
pub fn interval_rows(i: &IntervalResult, per_flow: bool) -> String {
    let mut out = String::new();
    let span = format!("{:.2}-{:.2}", i.start_s, i.end_s);
    if per_flow {
        for f in &i.flows {
            let _ = writeln!(
                out,
                "{span:<16} {:<5} {:>14} {:>14}",
                format!(
                    "{}{}",
                    f.id,
                    if f.direction == Direction::Tx { "tx" } else { "rx" }
                ),
                f.bytes,
                mbps(f.throughput_bps)
            );
        }
    }
    for (d, v) in [
        (Direction::Tx, i.tx_throughput_bps),
        (Direction::Rx, i.rx_throughput_bps),
    ] {
        if let Some(bps) = v {
            let bytes: u64 = i.flows.iter().filter(|f| f.direction == d).map(|f| f.bytes).sum();
            let _ = writeln!(
                out,
                "{span:<16} {:<5} {:>14} {:>14}",
                format!("sum{}", d.name()),
                bytes,
                mbps(bps)
            );
        }
    }
    out
}

/// A summary table of several results (the quick suite).
pub fn render_suite(results: &[TestResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>5} {:>16} {:>16} {:>16} {:>8}",
        "Test", "Flows", "tx 10^6bits/s", "rx 10^6bits/s", "sum 10^6bits/s", "Secs"
    );
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), mbps);
    for r in results {
        let _ = writeln!(
            out,
            "{:<12} {:>5} {:>16} {:>16} {:>16} {:>8.2}",
            r.test,
            r.config.flows,
            cell(r.summary.tx_throughput_bps),
            cell(r.summary.rx_throughput_bps),
            mbps(r.summary.throughput_bps),
            r.summary.elapsed_s
        );
    }
    out
}
