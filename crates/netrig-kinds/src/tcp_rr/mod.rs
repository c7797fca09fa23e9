//! tcp-rr: request/response on persistent TCP connections (netperf
//! TCP_RR): transactions per second and their latency, closed loop
//! (`--burst` in flight) or open loop (`--rate`, wrk2's honest schedule).

mod workload;

pub use workload::RrWorkload;

use crate::args::{CommonArgs, TxnArgs};
use crate::kind::{Kind, Planned, Workloads};
use clap::{Args, FromArgMatches};
use netrig_engine::TxnParams;
use netrig_proto::spec::{KindSpec, Load, TcpRrSpec};
use netrig_proto::TestSpec;
use netrig_report::{table, KindReport, Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct TcpRr;

/// tcp-rr's options on the command line.
#[derive(Debug, Args)]
struct RrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
}

fn own(spec: &TestSpec) -> &TcpRrSpec {
    match &spec.test {
        KindSpec::TcpRr(s) => s,
        other => unreachable!("a {} spec given to tcp-rr", other.name()),
    }
}

impl Kind for TcpRr {
    fn name(&self) -> &'static str {
        "tcp-rr"
    }

    fn about(&self) -> &'static str {
        "TCP request/response on persistent connections (netperf TCP_RR): transactions/s and latency."
    }

    fn args(&self, cmd: clap::Command) -> clap::Command {
        RrArgs::augment_args(cmd)
    }

    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String> {
        let a = RrArgs::from_arg_matches(m).map_err(|e| e.to_string())?;
        a.common.plan(KindSpec::TcpRr(TcpRrSpec {
            transactions: a.txn.transactions()?,
            tcp: a.common.tcp(),
        }))
    }

    fn workload(&self, spec: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(RrWorkload {
            txn: TxnParams::from_spec(&own(spec).transactions),
        }))
    }
}

impl KindReport for TcpRr {
    fn config(&self, spec: &TestSpec, c: &mut TestConfig) {
        c.set_transactions(&own(spec).transactions, None);
    }

    fn warnings(&self, spec: &TestSpec, local: Side<'_>, _: Side<'_>, _: &TestResult) -> Vec<String> {
        let s = own(spec);
        let mut out = Vec::new();
        if !s.tcp.nodelay {
            match s.transactions.load {
                Load::Closed { burst } if burst > 1 => out.push(format!(
                    "--burst {burst} without --nodelay: Nagle's algorithm may hold back requests and responses \
                     behind unacknowledged ones (netperf advises TCP_NODELAY with -b)"
                )),
                Load::Open { .. } => out.push(
                    "--rate without --nodelay: Nagle's algorithm holds each small response until the previous one \
                     is acknowledged, and with delayed ACKs that is when the next request arrives, so latency \
                     follows the request interval; use --nodelay unless that interaction is what you measure"
                        .into(),
                ),
                Load::Closed { .. } => {}
            }
        }
        out.extend(crate::txn::open_loop_warnings(&s.transactions, local));
        out
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::TRANSACTIONS
    }
}
