//! Runs a plan: every test over its points, each point's arms interleaved
//! round by round (A B C A B C …, or a random permutation per round),
//! each run between its arm's set-up and tear-down, until every arm of the
//! point is confident or the iterations run out.

use crate::analysis;
use crate::document::{ArmOutcome, Experiment, LabPlace, PointOutcome, TestOutcome, FORMAT};
use crate::metric;
use crate::plan::{Plan, PlanError};
use crate::sweep::{self, Point};
use netrig_kinds::{Kind, Planned};
use netrig_run::{AddressFamily, Cancel, LocalOptions, Target};
use std::time::Duration;

use crate::execute::{agent_env, now_s, place_env, round_order, run_in_host, Around};
pub use crate::execute::{lab_place, plan_args, Lab, Progress};

/// One test's point with every arm's plan, checked before anything runs.
struct Prepared {
    point: Point,
    arms: Vec<Planned>,
    /// Each arm's options, as its command line (a lab's client runs them).
    args: Vec<Vec<String>>,
}

/// A test's kind and its prepared points.
type PreparedTest = (&'static dyn Kind, Vec<Prepared>);

/// The plan's `[target]` as the run API reads a target (the command line's
/// `-H`, `-p`, `--bind`, keys alike).
fn target_spec(plan: &Plan) -> netrig_run::TargetSpec {
    let Some(t) = &plan.target else {
        return netrig_run::TargetSpec {
            names: netrig_run::Names::PLAN,
            ..Default::default()
        };
    };
    netrig_run::TargetSpec {
        host: t.host.clone(),
        port: t.port,
        default_port: None,
        family: match t.family.as_deref() {
            Some("ipv4") => AddressFamily::V4,
            Some("ipv6") => AddressFamily::V6,
            _ => AddressFamily::Any,
        },
        bind: t.bind.clone(),
        key: t.key.clone(),
        agent_key: t.agent_key.clone(),
        names: netrig_run::Names::PLAN,
    }
}

/// The agent on the server's host a plan names (`target.server_agent`),
/// with the plan's keys, for kinds with one end.
pub fn server_agent(plan: &Plan) -> Result<Option<Target>, PlanError> {
    let Some(s) = plan.target.as_ref().and_then(|t| t.server_agent.as_ref()) else {
        return Ok(None);
    };
    target_spec(plan)
        .server_agent(s)
        .map(Some)
        .map_err(PlanError::Invalid)
}

/// Where the plan's tests go, with the keys it names read.
pub fn target(plan: &Plan) -> Result<Target, PlanError> {
    target_spec(plan).target().map_err(PlanError::Invalid)
}

/// [`target`] for the prepared tests: a host given without a port takes
/// the server's own port when every test is of a kind with one end and
/// their URLs agree on it (an HTTP load's `--url http://h:8080/`), as a
/// single run does; else the agent's default port.
fn target_of(plan: &Plan, prepared: &[PreparedTest]) -> Result<Target, PlanError> {
    let mut ports = prepared.iter().flat_map(|(kind, points)| {
        points
            .iter()
            .flat_map(|p| &p.arms)
            .map(move |planned| netrig_run::own_port(*kind, &planned.spec))
    });
    let first = ports.next().flatten();
    let default_port = first.filter(|f| ports.all(|p| p == Some(*f)));
    let mut spec = target_spec(plan);
    spec.default_port = default_port;
    spec.target().map_err(PlanError::Invalid)
}

/// Checks every test of every point of every arm, as its kind would on its
/// command line, before anything runs; each with its point.
fn prepare(plan: &Plan) -> Result<Vec<PreparedTest>, PlanError> {
    let arms = plan.arms();
    let mut out = Vec::new();
    for t in &plan.tests {
        let kind = netrig_kinds::by_name(&t.kind).ok_or_else(|| {
            let names: Vec<&str> = netrig_kinds::all().iter().map(|k| k.name()).collect();
            PlanError::Invalid(format!("test kind {:?} is none of {}", t.kind, names.join(", ")))
        })?;
        let mut points = Vec::new();
        for point in sweep::points(&t.sweep)? {
            let mut planned = Vec::new();
            let mut all_args = Vec::new();
            for arm in &arms {
                let mut args = point.apply(&t.args);
                args.extend(arm.args.iter().cloned());
                let args =
                    crate::execute::with_profile(plan, crate::execute::with_peer(plan.target.as_ref(), args));
                let p = plan_args(kind, &args).map_err(|e| {
                    PlanError::Invalid(format!("{} {} (arm {:?}): {e}", t.kind, args.join(" "), arm.name))
                })?;
                planned.push(p);
                all_args.push(args);
            }
            points.push(Prepared {
                point,
                arms: planned,
                args: all_args,
            });
        }
        out.push((kind, points));
    }
    Ok(out)
}

/// Checks `plan` whole, every point of every arm as its kind would, without
/// running anything.
pub fn check(plan: &Plan) -> Result<(), PlanError> {
    plan.check()?;
    prepare(plan)?;
    crate::group::prepare(plan).map(|_| ())
}

/// Runs `plan`: set-up, test, tear-down for each arm's run, in rounds.
/// Stops early, keeping what completed, when `cancel` is cancelled or a
/// command or a run fails (the tear-down of the arm in hand runs first).
/// An error only for a plan that cannot start.
pub fn run(
    plan: &Plan,
    cancel: &Cancel,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Experiment, PlanError> {
    run_in_lab(plan, None, cancel, progress)
}

/// [`run`] with the plan's `[lab]` built (`netrig run` builds it, and removes it after): each
/// arm's runs go from its client host's namespace to its server host's agent.
pub fn run_in_lab(
    plan: &Plan,
    lab: Option<&Lab>,
    cancel: &Cancel,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Experiment, PlanError> {
    plan.check()?;
    let prepared = prepare(plan)?;
    let groups = crate::group::prepare(plan)?;
    let arms = plan.arms();
    let seed = plan.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let places: Vec<Option<LabPlace>> = match (lab, &plan.lab) {
        (None, None) => vec![None; arms.len()],
        // Groups alone: each group's tests find their own places.
        (Some(_), Some(_)) if plan.tests.is_empty() => vec![None; arms.len()],
        (Some(lab), Some(_)) => {
            let v6 = plan.target.as_ref().and_then(|t| t.family.as_deref()) == Some("ipv6");
            arms.iter()
                .map(|a| {
                    let route = plan.lab_route(a)?.expect("a plan with a lab");
                    let mut place = lab_place(lab.state, &route, v6)
                        .map_err(|e| PlanError::Invalid(format!("arm {:?}: {e}", a.name)))?;
                    // Several client hosts at once (crate::multi): each one's place.
                    place.clients = crate::multi::places(plan, a, lab.state, v6)?
                        .into_iter()
                        .map(|p| p.client)
                        .collect();
                    Ok(Some(place))
                })
                .collect::<Result<_, PlanError>>()?
        }
        (None, Some(_)) => {
            return Err(PlanError::Invalid(
                "the plan has a [lab]: `netrig run` builds it (the run API alone does not)".into(),
            ))
        }
        (Some(_), None) => return Err(PlanError::Invalid("a lab given for a plan without [lab]".into())),
    };
    // Each arm's own shaping of the lab's links, checked against the lab as built.
    let places = crate::lab_counters::with_shapes(places, lab.map(|l| l.state), &arms)?;
    if let Some(lab) = lab {
        return run_prepared(
            plan,
            (&prepared, &groups),
            &arms,
            seed,
            &mut rng,
            Some((lab, &places)),
            None,
            cancel,
            progress,
        );
    }
    let target = target_of(plan, &prepared)?;
    let server_agent = server_agent(plan)?;
    // A host that names nothing is found before any set-up runs, as a single
    // run finds it before it starts: a bad target, not a failed run.
    for t in std::iter::once(&target).chain(&server_agent) {
        netrig_run::resolve_target(t).map_err(|e| PlanError::Invalid(format!("target: {e}")))?;
    }
    // Without a host, one agent in this process serves the whole plan, so that
    // its commands know the port its traffic uses (a rule on 6387 would
    // never match).
    let embedded = match target {
        Target::Embedded { v6 } => Some(
            netrig_run::EmbeddedAgent::start(v6).map_err(|e| PlanError::Invalid(format!("target: {e}")))?,
        ),
        _ => None,
    };
    let target = embedded.as_ref().map_or(target, |a| a.target());
    let clients = match &plan.target {
        Some(t) => netrig_run::clients::Clients::of_this_binary(
            t.clients.as_ref().and_then(|c| c.count()).unwrap_or(1),
            t.client_addrs.clone(),
        )
        .map_err(PlanError::Invalid)?,
        None => None,
    };
    run_prepared(
        plan,
        (&prepared, &groups),
        &arms,
        seed,
        &mut rng,
        None,
        Some((&target, server_agent, clients)),
        cancel,
        progress,
    )
}

/// Where the tests go: the run API's target (with the server's agent and the clients), or, in a
/// lab, each arm's place.
type Direct<'a> = (&'a Target, Option<Target>, Option<netrig_run::clients::Clients>);

#[allow(clippy::too_many_arguments)]
fn run_prepared(
    plan: &Plan,
    (prepared, groups): (&[PreparedTest], &[Vec<crate::group::PreparedMember>]),
    arms: &[crate::plan::Arm],
    seed: u64,
    rng: &mut fastrand::Rng,
    lab: Option<(&Lab, &[Option<LabPlace>])>,
    direct: Option<Direct>,
    cancel: &Cancel,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Experiment, PlanError> {
    let it = &plan.iterations;
    let most: usize =
        (prepared.iter().map(|(_, p)| p.len()).sum::<usize>() + groups.len()) * arms.len() * it.max as usize;
    let mut r = Rounds {
        plan,
        arms,
        lab,
        direct: direct.as_ref(),
        cancel,
        limit: Duration::from_secs_f64(plan.command_timeout_s),
        most,
        done: 0,
        doc: new_document(plan, seed, lab.map(|(l, _)| l)),
    };
    'tests: for ((kind, points), t) in prepared.iter().zip(&plan.tests) {
        r.doc.tests.push(TestOutcome {
            kind: t.kind.clone(),
            args: t.args.clone(),
            points: Vec::new(),
            saturation: Vec::new(),
        });
        for prep in points {
            let (mut outcome, stop) = r.point(*kind, prep, rng, progress);
            finish_point(&mut outcome, plan, &mut r.doc.warnings, kind.name());
            let test = r.doc.tests.last_mut().expect("pushed above");
            test.points.push(outcome);
            test.saturation = crate::saturation::of_test(test);
            if let Some(s) = stop {
                r.doc.complete = false;
                r.doc.stopped = Some(s);
                break 'tests;
            }
        }
    }
    let mut doc = r.doc;
    let mut done = r.done;
    if doc.complete && !groups.is_empty() {
        let ctx = crate::group::Context {
            plan,
            arms,
            lab: lab.map(|(l, _)| l),
            target: direct.as_ref().map(|d| d.0),
            server_agent: direct.as_ref().and_then(|d| d.1.clone()),
            clients: direct.as_ref().and_then(|d| d.2.clone()),
            limit: r.limit,
        };
        if let Some(s) = crate::group::run_all(&ctx, groups, &mut doc, rng, cancel, progress, &mut done, most)
        {
            doc.complete = false;
            doc.stopped = Some(s);
        }
    }
    doc.finished_unix_s = now_s();
    Ok(doc)
}

/// The document before its first run: the plan as run (with its seed), the lab as built.
fn new_document(plan: &Plan, seed: u64, lab: Option<&Lab>) -> Experiment {
    Experiment {
        format: FORMAT.into(),
        netrig_version: netrig_proto::SOFTWARE_VERSION.into(),
        plan: Plan {
            seed: Some(seed),
            ..plan.clone()
        },
        started_unix_s: now_s(),
        finished_unix_s: 0.0,
        complete: true,
        stopped: None,
        seed,
        warnings: Vec::new(),
        commands: Vec::new(),
        tests: Vec::new(),
        groups: Vec::new(),
        lab: lab.and_then(|l| serde_json::to_value(l.state).ok()),
        answer: None,
    }
}

/// The tests' rounds: each point's arms in each round's order, each run between its arm's
/// set-up and teardown, until the point is confident or the iterations run out.
struct Rounds<'a> {
    plan: &'a Plan,
    arms: &'a [crate::plan::Arm],
    lab: Option<(&'a Lab<'a>, &'a [Option<LabPlace>])>,
    direct: Option<&'a Direct<'a>>,
    cancel: &'a Cancel,
    /// Each command's time limit.
    limit: Duration,
    /// Runs done so far, and the most the plan may make (for progress).
    most: usize,
    done: usize,
    doc: Experiment,
}

impl Rounds<'_> {
    /// What arm `a`'s commands are told: the agent's address, or its lab place and the lab.
    fn env_of(&self, a: usize) -> Vec<(&'static str, String)> {
        match (self.direct, self.lab) {
            (Some((t, _, _)), _) => agent_env(t),
            (None, Some((l, places))) => {
                let mut env = places[a].as_ref().map(place_env).unwrap_or_default();
                // The lab's name, for a command that runs a lab tool on it (`netrig lab ...`).
                env.push(("NETRIG_LAB", l.state.name.clone()));
                env
            }
            _ => Vec::new(),
        }
    }

    fn ns_of(&self, host: &str) -> Option<String> {
        self.lab
            .and_then(|(l, _)| l.state.hosts.get(host))
            .map(|h| h.ns.clone())
    }

    /// One point of a test: its rounds, and why it stopped the experiment, if it did.
    fn point(
        &mut self,
        kind: &'static dyn Kind,
        prep: &Prepared,
        rng: &mut fastrand::Rng,
        progress: &mut dyn FnMut(&Progress),
    ) -> (PointOutcome, Option<String>) {
        let it = &self.plan.iterations;
        let mut outcome = PointOutcome {
            point: prep.point.clone(),
            arms: self
                .arms
                .iter()
                .map(|a| ArmOutcome {
                    arm: a.name.clone(),
                    runs: Vec::new(),
                    estimates: Vec::new(),
                    confident: None,
                    lab: None,
                    clients: Vec::new(),
                    profile: None,
                })
                .collect(),
            comparisons: Vec::new(),
            profile_differences: Vec::new(),
        };
        for round in 0..it.max {
            let order = round_order(self.arms.len(), self.plan.order, rng);
            for &a in &order {
                progress(&Progress {
                    kind: kind.name(),
                    point: &prep.point,
                    arm: &self.arms[a].name,
                    iteration: round + 1,
                    done: self.done,
                    most: self.most,
                });
                if self.cancel.is_cancelled() {
                    return (outcome, Some("interrupted".into()));
                }
                if let Err(stop) = self.arm_run(kind, prep, a, &mut outcome) {
                    return (outcome, Some(stop));
                }
            }
            if round + 1 >= it.min && round + 1 < it.max && it.max > 1 {
                let all = outcome.arms.iter().all(|a| analysis::confident(&a.runs, it));
                if all {
                    break;
                }
            }
        }
        (outcome, None)
    }

    /// Arm `a`'s run at this point: its lab shaping and set-up, the run, its teardown. Err: why
    /// the experiment stops (a failed command or run, or Ctrl-C).
    fn arm_run(
        &mut self,
        kind: &'static dyn Kind,
        prep: &Prepared,
        a: usize,
        outcome: &mut PointOutcome,
    ) -> Result<(), String> {
        let arms = self.arms;
        let arm = &arms[a];
        let ns = arm.in_host.as_deref().and_then(|h| Some((h, self.ns_of(h)?)));
        let around = Around {
            arm,
            shape: self
                .lab
                .and_then(|(_, p)| p[a].as_ref())
                .map_or(&[][..], |p| &p.shape[..]),
            limit: self.limit,
            env: self.env_of(a),
            in_ns: ns.as_ref().map(|(h, ns)| (*h, ns.as_str())),
        };
        around.before(&mut self.doc.commands)?;
        let elements = self.lab.map(|(l, _)| crate::lab_counters::before(l.state));
        let result = self.measure(kind, prep, a, outcome);
        let result = crate::lab_counters::with_elements(result, self.lab.map(|(l, _)| l.state), elements);
        let failed_teardown = around.after(&mut self.doc.commands);
        self.done += 1;
        match result {
            Ok(r) => outcome.arms[a].runs.push(r),
            Err(_) if self.cancel.is_cancelled() => return Err("interrupted".into()),
            Err(e) => {
                return Err(format!(
                    "{} {} (arm {:?}) failed: {e}",
                    kind.name(),
                    prep.point,
                    arm.name
                ))
            }
        }
        failed_teardown.map_or(Ok(()), Err)
    }

    /// The run itself: through the run API to the target, or from the arm's lab place (from
    /// several client hosts at once when it has them).
    fn measure(
        &mut self,
        kind: &'static dyn Kind,
        prep: &Prepared,
        a: usize,
        outcome: &mut PointOutcome,
    ) -> Result<netrig_report::TestResult, String> {
        let arms = self.arms;
        let (arm, planned) = (&arms[a], &prep.arms[a]);
        match (self.direct, self.lab) {
            (Some((target, server_agent, clients)), _) => {
                let local = LocalOptions {
                    sockets: planned.local.sockets.clone(),
                    cpus: planned.local.cpus.clone(),
                    udp_size_default: planned.fit_to_path,
                    server_agent: server_agent.clone(),
                    clients: clients.clone(),
                    peer: planned.peer.unwrap_or_default(),
                    server_output: planned.get_server_output,
                    profile: planned.profile,
                    ..LocalOptions::default()
                };
                netrig_run::run(target, local, &planned.spec, self.cancel, &mut |_| {})
                    .map_err(|e| e.to_string())
            }
            (None, Some((l, places))) => {
                let place = places[a].as_ref().expect("a place for every arm");
                outcome.arms[a].lab = Some(place.clone());
                if place.clients.is_empty() {
                    return run_in_host(
                        &l.exe,
                        place,
                        kind.name(),
                        &prep.args[a],
                        &planned.spec,
                        self.cancel,
                    );
                }
                // IPv6: [addr]:port
                let ps = crate::multi::places(self.plan, arm, l.state, place.address.starts_with('['))
                    .map_err(|e| e.to_string())?;
                let (sum, parts) = crate::multi::run(
                    &l.exe,
                    &ps,
                    kind.name(),
                    &prep.args[a],
                    &planned.spec,
                    self.cancel,
                )?;
                self.doc.warnings.extend(
                    crate::multi::skew_warning(&parts)
                        .map(|w| format!("{} {} (arm {:?}): {w}", kind.name(), prep.point, arm.name)),
                );
                outcome.arms[a].clients.push(parts);
                Ok(sum)
            }
            (None, None) => unreachable!("a target or a lab"),
        }
    }
}

/// A point's estimates, confidence and comparisons, from its runs.
fn finish_point(outcome: &mut PointOutcome, plan: &Plan, warnings: &mut Vec<String>, kind: &str) {
    let it = &plan.iterations;
    for a in &mut outcome.arms {
        let runs: Vec<_> = a.runs.iter().collect();
        a.estimates = metric::present(&runs)
            .into_iter()
            .map(|m| analysis::estimate(m, &a.runs, it.level))
            .collect();
        if it.max > 1 && !a.runs.is_empty() {
            let ok = analysis::confident(&a.runs, it);
            a.confident = Some(ok);
            warnings.extend(analysis::not_confident_warning(
                kind,
                &outcome.point,
                &a.arm,
                &a.runs,
                it,
            ));
        }
    }
    // Each run's folded stacks merged into its arm's (docs/PROFILE.md, "Experiments").
    for a in &mut outcome.arms {
        netrig_document::profile_analysis::gather(a);
    }
    if outcome.arms.len() > 1 {
        for (i, a) in outcome.arms.iter().enumerate() {
            let base = plan.baseline_of(i);
            if i != base && base < outcome.arms.len() {
                outcome.comparisons.extend(analysis::compare_within(
                    &outcome.arms[base],
                    a,
                    it.level,
                    Some(it.width),
                ));
                outcome
                    .profile_differences
                    .extend(netrig_document::profile_analysis::differences(
                        &outcome.arms[base],
                        a,
                        it.level,
                    ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Order;

    /// Issue #39: arms that are configurations × places (no rule / a rule on a 100 Mbit/s link,
    /// the same on a 1 Gbit/s link) compare each with the no-rule arm of its own place, named
    /// by the arm's `baseline`; the others with the plan's baseline.
    #[test]
    fn an_arm_is_compared_with_the_baseline_it_names() {
        let plan = Plan::from_toml(
            r#"
            name = "x"
            baseline = "none-100m"
            [[test]]
            kind = "tcp-stream"
            [[arm]]
            name = "none-100m"
            [[arm]]
            name = "rule-100m"
            [[arm]]
            name = "none-1g"
            [[arm]]
            name = "rule-1g"
            baseline = "none-1g"
            "#,
        )
        .unwrap();
        plan.check().unwrap();
        assert_eq!(
            (0..4).map(|i| plan.baseline_of(i)).collect::<Vec<_>>(),
            [0, 0, 0, 2]
        );
        let names = ["none-100m", "rule-100m", "none-1g", "rule-1g"];
        let e = crate::fixtures::experiment("tcp-stream", "", &[], &names, |_, a, r, run| {
            // The 1 Gbit/s arms ten times the 100 Mbit/s ones; each rule 10 % below its place's.
            let place = if a >= 2 { 10.0 } else { 1.0 };
            let rule = if a % 2 == 1 { 0.9 } else { 1.0 };
            run.summary.throughput_bps = 1e8 * place * rule * (1.0 + 0.001 * r as f64);
        });
        let mut outcome = e.tests[0].points[0].clone();
        outcome.comparisons.clear();
        finish_point(&mut outcome, &plan, &mut Vec::new(), "tcp-stream");
        let c = |arm: &str| {
            outcome
                .comparisons
                .iter()
                .find(|c| c.arm == arm && c.metric == "throughput")
                .unwrap_or_else(|| panic!("no comparison of {arm}"))
        };
        assert_eq!(c("rule-1g").baseline, "none-1g");
        let d = c("rule-1g").diff_pct.unwrap();
        assert!((d + 10.0).abs() < 0.5, "rule-1g against none-1g: {d}");
        assert_eq!(c("rule-100m").baseline, "none-100m");
        assert_eq!(c("none-1g").baseline, "none-100m");
        assert!(outcome.comparisons.iter().all(|c| c.arm != "none-100m"));
        for (bad, why) in [
            ("baseline = \"none-1g\"", "itself"),
            ("baseline = \"zz\"", "not an arm's name"),
        ] {
            let text = format!(
                "name = \"x\"\n[[test]]\nkind = \"tcp-rr\"\n[[arm]]\nname = \"a\"\n[[arm]]\nname = \"none-1g\"\n{bad}\n"
            );
            let err = Plan::from_toml(&text).and_then(|p| p.check().map(|_| p));
            assert!(format!("{err:?}").contains(why), "{bad}: {err:?}");
        }
    }

    /// A plan of short tcp-rr runs, exactly `runs` of them, in one arm `a`
    /// whose commands are `commands` (TOML lines).
    fn one_arm_rr_plan(name: &str, runs: u32, commands: &str) -> Plan {
        Plan::from_toml(&format!(
            "name = \"{name}\"\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.2\"]\n\
             [iterations]\nmax = {runs}\nmin = {runs}\n[[arm]]\nname = \"a\"\n{commands}\n"
        ))
        .unwrap()
    }

    /// Ctrl-C (a cancelled handle) stops after the arm in hand is torn
    /// down, keeping what completed, marked incomplete.
    #[test]
    fn a_cancel_stops_after_the_teardown_and_keeps_what_completed() {
        let dir = std::env::temp_dir().join(format!("netrig-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let _ = std::fs::remove_file(&log);
        let plan = one_arm_rr_plan(
            "cancel",
            5,
            &format!(
                "setup = \"echo setup >> {log}\"\nteardown = \"echo teardown >> {log}\"",
                log = log.display()
            ),
        );
        let cancel = Cancel::new();
        let e = run(&plan, &cancel, &mut |p| {
            if p.done == 2 {
                cancel.cancel("interrupted (test)");
            }
        })
        .unwrap();
        assert!(!e.complete);
        assert_eq!(e.stopped.as_deref(), Some("interrupted"));
        assert_eq!(e.tests[0].points[0].arms[0].runs.len(), 2);
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "setup\nteardown\n".repeat(2)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue #37: without a host, one in-process agent serves the plan, and
    /// its commands are told its address: the port its runs' traffic used.
    #[test]
    fn commands_are_told_the_agents_port() {
        let dir = std::env::temp_dir().join(format!("netrig-agent-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let plan = one_arm_rr_plan(
            "env",
            2,
            &format!(
                "setup = \"echo $NETRIG_AGENT_HOST $NETRIG_AGENT_PORT >> {log}\"",
                log = log.display()
            ),
        );
        let e = run(&plan, &Cancel::new(), &mut |_| {}).unwrap();
        let runs = &e.tests[0].points[0].arms[0].runs;
        assert_eq!(runs.len(), 2);
        let told = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        for (line, r) in told.lines().zip(runs) {
            assert_eq!(line, r.agent.address.replace(':', " "), "{told}");
        }
        assert!(
            runs.iter().all(|r| r.config.embedded),
            "still the in-process agent"
        );
    }

    /// Randomised blocks: each round a permutation of every arm, varying
    /// between rounds, the same again from the same seed.
    #[test]
    fn randomised_rounds_permute_every_arm_reproducibly() {
        let rounds = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..20)
                .map(|_| round_order(4, Order::Randomised, &mut rng))
                .collect::<Vec<_>>()
        };
        let r = rounds(7);
        for o in &r {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, [0, 1, 2, 3], "every arm once a round");
        }
        assert!(r.iter().any(|o| o != &r[0]), "the order varies between rounds");
        assert_eq!(r, rounds(7), "a seed replays its order");
        let mut rng = fastrand::Rng::with_seed(7);
        assert_eq!(round_order(4, Order::Interleaved, &mut rng), [0, 1, 2, 3]);
    }

    /// The plans shipped in plans/ read and check whole.
    #[test]
    fn the_shipped_plans_check() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans");
        let mut n = 0;
        for f in std::fs::read_dir(dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let plan = Plan::from_toml(&std::fs::read_to_string(&p).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                check(&plan).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert_eq!(n, 7, "ipqos, ipfilter, gigabit, ia64, rrul, rrul-lab, scavenger");
    }

    /// Every point of every arm is checked before anything runs.
    #[test]
    fn a_bad_point_fails_before_anything_runs() {
        let plan = Plan::from_toml(
            r#"
            name = "bad"
            [[test]]
            kind = "tcp-stream"
            sweep = { "-m" = ["1K", "0"] }
            [[arm]]
            name = "a"
            setup = "exit 9"
            "#,
        )
        .unwrap();
        let e = run(&plan, &Cancel::new(), &mut |_| panic!("nothing runs")).unwrap_err();
        assert!(
            e.to_string().contains("-m 0") && e.to_string().contains("-m/--message-size"),
            "{e}"
        );
    }
}
