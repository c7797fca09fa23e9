//! tcp-rr: request/response on persistent TCP connections (netperf
//! TCP_RR): transactions per second and their latency, closed loop
//! (`--burst` in flight) or open loop (`--rate`, wrk2's honest schedule).

mod workload;

pub use workload::RrWorkload;

use crate::args::{CommonArgs, TxnArgs};
use crate::kind::{KindDef, Planned, Workloads};
use crate::txn::{table, TransactionsConfig};
use clap::Args;
use netrig_engine::TxnParams;
use netrig_proto::spec::{KindSpec, Load, TcpRrSpec};
use netrig_proto::TestSpec;
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct TcpRr;

/// tcp-rr's options on the command line.
#[derive(Debug, Args)]
pub struct RrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
}

impl KindDef for TcpRr {
    type Args = RrArgs;
    type Spec = TcpRrSpec;

    fn name(&self) -> &'static str {
        "tcp-rr"
    }
    fn about(&self) -> &'static str {
        "TCP request/response on persistent connections (netperf TCP_RR): transactions/s and latency"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a TcpRrSpec> {
        match test {
            KindSpec::TcpRr(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: RrArgs) -> Result<Planned, String> {
        a.common.plan(KindSpec::TcpRr(TcpRrSpec {
            transactions: a.txn.transactions()?,
            tcp: a.common.tcp(),
        }))
    }

    fn workload(&self, s: &TcpRrSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(RrWorkload {
            txn: TxnParams::from_spec(&s.transactions),
        }))
    }

    fn config(&self, s: &TcpRrSpec, c: &mut TestConfig) {
        let part = TransactionsConfig::of(&s.transactions, None, c);
        c.set_kind_part(&part);
    }

    fn warnings(&self, s: &TcpRrSpec, _: &TestSpec, local: Side<'_>, _: &TestResult) -> Vec<String> {
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
