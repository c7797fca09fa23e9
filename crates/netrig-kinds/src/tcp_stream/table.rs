//! The TCP streams' table (tcp-stream, tcp-maerts, tcp-bidir), after
//! netperf's TCP_STREAM: throughput, the senders' and receivers' calls, what
//! limited the senders; interim rows with retransmissions and cwnd, as
//! iperf3's.

use super::StreamConfig;
use netrig_proto::report::BufPair;
use netrig_proto::Direction;
use netrig_report::table::{
    demand_cell, details, interval_lead, mbps, opt, pct_cell, spread_lines, stream_interval_rows, title,
    Layout,
};
use netrig_report::{FlowEnd, FlowResult, IntervalFlow, IntervalResult, TestResult};
use std::fmt::Write;

/// (receiving end, sending end) of a flow.
fn ends(f: &FlowResult) -> (&FlowEnd, &FlowEnd) {
    match f.direction {
        Direction::Tx => (&f.remote, &f.local),
        Direction::Rx => (&f.local, &f.remote),
    }
}

/// TCP streams: throughput, retransmissions, cwnd, after netperf's TCP_STREAM.
pub static TCP_STREAM: Layout = Layout {
    summary: render_stream,
    interval_header,
    interval_rows,
};

/// A byte count as the options say it: whole KiB as KiB.
fn kib_or_bytes(v: u32) -> String {
    if v.is_multiple_of(1024) {
        format!("{} KiB", v >> 10)
    } else {
        format!("{v} bytes")
    }
}

/// The stream senders' sends: calls, bytes per call, and the unsent bytes
/// the kernel let them keep (TCP_NOTSENT_LOWAT).
fn senders_line(out: &mut String, r: &TestResult, c: &StreamConfig) {
    let (mut calls, mut bytes, mut unlimited) = (0u64, 0u64, 0u64);
    let (mut low, mut high) = (u32::MAX, 0u32);
    for e in r.flows.iter().flat_map(|f| [&f.local, &f.remote]) {
        // Counts from the peer: summed without overflow, whatever it sent.
        if let Some(sd) = &e.sends {
            calls = calls.saturating_add(sd.calls);
            bytes = bytes.saturating_add(e.total_bytes);
            match sd.notsent_lowat {
                Some(v) => (low, high) = (low.min(v), high.max(v)),
                None => unlimited += 1,
            }
        }
    }
    if calls == 0 {
        return;
    }
    let kept = match (high, unlimited) {
        (0, _) if c.notsent_lowat == Some(0) => {
            "; unsent bytes bounded by the send buffer only (--notsent-lowat off)".to_string()
        }
        (0, _) => "; unsent bytes bounded by the send buffer only".to_string(),
        (h, 0) if h == low => format!(
            "; writes taken while under {} was unsent (TCP_NOTSENT_LOWAT)",
            kib_or_bytes(h)
        ),
        (h, 0) => format!(
            "; writes taken while under {} to {} was unsent (TCP_NOTSENT_LOWAT)",
            kib_or_bytes(low),
            kib_or_bytes(h)
        ),
        (h, n) => format!(
            "; writes taken while under {} was unsent (TCP_NOTSENT_LOWAT) by some, \
             bounded by the send buffer only by {n}",
            kib_or_bytes(h)
        ),
    };
    // Calls the full socket refused (EAGAIN) are among them: bytes per call, not per send.
    let _ = writeln!(
        out,
        "senders: {calls} send calls, {:.1} KiB per call{kept}",
        bytes as f64 / calls as f64 / 1024.0
    );
}

/// What held the senders back, by direction, from each sender's TCP_INFO
/// at the window's close (over each connection's life to then): the time
/// they had data outstanding, and the shares of it the peer's receive
/// window and their own send buffer limited them. Withheld where the kernel
/// gives no such times (before 4.10).
fn limits_line(out: &mut String, r: &TestResult) {
    for dir in [Direction::Tx, Direction::Rx] {
        let (mut flows, mut busy, mut rwnd, mut sndbuf) = (0u32, 0u64, 0u64, 0u64);
        for f in r.flows.iter().filter(|f| f.direction == dir) {
            let Some(t) = &f.tcp_info else { continue };
            let (Some(b), Some(w), Some(s)) = (t.busy_us, t.rwnd_limited_us, t.sndbuf_limited_us) else {
                continue;
            };
            // Times from the peer: summed without overflow, whatever it sent.
            flows += 1;
            busy = busy.saturating_add(b);
            rwnd = rwnd.saturating_add(w);
            sndbuf = sndbuf.saturating_add(s);
        }
        if busy == 0 {
            continue;
        }
        let pct = |v: u64| (v as f64 / busy as f64 * 100.0).min(100.0);
        let _ = writeln!(
            out,
            "{} sender{} busy {:.2} s: limited by the receive window {:.1} %, by the send buffer {:.1} % \
             (TCP_INFO busy, rwnd_limited, sndbuf_limited)",
            dir.name(),
            if flows == 1 { "" } else { "s" },
            busy as f64 / 1e6,
            pct(rwnd),
            pct(sndbuf)
        );
    }
}

/// The stream receivers' reads: calls, bytes per call, and the watermark
/// (SO_RCVLOWAT) they used while they were ahead of their flow.
fn receivers_line(out: &mut String, r: &TestResult, c: &StreamConfig) {
    let (mut calls, mut bytes, mut on, mut off, mut mark) = (0u64, 0u64, 0u64, 0u64, None);
    for e in r.flows.iter().flat_map(|f| [&f.local, &f.remote]) {
        // Counts from the peer: summed without overflow, whatever it sent.
        if let Some(rd) = &e.reads {
            calls = calls.saturating_add(rd.calls);
            bytes = bytes.saturating_add(e.total_bytes);
            on = on.saturating_add(rd.watermark_on);
            off = off.saturating_add(rd.watermark_off);
            mark = mark.or(rd.watermark);
        }
    }
    if calls == 0 {
        return;
    }
    let how = match mark {
        Some(m) if on > 0 => format!(
            "; SO_RCVLOWAT {} while a receiver was ahead of its flow (on {on}, off {off} times)",
            kib_or_bytes(m)
        ),
        Some(_) => "; no SO_RCVLOWAT (no receiver's wake-ups found it ahead of its flow)".to_string(),
        None if c.no_rcvlowat => "; no SO_RCVLOWAT (--no-rcvlowat): woken for every arrival".to_string(),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "receivers: {calls} reads, {:.1} KiB per read{how}",
        bytes as f64 / calls as f64 / 1024.0
    );
}

/// The mark of a count the remote end made when it is an iperf3 server's report.
fn reported_by(r: &TestResult, remote: bool) -> String {
    match (&r.peer, remote) {
        (Some(_), true) => format!(" {}", netrig_report::table::REPORTED),
        _ => String::new(),
    }
}

/// TCP streams, after netperf's TCP_STREAM table.
fn render_stream(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    let c: StreamConfig = r.config.kind_part().unwrap_or_default();
    stream_options(&mut out, r, &c);
    senders_line(&mut out, r, &c);
    limits_line(&mut out, r);
    receivers_line(&mut out, r, &c);
    let table = StreamTable::of(r);
    table.header(&mut out, &r.summary.service_demand.unit);
    if !table.multi || r.flows.len() <= 64 {
        table.flow_rows(&mut out, r);
    }
    if table.multi {
        table.sum_rows(&mut out, r);
        let _ = writeln!(out);
        spread_lines(&mut out, r);
    }
    let _ = writeln!(out);
    for d in &r.summary.directions {
        let _ = writeln!(
            out,
            "{}: sender sent {} bytes in {:.2} s ({} 10^6bits/sec){}; receiver got {} bytes in {:.2} s{}",
            d.direction.name(),
            d.sender_bytes,
            d.sender_elapsed_s,
            mbps(d.sender_throughput_bps),
            reported_by(r, d.direction == Direction::Rx),
            d.bytes,
            d.elapsed_s,
            reported_by(r, d.direction == Direction::Tx),
        );
    }
    socket_buffer_lines(&mut out, r);
    out.push_str(&details(r));
    out
}

/// How the streams were sent and received, where an option changed it:
/// a rate (-b), sendfile (-Z), MSG_ZEROCOPY, MSG_TRUNC.
fn stream_options(out: &mut String, r: &TestResult, c: &StreamConfig) {
    if let Some(b) = c.pace.rate_bps {
        let _ = writeln!(
            out,
            "offered: {} 10^6bits/s per flow (-b), paced by the sender every {} us at most",
            b as f64 / 1e6,
            c.pace.pacing_us.unwrap_or_default()
        );
    }
    if c.zerocopy {
        let _ = writeln!(out, "sender: sendfile(2) from memory (-Z)");
    }
    if c.msg_zerocopy {
        let (mut sends, mut completed, mut copied) = (0, 0, 0);
        for e in r.flows.iter().flat_map(|f| [&f.local, &f.remote]) {
            if let Some(z) = &e.zerocopy {
                sends += z.sends;
                completed += z.completed;
                copied += z.copied;
            }
        }
        let _ = writeln!(
            out,
            "sender: MSG_ZEROCOPY (--msg-zerocopy): {sends} sends, {completed} completions notified, of which the \
             kernel copied {copied}{}",
            if completed > 0 && copied == completed {
                " (all: no send went without a copy; loopback and local delivery always copy)"
            } else {
                ""
            }
        );
    }
    if c.skip_rx_copy {
        let _ = writeln!(
            out,
            "receiver: discarded what it read without copying it to user memory (MSG_TRUNC, --skip-rx-copy); \
             its CPU and throughput leave out the receive copy"
        );
    }
}

/// The stream table's rows: with several flows each begins with its flow
/// and direction; the CPU's cells end the one row that stands for the test.
struct StreamTable {
    multi: bool,
    cpu_cells: String,
}

impl StreamTable {
    fn of(r: &TestResult) -> StreamTable {
        let cpu = &r.summary.cpu;
        let sd = &r.summary.service_demand;
        StreamTable {
            multi: r.flows.len() > 1,
            cpu_cells: format!(
                "  {:<8} {:<8} {:<8} {:<8}",
                pct_cell(cpu.local_pct),
                pct_cell(cpu.remote_pct),
                demand_cell(sd.local),
                demand_cell(sd.remote)
            ),
        }
    }

    fn lead(&self, a: &str, b: &str) -> String {
        if self.multi {
            format!("{a:>5} {b:<3} ")
        } else {
            String::new()
        }
    }

    /// The column heads, service demand in `unit`.
    fn header(&self, out: &mut String, unit: &str) {
        let _ = writeln!(
            out,
            "{}Recv     Send     Send                                Utilization       Service Demand",
            self.lead("", "")
        );
        let _ = writeln!(
            out,
            "{}Socket   Socket   Message  Elapsed                    local    remote   local    remote",
            self.lead("", "")
        );
        let _ = writeln!(
            out,
            "{}Size     Size     Size     Time     Throughput        %        %        {:<8} {}",
            self.lead("", ""),
            unit,
            unit
        );
        let _ = writeln!(
            out,
            "{}bytes    bytes    bytes    secs.    10^6bits/sec",
            self.lead("Flow", "Dir")
        );
        let _ = writeln!(out);
    }

    /// A row per flow; with one flow, the test's row.
    fn flow_rows(&self, out: &mut String, r: &TestResult) {
        for f in &r.flows {
            let (rx, tx) = ends(f);
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {:<16}{}",
                self.lead(&f.id.to_string(), f.direction.name()),
                // The size when the window closed (netperf's *_SIZE_END): with -s/-S the size
                // granted, which stays; without, where autotuning took it. The experiment's
                // table shows the same.
                opt(rx.socket_buffers.final_.rcv),
                opt(tx.socket_buffers.final_.snd),
                r.config.message_size,
                f.elapsed_s,
                mbps(f.throughput_bps),
                if self.multi { "" } else { self.cpu_cells.as_str() }
            );
        }
    }

    /// Several flows: a sum per direction, and of both where there are two;
    /// the last sum carries the CPU's cells.
    fn sum_rows(&self, out: &mut String, r: &TestResult) {
        let ndir = r.summary.directions.len();
        for (i, d) in r.summary.directions.iter().enumerate() {
            let last = ndir == 1 && i == 0;
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {:<16}{}",
                self.lead("sum", d.direction.name()),
                "",
                "",
                "",
                d.elapsed_s,
                mbps(d.throughput_bps),
                if last { self.cpu_cells.as_str() } else { "" }
            );
        }
        if ndir > 1 {
            let _ = writeln!(
                out,
                "{}{:<8} {:<8} {:<8} {:<8.2} {:<16}{}",
                self.lead("sum", "all"),
                "",
                "",
                "",
                r.summary.elapsed_s,
                mbps(r.summary.throughput_bps),
                self.cpu_cells
            );
        }
    }
}

/// Each end's socket buffers, as requested, at the start and at the end.
fn socket_buffer_lines(out: &mut String, r: &TestResult) {
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
}

/// Interim rows' heads: bytes, rate, retransmissions (and cwnd per flow), as iperf3.
fn interval_header() -> String {
    format!(
        "{} {:>14} {:>14} {:>8} {:>10}",
        interval_lead(),
        "Bytes",
        "10^6bits/sec",
        "Retr",
        "Cwnd KB"
    )
}

fn interval_rows(i: &IntervalResult, per_flow: bool) -> String {
    stream_interval_rows(i, per_flow, flow_cells, sum_cells)
}

/// A flow's retransmissions in the interval, and its cwnd at its end.
fn flow_cells(f: &IntervalFlow) -> String {
    let cwnd = f
        .tcp_info
        .as_ref()
        .map(|t| (u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).div_ceil(1024));
    format!("{:>8} {:>10}", opt(f.retransmits), opt(cwnd))
}

/// A direction's retransmissions in the interval, over its flows that counted them.
fn sum_cells(i: &IntervalResult, d: Direction) -> String {
    let r: Vec<u64> = i
        .flows
        .iter()
        .filter(|f| f.direction == d)
        .filter_map(|f| f.retransmits)
        .collect();
    let retr = (!r.is_empty()).then(|| r.iter().sum::<u64>());
    format!("{:>8} {:>10}", opt(retr), "")
}
