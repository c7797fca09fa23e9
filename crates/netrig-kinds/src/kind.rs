//! The trait every test kind implements.

use clap::FromArgMatches;
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::{RunControl, TransientWorkload, Workload};
use netrig_proto::spec::KindSpec;
use netrig_proto::TestSpec;
use netrig_report::{IntervalResult, KindReport, Side, TableLayout, TestConfig, TestResult};
use std::net::SocketAddr;
use std::sync::Arc;

/// One test kind: everything netrig does differently for it. Its wire
/// rules are its spec type's ([`netrig_proto::spec::KindRules`]); its part
/// of the result is [`KindReport`].
pub trait Kind: KindReport + Send + Sync {
    /// Its name: the CLI subcommand, the wire tag and the result's `test`.
    fn name(&self) -> &'static str;

    /// One line for `--help`.
    fn about(&self) -> &'static str;

    /// Its own options on `cmd` (the subcommand; the binary adds the run's:
    /// where to, and the output format).
    fn args(&self, cmd: clap::Command) -> clap::Command;

    /// The test its command line asks for; the error names the option.
    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String>;

    /// The workload one end runs for `spec` (a spec of this kind), which
    /// also says how its flows get their connections.
    fn workload(&self, spec: &TestSpec) -> Workloads;

    /// Which ends it needs.
    fn ends(&self) -> Ends<'_> {
        Ends::Both
    }

    /// `spec` with its datagrams sized to the path, whose largest
    /// unfragmented UDP payload is `payload`: for a kind whose size the
    /// user may leave to netrig ([`Planned::fit_to_path`]); `None` otherwise.
    fn fit_to_path(&self, _spec: &TestSpec, _payload: u32) -> Option<TestSpec> {
        None
    }

    /// Its part of the result.
    fn report(&self) -> &dyn KindReport;
}

/// What a kind's module defines, in its own types: its command line's
/// options (`Args`, which flatten [`crate::args::CommonArgs`]) and its wire
/// type (`Spec`). [`Kind`] and [`KindReport`], which the rest of netrig
/// holds, follow for every `KindDef` wrapped in [`Def`] (the registry's
/// entries).
pub trait KindDef: Send + Sync + 'static {
    /// Its options on the command line.
    type Args: clap::Args + FromArgMatches;
    /// Its options in a spec ([`netrig_proto::spec::kind`]).
    type Spec;

    /// Its name: the CLI subcommand, the wire tag and the result's `test`.
    fn name(&self) -> &'static str;
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    /// Its options, if `test` is of this kind.
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a Self::Spec>;
    /// The test its options ask for; the error names the option.
    fn plan(&self, args: Self::Args) -> Result<Planned, String>;
    /// The workload one end runs for `spec`, whose options are `own`.
    fn workload(&self, own: &Self::Spec, spec: &TestSpec) -> Workloads;
    /// Its options, as the result's config shows them.
    fn config(&self, own: &Self::Spec, config: &mut TestConfig);
    /// How its results read as a table.
    fn table(&self) -> &'static dyn TableLayout;

    /// Warnings only it gives (see [`KindReport::warnings`]).
    fn warnings(
        &self,
        _own: &Self::Spec,
        _spec: &TestSpec,
        _local: Side<'_>,
        _result: &TestResult,
    ) -> Vec<String> {
        Vec::new()
    }
    /// Whether its receivers take datagrams in batches (UDP GRO).
    fn batches_datagrams(&self, _own: &Self::Spec) -> bool {
        false
    }
    /// Its spec sized to the path (see [`Kind::fit_to_path`]).
    fn fit_to_path(&self, _own: &Self::Spec, _spec: &TestSpec, _payload: u32) -> Option<TestSpec> {
        None
    }
    /// Which ends it needs.
    fn ends(&self) -> Ends<'_> {
        Ends::Both
    }
}

/// A `KindDef`'s options in `spec`: the registry hands each kind only specs
/// of its own kind (it looks the kind up by the spec's), so this holds.
fn own<'a, K: KindDef>(k: &K, spec: &'a TestSpec) -> &'a K::Spec {
    k.own(&spec.test)
        .unwrap_or_else(|| unreachable!("a {} spec given to {}", spec.kind(), k.name()))
}

/// A kind's definition as the registry holds it.
pub struct Def<K>(pub K);

impl<K: KindDef> Kind for Def<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn about(&self) -> &'static str {
        self.0.about()
    }
    fn args(&self, cmd: clap::Command) -> clap::Command {
        <K::Args as clap::Args>::augment_args(cmd)
    }
    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String> {
        self.0
            .plan(K::Args::from_arg_matches(m).map_err(|e| e.to_string())?)
    }
    fn workload(&self, spec: &TestSpec) -> Workloads {
        self.0.workload(own(&self.0, spec), spec)
    }
    fn ends(&self) -> Ends<'_> {
        self.0.ends()
    }
    fn fit_to_path(&self, spec: &TestSpec, payload: u32) -> Option<TestSpec> {
        self.0.fit_to_path(own(&self.0, spec), spec, payload)
    }
    fn report(&self) -> &dyn KindReport {
        self
    }
}

impl<K: KindDef> KindReport for Def<K> {
    fn config(&self, spec: &TestSpec, config: &mut TestConfig) {
        self.0.config(own(&self.0, spec), config)
    }
    fn batches_datagrams(&self, spec: &TestSpec) -> bool {
        self.0.batches_datagrams(own(&self.0, spec))
    }
    fn warnings(
        &self,
        spec: &TestSpec,
        local: Side<'_>,
        _remote: Side<'_>,
        result: &TestResult,
    ) -> Vec<String> {
        self.0.warnings(own(&self.0, spec), spec, local, result)
    }
    fn table(&self) -> &'static dyn TableLayout {
        self.0.table()
    }
}

/// How a kind's flows get their connections, with the workload that drives
/// them: the type says which, so neither can be asked the other's work.
#[derive(Clone)]
pub enum Workloads {
    /// A connection (or socket) per flow, opened at set-up.
    Connected(Arc<dyn Workload>),
    /// A connection per transaction, opened during the run.
    Transient(Arc<dyn TransientWorkload>),
}

/// Which ends a kind needs.
pub enum Ends<'a> {
    /// The client and a netrig agent.
    Both,
    /// The client alone, against any server at the target's address (an
    /// HTTP load generator, say): no agent, no control connection.
    ClientOnly(&'a dyn OneEnded),
}

/// A kind with one end: it runs here alone.
pub trait OneEnded: Sync {
    /// Runs `spec` against `server`, calling `observer` with each interval,
    /// until done or `ctl` aborts it.
    fn run(
        &self,
        spec: &TestSpec,
        server: SocketAddr,
        local: &LocalEnd,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, String>;

    /// The server `spec` itself names (host, port), for a run whose target
    /// gives none (no `-H`): an http `--url`'s.
    fn own_server(&self, _spec: &TestSpec) -> Option<(String, u16)> {
        None
    }

    /// Client `k`'s share of `spec` when `n` client processes run it
    /// together (`--clients`), so that together they offer what one would;
    /// the error says why it cannot be shared.
    fn share(&self, spec: &TestSpec, _k: u32, _n: u32) -> Result<TestSpec, String> {
        Err(format!(
            "{} cannot be split among client processes (--clients)",
            spec.kind()
        ))
    }

    /// The clients' results (each with the source address it ran from) as
    /// one: counts added, latency histograms merged.
    fn sum(
        &self,
        spec: &TestSpec,
        _parts: Vec<(std::net::IpAddr, TestResult)>,
    ) -> Result<TestResult, String> {
        Err(format!(
            "{} cannot sum client processes' results (--clients)",
            spec.kind()
        ))
    }
}

/// What a command line asks for: the test, and this end's part of it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub spec: TestSpec,
    pub local: LocalEnd,
    /// The kind sizes its datagrams for the path once it is known
    /// ([`Kind::fit_to_path`]): udp-stream without `-m`.
    pub fit_to_path: bool,
    /// `--peer`: what the server is; `None`: not given (auto, or a plan's
    /// `[target]` peer).
    pub peer: Option<netrig_report::model::peer::Peer>,
    /// `--get-server-output`: ask an iperf3 server for its own output.
    pub get_server_output: bool,
    /// `--profile`: profile this end's CPUs over the measured window.
    pub profile: bool,
}

impl Planned {
    /// The plan of a kind with one end: `spec`, within netrig's bounds, run
    /// on this host's sockets as they are, its workers on `cpus` (`--cpus`).
    pub(crate) fn one_ended(spec: TestSpec, cpus: Option<Vec<u32>>) -> Result<Planned, String> {
        spec.validate_bounds().map_err(|e| e.to_string())?;
        Ok(Planned {
            spec,
            local: LocalEnd {
                sockets: SocketSettings::default(),
                bind: None,
                cpus,
                cpus_option: "--cpus",
                profile: false,
            },
            fit_to_path: false,
            peer: None,
            get_server_output: false,
            profile: false,
        })
    }
}

/// This end's side of a test, beside the spec the agent gets.
#[derive(Debug, Clone, Default)]
pub struct LocalEnd {
    /// Options on this end's data sockets.
    pub sockets: SocketSettings,
    /// The source address of this end's connections (a kind with one end:
    /// `--bind`, or a `--clients` process's own address).
    pub bind: Option<std::net::IpAddr>,
    /// Pin this end's worker i to `cpus[i % len]` (`--cpus`, `-A`).
    pub cpus: Option<Vec<u32>>,
    /// The option that set `cpus`, for errors.
    pub cpus_option: &'static str,
    /// `--profile` on a kind with one end (http): profile this host over the run's measured
    /// window (a two-ended kind's client profiles its end itself, from [`Planned::profile`]).
    pub profile: bool,
}
