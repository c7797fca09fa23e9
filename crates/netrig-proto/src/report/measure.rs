//! The measurements as they travel: the protocol's own copy of each
//! netrig-metrics type that a report carries, with a conversion from it
//! ([`from_fields!`](crate::from_fields)). A field renamed in netrig-metrics
//! stops the conversion from compiling; it never renames a field on the
//! wire. Changing a type here changes the protocol: do it on purpose, with
//! the protocol version and docs/PROTOCOL.md (the snapshots in
//! `tests/wire.rs` show it).
//!
//! Field order is the order on the wire. What each field means is said once,
//! on the netrig-metrics type it comes from.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A socket's TCP_INFO when it was read (`netrig_metrics::TcpInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    pub state: u8,
    pub retransmits_total: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub reordering: u32,
    pub pmtu: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub delivery_rate_bps: Option<u64>,
    /// Absent from peers that did not send it.
    #[serde(default)]
    pub delivery_rate_app_limited: Option<bool>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub lost: u32,
    pub congestion_control: Option<String>,
    /// These four: absent from peers that did not send them.
    #[serde(default)]
    pub busy_us: Option<u64>,
    #[serde(default)]
    pub rwnd_limited_us: Option<u64>,
    #[serde(default)]
    pub sndbuf_limited_us: Option<u64>,
    #[serde(default)]
    pub notsent_bytes: Option<u32>,
}

crate::from_fields!(netrig_metrics::TcpInfo => TcpInfo {
    state, retransmits_total, rtt_us, rttvar_us, snd_cwnd, snd_ssthresh, reordering, pmtu, snd_mss,
    rcv_mss, delivery_rate_bps, delivery_rate_app_limited, bytes_acked, bytes_received, lost,
    congestion_control, busy_us, rwnd_limited_us, sndbuf_limited_us, notsent_bytes,
});

/// Whole-machine CPU over an end's window, in % of the machine
/// (`netrig_metrics::CpuUsage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    pub busy_pct: f64,
    pub user_pct: f64,
    pub nice_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    pub iowait_pct: f64,
    pub cpus: u32,
    pub busiest_cpu: Option<u32>,
    pub busiest_cpu_pct: f64,
    pub elapsed_cpu_s: f64,
    pub busy_cpu_s: f64,
}

crate::from_fields!(netrig_metrics::CpuUsage => CpuUsage {
    busy_pct, user_pct, nice_pct, system_pct, irq_pct, softirq_pct, steal_pct, iowait_pct, cpus,
    busiest_cpu, busiest_cpu_pct, elapsed_cpu_s, busy_cpu_s,
});

/// An end's machine: kernel, CPUs, networking sysctls
/// (`netrig_metrics::Environment`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub kernel_version: String,
    pub arch: String,
    pub cpu_model: Option<String>,
    pub cpus_online: u32,
    pub sysctls: BTreeMap<String, String>,
    pub steal_pct_since_boot: Option<f64>,
    pub virtualization: Option<String>,
}

crate::from_fields!(netrig_metrics::Environment => Environment {
    hostname, kernel, kernel_version, arch, cpu_model, cpus_online, sysctls, steal_pct_since_boot,
    virtualization,
});

/// Transaction latency in µs, from an HdrHistogram
/// (`netrig_metrics::LatencySummary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// This and the next three are absent from peers that did not send them.
    #[serde(default)]
    pub p75_us: f64,
    #[serde(default)]
    pub p95_us: f64,
    #[serde(default)]
    pub p9999_us: f64,
    #[serde(default)]
    pub p99999_us: f64,
    pub max_us: f64,
    pub min_us: f64,
    pub stddev_us: f64,
    pub clamped: u64,
}

crate::from_fields!(netrig_metrics::LatencySummary => LatencySummary {
    count, mean_us, p50_us, p90_us, p99_us, p999_us, p75_us, p95_us, p9999_us, p99999_us, max_us,
    min_us, stddev_us, clamped,
});

/// A UDP receiver's sequence accounting over the whole test
/// (`netrig_metrics::SeqSummary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqSummary {
    pub received: u64,
    pub lost: u64,
    pub expected: u64,
    pub loss_pct: f64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub jitter_us: f64,
    pub highest_seq: Option<u64>,
}

crate::from_fields!(netrig_metrics::SeqSummary => SeqSummary {
    received, lost, expected, loss_pct, out_of_order, duplicates, jitter_us, highest_seq,
});

/// A UDP receiver's accounting over one period (`netrig_metrics::SeqInterval`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqInterval {
    pub received: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub jitter_us: f64,
    /// This and the next two are absent from peers that did not send them.
    #[serde(default)]
    pub jitter_pairs: u64,
    #[serde(default)]
    pub jitter_mean_us: Option<f64>,
    #[serde(default)]
    pub untimed: u64,
    /// Of `untimed`, those whose send time was more than a minute from the
    /// receiver's clock (`netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS`); absent
    /// when none was, and from peers that did not count them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub far: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

crate::from_fields!(netrig_metrics::SeqInterval => SeqInterval {
    received, lost, out_of_order, duplicates, jitter_us, jitter_pairs, jitter_mean_us, untimed, far,
});

/// One interface's statistics over a span (`netrig_metrics::InterfaceCounters`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

crate::from_fields!(netrig_metrics::InterfaceCounters => InterfaceCounters {
    name, rx_bytes, tx_bytes, rx_packets, tx_packets, rx_dropped, tx_dropped,
});

/// The connection-tracking table's fill (`netrig_metrics::Conntrack`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conntrack {
    pub count: u64,
    pub max: u64,
}

crate::from_fields!(netrig_metrics::Conntrack => Conntrack { count, max });

/// Every conversion with every field set, each to its own value: a field
/// dropped, or taken from the wrong source, shows as a wrong key or value.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, to_value};

    fn wire<M, W: for<'a> From<&'a M> + Serialize>(m: &M) -> serde_json::Value {
        to_value(W::from(m)).unwrap()
    }

    #[test]
    fn tcp_info_travels_whole() {
        let m = netrig_metrics::TcpInfo {
            state: 1,
            retransmits_total: 2,
            rtt_us: 3,
            rttvar_us: 4,
            snd_cwnd: 5,
            snd_ssthresh: 6,
            reordering: 7,
            pmtu: 8,
            snd_mss: 9,
            rcv_mss: 10,
            delivery_rate_bps: Some(11),
            delivery_rate_app_limited: Some(true),
            bytes_acked: Some(12),
            bytes_received: Some(13),
            lost: 14,
            congestion_control: Some("bbr".into()),
            busy_us: Some(15),
            rwnd_limited_us: Some(16),
            sndbuf_limited_us: Some(17),
            notsent_bytes: Some(18),
        };
        assert_eq!(
            wire::<_, TcpInfo>(&m),
            json!({"state": 1, "retransmits_total": 2, "rtt_us": 3, "rttvar_us": 4, "snd_cwnd": 5,
                "snd_ssthresh": 6, "reordering": 7, "pmtu": 8, "snd_mss": 9, "rcv_mss": 10,
                "delivery_rate_bps": 11, "delivery_rate_app_limited": true, "bytes_acked": 12,
                "bytes_received": 13, "lost": 14, "congestion_control": "bbr", "busy_us": 15,
                "rwnd_limited_us": 16, "sndbuf_limited_us": 17, "notsent_bytes": 18})
        );
    }

    #[test]
    fn cpu_usage_travels_whole() {
        let m = netrig_metrics::CpuUsage {
            busy_pct: 1.5,
            user_pct: 2.5,
            nice_pct: 3.5,
            system_pct: 4.5,
            irq_pct: 5.5,
            softirq_pct: 6.5,
            steal_pct: 7.5,
            iowait_pct: 8.5,
            cpus: 9,
            busiest_cpu: Some(10),
            busiest_cpu_pct: 11.5,
            elapsed_cpu_s: 12.5,
            busy_cpu_s: 13.5,
        };
        assert_eq!(
            wire::<_, CpuUsage>(&m),
            json!({"busy_pct": 1.5, "user_pct": 2.5, "nice_pct": 3.5, "system_pct": 4.5, "irq_pct": 5.5,
                "softirq_pct": 6.5, "steal_pct": 7.5, "iowait_pct": 8.5, "cpus": 9, "busiest_cpu": 10,
                "busiest_cpu_pct": 11.5, "elapsed_cpu_s": 12.5, "busy_cpu_s": 13.5})
        );
    }

    #[test]
    fn environment_travels_whole() {
        let m = netrig_metrics::Environment {
            hostname: "h".into(),
            kernel: "k".into(),
            kernel_version: "kv".into(),
            arch: "a".into(),
            cpu_model: Some("m".into()),
            cpus_online: 6,
            sysctls: [("net.core.rmem_max".to_string(), "7".to_string())].into(),
            steal_pct_since_boot: Some(8.5),
            virtualization: Some("hypervisor".into()),
        };
        assert_eq!(
            wire::<_, Environment>(&m),
            json!({"hostname": "h", "kernel": "k", "kernel_version": "kv", "arch": "a", "cpu_model": "m",
                "cpus_online": 6, "sysctls": {"net.core.rmem_max": "7"}, "steal_pct_since_boot": 8.5,
                "virtualization": "hypervisor"})
        );
    }

    #[test]
    fn latency_summary_travels_whole() {
        let m = netrig_metrics::LatencySummary {
            count: 1,
            mean_us: 2.5,
            p50_us: 3.5,
            p90_us: 4.5,
            p99_us: 5.5,
            p999_us: 6.5,
            p75_us: 7.5,
            p95_us: 8.5,
            p9999_us: 9.5,
            p99999_us: 10.5,
            max_us: 11.5,
            min_us: 12.5,
            stddev_us: 13.5,
            clamped: 14,
        };
        assert_eq!(
            wire::<_, LatencySummary>(&m),
            json!({"count": 1, "mean_us": 2.5, "p50_us": 3.5, "p90_us": 4.5, "p99_us": 5.5, "p999_us": 6.5,
                "p75_us": 7.5, "p95_us": 8.5, "p9999_us": 9.5, "p99999_us": 10.5, "max_us": 11.5,
                "min_us": 12.5, "stddev_us": 13.5, "clamped": 14})
        );
    }

    #[test]
    fn udp_accounting_travels_whole() {
        let summary = netrig_metrics::SeqSummary {
            received: 1,
            lost: 2,
            expected: 3,
            loss_pct: 4.5,
            out_of_order: 5,
            duplicates: 6,
            jitter_us: 7.5,
            highest_seq: Some(8),
        };
        let summary_json = json!({"received": 1, "lost": 2, "expected": 3, "loss_pct": 4.5, "out_of_order": 5,
            "duplicates": 6, "jitter_us": 7.5, "highest_seq": 8});
        assert_eq!(wire::<_, SeqSummary>(&summary), summary_json);
        let m = netrig_metrics::SeqInterval {
            received: 1,
            lost: 2,
            out_of_order: 3,
            duplicates: 4,
            jitter_us: 5.5,
            jitter_pairs: 6,
            jitter_mean_us: Some(7.5),
            untimed: 8,
            far: 9,
        };
        let interval_json = json!({"received": 1, "lost": 2, "out_of_order": 3, "duplicates": 4, "jitter_us": 5.5,
            "jitter_pairs": 6, "jitter_mean_us": 7.5, "untimed": 8, "far": 9});
        assert_eq!(wire::<_, SeqInterval>(&m), interval_json);
        // None far: not on the wire, as from a peer that does not count them.
        let none = netrig_metrics::SeqInterval { far: 0, ..m };
        assert!(serde_json::to_value(SeqInterval::from(&none))
            .unwrap()
            .get("far")
            .is_none());
    }

    #[test]
    fn host_counters_travel_whole() {
        let m = netrig_metrics::InterfaceCounters {
            name: "eth0".into(),
            rx_bytes: 1,
            tx_bytes: 2,
            rx_packets: 3,
            tx_packets: 4,
            rx_dropped: 5,
            tx_dropped: 6,
        };
        assert_eq!(
            wire::<_, InterfaceCounters>(&m),
            json!({"name": "eth0", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4,
                "rx_dropped": 5, "tx_dropped": 6})
        );
        let m = netrig_metrics::Conntrack { count: 1, max: 2 };
        assert_eq!(wire::<_, Conntrack>(&m), json!({"count": 1, "max": 2}));
    }
}
