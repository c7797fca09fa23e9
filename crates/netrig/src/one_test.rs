//! One test of a kind from its subcommand (`netrig tcp-stream ...`): run and exported as asked,
//! or handed to an experiment when it sweeps or iterates; and one client process's share of a
//! `--clients` run.

use crate::cli::{OneEndArgs, RunArgs, TargetArgs};
use crate::report::{command_line, write_report};
use crate::{cancel, experiment, plot, progress, Usage, EXPERIMENT};
use anyhow::{bail, Result};
use clap::FromArgMatches;
use netrig_experiment::sweep::Sweep;
use netrig_export::{exporter, Exporter, Format};
use netrig_kinds::Kind;
use netrig_run::{LocalOptions, Target};
use std::time::Duration;

/// `--server-agent HOST[:PORT]`, with this client's keys (`--key`, `--agent-key`).
fn server_agent(t: &TargetArgs, one: &OneEndArgs) -> Result<Option<Target>> {
    let Some(s) = &one.server_agent else {
        return Ok(None);
    };
    Ok(Some(t.spec().server_agent(s).map_err(Usage)?))
}

fn format(a: &RunArgs) -> Result<Format> {
    Ok(match (a.json, a.json_stream, a.experiment.csv) {
        (true, _, true) | (_, true, true) => bail!(Usage("--csv and --json: choose one".into())),
        (_, true, _) => Format::JsonStream,
        (true, _, _) => Format::Json,
        (_, _, true) => Format::Csv,
        _ => Format::Table,
    })
}

/// Runs one test of `kind` as its subcommand's matches `m` ask (an
/// experiment when it sweeps `sweeps` or iterates), and prints it as the
/// user asked.
pub fn test(
    kind: &'static dyn Kind,
    m: &clap::ArgMatches,
    args: Vec<String>,
    sweeps: Vec<Sweep>,
) -> Result<()> {
    let run = RunArgs::from_arg_matches(m)?;
    if let Some(url) = &run.experiment.push {
        crate::push::check(url)?;
    }
    // Only a kind with one end takes these (its subcommand alone has them).
    let one = match kind.ends() {
        netrig_kinds::Ends::ClientOnly(_) => OneEndArgs::from_arg_matches(m)?,
        _ => OneEndArgs::default(),
    };
    if experiment::wanted(&sweeps, &run) {
        if run.json_stream {
            bail!(Usage(
                "--json-stream shows one run as it goes; an experiment's document is --json".into()
            ));
        }
        if run.start_at.is_some() {
            bail!(Usage(
                "--start-at begins one run at an instant; an experiment's runs follow one another".into()
            ));
        }
        let plan = experiment::plan_of(kind.name(), args, sweeps, &run, &one)?;
        EXPERIMENT.store(true, std::sync::atomic::Ordering::Relaxed);
        experiment::run_plan(&plan, &run.experiment, run.json, cancel(), None)?;
        return Ok(());
    }
    if run.experiment.save.is_some() {
        bail!(Usage(
            "--save is for experiments: sweep an option (-m 32,64) or repeat (--iterations 5); a run's result is --json"
                .into()
        ));
    }
    let plan = kind.plan(m).map_err(Usage)?;
    // This end's CPUs, checked here as the agent checks its own.
    if let Some(c) = &plan.local.cpus {
        netrig_engine::affinity::check_cpus(c, plan.local.cpus_option).map_err(Usage)?;
    }
    let mut spec = plan.spec;
    // A lab plan's client host running its share of a load several hosts offer together.
    if let (Some((k, n)), netrig_kinds::Ends::ClientOnly(o)) = (one.share, kind.ends()) {
        spec = o.share(&spec, k, n).map_err(Usage)?;
    }
    let local = LocalOptions {
        sockets: plan.local.sockets,
        cpus: plan.local.cpus,
        connect_timeout: Duration::from_secs_f64(run.target.connect_timeout.max(0.001)),
        udp_size_default: plan.fit_to_path,
        server_agent: server_agent(&run.target, &one)?,
        clients: netrig_run::clients::Clients::of_this_binary(
            one.clients.unwrap_or(1),
            one.client_addrs.clone(),
        )
        .map_err(Usage)?,
        start_at: run
            .start_at
            .map(|t| std::time::UNIX_EPOCH + Duration::from_secs_f64(t)),
        peer: plan.peer.unwrap_or_default(),
        server_output: plan.get_server_output,
        profile: plan.profile,
    };
    let flows = spec.flows as usize * spec.directions().len();
    let format = format(&run)?;
    let mut export = exporter(format, kind.table(), flows);
    let mut stdout = std::io::stdout();
    // A kind with one end given -H without a port goes to its server's own
    // port (an HTTP load's URL), not the agent's.
    let mut target_spec = run.target.spec();
    target_spec.default_port = netrig_run::own_port(kind, &spec);
    let target = target_spec.target().map_err(Usage)?;
    let bar = progress::Progress::start(&spec, format);
    let result = netrig_run::run(&target, local, &spec, cancel(), &mut |iv| {
        // stdout closed (a pipe whose reader left): the run goes on.
        let mut print = || {
            let _ = export.interval(&mut stdout, iv);
        };
        match &bar {
            Some(b) => b.suspend(print),
            None => print(),
        }
    });
    drop(bar);
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            export.error(&mut stdout, &e.to_string())?;
            return Err(e.into());
        }
    };
    export.result(&mut stdout, &result)?;
    if let Some(p) = result
        .peer
        .as_ref()
        .filter(|p| p.chosen == netrig_report::peer::Chosen::Detected)
    {
        eprintln!(
            "note: {} answered as an {} server, so netrig spoke its protocol (--peer auto); its figures are \
             {} (give --peer netrig to refuse such a server)",
            result.agent.address, p.software, p.remote_figures
        );
    }
    for w in &result.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(dir) = &run.experiment.plot {
        plot::write_beside(&netrig_plot::plots_for_result(&result), dir, true)?;
    }
    if let Some(path) = &run.experiment.html {
        let mut page = netrig_export::html::HtmlExporter::new(command_line(), kind.table(), flows);
        let mut html = Vec::new();
        for i in &result.intervals {
            page.interval(&mut html, i)?;
        }
        page.result(&mut html, &result)?;
        write_report(path, &String::from_utf8_lossy(&html))?;
    }
    if let Some(url) = &run.experiment.push {
        crate::push::push(url, &[netrig_export::openmetrics::result_group(&result)])?;
    }
    Ok(())
}

/// One process of a `--clients` run: its job from standard input (bounded),
/// its result on standard output (netrig_run::clients).
pub fn client_share() -> Result<()> {
    use std::io::Read;
    let mut job = Vec::new();
    std::io::stdin().take(16 << 20).read_to_end(&mut job)?;
    let job: netrig_run::clients::Job =
        serde_json::from_slice(&job).map_err(|e| anyhow::anyhow!("client-share: not a job: {e}"))?;
    let kind = netrig_kinds::of(&job.spec);
    let netrig_kinds::Ends::ClientOnly(one) = kind.ends() else {
        bail!(
            "client-share: {} has an agent; only kinds with one end split among clients",
            kind.name()
        );
    };
    let ctl = netrig_engine::RunControl::new();
    let result =
        netrig_run::clients::run_job(one, &job, Default::default(), ctl).map_err(|e| anyhow::anyhow!(e))?;
    serde_json::to_writer(std::io::stdout().lock(), &result)?;
    Ok(())
}
