//! netrig: options → test run → export. The crates do the work; this file
//! only wires them (see docs/ARCHITECTURE.md).

mod cli;
mod units;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cli::{
    Cli, Command, CommonArgs, CrrArgs, PaceArgs, QuickArgs, RrArgs, ServeArgs, StreamArgs, TargetArgs,
    UdpArgs, UdpRrArgs,
};
use netrig_agent::{Agent, AgentConfig, AgentError};
use netrig_client::{ClientError, Family};
use netrig_proto::spec::{Limit, PaceOptions, SocketOptions};
use netrig_proto::{AgentLimits, TestKind, TestSpec};
use netrig_report::export::{exporter, Format};
use netrig_report::{table, to_json, TestResult};
use netrig_run::{Cancel, LocalOptions, RunError, Session, Target};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

/// An error in what the user asked for (exit status 2).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Cancels the run in progress on Ctrl-C.
static CANCEL: OnceLock<Cancel> = OnceLock::new();

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_fd_limit();
    let command = cli.command.unwrap_or(Command::Quick(QuickArgs {
        length: 2.0,
        ipv6: false,
        json: false,
    }));
    let default_level = match &command {
        Command::Serve(a) if a.quiet => "warn",
        Command::Serve(_) => "info",
        _ => "warn",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        .format_target(false)
        .init();
    let _ = ctrlc::set_handler(|| {
        if cancel().is_running() {
            cancel().cancel("interrupted (Ctrl-C)");
        } else {
            std::process::exit(130);
        }
    });
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netrig: error: {e:#}");
            ExitCode::from(exit_status(&e))
        }
    }
}

fn exit_status(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<Usage>().is_some() || e.downcast_ref::<AgentError>().is_some() {
        return 2;
    }
    match (e.downcast_ref::<ClientError>(), e.downcast_ref::<RunError>()) {
        (Some(c), _) if c.is_setup() => 2,
        (_, Some(r)) if r.is_setup() => 2,
        _ => 1,
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Quick(a) => quick(a),
        Command::Serve(a) => serve(a),
        Command::TcpStream(a) => stream(TestKind::TcpStream, a),
        Command::TcpMaerts(a) => stream(TestKind::TcpMaerts, a),
        Command::TcpBidir(a) => stream(TestKind::TcpBidir, a),
        Command::TcpRr(a) => request_response(TestKind::TcpRr, a),
        Command::UdpStream(a) => udp_stream(a),
        Command::UdpRr(a) => udp_rr(a),
        Command::TcpCrr(a) => connect_request_response(a),
    }
}

fn serve(a: ServeArgs) -> Result<()> {
    let bind = match a.bind {
        Some(ip) => SocketAddr::new(ip, a.port),
        None => AgentConfig::default_bind(a.port),
    };
    let mut config = AgentConfig::new(bind);
    config.limits = AgentLimits {
        max_sessions: a.max_sessions,
        max_flows: a.max_flows,
        max_duration_s: a.max_duration,
        max_workers: a.max_workers,
        max_buffer_bytes: a.max_buffer,
        ..AgentLimits::default()
    };
    let agent = Agent::bind(config)?;
    eprintln!(
        "netrig {} agent listening on {} (control and data; protocol v{})",
        netrig_proto::SOFTWARE_VERSION,
        agent.local_addr(),
        netrig_proto::PROTOCOL_VERSION
    );
    agent.run();
    Ok(())
}

fn family(t: &TargetArgs) -> Family {
    match (t.ipv4, t.ipv6) {
        (true, _) => Family::V4,
        (_, true) => Family::V6,
        _ => Family::Any,
    }
}

/// Where the test goes: `-H` (and -p, -4/-6, --bind), or the in-process agent.
fn target(t: &TargetArgs) -> Target {
    match &t.host {
        Some(h) => Target::Agent {
            host: h.clone(),
            port: t.port,
            family: family(t),
            bind: t.bind,
        },
        None => Target::embedded(family(t) == Family::V6),
    }
}

/// Builds the spec (stream parts at their defaults) and the client's own
/// socket options from the options every test takes.
fn common_spec(kind: TestKind, a: &CommonArgs) -> Result<(TestSpec, SocketOptions)> {
    let tos = a.dscp.map(|d| d << 2).or(a.tos);
    if let Some(cc) = &a.cc {
        if cc.is_empty() {
            bail!(Usage("--cc needs an algorithm name".into()));
        }
    }
    let shared = SocketOptions {
        tos,
        priority: a.priority,
        nodelay: a.nodelay,
        congestion: a.cc.clone(),
        max_pacing_rate_bps: a.max_pacing_rate,
        ..SocketOptions::default()
    };
    let local = SocketOptions {
        sndbuf: a.local_sockbuf,
        rcvbuf: a.local_sockbuf,
        mss: a.mss,
        ..shared.clone()
    };
    let remote = SocketOptions {
        sndbuf: a.remote_sockbuf,
        rcvbuf: a.remote_sockbuf,
        ..shared
    };
    let spec = TestSpec {
        kind,
        limit: Limit::Duration {
            seconds: a.length.unwrap_or(10.0),
        },
        omit_s: a.omit,
        interval_s: a.interval,
        flows: a.parallel,
        message_size: 128 * 1024,
        recv_size: 128 * 1024,
        remote,
        measure_cpu: !a.no_cpu,
        rr: Default::default(),
        workers: a.workers,
        udp: Default::default(),
        pace: Default::default(),
        remote_cpus: a
            .remote_cpus
            .clone()
            .map(|c| c.0)
            .or(a.affinity.and_then(|(_, m)| m).map(|m| vec![m])),
        zerocopy: false,
    };
    Ok((spec, local))
}

/// Checks a spec's bounds before connecting anywhere (the agent checks again
/// against its own limits).
fn check_spec(spec: &TestSpec, local: &SocketOptions) -> Result<()> {
    // netrig's own bounds only: the agent's limits come in its welcome, and
    // the client checks those, naming the agent, once it has them.
    spec.validate_bounds().map_err(|e| Usage(e.to_string()))?;
    netrig_proto::spec::validate_socket_options(local, "-s/--local-sockbuf")
        .map_err(|e| Usage(e.to_string()))?;
    Ok(())
}

fn stream_spec(kind: TestKind, a: &StreamArgs) -> Result<(TestSpec, SocketOptions)> {
    let (mut spec, local) = common_spec(kind, &a.common)?;
    if let Some(bytes) = a.bytes {
        if a.common.length.is_some() {
            bail!(Usage(
                "-l/--length cannot be used with -n/--bytes: a test is timed or counted".into()
            ));
        }
        spec.limit = Limit::Bytes { bytes };
    }
    spec.message_size = a.message_size;
    spec.recv_size = a.recv_size;
    spec.pace = pace(&a.pace);
    spec.zerocopy = a.zerocopy;
    check_spec(&spec, &local)?;
    Ok((spec, local))
}

fn pace(a: &PaceArgs) -> PaceOptions {
    PaceOptions {
        rate_bps: a.bitrate.filter(|r| *r > 0),
        pacing_us: a.pacing_us,
    }
}

fn rr_spec(kind: TestKind, a: &RrArgs) -> Result<(TestSpec, SocketOptions)> {
    let (mut spec, local) = common_spec(kind, &a.common)?;
    spec.rr = netrig_proto::spec::RrOptions {
        request_size: a.request_response.0,
        response_size: a.request_response.1,
        burst: a.burst,
        rate: a.rate,
        poisson: a.poisson,
        spin_us: a.spin_us,
        timeout_s: None,
    };
    check_spec(&spec, &local)?;
    Ok((spec, local))
}

fn format(common: &CommonArgs) -> Format {
    match (common.json, common.json_stream) {
        (_, true) => Format::JsonStream,
        (true, _) => Format::Json,
        _ => Format::Table,
    }
}

fn stream(kind: TestKind, a: StreamArgs) -> Result<()> {
    let (spec, local) = stream_spec(kind, &a)?;
    run_and_print(&spec, local, &a.common, false)
}

fn udp_stream(a: UdpArgs) -> Result<()> {
    let (mut spec, local) = common_spec(TestKind::UdpStream, &a.common)?;
    // Without -m the client picks the size for the path once connected; an
    // Ethernet-sized datagram stands in for the checks until then.
    let size = a.message_size.unwrap_or(1472);
    spec.message_size = size;
    spec.recv_size = size;
    spec.udp = netrig_proto::spec::UdpOptions {
        reverse: a.reverse,
        no_gso: a.no_gso,
    };
    spec.pace = pace(&a.pace);
    check_spec(&spec, &local)?;
    run_and_print(&spec, local, &a.common, a.message_size.is_none())
}

fn udp_rr(a: UdpRrArgs) -> Result<()> {
    let (mut spec, local) = rr_spec(TestKind::UdpRr, &a.rr)?;
    spec.rr.timeout_s = a.timeout;
    check_spec(&spec, &local)?;
    run_and_print(&spec, local, &a.rr.common, false)
}

fn request_response(kind: TestKind, a: RrArgs) -> Result<()> {
    let (spec, local) = rr_spec(kind, &a)?;
    run_and_print(&spec, local, &a.common, false)
}

fn connect_request_response(a: CrrArgs) -> Result<()> {
    let (mut spec, local) = rr_spec(TestKind::TcpCrr, &a.rr)?;
    spec.rr.timeout_s = a.timeout;
    check_spec(&spec, &local)?;
    run_and_print(&spec, local, &a.rr.common, false)
}

/// Connects, runs one test, prints it as the user asked. `udp_size_default`:
/// udp-stream without -m, the client chooses the size for the path.
fn run_and_print(
    spec: &TestSpec,
    local: SocketOptions,
    common: &CommonArgs,
    udp_size_default: bool,
) -> Result<()> {
    // This end's CPUs, checked here as the agent checks its own.
    let cpus = common
        .cpus
        .clone()
        .map(|c| c.0)
        .or(common.affinity.map(|(n, _)| vec![n]));
    if let Some(c) = &cpus {
        let option = if common.affinity.is_some() { "-A" } else { "--cpus" };
        netrig_engine::affinity::check_cpus(c, option).map_err(Usage)?;
    }
    let local = LocalOptions {
        sockets: local,
        cpus,
        connect_timeout: Duration::from_secs_f64(common.target.connect_timeout.max(0.001)),
        udp_size_default,
    };
    let mut export = exporter(format(common), spec);
    let mut stdout = std::io::stdout();
    let run = Session::open(&target(&common.target), local).and_then(|mut session| {
        let r = session.run(spec, cancel(), &mut |iv| {
            // stdout closed (a pipe whose reader left): the run goes on.
            let _ = export.interval(&mut stdout, iv);
        });
        session.close();
        r
    });
    let result = match run {
        Ok(r) => r,
        Err(e) => {
            export.error(&mut stdout, &e.to_string())?;
            return Err(e.into());
        }
    };
    export.result(&mut stdout, &result)?;
    for w in &result.warnings {
        eprintln!("netrig: warning: {w}");
    }
    Ok(())
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
                .with_context(|| format!("{} failed", spec.kind.name()))?,
        );
    }
    session.close();
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
            "\nNext: `netrig serve` on another host, then `netrig tcp-stream -H HOST` here (see --help)."
        );
    }
    Ok(())
}
