//! The saturation point of an open-loop rate sweep: the first rate at which
//! the server stops keeping up, as httperf's users read it off a reply-rate
//! plot (the IA64 Linux study's "stopped making progress").
//!
//! Along a sweep of a test whose runs have an offered rate (open loop:
//! `summary.schedule`, the requests due in the window), one arm's points in
//! the sweep's order; the first point where any of these holds is where it
//! saturated:
//!
//! - **the reply rate stops following the request rate**: transactions
//!   (replies) per second below [`FOLLOW`] × the offered rate;
//! - **errors**: more than [`ERRORS_PCT`] % of the transactions failed
//!   (refused, reset, timed out, no local port, ...);
//! - **latency climbs**: the 99th percentile above [`LATENCY_FACTOR`] × the
//!   lightest load's, and at least [`LATENCY_FLOOR_US`] above it (a
//!   loopback p99 of 30 µs that becomes 300 µs is a timer's noise, not a
//!   server falling behind).
//!
//! Each figure is the point's mean over its runs. A sweep whose runs have no
//! offered rate (closed loop, streams) has no saturation point.

use crate::experiment::TestOutcome;

pub use crate::experiment::saturation::Saturation;

/// Replies/s below this share of the offered rate: not keeping up.
pub const FOLLOW: f64 = 0.95;
/// More than this share of transactions failing, in percent: saturated.
pub const ERRORS_PCT: f64 = 1.0;
/// p99 this many times the lightest load's ...
pub const LATENCY_FACTOR: f64 = 10.0;
/// ... and at least this much above it, in µs.
pub const LATENCY_FLOOR_US: f64 = 1000.0;

/// The saturation point of each arm of `test`, for arms that have one.
pub fn of_test(test: &TestOutcome) -> Vec<Saturation> {
    if test.points.len() < 2 {
        return Vec::new();
    }
    let arms: Vec<String> = test
        .points
        .iter()
        .flat_map(|p| p.arms.iter().map(|a| a.arm.clone()))
        .fold(Vec::new(), |mut v, a| {
            if !v.contains(&a) {
                v.push(a);
            }
            v
        });
    arms.iter().filter_map(|arm| of_arm(test, arm)).collect()
}

fn of_arm(test: &TestOutcome, arm: &str) -> Option<Saturation> {
    let mut lightest_p99: Option<f64> = None;
    let mut kept: Option<f64> = None;
    for (i, p) in test.points.iter().enumerate() {
        let Some(a) = p.arms.iter().find(|a| a.arm == arm) else {
            continue;
        };
        let mean = |m: &str| a.estimate(m).map(|e| e.mean).filter(|v| v.is_finite());
        let (Some(offered), Some(replies)) = (mean("offered_per_s"), mean("transactions_per_s")) else {
            continue;
        };
        let p99 = mean("latency_p99");
        if lightest_p99.is_none() {
            lightest_p99 = p99;
        }
        let reason = if offered > 0.0 && replies < FOLLOW * offered {
            Some(format!(
                "the reply rate ({replies:.0}/s) is {} % of the request rate offered ({offered:.0}/s), \
                 below the {:.0} % that keeps up",
                beside(100.0 * replies / offered, 100.0 * FOLLOW, 0),
                100.0 * FOLLOW
            ))
        } else if let Some(e) = mean("errors_pct").filter(|e| *e > ERRORS_PCT) {
            Some(format!(
                "{} % of the requests failed, more than {ERRORS_PCT} %",
                beside(e, ERRORS_PCT, 1)
            ))
        } else if let (Some(now), Some(base)) = (p99, lightest_p99) {
            (now > LATENCY_FACTOR * base && now - base >= LATENCY_FLOOR_US).then(|| {
                format!(
                    "the 99th percentile ({:.1} ms) is {}x the lightest load's ({:.2} ms), more than \
                     {LATENCY_FACTOR}x and {:.0} ms above it",
                    now / 1e3,
                    beside(now / base.max(f64::MIN_POSITIVE), LATENCY_FACTOR, 0),
                    base / 1e3,
                    LATENCY_FLOOR_US / 1e3
                )
            })
        } else {
            None
        };
        match reason {
            Some(reason) => {
                return Some(Saturation {
                    arm: arm.to_string(),
                    point: i,
                    values: p.point.values.clone(),
                    offered_per_s: offered,
                    replies_per_s: replies,
                    reason,
                    highest_kept_per_s: kept,
                })
            }
            None => kept = Some(offered),
        }
    }
    None
}

/// `value` with the fewest decimals, from `decimals`, that still show on
/// which side of `limit` it lies: a reply rate of 94.97 % of the offered
/// one prints as 94.97, not as 95, which would read as meeting a rule
/// (below 95 %) that it met.
fn beside(value: f64, limit: f64, decimals: usize) -> String {
    for d in decimals..=6 {
        let text = format!("{value:.d$}");
        let shown: f64 = text.parse().unwrap_or(value);
        if shown.partial_cmp(&limit) == value.partial_cmp(&limit) {
            return text;
        }
    }
    format!("{value}")
}

/// One line for a table: where it saturated and why.
pub fn describe(s: &Saturation, arms: usize) -> String {
    let at: Vec<String> = s.values.iter().map(|(o, v)| format!("{o} {v}")).collect();
    let arm = if arms > 1 {
        format!("{}: ", s.arm)
    } else {
        String::new()
    };
    let kept = match s.highest_kept_per_s {
        Some(k) => format!("; the highest rate it kept up with: {k:.0}/s"),
        None => "; it did not keep up at the lightest load".into(),
    };
    format!("{arm}saturated at {} ({}){kept}", at.join(" "), s.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Estimate;
    use crate::experiment::{ArmOutcome, PointOutcome};
    use crate::sweep::Point;

    fn est(metric: &str, mean: f64) -> Estimate {
        Estimate {
            metric: metric.into(),
            unit: String::new(),
            n: 1,
            mean,
            std_dev: None,
            min: mean,
            max: mean,
            median: mean,
            level: 95.0,
            ci_low: None,
            ci_high: None,
            half_width_pct: None,
            merged: None,
        }
    }

    /// A sweep whose points have (offered, replies, errors %, p99 µs).
    fn sweep(points: &[(f64, f64, f64, f64)]) -> TestOutcome {
        TestOutcome {
            kind: "http".into(),
            args: vec![],
            points: points
                .iter()
                .map(|&(o, r, e, p)| PointOutcome {
                    point: Point {
                        values: vec![("--rate".into(), format!("{o}"))],
                    },
                    arms: vec![ArmOutcome {
                        profile: None,
                        arm: "a".into(),
                        runs: vec![],
                        estimates: vec![
                            est("offered_per_s", o),
                            est("transactions_per_s", r),
                            est("errors_pct", e),
                            est("latency_p99", p),
                        ],
                        confident: None,
                        lab: None,
                        clients: Vec::new(),
                    }],
                    comparisons: vec![],
                    profile_differences: vec![],
                })
                .collect(),
            saturation: vec![],
        }
    }

    #[test]
    fn the_reply_rate_falling_behind_marks_the_knee() {
        let t = sweep(&[
            (100.0, 100.0, 0.0, 200.0),
            (200.0, 199.0, 0.0, 210.0),
            (300.0, 240.0, 0.0, 220.0),
            (400.0, 250.0, 0.0, 230.0),
        ]);
        let s = of_test(&t);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].point, 2);
        assert_eq!(s[0].highest_kept_per_s, Some(200.0));
        assert!(s[0].reason.contains("is 80 % of"), "{}", s[0].reason);
        assert!(describe(&s[0], 1).starts_with("saturated at --rate 300"));
    }

    /// The rule is "below 95 %": 17096 of 18002 is 94.97 %, which rounded
    /// to a whole percent read "95 %" as if the rule were not met.
    #[test]
    fn the_reason_prints_enough_digits_to_show_the_rule() {
        let t = sweep(&[(9000.0, 9000.0, 0.0, 200.0), (18002.0, 17096.0, 0.0, 210.0)]);
        let r = &of_test(&t)[0].reason;
        assert!(r.contains("is 94.97 % of") && r.contains("below the 95 %"), "{r}");
        let t = sweep(&[(100.0, 100.0, 0.0, 200.0), (200.0, 200.0, 1.04, 200.0)]);
        let r = &of_test(&t)[0].reason;
        assert!(r.contains("1.04 % of the requests failed"), "{r}");
        let t = sweep(&[(100.0, 100.0, 0.0, 200.0), (200.0, 200.0, 0.0, 2040.0)]);
        let r = &of_test(&t)[0].reason;
        assert!(r.contains("is 10.2x the lightest"), "{r}");
        assert_eq!(beside(10.03, 10.0, 0), "10.03");
        assert_eq!(beside(80.0, 95.0, 0), "80");
        assert_eq!(beside(94.4, 95.0, 0), "94");
    }

    #[test]
    fn errors_and_latency_mark_it_too() {
        let t = sweep(&[(100.0, 100.0, 0.0, 200.0), (200.0, 200.0, 5.0, 200.0)]);
        assert!(of_test(&t)[0].reason.contains("5.0 % of the requests failed"));
        let t = sweep(&[(100.0, 100.0, 0.0, 200.0), (200.0, 200.0, 0.0, 20_000.0)]);
        assert!(of_test(&t)[0].reason.contains("99th percentile"));
        // Ten times a tiny p99 is not yet a millisecond more: noise, not saturation.
        let t = sweep(&[(100.0, 100.0, 0.0, 30.0), (200.0, 200.0, 0.0, 400.0)]);
        assert!(of_test(&t).is_empty());
    }

    #[test]
    fn a_sweep_that_keeps_up_or_has_no_offered_rate_has_none() {
        let t = sweep(&[(100.0, 100.0, 0.0, 200.0), (200.0, 198.0, 0.5, 250.0)]);
        assert!(of_test(&t).is_empty());
        let mut t = sweep(&[(100.0, 10.0, 0.0, 200.0), (200.0, 10.0, 0.0, 200.0)]);
        for p in &mut t.points {
            p.arms[0].estimates.retain(|e| e.metric != "offered_per_s");
        }
        assert!(of_test(&t).is_empty());
    }
}
