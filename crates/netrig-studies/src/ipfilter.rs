//! The HP-UX IPFilter study (plans/ipfilter.toml, docs/studies/ipfilter.md): what each kind of
//! rule on the responder costs inbound (tcp-stream to it), outbound (tcp-maerts from it) and per
//! connection (tcp-crr), and how much of that receive offload (GRO, the study's LRO) hides.
//!
//! Each policy arm (an arm no other is compared against: stateless, stateful, with GRO and
//! without) is read against its own baseline (no filter, GRO as in the arm) in each test: the
//! change in the headline figure (throughput, transactions/s) with its interval, the responder's
//! CPU and service demand beside it. What GRO hides: for each rule kind, its cost with GRO
//! (arm `X`) against its cost without (arm `X-nogro`), by their intervals.

use crate::policy::{interval, order, policies, Policy};
use crate::{comparison, cost_verdict, finding, tests, withheld, Finding, Study};
use netrig_experiment::document::{Experiment, PointOutcome};
use netrig_experiment::study::{change_text, profile_answer};

pub struct IpFilter;

/// The tests the study reads: kind, what it measures of the responder, its headline metric.
const DIRECTIONS: &[(&str, &str, &str)] = &[
    ("tcp-stream", "inbound", "throughput"),
    ("tcp-maerts", "outbound", "throughput"),
    ("tcp-crr", "per connection", "transactions_per_s"),
];

/// The suffix of an arm that is another arm with receive offload off.
const NO_GRO: &str = "-nogro";

impl Study for IpFilter {
    fn kind(&self) -> &'static str {
        "ipfilter"
    }

    fn answer(&self, e: &Experiment) -> (Vec<String>, Vec<Finding>) {
        let mut summary = Vec::new();
        let mut findings = Vec::new();
        let mut profile_withheld = Vec::new();
        let policies = policies(e);
        if policies.is_empty() {
            findings.push(withheld(
                "rules",
                "the plan has no arm to judge against a baseline",
            ));
            summary.push("Withheld: the plan has no rule arm beside its baseline.".into());
            return (summary, findings);
        }
        for &(kind, direction, metric) in DIRECTIONS {
            let Some(p) = tests(e, kind).next().and_then(|t| t.points.first()) else {
                findings.push(withheld(
                    format!("{direction} ({kind})"),
                    format!("the cost {direction} is withheld: the experiment ran no {kind} test"),
                ));
                continue;
            };
            let phrases: Vec<String> = policies
                .iter()
                .map(|pol| cost(p, pol, kind, direction, metric, &mut findings))
                .collect();
            summary.push(format!(
                "{} ({kind}, {}): {}.",
                capital(direction),
                if metric == "throughput" {
                    "throughput"
                } else {
                    "transactions/s"
                },
                phrases.join("; ")
            ));
            for pol in &policies {
                let topic = format!("{} {direction}", pol.arm);
                let groups = ["netfilter", "conntrack"];
                let s = profile_answer(p, &pol.arm, &topic, &groups, &mut findings, &mut profile_withheld);
                // The summary names the rules with GRO as the plan's link has it; the findings all.
                if !pol.arm.ends_with(NO_GRO) {
                    summary.extend(s.map(|s| format!("Where the CPU went {direction} ({kind}): {s}.")));
                }
            }
            for pol in policies.iter().filter(|p| !p.arm.ends_with(NO_GRO)) {
                let off = format!("{}{NO_GRO}", pol.arm);
                if policies.iter().any(|p| p.arm == off) {
                    let f = hidden(p, &pol.arm, &off, kind, direction, metric);
                    summary.push(format!("{}.", f.text));
                    findings.push(f);
                }
            }
        }
        for w in profile_withheld {
            summary.push(format!("The profile difference is withheld {w}."));
        }
        (summary, findings)
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// What `pol` costs in test `kind` at `p`: a finding, and the phrase for the summary.
fn cost(
    p: &PointOutcome,
    pol: &Policy,
    kind: &str,
    direction: &str,
    metric: &str,
    findings: &mut Vec<Finding>,
) -> String {
    let topic = format!("{} {direction}", pol.arm);
    let c = comparison(p, &pol.arm, metric);
    let Some(c) = c.filter(|c| interval(c).is_some()) else {
        let why = match c {
            Some(c) => match c.diff_pct {
                Some(d) => format!("{d:+.1} % with no interval: {}", c.method),
                None => c.method.clone(),
            },
            None => format!("no {metric} in both arms' runs"),
        };
        findings.push(withheld(
            topic,
            format!(
                "{} against {} {direction} ({kind}): the change is withheld ({why})",
                pol.arm, pol.baseline
            ),
        ));
        return format!("{} withheld", pol.arm);
    };
    let responder: Vec<String> = [
        ("cpu_remote", "responder CPU"),
        ("sd_remote", "responder service demand"),
    ]
    .iter()
    .filter_map(|(m, label)| comparison(p, &pol.arm, m).map(|c| format!("{label} {}", change_text(c))))
    .collect();
    let what = if metric == "throughput" {
        "throughput"
    } else {
        "transactions/s"
    };
    let text = format!(
        "{} against {} {direction} ({kind}): {what} {}{}{}",
        pol.arm,
        pol.baseline,
        change_text(c),
        if responder.is_empty() { "" } else { "; " },
        responder.join(", ")
    );
    let mut figures = vec![
        ("change_pct", c.diff_pct.unwrap_or(f64::NAN)),
        ("change_low_pct", c.ci_low_pct.unwrap_or(f64::NAN)),
        ("change_high_pct", c.ci_high_pct.unwrap_or(f64::NAN)),
    ];
    for (m, name) in [
        ("cpu_remote", "responder_cpu_change_pct"),
        ("sd_remote", "responder_sd_change_pct"),
    ] {
        if let Some(d) = comparison(p, &pol.arm, m).and_then(|c| c.diff_pct) {
            figures.push((name, d));
        }
    }
    findings.push(finding(topic, cost_verdict(c), text, &figures));
    format!("{} {}", pol.arm, change_text(c))
}

/// How much of rule `on`'s cost receive offload hides: its change with GRO against the same
/// rule's (`off`) without, by their intervals.
fn hidden(p: &PointOutcome, on: &str, off: &str, kind: &str, direction: &str, metric: &str) -> Finding {
    let topic = format!("{on} {direction}: what GRO hides");
    let get = |arm: &str| comparison(p, arm, metric).and_then(interval);
    let (Some(a), Some(b)) = (get(on), get(off)) else {
        return withheld(
            topic,
            format!(
                "How much of {on}'s cost {direction} ({kind}) GRO hides is withheld: {} has no change with an interval",
                if get(on).is_none() { on } else { off }
            ),
        );
    };
    // A cost is a fall of the headline figure: without GRO, more cost is a change below.
    let gap = a.0 - b.0;
    let (verdict, how) = match order(a, b) {
        "below" => ("holds", format!("GRO hides {gap:.1} points of it")),
        "above" => (
            "does not hold",
            format!("it costs {:.1} points less without GRO", -gap),
        ),
        _ => (
            "tie",
            format!(
                "GRO hides no measurable part of it (the intervals overlap: {gap:+.1} points between them)"
            ),
        ),
    };
    let study = if on == "stateful" && kind == "tcp-stream" {
        " (the study: 3.19 % of inbound throughput with LRO, 12.58 % without)"
    } else {
        ""
    };
    let text = format!(
        "{on} {direction} ({kind}): {:+.1} % [{:+.1} %, {:+.1} %] with GRO, {:+.1} % [{:+.1} %, {:+.1} %] without: {how}{study}",
        a.0, a.1, a.2, b.0, b.1, b.2,
    );
    finding(
        topic,
        verdict,
        text,
        &[
            ("with_gro_change_pct", a.0),
            ("without_gro_change_pct", b.0),
            ("hidden_points", gap),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{experiment, study_plan};

    /// The plan but its name and its `[study]` ([`study_plan`]).
    const PLAN: &str = r#"
baseline = "no-filter"
[[test]]
kind = "tcp-stream"
[[test]]
kind = "tcp-maerts"
[[test]]
kind = "tcp-crr"
[[arm]]
name = "no-filter"
[[arm]]
name = "stateless"
[[arm]]
name = "stateful"
[[arm]]
name = "no-filter-nogro"
[[arm]]
name = "stateless-nogro"
baseline = "no-filter-nogro"
[[arm]]
name = "stateful-nogro"
baseline = "no-filter-nogro"
"#;

    /// Each arm's headline figure is `factor(kind, arm)` times 1 Gbit/s (or 10,000 trans/s).
    fn study(factor: impl Fn(&str, usize) -> f64) -> Experiment {
        let none: &[&str] = &[];
        experiment(
            &study_plan("ipfilter", "What does each kind of rule cost?", 25, PLAN),
            &[
                ("tcp-stream", "", none),
                ("tcp-maerts", "", none),
                ("tcp-crr", "", none),
            ],
            |kind, _, a, r, run| {
                let f = factor(kind, a) * (1.0 + 0.002 * r as f64);
                if kind == "tcp-crr" {
                    run.summary.transactions_per_s = Some(10_000.0 * f);
                } else {
                    run.summary.throughput_bps = 1e9 * f;
                }
                run.summary.cpu.remote_pct = Some(50.0);
            },
        )
    }

    fn get<'a>(f: &'a [Finding], topic: &str) -> &'a Finding {
        f.iter()
            .find(|f| f.topic == topic)
            .unwrap_or_else(|| panic!("no finding {topic}: {f:#?}"))
    }

    #[test]
    fn the_study_shape_stateful_costs_more_without_gro() {
        // The study's shape: stateful -3 % inbound with offload, -12.5 % without; stateless
        // equal to none; per connection stateful -20 %.
        let e = study(|kind, a| match (kind, a) {
            ("tcp-stream", 2) => 0.97,
            ("tcp-stream", 5) => 0.875,
            ("tcp-crr", 2) | ("tcp-crr", 5) => 0.80,
            _ => 1.0,
        });
        let (summary, f) = IpFilter.answer(&e);
        let sf = get(&f, "stateful inbound");
        assert_eq!(sf.verdict, "holds", "{sf:#?}");
        assert!(sf.text.contains("throughput -3.0 %"), "{}", sf.text);
        let off = get(&f, "stateful-nogro inbound");
        assert!(
            off.text.contains("against no-filter-nogro"),
            "its own baseline: {}",
            off.text
        );
        let h = get(&f, "stateful inbound: what GRO hides");
        assert_eq!(h.verdict, "holds", "{h:#?}");
        assert!(
            h.text.contains("GRO hides 9.5 points") && h.text.contains("12.58 %"),
            "{}",
            h.text
        );
        assert_eq!(get(&f, "stateless inbound").verdict, "tie");
        assert!(
            get(&f, "stateless inbound").text.contains(" %"),
            "the interval is stated"
        );
        assert_eq!(get(&f, "stateless inbound: what GRO hides").verdict, "tie");
        assert_eq!(get(&f, "stateful per connection").verdict, "holds");
        assert_eq!(get(&f, "stateless outbound").verdict, "tie");
        assert!(
            summary[0].starts_with("Inbound (tcp-stream, throughput): stateless "),
            "{summary:#?}"
        );
        assert!(
            f.iter().all(|f| !f.topic.starts_with("no-filter")),
            "baselines are not judged"
        );
        // Runs without profiles: the difference is withheld, and the summary says why once.
        assert_eq!(
            get(&f, "stateful inbound: where the CPU went").verdict,
            "withheld"
        );
        assert!(
            summary.contains(&"The profile difference is withheld the runs were not profiled (profile = true in the plan profiles them).".to_string()),
            "{summary:#?}"
        );
    }

    /// With profiles: each rule arm's netfilter work (stateful: conntrack's too) against its
    /// baseline, in the findings and the summary; the agent's end withheld, said once.
    #[test]
    fn the_profile_difference_is_in_the_words() {
        let e = experiment(
            &study_plan("ipfilter", "What does each kind of rule cost?", 25, PLAN),
            &[("tcp-stream", "", &[])],
            |_, _, a, r, run| {
                let j = r as u64 * 2;
                let (nf, ct) = match a {
                    1 | 4 => (80 + j, j),
                    2 | 5 => (90 + j, 40 + j),
                    _ => (j, j),
                };
                run.profile = Some(netrig_experiment::fixtures::profile(
                    &[("tcp", 300 + j), ("netfilter", nf), ("conntrack", ct)],
                    &[
                        ("tcp_sendmsg", 300 + j),
                        ("nft_do_chain", nf),
                        ("nf_conntrack_in", ct),
                    ],
                    1000.0,
                ));
            },
        );
        let (summary, f) = IpFilter.answer(&e);
        let sf = get(
            &f,
            "stateful inbound: where the CPU went, the client's host (local)",
        );
        assert_eq!(sf.verdict, "holds", "{sf:#?}");
        assert!(
            sf.text.contains("netfilter +")
                && sf.text.contains("conntrack +")
                && sf.text.contains("nft_do_chain +"),
            "{}",
            sf.text
        );
        assert!(sf.figures["netfilter_demand_change"].as_f64().unwrap() > 80.0);
        let remote = get(
            &f,
            "stateful inbound: where the CPU went, the agent's host (remote)",
        );
        assert_eq!(remote.verdict, "withheld");
        assert!(
            summary.iter().any(|s| s.starts_with("Where the CPU went inbound (tcp-stream): stateful against no-filter")),
            "{summary:#?}"
        );
        let said: Vec<&String> = summary
            .iter()
            .filter(|s| s.starts_with("The profile difference is withheld"))
            .collect();
        assert_eq!(said.len(), 1, "said once: {summary:#?}");
        assert!(
            said[0].contains("the agent's end is not profiled (test)"),
            "{}",
            said[0]
        );
    }

    #[test]
    fn a_rule_that_seems_to_help_does_not_hold_and_a_missing_test_is_withheld() {
        let mut e = study(|kind, a| if kind == "tcp-maerts" && a == 1 { 1.10 } else { 1.0 });
        e.tests.retain(|t| t.kind != "tcp-crr");
        let (_, f) = IpFilter.answer(&e);
        assert_eq!(get(&f, "stateless outbound").verdict, "does not hold");
        let crr = get(&f, "per connection (tcp-crr)");
        assert_eq!(crr.verdict, "withheld");
        assert!(crr.text.contains("no tcp-crr test"), "{}", crr.text);
    }

    #[test]
    fn one_run_withholds_the_change_and_what_gro_hides() {
        let mut e = study(|_, a| if a == 2 { 0.9 } else { 1.0 });
        for t in &mut e.tests {
            for p in &mut t.points {
                for a in &mut p.arms {
                    a.runs.truncate(1);
                }
                p.comparisons.clear();
                for i in 1..p.arms.len() {
                    let b = e.plan.baseline_of(i);
                    if b != i {
                        p.comparisons.extend(netrig_experiment::analysis::compare_within(
                            &p.arms[b],
                            &p.arms[i],
                            95.0,
                            Some(5.0),
                        ));
                    }
                }
            }
        }
        let (_, f) = IpFilter.answer(&e);
        let s = get(&f, "stateful inbound");
        assert_eq!(s.verdict, "withheld");
        assert!(s.text.contains("withheld ("), "{}", s.text);
        assert_eq!(get(&f, "stateful inbound: what GRO hides").verdict, "withheld");
    }
}
