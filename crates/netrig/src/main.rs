//! netrig: options → test run → export. The crates do the work; this file
//! only wires them (see docs/ARCHITECTURE.md).

mod cli;
mod deploy;
mod experiment;
mod http;
mod lab;
mod lab_overload;
mod plot;
mod progress;

use anyhow::{bail, Context, Result};
use clap::FromArgMatches;
use cli::{Cli, Command, KeygenArgs, OneEndArgs, QuickArgs, RunArgs, ServeArgs, TargetArgs};
use netrig_agent::{Agent, AgentConfig, AgentError, Hooks};
use netrig_client::ClientError;
use netrig_experiment::sweep::{self, Sweep};
use netrig_kinds::Kind;
use netrig_proto::auth::{AgentAuth, SecretKey};
use netrig_proto::AgentLimits;
use netrig_report::export::{exporter, Exporter, Format};
use netrig_report::{table, to_json, TestResult};
use netrig_run::{Cancel, LocalOptions, RunError, Session, Target};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

/// An error in what the user asked for (exit status 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Cancels the run in progress on Ctrl-C.
static CANCEL: OnceLock<Cancel> = OnceLock::new();

/// An experiment is running: Ctrl-C stops it between runs too.
static EXPERIMENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn cancel() -> &'static Cancel {
    CANCEL.get_or_init(Cancel::new)
}

/// Thousands of flows need thousands of descriptors: raise the soft limit
/// to the hard one, as neper does.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: valid pointer to an initialised struct.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// What the command line asks for: one of netrig's own commands, or a test
/// of a kind with its subcommand's matches, its own options as given and
/// the options it sweeps.
enum Job {
    Own(Command),
    Test(&'static dyn Kind, clap::ArgMatches, Vec<String>, Vec<Sweep>),
}

/// A test's arguments with their sweeps taken out (`-m 32,64` is a sweep,
/// not a value the option's parser could read).
fn split_sweeps(argv: Vec<String>) -> (Vec<String>, Vec<Sweep>) {
    if argv.len() < 2 || netrig_kinds::by_name(&argv[1]).is_none() {
        return (argv, Vec::new());
    }
    match sweep::split_args(&argv[2..], sweep::SWEEPABLE) {
        Ok((rest, sweeps)) => (argv[..2].iter().cloned().chain(rest).collect(), sweeps),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// A hint for habits from other tools that clap would only call unexpected:
/// iperf3's `-c HOST` and `-s`, netperf's `-H` without a test, a bare host
/// after a test's name.
fn habit_hint(argv: &[String], e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let first = argv.get(1).map(String::as_str);
    match first {
        Some("-c") | Some("--client") => {
            let host = argv.get(2).map_or("HOST", String::as_str);
            return Some(format!(
                "netrig has no -c: name the test, then the agent's host with -H (iperf3's -c): `netrig tcp-stream -H {host}`"
            ));
        }
        Some("-s") | Some("--server") | Some("-D") => {
            return Some(
                "netrig has no -s: run the agent with `netrig serve` (iperf3's -s, netperf's netserver)"
                    .into(),
            );
        }
        Some("-H") => {
            let host = argv.get(2).map_or("HOST", String::as_str);
            return Some(format!(
                "name the test first: `netrig tcp-stream -H {host}` (see `netrig --help` for the tests)"
            ));
        }
        _ => {}
    }
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let test = first.filter(|t| netrig_kinds::by_name(t).is_some())?;
    // The options of kinds with one end, given to a kind with two: why it needs none.
    let option = arg.split('=').next().unwrap_or(arg);
    match option {
        "--server-agent" => return Some(netrig_run::server_agent_not_needed(test)),
        "--clients" | "--client-addrs" => {
            return Some(format!(
                "{option} is for kinds with one end (a load aimed at any server, as http): {test} runs                  against its agent, which takes more flows as -P N"
            ))
        }
        _ => {}
    }
    (!arg.starts_with('-')).then(|| {
        if arg.contains("://") {
            // wrk's and curl's habit: the URL as an argument.
            format!("unexpected argument {arg:?}: a URL goes after --url: `netrig {test} --url {arg}`")
        } else {
            format!("unexpected argument {arg:?}: the agent's host goes after -H: `netrig {test} -H {arg}`")
        }
    })
}

fn main() -> ExitCode {
    let (argv, sweeps) = split_sweeps(std::env::args().collect());
    let matches = match cli::command().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            if let Some(hint) = habit_hint(&argv, &e) {
                eprintln!("error: {hint}");
                std::process::exit(2);
            }
            e.exit()
        }
    };
    let job = match matches.subcommand() {
        Some((name, sub)) if netrig_kinds::by_name(name).is_some() => Job::Test(
            netrig_kinds::by_name(name).expect("checked"),
            sub.clone(),
            cli::kind_args(&argv[2..]),
            sweeps,
        ),
        _ => match Cli::from_arg_matches(&matches) {
            Ok(cli) => Job::Own(cli.command.unwrap_or(Command::Quick(QuickArgs {
                length: 2.0,
                ipv6: false,
                json: false,
                html: None,
            }))),
            Err(e) => e.exit(),
        },
    };
    raise_fd_limit();
    let default_level = match &job {
        Job::Own(Command::Serve(a)) if a.quiet => "warn",
        Job::Own(Command::Serve(_)) | Job::Own(Command::HttpServe(_)) => "info",
        _ => "warn",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        // The PNG renderer's notes on SVG details are not the user's concern.
        .filter_module("usvg", log::LevelFilter::Error)
        .filter_module("resvg", log::LevelFilter::Error)
        .format_target(false)
        .init();
    let _ = ctrlc::set_handler(|| {
        // A lab being built or held is torn down by its own thread.
        if lab::RUNNING.load(std::sync::atomic::Ordering::SeqCst) {
            netrig_lab::interrupt();
            return;
        }
        // An experiment stops after the arm in hand is torn down.
        if cancel().is_running() || EXPERIMENT.load(std::sync::atomic::Ordering::Relaxed) {
            cancel().cancel("interrupted (Ctrl-C)");
        } else {
            std::process::exit(130);
        }
    });
    let done = match job {
        Job::Own(Command::Quick(a)) => quick(a),
        Job::Own(Command::Serve(a)) => serve(a),
        Job::Own(Command::HttpServe(a)) => http::serve(a),
        Job::Own(Command::Run(a)) => {
            EXPERIMENT.store(true, std::sync::atomic::Ordering::Relaxed);
            experiment::run_file(&a, cancel())
        }
        Job::Own(Command::Results(a)) => experiment::results(&a),
        Job::Own(Command::Compare(a)) => experiment::compare(&a),
        Job::Own(Command::Report(a)) => report(&a),
        Job::Own(Command::Plot(a)) => plot::plot(&a),
        Job::Own(Command::Completions(a)) => deploy::completions(&a),
        Job::Own(Command::Man(a)) => deploy::man(&a),
        Job::Own(Command::Keygen(a)) => keygen(&a),
        Job::Own(Command::ClientShare) => client_share(),
        Job::Own(Command::Lab(a)) => lab::lab(a),
        Job::Test(kind, m, args, sweeps) => test(kind, &m, args, sweeps),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        // A lab's command ran and said its status (lab exec), or Ctrl-C ended a held lab.
        Err(e) if e.downcast_ref::<lab::Exit>().is_some() => {
            ExitCode::from(e.downcast_ref::<lab::Exit>().expect("checked").0)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_status(&e))
        }
    }
}

/// One process of a `--clients` run: its job from standard input (bounded),
/// its result on standard output (netrig_run::clients).
fn client_share() -> Result<()> {
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

fn exit_status(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<experiment::Regressed>().is_some() {
        return experiment::REGRESSED;
    }
    if e.downcast_ref::<experiment::Interrupted>().is_some() {
        return experiment::INTERRUPTED;
    }
    if e.downcast_ref::<Usage>().is_some() || e.downcast_ref::<AgentError>().is_some() {
        return 2;
    }
    match (e.downcast_ref::<ClientError>(), e.downcast_ref::<RunError>()) {
        (Some(c), _) if c.is_setup() => 2,
        (_, Some(r)) if r.is_setup() => 2,
        _ => 1,
    }
}

fn serve(a: ServeArgs) -> Result<()> {
    let bind = match a.bind {
        Some(ip) => ip.with_port(a.port),
        None => AgentConfig::default_bind(a.port),
    };
    let mut config = AgentConfig::new(bind);
    config.limits = AgentLimits {
        max_sessions: a.max_sessions,
        max_flows: a.max_flows,
        max_duration_s: a.max_duration,
        max_workers: a.max_workers,
        max_buffer_bytes: a.max_buffer,
        max_rate_bps: a.max_rate,
        max_amplification: Some(a.max_amplification),
        ..AgentLimits::default()
    };
    let host = netrig_agent::Totals::for_host();
    config.totals = netrig_agent::Totals {
        threads: a.max_threads.unwrap_or(host.threads),
        buffer_bytes: a.max_memory.unwrap_or(host.buffer_bytes),
        flows: a.max_total_flows,
    };
    config.max_sessions_per_client = a.max_sessions_per_client;
    config.idle_timeout = Duration::from_secs(a.idle_timeout);
    config.allow = a.allow.clone();
    config.disclose = match a.disclose {
        cli::Disclose::Full => netrig_agent::Disclose::Full,
        cli::Disclose::Minimal => netrig_agent::Disclose::Minimal,
    };
    if a.max_buffer > config.totals.buffer_bytes {
        eprintln!(
            "netrig: note: --max-buffer {} MiB per test is more than --max-memory {} MiB for all tests: a test \
             gets at most the latter",
            a.max_buffer >> 20,
            config.totals.buffer_bytes >> 20
        );
    }
    if let Some(dir) = &a.hooks {
        let hooks =
            Hooks::discover(dir, Duration::from_secs(a.hook_timeout)).map_err(|e| Usage(e.to_string()))?;
        eprintln!(
            "netrig: hooks offered from {}: {} (each killed after {} s)",
            hooks.dir().display(),
            hooks.names().join(", "),
            a.hook_timeout
        );
        config.hooks = Some(hooks);
    }
    config.auth = AgentAuth {
        key: a
            .key
            .as_deref()
            .map(|p| read_secret_key(p, "--key"))
            .transpose()?,
        authorized: a
            .authorized_keys
            .as_deref()
            .map(|p| {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| Usage(format!("--authorized-keys {}: {e}", p.display())))?;
                let keys = netrig_proto::auth::parse_authorized_keys(&text)
                    .map_err(|e| Usage(format!("--authorized-keys {}: {e}", p.display())))?;
                if keys.is_empty() {
                    return Err(Usage(format!("--authorized-keys {}: holds no key", p.display())));
                }
                Ok(keys)
            })
            .transpose()?,
    };
    let auth_note = match (&config.auth.authorized, &config.auth.key) {
        (Some(k), _) => format!(
            "; only clients with one of the {} authorized keys may run tests",
            k.len()
        ),
        (None, _) if !bind.ip().is_loopback() => {
            "; no --authorized-keys: any client that reaches it may run tests".to_string()
        }
        (None, _) => String::new(),
    };
    let key_note = match &config.auth.key {
        Some(k) => format!("; its key: {}", k.public()),
        None => String::new(),
    };
    if a.http_port.is_none()
        && (a.http.threads.is_some() || a.http.tls_cert.is_some() || a.http.stall_for.is_some())
    {
        return Err(Usage(
            "--threads, --tls-cert and --stall-for are the HTTP server's: add --http-port PORT".into(),
        )
        .into());
    }
    let caps = caps_line(&a, &config);
    let allow = config.allow.clone();
    let agent = Agent::bind(config)?;
    let _http = match a.http_port {
        Some(port) => Some(http::beside_agent(
            match a.bind {
                Some(ip) => ip.with_port(port),
                None => AgentConfig::default_bind(port),
            },
            &a.http,
            allow,
        )?),
        None => None,
    };
    eprintln!(
        "netrig {} agent listening on {} (control and data; protocol v{}){auth_note}{key_note}",
        netrig_proto::SOFTWARE_VERSION,
        agent
            .local_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" and "),
        netrig_proto::PROTOCOL_VERSION
    );
    eprintln!("netrig: {caps}");
    agent.run();
    Ok(())
}

/// The agent's caps, as its startup says them.
fn caps_line(a: &ServeArgs, c: &AgentConfig) -> String {
    let t = &c.totals;
    let rate = match a.max_rate {
        Some(r) => format!(
            "at most {} per direction per test",
            netrig_proto::spec::kind::format_bps(r as f64)
        ),
        None => "no rate cap (--max-rate)".into(),
    };
    let rate = format!(
        "{rate}; UDP answers at most {} times their request (--max-amplification)",
        a.max_amplification
    );
    let allow = if c.allow.is_empty() {
        "clients from any address".to_string()
    } else {
        format!(
            "clients from {} only",
            c.allow
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "serving {allow}; {} sessions ({} per client); per test {} flows, {} workers, {} MiB of buffers, {} s; \
         all tests together {} flows, {} threads, {} MiB; {rate}; a session that asks for no test within \
         {} s is closed{}",
        a.max_sessions,
        c.max_sessions_per_client,
        a.max_flows,
        c.limits.max_workers.min(t.max_workers()),
        a.max_buffer >> 20,
        a.max_duration,
        t.flows,
        t.threads,
        t.buffer_bytes >> 20,
        a.idle_timeout,
        match c.disclose {
            netrig_agent::Disclose::Full => "",
            netrig_agent::Disclose::Minimal => "; unauthenticated clients are told nothing of this host (--disclose minimal)",
        }
    )
}

/// `--server-agent HOST[:PORT]`, with this client's keys (`--key`, `--agent-key`).
fn server_agent(t: &TargetArgs, one: &OneEndArgs) -> Result<Option<Target>> {
    let Some(s) = &one.server_agent else {
        return Ok(None);
    };
    Ok(Some(t.spec().server_agent(s).map_err(Usage)?))
}

fn read_secret_key(path: &std::path::Path, option: &str) -> Result<SecretKey, Usage> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Usage(format!("{option} {}: {e}", path.display())))?;
    SecretKey::parse(&text).map_err(|e| Usage(format!("{option} {}: {e}", path.display())))
}

/// `netrig keygen -o FILE`: FILE (the private key, mode 0600, never
/// overwritten) and FILE.pub.
fn keygen(a: &KeygenArgs) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let key = SecretKey::generate();
    let mut pub_path = a.output.clone().into_os_string();
    pub_path.push(".pub");
    let pub_path = std::path::PathBuf::from(pub_path);
    let comment = a.comment.clone().unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_else(|_| "netrig".into());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{user}@{}", host.trim())
    });
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&a.output)
        .map_err(|e| Usage(format!("-o {}: {e}", a.output.display())))?;
    f.write_all(key.to_file_text().as_bytes())
        .with_context(|| format!("writing {}", a.output.display()))?;
    std::fs::write(&pub_path, format!("{} {comment}\n", key.public()))
        .with_context(|| format!("writing {}", pub_path.display()))?;
    eprintln!(
        "netrig: wrote the private key to {} and the public key to {}:\n{}",
        a.output.display(),
        pub_path.display(),
        key.public()
    );
    Ok(())
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
fn test(kind: &'static dyn Kind, m: &clap::ArgMatches, args: Vec<String>, sweeps: Vec<Sweep>) -> Result<()> {
    let run = RunArgs::from_arg_matches(m)?;
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
    };
    let flows = spec.flows as usize * spec.directions().len();
    let format = format(&run)?;
    let mut export = exporter(format, kind.table(), flows);
    let mut stdout = std::io::stdout();
    // A kind with one end given -H without a port goes to its server's own
    // port (an HTTP load's URL), not the agent's.
    let mut target_spec = run.target.spec();
    if let netrig_kinds::Ends::ClientOnly(one) = kind.ends() {
        target_spec.default_port = one.own_server(&spec).map(|(_, port)| port);
    }
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
    for w in &result.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(dir) = &run.experiment.plot {
        plot::write_beside(&netrig_plot::plots_for_result(&result), dir, true)?;
    }
    if let Some(path) = &run.experiment.html {
        let mut page = netrig_html::HtmlExporter::new(command_line(), kind.table(), flows);
        let mut html = Vec::new();
        for i in &result.intervals {
            page.interval(&mut html, i)?;
        }
        page.result(&mut html, &result)?;
        write_report(path, &String::from_utf8_lossy(&html))?;
    }
    Ok(())
}

/// The command line as typed, for reports.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\*?;&|<>(){}".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes a report and says where.
pub fn write_report(path: &std::path::Path, html: &str) -> Result<()> {
    std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("report {}", path.display());
    Ok(())
}

/// `netrig report FILE`: the HTML report of a saved experiment or a run's JSON.
fn report(a: &cli::ReportArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let out = a.output.clone().unwrap_or_else(|| a.file.with_extension("html"));
    let command = format!("netrig report {}  (from {})", a.file.display(), command_line());
    let html = match netrig_experiment::document::Experiment::from_json(&text).map(|mut e| {
        if a.answer_again && e.plan.study.is_some() {
            // The answer is a function of the document's runs alone: derive it again with this
            // netrig's study code (the file itself is left as it is).
            e.answer = netrig_studies::answer(&e);
        }
        e
    }) {
        Ok(e) if a.no_data => {
            netrig_html::experiment_report_without_data(&e, &command, &a.file.display().to_string())
        }
        Ok(e) => netrig_html::experiment_report(&e, &command),
        Err(_) => {
            let r: TestResult = serde_json::from_str(&text).map_err(|e| {
                Usage(format!(
                    "{}: neither a saved experiment nor a test's --json result ({e})",
                    a.file.display()
                ))
            })?;
            let mut table = netrig_kinds::by_name(&r.test).map_or_else(
                || netrig_report::TableLayout::render(&netrig_report::table::TCP_STREAM, &r),
                |k| k.table().render(&r),
            );
            if let Some(h) = &r.server_host {
                table.push_str(&h.table());
            }
            netrig_html::run_report(&r, &command, &table)
        }
    };
    write_report(&out, &html)
}

#[derive(serde::Serialize)]
struct Suite<'a> {
    suite: &'static str,
    results: &'a [TestResult],
}

fn quick(a: QuickArgs) -> Result<()> {
    let local = LocalOptions {
        // The suite's udp-stream uses the default size of `udp-stream` alone.
        udp_size_default: true,
        ..LocalOptions::default()
    };
    let mut session = Session::open(&Target::embedded(a.ipv6), local)?;
    if !a.json {
        println!(
            "netrig quick: loopback suite against an in-process agent at {}, {} s per test\n",
            session.agent_address(),
            a.length
        );
    }
    let mut results = Vec::new();
    for spec in netrig_run::suite::quick(a.length) {
        results.push(
            session
                .run(&spec, cancel(), &mut |_| {})
                .with_context(|| format!("{} failed", spec.kind()))?,
        );
    }
    session.close();
    if let Some(path) = &a.html {
        let rows: Vec<(TestResult, String)> = results
            .iter()
            .map(|r| {
                let t = netrig_kinds::by_name(&r.test).map_or_else(String::new, |k| k.table().render(r));
                (r.clone(), t)
            })
            .collect();
        write_report(path, &netrig_html::suite_report("quick", &rows, &command_line()))?;
    }
    if a.json {
        println!(
            "{}",
            to_json(&Suite {
                suite: "quick",
                results: &results
            })
        );
    } else {
        print!("{}", table::render_suite(&results));
        println!(
            "\nKey: tx = this client to the agent, rx = the agent to this client (here both on this host, over\n\
             loopback). 10^6bits/s: payload megabits per second over the measured window. Trans/s: request/\n\
             response transactions per second; p99 us: their 99th-percentile latency in microseconds. loss %:\n\
             datagrams lost. CPU %: this host's CPUs busy over the window (100 = all). The second tcp-stream is\n\
             four flows; tcp-crr opens a connection per transaction; udp-stream offers 1 Gbit/s (-b 1G) of\n\
             path-sized datagrams; udp-rr sends 28-byte requests and responses; the others go as fast as they can."
        );
        for r in &results {
            for w in &r.warnings {
                eprintln!("warning: {}: {w}", r.test);
            }
        }
        println!(
            "\nNext: `netrig serve` on another host, then `netrig tcp-stream -H HOST` here (see --help)."
        );
    }
    Ok(())
}
