//! udp-rr: request/response over UDP (netperf UDP_RR): lost datagrams are
//! timed out, counted, and the flow goes on.

mod workload;

pub use workload::UdpRrWorkload;

use crate::args::{parse_timeout, CommonArgs, TxnArgs};
use crate::kind::{Kind, Planned, Workloads};
use clap::{Args, FromArgMatches};
use netrig_engine::TxnParams;
use netrig_proto::spec::{KindSpec, UdpRrSpec, UDP_HEADER_LEN};
use netrig_proto::TestSpec;
use netrig_report::{table, KindReport, Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct UdpRr;

/// udp-rr's options on the command line.
#[derive(Debug, Args)]
struct UdpRrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
    /// A request with no response after this many seconds counts as lost (default 1).
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

fn own(spec: &TestSpec) -> &UdpRrSpec {
    match &spec.test {
        KindSpec::UdpRr(s) => s,
        other => unreachable!("a {} spec given to udp-rr", other.name()),
    }
}

impl Kind for UdpRr {
    fn name(&self) -> &'static str {
        "udp-rr"
    }

    fn about(&self) -> &'static str {
        "UDP request/response (netperf UDP_RR): lost datagrams are timed out, counted, and the flow goes on."
    }

    fn args(&self, cmd: clap::Command) -> clap::Command {
        UdpRrArgs::augment_args(cmd)
    }

    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String> {
        let a = UdpRrArgs::from_arg_matches(m).map_err(|e| e.to_string())?;
        a.common.plan(KindSpec::UdpRr(UdpRrSpec {
            transactions: a.txn.transactions()?,
            timeout_s: a.timeout,
        }))
    }

    fn workload(&self, spec: &TestSpec) -> Workloads {
        let s = own(spec);
        Workloads::Connected(Arc::new(UdpRrWorkload {
            txn: TxnParams::from_spec(&s.transactions),
            timeout: s.timeout(),
        }))
    }
}

impl KindReport for UdpRr {
    fn config(&self, spec: &TestSpec, c: &mut TestConfig) {
        let s = own(spec);
        c.set_transactions(&s.transactions, Some(s.timeout().as_secs_f64()));
        c.reverse = Some(false);
    }

    fn warnings(&self, spec: &TestSpec, local: Side<'_>, _: Side<'_>, result: &TestResult) -> Vec<String> {
        let t = &own(spec).transactions;
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
