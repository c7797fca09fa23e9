//! `profile`: where each end's CPU time went over the measured window (`--profile`,
//! docs/PROFILE.md), or why it is withheld. Names and counts only, never addresses. The
//! result's `profile` holds these (netrig-document re-exports them), and an agent's report
//! carries its own end's ([`crate::report::SideReport::profile`]).

pub mod bounds;

use serde::{Deserialize, Serialize};

/// Each end's profile, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileResult {
    pub local: EndProfile,
    pub remote: EndProfile,
}

/// One end: its profile, or the reason it is withheld.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EndProfile {
    Withheld { withheld: String },
    Profiled(Box<Profiled>),
}

impl EndProfile {
    pub fn profiled(&self) -> Option<&Profiled> {
        match self {
            EndProfile::Profiled(p) => Some(p),
            EndProfile::Withheld { .. } => None,
        }
    }

    pub fn withheld(&self) -> Option<&str> {
        match self {
            EndProfile::Withheld { withheld } => Some(withheld),
            EndProfile::Profiled(_) => None,
        }
    }
}

/// Samples and the CPU time they stand for (their periods summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleCount {
    pub samples: u64,
    pub cpu_ms: f64,
}

/// The samples of this test's process against the rest of the host, each in process and
/// softirq context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileSplit {
    pub this_test_process: SampleCount,
    pub this_test_softirq: SampleCount,
    pub rest_process: SampleCount,
    pub rest_softirq: SampleCount,
}

/// One subsystem's samples (docs/PROFILE.md, "The groups").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileGroup {
    pub group: String,
    pub samples: u64,
    pub cpu_ms: f64,
    /// % of the busy samples (every group but idle); absent for idle.
    pub share_of_busy_pct: Option<f64>,
    /// The group's CPU time per unit of work of this end's window (`demand_unit`); absent for
    /// idle and where the window moved nothing.
    pub demand: Option<f64>,
}

/// One function's samples: as the leaf (self) and anywhere in the stack (inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFunction {
    pub name: String,
    pub self_samples: u64,
    pub inclusive_samples: u64,
}

/// One folded stack: `comm;root;...;leaf` and its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldedStack {
    pub stack: String,
    pub samples: u64,
}

/// Sampled busy time against /proc/stat's busy time over the same window, all CPUs, judged
/// (docs/PROFILE.md, "The witness").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileWitness {
    pub sampled_busy_ms: f64,
    /// user + nice + system + irq + softirq (steal is apart: cpu-clock cannot sample it).
    pub stat_busy_ms: f64,
    /// sampled / counted; absent where the kernel counted no busy time.
    pub ratio: Option<f64>,
    /// Time the hypervisor stole from these CPUs in the window (/proc/stat's steal).
    #[serde(default)]
    pub stat_steal_ms: f64,
    /// What /proc/stat resolves over this window, in % of its busy time (its ticks at the
    /// window's edges, and the spread of ticks and samples where the CPUs were part idle).
    #[serde(default)]
    pub resolution_pct: Option<f64>,
    /// The band the ratio is judged by, in %: 5, or the resolution where that is wider.
    #[serde(default)]
    pub band_pct: Option<f64>,
    /// `agrees`, `disagrees` or `unresolved` (the window too short or too idle for /proc/stat
    /// to judge it); absent in results of builds before it.
    #[serde(default)]
    pub verdict: Option<String>,
    /// Why, in words, where it does not agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A kernel count over the window, or why it is withheld.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KernelCount<T> {
    Withheld { withheld: String },
    Counted(T),
}

impl<T> Default for KernelCount<T> {
    /// A result of a build before these counts.
    fn default() -> Self {
        KernelCount::Withheld {
            withheld: "not counted by the build that wrote this result".into(),
        }
    }
}

/// One CPU's NET_RX and NET_TX softirq handler runs over the window (/proc/softirqs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCpuCount {
    pub cpu: u32,
    pub net_rx: u64,
    pub net_tx: u64,
}

/// NET_RX and NET_TX over the window, all CPUs and per CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCounts {
    pub net_rx: u64,
    pub net_tx: u64,
    pub per_cpu: Vec<SoftirqCpuCount>,
}

/// One CPU's /proc/net/softnet_stat counters over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftnetCpuCount {
    pub cpu: u32,
    /// Packets the receive path processed.
    pub processed: u64,
    /// Packets dropped at a full backlog (netdev_max_backlog).
    pub dropped: u64,
    /// Times net_rx_action stopped with work left (out of budget or time).
    pub time_squeeze: u64,
    pub received_rps: u64,
    pub flow_limit_count: u64,
}

/// softnet_stat over the window, all CPUs (`total`, its `cpu` is 0) and per CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftnetCounts {
    pub total: SoftnetCpuCount,
    pub per_cpu: Vec<SoftnetCpuCount>,
}

/// An end's profile over its measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profiled {
    /// How long sampling was enabled (the measured window's edges).
    pub window_s: f64,
    pub cpus: u32,
    pub frequency_hz: u64,
    /// Every sample read.
    pub samples: u64,
    /// The samples of every group but idle.
    pub busy_samples: u64,
    /// Samples the kernel could not write (its ring buffer was full).
    pub lost_samples: u64,
    /// Samples read but not folded (past the sampler's caps).
    pub dropped_samples: u64,
    /// Times the kernel throttled a CPU's sampling until its next tick (an idle CPU whose tick
    /// is stopped, after perf_event_max_sample_rate / HZ samples): its idle is under-sampled.
    #[serde(default)]
    pub throttles: u64,
    pub split: ProfileSplit,
    /// "us/KB" (KB = 1024 bytes moved by this end in the window) or "us/tran".
    pub demand_unit: String,
    /// Most samples first.
    pub groups: Vec<ProfileGroup>,
    /// The most inclusive samples first.
    pub top_functions: Vec<ProfileFunction>,
    /// The heaviest stacks, at most `folded_kept` of `folded_total`.
    pub folded: Vec<FoldedStack>,
    pub folded_total: u64,
    pub witness: Option<ProfileWitness>,
    /// NET_RX and NET_TX softirqs over the window (/proc/softirqs), or why withheld.
    #[serde(default)]
    pub softirqs: KernelCount<SoftirqCounts>,
    /// /proc/net/softnet_stat over the window, or why withheld.
    #[serde(default)]
    pub softnet: KernelCount<SoftnetCounts>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_reads_back_as_withheld_or_profiled() {
        let withheld = EndProfile::Withheld {
            withheld: "profile withheld: no".into(),
        };
        let json = serde_json::to_string(&withheld).unwrap();
        assert_eq!(json, r#"{"withheld":"profile withheld: no"}"#);
        let back: EndProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back.withheld(), Some("profile withheld: no"));
        let profiled = EndProfile::Profiled(Box::new(Profiled {
            window_s: 2.0,
            cpus: 2,
            frequency_hz: 999,
            samples: 10,
            busy_samples: 8,
            lost_samples: 0,
            dropped_samples: 0,
            throttles: 0,
            split: ProfileSplit::default(),
            demand_unit: "us/KB".into(),
            groups: vec![],
            top_functions: vec![],
            folded: vec![FoldedStack {
                stack: "netrig;tcp_sendmsg".into(),
                samples: 8,
            }],
            folded_total: 1,
            witness: None,
            softirqs: KernelCount::Counted(SoftirqCounts {
                net_rx: 3,
                net_tx: 1,
                per_cpu: vec![SoftirqCpuCount {
                    cpu: 0,
                    net_rx: 3,
                    net_tx: 1,
                }],
            }),
            softnet: KernelCount::Withheld {
                withheld: "reading /proc/net/softnet_stat: No such file or directory".into(),
            },
        }));
        let back: EndProfile = serde_json::from_str(&serde_json::to_string(&profiled).unwrap()).unwrap();
        assert_eq!(back, profiled);
        assert!(back.profiled().is_some() && back.withheld().is_none());
        // A result of an older build (no softirq counts, a bare witness) still reads.
        let mut old: serde_json::Value = serde_json::to_value(&profiled).unwrap();
        let map = old.as_object_mut().unwrap();
        map.remove("softirqs");
        map.remove("softnet");
        map.insert(
            "witness".into(),
            serde_json::json!({"sampled_busy_ms": 1.0, "stat_busy_ms": 1.0, "ratio": 1.0}),
        );
        let back: Profiled = serde_json::from_value(old).unwrap();
        assert!(matches!(back.softirqs, KernelCount::Withheld { .. }));
        assert_eq!(back.witness.unwrap().verdict, None);
    }
}
