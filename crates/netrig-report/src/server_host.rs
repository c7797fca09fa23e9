//! The server host's view in the result (`server_host` in `--json`, the
//! "server host" block of the table): what an agent on the host of the
//! server a one-ended kind loaded (nginx, netrig's HTTP server, anything)
//! saw over the run, attached to the run's result with its warnings, and the http kind's
//! witness judged again with it. The view's type, its service demand and warnings are
//! netrig-document's ([`ServerHost`]); its table block is netrig-export's.

pub use crate::model::server_host::ServerHost;
use crate::TestResult;
use netrig_proto::report::host::HostView;

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
        let t = netrig_export::table::server_host(&h);
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
        let t = netrig_export::table::server_host(&h);
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
        use netrig_export::{table::TableExporter, Exporter};
        let mut r: TestResult =
            serde_json::from_str(include_str!("../tests/fixtures/tcp-stream.json")).unwrap();
        assert!(r.server_host.is_none());
        let before = r.warnings.len();
        attach(&mut r, "the agent at 192.0.2.1:6387".into(), &view());
        assert!(r.warnings.len() > before);
        let mut out = Vec::new();
        TableExporter::new(&netrig_export::table::kit::BARE, 1)
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
}
