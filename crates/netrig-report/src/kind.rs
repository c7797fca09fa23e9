//! What a test kind contributes to its result beyond its wire rules: its
//! options in the result's config, the warnings only it knows to give, and
//! how a person reads it ([`TableLayout`]). Each kind implements
//! [`KindReport`] in its own module (crate netrig-kinds); the merge in
//! [`crate::assemble`] is the same for all.

use crate::model::{RunInfo, TestConfig, TestResult};
/// How a kind's results read as a table (the trait is the table exporter's, netrig-export's).
pub use netrig_export::TableLayout;
use netrig_proto::report::{IntervalSample, SideReport};
use netrig_proto::TestSpec;

/// One end's measurements: its report and its interim samples.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub report: &'a SideReport,
    pub intervals: &'a [IntervalSample],
}

/// A kind's part of its result.
pub trait KindReport: Sync {
    /// Its sizes in the result's config, and its own options as its part of it
    /// ([`TestConfig::set_kind_part`]); [`TestConfig::new`] has filled in the
    /// common ones.
    fn config(&self, spec: &TestSpec, config: &mut TestConfig);

    /// Whether its receivers may take datagrams in batches (UDP GRO), so
    /// that the kernel's UDP counters count batches, not datagrams.
    fn batches_datagrams(&self, _spec: &TestSpec) -> bool {
        false
    }

    /// Warnings only this kind gives, from both ends' measurements and the
    /// merged result.
    fn warnings(
        &self,
        _spec: &TestSpec,
        _local: Side<'_>,
        _remote: Side<'_>,
        _result: &TestResult,
    ) -> Vec<String> {
        Vec::new()
    }

    /// How its results read as a table.
    fn table(&self) -> &'static dyn TableLayout;
}

/// A result's config is made here, beside the kind that fills in its own part of it, so that
/// the result's types (netrig-document's) know nothing of kinds: `TestConfig::new` with this
/// trait in scope.
pub trait NewConfig {
    /// The config of a run of `spec`: the common options from the spec and
    /// `run`, then the kind's own ([`KindReport::config`]).
    fn new(spec: &netrig_proto::TestSpec, kind: &dyn KindReport, run: RunInfo) -> Self;
}

impl NewConfig for TestConfig {
    fn new(spec: &netrig_proto::TestSpec, kind: &dyn KindReport, run: RunInfo) -> TestConfig {
        use netrig_proto::spec::Limit;
        let mut c = TestConfig {
            embedded: run.host.is_none(),
            host: run.host,
            port: run.port,
            length_s: match spec.limit {
                Limit::Duration { seconds } => Some(seconds),
                Limit::Bytes { .. } => None,
            },
            bytes: match spec.limit {
                Limit::Bytes { bytes } => Some(bytes),
                Limit::Duration { .. } => None,
            },
            omit_s: spec.omit_s,
            interval_s: spec.interval_s,
            flows: spec.flows,
            message_size: 0,
            recv_size: 0,
            workers: spec.workers,
            cpus: run.cpus,
            remote_cpus: spec.remote_cpus.clone(),
            local: run.local,
            remote: run.remote,
            bind: run.bind,
            family: run.family,
            kind: Default::default(),
        };
        kind.config(spec, &mut c);
        c
    }
}
