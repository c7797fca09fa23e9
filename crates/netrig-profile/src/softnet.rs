//! The kernel's own counts of network softirq work over the window, beside the samples' split
//! of softirq against process context: /proc/softirqs (how often the NET_RX and NET_TX
//! handlers ran, per CPU) and /proc/net/softnet_stat (per CPU: packets processed by the
//! receive path, packets dropped at the backlog, and the times net_rx_action ran out of budget
//! or time with work left, "time squeeze").
//!
//! Both files are read at the sampler's start and stop and kept as deltas. Every read is
//! bounded (size, lines, fields); a file that is missing, unreadable or not of the expected
//! shape withholds its counts with the reason, never a zero.

use std::io::Read;

/// The most bytes read of either file (a 16-CPU host's /proc/softirqs is about 2 KB).
const MAX_FILE: u64 = 1 << 20;
/// The most CPUs (columns or lines) either file may list.
const MAX_CPUS: usize = 65_536;
/// The most fields a softnet_stat line may have (6.x writes 15).
const MAX_FIELDS: usize = 64;

/// One CPU's NET_RX and NET_TX handler runs (/proc/softirqs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftirqCpu {
    pub cpu: u32,
    pub net_rx: u64,
    pub net_tx: u64,
}

/// One CPU's line of /proc/net/softnet_stat: its counters (the queue lengths the line also
/// has are instants, not counts, and are not kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftnetCpu {
    pub cpu: u32,
    /// Packets the receive path processed (`processed`, column 1).
    pub processed: u64,
    /// Packets dropped because the backlog was full (netdev_max_backlog; column 2).
    pub dropped: u64,
    /// net_rx_action stopped with work left: out of netdev_budget or its time (column 3).
    pub time_squeeze: u64,
    /// Packets steered to this CPU by RPS (column 10; absent before 2.6.35).
    pub received_rps: u64,
    /// Packets dropped by the flow limit (column 11; absent on older kernels).
    pub flow_limit_count: u64,
}

/// A count over the window, or why it is withheld.
pub type Counted<T> = Result<Vec<T>, String>;

/// Both files read at one instant.
#[derive(Debug, Clone)]
pub(crate) struct NetSnapshot {
    softirqs: Counted<SoftirqCpu>,
    softnet: Counted<SoftnetCpu>,
}

/// The deltas of both files over the window, per CPU (CPU order), each or its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetCounts {
    pub softirqs: Counted<SoftirqCpu>,
    pub softnet: Counted<SoftnetCpu>,
}

impl Default for NetCounts {
    fn default() -> NetCounts {
        NetCounts {
            softirqs: Err("not read".into()),
            softnet: Err("not read".into()),
        }
    }
}

impl NetCounts {
    /// The NET_RX and NET_TX totals over every CPU.
    pub fn softirq_totals(&self) -> Option<SoftirqCpu> {
        let v = self.softirqs.as_ref().ok()?;
        Some(v.iter().fold(SoftirqCpu::default(), |a, c| SoftirqCpu {
            cpu: 0,
            net_rx: a.net_rx + c.net_rx,
            net_tx: a.net_tx + c.net_tx,
        }))
    }

    /// The softnet counters summed over every CPU.
    pub fn softnet_totals(&self) -> Option<SoftnetCpu> {
        let v = self.softnet.as_ref().ok()?;
        Some(v.iter().fold(SoftnetCpu::default(), |a, c| SoftnetCpu {
            cpu: 0,
            processed: a.processed + c.processed,
            dropped: a.dropped + c.dropped,
            time_squeeze: a.time_squeeze + c.time_squeeze,
            received_rps: a.received_rps + c.received_rps,
            flow_limit_count: a.flow_limit_count + c.flow_limit_count,
        }))
    }
}

fn read_capped(path: &str) -> Result<String, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
        .map_err(|e| format!("reading {path}: {e}"))?;
    Ok(text)
}

impl NetSnapshot {
    /// Both files now.
    pub(crate) fn read() -> NetSnapshot {
        NetSnapshot {
            softirqs: read_capped("/proc/softirqs").and_then(|t| parse_softirqs(&t)),
            softnet: read_capped("/proc/net/softnet_stat").and_then(|t| parse_softnet(&t)),
        }
    }

    /// What each file counted from `self` to `later`.
    pub(crate) fn delta(&self, later: &NetSnapshot) -> NetCounts {
        NetCounts {
            softirqs: per_cpu_delta(&self.softirqs, &later.softirqs, "/proc/softirqs", |a, b| {
                Some(SoftirqCpu {
                    cpu: b.cpu,
                    net_rx: counter_delta(a.net_rx, b.net_rx)?,
                    net_tx: counter_delta(a.net_tx, b.net_tx)?,
                })
            }),
            softnet: per_cpu_delta(&self.softnet, &later.softnet, "/proc/net/softnet_stat", |a, b| {
                Some(SoftnetCpu {
                    cpu: b.cpu,
                    processed: counter_delta(a.processed, b.processed)?,
                    dropped: counter_delta(a.dropped, b.dropped)?,
                    time_squeeze: counter_delta(a.time_squeeze, b.time_squeeze)?,
                    received_rps: counter_delta(a.received_rps, b.received_rps)?,
                    flow_limit_count: counter_delta(a.flow_limit_count, b.flow_limit_count)?,
                })
            }),
        }
    }
}

/// Something with a CPU number, for matching two reads line by line.
trait OnCpu {
    fn cpu(&self) -> u32;
}
impl OnCpu for SoftirqCpu {
    fn cpu(&self) -> u32 {
        self.cpu
    }
}
impl OnCpu for SoftnetCpu {
    fn cpu(&self) -> u32 {
        self.cpu
    }
}

/// Each CPU's delta, where both reads have the same CPUs (a CPU brought on or off line in the
/// window withholds the count: its counters' history is not the window's).
fn per_cpu_delta<T: OnCpu + Copy>(
    a: &Counted<T>,
    b: &Counted<T>,
    what: &str,
    f: impl Fn(&T, &T) -> Option<T>,
) -> Counted<T> {
    let (a, b) = (
        a.as_ref().map_err(Clone::clone)?,
        b.as_ref().map_err(Clone::clone)?,
    );
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.cpu() != y.cpu()) {
        return Err(format!("{what}: the CPUs it lists changed within the window"));
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| f(x, y))
        .collect::<Option<Vec<T>>>()
        .ok_or_else(|| format!("{what}: a counter went backwards within the window"))
}

/// A counter's increase. The kernel keeps both files' counters as 32-bit unsigned ints, so a
/// pair that fits in 32 bits is taken modulo 2^32 (a wrap within the window); a wider counter
/// (a future kernel's) that went backwards has no delta.
fn counter_delta(a: u64, b: u64) -> Option<u64> {
    match (u32::try_from(a), u32::try_from(b)) {
        (Ok(a), Ok(b)) => Some(u64::from(b.wrapping_sub(a))),
        _ => b.checked_sub(a),
    }
}

/// /proc/softirqs: a header of `CPUn` columns, then a row per softirq (`NET_RX: 1 2 ...`).
pub(crate) fn parse_softirqs(text: &str) -> Result<Vec<SoftirqCpu>, String> {
    let bad = |why: &str| Err(format!("/proc/softirqs: {why}"));
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let cpus: Vec<u32> = header
        .split_whitespace()
        .take(MAX_CPUS + 1)
        .map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect::<Option<_>>()
        .unwrap_or_default();
    if cpus.is_empty() || cpus.len() > MAX_CPUS {
        return bad("no header of CPUs (CPU0 CPU1 ...), or more than 65,536");
    }
    let row = |name: &str| -> Option<Vec<u64>> {
        let line = text.lines().find(|l| l.trim_start().starts_with(name))?;
        let rest = line.trim_start().strip_prefix(name)?;
        let values: Vec<u64> = rest
            .split_whitespace()
            .take(cpus.len() + 1)
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        (values.len() == cpus.len()).then_some(values)
    };
    let (Some(rx), Some(tx)) = (row("NET_RX:"), row("NET_TX:")) else {
        return bad("no NET_RX and NET_TX rows with a count for each CPU of its header");
    };
    Ok(cpus
        .iter()
        .zip(rx.iter().zip(&tx))
        .map(|(&cpu, (&net_rx, &net_tx))| SoftirqCpu { cpu, net_rx, net_tx })
        .collect())
}

/// /proc/net/softnet_stat: a line per online CPU of hex fields (6.x: processed, dropped,
/// time_squeeze, six zeros, received_rps, flow_limit_count, the backlog's length, the CPU's
/// number, the input and process queues' lengths). The CPU's number is column 13 where the
/// kernel writes it (4.20 on: offline CPUs are skipped, so a line's position is not its CPU);
/// before that, the line's position.
pub(crate) fn parse_softnet(text: &str) -> Result<Vec<SoftnetCpu>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if i >= MAX_CPUS {
            return Err("/proc/net/softnet_stat: more than 65,536 lines".into());
        }
        let f: Vec<u64> = line
            .split_whitespace()
            .take(MAX_FIELDS)
            .map(|v| u64::from_str_radix(v, 16).ok())
            .collect::<Option<_>>()
            .ok_or_else(|| format!("/proc/net/softnet_stat: line {} is not hex fields", i + 1))?;
        if f.len() < 3 {
            return Err(format!(
                "/proc/net/softnet_stat: line {} has {} fields, not the 3 or more of processed, dropped, time_squeeze",
                i + 1,
                f.len()
            ));
        }
        let at = |k: usize| f.get(k).copied().unwrap_or(0);
        let cpu = match f.get(12) {
            Some(&c) => u32::try_from(c).map_err(|_| format!("/proc/net/softnet_stat: CPU {c}"))?,
            None => i as u32,
        };
        out.push(SoftnetCpu {
            cpu,
            processed: at(0),
            dropped: at(1),
            time_squeeze: at(2),
            received_rps: at(9),
            flow_limit_count: at(10),
        });
    }
    if out.is_empty() {
        return Err("/proc/net/softnet_stat: no lines".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTIRQS: &str = "                    CPU0       CPU1       \n\
          HI:          0          0\n\
       TIMER:    4526131    4899214\n\
      NET_TX:   14943099   14823994\n\
      NET_RX:  870524113  858504431\n\
       BLOCK:          0    4399863\n";

    const SOFTNET: &str = "4f1d57b8 000002cd 0000062b 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
4cc224b7 000009fc 00000692 00000000 00000000 00000000 00000000 00000000 00000000 00000005 00000002 00000000 00000003 00000000 00000000\n";

    #[test]
    fn softirqs_parse_the_net_rows_per_cpu() {
        let v = parse_softirqs(SOFTIRQS).unwrap();
        assert_eq!(
            v,
            vec![
                SoftirqCpu {
                    cpu: 0,
                    net_rx: 870524113,
                    net_tx: 14943099
                },
                SoftirqCpu {
                    cpu: 1,
                    net_rx: 858504431,
                    net_tx: 14823994
                }
            ]
        );
        assert!(parse_softirqs("").is_err());
        assert!(parse_softirqs("CPU0\nNET_RX: 1\n")
            .unwrap_err()
            .contains("NET_TX"));
        // A row short of the header's CPUs is not taken as zeros.
        let short = "CPU0 CPU1\nNET_TX: 1 2\nNET_RX: 3\n";
        assert!(parse_softirqs(short).is_err());
        assert!(parse_softirqs("CPU0 CPUx\nNET_TX: 1 2\nNET_RX: 3 4\n").is_err());
    }

    #[test]
    fn softnet_parses_hex_columns_and_the_cpu_column() {
        let v = parse_softnet(SOFTNET).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[1],
            SoftnetCpu {
                cpu: 3,
                processed: 0x4cc224b7,
                dropped: 0x9fc,
                time_squeeze: 0x692,
                received_rps: 5,
                flow_limit_count: 2
            }
        );
        assert_eq!(v[0].cpu, 0, "column 13 says CPU 0");
        // An old kernel's 10 columns: the line's position is its CPU.
        let old =
            "00000010 00000000 00000001 0 0 0 0 0 0 00000000\n00000020 00000001 00000000 0 0 0 0 0 0 0\n";
        let v = parse_softnet(old).unwrap();
        assert_eq!((v[1].cpu, v[1].processed, v[1].dropped), (1, 0x20, 1));
        assert!(parse_softnet("").is_err());
        assert!(parse_softnet("zz 00 00\n").is_err());
        assert!(parse_softnet("0001 0002\n").unwrap_err().contains("2 fields"));
    }

    #[test]
    fn deltas_wrap_at_32_bits_and_withhold_what_does_not_match() {
        assert_eq!(counter_delta(5, 7), Some(2));
        assert_eq!(counter_delta(u64::from(u32::MAX) - 1, 3), Some(5), "a wrap");
        assert_eq!(counter_delta(1 << 40, (1 << 40) + 9), Some(9));
        assert_eq!(counter_delta(1 << 40, 1), None);
        let snap = |rx0: u64, rx1: u64| NetSnapshot {
            softirqs: Ok(vec![
                SoftirqCpu {
                    cpu: 0,
                    net_rx: rx0,
                    net_tx: 1,
                },
                SoftirqCpu {
                    cpu: 1,
                    net_rx: rx1,
                    net_tx: 1,
                },
            ]),
            softnet: Err("reading /proc/net/softnet_stat: No such file or directory".into()),
        };
        let d = snap(10, 20).delta(&snap(15, 40));
        assert_eq!(d.softirq_totals().map(|t| (t.net_rx, t.net_tx)), Some((25, 0)));
        assert_eq!(d.softirqs.as_ref().unwrap()[1].net_rx, 20);
        assert!(
            d.softnet.unwrap_err().contains("No such file"),
            "withheld, not zero"
        );
        let mut fewer = snap(15, 40);
        fewer.softirqs.as_mut().unwrap().pop();
        let d = snap(10, 20).delta(&fewer);
        assert!(d.softirqs.as_ref().unwrap_err().contains("CPUs it lists changed"));
        assert_eq!(d.softnet_totals(), None);
    }

    #[test]
    fn this_host_has_both_files() {
        let s = NetSnapshot::read();
        let d = s.delta(&NetSnapshot::read());
        assert!(d.softirqs.is_ok() && d.softnet.is_ok(), "{d:?}");
    }
}
