//! The server host's view in the result (`server_host` in `--json`, the
//! "server host" block of the table): what an agent on the host of the
//! server a one-ended kind loaded (nginx, netrig's HTTP server, anything)
//! saw over the run, the service demand per transaction drawn from it, and
//! the warnings that name a collapse's cause and the knob that moves it.

use crate::model::measure::CpuUsage;
pub use crate::model::server_host::ServerHost;
use crate::TestResult;
use netrig_proto::report::host::HostView;
use std::fmt::Write;

impl ServerHost {
    /// The view `agent` answered, with the service demand over
    /// `transactions` (the run's `summary.transactions`).
    pub fn new(agent: String, v: &HostView, transactions: Option<u64>) -> ServerHost {
        let (service_demand_us_per_transaction, service_demand_withheld) =
            match (v.cpu.as_ref(), transactions) {
                (Some(c), Some(t)) if t > 0 => (Some(c.busy_cpu_s * 1e6 / t as f64), None),
                (None, _) => (None, Some("the host's CPU was not measured".to_string())),
                (_, Some(_)) => (
                    None,
                    Some("no transaction completed in the run's window".to_string()),
                ),
                (_, None) => (None, Some("the run counts no transactions".to_string())),
            };
        ServerHost {
            agent,
            window_s: v.window_s,
            samples: v.samples,
            limit_s: v.limit_s,
            cpu: v.cpu.as_ref().map(CpuUsage::from),
            busiest_cpu: v.busiest_cpu.clone(),
            cpu_withheld: v.cpu_withheld.clone(),
            service_demand_us_per_transaction,
            service_demand_withheld,
            counters: v.counters.clone(),
            counters_withheld: v.counters_withheld.clone(),
            conntrack: v.conntrack.clone(),
            conntrack_withheld: v.conntrack_withheld.clone(),
            sockets: v.sockets.clone(),
            sockets_withheld: v.sockets_withheld.clone(),
            sysctls: v.sysctls.clone(),
        }
    }

    fn counter(&self, name: &str) -> i64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    fn sysctl(&self, name: &str) -> String {
        self.sysctls
            .get(name)
            .map_or_else(|| "?".into(), |v| thousands(*v as i64))
    }

    /// The warnings this view calls for, each naming the cause and the knob.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let n = |k: &str| self.counter(k);
        if let Some(l) = self.limit_s {
            w.push(format!(
                "the watch of the server host reached {}'s limit of {l:.0} s (its --max-duration and set-up \
                 timeout): the server host's figures cover only its first {l:.0} s",
                self.agent
            ));
        }
        let overflows = n("TcpExt.ListenOverflows");
        if overflows > 0 {
            w.push(format!(
                "the listen queue overflowed {} times on the server host (TcpExt.ListenOverflows): raise \
                 net.core.somaxconn ({}) and the server's listen backlog, or accept faster",
                thousands(overflows),
                self.sysctl("net.core.somaxconn")
            ));
        }
        let drops = n("TcpExt.ListenDrops");
        if drops > overflows {
            w.push(format!(
                "the server host dropped {} connection requests at a listener (TcpExt.ListenDrops), {} of them \
                 for other causes than a full accept queue (no memory, a SYN queue full, a bad ACK)",
                thousands(drops),
                thousands(drops.saturating_sub(overflows))
            ));
        }
        let qfull = n("TcpExt.TCPReqQFullDrop");
        if qfull > 0 {
            w.push(format!(
                "the SYN queue was full on the server host and {} connection requests were dropped \
                 (TcpExt.TCPReqQFullDrop): raise net.ipv4.tcp_max_syn_backlog ({}) and the server's backlog, \
                 or enable SYN cookies (net.ipv4.tcp_syncookies = {})",
                thousands(qfull),
                self.sysctl("net.ipv4.tcp_max_syn_backlog"),
                self.sysctl("net.ipv4.tcp_syncookies")
            ));
        }
        let cookies = n("TcpExt.SyncookiesSent");
        if cookies > 0 {
            w.push(format!(
                "the server host sent {} SYN cookies (TcpExt.SyncookiesSent; {} came back, {} failed): its SYN \
                 queue overflowed (net.ipv4.tcp_max_syn_backlog {}, the server's backlog); a connection opened \
                 by cookie loses TCP options the SYN queue would have kept",
                thousands(cookies),
                thousands(n("TcpExt.SyncookiesRecv")),
                thousands(n("TcpExt.SyncookiesFailed")),
                self.sysctl("net.ipv4.tcp_max_syn_backlog")
            ));
        }
        if let Some(c) = &self.conntrack {
            if let Some(max) = c.max.filter(|m| *m > 0) {
                let pct = c.peak as f64 * 100.0 / max as f64;
                if pct >= 90.0 {
                    w.push(format!(
                        "the conntrack table on the server host was {pct:.0} % full at its peak ({} of \
                         nf_conntrack_max {}): raise net.netfilter.nf_conntrack_max or exempt the traffic \
                         with notrack",
                        thousands(c.peak as i64),
                        thousands(max as i64)
                    ));
                }
            }
            let dropped = c.drop.unwrap_or(0).saturating_add(c.early_drop.unwrap_or(0));
            if dropped > 0 {
                w.push(format!(
                    "connection tracking on the server host dropped {} new connections and evicted {} entries \
                     early (/proc/net/stat/nf_conntrack drop, early_drop): the table was full; raise \
                     net.netfilter.nf_conntrack_max or exempt the traffic with notrack",
                    thousands(c.drop.unwrap_or(0) as i64),
                    thousands(c.early_drop.unwrap_or(0) as i64)
                ));
            }
            if let Some(f) = c.insert_failed.filter(|f| *f > 0) {
                w.push(format!(
                    "connection tracking on the server host failed to insert {} entries (insert_failed)",
                    thousands(f as i64)
                ));
            }
        }
        if let (Some(s), Some(max)) = (&self.sockets, self.sysctls.get("net.ipv4.tcp_max_tw_buckets")) {
            let tw = s.time_wait.peak.max(s.sockstat_time_wait.map_or(0, |x| x.peak));
            if *max > 0 && tw as f64 >= 0.9 * *max as f64 {
                w.push(format!(
                    "TIME_WAIT sockets on the server host reached {} of net.ipv4.tcp_max_tw_buckets ({}): beyond \
                     it the kernel destroys them at once (TCPTimeWaitOverflow); let the clients close first, or \
                     raise it",
                    thousands(tw as i64),
                    thousands(*max as i64)
                ));
            }
        }
        let retrans = n("Tcp.RetransSegs");
        if retrans > 0 {
            let out = n("Tcp.OutSegs");
            let share = if out > 0 {
                format!(
                    ", {:.2} % of the {} segments sent",
                    retrans as f64 * 100.0 / out as f64,
                    thousands(out)
                )
            } else {
                String::new()
            };
            w.push(format!(
                "the server host retransmitted {} TCP segments (Tcp.RetransSegs{share}; all its connections)",
                thousands(retrans)
            ));
        }
        let mem = n("TcpExt.TCPAbortOnMemory");
        if mem > 0 {
            w.push(format!(
                "the server host aborted {} connections for lack of socket memory (TcpExt.TCPAbortOnMemory): \
                 see net.ipv4.tcp_mem",
                thousands(mem)
            ));
        }
        if let Some(b) = &self.busiest_cpu {
            if b.busy_pct >= 90.0 {
                w.push(format!(
                    "cpu{} of the server host was {:.0} % busy (user {:.0} %, system {:.0} %, softirq {:.0} %): \
                     that CPU may be what limits the server",
                    b.cpu, b.busy_pct, b.user_pct, b.system_pct, b.softirq_pct
                ));
            }
        }
        w.into_iter().map(|s| format!("server host: {s}")).collect()
    }

    /// The table's "server host" block.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\nserver host ({}, {:.1} s watched, levels sampled {} time{} about once a second; the whole host, \
             every process)",
            self.agent,
            self.window_s,
            self.samples,
            if self.samples == 1 { "" } else { "s" }
        );
        match (&self.cpu, &self.cpu_withheld) {
            (Some(c), _) => {
                let busiest = self.busiest_cpu.as_ref().map_or_else(
                    || "-".into(),
                    |b| {
                        format!(
                            "cpu{} {:.1}% (user {:.1} system {:.1} irq {:.1} softirq {:.1} iowait {:.1})",
                            b.cpu,
                            b.busy_pct,
                            b.user_pct,
                            b.system_pct,
                            b.irq_pct,
                            b.softirq_pct,
                            b.iowait_pct
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
        match (
            self.service_demand_us_per_transaction,
            &self.service_demand_withheld,
        ) {
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
        if let Some(why) = &self.counters_withheld {
            let _ = writeln!(o, "  counters     withheld: {why}");
        } else {
            let moved: Vec<String> = self
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
        match (&self.conntrack, &self.conntrack_withheld) {
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
        match (&self.sockets, &self.sockets_withheld) {
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
        if !self.sysctls.is_empty() {
            let list: Vec<String> = self
                .sysctls
                .iter()
                .map(|(k, v)| format!("{} {}", k.rsplit('.').next().unwrap_or(k), v))
                .collect();
            let _ = writeln!(o, "  limits       {}", list.join(", "));
        }
        o
    }
}

/// Attaches the view `agent` answered to a run's result: the figures, and
/// their warnings among the result's.
pub fn attach(result: &mut TestResult, agent: String, view: &HostView) {
    let host = ServerHost::new(agent, view, result.summary.transactions);
    result.warnings.extend(host.warnings());
    result.server_host = Some(host);
    // A kind that said the server's host was not watched: it now is.
    if let Some(h) = &mut result.summary.http {
        h.withheld.retain(|w| !w.starts_with(SERVER_NOT_WATCHED));
    }
    rejudge_http(result);
}

/// The http kind's witness judged again, now with the server host's
/// counters (or the reason they are missing) beside this host's.
fn rejudge_http(result: &mut TestResult) {
    let (Some(h), Some(host)) = (&result.summary.http, &result.server_host) else {
        return;
    };
    // Never judged (not the kind's), or withheld as a whole (a --clients sum).
    let w = &result.witness;
    if (w.checks.is_empty() && w.local.is_none() && w.withheld.is_empty())
        || w.withheld
            .iter()
            .any(|r| r.starts_with(crate::witness::CLIENTS_WITHHELD))
    {
        return;
    }
    let local = result
        .witness
        .local
        .as_ref()
        .ok_or("the kernel counters could not be read");
    let server = match &host.counters_withheld {
        Some(why) => Err(why.as_str()),
        None => Ok(&host.counters),
    };
    let (checks, warnings, withheld) = crate::witness::judge_http(
        &h.total,
        h.connections,
        u64::from(
            result
                .config
                .kind_part::<HttpRequest>()
                .and_then(|c| c.request_size)
                .unwrap_or(0),
        ),
        local,
        server,
    );
    for w in warnings {
        if !result.warnings.contains(&w) {
            result.warnings.push(w);
        }
    }
    result.witness.checks = checks;
    result.witness.withheld = withheld;
}

/// The one option of the http kind's config that its judge needs, the
/// request's bytes (its type, the request/response kinds'
/// `TransactionsConfig`, is in crate netrig-kinds above this one).
#[derive(serde::Deserialize)]
struct HttpRequest {
    request_size: Option<u32>,
}

/// How a one-ended kind's withheld figures begin when no agent watched the
/// server's host ([`attach`] removes the entry once one has).
pub const SERVER_NOT_WATCHED: &str = "the server's CPU and kernel counters";

/// 3412 as "3,412".
fn thousands(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::report::host::PeakEnd;
    use netrig_proto::report::host::{ConntrackView, SocketStates};
    use netrig_proto::report::measure::CpuUsage as WireCpu;
    use std::collections::BTreeMap;

    fn view() -> HostView {
        HostView {
            window_s: 10.0,
            samples: 9,
            cpu: Some(WireCpu {
                busy_pct: 60.0,
                user_pct: 20.0,
                system_pct: 25.0,
                softirq_pct: 15.0,
                cpus: 2,
                elapsed_cpu_s: 20.0,
                busy_cpu_s: 12.0,
                ..Default::default()
            }),
            counters: BTreeMap::from([
                ("TcpExt.ListenOverflows".to_string(), 3412),
                ("TcpExt.ListenDrops".to_string(), 3412),
                ("TcpExt.SyncookiesSent".to_string(), 0),
                ("Tcp.RetransSegs".to_string(), 10),
                ("Tcp.OutSegs".to_string(), 1000),
            ]),
            conntrack: Some(ConntrackView {
                start: 100,
                end: 200,
                peak: 64_225,
                max: Some(65_536),
                drop: Some(0),
                early_drop: Some(0),
                insert_failed: Some(0),
                stat_withheld: None,
            }),
            sockets: Some(SocketStates {
                time_wait: PeakEnd { peak: 100, end: 50 },
                ..Default::default()
            }),
            sysctls: BTreeMap::from([
                ("net.core.somaxconn".to_string(), 4096),
                ("net.ipv4.tcp_max_tw_buckets".to_string(), 262_144),
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn warnings_name_the_cause_and_the_knob() {
        let h = ServerHost::new("the agent at 127.0.0.1:6387".into(), &view(), Some(120_000));
        let w = h.warnings();
        assert!(
            w.iter().any(
                |w| w.contains("the listen queue overflowed 3,412 times on the server host")
                    && w.contains("ListenOverflows")
                    && w.contains("net.core.somaxconn (4,096)")
            ),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("conntrack table on the server host was 98 % full")
                    && w.contains("nf_conntrack_max 65,536")
                    && w.contains("notrack")),
            "{w:#?}"
        );
        assert!(w
            .iter()
            .any(|w| w.contains("retransmitted 10 TCP segments") && w.contains("1.00 %")));
        assert!(
            !w.iter().any(|w| w.contains("ListenDrops")),
            "drops = overflows: one cause, one warning"
        );
        assert!(!w.iter().any(|w| w.contains("SYN cookies")), "none sent");
        assert!(!w.iter().any(|w| w.contains("TIME_WAIT")), "far from the limit");
        assert!(w.iter().all(|w| w.starts_with("server host: ")));
        // 12 CPU-seconds over 120,000 transactions.
        assert_eq!(h.service_demand_us_per_transaction, Some(100.0));
        let t = h.table();
        assert!(t.contains("server host (the agent at 127.0.0.1:6387"), "{t}");
        assert!(t.contains("ListenOverflows 3,412"), "{t}");
        assert!(t.contains("peak 64,225 of nf_conntrack_max 65,536"), "{t}");
        assert!(
            t.contains("100.0 us of the host's busy CPU per transaction"),
            "{t}"
        );
    }

    #[test]
    fn a_quiet_host_warns_of_nothing_and_withholds_with_reasons() {
        let mut v = view();
        v.counters.values_mut().for_each(|x| *x = 0);
        v.conntrack = None;
        v.conntrack_withheld = Some("nf_conntrack is not loaded".into());
        let h = ServerHost::new("a".into(), &v, Some(0));
        assert!(h.warnings().is_empty(), "{:?}", h.warnings());
        assert_eq!(h.service_demand_us_per_transaction, None);
        assert!(h
            .service_demand_withheld
            .as_deref()
            .unwrap()
            .contains("no transaction"));
        let t = h.table();
        assert!(
            t.contains("conntrack    withheld: nf_conntrack is not loaded"),
            "{t}"
        );
        assert!(t.contains("counters     none moved"), "{t}");
        let mut v = view();
        v.sockets.as_mut().unwrap().time_wait.peak = 240_000;
        v.counters.insert("TcpExt.SyncookiesSent".into(), 5);
        v.limit_s = Some(3630.0);
        let w = ServerHost::new("a".into(), &v, None).warnings();
        assert!(w
            .iter()
            .any(|w| w.contains("TIME_WAIT sockets on the server host reached 240,000")));
        assert!(w.iter().any(|w| w.contains("sent 5 SYN cookies")));
        assert!(w.iter().any(|w| w.contains("limit of 3630 s")));
    }

    /// `attach` puts the view and its warnings in the result; the table
    /// exporter prints the block after the run's own, the JSON carries it.
    #[test]
    fn attached_views_reach_the_table_and_the_json() {
        use crate::export::{table::TableExporter, Exporter};
        let mut r: TestResult =
            serde_json::from_str(include_str!("../tests/fixtures/tcp-stream.json")).unwrap();
        assert!(r.server_host.is_none());
        let before = r.warnings.len();
        attach(&mut r, "the agent at 192.0.2.1:6387".into(), &view());
        assert!(r.warnings.len() > before);
        let mut out = Vec::new();
        TableExporter::new(&crate::table::TEST_LAYOUT, 1)
            .result(&mut out, &r)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\nserver host (the agent at 192.0.2.1:6387"),
            "{text}"
        );
        let back: TestResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.server_host, r.server_host);
    }

    #[test]
    fn thousands_separates() {
        assert_eq!(thousands(3412), "3,412");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(i64::MIN), "-9,223,372,036,854,775,808");
    }
}
