//! The vocabulary of a lab as planned and built: the kernel's abilities ([`Kernel`]), the
//! commands ([`Step`]), the segments and shaped directions, the [`Plan`] that holds them, and
//! where a lab's state is kept. Data only, below the planning that makes it ([`crate::plan`],
//! [`crate::topology`], [`crate::lan_element`]) and the builder that runs it ([`crate::build`]).

use crate::model::Shape;
use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where each lab's state file (`<id>.json`) and its files (`<id>/`) are kept.
pub const STATE_DIR: &str = "/run/netrig/labs";

/// What the running kernel and system can build (probed by the builder).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Kernel {
    pub netem: bool,
    pub red: bool,
    pub ethtool: bool,
    /// A network namespace may set its own net.netfilter.nf_conntrack_max.
    #[serde(default)]
    pub conntrack_max: bool,
}

/// One command, run in a host's namespace (`ip netns exec NS ...`) or in the root one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Step {
    Cmd {
        ns: Option<String>,
        argv: Vec<String>,
        /// Given on standard input (an inline nftables ruleset).
        stdin: Option<String>,
    },
    /// `sysctl -w KEY=VALUE` in NS, then read back.
    Sysctl { ns: String, key: String, value: String },
}

/// One member of a segment: a host's interface on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Member {
    pub host: String,
    pub ns: String,
    pub dev: String,
    pub v4: Option<Ipv4Net>,
    pub v6: Option<Ipv6Net>,
}

/// A link or a LAN segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    /// "a-b" for a link, the LAN's name for a LAN.
    pub name: String,
    pub lan: bool,
    pub members: Vec<Member>,
    pub mtu: u32,
}

/// One shaped direction: what `from` sends on `dev` (its egress).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Direction {
    pub link: String,
    pub from: String,
    /// The host the witness measures towards (the other end, or the first other LAN member).
    pub to: String,
    pub ns: String,
    pub dev: String,
    pub shape: Shape,
    pub rate_bps: Option<u64>,
    /// The qdiscs that build it, as "htb rate + pfifo limit 100".
    pub mechanism: String,
    pub mtu: u32,
}

/// Everything the builder makes, named by the lab's id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub id: String,
    /// Host name → namespace.
    pub hosts: BTreeMap<String, String>,
    /// Every namespace made, hosts' and bridges' alike.
    pub namespaces: Vec<String>,
    pub segments: Vec<Segment>,
    pub directions: Vec<Direction>,
    pub steps: Vec<Step>,
    /// netrig's path elements (a link's netem properties where the kernel has no netem), each
    /// started in its namespace after `steps`.
    #[serde(default)]
    pub elements: Vec<ElementPlan>,
    /// Parallel links and how they are balanced.
    #[serde(default)]
    pub groups: Vec<GroupState>,
}

/// One path element: the process `netrig lab element CONFIG` in namespace `ns`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ElementPlan {
    pub ns: String,
    pub config: crate::element::Config,
}

/// How traffic is spread over parallel links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Balance {
    /// Per flow: an ECMP route, L4 hash (addresses, protocol, ports).
    Flow,
    /// Per packet: round robin (nftables numgen + fwmark routing).
    Packet,
}

/// A group of parallel links as built, for the lab's state and `lab status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupState {
    pub ends: [String; 2],
    /// The links' names, in order.
    pub links: Vec<String>,
    pub balance: Balance,
    /// How: "per flow: ECMP route, L4 hash" or "per packet: round robin (nftables numgen, fwmark
    /// tables 1001-1002)".
    pub how: String,
}
