//! The measurements as the result document holds them: the result's own
//! copy of each measurement type it embeds, converted from the wire's
//! (`netrig_proto::report::measure`) as the client assembles the result
//! ([`from_fields!`](netrig_proto::from_fields)). A field renamed on the
//! wire or in netrig-metrics stops a conversion from compiling; it never
//! renames a key of the result. Changing a type here changes the result
//! document: do it on purpose, with docs/result.schema.json and
//! docs/RESULTS.md.
//!
//! Field order is the order of the keys in `--json`.

use netrig_proto::report::measure as wire;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `flows[].tcp_info`, `flows[].local.tcp_info`, `intervals[].flows[].tcp_info`:
/// a socket's TCP_INFO (the schema's `tcp_info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    pub state: u8,
    pub retransmits_total: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    /// `0x7fffffff` ([`netrig_metrics::tcp_info::TCP_INFINITE_SSTHRESH`]): still in slow start.
    pub snd_ssthresh: u32,
    pub reordering: u32,
    pub pmtu: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub delivery_rate_bps: Option<u64>,
    /// Absent from results written before netrig reported it.
    #[serde(default)]
    pub delivery_rate_app_limited: Option<bool>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub lost: u32,
    pub congestion_control: Option<String>,
    /// These four: absent from results written before netrig reported them.
    #[serde(default)]
    pub busy_us: Option<u64>,
    #[serde(default)]
    pub rwnd_limited_us: Option<u64>,
    #[serde(default)]
    pub sndbuf_limited_us: Option<u64>,
    #[serde(default)]
    pub notsent_bytes: Option<u32>,
}

netrig_proto::from_fields!(wire::TcpInfo => TcpInfo {
    state, retransmits_total, rtt_us, rttvar_us, snd_cwnd, snd_ssthresh, reordering, pmtu, snd_mss,
    rcv_mss, delivery_rate_bps, delivery_rate_app_limited, bytes_acked, bytes_received, lost,
    congestion_control, busy_us, rwnd_limited_us, sndbuf_limited_us, notsent_bytes,
});

/// `summary.cpu.local` and `.remote`: an end's whole-machine CPU over its
/// window, each `*_pct` but `busiest_cpu_pct` in % of the machine.
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
    /// Of that one CPU's time.
    pub busiest_cpu_pct: f64,
    pub elapsed_cpu_s: f64,
    pub busy_cpu_s: f64,
}

netrig_proto::from_fields!(wire::CpuUsage => CpuUsage {
    busy_pct, user_pct, nice_pct, system_pct, irq_pct, softirq_pct, steal_pct, iowait_pct, cpus,
    busiest_cpu, busiest_cpu_pct, elapsed_cpu_s, busy_cpu_s,
});

/// `environment.local` and `.remote`: an end's machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub kernel_version: String,
    pub arch: String,
    pub cpu_model: Option<String>,
    pub cpus_online: u32,
    /// The networking sysctls that bound a test, by dotted name.
    pub sysctls: BTreeMap<String, String>,
    pub steal_pct_since_boot: Option<f64>,
    pub virtualization: Option<String>,
}

netrig_proto::from_fields!(wire::Environment => Environment {
    hostname, kernel, kernel_version, arch, cpu_model, cpus_online, sysctls, steal_pct_since_boot,
    virtualization,
});

/// Every conversion from the wire with every field set, each to its own
/// value: a field dropped, or taken from the wrong source, shows as a wrong
/// key or value. (The result keeps the wire's keys today; should they part,
/// the expected document here says how.)
#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{json, Value};

    /// The result's JSON of what the wire sent as `sent`.
    fn result_of<W: DeserializeOwned, R: for<'a> From<&'a W> + Serialize>(sent: &Value) -> Value {
        let w: W = serde_json::from_value(sent.clone()).expect("every wire field given");
        serde_json::to_value(R::from(&w)).unwrap()
    }

    #[test]
    fn tcp_info_reaches_the_result_whole() {
        let v = json!({"state": 1, "retransmits_total": 2, "rtt_us": 3, "rttvar_us": 4, "snd_cwnd": 5,
            "snd_ssthresh": 6, "reordering": 7, "pmtu": 8, "snd_mss": 9, "rcv_mss": 10,
            "delivery_rate_bps": 11, "delivery_rate_app_limited": false, "bytes_acked": 12,
            "bytes_received": 13, "lost": 14, "congestion_control": "cubic", "busy_us": 15,
            "rwnd_limited_us": 16, "sndbuf_limited_us": 17, "notsent_bytes": 18});
        assert_eq!(result_of::<wire::TcpInfo, TcpInfo>(&v), v);
    }

    #[test]
    fn cpu_usage_reaches_the_result_whole() {
        let v = json!({"busy_pct": 1.25, "user_pct": 2.25, "nice_pct": 3.25, "system_pct": 4.25,
            "irq_pct": 5.25, "softirq_pct": 6.25, "steal_pct": 7.25, "iowait_pct": 8.25, "cpus": 9,
            "busiest_cpu": 10, "busiest_cpu_pct": 11.25, "elapsed_cpu_s": 12.25, "busy_cpu_s": 13.25});
        assert_eq!(result_of::<wire::CpuUsage, CpuUsage>(&v), v);
    }

    #[test]
    fn environment_reaches_the_result_whole() {
        let v = json!({"hostname": "host", "kernel": "6.8", "kernel_version": "#1", "arch": "x86_64",
            "cpu_model": "cpu", "cpus_online": 4, "sysctls": {"net.core.wmem_max": "212992"},
            "steal_pct_since_boot": 0.5, "virtualization": "kvm"});
        assert_eq!(result_of::<wire::Environment, Environment>(&v), v);
    }

    /// The result's latency keys are its own (`p99`, not the wire's `p99_us`).
    #[test]
    fn latency_reaches_the_result_under_its_own_keys() {
        let sent = json!({"count": 1, "mean_us": 2.5, "p50_us": 3.5, "p90_us": 4.5, "p99_us": 5.5,
            "p999_us": 6.5, "p75_us": 7.5, "p95_us": 8.5, "p9999_us": 9.5, "p99999_us": 10.5,
            "max_us": 11.5, "min_us": 12.5, "stddev_us": 13.5, "clamped": 14});
        assert_eq!(
            result_of::<wire::LatencySummary, crate::result::LatencyUs>(&sent),
            json!({"count": 1, "mean": 2.5, "stddev": 13.5, "min": 12.5, "p50": 3.5, "p90": 4.5,
                "p99": 5.5, "p999": 6.5, "max": 11.5, "p75": 7.5, "p95": 8.5, "p9999": 9.5,
                "p99999": 10.5, "histogram": null})
        );
    }
}
