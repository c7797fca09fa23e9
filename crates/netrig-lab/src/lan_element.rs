//! netrig's path element on a LAN member (docs/LAB.md, "The path element"): where a member's
//! direction asks for what netem would give and the kernel has none, the element sits between
//! the host's LAN interface and its bridge port, as on a point-to-point link:
//! `HOST:lan-<lan> ⇄ to-<host> | element | br-<lan> ⇄ <bridge ns>:p<j>-<host>` in a namespace of
//! its own (`nr<id>.e<i>`). One element, two directions: `shape.HOST` (what HOST sends into the
//! segment) and `port.HOST` (what the switch sends to HOST). Rate and queue stay with htb on the
//! host's egress or the port's egress, in front of the element, unless the element serves them
//! (`element_rate`, `red`).

use crate::model::{parse_rate, Lan, Shape};
use crate::steps::{ElementPlan, Kernel, Step};

/// The element's name for a LAN member: `<lan>:<host>` (its counters, `lab status`, the
/// per-run `path_elements` name it so; an arm names the direction as `"<lan>".HOST`).
pub fn element_link(lan: &str, host: &str) -> String {
    format!("{lan}:{host}")
}

/// The host a LAN's switch-port direction sends to (`[lab.lans.port.HOST]`: its `from` is the
/// member the witness measures from), or None for a member's own egress or a link's direction.
pub fn port_of(d: &crate::steps::Direction) -> Option<&str> {
    d.mechanism
        .ends_with(&format!(" on the switch's port to {}", d.to))
        .then_some(d.to.as_str())
}

/// Does `host`'s place on `lan` need the element (either of its directions built by it)?
pub fn needed(lan: &Lan, host: &str, k: Kernel) -> bool {
    [lan.shape.get(host), lan.port.get(host)]
        .into_iter()
        .flatten()
        .any(|s| crate::element_plan::by_element(s, k))
}

/// What a LAN's element directions ask that cannot be built, by name: on the host that holds
/// the bridge (no port to put the element in), and corruption with segmentation offloads on.
pub fn refusals(lan: &Lan, k: Kernel) -> Vec<String> {
    let mut r = Vec::new();
    let off = |o: &str| lan.offloads.get(o) == Some(&false);
    for (what, map) in [("shape", &lan.shape), ("port", &lan.port)] {
        for (host, s) in map {
            if !crate::element_plan::by_element(s, k) {
                continue;
            }
            let dir = if what == "shape" {
                format!("{} ({host} → LAN)", lan.name)
            } else {
                format!("{} (LAN → {host}, the switch's port)", lan.name)
            };
            if lan.switch.as_deref() == Some(host.as_str()) {
                let mut asked: Vec<&str> = s.netem_properties();
                if s.red.is_some() {
                    asked.push("red");
                }
                if s.element_rate == Some(true) {
                    asked.push("element_rate");
                }
                r.push(format!(
                    "{} on LAN {dir}: needs netem or the red qdisc (not in this kernel); netrig's path element sits between a host and its bridge port, and {host} holds the bridge itself (no port)",
                    asked.join(", ")
                ));
            }
            if s.corrupt.is_some() && !(off("tso") && off("gso")) {
                r.push(format!(
                    "corrupt on LAN {dir}: netrig's path element corrupts single frames only: needs offloads = {{ tso = false, gso = false }} on the LAN"
                ));
            }
        }
    }
    r
}

fn props(label: &str, s: Option<&Shape>, k: Kernel) -> Result<crate::element::Props, String> {
    let Some(s) = s.filter(|s| crate::element_plan::by_element(s, k)) else {
        return Ok(Default::default());
    };
    let rate = s.rate.as_deref().and_then(|r| parse_rate(r).ok());
    crate::element_plan::props(label, s, k, rate)
}

fn cmd(ns: &str, argv: &[&str]) -> Step {
    Step::Cmd {
        ns: Some(ns.to_string()),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
    }
}

/// One LAN member's element: the veth pairs through its namespace `nr<id>.e<i>` (the host's
/// `lan-<lan>` and the bridge's port `p<j>-<host>`, which the caller then enslaves to the bridge
/// as without the element), and the element's plan.
#[allow(clippy::too_many_arguments)]
pub fn build(
    id: &str,
    i: usize,
    j: usize,
    lan: &Lan,
    host: &str,
    host_ns: &str,
    bridge_ns: &str,
    mtu: u32,
    k: Kernel,
) -> Result<(Vec<Step>, ElementPlan), String> {
    let ne = format!("nr{id}.e{i}");
    let (dev, port) = (format!("lan-{}", lan.name), format!("p{j}-{host}"));
    let (to_host, to_br) = (format!("to-{host}"), format!("br-{}", lan.name));
    let mut steps = vec![
        cmd(&ne, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]),
        cmd(&ne, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]),
        cmd(
            host_ns,
            &[
                "ip", "link", "add", &dev, "type", "veth", "peer", "name", &to_host, "netns", &ne,
            ],
        ),
        cmd(
            bridge_ns,
            &[
                "ip", "link", "add", &port, "type", "veth", "peer", "name", &to_br, "netns", &ne,
            ],
        ),
    ];
    for d in [&to_host, &to_br] {
        steps.push(cmd(&ne, &["ip", "link", "set", d, "mtu", &mtu.to_string()]));
        steps.push(cmd(&ne, &["ip", "link", "set", d, "up"]));
    }
    let name = element_link(&lan.name, host);
    let config = crate::element::Config {
        link: name.clone(),
        ifaces: [to_host, to_br],
        ends: [host.to_string(), lan.name.clone()],
        props: [
            props(&format!("{} ({host} → LAN)", lan.name), lan.shape.get(host), k)?,
            props(
                &format!("{} (LAN → {host}, the switch's port)", lan.name),
                lan.port.get(host),
                k,
            )?,
        ],
        counters: std::path::Path::new(crate::steps::STATE_DIR)
            .join(id)
            .join(format!("element-{i}.json")),
        generation: 0,
    };
    Ok((steps, ElementPlan { ns: ne, config }))
}

#[cfg(test)]
mod tests {
    use crate::plan::{plan, Kernel, Plan, Step};

    const LAN: &str = "[hosts.c1]\n[hosts.c2]\n[hosts.s1]\n[[links]]\nends = ['c2', 's1']\n\
        [[lans]]\nname = 'sw'\nhosts = ['c1', 'c2', 's1']\n";

    fn p(text: &str, k: Kernel) -> Result<Plan, crate::LabError> {
        plan(
            &crate::model::parse(text)?,
            "abc123",
            k,
            std::path::Path::new("."),
        )
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

    /// Without netem, a member's delay puts the element between the member and its port:
    /// `c1:lan-sw ⇄ to-c1 | element | br-sw ⇄ p1-c1` (the LAN is the second segment: j = 0,
    /// the element numbered after the one link), its port enslaved to the bridge as before,
    /// the other members plugged in directly.
    #[test]
    fn a_member_s_delay_is_built_by_the_element_between_it_and_its_port() {
        let text = format!("{LAN}[lans.shape.c1]\ndelay = '10ms'\n[lans.port.c1]\nloss = 2.0\n");
        let pl = p(&text, Kernel::default()).unwrap();
        assert_eq!(pl.elements.len(), 1, "{:#?}", pl.elements);
        let e = &pl.elements[0];
        assert_eq!(e.ns, "nrabc123.e1");
        assert!(pl.namespaces.contains(&"nrabc123.e1".to_string()));
        assert_eq!(e.config.link, "sw:c1");
        assert_eq!(e.config.ends, ["c1".to_string(), "sw".to_string()]);
        assert_eq!(e.config.ifaces, ["to-c1".to_string(), "br-sw".to_string()]);
        assert_eq!(e.config.props[0].delay_us, 10_000);
        assert_eq!(e.config.props[0].loss, 0.0);
        assert_eq!(e.config.props[1].loss, 0.02);
        assert_eq!(e.config.props[1].delay_us, 0);
        assert!(e.config.counters.ends_with("abc123/element-1.json"));
        let c = argvs(&pl);
        for want in [
            "nrabc123-c1 ip link add lan-sw type veth peer name to-c1 netns nrabc123.e1",
            "nrabc123.sw ip link add p0-c1 type veth peer name br-sw netns nrabc123.e1",
            "nrabc123.sw ip link set p0-c1 master br-sw",
            "nrabc123.e1 ip link set to-c1 up",
            "nrabc123.e1 ip link set br-sw up",
            "nrabc123.e1 sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
            "nrabc123.sw ip link add p0-c2 type veth peer name lan-sw netns nrabc123-c2",
            "nrabc123-c1 ip addr add 198.19.255.1/24 dev lan-sw",
        ] {
            assert!(c.contains(&want.to_string()), "{want}\n{c:#?}");
        }
        // No veth straight from the bridge to c1, and no netem.
        assert!(
            !c.iter().any(|l| l.contains("peer name lan-sw netns nrabc123-c1")),
            "{c:#?}"
        );
        assert!(!c.iter().any(|l| l.contains("netem")), "{c:#?}");
        let mech = |from: &str, to: &str| {
            pl.directions
                .iter()
                .find(|d| d.from == from && d.to == to)
                .map(|d| d.mechanism.clone())
                .unwrap()
        };
        assert_eq!(mech("c1", "c2"), "netrig element (delay)");
        // The port's direction: measured from the first other member.
        assert_eq!(
            mech("c2", "c1"),
            "netrig element (loss) on the switch's port to c1"
        );
    }

    /// The witness's configured round trip on a LAN counts both ends' egress and the switch's
    /// ports to both: c1 → c2 is c1's 10 ms and c2's port's 4 ms; c1 → s1 only c1's; c2's
    /// port measured from c1 the same 14 ms.
    #[test]
    fn the_configured_round_trip_on_a_lan_counts_both_ends_and_both_ports() {
        let text = format!("{LAN}[lans.shape.c1]\ndelay = '10ms'\n[lans.port.c2]\ndelay = '4ms'\n[lans.shape.s1]\nrate = '1G'\n");
        let pl = p(&text, Kernel::default()).unwrap();
        let rtt = |from: &str, to: &str| {
            let d = pl
                .directions
                .iter()
                .find(|d| d.from == from && d.to == to)
                .unwrap_or_else(|| panic!("{from} → {to}: {:#?}", pl.directions));
            crate::witness::configured_rtt_us(&pl.directions, d)
        };
        assert_eq!(rtt("c1", "c2"), Some(14_000.0));
        // c2's port is measured from the first other member, c1.
        let port = pl
            .directions
            .iter()
            .find(|d| super::port_of(d) == Some("c2"))
            .unwrap();
        assert_eq!(port.from, "c1");
        assert_eq!(
            crate::witness::configured_rtt_us(&pl.directions, port),
            Some(14_000.0)
        );
        // s1's egress measured towards c1: c1's 10 ms back, no port delay.
        assert_eq!(rtt("s1", "c1"), Some(10_000.0));
    }

    /// A rate beside the delay stays with htb on the member's egress (or the port's), in front
    /// of the element; with netem in the kernel no element is built.
    #[test]
    fn rate_stays_with_htb_and_netem_builds_it_where_the_kernel_has_it() {
        let text = format!("{LAN}[lans.shape.c2]\nrate = '20M'\nlimit_packets = 50\ndelay = '5ms'\n");
        let pl = p(&text, Kernel::default()).unwrap();
        assert_eq!(pl.elements.len(), 1);
        assert_eq!(pl.elements[0].config.link, "sw:c2");
        let c = argvs(&pl);
        assert!(
            c.contains(&"nrabc123-c2 tc class add dev lan-sw parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 3028 cburst 3028".to_string()),
            "{c:#?}"
        );
        let d = pl.directions.iter().find(|d| d.from == "c2").unwrap();
        assert_eq!(
            d.mechanism,
            "htb rate 20000000bit + pfifo limit 50 + netrig element (delay)"
        );
        let nm = p(
            &text,
            Kernel {
                netem: true,
                ..Kernel::default()
            },
        )
        .unwrap();
        assert!(nm.elements.is_empty());
        assert!(argvs(&nm).iter().any(|l| l.contains("netem")));
    }

    /// Refused by name: the element on the host that holds the bridge (it has no port), and
    /// corruption with segmentation offloads on.
    #[test]
    fn what_the_element_cannot_build_on_a_lan_is_refused_by_name() {
        let sw = format!(
            "{}[lans.shape.s1]\ndelay = '1ms'\n",
            LAN.replace(
                "hosts = ['c1', 'c2', 's1']\n",
                "hosts = ['c1', 'c2', 's1']\nswitch = 's1'\n"
            )
        );
        let e = p(&sw, Kernel::default()).unwrap_err().to_string();
        assert!(
            e.contains("delay on LAN sw (s1 → LAN): needs netem or the red qdisc (not in this kernel); netrig's path element sits between a host and its bridge port, and s1 holds the bridge itself"),
            "{e}"
        );
        let corrupt = format!("{LAN}[lans.shape.c1]\ncorrupt = 1.0\n");
        let e = p(
            &corrupt,
            Kernel {
                ethtool: true,
                ..Kernel::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("corrupt on LAN sw (c1 → LAN): netrig's path element corrupts single frames only"),
            "{e}"
        );
        let ok = corrupt.replace(
            "hosts = ['c1', 'c2', 's1']\n",
            "hosts = ['c1', 'c2', 's1']\noffloads = { tso = false, gso = false }\n",
        );
        let pl = p(
            &ok,
            Kernel {
                ethtool: true,
                ..Kernel::default()
            },
        )
        .unwrap();
        assert_eq!(pl.elements[0].config.props[0].corrupt, 0.01);
    }
}
