//! A plan that reproduces a study (docs/STUDIES.md): its `[study]` section names the study (the
//! module of `netrig-studies` that answers its question from the measurements), states the
//! question and how long the full form takes, and says what `--quick` reduces; the experiment
//! document then carries the answer in words ([`Answer`]), which the table, the HTML report and
//! the JSON show.
//!
//! ```toml
//! [study]
//! kind = "ipqos"
//! question = "What does the policy cost per packet, and does it grow with the packet rate?"
//! full_minutes = 40
//! [study.quick]          # what `netrig run PLAN --quick` changes
//! length = 1             # every test's and group member's -l
//! iterations = 2         # runs per point and arm (min = max)
//! points = 2             # each sweep thinned to its first and last value (N: evenly spaced)
//! ```

use crate::plan::Plan;

pub use crate::document::study::{Answer, Finding};
pub use crate::plan::study::{QuickPlan, StudyPlan};

/// `n` of `values`: the first, the last and evenly spaced between (all when n ≥ len).
pub fn thin<T: Clone>(values: &[T], n: usize) -> Vec<T> {
    let len = values.len();
    if n >= len || len == 0 {
        return values.to_vec();
    }
    if n <= 1 {
        return vec![values[0].clone()];
    }
    (0..n)
        .map(|i| values[(i * (len - 1) + (n - 1) / 2) / (n - 1)].clone())
        .collect()
}

/// Sets option `names[0]` (or whichever of `names` is there) to `value` in `args`.
pub fn set_option(args: &[String], names: &[&str], value: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut i = 0;
    let mut set = false;
    while i < args.len() {
        let a = &args[i];
        if names.contains(&a.as_str()) {
            out.push(a.clone());
            out.push(value.to_string());
            set = true;
            i += 2;
            continue;
        }
        if let Some(n) = names
            .iter()
            .find(|n| n.starts_with("--") && a.starts_with(&format!("{n}=")))
        {
            out.push(format!("{n}={value}"));
            set = true;
            i += 1;
            continue;
        }
        out.push(a.clone());
        i += 1;
    }
    if !set {
        out.push(names[0].to_string());
        out.push(value.to_string());
    }
    out
}

/// The plan reduced as its `[study.quick]` says (or [`QuickPlan::default`] without a study).
/// Errors name what the quick section refers to and the plan lacks.
pub fn apply_quick(plan: &mut Plan) -> Result<(), String> {
    let q = plan.study.as_ref().map(|s| s.quick.clone()).unwrap_or_default();
    if let Some(keep) = &q.tests {
        if let Some(bad) = keep.iter().find(|&&i| i >= plan.tests.len()) {
            return Err(format!(
                "study.quick.tests: test {bad} (the plan has {} tests, numbered from 0)",
                plan.tests.len()
            ));
        }
        plan.tests = keep.iter().map(|&i| plan.tests[i].clone()).collect();
    }
    if let Some(keep) = &q.groups {
        if let Some(bad) = keep.iter().find(|g| !plan.groups.iter().any(|x| &x.name == *g)) {
            return Err(format!("study.quick.groups: no group named {bad:?}"));
        }
        plan.groups.retain(|g| keep.contains(&g.name));
    }
    if let Some(keep) = &q.arms {
        if let Some(bad) = keep.iter().find(|a| !plan.arms.iter().any(|x| &x.name == *a)) {
            return Err(format!("study.quick.arms: no arm named {bad:?}"));
        }
        // The baselines always: the plan's, and those the kept arms name.
        let mut bases: Vec<String> = plan
            .arms
            .get(plan.baseline())
            .map(|a| a.name.clone())
            .into_iter()
            .collect();
        bases.extend(
            plan.arms
                .iter()
                .filter(|a| keep.contains(&a.name))
                .filter_map(|a| a.baseline.clone()),
        );
        plan.arms
            .retain(|a| keep.contains(&a.name) || bases.contains(&a.name));
    }
    let reduce = |args: &mut Vec<String>| {
        if let Some(l) = q.length {
            *args = set_option(args, &["-l", "--length", "-t", "--time"], &l.to_string());
        }
        if let Some(o) = q.omit {
            *args = set_option(args, &["--omit", "-O"], &o.to_string());
        }
    };
    for t in &mut plan.tests {
        reduce(&mut t.args);
        if let Some(n) = q.points {
            for s in &mut t.sweep {
                s.values = thin(&s.values, n.max(1));
            }
        }
    }
    for g in &mut plan.groups {
        for m in &mut g.tests {
            reduce(&mut m.args);
        }
    }
    if let Some(n) = q.iterations {
        let n = n.max(1);
        plan.iterations.max = n;
        plan.iterations.min = n;
    }
    if let Some(s) = &mut plan.study {
        s.ran_quick = true;
    }
    Ok(())
}

/// "12.0 % ± 3.1 %" for a comparison's change and its interval (the half-width of the interval
/// around the change; an asymmetric interval is given as [low, high]); "withheld (why)" when it
/// has none.
pub fn change_text(c: &crate::analysis::Comparison) -> String {
    match (c.diff_pct, c.ci_low_pct, c.ci_high_pct) {
        (Some(d), Some(lo), Some(hi)) => {
            let (a, b) = (d - lo, hi - d);
            if (a - b).abs() <= 0.05 * a.max(b).max(0.1) {
                format!("{d:+.1} % ± {:.1} %", (a + b) / 2.0)
            } else {
                format!("{d:+.1} % [{lo:+.1} %, {hi:+.1} %]")
            }
        }
        (Some(d), _, _) => format!("{d:+.1} % (no interval: {})", c.method),
        _ => format!("withheld ({})", c.method),
    }
}

/// What the profiles say of `arm` against its baseline at point `p` (docs/PROFILE.md,
/// "Experiments"), for a study's answer: a finding per end, topic "{topic}: where the CPU went,
/// {the end}", its text every group and function whose interval excludes 0. Its verdict is
/// "holds" where one of `groups` (where the study expects the cost: netfilter, qdisc) rose by
/// an interval that excludes 0, "does not hold" where one fell and none rose, "tie" otherwise,
/// and "withheld" (an end, or the whole point, without profiles in both arms) with the reason,
/// each distinct reason also put once in `withheld`. The client's end's sentence, for the
/// summary, unless it is withheld.
pub fn profile_answer(
    p: &crate::document::PointOutcome,
    arm: &str,
    topic: &str,
    groups: &[&str],
    findings: &mut Vec<Finding>,
    withheld: &mut Vec<String>,
) -> Option<String> {
    use crate::profile_analysis::{end_name, words};
    let mut once = |w: String| {
        if !withheld.contains(&w) {
            withheld.push(w);
        }
    };
    let ds: Vec<_> = p.profile_differences.iter().filter(|d| d.arm == arm).collect();
    if ds.is_empty() {
        let why = "the runs were not profiled (profile = true in the plan profiles them)";
        findings.push(Finding {
            topic: format!("{topic}: where the CPU went"),
            text: format!("{arm}: the profile difference is withheld: {why}"),
            verdict: "withheld".into(),
            figures: Default::default(),
        });
        once(why.to_string());
        return None;
    }
    let mut sentence = None;
    for d in ds {
        let mut figures = serde_json::Map::new();
        let (mut rose, mut fell) = (false, false);
        for g in d.groups.iter().filter(|g| groups.contains(&g.group.as_str())) {
            if let Some(x) = &g.demand {
                rose |= x.excludes_zero && x.difference > 0.0;
                fell |= x.excludes_zero && x.difference < 0.0;
                figures.insert(
                    format!("{}_demand_change", g.group),
                    serde_json::json!(x.difference),
                );
            }
            let s = &g.share_of_busy_pct;
            figures.insert(
                format!("{}_share_change_points", g.group),
                serde_json::json!(s.difference),
            );
        }
        let verdict = match (&d.withheld, rose, fell) {
            (Some(w), _, _) => {
                // The same reason for every arm (an end no run profiled) is said once.
                let why = w
                    .split_once("has no profile at this end: ")
                    .map_or(w.as_str(), |(_, r)| r);
                once(format!("at {}: {why}", end_name(&d.end)));
                "withheld"
            }
            (None, true, _) => "holds",
            (None, false, true) => "does not hold",
            (None, false, false) => "tie",
        };
        let text = words(d, 5);
        if d.end == "local" && d.withheld.is_none() {
            sentence = Some(text.clone());
        }
        findings.push(Finding {
            topic: format!("{topic}: where the CPU went, {}", end_name(&d.end)),
            text,
            verdict: verdict.into(),
            figures,
        });
    }
    sentence
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_ends_and_spaces_the_rest() {
        let v: Vec<u32> = (1..=20).collect();
        assert_eq!(thin(&v, 2), vec![1, 20]);
        assert_eq!(thin(&v, 3), vec![1, 11, 20]);
        assert_eq!(thin(&v, 1), vec![1]);
        assert_eq!(thin(&v, 30), v);
        let seven = [32, 64, 128, 256, 512, 1024, 2920];
        assert_eq!(thin(&seven, 4), vec![32, 128, 512, 2920]);
    }

    #[test]
    fn set_option_replaces_or_appends() {
        let a: Vec<String> = ["-l", "60", "-m", "32"].iter().map(|s| s.to_string()).collect();
        assert_eq!(set_option(&a, &["-l", "--length"], "1"), ["-l", "1", "-m", "32"]);
        let b: Vec<String> = ["--length=60"].iter().map(|s| s.to_string()).collect();
        assert_eq!(set_option(&b, &["-l", "--length"], "1"), ["--length=1"]);
        assert_eq!(set_option(&[], &["--omit"], "0"), ["--omit", "0"]);
    }

    const PLAN: &str = r#"
name = "s"
baseline = "a"
[study]
kind = "ipqos"
question = "Q?"
full_minutes = 40
[study.quick]
length = 1
iterations = 2
points = 2
arms = ["c"]
[[test]]
kind = "tcp-stream"
args = ["-l", "60", "--omit", "2"]
sweep = { "-m" = [32, 64, 128, 2920] }
[[test]]
kind = "tcp-rr"
[iterations]
max = 10
min = 3
[[arm]]
name = "a"
[[arm]]
name = "b"
[[arm]]
name = "c"
"#;

    #[test]
    fn quick_reduces_lengths_runs_points_and_arms_as_the_plan_says() {
        let mut p = Plan::from_toml(PLAN).unwrap();
        apply_quick(&mut p).unwrap();
        assert_eq!(p.tests[0].args, ["-l", "1", "--omit", "2"]);
        assert_eq!(p.tests[1].args, ["-l", "1"]);
        assert_eq!(p.tests[0].sweep[0].values, ["32", "2920"]);
        assert_eq!((p.iterations.max, p.iterations.min), (2, 2));
        let arms: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(arms, ["a", "c"], "the baseline is kept");
    }

    /// An arm kept by `--quick` keeps the baseline it names (issue #39: the 1 Gbit/s policy
    /// arms of plans/ipqos.toml are compared with no QoS on their own link).
    #[test]
    fn quick_keeps_the_baseline_a_kept_arm_names() {
        let text = PLAN.replace("name = \"c\"\n", "name = \"c\"\nbaseline = \"b\"\n");
        let mut p = Plan::from_toml(&text).unwrap();
        apply_quick(&mut p).unwrap();
        let arms: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(arms, ["a", "b", "c"], "the plan's baseline and c's own");
    }

    #[test]
    fn quick_refuses_what_the_plan_lacks_by_name() {
        let bad = PLAN.replace("arms = [\"c\"]", "arms = [\"z\"]");
        let mut p = Plan::from_toml(&bad).unwrap();
        assert!(apply_quick(&mut p)
            .unwrap_err()
            .contains("study.quick.arms: no arm named \"z\""));
        let bad = PLAN.replace("arms = [\"c\"]", "tests = [5]");
        let mut p = Plan::from_toml(&bad).unwrap();
        assert!(apply_quick(&mut p).unwrap_err().contains("test 5"));
    }

    #[test]
    fn a_change_is_written_with_its_interval() {
        let c = crate::analysis::Comparison {
            metric: "sd_local".into(),
            arm: "b".into(),
            baseline: "a".into(),
            higher_is_better: false,
            diff_pct: Some(12.0),
            ci_low_pct: Some(9.0),
            ci_high_pct: Some(15.0),
            p_value: Some(0.01),
            verdict: crate::analysis::Verdict::Worse,
            equal_within_pct: Some(5.0),
            method: "welch+fieller".into(),
        };
        assert_eq!(change_text(&c), "+12.0 % ± 3.0 %");
        let c2 = crate::analysis::Comparison {
            ci_low_pct: Some(2.0),
            ci_high_pct: Some(30.0),
            ..c.clone()
        };
        assert_eq!(change_text(&c2), "+12.0 % [+2.0 %, +30.0 %]");
        let c3 = crate::analysis::Comparison {
            diff_pct: None,
            method: "one run".into(),
            ..c
        };
        assert_eq!(change_text(&c3), "withheld (one run)");
    }
}
