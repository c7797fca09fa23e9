//! tcp-crr: connect, request, response, close: a new connection per
//! transaction (netperf TCP_CRR): transactions per second, their latency,
//! and failed connections by reason.

mod workload;

pub use workload::CrrWorkload;

use crate::args::{parse_timeout, CommonArgs, TxnArgs};
use crate::kind::{Kind, Planned, Workloads};
use clap::{Args, FromArgMatches};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::TxnParams;
use netrig_proto::spec::{KindSpec, TcpCrrSpec};
use netrig_proto::TestSpec;
use netrig_report::{table, KindReport, Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct TcpCrr;

/// tcp-crr's options on the command line.
#[derive(Debug, Args)]
struct CrrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
    /// Longest a transaction may take, from connect to its last response byte; later counts as
    /// timed out (default 1; --connect-timeout is for the control connection).
    #[arg(long = "timeout", alias = "crr-timeout", value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

fn own(spec: &TestSpec) -> &TcpCrrSpec {
    match &spec.test {
        KindSpec::TcpCrr(s) => s,
        other => unreachable!("a {} spec given to tcp-crr", other.name()),
    }
}

impl Kind for TcpCrr {
    fn name(&self) -> &'static str {
        "tcp-crr"
    }

    fn about(&self) -> &'static str {
        "TCP connect/request/response/close, a new connection per transaction (netperf TCP_CRR): \
         transactions/s, latency and failed connections by reason."
    }

    fn args(&self, cmd: clap::Command) -> clap::Command {
        CrrArgs::augment_args(cmd)
    }

    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String> {
        let a = CrrArgs::from_arg_matches(m).map_err(|e| e.to_string())?;
        a.common.plan(KindSpec::TcpCrr(TcpCrrSpec {
            transactions: a.txn.transactions()?,
            timeout_s: a.timeout,
            tcp: a.common.tcp(),
        }))
    }

    /// Its connections come and go during the run: none at set-up.
    fn workload(&self, spec: &TestSpec) -> Workloads {
        let s = own(spec);
        Workloads::Transient(Arc::new(CrrWorkload {
            txn: TxnParams::from_spec(&s.transactions),
            timeout: s.timeout(),
            accepted_options: SocketSettings::new(&spec.remote, Some(&s.tcp)),
        }))
    }
}

impl KindReport for TcpCrr {
    fn config(&self, spec: &TestSpec, c: &mut TestConfig) {
        let s = own(spec);
        c.set_transactions(&s.transactions, Some(s.timeout().as_secs_f64()));
    }

    fn warnings(&self, spec: &TestSpec, local: Side<'_>, _: Side<'_>, _: &TestResult) -> Vec<String> {
        crate::txn::open_loop_warnings(&own(spec).transactions, local)
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::CONNECT_TRANSACTIONS
    }
}
