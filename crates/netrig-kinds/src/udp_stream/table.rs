//! udp-stream's table, after netperf's UDP_STREAM and iperf3's receiver:
//! the sender's and the receiver's rows, the datagrams' accounting, jitter
//! and one-way delay; interim rows with jitter and loss.

use super::UdpStreamConfig;
use netrig_proto::Direction;
use netrig_report::table::{
    details, interval_lead, mbps, one_way_lines, opt, remote_end, stream_interval_rows, title, Layout,
};
use netrig_report::{IntervalFlow, IntervalResult, IntervalUdp, Spread, TestResult};
use std::fmt::Write;

/// UDP streams: loss, jitter, reordering, as iperf3's receiver.
pub static UDP_STREAM: Layout = Layout {
    summary: render_udp,
    interval_header,
    interval_rows,
};

/// UDP stream results, after netperf's UDP_STREAM table: the sender's row,
/// then the receiver's.
fn render_udp(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    let c: UdpStreamConfig = r.config.kind_part().unwrap_or_default();
    let rate = c.udp_rate_bps.map_or_else(
        || "as fast as possible".to_string(),
        |b| format!("{} 10^6bits/s per flow", b as f64 / 1e6),
    );
    let _ = writeln!(out, "offered: {rate}, {} byte datagrams", r.config.message_size);
    let _ = writeln!(
        out,
        "Socket  Message  Elapsed      Messages                   Throughput"
    );
    let _ = writeln!(
        out,
        "Size    Size     Time         Okay         Errors        10^6bits/sec"
    );
    let _ = writeln!(out, "bytes   bytes    secs            #            #");
    let _ = writeln!(out);
    let u = r.summary.udp.clone().unwrap_or_default();
    for d in &r.summary.directions {
        let (snd, rcv) = match d.direction {
            Direction::Tx => (&r.summary.socket_buffers.local, &r.summary.socket_buffers.remote),
            Direction::Rx => (&r.summary.socket_buffers.remote, &r.summary.socket_buffers.local),
        };
        let _ = writeln!(
            out,
            "{:<7} {:<8} {:<12.2} {:<12} {:<13} {}   (sender, {})",
            opt(snd.final_.snd),
            r.config.message_size,
            d.sender_elapsed_s,
            opt(u.window_sent_datagrams.map(|n| n.min(u32::MAX as u64) as u32)),
            0,
            mbps(d.sender_throughput_bps),
            if d.direction == Direction::Tx {
                "client".to_string()
            } else {
                remote_end(r)
            }
        );
        let _ = writeln!(
            out,
            "{:<7} {:<8} {:<12.2} {:<12} {:<13} {}   (receiver, {})",
            opt(rcv.final_.rcv),
            "",
            d.elapsed_s,
            d.bytes / r.config.message_size.max(1) as u64,
            "",
            mbps(d.throughput_bps),
            if d.direction == Direction::Tx {
                remote_end(r)
            } else {
                "client".to_string()
            }
        );
    }
    let _ = writeln!(
        out,
        "\ndatagrams over the test: sent {}  received {}  lost {} ({:.3}%)  out of order {}  duplicates {}  stray {}",
        u.sent_datagrams, u.received_datagrams, u.lost_datagrams, u.loss_pct, u.out_of_order, u.duplicates, u.stray
    );
    match (u.jitter_us, &u.jitter_withheld) {
        (Some(j), _) => {
            let _ = writeln!(
                out,
                "jitter over the window: {j:.1} us (mean |D| of {} pairs of successive timed datagrams, of {} received; RFC \
                 3550's J at the close {:.1} us)",
                u.jitter_pairs,
                u.received_datagrams,
                u.jitter_rfc3550_us.unwrap_or(0.0)
            );
        }
        // An iperf3 server's report: RFC 3550's J alone.
        (None, why) if r.peer.is_some() && u.jitter_rfc3550_us.is_some() => {
            let _ = writeln!(
                out,
                "jitter: RFC 3550's J {:.1} us {} (mean |D| {})",
                u.jitter_rfc3550_us.unwrap_or_default(),
                netrig_report::table::REPORTED,
                why.as_deref().unwrap_or("not measured")
            );
        }
        (None, why) => {
            let _ = writeln!(out, "jitter: {}", why.as_deref().unwrap_or("not measured"));
        }
    }
    if let Some(o) = &r.summary.one_way_delay {
        one_way_lines(&mut out, o);
    }
    if r.flows.len() > 1 {
        let loss: Vec<f64> = r
            .flows
            .iter()
            .filter_map(|f| f.udp.as_ref().map(|u| u.loss_pct))
            .collect();
        let s = Spread::of(&loss);
        let tput: Vec<f64> = r.flows.iter().map(|f| f.throughput_bps).collect();
        let t = Spread::of(&tput);
        let _ = writeln!(
            out,
            "per flow: throughput (10^6bits/sec) min {} median {} max {}; loss % min {:.3} median {:.3} max {:.3}; over {} flows",
            mbps(t.min), mbps(t.median), mbps(t.max), s.min, s.median, s.max, r.flows.len()
        );
    }
    out.push_str(&details(r));
    out
}

/// Interim rows' heads: bytes, rate, jitter, lost/total, as iperf3's receiver.
fn interval_header() -> String {
    format!(
        "{} {:>14} {:>14} {:>11} {:>19} {:>8} {:>6}",
        interval_lead(),
        "Bytes",
        "10^6bits/sec",
        "Jitter us",
        "Lost/Total",
        "Loss %",
        "OoO"
    )
}

fn interval_rows(i: &IntervalResult, per_flow: bool) -> String {
    stream_interval_rows(
        i,
        per_flow,
        |f: &IntervalFlow| udp_cells(f.udp.as_ref()),
        |i, _| {
            // One direction at a time for UDP: the interval's total is its sum.
            udp_cells(i.udp.as_ref())
        },
    )
}

/// A receiver's accounting over the interval.
fn udp_cells(u: Option<&IntervalUdp>) -> String {
    match u {
        Some(u) => format!(
            "{:>11} {:>19} {:>8.3} {:>6}",
            u.jitter_us.map_or_else(|| "-".to_string(), |j| format!("{j:.1}")),
            format!("{}/{}", u.lost_datagrams, u.lost_datagrams + u.received_datagrams),
            u.loss_pct,
            u.out_of_order
        ),
        None => format!("{:>11} {:>19} {:>8} {:>6}", "-", "-", "-", "-"),
    }
}
