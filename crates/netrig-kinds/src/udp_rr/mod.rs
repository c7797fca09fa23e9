//! udp-rr: request/response over UDP (netperf UDP_RR): lost datagrams are
//! timed out, counted, and the flow goes on.

mod workload;

pub use workload::UdpRrWorkload;

use crate::args::{parse_timeout, CommonArgs, TxnArgs};
use crate::kind::{KindDef, Planned, Workloads};
use crate::txn::{table, TransactionsConfig};
use clap::Args;
use netrig_engine::TxnParams;
use netrig_proto::spec::{KindSpec, UdpRrSpec, UDP_HEADER_LEN};
use netrig_proto::TestSpec;
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct UdpRr;

/// udp-rr's options in the result's config: the request/response kinds',
/// and its direction as udp-stream's reads (`reverse`: always false).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UdpRrConfig {
    #[serde(flatten)]
    pub txn: TransactionsConfig,
    pub reverse: Option<bool>,
}

/// udp-rr's options on the command line.
#[derive(Debug, Args)]
pub struct UdpRrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
    /// A request with no response after this many seconds counts as lost (default 1).
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout, help_heading = "Rate")]
    timeout: Option<f64>,
}

impl KindDef for UdpRr {
    type Args = UdpRrArgs;
    type Spec = UdpRrSpec;

    fn name(&self) -> &'static str {
        "udp-rr"
    }
    fn about(&self) -> &'static str {
        "UDP request/response (netperf UDP_RR): lost datagrams are timed out, counted, and the flow goes on"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a UdpRrSpec> {
        match test {
            KindSpec::UdpRr(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: UdpRrArgs) -> Result<Planned, String> {
        a.common.plan(KindSpec::UdpRr(UdpRrSpec {
            transactions: a.txn.transactions()?,
            timeout_s: a.timeout,
        }))
    }

    fn workload(&self, s: &UdpRrSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(UdpRrWorkload {
            txn: TxnParams::from_spec(&s.transactions),
            timeout: s.timeout(),
        }))
    }

    fn config(&self, s: &UdpRrSpec, c: &mut TestConfig) {
        let part = UdpRrConfig {
            txn: TransactionsConfig::of(&s.transactions, Some(s.timeout().as_secs_f64()), c),
            reverse: Some(false),
        };
        c.set_kind_part(&part);
    }

    fn warnings(&self, s: &UdpRrSpec, spec: &TestSpec, local: Side<'_>, result: &TestResult) -> Vec<String> {
        let t = &s.transactions;
        let mut out = Vec::new();
        let hdr = UDP_HEADER_LEN;
        if t.request_size < hdr || t.response_size < hdr {
            out.push(format!(
                "udp-rr datagrams carry a {hdr}-byte header (test, flow, sequence number, timestamp) so that a late \
                 response is never taken for another: -r {},{} was sent as {},{} bytes",
                t.request_size,
                t.response_size,
                t.request_size.max(hdr),
                t.response_size.max(hdr)
            ));
        }
        let late = local
            .report
            .flows
            .iter()
            .filter_map(|f| f.udp.as_ref())
            .fold(0u64, |n, u| n.saturating_add(u.late));
        if late > 0 {
            out.push(format!(
                "{late} response(s) arrived after their request had timed out (--timeout); they count as lost, \
                 not as transactions"
            ));
        }
        out.extend(crate::txn::open_loop_warnings(t, local));
        out.extend(crate::udp_stream::pacing_rate_warning(spec, result));
        out
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::TRANSACTIONS
    }
}
