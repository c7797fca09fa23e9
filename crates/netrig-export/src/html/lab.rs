//! The lab of an experiment drawn as a diagram (docs/LAB.md, "In the results"): hosts as boxes
//! (routers marked, each with its agent and addresses), links as lines and LANs as a bus, each
//! direction's configured properties, the mechanism that builds them and the witness's figures
//! beside them. Hand-built SVG; the layout is deterministic: columns are breadth-first layers from
//! the plan's client host (or the first host by name), rows are in name order.

use super::esc;
use netrig_document::experiment::Experiment;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

/// Horizontal distance between layers, vertical between rows, a host box's size.
const COL: f64 = 560.0;
const ROW: f64 = 190.0;
const BOX_W: f64 = 150.0;
const BOX_H: f64 = 70.0;
const LINE_H: f64 = 13.0;

/// A node of the diagram: a host, or a LAN's bus.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Host(String),
    Lan(String),
}

fn mbit(bps: f64) -> String {
    let m = bps / 1e6;
    if (m - m.round()).abs() < 1e-9 {
        format!("{m:.0} Mbit/s")
    } else {
        format!("{m:.2} Mbit/s")
    }
}

/// "2ms" → "2 ms".
fn spaced(d: &str) -> String {
    match d.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) if i > 0 => format!("{} {}", &d[..i], &d[i..]),
        _ => d.to_string(),
    }
}

/// What one direction is configured to do, as words.
pub fn configured(dir: &Value) -> String {
    let s = &dir["shape"];
    let mut v = Vec::new();
    if let Some(r) = dir["rate_bps"].as_f64() {
        v.push(format!("rate {}", mbit(r)));
    }
    if let Some(p) = s["limit_packets"].as_u64() {
        v.push(format!("queue {p} packets"));
    }
    if let Some(b) = s["limit_bytes"].as_u64() {
        v.push(format!("queue {b} bytes"));
    }
    if let Some(d) = s["delay"].as_str() {
        let j = s["jitter"]
            .as_str()
            .map(|j| format!(" ± {}", spaced(j)))
            .unwrap_or_default();
        v.push(format!("delay {}{j}", spaced(d)));
    }
    for (k, name) in [
        ("loss", "loss"),
        ("duplicate", "duplicate"),
        ("reorder", "reorder"),
        ("corrupt", "corrupt"),
    ] {
        if let Some(p) = s[k].as_f64() {
            v.push(format!("{name} {p} %"));
        }
    }
    if v.is_empty() {
        "unshaped".into()
    } else {
        v.join(", ")
    }
}

/// What the witness measured of one direction, as words.
pub fn measured(w: Option<&Value>) -> String {
    let Some(w) = w else {
        return "not measured (no witness)".into();
    };
    let mut v = Vec::new();
    if let Some(m) = w["measured_goodput_bps"].as_f64() {
        let of = w["expected_goodput_bps"]
            .as_f64()
            .map(|e| format!(" of {}", mbit(e)))
            .unwrap_or_default();
        v.push(format!("{} TCP payload{of}", mbit(m)));
    }
    if let Some(r) = w["rtt_p50_us"].as_f64() {
        let c = w["configured_rtt_us"]
            .as_f64()
            .map(|c| format!(" (configured {:.2})", c / 1e3))
            .unwrap_or_default();
        v.push(format!("round trip {:.2} ms{c}", r / 1e3));
    }
    if let Some(l) = w["loss_probe"]["measured_pct"].as_f64() {
        v.push(format!("loss {l:.2} %"));
    }
    let mut out = if v.is_empty() {
        "measured: nothing".to_string()
    } else {
        format!("measured: {}", v.join(", "))
    };
    if w["warning"].is_string() {
        out.push_str(" — WARNING (see the table)");
    }
    out
}

/// The hosts of a segment of the lab as built.
fn members(s: &Value) -> Vec<String> {
    s["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["host"].as_str().map(String::from))
        .collect()
}

fn is_lan(s: &Value) -> bool {
    s["lan"].as_bool() == Some(true)
}

/// The lab as built (the document's `lab`) and the plan's, with what the diagram reads of them.
struct Lab<'a> {
    lab: &'a Value,
    hosts: Vec<String>,
    segments: Vec<Value>,
    /// The hosts the plan makes routers.
    routers: BTreeSet<String>,
}

impl Lab<'_> {
    fn router(&self, h: &str) -> bool {
        self.routers.contains(h)
    }

    /// The graph: a link joins two hosts, a LAN is a node joined to each member.
    fn graph(&self) -> BTreeMap<Node, BTreeSet<Node>> {
        let mut adj: BTreeMap<Node, BTreeSet<Node>> = BTreeMap::new();
        for h in &self.hosts {
            adj.entry(Node::Host(h.clone())).or_default();
        }
        for s in &self.segments {
            let name = s["name"].as_str().unwrap_or("?").to_string();
            let m = members(s);
            if is_lan(s) {
                for h in &m {
                    adj.entry(Node::Lan(name.clone()))
                        .or_default()
                        .insert(Node::Host(h.clone()));
                    adj.entry(Node::Host(h.clone()))
                        .or_default()
                        .insert(Node::Lan(name.clone()));
                }
            } else if m.len() == 2 {
                adj.entry(Node::Host(m[0].clone()))
                    .or_default()
                    .insert(Node::Host(m[1].clone()));
                adj.entry(Node::Host(m[1].clone()))
                    .or_default()
                    .insert(Node::Host(m[0].clone()));
            }
        }
        adj
    }

    /// Where breadth-first layering starts, in turn: the client hosts (the plan's and its
    /// arms', with the hosts that are not routers on a LAN with one of them), then each host
    /// that is not a router, then each host.
    fn roots(&self, e: &Experiment) -> Vec<Vec<Node>> {
        let plan = serde_json::to_value(&e.plan).unwrap_or(Value::Null);
        let mut named: BTreeSet<String> = BTreeSet::new();
        let t = &plan["target"];
        let arms = plan["arm"].as_array().cloned().unwrap_or_default();
        for c in std::iter::once(&t["client"])
            .chain(t["clients"].as_array().into_iter().flatten())
            .chain(arms.iter().map(|a| &a["client"]))
        {
            if let Some(c) = c.as_str().filter(|c| self.hosts.iter().any(|h| h == c)) {
                named.insert(c.to_string());
            }
        }
        let mut first: BTreeSet<Node> = named.iter().map(|h| Node::Host(h.clone())).collect();
        for s in self.segments.iter().filter(|s| is_lan(s)) {
            let m = members(s);
            if m.iter().any(|h| named.contains(h)) {
                first.extend(
                    m.iter()
                        .filter(|h| !self.router(h))
                        .map(|h| Node::Host(h.clone())),
                );
            }
        }
        let mut roots: Vec<Vec<Node>> = vec![first.into_iter().collect()];
        roots.extend(
            self.hosts
                .iter()
                .filter(|h| !self.router(h))
                .map(|h| vec![Node::Host(h.clone())]),
        );
        roots.extend(self.hosts.iter().map(|h| vec![Node::Host(h.clone())]));
        roots
    }

    /// Each node's layer: breadth first from the first roots, then from each root not reached
    /// yet, a layer past the last.
    fn layers(&self, e: &Experiment) -> BTreeMap<Node, usize> {
        let adj = self.graph();
        let mut layer: BTreeMap<Node, usize> = BTreeMap::new();
        for r in self.roots(e) {
            let r: Vec<Node> = r.into_iter().filter(|n| !layer.contains_key(n)).collect();
            if r.is_empty() {
                continue;
            }
            let base = layer.values().max().map_or(0, |m| m + 1);
            let mut q: VecDeque<(Node, usize)> = r.iter().map(|n| (n.clone(), base)).collect();
            for n in r {
                layer.insert(n, base);
            }
            while let Some((n, l)) = q.pop_front() {
                for m in adj.get(&n).into_iter().flatten() {
                    if !layer.contains_key(m) {
                        layer.insert(m.clone(), l + 1);
                        q.push_back((m.clone(), l + 1));
                    }
                }
            }
        }
        layer
    }
}

/// Where the nodes stand: each node's centre, and the drawing's width and height.
struct Layout {
    pos: BTreeMap<Node, (f64, f64)>,
    width: f64,
    height: f64,
}

impl Layout {
    /// A column per layer, its nodes in name order, each column centred on the tallest.
    fn of(layer: &BTreeMap<Node, usize>) -> Layout {
        let mut columns: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
        for (n, l) in layer {
            columns.entry(*l).or_default().push(n.clone());
        }
        let tallest = columns.values().map(Vec::len).max().unwrap_or(1);
        let mut pos: BTreeMap<Node, (f64, f64)> = BTreeMap::new();
        for (c, nodes) in &columns {
            let top = (tallest - nodes.len()) as f64 * ROW / 2.0;
            for (i, n) in nodes.iter().enumerate() {
                pos.insert(
                    n.clone(),
                    (
                        40.0 + BOX_W / 2.0 + *c as f64 * COL,
                        60.0 + BOX_H / 2.0 + top + i as f64 * ROW,
                    ),
                );
            }
        }
        Layout {
            pos,
            width: 80.0 + BOX_W + (columns.len().max(1) - 1) as f64 * COL + 80.0,
            height: 120.0 + BOX_H + (tallest - 1) as f64 * ROW + 80.0,
        }
    }

    fn host(&self, h: &str) -> Option<(f64, f64)> {
        self.pos.get(&Node::Host(h.to_string())).copied()
    }
}

/// A line of text centred at (x, y).
fn text(out: &mut String, x: f64, y: f64, class: &str, t: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{x:.0}\" y=\"{y:.0}\" class=\"{class}\" text-anchor=\"middle\">{}</text>",
        esc(t)
    );
}

/// Draws segment `s`: its line (or its bus, and a line from each member) into `lines`; its
/// name and label into `labels`. Where its label goes: the line's two ends, or the bus's foot.
fn segment_lines(s: &Value, at: &Layout, lines: &mut String, labels: &mut String) -> Vec<(f64, f64)> {
    let m = members(s);
    if !is_lan(s) {
        let p: Vec<(f64, f64)> = m.iter().filter_map(|h| at.host(h)).collect();
        if p.len() == 2 {
            let _ = writeln!(
                lines,
                "<line x1=\"{:.0}\" y1=\"{:.0}\" x2=\"{:.0}\" y2=\"{:.0}\" class=\"link\"/>",
                p[0].0, p[0].1, p[1].0, p[1].1
            );
        }
        return p;
    }
    let name = s["name"].as_str().unwrap_or("?");
    let Some(&bus) = at.pos.get(&Node::Lan(name.to_string())) else {
        return vec![];
    };
    // The bus spans its members' rows; each member joins it with a horizontal line.
    let ys: Vec<f64> = m
        .iter()
        .filter_map(|h| at.host(h).map(|p| p.1))
        .chain([bus.1])
        .collect();
    let (top, bottom) = (
        ys.iter().copied().fold(f64::INFINITY, f64::min) - 24.0,
        ys.iter().copied().fold(f64::NEG_INFINITY, f64::max) + 24.0,
    );
    let _ = writeln!(
        lines,
        "<rect x=\"{:.0}\" y=\"{top:.0}\" width=\"10\" height=\"{:.0}\" class=\"bus\"/>",
        bus.0 - 5.0,
        bottom - top
    );
    text(labels, bus.0, top - 8.0, "name", name);
    for h in &m {
        if let Some((x, y)) = at.host(h) {
            let _ = writeln!(
                lines,
                "<line x1=\"{x:.0}\" y1=\"{y:.0}\" x2=\"{:.0}\" y2=\"{y:.0}\" class=\"link\"/>",
                bus.0
            );
        }
    }
    vec![(bus.0, bottom - BOX_H / 2.0)]
}

/// The label of segment `s`: the segment and its MTU, then each direction over it as
/// configured, the mechanism that builds it, and as the witness measured it; (class, line).
fn segment_label(s: &Value, lab: &Value) -> Vec<(&'static str, String)> {
    let name = s["name"].as_str().unwrap_or("?");
    let directions = lab["directions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let witness = lab["witness"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut t: Vec<(&str, String)> = vec![(
        "seg",
        format!(
            "{} {name} (MTU {})",
            if is_lan(s) { "LAN" } else { "link" },
            s["mtu"]
        ),
    )];
    for d in directions.iter().filter(|d| d["link"] == name) {
        let (from, to) = (d["from"].as_str().unwrap_or("?"), d["to"].as_str().unwrap_or("?"));
        let w = witness
            .iter()
            .find(|w| w["link"] == name && w["from"] == from && w["to"] == to);
        t.push(("dir", format!("{from} → {to}: {}", configured(d))));
        t.push(("mech", format!("by {}", d["mechanism"].as_str().unwrap_or("?"))));
        t.push(("meas", measured(w)));
    }
    if t.len() == 1 {
        t.push(("mech", "unshaped both ways".into()));
    }
    t
}

/// Draws each segment's lines into `lines` and its labels into `labels`.
fn segments(lab: &Lab, at: &Layout, lines: &mut String, labels: &mut String) {
    for s in &lab.segments {
        let ends = segment_lines(s, at, lines, labels);
        let (cx, cy) = match ends.as_slice() {
            [a, b] => ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0),
            [a] => (a.0, a.1 + BOX_H / 2.0 + 16.0),
            _ => continue,
        };
        // Below the line's middle (below a bus), clear of the line itself.
        let y0 = if is_lan(s) { cy } else { cy + 18.0 };
        for (i, (class, t)) in segment_label(s, lab.lab).iter().enumerate() {
            text(labels, cx, y0 + i as f64 * LINE_H, class, t);
        }
    }
}

/// The hosts' boxes: each with its name, its role and agent, and its first two IPv4 addresses.
fn boxes(lab: &Lab, at: &Layout) -> String {
    let mut boxes = String::new();
    for (n, &(x, y)) in &at.pos {
        let Node::Host(h) = n else {
            continue; // a LAN is drawn with its segment
        };
        let info = &lab.lab["hosts"][h];
        let router = lab.router(h);
        let _ = writeln!(
            boxes,
            "<rect x=\"{:.0}\" y=\"{:.0}\" width=\"{BOX_W:.0}\" height=\"{BOX_H:.0}\" rx=\"{}\" class=\"{}\"/>",
            x - BOX_W / 2.0,
            y - BOX_H / 2.0,
            if router { 18 } else { 4 },
            if router { "host router" } else { "host" }
        );
        text(&mut boxes, x, y - 16.0, "name", h);
        let role = match (router, info["agent"]["port"].as_u64()) {
            (true, Some(p)) => format!("router · agent :{p}"),
            (false, Some(p)) => format!("agent :{p}"),
            (true, None) => "router · no agent".into(),
            (false, None) => "no agent".into(),
        };
        text(&mut boxes, x, y + 2.0, "small", &role);
        let addrs: Vec<&str> = info["addrs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|a| !a.contains(':'))
            .take(2)
            .collect();
        for (i, a) in addrs.iter().enumerate() {
            text(&mut boxes, x, y + 16.0 + i as f64 * 12.0, "small", a);
        }
    }
    boxes
}

/// The diagram of the experiment's lab, a `<figure>` with an inline SVG; none without a lab.
pub fn diagram(e: &Experiment) -> Option<String> {
    let built = e.lab.as_ref()?;
    let lab = Lab {
        lab: built,
        hosts: built["hosts"].as_object()?.keys().cloned().collect(),
        segments: built["segments"].as_array().cloned().unwrap_or_default(),
        routers: e
            .plan
            .lab
            .iter()
            .flat_map(|t| &t.hosts)
            .filter(|(_, x)| x.router)
            .map(|(h, _)| h.clone())
            .collect(),
    };
    let at = Layout::of(&lab.layers(e));
    let (width, height) = (at.width, at.height);
    let mut lines = String::new();
    let mut labels = String::new();
    segments(&lab, &at, &mut lines, &mut labels);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg class=\"lab\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"the lab's hosts and links\">\n<style>\
         .link {{ stroke: currentColor; stroke-width: 2; opacity: .6 }} \
         .host {{ fill: var(--bg, Canvas); stroke: currentColor; stroke-width: 1.5 }} .router {{ stroke-width: 2.5 }} \
         .bus {{ fill: currentColor; opacity: .6 }} \
         text {{ fill: currentColor; font: 11px system-ui, sans-serif; paint-order: stroke; stroke: var(--bg, Canvas); stroke-width: 3px; stroke-linejoin: round }} text.name {{ font-weight: 600; font-size: 14px }} \
         text.seg {{ font-weight: 600 }} text.small, text.mech {{ opacity: .75 }} text.meas {{ font-style: italic }}\
         </style>"
    );
    svg.push_str(&lines);
    svg.push_str(&boxes(&lab, &at));
    svg.push_str(&labels);
    svg.push_str("</svg>");
    let name = built["name"].as_str().unwrap_or("?");
    let id = built["id"].as_str().unwrap_or("?");
    Some(format!(
        "<h2>The lab</h2>\n<figure class=\"lab\" id=\"lab-diagram\">{svg}<figcaption>lab {} (id {}): hosts (routers with round corners) and links; each shaped direction with what is configured, the mechanism that builds it, and what the witness measured after building it (TCP payload over its stream, tcp-rr median round trip or udp-rr's where the path has loss, UDP probe loss). Built for this plan and removed after it.</figcaption></figure>",
        esc(name),
        esc(id)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::plan::Plan;
    use serde_json::json;

    fn experiment() -> Experiment {
        let plan = Plan::from_toml(
            "name = 'x'\n[target]\nclient = 'c1'\nserver = 's1'\n[[test]]\nkind = 'tcp-stream'\n\
             [lab.hosts.s1]\n[lab.hosts.r]\nrouter = true\n[lab.hosts.c1]\n[lab.hosts.c2]\n\
             [[lab.links]]\nends = ['r', 's1']\n[lab.links.shape.r]\nrate = '155M'\ndelay = '58ms'\n\
             [[lab.lans]]\nname = 'sw'\nhosts = ['c1', 'c2', 'r']\n",
        )
        .unwrap();
        let member =
            |h: &str, a: &str| json!({"host": h, "ns": format!("nr1-{h}"), "dev": "x", "v4": a, "v6": null});
        let lab = json!({
            "id": "abc123", "name": "x-1",
            "hosts": {
                "c1": {"ns": "nr1-c1", "addrs": ["198.19.254.1/24"], "agent": {"pid": 1, "port": 6387}},
                "c2": {"ns": "nr1-c2", "addrs": ["198.19.254.2/24"], "agent": {"pid": 2, "port": 6387}},
                "r": {"ns": "nr1-r", "addrs": ["198.18.0.1/24", "198.19.254.3/24"], "agent": {"pid": 3, "port": 6387}},
                "s1": {"ns": "nr1-s1", "addrs": ["198.18.0.2/24", "2001:db8::2/64"], "agent": {"pid": 4, "port": 6387}}
            },
            "segments": [
                {"name": "r-s1", "lan": false, "mtu": 1500, "members": [member("r", "198.18.0.1/24"), member("s1", "198.18.0.2/24")]},
                {"name": "sw", "lan": true, "mtu": 9000, "members": [member("c1", "198.19.254.1/24"), member("c2", "198.19.254.2/24"), member("r", "198.19.254.3/24")]}
            ],
            "directions": [{"link": "r-s1", "from": "r", "to": "s1", "ns": "nr1-r", "dev": "to-s1",
                "shape": {"rate": "155M", "delay": "58ms"}, "rate_bps": 155000000,
                "mechanism": "htb rate 155000000bit + netrig element (delay)", "mtu": 1500}],
            "witness": [{"link": "r-s1", "from": "r", "to": "s1", "mechanism": "m", "configured_rate_bps": 155000000,
                "expected_goodput_bps": 148240000.0, "measured_goodput_bps": 148040000.0, "stream_s": 2.0,
                "rtt_p50_us": 58120.0, "configured_rtt_us": 58000.0, "warning": null, "error": null}]
        });
        // From JSON, as a saved experiment is read (a literal would break on each new field).
        serde_json::from_value(json!({
            "format": netrig_document::experiment::FORMAT,
            "netrig_version": "t",
            "plan": serde_json::to_value(&plan).unwrap(),
            "started_unix_s": 0.0,
            "finished_unix_s": 1.0,
            "complete": true,
            "seed": 1,
            "warnings": [],
            "commands": [],
            "tests": [],
            "lab": lab
        }))
        .unwrap()
    }

    fn x_of(svg: &str, name: &str) -> f64 {
        let at = svg
            .find(&format!("class=\"name\" text-anchor=\"middle\">{name}<"))
            .unwrap();
        let head = &svg[..at];
        let x = head.rfind("x=\"").unwrap();
        head[x + 3..].split('"').next().unwrap().parse().unwrap()
    }

    /// Every host (routers marked), the link and the LAN, each direction's configured
    /// properties, mechanism and witness figures; columns are layers from the client host.
    #[test]
    fn the_lab_is_drawn_with_every_host_link_and_figure_in_layers_from_the_client() {
        let e = experiment();
        let d = diagram(&e).expect("a diagram");
        for want in [
            ">c1<",
            ">c2<",
            ">r<",
            ">s1<",
            "router · agent :6387",
            "agent :6387",
            "198.18.0.2/24",
            "link r-s1 (MTU 1500)",
            "LAN sw (MTU 9000)",
            "r → s1: rate 155 Mbit/s, delay 58 ms",
            "by htb rate 155000000bit + netrig element (delay)",
            "measured: 148.04 Mbit/s TCP payload of 148.24 Mbit/s, round trip 58.12 ms (configured 58.00)",
        ] {
            assert!(d.contains(want), "{want:?} not in:\n{d}");
        }
        assert!(!d.contains("2001:db8::2"), "IPv4 addresses only in a box");
        // c1 (the client) | the LAN | r | s1, left to right; c1 and c2 in the first column.
        assert!(
            x_of(&d, "c1") < x_of(&d, "sw")
                && x_of(&d, "sw") < x_of(&d, "r")
                && x_of(&d, "r") < x_of(&d, "s1")
        );
        assert_eq!(x_of(&d, "c1"), x_of(&d, "c2"));
        assert_eq!(d, diagram(&e).unwrap(), "the same drawing every time");
        let mut none = e.clone();
        none.lab = None;
        assert!(diagram(&none).is_none());
    }

    #[test]
    fn configured_and_measured_words() {
        let d = json!({"rate_bps": 20000000, "shape": {"limit_packets": 64, "delay": "10ms", "jitter": "1ms", "loss": 1.5}});
        assert_eq!(
            configured(&d),
            "rate 20 Mbit/s, queue 64 packets, delay 10 ms ± 1 ms, loss 1.5 %"
        );
        assert_eq!(configured(&json!({"shape": {}})), "unshaped");
        assert_eq!(measured(None), "not measured (no witness)");
        let w = json!({"loss_probe": {"measured_pct": 9.06}, "warning": "link a-b ..."});
        assert_eq!(
            measured(Some(&w)),
            "measured: loss 9.06 % — WARNING (see the table)"
        );
    }
}
