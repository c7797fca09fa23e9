//! The IA64 Linux TCP/IP stack study (plans/ia64.toml, docs/studies/ia64.md), its HTTP half:
//! where the stack stops scaling (each arm's saturation point in the reply-rate sweeps: netrig's
//! server against nginx, one client host against two, loopback against the link), what
//! tracking connections costs, and what a full conntrack table does (the server host's
//! counters beside the client's connection figures).
//!
//! The arms are found by name, as the plan names them: `netrig-1c` (the baseline),
//! `netrig-2c`, `nginx-1c`, `nginx-2c`, `loopback`, `ct-on`, `ct-full`; an arm the run lacks
//! (a `--quick` form keeps fewer) gives no finding, and a finding whose runs lack a figure is
//! withheld with the reason.

use crate::{arm, comparison, cost_verdict, finding, point_value, tests, withheld, Finding, Study};
use netrig_experiment::analysis::Verdict;
use netrig_experiment::document::{Experiment, PointOutcome, TestOutcome};
use netrig_experiment::saturation::Saturation;
use netrig_report::FAILURES;

pub struct Ia64;

const BASE: &str = "netrig-1c";
/// A full table's replies below this share of the baseline's at the same rate are its own loss.
const FEWER: f64 = 0.9;

/// How an arm fared over the rate sweeps: saturated at a point, or kept up to the top.
#[derive(Debug, Clone)]
enum Fate<'a> {
    Saturated { test: &'a TestOutcome, sat: Saturation },
    KeptUp { top: f64 },
}

impl Fate<'_> {
    /// The offered rate it saturated at; the top of the sweeps when it did not (a lower bound).
    fn rate(&self) -> f64 {
        match self {
            Fate::Saturated { test, sat } => test
                .points
                .get(sat.point)
                .and_then(rate_of)
                .unwrap_or(sat.offered_per_s),
            Fate::KeptUp { top } => *top,
        }
    }

    fn saturated(&self) -> bool {
        matches!(self, Fate::Saturated { .. })
    }

    fn text(&self) -> String {
        match self {
            Fate::Saturated { sat, .. } => format!(
                "stopped keeping up at {:.0} requests/s ({:.1} offered, {:.1} replies/s; {}){}",
                self.rate(),
                sat.offered_per_s,
                sat.replies_per_s,
                sat.reason,
                sat.highest_kept_per_s
                    .map(|k| format!(", the highest rate kept up with {k:.0}/s"))
                    .unwrap_or_else(|| ", already at the sweep's first rate".into())
            ),
            Fate::KeptUp { top } => format!(
                "kept up at every rate up to the sweep's top, {top:.0} requests/s (replies at least 95 % of the \
                 offered rate, at most 1 % failed)"
            ),
        }
    }
}

/// The offered rate of `p` (its `--rate`, or `-R`), if swept.
fn rate_of(p: &PointOutcome) -> Option<f64> {
    point_value(p, "--rate")
        .or_else(|| point_value(p, "-R"))
        .and_then(|v| v.parse().ok())
}

/// The http tests that sweep a rate, lowest top first.
fn sweeps(e: &Experiment) -> Vec<&TestOutcome> {
    let mut t: Vec<&TestOutcome> = tests(e, "http")
        .filter(|t| t.points.iter().any(|p| rate_of(p).is_some()))
        .collect();
    t.sort_by(|a, b| top(a).total_cmp(&top(b)));
    t
}

fn top(t: &TestOutcome) -> f64 {
    t.points.iter().filter_map(rate_of).fold(0.0, f64::max)
}

fn has_arm(t: &TestOutcome, name: &str) -> bool {
    t.points
        .iter()
        .any(|p| arm(p, name).is_some_and(|a| !a.runs.is_empty()))
}

/// `name`'s fate over the sweeps: its first saturation, else kept up to the highest top.
fn fate<'a>(sweeps: &[&'a TestOutcome], name: &str) -> Option<Fate<'a>> {
    let with: Vec<&&TestOutcome> = sweeps.iter().filter(|t| has_arm(t, name)).collect();
    if with.is_empty() {
        return None;
    }
    for t in &with {
        if let Some(sat) = knee(t, name) {
            return Some(Fate::Saturated { test: t, sat });
        }
    }
    Some(Fate::KeptUp {
        top: with.iter().map(|t| top(t)).fold(0.0, f64::max),
    })
}

/// Where `name`'s replies stopped following the request rate in `test`: the first point where
/// they fell below 95 % of the offered rate or more than 1 % of requests failed (the saturation
/// rule's throughput criteria, docs/EXPERIMENTS.md). Its latency criterion (p99 tenfold the
/// lightest load's) is left out here: on a machine shared with other work it marks points where
/// every request was still answered; the answer states it beside ([`p99_from`]).
fn knee(test: &TestOutcome, name: &str) -> Option<Saturation> {
    let mut kept = None;
    for (i, p) in test.points.iter().enumerate() {
        let (Some(offered), Some(replies)) = (
            mean(p, name, "offered_per_s").filter(|v| v.is_finite()),
            mean(p, name, "transactions_per_s").filter(|v| v.is_finite()),
        ) else {
            continue;
        };
        let errors = mean(p, name, "errors_pct").filter(|e| *e > 1.0);
        let reason = if offered > 0.0 && replies < 0.95 * offered {
            Some(format!(
                "the reply rate ({replies:.0}/s) was {:.0} % of the request rate offered ({offered:.0}/s), below 95 %",
                100.0 * replies / offered
            ))
        } else {
            errors.map(|e| format!("{e:.1} % of the requests failed, more than 1 %"))
        };
        match reason {
            Some(reason) => {
                return Some(Saturation {
                    arm: name.to_string(),
                    point: i,
                    values: p.point.values.clone(),
                    offered_per_s: offered,
                    replies_per_s: replies,
                    reason,
                    highest_kept_per_s: kept,
                })
            }
            None => kept = Some(rate_of(p).unwrap_or(offered)),
        }
    }
    None
}

/// The rate from which the saturation rule's latency criterion marked `name` (its p99 tenfold
/// the lightest load's and 1 ms above it), in the first sweep where it did.
fn p99_from(sweeps: &[&TestOutcome], name: &str) -> Option<f64> {
    sweeps.iter().find_map(|t| {
        let s = t
            .saturation
            .iter()
            .find(|s| s.arm == name && s.reason.starts_with("the 99th percentile"))?;
        t.points.get(s.point).and_then(rate_of).or(Some(s.offered_per_s))
    })
}

/// The mean of `metric` for `name` at `p`.
fn mean(p: &PointOutcome, name: &str, metric: &str) -> Option<f64> {
    crate::estimate(p, name, metric).map(|e| e.mean)
}

/// The server host's conntrack over `name`'s runs at `p`: the highest peak, the table's size,
/// the drops added up; `None` when no run carries it.
fn conntrack(p: &PointOutcome, name: &str) -> Option<(u64, Option<u64>, u64)> {
    let a = arm(p, name)?;
    let views: Vec<_> = a
        .runs
        .iter()
        .filter_map(|r| r.server_host.as_ref()?.conntrack.as_ref())
        .collect();
    if views.is_empty() {
        return None;
    }
    let peak = views.iter().map(|v| v.peak).max().unwrap_or(0);
    let max = views.iter().filter_map(|v| v.max).max();
    let drop = views.iter().filter_map(|v| v.drop).sum();
    Some((peak, max, drop))
}

/// The connections the client saw fail at `p`, by cause, over `name`'s runs.
fn failures(p: &PointOutcome, name: &str) -> Option<(u64, u64, u64)> {
    let a = arm(p, name)?;
    let mut any = false;
    let (mut timed_out, mut refused, mut all) = (0, 0, 0);
    for r in &a.runs {
        if let Some(c) = r.summary.counts.group(FAILURES) {
            any = true;
            timed_out += c.get("timed_out");
            refused += c.get("refused");
            all += c.total();
        }
    }
    any.then_some((timed_out, refused, all))
}

/// "two client hosts reach a higher saturation point than one", for one server.
fn one_against_two(sweeps: &[&TestOutcome], server: &str) -> Option<Finding> {
    let one = fate(sweeps, &format!("{server}-1c"))?;
    let two = fate(sweeps, &format!("{server}-2c"))?;
    let topic = format!("{server}: two client hosts against one");
    let figures = [
        (
            "one_client_saturation_per_s",
            if one.saturated() { one.rate() } else { f64::NAN },
        ),
        (
            "two_clients_saturation_per_s",
            if two.saturated() { two.rate() } else { f64::NAN },
        ),
        ("sweep_top_per_s", one.rate().max(two.rate())),
    ];
    let f = match (&one, &two) {
        (Fate::KeptUp { top }, Fate::KeptUp { .. }) => finding(
            topic,
            "tie",
            format!(
                "Neither one client host nor two (each offering half) drove {server} to saturation: both kept up \
                 at every rate up to {top:.0}/s, so the sweep does not reach the point where the stack stops \
                 scaling on this machine, and the runs cannot say whether two clients go further."
            ),
            &figures,
        ),
        (Fate::Saturated { .. }, Fate::KeptUp { top }) => finding(
            topic,
            "holds",
            format!(
                "Two client hosts reached a higher saturation point than one against {server}: one client {}; \
                 two clients, each offering half, kept up to {top:.0}/s.",
                one.text()
            ),
            &figures,
        ),
        (_, Fate::Saturated { test, sat }) if two.rate() > one.rate() => finding(
            topic,
            "holds",
            format!(
                "Two client hosts reached a higher saturation point than one against {server}: one {}; two {}.{}",
                one.text(),
                two.text(),
                limit_text(test, sat, &format!("{server}-2c"))
            ),
            &figures,
        ),
        (_, Fate::Saturated { test, sat }) => finding(
            topic,
            "does not hold",
            format!(
                "Two client hosts did not reach a higher saturation point than one against {server}: one {}; two \
                 {}.{}",
                one.text(),
                two.text(),
                limit_text(test, sat, &format!("{server}-2c"))
            ),
            &figures,
        ),
    };
    Some(f)
}

/// What limited `name` at its saturation point, from the figures there: the machine's CPU (every
/// lab host shares it), the client's failures, or the rule alone.
fn limit_text(test: &TestOutcome, sat: &Saturation, name: &str) -> String {
    let Some(p) = test.points.get(sat.point) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(cpu) = mean(p, name, "cpu_server") {
        parts.push(format!(
            "the server host's CPU was {cpu:.0} % busy (the whole machine's: every lab host shares its CPUs{})",
            if cpu >= 90.0 {
                ", so the CPU the server and the clients share, not the number of clients, is the limit"
            } else {
                ""
            }
        ));
    }
    if let Some((t, r, all)) = failures(p, name).filter(|f| f.2 > 0) {
        parts.push(format!("{all} connections failed ({t} timed out, {r} refused)"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" At that point {}.", parts.join("; "))
    }
}

/// The highest point that both `a` and `b` ran, of the lowest sweep.
fn highest_common<'a>(sweeps: &[&'a TestOutcome], a: &str, b: &str) -> Option<&'a PointOutcome> {
    sweeps.first()?.points.iter().rev().find(|p| {
        [a, b]
            .iter()
            .all(|n| arm(p, n).is_some_and(|x| !x.runs.is_empty()))
    })
}

/// A cost of arm `name` against the baseline, on the machine's CPU per request at the highest
/// point of the first sweep both ran.
fn cpu_cost(sweeps: &[&TestOutcome], name: &str, topic: &str, what: &str) -> Option<Finding> {
    let p = highest_common(sweeps, BASE, name)?;
    let rate = rate_of(p).unwrap_or(f64::NAN);
    let Some(c) = comparison(p, name, "sd_server") else {
        return Some(withheld(
            topic,
            format!(
                "{what}: withheld: the runs at {rate:.0}/s carry no CPU per request of the server host to compare \
                 (sd_server: the agent's view of its host's CPU)"
            ),
        ));
    };
    let verdict = cost_verdict(c);
    let said = match c.verdict {
        Verdict::Worse => "a rise: its interval excludes no change",
        Verdict::Better => "a fall: its interval excludes no change",
        Verdict::Equal => "equal within the plan's margin",
        Verdict::Undetermined => "the runs cannot tell it from no change",
    };
    Some(finding(
        topic,
        verdict,
        format!(
            "{what} changed the server host's CPU per request by {} at {rate:.0} requests/s ({said}; the whole \
             machine's busy CPU per reply, as every lab host shares it).",
            crate::change_text(c)
        ),
        &[
            ("rate_per_s", rate),
            ("sd_server_change_pct", c.diff_pct.unwrap_or(f64::NAN)),
            ("sd_server_ci_low_pct", c.ci_low_pct.unwrap_or(f64::NAN)),
            ("sd_server_ci_high_pct", c.ci_high_pct.unwrap_or(f64::NAN)),
        ],
    ))
}

/// What a full conntrack table did: the arm's saturation against the baseline's, the server
/// host's table and drops there, the client's failed connections.
fn conntrack_full(sweeps: &[&TestOutcome]) -> Option<Finding> {
    let full = fate(sweeps, "ct-full")?;
    let base = fate(sweeps, BASE);
    let topic = "conntrack full";
    let Fate::Saturated { test, sat } = &full else {
        return Some(finding(
            topic,
            "does not hold",
            format!(
                "With the server host's conntrack table filled (a small table's worth left free) the server {}: \
                 the table did not limit it within the sweep.",
                full.text()
            ),
            &[("sweep_top_per_s", full.rate())],
        ));
    };
    let p = &test.points[sat.point];
    let Some((peak, max, drops)) = conntrack(p, "ct-full") else {
        return Some(withheld(
            topic,
            format!(
                "With the table filled the server {}, but the runs carry no conntrack figures of the server host \
                 (the agent's view withheld them), so the runs cannot say the table caused it.",
                full.text()
            ),
        ));
    };
    let (timed_out, refused, failed) = failures(p, "ct-full").unwrap_or((0, 0, 0));
    let p99 = mean(p, "ct-full", "latency_p99");
    // The table, not the load, when the baseline kept up further, or when at the same rate
    // the baseline still answered clearly more (a busy machine's p99 may mark the baseline
    // saturated at the same point while it still replied at the rate offered).
    let later = base
        .as_ref()
        .is_none_or(|b| !b.saturated() || b.rate() > full.rate());
    let replies = mean(p, "ct-full", "transactions_per_s");
    let base_replies = mean(p, BASE, "transactions_per_s");
    let fewer = matches!((replies, base_replies), (Some(r), Some(b)) if r < FEWER * b);
    let verdict = if drops > 0 && (later || fewer) {
        "holds"
    } else {
        "does not hold"
    };
    let base_text = base
        .as_ref()
        .map(|b| {
            format!(
                " Without tracking the same server {}{}.",
                b.text(),
                base_replies
                    .map(|r| format!("; at {:.0}/s it answered {r:.1} replies/s", full.rate()))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_default();
    Some(finding(
        topic,
        verdict,
        format!(
            "With the server host's conntrack table full the server {}: there the server host's table held {peak} \
             entries of {} at its peak and the kernel dropped {drops} packets it could not track \
             (nf_conntrack drop), while the client saw {failed} connections fail ({timed_out} timed out, {refused} \
             refused){}.{base_text}",
            full.text(),
            max.map_or_else(|| "an unknown size".into(), |m| m.to_string()),
            p99.map(|v| format!(" and a p99 of {:.1} ms", v / 1e3)).unwrap_or_default(),
        ),
        &[
            ("saturation_per_s", full.rate()),
            ("replies_per_s", sat.replies_per_s),
            ("conntrack_peak", peak as f64),
            ("conntrack_max", max.map_or(f64::NAN, |m| m as f64)),
            ("conntrack_drop", drops as f64),
            ("connections_failed", failed as f64),
            ("latency_p99_us", p99.unwrap_or(f64::NAN)),
        ],
    ))
}

/// Kernel counter `key` of the server host added up over `name`'s runs at every point of the
/// sweeps, and the highest of a socket state's peaks; `None` when no run carries the view.
fn server_totals(sweeps: &[&TestOutcome], name: &str, keys: &[&str]) -> Option<(Vec<i64>, u64, u64)> {
    let mut sums = vec![0i64; keys.len()];
    let (mut syn_recv, mut fin_wait2) = (0u64, 0u64);
    let mut any = false;
    for t in sweeps {
        for p in &t.points {
            let Some(a) = arm(p, name) else { continue };
            for r in &a.runs {
                let Some(h) = r.server_host.as_ref() else { continue };
                any = true;
                for (sum, k) in sums.iter_mut().zip(keys) {
                    *sum += h.counters.get(*k).copied().unwrap_or(0);
                }
                if let Some(st) = &h.sockets {
                    syn_recv = syn_recv.max(st.syn_recv.peak);
                    fin_wait2 = fin_wait2.max(st.fin_wait2.peak);
                }
            }
        }
    }
    any.then_some((sums, syn_recv, fin_wait2))
}

/// Where `name` answered clearly less than the baseline, or its p99 was at least twice the
/// baseline's, at a rate both ran: the first such rate and what was seen there.
fn client_harm(sweeps: &[&TestOutcome], name: &str) -> Option<(f64, String)> {
    for t in sweeps {
        for p in &t.points {
            let (Some(r), Some(b)) = (
                mean(p, name, "transactions_per_s"),
                mean(p, BASE, "transactions_per_s"),
            ) else {
                continue;
            };
            let (q, qb) = (mean(p, name, "latency_p99"), mean(p, BASE, "latency_p99"));
            let rate = rate_of(p).unwrap_or(f64::NAN);
            if r < FEWER * b {
                return Some((
                    rate,
                    format!("at {rate:.0} requests/s it answered {r:.0} replies/s against {b:.0} without"),
                ));
            }
            if let (Some(q), Some(qb)) = (q, qb) {
                if q >= 2.0 * qb && q - qb >= 1000.0 {
                    return Some((
                        rate,
                        format!(
                            "at {rate:.0} requests/s its p99 was {:.1} ms against {:.1} ms without",
                            q / 1e3,
                            qb / 1e3
                        ),
                    ));
                }
            }
        }
    }
    None
}

/// What a SYN flood from the attacker host did (arm `syn-flood`): the server host's SYN
/// cookies, listen-queue overflows and drops and its SYN_RECV sockets, beside the client's reply
/// rate and latency against the baseline's.
fn syn_flood(sweeps: &[&TestOutcome]) -> Option<Finding> {
    let flood = fate(sweeps, "syn-flood")?;
    let topic = "a SYN flood shows in the server's counters and the client's figures";
    let keys = [
        "TcpExt.SyncookiesSent",
        "TcpExt.ListenOverflows",
        "TcpExt.ListenDrops",
        "TcpExt.TCPReqQFullDrop",
    ];
    let Some((sums, syn_recv, _)) = server_totals(sweeps, "syn-flood", &keys) else {
        return Some(withheld(
            topic,
            format!(
                "Under the SYN flood the server {}, but the runs carry no view of the server host (its agent's counters), so the runs cannot say what the flood did there.",
                flood.text()
            ),
        ));
    };
    let shown = sums.iter().any(|v| *v > 0);
    let harm = client_harm(sweeps, "syn-flood");
    let base = fate(sweeps, BASE);
    let earlier = base
        .as_ref()
        .is_some_and(|b| flood.saturated() && (!b.saturated() || flood.rate() < b.rate()));
    let verdict = match (shown, earlier || harm.is_some()) {
        (true, true) => "holds",
        _ => "does not hold",
    };
    let client = match (&harm, earlier) {
        (Some((_, h)), _) => format!("; the client saw it: {h}"),
        (None, true) => "; the client saw it as an earlier saturation".into(),
        (None, false) => {
            "; the client's replies and p99 stayed within 10 % and twice the baseline's at every rate".into()
        }
    };
    Some(finding(
        topic,
        verdict,
        format!(
            "Under a SYN flood of 20,000 SYNs/s from the attacker host the server {} (without: {}). Over the flood's runs the server host's kernel sent {} SYN cookies, counted {} listen-queue overflows, {} listen drops and {} SYNs dropped with a full request queue, with up to {syn_recv} sockets in SYN_RECV{client}.",
            flood.text(),
            base.as_ref().map_or_else(|| "not run".into(), |b| b.text()),
            sums[0],
            sums[1],
            sums[2],
            sums[3],
        ),
        &[
            ("saturation_per_s", if flood.saturated() { flood.rate() } else { f64::NAN }),
            ("syncookies_sent", sums[0] as f64),
            ("listen_overflows", sums[1] as f64),
            ("listen_drops", sums[2] as f64),
            ("reqq_full_drops", sums[3] as f64),
            ("syn_recv_peak", syn_recv as f64),
            ("harmed_at_per_s", harm.map_or(f64::NAN, |h| h.0)),
        ],
    ))
}

/// What many half-closed connections did (arm `half-closed`): the server's FIN_WAIT2 sockets
/// during the runs (its agent's view), the time the server took to close them (the arm's
/// tear-down reads it from the generator: `"gone_after_s": X`), and the client's figures
/// against the baseline's.
fn half_closed(e: &Experiment, sweeps: &[&TestOutcome]) -> Option<Finding> {
    let hc = fate(sweeps, "half-closed")?;
    let topic = "half-closed connections: the server's FIN_WAIT2 and the time to close them";
    let gone: Vec<f64> = e
        .commands
        .iter()
        .filter(|c| c.arm == "half-closed" && c.phase == "teardown")
        .filter_map(|c| {
            let (_, rest) = c.output.split_once("\"gone_after_s\":")?;
            rest.trim_start()
                .split(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                .next()?
                .parse()
                .ok()
        })
        .collect();
    let Some((_, _, fin_wait2)) = server_totals(sweeps, "half-closed", &[]) else {
        return Some(withheld(
            topic,
            format!(
                "With half-closed connections the server {}, but the runs carry no view of the server host's sockets.",
                hc.text()
            ),
        ));
    };
    let mut sorted = gone.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied();
    let harm = client_harm(sweeps, "half-closed");
    let verdict = if fin_wait2 > 0 { "holds" } else { "does not hold" };
    Some(finding(
        topic,
        verdict,
        format!(
            "With 1,000 clients gone without a word before each run, the server host held up to {fin_wait2} sockets in FIN_WAIT2 during the runs; {}; meanwhile the server {}{}.",
            match median {
                Some(m) => format!(
                    "it closed them {m:.1} s after the clients went (median of {} runs; its tcp_fin_timeout was 8 s)",
                    gone.len()
                ),
                None => "the time it took to close them is withheld: no tear-down reported it".into(),
            },
            hc.text(),
            harm.as_ref().map(|h| format!(", and {}", h.1)).unwrap_or_default()
        ),
        &[
            ("fin_wait2_peak", fin_wait2 as f64),
            ("gone_after_s_median", median.unwrap_or(f64::NAN)),
            ("saturation_per_s", if hc.saturated() { hc.rate() } else { f64::NAN }),
        ],
    ))
}

impl Study for Ia64 {
    fn kind(&self) -> &'static str {
        "ia64"
    }

    fn answer(&self, e: &Experiment) -> (Vec<String>, Vec<Finding>) {
        let sw = sweeps(e);
        if sw.is_empty() {
            let f = withheld(
                "rate sweep",
                "the experiment has no http test sweeping --rate: no reply rate against request rate to read",
            );
            return (vec![f.text.clone()], vec![f]);
        }
        let mut findings = Vec::new();
        let mut summary = Vec::new();
        // Where each arm stops scaling.
        let names = [
            (BASE, "netrig's HTTP server from one client host over the link"),
            (
                "netrig-2c",
                "netrig's HTTP server from two client hosts, each offering half",
            ),
            ("nginx-1c", "nginx from one client host"),
            ("nginx-2c", "nginx from two client hosts"),
            (
                "loopback",
                "netrig's HTTP server through loopback inside its host (no NIC driver)",
            ),
            ("ct-on", "netrig's HTTP server with every connection tracked"),
        ];
        let mut said = Vec::new();
        for (name, what) in names {
            let Some(f) = fate(&sw, name) else { continue };
            said.push(format!(
                "{name} {:.0}/s{}",
                f.rate(),
                if f.saturated() { "" } else { "+" }
            ));
            let p99 = p99_from(&sw, name)
                .filter(|r| !f.saturated() || *r < f.rate())
                .map(|r| {
                    format!(
                        " Its p99 rose tenfold over the lightest load's from {r:.0}/s (the saturation rule's \
                         latency criterion), while the replies still followed."
                    )
                })
                .unwrap_or_default();
            findings.push(finding(
                format!("{name}: saturates within the sweep"),
                if f.saturated() { "holds" } else { "does not hold" },
                format!("{name} ({what}): {}.{p99}", f.text()),
                &[
                    (
                        "saturation_per_s",
                        if f.saturated() { f.rate() } else { f64::NAN },
                    ),
                    (
                        "kept_up_to_per_s",
                        if f.saturated() { f64::NAN } else { f.rate() },
                    ),
                ],
            ));
        }
        if !said.is_empty() {
            summary.push(format!(
                "Where the replies stopped following the request rate (requests/s; + means they followed up to \
                 the sweep's top): {}.",
                said.join(", ")
            ));
        }
        for server in ["netrig", "nginx"] {
            if let Some(f) = one_against_two(&sw, server) {
                summary.push(f.text.clone());
                findings.push(f);
            }
        }
        // Server against server at one client.
        if let (Some(n), Some(g)) = (fate(&sw, BASE), fate(&sw, "nginx-1c")) {
            let verdict = match (n.saturated(), g.saturated()) {
                (false, false) => "tie",
                _ if (n.rate() - g.rate()).abs() < f64::EPSILON => "tie",
                _ if n.rate() > g.rate() => "holds",
                _ => "does not hold",
            };
            findings.push(finding(
                "netrig's server against nginx",
                verdict,
                format!(
                    "From one client host netrig's HTTP server {}; nginx {}.",
                    n.text(),
                    g.text()
                ),
                &[("netrig_per_s", n.rate()), ("nginx_per_s", g.rate())],
            ));
        }
        if let Some(f) = cpu_cost(
            &sw,
            "loopback",
            "the link costs more CPU per request than loopback",
            "Loopback in place of the link",
        ) {
            // The claim is the link's cost: loopback cheaper than the link holds it.
            let f = Finding {
                verdict: match f.verdict.as_str() {
                    "holds" => "does not hold".into(),
                    "does not hold" => "holds".into(),
                    v => v.into(),
                },
                text: format!(
                    "{} The claim judged: the link's path (veth and bridge, where a NIC driver would be) costs CPU \
                     that loopback does not.",
                    f.text
                ),
                ..f
            };
            summary.push(f.text.clone());
            findings.push(f);
        }
        if let Some(f) = cpu_cost(&sw, "ct-on", "conntrack on", "Tracking every connection") {
            summary.push(f.text.clone());
            findings.push(f);
        }
        if let Some(f) = conntrack_full(&sw) {
            summary.push(f.text.clone());
            findings.push(f);
        }
        for f in [syn_flood(&sw), half_closed(e, &sw)].into_iter().flatten() {
            summary.push(f.text.clone());
            findings.push(f);
        }
        (summary, findings)
    }
}

#[cfg(test)]
mod tests;
