//! Warnings drawn from the figures themselves: a result that deserves doubt
//! says so next to the numbers.

use crate::model::Summary;
use netrig_proto::report::measure::CpuUsage;
use netrig_proto::report::SideReport;
use netrig_proto::spec::Transport;

/// Busy share of one worker thread above which netrig may be the bottleneck.
pub const WORKER_BUSY_PCT: f64 = 90.0;
/// Conntrack fill above which new connections are at risk.
pub const CONNTRACK_FULL: f64 = 0.9;

/// Steal, in % of the machine's CPU time over the window, above which a
/// warning says so (docs/RESULTS.md, "Steal"): below it, what the hypervisor
/// took is smaller than the run-to-run spread of these VMs. The figure is
/// always in the result (`summary.cpu.*.steal_pct`) and the table.
pub const STEAL_WARN_PCT: f64 = 2.0;

/// Jain's fairness index below which unequal sharing gets a warning: for two
/// flows, 0.9 is a 1:2 split ((1+2)² / (2 × (1+4)) = 0.9).
pub const FAIRNESS_WARN: f64 = 0.9;

/// /proc/stat coverage of a window below which the split deserves a word.
pub const ACCOUNTED_MIN_PCT: f64 = 85.0;

/// How much of wall time × CPUs /proc/stat accounted for in the window.
pub fn accounted_pct(side: &SideReport) -> Option<f64> {
    let (cpu, wall) = (side.cpu.as_ref()?, side.cpu_window_s?);
    let cpus = if cpu.cpus > 0 {
        cpu.cpus
    } else {
        side.environment.as_ref()?.cpus_online
    };
    (wall > 0.0 && cpus > 0).then(|| cpu.elapsed_cpu_s / (wall * cpus as f64) * 100.0)
}

/// `/proc/stat`'s unit, in seconds: `USER_HZ`, 100 a second on every
/// architecture Linux supports (netrig-metrics reads `_SC_CLK_TCK`).
pub const PROC_STAT_TICK_S: f64 = 0.01;

/// Busy ticks per CPU below which utilisation is shown with a warning of
/// its precision: each CPU's busy count over a window may be a tick off
/// (the kernel's cumulative counts are cut to whole ticks at both reads),
/// so below ten a CPU the figure may be more than 10 % off.
pub const CPU_COARSE_TICKS_PER_CPU: f64 = 10.0;

/// How far an end's CPU utilisation can be told from its `/proc/stat`
/// ticks.
#[derive(Debug, Clone, PartialEq)]
pub enum CpuResolution {
    /// Measured to within 10 %.
    Fine,
    /// Shown, with this warning of its precision (without the end).
    Coarse(String),
    /// Below the counters' resolution (fewer busy ticks than CPUs, which
    /// may each be a tick off): utilisation and service demand are withheld,
    /// for this reason (without the end).
    Withheld(String),
}

/// The resolution of `side`'s CPU figures (none measured: `Fine`).
pub fn cpu_resolution(side: &SideReport) -> CpuResolution {
    match &side.cpu {
        Some(cpu) => cpu_resolution_of(
            cpu,
            side.cpu_window_s,
            side.environment.as_ref().map(|e| e.cpus_online),
        ),
        None => CpuResolution::Fine,
    }
}

/// The resolution of `cpu`, measured over `window_s` (wall time; else its
/// accounted time per CPU) on a machine of `cpus_online` (where `cpu` has
/// no per-CPU lines).
pub fn cpu_resolution_of(cpu: &CpuUsage, window_s: Option<f64>, cpus_online: Option<u32>) -> CpuResolution {
    let cpus = match cpu.cpus {
        0 => cpus_online.unwrap_or(1).max(1),
        n => n,
    };
    let ticks = (cpu.busy_cpu_s / PROC_STAT_TICK_S).round().max(0.0);
    let per_cpu = ticks / f64::from(cpus);
    // A tick per CPU, in points of the machine's utilisation, over the window.
    let window_s = window_s
        .filter(|w| *w > 0.0)
        .unwrap_or(cpu.elapsed_cpu_s / f64::from(cpus));
    let tick_pct = if window_s > 0.0 {
        PROC_STAT_TICK_S / window_s * 100.0
    } else {
        f64::INFINITY
    };
    let said = format!(
        "the busy time over the {window_s:.2} s window was {ticks:.0} tick(s) of /proc/stat (10 ms each) over \
         {cpus} CPU(s), and each CPU's count may be a tick off: /proc/stat's resolution here is {tick_pct:.2} \
         points of utilisation"
    );
    if per_cpu < 1.0 {
        CpuResolution::Withheld(format!(
            "CPU utilisation and service demand withheld: {said}, more than the figure itself; a longer run (-l) \
             or more work per second measures them"
        ))
    } else if per_cpu < CPU_COARSE_TICKS_PER_CPU {
        CpuResolution::Coarse(format!(
            "CPU utilisation ({:.2}%) and service demand are coarse: {said}, {:.0}% of the figure; a longer \
             run (-l) measures them better",
            cpu.busy_pct,
            100.0 / per_cpu
        ))
    } else {
        CpuResolution::Fine
    }
}

/// Where a host-wide counter's count comes from, said after it.
pub const HOST_WIDE: &str =
    "counted for the whole host (every program's sockets in its network namespace), not necessarily by this test";

/// Warnings about one end's CPU, threads, counters and conntrack table, for
/// a test over `transport`. `batched`: UDP GSO/GRO may have been on, so the
/// kernel's UDP counters count batches, not datagrams.
pub fn side_warnings(side: &SideReport, end: &str, transport: Transport, batched: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(cpu) = &side.cpu {
        if cpu.steal_pct > STEAL_WARN_PCT {
            out.push(format!(
                "{end}: the hypervisor took {:.2}% of the machine's CPU time in the window (steal; warned above \
                 {STEAL_WARN_PCT}%): other guests competed for this host's CPUs, so throughput may be lower, and \
                 utilisation and service demand (which count steal as busy) higher, than on a quiet host",
                cpu.steal_pct
            ));
        }
    }
    if let Some(a) = accounted_pct(side).filter(|a| *a < ACCOUNTED_MIN_PCT) {
        out.push(format!(
            "{end}: /proc/stat accounted for only {a:.0}% of the window's CPU time (wall time x CPUs); \
             utilisation is a share of what was accounted"
        ));
    }
    for w in &side.workers {
        if w.busy_pct >= WORKER_BUSY_PCT {
            out.push(format!(
                "{end}: netrig worker {} was {:.0}% busy ({} flow{}): the generator itself may be the bottleneck",
                w.worker,
                w.busy_pct,
                w.flows,
                if w.flows == 1 { "" } else { "s" }
            ));
        }
    }
    if let Some(c) = &side.counters {
        // Only the test's transport's: the counters are the whole host's
        // (see `TransportRules::loss_counters`).
        for (name, what) in transport.rules().loss_counters() {
            if let Some(n) = c.deltas.get(*name).filter(|n| **n > 0) {
                if batched && name.starts_with("Udp") {
                    // The kernel counts a GSO send or a GRO buffer once.
                    out.push(format!(
                        "{end}: {n} {} ({name}, in the kernel's units: a GRO buffer or GSO send of up to 64 \
                         datagrams counts once, so up to {} datagrams) during the test, {HOST_WIDE}",
                        what.replacen("UDP datagrams", "UDP receive buffers", 1).replacen(
                            "UDP sends",
                            "UDP send calls",
                            1
                        ),
                        n.saturating_mul(64)
                    ));
                } else {
                    out.push(format!("{end}: {n} {what} ({name}) during the test, {HOST_WIDE}"));
                }
            }
        }
        if let Some(ct) = c.conntrack.filter(|ct| ct.max > 0) {
            let fill = ct.count as f64 / ct.max as f64;
            if fill >= CONNTRACK_FULL {
                out.push(format!(
                    "{end}: the connection-tracking table is {:.0}% full ({} of {}, net.netfilter.nf_conntrack_max): \
                     new connections are at risk of being dropped",
                    fill * 100.0,
                    ct.count,
                    ct.max
                ));
            }
        }
    }
    out
}

/// A paced direction's senders below this share of the rate asked (`-b` ×
/// flows) get a warning: a schedule that never runs ahead by more than a
/// quantum and catches up when late keeps within a percent or two of it.
pub const PACE_SHORT_WARN: f64 = 0.90;

/// Warnings when a paced test's senders sent well below the rate asked
/// (`rate_bps` per flow): the offered load was not offered.
pub fn pace_warnings(rate_bps: Option<u64>, summary: &Summary) -> Vec<String> {
    let Some(rate) = rate_bps.filter(|r| *r > 0) else {
        return Vec::new();
    };
    let mbps = |b: f64| format!("{:.2}", b / 1e6);
    summary
        .directions
        .iter()
        .filter_map(|d| {
            let asked = rate as f64 * f64::from(d.flows);
            (d.sender_throughput_bps < asked * PACE_SHORT_WARN).then(|| {
                format!(
                    "{}: the senders fell behind the offered rate: {} of the {} 10^6bits/s asked (-b {} per flow, {} \
                     flow(s)) over the senders' window ({:.0}%); the sending end could not keep up (see the workers' busy \
                     %) or the path held it back (a full socket buffer; for TCP the receive window or congestion control)",
                    d.direction.name(),
                    mbps(d.sender_throughput_bps),
                    mbps(asked),
                    mbps(rate as f64),
                    d.flows,
                    d.sender_throughput_bps / asked * 100.0
                )
            })
        })
        .collect()
}

/// Warnings when flows, or the two directions of tcp-bidir, shared unequally
/// (Jain's index below [`FAIRNESS_WARN`]), from the summary's figures.
pub fn fairness_warnings(summary: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let mbps = |b: f64| format!("{:.2}", b / 1e6);
    for d in &summary.directions {
        if let Some(j) = d.fairness.filter(|j| *j < FAIRNESS_WARN) {
            out.push(format!(
                "{}: the {} flows shared unequally: Jain's fairness index {j:.3} over their receivers' throughput \
                 (min {}, max {} 10^6bits/s; 1 = equal shares, warned below {FAIRNESS_WARN}, a 1:2 split of two flows)",
                d.direction.name(),
                d.flows,
                mbps(d.flow_throughput_bps.min),
                mbps(d.flow_throughput_bps.max)
            ));
        }
    }
    if let Some(j) = summary.directions_fairness.filter(|j| *j < FAIRNESS_WARN) {
        let each: Vec<String> = summary
            .directions
            .iter()
            .map(|d| format!("{} {}", d.direction.name(), mbps(d.throughput_bps)))
            .collect();
        out.push(format!(
            "the directions shared unequally: Jain's fairness index {j:.3} between their throughputs ({} \
             10^6bits/s; 1 = equal shares, warned below {FAIRNESS_WARN})",
            each.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::report::measure::Conntrack;
    use netrig_proto::report::{CounterReport, WorkerCpu};

    #[test]
    fn each_condition_warns_and_quiet_figures_do_not() {
        let mut side = SideReport {
            cpu: Some(CpuUsage {
                steal_pct: 2.5,
                ..Default::default()
            }),
            workers: vec![
                WorkerCpu {
                    worker: 0,
                    flows: 1,
                    cpu_s: 1.0,
                    busy_pct: 97.0,
                    cpu: None,
                    last_cpu: None,
                },
                WorkerCpu {
                    worker: 1,
                    flows: 3,
                    cpu_s: 0.1,
                    busy_pct: 10.0,
                    cpu: None,
                    last_cpu: None,
                },
            ],
            counters: Some(CounterReport {
                deltas: [
                    ("TcpExt.ListenOverflows".to_string(), 12),
                    ("Udp.RcvbufErrors".to_string(), 0),
                ]
                .into_iter()
                .collect(),
                conntrack: Some(Conntrack {
                    count: 950,
                    max: 1000,
                }),
            }),
            ..Default::default()
        };
        let w = side_warnings(&side, "remote", Transport::Tcp, false);
        assert_eq!(w.len(), 4, "{w:#?}");
        assert!(w[0].contains("steal") && w[0].starts_with("remote"));
        assert!(w[1].contains("worker 0 was 97% busy (1 flow)"));
        assert!(w[2].contains("12 listen-queue overflows") && w[2].contains("TcpExt.ListenOverflows"));
        assert!(w[3].contains("95% full"));
        side.cpu = Some(CpuUsage::default());
        side.workers.truncate(0);
        side.counters = Some(CounterReport {
            deltas: Default::default(),
            conntrack: Some(Conntrack { count: 10, max: 1000 }),
        });
        assert!(side_warnings(&side, "local", Transport::Tcp, false).is_empty());
    }

    /// Issue #37, item 8: a 1-s run at 200 transactions/s showed CPU 0.0 %
    /// and service demand 0.00 µs/tran: no busy tick in the window.
    /// Fewer busy ticks than CPUs are withheld, fewer than ten a CPU warned.
    #[test]
    fn cpu_below_proc_stat_s_resolution_is_withheld_and_coarse_cpu_is_named() {
        let side = |busy_ticks: f64, window_s: f64| SideReport {
            cpu: Some(CpuUsage {
                cpus: 2,
                busy_cpu_s: busy_ticks * PROC_STAT_TICK_S,
                elapsed_cpu_s: window_s * 2.0,
                busy_pct: busy_ticks * PROC_STAT_TICK_S / (window_s * 2.0) * 100.0,
                ..Default::default()
            }),
            cpu_window_s: Some(window_s),
            ..Default::default()
        };
        for ticks in [0.0, 1.0] {
            match cpu_resolution(&side(ticks, 1.0)) {
                CpuResolution::Withheld(w) => assert!(
                    w.contains(&format!(
                        "{ticks:.0} tick(s) of /proc/stat (10 ms each) over 2 CPU(s)"
                    )) && w.contains("resolution here is 1.00 points"),
                    "{w}"
                ),
                other => panic!("{ticks} ticks: {other:?}"),
            }
        }
        match cpu_resolution(&side(5.0, 1.0)) {
            CpuResolution::Coarse(w) => {
                assert!(w.contains("(2.50%)") && w.contains("40% of the figure"), "{w}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cpu_resolution(&side(20.0, 1.0)), CpuResolution::Fine);
        assert_eq!(cpu_resolution(&side(150.0, 1.0)), CpuResolution::Fine);
        assert_eq!(cpu_resolution(&SideReport::default()), CpuResolution::Fine);
    }

    /// Issue #37, item 13: a TCP test was warned of UDP receive-buffer drops
    /// other programs on the host made. Host-wide counters are warned of
    /// only for kinds of their transport, and said to be the host's.
    #[test]
    fn host_counters_concern_their_transport_and_say_they_are_the_host_s() {
        let side = SideReport {
            counters: Some(CounterReport {
                deltas: [
                    ("TcpExt.ListenOverflows".to_string(), 3),
                    ("Udp.RcvbufErrors".to_string(), 40),
                    ("Udp6.RcvbufErrors".to_string(), 2),
                ]
                .into_iter()
                .collect(),
                conntrack: None,
            }),
            ..Default::default()
        };
        let tcp = side_warnings(&side, "local", Transport::Tcp, false);
        assert_eq!(tcp.len(), 1, "{tcp:#?}");
        assert!(tcp[0].contains("3 listen-queue overflows"), "{tcp:?}");
        let udp = side_warnings(&side, "local", Transport::Udp, false);
        assert_eq!(udp.len(), 2, "{udp:#?}");
        assert!(udp[0].contains("40 UDP datagrams dropped") && udp[0].contains("(Udp.RcvbufErrors)"));
        assert!(udp[1].contains("(Udp6.RcvbufErrors)"), "{udp:?}");
        for w in tcp.iter().chain(&udp) {
            assert!(w.ends_with(HOST_WIDE), "{w}");
        }
        let batched = side_warnings(&side, "local", Transport::Udp, true);
        assert!(batched[0].contains("up to 2560 datagrams") && batched[0].ends_with(HOST_WIDE));
    }

    /// Issue #7, item 6: the 0.25-0.30 % of steal these VMs show on nearly
    /// every run is not warned about; steal above 2 % of the machine is.
    #[test]
    fn steal_warns_above_the_threshold_only() {
        let with_steal = |steal_pct| SideReport {
            cpu: Some(CpuUsage {
                steal_pct,
                ..Default::default()
            }),
            ..Default::default()
        };
        for quiet in [0.0, 0.25, 0.30, 1.0, STEAL_WARN_PCT] {
            let w = side_warnings(&with_steal(quiet), "local", Transport::Tcp, false);
            assert!(w.is_empty(), "{quiet}% steal: {w:?}");
        }
        let w = side_warnings(&with_steal(2.5), "local", Transport::Tcp, false);
        assert!(
            w.len() == 1 && w[0].starts_with("local: the hypervisor took 2.50% of the machine's CPU time"),
            "{w:?}"
        );
        assert!(
            w[0].contains("warned above 2%") && w[0].contains("service demand"),
            "{w:?}"
        );
    }

    #[test]
    fn low_proc_stat_coverage_is_named() {
        let side = SideReport {
            cpu: Some(CpuUsage {
                cpus: 2,
                elapsed_cpu_s: 1.6,
                ..Default::default()
            }),
            cpu_window_s: Some(1.0),
            ..Default::default()
        };
        assert_eq!(accounted_pct(&side), Some(80.0));
        let w = side_warnings(&side, "local", Transport::Tcp, false);
        assert!(w.len() == 1 && w[0].contains("only 80%"), "{w:?}");
        let full = SideReport {
            cpu_window_s: Some(0.8),
            ..side
        };
        assert!(side_warnings(&full, "local", Transport::Tcp, false).is_empty());
    }
}
