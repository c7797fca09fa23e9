//! An arm of a plan that changes a link's shaping by name (docs/LAB.md, "A lab in a plan"):
//! `[arm.shape."c1-s1".c1] rate = "20M"` — the link as `lab status` names it, the direction by its
//! sending host. What the lab built with htb, tbf, pfifo or bfifo is changed in place with `tc`
//! before each of the arm's runs and put back after it; what it cannot change is refused by name
//! before anything runs.

use crate::build::LabState;
use crate::model::{parse_rate, Shape};
use crate::steps::Direction;
use serde::{Deserialize, Serialize};

/// One direction's change for an arm: what it sets, and the commands (run in the sending host's
/// namespace) that set it and put the lab's own shaping back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub link: String,
    pub from: String,
    pub to: String,
    /// The sending host's interface and namespace the commands run on.
    pub dev: String,
    pub ns: String,
    /// What the arm sets (absent: as the lab built it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// What the lab built there (put back after each run), as `lab status` names it.
    pub lab_mechanism: String,
    /// The `tc` commands that set it, and those that put the lab's shaping back.
    pub apply: Vec<String>,
    pub restore: Vec<String>,
    /// Path properties (delay, loss, ...) set in netrig's path element on that link
    /// ([`crate::arm_path`]): written to its configuration and signalled, before the `apply`
    /// commands; put back after the `restore` commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<crate::arm_path::ElementSet>,
}

/// What an arm may change: the rest is refused by name.
const REFUSED: &str = "an arm changes a link's rate and queue limit (limit_packets, limit_bytes), and \
    delay, jitter, loss, loss_gemodel, duplicate, reorder and corrupt where the lab built netrig's \
    path element or netem on that direction; not its shaper, red or element";

/// Where the lab built neither the element nor netem, path properties are refused: an arm does
/// not add the element to a link.
const NO_PATH: &str = "the lab built neither netrig's path element nor netem there, and an arm does \
    not add them (give the direction a path property in [lab], e.g. delay = \"0ms\", to build the \
    element, whose properties arms may then change)";

fn tbf_args(rate: u64, mtu: u32, packets: Option<u32>, bytes: Option<u64>) -> String {
    // As the lab builds it (plan.rs): a 4 ms bucket of at least three frames; a queue of 50 ms
    // at the rate unless a limit is given.
    let burst = ((rate / 8) / 250).max(3 * (mtu as u64 + 14));
    let limit = match (bytes, packets) {
        (Some(b), _) => b,
        (_, Some(p)) => p as u64 * (mtu as u64 + 14),
        _ => ((rate / 8) / 20).max(2 * burst),
    };
    format!("tbf rate {rate}bit burst {burst} limit {limit}")
}

fn fifo(packets: Option<u32>, bytes: Option<u64>) -> Option<String> {
    match (packets, bytes) {
        (Some(p), _) => Some(format!("pfifo limit {p}")),
        (_, Some(b)) => Some(format!("bfifo limit {b}")),
        _ => None,
    }
}

/// The change `s` asks of the direction `from` sends on `link`, checked against the lab as built:
/// its path properties by the element or netem ([`crate::arm_path`]), the rest by [`plan_queue`].
pub fn plan(state: &LabState, link: &str, from: &str, s: &Shape) -> Result<Change, String> {
    let asked = s.netem_properties();
    if asked.is_empty() {
        return plan_queue(state, link, from, s);
    }
    let rest = Shape {
        delay: None,
        jitter: None,
        loss: None,
        loss_gemodel: None,
        duplicate: None,
        reorder: None,
        corrupt: None,
        ..s.clone()
    };
    let only_path = rest == Shape::default();
    let element = crate::arm_path::element_set(state, link, from, s)?;
    let d = state.directions.iter().find(|d| d.link == link && d.from == from);
    let mut c = match (only_path, &element, d) {
        (false, _, _) => plan_queue(state, link, from, &rest)?,
        (true, _, Some(d)) => Change {
            link: link.to_string(),
            from: d.from.clone(),
            to: d.to.clone(),
            dev: d.dev.clone(),
            ns: d.ns.clone(),
            rate_bps: None,
            limit_packets: None,
            limit_bytes: None,
            lab_mechanism: d.mechanism.clone(),
            apply: vec![],
            restore: vec![],
            element: None,
        },
        (true, Some(e), None) => {
            // The element's other direction, which the lab left unshaped: it is there all the same.
            let cfg = &crate::arm_path::find(&state.elements, link, from)
                .expect("found")
                .config;
            Change {
                link: link.to_string(),
                from: from.to_string(),
                to: cfg.ends[1 - e.dir].clone(),
                dev: String::new(),
                ns: String::new(),
                rate_bps: None,
                limit_packets: None,
                limit_bytes: None,
                lab_mechanism: "netrig element (nothing configured)".into(),
                apply: vec![],
                restore: vec![],
                element: None,
            }
        }
        (true, None, None) => return plan_queue(state, link, from, s),
    };
    let label = format!("link {link} ({} → {})", c.from, c.to);
    match (element, d) {
        (Some(e), _) => c.element = Some(e),
        (None, Some(d)) if d.mechanism.contains("netem") => {
            let (apply, restore) = crate::arm_path::netem_change(d, s)?;
            c.apply.insert(0, apply);
            c.restore.push(restore);
        }
        _ => return Err(format!("{} on {label}: {NO_PATH}", asked.join(", "))),
    }
    Ok(c)
}

/// The rate and queue change `s` asks (no path properties: refused here by name).
fn plan_queue(state: &LabState, link: &str, from: &str, s: &Shape) -> Result<Change, String> {
    let d: &Direction = match state.directions.iter().find(|d| d.link == link && d.from == from) {
        Some(d) => d,
        None => {
            let seg = state.segments.iter().find(|g| g.name == link);
            return Err(match seg {
                None => format!(
                    "no link or LAN {link:?} in the lab (links and LANs: {})",
                    state
                        .segments
                        .iter()
                        .map(|g| g.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(g) if !g.members.iter().any(|m| m.host == from) => {
                    format!("link {link}: {from:?} is not on it (a direction is named by its sending host)")
                }
                Some(_) => format!(
                    "link {link} ({from} → …): not shaped in the lab; an arm changes what the lab built (give that direction a rate or a queue limit in [lab])"
                ),
            });
        }
    };
    let label = format!("link {link} ({} → {})", d.from, d.to);
    let mut refused: Vec<&str> = s.netem_properties();
    for (name, set) in [
        ("shaper", s.shaper.is_some()),
        ("red", s.red.is_some()),
        ("element", s.element.is_some()),
    ] {
        if set {
            refused.push(name);
        }
    }
    if !refused.is_empty() {
        return Err(format!("{} on {label}: {REFUSED}", refused.join(", ")));
    }
    if s.limit_packets.is_some() && s.limit_bytes.is_some() {
        return Err(format!("{label}: limit_packets or limit_bytes, not both"));
    }
    let rate = s
        .rate
        .as_deref()
        .map(parse_rate)
        .transpose()
        .map_err(|e| format!("{label}: {e}"))?;
    if rate.is_none() && s.limit_packets.is_none() && s.limit_bytes.is_none() {
        return Err(format!(
            "{label}: the arm's shape sets nothing (rate, limit_packets or limit_bytes)"
        ));
    }
    let lab = &d.shape;
    let tbf = lab.shaper.as_deref() == Some("tbf");
    let netem = d.mechanism.contains("netem");
    let (dev, mut apply, mut restore) = (&d.dev, Vec::new(), Vec::new());
    let limit_asked = s.limit_packets.is_some() || s.limit_bytes.is_some();
    if limit_asked && netem {
        return Err(format!(
            "limit on {label}: the queue there is netem's ({}); {REFUSED}",
            d.mechanism
        ));
    }
    match d.rate_bps {
        None if rate.is_some() => {
            return Err(format!(
                "rate on {label}: the lab gives it no rate to change ({}); give it one in [lab]",
                d.mechanism
            ))
        }
        Some(lab_rate) if tbf => {
            // tbf holds the rate and the queue.
            let (p, b) = if limit_asked {
                (s.limit_packets, s.limit_bytes)
            } else {
                (lab.limit_packets, lab.limit_bytes)
            };
            let r = rate.unwrap_or(lab_rate);
            apply.push(format!(
                "tc qdisc change dev {dev} root handle 1: {}",
                tbf_args(r, d.mtu, p, b)
            ));
            restore.push(format!(
                "tc qdisc change dev {dev} root handle 1: {}",
                tbf_args(lab_rate, d.mtu, lab.limit_packets, lab.limit_bytes)
            ));
        }
        Some(lab_rate) => {
            if let Some(r) = rate {
                let (b, lb) = (
                    crate::topology::htb_burst(r, d.mtu),
                    crate::topology::htb_burst(lab_rate, d.mtu),
                );
                apply.push(format!(
                    "tc class change dev {dev} parent 1: classid 1:1 htb rate {r}bit ceil {r}bit burst {b} cburst {b}"
                ));
                restore.push(format!(
                    "tc class change dev {dev} parent 1: classid 1:1 htb rate {lab_rate}bit ceil {lab_rate}bit burst {lb} cburst {lb}"
                ));
            }
            if let Some(f) = fifo(s.limit_packets, s.limit_bytes) {
                apply.push(format!("tc qdisc replace dev {dev} parent 1:1 handle 10: {f}"));
                restore.push(match fifo(lab.limit_packets, lab.limit_bytes) {
                    Some(g) => format!("tc qdisc replace dev {dev} parent 1:1 handle 10: {g}"),
                    None => format!("tc qdisc del dev {dev} parent 1:1 handle 10:"),
                });
            }
        }
        None => {
            // No rate: the lab's queue is the root fifo (or nothing, in front of an element).
            let f = fifo(s.limit_packets, s.limit_bytes).expect("a limit asked");
            apply.push(format!("tc qdisc replace dev {dev} root handle 1: {f}"));
            restore.push(match fifo(lab.limit_packets, lab.limit_bytes) {
                Some(g) => format!("tc qdisc replace dev {dev} root handle 1: {g}"),
                None => format!("tc qdisc del dev {dev} root"),
            });
        }
    }
    Ok(Change {
        link: link.to_string(),
        from: d.from.clone(),
        to: d.to.clone(),
        dev: dev.clone(),
        ns: d.ns.clone(),
        rate_bps: rate,
        limit_packets: s.limit_packets,
        limit_bytes: s.limit_bytes,
        lab_mechanism: d.mechanism.clone(),
        apply,
        restore,
        element: None,
    })
}

/// `netrig lab set LAB LINK HOST key=value ...`: the change an arm's shape makes, by hand, over
/// the lab's own properties (each `set` replaces the last); `reset` puts the lab's own back.
/// Returns what was done, a line each.
pub fn set_by_hand(
    which: &str,
    link: &str,
    host: &str,
    words: &[String],
    reset: bool,
) -> Result<Vec<String>, crate::LabError> {
    use crate::LabError;
    crate::build::check_rights()?;
    let state = crate::build::list()
        .into_iter()
        .find(|s| s.name == which || s.id == which)
        .ok_or_else(|| LabError::Spec(format!("no lab named {which:?} (netrig lab status lists them)")))?;
    let mut shape =
        crate::arm_path::shape_of_words(words).map_err(|e| LabError::Spec(format!("lab set: {e}")))?;
    if reset && words.is_empty() {
        // Everything the lab built on that direction: its element's properties, rate and queue.
        if crate::arm_path::find(&state.elements, link, host).is_some() {
            shape.delay = Some("0ms".into());
        }
        if let Some(d) = state.directions.iter().find(|d| d.link == link && d.from == host) {
            shape.rate = d.rate_bps.map(|r| r.to_string());
            shape.limit_packets = d.shape.limit_packets;
            shape.limit_bytes = d.shape.limit_bytes;
            if d.mechanism.contains("netem") && shape.delay.is_none() {
                shape.delay = d.shape.delay.clone().or(Some("0ms".into()));
            }
        }
    }
    let c = plan(&state, link, host, &shape).map_err(|e| LabError::Spec(format!("lab set: {e}")))?;
    let mut done = Vec::new();
    let run = |cmd: &str| -> Result<(), LabError> {
        let o = std::process::Command::new("ip")
            .args(["netns", "exec", &c.ns, "sh", "-c", cmd])
            .output()
            .map_err(|e| LabError::Other(format!("`{cmd}`: {e}")))?;
        if !o.status.success() {
            return Err(LabError::Command {
                cmd: cmd.to_string(),
                status: o.status.to_string(),
                stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
            });
        }
        Ok(())
    };
    if let (Some(e), false) = (&c.element, reset) {
        done.push(crate::arm_path::apply(e, false).map_err(LabError::Other)?);
    }
    for cmd in if reset { &c.restore } else { &c.apply } {
        run(cmd)?;
        done.push(format!("{host}: {cmd}"));
    }
    if let (Some(e), true) = (&c.element, reset) {
        done.push(crate::arm_path::apply(e, true).map_err(LabError::Other)?);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Kernel;

    fn state(shape: Shape, mechanism: &str) -> LabState {
        let rate_bps = shape.rate.as_deref().map(|r| parse_rate(r).unwrap());
        serde_json::from_value::<LabState>(serde_json::json!({
            "id": "abc123", "name": "t", "file": "t.toml", "created_unix": 0, "owner": null,
            "ready": true, "namespaces": [], "hosts": {},
            "segments": [{"name": "c1-s1", "lan": false, "mtu": 1500, "members": [
                {"host": "c1", "ns": "nrabc123-c1", "dev": "to-s1", "v4": null, "v6": null},
                {"host": "s1", "ns": "nrabc123-s1", "dev": "to-c1", "v4": null, "v6": null}]}],
            "directions": [],
            "kernel": Kernel { netem: false, red: false, ethtool: false, conntrack_max: false },
            "witness": []
        }))
        .map(|mut s| {
            s.directions.push(Direction {
                link: "c1-s1".into(),
                from: "c1".into(),
                to: "s1".into(),
                ns: "nrabc123-c1".into(),
                dev: "to-s1".into(),
                shape,
                rate_bps,
                mechanism: mechanism.into(),
                mtu: 1500,
            });
            s
        })
        .unwrap()
    }

    fn rate(r: &str) -> Shape {
        Shape {
            rate: Some(r.into()),
            ..Shape::default()
        }
    }

    #[test]
    fn an_htb_rate_and_its_queue_are_changed_and_put_back() {
        let lab = Shape {
            limit_packets: Some(100),
            ..rate("50M")
        };
        let s = state(lab, "htb rate 50000000bit + pfifo limit 100");
        let c = plan(&s, "c1-s1", "c1", &rate("20M")).unwrap();
        assert_eq!(
            c.apply,
            ["tc class change dev to-s1 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 3028 cburst 3028"]
        );
        assert_eq!(
            c.restore,
            ["tc class change dev to-s1 parent 1: classid 1:1 htb rate 50000000bit ceil 50000000bit burst 6250 cburst 6250"]
        );
        assert_eq!(
            (c.ns.as_str(), c.to.as_str(), c.rate_bps),
            ("nrabc123-c1", "s1", Some(20_000_000))
        );
        let q = Shape {
            limit_bytes: Some(30000),
            ..Shape::default()
        };
        let c = plan(&s, "c1-s1", "c1", &q).unwrap();
        assert_eq!(
            c.apply,
            ["tc qdisc replace dev to-s1 parent 1:1 handle 10: bfifo limit 30000"]
        );
        assert_eq!(
            c.restore,
            ["tc qdisc replace dev to-s1 parent 1:1 handle 10: pfifo limit 100"]
        );
    }

    #[test]
    fn a_tbf_rate_is_rebuilt_with_its_bucket_and_queue() {
        let lab = Shape {
            shaper: Some("tbf".into()),
            ..rate("100M")
        };
        let s = state(lab, "tbf rate 100000000bit burst 50000 limit 625000");
        let c = plan(&s, "c1-s1", "c1", &rate("10M")).unwrap();
        assert_eq!(
            c.apply,
            ["tc qdisc change dev to-s1 root handle 1: tbf rate 10000000bit burst 5000 limit 62500"]
        );
        assert_eq!(
            c.restore,
            ["tc qdisc change dev to-s1 root handle 1: tbf rate 100000000bit burst 50000 limit 625000"]
        );
    }

    #[test]
    fn what_an_arm_cannot_change_is_refused_by_name() {
        let s = state(rate("50M"), "htb rate 50000000bit");
        let delay = Shape {
            delay: Some("10ms".into()),
            loss: Some(1.0),
            ..Shape::default()
        };
        let e = plan(&s, "c1-s1", "c1", &delay).unwrap_err();
        assert!(
            e.starts_with(
                "delay, loss on link c1-s1 (c1 → s1): the lab built neither netrig's path element nor netem"
            ),
            "{e}"
        );
        let e = plan(&s, "c1-s2", "c1", &rate("1M")).unwrap_err();
        assert!(
            e.contains("no link or LAN \"c1-s2\"") && e.contains("c1-s1"),
            "{e}"
        );
        let e = plan(&s, "c1-s1", "s1", &rate("1M")).unwrap_err();
        assert!(e.contains("not shaped in the lab"), "{e}");
        let e = plan(&s, "c1-s1", "x", &rate("1M")).unwrap_err();
        assert!(e.contains("\"x\" is not on it"), "{e}");
        let e = plan(&s, "c1-s1", "c1", &Shape::default()).unwrap_err();
        assert!(e.contains("sets nothing"), "{e}");
        let no_rate = state(
            Shape {
                limit_packets: Some(10),
                ..Shape::default()
            },
            "pfifo limit 10",
        );
        let e = plan(&no_rate, "c1-s1", "c1", &rate("1M")).unwrap_err();
        assert!(
            e.starts_with("rate on link c1-s1 (c1 → s1): the lab gives it no rate"),
            "{e}"
        );
    }

    fn with_element(s: &mut LabState) {
        let lab = crate::element::Props {
            delay_us: 1000,
            ..Default::default()
        };
        s.elements.push(crate::build::ElementState {
            link: "c1-s1".into(),
            ns: "nrabc123.e0".into(),
            pid: Some(4242),
            config: crate::element::Config {
                link: "c1-s1".into(),
                ifaces: ["to-c1".into(), "to-s1".into()],
                ends: ["c1".into(), "s1".into()],
                props: [lab, Default::default()],
                counters: "/run/netrig/labs/abc123/element-0.json".into(),
                generation: 0,
            },
            counters: vec![],
        });
    }

    fn path(f: impl FnOnce(&mut Shape)) -> Shape {
        let mut s = Shape::default();
        f(&mut s);
        s
    }

    #[test]
    fn an_arm_changes_the_elements_properties_over_the_labs_and_puts_them_back() {
        let mut s = state(
            Shape {
                delay: Some("1ms".into()),
                ..Shape::default()
            },
            "netrig element (delay)",
        );
        with_element(&mut s);
        let c = plan(&s, "c1-s1", "c1", &path(|s| s.delay = Some("20ms".into()))).unwrap();
        let e = c.element.as_ref().unwrap();
        assert_eq!((e.dir, e.props.delay_us, e.lab_props.delay_us), (0, 20_000, 1000));
        assert_eq!(
            e.conf,
            std::path::Path::new("/run/netrig/labs/abc123/element-0.conf.json")
        );
        assert!(c.apply.is_empty() && c.restore.is_empty(), "{c:?}");
        // Loss over the lab's delay, which it keeps.
        let c = plan(&s, "c1-s1", "c1", &path(|s| s.loss = Some(5.0))).unwrap();
        let e = c.element.unwrap();
        assert_eq!(
            (e.props.loss, e.props.delay_us, e.lab_props.loss),
            (0.05, 1000, 0.0)
        );
        // The other direction, which the lab left unshaped, is the element's all the same.
        let c = plan(&s, "c1-s1", "s1", &path(|s| s.delay = Some("3ms".into()))).unwrap();
        let e = c.element.unwrap();
        assert_eq!(
            (c.to.as_str(), e.dir, e.props.delay_us, e.lab_props.delay_us),
            ("c1", 1, 3000, 0)
        );
        // Rate beside a delay: htb's class and the element, each put back.
        let mut both = rate("20M");
        both.delay = Some("5ms".into());
        let r = state(rate("50M"), "htb rate 50000000bit + netrig element (delay)");
        let mut r2 = r.clone();
        with_element(&mut r2);
        let c = plan(&r2, "c1-s1", "c1", &both).unwrap();
        assert_eq!(c.apply.len(), 1);
        assert_eq!(c.element.unwrap().props.delay_us, 5000);
        // Refused by name: reordering with no delay, corruption where the lab built none, a
        // host not on the link; and path properties on a link without the element or netem.
        let e = plan(&s, "c1-s1", "s1", &path(|s| s.reorder = Some(10.0))).unwrap_err();
        assert!(
            e.starts_with("reorder on link c1-s1 (s1 → c1): needs a delay"),
            "{e}"
        );
        let e = plan(&s, "c1-s1", "c1", &path(|s| s.corrupt = Some(1.0))).unwrap_err();
        assert!(e.starts_with("corrupt on link c1-s1 (c1 → s1)"), "{e}");
        let e = plan(&s, "c1-s1", "x", &path(|s| s.delay = Some("3ms".into()))).unwrap_err();
        assert!(e.contains("\"x\" is not on it"), "{e}");
        let e = plan(&r, "c1-s1", "c1", &both).unwrap_err();
        assert!(
            e.starts_with("delay on link c1-s1 (c1 → s1): the lab built neither"),
            "{e}"
        );
    }

    #[test]
    fn netem_is_changed_in_place_with_the_arms_properties_over_the_labs() {
        let lab = Shape {
            limit_packets: Some(100),
            delay: Some("10ms".into()),
            loss: Some(1.0),
            ..rate("50M")
        };
        let s = state(lab, "htb rate 50000000bit + netem (delay, loss)");
        let c = plan(&s, "c1-s1", "c1", &path(|s| s.delay = Some("20ms".into()))).unwrap();
        assert!(c.element.is_none());
        assert_eq!(
            c.apply,
            ["tc qdisc change dev to-s1 parent 1:1 handle 10: netem limit 100 delay 20ms loss 1%"]
        );
        assert_eq!(
            c.restore,
            ["tc qdisc change dev to-s1 parent 1:1 handle 10: netem limit 100 delay 10ms loss 1%"]
        );
        let no_rate = state(
            Shape {
                delay: Some("10ms".into()),
                ..Shape::default()
            },
            "netem (delay)",
        );
        let c = plan(&no_rate, "c1-s1", "c1", &path(|s| s.loss = Some(2.0))).unwrap();
        assert_eq!(
            c.apply,
            ["tc qdisc change dev to-s1 root handle 1: netem delay 10ms loss 2%"]
        );
        assert_eq!(
            c.restore,
            ["tc qdisc change dev to-s1 root handle 1: netem delay 10ms"]
        );
    }
}
