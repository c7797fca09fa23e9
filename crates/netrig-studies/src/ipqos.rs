//! The HP-UX IPQoS study (plans/ipqos.toml, docs/studies/ipqos.md): what a QoS policy on the
//! sender costs per packet, and whether that cost grows with the packet rate.
//!
//! Each policy arm (an arm no other is compared against: the empty chain, the DSCP rule, on
//! each link) is read against its own baseline (no QoS on the same link) at every message size:
//! the change in local service demand per packet (`sd_local_packet`: the sender's CPU time per
//! TCP segment its kernel sent), else per KB, with its interval; throughput and local CPU beside
//! it. Whether the cost grows with the packet rate: the change at the message size with the
//! lowest packet rate against the one with the highest, by their intervals; where the packet
//! rate barely moves (a link-bound sweep) that is withheld, with the rates.

use crate::policy::{interval, mean_of, order, policies, segments_per_s};
use crate::{arm, comparison, cost_verdict, finding, point_value, tests, withheld, Finding, Study};
use netrig_experiment::document::PointOutcome;
use netrig_experiment::study::{change_text, profile_answer};

pub struct IpQos;

/// Below this ratio of the highest to the lowest packet rate a sweep says nothing about growth.
const RATE_SPREAD: f64 = 1.5;

/// What one policy arm costs at one point.
#[derive(Clone)]
struct Cost {
    size: String,
    /// The baseline's packets (segments sent) per second.
    rate: Option<f64>,
    /// The change in service demand (per packet when the runs count segments, else per KB).
    change: Option<(f64, f64, f64)>,
    text: String,
}

impl Study for IpQos {
    fn kind(&self) -> &'static str {
        "ipqos"
    }

    fn answer(&self, e: &netrig_experiment::document::Experiment) -> (Vec<String>, Vec<Finding>) {
        let mut summary = Vec::new();
        let mut findings = Vec::new();
        let Some(t) = tests(e, "tcp-stream").next() else {
            findings.push(withheld("tcp-stream", "the experiment ran no tcp-stream test"));
            summary.push("Withheld: the experiment ran no tcp-stream test.".into());
            return (summary, findings);
        };
        let policies = policies(e);
        if policies.is_empty() {
            findings.push(withheld(
                "policies",
                "the plan has no arm to judge against a baseline",
            ));
            summary.push("Withheld: the plan has no policy arm beside its baseline.".into());
            return (summary, findings);
        }
        let mut points: Vec<&PointOutcome> = t.points.iter().collect();
        points.sort_by_key(|p| point_value(p, "-m").and_then(|v| v.parse::<u64>().ok()));
        // A configuration on several places (dscp-rule-100m against no-qos-100m, dscp-rule-1g
        // against no-qos-1g): its costs pooled over the places, by configuration.
        let mut pooled: Vec<(String, Vec<Cost>, usize)> = Vec::new();
        for pol in &policies {
            let costs: Vec<Cost> = points
                .iter()
                .map(|p| point_cost(p, &pol.arm, &pol.baseline, &mut findings))
                .collect();
            let all: Vec<&Cost> = costs.iter().collect();
            let listed: Vec<String> = costs.iter().map(|c| c.text.clone()).collect();
            summary.push(format!(
                "{} against {}: service demand {}.",
                pol.arm,
                pol.baseline,
                listed.join("; ")
            ));
            findings.push(growth(&pol.arm, &all, &mut summary));
            findings.push(across_sizes(
                &pol.arm,
                &pol.baseline,
                &all,
                e.plan.order,
                &mut summary,
            ));
            if let Some((config, place)) = place(&pol.arm, &pol.baseline) {
                let on = costs.into_iter().map(|c| Cost {
                    size: format!("{} on {place}", c.size),
                    ..c
                });
                match pooled.iter_mut().find(|p| p.0 == config) {
                    Some(p) => {
                        p.1.extend(on);
                        p.2 += 1;
                    }
                    None => pooled.push((config.to_string(), on.collect(), 1)),
                }
            }
        }
        profile_words(&policies, &points, &mut summary, &mut findings);
        for (config, costs, places) in pooled.iter().filter(|p| p.2 > 1) {
            let all: Vec<&Cost> = costs.iter().collect();
            let f = growth(&format!("{config} over its {places} links"), &all, &mut summary);
            findings.push(Finding {
                topic: format!("{config}: cost against packet rate over the links"),
                ..f
            });
        }
        (summary, findings)
    }
}

/// Where each policy's CPU went (the profiles' difference against its baseline, per point and
/// end): a finding each; in the summary, each policy's at the smallest message (the most packets
/// per byte), and why an end's difference is withheld, said once.
fn profile_words(
    policies: &[crate::policy::Policy],
    points: &[&PointOutcome],
    summary: &mut Vec<String>,
    findings: &mut Vec<Finding>,
) {
    let mut withheld = Vec::new();
    for pol in policies {
        let mut first = None;
        for p in points {
            let size = point_value(p, "-m").unwrap_or("the plan's");
            let topic = format!("{} at -m {size}", pol.arm);
            let s = profile_answer(
                p,
                &pol.arm,
                &topic,
                &["netfilter", "qdisc"],
                findings,
                &mut withheld,
            );
            first = first.or(s.map(|s| format!("Where the CPU went at {size}-byte messages: {s}.")));
        }
        summary.extend(first);
    }
    for w in withheld {
        summary.push(format!("The profile difference is withheld {w}."));
    }
}

/// The configuration and the place of a policy arm named `<configuration>-<place>` against a
/// baseline named `<anything>-<place>` ("dscp-rule-1g" against "no-qos-1g": "dscp-rule", "1g").
fn place<'a>(arm: &'a str, baseline: &str) -> Option<(&'a str, &'a str)> {
    let (config, place) = arm.rsplit_once('-')?;
    let (_, base_place) = baseline.rsplit_once('-')?;
    (place == base_place).then_some((config, place))
}

/// The cost of `arm` against `base` at point `p`: a finding, and the phrase for the summary.
fn point_cost(p: &PointOutcome, arm_name: &str, base: &str, findings: &mut Vec<Finding>) -> Cost {
    let size = point_value(p, "-m").unwrap_or("the plan's").to_string();
    let topic = format!("{arm_name} at -m {size}");
    let rate = arm(p, base).and_then(|a| mean_of(&a.runs, segments_per_s));
    let rate_text = rate.map_or_else(String::new, |r| format!(", {r:.0} packets/s"));
    // Judged only with an interval: a change without one is withheld with the reason.
    let per_packet = comparison(p, arm_name, "sd_local_packet");
    let (c, unit) = match per_packet {
        Some(c) => (Some(c), "per packet"),
        None => (
            comparison(p, arm_name, "sd_local"),
            "per KB (no segment count in the runs)",
        ),
    };
    let Some(c) = c.filter(|c| interval(c).is_some()) else {
        let why = match c {
            Some(c) => match c.diff_pct {
                Some(d) => format!("{d:+.1} % with no interval: {}", c.method),
                None => c.method.clone(),
            },
            None => "no local service demand in both arms' runs".into(),
        };
        findings.push(withheld(
            topic,
            format!("{arm_name} against {base} at {size}-byte messages: the change in service demand is withheld ({why})"),
        ));
        return Cost {
            size: format!("{size} bytes"),
            rate,
            change: None,
            text: format!("withheld at {size} bytes ({why})"),
        };
    };
    let est = |a: &str| {
        crate::estimate(p, a, "sd_local_packet")
            .map(|e| e.mean)
            .unwrap_or(f64::NAN)
    };
    let (us_arm, us_base) = (est(arm_name), est(base));
    let others: Vec<String> = [("throughput", "throughput"), ("cpu_local", "local CPU")]
        .iter()
        .filter_map(|(m, label)| comparison(p, arm_name, m).map(|c| format!("{label} {}", change_text(c))))
        .collect();
    let us_text = if us_arm.is_finite() && us_base.is_finite() {
        format!(" ({us_arm:.3} against {us_base:.3} µs per packet)")
    } else {
        String::new()
    };
    let verdict = cost_verdict(c);
    let text = format!(
        "{arm_name} against {base} at {size}-byte messages{rate_text}: service demand {unit} {}{us_text}{}{}",
        change_text(c),
        if others.is_empty() { "" } else { "; " },
        others.join(", ")
    );
    let mut figures = vec![
        ("message_bytes", size.parse::<f64>().unwrap_or(f64::NAN)),
        ("sd_change_pct", c.diff_pct.unwrap_or(f64::NAN)),
        ("sd_change_low_pct", c.ci_low_pct.unwrap_or(f64::NAN)),
        ("sd_change_high_pct", c.ci_high_pct.unwrap_or(f64::NAN)),
        ("sd_per_packet_us", us_arm),
        ("baseline_sd_per_packet_us", us_base),
        ("baseline_packets_per_s", rate.unwrap_or(f64::NAN)),
    ];
    for m in ["throughput", "cpu_local"] {
        if let Some(d) = comparison(p, arm_name, m).and_then(|c| c.diff_pct) {
            figures.push((
                if m == "throughput" {
                    "throughput_change_pct"
                } else {
                    "cpu_change_pct"
                },
                d,
            ));
        }
    }
    findings.push(finding(topic, verdict, text, &figures));
    Cost {
        size: format!("{size} bytes"),
        rate,
        change: interval(c),
        text: format!("{} at {size} bytes{rate_text}", change_text(c)),
    }
}

/// Two-sided exact sign test: the probability, with no effect (each change as likely above 0 as
/// below), of a split of `n` at least as uneven as `k` above and `n - k` below.
pub fn sign_test(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let m = k.max(n - k);
    // P(X >= m) for X ~ Binomial(n, 1/2), by the binomial coefficients (n is a sweep's length).
    let mut c = 1.0f64;
    let mut tail = 0.0;
    for i in 0..=n {
        if i >= m {
            tail += c;
        }
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    (2.0 * tail / 2f64.powi(n as i32)).min(1.0)
}

/// Across the message sizes: is `arm`'s change in service demand above 0 at more of them than
/// chance allows (the sign test), when no single size's interval decides? Each size's runs are
/// runs of their own, so the sizes are independent measurements of one policy.
fn across_sizes(
    arm_name: &str,
    base: &str,
    costs: &[&Cost],
    order: netrig_experiment::plan::Order,
    summary: &mut Vec<String>,
) -> Finding {
    let topic = format!("{arm_name}: cost across the message sizes");
    let changes: Vec<f64> = costs
        .iter()
        .filter_map(|c| c.change.map(|x| x.0))
        .filter(|d| *d != 0.0)
        .collect();
    let n = changes.len();
    if n < 5 {
        return withheld(
            topic,
            format!("{arm_name} across the message sizes: withheld: {n} sizes have a change (the sign test needs 5 or more to reach p < 0.05)"),
        );
    }
    let k = changes.iter().filter(|d| **d > 0.0).count();
    let p = sign_test(k, n);
    let mut sorted = changes.clone();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let verdict = match (p < 0.05, 2 * k > n) {
        (true, true) => "holds",
        (true, false) => "does not hold",
        _ => "tie",
    };
    let caveat = match order {
        netrig_experiment::plan::Order::Interleaved => "; the arms ran in the same order every round, so a steady effect of their order is not excluded (order = \"randomised\" excludes it)",
        netrig_experiment::plan::Order::Randomised => "; the arms ran in a random order each round",
    };
    let text = format!(
        "{arm_name} against {base} across {n} message sizes: service demand above it at {k} of {n} (two-sided sign test p = {p:.3}; median change {median:+.1} %){caveat}: {}",
        match verdict {
            "holds" => "the policy costs more, consistently, even where no single size's interval shows it",
            "does not hold" => "it measured cheaper, consistently",
            _ => "no consistent direction",
        }
    );
    if verdict != "tie" {
        summary.push(format!("{text}."));
    }
    finding(
        topic,
        verdict,
        text,
        &[
            ("sizes", n as f64),
            ("sizes_above", k as f64),
            ("sign_test_p", p),
            ("median_change_pct", median),
        ],
    )
}

/// Whether `arm`'s cost grows with the packet rate: its change at the lowest packet rate
/// against the highest, by their intervals.
fn growth(arm_name: &str, costs: &[&Cost], summary: &mut Vec<String>) -> Finding {
    let topic = format!("{arm_name}: cost against packet rate");
    let rated: Vec<&&Cost> = costs
        .iter()
        .filter(|c| c.rate.is_some() && c.change.is_some())
        .collect();
    let (Some(lo), Some(hi), true) = (
        rated
            .iter()
            .min_by(|a, b| a.rate.partial_cmp(&b.rate).expect("finite")),
        rated
            .iter()
            .max_by(|a, b| a.rate.partial_cmp(&b.rate).expect("finite")),
        rated.len() >= 2,
    ) else {
        let f = withheld(
            topic,
            format!("{arm_name}: whether the cost grows with the packet rate is withheld: fewer than two message sizes have both a change with its interval and a packet count ({} of {})", rated.len(), costs.len()),
        );
        summary.push(format!("{}.", f.text));
        return f;
    };
    let (rl, rh) = (lo.rate.unwrap_or(0.0), hi.rate.unwrap_or(0.0));
    if rh < RATE_SPREAD * rl {
        let f = withheld(
            topic,
            format!(
                "{arm_name}: whether the cost grows with the packet rate is withheld: the packet rate barely moves across the message sizes ({rl:.0} to {rh:.0} packets/s: the link, not the message size, sets it)"
            ),
        );
        summary.push(format!("{}.", f.text));
        return f;
    }
    let (a, b) = (lo.change.expect("measured"), hi.change.expect("measured"));
    let (verdict, how) = match order(a, b) {
        "above" => ("holds", "grows with the packet rate"),
        "below" => ("does not hold", "shrinks as the packet rate grows"),
        _ => (
            "tie",
            "does not measurably change with the packet rate (the intervals overlap)",
        ),
    };
    let text = format!(
        "{arm_name}: the cost {how}: {:+.1} % [{:+.1} %, {:+.1} %] at {} ({rl:.0} packets/s) against {:+.1} % [{:+.1} %, {:+.1} %] at {} ({rh:.0} packets/s)",
        a.0, a.1, a.2, lo.size, b.0, b.1, b.2, hi.size
    );
    summary.push(format!("{text}."));
    finding(
        topic,
        verdict,
        text,
        &[
            ("low_rate_packets_per_s", rl),
            ("high_rate_packets_per_s", rh),
            ("low_rate_change_pct", a.0),
            ("high_rate_change_pct", b.0),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{experiment, set_segments, study_plan};
    use netrig_experiment::document::Experiment;

    /// The plan but its name and its `[study]` ([`plan`]).
    const PLAN: &str = r#"
baseline = "no-qos-100m"
[[test]]
kind = "tcp-stream"
sweep = { "-m" = [32, 2920] }
[[arm]]
name = "no-qos-100m"
[[arm]]
name = "dscp-rule-100m"
[[arm]]
name = "no-qos-1g"
[[arm]]
name = "dscp-rule-1g"
baseline = "no-qos-1g"
"#;

    fn plan() -> String {
        let question = "What does the policy cost per packet, and does it grow with the packet rate?";
        study_plan("ipqos", question, 30, PLAN)
    }

    /// Each run: 1 s, 100 % of 2 CPUs; `packets(point, arm)` segments; the DSCP arms' service
    /// demand `cost(point, arm)` times their baseline's.
    fn study(packets: impl Fn(usize, usize) -> u64, cost: impl Fn(usize, usize) -> f64) -> Experiment {
        experiment(
            &plan(),
            &[("tcp-stream", "-m", &["32", "2920"])],
            |_, p, a, r, run| {
                run.summary.elapsed_s = 1.0;
                run.summary.bytes = 10_000_000;
                let jitter = 1.0 + 0.002 * r as f64;
                run.summary.service_demand.local = Some(20.0 * cost(p, a) * jitter);
                run.summary.cpu.local_pct = Some(100.0);
                set_segments(run, packets(p, a));
            },
        )
    }

    #[test]
    fn a_small_cost_at_every_one_of_seven_sizes_holds_across_them() {
        // The DSCP rule 1 % dearer per packet at each of seven sizes on 1g; on 100m alternately
        // dearer and cheaper.
        let sizes = ["32", "64", "128", "256", "512", "1024", "2920"];
        let e = experiment(&plan(), &[("tcp-stream", "-m", &sizes)], |_, p, a, r, run| {
            run.summary.elapsed_s = 1.0;
            run.summary.bytes = 10_000_000;
            let jitter = 1.0 + 0.002 * r as f64;
            // Arms: no-qos-100m, dscp-rule-100m, no-qos-1g, dscp-rule-1g.
            let cost = match a {
                3 => 1.01,
                1 if p % 2 == 0 => 1.01,
                1 => 0.99,
                _ => 1.0,
            };
            run.summary.service_demand.local = Some(20.0 * cost * jitter);
            run.summary.cpu.local_pct = Some(100.0);
            set_segments(run, 10_000);
        });
        let (summary, f) = IpQos.answer(&e);
        let d = verdict(&f, "dscp-rule-1g: cost across the message sizes");
        assert_eq!(d.verdict, "holds", "{}", d.text);
        assert!(
            d.text
                .contains("above it at 7 of 7 (two-sided sign test p = 0.016"),
            "{}",
            d.text
        );
        assert!(d.text.contains("same order every round"), "{}", d.text);
        let c = verdict(&f, "dscp-rule-100m: cost across the message sizes");
        assert_eq!(c.verdict, "tie", "{}", c.text);
        assert!(summary
            .iter()
            .any(|s| s.starts_with("dscp-rule-1g against no-qos-1g across 7 message sizes")));
    }

    fn verdict<'a>(f: &'a [Finding], topic: &str) -> &'a Finding {
        f.iter()
            .find(|f| f.topic == topic)
            .unwrap_or_else(|| panic!("no finding {topic}: {f:#?}"))
    }

    #[test]
    fn a_cost_that_grows_with_the_packet_rate_is_said_so_per_link() {
        // 100 Mbit/s: 8,000 packets/s at both sizes; 1 Gbit/s: 80,000 at 32 bytes, 10,000 at 2920.
        let e = study(
            |p, a| {
                if a >= 2 && p == 0 {
                    80_000
                } else if a >= 2 {
                    10_000
                } else {
                    8_000
                }
            },
            |p, a| match (p, a) {
                (0, 3) => 1.20, // +20 % at the high rate
                (1, 3) => 1.02,
                (_, 1) => 1.05,
                _ => 1.0,
            },
        );
        let (summary, f) = IpQos.answer(&e);
        let at32 = verdict(&f, "dscp-rule-1g at -m 32");
        assert_eq!(at32.verdict, "holds", "{at32:#?}");
        assert!(
            at32.text.contains("+20.0 %") && at32.text.contains("80000 packets/s"),
            "{}",
            at32.text
        );
        assert!(
            at32.text.contains("against no-qos-1g"),
            "its own link's baseline: {}",
            at32.text
        );
        let g = verdict(&f, "dscp-rule-1g: cost against packet rate");
        assert_eq!(g.verdict, "holds", "{g:#?}");
        assert!(g.text.contains("grows with the packet rate"), "{}", g.text);
        // The 100 Mbit/s link: the packet rate does not move: withheld with the rates.
        let g100 = verdict(&f, "dscp-rule-100m: cost against packet rate");
        assert_eq!(g100.verdict, "withheld");
        assert!(g100.text.contains("8000 to 8000 packets/s"), "{}", g100.text);
        assert!(
            summary
                .iter()
                .any(|s| s.starts_with("dscp-rule-1g against no-qos-1g: service demand +20.0 %")),
            "{summary:#?}"
        );
        // Over both links: the DSCP rule's lowest rate (8,000 packets/s on 100m, +5 %) against
        // its highest (80,000 on 1g at 32 bytes, +20 %): it grows.
        let both = verdict(&f, "dscp-rule: cost against packet rate over the links");
        assert_eq!(both.verdict, "holds", "{both:#?}");
        assert!(
            both.text.contains("32 bytes on 1g (80000 packets/s)"),
            "{}",
            both.text
        );
        assert!(
            both.text
                .starts_with("dscp-rule over its 2 links: the cost grows"),
            "{}",
            both.text
        );
        // Only the policies are judged: no-qos-1g (a baseline) is not.
        assert!(f.iter().all(|f| !f.topic.starts_with("no-qos")));
    }

    #[test]
    fn the_sign_test_is_the_binomial_tail_both_ways() {
        assert!((sign_test(7, 7) - 2.0 / 128.0).abs() < 1e-12);
        assert!((sign_test(0, 7) - 2.0 / 128.0).abs() < 1e-12);
        assert!((sign_test(5, 7) - 2.0 * 29.0 / 128.0).abs() < 1e-12);
        assert_eq!(sign_test(3, 6), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // Two sizes cannot decide: the finding is withheld with the reason.
        let e = study(|_, _| 10_000, |_, a| if a == 2 { 1.5 } else { 1.0 });
        let (_, f) = IpQos.answer(&e);
        let w = verdict(&f, "dscp-rule-100m: cost across the message sizes");
        assert_eq!(w.verdict, "withheld", "{w:#?}");
        assert!(
            w.text.contains("sizes have a change (the sign test needs 5"),
            "{}",
            w.text
        );
    }

    #[test]
    fn an_equal_cost_is_a_tie_with_its_interval_and_a_cheaper_one_does_not_hold() {
        let e = study(
            |p, a| if a >= 2 && p == 0 { 80_000 } else { 10_000 },
            |_, a| if a == 1 { 0.9 } else { 1.0 },
        );
        let (_, f) = IpQos.answer(&e);
        let tie = verdict(&f, "dscp-rule-1g at -m 32");
        assert_eq!(tie.verdict, "tie", "{tie:#?}");
        assert!(
            tie.text.contains(" % ± ") || tie.text.contains(" %, "),
            "the interval is stated: {}",
            tie.text
        );
        assert_eq!(
            verdict(&f, "dscp-rule-1g: cost against packet rate").verdict,
            "tie"
        );
        assert_eq!(verdict(&f, "dscp-rule-100m at -m 2920").verdict, "does not hold");
    }

    #[test]
    fn without_a_segment_count_the_cost_is_per_kb_and_growth_is_withheld() {
        let mut e = study(|_, _| 8_000, |_, a| if a % 2 == 1 { 1.1 } else { 1.0 });
        for p in &mut e.tests[0].points {
            for a in &mut p.arms {
                for r in &mut a.runs {
                    r.witness.checks.retain(|c| c.figure != "TCP data segments");
                }
                a.estimates.retain(|x| x.metric != "sd_local_packet");
            }
            p.comparisons.retain(|c| c.metric != "sd_local_packet");
        }
        let (_, f) = IpQos.answer(&e);
        let c = verdict(&f, "dscp-rule-1g at -m 32");
        assert_eq!(c.verdict, "holds");
        assert!(c.text.contains("per KB (no segment count"), "{}", c.text);
        assert_eq!(
            verdict(&f, "dscp-rule-1g: cost against packet rate").verdict,
            "withheld"
        );
    }

    #[test]
    fn one_run_per_arm_withholds_the_change_with_the_reason() {
        let mut e = study(|_, _| 8_000, |_, _| 1.0);
        for p in &mut e.tests[0].points {
            for a in &mut p.arms {
                a.runs.truncate(1);
            }
            p.comparisons.clear();
            for i in [1usize, 3] {
                let b = e.plan.baseline_of(i);
                p.comparisons.extend(netrig_experiment::analysis::compare_within(
                    &p.arms[b],
                    &p.arms[i],
                    95.0,
                    Some(5.0),
                ));
            }
        }
        let (summary, f) = IpQos.answer(&e);
        let c = verdict(&f, "dscp-rule-1g at -m 32");
        assert_eq!(c.verdict, "withheld", "{c:#?}");
        assert!(c.text.contains("withheld ("), "the reason: {}", c.text);
        assert!(!summary.is_empty());
    }
}
