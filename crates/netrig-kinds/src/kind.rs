//! The trait every test kind implements.

use netrig_engine::sockopt::SocketSettings;
use netrig_engine::{RunControl, TransientWorkload, Workload};
use netrig_proto::TestSpec;
use netrig_report::{IntervalResult, KindReport, TestResult};
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
}

/// What a command line asks for: the test, and this end's part of it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub spec: TestSpec,
    pub local: LocalEnd,
    /// The kind sizes its datagrams for the path once it is known
    /// ([`Kind::fit_to_path`]): udp-stream without `-m`.
    pub fit_to_path: bool,
}

/// This end's side of a test, beside the spec the agent gets.
#[derive(Debug, Clone, Default)]
pub struct LocalEnd {
    /// Options on this end's data sockets.
    pub sockets: SocketSettings,
    /// Pin this end's worker i to `cpus[i % len]` (`--cpus`, `-A`).
    pub cpus: Option<Vec<u32>>,
    /// The option that set `cpus`, for errors.
    pub cpus_option: &'static str,
}
