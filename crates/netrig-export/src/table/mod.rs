//! The default output: interim rows as each interval closes (per flow when
//! there are 2 to 16 flows, then a sum per direction), then the result's
//! table, both laid out as the test's kind says ([`TableLayout`]), then the
//! server host's block when an agent watched it ([`server_host`]).

pub mod kit;
mod profile;

use super::Exporter;
use netrig_document::result::peer::PeerInfo;
use netrig_document::result::server_host::{thousands, ServerHost};
use netrig_document::result::{IntervalResult, TestResult};
use std::io::{self, Write};

/// How a kind's results read as a table: the summary after the run, and
/// the interim rows as the run goes. Each kind's layout is in its folder (crate netrig-kinds,
/// its `KindReport::table`), most of them built of [`kit`]'s parts.
pub trait TableLayout: Sync {
    /// The result's table (without interval rows, which are printed as they come).
    fn render(&self, r: &TestResult) -> String;
    /// The header over the interval rows.
    fn interval_header(&self) -> String;
    /// The rows of one interval: a row per flow when `per_flow`, then the sums.
    fn interval_rows(&self, i: &IntervalResult, per_flow: bool) -> String;
}

pub struct TableExporter {
    layout: &'static dyn TableLayout,
    per_flow: bool,
    header: bool,
}

impl TableExporter {
    /// For a test laid out as `layout` with `flows` flows in all directions.
    pub fn new(layout: &'static dyn TableLayout, flows: usize) -> TableExporter {
        TableExporter {
            layout,
            per_flow: (2..=16).contains(&flows),
            header: false,
        }
    }
}

impl Exporter for TableExporter {
    fn interval(&mut self, out: &mut dyn Write, interval: &IntervalResult) -> io::Result<()> {
        if !self.header {
            writeln!(out, "{}", self.layout.interval_header())?;
            self.header = true;
        }
        write!(out, "{}", self.layout.interval_rows(interval, self.per_flow))?;
        out.flush()
    }

    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        write!(out, "{}", self.layout.render(result))?;
        if let Some(h) = &result.server_host {
            write!(out, "{}", server_host(h))?;
        }
        if let Some(p) = &result.peer {
            write!(out, "{}", peer_report(p))?;
        }
        Ok(())
    }

    fn error(&mut self, out: &mut dyn Write, _message: &str) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        Ok(())
    }
}

/// The table's block of what an iperf3 server reported, and what the
/// result withholds because it reports nothing of it.
pub fn peer_report(p: &PeerInfo) -> String {
    use std::fmt::Write as _;
    let r = &p.reported;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n{} server's report (its results exchange, not measured by netrig: the figures marked {} above)\n  CPU {:.1}% ({:.1}% user, \
         {:.1}% system) of its process",
        p.software,
        kit::REPORTED,
        r.cpu_util_total_pct,
        r.cpu_util_user_pct,
        r.cpu_util_system_pct
    );
    let _ = writeln!(
        o,
        "  flow stream        bytes  retrans  jitter ms  lost/packets    span s"
    );
    for s in &r.streams {
        let _ = writeln!(
            o,
            "  {:>4} {:>6} {:>12} {:>8} {:>10.3} {:>13} {:>9.2}",
            s.flow,
            s.stream_id,
            s.bytes,
            if s.retransmits < 0 {
                "-".to_string()
            } else {
                s.retransmits.to_string()
            },
            s.jitter_ms,
            format!("{}/{}", s.lost_packets, s.packets),
            s.end_s - s.start_s
        );
    }
    for w in &p.withheld {
        let _ = writeln!(o, "  withheld: {w}");
    }
    if let Some(t) = &r.server_output_text {
        // A peer's text: its control characters (a terminal's escapes) shown as '?'.
        let shown: String = t
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    '?'
                } else {
                    c
                }
            })
            .collect();
        let _ = writeln!(o, "  the server's output:\n{shown}");
    }
    o
}

/// The table's "server host" block, after the run's own (a result with a [`ServerHost`]).
pub fn server_host(h: &ServerHost) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nserver host ({}, {:.1} s watched, levels sampled {} time{} about once a second; the whole host, \
         every process)",
        h.agent,
        h.window_s,
        h.samples,
        if h.samples == 1 { "" } else { "s" }
    );
    match (&h.cpu, &h.cpu_withheld) {
        (Some(c), _) => {
            let busiest = h.busiest_cpu.as_ref().map_or_else(
                || "-".into(),
                |b| {
                    format!(
                        "cpu{} {:.1}% (user {:.1} system {:.1} irq {:.1} softirq {:.1} iowait {:.1})",
                        b.cpu, b.busy_pct, b.user_pct, b.system_pct, b.irq_pct, b.softirq_pct, b.iowait_pct
                    )
                },
            );
            let _ = writeln!(
                o,
                "  CPU          busy {:.1}% (user {:.1} system {:.1} irq {:.1} softirq {:.1} iowait {:.1}) of {} \
                 CPUs; busiest {busiest}",
                c.busy_pct,
                c.user_pct + c.nice_pct,
                c.system_pct,
                c.irq_pct,
                c.softirq_pct,
                c.iowait_pct,
                c.cpus
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "  CPU          withheld: {why}");
        }
        (None, None) => {}
    }
    match (h.service_demand_us_per_transaction, &h.service_demand_withheld) {
        (Some(sd), _) => {
            let _ = writeln!(
                o,
                "  demand       {sd:.1} us of the host's busy CPU per transaction (all its CPU, not only the \
                 server's)"
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "  demand       withheld: {why}");
        }
        (None, None) => {}
    }
    if let Some(why) = &h.counters_withheld {
        let _ = writeln!(o, "  counters     withheld: {why}");
    } else {
        let moved: Vec<String> = h
            .counters
            .iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, v)| {
                format!(
                    "{} {}",
                    k.split_once('.').map_or(k.as_str(), |x| x.1),
                    thousands(*v)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "  counters     {}",
            if moved.is_empty() {
                "none moved".to_string()
            } else {
                moved.join(", ")
            }
        );
    }
    match (&h.conntrack, &h.conntrack_withheld) {
        (Some(c), _) => {
            let max = c.max.map_or_else(|| "?".into(), |m| thousands(m as i64));
            let drops = match (c.drop, c.early_drop, c.insert_failed) {
                (Some(d), Some(e), Some(i)) => format!("; drop {d}, early_drop {e}, insert_failed {i}"),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "  conntrack    {} at start, {} at end, peak {} of nf_conntrack_max {max}{drops}",
                thousands(c.start as i64),
                thousands(c.end as i64),
                thousands(c.peak as i64)
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "  conntrack    withheld: {why}");
        }
        (None, None) => {}
    }
    match (&h.sockets, &h.sockets_withheld) {
        (Some(s), _) => {
            let pe = |p: &netrig_proto::report::host::PeakEnd| {
                format!("{}/{}", thousands(p.peak as i64), thousands(p.end as i64))
            };
            let _ = writeln!(
                o,
                "  sockets      peak/end: ESTABLISHED {} SYN_RECV {} TIME_WAIT {} CLOSE_WAIT {} FIN_WAIT2 {}{}",
                pe(&s.established),
                pe(&s.syn_recv),
                pe(&s.time_wait),
                pe(&s.close_wait),
                pe(&s.fin_wait2),
                if s.partial {
                    " (lower bounds: /proc/net/tcp read in part)"
                } else {
                    ""
                }
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "  sockets      withheld: {why}");
        }
        (None, None) => {}
    }
    if !h.sysctls.is_empty() {
        let list: Vec<String> = h
            .sysctls
            .iter()
            .map(|(k, v)| format!("{} {}", k.rsplit('.').next().unwrap_or(k), v))
            .collect();
        let _ = writeln!(o, "  limits       {}", list.join(", "));
    }
    o
}
