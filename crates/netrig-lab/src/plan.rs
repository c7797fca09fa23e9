//! From a [`Topology`] to what will be built: namespaces, interfaces, addresses, routes, qdiscs,
//! as a list of commands. Pure: the kernel's abilities come in as [`Kernel`], so every refusal
//! and every command is testable without root.

use crate::model::{parse_rate, Lan, Link, Shape, Topology};
pub use crate::steps::{Direction, ElementPlan, Kernel, Member, Plan, Segment, Step};
use crate::topology::htb_root;
use crate::LabError;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

/// The sysctls a host may set. Each is per network namespace on Linux (the builder still
/// checks the value reads back inside the host and that the root namespace's is unchanged).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.somaxconn",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    // A TCP_CRR client opens a connection per transaction: it needs ports in TIME_WAIT back
    // (after some 14,000 connections in a minute, connect() had none left: 10,000 trans/s
    // fell to 150).
    "net.ipv4.tcp_tw_reuse",
];

fn cmd(ns: &str, argv: &[&str]) -> Step {
    Step::Cmd {
        ns: Some(ns.to_string()),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
    }
}

fn cmd_s(ns: &str, argv: Vec<String>) -> Step {
    Step::Cmd {
        ns: Some(ns.to_string()),
        argv,
        stdin: None,
    }
}

fn root(argv: &[&str]) -> Step {
    Step::Cmd {
        ns: None,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
    }
}

fn spec(msg: impl Into<String>) -> LabError {
    LabError::Spec(msg.into())
}

/// A host's or LAN's name: 1 to 10 of a-z, 0-9, '-', starting with a letter or digit (so
/// `nr<6 hex>-<host>` and `to-<host>` fit the kernel's limits).
pub fn check_name(what: &str, name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= 10
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(spec(format!(
            "{what} {name:?}: 1 to 10 characters of a-z, 0-9 and '-' (names become namespace and interface names)"
        )))
    }
}

/// The namespace of a host.
pub fn host_ns(id: &str, host: &str) -> String {
    format!("nr{id}-{host}")
}

fn bench_net(net: &IpNet) -> bool {
    let v4: Ipv4Net = "198.18.0.0/15".parse().expect("literal");
    let v6: Ipv6Net = "2001:db8::/32".parse().expect("literal");
    match net {
        IpNet::V4(n) => v4.contains(n),
        IpNet::V6(n) => v6.contains(n),
    }
}

/// Addresses of a segment's members: the given ones (all members), or assigned from slot
/// `slot` (links 0.., LANs from 511 down) of 198.18.0.0/15 in /24s and 2001:db8:0:slot::/64.
/// A member's IPv4 and IPv6 addresses.
type Addrs = (Option<Ipv4Net>, Option<Ipv6Net>);

fn addresses(
    seg: &str,
    hosts: &[String],
    given: &BTreeMap<String, Vec<String>>,
    slot: u32,
) -> Result<Vec<Addrs>, LabError> {
    if given.is_empty() {
        let base = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) + (slot << 8);
        return Ok((0..hosts.len())
            .map(|k| {
                let v4 = Ipv4Net::new(std::net::Ipv4Addr::from(base + k as u32 + 1), 24).expect("24");
                let v6 = Ipv6Net::new(
                    std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, slot as u16, 0, 0, 0, k as u16 + 1),
                    64,
                )
                .expect("64");
                (Some(v4), Some(v6))
            })
            .collect());
    }
    for h in given.keys() {
        if !hosts.contains(h) {
            return Err(spec(format!("addrs of {seg}: {h} is not on it")));
        }
    }
    hosts
        .iter()
        .map(|h| {
            let list = given
                .get(h)
                .ok_or_else(|| spec(format!("addrs of {seg}: given for some hosts but not for {h} (give all, or none)")))?;
            let (mut v4, mut v6) = (None, None);
            for a in list {
                let net: IpNet = a
                    .parse()
                    .map_err(|_| spec(format!("addrs of {seg}: {a:?} for {h} is not ADDRESS/PREFIX")))?;
                if !bench_net(&net) {
                    return Err(spec(format!(
                        "addrs of {seg}: {a} for {h} is outside the benchmarking ranges 198.18.0.0/15 and 2001:db8::/32"
                    )));
                }
                match net {
                    IpNet::V4(n) if v4.is_none() => v4 = Some(n),
                    IpNet::V6(n) if v6.is_none() => v6 = Some(n),
                    _ => return Err(spec(format!("addrs of {seg}: {h} has two addresses of one family"))),
                }
            }
            Ok((v4, v6))
        })
        .collect()
}

/// The commands that make one direction's shaping, and its mechanism's name; refuses by name
/// what this kernel cannot build.
fn shaping(
    dir_label: &str,
    ns: &str,
    dev: &str,
    s: &Shape,
    mtu: u32,
    k: Kernel,
    element_ok: bool,
) -> Result<(Vec<Step>, String, Option<u64>), LabError> {
    let asked = s.netem_properties();
    // Without netem, netrig's path element builds delay, jitter, loss, duplicate and reorder on
    // a point-to-point link; what it cannot build is refused by name.
    let by_element = crate::element_plan::by_element(s, k);
    let refused = shaping_refusals(dir_label, s, k, element_ok, &asked, by_element);
    if !refused.is_empty() {
        return Err(LabError::Refused(refused));
    }
    let netem: Vec<&str> = if by_element { Vec::new() } else { asked.clone() };
    check_shape(dir_label, s, !netem.is_empty())?;
    let rate = s
        .rate
        .as_deref()
        .map(parse_rate)
        .transpose()
        .map_err(|e| spec(format!("link {dir_label}: {e}")))?;
    let shaper = s.shaper.as_deref().unwrap_or("htb");
    if !matches!(shaper, "htb" | "tbf") {
        return Err(spec(format!(
            "shaper on link {dir_label}: htb or tbf, not {shaper:?}"
        )));
    }
    let element_classes = crate::element_plan::element_classes(s);
    if !s.classes.is_empty() && !element_classes {
        // DSCP classes under the rate (crate::topology).
        let (steps, m) = crate::topology::class_steps(dir_label, ns, dev, s, rate, shaper, &netem, mtu)?;
        let mut mech = vec![m];
        if by_element {
            mech.push(format!("netrig element ({})", asked.join(", ")));
        }
        return Ok((steps, mech.join(" + "), rate));
    }
    let (steps, mut mech) = if crate::element_plan::element_queue(s, k) || element_classes {
        // The element's queue or class scheduler serves the rate: no qdisc.
        let props = crate::element_plan::props(dir_label, s, k, rate).map_err(spec)?;
        let queue = props.queue.as_ref().map(crate::element_plan::queue_mechanism);
        let classes = props.classes.as_ref().map(crate::element_plan::sched_mechanism);
        (Vec::new(), queue.into_iter().chain(classes).collect())
    } else {
        qdiscs(ns, dev, s, mtu, rate, shaper, &netem)
    };
    if by_element && !asked.is_empty() {
        mech.push(format!("netrig element ({})", asked.join(", ")));
    }
    Ok((steps, mech.join(" + "), rate))
}

/// What this kernel cannot build of one direction's shape, each by name (`asked`: its netem
/// properties; `by_element`: the path element builds them).
fn shaping_refusals(
    dir_label: &str,
    s: &Shape,
    k: Kernel,
    element_ok: bool,
    asked: &[&str],
    by_element: bool,
) -> Vec<String> {
    let mut refused = crate::element_plan::refusals(dir_label, s, k, element_ok);
    if !s.classes.is_empty() && s.red.is_some() {
        refused.push(format!(
            "red on link {dir_label}: with classes, RED is each class's own (red on the class: its classes are then served by netrig's path element)"
        ));
    }
    if !asked.is_empty() && !k.netem && s.element == Some(false) {
        for p in asked {
            refused.push(format!(
                "{p} on link {dir_label}: needs netem (not in this kernel; element = false keeps netrig's path element out)"
            ));
        }
    }
    if by_element && !element_ok {
        for p in asked {
            refused.push(format!(
                "{p} on link {dir_label}: needs netem (not in this kernel); netrig's path element is built on point-to-point links only, not LANs"
            ));
        }
    }
    refused
}

/// Refuses a shape whose values do not hold together: both limits, jitter or reorder without a
/// delay, a limit in bytes under netem (`with_netem`), a percentage or duration out of range.
fn check_shape(dir_label: &str, s: &Shape, with_netem: bool) -> Result<(), LabError> {
    if s.limit_packets.is_some() && s.limit_bytes.is_some() {
        return Err(spec(format!(
            "link {dir_label}: limit_packets or limit_bytes, not both"
        )));
    }
    if s.jitter.is_some() && s.delay.is_none() {
        return Err(spec(format!("jitter on link {dir_label}: needs a delay")));
    }
    if s.reorder.is_some() && s.delay.is_none() {
        return Err(spec(format!(
            "reorder on link {dir_label}: needs a delay (netem reorders by sending some packets without it)"
        )));
    }
    if with_netem && s.limit_bytes.is_some() {
        return Err(spec(format!(
            "limit_bytes on link {dir_label}: with netem the queue counts packets (limit_packets)"
        )));
    }
    for (name, v) in s.percentages() {
        if let Some(v) = v {
            if !(0.0..=100.0).contains(&v) {
                return Err(spec(format!(
                    "{name} on link {dir_label}: a percentage, 0 to 100 (got {v})"
                )));
            }
        }
    }
    for (name, v) in [("delay", &s.delay), ("jitter", &s.jitter)] {
        if let Some(v) = v {
            let d = humantime::parse_duration(v).map_err(|_| {
                spec(format!(
                    "{name} on link {dir_label}: {v:?} is not a duration (as 10ms)"
                ))
            })?;
            if d > std::time::Duration::from_secs(10) {
                return Err(spec(format!("{name} on link {dir_label}: at most 10s")));
            }
        }
    }
    Ok(())
}

/// The kernel's qdiscs of a direction without classes and without the element's queue: htb or
/// tbf at the rate with netem, RED or a fifo under it; or, without a rate, netem or a fifo
/// alone. Their commands and their mechanisms.
fn qdiscs(
    ns: &str,
    dev: &str,
    s: &Shape,
    mtu: u32,
    rate: Option<u64>,
    shaper: &str,
    netem: &[&str],
) -> (Vec<Step>, Vec<String>) {
    let netem_leaf = || {
        let mut a = tc_qdisc_add(
            dev,
            if rate.is_some() {
                &["parent", "1:1", "handle", "10:"]
            } else {
                &["root", "handle", "1:"]
            },
        );
        a.extend(netem_params(s, s.limit_packets));
        (a, format!("netem ({})", netem.join(", ")))
    };
    let Some(r) = rate else {
        let leaf = if !netem.is_empty() {
            Some(netem_leaf())
        } else {
            fifo(dev, s, &["root", "handle", "1:"])
        };
        return leaf
            .map(|(a, m)| (vec![cmd_s(ns, a)], vec![m]))
            .unwrap_or_default();
    };
    let (mut steps, root) = rate_root(ns, dev, s, r, shaper, mtu);
    let mut mech = vec![root];
    let leaf = if !netem.is_empty() {
        Some(netem_leaf())
    } else if shaper == "htb" {
        crate::element_plan::red_qdisc(dev, s, r, mtu)
            .or_else(|| fifo(dev, s, &["parent", "1:1", "handle", "10:"]))
    } else {
        None
    };
    if let Some((a, m)) = leaf {
        steps.push(cmd_s(ns, a));
        mech.push(m);
    }
    (steps, mech)
}

/// netem's arguments for a shape with this queue limit (packets): what the lab builds (plan.rs)
/// and what an arm changes it to.
pub fn netem_params(s: &Shape, limit: Option<u32>) -> Vec<String> {
    let mut a = vec!["netem".to_string()];
    if let Some(l) = limit {
        a.extend(["limit".into(), l.to_string()]);
    }
    if let Some(d) = &s.delay {
        a.extend(["delay".into(), d.clone()]);
        if let Some(j) = &s.jitter {
            a.push(j.clone());
        }
    }
    if let Some(g) = &s.loss_gemodel {
        // All four given: tc's defaults for the ones left out are not the element's.
        let m = g.model();
        a.extend(["loss".into(), "gemodel".into()]);
        for v in [m.p, m.r, m.bad_loss, m.good_loss] {
            a.push(format!("{}%", v * 100.0));
        }
    }
    for (name, v) in s.percentages() {
        if let Some(v) = v {
            a.extend([name.to_string(), format!("{v}%")]);
        }
    }
    a
}

/// The root qdisc that holds a direction to `r` bit/s, htb (its leaf goes under class 1:1) or
/// tbf; its commands and mechanism.
fn rate_root(ns: &str, dev: &str, s: &Shape, r: u64, shaper: &str, mtu: u32) -> (Vec<Step>, String) {
    let rb = format!("{r}bit");
    if shaper == "htb" {
        return (htb_root(ns, dev, "1", r, mtu).to_vec(), format!("htb rate {rb}"));
    }
    // tbf: a 4 ms bucket (at least three full frames); a queue of 50 ms at the rate unless a
    // limit is given.
    let burst = ((r / 8) / 250).max(3 * (mtu as u64 + 14));
    let limit = match (s.limit_bytes, s.limit_packets) {
        (Some(b), _) => b,
        (_, Some(p)) => p as u64 * (mtu as u64 + 14),
        _ => ((r / 8) / 20).max(2 * burst),
    };
    let (b, l) = (burst.to_string(), limit.to_string());
    let mut a = tc_qdisc_add(dev, &["root", "handle", "1:"]);
    let tbf: [&str; 7] = ["tbf", "rate", &rb, "burst", &b, "limit", &l];
    a.extend(tbf.map(String::from));
    (
        vec![cmd_s(ns, a)],
        format!("tbf rate {rb} burst {burst} limit {limit}"),
    )
}

/// `tc qdisc add dev DEV` and where (`root ...` or `parent ...`).
fn tc_qdisc_add(dev: &str, at: &[&str]) -> Vec<String> {
    let mut a = Vec::from(["tc", "qdisc", "add", "dev", dev].map(String::from));
    a.extend(at.iter().map(|s| s.to_string()));
    a
}

/// A fifo of the shape's limit (pfifo in packets, bfifo in bytes) at `at`, and its mechanism;
/// none without a limit.
fn fifo(dev: &str, s: &Shape, at: &[&str]) -> Option<(Vec<String>, String)> {
    let (kind, lim) = match (s.limit_packets, s.limit_bytes) {
        (Some(p), _) => ("pfifo", p.to_string()),
        (_, Some(b)) => ("bfifo", b.to_string()),
        _ => return None,
    };
    let mut a = tc_qdisc_add(dev, at);
    a.extend([kind.to_string(), "limit".into(), lim.clone()]);
    Some((a, format!("{kind} limit {lim}")))
}

/// Plans the lab `topo` under run id `id` (6 hex digits). `dir` resolves nft files.
pub fn plan(topo: &Topology, id: &str, k: Kernel, dir: &std::path::Path) -> Result<Plan, LabError> {
    if topo.hosts.is_empty() {
        return Err(spec("a lab needs at least one host ([lab.hosts.NAME])"));
    }
    if topo.hosts.len() > 64 || topo.links.len() > 256 || topo.lans.len() > 64 {
        return Err(spec("a lab has at most 64 hosts, 256 links and 64 LANs"));
    }
    let (hosts, namespaces) = host_namespaces(topo, id)?;
    let mut parts = Parts::new(id, k, &hosts, topo.links.len(), namespaces);
    // Parallel links (several between the same two hosts): crate::topology.
    let groups = crate::topology::groups(topo)?;
    let ordinal = crate::topology::ordinals(topo);
    let host_steps_ct = crate::topology::conntrack_max(topo, &hosts, k.conntrack_max, &mut parts.refused)?;
    for (i, l) in topo.links.iter().enumerate() {
        parts.link(i, l, ordinal[i])?;
    }
    for (j, lan) in topo.lans.iter().enumerate() {
        parts.lan(j, lan)?;
    }
    if !parts.refused.is_empty() {
        return Err(LabError::Refused(parts.refused));
    }
    let Parts {
        namespaces,
        steps,
        bridge_steps,
        segments,
        directions,
        elements,
        ..
    } = parts;
    check_overlaps(&segments)?;
    let addr_steps = interface_steps(topo, &segments);
    let mut host_steps = forwarding_steps(topo, &hosts);
    host_steps.extend(route_steps(topo, &segments, &hosts, &groups)?);
    host_steps.extend(host_steps_ct);
    host_steps.extend(host_config_steps(topo, &hosts, dir)?);
    let mut all = namespace_steps(&namespaces);
    all.extend(steps);
    all.extend(addr_steps);
    all.extend(host_steps);
    all.extend(bridge_steps);
    let groups = crate::topology::group_states(&groups, &segments);
    Ok(Plan {
        id: id.to_string(),
        hosts,
        namespaces,
        segments,
        directions,
        steps: all,
        elements,
        groups,
    })
}

/// Each host's namespace (host name → namespace), and the namespaces in that order.
fn host_namespaces(topo: &Topology, id: &str) -> Result<(BTreeMap<String, String>, Vec<String>), LabError> {
    let mut hosts = BTreeMap::new();
    let mut namespaces = Vec::new();
    for name in topo.hosts.keys() {
        check_name("host", name)?;
        let ns = host_ns(id, name);
        hosts.insert(name.clone(), ns.clone());
        namespaces.push(ns);
    }
    Ok((hosts, namespaces))
}

/// What planning the links and LANs gathers, in the order the builder needs it.
struct Parts<'a> {
    id: &'a str,
    k: Kernel,
    /// Host name → namespace.
    hosts: &'a BTreeMap<String, String>,
    /// How many links the lab has (a LAN's path elements are numbered after the links').
    links: usize,
    namespaces: Vec<String>,
    /// The interfaces' making: veth pairs, bridges, path elements' namespaces.
    steps: Vec<Step>,
    /// The shaping, run last.
    bridge_steps: Vec<Step>,
    segments: Vec<Segment>,
    directions: Vec<Direction>,
    elements: Vec<ElementPlan>,
    /// What this kernel cannot build, all named before anything is refused.
    refused: Vec<String>,
}

/// A LAN's bridge: the LAN (the `j`-th), the namespace that holds the bridge, the bridge's
/// name and the LAN's MTU.
struct Bridge<'a> {
    j: usize,
    lan: &'a Lan,
    ns: String,
    br: String,
    mtu: u32,
}

impl<'a> Parts<'a> {
    fn new(
        id: &'a str,
        k: Kernel,
        hosts: &'a BTreeMap<String, String>,
        links: usize,
        namespaces: Vec<String>,
    ) -> Self {
        Parts {
            id,
            k,
            hosts,
            links,
            namespaces,
            steps: Vec::new(),
            bridge_steps: Vec::new(),
            segments: Vec::new(),
            directions: Vec::new(),
            elements: Vec::new(),
            refused: Vec::new(),
        }
    }

    fn known(&self, what: &str, h: &str) -> Result<String, LabError> {
        self.hosts
            .get(h)
            .cloned()
            .ok_or_else(|| spec(format!("{what}: no host {h:?} in [lab.hosts]")))
    }

    /// Link `i`, the `ordinal`-th between its two ends: a veth pair (or two through a path
    /// element's namespace), its segment, and the shaping of what each end sends.
    fn link(&mut self, i: usize, l: &Link, ordinal: usize) -> Result<(), LabError> {
        let [a, b] = &l.ends;
        let name = crate::topology::link_name(a, b, ordinal);
        let (na, nb) = (
            self.known(&format!("link {name}"), a)?,
            self.known(&format!("link {name}"), b)?,
        );
        if a == b {
            return Err(spec(format!("link {name}: joins a host to itself")));
        }
        let addrs = addresses(&format!("link {name}"), &l.ends, &l.addrs, i as u32)?;
        let (da, db) = (
            crate::topology::link_dev(b, ordinal),
            crate::topology::link_dev(a, ordinal),
        );
        let mtu = l.mtu.unwrap_or(1500);
        let by_element = l
            .shape
            .values()
            .any(|s| crate::element_plan::by_element(s, self.k));
        self.refused
            .extend(crate::element_plan::link_refusals(&name, l, self.k));
        if by_element {
            self.element_link(i, l, &name, [&na, &nb], [&da, &db], mtu)?;
        } else {
            self.steps.push(veth(&na, &da, &db, &nb));
        }
        let member = |k: usize, ns: &String, dev: &String| Member {
            host: l.ends[k].clone(),
            ns: ns.clone(),
            dev: dev.clone(),
            v4: addrs[k].0,
            v6: addrs[k].1,
        };
        self.segments.push(Segment {
            name: name.clone(),
            lan: false,
            members: vec![member(0, &na, &da), member(1, &nb, &db)],
            mtu,
        });
        for from in l.shape.keys() {
            if from != a && from != b {
                return Err(spec(format!(
                    "shape of link {name}: {from} is not one of its ends (shape.HOST is what HOST sends)"
                )));
            }
        }
        for (from, to, ns, dev) in [(a, b, &na, &da), (b, a, &nb, &db)] {
            if let Some(s) = l.shape.get(from).filter(|s| !s.is_empty()) {
                let label = format!("{name} ({from} → {to})");
                self.shaped(&label, ns, unshaped(&name, from, to, (ns, dev), s, mtu), "")?;
            }
        }
        check_offloads(&format!("link {name}"), &l.offloads, self.k, &mut self.refused)
    }

    /// Link `i` through a path element (what netem would build where the kernel has no
    /// netem): two veth pairs through the element's namespace, a:to-b <-> E:to-a, E:to-b <->
    /// b:to-a. E's interfaces carry no address and no bridge: only the element forwards there.
    fn element_link(
        &mut self,
        i: usize,
        l: &Link,
        name: &str,
        [na, nb]: [&String; 2],
        [da, db]: [&String; 2],
        mtu: u32,
    ) -> Result<(), LabError> {
        let ne = format!("nr{}.e{i}", self.id);
        self.namespaces.push(ne.clone());
        self.steps
            .push(cmd(&ne, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]));
        self.steps.push(cmd(
            &ne,
            &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
        ));
        self.steps.push(veth(na, da, db, &ne));
        self.steps.push(veth(nb, db, da, &ne));
        for d in [db, da] {
            self.steps
                .push(cmd(&ne, &["ip", "link", "set", d, "mtu", &mtu.to_string()]));
            self.steps.push(cmd(&ne, &["ip", "link", "set", d, "up"]));
        }
        let k = self.k;
        let props = |h: &String| -> Result<crate::element::Props, LabError> {
            let Some(s) = l.shape.get(h) else {
                return Ok(Default::default());
            };
            if !crate::element_plan::by_element(s, k) {
                // Built by netem on that end's egress.
                return Ok(Default::default());
            }
            let rate = s.rate.as_deref().and_then(|r| parse_rate(r).ok());
            crate::element_plan::props(name, s, k, rate).map_err(spec)
        };
        let [a, b] = &l.ends;
        self.elements.push(ElementPlan {
            ns: ne,
            config: crate::element::Config {
                link: name.to_string(),
                ifaces: [db.clone(), da.clone()],
                ends: [a.clone(), b.clone()],
                props: [props(a)?, props(b)?],
                counters: std::path::Path::new(crate::steps::STATE_DIR)
                    .join(self.id)
                    .join(format!("element-{i}.json")),
                generation: 0,
            },
        });
        Ok(())
    }

    /// LAN `j`: its bridge (in the switch host or a namespace of its own), a port per member,
    /// its segment, and the shaping of what each member sends and what each port sends.
    fn lan(&mut self, j: usize, lan: &Lan) -> Result<(), LabError> {
        check_name("LAN", &lan.name)?;
        let what = format!("LAN {}", lan.name);
        if lan.hosts.len() < 2 || lan.hosts.len() > 250 {
            return Err(spec(format!("{what}: joins 2 to 250 hosts")));
        }
        let bridge_ns = match &lan.switch {
            Some(sw) => self.known(&format!("{what}'s switch"), sw)?,
            None => {
                let ns = format!("nr{}.{}", self.id, lan.name);
                self.namespaces.push(ns.clone());
                ns
            }
        };
        let b = Bridge {
            j,
            lan,
            br: format!("br-{}", lan.name),
            ns: bridge_ns,
            mtu: lan.mtu.unwrap_or(1500),
        };
        self.steps
            .push(cmd(&b.ns, &["ip", "link", "add", &b.br, "type", "bridge"]));
        self.steps.push(cmd(&b.ns, &["ip", "link", "set", &b.br, "up"]));
        let addrs = addresses(&what, &lan.hosts, &lan.addrs, 511 - j as u32)?;
        let mut members = Vec::new();
        for (h, (v4, v6)) in lan.hosts.iter().zip(addrs) {
            let ns = self.known(&what, h)?;
            if members.iter().any(|m: &Member| &m.host == h) {
                return Err(spec(format!("{what}: {h} is listed twice")));
            }
            let dev = if lan.switch.as_deref() == Some(h.as_str()) {
                b.br.clone()
            } else {
                self.lan_port(&b, h, &ns)?
            };
            members.push(Member {
                host: h.clone(),
                ns,
                dev,
                v4,
                v6,
            });
        }
        self.lan_shapes(&b, &what, &members)?;
        check_offloads(&what, &lan.offloads, self.k, &mut self.refused)?;
        self.refused.extend(crate::lan_element::refusals(lan, self.k));
        self.segments.push(Segment {
            name: lan.name.clone(),
            lan: true,
            members,
            mtu: b.mtu,
        });
        Ok(())
    }

    /// Host `h`'s port on bridge `b`: a veth pair from its namespace `ns`, or a path element
    /// between the host and its port (crate::lan_element). The name of the host's side.
    fn lan_port(&mut self, b: &Bridge, h: &str, ns: &str) -> Result<String, LabError> {
        let port = format!("p{}-{h}", b.j);
        let dev = format!("lan-{}", b.lan.name);
        if crate::lan_element::needed(b.lan, h, self.k) {
            // The path element between the host and its port (crate::lan_element).
            let i = self.links + self.elements.len();
            let (st, e) = crate::lan_element::build(self.id, i, b.j, b.lan, h, ns, &b.ns, b.mtu, self.k)
                .map_err(spec)?;
            self.namespaces.push(e.ns.clone());
            self.steps.extend(st);
            self.elements.push(e);
        } else {
            self.steps.push(veth(&b.ns, &port, &dev, ns));
        }
        self.steps
            .push(cmd(&b.ns, &["ip", "link", "set", &port, "master", &b.br]));
        self.steps.push(cmd(
            &b.ns,
            &["ip", "link", "set", &port, "mtu", &b.mtu.to_string()],
        ));
        self.steps.push(cmd(&b.ns, &["ip", "link", "set", &port, "up"]));
        Ok(dev)
    }

    /// The shaping of what each member sends into the LAN of bridge `b`, and of what the
    /// switch's ports send to the members.
    fn lan_shapes(&mut self, b: &Bridge, what: &str, members: &[Member]) -> Result<(), LabError> {
        let lan = b.lan;
        for (from, s) in &lan.shape {
            let Some(m) = members.iter().find(|m| &m.host == from) else {
                return Err(spec(format!("shape of {what}: {from} is not on it")));
            };
            if s.is_empty() {
                continue;
            }
            let to = &members.iter().find(|o| &o.host != from).expect("2 or more").host;
            let label = format!("{} ({from} → LAN)", lan.name);
            let d = unshaped(&lan.name, from, to, (&m.ns, &m.dev), s, b.mtu);
            self.shaped(&label, &m.ns, d, "")?;
        }
        // What the switch sends to a host: its port's egress, in the bridge's namespace; the
        // witness measures it from the first other member.
        for (to, s) in lan.port.iter().filter(|(_, s)| !s.is_empty()) {
            if lan.switch.as_ref() == Some(to) {
                return Err(spec(format!(
                    "port of {what}: {to} holds the bridge itself (it has no port)"
                )));
            }
            let (Some(m), Some(from)) = (
                members.iter().find(|m| &m.host == to),
                members.iter().find(|o| &o.host != to),
            ) else {
                return Err(spec(format!("port of {what}: {to} is not on it")));
            };
            let (dev, label) = (
                format!("p{}-{to}", b.j),
                format!("{} (LAN → {to}, the switch's port)", lan.name),
            );
            let d = unshaped(&lan.name, &from.host, &m.host, (&from.ns, &dev), s, b.mtu);
            self.shaped(&label, &b.ns, d, &format!(" on the switch's port to {to}"))?;
        }
        Ok(())
    }

    /// Plans the shaping of `d` on its interface in namespace `ns` and keeps `d` with its rate
    /// and mechanism (followed by `suffix`); what this kernel cannot build joins the refusals.
    fn shaped(&mut self, label: &str, ns: &str, mut d: Direction, suffix: &str) -> Result<(), LabError> {
        match shaping(label, ns, &d.dev, &d.shape, d.mtu, self.k, true) {
            Ok((st, mechanism, rate_bps)) => {
                self.bridge_steps.extend(st);
                d.mechanism = mechanism + suffix;
                d.rate_bps = rate_bps;
                self.directions.push(d);
            }
            Err(LabError::Refused(r)) => self.refused.extend(r),
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// What `from` sends towards `to` on segment `link`, shaped by `s` on interface `at.1` (seen
/// from namespace `at.0`); its rate and mechanism come from planning its shaping.
fn unshaped(link: &str, from: &str, to: &str, (ns, dev): (&str, &str), s: &Shape, mtu: u32) -> Direction {
    Direction {
        link: link.to_string(),
        from: from.to_string(),
        to: to.to_string(),
        ns: ns.to_string(),
        dev: dev.to_string(),
        shape: s.clone(),
        rate_bps: None,
        mechanism: String::new(),
        mtu,
    }
}

/// A veth pair made in `ns`: `dev` there, `peer` in `peer_ns`.
fn veth(ns: &str, dev: &str, peer: &str, peer_ns: &str) -> Step {
    cmd(
        ns,
        &[
            "ip", "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", peer_ns,
        ],
    )
}

/// `sysctl -w KEY=VALUE` in `ns`.
fn sysctl(ns: &str, key: &str, value: &str) -> Step {
    Step::Sysctl {
        ns: ns.to_string(),
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// Refuses segments whose networks overlap.
fn check_overlaps(segments: &[Segment]) -> Result<(), LabError> {
    let mut nets: Vec<(IpNet, &str)> = Vec::new();
    for s in segments {
        let mut mine: Vec<IpNet> = Vec::new();
        for m in &s.members {
            for n in [
                m.v4.map(|n| IpNet::V4(n.trunc())),
                m.v6.map(|n| IpNet::V6(n.trunc())),
            ]
            .into_iter()
            .flatten()
            {
                if !mine.contains(&n) {
                    mine.push(n);
                }
            }
        }
        for n in mine {
            if let Some((_, other)) = nets.iter().find(|(o, _)| o.contains(&n) || n.contains(o)) {
                return Err(spec(format!(
                    "{} and {other}: their networks overlap ({n})",
                    s.name
                )));
            }
            nets.push((n, &s.name));
        }
    }
    Ok(())
}

/// Interfaces: MTU, offloads, addresses, up (the segments are the links', then the LANs').
fn interface_steps(topo: &Topology, segments: &[Segment]) -> Vec<Step> {
    let mut steps = Vec::new();
    for (s, l_offloads) in segments.iter().zip(
        topo.links
            .iter()
            .map(|l| &l.offloads)
            .chain(topo.lans.iter().map(|l| &l.offloads)),
    ) {
        for m in &s.members {
            let ns = &m.ns;
            if s.mtu != 1500 {
                steps.push(cmd(ns, &["ip", "link", "set", &m.dev, "mtu", &s.mtu.to_string()]));
            }
            for (o, on) in l_offloads {
                steps.push(cmd(
                    ns,
                    &["ethtool", "-K", &m.dev, o, if *on { "on" } else { "off" }],
                ));
            }
            if let Some(v4) = m.v4 {
                steps.push(cmd(ns, &["ip", "addr", "add", &v4.to_string(), "dev", &m.dev]));
            }
            if let Some(v6) = m.v6 {
                steps.push(cmd(
                    ns,
                    &["ip", "addr", "add", &v6.to_string(), "dev", &m.dev, "nodad"],
                ));
            }
            steps.push(cmd(ns, &["ip", "link", "set", &m.dev, "up"]));
        }
    }
    steps
}

/// Routers forward, IPv4 and IPv6.
fn forwarding_steps(topo: &Topology, hosts: &BTreeMap<String, String>) -> Vec<Step> {
    let mut steps = Vec::new();
    for (name, h) in &topo.hosts {
        if h.router {
            let ns = &hosts[name];
            steps.push(sysctl(ns, "net.ipv4.ip_forward", "1"));
            steps.push(sysctl(ns, "net.ipv6.conf.all.forwarding", "1"));
        }
    }
    steps
}

/// Every host's routes to every segment it is not on: via the first hop's address, or over
/// parallel links a multipath route (or round robin: crate::topology).
fn route_steps(
    topo: &Topology,
    segments: &[Segment],
    hosts: &BTreeMap<String, String>,
    groups: &[crate::topology::Group],
) -> Result<Vec<Step>, LabError> {
    let mut steps = Vec::new();
    let mut balanced: BTreeMap<(String, usize), Vec<usize>> = BTreeMap::new();
    for (from, via_seg, via_host, dest_seg) in routes(topo, segments)? {
        if let Some(g) = crate::topology::group_of(groups, via_seg) {
            // Over parallel links: a multipath route (or round robin), below.
            balanced.entry((from, g)).or_default().push(dest_seg);
            continue;
        }
        let ns = &hosts[&from];
        let s = &segments[via_seg];
        let nh = s.members.iter().find(|m| m.host == via_host).expect("member");
        let dest = &segments[dest_seg];
        let d4 = dest.members.iter().find_map(|m| m.v4.map(|n| n.trunc()));
        let d6 = dest.members.iter().find_map(|m| m.v6.map(|n| n.trunc()));
        if let (Some(d), Some(v)) = (d4, nh.v4) {
            steps.push(cmd(
                ns,
                &["ip", "route", "add", &d.to_string(), "via", &v.addr().to_string()],
            ));
        }
        if let (Some(d), Some(v)) = (d6, nh.v6) {
            steps.push(cmd(
                ns,
                &[
                    "ip",
                    "-6",
                    "route",
                    "add",
                    &d.to_string(),
                    "via",
                    &v.addr().to_string(),
                ],
            ));
        }
    }
    steps.extend(crate::topology::group_steps(groups, segments, hosts, &balanced));
    Ok(steps)
}

/// Each host's own settings: its sysctls (among [`SYSCTLS`]), connection tracking on or off,
/// its nftables rulesets (a file under `dir`, or inline).
fn host_config_steps(
    topo: &Topology,
    hosts: &BTreeMap<String, String>,
    dir: &std::path::Path,
) -> Result<Vec<Step>, LabError> {
    let mut steps = Vec::new();
    for (name, h) in &topo.hosts {
        let ns = &hosts[name];
        for (key, value) in &h.sysctl {
            if !SYSCTLS.contains(&key.as_str()) {
                return Err(spec(format!(
                    "sysctl {key} of host {name}: not among those a lab host may set ({})",
                    SYSCTLS.join(", ")
                )));
            }
            steps.push(sysctl(ns, key, value));
        }
        match h.conntrack {
            Some(true) => steps.push(nft_inline(ns, "table inet netrig_conntrack {\n chain pre { type filter hook prerouting priority 0; ct state new counter; }\n chain out { type filter hook output priority 0; ct state new counter; }\n}\n")),
            Some(false) => steps.push(nft_inline(ns, "table inet netrig_notrack {\n chain pre { type filter hook prerouting priority -300; notrack; }\n chain out { type filter hook output priority -300; notrack; }\n}\n")),
            None => {}
        }
        if let Some(f) = &h.nft {
            let p = dir.join(f);
            steps.push(cmd(ns, &["nft", "-f", &p.to_string_lossy()]));
        }
        if let Some(text) = &h.nft_inline {
            steps.push(nft_inline(ns, text));
        }
    }
    Ok(steps)
}

/// Every namespace: made, its loopback up, IPv6's duplicate address detection off.
fn namespace_steps(namespaces: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    for ns in namespaces {
        steps.push(root(&["ip", "netns", "add", ns]));
        steps.push(cmd(ns, &["ip", "link", "set", "lo", "up"]));
        steps.push(sysctl(ns, "net.ipv6.conf.all.accept_dad", "0"));
        steps.push(sysctl(ns, "net.ipv6.conf.default.accept_dad", "0"));
    }
    steps
}

fn nft_inline(ns: &str, text: &str) -> Step {
    Step::Cmd {
        ns: Some(ns.to_string()),
        argv: vec!["nft".into(), "-f".into(), "-".into()],
        stdin: Some(text.to_string()),
    }
}

fn check_offloads(
    what: &str,
    o: &BTreeMap<String, bool>,
    k: Kernel,
    refused: &mut Vec<String>,
) -> Result<(), LabError> {
    for name in o.keys() {
        if !matches!(name.as_str(), "gro" | "gso" | "tso") {
            return Err(spec(format!(
                "offloads of {what}: {name:?} is not gro, gso or tso"
            )));
        }
        if !k.ethtool {
            refused.push(format!("{name} offload on {what}: needs ethtool (not installed)"));
        }
    }
    Ok(())
}

/// Routes: for each host, each segment it is not on that it reaches through routers, as
/// (host, segment of the first hop, first-hop host, destination segment). Refuses a lab in which
/// some host cannot reach another.
pub fn routes(topo: &Topology, segs: &[Segment]) -> Result<Vec<(String, usize, String, usize)>, LabError> {
    let on: BTreeMap<&str, Vec<usize>> = topo
        .hosts
        .keys()
        .map(|h| {
            (
                h.as_str(),
                segs.iter()
                    .enumerate()
                    .filter(|(_, s)| s.members.iter().any(|m| &m.host == h))
                    .map(|(i, _)| i)
                    .collect(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for h in topo.hosts.keys() {
        let mut seen_host: BTreeMap<&str, Option<(usize, &str)>> = BTreeMap::new();
        let mut seen_seg = vec![false; segs.len()];
        seen_host.insert(h, None);
        let mut q = VecDeque::from([h.as_str()]);
        while let Some(x) = q.pop_front() {
            let fh = seen_host[x];
            if x != h && !topo.hosts[x].router {
                continue;
            }
            for &s in &on[x] {
                if seen_seg[s] {
                    continue;
                }
                seen_seg[s] = true;
                if let Some((fs, fhost)) = fh {
                    out.push((h.clone(), fs, fhost.to_string(), s));
                }
                for m in &segs[s].members {
                    if !seen_host.contains_key(m.host.as_str()) {
                        seen_host.insert(&m.host, Some(fh.unwrap_or((s, &m.host))));
                        q.push_back(&m.host);
                    }
                }
            }
        }
        if let Some(o) = topo.hosts.keys().find(|o| !seen_host.contains_key(o.as_str())) {
            return Err(spec(format!(
                "host {h} cannot reach host {o}: no path through routers (mark forwarding hosts router = true)"
            )));
        }
    }
    Ok(out)
}

/// The most TCP payload a rate carries at an MTU over IPv4 (20 B IP + 32 B TCP with
/// timestamps per packet, 14 B Ethernet header counted by the qdisc).
pub fn tcp_goodput(rate_bps: u64, mtu: u32) -> f64 {
    rate_bps as f64 * (mtu as f64 - 52.0) / (mtu as f64 + 14.0)
}

/// The address a host is reached at from another: on a shared segment if there is one, else its
/// first address.
pub fn address_of(p: &Plan, host: &str, from: &str) -> Option<IpAddr> {
    let shared = p
        .segments
        .iter()
        .find(|s| s.members.iter().any(|m| m.host == host) && s.members.iter().any(|m| m.host == from));
    let seg = shared.or_else(|| {
        p.segments
            .iter()
            .find(|s| s.members.iter().any(|m| m.host == host))
    })?;
    seg.members
        .iter()
        .find(|m| m.host == host)?
        .v4
        .map(|n| IpAddr::V4(n.addr()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse;

    const THREE: &str = "[lab.hosts.client]\n[lab.hosts.router]\nrouter = true\n[lab.hosts.server]\n\
        [[lab.links]]\nends = ['client', 'router']\n[[lab.links]]\nends = ['router', 'server']\n\
        [lab.links.shape.router]\nrate = '50M'\nlimit_packets = 100\n";

    fn p(text: &str, k: Kernel) -> Result<Plan, LabError> {
        plan(&parse(text).unwrap(), "abc123", k, std::path::Path::new("."))
    }

    fn argvs(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| match s {
                Step::Cmd { ns, argv, .. } => format!("{} {}", ns.as_deref().unwrap_or("-"), argv.join(" ")),
                Step::Sysctl { ns, key, value } => format!("{ns} sysctl {key}={value}"),
            })
            .collect()
    }

    #[test]
    fn three_hosts_get_addresses_routes_and_a_shaped_egress() {
        let plan = p(THREE, Kernel::default()).unwrap();
        let c = argvs(&plan);
        assert!(
            c.contains(&"- ip netns add nrabc123-client".to_string()),
            "{c:#?}"
        );
        assert!(c.contains(&"nrabc123-client ip addr add 198.18.0.1/24 dev to-router".to_string()));
        assert!(c.contains(&"nrabc123-server ip addr add 198.18.1.2/24 dev to-router".to_string()));
        // The client reaches the server's network through the router, and back.
        assert!(
            c.contains(&"nrabc123-client ip route add 198.18.1.0/24 via 198.18.0.2".to_string()),
            "{c:#?}"
        );
        assert!(c.contains(&"nrabc123-server ip route add 198.18.0.0/24 via 198.18.1.1".to_string()));
        assert!(c.contains(&"nrabc123-client ip -6 route add 2001:db8:0:1::/64 via 2001:db8::2".to_string()));
        assert!(c.contains(&"nrabc123-router sysctl net.ipv4.ip_forward=1".to_string()));
        assert!(c.contains(&"nrabc123-router tc class add dev to-server parent 1: classid 1:1 htb rate 50000000bit ceil 50000000bit burst 6250 cburst 6250".to_string()));
        assert!(c.contains(
            &"nrabc123-router tc qdisc add dev to-server parent 1:1 handle 10: pfifo limit 100".to_string()
        ));
        assert_eq!(plan.directions.len(), 1);
        assert_eq!(
            plan.directions[0].mechanism,
            "htb rate 50000000bit + pfifo limit 100"
        );
        assert_eq!(
            address_of(&plan, "server", "client").unwrap().to_string(),
            "198.18.1.2"
        );
    }

    #[test]
    fn delay_without_netem_is_built_by_the_element_and_with_netem_by_netem() {
        let text = THREE.replace("limit_packets = 100", "delay = '10ms'\nloss = 1.0");
        let el = p(&text, Kernel::default()).unwrap();
        assert_eq!(el.elements.len(), 1, "one path element");
        let e = &el.elements[0];
        assert_eq!(e.ns, "nrabc123.e1");
        assert_eq!(e.config.ends, ["router".to_string(), "server".to_string()]);
        assert_eq!(e.config.props[0].delay_us, 10_000);
        assert_eq!(e.config.props[0].loss, 0.01);
        assert_eq!(e.config.props[1], crate::element::Props::default());
        let d = el.directions.iter().find(|d| d.from == "router").unwrap();
        assert_eq!(d.mechanism, "htb rate 50000000bit + netrig element (delay, loss)");
        let c = argvs(&el);
        assert!(
            c.iter().any(|c| c.ends_with("ip link add to-server type veth peer name to-router netns nrabc123.e1")),
            "{c:#?}"
        );
        assert!(!c.iter().any(|c| c.contains("netem")), "{c:#?}");
        // What the element cannot do is refused by name; on a LAN it is not built.
        let corrupt = THREE.replace("limit_packets = 100", "delay = '10ms'\ncorrupt = 1.0");
        let e = p(&corrupt, Kernel::default()).unwrap_err().to_string();
        assert!(
            e.contains("corrupt on link router-server (router → server): netrig's path element corrupts single frames only: needs offloads = { tso = false, gso = false } on the link"),
            "{e}"
        );
        let ok = p(
            &text,
            Kernel {
                netem: true,
                ..Kernel::default()
            },
        )
        .unwrap();
        assert!(
            argvs(&ok)
                .iter()
                .any(|c| c.ends_with("parent 1:1 handle 10: netem delay 10ms loss 1%")),
            "{:#?}",
            argvs(&ok)
        );
        let red = THREE.replace("limit_packets = 100", "red = true");
        assert!(p(&red, Kernel::default())
            .unwrap_err()
            .to_string()
            .contains("red on link router-server"));
    }

    #[test]
    fn hosts_without_a_router_between_them_are_refused() {
        let text = THREE.replace("router = true\n", "");
        let e = p(&text, Kernel::default()).unwrap_err().to_string();
        assert!(e.contains("cannot reach"), "{e}");
    }

    #[test]
    fn a_lan_joins_hosts_on_a_bridge_and_a_router_routes_to_it() {
        let text = "[hosts.c1]\n[hosts.c2]\n[hosts.r]\nrouter = true\n[hosts.s]\n\
            [[lans]]\nname = 'sw'\nhosts = ['c1', 'c2', 'r']\n[[links]]\nends = ['r', 's']\n";
        let plan = p(text, Kernel::default()).unwrap();
        let c = argvs(&plan);
        assert!(c.contains(&"- ip netns add nrabc123.sw".to_string()));
        assert!(
            c.contains(
                &"nrabc123.sw ip link add p0-c1 type veth peer name lan-sw netns nrabc123-c1".to_string()
            ),
            "{c:#?}"
        );
        assert!(
            c.contains(&"nrabc123-c1 ip addr add 198.19.255.1/24 dev lan-sw".to_string()),
            "{c:#?}"
        );
        assert!(
            c.contains(&"nrabc123-c2 ip route add 198.18.0.0/24 via 198.19.255.3".to_string()),
            "{c:#?}"
        );
        assert!(
            c.contains(&"nrabc123-s ip route add 198.19.255.0/24 via 198.18.0.1".to_string()),
            "{c:#?}"
        );
    }

    #[test]
    fn names_sysctls_offloads_and_addresses_are_checked() {
        assert!(check_name("host", "a-very-long-name").is_err());
        assert!(check_name("host", "Client").is_err());
        let s = THREE.replace(
            "[lab.hosts.server]\n",
            "[lab.hosts.server]\nsysctl = { 'kernel.panic' = '1' }\n",
        );
        assert!(p(&s, Kernel::default())
            .unwrap_err()
            .to_string()
            .contains("sysctl kernel.panic of host server"));
        let o = THREE.replace(
            "ends = ['client', 'router']\n",
            "ends = ['client', 'router']\noffloads = { gro = false }\n",
        );
        assert!(p(&o, Kernel::default())
            .unwrap_err()
            .to_string()
            .contains("gro offload on link client-router: needs ethtool"));
        let a = THREE.replace(
            "ends = ['client', 'router']\n",
            "ends = ['client', 'router']\naddrs = { client = ['10.0.0.1/24'], router = ['10.0.0.2/24'] }\n",
        );
        assert!(p(&a, Kernel::default())
            .unwrap_err()
            .to_string()
            .contains("outside the benchmarking ranges"));
    }

    /// Issue #39 (IPFilter's TCP_CRR): a client host may reuse ports in TIME_WAIT.
    #[test]
    fn a_crr_client_may_set_tcp_tw_reuse() {
        let s = THREE.replace(
            "[lab.hosts.server]\n",
            "[lab.hosts.server]\nsysctl = { 'net.ipv4.tcp_tw_reuse' = '1' }\n",
        );
        let plan = p(&s, Kernel::default()).expect("tcp_tw_reuse is a lab host's own");
        let c = argvs(&plan);
        assert!(
            c.contains(&"nrabc123-server sysctl net.ipv4.tcp_tw_reuse=1".to_string()),
            "{c:#?}"
        );
    }

    #[test]
    fn goodput_at_1500_is_the_payload_share_of_the_frame() {
        let g = tcp_goodput(50_000_000, 1500);
        assert!((g / 50e6 - 1448.0 / 1514.0).abs() < 1e-9);
    }
}
