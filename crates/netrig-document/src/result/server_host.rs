//! The server host's view as the result holds it: its figures, the service demand drawn from
//! them and the warnings that name a collapse's cause and the knob that moves it
//! (netrig-report's `server_host` attaches it to a result, netrig-export's table renders it).

use super::measure::CpuUsage;
use netrig_proto::report::host::{ConntrackView, CpuSplit, HostView, SocketStates};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `server_host`: the whole host's figures, not the server's alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerHost {
    /// The agent that watched, as messages name it ("the agent at 192.0.2.1:6387").
    pub agent: String,
    /// The watch's length on the agent's clock: it brackets the run (set-up
    /// and the run's end included), so it is a little longer than the
    /// run's measured window.
    pub window_s: f64,
    /// Samples of the levels (conntrack, sockets) taken about once a second.
    pub samples: u32,
    /// The watch reached the agent's limit (this many seconds) and covers only those.
    pub limit_s: Option<f64>,
    /// The host's CPU over the watch, % of the whole machine.
    pub cpu: Option<CpuUsage>,
    /// The busiest CPU's split, % of that CPU.
    pub busiest_cpu: Option<CpuSplit>,
    pub cpu_withheld: Option<String>,
    /// µs of the host's busy CPU (all of it, every process's, not only the
    /// server's) over the watch, per transaction the run counted.
    pub service_demand_us_per_transaction: Option<f64>,
    pub service_demand_withheld: Option<String>,
    /// Kernel counter deltas over the watch (`TcpExt.ListenOverflows`, ...).
    pub counters: BTreeMap<String, i64>,
    pub counters_withheld: Option<String>,
    pub conntrack: Option<ConntrackView>,
    pub conntrack_withheld: Option<String>,
    pub sockets: Option<SocketStates>,
    pub sockets_withheld: Option<String>,
    /// The sysctls that bound these figures, as read at the watch's start.
    pub sysctls: BTreeMap<String, u64>,
}

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
}

/// 3412 as "3,412".
pub fn thousands(v: i64) -> String {
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

    #[test]
    fn thousands_separates() {
        assert_eq!(thousands(3412), "3,412");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(i64::MIN), "-9,223,372,036,854,775,808");
    }
}
