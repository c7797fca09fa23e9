//! Where netrig's overload generators may run: the refusal rule.
//!
//! The rule: **a generator runs only inside a host of a lab built by `netrig lab`, and only
//! towards an address of another host of that same lab.** "Inside a host" is checked by the
//! kernel's own identity of network namespaces: the calling thread's namespace
//! (`/proc/thread-self/ns/net`) must be the one a lab's state file (`/run/netrig/labs/<id>.json`)
//! names for one of its hosts (`/run/netns/<ns>`, compared by device and inode, not by name). A
//! lab's namespaces have no route out of the lab, and the SYN flood's sources are drawn from the
//! attacker host's own segments in the lab (benchmarking ranges), excluding every address a lab
//! host holds, so neither its packets nor the answers to them can leave the lab.

use crate::build::LabState;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::IpAddr;

/// The rule, as refusals quote it.
pub const RULE: &str = "netrig's overload generators run only inside a host of a lab built by `netrig lab` \
     (its namespace, as /run/netrig/labs/*.json names it), towards an address of another host of the same lab";

/// A namespace's identity: the device and inode of its nsfs file.
pub type NsId = (u64, u64);

/// Where a generator was allowed to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    pub lab: String,
    pub lab_id: String,
    /// The host it runs in (the attacker, or the half-closing client).
    pub host: String,
    pub ns: String,
    /// The host that holds the target address.
    pub target_host: String,
    pub target_ns: String,
    /// The networks of the attacker's own segments in the target's family: the flood's sources.
    pub source_nets: Vec<IpNet>,
    /// Every address a host of the lab holds: never a spoofed source.
    pub taken: Vec<IpAddr>,
}

impl Scope {
    /// Source `k` of the flood, from a random number `r`: an address in one of the attacker's
    /// segments, not its network or (IPv4) broadcast address, and not a lab host's; `None` when
    /// the segments hold no such address.
    pub fn source(&self, r: u64) -> Option<IpAddr> {
        if self.source_nets.is_empty() {
            return None;
        }
        let net = &self.source_nets[(r % self.source_nets.len() as u64) as usize];
        let r = r / self.source_nets.len() as u64;
        for attempt in 0..16u64 {
            let x = r.wrapping_add(attempt.wrapping_mul(0x9e37_79b9));
            let a = match net {
                IpNet::V4(n) => {
                    let host_bits = 32 - u32::from(n.prefix_len());
                    if host_bits < 2 {
                        return None;
                    }
                    let span = (1u64 << host_bits) - 2; // no network, no broadcast
                    let off = 1 + (x % span) as u32;
                    IpAddr::V4((u32::from(n.network()) | off).into())
                }
                IpNet::V6(n) => {
                    let host_bits = 128 - u32::from(n.prefix_len());
                    if host_bits < 2 {
                        return None;
                    }
                    let bits = host_bits.min(48);
                    let span = (1u128 << bits) - 1;
                    let off = 1 + (u128::from(x) % span);
                    IpAddr::V6((u128::from(n.network()) | off).into())
                }
            };
            if !self.taken.contains(&a) {
                return Some(a);
            }
        }
        None
    }
}

/// The identity of the namespace `/run/netns/<ns>`, if it exists.
pub fn ns_id(ns: &str) -> Option<NsId> {
    id_of(&format!("/run/netns/{ns}"))
}

/// The calling thread's network namespace.
pub fn current_ns() -> Option<NsId> {
    id_of("/proc/thread-self/ns/net")
}

fn id_of(path: &str) -> Option<NsId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

fn parse_addrs(addrs: &[String]) -> Vec<IpNet> {
    addrs.iter().filter_map(|a| a.parse::<IpNet>().ok()).collect()
}

/// The rule applied: `here` is the calling thread's namespace, `id` finds a namespace's identity
/// by name, `target` is where the generator is aimed. Refusals name the rule and what failed it.
pub fn check(
    labs: &[LabState],
    here: Option<NsId>,
    id: &dyn Fn(&str) -> Option<NsId>,
    target: IpAddr,
) -> Result<Scope, String> {
    let here = here.ok_or_else(|| {
        format!("refused: this thread's network namespace cannot be read (/proc/thread-self/ns/net); {RULE}")
    })?;
    let found = labs.iter().find_map(|l| {
        l.hosts
            .iter()
            .find(|(_, h)| id(&h.ns) == Some(here))
            .map(|(name, h)| (l, name.clone(), h))
    });
    let Some((lab, host, h)) = found else {
        return Err(format!(
            "refused: this process is not inside a host of any lab ({} lab(s) up; its network namespace is none of \
             their hosts'); {RULE}",
            labs.len()
        ));
    };
    let target_host = lab
        .hosts
        .iter()
        .find(|(_, o)| parse_addrs(&o.addrs).iter().any(|n| n.addr() == target));
    let Some((target_name, t)) = target_host else {
        return Err(format!(
            "refused: {target} is not an address of a host of lab {} (this process runs in its host {host}); {RULE}",
            lab.name
        ));
    };
    if *target_name == host {
        return Err(format!(
            "refused: {target} is host {host}'s own address (the generator's own host); {RULE}"
        ));
    }
    let v4 = target.is_ipv4();
    let source_nets: Vec<IpNet> = parse_addrs(&h.addrs)
        .into_iter()
        .filter(|n| n.addr().is_ipv4() == v4)
        .map(|n| match n {
            IpNet::V4(n) => IpNet::V4(Ipv4Net::new(n.network(), n.prefix_len()).expect("a prefix it had")),
            IpNet::V6(n) => IpNet::V6(Ipv6Net::new(n.network(), n.prefix_len()).expect("a prefix it had")),
        })
        .collect();
    let taken = lab
        .hosts
        .values()
        .flat_map(|o| parse_addrs(&o.addrs))
        .map(|n| n.addr())
        .collect();
    Ok(Scope {
        lab: lab.name.clone(),
        lab_id: lab.id.clone(),
        host,
        ns: h.ns.clone(),
        target_host: target_name.clone(),
        target_ns: t.ns.clone(),
        source_nets,
        taken,
    })
}

/// The rule applied to this thread and the labs that are up now.
pub fn check_here(target: IpAddr) -> Result<Scope, String> {
    check(&crate::build::list(), current_ns(), &ns_id, target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::HostState;

    fn lab() -> LabState {
        let mut s: LabState = serde_json::from_value(serde_json::json!({
            "id": "abc123", "name": "ov", "file": "ov.toml", "created_unix": 0, "owner": null,
            "ready": true, "namespaces": [], "hosts": {}, "segments": [], "directions": [],
            "kernel": {"netem": false, "red": false, "ethtool": false}, "witness": []
        }))
        .unwrap_or_else(|e| panic!("a minimal LabState: {e}"));
        let host = |ns: &str, addrs: &[&str]| HostState {
            ns: ns.into(),
            addrs: addrs.iter().map(|a| a.to_string()).collect(),
            agent: None,
            http_port: None,
        };
        s.hosts.insert(
            "a1".into(),
            host("nrabc123-a1", &["198.18.3.1/24", "2001:db8:0:3::1/64"]),
        );
        s.hosts.insert(
            "s1".into(),
            host("nrabc123-s1", &["198.18.1.2/24", "2001:db8:0:1::2/64"]),
        );
        s.hosts.insert(
            "r".into(),
            host("nrabc123-r", &["198.18.3.2/24", "198.18.1.1/24"]),
        );
        s
    }

    fn ids(ns: &str) -> Option<NsId> {
        match ns {
            "nrabc123-a1" => Some((4, 101)),
            "nrabc123-s1" => Some((4, 102)),
            "nrabc123-r" => Some((4, 103)),
            _ => None,
        }
    }

    #[test]
    fn outside_every_lab_it_is_refused_naming_the_rule() {
        // The machine's own namespace (or any other) is none of the lab's hosts'.
        let e = check(&[lab()], Some((4, 1)), &ids, "198.18.1.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("not inside a host of any lab"), "{e}");
        assert!(e.contains(RULE), "{e}");
        // No lab at all.
        let e = check(&[], Some((4, 101)), &ids, "198.18.1.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("0 lab(s) up"), "{e}");
        // A namespace that cannot be read is no lab host either.
        let e = check(&[lab()], None, &ids, "198.18.1.2".parse().unwrap()).unwrap_err();
        assert!(e.starts_with("refused"), "{e}");
    }

    #[test]
    fn a_target_outside_the_lab_or_its_own_host_is_refused() {
        for t in [
            "192.0.2.1",
            "127.0.0.1",
            "8.8.8.8",
            "198.18.9.9",
            "2001:db8:0:9::2",
        ] {
            let e = check(&[lab()], Some((4, 101)), &ids, t.parse().unwrap()).unwrap_err();
            assert!(e.contains("not an address of a host of lab ov"), "{t}: {e}");
        }
        let e = check(&[lab()], Some((4, 101)), &ids, "198.18.3.1".parse().unwrap()).unwrap_err();
        assert!(e.contains("own address"), "{e}");
    }

    #[test]
    fn inside_a_lab_host_towards_another_it_runs_with_sources_from_its_own_segments() {
        let s = check(&[lab()], Some((4, 101)), &ids, "198.18.1.2".parse().unwrap()).unwrap();
        assert_eq!((s.host.as_str(), s.target_host.as_str()), ("a1", "s1"));
        assert_eq!(s.target_ns, "nrabc123-s1");
        assert_eq!(s.source_nets, vec!["198.18.3.0/24".parse::<IpNet>().unwrap()]);
        let mut seen = std::collections::BTreeSet::new();
        for r in 0..5000u64 {
            let a = s.source(r.wrapping_mul(0x2545_f491_4f6c_dd1d)).expect("a source");
            let IpAddr::V4(v) = a else { panic!("{a}") };
            let o = v.octets();
            assert_eq!(&o[..3], &[198, 18, 3], "{a}");
            assert!(o[3] != 0 && o[3] != 255, "{a}: network or broadcast");
            assert!(!s.taken.contains(&a), "{a} is a lab host's");
            seen.insert(a);
        }
        assert!(
            seen.len() > 200,
            "sources spread over the segment: {}",
            seen.len()
        );
        let s6 = check(&[lab()], Some((4, 101)), &ids, "2001:db8:0:1::2".parse().unwrap()).unwrap();
        for r in 0..1000u64 {
            let a = s6.source(r * 7919).expect("a source");
            assert!("2001:db8:0:3::/64".parse::<IpNet>().unwrap().contains(&a), "{a}");
            assert!(!s6.taken.contains(&a));
        }
    }
}
