//! The target host's view of an overload, read inside its namespace (a thread that entered it):
//! the kernel counters that show a SYN flood (listen-queue overflows and drops, SYN cookies) as
//! deltas over the watch, and the TCP sockets on the target port by state, sampled every
//! [`PERIOD`] (SYN_RECV, ESTABLISHED, FIN_WAIT2, CLOSE_WAIT, ...), with their peaks.

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the sockets are counted.
pub const PERIOD: Duration = Duration::from_millis(100);
/// Samples kept at most (a watch is bounded in time as well: ten minutes of samples).
pub const MAX_SAMPLES: usize = 6000;
/// Lines of /proc/net/tcp{,6} read per sample at most.
pub const MAX_LINES: usize = 262_144;

/// The counters a watch reports, as `TcpExt.Name` / `Tcp.Name`.
pub const COUNTERS: &[&str] = &[
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.SyncookiesSent",
    "TcpExt.SyncookiesRecv",
    "TcpExt.SyncookiesFailed",
    "TcpExt.TCPReqQFullDrop",
    "TcpExt.TCPReqQFullDoCookies",
    "TcpExt.TCPTimeouts",
    "Tcp.PassiveOpens",
    "Tcp.AttemptFails",
    "Tcp.RetransSegs",
    "Tcp.InSegs",
];

/// Sockets on the target port in each state, at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct States {
    pub syn_recv: u64,
    pub established: u64,
    pub fin_wait1: u64,
    pub fin_wait2: u64,
    pub close_wait: u64,
    pub last_ack: u64,
    pub closing: u64,
    pub time_wait: u64,
}

impl States {
    /// Every socket counted but TIME_WAIT (which holds no peer's resources).
    pub fn open(&self) -> u64 {
        self.syn_recv
            + self.established
            + self.fin_wait1
            + self.fin_wait2
            + self.close_wait
            + self.last_ack
            + self.closing
    }
    fn max(&mut self, o: &States) {
        macro_rules! m { ($($f:ident),*) => { $( self.$f = self.$f.max(o.$f); )* } }
        m!(
            syn_recv,
            established,
            fin_wait1,
            fin_wait2,
            close_wait,
            last_ack,
            closing,
            time_wait
        );
    }
}

/// One sample: seconds after the watch began, and the states then.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub t_s: f64,
    #[serde(flatten)]
    pub states: States,
}

/// What a watch saw.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    /// The host watched and the sockets counted.
    pub host: String,
    pub port: u16,
    /// Only sockets whose peer is this address (the half-closing client), if given.
    pub peer: Option<IpAddr>,
    pub window_s: f64,
    /// Deltas over the watch; absent where the files could not be read (see `counters_withheld`).
    pub counters: BTreeMap<String, i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters_withheld: Option<String>,
    pub peak: States,
    pub samples: Vec<Sample>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sockets_withheld: Option<String>,
}

/// Parses the `Name: a b c` / `Name: 1 2 3` line pairs of /proc/net/netstat and /proc/net/snmp
/// into `Name.a` = 1, ...; lines that do not pair are skipped.
pub fn parse_counters(text: &str, out: &mut BTreeMap<String, i64>) {
    let lines: Vec<&str> = text.lines().take(256).collect();
    for pair in lines.windows(2) {
        let (Some((h, names)), Some((v, values))) = (pair[0].split_once(':'), pair[1].split_once(':')) else {
            continue;
        };
        if h != v
            || names
                .trim_start()
                .starts_with(|c: char| c.is_ascii_digit() || c == '-')
        {
            continue;
        }
        let vals: Vec<&str> = values.split_whitespace().collect();
        if vals.first().is_none_or(|x| x.parse::<i64>().is_err()) {
            continue;
        }
        for (n, x) in names.split_whitespace().zip(vals) {
            if let Ok(x) = x.parse::<i64>() {
                out.insert(format!("{h}.{n}"), x);
            }
        }
    }
}

fn hex_addr(s: &str) -> Option<IpAddr> {
    // /proc/net/tcp prints addresses as the kernel's words in host (little-endian) order.
    match s.len() {
        8 => {
            let v = u32::from_str_radix(s, 16).ok()?;
            Some(IpAddr::V4(v.to_le_bytes().into()))
        }
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                let w = u32::from_str_radix(&s[i * 8..i * 8 + 8], 16).ok()?;
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            let a = std::net::Ipv6Addr::from(b);
            Some(match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(a),
            })
        }
        _ => None,
    }
}

/// Counts the sockets of one /proc/net/tcp-format text whose local port is `port` (and peer
/// `peer`, if given), by state; listeners are not counted. At most `cap` lines.
pub fn count(text: &str, port: u16, peer: Option<IpAddr>, st: &mut States, cap: usize) {
    for line in text.lines().skip(1).take(cap) {
        let f: Vec<&str> = line.split_whitespace().take(4).collect();
        let [_, local, remote, state] = f[..] else {
            continue;
        };
        let Some((_, lport)) = local.split_once(':') else {
            continue;
        };
        if u16::from_str_radix(lport, 16).ok() != Some(port) {
            continue;
        }
        if let Some(p) = peer {
            let Some((raddr, _)) = remote.split_once(':') else {
                continue;
            };
            if hex_addr(raddr) != Some(p) {
                continue;
            }
        }
        match u8::from_str_radix(state, 16).unwrap_or(0) {
            1 => st.established += 1,
            3 | 12 => st.syn_recv += 1,
            4 => st.fin_wait1 += 1,
            5 => st.fin_wait2 += 1,
            6 => st.time_wait += 1,
            8 => st.close_wait += 1,
            9 => st.last_ack += 1,
            11 => st.closing += 1,
            _ => {}
        }
    }
}

fn read_counters() -> Result<BTreeMap<String, i64>, String> {
    let mut m = BTreeMap::new();
    for f in ["/proc/thread-self/net/netstat", "/proc/thread-self/net/snmp"] {
        let t = std::fs::read_to_string(f).map_err(|e| format!("cannot read {f}: {e}"))?;
        parse_counters(&t, &mut m);
    }
    Ok(m)
}

fn read_states(port: u16, peer: Option<IpAddr>) -> Result<States, String> {
    let mut st = States::default();
    for f in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
        match std::fs::read_to_string(f) {
            Ok(t) => count(&t, port, peer, &mut st, MAX_LINES),
            Err(e) if f.ends_with('6') && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {f}: {e}")),
        }
    }
    Ok(st)
}

/// Enters the namespace `/run/netns/<ns>` on the calling thread.
pub fn enter(ns: &str) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let path = format!("/run/netns/{ns}");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: setns on a valid descriptor of a network namespace; it changes this thread only.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A watch of `host`'s namespace `ns`, sampling on its own thread until [`Watch::finish`], or
/// until it has sampled for `bound` (then it stops by itself), or — with `until_gone` — until
/// the counted sockets (but TIME_WAIT) are gone after having been there.
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<View, String>>,
}

impl Watch {
    pub fn start(
        host: &str,
        ns: &str,
        port: u16,
        peer: Option<IpAddr>,
        bound: Duration,
        until_gone: bool,
    ) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let (host, ns, s) = (host.to_string(), ns.to_string(), stop.clone());
        let bound = bound.min(PERIOD * MAX_SAMPLES as u32);
        let thread = std::thread::spawn(move || {
            enter(&ns)?;
            let t0 = Instant::now();
            let before = read_counters();
            let (mut samples, mut peak, mut withheld, mut seen) =
                (Vec::new(), States::default(), None, false);
            while !s.load(Ordering::Relaxed) && t0.elapsed() < bound && samples.len() < MAX_SAMPLES {
                match read_states(port, peer) {
                    Ok(st) => {
                        peak.max(&st);
                        samples.push(Sample {
                            t_s: t0.elapsed().as_secs_f64(),
                            states: st,
                        });
                        seen |= st.open() > 0;
                        if until_gone && seen && st.open() == 0 {
                            break;
                        }
                    }
                    Err(e) => {
                        withheld = Some(e);
                        break;
                    }
                }
                std::thread::sleep(PERIOD);
            }
            let after = read_counters();
            let (counters, counters_withheld) = match (before, after) {
                (Ok(b), Ok(a)) => (
                    COUNTERS
                        .iter()
                        .filter_map(|k| Some((k.to_string(), a.get(*k)? - b.get(*k)?)))
                        .collect(),
                    None,
                ),
                (Err(e), _) | (_, Err(e)) => (BTreeMap::new(), Some(e)),
            };
            Ok(View {
                host,
                port,
                peer,
                window_s: t0.elapsed().as_secs_f64(),
                counters,
                counters_withheld,
                peak,
                samples,
                sockets_withheld: withheld,
            })
        });
        Watch { stop, thread }
    }

    /// Whether the watch has ended by itself (its bound, or the sockets gone).
    pub fn ended(&self) -> bool {
        self.thread.is_finished()
    }

    pub fn finish(self) -> Result<View, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| "the watch's thread panicked".to_string())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_their_line_pairs() {
        let t = "TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows\nTcpExt: 5 0 12\n\
                 IpExt: InNoRoutes\nIpExt: 0\n";
        let mut m = BTreeMap::new();
        parse_counters(t, &mut m);
        assert_eq!(m.get("TcpExt.SyncookiesSent"), Some(&5));
        assert_eq!(m.get("TcpExt.ListenOverflows"), Some(&12));
        assert_eq!(m.get("IpExt.InNoRoutes"), Some(&0));
        let snmp = "Tcp: RtoAlgorithm RtoMin PassiveOpens\nTcp: 1 200 33\n";
        parse_counters(snmp, &mut m);
        assert_eq!(m.get("Tcp.PassiveOpens"), Some(&33));
    }

    #[test]
    fn sockets_are_counted_by_state_on_the_port_and_peer() {
        // 198.18.1.2:6387 (0x18F3) listening, a SYN_RECV from 198.18.3.9, a FIN_WAIT2 and a
        // CLOSE_WAIT from 198.18.2.1, and a socket on another port.
        let t = "  sl  local_address rem_address   st\n\
           0: 020112C6:18F3 00000000:0000 0A 0\n\
           1: 020112C6:18F3 090312C6:9C40 03 0\n\
           2: 020112C6:18F3 010212C6:9C41 05 0\n\
           3: 020112C6:18F3 010212C6:9C42 08 0\n\
           4: 020112C6:0050 010212C6:9C43 05 0\n";
        let mut st = States::default();
        count(t, 6387, None, &mut st, 100);
        assert_eq!((st.syn_recv, st.fin_wait2, st.close_wait), (1, 1, 1));
        let mut st = States::default();
        count(t, 6387, Some("198.18.2.1".parse().unwrap()), &mut st, 100);
        assert_eq!((st.syn_recv, st.fin_wait2, st.close_wait), (0, 1, 1));
        // IPv6 and v4-mapped peers.
        let t6 = "sl local rem st\n\
           0: B80D0120010000000000000002000000:18F3 B80D0120030000000000000001000000:1111 05 0\n\
           1: 0000000000000000FFFF0000020112C6:18F3 0000000000000000FFFF0000010212C6:2222 08 0\n";
        let mut st = States::default();
        count(t6, 6387, Some("198.18.2.1".parse().unwrap()), &mut st, 100);
        assert_eq!(st.close_wait, 1, "a v4-mapped peer is its IPv4 address");
        let mut st = States::default();
        count(t6, 6387, Some("2001:db8:0:3::1".parse().unwrap()), &mut st, 100);
        assert_eq!((st.fin_wait2, st.close_wait), (1, 0), "{st:?}");
    }
}
