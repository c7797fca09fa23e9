//! An arm that changes a link's path properties (delay, jitter, loss, loss_gemodel, duplicate,
//! reorder, corrupt) by name (docs/LAB.md, "A lab in a plan"): where the lab built them with
//! netem, `tc qdisc change` of that netem qdisc; where netrig's path element builds them, a new
//! configuration for the element (its `generation` bumped), SIGHUP, and a bounded wait until
//! both of its directions acknowledge that generation in the counters file. Only what the lab
//! built can change: a link without an element or netem is refused by name (an arm does not add
//! the element to a link). Put back after each run, as rate.

use crate::build::LabState;
use crate::element::{Config, Props};
use crate::model::Shape;
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
    let Some(e) = crate::lan_element::find(&state.elements, link, from) else {
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

/// Props as the arm's table names them.
pub fn describe(p: &Props) -> String {
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
    let mut shape = shape_of_words(words).map_err(|e| LabError::Spec(format!("lab set: {e}")))?;
    if reset && words.is_empty() {
        // Everything the lab built on that direction: its element's properties, rate and queue.
        if crate::lan_element::find(&state.elements, link, host).is_some() {
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
    let c = crate::arm_shape::plan(&state, link, host, &shape)
        .map_err(|e| LabError::Spec(format!("lab set: {e}")))?;
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
        done.push(apply(e, false).map_err(LabError::Other)?);
    }
    for cmd in if reset { &c.restore } else { &c.apply } {
        run(cmd)?;
        done.push(format!("{host}: {cmd}"));
    }
    if let (Some(e), true) = (&c.element, reset) {
        done.push(apply(e, true).map_err(LabError::Other)?);
    }
    Ok(done)
}

/// `lab status`: the properties in force in one direction of an element, where an arm or
/// `lab set` changed them (its configuration file's generation above 0); empty otherwise.
pub fn status_line(e: &crate::build::ElementState, c: &crate::element::Counters) -> String {
    if c.generation == 0 {
        return String::new();
    }
    let conf = e.config.counters.with_extension("conf.json");
    let now = std::fs::read(&conf)
        .ok()
        .and_then(|t| serde_json::from_slice::<Config>(&t).ok());
    let dir = e.config.ends.iter().position(|h| *h == c.from).unwrap_or(0);
    match now {
        Some(n) if n.props[dir] != e.config.props[dir] => format!(
            "    in force (generation {}, changed by an arm or lab set): {}; the lab's own: {}\n",
            c.generation,
            describe(&n.props[dir]),
            describe(&e.config.props[dir])
        ),
        Some(_) => format!(
            "    in force (generation {}): the lab's own properties\n",
            c.generation
        ),
        None => format!(
            "    generation {}: its configuration {} cannot be read\n",
            c.generation,
            conf.display()
        ),
    }
}
