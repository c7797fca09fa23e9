//! The experiment commands' glue: a test's command line with sweeps or
//! iterations, `netrig run PLAN.toml`, `netrig results`, `netrig compare`.
//! The work is netrig-experiment's; this file parses, shows progress,
//! prints and saves.

use crate::cli::{CompareArgs, ExperimentArgs, PlanArgs, ResultsArgs, RunArgs};
use crate::Usage;
use anyhow::{bail, Context, Result};
use netrig_experiment::document::Experiment;
use netrig_experiment::plan::{Iterations, Plan, TargetPlan, TestPlan};
use netrig_experiment::sweep::Sweep;
use netrig_experiment::{runner, store};
use netrig_export::experiment as output;
use netrig_run::Cancel;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Exit status when a regression check finds a regression.
pub const REGRESSED: u8 = 3;

/// A regression was found (the exit status says so; the lines were printed).
#[derive(Debug)]
pub struct Regressed;

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a metric got significantly worse than the baseline, beyond the threshold")
    }
}

impl std::error::Error for Regressed {}

/// Exit status of an experiment stopped by Ctrl-C (what completed was
/// printed, and saved if asked), as a shell's for SIGINT.
pub const INTERRUPTED: u8 = 130;

/// Ctrl-C stopped the experiment.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted: the experiment stopped after tearing down the arm in hand (what completed is shown, marked incomplete)")
    }
}

impl std::error::Error for Interrupted {}

/// The plan a test's command line asks for: its kind and options, the
/// swept options, iterations, and where it goes.
pub fn plan_of(
    kind: &str,
    args: Vec<String>,
    sweeps: Vec<Sweep>,
    run: &RunArgs,
    one: &crate::cli::OneEndArgs,
) -> Result<Plan> {
    let e = &run.experiment;
    let iterations = iterations(e, &Iterations::default())?;
    let t = &run.target;
    let plan = Plan {
        name: kind.to_string(),
        description: None,
        target: Some(TargetPlan {
            host: t.host.clone(),
            port: t.port,
            family: match (t.ipv4, t.ipv6) {
                (true, _) => Some("ipv4".into()),
                (_, true) => Some("ipv6".into()),
                _ => None,
            },
            bind: t.bind.clone(),
            // Paths as given, made absolute: a plan runs in its own directory.
            key: t.key.as_ref().map(|k| cwd_at_start().join(k)),
            agent_key: t.agent_key.clone(),
            server_agent: one.server_agent.clone(),
            clients: one.clients.map(netrig_experiment::plan::TargetClients::Count),
            client_addrs: one.client_addrs.clone(),
            client: None,
            server: None,
            peer: None,
            path: None,
        }),
        tests: vec![TestPlan {
            kind: kind.to_string(),
            args,
            sweep: sweeps,
        }],
        groups: vec![],
        arms: vec![],
        baseline: None,
        iterations,
        // `--profile` stays in the test's own options, as the kind reads it.
        profile: false,
        order: Default::default(),
        seed: None,
        command_timeout_s: 120.0,
        lab: None,
        study: None,
    };
    plan.check().map_err(|e| Usage(e.to_string()))?;
    Ok(plan)
}

/// The iterations a command line asks for, over `plan`'s (a plan file's
/// `[iterations]`, or the one-run default for a test's command line).
/// `--iterations` sets only the number of runs and `--confidence` only the
/// level and width: what the command line does not say stays the plan's
/// (`netrig run plan.toml --iterations 1` keeps the plan's 95 %, 10 %).
fn iterations(e: &ExperimentArgs, plan: &Iterations) -> Result<Iterations> {
    let mut it = plan.clone();
    if let Some((max, min)) = e.iterations {
        it.max = max;
        it.min = min.unwrap_or(max.min(3));
    }
    if let Some((level, width)) = e.confidence {
        it.level = level;
        it.width = width;
        if e.iterations.is_none() && plan.max <= 1 {
            // netperf's -I without -i: up to 10 runs, at least 3 (a plan
            // that already repeats keeps its own counts).
            it.max = 10;
            it.min = 3;
        }
    }
    Ok(it)
}

/// Whether a test's command line asks for an experiment rather than a run.
pub fn wanted(sweeps: &[Sweep], run: &RunArgs) -> bool {
    !sweeps.is_empty() || run.experiment.iterations.is_some() || run.experiment.confidence.is_some()
}

/// Runs `plan` with a progress bar on a terminal, then prints and saves.
pub fn run_plan(
    plan: &Plan,
    out: &ExperimentArgs,
    json: bool,
    cancel: &Cancel,
    lab: Option<&runner::Lab>,
) -> Result<Experiment> {
    if out.csv && json {
        bail!(Usage("--csv and --json: choose one".into()));
    }
    if let Some(url) = &out.push {
        crate::push::check(url)?;
    }
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(1);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix}{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs (at most; ETA {eta}) {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    if let (Some(b), Some(s)) = (&bar, &plan.study) {
        b.set_prefix(study_line(s));
    }
    let mut experiment = runner::run_in_lab(plan, lab, cancel, &mut |p| {
        if let Some(b) = &bar {
            b.set_length(p.most as u64);
            b.set_position(p.done as u64);
            b.set_message(format!(
                "{} {} arm {} run {}",
                p.kind, p.point, p.arm, p.iteration
            ));
        }
    })
    .map_err(|e| Usage(e.to_string()))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if plan.study.is_some() {
        experiment.answer = netrig_studies::answer(&experiment);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&experiment)?);
    } else if out.csv {
        print!("{}", output::csv(&experiment).map_err(anyhow::Error::msg)?);
    } else {
        print!("{}", output::render(&experiment));
    }
    if let Some(dir) = &out.plot {
        crate::plot::write_beside(&netrig_plot::plots_for_experiment(&experiment), dir, true)?;
    }
    if let Some(path) = &out.html {
        crate::report::write_report(
            path,
            &netrig_export::html::experiment_report(&experiment, &crate::report::command_line()),
        )?;
    }
    if let Some(dir) = &out.save {
        let dir = match dir {
            Some(d) => d.clone(),
            None => cwd_at_start().join(store::DEFAULT_DIR),
        };
        let path = store::save(&experiment, &dir).map_err(anyhow::Error::msg)?;
        eprintln!("saved {}", path.display());
    }
    // The table says them; JSON and CSV readers see them on stderr.
    if json || out.csv {
        for w in &experiment.warnings {
            eprintln!("warning: {w}");
        }
    }
    // What completed, shown and saved above, even when the experiment stopped early.
    if let Some(url) = &out.push {
        crate::push::push(url, &netrig_export::openmetrics::experiment_groups(&experiment))?;
    }
    match experiment.stopped.as_deref() {
        Some("interrupted") => return Err(Interrupted.into()),
        Some(s) => bail!("the experiment stopped early (what completed is shown): {s}"),
        None => {}
    }
    Ok(experiment)
}

/// "study ipqos, full form (about 40 min): " or "study ipqos, quick form (about 2 min; the full
/// form about 40): " — what the progress bar starts with and stderr says at the start.
fn study_line(s: &netrig_experiment::study::StudyPlan) -> String {
    match (s.ran_quick, s.quick.minutes) {
        (false, _) => format!("study {}, full form (about {} min): ", s.kind, s.full_minutes),
        (true, Some(m)) => format!(
            "study {}, quick form (about {m} min; the full form about {} min): ",
            s.kind, s.full_minutes
        ),
        (true, None) => format!(
            "study {}, quick form (the full form about {} min): ",
            s.kind, s.full_minutes
        ),
    }
}

/// The directory netrig started in (before a plan moved it to its own).
fn cwd_at_start() -> PathBuf {
    static START: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    START
        .get_or_init(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
        .clone()
}

/// `netrig run PLAN.toml`.
pub fn run_file(a: &PlanArgs, cancel: &Cancel) -> Result<()> {
    let text = std::fs::read_to_string(&a.plan).with_context(|| format!("reading {}", a.plan.display()))?;
    let mut plan = Plan::from_toml(&text).map_err(|e| Usage(format!("{}: {e}", a.plan.display())))?;
    if a.host.is_some() || a.port.is_some() {
        let t = plan.target.get_or_insert(TargetPlan {
            host: None,
            port: None,
            family: None,
            bind: None,
            key: None,
            agent_key: None,
            server_agent: None,
            clients: None,
            client_addrs: Vec::new(),
            client: None,
            server: None,
            peer: None,
            path: None,
        });
        // -H names the agent in place of the plan's, with its own port (or -p's),
        // read here so that what is wrong in them is told by their names.
        match &a.host {
            Some(h) => {
                let (host, port) = netrig_run::host_port("-H", h, "-p", a.port).map_err(Usage)?;
                t.host = Some(host);
                t.port = Some(port);
            }
            None if t.host.is_none() => {
                return Err(Usage(format!(
                    "-p {} is the port of an agent given with -H (or the plan's target.host); without \
                     one the plan runs against an agent in this process, on a port of its own",
                    a.port.unwrap_or_default()
                ))
                .into())
            }
            None => t.port = a.port,
        }
    }
    // Paths given here are this directory's; the plan's own (nft -f
    // rules.nft) are the plan's directory's, where its commands run.
    let here = cwd_at_start();
    let mut output = a.output.clone();
    if let Some(Some(dir)) = &mut output.save {
        *dir = here.join(&*dir);
    }
    if let Some(html) = &mut output.html {
        *html = here.join(&*html);
    }
    if let Some(dir) = &mut output.plot {
        *dir = here.join(&*dir);
    }
    let baseline_path = a.gate.baseline.as_ref().map(|b| here.join(b));
    let plan_file = here.join(&a.plan);
    if let Some(dir) = a.plan.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::env::set_current_dir(dir).with_context(|| format!("entering {}", dir.display()))?;
    }
    if let Some(s) = &plan.study {
        if !netrig_studies::known(&s.kind) {
            return Err(Usage(format!(
                "{}: study.kind {:?}: no such study (netrig knows {})",
                a.plan.display(),
                s.kind,
                netrig_studies::kinds().join(", ")
            ))
            .into());
        }
    }
    if a.quick {
        netrig_experiment::study::apply_quick(&mut plan)
            .map_err(|e| Usage(format!("{}: --quick: {e}", a.plan.display())))?;
    }
    if let Some(s) = &plan.study {
        eprintln!("{}{}", study_line(s), s.question);
    }
    if let Some(l) = a.length {
        for t in &mut plan.tests {
            t.args = set_option(&t.args, &["-l", "--length", "-t", "--time"], &l.to_string());
        }
    }
    if a.output.iterations.is_some() || a.output.confidence.is_some() {
        plan.iterations = iterations(&a.output, &plan.iterations)?;
    }
    let baseline = baseline_path
        .as_ref()
        .map(|b| store::load(b).map_err(Usage))
        .transpose()?;
    let e = match plan.lab.is_some() {
        true => {
            let exe = std::env::current_exe()?;
            let state = build_lab(&plan_file, &plan, &exe, cancel)?;
            let lab = runner::Lab { state: &state, exe };
            let e = run_plan(&plan, &output, a.json, cancel, Some(&lab));
            // Removed at the end, after a failed run and after Ctrl-C alike.
            if let Err(t) = netrig_lab::build::teardown(&state) {
                eprintln!("warning: {t} (netrig lab down --stale removes what is left)");
            }
            e?
        }
        false => run_plan(&plan, &output, a.json, cancel, None)?,
    };
    match baseline {
        Some(b) => gate(&b, &e, &a.gate.gate),
        None => Ok(()),
    }
}

/// Builds a plan's `[lab]` (its own file read as `netrig lab up` reads it), owned by this
/// process (a crash leaves it stale, for `netrig lab down --stale` and the next `lab up`);
/// Ctrl-C while it builds removes what was built.
fn build_lab(
    file: &std::path::Path,
    plan: &Plan,
    exe: &std::path::Path,
    cancel: &Cancel,
) -> Result<netrig_lab::LabState> {
    use std::sync::atomic::Ordering::SeqCst;
    let stem: String = plan
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(28)
        .collect();
    let o = netrig_lab::UpOptions {
        file: file.to_path_buf(),
        name: Some(format!("{stem}-{}", std::process::id())),
        foreground: true,
        witness: None,
        witness_length: 2.0,
        exe: exe.to_path_buf(),
    };
    crate::lab::RUNNING.store(true, SeqCst);
    let built = netrig_lab::up(&o, &mut |m| eprintln!("netrig lab: {m}"));
    crate::lab::RUNNING.store(false, SeqCst);
    let state = match built {
        Ok(s) => s,
        Err(netrig_lab::LabError::Interrupted) => {
            eprintln!("netrig lab: interrupted while building; what was built is removed");
            return Err(Interrupted.into());
        }
        Err(e) if e.is_usage() => return Err(Usage(e.to_string()).into()),
        Err(e) => return Err(e.into()),
    };
    if netrig_lab::interrupted() {
        cancel.cancel("interrupted (Ctrl-C)");
    }
    for w in state.witness.iter().filter_map(|w| w.warning.as_ref()) {
        eprintln!("warning: lab: {w}");
    }
    Ok(state)
}

/// `args` with the option named by any of `names` set to `value`
/// (replaced where given, else added as the first name).
fn set_option(args: &[String], names: &[&str], value: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if names.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if names
            .iter()
            .any(|n| n.starts_with("--") && a.starts_with(&format!("{n}=")))
        {
            i += 1;
            continue;
        }
        out.push(a.clone());
        i += 1;
    }
    out.push(names[0].to_string());
    out.push(value.to_string());
    out
}

/// `netrig results [DIR]`.
pub fn results(a: &ResultsArgs) -> Result<()> {
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from(store::DEFAULT_DIR));
    let lines = store::list(&dir).map_err(Usage)?;
    if lines.is_empty() {
        eprintln!("no saved experiment in {}", dir.display());
    }
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

/// `netrig compare BASELINE NEW`.
pub fn compare(a: &CompareArgs) -> Result<()> {
    let load = |p: &Path| store::load(p).map_err(Usage);
    let (b, n) = (load(&a.baseline)?, load(&a.new)?);
    gate(&b, &n, &a.gate)
}

/// The regression gate: prints every check and the environments'
/// differences; fails with [`Regressed`] when a metric regressed.
fn gate(base: &Experiment, new: &Experiment, g: &crate::cli::GateArgs) -> Result<()> {
    let checks = store::compare(base, new, g.metric.as_deref(), g.threshold, g.level).map_err(Usage)?;
    println!(
        "\nregression check against {:?} ({} check(s)): regressed means worse by more than {}%, the whole {}% interval beyond it",
        base.plan.name,
        checks.len(),
        g.threshold,
        g.level
    );
    for c in &checks {
        println!("  {}", c.line);
    }
    let diffs = store::environment_differences(base, new);
    if !diffs.is_empty() {
        println!("the environments differ (the comparison may measure that too):");
        for d in diffs {
            println!("  {d}");
        }
    }
    if checks.iter().any(|c| c.regressed) {
        return Err(Regressed.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        e: ExperimentArgs,
    }

    fn args(a: &[&str]) -> ExperimentArgs {
        Cli::try_parse_from(std::iter::once("netrig").chain(a.iter().copied()))
            .unwrap()
            .e
    }

    /// `--iterations` on the command line of a plan sets the runs and keeps
    /// the plan's level, width and metric (it replaced them with 99, 5:
    /// plans/ia64.toml's 95/10 printed as a 99 % interval); `--confidence`
    /// sets them and keeps the plan's runs.
    #[test]
    fn the_command_line_overrides_only_what_it_names() {
        let plan = Iterations {
            max: 5,
            min: 3,
            level: 95.0,
            width: 10.0,
            metric: Some("latency_p99".into()),
        };
        let it = iterations(&args(&["--iterations", "1"]), &plan).unwrap();
        assert_eq!((it.max, it.min, it.level, it.width), (1, 1, 95.0, 10.0));
        assert_eq!(it.metric.as_deref(), Some("latency_p99"));
        let it = iterations(&args(&["--confidence", "99,2"]), &plan).unwrap();
        assert_eq!((it.max, it.min, it.level, it.width), (5, 3, 99.0, 2.0));
        let it = iterations(&args(&["--iterations", "4,2", "--confidence", "90,20"]), &plan).unwrap();
        assert_eq!((it.max, it.min, it.level, it.width), (4, 2, 90.0, 20.0));
        // A test's command line: netperf's defaults, and -I alone means -i 10,3.
        let it = iterations(&args(&["--confidence", "95,5"]), &Iterations::default()).unwrap();
        assert_eq!((it.max, it.min, it.level, it.width), (10, 3, 95.0, 5.0));
        let it = iterations(&args(&["--iterations", "5"]), &Iterations::default()).unwrap();
        assert_eq!((it.max, it.min, it.level, it.width), (5, 3, 99.0, 5.0));
    }
}
