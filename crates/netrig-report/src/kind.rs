//! What a test kind contributes to its result beyond its wire rules: its
//! options in the result's config, the warnings only it knows to give, and
//! how a person reads it ([`TableLayout`]). Each kind implements
//! [`KindReport`] in its own module (crate netrig-kinds); the merge in
//! [`crate::assemble`] is the same for all.

use crate::assemble::Side;
use crate::model::{IntervalResult, TestConfig, TestResult};
use netrig_proto::TestSpec;

/// A kind's part of its result.
pub trait KindReport: Sync {
    /// Its own options, as the result's config shows them ([`TestConfig::new`]
    /// has filled in the common ones).
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
/// the interim rows as the run goes. [`crate::table`] has the layouts of
/// the streams and of request/response; a kind may bring its own.
pub trait TableLayout: Sync {
    /// The result's table (without interval rows, which are printed as they come).
    fn render(&self, r: &TestResult) -> String;
    /// The header over the interval rows.
    fn interval_header(&self) -> String;
    /// The rows of one interval: a row per flow when `per_flow`, then the sums.
    fn interval_rows(&self, i: &IntervalResult, per_flow: bool) -> String;
}
