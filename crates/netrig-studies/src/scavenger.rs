//! The scavenger service (QBSS) and load balancing study (CERN/Caltech, DataGrid WP7;
//! plans/scavenger.toml, docs/studies/scavenger.md): does scavenger traffic affect best effort,
//! does the scavenger fill the bandwidth best effort leaves idle (and does its 64-packet queue
//! explain it when it does not), how much can scavenger UDP find without harming best effort,
//! and is per-packet load balancing fit for traffic that needs its packets in order?
//!
//! Every figure is read from the plan's own runs, by the names the plan gives them: test 0
//! (tcp-stream without `--dscp`) is best effort alone; the tcp-stream test swept over `--dscp`
//! is the scavenger alone at each queue limit (the plan's classes: CS1 64 packets, CS2 256,
//! CS3 1024); the groups `together`, `udp-<rate>`, `probe-<rate>` (members `best-effort` and
//! `scavenger`), `lb-udp` and `lb-tcp` (members `per-packet` and `per-flow`). Only the baseline
//! arm is read.

use crate::{finding, withheld, Finding, Study};
use netrig_experiment::analysis::{self, Estimate};
use netrig_experiment::document::Experiment;
use netrig_experiment::metric;
use netrig_kinds::PaceConfig;
use netrig_report::TestResult;

pub struct Scavenger;

/// A share of best effort's own throughput that counts as "kept" / "filled": the runs are
/// noisy on a shared machine, and the study's own shapes are far from it (the scavenger's
/// 64-packet queue left about half the path idle).
pub const KEPT: f64 = 0.90;
/// The share of the gap between the scavenger alone at the study's queue and best effort alone
/// that the longest queue must close for the queue limit to explain it.
pub const EXPLAINED: f64 = 0.75;
/// The available-bandwidth probe's loss thresholds: the scavenger's datagrams and best
/// effort's, in percent.
pub const PROBE_LOSS_PCT: f64 = 1.0;
pub const BE_HARM_PCT: f64 = 0.5;
/// A share of datagrams out of order that counts as reordering a flow.
pub const REORDERED_PCT: f64 = 1.0;

/// The queue limit (packets) of the plan's scavenger classes with WRED, by DSCP.
pub fn queue_of(dscp: &str) -> Option<u32> {
    match dscp {
        "8" => Some(64),
        "16" => Some(256),
        "24" => Some(1024),
        _ => None,
    }
}

/// The DSCP of the plan's scavenger class with the longest queue and no WRED (drop-tail).
pub const DROP_TAIL_DSCP: &str = "32";

/// How much more of the path (in points of best effort's throughput alone) the drop-tail queue
/// must fill than the same queue with WRED for WRED to count as what holds the scavenger back.
pub const WRED_POINTS: f64 = 10.0;

fn has(args: &[String], opt: &str) -> bool {
    args.iter().any(|a| a == opt || a.starts_with(&format!("{opt}=")))
}

fn level(e: &Experiment) -> f64 {
    let l = e.plan.iterations.level;
    if l > 0.0 {
        l
    } else {
        95.0
    }
}

fn est(e: &Experiment, runs: &[TestResult], name: &str) -> Option<Estimate> {
    let m = metric::by_name(name)?;
    let est = analysis::estimate(m, runs, level(e));
    (est.n > 0 && est.mean.is_finite()).then_some(est)
}

/// "146.70 ± 0.42 Mbit/s" (the interval's half-width at the plan's level), or "(one run)".
fn show(x: &Estimate, unit: &str, digits: usize) -> String {
    match (x.ci_low, x.ci_high) {
        (Some(lo), Some(hi)) => format!("{:.d$} ± {:.d$} {unit}", x.mean, (hi - lo) / 2.0, d = digits),
        _ => format!("{:.d$} {unit} (one run)", x.mean, d = digits),
    }
}

/// Best effort alone: the runs of the first tcp-stream test without `--dscp` and without a sweep.
fn be_alone(e: &Experiment) -> Option<&[TestResult]> {
    let t = e.tests.iter().find(|t| {
        t.kind == "tcp-stream"
            && !has(&t.args, "--dscp")
            && t.points.len() == 1
            && t.points[0].point.values.is_empty()
    })?;
    let runs = &t.points[0].arms.first()?.runs;
    (!runs.is_empty()).then_some(runs.as_slice())
}

/// The scavenger alone with the drop-tail queue: the runs of the tcp-stream test whose args
/// give `--dscp` [`DROP_TAIL_DSCP`].
fn drop_tail_alone(e: &Experiment) -> Option<&[TestResult]> {
    let t = e.tests.iter().find(|t| {
        t.kind == "tcp-stream"
            && t.args
                .windows(2)
                .any(|w| w[0] == "--dscp" && w[1] == DROP_TAIL_DSCP)
    })?;
    let runs = &t.points.first()?.arms.first()?.runs;
    (!runs.is_empty()).then_some(runs.as_slice())
}

/// The scavenger alone at each queue limit: (DSCP, queue, runs) of the tcp-stream test swept
/// over `--dscp`.
fn scav_alone(e: &Experiment) -> Vec<(String, Option<u32>, &[TestResult])> {
    let Some(t) = e.tests.iter().find(|t| {
        t.kind == "tcp-stream" && t.points.iter().any(|p| crate::point_value(p, "--dscp").is_some())
    }) else {
        return vec![];
    };
    t.points
        .iter()
        .filter_map(|p| {
            let d = crate::point_value(p, "--dscp")?.to_string();
            let runs = &p.arms.first()?.runs;
            (!runs.is_empty()).then(|| (d.clone(), queue_of(&d), runs.as_slice()))
        })
        .collect()
}

/// The results of member `member` of group `group`, baseline arm, over its runs.
fn member(e: &Experiment, group: &str, member: &str) -> Vec<TestResult> {
    let Some(g) = e.groups.iter().find(|g| g.name == group) else {
        return vec![];
    };
    let Some(a) = g.arms.first() else {
        return vec![];
    };
    a.runs
        .iter()
        .filter_map(|r| r.members.iter().find(|m| m.member == member)?.result.clone())
        .collect()
}

/// Groups named `prefix<N>M`, with N, sorted by N.
fn rated_groups(e: &Experiment, prefix: &str) -> Vec<(f64, String)> {
    let mut v: Vec<(f64, String)> = e
        .groups
        .iter()
        .filter_map(|g| {
            let n: f64 = g.name.strip_prefix(prefix)?.strip_suffix('M')?.parse().ok()?;
            Some((n, g.name.clone()))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.filter(|x| x.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Datagrams out of order per datagram received, percent, over the runs (pooled).
fn ooo_pct(runs: &[TestResult]) -> Option<f64> {
    let (o, r) = runs
        .iter()
        .filter_map(|r| r.summary.udp.as_ref())
        .fold((0u64, 0u64), |(o, r), u| {
            (o + u.out_of_order, r + u.received_datagrams)
        });
    (r > 0).then(|| 100.0 * o as f64 / r as f64)
}

/// A kernel counter's delta over the runs (summed) at one end: `remote` is the server host's
/// namespace (the agent's), the local end the client host's.
fn counter(runs: &[TestResult], remote: bool, key: &str) -> Option<i64> {
    let mut any = false;
    let mut sum = 0;
    for r in runs {
        let c = if remote {
            r.counters.remote.as_ref()
        } else {
            r.counters.local.as_ref()
        };
        if let Some(c) = c {
            any = true;
            sum += c.deltas.get(key).copied().unwrap_or(0);
        }
    }
    any.then_some(sum)
}

/// The share of a TCP receiver's acknowledgements that were selective, as the path elements of
/// the circuits counted them on their way back (pure acknowledgements sent by `from`, the
/// receiver's side of the circuit pair, with a SACK option / all of them), over the runs.
fn sack_pct(runs: &[TestResult], from: &str) -> Option<f64> {
    let (mut acks, mut sack) = (0u64, 0u64);
    for p in runs
        .iter()
        .flat_map(|r| &r.path_elements)
        .filter(|p| p.from == from)
    {
        acks += p.tcp_acks;
        sack += p.tcp_sack_acks;
    }
    (acks > 0).then(|| 100.0 * sack as f64 / acks as f64)
}

/// The sending ends' TCP_INFO over the runs' connections: retransmitted segments (summed) and the
/// highest reordering degree the sender's kernel saw (tcpi_reordering: 3 unless it met
/// reordering, at most net.ipv4.tcp_max_reordering). Per connection, so two members sharing a
/// client host do not mix.
fn tcp_info(runs: &[TestResult]) -> Option<(u64, u32)> {
    let infos: Vec<_> = runs
        .iter()
        .flat_map(|r| r.flows.iter())
        .filter_map(|f| f.tcp_info.as_ref())
        .collect();
    (!infos.is_empty()).then(|| {
        (
            infos.iter().map(|i| u64::from(i.retransmits_total)).sum(),
            infos.iter().map(|i| i.reordering).max().unwrap_or(0),
        )
    })
}

/// The (best effort, scavenger) results of each run of group `g` in which both completed.
fn pairs(e: &Experiment, g: &str) -> Vec<(TestResult, TestResult)> {
    let Some(a) = e.groups.iter().find(|x| x.name == g).and_then(|x| x.arms.first()) else {
        return vec![];
    };
    a.runs
        .iter()
        .filter_map(|r| {
            let get = |n: &str| r.members.iter().find(|m| m.member == n)?.result.clone();
            Some((get("best-effort")?, get("scavenger")?))
        })
        .collect()
}

/// The UDP payload the bottleneck carries, Mbit/s: its configured rate × the datagram over its
/// frame (UDP 8, IPv4 20 and Ethernet 14 bytes of headers), the datagram read from group `g`'s
/// best-effort member.
fn probe_capacity(e: &Experiment, g: &str) -> Option<f64> {
    let rate = bottleneck_bps(e)?;
    let m = pairs(e, g)
        .first()
        .map(|p| p.0.config.message_size as f64)
        .filter(|m| *m > 0.0)?;
    Some(rate / 1e6 * m / (m + 42.0))
}

/// The configured rate of the router's egress towards the server (bits/s), from the lab as
/// built (the document's `lab`).
fn bottleneck_bps(e: &Experiment) -> Option<f64> {
    let dirs = e.lab.as_ref()?.get("directions")?.as_array()?;
    dirs.iter()
        .find(|d| d.get("from").and_then(|v| v.as_str()) == Some("router"))?
        .get("rate_bps")?
        .as_f64()
}

/// What one of the study's questions says: its summary lines and its findings, each in the
/// order the answer gives them.
type Said = (Vec<String>, Vec<Finding>);

impl Study for Scavenger {
    fn kind(&self) -> &'static str {
        "scavenger"
    }

    fn answer(&self, e: &Experiment) -> (Vec<String>, Vec<Finding>) {
        let be = be_alone(e).and_then(|r| est(e, r, "throughput"));
        let parts = [
            affect(e, be.as_ref()),
            fill(e, be.as_ref()),
            available_bandwidth(e),
            reorders_udp(e),
            both_circuits_tcp(e),
        ];
        let (summary, findings): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
        (summary.concat(), findings.concat())
    }
}

/// Question 1: does scavenger traffic affect best effort? Best effort beside a scavenger TCP
/// flow (group `together`) and beside scavenger UDP at each rate (`udp-<rate>`), against best
/// effort alone (`be`).
fn affect(e: &Experiment, be: Option<&Estimate>) -> Said {
    let mut summary = Vec::new();
    let mut findings = Vec::new();
    let mut affect = Vec::new();
    let mut cases = vec![("together".to_string(), "a scavenger TCP flow".to_string())];
    cases.extend(
        rated_groups(e, "udp-")
            .into_iter()
            .map(|(n, g)| (g, format!("scavenger UDP at {n} Mbit/s"))),
    );
    for (g, what) in &cases {
        let beside = est(e, &member(e, g, "best-effort"), "throughput");
        let (Some(b), Some(alone)) = (beside.as_ref(), be) else {
            if e.groups.iter().any(|x| &x.name == g) {
                findings.push(withheld(
                    format!("best effort beside {what}"),
                    "best effort alone or beside it was not measured (no run completed)",
                ));
            }
            continue;
        };
        let (ratio, v, f) = beside_case(e, g, what, b, alone);
        affect.push((what.clone(), ratio, v));
        findings.push(f);
    }
    if affect.is_empty() {
        findings.push(withheld(
            "best effort beside the scavenger",
            "no group ran best effort beside the scavenger together with best effort alone",
        ));
        summary.push("Whether scavenger traffic affects best effort is withheld: the runs that would show it did not complete.".into());
    } else {
        let worst = affect.iter().map(|a| a.1).fold(f64::INFINITY, f64::min);
        let all = affect.iter().all(|a| a.2 == "holds");
        summary.push(format!(
            "Scavenger traffic {} best effort: beside it best effort kept {:.1} % of its throughput alone at worst ({} case{}).",
            if all { "does not affect" } else { "does affect" },
            100.0 * worst,
            affect.len(),
            if affect.len() == 1 { "" } else { "s" }
        ));
    }
    (summary, findings)
}

/// Best effort beside `what` (group `g`): its throughput `b` there against `alone`, with what
/// the scavenger got and what best effort's sender retransmitted. Its share of best effort
/// alone, the verdict, and the finding.
fn beside_case(
    e: &Experiment,
    g: &str,
    what: &str,
    b: &Estimate,
    alone: &Estimate,
) -> (f64, &'static str, Finding) {
    let scav = member(e, g, "scavenger");
    let ratio = b.mean / alone.mean;
    let sc = est(e, &scav, "throughput");
    let mut text = format!(
        "Beside {what} (group {g}), best effort carried {} against {} alone: {:.1} % of it",
        show(b, "Mbit/s", 2),
        show(alone, "Mbit/s", 2),
        100.0 * ratio
    );
    let mut figs = vec![
        ("best_effort_beside_mbps", b.mean),
        ("best_effort_alone_mbps", alone.mean),
        ("ratio_pct", 100.0 * ratio),
    ];
    if let Some(s) = &sc {
        text.push_str(&format!("; the scavenger got {}", show(s, "Mbit/s", 2)));
        figs.push(("scavenger_mbps", s.mean));
    }
    if let (Some(l), Some(j)) = (est(e, &scav, "loss"), est(e, &scav, "jitter")) {
        let o = ooo_pct(&scav).unwrap_or(f64::NAN);
        text.push_str(&format!(
            ", losing {} of its datagrams, jitter {}, {o:.2} % out of order",
            show(&l, "%", 2),
            show(&j, "µs", 0)
        ));
        figs.extend([
            ("scavenger_loss_pct", l.mean),
            ("scavenger_jitter_us", j.mean),
            ("scavenger_out_of_order_pct", o),
        ]);
    }
    if let Some((rt, _)) = tcp_info(&member(e, g, "best-effort")) {
        text.push_str(&format!(
            "; best effort's sender retransmitted {rt} segments (TCP_INFO of its connection, over its runs)"
        ));
    }
    text.push_str(&format!(
        ". Best effort keeps its throughput (at least {:.0} % of alone, the margin for this machine's noise): ",
        100.0 * KEPT
    ));
    let v = if ratio >= KEPT { "holds" } else { "does not hold" };
    text.push_str(v);
    text.push('.');
    (
        ratio,
        v,
        finding(format!("best effort beside {what}"), v, text, &figs),
    )
}

/// The scavenger alone at one queue limit: its DSCP, the queue (packets) and its throughput.
type AtQueue = (String, Option<u32>, Estimate);

/// Question 2: does the scavenger fill the bandwidth best effort leaves idle? The scavenger
/// alone at the sweep's first queue (the study's 64 packets) against best effort alone (`be`);
/// then whether the queue limit explains it.
fn fill(e: &Experiment, be: Option<&Estimate>) -> Said {
    let mut summary = Vec::new();
    let mut findings = Vec::new();
    let at: Vec<AtQueue> = scav_alone(e)
        .iter()
        .filter_map(|(d, q, r)| Some((d.clone(), *q, est(e, r, "throughput")?)))
        .collect();
    let (Some(alone), Some((d, q, s))) = (be, at.first()) else {
        findings.push(withheld(
            "the scavenger alone fills the idle path",
            "best effort alone or the scavenger alone was not measured (no run completed)",
        ));
        summary.push("Whether the scavenger fills the idle path is withheld: the runs that would show it did not complete.".into());
        return (summary, findings);
    };
    let ratio = s.mean / alone.mean;
    let qtext = q.map_or(format!("DSCP {d}"), |q| {
        format!("its {q}-packet queue with WRED (DSCP {d})")
    });
    let v = if ratio >= KEPT { "holds" } else { "does not hold" };
    findings.push(finding(
        "the scavenger alone fills the idle path",
        v,
        format!(
            "Alone on the path, the scavenger with {qtext} carried {} against best effort's {} alone: {:.1} % (it fills the path at {:.0} % or more: {v}).",
            show(s, "Mbit/s", 2),
            show(alone, "Mbit/s", 2),
            100.0 * ratio,
            100.0 * KEPT
        ),
        &[("scavenger_alone_mbps", s.mean), ("best_effort_alone_mbps", alone.mean), ("ratio_pct", 100.0 * ratio), ("queue_packets", q.map_or(f64::NAN, f64::from))],
    ));
    summary.push(format!(
        "Alone, the scavenger {} the bandwidth best effort leaves idle: {:.1} % of best effort's throughput alone with {qtext}.",
        if ratio >= KEPT { "uses" } else { "does not use" },
        100.0 * ratio
    ));
    if at.len() < 2 {
        findings.push(withheld(
            "the queue limit explains it",
            "the scavenger ran at one queue limit only: nothing to compare",
        ));
    } else {
        let (s, f) = queue_limit(e, alone, &at);
        summary.extend(s);
        findings.extend(f);
    }
    (summary, findings)
}

/// Whether the queue limit explains what the scavenger alone leaves idle: the sweep's largest
/// queue against its first (`at` holds two or more); then WRED's part at the largest queue.
fn queue_limit(e: &Experiment, alone: &Estimate, at: &[AtQueue]) -> Said {
    let mut summary = Vec::new();
    let mut findings = Vec::new();
    let ratio = at[0].2.mean / alone.mean;
    let (dl, ql, l) = at.last().expect("two");
    let rl = l.mean / alone.mean;
    let steps: Vec<String> = at
        .iter()
        .map(|(d, q, x)| {
            format!(
                "{} {} ({:.1} %)",
                q.map_or(format!("DSCP {d}"), |q| format!("{q} packets:")),
                show(x, "Mbit/s", 2),
                100.0 * x.mean / alone.mean
            )
        })
        .collect();
    let lq = ql.map_or(format!("DSCP {dl}"), |q| format!("{q} packets"));
    // The share of the gap to best effort alone that the longest queue closes.
    let closed = (rl - ratio) / (1.0 - ratio);
    let (v, why) = if ratio >= KEPT {
        (
            "tie",
            "nothing to explain: at the first queue it already filled the path".to_string(),
        )
    } else if rl >= KEPT || closed >= EXPLAINED {
        ("holds", format!("with {lq} it closes {:.0} % of the gap to best effort alone (the queue explains it when it fills the path at {:.0} % or closes {:.0} % of the gap)", 100.0 * closed, 100.0 * KEPT, 100.0 * EXPLAINED))
    } else {
        ("does not hold", format!("with {lq} it closes only {:.0} % of the gap to best effort alone (the queue explains it when it fills the path at {:.0} % or closes {:.0} % of the gap)", 100.0 * closed, 100.0 * KEPT, 100.0 * EXPLAINED))
    };
    findings.push(finding(
        "the queue limit explains it",
        v,
        format!("The scavenger alone by queue limit: {}; {why}.", steps.join(", ")),
        &[
            ("first_ratio_pct", 100.0 * ratio),
            ("last_ratio_pct", 100.0 * rl),
            ("last_queue_packets", ql.map_or(f64::NAN, f64::from)),
        ],
    ));
    summary.push(match v {
        "holds" => format!("The queue limit explains it: with {lq} the scavenger alone reached {:.1} % of best effort alone.", 100.0 * rl),
        "does not hold" => format!("The queue limit does not explain it: with {lq} the scavenger alone still reached only {:.1} %.", 100.0 * rl),
        _ => format!("The queue limit has nothing to explain here ({:.1} % with {lq}).", 100.0 * rl),
    });
    let (s, f) = wred(e, alone, *ql, l);
    summary.extend(s);
    findings.extend(f);
    (summary, findings)
}

/// WRED's part: the scavenger alone with the longest queue `ql` with WRED (`l`) against the same
/// queue drop-tail.
fn wred(e: &Experiment, alone: &Estimate, ql: Option<u32>, l: &Estimate) -> Said {
    let rl = l.mean / alone.mean;
    let dt = drop_tail_alone(e).and_then(|r| est(e, r, "throughput"));
    let (Some(dt), Some(ql)) = (dt, ql) else {
        let f = withheld(
            "WRED holds the scavenger below the path",
            "the scavenger alone with the drop-tail queue (--dscp 32) or with the longest WRED queue was not measured",
        );
        return (vec![], vec![f]);
    };
    let rd = dt.mean / alone.mean;
    let gain = 100.0 * (rd - rl);
    let v = if gain >= WRED_POINTS {
        "holds"
    } else if gain <= -WRED_POINTS {
        "does not hold"
    } else {
        "tie"
    };
    let f = finding(
        "WRED holds the scavenger below the path",
        v,
        format!(
            "The scavenger alone with its {ql}-packet queue: {} with WRED ({:.1} % of best effort alone), {} drop-tail ({:.1} %): {:+.1} points without WRED (WRED counts as holding it back at {WRED_POINTS:.0} points or more: {v}). WRED drops from an average queue well below the limit, so the queue that matters to a Reno flow is its thresholds, not the limit.",
            show(l, "Mbit/s", 2),
            100.0 * rl,
            show(&dt, "Mbit/s", 2),
            100.0 * rd,
            gain
        ),
        &[("wred_ratio_pct", 100.0 * rl), ("drop_tail_ratio_pct", 100.0 * rd), ("queue_packets", f64::from(ql))],
    );
    let s = format!(
        "With the same {ql}-packet queue drop-tail it reached {:.1} % ({}).",
        100.0 * rd,
        match v {
            "holds" => "WRED's early drops hold it back",
            "does not hold" => "WRED did better than drop-tail",
            _ => "WRED makes no clear difference",
        }
    );
    (vec![s], vec![f])
}

/// What the available-bandwidth probes showed, rate by rate, as [`Probes::read`] reads them.
#[derive(Default)]
struct Probes {
    /// A line per probe rate, for the finding.
    rows: Vec<String>,
    /// The highest rate below the first that failed.
    estimate: Option<f64>,
    /// The first rate that failed, and what its scavenger lost (NaN: not measured).
    failed_at: Option<(f64, f64)>,
    /// The rates at which best effort lost more than [`BE_HARM_PCT`].
    harmed: Vec<f64>,
    /// Best effort's received rate at each rate measured, Mbit/s.
    be_rx: Vec<f64>,
}

impl Probes {
    /// Reads the probe at `n` Mbit/s (group `g`); `capacity` is what the link carries of the
    /// probes' datagrams ([`probe_capacity`]).
    fn read(&mut self, e: &Experiment, n: f64, g: &str, capacity: Option<f64>) {
        let all = pairs(e, g);
        // A run in which best effort lost datagrams although the router had room for
        // both classes (its rate plus the probe's below what the link carries) is
        // disturbed: best effort is served first, so that loss is this machine's (a
        // descheduled router, element or receiver), not the classes'.
        let (judged, disturbed): (Vec<_>, Vec<_>) = all.into_iter().partition(|(b, _)| {
            let lost = b.summary.udp.as_ref().map_or(0.0, |u| u.loss_pct);
            let rate = b.config.kind_part::<PaceConfig>().and_then(|p| p.rate_bps);
            let offered = rate.map_or(b.summary.throughput_bps, |r| r as f64) / 1e6;
            !(lost > BE_HARM_PCT && capacity.is_some_and(|c| n + offered < c))
        });
        let s: Vec<TestResult> = judged.iter().map(|p| p.1.clone()).collect();
        let b: Vec<TestResult> = judged.iter().map(|p| p.0.clone()).collect();
        let left_out = if disturbed.is_empty() {
            String::new()
        } else {
            format!(
                " ({} of its {} runs left out as disturbed: best effort lost more than {BE_HARM_PCT} % with room for both)",
                disturbed.len(),
                disturbed.len() + judged.len()
            )
        };
        let (Some(sl), Some(bl)) = (est(e, &s, "loss"), est(e, &b, "loss")) else {
            self.rows.push(format!("{n} Mbit/s: not measured{left_out}"));
            self.failed_at.get_or_insert((n, f64::NAN));
            return;
        };
        if let Some(t) = est(e, &b, "throughput") {
            self.be_rx.push(t.mean);
        }
        let (sj, bj) = (est(e, &s, "jitter"), est(e, &b, "jitter"));
        let rcvbuf = counter(&s, true, "Udp.RcvbufErrors").map_or(String::new(), |x| {
            format!(" (the receiving host's sockets dropped {x} of both: Udp.RcvbufErrors, server host)")
        });
        self.rows.push(format!(
            "{n} Mbit/s: scavenger lost {} (jitter {}, {:.2} % out of order), best effort lost {} (jitter {}, {:.2} % out of order){rcvbuf}{left_out}",
            show(&sl, "%", 2),
            sj.as_ref().map_or("withheld".into(), |j| show(j, "µs", 0)),
            ooo_pct(&s).unwrap_or(f64::NAN),
            show(&bl, "%", 2),
            bj.as_ref().map_or("withheld".into(), |j| show(j, "µs", 0)),
            ooo_pct(&b).unwrap_or(f64::NAN),
        ));
        if bl.mean > BE_HARM_PCT {
            self.harmed.push(n);
        }
        if self.failed_at.is_none() && sl.mean < PROBE_LOSS_PCT && bl.mean <= BE_HARM_PCT {
            self.estimate = Some(n);
        } else {
            self.failed_at.get_or_insert((n, sl.mean));
        }
    }
}

/// Question 3: how much can scavenger UDP find without harming best effort? The probes at
/// rising rates (groups `probe-<rate>`) beside best-effort UDP at a fixed rate.
fn available_bandwidth(e: &Experiment) -> Said {
    let probes = rated_groups(e, "probe-");
    if probes.is_empty() {
        let f = withheld("available bandwidth", "the plan ran no probe-<rate> group");
        return (vec![], vec![f]);
    }
    let capacity = probe_capacity(e, &probes[0].1);
    let mut p = Probes::default();
    for (n, g) in &probes {
        p.read(e, *n, g, capacity);
    }
    let be_mean = mean(p.be_rx.iter().copied());
    let idle = match (capacity, be_mean) {
        (Some(c), Some(bm)) => Some(c - bm),
        _ => None,
    };
    let method = format!(
        "Method: best-effort UDP at a fixed rate beside scavenger UDP probes at rising rates; the estimate is the highest probe rate below the first one that lost {PROBE_LOSS_PCT} % or more of its datagrams or made best effort lose more than {BE_HARM_PCT} % (over its runs, less those in which best effort lost with room for both on the link: this machine's loss, not the classes')"
    );
    let idle_text = idle.map_or(
        " (what best effort left idle is withheld: the lab's rate or the datagram size is not in the document)".to_string(),
        |i| format!(" (what best effort left idle: {i:.1} Mbit/s of UDP payload, the link's rate less best effort's received rate)"),
    );
    let Some(x) = p.estimate else {
        let f = withheld(
            "available bandwidth from scavenger UDP",
            format!(
                "{method}: even the lowest probe failed it, so the runs bound no estimate. {}.",
                p.rows.join("; ")
            ),
        );
        return (vec!["The available-bandwidth estimate is withheld: even the lowest scavenger probe lost datagrams or harmed best effort.".into()], vec![f]);
    };
    let v = if p.harmed.is_empty() {
        "holds"
    } else {
        "does not hold"
    };
    let f = finding(
        "available bandwidth from scavenger UDP",
        v,
        format!(
            "{method}. Estimate: {x} Mbit/s{}{idle_text}; best effort unharmed at every probe: {v}. {}.",
            p.failed_at.map_or(
                " (every probe passed: the estimate is a floor)".to_string(),
                |(n, l)| format!(" (the next probe, {n} Mbit/s, lost {l:.2} %)")
            ),
            p.rows.join("; ")
        ),
        &[
            ("estimate_mbps", x),
            ("idle_mbps", idle.unwrap_or(f64::NAN)),
            ("best_effort_mbps", be_mean.unwrap_or(f64::NAN)),
        ],
    );
    let s = format!(
        "Scavenger UDP estimated {x} Mbit/s of available bandwidth{idle_text}, best effort {}.",
        if p.harmed.is_empty() {
            "unharmed at every probe rate"
        } else {
            "losing datagrams at some probe rates"
        }
    );
    (vec![s], vec![f])
}

/// Question 4: is per-packet load balancing fit for traffic that needs its packets in order?
/// A UDP flow's datagrams out of order balanced per packet against per flow (group `lb-udp`).
fn reorders_udp(e: &Experiment) -> Said {
    let (pu, fu) = (member(e, "lb-udp", "per-packet"), member(e, "lb-udp", "per-flow"));
    let (Some(p), Some(f)) = (ooo_pct(&pu), ooo_pct(&fu)) else {
        let w = withheld(
            "per-packet load balancing reorders a UDP flow",
            "the lb-udp group did not complete (its udp-stream results are missing)",
        );
        return (
            vec![
                "Whether per-packet load balancing reorders is withheld: the lb-udp runs did not complete."
                    .into(),
            ],
            vec![w],
        );
    };
    let v = if p >= REORDERED_PCT && p > f {
        "holds"
    } else {
        "does not hold"
    };
    let found = finding(
        "per-packet load balancing reorders a UDP flow",
        v,
        format!(
            "UDP at 20 Mbit/s over the two circuits: {p:.1} % of the datagrams received arrived out of order balanced per packet, {f:.2} % per flow (a share of {REORDERED_PCT} % or more counts as reordering: {v})."
        ),
        &[("per_packet_out_of_order_pct", p), ("per_flow_out_of_order_pct", f)],
    );
    let s = format!(
        "Per-packet load balancing {} fit for traffic that needs its packets in order: {p:.1} % of a 20 Mbit/s UDP flow's datagrams arrived out of order, against {f:.2} % per flow.",
        if v == "holds" { "is not" } else { "is" }
    );
    (vec![s], vec![found])
}

/// Question 5: does per-packet load balancing give one TCP flow both circuits? Its throughput
/// balanced per packet against per flow (group `lb-tcp`), with what reordering cost its
/// connection.
fn both_circuits_tcp(e: &Experiment) -> Said {
    let (pt, ft) = (member(e, "lb-tcp", "per-packet"), member(e, "lb-tcp", "per-flow"));
    let (Some(p), Some(f)) = (est(e, &pt, "throughput"), est(e, &ft, "throughput")) else {
        let w = withheld(
            "per-packet load balancing gives one TCP flow both circuits",
            "the lb-tcp group did not complete (its tcp-stream results are missing)",
        );
        return (vec![], vec![w]);
    };
    let ofo = |r: &[TestResult]| {
        let o = counter(r, true, "TcpExt.TCPOFOQueue")?;
        let s = counter(r, true, "Tcp.OutSegs")?;
        (s > 0).then(|| 100.0 * o as f64 / s as f64)
    };
    let (pi, fi) = (tcp_info(&pt), tcp_info(&ft));
    let info = |x: Option<(u64, u32)>| {
        x.map_or("withheld (no TCP_INFO in its result)".to_string(), |(rt, ro)| {
            format!("{rt} segments retransmitted, reordering degree {ro}")
        })
    };
    let (po, fo) = (ofo(&pt), ofo(&ft));
    // The acknowledgements come back from the circuits' far routers, p2 and f2.
    let (ps, fs) = (sack_pct(&pt, "p2"), sack_pct(&ft, "f2"));
    let sack = |x: Option<f64>| {
        x.map_or(
            "withheld (no path element counted acknowledgements)".to_string(),
            |x| format!("{x:.1} %"),
        )
    };
    let share = |x: Option<f64>| {
        x.map_or(
            "withheld (the server host's counters were not read)".to_string(),
            |x| format!("{x:.1} %"),
        )
    };
    let ratio = p.mean / f.mean;
    let overlap = match (p.ci_low, p.ci_high, f.ci_low, f.ci_high) {
        (Some(pl), Some(ph), Some(fl), Some(fh)) => pl <= fh && fl <= ph,
        _ => false,
    };
    let v = if overlap {
        "tie"
    } else if ratio > 1.05 {
        "holds"
    } else if ratio < 0.95 {
        "does not hold"
    } else {
        "tie"
    };
    let found = finding(
        "per-packet load balancing gives one TCP flow both circuits",
        v,
        format!(
            "One TCP flow with a 5.7 MB window: {} per packet against {} per flow ({:+.1} %; more than ±5 % decides, unless the two intervals overlap: a tie). The sender's connection (TCP_INFO, over its runs): per packet {}, per flow {} (3 is the kernel's default, met no reordering). Its acknowledgements that were selective (pure TCP acknowledgements with a SACK option over all of them, counted by the path elements on the way back): {} per packet, {} per flow. The receiver's segments queued out of order per segment it sent (TcpExt.TCPOFOQueue / Tcp.OutSegs in the server host's namespace, which counts the segments behind a loss's hole as well as reordered ones): {} per packet, {} per flow.",
            show(&p, "Mbit/s", 2),
            show(&f, "Mbit/s", 2),
            100.0 * (ratio - 1.0),
            info(pi),
            info(fi),
            sack(ps),
            sack(fs),
            share(po),
            share(fo),
        ),
        &[
            ("per_packet_mbps", p.mean),
            ("per_flow_mbps", f.mean),
            ("per_packet_ofo_pct", po.unwrap_or(f64::NAN)),
            ("per_flow_ofo_pct", fo.unwrap_or(f64::NAN)),
            ("per_packet_sack_pct", ps.unwrap_or(f64::NAN)),
            ("per_flow_sack_pct", fs.unwrap_or(f64::NAN)),
            ("per_packet_reordering", pi.map_or(f64::NAN, |x| f64::from(x.1))),
            ("per_flow_reordering", fi.map_or(f64::NAN, |x| f64::from(x.1))),
        ],
    );
    let s = format!(
        "One TCP flow carried {:.1} Mbit/s balanced per packet and {:.1} per flow; {} of its acknowledgements were selective per packet and {} per flow; its sender's reordering degree reached {} per packet and {} per flow.",
        p.mean,
        f.mean,
        sack(ps),
        sack(fs),
        pi.map_or("withheld".to_string(), |x| x.1.to_string()),
        fi.map_or("withheld".to_string(), |x| x.1.to_string()),
    );
    (vec![s], vec![found])
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_experiment::document::TestOutcome;
    use netrig_experiment::fixtures::{experiment, fixture};
    use netrig_experiment::group::{GroupArm, GroupOutcome, GroupRun, MemberRun};

    fn tcp(mbps: f64, r: usize) -> TestResult {
        let mut t = fixture("tcp-stream");
        t.summary.throughput_bps = (mbps + 0.1 * r as f64) * 1e6;
        t
    }

    fn udp(loss_pct: f64, out_of_order: u64, r: usize) -> TestResult {
        let mut t = fixture("udp-stream");
        let u = t.summary.udp.as_mut().expect("udp fixture");
        u.received_datagrams = 10_000;
        u.out_of_order = out_of_order;
        u.loss_pct = loss_pct + 0.01 * r as f64;
        u.jitter_us = Some(100.0 + r as f64);
        t
    }

    fn with_counters(mut t: TestResult, ofo: i64, out: i64, reordering: u32) -> TestResult {
        for f in &mut t.flows {
            f.tcp_info.as_mut().expect("the fixture's TCP_INFO").reordering = reordering;
        }
        t.counters.remote = Some(
            serde_json::from_value(serde_json::json!({
                "deltas": {"TcpExt.TCPOFOQueue": ofo, "Tcp.OutSegs": out}, "conntrack": null
            }))
            .expect("counters"),
        );
        t
    }

    /// A group of `members`, each member's result for run r made by its closure.
    fn group(name: &str, members: &[(&str, &dyn Fn(usize) -> TestResult)]) -> GroupOutcome {
        GroupOutcome {
            name: name.into(),
            members: members.iter().map(|m| m.0.to_string()).collect(),
            arms: vec![GroupArm {
                arm: "default".into(),
                runs: (0..3)
                    .map(|r| GroupRun {
                        started_unix_s: 0.0,
                        members: members
                            .iter()
                            .map(|(n, f)| MemberRun {
                                member: n.to_string(),
                                kind: "x".into(),
                                start_s: 0.0,
                                offset_s: Some(0.0),
                                offset_withheld: None,
                                lab: None,
                                series: vec![],
                                result: Some(f(r)),
                                error: None,
                            })
                            .collect(),
                        responsiveness: vec![],
                    })
                    .collect(),
                members: vec![],
            }],
            comparisons: vec![],
        }
    }

    struct Shape {
        be: f64,
        scav: [f64; 2],
        be_beside: f64,
        probes: [(f64, f64, f64); 3],
        ooo: (u64, u64),
        lb: (f64, f64),
    }

    /// The study's shape: best effort kept beside the scavenger, the scavenger at 64 packets
    /// half the path, at 1024 all of it; probes fail at 60 Mbit/s; per packet reorders half.
    const STUDY: Shape = Shape {
        be: 140.0,
        scav: [70.0, 135.0],
        be_beside: 139.0,
        probes: [(30.0, 0.0, 0.0), (45.0, 0.2, 0.0), (60.0, 20.0, 0.0)],
        ooo: (5000, 0),
        lb: (190.0, 140.0),
    };

    fn doc(s: &Shape) -> Experiment {
        let mut e = experiment("tcp-stream", "", &[], &["default"], |_, _, r, run| {
            *run = tcp(s.be, r)
        });
        let mut sweep = experiment(
            "tcp-stream",
            "--dscp",
            &["8", "24"],
            &["default"],
            |p, _, r, run| *run = tcp(s.scav[p], r),
        );
        let t: TestOutcome = sweep.tests.remove(0);
        e.tests.push(t);
        let be_beside = s.be_beside;
        e.groups.push(group(
            "together",
            &[
                ("best-effort", &|r| tcp(be_beside, r)),
                ("scavenger", &|r| tcp(1.5, r)),
            ],
        ));
        e.groups.push(group(
            "udp-50M",
            &[
                ("best-effort", &|r| tcp(be_beside, r)),
                ("scavenger", &|r| udp(90.0, 0, r)),
            ],
        ));
        for (rate, sl, bl) in s.probes {
            e.groups.push(group(
                &format!("probe-{rate}M"),
                &[
                    ("best-effort", &move |r| udp(bl, 0, r)),
                    ("scavenger", &move |r| udp(sl, 0, r)),
                ],
            ));
        }
        let (po, fo) = s.ooo;
        e.groups.push(group(
            "lb-udp",
            &[
                ("per-packet", &move |r| udp(0.0, po, r)),
                ("per-flow", &move |r| udp(0.0, fo, r)),
            ],
        ));
        let (pt, ft) = s.lb;
        e.groups.push(group(
            "lb-tcp",
            &[
                ("per-packet", &move |r| {
                    with_counters(tcp(pt, r), 9_000, 10_000, 300)
                }),
                ("per-flow", &move |r| with_counters(tcp(ft, r), 10, 10_000, 3)),
            ],
        ));
        e
    }

    fn verdict<'a>(f: &'a [Finding], topic: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.topic == topic)
            .unwrap_or_else(|| panic!("no finding {topic:?} in {f:#?}"))
    }

    #[test]
    fn the_study_s_shape_is_answered_from_its_figures() {
        let (summary, f) = Scavenger.answer(&doc(&STUDY));
        assert_eq!(
            verdict(&f, "best effort beside a scavenger TCP flow").verdict,
            "holds"
        );
        assert_eq!(
            verdict(&f, "best effort beside scavenger UDP at 50 Mbit/s").verdict,
            "holds"
        );
        let fill = verdict(&f, "the scavenger alone fills the idle path");
        assert_eq!(fill.verdict, "does not hold", "{}", fill.text);
        assert!(
            fill.text.contains("its 64-packet queue with WRED (DSCP 8)"),
            "{}",
            fill.text
        );
        assert!(fill.text.contains("carried 70.10 ± "), "{}", fill.text);
        let q = verdict(&f, "the queue limit explains it");
        assert_eq!(q.verdict, "holds", "{}", q.text);
        assert!(q.text.contains("1024 packets: 135.10"), "{}", q.text);
        // The figures have no drop-tail run (--dscp 32): WRED's part is withheld, saying why.
        let w = verdict(&f, "WRED holds the scavenger below the path");
        assert_eq!(w.verdict, "withheld", "{}", w.text);
        let a = verdict(&f, "available bandwidth from scavenger UDP");
        assert_eq!(a.verdict, "holds", "{}", a.text);
        assert_eq!(a.figures["estimate_mbps"], 45.0);
        assert!(
            a.text.contains("the next probe, 60 Mbit/s, lost 20.01 %"),
            "{}",
            a.text
        );
        let r = verdict(&f, "per-packet load balancing reorders a UDP flow");
        assert_eq!(r.verdict, "holds");
        assert_eq!(r.figures["per_packet_out_of_order_pct"], 50.0);
        let t = verdict(&f, "per-packet load balancing gives one TCP flow both circuits");
        assert_eq!(t.verdict, "holds", "{}", t.text);
        assert!(t.text.contains("90.0 % per packet, 0.1 % per flow"), "{}", t.text);
        assert_eq!(t.figures["per_packet_reordering"], 300.0);
        assert_eq!(t.figures["per_flow_reordering"], 3.0);
        assert!(t.text.contains("reordering degree 300"), "{}", t.text);
        let s = summary.join(" ");
        for want in [
            "Scavenger traffic does not affect best effort",
            "does not use the bandwidth",
            "The queue limit explains it: with 1024 packets",
            "estimated 45 Mbit/s",
            "is not fit for traffic that needs its packets in order: 50.0 %",
        ] {
            assert!(s.contains(want), "{want:?} in {s}");
        }
    }

    #[test]
    fn the_opposite_shape_turns_every_verdict() {
        let (summary, f) = Scavenger.answer(&doc(&Shape {
            be: 140.0,
            scav: [139.0, 140.0],
            be_beside: 60.0,
            probes: [(30.0, 5.0, 0.0), (45.0, 6.0, 0.0), (60.0, 20.0, 0.0)],
            ooo: (3, 0),
            lb: (140.0, 140.5),
        }));
        assert_eq!(
            verdict(&f, "best effort beside a scavenger TCP flow").verdict,
            "does not hold"
        );
        assert_eq!(
            verdict(&f, "the scavenger alone fills the idle path").verdict,
            "holds"
        );
        assert_eq!(verdict(&f, "the queue limit explains it").verdict, "tie");
        assert_eq!(
            verdict(&f, "available bandwidth from scavenger UDP").verdict,
            "withheld"
        );
        assert_eq!(
            verdict(&f, "per-packet load balancing reorders a UDP flow").verdict,
            "does not hold"
        );
        assert_eq!(
            verdict(&f, "per-packet load balancing gives one TCP flow both circuits").verdict,
            "tie"
        );
        let s = summary.join(" ");
        assert!(s.contains("Scavenger traffic does affect best effort"), "{s}");
        assert!(s.contains("Per-packet load balancing is fit"), "{s}");
    }

    #[test]
    fn a_queue_that_does_not_explain_it_and_a_harmed_best_effort_are_said() {
        let (_, f) = Scavenger.answer(&doc(&Shape {
            scav: [70.0, 80.0],
            probes: [(30.0, 0.0, 0.0), (45.0, 0.0, 2.0), (60.0, 20.0, 3.0)],
            ..STUDY
        }));
        assert_eq!(
            verdict(&f, "the queue limit explains it").verdict,
            "does not hold"
        );
        let a = verdict(&f, "available bandwidth from scavenger UDP");
        assert_eq!(a.verdict, "does not hold", "{}", a.text);
        assert_eq!(a.figures["estimate_mbps"], 30.0);
    }

    #[test]
    fn a_longer_queue_that_closes_most_of_the_gap_explains_it() {
        // 50 of 140 at 64 packets, 120 at 1024: short of 90 %, but 78 % of the gap closed.
        let (_, f) = Scavenger.answer(&doc(&Shape {
            scav: [50.0, 120.0],
            ..STUDY
        }));
        let q = verdict(&f, "the queue limit explains it");
        assert_eq!(q.verdict, "holds", "{}", q.text);
        assert!(q.text.contains("closes 78 % of the gap"), "{}", q.text);
    }

    #[test]
    fn a_probe_run_disturbed_by_the_machine_is_left_out_only_with_room_on_the_link() {
        let mut e = doc(&STUDY);
        let g = e.groups.iter_mut().find(|g| g.name == "probe-30M").unwrap();
        for (i, run) in g.arms[0].runs.iter_mut().enumerate() {
            for m in &mut run.members {
                let r = m.result.as_mut().unwrap();
                r.config.message_size = 1472;
                if m.member == "best-effort" {
                    r.config.set_kind_part(&PaceConfig {
                        rate_bps: Some(100_000_000),
                        ..r.config.kind_part().unwrap_or_default()
                    });
                }
                if i == 0 {
                    // Both classes lost in one run: best effort too, with room for both.
                    r.summary.udp.as_mut().unwrap().loss_pct = 3.0;
                }
            }
        }
        // Without the lab's rate the link's room is unknown: the run counts, and best effort
        // was harmed at the first probe.
        let (_, f) = Scavenger.answer(&e);
        let a = verdict(&f, "available bandwidth from scavenger UDP");
        assert_eq!(a.verdict, "withheld", "{}", a.text);
        // 155 Mbit/s carries 150.7 Mbit/s of 1472-byte datagrams; 100 + 30 leave room.
        e.lab = Some(serde_json::json!({"directions": [{"from": "router", "rate_bps": 155_000_000u64}]}));
        let (_, f) = Scavenger.answer(&e);
        let a = verdict(&f, "available bandwidth from scavenger UDP");
        assert_eq!(a.verdict, "holds", "{}", a.text);
        assert_eq!(a.figures["estimate_mbps"], 45.0);
        assert!(
            a.text.contains("1 of its 3 runs left out as disturbed"),
            "{}",
            a.text
        );
    }

    #[test]
    fn tcp_rates_whose_intervals_overlap_are_a_tie() {
        let mut e = doc(&STUDY);
        let g = e.groups.iter_mut().find(|g| g.name == "lb-tcp").unwrap();
        // Per packet 100, 190, 280: a wide interval around 190 that holds per flow's 140.
        for (i, run) in g.arms[0].runs.iter_mut().enumerate() {
            let r = run.members[0].result.as_mut().unwrap();
            r.summary.throughput_bps = (100.0 + 90.0 * i as f64) * 1e6;
        }
        let (_, f) = Scavenger.answer(&e);
        let t = verdict(&f, "per-packet load balancing gives one TCP flow both circuits");
        assert_eq!(t.verdict, "tie", "{}", t.text);
    }

    #[test]
    fn without_the_runs_every_finding_is_withheld_with_its_reason() {
        let mut e = doc(&STUDY);
        e.groups.clear();
        e.tests.truncate(1);
        let (summary, f) = Scavenger.answer(&e);
        for x in &f {
            assert_eq!(x.verdict, "withheld", "{x:#?}");
            assert!(!x.text.is_empty());
        }
        assert!(f.len() >= 5, "{f:#?}");
        assert!(summary.iter().any(|s| s.contains("withheld")), "{summary:?}");
    }
}
