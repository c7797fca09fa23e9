//! Experiment documents built from the real runs in netrig-report's fixtures, for the tests of
//! the crates that read experiments (plots, HTML, studies): `features = ["fixtures"]` in a
//! dev-dependency.

use crate::analysis;
use crate::experiment::{ArmOutcome, Experiment, PointOutcome, TestOutcome, FORMAT};
use crate::metric::METRICS;
use crate::result::TestResult;
use crate::sweep::Point;

pub fn fixture(name: &str) -> TestResult {
    let path = format!(
        "{}/../netrig-report/tests/fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An experiment of `kind`'s fixture over `option`'s `values` (none: one
/// unswept point) and `arms`, three runs each, `tweak` making each run's figures.
pub fn experiment(
    kind: &str,
    option: &str,
    values: &[&str],
    arms: &[&str],
    tweak: impl Fn(usize, usize, usize, &mut TestResult),
) -> Experiment {
    let base = fixture(kind);
    let points: Vec<Point> = if values.is_empty() {
        vec![Point { values: vec![] }]
    } else {
        values
            .iter()
            .map(|v| Point {
                values: vec![(option.to_string(), v.to_string())],
            })
            .collect()
    };
    let points = points
        .into_iter()
        .enumerate()
        .map(|(p, point)| {
            let arms: Vec<ArmOutcome> = arms
                .iter()
                .enumerate()
                .map(|(a, name)| {
                    let runs: Vec<TestResult> = (0..3)
                        .map(|r| {
                            let mut run = base.clone();
                            tweak(p, a, r, &mut run);
                            run
                        })
                        .collect();
                    let present = crate::metric::present(&runs.iter().collect::<Vec<_>>());
                    let estimates = METRICS
                        .iter()
                        .filter(|m| present.iter().any(|q| q.name == m.name))
                        .map(|m| analysis::estimate(m, &runs, 95.0))
                        .collect();
                    ArmOutcome {
                        arm: name.to_string(),
                        runs,
                        estimates,
                        confident: None,
                        lab: None,
                        clients: Vec::new(),
                        profile: None,
                    }
                })
                .collect();
            let comparisons = arms[1..]
                .iter()
                .flat_map(|a| analysis::compare(&arms[0], a, 95.0))
                .collect();
            PointOutcome {
                point,
                arms,
                comparisons,
                profile_differences: Vec::new(),
            }
        })
        .collect();
    let plan = serde_json::from_value(serde_json::json!({
        "name": "t", "test": [{"kind": kind, "args": []}]
    }))
    .expect("plan");
    Experiment {
        format: FORMAT.into(),
        netrig_version: "test".into(),
        plan,
        started_unix_s: 0.0,
        finished_unix_s: 1.0,
        complete: true,
        stopped: None,
        seed: 1,
        warnings: vec![],
        commands: vec![],
        lab: None,
        answer: None,
        groups: vec![],
        tests: vec![TestOutcome {
            kind: kind.into(),
            args: vec![],
            points,
            saturation: vec![],
        }],
    }
}

/// An experiment whose points are the product of `first` (the x axis)
/// and `second` swept option's values, with `arms`.
pub fn two_option_experiment(first: (&str, &[&str]), second: (&str, &[&str]), arms: &[&str]) -> Experiment {
    let mut e = experiment(
        "tcp-stream",
        first.0,
        &vec!["1"; first.1.len() * second.1.len()],
        arms,
        |p, a, r, run| {
            run.summary.throughput_bps =
                1e9 * (1.0 + p as f64 * 0.1) * (1.0 + 0.05 * a as f64) + 1e7 * r as f64;
            run.summary.cpu.local_pct = Some(20.0 + p as f64);
        },
    );
    let mut i = 0;
    for s in second.1 {
        for f in first.1 {
            e.tests[0].points[i].point.values = vec![
                (first.0.to_string(), f.to_string()),
                (second.0.to_string(), s.to_string()),
            ];
            i += 1;
        }
    }
    e
}

/// A run's `profile`: the client's end with `groups` and `functions` (name, samples; each
/// sample 1 ms of CPU, every function's inclusive samples as given), `kb` KB moved in the
/// window, and a folded stack per function; the agent's end withheld.
pub fn profile(
    groups: &[(&str, u64)],
    functions: &[(&str, u64)],
    kb: f64,
) -> crate::result::profile::ProfileResult {
    use crate::result::profile::*;
    let busy: u64 = groups.iter().filter(|g| g.0 != "idle").map(|g| g.1).sum();
    let p = Profiled {
        window_s: 1.0,
        cpus: 2,
        frequency_hz: 1000,
        samples: groups.iter().map(|g| g.1).sum(),
        busy_samples: busy,
        lost_samples: 0,
        dropped_samples: 0,
        split: ProfileSplit::default(),
        demand_unit: "us/KB".into(),
        groups: groups
            .iter()
            .map(|&(g, n)| ProfileGroup {
                group: g.into(),
                samples: n,
                cpu_ms: n as f64,
                share_of_busy_pct: (g != "idle").then(|| n as f64 * 100.0 / busy as f64),
                demand: (g != "idle").then(|| n as f64 * 1e3 / kb),
            })
            .collect(),
        top_functions: functions
            .iter()
            .map(|&(f, n)| ProfileFunction {
                name: f.into(),
                self_samples: n,
                inclusive_samples: n,
            })
            .collect(),
        folded: functions
            .iter()
            .map(|&(f, n)| FoldedStack {
                stack: format!("netrig;{f}"),
                samples: n,
            })
            .collect(),
        folded_total: functions.len() as u64,
        witness: None,
        throttles: 0,
        softirqs: KernelCount::default(),
        softnet: KernelCount::default(),
    };
    ProfileResult {
        local: EndProfile::Profiled(Box::new(p)),
        remote: EndProfile::Withheld {
            withheld: "the agent's end is not profiled (test)".into(),
        },
    }
}
