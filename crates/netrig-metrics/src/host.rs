//! The server host's view: what a host's kernel says about a window in
//! which some other program (nginx, netrig's HTTP server, anything) served
//! load. A [`HostWatch`] takes a snapshot at its start, samples the gauges
//! that only have a level (connection-tracking entries, sockets by state)
//! about once a second for their peaks, and at its end turns the two
//! snapshots and the peaks into a [`HostView`]: CPU busy time and its split,
//! the kernel counters that explain a collapse (listen-queue overflows, SYN
//! cookies, retransmissions, ...), conntrack against its maximum, and the
//! sysctls that bound them.
//!
//! Everything here describes the host (the network namespace, for the
//! `/proc/net` files) as a whole, not one process: the CPU of every
//! program, the sockets of every server. Whatever cannot be read is
//! withheld with the reason, never reported as zero.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::{CpuSnapshot, CpuUsage, KernelCounters};

/// The kernel counters a host view reports (their deltas over the window):
/// the ones that explain why a server stopped keeping up.
pub const WATCHED_COUNTERS: &[&str] = &[
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.SyncookiesSent",
    "TcpExt.SyncookiesRecv",
    "TcpExt.SyncookiesFailed",
    "TcpExt.TCPReqQFullDrop",
    "TcpExt.TCPReqQFullDoCookies",
    "TcpExt.TCPAbortOnMemory",
    "TcpExt.TCPTimeouts",
    "Tcp.RetransSegs",
    "Tcp.OutSegs",
    "Tcp.AttemptFails",
    "Tcp.EstabResets",
    "Tcp.PassiveOpens",
    "Tcp.ActiveOpens",
];

/// The sysctls that bound what the view shows, read at the watch's start.
pub const BOUNDING_SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_max_tw_buckets",
    "net.netfilter.nf_conntrack_max",
];

/// Lines of `/proc/net/tcp` (and of `tcp6`) read per sample at most: a
/// host with more sockets is counted in part, and the view says so.
pub const MAX_SOCKET_LINES: usize = 262_144;

const PROC_NET_TCP: &str = "/proc/net/tcp";
const PROC_NET_TCP6: &str = "/proc/net/tcp6";
const PROC_NET_SOCKSTAT: &str = "/proc/net/sockstat";
const CONNTRACK_STAT: &str = "/proc/net/stat/nf_conntrack";
const CONNTRACK_COUNT: &str = "/proc/sys/net/netfilter/nf_conntrack_count";

/// TCP states as `/proc/net/tcp` numbers them (include/net/tcp_states.h).
const ESTABLISHED: usize = 1;
const SYN_RECV: usize = 3;
const FIN_WAIT2: usize = 5;
const TIME_WAIT: usize = 6;
const CLOSE_WAIT: usize = 8;
const NEW_SYN_RECV: usize = 12;

/// Sockets by TCP state, counted from `/proc/net/tcp` and `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStateCounts {
    /// By state number (1 ESTABLISHED ... 12 NEW_SYN_RECV).
    pub by_state: [u64; 16],
    /// Lines counted.
    pub lines: u64,
    /// Lines left uncounted: past [`MAX_SOCKET_LINES`] of a file.
    pub uncounted: bool,
}

impl TcpStateCounts {
    /// Connections being opened: SYN_RECV and the request sockets the kernel
    /// shows as NEW_SYN_RECV.
    pub fn syn_recv(&self) -> u64 {
        self.by_state[SYN_RECV].saturating_add(self.by_state[NEW_SYN_RECV])
    }

    fn states(&self) -> [u64; 5] {
        [
            self.by_state[ESTABLISHED],
            self.syn_recv(),
            self.by_state[TIME_WAIT],
            self.by_state[CLOSE_WAIT],
            self.by_state[FIN_WAIT2],
        ]
    }
}

/// Adds the sockets of one `/proc/net/tcp`-format text to `counts`: the
/// header is skipped, the 4th column (`st`, hex) is the state, lines that do
/// not parse are skipped. At most `cap` lines are read.
pub fn count_tcp_states(text: &str, counts: &mut TcpStateCounts, cap: usize) {
    count_lines(text.lines().map(Ok::<_, std::io::Error>), counts, cap);
}

fn count_lines<S: AsRef<str>, E>(
    lines: impl Iterator<Item = Result<S, E>>,
    counts: &mut TcpStateCounts,
    cap: usize,
) {
    for (n, line) in lines.skip(1).enumerate() {
        if n >= cap {
            counts.uncounted = true;
            break;
        }
        let Ok(line) = line else { break };
        let Some(st) = line.as_ref().split_whitespace().nth(3) else {
            continue;
        };
        if let Ok(s) = u8::from_str_radix(st, 16) {
            if let Some(c) = counts.by_state.get_mut(usize::from(s)) {
                *c += 1;
                counts.lines += 1;
            }
        }
    }
}

/// Reads `/proc/net/tcp` and `/proc/net/tcp6` (the latter may be absent),
/// [`MAX_SOCKET_LINES`] of each at most, line by line.
pub fn read_tcp_states() -> Result<TcpStateCounts, String> {
    let mut counts = TcpStateCounts::default();
    for path in [PROC_NET_TCP, PROC_NET_TCP6] {
        match std::fs::File::open(path) {
            Ok(f) => count_lines(std::io::BufReader::new(f).lines(), &mut counts, MAX_SOCKET_LINES),
            Err(e) if path == PROC_NET_TCP6 && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {path}: {e}")),
        }
    }
    Ok(counts)
}

/// The TCP line of `/proc/net/sockstat`: cheap totals of the whole host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SockStat {
    /// TCP sockets in use (not TIME_WAIT).
    pub inuse: u64,
    /// Sockets no process holds any more (closed, still sending or waiting).
    pub orphan: u64,
    /// TIME_WAIT sockets.
    pub tw: u64,
}

/// Parses `/proc/net/sockstat`'s `TCP:` line (`TCP: inuse 1 orphan 0 tw 26
/// alloc 3 mem 0`); `None` without one.
pub fn parse_sockstat(text: &str) -> Option<SockStat> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let mut s = SockStat::default();
    let words: Vec<&str> = line.split_whitespace().take(32).collect();
    for pair in words.chunks(2) {
        let [k, v] = pair else { break };
        let Ok(v) = v.parse::<u64>() else { continue };
        match *k {
            "inuse" => s.inuse = v,
            "orphan" => s.orphan = v,
            "tw" => s.tw = v,
            _ => {}
        }
    }
    Some(s)
}

/// Connection tracking's own statistics (`/proc/net/stat/nf_conntrack`),
/// summed over the CPUs' lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConntrackStat {
    /// New connections dropped: the table was full (`drop`).
    pub drop: u64,
    /// Entries evicted early to make room (`early_drop`).
    pub early_drop: u64,
    /// Entries that could not be inserted (`insert_failed`).
    pub insert_failed: u64,
}

/// Parses `/proc/net/stat/nf_conntrack`: a header of names, then one line
/// of hex values per CPU. `None` when the header lacks `drop` or a line does
/// not parse.
pub fn parse_conntrack_stat(text: &str) -> Option<ConntrackStat> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let col = |n: &str| names.iter().position(|x| *x == n);
    let (drop, early, insert) = (col("drop")?, col("early_drop"), col("insert_failed"));
    let mut s = ConntrackStat::default();
    // One line per possible CPU: bounded by the kernel, but not trusted to be.
    for line in lines.take(65_536) {
        let v: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| u64::from_str_radix(v.get(i)?, 16).ok();
        s.drop = s.drop.saturating_add(hex(drop)?);
        if let Some(i) = early {
            s.early_drop = s.early_drop.saturating_add(hex(i)?);
        }
        if let Some(i) = insert {
            s.insert_failed = s.insert_failed.saturating_add(hex(i)?);
        }
    }
    Some(s)
}

/// Everything a watch reads at one instant. Each part is what was read, or
/// why it could not be.
#[derive(Debug, Clone)]
pub struct HostSnapshot {
    pub cpu: Result<CpuSnapshot, String>,
    pub counters: Result<KernelCounters, String>,
    /// `nf_conntrack_count`; `None`: not loaded (or not visible here).
    pub conntrack_count: Option<u64>,
    pub conntrack_stat: Option<ConntrackStat>,
    pub sockets: Result<TcpStateCounts, String>,
    pub sockstat: Option<SockStat>,
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl HostSnapshot {
    /// Reads this host's (this network namespace's) files now.
    pub fn read() -> HostSnapshot {
        HostSnapshot {
            cpu: crate::read_proc_stat().map_err(|e| e.to_string()),
            counters: crate::read_kernel_counters().map_err(|e| e.to_string()),
            conntrack_count: read_u64(CONNTRACK_COUNT),
            conntrack_stat: std::fs::read_to_string(CONNTRACK_STAT)
                .ok()
                .and_then(|t| parse_conntrack_stat(&t)),
            sockets: read_tcp_states(),
            sockstat: std::fs::read_to_string(PROC_NET_SOCKSTAT)
                .ok()
                .and_then(|t| parse_sockstat(&t)),
        }
    }

    /// Only the levels a sample needs (no CPU, no counters).
    pub fn read_gauges() -> HostSnapshot {
        HostSnapshot {
            cpu: Err("not read in a sample".into()),
            counters: Err("not read in a sample".into()),
            conntrack_count: read_u64(CONNTRACK_COUNT),
            conntrack_stat: None,
            sockets: read_tcp_states(),
            sockstat: std::fs::read_to_string(PROC_NET_SOCKSTAT)
                .ok()
                .and_then(|t| parse_sockstat(&t)),
        }
    }
}

/// The highest levels seen, over the start, every sample and the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peaks {
    pub conntrack: Option<u64>,
    /// ESTABLISHED, SYN_RECV, TIME_WAIT, CLOSE_WAIT, FIN_WAIT2.
    pub states: Option<[u64; 5]>,
    pub sockstat_tw: Option<u64>,
    pub orphan: Option<u64>,
    /// Some sample counted only part of `/proc/net/tcp`.
    pub uncounted: bool,
}

impl Peaks {
    /// Takes a snapshot's levels into the peaks.
    pub fn see(&mut self, s: &HostSnapshot) {
        let max = |p: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *p = Some(p.map_or(v, |p| p.max(v)));
            }
        };
        max(&mut self.conntrack, s.conntrack_count);
        max(&mut self.sockstat_tw, s.sockstat.map(|x| x.tw));
        max(&mut self.orphan, s.sockstat.map(|x| x.orphan));
        if let Ok(c) = &s.sockets {
            let now = c.states();
            let p = self.states.get_or_insert([0; 5]);
            for (p, n) in p.iter_mut().zip(now) {
                *p = (*p).max(n);
            }
            self.uncounted |= c.uncounted;
        }
    }
}

/// One CPU's busy time split over a window, each in % of that CPU's time.
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

/// A level at its peak (over the samples) and at the end of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakEnd {
    pub peak: u64,
    pub end: u64,
}

/// Sockets of the host by state over the window (`/proc/net/tcp{,6}`,
/// and `/proc/net/sockstat`'s totals).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketStates {
    pub established: PeakEnd,
    /// SYN_RECV, request sockets included: connections half open.
    pub syn_recv: PeakEnd,
    pub time_wait: PeakEnd,
    pub close_wait: PeakEnd,
    pub fin_wait2: PeakEnd,
    /// TIME_WAIT as `/proc/net/sockstat` counts it (cheap, whole host).
    pub sockstat_time_wait: Option<PeakEnd>,
    /// Orphaned sockets (`/proc/net/sockstat`).
    pub orphan: Option<PeakEnd>,
    /// Some sample read only the first [`MAX_SOCKET_LINES`] lines of a
    /// file: the per-state counts are lower bounds.
    pub partial: bool,
}

/// Connection tracking over the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConntrackView {
    pub start: u64,
    pub end: u64,
    pub peak: u64,
    /// `nf_conntrack_max` at the start; `None` when unreadable.
    pub max: Option<u64>,
    /// Deltas from `/proc/net/stat/nf_conntrack`; `None` when it could not be read.
    pub drop: Option<u64>,
    pub early_drop: Option<u64>,
    pub insert_failed: Option<u64>,
    /// Why the drops are missing.
    pub stat_withheld: Option<String>,
}

/// What a watch saw (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    /// Length of the watch on the watching host's clock.
    pub window_s: f64,
    /// Samples taken between the start and the end (peaks are over these,
    /// the start and the end).
    pub samples: u32,
    /// The watch reached the watching agent's limit (this many seconds) and
    /// stopped there: the view covers its first `limit_s`.
    pub limit_s: Option<f64>,
    /// The whole host's CPU over the window, % of the machine.
    pub cpu: Option<CpuUsage>,
    /// The busiest CPU's own split.
    pub busiest_cpu: Option<CpuSplit>,
    pub cpu_withheld: Option<String>,
    /// Deltas over the window of [`WATCHED_COUNTERS`] that the kernel has.
    pub counters: BTreeMap<String, i64>,
    pub counters_withheld: Option<String>,
    pub conntrack: Option<ConntrackView>,
    pub conntrack_withheld: Option<String>,
    pub sockets: Option<SocketStates>,
    pub sockets_withheld: Option<String>,
    /// [`BOUNDING_SYSCTLS`] that could be read, at the start.
    pub sysctls: BTreeMap<String, u64>,
}

fn split_of(end: &CpuSnapshot, start: &CpuSnapshot, cpu: u32) -> Option<CpuSplit> {
    let find = |s: &CpuSnapshot| s.per_cpu.iter().find(|(i, _)| *i == cpu).map(|(_, t)| *t);
    let d = find(end)?.delta_since(&find(start)?);
    let total = d.total();
    if total == 0 {
        return None;
    }
    let pct = |x: u64| x as f64 * 100.0 / total as f64;
    Some(CpuSplit {
        cpu,
        busy_pct: pct(d.busy()),
        user_pct: pct(d.user.saturating_add(d.nice)),
        system_pct: pct(d.system),
        irq_pct: pct(d.irq),
        softirq_pct: pct(d.softirq),
        iowait_pct: pct(d.iowait),
        steal_pct: pct(d.steal),
    })
}

impl HostView {
    /// The view between two snapshots, with the peaks of the samples
    /// between them (`peaks` has seen neither end: they are added here).
    pub fn between(
        start: &HostSnapshot,
        end: &HostSnapshot,
        mut peaks: Peaks,
        window_s: f64,
        samples: u32,
        sysctls: BTreeMap<String, u64>,
    ) -> HostView {
        peaks.see(start);
        peaks.see(end);
        let mut v = HostView {
            window_s,
            samples,
            sysctls,
            ..HostView::default()
        };
        match (&start.cpu, &end.cpu) {
            (Ok(a), Ok(b)) => {
                let usage = b.usage_since(a);
                v.busiest_cpu = usage.busiest_cpu.and_then(|c| split_of(b, a, c));
                v.cpu = Some(usage);
            }
            (Err(e), _) | (_, Err(e)) => v.cpu_withheld = Some(e.clone()),
        }
        match (&start.counters, &end.counters) {
            (Ok(a), Ok(b)) => {
                let d = b.delta_since(a);
                v.counters = WATCHED_COUNTERS
                    .iter()
                    .filter_map(|k| d.get(k).map(|x| (k.to_string(), x)))
                    .collect();
            }
            (Err(e), _) | (_, Err(e)) => v.counters_withheld = Some(e.clone()),
        }
        match (start.conntrack_count, end.conntrack_count) {
            (Some(s), Some(e)) => {
                let both = start.conntrack_stat.zip(end.conntrack_stat);
                v.conntrack = Some(ConntrackView {
                    start: s,
                    end: e,
                    peak: peaks.conntrack.unwrap_or(s.max(e)),
                    max: v.sysctls.get("net.netfilter.nf_conntrack_max").copied(),
                    drop: both.map(|(a, b)| b.drop.saturating_sub(a.drop)),
                    early_drop: both.map(|(a, b)| b.early_drop.saturating_sub(a.early_drop)),
                    insert_failed: both.map(|(a, b)| b.insert_failed.saturating_sub(a.insert_failed)),
                    stat_withheld: both
                        .is_none()
                        .then(|| format!("{CONNTRACK_STAT} could not be read at both ends of the window")),
                });
            }
            _ => {
                v.conntrack_withheld = Some(format!(
                    "nf_conntrack is not loaded on the server host (no {CONNTRACK_COUNT} in its network \
                     namespace): its connections are not tracked, so no table can fill"
                ))
            }
        }
        match &end.sockets {
            Ok(e) => {
                let now = e.states();
                let peak = peaks.states.unwrap_or(now);
                let pe = |i: usize| PeakEnd {
                    peak: peak[i],
                    end: now[i],
                };
                let sockstat_end = end.sockstat;
                v.sockets = Some(SocketStates {
                    established: pe(0),
                    syn_recv: pe(1),
                    time_wait: pe(2),
                    close_wait: pe(3),
                    fin_wait2: pe(4),
                    sockstat_time_wait: sockstat_end.map(|s| PeakEnd {
                        peak: peaks.sockstat_tw.unwrap_or(s.tw),
                        end: s.tw,
                    }),
                    orphan: sockstat_end.map(|s| PeakEnd {
                        peak: peaks.orphan.unwrap_or(s.orphan),
                        end: s.orphan,
                    }),
                    partial: peaks.uncounted,
                });
            }
            Err(e) => v.sockets_withheld = Some(e.clone()),
        }
        v
    }
}

/// Reads [`BOUNDING_SYSCTLS`] (those this host has).
pub fn read_bounding_sysctls() -> BTreeMap<String, u64> {
    BOUNDING_SYSCTLS
        .iter()
        .filter_map(|n| crate::sysctl_u64(n).map(|v| (n.to_string(), v)))
        .collect()
}

/// A watch in progress: its start, the peaks so far.
#[derive(Debug)]
pub struct HostWatch {
    start: HostSnapshot,
    started: Instant,
    peaks: Peaks,
    samples: u32,
    sysctls: BTreeMap<String, u64>,
}

impl HostWatch {
    /// Snapshots the host now.
    pub fn start() -> HostWatch {
        let sysctls = read_bounding_sysctls();
        HostWatch {
            start: HostSnapshot::read(),
            started: Instant::now(),
            peaks: Peaks::default(),
            samples: 0,
            sysctls,
        }
    }

    /// Samples the levels (call about once a second).
    pub fn sample(&mut self) {
        let s = HostSnapshot::read_gauges();
        self.peaks.see(&s);
        self.samples = self.samples.saturating_add(1);
    }

    /// When the watch started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Snapshots the host again and makes the view; `limit_s` when the watch
    /// was stopped at its limit rather than asked to end.
    pub fn finish(self, limit_s: Option<f64>) -> HostView {
        let end = HostSnapshot::read();
        let window_s = self.started.elapsed().as_secs_f64();
        let mut v = HostView::between(
            &self.start,
            &end,
            self.peaks,
            window_s,
            self.samples,
            self.sysctls,
        );
        v.limit_s = limit_s;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1650 1 0000000056d192c0 100 0 0 10 0
   1: 0100007F:CE8E 0100007F:1C85 06 00000000:00000000 03:00000EA0 00000000     0        0 0 3 000000001b83b4d7
   2: 0100007F:CE8F 0100007F:1C85 06 00000000:00000000 03:00000EA0 00000000     0        0 0 3 000000001b83b4d7
   3: 0100007F:1C85 0100007F:CE90 01 00000000:00000000 00:00000000 00000000     0        0 77 1 0
   4: 0100007F:1C85 0100007F:CE91 0C 00000000:00000000 00:00000000 00000000     0        0 0 1 0
   5: 0100007F:1C85 0100007F:CE92 03 00000000:00000000 00:00000000 00000000     0        0 0 1 0
   6: 0100007F:1C85 0100007F:CE93 08 00000000:00000000 00:00000000 00000000     0        0 0 1 0
   7: 0100007F:1C85 0100007F:CE94 05 00000000:00000000 00:00000000 00000000     0        0 0 1 0
   8: garbage
   9: 0100007F:1C85 0100007F:CE94 ZZ 00000000:00000000
";

    #[test]
    fn counts_sockets_by_state_and_bounds_the_lines() {
        let mut c = TcpStateCounts::default();
        count_tcp_states(TCP, &mut c, 100);
        assert_eq!(c.states(), [1, 2, 2, 1, 1], "{c:?}");
        assert_eq!(c.by_state[0x0A], 1, "one listener");
        assert_eq!(c.lines, 8);
        assert!(!c.uncounted);
        let mut c = TcpStateCounts::default();
        count_tcp_states(TCP, &mut c, 3);
        assert_eq!(c.lines, 3);
        assert!(c.uncounted, "a capped read says so");
        assert_eq!(c.by_state[TIME_WAIT], 2);
    }

    #[test]
    fn sockstat_and_conntrack_stat_parse() {
        let s = parse_sockstat(
            "sockets: used 21\nTCP: inuse 1 orphan 4 tw 26 alloc 3 mem 0\nUDP: inuse 0 mem 0\n",
        )
        .unwrap();
        assert_eq!((s.inuse, s.orphan, s.tw), (1, 4, 26));
        assert!(parse_sockstat("UDP: inuse 0\n").is_none());
        let st = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
0000000a  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002 00000010 00000001 00000000  00000000 00000000 00000000 00000000
0000000a  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 000000ff 00000000 00000000  00000000 00000000 00000000 00000000
";
        let c = parse_conntrack_stat(st).unwrap();
        assert_eq!((c.drop, c.early_drop, c.insert_failed), (0x10f, 1, 3));
        assert!(
            parse_conntrack_stat("entries found\n1 2\n").is_none(),
            "no drop column"
        );
        assert!(parse_conntrack_stat("drop\nxyz\n").is_none(), "not hex");
    }

    fn snapshot(stat: &str, netstat: &str, conntrack: Option<u64>, tcp: &str) -> HostSnapshot {
        let mut sockets = TcpStateCounts::default();
        count_tcp_states(tcp, &mut sockets, 100);
        HostSnapshot {
            cpu: crate::parse_proc_stat(stat).map_err(|e| e.to_string()),
            counters: crate::parse_snmp(netstat).map_err(|e| e.to_string()),
            conntrack_count: conntrack,
            conntrack_stat: conntrack.map(|c| ConntrackStat {
                drop: c / 10,
                ..Default::default()
            }),
            sockets: Ok(sockets),
            sockstat: Some(SockStat {
                inuse: 1,
                orphan: 0,
                tw: sockets.by_state[TIME_WAIT],
            }),
        }
    }

    #[test]
    fn a_view_between_two_snapshots() {
        let a = snapshot(
            "cpu 100 0 100 800 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0\n",
            "TcpExt: ListenOverflows ListenDrops SyncookiesSent\nTcpExt: 10 10 0\nTcp: RetransSegs OutSegs\nTcp: 5 100\n",
            Some(100),
            "header\n",
        );
        let b = snapshot(
            "cpu 200 0 300 1000 0 0 0 0\ncpu0 60 0 60 480 0 0 0 0\ncpu1 140 0 240 520 0 10 20 0\n",
            "TcpExt: ListenOverflows ListenDrops SyncookiesSent\nTcpExt: 3422 3422 7\nTcp: RetransSegs OutSegs\nTcp: 9 300\n",
            Some(90),
            TCP,
        );
        let mut peaks = Peaks::default();
        peaks.see(&snapshot(
            "cpu 0 0 0 0\n",
            "",
            Some(500),
            "h\n1: a b 06\n1: a b 06\n1: a b 06\n",
        ));
        let sys = BTreeMap::from([("net.netfilter.nf_conntrack_max".to_string(), 512)]);
        let v = HostView::between(&a, &b, peaks, 2.0, 1, sys);
        assert_eq!(v.counters["TcpExt.ListenOverflows"], 3412);
        assert_eq!(v.counters["TcpExt.SyncookiesSent"], 7);
        assert_eq!(v.counters["Tcp.RetransSegs"], 4);
        assert!(
            !v.counters.contains_key("TcpExt.TCPReqQFullDrop"),
            "the kernel lacks it"
        );
        let cpu = v.cpu.as_ref().unwrap();
        assert_eq!(cpu.busiest_cpu, Some(1));
        let b1 = v.busiest_cpu.as_ref().unwrap();
        assert_eq!(b1.cpu, 1);
        // cpu1: 90 user + 190 system + 10 irq + 20 softirq busy of 430.
        assert!((b1.busy_pct - 310.0 * 100.0 / 430.0).abs() < 1e-9, "{b1:?}");
        assert!((b1.softirq_pct - 20.0 * 100.0 / 430.0).abs() < 1e-9);
        let ct = v.conntrack.as_ref().unwrap();
        assert_eq!((ct.start, ct.end, ct.peak, ct.max), (100, 90, 500, Some(512)));
        assert_eq!(ct.drop, Some(0), "9 - 10 saturates at 0");
        let s = v.sockets.as_ref().unwrap();
        assert_eq!(s.time_wait, PeakEnd { peak: 3, end: 2 });
        assert_eq!(s.syn_recv, PeakEnd { peak: 2, end: 2 });
        assert_eq!(s.sockstat_time_wait, Some(PeakEnd { peak: 3, end: 2 }));
        assert!(v.cpu_withheld.is_none() && v.counters_withheld.is_none());
    }

    #[test]
    fn what_cannot_be_read_is_withheld_with_the_reason() {
        let mut a = snapshot("cpu 1 1 1 1\n", "", None, "h\n");
        a.cpu = Err("cannot read /proc/stat: gone".into());
        a.sockets = Err("cannot read /proc/net/tcp: gone".into());
        let b = snapshot("cpu 2 2 2 2\n", "", None, "h\n");
        let v = HostView::between(&a, &b, Peaks::default(), 1.0, 0, BTreeMap::new());
        assert!(v.cpu.is_none());
        assert!(v.cpu_withheld.unwrap().contains("/proc/stat"));
        assert!(v.conntrack.is_none());
        assert!(v
            .conntrack_withheld
            .unwrap()
            .contains("nf_conntrack is not loaded"));
        // The end's sockets were read: the view has them.
        assert!(v.sockets.is_some());
        let mut b2 = b.clone();
        b2.sockets = Err("cannot read /proc/net/tcp: gone".into());
        let v = HostView::between(&a, &b2, Peaks::default(), 1.0, 0, BTreeMap::new());
        assert!(v.sockets_withheld.unwrap().contains("/proc/net/tcp"));
    }

    #[test]
    fn a_real_watch_reads_this_host() {
        let mut w = HostWatch::start();
        w.sample();
        let v = w.finish(None);
        assert_eq!(v.samples, 1);
        assert!(v.window_s >= 0.0 && v.window_s < 60.0);
        assert!(v.cpu.is_some(), "{:?}", v.cpu_withheld);
        assert!(
            v.counters.contains_key("TcpExt.ListenOverflows"),
            "{:?}",
            v.counters
        );
        assert!(v.sockets.is_some(), "{:?}", v.sockets_withheld);
        assert!(v.sysctls.contains_key("net.core.somaxconn"), "{:?}", v.sysctls);
        assert!(v.conntrack.is_some() != v.conntrack_withheld.is_some());
    }
}
