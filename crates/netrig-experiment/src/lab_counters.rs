//! A lab's path elements in each run's result (docs/LAB.md): each element's counter file
//! (`netrig_lab::element::read_counters`, written every 100 ms) read before and after a run, the
//! difference put into the run's result with the files' write times as its window.

use netrig_report::path_element::{PathElementCounts, PathElementUdp};
use std::io::Read;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest wait after a run for every element to write its counters once more (it writes every
/// 100 ms; a stopped element is given up on and its run left without its counts).
pub const AFTER_WAIT: Duration = Duration::from_millis(600);

/// One element's counters as read, with the file's write time.
#[derive(Debug, Clone)]
pub struct Read1 {
    pub link: String,
    pub at_unix_s: f64,
    pub counters: Vec<netrig_lab::element::Counters>,
}

fn unix_s(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Reads one counters file and its write time from the same open file (the element replaces the
/// file by rename, so the time is the content's). Bounded: at most 1 MiB.
fn read_one(path: &std::path::Path) -> Option<(f64, Vec<netrig_lab::element::Counters>)> {
    let f = std::fs::File::open(path).ok()?;
    let at = unix_s(f.metadata().ok()?.modified().ok()?);
    let mut v = Vec::new();
    f.take(1 << 20).read_to_end(&mut v).ok()?;
    Some((at, serde_json::from_slice(&v).ok()?))
}

/// Every element's counters now (an element whose file cannot be read is left out).
pub fn before(state: &netrig_lab::LabState) -> Vec<Read1> {
    state
        .elements
        .iter()
        .filter_map(|e| {
            let (at, counters) = read_one(&e.config.counters)?;
            Some(Read1 {
                link: e.link.clone(),
                at_unix_s: at,
                counters,
            })
        })
        .collect()
}

/// After a run that ended at `ended`: each element's counters once written after it (waiting up
/// to [`AFTER_WAIT`]), minus `before`, per direction.
pub fn after(state: &netrig_lab::LabState, before: &[Read1], ended: SystemTime) -> Vec<PathElementCounts> {
    let ended = unix_s(ended);
    let deadline = std::time::Instant::now() + AFTER_WAIT;
    let mut out = Vec::new();
    for b in before {
        let Some(e) = state.elements.iter().find(|e| e.link == b.link) else {
            continue;
        };
        let a = loop {
            match read_one(&e.config.counters) {
                Some((at, c)) if at >= ended => break Some((at, c)),
                _ if std::time::Instant::now() >= deadline => break None,
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let Some((at, counters)) = a else { continue };
        out.extend(delta(&b.link, b.at_unix_s, &b.counters, at, &counters));
    }
    out
}

/// The difference of two readings of one element, per direction (matched by sender).
pub fn delta(
    link: &str,
    t0: f64,
    c0: &[netrig_lab::element::Counters],
    t1: f64,
    c1: &[netrig_lab::element::Counters],
) -> Vec<PathElementCounts> {
    c1.iter()
        .filter_map(|a| {
            let b = c0.iter().find(|b| b.from == a.from && b.to == a.to)?;
            let d = |x: u64, y: u64| x.saturating_sub(y);
            Some(PathElementCounts {
                link: link.to_string(),
                from: a.from.clone(),
                to: a.to.clone(),
                window_start_unix_s: t0,
                window_end_unix_s: t1,
                received: d(a.received, b.received),
                forwarded: d(a.forwarded, b.forwarded),
                dropped: d(a.dropped, b.dropped),
                delayed: d(a.delayed, b.delayed),
                reordered: d(a.reordered, b.reordered),
                duplicated: d(a.duplicated, b.duplicated),
                send_errors: d(a.send_errors, b.send_errors),
                overflow: d(a.overflow, b.overflow),
                rx_drops: d(a.rx_drops, b.rx_drops),
                udp: PathElementUdp {
                    received: d(a.udp.received, b.udp.received),
                    dropped: d(a.udp.dropped, b.udp.dropped),
                    reordered: d(a.udp.reordered, b.udp.reordered),
                    duplicated: d(a.udp.duplicated, b.udp.duplicated),
                },
                tcp_acks: d(a.tcp_acks, b.tcp_acks),
                tcp_sack_acks: d(a.tcp_sack_acks, b.tcp_sack_acks),
            })
        })
        .collect()
}

/// Every arm's place with its `shape` checked against the lab as built (unchanged without a lab).
pub fn with_shapes(
    mut places: Vec<Option<crate::document::LabPlace>>,
    lab: Option<&netrig_lab::LabState>,
    arms: &[crate::plan::Arm],
) -> Result<Vec<Option<crate::document::LabPlace>>, crate::plan::PlanError> {
    if let Some(state) = lab {
        for (p, a) in places.iter_mut().zip(arms) {
            if let Some(p) = p {
                p.shape = arm_shape(state, a)?;
            }
        }
    }
    Ok(places)
}

/// A run's result with the path elements' counts over it (`before`: read just before it).
pub fn with_elements<E>(
    result: Result<netrig_report::TestResult, E>,
    lab: Option<&netrig_lab::LabState>,
    before: Option<Vec<Read1>>,
) -> Result<netrig_report::TestResult, E> {
    match (lab, before) {
        (Some(state), Some(b)) => result.map(|mut r| {
            r.path_elements = after(state, &b, SystemTime::now());
            r
        }),
        _ => result,
    }
}

/// An arm's `shape`, checked against the lab as built: each direction's change, or the plan's
/// error naming the arm, the link and what cannot be changed.
pub fn arm_shape(
    state: &netrig_lab::LabState,
    arm: &crate::plan::Arm,
) -> Result<Vec<netrig_lab::arm_shape::Change>, crate::plan::PlanError> {
    let mut out = Vec::new();
    for (link, by) in &arm.shape {
        for (from, s) in by {
            out.push(
                netrig_lab::arm_shape::plan(state, link, from, s).map_err(|e| {
                    crate::plan::PlanError::Invalid(format!("arm {:?}: shape: {e}", arm.name))
                })?,
            );
        }
    }
    Ok(out)
}

/// Sets an arm's shaping before a run: each change's commands in its sending host's namespace,
/// recorded as phase "shape"; on a failure what was set is put back and the failure returned.
pub fn shape(
    commands: &mut Vec<crate::command::CommandRun>,
    arm: &str,
    changes: &[netrig_lab::arm_shape::Change],
    limit: Duration,
    env: &[(&str, String)],
) -> Option<String> {
    for c in changes {
        if let Some(e) = &c.element {
            let r = element_run("shape", arm, &c.from, e, false);
            let failure = (!r.ok()).then(|| r.failure());
            commands.push(r);
            if failure.is_some() {
                unshape(commands, arm, changes, limit, env);
                return failure;
            }
        }
        for cmd in &c.apply {
            let r = crate::command::run_in("shape", arm, cmd, limit, env, Some((&c.from, &c.ns)));
            let failure = (!r.ok()).then(|| r.failure());
            commands.push(r);
            if failure.is_some() {
                unshape(commands, arm, changes, limit, env);
                return failure;
            }
        }
    }
    None
}

/// Puts the lab's own shaping back after an arm's run (phase "unshape"); the first failure.
pub fn unshape(
    commands: &mut Vec<crate::command::CommandRun>,
    arm: &str,
    changes: &[netrig_lab::arm_shape::Change],
    limit: Duration,
    env: &[(&str, String)],
) -> Option<String> {
    let mut first = None;
    for c in changes {
        for cmd in &c.restore {
            let r = crate::command::run_in("unshape", arm, cmd, limit, env, Some((&c.from, &c.ns)));
            if !r.ok() && first.is_none() {
                first = Some(r.failure());
            }
            commands.push(r);
        }
        if let Some(e) = &c.element {
            let r = element_run("unshape", arm, &c.from, e, true);
            if !r.ok() && first.is_none() {
                first = Some(r.failure());
            }
            commands.push(r);
        }
    }
    first
}

/// An element's change (or its restoring) as a command of the document: what it wrote and
/// signalled, and what the element acknowledged.
fn element_run(
    phase: &str,
    arm: &str,
    host: &str,
    e: &netrig_lab::arm_path::ElementSet,
    restore: bool,
) -> crate::command::CommandRun {
    let t0 = std::time::Instant::now();
    let out = netrig_lab::arm_path::apply(e, restore);
    let props = if restore { &e.lab_props } else { &e.props };
    crate::command::CommandRun {
        phase: phase.into(),
        arm: arm.into(),
        command: format!(
            "path element of link {}: {} (configuration {}, SIGHUP, acknowledged in its counters)",
            e.link,
            netrig_lab::arm_path::describe(props),
            e.conf.display()
        ),
        status: out.is_ok().then_some(0),
        seconds: t0.elapsed().as_secs_f64(),
        output: out.as_ref().map_or_else(|_| String::new(), |o| o.clone()),
        error: out.err(),
        host: Some(host.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_lab::element::{Counters, UdpCounters};

    fn c(from: &str, received: u64, dropped: u64) -> Counters {
        Counters {
            from: from.into(),
            to: if from == "a" { "b".into() } else { "a".into() },
            received,
            forwarded: received - dropped,
            dropped,
            udp: UdpCounters {
                received,
                dropped,
                ..UdpCounters::default()
            },
            ..Counters::default()
        }
    }

    #[test]
    fn a_runs_counts_are_the_difference_over_the_files_window() {
        let d = delta(
            "a-b",
            10.0,
            &[c("a", 100, 10), c("b", 50, 0)],
            12.5,
            &[c("b", 70, 0), c("a", 1100, 110)],
        );
        assert_eq!(d.len(), 2);
        let ab = d.iter().find(|x| x.from == "a").unwrap();
        assert_eq!((ab.received, ab.dropped, ab.forwarded), (1000, 100, 900));
        assert_eq!((ab.udp.received, ab.udp.dropped), (1000, 100));
        assert_eq!((ab.window_start_unix_s, ab.window_end_unix_s), (10.0, 12.5));
        assert_eq!(ab.link, "a-b");
        let ba = d.iter().find(|x| x.from == "b").unwrap();
        assert_eq!((ba.received, ba.to.as_str()), (20, "a"));
        assert!(
            ab.line().contains("path element a → b on a-b: received 1000"),
            "{}",
            ab.line()
        );
        assert!(ab.line().contains("over 2.50 s"), "{}", ab.line());
    }
}
