//! The server host's view as it travels (protocol 6): the answer to a
//! `watch_end` (`netrig_metrics::host::HostView`, converted field by field).
//! What each field means is said once, on the netrig-metrics type.
//!
//! A client reads it from an agent it does not control: [`HostView::check`]
//! bounds every count and size in it before anything is computed from it.

use super::measure::CpuUsage;
use crate::ProtoError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most counters a view may carry (an agent sends at most
/// `netrig_metrics::host::WATCHED_COUNTERS`, 15 today).
pub const MAX_VIEW_COUNTERS: usize = 64;
/// The most sysctls a view may carry (5 today).
pub const MAX_VIEW_SYSCTLS: usize = 32;
/// The longest name of a counter or sysctl.
pub const MAX_VIEW_NAME: usize = 64;
/// The longest reason for a figure withheld.
pub const MAX_VIEW_REASON: usize = 1024;
/// The most CPUs a view may name.
pub const MAX_VIEW_CPUS: u32 = 1 << 20;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSplit {
    pub cpu: u32,
    pub busy_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub iowait_pct: f64,
    pub steal_pct: f64,
}

crate::from_fields!(netrig_metrics::host::CpuSplit => CpuSplit {
    cpu, busy_pct, user_pct, system_pct, irq_pct, softirq_pct, iowait_pct, steal_pct,
});

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakEnd {
    pub peak: u64,
    pub end: u64,
}

crate::from_fields!(netrig_metrics::host::PeakEnd => PeakEnd { peak, end });

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketStates {
    pub established: PeakEnd,
    pub syn_recv: PeakEnd,
    pub time_wait: PeakEnd,
    pub close_wait: PeakEnd,
    pub fin_wait2: PeakEnd,
    pub sockstat_time_wait: Option<PeakEnd>,
    pub orphan: Option<PeakEnd>,
    pub partial: bool,
}

impl From<&netrig_metrics::host::SocketStates> for SocketStates {
    fn from(s: &netrig_metrics::host::SocketStates) -> Self {
        let pe = |p: &netrig_metrics::host::PeakEnd| PeakEnd::from(p);
        SocketStates {
            established: pe(&s.established),
            syn_recv: pe(&s.syn_recv),
            time_wait: pe(&s.time_wait),
            close_wait: pe(&s.close_wait),
            fin_wait2: pe(&s.fin_wait2),
            sockstat_time_wait: s.sockstat_time_wait.as_ref().map(pe),
            orphan: s.orphan.as_ref().map(pe),
            partial: s.partial,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConntrackView {
    pub start: u64,
    pub end: u64,
    pub peak: u64,
    pub max: Option<u64>,
    pub drop: Option<u64>,
    pub early_drop: Option<u64>,
    pub insert_failed: Option<u64>,
    pub stat_withheld: Option<String>,
}

crate::from_fields!(netrig_metrics::host::ConntrackView => ConntrackView {
    start, end, peak, max, drop, early_drop, insert_failed, stat_withheld,
});

/// `watch_end`'s answer: what the agent's host saw over the watch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    pub window_s: f64,
    pub samples: u32,
    pub limit_s: Option<f64>,
    pub cpu: Option<CpuUsage>,
    pub busiest_cpu: Option<CpuSplit>,
    pub cpu_withheld: Option<String>,
    pub counters: BTreeMap<String, i64>,
    pub counters_withheld: Option<String>,
    pub conntrack: Option<ConntrackView>,
    pub conntrack_withheld: Option<String>,
    pub sockets: Option<SocketStates>,
    pub sockets_withheld: Option<String>,
    pub sysctls: BTreeMap<String, u64>,
}

impl From<&netrig_metrics::host::HostView> for HostView {
    fn from(v: &netrig_metrics::host::HostView) -> Self {
        HostView {
            window_s: v.window_s,
            samples: v.samples,
            limit_s: v.limit_s,
            cpu: v.cpu.as_ref().map(CpuUsage::from),
            busiest_cpu: v.busiest_cpu.as_ref().map(CpuSplit::from),
            cpu_withheld: v.cpu_withheld.clone(),
            counters: v.counters.clone(),
            counters_withheld: v.counters_withheld.clone(),
            conntrack: v.conntrack.as_ref().map(ConntrackView::from),
            conntrack_withheld: v.conntrack_withheld.clone(),
            sockets: v.sockets.as_ref().map(SocketStates::from),
            sockets_withheld: v.sockets_withheld.clone(),
            sysctls: v.sysctls.clone(),
        }
    }
}

impl HostView {
    /// Checks a view that came from a peer: every length, count and figure
    /// within the bounds a client takes (`max_window_s`: the longest watch
    /// the agent may run, from its welcome), so that nothing computed or
    /// printed from it can blow up.
    pub fn check(&self, max_window_s: f64) -> Result<(), ProtoError> {
        let bad = |what: String| Err(ProtoError::Violation(format!("the agent's host view has {what}")));
        let seconds_ok = |s: f64| s.is_finite() && (0.0..=max_window_s).contains(&s);
        if !seconds_ok(self.window_s) {
            return bad(format!(
                "a window of {} s, outside 0 to {max_window_s} s (the agent's longest watch)",
                self.window_s
            ));
        }
        if let Some(l) = self.limit_s.filter(|l| !seconds_ok(*l)) {
            return bad(format!("limit_s {l}, outside 0 to {max_window_s} s"));
        }
        if self.counters.len() > MAX_VIEW_COUNTERS {
            return bad(format!(
                "{} counters, over the {MAX_VIEW_COUNTERS} a client takes",
                self.counters.len()
            ));
        }
        if self.sysctls.len() > MAX_VIEW_SYSCTLS {
            return bad(format!(
                "{} sysctls, over the {MAX_VIEW_SYSCTLS} a client takes",
                self.sysctls.len()
            ));
        }
        let long_name = self
            .counters
            .keys()
            .chain(self.sysctls.keys())
            .find(|k| k.len() > MAX_VIEW_NAME);
        if let Some(k) = long_name {
            return bad(format!(
                "a name of {} bytes, over the {MAX_VIEW_NAME} a client takes",
                k.len()
            ));
        }
        let reasons = [
            &self.cpu_withheld,
            &self.counters_withheld,
            &self.conntrack_withheld,
            &self.sockets_withheld,
            &self.conntrack.as_ref().and_then(|c| c.stat_withheld.clone()),
        ];
        if let Some(r) = reasons
            .iter()
            .filter_map(|r| r.as_ref())
            .find(|r| r.len() > MAX_VIEW_REASON)
        {
            return bad(format!(
                "a reason of {} bytes, over the {MAX_VIEW_REASON} a client takes",
                r.len()
            ));
        }
        let pct_ok = |p: f64| p.is_finite() && (0.0..=100.0 + 1e-6).contains(&p);
        if let Some(c) = &self.cpu {
            let all = [
                c.busy_pct,
                c.user_pct,
                c.nice_pct,
                c.system_pct,
                c.irq_pct,
                c.softirq_pct,
                c.steal_pct,
                c.iowait_pct,
                c.busiest_cpu_pct,
            ];
            // CPU-seconds: at most the window times the CPUs.
            let cpu_s_max = max_window_s * f64::from(MAX_VIEW_CPUS);
            let cpu_s_ok = |s: f64| s.is_finite() && (0.0..=cpu_s_max).contains(&s);
            if !all.into_iter().all(pct_ok)
                || c.cpus > MAX_VIEW_CPUS
                || !cpu_s_ok(c.busy_cpu_s)
                || !cpu_s_ok(c.elapsed_cpu_s)
                || c.busy_cpu_s > c.elapsed_cpu_s
            {
                return bad(format!("CPU figures out of bounds ({c:?})"));
            }
        }
        if let Some(b) = &self.busiest_cpu {
            let all = [
                b.busy_pct,
                b.user_pct,
                b.system_pct,
                b.irq_pct,
                b.softirq_pct,
                b.iowait_pct,
                b.steal_pct,
            ];
            if !all.into_iter().all(pct_ok) || b.cpu > MAX_VIEW_CPUS {
                return bad(format!("the busiest CPU's figures out of bounds ({b:?})"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> HostView {
        HostView {
            window_s: 10.0,
            samples: 9,
            counters: BTreeMap::from([("TcpExt.ListenOverflows".to_string(), 3412)]),
            sysctls: BTreeMap::from([("net.core.somaxconn".to_string(), 4096)]),
            cpu: Some(CpuUsage {
                busy_pct: 50.0,
                cpus: 2,
                elapsed_cpu_s: 20.0,
                busy_cpu_s: 10.0,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_view_from_a_peer_is_bounded() {
        assert!(view().check(3600.0).is_ok());
        let mut many = view();
        many.counters = (0..=MAX_VIEW_COUNTERS).map(|i| (format!("C.{i}"), 1)).collect();
        let mut long = view();
        long.sysctls.insert("n".repeat(MAX_VIEW_NAME + 1), 1);
        let mut reason = view();
        reason.sockets_withheld = Some("r".repeat(MAX_VIEW_REASON + 1));
        let mut window = view();
        window.window_s = 3601.0;
        let mut pct = view();
        pct.cpu.as_mut().unwrap().softirq_pct = 1e300;
        let mut cpu_s = view();
        cpu_s.cpu.as_mut().unwrap().busy_cpu_s = 21.0;
        for bad in [many, long, reason, window, pct, cpu_s] {
            let e = bad.check(3600.0).unwrap_err().to_string();
            assert!(e.contains("the agent's host view has"), "{e}");
        }
    }

    #[test]
    fn converts_from_the_measurement() {
        let mut w = netrig_metrics::host::HostWatch::start();
        w.sample();
        let m = w.finish(Some(1.0));
        let v = HostView::from(&m);
        assert_eq!(v.samples, 1);
        assert_eq!(v.limit_s, Some(1.0));
        assert_eq!(v.counters, m.counters);
        assert_eq!(v.sockets.is_some(), m.sockets.is_some());
        assert_eq!(
            v.sockets.map(|s| s.time_wait.peak),
            m.sockets.as_ref().map(|s| s.time_wait.peak)
        );
        let back: HostView =
            serde_json::from_str(&serde_json::to_string(&HostView::from(&m)).unwrap()).unwrap();
        assert_eq!(back, HostView::from(&m));
    }
}
