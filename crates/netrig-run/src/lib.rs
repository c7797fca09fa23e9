//! The run API: what every driver of netrig calls to run tests (the CLI
//! today; sweeps, comparisons and the lab next). It takes a [`TestSpec`]
//! and a [`Target`] (an agent's address, or an agent started in this
//! process), and returns the result model ([`TestResult`]), calling back
//! with each interval as it closes; a [`Cancel`] handle stops a run from
//! any thread (Ctrl-C, a deadline, a driver giving up).
//!
//! ```no_run
//! use netrig_run::{Cancel, Session, Target};
//! let mut s = Session::open(&Target::embedded(false), Default::default()).unwrap();
//! let spec = netrig_run::suite::quick(1.0)[0].clone();
//! let result = s.run(&spec, &Cancel::new(), &mut |_interval| {}).unwrap();
//! println!("{} bit/s", result.summary.throughput_bps);
//! ```
//!
//! One [`Session`] holds one control connection (and the in-process agent,
//! if any) for any number of tests run one after another; [`run`] opens one
//! for a single test. A kind with one end (no agent: a load generator aimed
//! at any server) runs through [`run`] too, against the target's address,
//! without a session.

pub mod clients;
pub mod initiator;
mod server_host;
pub mod suite;
pub mod target;

use netrig_agent::{Agent, AgentConfig, AgentHandle};
use netrig_client::{resolve, Client, ClientError, ClientOptions, Connected, Family};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::RunControl;
use netrig_kinds::{Ends, Kind, LocalEnd};
use netrig_proto::{AgentLimits, TestSpec};
use netrig_report::{IntervalResult, TestResult};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use netrig_client::Family as AddressFamily;
pub use netrig_report::model::peer::Peer;
pub use target::{host_port, local_ip, Names, TargetSpec};

/// Where a test goes.
#[derive(Debug, Clone, PartialEq)]
// Made once per run: a boxed key would save nothing that matters.
#[allow(clippy::large_enum_variant)]
pub enum Target {
    /// A running agent (`netrig serve`): a host name or address, its port,
    /// the address family to resolve it to, and the local address to bind.
    Agent {
        host: String,
        port: u16,
        family: Family,
        bind: Option<IpAddr>,
        /// This client's key and the agent's to expect (`--key`, `--agent-key`).
        auth: netrig_proto::auth::ClientAuth,
    },
    /// An agent started in this process on loopback (IPv6 when `v6`), kept
    /// for the session's life.
    Embedded { v6: bool },
    /// An agent already running in this process ([`EmbeddedAgent`]), at
    /// this address: the same agent for every run while it lives (a plan's
    /// commands can then be told its port).
    Started { addr: SocketAddr },
}

/// An agent in this process on loopback, on a free port, for many runs
/// (each run of [`Target::Embedded`] starts one of its own); stopped when
/// dropped.
pub struct EmbeddedAgent {
    handle: AgentHandle,
}

impl EmbeddedAgent {
    /// Starts it on 127.0.0.1 (or ::1).
    pub fn start(v6: bool) -> Result<EmbeddedAgent, RunError> {
        Ok(EmbeddedAgent {
            handle: embedded_agent(v6)?,
        })
    }

    /// Its address (control and data connections).
    pub fn addr(&self) -> SocketAddr {
        self.handle.addr()
    }

    /// Where tests go to reach it.
    pub fn target(&self) -> Target {
        Target::Started { addr: self.addr() }
    }
}

impl Target {
    /// The in-process agent on 127.0.0.1 (or ::1).
    pub fn embedded(v6: bool) -> Target {
        Target::Embedded { v6 }
    }

    /// An agent at `host`:`port`.
    pub fn agent(host: impl Into<String>, port: u16) -> Target {
        Target::Agent {
            host: host.into(),
            port,
            family: Family::Any,
            bind: None,
            auth: Default::default(),
        }
    }
}

/// This end's side of a run, beside the spec the agent gets.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Options on this end's data sockets.
    pub sockets: SocketSettings,
    /// Pin this end's worker i to `cpus[i % len]`.
    pub cpus: Option<Vec<u32>>,
    /// How long to wait for the agent to accept a connection.
    pub connect_timeout: Duration,
    /// udp-stream: choose the datagram size for the path to the agent
    /// (the spec's size stands in until then).
    pub udp_size_default: bool,
    /// A kind with one end: an agent on the server's host (`--server-agent`),
    /// asked to watch that host over the run; its view is the result's
    /// `server_host`. A kind with both ends refuses it: its agent reports
    /// its host's side already.
    pub server_agent: Option<Target>,
    /// A kind with one end run from several client processes, summed
    /// (`--clients N`; [`clients`]).
    pub clients: Option<clients::Clients>,
    /// `--start-at`: begin (send `go`, once set up) at this wall-clock instant, as other clients
    /// started together do; a kind with one end waits for it before it starts.
    pub start_at: Option<std::time::SystemTime>,
    /// What the server is (`--peer`, a plan's `peer`): a netrig agent, an
    /// iperf3 server, or whichever answers (auto, for the kinds an iperf3
    /// server can run).
    pub peer: Peer,
    /// Against an iperf3 server: ask for its own output (`--get-server-output`).
    pub server_output: bool,
    /// `--profile`: profile this end's CPUs over the measured window.
    pub profile: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            sockets: SocketSettings::default(),
            cpus: None,
            connect_timeout: Duration::from_secs(5),
            udp_size_default: false,
            server_agent: None,
            clients: None,
            start_at: None,
            peer: Peer::Auto,
            server_output: false,
            profile: false,
        }
    }
}

/// Why a run did not give a result.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The in-process agent could not start.
    #[error("starting the embedded agent: {0}")]
    Embedded(#[from] netrig_agent::AgentError),
    /// From the client: resolving, connecting, set-up, the test itself.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// [`Cancel::cancel`] was called before the test started.
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// A one-ended kind: what it said went wrong, or that it was asked to
    /// run where it cannot.
    #[error("{0}")]
    OneEnded(String),
    /// An option that does not apply to the run, naming it.
    #[error("{0}")]
    Option(String),
}

impl RunError {
    /// Errors of input or set-up (bad host, refused, bad option, an agent
    /// that could not start): as opposed to a test that failed while running.
    pub fn is_setup(&self) -> bool {
        match self {
            RunError::Embedded(_) | RunError::Option(_) => true,
            RunError::Client(c) => c.is_setup(),
            RunError::Cancelled(_) | RunError::OneEnded(_) => false,
        }
    }
}

/// Stops the run in progress, and any run started after it, from any
/// thread. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    state: Arc<Mutex<CancelState>>,
}

#[derive(Debug, Default)]
struct CancelState {
    reason: Option<String>,
    current: Option<Arc<RunControl>>,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Stops the test in progress (it ends with an error naming `reason`)
    /// and keeps later ones from starting.
    pub fn cancel(&self, reason: impl Into<String>) {
        let reason = reason.into();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ctl) = &s.current {
            ctl.abort(reason.clone());
        }
        s.reason = Some(reason);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reason
            .is_some()
    }

    /// Whether a test is running under this handle now.
    pub fn is_running(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .current
            .is_some()
    }

    fn begin(&self) -> Result<Arc<RunControl>, RunError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = &s.reason {
            return Err(RunError::Cancelled(r.clone()));
        }
        let ctl = RunControl::new();
        s.current = Some(ctl.clone());
        Ok(ctl)
    }

    fn end(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).current = None;
    }
}

/// A control connection to an agent, for tests run one after another.
pub struct Session {
    client: Client,
    /// The in-process agent, shut down when the session is dropped (after
    /// the client, which is declared first and so dropped first).
    _embedded: Option<AgentHandle>,
}

impl Session {
    /// Resolves and connects to the target (starting the in-process agent
    /// for [`Target::Embedded`]) and shakes hands.
    pub fn open(target: &Target, local: LocalOptions) -> Result<Session, RunError> {
        if local.server_agent.is_some() {
            return Err(RunError::Option(server_agent_not_needed("a test with an agent")));
        }
        if local.peer == Peer::Iperf3 {
            return Err(RunError::Option(
                "--peer iperf3: an iperf3 server runs one test per connection; run each with netrig_run::run"
                    .into(),
            ));
        }
        let (addrs, options, embedded) = client_options(target, local, Peer::Netrig)?;
        let client = Client::connect(&addrs, options)?;
        Ok(Session {
            client,
            _embedded: embedded,
        })
    }

    /// A session on a connection already open.
    fn of(client: Client, embedded: Option<AgentHandle>) -> Session {
        Session {
            client,
            _embedded: embedded,
        }
    }
}

/// The addresses to try and the client's options for `target`, with `peer`
/// (the in-process agent started for [`Target::Embedded`]).
fn client_options(
    target: &Target,
    local: LocalOptions,
    peer: Peer,
) -> Result<(Vec<SocketAddr>, ClientOptions, Option<AgentHandle>), RunError> {
    {
        let mut options = ClientOptions {
            host: None,
            port: 0,
            family: Family::Any,
            bind: None,
            local: local.sockets,
            connect_timeout: local.connect_timeout,
            cpus: local.cpus,
            udp_size_default: local.udp_size_default,
            auth: Default::default(),
            start_at: local.start_at,
            peer,
            server_output: local.server_output,
            profile: local.profile,
        };
        let (addrs, embedded) = match target {
            Target::Agent {
                host,
                port,
                family,
                bind,
                auth,
            } => {
                options.auth = auth.clone();
                options.host = Some(host.clone());
                options.port = *port;
                options.family = *family;
                options.bind = *bind;
                (resolve(host, *port, *family)?, None)
            }
            Target::Started { addr } => {
                options.port = addr.port();
                options.family = if addr.is_ipv6() { Family::V6 } else { Family::V4 };
                (vec![*addr], None)
            }
            Target::Embedded { v6 } => {
                let handle = embedded_agent(*v6)?;
                options.port = handle.addr().port();
                options.family = if *v6 { Family::V6 } else { Family::V4 };
                (vec![handle.addr()], Some(handle))
            }
        };
        Ok((addrs, options, embedded))
    }
}

impl Session {
    /// The agent's address as connected.
    pub fn agent_address(&self) -> SocketAddr {
        self.client.agent_address()
    }

    /// The limits the agent announced.
    pub fn agent_limits(&self) -> &AgentLimits {
        self.client.agent_limits()
    }

    /// Runs one test; `on_interval` sees each interval as both ends close it.
    pub fn run(
        &mut self,
        spec: &TestSpec,
        cancel: &Cancel,
        on_interval: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, RunError> {
        if let Ends::ClientOnly(_) = netrig_kinds::of(spec).ends() {
            return Err(RunError::OneEnded(format!(
                "{} runs without an agent: use netrig_run::run with the server as the target",
                spec.kind()
            )));
        }
        let ctl = cancel.begin()?;
        let result = self.client.run(spec, ctl, on_interval);
        cancel.end();
        Ok(result?)
    }

    /// Ends the session politely (the agent frees it at once).
    pub fn close(self) {
        self.client.close();
    }
}

/// Runs one test of `spec`'s kind: opens a session, runs it, closes the
/// session (or, for a kind with one end, runs it here against the target).
pub fn run(
    target: &Target,
    local: LocalOptions,
    spec: &TestSpec,
    cancel: &Cancel,
    on_interval: &mut dyn FnMut(&IntervalResult),
) -> Result<TestResult, RunError> {
    run_kind(netrig_kinds::of(spec), target, local, spec, cancel, on_interval)
}

/// [`run`] with the kind given: what a kind outside the registry (a test's,
/// a plug-in's) runs through.
pub fn run_kind(
    kind: &dyn Kind,
    target: &Target,
    local: LocalOptions,
    spec: &TestSpec,
    cancel: &Cancel,
    on_interval: &mut dyn FnMut(&IntervalResult),
) -> Result<TestResult, RunError> {
    if let Ends::ClientOnly(one) = kind.ends() {
        let own = one.own_server(spec);
        let (host, port, family, bind) = match (target, &own) {
            (
                Target::Agent {
                    host,
                    port,
                    family,
                    bind,
                    ..
                },
                _,
            ) => (host, *port, *family, *bind),
            (Target::Embedded { .. } | Target::Started { .. }, Some((host, port))) => {
                (host, *port, Family::Any, None)
            }
            (Target::Embedded { .. } | Target::Started { .. }, None) => {
                return Err(RunError::OneEnded(format!(
                    "{} runs against a server: give its address (-H), not the embedded agent",
                    kind.name()
                )))
            }
        };
        let server = resolve(host, port, family)?
            .first()
            .copied()
            .ok_or_else(|| RunError::OneEnded(format!("{host} has no address to test")))?;
        // Watching starts before the run and ends after it: the view brackets it.
        let watch = match &local.server_agent {
            Some(agent) => Some(server_host::Watch::start(agent, local.connect_timeout)?),
            None => None,
        };
        let asked_profile = local.profile;
        let end = LocalEnd {
            sockets: local.sockets,
            bind,
            cpus: local.cpus,
            cpus_option: "--cpus",
            profile: local.profile,
        };
        let ctl = match cancel.begin() {
            Ok(c) => c,
            Err(e) => {
                if let Some(w) = watch {
                    w.abandon();
                }
                return Err(e);
            }
        };
        if let Some(wait) = local
            .start_at
            .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok())
        {
            std::thread::sleep(wait.min(netrig_client::MAX_START_WAIT));
        }
        let started = std::time::SystemTime::now();
        let result = match &local.clients {
            Some(c) => clients::run(one, spec, server, c, &ctl),
            None => one.run(spec, server, &end, ctl, on_interval),
        }
        .map(|mut r| {
            r.started_unix_s = r.started_unix_s.or_else(|| {
                started
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs_f64())
            });
            r
        });
        cancel.end();
        let mut result = result.map_err(RunError::OneEnded);
        if let (Ok(r), true) = (&mut result, asked_profile) {
            r.profile = r
                .profile
                .take()
                .or_else(|| Some(one_ended_not_profiled(kind.name())));
        }
        if let Some(w) = watch {
            match (&mut result, w.end()) {
                (Ok(r), Ok((agent, view))) => netrig_report::server_host::attach(r, agent, &view),
                (Ok(r), Err(e)) => r.warnings.push(format!("server host: its view is withheld: {e}")),
                (Err(_), _) => {}
            }
        }
        return result;
    }
    if local.server_agent.is_some() {
        return Err(RunError::Option(server_agent_not_needed(kind.name())));
    }
    if let Some(r) = cancel
        .state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .reason
        .clone()
    {
        return Err(RunError::Cancelled(r));
    }
    let server_output = local.server_output;
    let mut session = match peer_of(kind, spec, target, &local)? {
        Peer::Netrig if server_output => return Err(RunError::Option(SERVER_OUTPUT_AGENT.into())),
        Peer::Netrig => Session::open(target, local)?,
        peer => {
            let (addrs, options, embedded) = client_options(target, local, peer)?;
            let how = match peer {
                Peer::Iperf3 => netrig_client::iperf3::How::Asked,
                _ => match Client::connect_peer(&addrs, options.clone())? {
                    Connected::Agent(c) => {
                        let mut session = Session::of(c, embedded);
                        if server_output {
                            session.close();
                            return Err(RunError::Option(SERVER_OUTPUT_AGENT.into()));
                        }
                        let result = session.run(spec, cancel, on_interval);
                        session.close();
                        return result;
                    }
                    Connected::Iperf3(d) => netrig_client::iperf3::How::Detected(d),
                },
            };
            let ctl = cancel.begin()?;
            let result = netrig_client::iperf3::run(&addrs, &options, how, spec, ctl, on_interval);
            cancel.end();
            let mut result = result?;
            if options.profile {
                result.profile = Some(iperf3_not_profiled());
            }
            return Ok(result);
        }
    };
    let result = session.run(spec, cancel, on_interval);
    session.close();
    result
}

/// `--profile` on a one-ended run that did not profile (its load split among `--clients`
/// processes, which are not profiled): the result says so rather than leaving `profile` out.
fn one_ended_not_profiled(kind: &str) -> netrig_report::model::profile::ProfileResult {
    not_profiled(["local", "remote"], |end| {
        format!(
            "profile withheld: the {end} end of this {kind} run is not profiled by this build (a load split \
             among --clients processes is not profiled; #42)"
        )
    })
}

/// `--profile` against an iperf3 server: neither end is profiled (yet), and the result says so
/// rather than dropping the option.
fn iperf3_not_profiled() -> netrig_report::model::profile::ProfileResult {
    not_profiled(["client's", "iperf3 server's"], |end| {
        format!("profile withheld: the {end} end of a test against an iperf3 server is not profiled by this build (#42)")
    })
}

/// Both ends (named `ends`) withheld, each with `why(its name)`.
fn not_profiled(
    ends: [&str; 2],
    why: impl Fn(&str) -> String,
) -> netrig_report::model::profile::ProfileResult {
    use netrig_report::model::profile::{EndProfile, ProfileResult};
    let end = |e: &str| EndProfile::Withheld { withheld: why(e) };
    ProfileResult {
        local: end(ends[0]),
        remote: end(ends[1]),
    }
}

/// `--get-server-output` against a netrig agent.
const SERVER_OUTPUT_AGENT: &str =
    "--get-server-output asks an iperf3 server for its own output; the server is a \
                                   netrig agent, whose side the result has measured (see --json)";

/// What the client speaks to `target` for `spec`: `--peer` as asked; auto
/// probes for an iperf3 server only for a kind one can run (the others
/// speak netrig, as before), and never to an agent in this process.
fn peer_of(
    kind: &dyn Kind,
    spec: &TestSpec,
    target: &Target,
    local: &LocalOptions,
) -> Result<Peer, RunError> {
    let speaks = netrig_kinds::peer::speaks_iperf3(&spec.test);
    let remote = matches!(target, Target::Agent { .. });
    match local.peer {
        Peer::Iperf3 if !speaks => Err(RunError::Option(format!(
            "--peer iperf3: {} cannot run against an iperf3 server, which measures streams only (tcp-stream, \
             tcp-maerts, tcp-bidir, udp-stream)",
            kind.name()
        ))),
        Peer::Iperf3 if !remote => Err(RunError::Option(
            "--peer iperf3 needs the iperf3 server's address (-H): without it the test runs against an agent \
             in this process"
                .into(),
        )),
        Peer::Auto if speaks && remote => Ok(Peer::Auto),
        Peer::Iperf3 => Ok(Peer::Iperf3),
        _ => Ok(Peer::Netrig),
    }
}

/// Resolves the target's host (for [`Target::Agent`]) without connecting:
/// a driver checks before it runs anything (a plan's set-up commands) that
/// the host is one, as a single run would find out first.
pub fn resolve_target(target: &Target) -> Result<(), RunError> {
    match target {
        Target::Agent {
            host, port, family, ..
        } => resolve(host, *port, *family).map(|_| ()).map_err(RunError::from),
        Target::Embedded { .. } | Target::Started { .. } => Ok(()),
    }
}

/// The port a host given without one means for this test: a kind with one end goes to its
/// server's own port (an HTTP load's URL, `--url http://h:8080/`), not the agent's; a kind with
/// an agent has none (the agent's default port). A single run and an experiment read it alike.
pub fn own_port(kind: &dyn Kind, spec: &TestSpec) -> Option<u16> {
    match kind.ends() {
        Ends::ClientOnly(one) => one.own_server(spec).map(|(_, port)| port),
        Ends::Both => None,
    }
}

/// What `--server-agent` with a kind of two ends is told.
pub fn server_agent_not_needed(what: &str) -> String {
    format!(
        "--server-agent is not needed for {what}: its agent runs on the server's host and reports that host's \
         side already (CPU, kernel counters); it is for kinds with one end, aimed at any server"
    )
}

/// An agent in this process on loopback, on a free port.
fn embedded_agent(v6: bool) -> Result<AgentHandle, RunError> {
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    let mut config = AgentConfig::new(SocketAddr::new(ip, 0));
    // The user's own agent, in this process: its end is profiled when a test asks
    // (`--profile`), as a lab's agents are; there is no operator to say --allow-profile.
    config.allow_profile = true;
    Ok(Agent::bind(config)?.spawn())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::Limit;

    fn short(kind: &str) -> TestSpec {
        let mut s = suite::quick(0.3)
            .into_iter()
            .find(|s| s.kind() == kind)
            .expect("the suite has the kind");
        s.limit = Limit::Duration { seconds: 0.3 };
        s
    }

    #[test]
    fn runs_a_test_against_the_embedded_agent_with_intervals() {
        let mut spec = short("tcp-stream");
        spec.interval_s = Some(0.1);
        let mut seen = 0;
        let r = run(
            &Target::embedded(false),
            LocalOptions::default(),
            &spec,
            &Cancel::new(),
            &mut |_| seen += 1,
        )
        .unwrap();
        assert_eq!(r.test, "tcp-stream");
        assert!(r.summary.bytes > 0 && r.summary.throughput_bps > 0.0);
        assert!((2..=4).contains(&seen), "{seen} intervals in 0.3 s at 0.1 s");
        assert_eq!(seen, r.intervals.len());
    }

    #[test]
    fn a_session_runs_tests_one_after_another() {
        let mut s = Session::open(&Target::embedded(false), LocalOptions::default()).unwrap();
        let cancel = Cancel::new();
        for kind in ["tcp-rr", "udp-rr"] {
            let r = s.run(&short(kind), &cancel, &mut |_| {}).unwrap();
            assert!(r.summary.transactions.unwrap_or(0) > 0, "{kind}");
        }
        assert!(!cancel.is_running());
        s.close();
    }

    #[test]
    fn cancel_stops_a_run_in_progress_and_later_ones() {
        let mut spec = short("tcp-stream");
        spec.limit = Limit::Duration { seconds: 30.0 };
        let cancel = Cancel::new();
        let c = cancel.clone();
        let stopper = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !c.is_running() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(200));
            c.cancel("stopped by the test");
        });
        let t0 = std::time::Instant::now();
        let mut s = Session::open(&Target::embedded(false), LocalOptions::default()).unwrap();
        let e = s.run(&spec, &cancel, &mut |_| {}).unwrap_err();
        stopper.join().unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a 30 s test was not stopped"
        );
        assert!(e.to_string().contains("stopped by the test"), "{e}");
        assert!(!e.is_setup());
        let again = s.run(&short("tcp-rr"), &cancel, &mut |_| {});
        assert!(matches!(again, Err(RunError::Cancelled(_))));
    }

    #[test]
    fn a_closed_port_is_a_setup_error_naming_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = run(
            &Target::agent("127.0.0.1", port),
            LocalOptions::default(),
            &short("tcp-stream"),
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.is_setup(), "{e}");
        assert!(e.to_string().contains(&port.to_string()), "{e}");
    }

    /// A kind with one end: it runs against the target's server itself,
    /// with no agent and no control connection (the target is a plain TCP
    /// listener here, which would fail any agent handshake).
    struct Knock;

    impl netrig_kinds::OneEnded for Knock {
        fn run(
            &self,
            spec: &TestSpec,
            server: SocketAddr,
            _: &LocalEnd,
            _: Arc<RunControl>,
            observer: &mut dyn FnMut(&IntervalResult),
        ) -> Result<TestResult, String> {
            use std::io::Write;
            let mut c = std::net::TcpStream::connect(server).map_err(|e| e.to_string())?;
            c.write_all(b"knock").map_err(|e| e.to_string())?;
            let text = include_str!("../../netrig-report/tests/fixtures/tcp-stream.json");
            let mut r: TestResult = serde_json::from_str(text).map_err(|e| e.to_string())?;
            r.test = format!("knock ({})", spec.kind());
            for i in &r.intervals {
                observer(i);
            }
            Ok(r)
        }
    }

    impl Kind for Knock {
        fn name(&self) -> &'static str {
            "knock"
        }
        fn about(&self) -> &'static str {
            "connects to any server and says so"
        }
        fn args(&self, cmd: clap::Command) -> clap::Command {
            cmd
        }
        fn plan(&self, _: &clap::ArgMatches) -> Result<netrig_kinds::Planned, String> {
            Err("not from the command line".into())
        }
        fn workload(&self, spec: &TestSpec) -> netrig_kinds::Workloads {
            netrig_kinds::of(spec).workload(spec)
        }
        fn ends(&self) -> Ends<'_> {
            Ends::ClientOnly(self)
        }
        fn report(&self) -> &dyn netrig_report::KindReport {
            self
        }
    }

    impl netrig_report::KindReport for Knock {
        fn config(&self, _: &TestSpec, _: &mut netrig_report::TestConfig) {}
        fn table(&self) -> &'static dyn netrig_report::TableLayout {
            netrig_kinds::by_name("tcp-stream").expect("a kind").table()
        }
    }

    /// A server for one connection: its port, and what it heard.
    fn knock_server() -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        use std::io::Read;
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let heard = std::thread::spawn(move || {
            let (mut c, _) = server.accept().unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got
        });
        (port, heard)
    }

    #[test]
    fn a_one_ended_kind_runs_without_an_agent() {
        let (port, heard) = knock_server();
        let mut seen = 0;
        let r = run_kind(
            &Knock,
            &Target::agent("127.0.0.1", port),
            LocalOptions::default(),
            &short("tcp-stream"),
            &Cancel::new(),
            &mut |_| seen += 1,
        )
        .unwrap();
        assert_eq!(
            heard.join().unwrap(),
            b"knock",
            "the server heard the kind itself"
        );
        assert_eq!(r.test, "knock (tcp-stream)");
        assert_eq!(seen, r.intervals.len());
        // It needs a server's address: the embedded agent is none.
        let e = run_kind(
            &Knock,
            &Target::embedded(false),
            LocalOptions::default(),
            &short("tcp-stream"),
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("give its address (-H)"), "{e}");
    }

    /// `--server-agent`: the agent (here the embedded one, on this host)
    /// watches around a one-ended run, and the result carries its view.
    #[test]
    fn a_one_ended_kind_gets_the_server_hosts_view() {
        let (port, heard) = knock_server();
        let local = LocalOptions {
            server_agent: Some(Target::embedded(false)),
            ..LocalOptions::default()
        };
        let r = run_kind(
            &Knock,
            &Target::agent("127.0.0.1", port),
            local,
            &short("tcp-stream"),
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(heard.join().unwrap(), b"knock");
        let h = r.server_host.as_ref().expect("the server host's view");
        assert!(h.agent.contains("embedded agent"), "{}", h.agent);
        assert!(h.window_s > 0.0 && h.window_s < 30.0, "{}", h.window_s);
        assert!(h.cpu.is_some(), "{:?}", h.cpu_withheld);
        // The knock's own connection was accepted on this host meanwhile.
        assert!(
            h.counters.get("Tcp.PassiveOpens").is_some_and(|n| *n >= 1),
            "{:?}",
            h.counters
        );
        assert!(h
            .service_demand_withheld
            .as_deref()
            .unwrap()
            .contains("no transactions"));
        let json = serde_json::to_value(&r).unwrap();
        assert!(
            json["server_host"]["counters"]["TcpExt.ListenOverflows"].is_i64(),
            "{}",
            json["server_host"]
        );
    }

    /// A kind with both ends says `--server-agent` is not needed rather than
    /// ignoring it.
    #[test]
    fn a_kind_with_both_ends_says_the_server_agent_is_not_needed() {
        let local = LocalOptions {
            server_agent: Some(Target::embedded(false)),
            ..LocalOptions::default()
        };
        let e = run(
            &Target::embedded(false),
            local,
            &short("tcp-rr"),
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.is_setup());
        let e = e.to_string();
        assert!(e.contains("--server-agent is not needed for tcp-rr"), "{e}");
        assert!(e.contains("reports that host's side already"), "{e}");
    }

    /// An agent of protocol 5 (before the watch) is asked nothing: the
    /// client says which version it speaks and which the view needs.
    #[test]
    fn an_older_agent_is_told_apart_in_words() {
        use netrig_proto::{encode_frame, AgentMsg};
        use std::io::{Read, Write};
        let old = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = old.local_addr().unwrap().port();
        let agent = std::thread::spawn(move || {
            let (mut c, _) = old.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut preamble = [0u8; 8];
            c.read_exact(&mut preamble).unwrap();
            assert!(
                u16::from_be_bytes([preamble[6], preamble[7]]) >= 6,
                "the client offers v6"
            );
            c.write_all(&encode_frame(&AgentMsg::Welcome {
                version: 5,
                software: "0.0.5".into(),
                limits: AgentLimits::default(),
                auth: netrig_proto::auth::AgentAuth::default().welcome(),
                clock: None,
                name: None,
            }))
            .unwrap();
            let mut len = [0u8; 4];
            c.read_exact(&mut len).unwrap();
            let mut hello = vec![0u8; u32::from_be_bytes(len) as usize];
            c.read_exact(&mut hello).unwrap();
            c.write_all(&encode_frame(&AgentMsg::HelloAccepted { signature: None }))
                .unwrap();
            // Whatever else comes (a bye), then the close: never a watch_start.
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            rest
        });
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = LocalOptions {
            server_agent: Some(Target::agent("127.0.0.1", port)),
            ..LocalOptions::default()
        };
        let e = run_kind(
            &Knock,
            &Target::agent("127.0.0.1", server.local_addr().unwrap().port()),
            local,
            &short("tcp-stream"),
            &Cancel::new(),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!(
                "the agent at 127.0.0.1:{port} speaks protocol v5; the server host's view needs v6"
            )),
            "{e}"
        );
        let rest = agent.join().unwrap();
        assert!(
            !String::from_utf8_lossy(&rest).contains("watch_start"),
            "nothing the agent does not know was sent"
        );
    }
}
