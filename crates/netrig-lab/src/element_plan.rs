//! What netrig's path element builds of a direction's [`Shape`] beyond delay and random loss
//! (docs/LAB.md, "The path element"): Gilbert–Elliott loss, corruption, and a rate and queue of
//! its own with drop-tail or RED (weighted per DSCP); what the red qdisc builds instead where the
//! kernel has it; and what is refused, by name.

pub use crate::model::{red_or_bool, GeSpec, RedClass, RedSpec};
use crate::model::{Link, Shape};
use crate::pathmodel::{QueueCfg, RedCfg, Thresholds};
use crate::pathsched::{ClassCfg, SchedCfg};
use crate::steps::Kernel;
pub use crate::topology::element_classes;
use std::collections::BTreeMap;

/// A DSCP by name or value.
pub fn dscp_value(name: &str) -> Option<u8> {
    let n = name.trim().to_ascii_lowercase();
    if let Ok(v) = n.parse::<u8>() {
        return (v < 64).then_some(v);
    }
    match n.as_str() {
        "be" | "default" => return Some(0),
        "ef" => return Some(46),
        _ => {}
    }
    if let Some(c) = n.strip_prefix("cs") {
        return c.parse::<u8>().ok().filter(|c| *c < 8).map(|c| c << 3);
    }
    let a = n.strip_prefix("af")?.as_bytes();
    match a {
        [c @ b'1'..=b'4', d @ b'1'..=b'3'] => Some(((c - b'0') << 3) | ((d - b'0') << 1)),
        _ => None,
    }
}

/// Does the element serve this direction's rate from a queue of its own? Asked for with
/// `element_rate = true`; and RED where the red qdisc cannot build it: not in the kernel,
/// thresholds per DSCP or a weight of its own (tc-red derives its weight from `burst`), beside
/// netem properties (the red qdisc and netem cannot both be htb's leaf), or `element = true`.
pub fn element_queue(s: &Shape, k: Kernel) -> bool {
    s.classes.is_empty() && s.element_rate == Some(true)
        || s.red.as_ref().is_some_and(|r| {
            !k.red
                || !r.dscp.is_empty()
                || r.weight.is_some()
                || s.element == Some(true)
                || !s.netem_properties().is_empty()
        })
}

/// Is this direction built (in part) by the element?
pub fn by_element(s: &Shape, k: Kernel) -> bool {
    s.by_element(k.netem) || element_queue(s, k) || element_classes(s)
}

/// The class scheduler of a direction with [`element_classes`]: each class's guaranteed rate
/// (as htb's classes resolve them), its limit (its own, else the link's, else 1000 packets)
/// and its WRED, in one unit for all (packets, or bytes when a limit is given in bytes).
pub fn sched_cfg(label: &str, s: &Shape, rate: u64) -> Result<SchedCfg, String> {
    let plans = crate::topology::plan_classes(label, rate, s, &[]).map_err(|e| e.to_string())?;
    let bytes = s.limit_bytes.is_some() || s.classes.iter().any(|c| c.limit_bytes.is_some());
    let mut classes = Vec::new();
    for p in plans {
        let spec = s.classes.iter().find(|c| c.name == p.name);
        let clabel = format!("{label}, class {}", p.name);
        let limit = match (spec.and_then(|c| c.limit_packets), spec.and_then(|c| c.limit_bytes)) {
            (Some(n), _) if !bytes => n as u64,
            (_, Some(b)) if bytes => b,
            (None, None) if bytes => s.limit_bytes.unwrap_or(1000 * 1514),
            (None, None) => s.limit_packets.map_or(1000, u64::from),
            _ => {
                return Err(format!(
                    "classes on link {label}: their limits in one unit (limit_packets on every class, or limit_bytes on every class); class {} differs",
                    p.name
                ))
            }
        };
        let red = spec
            .and_then(|c| c.red.as_ref())
            .map(|r| red_cfg(&clabel, r, limit))
            .transpose()?;
        classes.push(ClassCfg {
            name: p.name,
            dscp: p.dscp,
            rate_bps: p.rate_bps,
            limit,
            red,
        });
    }
    Ok(SchedCfg {
        rate_bps: rate,
        bytes,
        classes,
    })
}

/// The element's class scheduler as `lab status` names it.
pub fn sched_mechanism(q: &SchedCfg) -> String {
    let unit = if q.bytes { "bytes" } else { "packets" };
    let classes: Vec<String> = q
        .classes
        .iter()
        .map(|c| {
            let red = match &c.red {
                Some(r) => format!(
                    ", WRED min {} max {} probability {} weight {}",
                    r.default.min, r.default.max, r.default.max_p, r.weight
                ),
                None => ", drop-tail".into(),
            };
            let dscp = if c.dscp.is_empty() {
                "default".to_string()
            } else {
                format!(
                    "dscp {}",
                    c.dscp.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
                )
            };
            format!(
                "{} ({dscp}): {}bit guaranteed, limit {} {unit}{red}",
                c.name, c.rate_bps, c.limit
            )
        })
        .collect();
    format!(
        "netrig element rate {}bit, weighted fair queueing over classes [{}]",
        q.rate_bps,
        classes.join("; ")
    )
}

/// The queue's limit in its unit, and whether that unit is bytes: limit_packets, limit_bytes,
/// else 50 ms at the rate in bytes (as tbf's queue here).
fn limit(s: &Shape, rate: u64) -> (u64, bool) {
    match (s.limit_packets, s.limit_bytes) {
        (Some(p), _) => (p as u64, false),
        (_, Some(b)) => (b, true),
        _ => ((rate / 8 / 20).max(3 * 1514), true),
    }
}

fn thresholds(c: &RedClass, base: Thresholds) -> Thresholds {
    Thresholds {
        min: c.min.unwrap_or(base.min),
        max: c.max.unwrap_or(base.max),
        max_p: c.probability.unwrap_or(base.max_p),
    }
}

/// The RED configuration of a direction (thresholds resolved), checked.
fn red_cfg(label: &str, r: &RedSpec, lim: u64) -> Result<RedCfg, String> {
    let base = thresholds(
        &RedClass {
            min: r.min,
            max: r.max,
            probability: r.probability,
        },
        Thresholds {
            min: (lim as f64 / 6.0).max(1.0),
            max: (lim as f64 / 2.0).max(2.0),
            max_p: 0.1,
        },
    );
    let weight = r.weight.unwrap_or(0.002);
    if !(weight > 0.0 && weight <= 1.0) {
        return Err(format!("red on link {label}: weight {weight} is not in (0, 1]"));
    }
    let check = |what: &str, t: &Thresholds| -> Result<(), String> {
        if !(t.min >= 0.0 && t.min < t.max && t.max <= lim as f64) {
            return Err(format!(
                "red on link {label}: {what}min {} and max {} must be 0 <= min < max <= the queue's limit {lim}",
                t.min, t.max
            ));
        }
        if !(t.max_p > 0.0 && t.max_p <= 1.0) {
            return Err(format!(
                "red on link {label}: {what}probability {} is not in (0, 1]",
                t.max_p
            ));
        }
        Ok(())
    };
    check("", &base)?;
    let mut dscp = BTreeMap::new();
    for (name, c) in &r.dscp {
        let v = dscp_value(name).ok_or_else(|| {
            format!("red on link {label}: dscp {name:?} is not a DSCP (be, cs0-cs7, af11-af43, ef or 0-63)")
        })?;
        let t = thresholds(c, base);
        check(&format!("dscp {name}: "), &t)?;
        dscp.insert(v, t);
    }
    Ok(RedCfg {
        weight,
        default: base,
        dscp,
    })
}

/// What the element does in this direction, from its shape (`rate`: parsed, bits/s).
pub fn props(label: &str, s: &Shape, k: Kernel, rate: Option<u64>) -> Result<crate::element::Props, String> {
    let us = |v: &Option<String>| {
        v.as_deref()
            .and_then(|d| humantime::parse_duration(d).ok())
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    };
    let queue = match (element_queue(s, k), rate) {
        (true, Some(rate)) => {
            let (lim, bytes) = limit(s, rate);
            Some(QueueCfg {
                rate_bps: rate,
                bytes,
                limit: lim,
                red: s.red.as_ref().map(|r| red_cfg(label, r, lim)).transpose()?,
            })
        }
        _ => None,
    };
    let classes = match (element_classes(s), rate) {
        (true, Some(rate)) => Some(sched_cfg(label, s, rate)?),
        _ => None,
    };
    Ok(crate::element::Props {
        delay_us: us(&s.delay),
        jitter_us: us(&s.jitter),
        loss: s.loss.unwrap_or(0.0) / 100.0,
        duplicate: s.duplicate.unwrap_or(0.0) / 100.0,
        reorder: s.reorder.unwrap_or(0.0) / 100.0,
        gemodel: s.loss_gemodel.as_ref().map(GeSpec::model),
        corrupt: s.corrupt.unwrap_or(0.0) / 100.0,
        queue,
        classes,
    })
}

/// What this direction asks that cannot be built, by name (`element_ok`: a point-to-point
/// link, where the element can be built).
pub fn refusals(label: &str, s: &Shape, k: Kernel, element_ok: bool) -> Vec<String> {
    let mut r = Vec::new();
    let rate = s.rate.as_deref().and_then(|v| crate::model::parse_rate(v).ok());
    if s.loss.is_some() && s.loss_gemodel.is_some() {
        r.push(format!(
            "loss and loss_gemodel on link {label}: one loss model, not both"
        ));
    }
    if let Some(g) = &s.loss_gemodel {
        for (name, v) in [
            ("p", Some(g.p)),
            ("r", Some(g.r)),
            ("1-h", g.one_minus_h),
            ("1-k", g.one_minus_k),
        ] {
            if let Some(v) = v {
                if !(0.0..=100.0).contains(&v) {
                    r.push(format!(
                        "loss_gemodel {name} on link {label}: a percentage, 0 to 100 (got {v})"
                    ));
                }
            }
        }
    }
    for (what, asked) in [
        ("red", s.red.is_some()),
        ("element_rate", s.element_rate == Some(true)),
    ] {
        if !asked {
            continue;
        }
        if rate.is_none() {
            r.push(format!(
                "{what} on link {label}: needs a rate (the queue is served at it)"
            ));
        }
        if element_queue(s, k) && !element_ok {
            r.push(format!(
                "{what} on link {label}: needs the red qdisc (not in this kernel, or not with these options); netrig's path element is built on point-to-point links only, not LANs"
            ));
        }
        if element_queue(s, k) && s.shaper.is_some() {
            r.push(format!(
                "shaper on link {label}: the rate is served by netrig's path element ({what}), not by htb or tbf"
            ));
        }
        if element_queue(s, k) && s.element == Some(false) {
            r.push(format!(
                "{what} on link {label}: needs netrig's path element, which element = false keeps out"
            ));
        }
    }
    if element_classes(s) {
        r.extend(class_refusals(label, s, rate, element_ok));
    }
    if let (Some(red), Some(rate)) = (&s.red, rate) {
        let (lim, _) = limit(s, rate);
        if s.limit_packets.is_none() && s.limit_bytes.is_none() {
            r.push(format!(
                "red on link {label}: needs the queue's limit (limit_packets or limit_bytes), in whose unit min and max count"
            ));
        } else if let Err(e) = red_cfg(label, red, lim) {
            r.push(e);
        }
    }
    r
}

/// What a direction whose classes the element serves asks that it cannot build, by name.
fn class_refusals(label: &str, s: &Shape, rate: Option<u64>, element_ok: bool) -> Vec<String> {
    let mut r = Vec::new();
    let why =
        "the classes are served by netrig's path element (a class asks for red, or element_rate = true)";
    let Some(rate) = rate else {
        return vec![format!(
            "classes on link {label}: need the direction's rate ({why})"
        )];
    };
    if !element_ok {
        r.push(format!(
            "classes on link {label}: {why}, which is built on point-to-point links only, not LANs"
        ));
    }
    if s.element == Some(false) {
        r.push(format!(
            "classes on link {label}: {why}, which element = false keeps out"
        ));
    }
    if s.shaper.is_some() {
        r.push(format!("shaper on link {label}: {why}, not by htb or tbf"));
    }
    for c in &s.classes {
        if c.prio.is_some() {
            r.push(format!(
                "prio of class {} on link {label}: {why}, which shares the link by the classes' rates (weighted fair queueing), without priorities",
                c.name
            ));
        }
        if c.ceil
            .as_deref()
            .is_some_and(|v| crate::model::parse_rate(v).ok() != Some(rate) && v.trim() != "100%")
        {
            r.push(format!(
                "ceil of class {} on link {label}: {why}, where every class may borrow the whole link",
                c.name
            ));
        }
    }
    if r.is_empty() {
        if let Err(e) = sched_cfg(label, s, rate) {
            r.push(e);
        }
    }
    r
}

/// What a link asks of the element that its offloads forbid: `corrupt` needs
/// `offloads = { tso = false, gso = false }`, as a super-frame's segments get their checksums
/// after the element (corrupting one would corrupt many, or none that a receiver checks).
pub fn link_refusals(name: &str, l: &Link, k: Kernel) -> Vec<String> {
    let mut r = Vec::new();
    let off = |o: &str| l.offloads.get(o) == Some(&false);
    for (host, s) in &l.shape {
        let to = if *host == l.ends[0] {
            &l.ends[1]
        } else {
            &l.ends[0]
        };
        if s.corrupt.is_some() && by_element(s, k) && !(off("tso") && off("gso")) {
            r.push(format!(
                "corrupt on link {name} ({host} → {to}): netrig's path element corrupts single frames only: needs offloads = {{ tso = false, gso = false }} on the link"
            ));
        }
    }
    r
}

/// The red qdisc under htb's class 1:1 (the kernel has it; no per-DSCP thresholds, no weight
/// of its own): limit, min and max in bytes (packets × MTU + 14), burst as tc-red advises.
pub fn red_qdisc(dev: &str, s: &Shape, rate: u64, mtu: u32) -> Option<(Vec<String>, String)> {
    let red = s.red.as_ref()?;
    let (lim, bytes) = limit(s, rate);
    let cfg = red_cfg("", red, lim).ok()?;
    let avpkt = mtu as u64 + 14;
    let b = |v: f64| {
        if bytes {
            v as u64
        } else {
            (v * avpkt as f64) as u64
        }
    };
    let (l, mn, mx) = (b(lim as f64), b(cfg.default.min), b(cfg.default.max));
    let burst = (2 * mn + mx) / (3 * avpkt) + 1;
    let args: Vec<String> = [
        "tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "red", "limit",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        l.to_string(),
        "min".into(),
        mn.to_string(),
        "max".into(),
        mx.to_string(),
        "avpkt".into(),
        avpkt.to_string(),
        "burst".into(),
        burst.to_string(),
        "probability".into(),
        cfg.default.max_p.to_string(),
        "bandwidth".into(),
        format!("{rate}bit"),
    ])
    .collect();
    Some((
        args,
        format!(
            "red limit {l} min {mn} max {mx} probability {}",
            cfg.default.max_p
        ),
    ))
}

/// The element's queue as `lab status` names it.
pub fn queue_mechanism(q: &QueueCfg) -> String {
    let unit = if q.bytes { "bytes" } else { "packets" };
    let red = match &q.red {
        Some(r) => {
            let mut s = format!(
                ", RED min {} max {} probability {} weight {}",
                r.default.min, r.default.max, r.default.max_p, r.weight
            );
            for (d, t) in &r.dscp {
                s.push_str(&format!(
                    "; dscp {d}: min {} max {} probability {}",
                    t.min, t.max, t.max_p
                ));
            }
            s
        }
        None => ", drop-tail".into(),
    };
    format!(
        "netrig element rate {}bit (its own queue, limit {} {unit}{red})",
        q.rate_bps, q.limit
    )
}

/// `lab status`'s lines for the element's loss bursts, corruption and queue (empty when the
/// direction has none of them).
pub fn status_extra(c: &crate::element::Counters) -> String {
    let mut o = String::new();
    if c.loss_bursts > 0 {
        o.push_str(&format!(
            "    loss bursts {} (mean length {:.2} frames)\n",
            c.loss_bursts,
            c.dropped as f64 / c.loss_bursts as f64
        ));
    }
    if c.corrupted + c.corrupt_skipped > 0 {
        o.push_str(&format!(
            "    corrupted {} (UDP {}), drawn but not corruptible (not IP, or a GSO super-frame) {}\n",
            c.corrupted, c.udp.corrupted, c.corrupt_skipped
        ));
    }
    for k in &c.classes {
        o.push_str(&format!(
            "    class {} ({}): enqueued {}, WRED early drops {}, forced drops {}, tail drops {}; sent {} packets, {} bytes; its backlog found by arriving frames: mean {:.1} packets (of {})\n",
            k.class,
            if k.dscp.is_empty() { "default".to_string() } else { format!("dscp {}", k.dscp.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")) },
            k.enqueued, k.early_drops, k.forced_drops, k.tail_drops, k.sent_packets, k.sent_bytes, k.found_mean_packets, k.limit
        ));
    }
    if let Some(q) = &c.queue {
        o.push_str(&format!(
            "    its queue: enqueued {}, early drops (RED) {}, forced drops (RED, average at max) {}, tail drops {} (UDP dropped by the queue {}); backlog found by arriving frames: mean {:.0} bytes ({:.1} packets), peak {} bytes\n",
            q.enqueued, q.early_drops, q.forced_drops, q.tail_drops, c.udp.queue_dropped, q.found_mean_bytes, q.found_mean_packets, q.found_peak_bytes
        ));
    }
    o
}

/// Props as the arm's table names them.
pub fn describe(p: &crate::element::Props) -> String {
    let mut v = vec![format!("delay {} µs", p.delay_us)];
    if p.jitter_us > 0 {
        v.push(format!("jitter {} µs", p.jitter_us));
    }
    match &p.gemodel {
        Some(g) => v.push(format!(
            "loss gemodel p {}% r {}% 1-h {}% 1-k {}%",
            g.p * 100.0,
            g.r * 100.0,
            g.bad_loss * 100.0,
            g.good_loss * 100.0
        )),
        None => v.push(format!("loss {}%", p.loss * 100.0)),
    }
    for (n, x) in [
        ("duplicate", p.duplicate),
        ("reorder", p.reorder),
        ("corrupt", p.corrupt),
    ] {
        if x > 0.0 {
            v.push(format!("{n} {}%", x * 100.0));
        }
    }
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_names_read_as_their_values() {
        assert_eq!(dscp_value("cs1"), Some(8));
        assert_eq!(dscp_value("EF"), Some(46));
        assert_eq!(dscp_value("af11"), Some(10));
        assert_eq!(dscp_value("af43"), Some(38));
        assert_eq!(dscp_value("be"), Some(0));
        assert_eq!(dscp_value("63"), Some(63));
        assert_eq!(dscp_value("64"), None);
        assert_eq!(dscp_value("af44"), None);
        assert_eq!(dscp_value("cs8"), None);
    }

    use crate::plan::{Plan, Step};

    const TWO: &str = "[hosts.a]\n[hosts.b]\n[[links]]\nends = ['a', 'b']\n";

    fn p(extra: &str, shape: &str, k: Kernel) -> Result<Plan, crate::LabError> {
        let text = format!("{TWO}{extra}[links.shape.a]\n{shape}\n");
        crate::plan::plan(
            &crate::model::parse(&text)?,
            "abc123",
            k,
            std::path::Path::new("."),
        )
    }

    fn argvs(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .filter_map(|s| match s {
                Step::Cmd { argv, .. } => Some(argv.join(" ")),
                _ => None,
            })
            .collect()
    }

    fn err(r: Result<Plan, crate::LabError>) -> String {
        r.unwrap_err().to_string()
    }

    const ETHTOOL: Kernel = Kernel {
        netem: false,
        red: false,
        ethtool: true,
        conntrack_max: false,
    };

    #[test]
    fn gilbert_elliott_loss_is_built_by_the_element_or_by_netem() {
        let shape = "delay = '1ms'\nloss_gemodel = { p = 1.0, r = 25.0 }";
        let el = p("", shape, Kernel::default()).unwrap();
        let g = el.elements[0].config.props[0].gemodel.unwrap();
        assert_eq!((g.p, g.r, g.bad_loss, g.good_loss), (0.01, 0.25, 1.0, 0.0));
        assert_eq!(el.directions[0].mechanism, "netrig element (delay, loss_gemodel)");
        let nm = p(
            "",
            "loss_gemodel = { p = 1.0, r = 25.0, \"1-h\" = 80.0, \"1-k\" = 0.5 }",
            Kernel {
                netem: true,
                ..Kernel::default()
            },
        )
        .unwrap();
        assert!(
            argvs(&nm)
                .iter()
                .any(|c| c.ends_with("netem loss gemodel 1% 25% 80% 0.5%")),
            "{:#?}",
            argvs(&nm)
        );
        let both = err(p(
            "",
            "loss = 1.0\nloss_gemodel = { p = 1.0, r = 25.0 }",
            Kernel::default(),
        ));
        assert!(
            both.contains("loss and loss_gemodel on link a-b (a → b): one loss model"),
            "{both}"
        );
        let bad = err(p("", "loss_gemodel = { p = 1.0, r = 250.0 }", Kernel::default()));
        assert!(bad.contains("loss_gemodel r on link a-b"), "{bad}");
        let misspelt = err(p(
            "",
            "loss_gemodel = { p = 1.0, r = 25.0, h = 1.0 }",
            Kernel::default(),
        ));
        assert!(misspelt.contains("unknown field `h`"), "{misspelt}");
    }

    #[test]
    fn corruption_is_built_by_the_element_only_without_segmentation_offloads() {
        let e = err(p("", "corrupt = 1.0", ETHTOOL));
        assert!(
            e.contains("corrupt on link a-b (a → b): netrig's path element corrupts single frames only: needs offloads = { tso = false, gso = false } on the link"),
            "{e}"
        );
        let ok = p(
            "offloads = { tso = false, gso = false }\n",
            "corrupt = 1.0",
            ETHTOOL,
        )
        .unwrap();
        assert_eq!(ok.elements[0].config.props[0].corrupt, 0.01);
        assert_eq!(ok.directions[0].mechanism, "netrig element (corrupt)");
    }

    #[test]
    fn red_without_the_red_qdisc_is_the_element_s_queue_at_its_rate_with_wred_per_dscp() {
        let shape = "rate = '100M'\nlimit_packets = 100\nred = { min = 20, max = 60, probability = 0.2, dscp = { cs1 = { min = 5, max = 15 } } }";
        let el = p("", shape, Kernel::default()).unwrap();
        let q = el.elements[0].config.props[0].queue.clone().unwrap();
        assert_eq!((q.rate_bps, q.bytes, q.limit), (100_000_000, false, 100));
        let red = q.red.unwrap();
        assert_eq!(
            red.default,
            Thresholds {
                min: 20.0,
                max: 60.0,
                max_p: 0.2
            }
        );
        assert_eq!(red.weight, 0.002);
        assert_eq!(
            red.dscp[&8],
            Thresholds {
                min: 5.0,
                max: 15.0,
                max_p: 0.2
            }
        );
        // No htb, tbf or fifo in front of the element: its queue is the bottleneck's.
        let c = argvs(&el);
        assert!(
            !c.iter().any(|c| c.contains("htb") || c.contains("fifo")),
            "{c:#?}"
        );
        assert_eq!(
            el.directions[0].mechanism,
            "netrig element rate 100000000bit (its own queue, limit 100 packets, RED min 20 max 60 probability 0.2 weight 0.002; dscp 8: min 5 max 15 probability 0.2)"
        );
        // `red = true`: thresholds from the limit; drop-tail with element_rate.
        let t = p(
            "",
            "rate = '10M'\nlimit_packets = 60\nred = true",
            Kernel::default(),
        )
        .unwrap();
        let d = t.elements[0].config.props[0]
            .queue
            .clone()
            .unwrap()
            .red
            .unwrap()
            .default;
        assert_eq!((d.min, d.max, d.max_p), (10.0, 30.0, 0.1));
        let dt = p(
            "",
            "rate = '10M'\nlimit_bytes = 30000\nelement_rate = true",
            Kernel::default(),
        )
        .unwrap();
        let q = dt.elements[0].config.props[0].queue.clone().unwrap();
        assert_eq!((q.bytes, q.limit, q.red), (true, 30000, None));
    }

    #[test]
    fn classes_with_wred_are_the_element_s_class_scheduler_and_what_it_cannot_do_is_refused() {
        let shape = "rate = '155M'\ndelay = '58ms'\nlimit_packets = 1000\nclasses = [\n  { name = 'best-effort' },\n  { name = 'scavenger', dscp = 'CS1', rate = '1%', limit_packets = 64, red = { min = 22, max = 40, probability = 0.1, weight = 0.002 } },\n  { name = 'q256', dscp = 'CS2', rate = '1%', limit_packets = 256 },\n]";
        let el = p("", shape, Kernel::default()).unwrap();
        let props = &el.elements[0].config.props[0];
        assert!(props.queue.is_none());
        let s = props.classes.clone().expect("the element's classes");
        assert_eq!((s.rate_bps, s.bytes), (155_000_000, false));
        let names: Vec<(&str, &[u8], u64, u64, bool)> = s
            .classes
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.dscp.as_slice(),
                    c.rate_bps,
                    c.limit,
                    c.red.is_some(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("best-effort", &[][..], 151_900_000, 1000, false),
                ("scavenger", &[8][..], 1_550_000, 64, true),
                ("q256", &[16][..], 1_550_000, 256, false),
            ]
        );
        let red = s.classes[1].red.clone().unwrap();
        assert_eq!(
            (red.default.min, red.default.max, red.default.max_p, red.weight),
            (22.0, 40.0, 0.1, 0.002)
        );
        assert_eq!(props.delay_us, 58_000);
        // No htb, u32 filters or fifo: the element serves the rate.
        let c = argvs(&el);
        assert!(
            !c.iter()
                .any(|c| c.contains("htb") || c.contains("fifo") || c.contains("u32")),
            "{c:#?}"
        );
        assert!(
            el.directions[0].mechanism.starts_with("netrig element rate 155000000bit, weighted fair queueing over classes [best-effort (default): 151900000bit guaranteed, limit 1000 packets, drop-tail; scavenger (dscp 8): 1550000bit guaranteed, limit 64 packets, WRED min 22 max 40 probability 0.1 weight 0.002; q256"),
            "{}",
            el.directions[0].mechanism
        );
        // Without red, classes stay htb's; element_rate = true moves them to the element.
        let htb = p(
            "",
            "rate = '10M'\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M' }]",
            Kernel::default(),
        )
        .unwrap();
        assert!(htb.elements.is_empty() && argvs(&htb).iter().any(|c| c.contains("htb")));
        let el = p(
            "",
            "rate = '10M'\nelement_rate = true\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M' }]",
            Kernel::default(),
        )
        .unwrap();
        assert_eq!(
            el.elements[0].config.props[0]
                .classes
                .as_ref()
                .unwrap()
                .classes
                .len(),
            2
        );
        for (shape, want) in [
            (
                "rate = '10M'\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M', prio = 0, red = true }]",
                "prio of class a on link a-b (a → b): the classes are served by netrig's path element",
            ),
            (
                "rate = '10M'\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M', ceil = '2M', red = true }]",
                "ceil of class a on link a-b (a → b)",
            ),
            (
                "rate = '10M'\nlimit_packets = 100\nred = true\nelement_rate = true\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M' }]",
                "red on link a-b (a → b): with classes, RED is each class's own",
            ),
            (
                "classes = [{ name = 'a', dscp = 'CS1', rate = '1M', red = true }]",
                "classes on link a-b (a → b): need the direction's rate",
            ),
            (
                "rate = '10M'\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M', limit_packets = 10, red = { min = 5, max = 20 } }]",
                "min 5 and max 20 must be 0 <= min < max <= the queue's limit 10",
            ),
            (
                "rate = '10M'\nclasses = [{ name = 'a', dscp = 'CS1', rate = '1M', limit_bytes = 10000, red = true }, { name = 'b', limit_packets = 10 }]",
                "their limits in one unit",
            ),
        ] {
            let e = err(p("", shape, Kernel::default()));
            assert!(e.contains(want), "{shape}: {e}");
        }
    }

    #[test]
    fn red_is_the_red_qdisc_where_the_kernel_has_it_and_refused_by_name_where_nothing_builds_it() {
        let k = Kernel {
            red: true,
            ..Kernel::default()
        };
        let r = p("", "rate = '100M'\nlimit_packets = 100\nred = true", k).unwrap();
        assert!(r.elements.is_empty());
        assert!(
            argvs(&r).iter().any(|c| c.ends_with(
                "parent 1:1 handle 10: red limit 151400 min 25233 max 75700 avpkt 1514 burst 28 probability 0.1 bandwidth 100000000bit"
            )),
            "{:#?}",
            argvs(&r)
        );
        for (shape, want) in [
            (
                "red = true\nlimit_packets = 10",
                "red on link a-b (a → b): needs a rate",
            ),
            (
                "rate = '10M'\nred = true",
                "red on link a-b (a → b): needs the queue's limit",
            ),
            (
                "rate = '10M'\nlimit_packets = 10\nred = { min = 5, max = 20 }",
                "min 5 and max 20 must be 0 <= min < max <= the queue's limit 10",
            ),
            (
                "rate = '10M'\nlimit_packets = 10\nred = { dscp = { af44 = {} } }",
                "dscp \"af44\" is not a DSCP",
            ),
            (
                "rate = '10M'\nlimit_packets = 10\nred = { mn = 1 }",
                "unknown field `mn`",
            ),
            (
                "rate = '10M'\nlimit_packets = 10\nred = true\nshaper = 'tbf'",
                "shaper on link a-b (a → b): the rate is served by netrig's path element (red)",
            ),
        ] {
            let e = err(p("", shape, Kernel::default()));
            assert!(e.contains(want), "{shape}: {e}");
        }
        // On a LAN member the element serves it (crate::lan_element); on the host holding the
        // bridge (no port to put the element in) it is refused by name.
        let lan = "[hosts.a]\n[hosts.b]\n[[lans]]\nname = 'sw'\nhosts = ['a', 'b']\n[lans.shape.a]\nrate = '10M'\nlimit_packets = 10\nred = true\n";
        let plan = |t: &str| {
            crate::plan::plan(
                &crate::model::parse(t).unwrap(),
                "abc123",
                Kernel::default(),
                std::path::Path::new("."),
            )
        };
        let ok = plan(lan).unwrap();
        assert_eq!(ok.elements[0].config.link, "sw:a");
        assert!(ok.elements[0].config.props[0].queue.is_some());
        let e = plan(&lan.replace("hosts = ['a', 'b']\n", "hosts = ['a', 'b']\nswitch = 'a'\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("on LAN sw (a → LAN)"), "{e}");
        assert!(e.contains("a holds the bridge itself"), "{e}");
    }

    #[test]
    fn gemodel_defaults_are_a_simple_gilbert_model() {
        let g = GeSpec {
            p: 1.0,
            r: 25.0,
            ..Default::default()
        }
        .model();
        assert_eq!((g.p, g.r, g.bad_loss, g.good_loss), (0.01, 0.25, 1.0, 0.0));
    }
}
