//! What a test kind contributes to its result beyond its wire rules: its
//! options in the result's config, the warnings only it knows to give, and
//! how a person reads it ([`TableLayout`]). Each kind implements
//! [`KindReport`] in its own module (crate netrig-kinds); the merge in
//! [`crate::assemble`] is the same for all.

use crate::model::{IntervalResult, RunInfo, TestConfig, TestResult};
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

/// How a kind's results read as a table: the summary after the run, and
/// the interim rows as the run goes. Each kind's is in its folder (crate
/// netrig-kinds), most of them built of [`crate::table`]'s kit.
pub trait TableLayout: Sync {
    /// The result's table (without interval rows, which are printed as they come).
    fn render(&self, r: &TestResult) -> String;
    /// The header over the interval rows.
    fn interval_header(&self) -> String;
    /// The rows of one interval: a row per flow when `per_flow`, then the sums.
    fn interval_rows(&self, i: &IntervalResult, per_flow: bool) -> String;
}

// A result's config is made here, beside the kind that fills in its own part of it, so that
// the model knows nothing of kinds.
impl TestConfig {
    /// The config of a run of `spec`: the common options from the spec and
    /// `run`, then the kind's own ([`KindReport::config`]).
    pub fn new(spec: &netrig_proto::TestSpec, kind: &dyn KindReport, run: RunInfo) -> TestConfig {
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
