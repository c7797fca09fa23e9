//! The human table, after netperf's classic TCP_STREAM output.

use crate::kind::TableLayout;
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
    t
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

/// (receiving end, sending end) of a flow.
fn ends(f: &FlowResult) -> (&FlowEnd, &FlowEnd) {
    match f.direction {
        Direction::Tx => (&f.remote, &f.local),
        Direction::Rx => (&f.local, &f.remote),
    }
}

/// A layout of netrig's: the summary table and the interval columns a kind
/// picks ([`TCP_STREAM`], [`UDP_STREAM`], [`TRANSACTIONS`],
/// [`CONNECT_TRANSACTIONS`]).
#[derive(Debug)]
pub struct Layout {
    pub columns: IntervalColumns,
    pub summary: fn(&TestResult) -> String,
}

impl TableLayout for Layout {
    fn render(&self, r: &TestResult) -> String {
        (self.summary)(r)
    }
    fn interval_header(&self) -> String {
        interval_header(self.columns)
    }
    fn interval_rows(&self, i: &IntervalResult, per_flow: bool) -> String {
        interval_rows(self.columns, i, per_flow)
    }
}

/// TCP streams: throughput, retransmissions, cwnd, after netperf's TCP_STREAM.
pub static TCP_STREAM: Layout = Layout {
    columns: IntervalColumns::TcpStream,
    summary: render_stream,
};
/// UDP streams: loss, jitter, reordering, as iperf3's receiver.
pub static UDP_STREAM: Layout = Layout {
    columns: IntervalColumns::UdpStream,
    summary: render_udp,
};
/// Request/response: transactions/s and latency, after netperf's TCP_RR.
pub static TRANSACTIONS: Layout = Layout {
    columns: IntervalColumns::Transactions,
    summary: render_rr,
};
/// Request/response with a connection per transaction: failures too.
pub static CONNECT_TRANSACTIONS: Layout = Layout {
    columns: IntervalColumns::ConnectTransactions,
    summary: render_rr,
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
fn senders_line(out: &mut String, r: &TestResult) {
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
        (0, _) if r.config.notsent_lowat == Some(0) => {
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
fn receivers_line(out: &mut String, r: &TestResult) {
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
        None if r.config.no_rcvlowat => {
            "; no SO_RCVLOWAT (--no-rcvlowat): woken for every arrival".to_string()
        }
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "receivers: {calls} reads, {:.1} KiB per read{how}",
        bytes as f64 / calls as f64 / 1024.0
    );
}

/// TCP streams, after netperf's TCP_STREAM table.
fn render_stream(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    stream_options(&mut out, r);
    senders_line(&mut out, r);
    limits_line(&mut out, r);
    receivers_line(&mut out, r);
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
            "{}: sender sent {} bytes in {:.2} s ({} 10^6bits/sec); receiver got {} bytes in {:.2} s",
            d.direction.name(),
            d.sender_bytes,
            d.sender_elapsed_s,
            mbps(d.sender_throughput_bps),
            d.bytes,
            d.elapsed_s
        );
    }
    socket_buffer_lines(&mut out, r);
    out.push_str(&details(r));
    out
}

/// How the streams were sent and received, where an option changed it:
/// a rate (-b), sendfile (-Z), MSG_ZEROCOPY, MSG_TRUNC.
fn stream_options(out: &mut String, r: &TestResult) {
    if let Some(b) = r.config.rate_bps {
        let _ = writeln!(
            out,
            "offered: {} 10^6bits/s per flow (-b), paced by the sender every {} us at most",
            b as f64 / 1e6,
            r.config.pacing_us.unwrap_or_default()
        );
    }
    if r.config.zerocopy {
        let _ = writeln!(out, "sender: sendfile(2) from memory (-Z)");
    }
    if r.config.msg_zerocopy {
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
    if r.config.skip_rx_copy {
        let _ = writeln!(
            out,
            "receiver: discarded what it read without copying it to user memory (MSG_TRUNC, --skip-rx-copy); \
             its CPU and throughput leave out the receive copy"
        );
    }
}

/// A utilisation's cell, or "-" where there is none.
fn pct_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// A service demand's cell, or "-" where there is none.
fn demand_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
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

/// Several flows: each direction's spread of per-flow throughput and its
/// fairness, and the fairness between directions.
fn spread_lines(out: &mut String, r: &TestResult) {
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

/// UDP stream results, after netperf's UDP_STREAM table: the sender's row,
/// then the receiver's.
fn render_udp(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    let rate = r.config.udp_rate_bps.map_or_else(
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
                "client"
            } else {
                "agent"
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
                "agent"
            } else {
                "client"
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
        let s = crate::model::Spread::of(&loss);
        let tput: Vec<f64> = r.flows.iter().map(|f| f.throughput_bps).collect();
        let t = crate::model::Spread::of(&tput);
        let _ = writeln!(
            out,
            "per flow: throughput (10^6bits/sec) min {} median {} max {}; loss % min {:.3} median {:.3} max {:.3}; over {} flows",
            mbps(t.min), mbps(t.median), mbps(t.max), s.min, s.median, s.max, r.flows.len()
        );
    }
    out.push_str(&details(r));
    out
}

/// One-way delay per direction, each with its clock's offset bound, or why
/// it is withheld.
pub fn one_way_lines(out: &mut String, o: &crate::model::OneWayDelay) {
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

/// Request/response results, after netperf's TCP_RR and TCP_CRR tables.
fn render_rr(r: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(r));
    if r.config.busy_wait {
        let _ = writeln!(
            out,
            "both ends busy-waited (--busy-wait): each polled its socket instead of sleeping until woken, a CPU \
             kept busy per flow on each end (in the CPU figures and service demand)"
        );
    }
    match r.config.close_first.as_deref() {
        Some("responder") => {
            let _ = writeln!(
                out,
                "the agent closed each connection first (--close-first responder, as netperf TCP_CRR): \
                 TIME_WAIT on the agent's host; the client waited for that close"
            );
        }
        Some("requester-reset") => {
            let _ = writeln!(
                out,
                "the client ended each connection with a reset once it had the response (--close-first \
                 requester-reset, SO_LINGER 0, as neper tcp_crr's default): no TIME_WAIT on either host"
            );
        }
        Some(_) => {
            let _ = writeln!(
                out,
                "the client closed each connection first (--close-first requester, as neper tcp_crr --time-wait): \
                 TIME_WAIT on the client's host"
            );
        }
        None => {}
    }
    if let Some(range) = &r.config.local_ports {
        let _ = writeln!(
            out,
            "the client bound each connection to the next local port of {range} in turn (--local-ports, as \
             netperf TCP_CRR), instead of the kernel picking one inside connect()"
        );
    }
    let cpu = &r.summary.cpu;
    let sd = &r.summary.service_demand;
    let (req, resp) = (
        r.config.request_size.unwrap_or(0),
        r.config.response_size.unwrap_or(0),
    );
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
    if let Some(e) = &r.summary.connect_errors {
        let _ = writeln!(
            out,
            "connect errors (failed transactions, not counted): refused {}  timed out {}  address not available {}  reset {}  other {}",
            e.refused, e.timed_out, e.addr_not_available, e.reset, e.other
        );
    }
    if let Some(s) = &r.summary.schedule {
        let _ = writeln!(
            out,
            "open loop at {} tps per flow: {} requests due, {} left more than 1 ms late, at most {:.1} us behind (mean {:.1} us)",
            r.config.rate.map_or_else(|| "?".into(), |x| format!("{x}")),
            s.due,
            s.late,
            s.max_behind_us,
            s.mean_behind_us
        );
    }
    if r.flows.len() > 1 {
        let tps: Vec<f64> = r.flows.iter().filter_map(|f| f.transactions_per_s).collect();
        let s = crate::model::Spread::of(&tps);
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

fn same_host(r: &TestResult) -> bool {
    match (&r.environment.local, &r.environment.remote) {
        (Some(l), Some(rm)) => {
            r.config.embedded || (l.hostname == rm.hostname && l.kernel_version == rm.kernel_version)
        }
        _ => false,
    }
}

/// CPU split, worker threads, TCP_INFO, kernel counters and environment.
fn details(r: &TestResult) -> String {
    let mut out = String::new();
    cpu_lines(&mut out, r);
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
    let env_line = |e: &crate::model::measure::Environment| {
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
fn fairness_cell(j: Option<f64>, flows: u32) -> String {
    match j {
        Some(j) => format!("Jain's fairness index {j:.3} (1 = equal shares)"),
        None if flows < 2 => "fairness: one flow".into(),
        None => "fairness: - (no flow received anything)".into(),
    }
}

/// TCP_INFO's delivery rate in 10^6 bits/s, or why it is withheld: a rate
/// the kernel flagged app-limited measured what the application offered,
/// and would read as a plausible (and wrong) link rate.
fn delivery_cell(t: &crate::model::measure::TcpInfo) -> String {
    match (t.delivery_rate_bps, t.delivery_rate_app_limited) {
        (None, _) => "-".into(),
        (Some(_), Some(true)) => "app-limited".into(),
        (Some(b), _) => format!("{:.2}", b as f64 / 1e6),
    }
}

/// Which columns interim rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalColumns {
    /// TCP streams: bytes, rate, retransmissions (and cwnd per flow), as iperf3.
    TcpStream,
    /// UDP streams: bytes, rate, jitter, lost/total, as iperf3's receiver.
    UdpStream,
    /// Request/response: transactions and transactions per second.
    Transactions,
    /// tcp-crr: transactions, transactions per second, and failures.
    ConnectTransactions,
}

/// Header for interval rows.
pub fn interval_header(cols: IntervalColumns) -> String {
    let lead = format!("{:<16} {:<6}", "Interval (s)", "Flow");
    match cols {
        IntervalColumns::TcpStream => format!(
            "{lead} {:>14} {:>14} {:>8} {:>10}",
            "Bytes", "10^6bits/sec", "Retr", "Cwnd KB"
        ),
        IntervalColumns::UdpStream => format!(
            "{lead} {:>14} {:>14} {:>11} {:>19} {:>8} {:>6}",
            "Bytes", "10^6bits/sec", "Jitter us", "Lost/Total", "Loss %", "OoO"
        ),
        IntervalColumns::Transactions => format!(
            "{lead} {:>12} {:>12} {:>10} {:>10}",
            "Trans", "Trans/s", "p50 us", "p99 us"
        ),
        IntervalColumns::ConnectTransactions => format!(
            "{lead} {:>12} {:>12} {:>10} {:>10} {:>8}",
            "Trans", "Trans/s", "p50 us", "p99 us", "Failed"
        ),
    }
}

/// Rows for one interim report: a row per flow when `per_flow`, then a sum
/// per direction.
pub fn interval_rows(cols: IntervalColumns, i: &IntervalResult, per_flow: bool) -> String {
    let mut out = String::new();
    let span = format!("{:.2}-{:.2}", i.start_s, i.end_s);
    let secs = i.end_s - i.start_s;
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |x| x.to_string());
    let udp_cells = |u: Option<&IntervalUdp>| match u {
        Some(u) => format!(
            "{:>11} {:>19} {:>8.3} {:>6}",
            u.jitter_us.map_or_else(|| "-".to_string(), |j| format!("{j:.1}")),
            format!("{}/{}", u.lost_datagrams, u.lost_datagrams + u.received_datagrams),
            u.loss_pct,
            u.out_of_order
        ),
        None => format!("{:>11} {:>19} {:>8} {:>6}", "-", "-", "-", "-"),
    };
    let mut row = |name: String, bytes: u64, bps: f64, rest: String| {
        let _ = writeln!(out, "{span:<16} {name:<6} {bytes:>14} {:>14} {rest}", mbps(bps));
    };
    if matches!(
        cols,
        IntervalColumns::Transactions | IntervalColumns::ConnectTransactions
    ) {
        let failed = cols == IntervalColumns::ConnectTransactions;
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
        return out;
    }
    if per_flow {
        for f in &i.flows {
            let name = format!(
                "{}{}",
                f.id,
                if f.direction == Direction::Tx { "tx" } else { "rx" }
            );
            let rest = match cols {
                IntervalColumns::UdpStream => udp_cells(f.udp.as_ref()),
                _ => {
                    let cwnd = f
                        .tcp_info
                        .as_ref()
                        .map(|t| (u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).div_ceil(1024));
                    format!("{:>8} {:>10}", opt(f.retransmits), opt(cwnd))
                }
            };
            row(name, f.bytes, f.throughput_bps, rest);
        }
    }
    for (d, v) in [
        (Direction::Tx, i.tx_throughput_bps),
        (Direction::Rx, i.rx_throughput_bps),
    ] {
        if let Some(bps) = v {
            let these = || i.flows.iter().filter(move |f| f.direction == d);
            let bytes: u64 = these().map(|f| f.bytes).sum();
            let rest = match cols {
                // One direction at a time for UDP: the interval's total is its sum.
                IntervalColumns::UdpStream => udp_cells(i.udp.as_ref()),
                _ => {
                    let r: Vec<u64> = these().filter_map(|f| f.retransmits).collect();
                    let retr = (!r.is_empty()).then(|| r.iter().sum());
                    format!("{:>8} {:>10}", opt(retr), "")
                }
            };
            row(format!("sum{}", d.name()), bytes, bps, rest);
        }
    }
    out
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
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
