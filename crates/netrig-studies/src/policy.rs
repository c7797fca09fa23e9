//! What the two "what does a policy cost" studies (IPQoS, IPFilter) share: which arms are the
//! policies and which arm each is judged against, and how two changes with their intervals
//! compare.

use netrig_experiment::analysis::Comparison;
use netrig_experiment::document::Experiment;
use netrig_report::TestResult;

/// A policy arm and the arm it is judged against (its own `baseline`, else the plan's).
pub struct Policy {
    pub arm: String,
    pub baseline: String,
}

/// The arms that are policies: every arm that no arm is compared against (a baseline — the
/// plan's, or one an arm names — is a place's "no policy", not a policy).
pub fn policies(e: &Experiment) -> Vec<Policy> {
    let arms = e.plan.arms();
    let bases: Vec<usize> = (0..arms.len()).map(|i| e.plan.baseline_of(i)).collect();
    (0..arms.len())
        .filter(|i| !bases.contains(i))
        .map(|i| Policy {
            arm: arms[i].name.clone(),
            baseline: arms[bases[i]].name.clone(),
        })
        .collect()
}

/// The interval of a comparison's change, in percent, when it has one.
pub fn interval(c: &Comparison) -> Option<(f64, f64, f64)> {
    Some((c.diff_pct?, c.ci_low_pct?, c.ci_high_pct?))
}

/// How change `b` stands against change `a` (both in percent, with intervals): "above" when
/// b's whole interval lies above a's, "below" when below, "overlap" when the intervals meet.
pub fn order(a: (f64, f64, f64), b: (f64, f64, f64)) -> &'static str {
    if b.1 > a.2 {
        "above"
    } else if b.2 < a.1 {
        "below"
    } else {
        "overlap"
    }
}

/// The segments the local end's kernel sent over a run (Tcp.OutSegs, the witness's "TCP data
/// segments" check), per second of its window.
pub fn segments_per_s(r: &TestResult) -> Option<f64> {
    let n = r
        .witness
        .checks
        .iter()
        .find(|c| c.end == "local" && c.figure == "TCP data segments")?
        .kernel;
    (n > 0 && r.summary.elapsed_s > 0.0).then(|| n as f64 / r.summary.elapsed_s)
}

/// The mean of `f` over `runs` that have it (none when none has).
pub fn mean_of(runs: &[TestResult], f: impl Fn(&TestResult) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(f).filter(|v| v.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[cfg(test)]
pub mod testing {
    //! Experiments with per-arm baselines, for the studies' tests.
    use netrig_experiment::analysis;
    use netrig_experiment::document::Experiment;
    use netrig_experiment::plan::Plan;
    use netrig_report::TestResult;

    /// The TOML plan of study `kind` (its name too): `plan`, the plan but its name and its
    /// `[study]`, then the study's `question` and its full run's minutes.
    pub fn study_plan(kind: &str, question: &str, full_minutes: u32, plan: &str) -> String {
        format!(
            "name = \"{kind}\"\n{plan}\n[study]\nkind = \"{kind}\"\nquestion = \"{question}\"\n\
             full_minutes = {full_minutes}\n"
        )
    }

    /// `fixtures::experiment` with `plan`'s arms (each compared with its own baseline) and
    /// its `[study]`; `tweak(point, arm, run, result)` makes each run's figures.
    pub fn experiment(
        plan: &str,
        kinds: &[(&str, &str, &[&str])],
        tweak: impl Fn(&str, usize, usize, usize, &mut TestResult),
    ) -> Experiment {
        let plan = Plan::from_toml(plan).expect("plan");
        plan.check().expect("a valid plan");
        let names: Vec<String> = plan.arms().iter().map(|a| a.name.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut tests = Vec::new();
        for (kind, option, values) in kinds {
            // tcp-maerts has no fixture of its own: a stream's, renamed.
            let fixture = if *kind == "tcp-maerts" { "tcp-stream" } else { kind };
            let mut e =
                netrig_experiment::fixtures::experiment(fixture, option, values, &names, |p, a, r, run| {
                    tweak(kind, p, a, r, run)
                });
            for t in &mut e.tests {
                t.kind = kind.to_string();
            }
            tests.extend(e.tests);
        }
        let mut e = netrig_experiment::fixtures::experiment("tcp-stream", "", &[], &names, |_, _, _, _| {});
        e.tests = tests;
        for t in &mut e.tests {
            for p in &mut t.points {
                p.comparisons.clear();
                p.arms
                    .iter_mut()
                    .for_each(netrig_experiment::profile_analysis::gather);
                for i in 0..p.arms.len() {
                    let b = plan.baseline_of(i);
                    if b != i {
                        p.comparisons.extend(analysis::compare_within(
                            &p.arms[b],
                            &p.arms[i],
                            95.0,
                            Some(5.0),
                        ));
                        let d =
                            netrig_experiment::profile_analysis::differences(&p.arms[b], &p.arms[i], 95.0);
                        p.profile_differences.extend(d);
                    }
                }
            }
        }
        e.plan = plan;
        e
    }

    /// Sets the local end's kernel count of segments sent.
    pub fn set_segments(run: &mut TestResult, n: u64) {
        for c in &mut run.witness.checks {
            if c.figure == "TCP data segments" {
                c.kernel = n;
            }
        }
    }
}
