//! The topology a `[lab]` section declares (docs/LAB.md), as read from TOML.
//! Every table refuses fields it does not know, so a misspelt property is an
//! error, never silently ignored.

mod parts;

pub use parts::{red_or_bool, Class, Dscp, DscpCode, GeSpec, RedClass, RedSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A lab: hosts, point-to-point links and LAN segments.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The lab's name (`lab up --name` overrides it; default: the file's stem).
    #[serde(default)]
    pub name: Option<String>,
    /// The port each host's agent listens on (default 6387).
    #[serde(default)]
    pub agent_port: Option<u16>,
    /// Measure each shaped link after building (default true).
    #[serde(default)]
    pub witness: Option<bool>,
    /// The hosts by name (1 to 10 characters: a-z, 0-9, '-').
    #[serde(default)]
    pub hosts: BTreeMap<String, Host>,
    /// Point-to-point links (a veth pair each).
    #[serde(default)]
    pub links: Vec<Link>,
    /// LAN segments (a bridge each, joining several hosts).
    #[serde(default)]
    pub lans: Vec<Lan>,
}

/// One host: a network namespace with an agent inside.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Forwards between its links (IPv4 and IPv6); routes through it are computed.
    #[serde(default)]
    pub router: bool,
    /// Sysctls of this host, from an allow-list ([`crate::SYSCTLS`]); values as `sysctl -w` takes them.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Connection tracking: `true` makes every packet tracked (an nftables table with a `ct`
    /// rule), `false` exempts every packet (`notrack`); absent: the kernel's default.
    #[serde(default)]
    pub conntrack: Option<bool>,
    /// An nftables ruleset file loaded inside this host (relative to the lab file's directory).
    #[serde(default)]
    pub nft: Option<String>,
    /// An nftables ruleset, inline.
    #[serde(default)]
    pub nft_inline: Option<String>,
    /// The connection tracking table's size (net.netfilter.nf_conntrack_max) in this host:
    /// refused where the kernel keeps it host-wide.
    #[serde(default)]
    pub conntrack_max: Option<u64>,
    /// netrig's HTTP server on this port beside the host's agent, in its process (`netrig serve
    /// --http-port`; the IA64 study's userver): a load (`http`) from another host goes to it.
    #[serde(default)]
    pub http_port: Option<u16>,
}

/// A point-to-point link between two hosts.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The two hosts it joins.
    pub ends: [String; 2],
    /// MTU of both interfaces.
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Offloads of both interfaces (gro, gso, tso: on or off).
    #[serde(default)]
    pub offloads: BTreeMap<String, bool>,
    /// Addresses by host (CIDR, IPv4 and/or IPv6); default: assigned from 198.18.0.0/15 and
    /// 2001:db8::/32.
    #[serde(default)]
    pub addrs: BTreeMap<String, Vec<String>>,
    /// What each end sends on this link, by the sending host's name.
    #[serde(default)]
    pub shape: BTreeMap<String, Shape>,
    /// Between two hosts joined by several links (parallel links): "flow" (per-flow hash, an
    /// ECMP route; the default) or "packet" (round robin). See [`crate::topology`].
    #[serde(default)]
    pub balance: Option<String>,
}

/// A LAN segment: a bridge joining several hosts.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lan {
    /// The segment's name (1 to 10 characters: a-z, 0-9, '-').
    pub name: String,
    /// The hosts on it.
    pub hosts: Vec<String>,
    /// The host whose namespace holds the bridge (default: a namespace of its own). When that
    /// host is also in `hosts`, its address is on the bridge.
    #[serde(default)]
    pub switch: Option<String>,
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub offloads: BTreeMap<String, bool>,
    #[serde(default)]
    pub addrs: BTreeMap<String, Vec<String>>,
    /// What each host sends into the segment, by host.
    #[serde(default)]
    pub shape: BTreeMap<String, Shape>,
    /// What the switch sends to each host, by host: its port's egress (a server's port on a
    /// shared segment, the bottleneck when several clients send to it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port: BTreeMap<String, Shape>,
}

/// The properties of one direction of a link (the sender's egress).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Rate in bits/s on the wire (Ethernet header included): "50M", "1G", "500k", "50mbit".
    #[serde(default)]
    pub rate: Option<String>,
    /// The rate's qdisc: "htb" (default) or "tbf".
    #[serde(default)]
    pub shaper: Option<String>,
    /// Drop-tail queue limit in packets (pfifo).
    #[serde(default)]
    pub limit_packets: Option<u32>,
    /// Drop-tail queue limit in bytes (bfifo).
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// One-way delay ("10ms"): netem.
    #[serde(default)]
    pub delay: Option<String>,
    /// Delay jitter ("1ms"): netem.
    #[serde(default)]
    pub jitter: Option<String>,
    /// Random loss, percent: netem.
    #[serde(default)]
    pub loss: Option<f64>,
    /// Duplication, percent: netem.
    #[serde(default)]
    pub duplicate: Option<f64>,
    /// Reordering, percent: netem.
    #[serde(default)]
    pub reorder: Option<f64>,
    /// Corruption, percent: netem.
    #[serde(default)]
    pub corrupt: Option<f64>,
    /// Bursty loss, Gilbert–Elliott, with netem's parameters in percent:
    /// `{ p = 1.0, r = 25.0, "1-h" = 100.0, "1-k" = 0.0 }` (netem's `loss gemodel p r 1-h 1-k`).
    #[serde(default)]
    pub loss_gemodel: Option<GeSpec>,
    /// RED before the queue's limit: `true` (default thresholds) or
    /// `{ min, max, probability, weight, dscp = { cs1 = { min, max, probability } } }`.
    #[serde(default, deserialize_with = "red_or_bool")]
    pub red: Option<RedSpec>,
    /// The rate and queue served by netrig's path element (its own queue, drop-tail or RED)
    /// instead of htb/tbf on the sender's egress.
    #[serde(default)]
    pub element_rate: Option<bool>,
    /// DSCP classes under the rate (htb classes with u32 filters on the DSCP): see
    /// [`Class`].
    #[serde(default)]
    pub classes: Vec<Class>,
    /// Who builds delay, jitter, loss, duplicate and reorder: absent, netem where the kernel has
    /// it, else netrig's path element; `true`: the element even where netem exists; `false`:
    /// netem only (refused without it).
    #[serde(default)]
    pub element: Option<bool>,
}

impl Shape {
    /// The netem properties asked for, by name.
    pub fn netem_properties(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.delay.is_some() {
            v.push("delay");
        }
        if self.jitter.is_some() {
            v.push("jitter");
        }
        if self.loss.is_some() {
            v.push("loss");
        }
        if self.duplicate.is_some() {
            v.push("duplicate");
        }
        if self.reorder.is_some() {
            v.push("reorder");
        }
        if self.corrupt.is_some() {
            v.push("corrupt");
        }
        if self.loss_gemodel.is_some() {
            v.push("loss_gemodel");
        }
        v
    }

    pub fn is_empty(&self) -> bool {
        Shape {
            element: None,
            ..self.clone()
        } == Shape::default()
    }

    /// The properties given as percentages (netem's order), by name.
    pub fn percentages(&self) -> [(&'static str, Option<f64>); 4] {
        [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ]
    }

    /// Are this direction's netem properties built by netrig's path element (`netem`: the kernel
    /// has netem)?
    pub fn by_element(&self, netem: bool) -> bool {
        let asked = self.netem_properties();
        !asked.is_empty() && self.element.unwrap_or(!netem)
    }
}

/// Reads the lab of a TOML document: its `[lab]` table (a plan's section), or, when it has
/// none, the document itself when it looks like a lab (has `hosts`).
pub fn parse(text: &str) -> Result<Topology, crate::LabError> {
    let value: toml::Table =
        toml::from_str(text).map_err(|e| crate::LabError::Spec(format!("not TOML: {e}")))?;
    let lab = match value.get("lab") {
        Some(lab) => lab.clone(),
        None if value.contains_key("hosts") => toml::Value::Table(value),
        None => {
            return Err(crate::LabError::Spec(
                "no [lab] section (and no [hosts] table)".into(),
            ))
        }
    };
    lab.try_into()
        .map_err(|e: toml::de::Error| crate::LabError::Spec(format!("[lab]: {}", e.message())))
}

/// Bits per second from "50M", "50Mbit", "50mbit/s", "1G", "500k", "1000000".
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("bit/s")
        .or_else(|| lower.strip_suffix("bps"))
        .or_else(|| lower.strip_suffix("bit"))
        .unwrap_or(&lower);
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1e3),
        Some('m') => (&body[..body.len() - 1], 1e6),
        Some('g') => (&body[..body.len() - 1], 1e9),
        _ => (body, 1.0),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("rate {s:?}: not a rate (as 50M, 1G, 500k: bits/s)"))?;
    let bps = n * mult;
    if !(bps.is_finite() && (8_000.0..=400e9).contains(&bps)) {
        return Err(format!("rate {s:?}: between 8k and 400G bits/s"));
    }
    Ok(bps.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_bits_per_second() {
        assert_eq!(parse_rate("50M").unwrap(), 50_000_000);
        assert_eq!(parse_rate("50mbit").unwrap(), 50_000_000);
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("500kbit/s").unwrap(), 500_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("1").is_err());
    }

    #[test]
    fn a_plan_section_and_a_standalone_file_read_the_same() {
        let plan = "[test]\nkind='tcp-stream'\n[lab.hosts.a]\n[lab.hosts.b]\n[[lab.links]]\nends=['a','b']\n";
        let alone = "[hosts.a]\n[hosts.b]\n[[links]]\nends=['a','b']\n";
        assert_eq!(parse(plan).unwrap(), parse(alone).unwrap());
    }

    #[test]
    fn a_misspelt_property_is_refused_by_name() {
        let e = parse("[hosts.a]\n[hosts.b]\n[[links]]\nends=['a','b']\nshape.a.rte='5M'\n").unwrap_err();
        assert!(e.to_string().contains("rte"), "{e}");
    }
}
