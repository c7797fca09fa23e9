//! Parallel links with per-flow or per-packet balancing, DSCP classes on an egress, and the
//! connection-tracking table's size (docs/LAB.md). Pure planning (commands as [`Step`]s) plus
//! the few readers `lab status` needs (tc's class counters).
//!
//! - **Parallel links**: several `[[lab.links]]` with the same two ends (as Mininet's repeated
//!   `addLink` or containerlab's links). The k-th link (k ≥ 2) between `a` and `b` is named
//!   `a-b.k`, its interfaces `to<k>-b` in `a` and `to<k>-a` in `b` (the first keeps `to-b`).
//!   Traffic to what lies beyond the other end is balanced over the group: `balance = "flow"`
//!   (default) is an ECMP route with the L4 hash (fib_multipath_hash_policy = 1, IPv4 and
//!   IPv6); `balance = "packet"` is round robin: nftables `numgen inc mod N` sets a mark in
//!   prerouting (forwarded) and output (local), and `ip rule fwmark M table M` sends each mark
//!   over its link. Traffic to the other end's own address on a link takes that link (as to a
//!   router's interface address), so each link can be measured by itself.
//! - **DSCP classes**: under a direction's htb rate, htb classes (rate = guaranteed, ceil = what
//!   it may borrow up to, prio) with u32 filters on the DSCP (IPv4 `ip dsfield`, IPv6 `ip6
//!   priority`), unmatched traffic to the default class; a queue per class (pfifo/bfifo, or netem
//!   where netem builds the direction's delay).
//! - **conntrack_max**: net.netfilter.nf_conntrack_max inside a host, where the kernel lets a
//!   network namespace have its own (probed; refused by name where it is host-wide).

use crate::model::{parse_rate, Shape, Topology};
pub use crate::model::{Class, Dscp, DscpCode};
pub use crate::steps::{Balance, GroupState};
use crate::steps::{Direction, Plan, Segment, Step};
use crate::LabError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

fn spec(msg: impl Into<String>) -> LabError {
    LabError::Spec(msg.into())
}

fn cmd(ns: &str, argv: &[&str]) -> Step {
    Step::Cmd {
        ns: Some(ns.to_string()),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
    }
}

// ---------------------------------------------------------------- parallel links

/// At most this many links between two hosts.
pub const MAX_PARALLEL: usize = 8;

/// Links joining the same two hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The two hosts (as the first link's `ends`).
    pub ends: [String; 2],
    /// Indices of the links (= of their segments) in `[[lab.links]]` order.
    pub links: Vec<usize>,
    pub balance: Balance,
}

/// The interface `k`-th (0-based) link between two hosts gets in one of them, towards `peer`.
pub fn link_dev(peer: &str, k: usize) -> String {
    if k == 0 {
        format!("to-{peer}")
    } else {
        format!("to{}-{peer}", k + 1)
    }
}

/// The name of the `k`-th (0-based) link between `a` and `b`.
pub fn link_name(a: &str, b: &str, k: usize) -> String {
    if k == 0 {
        format!("{a}-{b}")
    } else {
        format!("{a}-{b}.{}", k + 1)
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a < b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// Each link's ordinal among the links joining the same two hosts (0 for the first).
pub fn ordinals(topo: &Topology) -> Vec<usize> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    topo.links
        .iter()
        .map(|l| {
            let n = seen.entry(pair(&l.ends[0], &l.ends[1])).or_insert(0);
            *n += 1;
            *n - 1
        })
        .collect()
}

/// The groups of parallel links; checks `balance` (the same on every link of a group that
/// gives it; refused on a link without a parallel one).
pub fn groups(topo: &Topology) -> Result<Vec<Group>, LabError> {
    let mut by_pair: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    let mut order = Vec::new();
    for (i, l) in topo.links.iter().enumerate() {
        let key = pair(&l.ends[0], &l.ends[1]);
        if !by_pair.contains_key(&key) {
            order.push(key.clone());
        }
        by_pair.entry(key).or_default().push(i);
    }
    let mut out = Vec::new();
    for key in order {
        let links = &by_pair[&key];
        let first = &topo.links[links[0]];
        let name = link_name(&first.ends[0], &first.ends[1], 0);
        let mut balance: Option<(&str, usize)> = None;
        for (k, &i) in links.iter().enumerate() {
            if let Some(b) = topo.links[i].balance.as_deref() {
                if !matches!(b, "flow" | "packet") {
                    return Err(spec(format!(
                        "balance of link {}: \"flow\" (per-flow hash) or \"packet\" (round robin), not {b:?}",
                        link_name(&first.ends[0], &first.ends[1], k)
                    )));
                }
                match balance {
                    Some((prev, _)) if prev != b => {
                        return Err(spec(format!(
                            "balance of the links between {} and {}: {prev:?} on one, {b:?} on another (give one, or the same on each)",
                            key.0, key.1
                        )))
                    }
                    _ => balance = Some((b, k)),
                }
            }
        }
        if links.len() == 1 {
            if balance.is_some() {
                return Err(spec(format!(
                    "balance of link {name}: it has no parallel link (balance spreads traffic over several links between the same two hosts)"
                )));
            }
            continue;
        }
        if links.len() > MAX_PARALLEL {
            return Err(spec(format!(
                "links between {} and {}: {} of them, at most {MAX_PARALLEL}",
                key.0,
                key.1,
                links.len()
            )));
        }
        out.push(Group {
            ends: first.ends.clone(),
            links: links.clone(),
            balance: match balance.map(|b| b.0) {
                Some("packet") => Balance::Packet,
                _ => Balance::Flow,
            },
        });
    }
    Ok(out)
}

pub fn group_states(groups: &[Group], segs: &[Segment]) -> Vec<GroupState> {
    groups
        .iter()
        .enumerate()
        .map(|(gi, g)| GroupState {
            ends: g.ends.clone(),
            links: g.links.iter().map(|&l| segs[l].name.clone()).collect(),
            balance: g.balance,
            how: match g.balance {
                Balance::Flow => "per flow: an ECMP route, L4 hash (fib_multipath_hash_policy 1)".into(),
                Balance::Packet => format!(
                    "per packet: round robin (nftables numgen in table netrig_balance{gi}, fwmark tables {}-{})",
                    table(gi, 0),
                    table(gi, g.links.len() - 1)
                ),
            },
        })
        .collect()
}

/// The groups' lines of `lab status`.
pub fn groups_text(gs: &[GroupState]) -> String {
    gs.iter()
        .map(|g| {
            format!(
                "  parallel links {} between {} and {}: {}, for what lies beyond the other end\n",
                g.links.join(", "),
                g.ends[0],
                g.ends[1],
                g.how
            )
        })
        .collect()
}

/// The group whose links include segment `seg`.
pub fn group_of(groups: &[Group], seg: usize) -> Option<usize> {
    groups.iter().position(|g| g.links.contains(&seg))
}

/// The routing table (and firewall mark) of the `k`-th (0-based) link of group `g` under
/// per-packet balancing.
pub fn table(g: usize, k: usize) -> u32 {
    1000 + 16 * g as u32 + k as u32 + 1
}

/// The commands that balance each group: in each end, for every destination network reached
/// through the other end (`dests[(host, group)]`, segment indices), a multipath route over the
/// group's links (both families); per flow with the L4 hash, per packet with a round-robin mark
/// and a table per link.
pub fn group_steps(
    groups: &[Group],
    segs: &[Segment],
    hosts: &BTreeMap<String, String>,
    dests: &BTreeMap<(String, usize), Vec<usize>>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        for (from, other) in [(&g.ends[0], &g.ends[1]), (&g.ends[1], &g.ends[0])] {
            let ns = &hosts[from];
            for key in [
                "net.ipv4.fib_multipath_hash_policy",
                "net.ipv6.fib_multipath_hash_policy",
            ] {
                steps.push(Step::Sysctl {
                    ns: ns.clone(),
                    key: key.into(),
                    value: "1".into(),
                });
            }
            let Some(ds) = dests.get(&(from.clone(), gi)) else {
                continue;
            };
            // Next hops: the other end's address on each link, out of this end's interface.
            let hops: Vec<(String, Option<IpAddr>, Option<IpAddr>)> = g
                .links
                .iter()
                .map(|&l| {
                    let me = segs[l].members.iter().find(|m| &m.host == from).expect("end");
                    let peer = segs[l].members.iter().find(|m| &m.host == other).expect("end");
                    (
                        me.dev.clone(),
                        peer.v4.map(|n| IpAddr::V4(n.addr())),
                        peer.v6.map(|n| IpAddr::V6(n.addr())),
                    )
                })
                .collect();
            // One source address for this end's own traffic whichever link a packet takes (its
            // address on the group's first link): an unbound socket's source would otherwise follow
            // the link the hash chose, so a test's control connection and its data flows could
            // come from different addresses.
            let first = segs[g.links[0]]
                .members
                .iter()
                .find(|m| &m.host == from)
                .expect("end");
            let src4 = first.v4.map(|n| n.addr().to_string());
            let src6 = first.v6.map(|n| n.addr().to_string());
            let mut nets4 = Vec::new();
            let mut nets6 = Vec::new();
            for &d in ds {
                if let Some(n) = segs[d].members.iter().find_map(|m| m.v4.map(|n| n.trunc())) {
                    nets4.push(n.to_string());
                }
                if let Some(n) = segs[d].members.iter().find_map(|m| m.v6.map(|n| n.trunc())) {
                    nets6.push(n.to_string());
                }
            }
            for (v6, nets) in [(false, &nets4), (true, &nets6)] {
                let fam: &[&str] = if v6 { &["ip", "-6"] } else { &["ip"] };
                let hop = |h: &(String, Option<IpAddr>, Option<IpAddr>)| if v6 { h.2 } else { h.1 };
                let usable: Vec<_> = hops.iter().filter(|h| hop(h).is_some()).collect();
                if usable.is_empty() {
                    continue;
                }
                let src: Vec<&str> = match if v6 { &src6 } else { &src4 } {
                    Some(a) => vec!["src", a],
                    None => Vec::new(),
                };
                for net in nets.iter() {
                    let mut a: Vec<String> = fam.iter().map(|s| s.to_string()).collect();
                    a.extend(["route".into(), "add".into(), net.clone()]);
                    a.extend(src.iter().map(|s| s.to_string()));
                    for h in &usable {
                        a.extend([
                            "nexthop".into(),
                            "via".into(),
                            hop(h).expect("usable").to_string(),
                            "dev".into(),
                            h.0.clone(),
                        ]);
                    }
                    steps.push(Step::Cmd {
                        ns: Some(ns.clone()),
                        argv: a,
                        stdin: None,
                    });
                }
                if g.balance == Balance::Packet && !nets.is_empty() {
                    for (k, h) in hops.iter().enumerate() {
                        let Some(via) = hop(h) else { continue };
                        let t = table(gi, k).to_string();
                        let mut a: Vec<&str> = fam.to_vec();
                        a.extend(["rule", "add", "fwmark", &t, "table", &t, "priority", &t]);
                        steps.push(cmd(ns, &a));
                        let via = via.to_string();
                        for net in nets.iter() {
                            let mut a: Vec<&str> = fam.to_vec();
                            a.extend(["route", "add", net, "via", &via, "dev", &h.0]);
                            a.extend(&src);
                            a.extend(["table", &t]);
                            steps.push(cmd(ns, &a));
                        }
                    }
                }
            }
            if g.balance == Balance::Packet && !(nets4.is_empty() && nets6.is_empty()) {
                steps.push(Step::Cmd {
                    ns: Some(ns.clone()),
                    argv: vec!["nft".into(), "-f".into(), "-".into()],
                    stdin: Some(round_robin(gi, g.links.len(), &nets4, &nets6)),
                });
            }
        }
    }
    steps
}

/// The nftables table that marks packets to `nets` round robin over `n` links: the same
/// counter for forwarded (prerouting) and local (output, a route chain: re-routed by mark)
/// packets, so one flow's packets alternate whichever way they come.
pub fn round_robin(g: usize, n: usize, nets4: &[String], nets6: &[String]) -> String {
    let first = table(g, 0);
    let mut sets = String::new();
    let mut rules = String::new();
    for (fam, ty, nets) in [("ip", "ipv4_addr", nets4), ("ip6", "ipv6_addr", nets6)] {
        if nets.is_empty() {
            continue;
        }
        sets.push_str(&format!(
            " set {fam}dests {{ type {ty}; flags interval; elements = {{ {} }} }}\n",
            nets.join(", ")
        ));
        rules.push_str(&format!(
            "  {fam} daddr @{fam}dests meta mark set numgen inc mod {n} offset {first}\n"
        ));
    }
    format!(
        "table inet netrig_balance{g} {{\n{sets} chain pre {{\n  type filter hook prerouting priority mangle;\n{rules} }}\n chain out {{\n  type route hook output priority mangle;\n{rules} }}\n}}\n"
    )
}

/// The address the witness measures a direction towards: `to`'s on that very link or LAN (so
/// each of several parallel links is measured by itself).
pub fn address_on(p: &Plan, d: &Direction) -> Option<IpAddr> {
    p.segments
        .iter()
        .find(|s| s.name == d.link)?
        .members
        .iter()
        .find(|m| m.host == d.to)?
        .v4
        .map(|n| IpAddr::V4(n.addr()))
}

// ---------------------------------------------------------------- DSCP classes

/// A DSCP code point from a number or its name.
pub fn dscp_value(c: &DscpCode) -> Result<u8, String> {
    match c {
        DscpCode::Num(n) if (0..=63).contains(n) => Ok(*n as u8),
        DscpCode::Num(n) => Err(format!("DSCP {n}: 0 to 63")),
        DscpCode::Name(s) => {
            let u = s.to_ascii_uppercase();
            let v = match u.as_str() {
                "EF" => Some(46),
                "LE" => Some(1),
                "BE" | "DF" => Some(0),
                "VA" => Some(44),
                _ => {
                    let b = u.as_bytes();
                    match (u.len(), u.get(..2)) {
                        (3, Some("CS")) if (b'0'..=b'7').contains(&b[2]) => Some(8 * (b[2] - b'0')),
                        (4, Some("AF")) if (b'1'..=b'4').contains(&b[2]) && (b'1'..=b'3').contains(&b[3]) => {
                            Some(8 * (b[2] - b'0') + 2 * (b[3] - b'0'))
                        }
                        _ => None,
                    }
                }
            };
            v.ok_or_else(|| format!("DSCP {s:?}: 0 to 63, or CS0-CS7, AF11-AF43, EF, LE, BE"))
        }
    }
}

/// One class as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassPlan {
    pub name: String,
    /// htb class id, as "1:11".
    pub classid: String,
    pub dscp: Vec<u8>,
    pub default: bool,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub prio: u8,
    /// Its queue: "pfifo limit 64", "netem (delay)", or "" (htb's own).
    pub leaf: String,
}

fn class_rate(label: &str, what: &str, v: &str, link: u64) -> Result<u64, LabError> {
    if let Some(p) = v.trim().strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| spec(format!("{what} of {label}: {v:?} is not a share (as 1%)")))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(spec(format!(
                "{what} of {label}: {v}: a share above 0 % and at most 100 %"
            )));
        }
        return Ok(((link as f64 * p / 100.0).round() as u64).max(8_000));
    }
    parse_rate(v).map_err(|e| spec(format!("{what} of {label}: {e}")))
}

/// Does the element serve this direction's rate from a queue per DSCP class
/// ([`crate::pathsched`])? When it has classes and asks for `element_rate = true`, or a class
/// asks for RED (this kernel has no red qdisc for htb's classes).
pub fn element_classes(s: &Shape) -> bool {
    !s.classes.is_empty() && (s.element_rate == Some(true) || s.classes.iter().any(|c| c.red.is_some()))
}

/// The classes of one direction as built (the default class last when it was added), checked:
/// names, DSCP values, rates (the guaranteed rates add up to at most the direction's rate,
/// ceil between rate and it), prio.
pub fn plan_classes(
    dir_label: &str,
    link_rate: u64,
    s: &Shape,
    netem: &[&str],
) -> Result<Vec<ClassPlan>, LabError> {
    if s.classes.len() > 15 {
        return Err(spec(format!("classes on link {dir_label}: at most 15")));
    }
    let mut out = Vec::new();
    let mut seen_dscp: BTreeMap<u8, String> = BTreeMap::new();
    let mut defaults = 0;
    let mut classes = s.classes.clone();
    if !classes.iter().any(|c| c.dscp.is_none()) {
        classes.push(Class {
            name: "default".into(),
            ..Class::default()
        });
    }
    for c in &classes {
        let label = format!("class {} on link {dir_label}", c.name);
        let ok = !c.name.is_empty()
            && c.name.len() <= 16
            && c.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(spec(format!(
                "class {:?} on link {dir_label}: 1 to 16 characters of a-z, 0-9 and '-'",
                c.name
            )));
        }
        if out.iter().any(|o: &ClassPlan| o.name == c.name) {
            return Err(spec(format!("{label}: the name is given twice")));
        }
        let dscp: Vec<u8> = match &c.dscp {
            None => Vec::new(),
            Some(Dscp::One(x)) => vec![dscp_value(x).map_err(|e| spec(format!("{label}: {e}")))?],
            Some(Dscp::Many(v)) => v
                .iter()
                .map(|x| dscp_value(x).map_err(|e| spec(format!("{label}: {e}"))))
                .collect::<Result<_, _>>()?,
        };
        if c.dscp.is_some() && dscp.is_empty() {
            return Err(spec(format!(
                "{label}: dscp = [] (leave dscp out for the default class)"
            )));
        }
        for d in &dscp {
            if let Some(o) = seen_dscp.insert(*d, c.name.clone()) {
                return Err(spec(format!("{label}: DSCP {d} is class {o}'s already")));
            }
        }
        let default = dscp.is_empty();
        defaults += default as usize;
        if c.limit_packets.is_some() && c.limit_bytes.is_some() {
            return Err(spec(format!("{label}: limit_packets or limit_bytes, not both")));
        }
        if !netem.is_empty() && (c.limit_bytes.is_some() || s.limit_bytes.is_some()) {
            return Err(spec(format!(
                "limit_bytes on {label}: with netem the queue counts packets (limit_packets)"
            )));
        }
        let prio = c.prio.unwrap_or(1);
        if prio > 7 {
            return Err(spec(format!("prio of {label}: 0 (first) to 7, not {prio}")));
        }
        let rate = match &c.rate {
            Some(r) => Some(class_rate(&label, "rate", r, link_rate)?),
            None if default => None,
            None => {
                return Err(spec(format!(
                    "{label}: needs a rate (its guaranteed share: as \"1%\" or \"1.5M\")"
                )))
            }
        };
        let ceil = match &c.ceil {
            Some(r) => class_rate(&label, "ceil", r, link_rate)?,
            None => link_rate,
        };
        let i = out.len();
        let leaf = match (
            c.limit_packets.or(s.limit_packets),
            c.limit_bytes.or(s.limit_bytes),
        ) {
            _ if !netem.is_empty() => format!("netem ({})", netem.join(", ")),
            (Some(p), _) => format!("pfifo limit {p}"),
            (_, Some(b)) => format!("bfifo limit {b}"),
            _ => String::new(),
        };
        out.push(ClassPlan {
            name: c.name.clone(),
            classid: format!("1:{:x}", 0x10 + i),
            dscp,
            default,
            rate_bps: rate.unwrap_or(0),
            ceil_bps: ceil,
            prio,
            leaf,
        });
    }
    if defaults > 1 {
        return Err(spec(format!(
            "classes on link {dir_label}: {defaults} without dscp (only the default class has none)"
        )));
    }
    let given: u64 = out.iter().map(|c| c.rate_bps).sum();
    if given > link_rate {
        return Err(spec(format!(
            "classes on link {dir_label}: their rates add up to {given} bit/s, above the link's {link_rate}"
        )));
    }
    for c in out.iter_mut() {
        if c.rate_bps == 0 {
            c.rate_bps = link_rate - given;
            if c.rate_bps < 8_000 {
                return Err(spec(format!(
                    "class {} on link {dir_label}: the other classes' rates leave it {} bit/s (give it a rate, or lower theirs)",
                    c.name, c.rate_bps
                )));
            }
        }
        if c.ceil_bps < c.rate_bps || c.ceil_bps > link_rate {
            return Err(spec(format!(
                "ceil of class {} on link {dir_label}: between its rate ({} bit/s) and the link's ({link_rate} bit/s)",
                c.name, c.rate_bps
            )));
        }
    }
    Ok(out)
}

/// The htb quantum of a class: its rate in bytes per second / 10 (htb's r2q), kept between one
/// frame and 200,000 bytes, so the kernel neither warns nor clamps.
fn quantum(rate_bps: u64, mtu: u32) -> u64 {
    (rate_bps / 8 / 10).clamp(mtu as u64 + 14, 200_000)
}

/// htb at the root of `dev`, unclassified traffic to class 1:`default`, and its class 1:1 at
/// `rate` bit/s (which the classes under it share).
pub(crate) fn htb_root(ns: &str, dev: &str, default: &str, rate: u64, mtu: u32) -> [Step; 2] {
    let rb = format!("{rate}bit");
    let hb = htb_burst(rate, mtu).to_string();
    [
        cmd(
            ns,
            &[
                "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", default,
            ],
        ),
        cmd(
            ns,
            &[
                "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rb,
                "ceil", &rb, "burst", &hb, "cburst", &hb,
            ],
        ),
    ]
}

/// htb's bucket (`burst` and `cburst`, bytes) for a class of `rate` bits/s: 1 ms at the rate, at
/// least two full frames. tc's default is one frame plus rate/HZ, and with the nanosecond clock
/// of today's kernels (`/proc/net/psched`) that is about one frame (1375 bytes at 1 Gbit/s): the
/// class then depends on a timer per frame and, on a busy or virtual machine, gives 90-97 % of
/// its rate (measured here: 904-934 Mbit/s of TCP at 1 Gbit/s against 950-956 with 1 ms).
pub(crate) fn htb_burst(rate_bps: u64, mtu: u32) -> u64 {
    (rate_bps / 8 / 1000).max(2 * (mtu as u64 + 14))
}

/// The commands of a direction with classes: htb root, the rate's class 1:1, a class per DSCP
/// class with its queue, u32 filters for IPv4 and IPv6; and the mechanism's text.
#[allow(clippy::too_many_arguments)]
pub fn class_steps(
    dir_label: &str,
    ns: &str,
    dev: &str,
    s: &Shape,
    rate: Option<u64>,
    shaper: &str,
    netem: &[&str],
    mtu: u32,
) -> Result<(Vec<Step>, String), LabError> {
    let Some(link) = rate else {
        return Err(spec(format!(
            "classes on link {dir_label}: need the direction's rate (the classes share it)"
        )));
    };
    if shaper != "htb" {
        return Err(spec(format!(
            "classes on link {dir_label}: built with htb classes (shaper = \"htb\", not {shaper:?})"
        )));
    }
    let classes = plan_classes(dir_label, link, s, netem)?;
    let def = classes.iter().find(|c| c.default).expect("one default");
    let minor = def.classid.trim_start_matches("1:");
    let mut steps = htb_root(ns, dev, minor, link, mtu).to_vec();
    let mut text = Vec::new();
    for (i, c) in classes.iter().enumerate() {
        steps.push(htb_class(ns, dev, c, mtu));
        steps.extend(class_leaf(ns, dev, s, c, i, netem));
        for d in &c.dscp {
            steps.extend(dscp_filters(ns, dev, *d, &c.classid));
        }
        text.push(class_text(c));
    }
    Ok((
        steps,
        format!("htb rate {link}bit with classes [{}]", text.join("; ")),
    ))
}

/// Class `c`'s htb class under 1:1: its rate, ceil, buckets, priority and quantum.
fn htb_class(ns: &str, dev: &str, c: &ClassPlan, mtu: u32) -> Step {
    let (r, ce) = (format!("{}bit", c.rate_bps), format!("{}bit", c.ceil_bps));
    cmd(
        ns,
        &[
            "tc",
            "class",
            "add",
            "dev",
            dev,
            "parent",
            "1:1",
            "classid",
            &c.classid,
            "htb",
            "rate",
            &r,
            "ceil",
            &ce,
            "burst",
            &htb_burst(c.rate_bps, mtu).to_string(),
            "cburst",
            &htb_burst(c.ceil_bps, mtu).to_string(),
            "prio",
            &c.prio.to_string(),
            "quantum",
            &quantum(c.rate_bps, mtu).to_string(),
        ],
    )
}

/// The queue under class `c` (the `i`-th): netem with the direction's properties, or a fifo of
/// the class's limit (else the direction's); none (htb's own) without either.
fn class_leaf(ns: &str, dev: &str, s: &Shape, c: &ClassPlan, i: usize, netem: &[&str]) -> Option<Step> {
    let handle = format!("{:x}:", 0x20 + i);
    let mut leaf: Vec<String> = [
        "tc", "qdisc", "add", "dev", dev, "parent", &c.classid, "handle", &handle,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let spec_c = s.classes.iter().find(|x| x.name == c.name);
    let lp = spec_c.and_then(|x| x.limit_packets).or(s.limit_packets);
    let lb = spec_c.and_then(|x| x.limit_bytes).or(s.limit_bytes);
    if !netem.is_empty() {
        leaf.push("netem".into());
        if let Some(l) = lp {
            leaf.extend(["limit".into(), l.to_string()]);
        }
        if let Some(d) = &s.delay {
            leaf.extend(["delay".into(), d.clone()]);
            if let Some(j) = &s.jitter {
                leaf.push(j.clone());
            }
        }
        for (name, v) in s.percentages() {
            if let Some(v) = v {
                leaf.extend([name.to_string(), format!("{v}%")]);
            }
        }
    } else if let Some(p) = lp {
        leaf.extend(["pfifo".into(), "limit".into(), p.to_string()]);
    } else if let Some(b) = lb {
        leaf.extend(["bfifo".into(), "limit".into(), b.to_string()]);
    } else {
        return None;
    }
    Some(Step::Cmd {
        ns: Some(ns.into()),
        argv: leaf,
        stdin: None,
    })
}

/// The u32 filters that send DSCP `dscp` to class `classid`: IPv4's DS field, IPv6's traffic
/// class.
fn dscp_filters(ns: &str, dev: &str, dscp: u8, classid: &str) -> [Step; 2] {
    let tos = format!("{:#04x}", dscp << 2);
    [
        cmd(
            ns,
            &[
                "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "dsfield", &tos, "0xfc", "flowid", classid,
            ],
        ),
        cmd(
            ns,
            &[
                "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ipv6", "prio", "2", "u32",
                "match", "ip6", "priority", &tos, "0xfc", "flowid", classid,
            ],
        ),
    ]
}

/// Class `c` in the mechanism's text: "NAME 1:ID (dscp ...) rate ... ceil ... prio N, LEAF".
fn class_text(c: &ClassPlan) -> String {
    format!(
        "{} {}{} rate {}bit ceil {}bit prio {}{}",
        c.name,
        c.classid,
        if c.default {
            " (default)".to_string()
        } else {
            format!(
                " (dscp {})",
                c.dscp.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
            )
        },
        c.rate_bps,
        c.ceil_bps,
        c.prio,
        if c.leaf.is_empty() {
            String::new()
        } else {
            format!(", {}", c.leaf)
        }
    )
}

/// What one class carried, from `tc -s class show` (since the lab was built).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCounters {
    pub link: String,
    pub from: String,
    pub to: String,
    pub class: String,
    pub classid: String,
    pub dscp: Vec<u8>,
    pub default: bool,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    /// Bytes and packets the class sent (its dequeues: what went onto the link), since lab up.
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Packets dropped by its queue.
    pub dropped: u64,
    /// Times it was over its rate (or ceil) when asked to send.
    pub overlimits: u64,
}

/// `tc -s class show` text → per class id: (bytes, packets, dropped, overlimits).
pub fn parse_tc_classes(text: &str) -> BTreeMap<String, (u64, u64, u64, u64)> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"class") && w.len() > 2 {
            current = Some(w[2].to_string());
        } else if w.first() == Some(&"Sent") {
            if let Some(id) = current.take() {
                let num = |i: usize| {
                    w.get(i)
                        .map(|s| s.trim_matches(|c: char| !c.is_ascii_digit()))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0)
                };
                // Sent B bytes P pkt (dropped D, overlimits O requeues R)
                out.insert(id, (num(1), num(3), num(6), num(8)));
            }
        }
    }
    out
}

/// Reads each class's counters (`tc -s class show` in the sending host), for `lab status`.
/// A direction whose namespace is gone is left out.
pub fn read_class_counters(directions: &[Direction]) -> Vec<ClassCounters> {
    let mut out = Vec::new();
    // (Classes the path element serves are counted by it: its counters file.)
    for d in directions
        .iter()
        .filter(|d| !d.shape.classes.is_empty() && !element_classes(&d.shape))
    {
        let Some(rate) = d.rate_bps else {
            continue;
        };
        let Ok(classes) = plan_classes(&d.link, rate, &d.shape, &[]) else {
            continue;
        };
        let Ok(o) = std::process::Command::new("ip")
            .args(["netns", "exec", &d.ns, "tc", "-s", "class", "show", "dev", &d.dev])
            .stdin(std::process::Stdio::null())
            .output()
        else {
            continue;
        };
        if !o.status.success() {
            continue;
        }
        let seen = parse_tc_classes(&String::from_utf8_lossy(&o.stdout));
        for c in classes {
            let (b, p, dr, ov) = seen.get(&c.classid).copied().unwrap_or_default();
            out.push(ClassCounters {
                link: d.link.clone(),
                from: d.from.clone(),
                to: d.to.clone(),
                class: c.name,
                classid: c.classid,
                dscp: c.dscp,
                default: c.default,
                rate_bps: c.rate_bps,
                ceil_bps: c.ceil_bps,
                sent_bytes: b,
                sent_packets: p,
                dropped: dr,
                overlimits: ov,
            });
        }
    }
    out
}

/// The classes' lines of `lab status`.
pub fn classes_text(cs: &[ClassCounters]) -> String {
    let mut o = String::new();
    for c in cs {
        o.push_str(&format!(
            "  class {} ({}) on {} ({} → {}), {}: sent {} bytes in {} packets, dropped {}, over its rate {} times (tc -s class show, since lab up)\n",
            c.class,
            if c.default {
                "default".to_string()
            } else {
                format!("dscp {}", c.dscp.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","))
            },
            c.link,
            c.from,
            c.to,
            c.classid,
            c.sent_bytes,
            c.sent_packets,
            c.dropped,
            c.overlimits
        ));
    }
    o
}

// ---------------------------------------------------------------- conntrack table size

pub const CONNTRACK_MAX: &str = "net.netfilter.nf_conntrack_max";

/// Can a network namespace have its own nf_conntrack_max? Tried in a scratch namespace
/// (`nr<id>.ctprobe`, removed after): set to one below the host's, read back there, the
/// host's checked unchanged (restored if it changed).
pub fn probe_conntrack_max(id: &str) -> bool {
    let path = "/proc/sys/net/netfilter/nf_conntrack_max";
    let Some(host) = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return false;
    };
    let ns = format!("nr{id}.ctprobe");
    let ip = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    };
    if !ip(&["netns", "add", &ns]).is_some_and(|o| o.status.success()) {
        return false;
    }
    let want = host.saturating_sub(1).max(1).to_string();
    let set = ip(&[
        "netns",
        "exec",
        &ns,
        "sysctl",
        "-qw",
        &format!("{CONNTRACK_MAX}={want}"),
    ])
    .is_some_and(|o| o.status.success());
    let inside = ip(&["netns", "exec", &ns, "sysctl", "-n", CONNTRACK_MAX])
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let after = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if after != Some(host) {
        let _ = std::fs::write(path, host.to_string());
    }
    let _ = ip(&["netns", "del", &ns]);
    set && inside.as_deref() == Some(want.as_str()) && after == Some(host)
}

/// Hosts' `conntrack_max`: refused by name where the kernel keeps the table's size host-wide;
/// else a sysctl step per host (read back by the builder, the host's checked unchanged).
pub fn conntrack_max(
    topo: &Topology,
    hosts: &BTreeMap<String, String>,
    allowed: bool,
    refused: &mut Vec<String>,
) -> Result<Vec<Step>, LabError> {
    let mut steps = Vec::new();
    for (name, h) in &topo.hosts {
        let Some(n) = h.conntrack_max else { continue };
        if !(1..=i32::MAX as u64).contains(&n) {
            return Err(spec(format!(
                "conntrack_max of host {name}: 1 to {} (got {n})",
                i32::MAX
            )));
        }
        if h.conntrack == Some(false) {
            return Err(spec(format!(
                "conntrack_max of host {name}: with conntrack = false nothing is tracked"
            )));
        }
        if !allowed {
            refused.push(format!(
                "conntrack_max on host {name}: needs {CONNTRACK_MAX} settable in a network namespace (this kernel keeps it host-wide: read-only in a lab host); netrig changes nothing outside the lab"
            ));
            continue;
        }
        steps.push(Step::Sysctl {
            ns: hosts[name].clone(),
            key: CONNTRACK_MAX.into(),
            value: n.to_string(),
        });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::plan::{plan, Kernel};

    fn steps(text: &str, k: Kernel) -> Result<Vec<String>, LabError> {
        let p = plan(
            &crate::model::parse(text).unwrap(),
            "abc123",
            k,
            std::path::Path::new("."),
        )?;
        Ok(p.steps
            .iter()
            .map(|s| match s {
                Step::Cmd { ns, argv, stdin } => format!(
                    "{} {}{}",
                    ns.as_deref().unwrap_or("-"),
                    argv.join(" "),
                    stdin.as_deref().map(|t| format!(" <<{t}")).unwrap_or_default()
                ),
                Step::Sysctl { ns, key, value } => format!("{ns} sysctl {key}={value}"),
            })
            .collect())
    }

    /// c — r1 =(two links)= r2 — s.
    const PARALLEL: &str = "[hosts.c]\n[hosts.r1]\nrouter = true\n[hosts.r2]\nrouter = true\n[hosts.s]\n\
        [[links]]\nends = ['c', 'r1']\n[[links]]\nends = ['r1', 'r2']\n[[links]]\nends = ['r1', 'r2']\n\
        [[links]]\nends = ['r2', 's']\n";

    #[test]
    fn parallel_links_get_interfaces_of_their_own_and_a_multipath_route_per_flow() {
        let c = steps(PARALLEL, Kernel::default()).unwrap();
        let has = |x: &str| assert!(c.iter().any(|s| s == x), "missing {x:?} in {c:#?}");
        has("nrabc123-r1 ip link add to-r2 type veth peer name to-r1 netns nrabc123-r2");
        has("nrabc123-r1 ip link add to2-r2 type veth peer name to2-r1 netns nrabc123-r2");
        has("nrabc123-r1 ip addr add 198.18.2.1/24 dev to2-r2");
        // Beyond the other end: one route over both links, both families, the L4 hash.
        has("nrabc123-r1 ip route add 198.18.3.0/24 src 198.18.1.1 nexthop via 198.18.1.2 dev to-r2 nexthop via 198.18.2.2 dev to2-r2");
        has("nrabc123-r1 ip -6 route add 2001:db8:0:3::/64 src 2001:db8:0:1::1 nexthop via 2001:db8:0:1::2 dev to-r2 nexthop via 2001:db8:0:2::2 dev to2-r2");
        has("nrabc123-r2 ip route add 198.18.0.0/24 src 198.18.1.2 nexthop via 198.18.1.1 dev to-r1 nexthop via 198.18.2.1 dev to2-r1");
        has("nrabc123-r1 sysctl net.ipv4.fib_multipath_hash_policy=1");
        has("nrabc123-r2 sysctl net.ipv6.fib_multipath_hash_policy=1");
        // Hosts behind a router route as before (through the router's first link).
        has("nrabc123-c ip route add 198.18.3.0/24 via 198.18.0.2");
        assert!(
            !c.iter().any(|s| s.contains("nft") || s.contains("fwmark")),
            "{c:#?}"
        );
        let p = plan(
            &crate::model::parse(PARALLEL).unwrap(),
            "abc123",
            Kernel::default(),
            std::path::Path::new("."),
        )
        .unwrap();
        let names: Vec<&str> = p.segments.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c-r1", "r1-r2", "r1-r2.2", "r2-s"]);
    }

    #[test]
    fn the_witness_measures_each_parallel_link_towards_the_address_on_it() {
        let text = PARALLEL.replacen(
            "[[links]]\nends = ['r2', 's']",
            "[links.shape.r1]\nrate = '20M'\n[[links]]\nends = ['r2', 's']",
            1,
        );
        let p = plan(
            &crate::model::parse(&text).unwrap(),
            "abc123",
            Kernel::default(),
            std::path::Path::new("."),
        )
        .unwrap();
        let d = &p.directions[0];
        assert_eq!((d.link.as_str(), d.dev.as_str()), ("r1-r2.2", "to2-r2"));
        assert_eq!(address_on(&p, d).unwrap().to_string(), "198.18.2.2");
        // The first shared segment's address would measure the other link.
        assert_eq!(
            crate::plan::address_of(&p, "r2", "r1").unwrap().to_string(),
            "198.18.1.2"
        );
    }

    #[test]
    fn per_packet_balancing_marks_round_robin_and_routes_each_mark_over_its_link() {
        let text = PARALLEL.replacen(
            "ends = ['r1', 'r2']\n",
            "ends = ['r1', 'r2']\nbalance = 'packet'\n",
            1,
        );
        let c = steps(&text, Kernel::default()).unwrap();
        let has = |x: &str| assert!(c.iter().any(|s| s == x), "missing {x:?} in {c:#?}");
        has("nrabc123-r1 ip rule add fwmark 1001 table 1001 priority 1001");
        has("nrabc123-r1 ip -6 rule add fwmark 1002 table 1002 priority 1002");
        has("nrabc123-r1 ip route add 198.18.3.0/24 via 198.18.1.2 dev to-r2 src 198.18.1.1 table 1001");
        has("nrabc123-r1 ip route add 198.18.3.0/24 via 198.18.2.2 dev to2-r2 src 198.18.1.1 table 1002");
        has("nrabc123-r2 ip route add 198.18.0.0/24 via 198.18.2.1 dev to2-r1 src 198.18.1.2 table 1002");
        let nft: Vec<_> = c.iter().filter(|s| s.contains("nft -f -")).collect();
        assert_eq!(nft.len(), 2, "one table in each end: {nft:#?}");
        assert!(
            nft[0].starts_with("nrabc123-r1") && nft[0].contains("elements = { 198.18.3.0/24 }"),
            "{nft:#?}"
        );
        assert!(nft[0].contains("numgen inc mod 2 offset 1001"), "{nft:#?}");
    }

    #[test]
    fn balance_is_checked() {
        let one = "[hosts.a]\n[hosts.b]\n[[links]]\nends = ['a', 'b']\nbalance = 'flow'\n";
        let e = steps(one, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("balance of link a-b: it has no parallel link"), "{e}");
        let two = "[hosts.a]\n[hosts.b]\n[[links]]\nends = ['a', 'b']\nbalance = 'flow'\n[[links]]\nends = ['b', 'a']\nbalance = 'packet'\n";
        let e = steps(two, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("\"flow\" on one, \"packet\" on another"), "{e}");
        let odd = two.replace("'packet'", "'hash'");
        let e = steps(&odd, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("balance of link a-b.2"), "{e}");
    }

    /// The QBSS set-up: best effort beside a scavenger class (CS1) with 1 % guaranteed that may
    /// borrow the whole link, and a capped EF class first.
    const QBSS: &str = "[hosts.c]\n[hosts.r]\nrouter = true\n[hosts.s]\n[[links]]\nends = ['c', 'r']\n\
        [[links]]\nends = ['r', 's']\n[links.shape.r]\nrate = '155M'\nlimit_packets = 1000\n\
        classes = [ { name = 'best-effort' }, { name = 'scavenger', dscp = 'CS1', rate = '1%', limit_packets = 64 },\
        { name = 'voice', dscp = [46, 'CS5'], rate = '10M', ceil = '10M', prio = 0 } ]\n";

    #[test]
    fn dscp_classes_are_htb_classes_with_filters_on_the_dsfield_of_both_families() {
        let c = steps(QBSS, Kernel::default()).unwrap();
        let has = |x: &str| assert!(c.iter().any(|s| s == x), "missing {x:?} in {c:#?}");
        let r = "nrabc123-r tc";
        has(&format!("{r} qdisc add dev to-s root handle 1: htb default 10"));
        has(&format!(
            "{r} class add dev to-s parent 1: classid 1:1 htb rate 155000000bit ceil 155000000bit burst 19375 cburst 19375"
        ));
        // best effort: what the others leave (155 - 1.55 - 10 Mbit/s), may borrow all.
        has(&format!("{r} class add dev to-s parent 1:1 classid 1:10 htb rate 143450000bit ceil 155000000bit burst 17931 cburst 19375 prio 1 quantum 200000"));
        has(&format!("{r} class add dev to-s parent 1:1 classid 1:11 htb rate 1550000bit ceil 155000000bit burst 3028 cburst 19375 prio 1 quantum 19375"));
        has(&format!("{r} class add dev to-s parent 1:1 classid 1:12 htb rate 10000000bit ceil 10000000bit burst 3028 cburst 3028 prio 0 quantum 125000"));
        has(&format!(
            "{r} qdisc add dev to-s parent 1:10 handle 20: pfifo limit 1000"
        ));
        has(&format!(
            "{r} qdisc add dev to-s parent 1:11 handle 21: pfifo limit 64"
        ));
        has(&format!(
            "{r} filter add dev to-s parent 1: protocol ip prio 1 u32 match ip dsfield 0x20 0xfc flowid 1:11"
        ));
        has(&format!("{r} filter add dev to-s parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x20 0xfc flowid 1:11"));
        has(&format!(
            "{r} filter add dev to-s parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:12"
        ));
        has(&format!(
            "{r} filter add dev to-s parent 1: protocol ip prio 1 u32 match ip dsfield 0xa0 0xfc flowid 1:12"
        ));
        let p = plan(
            &crate::model::parse(QBSS).unwrap(),
            "abc123",
            Kernel::default(),
            std::path::Path::new("."),
        )
        .unwrap();
        let m = &p.directions[0].mechanism;
        assert!(
            m.starts_with("htb rate 155000000bit with classes [best-effort 1:10 (default) rate 143450000bit"),
            "{m}"
        );
        assert!(
            m.contains("scavenger 1:11 (dscp 8) rate 1550000bit ceil 155000000bit prio 1, pfifo limit 64"),
            "{m}"
        );
        // Without a class lacking dscp, a default class is added.
        let no_default = QBSS.replace("{ name = 'best-effort' }, ", "");
        let c = steps(&no_default, Kernel::default()).unwrap();
        assert!(
            c.iter()
                .any(|s| s
                    .ends_with("classid 1:12 htb rate 143450000bit ceil 155000000bit burst 17931 cburst 19375 prio 1 quantum 200000")),
            "{c:#?}"
        );
        assert!(c.iter().any(|s| s.ends_with("htb default 12")), "{c:#?}");
    }

    #[test]
    fn the_shipped_scavenger_plan_builds_its_classes_with_wred_in_the_element_without_netem() {
        let topo = crate::model::parse(include_str!("../../../plans/scavenger.toml")).unwrap();
        // The plan turns offloads off (MTU-sized packets in the queues): ethtool is there.
        let k = Kernel {
            ethtool: true,
            ..Kernel::default()
        };
        let p = plan(&topo, "abc123", k, std::path::Path::new(".")).unwrap();
        let d = p.directions.iter().find(|d| d.from == "router").unwrap();
        assert_eq!(d.rate_bps, Some(155_000_000));
        // WRED on the scavenger classes: the classes are the element's (no red qdisc here).
        assert!(
            d.mechanism.starts_with("netrig element rate 155000000bit, weighted fair queueing over classes [best-effort (default): 148800000bit guaranteed, limit 1000 packets, drop-tail; scavenger (dscp 8): 1550000bit guaranteed, limit 64 packets, WRED min 22 max 40 probability 0.1 weight 0.002;")
                && d.mechanism.ends_with("+ netrig element (delay)"),
            "{}",
            d.mechanism
        );
        let classes = p.elements[0].config.props[0]
            .classes
            .clone()
            .expect("the element's classes");
        assert_eq!(
            classes.classes.iter().map(|c| c.limit).collect::<Vec<_>>(),
            [1000, 64, 256, 1024, 1024]
        );
        assert_eq!(p.elements[0].config.props[0].delay_us, 58_000);
        assert_eq!(p.elements[0].config.props[1].delay_us, 58_000);
    }

    #[test]
    fn classes_that_cannot_be_built_are_refused_by_name() {
        // WRED on a class puts the classes in the path element, which has no priorities or
        // capped classes: the voice class's prio and ceil are refused there, by name.
        let red = QBSS.replace("limit_packets = 64 }", "limit_packets = 64, red = true }");
        let e = steps(&red, Kernel::default()).unwrap_err();
        assert!(matches!(e, LabError::Refused(_)), "{e}");
        for want in [
            "prio of class voice on link r-s (r → s): the classes are served by netrig's path element",
            "ceil of class voice on link r-s (r → s)",
        ] {
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        // RED for the whole direction beside classes: each class has its own.
        let text = QBSS.replace("limit_packets = 1000\n", "limit_packets = 1000\nred = true\n");
        let e = steps(&text, Kernel::default()).unwrap_err().to_string();
        assert!(
            e.contains("red on link r-s (r → s): with classes, RED is each class's own"),
            "{e}"
        );
        let over = QBSS.replace("rate = '10M', ceil = '10M'", "rate = '160M'");
        let e = steps(&over, Kernel::default()).unwrap_err().to_string();
        assert!(
            e.contains("their rates add up to 161550000 bit/s, above the link's 155000000"),
            "{e}"
        );
        let tbf = QBSS.replace("rate = '155M'\n", "rate = '155M'\nshaper = 'tbf'\n");
        let e = steps(&tbf, Kernel::default()).unwrap_err().to_string();
        assert!(
            e.contains("classes on link r-s (r → s): built with htb classes"),
            "{e}"
        );
        let norate = QBSS.replace("rate = '155M'\n", "");
        let e = steps(&norate, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("need the direction's rate"), "{e}");
        let twice = QBSS.replace("dscp = [46, 'CS5']", "dscp = [46, 'CS1']");
        let e = steps(&twice, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("DSCP 8 is class scavenger's already"), "{e}");
    }

    #[test]
    fn conntrack_max_is_refused_where_the_kernel_keeps_it_host_wide_and_set_where_it_does_not() {
        let text = "[hosts.a]\nconntrack_max = 1024\n[hosts.b]\n[[links]]\nends = ['a', 'b']\n";
        let e = steps(text, Kernel::default()).unwrap_err();
        assert!(matches!(e, LabError::Refused(_)), "{e}");
        assert!(
            e.to_string().contains("conntrack_max on host a: needs net.netfilter.nf_conntrack_max settable in a network namespace"),
            "{e}"
        );
        let k = Kernel {
            conntrack_max: true,
            ..Kernel::default()
        };
        let c = steps(text, k).unwrap();
        assert!(
            c.contains(&"nrabc123-a sysctl net.netfilter.nf_conntrack_max=1024".to_string()),
            "{c:#?}"
        );
        let off = text.replace("conntrack_max = 1024", "conntrack_max = 1024\nconntrack = false");
        assert!(steps(&off, k)
            .unwrap_err()
            .to_string()
            .contains("with conntrack = false"));
    }

    #[test]
    fn dscp_names_are_their_code_points() {
        let n = |s: &str| dscp_value(&DscpCode::Name(s.into()));
        assert_eq!(n("CS1"), Ok(8));
        assert_eq!(n("ef"), Ok(46));
        assert_eq!(n("AF41"), Ok(34));
        assert_eq!(n("AF13"), Ok(14));
        assert_eq!(n("LE"), Ok(1));
        assert!(n("AF51").is_err());
        assert!(n("CS8").is_err());
        assert_eq!(dscp_value(&DscpCode::Num(63)), Ok(63));
        assert!(dscp_value(&DscpCode::Num(64)).is_err());
    }

    #[test]
    fn tc_class_statistics_are_read_per_class() {
        let text = "class htb 1:11 parent 1:1 leaf 21: prio 1 rate 1550Kbit ceil 155Mbit burst 1599b cburst 1569b \n Sent 123456 bytes 89 pkt (dropped 7, overlimits 12 requeues 0) \n backlog 0b 0p requeues 0\n lended: 0 borrowed: 0 giants: 0\n\nclass htb 1:10 parent 1:1 prio 1 rate 153450Kbit ceil 155Mbit burst 1572b cburst 1569b \n Sent 9 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n";
        let m = parse_tc_classes(text);
        assert_eq!(m["1:11"], (123456, 89, 7, 12));
        assert_eq!(m["1:10"], (9, 1, 0, 0));
    }

    #[test]
    fn the_round_robin_marks_forwarded_and_local_packets_with_one_counter_per_family() {
        let t = round_robin(0, 2, &["198.18.3.0/24".into()], &["2001:db8:0:3::/64".into()]);
        assert!(t.contains("type route hook output"), "{t}");
        assert!(t.contains("hook prerouting"), "{t}");
        assert_eq!(
            t.matches("ip daddr @ipdests meta mark set numgen inc mod 2 offset 1001")
                .count(),
            2,
            "{t}"
        );
        assert!(t.contains("elements = { 2001:db8:0:3::/64 }"), "{t}");
    }
}
