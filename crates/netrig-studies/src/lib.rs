//! The studies netrig reproduces (docs/STUDIES.md): a plan's `[study] kind` names one, and after
//! the run its module reads the experiment document and answers the study's question in words,
//! each sentence made from the figures it names ([`Answer`]). A new study is a new module here
//! and one line in [`STUDIES`]; nothing else in netrig knows the studies by name.

mod gigabit;
mod ipfilter;
mod ipqos;
mod policy;

use netrig_experiment::analysis::{Comparison, Estimate};
use netrig_experiment::document::{ArmOutcome, Experiment, PointOutcome, TestOutcome};
pub use netrig_experiment::study::{change_text, Answer, Finding};

pub mod scavenger;

/// One study: its name (a plan's `study.kind`) and how it answers its question.
pub trait Study: Sync {
    /// The plan's `study.kind`.
    fn kind(&self) -> &'static str;
    /// The findings and the summary, from the measurements in `e` (never figures of its own:
    /// what the runs do not hold is a finding "withheld", with the reason).
    fn answer(&self, e: &Experiment) -> (Vec<String>, Vec<Finding>);
}

mod ia64;

/// Every study netrig knows.
static STUDIES: &[&dyn Study] = &[
    &ipqos::IpQos,
    &ipfilter::IpFilter,
    &scavenger::Scavenger,
    &gigabit::Gigabit,
    &ia64::Ia64,
];

/// The studies' names.
pub fn kinds() -> Vec<&'static str> {
    STUDIES.iter().map(|s| s.kind()).collect()
}

/// Whether `kind` is a study netrig knows.
pub fn known(kind: &str) -> bool {
    STUDIES.iter().any(|s| s.kind() == kind)
}

/// The answer to the study of `e`'s plan (none without a `[study]` or for an unknown kind).
pub fn answer(e: &Experiment) -> Option<Answer> {
    let plan = e.plan.study.as_ref()?;
    let study = STUDIES.iter().find(|s| s.kind() == plan.kind)?;
    let (mut summary, findings) = study.answer(e);
    if !e.complete {
        summary.insert(
            0,
            format!(
                "The experiment stopped early ({}): what follows rests on the runs that completed.",
                e.stopped.as_deref().unwrap_or("unknown")
            ),
        );
    }
    Some(Answer {
        study: plan.kind.clone(),
        question: plan.question.clone(),
        summary,
        findings,
        quick: plan.ran_quick,
    })
}

// What the study modules share: finding points, arms, estimates and comparisons in a document.

/// The plan's tests of `kind`, in order.
pub fn tests<'a>(e: &'a Experiment, kind: &'a str) -> impl Iterator<Item = &'a TestOutcome> + 'a {
    e.tests.iter().filter(move |t| t.kind == kind)
}

/// The value of swept option `option` at point `p` (`-m` → "32"), if it is swept.
pub fn point_value<'a>(p: &'a PointOutcome, option: &str) -> Option<&'a str> {
    p.point
        .values
        .iter()
        .find(|(o, _)| o == option)
        .map(|(_, v)| v.as_str())
}

/// Arm `arm` at point `p`.
pub fn arm<'a>(p: &'a PointOutcome, arm: &str) -> Option<&'a ArmOutcome> {
    p.arms.iter().find(|a| a.arm == arm)
}

/// The estimate of `metric` for `arm` at point `p`.
pub fn estimate<'a>(p: &'a PointOutcome, arm_name: &str, metric: &str) -> Option<&'a Estimate> {
    arm(p, arm_name)?.estimate(metric)
}

/// The comparison of `arm` against the baseline for `metric` at point `p`.
pub fn comparison<'a>(p: &'a PointOutcome, arm: &str, metric: &str) -> Option<&'a Comparison> {
    p.comparisons.iter().find(|c| c.arm == arm && c.metric == metric)
}

/// A finding that the measurements cannot settle, with the reason.
pub fn withheld(topic: impl Into<String>, why: impl Into<String>) -> Finding {
    Finding {
        topic: topic.into(),
        text: why.into(),
        verdict: "withheld".into(),
        figures: Default::default(),
    }
}

/// A finding with its figures (name → number).
pub fn finding(
    topic: impl Into<String>,
    verdict: &str,
    text: impl Into<String>,
    figures: &[(&str, f64)],
) -> Finding {
    Finding {
        topic: topic.into(),
        text: text.into(),
        verdict: verdict.into(),
        figures: figures
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect(),
    }
}

/// "holds", "does not hold" or "tie" for a comparison that should show a cost (the arm worse
/// than the baseline, or at least not better): worse → "holds", equal or an interval that
/// spans 0 → "tie", better → "does not hold".
pub fn cost_verdict(c: &Comparison) -> &'static str {
    use netrig_experiment::analysis::Verdict;
    match c.verdict {
        Verdict::Worse => "holds",
        Verdict::Better => "does not hold",
        Verdict::Equal | Verdict::Undetermined => "tie",
    }
}
