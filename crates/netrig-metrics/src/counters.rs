//! Kernel protocol counters from `/proc/net/snmp` and `/proc/net/netstat`,
//! and the connection-tracking table fill level.
//!
//! Both files consist of pairs of lines with the same prefix, a header line
//! of names followed by a line of values:
//!
//! ```text
//! Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens ...
//! Tcp: 1 200 120000 -1 1234 ...
//! ```
//!
//! Every pair becomes entries keyed `"<Prefix>.<Name>"`, e.g.
//! `"Tcp.RetransSegs"` or `"TcpExt.ListenOverflows"`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::MetricsError;

const PROC_NET_SNMP: &str = "/proc/net/snmp";
const PROC_NET_NETSTAT: &str = "/proc/net/netstat";
const PROC_NET_SNMP6: &str = "/proc/net/snmp6";
const CONNTRACK_COUNT: &str = "/proc/sys/net/netfilter/nf_conntrack_count";
const CONNTRACK_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";

/// Counters worth showing in every report when they move: retransmissions,
/// listen queue overflows, timeouts, socket buffer drops and resets.
pub const HEADLINE: &[&str] = &[
    "Tcp.RetransSegs",
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPTimeouts",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPAbortOnData",
    "Tcp.AttemptFails",
    "Tcp.EstabResets",
    "TcpExt.TCPRcvQDrop",
];

/// All counters from `/proc/net/snmp` and `/proc/net/netstat`, keyed
/// `"<Prefix>.<Name>"` (e.g. `"Udp.InErrors"`).
///
/// Values are `i64` because a few are signed (`Tcp.MaxConn` is -1). The
/// kernel's few 64-bit unsigned counters (e.g. `IpExt.InOctets`) are stored
/// with a wrapping conversion if they ever exceed `i64::MAX`, which keeps
/// [`delta_since`](Self::delta_since) correct.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelCounters {
    /// Counter name → value.
    pub values: BTreeMap<String, i64>,
}

/// Fill level of the netfilter connection-tracking table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conntrack {
    /// Entries currently tracked (`nf_conntrack_count`).
    pub count: u64,
    /// Table size limit (`nf_conntrack_max`); new flows are dropped beyond it.
    pub max: u64,
}

/// Parses the text of `/proc/net/snmp` or `/proc/net/netstat` (the formats
/// are the same). Blank lines are skipped. A header line without a following
/// value line of the same prefix, a different number of names and values, or
/// a value that is not an integer is a [`MetricsError::Parse`] error (the
/// error names `/proc/net/snmp`). Parse each file and
/// [`merge`](KernelCounters::merge) the results to combine them.
pub fn parse_snmp(text: &str) -> Result<KernelCounters, MetricsError> {
    parse_snmp_at(text, PROC_NET_SNMP)
}

/// Reads `/proc/net/snmp`, `/proc/net/netstat` and `/proc/net/snmp6` and
/// merges them. `/proc/net/netstat` and `/proc/net/snmp6` are skipped if
/// they do not exist (no IPv6).
pub fn read_kernel_counters() -> Result<KernelCounters, MetricsError> {
    let mut counters = parse_snmp_at(&crate::read_file(PROC_NET_SNMP)?, PROC_NET_SNMP)?;
    match std::fs::read_to_string(PROC_NET_NETSTAT) {
        Ok(text) => counters.merge(parse_snmp_at(&text, PROC_NET_NETSTAT)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(MetricsError::io(PROC_NET_NETSTAT, e)),
    }
    match std::fs::read_to_string(PROC_NET_SNMP6) {
        Ok(text) => counters.merge(parse_snmp6(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(MetricsError::io(PROC_NET_SNMP6, e)),
    }
    Ok(counters)
}

/// The UDP and ICMP lines of `/proc/net/snmp6` (`Udp6InDatagrams  123`),
/// keyed as the other files' are: `Udp6.InDatagrams`. Lines it does not
/// understand are skipped (the file has no header to check them against).
pub fn parse_snmp6(text: &str) -> KernelCounters {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(name), Some(v), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Some(v) = parse_value(v) else { continue };
        for prefix in ["UdpLite6", "Udp6", "Ip6", "Icmp6"] {
            if let Some(rest) = name.strip_prefix(prefix).filter(|r| !r.is_empty()) {
                values.insert(format!("{prefix}.{rest}"), v);
                break;
            }
        }
    }
    KernelCounters { values }
}

fn parse_value(tok: &str) -> Option<i64> {
    tok.parse::<i64>()
        .ok()
        .or_else(|| tok.parse::<u64>().ok().map(|v| v as i64))
}

pub(crate) fn parse_snmp_at(text: &str, path: &str) -> Result<KernelCounters, MetricsError> {
    let mut values = BTreeMap::new();
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    while let Some((hdr_no, header)) = lines.next() {
        let (prefix, names) = header
            .split_once(':')
            .ok_or_else(|| MetricsError::parse(path, hdr_no, "expected \"Prefix: Name ...\" header line"))?;
        let prefix = prefix.trim();
        if prefix.is_empty() || prefix.contains(char::is_whitespace) {
            return Err(MetricsError::parse(
                path,
                hdr_no,
                format!("bad section prefix {prefix:?}"),
            ));
        }
        let (val_no, value_line) = lines.next().ok_or_else(|| {
            MetricsError::parse(path, hdr_no, format!("header {prefix:?} has no value line"))
        })?;
        let (vprefix, nums) = value_line
            .split_once(':')
            .ok_or_else(|| MetricsError::parse(path, val_no, format!("expected \"{prefix}: values\"")))?;
        if vprefix.trim() != prefix {
            return Err(MetricsError::parse(
                path,
                val_no,
                format!(
                    "value line prefix {:?} does not match header {prefix:?}",
                    vprefix.trim()
                ),
            ));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let nums: Vec<&str> = nums.split_whitespace().collect();
        if names.len() != nums.len() {
            return Err(MetricsError::parse(
                path,
                val_no,
                format!("{prefix}: {} names but {} values", names.len(), nums.len()),
            ));
        }
        for (name, num) in names.into_iter().zip(nums) {
            let v = parse_value(num).ok_or_else(|| {
                MetricsError::parse(path, val_no, format!("{prefix}.{name}: bad value {num:?}"))
            })?;
            values.insert(format!("{prefix}.{name}"), v);
        }
    }
    Ok(KernelCounters { values })
}

impl KernelCounters {
    /// Adds every entry of `other`, replacing entries with the same key.
    pub fn merge(&mut self, other: KernelCounters) {
        self.values.extend(other.values);
    }

    /// Value of one counter, e.g. `get("Tcp.RetransSegs")`.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.values.get(name).copied()
    }

    /// `self - earlier` for every key present in both.
    ///
    /// The difference is signed for all entries: most are monotonic counters
    /// whose delta is ≥ 0, but gauges such as `Tcp.CurrEstab` legitimately
    /// go down and keep their negative difference. The subtraction wraps
    /// instead of overflowing, which also gives the right delta for a 64-bit
    /// counter that passed `i64::MAX`. Keys present in only one snapshot are
    /// omitted.
    pub fn delta_since(&self, earlier: &Self) -> KernelCounters {
        let values = self
            .values
            .iter()
            .filter_map(|(k, now)| {
                earlier
                    .values
                    .get(k)
                    .map(|before| (k.clone(), now.wrapping_sub(*before)))
            })
            .collect();
        KernelCounters { values }
    }

    /// Just the [`HEADLINE`] counters that are present.
    pub fn headline(&self) -> BTreeMap<String, i64> {
        HEADLINE
            .iter()
            .filter_map(|k| self.values.get(*k).map(|v| (k.to_string(), *v)))
            .collect()
    }
}

fn read_u64_file(path: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads `nf_conntrack_count` and `nf_conntrack_max`. `None` when either is
/// absent or unreadable (conntrack module not loaded, or not visible in this
/// network namespace).
pub fn read_conntrack() -> Option<Conntrack> {
    Some(Conntrack {
        count: read_u64_file(CONNTRACK_COUNT)?,
        max: read_u64_file(CONNTRACK_MAX)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 2843212 0 5 0 0 0 2842977 2291874 40 0 0 0 0 0 0 0 0 2291874
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 305 0 0 300 0 0 0 0 5 0 0 0 0 0 310 0 0 0 305 0 0 0 0 0 5 0 0 0 0
IcmpMsg: InType3 InType8 OutType0 OutType3
IcmpMsg: 300 5 5 305
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 41283 2011 1580 1047 17 2741033 2841201 4096 0 7071 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 98432 305 12 99871 12 0 0 5310 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled TWKilled PAWSActive PAWSEstab DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPTimeouts TCPBacklogDrop TCPAbortOnData TCPRcvQDrop
TcpExt: 0 0 0 3 0 0 0 0 0 0 11904 0 0 0 0 62217 24 1371 7 9 812 0 96 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets
IpExt: 0 0 2219 312 5310 0 18446744073709551000 2306551913
MPTcpExt: MPCapableSYNRX MPCapableSYNTX
MPTcpExt: 0 0
";

    fn both() -> KernelCounters {
        let mut c = parse_snmp(SNMP).unwrap();
        c.merge(parse_snmp(NETSTAT).unwrap());
        c
    }

    #[test]
    fn parses_and_merges_both_files() {
        let c = both();
        assert_eq!(c.get("Tcp.RetransSegs"), Some(4096));
        assert_eq!(c.get("Tcp.MaxConn"), Some(-1));
        assert_eq!(c.get("Tcp.CurrEstab"), Some(17));
        assert_eq!(c.get("Udp.InErrors"), Some(12));
        assert_eq!(c.get("IcmpMsg.OutType3"), Some(305));
        assert_eq!(c.get("UdpLite.MemErrors"), Some(0));
        assert_eq!(c.get("TcpExt.ListenOverflows"), Some(7));
        assert_eq!(c.get("TcpExt.TCPTimeouts"), Some(812));
        assert_eq!(c.get("MPTcpExt.MPCapableSYNTX"), Some(0));
        assert_eq!(c.get("Ip.OutTransmits"), Some(2291874));
        // u64 above i64::MAX wraps rather than failing.
        assert!(c.get("IpExt.InOctets").is_some());
    }

    #[test]
    fn old_kernel_missing_fields() {
        // A 3.x kernel: no Tcp.InCsumErrors, no Udp.IgnoredMulti, no
        // TcpExt.TCPRcvQDrop; headline just omits what is missing.
        let text = "\
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts
Tcp: 1 200 120000 -1 10 2 1 0 1 500 600 3 0 4
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors
Udp: 5 0 0 5 0 0
";
        let c = parse_snmp(text).unwrap();
        assert_eq!(c.get("Tcp.InCsumErrors"), None);
        let h = c.headline();
        assert_eq!(h.get("Tcp.RetransSegs"), Some(&3));
        assert!(!h.contains_key("TcpExt.TCPRcvQDrop"));
        assert_eq!(h.len(), 6);
    }

    #[test]
    fn headline_has_every_present_name() {
        let h = both().headline();
        assert_eq!(h.len(), HEADLINE.len(), "{h:?}");
        assert_eq!(h["TcpExt.TCPAbortOnData"], 96);
        assert_eq!(h["Tcp.EstabResets"], 1047);
    }

    #[test]
    fn delta_is_signed_and_never_panics() {
        let a = both();
        let mut b = a.clone();
        *b.values.get_mut("Tcp.RetransSegs").unwrap() += 10;
        *b.values.get_mut("Tcp.CurrEstab").unwrap() -= 5;
        b.values.insert("Tcp.New".into(), 3);
        b.values.insert("IpExt.InOctets".into(), i64::MIN + 5);
        let mut a2 = a.clone();
        a2.values.insert("IpExt.InOctets".into(), i64::MAX - 4);
        let d = b.delta_since(&a2);
        assert_eq!(d.get("Tcp.RetransSegs"), Some(10));
        assert_eq!(d.get("Tcp.CurrEstab"), Some(-5));
        assert_eq!(d.get("Udp.InErrors"), Some(0));
        assert_eq!(d.get("Tcp.New"), None);
        // Crossed i64::MAX by 10: wrapping gives the true increase.
        assert_eq!(d.get("IpExt.InOctets"), Some(10));
        // Extremes do not overflow-panic.
        let mut x = KernelCounters::default();
        x.values.insert("A.b".into(), i64::MIN);
        let mut y = KernelCounters::default();
        y.values.insert("A.b".into(), i64::MAX);
        let _ = x.delta_since(&y);
        let _ = y.delta_since(&x);
    }

    #[test]
    fn snmp6_lines_become_prefixed_keys() {
        let c = parse_snmp6("Ip6InReceives   \t12\nUdp6InDatagrams 7\nUdp6RcvbufErrors 2\nUdpLite6InDatagrams 0\nbogus\nUdp6 9\n");
        assert_eq!(c.get("Udp6.InDatagrams"), Some(7));
        assert_eq!(c.get("Udp6.RcvbufErrors"), Some(2));
        assert_eq!(c.get("UdpLite6.InDatagrams"), Some(0));
        assert_eq!(c.get("Ip6.InReceives"), Some(12));
        assert_eq!(c.values.len(), 4, "{c:?}");
    }

    #[test]
    fn malformed_input_is_an_error() {
        crate::tests::assert_refuses(
            parse_snmp,
            "/proc/net/snmp",
            &[
                "Tcp: A B\n",
                "Tcp: A B\nTcp: 1\n",
                "Tcp: A B\nTcp: 1 2 3\n",
                "Tcp: A B\nUdp: 1 2\n",
                "Tcp: A B\nTcp: 1 x\n",
                "Tcp: A\nTcp: 99999999999999999999999\n",
                "garbage without colon\n",
                "Tcp: A\n1\n",
            ],
            ("Tcp: A\nTcp: 1\n\nUdp: A B\nUdp: 1 q\n", 5),
        );
        assert!(parse_snmp("").unwrap().values.is_empty());
        assert!(parse_snmp("\n\n").unwrap().values.is_empty());
    }

    #[test]
    fn reads_real_files() {
        let c = read_kernel_counters().unwrap();
        assert!(c.get("Tcp.RetransSegs").is_some());
        assert!(c.get("Udp.InErrors").is_some());
        let d = c.delta_since(&c);
        assert!(d.values.values().all(|v| *v == 0));
        // May be None (module not loaded); must not panic.
        let _ = read_conntrack();
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<KernelCounters>(&j).unwrap(), c);
    }
}
