//! The Gigabit tuning study (Wagon / VTHD; plans/gigabit.toml, docs/studies/gigabit.md): which
//! parameter limits a gigabit transfer on a LAN and on a long path, and from how many clients
//! the server saturates.
//!
//! The plan's arms are paths (`lan`, the baseline; `long-path`; `jumbo`; `loopback`) and client
//! counts (`clients-1` … `clients-5`); its tests sweep both ends' socket buffers together
//! (`-s,-S`), the message size (`-m`, TCP and UDP), the flows (`-P`), and run both directions at
//! once (tcp-bidir). Every sentence below is made from those runs' throughput estimates (their
//! means, and their intervals where a point ran more than once); what the runs do not hold is a
//! finding withheld with the reason.

use crate::{comparison, estimate, finding, point_value, withheld, Finding, Study};
use netrig_experiment::analysis::Estimate;
use netrig_experiment::document::{Experiment, PointOutcome, TestOutcome};
use netrig_experiment::sweep;

pub struct Gigabit;

/// A change smaller than this share is "no change" between two points of one arm (with one run
/// per point there is no interval to judge by; with several, non-overlapping intervals are asked
/// for as well).
const MARGIN: f64 = 0.10;
/// Adding a client that adds less than this share of the sum: the server saturated.
const SATURATION: f64 = 0.05;
/// The paths, as the plan names its arms, and how the answer calls them.
const PATHS: &[(&str, &str)] = &[
    ("lan", "the LAN"),
    ("long-path", "the long path"),
    ("jumbo", "the LAN at MTU 9000"),
];

impl Study for Gigabit {
    fn kind(&self) -> &'static str {
        "gigabit"
    }

    fn answer(&self, e: &Experiment) -> (Vec<String>, Vec<Finding>) {
        let mut summary = Vec::new();
        let mut findings = Vec::new();
        for (arm, name) in PATHS {
            if let Some((s, mut f)) = path_answer(e, arm, name) {
                summary.push(s);
                findings.append(&mut f);
            }
        }
        if !PATHS.iter().any(|(a, _)| arm_in(e, a)) {
            findings.push(withheld(
                "paths",
                "no arm of the plan is a path this study reads (lan, long-path, jumbo): nothing to say which parameter limits a transfer",
            ));
        }
        findings.extend(jumbo(e));
        findings.extend(loopback(e));
        findings.extend(udp_loss(e));
        findings.extend(bidir(e));
        let (s, f) = saturation(e);
        summary.extend(s);
        findings.push(f);
        findings.push(buffer_limits(e));
        (summary, findings)
    }
}

fn mbps(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} Mbit/s")
    } else {
        format!("{v:.1} Mbit/s")
    }
}

fn thr<'a>(p: &'a PointOutcome, arm: &str) -> Option<&'a Estimate> {
    estimate(p, arm, "throughput")
}

fn arm_in(e: &Experiment, arm: &str) -> bool {
    e.tests
        .iter()
        .any(|t| t.points.iter().any(|p| p.arms.iter().any(|a| a.arm == arm)))
}

/// The first test of `kind` whose sweep sets `option` (alone or among options swept together).
fn swept<'a>(e: &'a Experiment, kind: &str, option: &str) -> Option<(&'a TestOutcome, String)> {
    e.tests.iter().filter(|t| t.kind == kind).find_map(|t| {
        let (o, _) = t.points.first()?.point.values.first()?;
        sweep::options(o).any(|x| x == option).then(|| (t, o.clone()))
    })
}

/// `b` is more than `a` by more than the margin (and, where both have intervals, beyond them).
fn above(a: &Estimate, b: &Estimate) -> bool {
    let intervals_apart = match (a.ci_high, b.ci_low) {
        (Some(h), Some(l)) => l > h,
        _ => true,
    };
    b.mean > a.mean * (1.0 + MARGIN) && intervals_apart
}

/// One swept parameter's effect on one arm: throughput at the sweep's first and best values.
struct Effect {
    parameter: &'static str,
    first: (String, f64),
    best: (String, f64),
    raises: bool,
}

fn effect(e: &Experiment, kind: &str, option: &str, parameter: &'static str, arm: &str) -> Option<Effect> {
    let (t, o) = swept(e, kind, option)?;
    let pts: Vec<(String, &Estimate)> = t
        .points
        .iter()
        .filter_map(|p| Some((point_value(p, &o)?.to_string(), thr(p, arm)?)))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let first = &pts[0];
    let best = pts.iter().max_by(|a, b| a.1.mean.total_cmp(&b.1.mean))?;
    Some(Effect {
        parameter,
        first: (first.0.clone(), first.1.mean),
        best: (best.0.clone(), best.1.mean),
        raises: above(first.1, best.1),
    })
}

/// The smallest round trip TCP measured on `arm` in the buffer sweep (TCP_INFO's smoothed RTT at
/// a run's end, the least queued of them), ms.
fn min_rtt_ms(e: &Experiment, arm: &str) -> Option<f64> {
    let (t, _) = swept(e, "tcp-stream", "-s")?;
    t.points
        .iter()
        .flat_map(|p| p.arms.iter().filter(|a| a.arm == arm))
        .flat_map(|a| &a.runs)
        .flat_map(|r| &r.flows)
        .filter_map(|f| f.tcp_info.as_ref().map(|i| i.rtt_us))
        .filter(|&us| us > 0)
        .min()
        .map(|us| us as f64 / 1000.0)
}

/// The most throughput one direction of `arm` carried (the tcp-stream estimates' means), Mbit/s.
fn best_on(e: &Experiment, arm: &str) -> Option<f64> {
    e.tests
        .iter()
        .filter(|t| t.kind == "tcp-stream")
        .flat_map(|t| &t.points)
        .filter_map(|p| thr(p, arm).map(|x| x.mean))
        .reduce(f64::max)
}

fn path_answer(e: &Experiment, arm: &str, name: &str) -> Option<(String, Vec<Finding>)> {
    if !arm_in(e, arm) {
        return None;
    }
    let mut findings = Vec::new();
    let effects: Vec<Effect> = [
        effect(e, "tcp-stream", "-s", "both ends' socket buffers", arm),
        effect(e, "tcp-stream", "-P", "the number of flows", arm),
        effect(e, "tcp-stream", "-m", "the message size", arm),
    ]
    .into_iter()
    .flatten()
    .collect();
    let rtt = min_rtt_ms(e, arm);
    let best = best_on(e, arm);
    for f in &effects {
        let gain = f.best.1 / f.first.1;
        let verdict = if f.raises { "holds" } else { "does not hold" };
        let text = if f.raises {
            format!(
                "On {name}, {} limit{} throughput: {} at {}, {} at {} (×{gain:.2}).",
                f.parameter,
                if f.parameter.starts_with("both") { "" } else { "s" },
                mbps(f.first.1),
                f.first.0,
                mbps(f.best.1),
                f.best.0
            )
        } else {
            format!(
                "On {name}, {} do{} not limit throughput: {} at {}, at most {} at {} (within {:.0} %).",
                f.parameter,
                if f.parameter.starts_with("both") { "" } else { "es" },
                mbps(f.first.1),
                f.first.0,
                mbps(f.best.1),
                f.best.0,
                MARGIN * 100.0
            )
        };
        findings.push(finding(
            format!("{} on {arm}", f.parameter),
            verdict,
            text,
            &[("first_mbps", f.first.1), ("best_mbps", f.best.1), ("gain", gain)],
        ));
    }
    // The buffer against the path's bandwidth-delay product.
    if let (Some(b), Some(rtt_ms), Some(best)) = (
        effects.iter().find(|f| f.parameter.contains("buffers")),
        rtt,
        best,
    ) {
        let bdp = best * 1e6 / 8.0 * rtt_ms / 1000.0;
        let biggest = swept(e, "tcp-stream", "-s")
            .and_then(|(t, o)| {
                t.points
                    .iter()
                    .filter_map(|p| sweep::value(&o, point_value(p, &o)?))
                    .reduce(f64::max)
            })
            .unwrap_or(f64::NAN);
        let text = format!(
            "{name}: round trip {rtt_ms:.2} ms (the least TCP measured), so the best rate measured on it ({}) needs a window of {:.0} KiB; the sweep's largest buffer is {:.0} KiB{}",
            mbps(best),
            bdp / 1024.0,
            biggest / 1024.0,
            if b.raises && biggest < bdp {
                ": below it, and throughput still grew with the buffer"
            } else if biggest >= bdp {
                ": above it"
            } else {
                ""
            }
        );
        findings.push(finding(
            format!("bandwidth-delay product of {arm}"),
            if biggest >= bdp { "holds" } else { "does not hold" },
            text,
            &[
                ("rtt_ms", rtt_ms),
                ("bdp_bytes", bdp),
                ("largest_buffer_bytes", biggest),
            ],
        ));
    }
    let mut limiting: Vec<&Effect> = effects.iter().filter(|f| f.raises).collect();
    limiting.sort_by(|a, b| (b.best.1 / b.first.1).total_cmp(&(a.best.1 / a.first.1)));
    let gain = |f: &Effect| {
        format!(
            "{} (×{:.2}: {} at {}, {} at {})",
            f.parameter,
            f.best.1 / f.first.1,
            mbps(f.first.1),
            f.first.0,
            mbps(f.best.1),
            f.best.0
        )
    };
    let others: Vec<&str> = effects
        .iter()
        .filter(|f| !f.raises)
        .map(|f| f.parameter)
        .collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!(
            "; {} {} not move it by more than {:.0} %",
            others.join(" and "),
            if others.len() > 1 || others[0].starts_with("both") {
                "do"
            } else {
                "does"
            },
            MARGIN * 100.0
        )
    };
    let most = best.map(|b| format!("; at most {}", mbps(b))).unwrap_or_default();
    let summary = match limiting.split_first() {
        Some((top, rest)) => format!(
            "On {name} the limit is {}{}{others}{most}.",
            gain(top),
            rest.iter().map(|f| format!(", then {}", gain(f))).collect::<String>()
        ),
        None if !effects.is_empty() => format!(
            "On {name} none of the parameters swept ({}) moved throughput by more than {:.0} %: the path's own rate is the limit{most}.",
            effects.iter().map(|f| f.parameter).collect::<Vec<_>>().join(", "),
            MARGIN * 100.0,
        ),
        None => {
            findings.push(withheld(
                format!("limit on {arm}"),
                format!("no sweep of {name} has two points with a throughput: which parameter limits it is not measured"),
            ));
            return Some((
                format!("On {name} the runs do not say which parameter limits it (no sweep with two measured points)."),
                findings,
            ));
        }
    };
    Some((summary, findings))
}

/// MTU 9000 against 1500 (the `jumbo` arm against the LAN) at the buffer sweep's largest
/// buffer: throughput and the sender's service demand, each with its interval.
fn jumbo(e: &Experiment) -> Option<Finding> {
    use netrig_experiment::analysis::Verdict;
    if !arm_in(e, "jumbo") {
        return None;
    }
    let t = swept(e, "tcp-stream", "-s")
        .map(|(t, _)| t)
        .or_else(|| e.tests.iter().find(|t| t.kind == "tcp-stream"))?;
    let p = t
        .points
        .iter()
        .rev()
        .find(|p| thr(p, "jumbo").is_some() && thr(p, "lan").is_some())?;
    let (j, l) = (thr(p, "jumbo")?.mean, thr(p, "lan")?.mean);
    let Some(c) = comparison(p, "jumbo", "throughput") else {
        return Some(withheld(
            "MTU 9000 against 1500",
            format!(
                "{} at MTU 9000 against {} at 1500 at {}, without a comparison (too few runs)",
                mbps(j),
                mbps(l),
                p.point
            ),
        ));
    };
    let sd = comparison(p, "jumbo", "sd_local")
        .map(|c| format!("; the sender's service demand {}", crate::change_text(c)))
        .unwrap_or_default();
    let verdict = match c.verdict {
        Verdict::Better => "holds",
        Verdict::Worse => "does not hold",
        Verdict::Equal | Verdict::Undetermined => "tie",
    };
    Some(finding(
        "MTU 9000 against 1500",
        verdict,
        format!(
            "At MTU 9000 the switch carried {} against {} at 1500 at {}: {}{sd}.",
            mbps(j),
            mbps(l),
            p.point,
            crate::change_text(c)
        ),
        &[
            ("jumbo_mbps", j),
            ("lan_mbps", l),
            ("change_pct", c.diff_pct.unwrap_or(f64::NAN)),
        ],
    ))
}

/// Loopback against the LAN at each point of the first test both ran.
fn loopback(e: &Experiment) -> Option<Finding> {
    if !arm_in(e, "loopback") {
        return None;
    }
    let t = e.tests.iter().find(|t| t.kind == "tcp-stream")?;
    let p = t
        .points
        .iter()
        .rev()
        .find(|p| thr(p, "loopback").is_some() && thr(p, "lan").is_some())?;
    let (l, n) = (thr(p, "loopback")?.mean, thr(p, "lan")?.mean);
    let change = comparison(p, "loopback", "throughput")
        .map(crate::change_text)
        .unwrap_or_else(|| "no comparison".into());
    Some(finding(
        "loopback against the link",
        if l > n * (1.0 + MARGIN) {
            "holds"
        } else {
            "does not hold"
        },
        format!(
            "Inside the server (loopback, no link) TCP carried {} against the LAN's {} at {} ({change}): {}",
            mbps(l),
            mbps(n),
            p.point,
            if l > n * (1.0 + MARGIN) {
                "the hosts' TCP/IP is not what limits the LAN; the link is"
            } else {
                "the hosts' TCP/IP, not the link, limits the LAN"
            }
        ),
        &[("loopback_mbps", l), ("lan_mbps", n)],
    ))
}

/// UDP loss per message size on the LAN, as the study's scripts computed it.
fn udp_loss(e: &Experiment) -> Option<Finding> {
    let (t, o) = swept(e, "udp-stream", "-m")?;
    let rows: Vec<(String, f64, f64)> = t
        .points
        .iter()
        .filter_map(|p| {
            Some((
                point_value(p, &o)?.to_string(),
                estimate(p, "lan", "loss")?.mean,
                thr(p, "lan")?.mean,
            ))
        })
        .collect();
    if rows.is_empty() {
        return Some(withheld(
            "UDP loss per message size",
            "no UDP run on the LAN reported its loss",
        ));
    }
    let parts: Vec<String> = rows
        .iter()
        .map(|(m, loss, r)| format!("{m} B: {loss:.1} % lost, {} received", mbps(*r)))
        .collect();
    let worst = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let figures: Vec<(String, f64)> = rows
        .iter()
        .map(|(m, l, _)| (format!("loss_pct_at_{m}"), *l))
        .collect();
    let figs: Vec<(&str, f64)> = figures.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    Some(finding(
        "UDP loss per message size",
        if worst > 0.0 { "holds" } else { "does not hold" },
        format!(
            "Unpaced UDP on the LAN (sent less received, of sent): {}.",
            parts.join("; ")
        ),
        &figs,
    ))
}

/// Both directions at once against one direction, on the LAN.
fn bidir(e: &Experiment) -> Option<Finding> {
    let b = e.tests.iter().find(|t| t.kind == "tcp-bidir")?;
    let both = b.points.first().and_then(|p| thr(p, "lan"))?.mean;
    let one = swept(e, "tcp-stream", "-P")
        .and_then(|(t, o)| t.points.iter().find(|p| point_value(p, &o) == Some("1")))
        .or_else(|| {
            e.tests
                .iter()
                .find(|t| t.kind == "tcp-stream")
                .and_then(|t| t.points.last())
        })
        .and_then(|p| thr(p, "lan"))
        .map(|x| x.mean);
    Some(match one {
        Some(one) => finding(
            "both directions at once",
            if both > one * (1.0 + MARGIN) {
                "holds"
            } else {
                "does not hold"
            },
            format!(
                "Both directions at once on the LAN carried {} in all, {:.2}× one direction's {}{}",
                mbps(both),
                both / one,
                mbps(one),
                if both > one * (1.0 + MARGIN) {
                    ": the link is full duplex, each direction has its own gigabit"
                } else {
                    ": the two directions share what limits one"
                }
            ),
            &[("both_mbps", both), ("one_mbps", one)],
        ),
        None => withheld(
            "both directions at once",
            format!(
                "both directions carried {} but no one-direction run on the LAN to set it against",
                mbps(both)
            ),
        ),
    })
}

/// From how many clients the server saturates: the sums of 1..5 clients at the buffer test's
/// largest buffer (else the first test's last point).
fn saturation(e: &Experiment) -> (Vec<String>, Finding) {
    let topic = "clients until the server saturates";
    let t = swept(e, "tcp-stream", "-s")
        .map(|(t, _)| t)
        .or_else(|| e.tests.iter().find(|t| t.kind == "tcp-stream"));
    let Some(t) = t else {
        return (vec![], withheld(topic, "no tcp-stream test ran"));
    };
    let Some(p) = t.points.iter().rev().find(|p| thr(p, "clients-1").is_some()) else {
        return (vec![], withheld(topic, "no arm clients-1 (one client) ran"));
    };
    let sums: Vec<(usize, f64)> = (1..=5)
        .map_while(|n| thr(p, &format!("clients-{n}")).map(|x| (n, x.mean)))
        .collect();
    if sums.len() < 2 {
        return (
            vec![],
            withheld(
                topic,
                "fewer than two client counts ran (clients-1, clients-2, ...)",
            ),
        );
    }
    let listed = sums
        .iter()
        .map(|(n, s)| format!("{n}: {}", mbps(*s)))
        .collect::<Vec<_>>()
        .join(", ");
    let figures: Vec<(String, f64)> = sums
        .iter()
        .map(|(n, s)| (format!("sum_mbps_{n}_clients"), *s))
        .collect();
    let figs: Vec<(&str, f64)> = figures.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let sat = sums
        .windows(2)
        .find(|w| w[1].1 < w[0].1 * (1.0 + SATURATION))
        .map(|w| (w[0], w[1]));
    let server = best_on(e, "lan");
    let (last_n, last) = *sums.last().expect("two");
    let one = sums[0].1;
    match sat {
        Some(((n, s), (m, s2))) => {
            let text = format!(
                "Summed over the clients at {} ({listed}): client {m} added {:+.1} % to {n} clients' {}: the server saturates from {n} client{}{}.",
                p.point,
                (s2 / s - 1.0) * 100.0,
                mbps(s),
                if n == 1 { "" } else { "s" },
                server
                    .map(|b| format!(" ({:.0} % of the most the LAN carried server to server, {})", s / b * 100.0, mbps(b)))
                    .unwrap_or_default()
            );
            (
                vec![format!(
                    "The server saturates from {n} client{}: {text}",
                    if n == 1 { "" } else { "s" }
                )],
                finding(topic, "holds", text, &figs),
            )
        }
        None => {
            let why = if last > one * last_n as f64 * (1.0 - MARGIN) {
                format!(
                    "each client carried about what one alone did ({}), so each is held by its own port, and {last_n} of them ({}) stay below what the server took from one gigabit peer{}",
                    mbps(one),
                    mbps(last),
                    server.map(|b| format!(" ({})", mbps(b))).unwrap_or_default()
                )
            } else {
                format!(
                    "the sum grew by less than {last_n}× one client's ({} against {}), yet each added client still added at least {:.0} %",
                    mbps(last),
                    mbps(one),
                    SATURATION * 100.0
                )
            };
            let text = format!(
                "Summed over the clients at {} ({listed}): not saturated within {last_n} clients: {why}.",
                p.point
            );
            (
                vec![format!(
                    "The server does not saturate within {last_n} clients: {why}."
                )],
                finding(topic, "does not hold", text, &figs),
            )
        }
    }
}

/// net.core.rmem_max/wmem_max: what the runs ran under and how many buffers were clamped.
fn buffer_limits(e: &Experiment) -> Finding {
    let runs: Vec<_> = e
        .tests
        .iter()
        .flat_map(|t| &t.points)
        .flat_map(|p| &p.arms)
        .flat_map(|a| &a.runs)
        .collect();
    let clamped = runs
        .iter()
        .filter(|r| r.warnings.iter().any(|w| w.contains("was clamped")))
        .count();
    let value = |k: &str| {
        runs.iter()
            .find_map(|r| r.environment.local.as_ref()?.sysctls.get(k).cloned())
            .unwrap_or_else(|| "not recorded".into())
    };
    let (r, w) = (value("net.core.rmem_max"), value("net.core.wmem_max"));
    withheld(
        "rmem_max/wmem_max default against raised",
        format!(
            "not compared: this kernel keeps net.core.rmem_max/wmem_max host-wide (read-only in a network namespace), so no lab host can raise them and the plan does not change the machine running it; every run ran under the host's rmem_max {r}, wmem_max {w}, and {clamped} of {} runs had a socket buffer clamped by them (netrig's warnings)",
            runs.len()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_experiment::fixtures::experiment;
    use netrig_report::TestResult;

    const ARMS: &[&str] = &[
        "lan",
        "long-path",
        "jumbo",
        "loopback",
        "clients-1",
        "clients-2",
        "clients-3",
        "clients-4",
        "clients-5",
    ];
    const BUFS: &[&str] = &["64K", "128K", "256K", "512K", "1024K"];

    fn set(run: &mut TestResult, mbps: f64, rtt_us: u32, r: usize) {
        run.summary.throughput_bps = mbps * 1e6 * (1.0 + 0.002 * r as f64);
        for f in &mut run.flows {
            if let Some(i) = &mut f.tcp_info {
                i.rtt_us = rtt_us;
            }
        }
    }

    /// Per arm, throughput at buffer point p: the LAN flat at 940, the long path window-bound
    /// (buffer / 10 ms), loopback far above, clients as `clients(n)`.
    fn doc(clients: impl Fn(usize) -> f64) -> Experiment {
        let mut e = experiment("tcp-stream", "-s,-S", BUFS, ARMS, |p, a, r, run| {
            let buf = 65536.0 * 2f64.powi(p as i32);
            let (mbps, rtt) = match ARMS[a] {
                "lan" => (940.0, 100),
                "jumbo" => (985.0, 100),
                "long-path" => ((buf * 8.0 / 0.010 / 1e6).min(940.0), 10_000),
                "loopback" => (20_000.0, 20),
                c => (clients(c.trim_start_matches("clients-").parse().unwrap()), 200),
            };
            set(run, mbps, rtt, r);
        });
        e.plan.tests.clear();
        // -P 1..5 on the same arms: the LAN flat, the long path flat too.
        let flows = experiment("tcp-stream", "-P", &["1", "5"], ARMS, |_, a, r, run| {
            set(run, if ARMS[a] == "long-path" { 52.0 } else { 940.0 }, 10_000, r)
        });
        e.tests.extend(flows.tests);
        e
    }

    fn by_topic<'a>(f: &'a [Finding], topic: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.topic == topic)
            .unwrap_or_else(|| panic!("no finding {topic}: {f:#?}"))
    }

    #[test]
    fn the_long_path_is_held_by_the_buffer_the_lan_by_its_rate() {
        let e = doc(|n| 94.0 * n as f64);
        let (summary, f) = Gigabit.answer(&e);
        let long = by_topic(&f, "both ends' socket buffers on long-path");
        assert_eq!(long.verdict, "holds", "{long:?}");
        assert!(long.figures["gain"].as_f64().unwrap() > 10.0, "{long:?}");
        assert!(
            long.text.contains("64K") && long.text.contains("1024K"),
            "{}",
            long.text
        );
        assert_eq!(
            by_topic(&f, "both ends' socket buffers on lan").verdict,
            "does not hold"
        );
        assert_eq!(
            by_topic(&f, "the number of flows on lan").verdict,
            "does not hold"
        );
        assert!(
            summary
                .iter()
                .any(|s| s.starts_with("On the long path the limit is both ends' socket buffers")),
            "{summary:?}"
        );
        assert!(
            summary
                .iter()
                .any(|s| s.starts_with("On the LAN none of the parameters")),
            "{summary:?}"
        );
        // The long path's BDP: 940 Mbit/s over 10 ms is about 1.1 MiB, above the 1 MiB buffer.
        let bdp = by_topic(&f, "bandwidth-delay product of long-path");
        assert_eq!(bdp.verdict, "does not hold", "{bdp:?}");
        let b = bdp.figures["bdp_bytes"].as_f64().unwrap();
        assert!((b - 840.0e6 / 8.0 * 0.010).abs() < 0.05 * b, "{bdp:?}");
        assert_eq!(by_topic(&f, "bandwidth-delay product of lan").verdict, "holds");
        assert_eq!(by_topic(&f, "loopback against the link").verdict, "holds");
        let j = by_topic(&f, "MTU 9000 against 1500");
        assert_eq!(j.verdict, "holds", "{j:?}");
        assert!(j.text.contains("+4.8 %"), "{}", j.text);
        assert_eq!(
            by_topic(&f, "rmem_max/wmem_max default against raised").verdict,
            "withheld"
        );
    }

    #[test]
    fn clients_that_each_fill_their_port_do_not_saturate_the_server() {
        let (summary, f) = Gigabit.answer(&doc(|n| 94.0 * n as f64));
        let s = by_topic(&f, "clients until the server saturates");
        assert_eq!(s.verdict, "does not hold", "{s:?}");
        assert!(s.text.contains("held by its own port"), "{}", s.text);
        assert!(
            summary
                .iter()
                .any(|x| x.contains("does not saturate within 5 clients")),
            "{summary:?}"
        );
    }

    #[test]
    fn the_server_saturates_where_a_client_adds_under_five_percent() {
        // 300, 600, 900, 930 (+3.3 %), 940.
        let (summary, f) = Gigabit.answer(&doc(|n| [300.0, 600.0, 900.0, 930.0, 940.0][n - 1]));
        let s = by_topic(&f, "clients until the server saturates");
        assert_eq!(s.verdict, "holds", "{s:?}");
        assert!(s.text.contains("saturates from 3 clients"), "{}", s.text);
        assert!(
            summary
                .iter()
                .any(|x| x.starts_with("The server saturates from 3 clients")),
            "{summary:?}"
        );
    }

    #[test]
    fn jumbo_frames_equal_and_a_loopback_no_faster_are_said_so() {
        // Jumbo frames within noise of the LAN: a tie with the interval; loopback no faster than
        // the link: the hosts' TCP/IP is the limit.
        let arms = ["lan", "jumbo", "loopback"];
        let e = experiment("tcp-stream", "-s,-S", BUFS, &arms, |_, a, r, run| {
            let base = [940.0, 941.0, 945.0][a];
            set(run, base + [0.0, 9.0, -9.0][r], 100, r)
        });
        let (_, f) = Gigabit.answer(&e);
        let j = by_topic(&f, "MTU 9000 against 1500");
        assert_eq!(j.verdict, "tie", "{j:?}");
        assert!(
            j.text.contains(" ± ") || j.text.contains("% ["),
            "the interval stated: {}",
            j.text
        );
        let l = by_topic(&f, "loopback against the link");
        assert_eq!(l.verdict, "does not hold", "{l:?}");
        assert!(l.text.contains("not the link, limits"), "{}", l.text);
    }

    #[test]
    fn what_the_runs_lack_is_withheld() {
        let e = experiment("tcp-stream", "-m", &["10", "1400"], &["other"], |_, _, _, run| {
            run.summary.throughput_bps = 1e8;
        });
        let (summary, f) = Gigabit.answer(&e);
        assert!(summary.is_empty(), "{summary:?}");
        assert_eq!(by_topic(&f, "paths").verdict, "withheld");
        assert_eq!(
            by_topic(&f, "clients until the server saturates").verdict,
            "withheld"
        );
        // One client count only: withheld, not a saturation point.
        let e = experiment(
            "tcp-stream",
            "-P",
            &["1"],
            &["lan", "clients-1"],
            |_, _, _, run| {
                run.summary.throughput_bps = 1e8;
            },
        );
        let (_, f) = Gigabit.answer(&e);
        let s = by_topic(&f, "clients until the server saturates");
        assert_eq!(s.verdict, "withheld", "{s:?}");
        assert!(s.text.contains("fewer than two"), "{}", s.text);
    }
}
