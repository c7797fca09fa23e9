//! Runs a plan: every test over its points, each point's arms interleaved
//! round by round (A B C A B C …, or a random permutation per round),
//! each run between its arm's set-up and tear-down, until every arm of the
//! point is confident or the iterations run out.

use crate::analysis;
use crate::command::{self, CommandRun};
use crate::document::{ArmOutcome, Experiment, PointOutcome, TestOutcome, FORMAT};
use crate::metric;
use crate::plan::{Order, Plan, PlanError};
use crate::sweep::{self, Point};
use netrig_kinds::{Ends, Kind, Planned};
use netrig_run::{AddressFamily, Cancel, LocalOptions, Target};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the runner is, for a progress display.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub kind: &'a str,
    pub point: &'a Point,
    pub arm: &'a str,
    /// This arm's run at this point, from 1.
    pub iteration: u32,
    /// Runs done so far, and the most the plan may make.
    pub done: usize,
    pub most: usize,
}

/// One test's point with every arm's plan, checked before anything runs.
struct Prepared {
    point: Point,
    arms: Vec<Planned>,
}

/// A test's kind and its prepared points.
type PreparedTest = (&'static dyn Kind, Vec<Prepared>);

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The test `args` ask of `kind`, as its command line would make it.
pub fn plan_args(kind: &dyn Kind, args: &[String]) -> Result<Planned, String> {
    let cmd = kind.args(clap::Command::new(kind.name()).no_binary_name(true));
    let m = cmd
        .try_get_matches_from(args)
        .map_err(|e| e.render().to_string().trim_end().to_string())?;
    kind.plan(&m)
}

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
            .map(move |planned| match kind.ends() {
                Ends::ClientOnly(one) => one.own_server(&planned.spec).map(|(_, port)| port),
                Ends::Both => None,
            })
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
            for arm in &arms {
                let mut args = point.apply(&t.args);
                args.extend(arm.args.iter().cloned());
                let p = plan_args(kind, &args).map_err(|e| {
                    PlanError::Invalid(format!("{} {} (arm {:?}): {e}", t.kind, args.join(" "), arm.name))
                })?;
                planned.push(p);
            }
            points.push(Prepared { point, arms: planned });
        }
        out.push((kind, points));
    }
    Ok(out)
}

/// Checks `plan` whole, every point of every arm as its kind would, without
/// running anything.
pub fn check(plan: &Plan) -> Result<(), PlanError> {
    plan.check()?;
    prepare(plan).map(|_| ())
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
    plan.check()?;
    let prepared = prepare(plan)?;
    let arms = plan.arms();
    let seed = plan.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
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
    let env = agent_env(&target);
    let clients = match &plan.target {
        Some(t) => {
            netrig_run::clients::Clients::of_this_binary(t.clients.unwrap_or(1), t.client_addrs.clone())
                .map_err(PlanError::Invalid)?
        }
        None => None,
    };
    let limit = Duration::from_secs_f64(plan.command_timeout_s);
    let it = &plan.iterations;
    let most: usize = prepared.iter().map(|(_, p)| p.len()).sum::<usize>() * arms.len() * it.max as usize;
    let mut doc = Experiment {
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
    };
    let mut done = 0usize;
    'tests: for ((kind, points), t) in prepared.iter().zip(&plan.tests) {
        doc.tests.push(TestOutcome {
            kind: t.kind.clone(),
            args: t.args.clone(),
            points: Vec::new(),
            saturation: Vec::new(),
        });
        for prep in points {
            let mut outcome = PointOutcome {
                point: prep.point.clone(),
                arms: arms
                    .iter()
                    .map(|a| ArmOutcome {
                        arm: a.name.clone(),
                        runs: Vec::new(),
                        estimates: Vec::new(),
                        confident: None,
                    })
                    .collect(),
                comparisons: Vec::new(),
            };
            let mut stop: Option<String> = None;
            for round in 0..it.max {
                let order = round_order(arms.len(), plan.order, &mut rng);
                for &a in &order {
                    let arm = &arms[a];
                    progress(&Progress {
                        kind: kind.name(),
                        point: &prep.point,
                        arm: &arm.name,
                        iteration: round + 1,
                        done,
                        most,
                    });
                    if cancel.is_cancelled() {
                        stop = Some("interrupted".into());
                        break;
                    }
                    let planned = &prep.arms[a];
                    if let Some(c) = &arm.setup {
                        let r = command::run_with("setup", &arm.name, c, limit, &env);
                        let ok = r.ok();
                        let failure = r.failure();
                        doc.commands.push(r);
                        if !ok {
                            teardown(&mut doc.commands, arm, limit, &env);
                            stop = Some(failure);
                            break;
                        }
                    }
                    let local = LocalOptions {
                        sockets: planned.local.sockets.clone(),
                        cpus: planned.local.cpus.clone(),
                        udp_size_default: planned.fit_to_path,
                        server_agent: server_agent.clone(),
                        clients: clients.clone(),
                        ..LocalOptions::default()
                    };
                    let result = netrig_run::run(&target, local, &planned.spec, cancel, &mut |_| {});
                    let failed_teardown = teardown(&mut doc.commands, arm, limit, &env);
                    done += 1;
                    match result {
                        Ok(r) => outcome.arms[a].runs.push(r),
                        Err(e) => {
                            stop = Some(if cancel.is_cancelled() {
                                "interrupted".into()
                            } else {
                                format!("{} {} (arm {:?}) failed: {e}", kind.name(), prep.point, arm.name)
                            });
                            break;
                        }
                    }
                    if let Some(f) = failed_teardown {
                        stop = Some(f);
                        break;
                    }
                }
                if stop.is_some() {
                    break;
                }
                if round + 1 >= it.min && round + 1 < it.max && it.max > 1 {
                    let all = outcome.arms.iter().all(|a| analysis::confident(&a.runs, it));
                    if all {
                        break;
                    }
                }
            }
            finish_point(&mut outcome, plan, &mut doc.warnings, kind.name());
            let test = doc.tests.last_mut().expect("pushed above");
            test.points.push(outcome);
            test.saturation = crate::saturation::of_test(test);
            if let Some(s) = stop {
                doc.complete = false;
                doc.stopped = Some(s);
                break 'tests;
            }
        }
    }
    doc.finished_unix_s = now_s();
    Ok(doc)
}

/// What an arm's commands are told of the agent the plan's runs go to:
/// NETRIG_AGENT_HOST (as given, or the in-process agent's address) and
/// NETRIG_AGENT_PORT, for rules that must match its traffic.
fn agent_env(target: &Target) -> Vec<(&'static str, String)> {
    let (host, port) = match target {
        Target::Agent { host, port, .. } => (host.clone(), *port),
        Target::Started { addr } => (addr.ip().to_string(), addr.port()),
        Target::Embedded { .. } => return Vec::new(),
    };
    vec![
        ("NETRIG_AGENT_HOST", host),
        ("NETRIG_AGENT_PORT", port.to_string()),
    ]
}

/// The arms' order in one round: as listed, or a random permutation.
fn round_order(arms: usize, order: Order, rng: &mut fastrand::Rng) -> Vec<usize> {
    let mut o: Vec<usize> = (0..arms).collect();
    if order == Order::Randomised {
        rng.shuffle(&mut o);
    }
    o
}

/// Runs `arm`'s tear-down, if it has one; its failure, if it failed.
fn teardown(
    commands: &mut Vec<CommandRun>,
    arm: &crate::plan::Arm,
    limit: Duration,
    env: &[(&str, String)],
) -> Option<String> {
    let c = arm.teardown.as_ref()?;
    let r = command::run_with("teardown", &arm.name, c, limit, env);
    let failure = (!r.ok()).then(|| r.failure());
    commands.push(r);
    failure
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
    let base = plan.baseline();
    if outcome.arms.len() > 1 {
        for (i, a) in outcome.arms.iter().enumerate() {
            if i != base {
                outcome.comparisons.extend(analysis::compare_within(
                    &outcome.arms[base],
                    a,
                    it.level,
                    Some(it.width),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ctrl-C (a cancelled handle) stops after the arm in hand is torn
    /// down, keeping what completed, marked incomplete.
    #[test]
    fn a_cancel_stops_after_the_teardown_and_keeps_what_completed() {
        let dir = std::env::temp_dir().join(format!("netrig-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let _ = std::fs::remove_file(&log);
        let plan = Plan::from_toml(&format!(
            r#"
            name = "cancel"
            [[test]]
            kind = "tcp-rr"
            args = ["-l", "0.2"]
            [iterations]
            max = 5
            min = 5
            [[arm]]
            name = "a"
            setup = "echo setup >> {log}"
            teardown = "echo teardown >> {log}"
            "#,
            log = log.display()
        ))
        .unwrap();
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
        let plan = Plan::from_toml(&format!(
            r#"
            name = "env"
            [[test]]
            kind = "tcp-rr"
            args = ["-l", "0.2"]
            [iterations]
            max = 2
            min = 2
            [[arm]]
            name = "a"
            setup = "echo $NETRIG_AGENT_HOST $NETRIG_AGENT_PORT >> {log}"
            "#,
            log = log.display()
        ))
        .unwrap();
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
        assert_eq!(n, 4, "ipqos, ipfilter, gigabit, ia64");
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
