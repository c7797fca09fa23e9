//! Groups: several tests started together (flent's RRUL, "realtime response under load"): bulk
//! flows beside a latency probe, best effort beside scavenger. Each member is a test of its own
//! kind and options, started at its own offset from the group's start; each is reported whole,
//! and their interval samples are placed on the group's one clock (each member's time zero, as
//! its result records it on the wall clock, less the group's start: measured, not assumed), so
//! one plot shows latency against load. A request/response member's latency is also given as
//! responsiveness (round trips per minute) while the others run, beside its value before any of
//! them started. Arms and iterations apply to the group as a unit.

use crate::analysis;
use crate::document::{ArmOutcome, Experiment, LabPlace};
use crate::execute::{self, Lab, Progress};
use crate::metric;
use crate::plan::group::member_arm;
use crate::plan::{Arm, Plan, PlanError};
use netrig_kinds::{Kind, Planned};
use netrig_report::{IntervalResult, TestResult};
use netrig_run::{Cancel, LocalOptions, Target};
use std::time::{Duration, Instant};

pub use crate::document::group::{
    GroupArm, GroupOutcome, GroupRun, MemberComparison, MemberEstimates, MemberRun, Responsiveness,
    RpmWindow, SeriesPoint,
};
pub use crate::plan::group::{
    GroupPlan, MemberPlan, DEFAULT_INTERVAL_S, MAX_GROUPS, MAX_MEMBERS, MAX_START_S,
};

/// A member checked for every arm before anything runs.
pub(crate) struct PreparedMember {
    pub name: String,
    pub kind: &'static dyn Kind,
    pub start_s: f64,
    /// Per arm: its plan and its options as a command line.
    pub arms: Vec<(Planned, Vec<String>)>,
}

/// Every member of every group, for every arm, as its kind checks its command line; a member
/// without `-i` gets the group's interval.
pub(crate) fn prepare(plan: &Plan) -> Result<Vec<Vec<PreparedMember>>, PlanError> {
    let arms = plan.arms();
    let mut out = Vec::new();
    for g in &plan.groups {
        let mut members = Vec::new();
        for (t, name) in g.tests.iter().zip(g.member_names()) {
            let kind = netrig_kinds::by_name(&t.kind).ok_or_else(|| {
                let names: Vec<&str> = netrig_kinds::all().iter().map(|k| k.name()).collect();
                PlanError::Invalid(format!(
                    "group {:?} test {name:?}: kind {:?} is none of {}",
                    g.name,
                    t.kind,
                    names.join(", ")
                ))
            })?;
            let mut per_arm = Vec::new();
            for arm in &arms {
                let mut args = t.args.clone();
                args.extend(arm.args.iter().cloned());
                let mut args = execute::with_profile(plan, execute::with_peer(plan.target.as_ref(), args));
                let what = |args: &[String], e: String| {
                    PlanError::Invalid(format!(
                        "group {:?} test {name:?}: {} {} (arm {:?}): {e}",
                        g.name,
                        t.kind,
                        args.join(" "),
                        arm.name
                    ))
                };
                let mut p = execute::plan_args(kind, &args).map_err(|e| what(&args, e))?;
                if p.spec.interval_s.is_none() {
                    args.extend(["-i".to_string(), g.interval_s().to_string()]);
                    p = execute::plan_args(kind, &args).map_err(|e| what(&args, e))?;
                }
                per_arm.push((p, args));
            }
            members.push(PreparedMember {
                name,
                kind,
                start_s: t.start,
                arms: per_arm,
            });
        }
        out.push(members);
    }
    Ok(out)
}

/// `r`'s intervals on the group's clock: its time zero less the group's, added to each
/// interval's own times. `Err` (the reason) when the result has no time zero.
pub fn place(r: &TestResult, group_start_unix_s: f64) -> Result<(f64, Vec<SeriesPoint>), String> {
    let zero = r.started_unix_s.ok_or_else(|| {
        format!(
            "the {} result has no started_unix_s (its time zero): its intervals cannot be placed on the group's clock",
            r.test
        )
    })?;
    let offset = zero - group_start_unix_s;
    Ok((offset, series(&r.intervals, offset)))
}

/// `intervals` shifted by `offset` seconds.
pub fn series(intervals: &[IntervalResult], offset: f64) -> Vec<SeriesPoint> {
    intervals
        .iter()
        .map(|iv| SeriesPoint {
            start_s: offset + iv.start_s,
            end_s: offset + iv.end_s,
            throughput_bps: iv.throughput_bps,
            transactions_per_s: iv.transactions_per_s,
            latency_count: iv.latency_us.as_ref().map(|l| l.count),
            latency_mean_us: iv.latency_us.as_ref().map(|l| l.mean),
            latency_p50_us: iv.latency_us.as_ref().map(|l| l.p50),
            latency_p99_us: iv.latency_us.as_ref().map(|l| l.p99),
        })
        .collect()
}

/// The span of the group's clock in which a member measured: its first interval's start to
/// its last one's end.
fn span(s: &[SeriesPoint]) -> Option<(f64, f64)> {
    Some((s.first()?.start_s, s.last()?.end_s))
}

/// Round trips of the intervals of `s` wholly inside `[from, to]`.
fn rpm_window(s: &[SeriesPoint], from: f64, to: f64) -> Result<RpmWindow, String> {
    let inside: Vec<&SeriesPoint> = s
        .iter()
        .filter(|p| p.start_s >= from - 1e-9 && p.end_s <= to + 1e-9)
        .filter(|p| p.latency_count.unwrap_or(0) > 0 && p.latency_mean_us.is_some())
        .collect();
    let n: u64 = inside.iter().filter_map(|p| p.latency_count).sum();
    if inside.is_empty() || n == 0 {
        return Err(format!(
            "no interval with a timed round trip lies wholly within {from:.3}..{to:.3} s of the group's clock"
        ));
    }
    let sum: f64 = inside
        .iter()
        .map(|p| p.latency_count.unwrap_or(0) as f64 * p.latency_mean_us.unwrap_or(0.0))
        .sum();
    let mean = sum / n as f64;
    let mut p50: Vec<f64> = inside.iter().filter_map(|p| p.latency_p50_us).collect();
    p50.sort_by(f64::total_cmp);
    let median = match p50.len() {
        0 => f64::NAN,
        k if k % 2 == 1 => p50[k / 2],
        k => (p50[k / 2 - 1] + p50[k / 2]) / 2.0,
    };
    Ok(RpmWindow {
        start_s: inside.first().map_or(from, |p| p.start_s),
        end_s: inside.last().map_or(to, |p| p.end_s),
        intervals: inside.len(),
        transactions: n,
        mean_rtt_us: mean,
        median_interval_p50_us: median,
        rpm: if mean > 0.0 { 60e6 / mean } else { f64::INFINITY },
    })
}

/// The responsiveness of `probe` against the `load` members' spans (each a member's measured
/// series on the group's clock).
pub fn responsiveness(member: &str, probe: &[SeriesPoint], load: &[&[SeriesPoint]]) -> Responsiveness {
    let spans: Vec<(f64, f64)> = load.iter().filter_map(|s| span(s)).collect();
    let mut r = Responsiveness {
        member: member.to_string(),
        idle: None,
        idle_withheld: None,
        working: None,
        working_withheld: None,
    };
    if spans.is_empty() {
        let why = "no other member of the group measured anything: there is no load to compare with";
        r.idle_withheld = Some(why.into());
        r.working_withheld = Some(why.into());
        return r;
    }
    let first_load = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let (from, to) = (
        spans.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max),
        spans.iter().map(|s| s.1).fold(f64::INFINITY, f64::min),
    );
    let probe_start = probe.first().map_or(f64::INFINITY, |p| p.start_s);
    match rpm_window(probe, f64::NEG_INFINITY, first_load) {
        Ok(w) => r.idle = Some(w),
        Err(e) => {
            r.idle_withheld = Some(format!(
            "{e} (the load's first interval starts at {first_load:.3} s, the probe's at {probe_start:.3} s: \
                 start the probe earlier than the load, e.g. start = 2 on the load's tests)"
        ))
        }
    }
    if from >= to {
        r.working_withheld = Some(format!(
            "the other members never all measured at once (the last began at {from:.3} s, the first ended at {to:.3} s)"
        ));
    } else {
        match rpm_window(probe, from, to) {
            Ok(w) => r.working = Some(w),
            Err(e) => r.working_withheld = Some(e),
        }
    }
    r
}

/// Where a group's members ran, what the group runner needs of the plan's runner.
pub(crate) struct Context<'a> {
    pub plan: &'a Plan,
    pub arms: &'a [Arm],
    pub lab: Option<&'a Lab<'a>>,
    /// Without a lab: the run API's target, the server's agent and the clients.
    pub target: Option<&'a Target>,
    pub server_agent: Option<Target>,
    pub clients: Option<netrig_run::clients::Clients>,
    pub limit: Duration,
}

/// Each member's place in the lab for `arm` (`None` without a lab).
fn places(ctx: &Context, arm: &Arm, group: &GroupPlan) -> Result<Vec<Option<LabPlace>>, PlanError> {
    let Some(lab) = ctx.lab else {
        return Ok(vec![None; group.tests.len()]);
    };
    let v6 = ctx.plan.target.as_ref().and_then(|t| t.family.as_deref()) == Some("ipv6");
    group
        .tests
        .iter()
        .zip(group.member_names())
        .map(|(t, n)| {
            let route = ctx
                .plan
                .lab_route(&member_arm(arm, t))?
                .expect("a plan with a lab");
            execute::lab_place(lab.state, &route, v6).map(Some).map_err(|e| {
                PlanError::Invalid(format!(
                    "group {:?} test {n:?} (arm {:?}): {e}",
                    group.name, arm.name
                ))
            })
        })
        .collect()
}

/// What an arm's commands are told in a group: its first member's agent and hosts.
fn env(ctx: &Context, places: &[Option<LabPlace>]) -> Vec<(&'static str, String)> {
    match (ctx.target, places.first().and_then(|p| p.as_ref())) {
        (Some(t), _) => execute::agent_env(t),
        (None, Some(p)) => execute::place_env(p),
        _ => Vec::new(),
    }
}

/// Runs one group run: every member on its own thread, each started at its offset; a failed
/// member, or `cancel`, stops the others.
fn run_once(
    ctx: &Context,
    members: &[PreparedMember],
    a: usize,
    places: &[Option<LabPlace>],
    cancel: &Cancel,
) -> (GroupRun, Option<String>) {
    let cancels: Vec<Cancel> = members.iter().map(|_| Cancel::new()).collect();
    // The first member to fail, which stops the others: they would measure a different group
    // than the one asked for.
    let first_failure: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let started_unix_s = execute::now_s();
    let base = Instant::now();
    let outcomes: Vec<Result<TestResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .zip(&cancels)
            .zip(places)
            .map(|((m, c), place)| {
                let first_failure = &first_failure;
                s.spawn(move || {
                    let out = run_member(ctx, m, a, place, c, base);
                    if let Err(e) = &out {
                        let mut f = first_failure.lock().unwrap_or_else(|p| p.into_inner());
                        if f.is_none() && !c.is_cancelled() {
                            *f = Some(format!("test {:?} ({}) failed: {e}", m.name, m.kind.name()));
                        }
                    }
                    out
                })
            })
            .collect();
        let mut stopped = false;
        while !handles.iter().all(|h| h.is_finished()) {
            if !stopped {
                let failed = first_failure
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map(|f| format!("stopped: {f}"));
                let why = if cancel.is_cancelled() {
                    Some("interrupted".to_string())
                } else {
                    failed
                };
                if let Some(w) = why {
                    cancels.iter().for_each(|c| c.cancel(w.clone()));
                    stopped = true;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the member's thread panicked".into()))
            })
            .collect()
    });
    let mut failure = first_failure.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut runs = Vec::new();
    for ((m, out), spot) in members.iter().zip(outcomes).zip(places) {
        let mut run = MemberRun {
            member: m.name.clone(),
            kind: m.kind.name().to_string(),
            start_s: m.start_s,
            offset_s: None,
            offset_withheld: None,
            lab: spot.clone(),
            series: Vec::new(),
            result: None,
            error: None,
        };
        match out {
            Ok(r) => {
                match place(&r, started_unix_s) {
                    Ok((o, s)) => {
                        run.offset_s = Some(o);
                        run.series = s;
                    }
                    Err(e) => run.offset_withheld = Some(e),
                }
                run.result = Some(r);
            }
            Err(e) => {
                failure.get_or_insert_with(|| format!("test {:?} ({}) failed: {e}", m.name, m.kind.name()));
                run.error = Some(e);
            }
        }
        runs.push(run);
    }
    let responsiveness = probes(&runs);
    (
        GroupRun {
            started_unix_s,
            members: runs,
            responsiveness,
        },
        failure,
    )
}

/// One member's run: waits for its start (or a cancel), then runs in its lab host or here.
fn run_member(
    ctx: &Context,
    m: &PreparedMember,
    a: usize,
    place: &Option<LabPlace>,
    c: &Cancel,
    base: Instant,
) -> Result<TestResult, String> {
    let due = base + Duration::from_secs_f64(m.start_s);
    while Instant::now() < due {
        if c.is_cancelled() {
            return Err("stopped before it started".to_string());
        }
        std::thread::sleep((due - Instant::now()).min(Duration::from_millis(10)));
    }
    let (planned, args) = &m.arms[a];
    match (ctx.lab, place) {
        (Some(l), Some(place)) => execute::run_in_host(&l.exe, place, m.kind.name(), args, &planned.spec, c),
        _ => {
            let target = ctx.target.expect("a target without a lab");
            let local = LocalOptions {
                sockets: planned.local.sockets.clone(),
                cpus: planned.local.cpus.clone(),
                udp_size_default: planned.fit_to_path,
                server_agent: ctx.server_agent.clone(),
                clients: ctx.clients.clone(),
                peer: planned.peer.unwrap_or_default(),
                server_output: planned.get_server_output,
                profile: planned.profile,
                ..LocalOptions::default()
            };
            netrig_run::run(target, local, &planned.spec, c, &mut |_| {}).map_err(|e| e.to_string())
        }
    }
}

/// Responsiveness of every request/response member against the others.
fn probes(runs: &[MemberRun]) -> Vec<Responsiveness> {
    runs.iter()
        .enumerate()
        .filter(|(_, m)| {
            m.result
                .as_ref()
                .is_some_and(|r| r.summary.transactions_per_s.is_some())
                && m.series.iter().any(|p| p.latency_count.is_some())
        })
        .map(|(i, m)| {
            let load: Vec<&[SeriesPoint]> = runs
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, o)| o.series.as_slice())
                .collect();
            responsiveness(&m.member, &m.series, &load)
        })
        .collect()
}

/// Runs every group of the plan, after its tests: rounds of the arms, each run of a group
/// between its arm's set-up and tear-down, until every member of every arm is confident or
/// the iterations run out. Returns why it stopped early, if it did.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_all(
    ctx: &Context,
    prepared: &[Vec<PreparedMember>],
    doc: &mut Experiment,
    rng: &mut fastrand::Rng,
    cancel: &Cancel,
    progress: &mut dyn FnMut(&Progress),
    done: &mut usize,
    most: usize,
) -> Option<String> {
    let plan = ctx.plan;
    let it = &plan.iterations;
    let no_point = crate::sweep::Point { values: Vec::new() };
    for (g, members) in plan.groups.iter().zip(prepared) {
        let (places, shapes) = match places_and_shapes(ctx, g) {
            Ok(p) => p,
            Err(e) => return Some(e),
        };
        let mut outcome = GroupOutcome {
            name: g.name.clone(),
            members: members.iter().map(|m| m.name.clone()).collect(),
            arms: ctx
                .arms
                .iter()
                .map(|a| GroupArm {
                    arm: a.name.clone(),
                    runs: Vec::new(),
                    members: Vec::new(),
                })
                .collect(),
            comparisons: Vec::new(),
        };
        let what = format!("group {}", g.name);
        let mut stop = None;
        'rounds: for round in 0..it.max {
            let order = execute::round_order(ctx.arms.len(), plan.order, rng);
            for &a in &order {
                progress(&Progress {
                    kind: &what,
                    point: &no_point,
                    arm: &ctx.arms[a].name,
                    iteration: round + 1,
                    done: *done,
                    most,
                });
                if cancel.is_cancelled() {
                    stop = Some("interrupted".to_string());
                    break 'rounds;
                }
                let once = Once {
                    ctx,
                    what: &what,
                    members,
                    a,
                    places: &places[a],
                    shape: &shapes[a],
                    cancel,
                };
                let (run, failed) = once.run(&mut doc.commands);
                *done += usize::from(run.is_some());
                outcome.arms[a].runs.extend(run);
                if failed.is_some() {
                    stop = failed;
                    break 'rounds;
                }
            }
            if round + 1 >= it.min && round + 1 < it.max && it.max > 1 {
                let all = outcome
                    .arms
                    .iter()
                    .all(|ga| (0..members.len()).all(|i| analysis::confident(&member_results(ga, i), it)));
                if all {
                    break;
                }
            }
        }
        finish(&mut outcome, plan, &mut doc.warnings);
        doc.groups.push(outcome);
        if stop.is_some() {
            return stop;
        }
    }
    None
}

/// Each arm's places for the group's members, and its lab changes (a link's rate, queue, delay,
/// loss, ...), checked against the lab as built: applied before each of the arm's group runs
/// and put back after, as for single runs; every member's place records them.
#[allow(clippy::type_complexity)]
fn places_and_shapes(
    ctx: &Context,
    g: &GroupPlan,
) -> Result<
    (
        Vec<Vec<Option<LabPlace>>>,
        Vec<Vec<netrig_lab::arm_shape::Change>>,
    ),
    String,
> {
    let mut places: Vec<Vec<Option<LabPlace>>> = ctx
        .arms
        .iter()
        .map(|a| places(ctx, a, g))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let shapes: Vec<Vec<netrig_lab::arm_shape::Change>> = match ctx.lab {
        Some(l) => ctx
            .arms
            .iter()
            .map(|a| crate::lab_counters::arm_shape(l.state, a))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("group {:?}: {e}", g.name))?,
        None => vec![Vec::new(); ctx.arms.len()],
    };
    for (ps, s) in places.iter_mut().zip(&shapes) {
        for p in ps.iter_mut().flatten() {
            p.shape = s.clone();
        }
    }
    Ok((places, shapes))
}

/// One run of a group in arm `a`, between the arm's commands.
struct Once<'a> {
    ctx: &'a Context<'a>,
    /// "group NAME", for messages.
    what: &'a str,
    members: &'a [PreparedMember],
    a: usize,
    places: &'a [Option<LabPlace>],
    shape: &'a [netrig_lab::arm_shape::Change],
    cancel: &'a Cancel,
}

impl Once<'_> {
    /// The run (None when the arm's commands failed before it), and why the experiment stops.
    fn run(&self, commands: &mut Vec<crate::command::CommandRun>) -> (Option<GroupRun>, Option<String>) {
        let (ctx, arm) = (self.ctx, &self.ctx.arms[self.a]);
        let ns = arm.in_host.as_deref().and_then(|h| {
            let l = ctx.lab?;
            Some((h, l.state.hosts.get(h)?.ns.clone()))
        });
        let around = execute::Around {
            arm,
            shape: self.shape,
            limit: ctx.limit,
            env: env(ctx, self.places),
            in_ns: ns.as_ref().map(|(h, n)| (*h, n.as_str())),
        };
        if let Err(f) = around.before(commands) {
            return (None, Some(f));
        }
        // The path elements' counters over the whole group run: one window for the group,
        // the same counts in every member's result (the members share the links).
        let elements = ctx.lab.map(|l| crate::lab_counters::before(l.state));
        let (mut run, failed) = run_once(ctx, self.members, self.a, self.places, self.cancel);
        if let (Some(l), Some(b)) = (ctx.lab, elements) {
            let counts = crate::lab_counters::after(l.state, &b, std::time::SystemTime::now());
            for m in run.members.iter_mut() {
                if let Some(r) = m.result.as_mut() {
                    r.path_elements = counts.clone();
                }
            }
        }
        let failed_teardown = around.after(commands);
        let stop = match failed {
            Some(_) if self.cancel.is_cancelled() => Some("interrupted".into()),
            Some(f) => Some(format!("{} (arm {:?}): {f}", self.what, arm.name)),
            None => failed_teardown,
        };
        (Some(run), stop)
    }
}

/// Member `i`'s results over an arm's runs (those that completed).
fn member_results(ga: &GroupArm, i: usize) -> Vec<TestResult> {
    ga.runs
        .iter()
        .filter_map(|r| r.members.get(i)?.result.clone())
        .collect()
}

/// Each member's estimates, confidence and comparisons with the baseline arm.
fn finish(g: &mut GroupOutcome, plan: &Plan, warnings: &mut Vec<String>) {
    let it = &plan.iterations;
    let per_arm: Vec<Vec<ArmOutcome>> = g
        .arms
        .iter()
        .map(|ga| {
            g.members
                .iter()
                .enumerate()
                .map(|(i, _)| ArmOutcome {
                    arm: ga.arm.clone(),
                    runs: member_results(ga, i),
                    estimates: Vec::new(),
                    confident: None,
                    lab: None,
                    clients: Vec::new(),
                    profile: None,
                })
                .collect()
        })
        .collect();
    for (ga, outs) in g.arms.iter_mut().zip(&per_arm) {
        ga.members = outs
            .iter()
            .zip(&g.members)
            .map(|(o, name)| {
                let runs: Vec<_> = o.runs.iter().collect();
                let confident = (it.max > 1 && !o.runs.is_empty()).then(|| analysis::confident(&o.runs, it));
                if it.max > 1 {
                    warnings.extend(analysis::not_confident_warning(
                        &format!("group {} test {name}", g.name),
                        &crate::sweep::Point { values: Vec::new() },
                        &ga.arm,
                        &o.runs,
                        it,
                    ));
                }
                MemberEstimates {
                    member: name.clone(),
                    estimates: metric::present(&runs)
                        .into_iter()
                        .map(|m| analysis::estimate(m, &o.runs, it.level))
                        .collect(),
                    confident,
                }
            })
            .collect();
    }
    if per_arm.len() > 1 {
        for (i, name) in g.members.iter().enumerate() {
            let mut comparisons = Vec::new();
            for (a, outs) in per_arm.iter().enumerate() {
                let base = plan.baseline_of(a);
                if a != base && base < per_arm.len() {
                    comparisons.extend(analysis::compare_within(
                        &per_arm[base][i],
                        &outs[i],
                        it.level,
                        Some(it.width),
                    ));
                }
            }
            g.comparisons.push(MemberComparison {
                member: name.clone(),
                comparisons,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(i: u32, start: f64, end: f64, bps: f64, latency: Option<(u64, f64)>) -> IntervalResult {
        let lat = latency.map(|(count, mean)| {
            serde_json::json!({"count": count, "mean": mean, "stddev": 0.0, "min": mean, "p50": mean,
                "p90": mean, "p99": mean, "p999": mean, "max": mean, "p75": mean, "p95": mean,
                "p9999": mean, "p99999": mean, "histogram": null})
        });
        serde_json::from_value(serde_json::json!({
            "index": i, "start_s": start, "end_s": end, "bytes": 0, "throughput_bps": bps,
            "tx_throughput_bps": null, "rx_throughput_bps": null,
            "transactions_per_s": latency.map(|(c, _)| c as f64 / (end - start)),
            "latency_us": lat, "flows": []
        }))
        .unwrap()
    }

    /// Each member's intervals go on the group's clock at its own measured time zero: a probe
    /// started at the group's start and a load started 2.03 s later (its result's wall clock)
    /// have their samples 2.03 s apart on the one axis, whatever their own clocks say.
    #[test]
    fn members_samples_are_placed_on_the_groups_clock_by_their_measured_time_zero() {
        let t0 = 1_800_000_000.0;
        let probe: Vec<IntervalResult> = (0..8)
            .map(|i| {
                let rtt = if i >= 3 { 100_000.0 } else { 20.0 };
                interval(i, i as f64 * 0.5, (i + 1) as f64 * 0.5, 0.0, Some((10, rtt)))
            })
            .collect();
        let load: Vec<IntervalResult> = (0..4)
            .map(|i| interval(i, i as f64 * 0.5, (i + 1) as f64 * 0.5, 95e6, None))
            .collect();
        let (p_off, p) = (0.004, series(&probe, 0.004));
        let (l_off, l) = (2.03, series(&load, 2.03));
        assert!((p_off - 0.004f64).abs() < 1e-12 && (l_off - 2.03f64).abs() < 1e-12);
        assert!((p[4].start_s - 2.004).abs() < 1e-9 && (p[4].end_s - 2.504).abs() < 1e-9);
        assert!(
            (l[0].start_s - 2.03).abs() < 1e-9,
            "the load's first sample starts when it did"
        );
        assert!((l[3].end_s - 4.03).abs() < 1e-9);
        // The same sample times relative to each member's own start would put both at 0.
        assert!((l[0].start_s - p[0].start_s - 2.026).abs() < 1e-9);

        // Idle: the probe's intervals that ended before the load's first began (0..2.004 s);
        // working: those wholly within the load's span (2.03..4.03: 2.504..4.004 s).
        let r = responsiveness("probe", &p, &[&l]);
        let idle = r.idle.as_ref().expect("an idle window");
        assert_eq!(idle.intervals, 4, "{idle:?}");
        assert!((idle.end_s - 2.004).abs() < 1e-9);
        assert!((idle.mean_rtt_us - (3.0 * 20.0 + 100_000.0) / 4.0).abs() < 1e-6);
        let w = r.working.as_ref().expect("a working window");
        assert_eq!((w.intervals, w.transactions), (3, 30), "{w:?}");
        assert!((w.start_s - 2.504).abs() < 1e-9 && (w.end_s - 4.004).abs() < 1e-9);
        assert!((w.mean_rtt_us - 100_000.0).abs() < 1e-6);
        assert!((w.rpm - 600.0).abs() < 1e-6, "60 / 0.1 s");

        // A result without a time zero is not placed (never assumed to have started on time).
        let mut res: TestResult = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../netrig-report/tests/fixtures/tcp-rr.json"
            ))
            .unwrap(),
        )
        .unwrap();
        res.started_unix_s = None;
        assert!(place(&res, t0).unwrap_err().contains("started_unix_s"));
        res.started_unix_s = Some(t0 + 1.5);
        let (off, s) = place(&res, t0).unwrap();
        assert!((off - 1.5).abs() < 1e-9);
        assert_eq!(s.len(), res.intervals.len());
    }

    /// No load, or a probe that starts with the load: the window is withheld with the reason.
    #[test]
    fn responsiveness_without_a_window_says_why() {
        let p = series(&[interval(0, 0.0, 1.0, 0.0, Some((5, 50.0)))], 0.0);
        let r = responsiveness("p", &p, &[]);
        assert!(r.idle.is_none() && r.idle_withheld.unwrap().contains("no other member"));
        let l = series(&[interval(0, 0.0, 1.0, 1e6, None)], 0.0);
        let r = responsiveness("p", &p, &[&l]);
        assert!(r.idle_withheld.unwrap().contains("start the probe earlier"));
        assert_eq!(r.working.unwrap().transactions, 5);
    }

    #[test]
    fn a_group_reads_with_its_members_and_offsets() {
        let p = Plan::from_toml(
            r#"
            name = "rrul"
            [[group]]
            name = "rrul"
            interval = "250ms"
            [[group.test]]
            name = "probe"
            kind = "tcp-rr"
            [[group.test]]
            kind = "tcp-stream"
            start = "2s"
            [[group.test]]
            kind = "tcp-maerts"
            start = 2.5
            "#,
        )
        .unwrap();
        let g = &p.groups[0];
        assert_eq!(g.interval_s(), 0.25);
        assert_eq!(g.member_names(), ["probe", "tcp-stream", "tcp-maerts"]);
        assert_eq!((g.tests[1].start, g.tests[2].start), (2.0, 2.5));
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
        let prepared = prepare(&p).unwrap();
        let (probe, args) = &prepared[0][0].arms[0];
        assert_eq!(probe.spec.interval_s, Some(0.25), "{args:?}");
        for (text, needle) in [
            ("[[group]]\nname = 'g'\ntest = []\n", "a group has 1 to"),
            ("[[group]]\nname = 'g'\n[[group.test]]\nkind = 'tcp-rr'\nstart = -1\n", "start -1"),
            ("[[group]]\nname = 'g'\n[[group.test]]\nkind = 'tcp-rr'\nstart = 'soon'\n", "not a duration"),
            (
                "[[group]]\nname = 'g'\n[[group.test]]\nkind = 'tcp-rr'\nname = 'a'\n[[group.test]]\nkind = 'tcp-stream'\nname = 'a'\n",
                "same name",
            ),
            ("[[group]]\nname = 'g'\n[[group.test]]\nkind = 'tcp-rr'\nclient = 'c1'\n", "no [lab]"),
        ] {
            let e = Plan::from_toml(&format!("name = 'x'\n{text}")).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = crate::runner::check(
            &Plan::from_toml(
                "name='x'\n[[group]]\nname='g'\n[[group.test]]\nkind='tcp-rr'\nargs=['-m','0']\n",
            )
            .unwrap(),
        );
        assert!(e.is_err());
    }
}

#[cfg(test)]
mod arm_clients_tests {
    use crate::plan::Plan;

    const LAB: &str = r#"
        name = "x"
        [lab]
        [lab.hosts.c1]
        [lab.hosts.c2]
        [lab.hosts.s1]
        [[lab.lans]]
        name = "sw"
        hosts = ["c1", "c2", "s1"]
        [target]
        client = "c1"
        server = "s1"
        [[group]]
        name = "g"
        [[group.test]]
        kind = "tcp-rr"
    "#;

    #[test]
    fn an_arm_with_clients_in_a_plan_with_groups_is_refused_by_name() {
        let ok = Plan::from_toml(&format!("{LAB}\n[[arm]]\nname = 'one'\nclient = 'c2'\n"));
        assert!(ok.is_ok(), "{:?}", ok.err());
        let e = Plan::from_toml(&format!("{LAB}\n[[arm]]\nname = 'two'\nclients = ['c1', 'c2']\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("group \"g\"") && e.contains("arm \"two\"") && e.contains("clients"),
            "{e}"
        );
    }
}
