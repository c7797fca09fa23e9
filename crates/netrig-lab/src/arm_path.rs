//! An arm that changes a link's path properties (delay, jitter, loss, loss_gemodel, duplicate,
//! reorder, corrupt) by name (docs/LAB.md, "A lab in a plan"): where the lab built them with
//! netem, `tc qdisc change` of that netem qdisc; where netrig's path element builds them, a new
//! configuration for the element (its `generation` bumped), SIGHUP, and a bounded wait until
//! both of its directions acknowledge that generation in the counters file. Only what the lab
//! built can change: a link without an element or netem is refused by name (an arm does not add
//! the element to a link). Put back after each run, as rate.

use crate::build::{ElementState, LabState};
use crate::element::{Config, Props};
pub use crate::element_plan::describe;
use crate::model::Shape;
pub use crate::plan::netem_params;
use crate::steps::Direction;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long netrig waits for an element to acknowledge a change (it reads SIGHUP within 100 ms
/// and each direction takes the change at its next wake-up, at most 100 ms later).
pub const ACK_WAIT: Duration = Duration::from_secs(3);

/// One direction of an element changed for an arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementSet {
    pub link: String,
    /// 0: what the link's first end sends; 1: what the second sends.
    pub dir: usize,
    /// The element's configuration file (re-read on SIGHUP) and its counters file.
    pub conf: PathBuf,
    pub counters: PathBuf,
    pub pid: Option<u32>,
    /// What the arm sets, and the lab's own (put back after each run).
    pub props: Props,
    pub lab_props: Props,
}

/// The element an arm or `lab set` means by `link` and the sending host `from`: a link's (named
/// as the link), or a LAN member's (`"<lan>".HOST`: what HOST sends into the segment; the
/// switch's direction to HOST is not named by a sending host, so arms do not reach it).
pub fn find<'a>(elements: &'a [ElementState], link: &str, from: &str) -> Option<&'a ElementState> {
    let lan = crate::lan_element::element_link(link, from);
    elements
        .iter()
        .find(|e| e.link == link)
        .or_else(|| elements.iter().find(|e| e.link == lan))
}

/// The lab's shape of a direction with the arm's path properties over it (loss and
/// loss_gemodel are one loss model: the arm's replaces the lab's).
pub fn merge(lab: &Shape, arm: &Shape) -> Shape {
    let mut m = lab.clone();
    macro_rules! over {
        ($($f:ident),*) => {$( if arm.$f.is_some() { m.$f = arm.$f.clone(); } )*};
    }
    over!(delay, jitter, duplicate, reorder, corrupt);
    if arm.loss.is_some() {
        m.loss = arm.loss;
        m.loss_gemodel = None;
    }
    if arm.loss_gemodel.is_some() {
        m.loss_gemodel = arm.loss_gemodel.clone();
        m.loss = None;
    }
    m
}

fn check_merged(label: &str, m: &Shape) -> Result<(), String> {
    for (name, v) in m.percentages() {
        if let Some(v) = v {
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{name} on {label}: {v} is not a percentage (0 to 100)"));
            }
        }
    }
    for (name, v) in [("delay", &m.delay), ("jitter", &m.jitter)] {
        if let Some(v) = v {
            let d = humantime::parse_duration(v).map_err(|e| format!("{name} on {label}: {v:?}: {e}"))?;
            if d > Duration::from_secs(10) {
                return Err(format!("{name} on {label}: {v} is over 10 s"));
            }
        }
    }
    let delay = m
        .delay
        .as_deref()
        .and_then(|d| humantime::parse_duration(d).ok())
        .unwrap_or_default();
    if m.reorder.is_some_and(|r| r > 0.0) && delay.is_zero() {
        return Err(format!(
            "reorder on {label}: needs a delay (a reordered frame is one that skips it)"
        ));
    }
    Ok(())
}

/// The element change an arm's path properties ask of the direction `from` sends on `link`, or
/// `None` when no element was built on that link.
pub fn element_set(
    state: &LabState,
    link: &str,
    from: &str,
    s: &Shape,
) -> Result<Option<ElementSet>, String> {
    let Some(e) = find(&state.elements, link, from) else {
        return Ok(None);
    };
    let cfg: &Config = &e.config;
    let dir = cfg.ends.iter().position(|h| h == from).ok_or_else(|| {
        format!("link {link}: {from:?} is not on it (a direction is named by its sending host)")
    })?;
    let label = format!("link {link} ({} → {})", cfg.ends[dir], cfg.ends[1 - dir]);
    let lab_props = cfg.props[dir].clone();
    if s.corrupt.is_some_and(|c| c > 0.0) && lab_props.corrupt == 0.0 {
        return Err(format!(
            "corrupt on {label}: the element corrupts single frames only, with offloads off, which lab up checks for a direction built with corrupt; give it one in [lab] (corrupt = 0.0 is none)"
        ));
    }
    // The arm's properties in the element's units, over the lab's own.
    let lab_shape = Shape {
        delay: Some(format!("{}us", lab_props.delay_us)),
        jitter: Some(format!("{}us", lab_props.jitter_us)),
        ..Shape::default()
    };
    let m = merge(&lab_shape, s);
    check_merged(&label, &m)?;
    let us = |v: &Option<String>| {
        v.as_deref()
            .and_then(|d| humantime::parse_duration(d).ok())
            .map_or(0, |d| d.as_micros() as u64)
    };
    let mut props = lab_props.clone();
    props.delay_us = us(&m.delay);
    props.jitter_us = us(&m.jitter);
    if let Some(l) = s.loss {
        props.loss = l / 100.0;
        props.gemodel = None;
    }
    if let Some(g) = &s.loss_gemodel {
        props.gemodel = Some(g.model());
        props.loss = 0.0;
    }
    for (given, field) in [
        (s.duplicate, &mut props.duplicate),
        (s.reorder, &mut props.reorder),
        (s.corrupt, &mut props.corrupt),
    ] {
        if let Some(v) = given {
            *field = v / 100.0;
        }
    }
    if props.reorder > 0.0 && props.delay_us == 0 {
        return Err(format!(
            "reorder on {label}: needs a delay (a reordered frame is one that skips it)"
        ));
    }
    Ok(Some(ElementSet {
        link: link.to_string(),
        dir,
        conf: cfg.counters.with_extension("conf.json"),
        counters: cfg.counters.clone(),
        pid: e.pid,
        props,
        lab_props,
    }))
}

/// netem's arguments for a shape (as the lab builds them, plan.rs): `limit`, delay [jitter],
/// the loss model, duplicate, reorder, corrupt.
pub fn netem_args(s: &Shape) -> Vec<String> {
    netem_params(s, s.limit_packets)
}

/// `tc qdisc change` of the netem qdisc the lab built on `d` with the arm's properties over the
/// lab's, and the command that puts the lab's back.
pub fn netem_change(d: &Direction, s: &Shape) -> Result<(String, String), String> {
    let label = format!("link {} ({} → {})", d.link, d.from, d.to);
    if !d.shape.classes.is_empty() {
        return Err(format!(
            "{} on {label}: netem sits under each DSCP class there; an arm does not change it (not built)",
            s.netem_properties().join(", ")
        ));
    }
    let m = merge(&d.shape, s);
    check_merged(&label, &m)?;
    let at = if d.rate_bps.is_some() {
        "parent 1:1 handle 10:"
    } else {
        "root handle 1:"
    };
    let cmd = |sh: &Shape| format!("tc qdisc change dev {} {at} {}", d.dev, netem_args(sh).join(" "));
    Ok((cmd(&m), cmd(&d.shape)))
}

/// Sets (or, `restore`, puts back) one direction of an element: writes its configuration with
/// the next generation, sends SIGHUP and waits (at most [`ACK_WAIT`]) until both directions'
/// counters show that generation. Returns what is in force, as words.
pub fn apply(e: &ElementSet, restore: bool) -> Result<String, String> {
    let what = format!("the path element of link {}", e.link);
    let text = std::fs::read(&e.conf).map_err(|err| format!("{what}: {}: {err}", e.conf.display()))?;
    let mut cfg: Config =
        serde_json::from_slice(&text).map_err(|err| format!("{what}: {}: {err}", e.conf.display()))?;
    let props = if restore { &e.lab_props } else { &e.props };
    cfg.props[e.dir] = props.clone();
    cfg.generation += 1;
    let tmp = e.conf.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&cfg).expect("serializable"))
        .and_then(|_| std::fs::rename(&tmp, &e.conf))
        .map_err(|err| format!("{what}: {}: {err}", e.conf.display()))?;
    let pid = e.pid.ok_or_else(|| format!("{what}: not running (no pid)"))?;
    // Only the element itself (its command line names its configuration): never a process that
    // took a dead element's pid.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let conf_arg = e.conf.as_os_str().as_encoded_bytes();
    if !cmdline.split(|b| *b == 0).any(|a| a == conf_arg) {
        return Err(format!(
            "{what} ({pid}) is not running (no process {pid} with {} on its command line)",
            e.conf.display()
        ));
    }
    // SAFETY: a signal to the element this lab started (its pid from the lab's state).
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) } != 0 {
        return Err(format!(
            "{what} ({pid}): SIGHUP: {}",
            std::io::Error::last_os_error()
        ));
    }
    let deadline = Instant::now() + ACK_WAIT;
    loop {
        let c = crate::element::read_counters(&e.counters).unwrap_or_default();
        if c.len() == 2 && c.iter().all(|d| d.generation >= cfg.generation) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what} ({pid}) did not acknowledge generation {} within {} s (its counters show {:?})",
                cfg.generation,
                ACK_WAIT.as_secs(),
                c.iter().map(|d| d.generation).collect::<Vec<_>>()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(format!(
        "{} → {} on {}: {} (generation {}{})",
        cfg.ends[e.dir],
        cfg.ends[1 - e.dir],
        e.link,
        describe(props),
        cfg.generation,
        if restore { ", the lab's own" } else { "" }
    ))
}

/// `key=value` words as a direction's shape: `delay=20ms`, `loss=5`, `rate=20M`,
/// `limit_packets=100` (what an arm's `shape` takes, but loss_gemodel, a table).
pub fn shape_of_words(words: &[String]) -> Result<Shape, String> {
    let mut t = toml::Table::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("{w:?}: not key=value (e.g. delay=20ms, loss=5, rate=20M)"))?;
        let value = match k {
            "loss" | "duplicate" | "reorder" | "corrupt" => toml::Value::Float(
                v.parse::<f64>()
                    .map_err(|_| format!("{k}={v}: a percentage (a number)"))?,
            ),
            "limit_packets" | "limit_bytes" => toml::Value::Integer(
                v.parse::<i64>()
                    .map_err(|_| format!("{k}={v}: a whole number"))?,
            ),
            "delay" | "jitter" | "rate" => toml::Value::String(v.to_string()),
            _ => {
                return Err(format!(
                    "{k}: lab set changes delay, jitter, loss, duplicate, reorder, corrupt, rate, limit_packets and limit_bytes"
                ))
            }
        };
        t.insert(k.to_string(), value);
    }
    toml::Value::Table(t)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().to_string())
}
