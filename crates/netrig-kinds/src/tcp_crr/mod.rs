//! tcp-crr: connect, request, response, close: a new connection per
//! transaction (netperf TCP_CRR): transactions per second, their latency,
//! and failed connections by reason.

mod alone;
mod ceiling;
mod conn;
mod door;
mod failure;
mod greeting;
mod lone;
mod params;
mod ports;
mod requester;
mod responder;
mod steps;
mod table;
mod worker;
mod workload;

#[cfg(test)]
mod door_tests;
#[cfg(test)]
mod tests;

pub use ports::PortCycle;

pub use params::CrrWorkload;

// What tcp-cc (tcp-crr without data) takes of the result's parts.
pub(crate) use failure::warning as failure_warning;

/// The table of a connection per transaction: the request/response kinds',
/// with how the connections ended and were bound, and their failures.
pub(crate) fn table() -> &'static dyn TableLayout {
    &table::CONNECT_TRANSACTIONS
}

use crate::args::{parse_timeout, CommonArgs, TxnArgs};
use crate::kind::{KindDef, Planned, Workloads};
use crate::txn::TransactionsConfig;
use clap::Args;
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::TxnParams;
use netrig_proto::spec::{CloseFirst, KindSpec, PortRange, TcpCrrSpec};
use netrig_proto::TestSpec;
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct TcpCrr;

/// tcp-crr's options in the result's config: the request/response kinds',
/// and how its connections end and are bound.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CrrConfig {
    #[serde(flatten)]
    pub txn: TransactionsConfig,
    /// Which end closed each connection first, and so held its TIME_WAIT
    /// (`--close-first`): "requester", "responder" or "requester-reset".
    pub close_first: Option<String>,
    /// `--local-ports`, the range the client bound each connection's port
    /// from in turn ("5000-65535"); null: the kernel picked each at connect().
    pub local_ports: Option<String>,
}

/// tcp-crr's options on the command line.
#[derive(Debug, Args)]
pub struct CrrArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    txn: TxnArgs,
    /// Longest a transaction may take, from connect to its last response byte; later counts as
    /// timed out (default 1; --connect-timeout is for the control connection).
    #[arg(long = "timeout", alias = "crr-timeout", value_name = "SECONDS", value_parser = parse_timeout, help_heading = "Rate")]
    timeout: Option<f64>,
    /// Which end closes each connection first, once the response is out, and so holds its
    /// TIME_WAIT: requester (the client, as neper tcp_crr --time-wait; the agent keeps no
    /// TIME_WAIT), responder (the agent, as netperf TCP_CRR and an HTTP/1.0 server; the client,
    /// waiting for that close, keeps none and so never runs out of ephemeral ports to it), or
    /// requester-reset (the client aborts with a reset, SO_LINGER 0, as neper tcp_crr's default:
    /// no TIME_WAIT on either end).
    #[arg(long = "close-first", value_name = "END", default_value = "requester", value_parser = parse_close_first, help_heading = "Rate")]
    close_first: CloseFirst,
    /// Bind each connection to the next local port of LOW-HIGH in turn (SO_REUSEADDR) before
    /// connecting, as netperf TCP_CRR does (its -p, 5000-65535); default: the kernel picks one at
    /// connect(), searching net.ipv4.ip_local_port_range, as most clients do.
    #[arg(long = "local-ports", value_name = "LOW-HIGH", value_parser = PortRange::parse, help_heading = "Rate")]
    local_ports: Option<PortRange>,
}

fn parse_close_first(s: &str) -> Result<CloseFirst, String> {
    match s {
        "responder" | "server" | "agent" => Ok(CloseFirst::Responder),
        "requester" | "client" => Ok(CloseFirst::Requester),
        "requester-reset" | "client-reset" | "reset" => Ok(CloseFirst::RequesterReset),
        _ => Err(format!(
            "{s:?}: responder (the agent), requester (the client) or requester-reset (the client, with a reset)"
        )),
    }
}

impl KindDef for TcpCrr {
    type Args = CrrArgs;
    type Spec = TcpCrrSpec;

    fn name(&self) -> &'static str {
        "tcp-crr"
    }
    fn about(&self) -> &'static str {
        "TCP connect/request/response/close, a new connection per transaction (netperf TCP_CRR): \
         transactions/s, latency and failed connections by reason"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a TcpCrrSpec> {
        match test {
            KindSpec::TcpCrr(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: CrrArgs) -> Result<Planned, String> {
        a.common.plan(KindSpec::TcpCrr(TcpCrrSpec {
            transactions: a.txn.transactions()?,
            timeout_s: a.timeout,
            tcp: a.common.tcp(),
            close_first: a.close_first,
            local_ports: a.local_ports,
        }))
    }

    /// Its connections come and go during the run: none at set-up.
    fn workload(&self, s: &TcpCrrSpec, spec: &TestSpec) -> Workloads {
        Workloads::Transient(Arc::new(CrrWorkload {
            txn: TxnParams::from_spec(&s.transactions),
            timeout: s.timeout(),
            accepted_options: SocketSettings::new(&spec.remote, Some(&s.tcp)),
            close_first: s.close_first,
            local_ports: s.local_ports.map(|r| Arc::new(PortCycle::new(r))),
        }))
    }

    fn config(&self, s: &TcpCrrSpec, c: &mut TestConfig) {
        let part = CrrConfig {
            txn: TransactionsConfig::of(&s.transactions, Some(s.timeout().as_secs_f64()), c),
            close_first: Some(s.close_first.as_str().to_string()),
            local_ports: s.local_ports.map(|r| r.to_string()),
        };
        c.set_kind_part(&part);
    }

    fn warnings(&self, s: &TcpCrrSpec, _: &TestSpec, local: Side<'_>, r: &TestResult) -> Vec<String> {
        let mut w = crate::txn::open_loop_warnings(&s.transactions, local);
        w.extend(failure::warning(r));
        w.extend(ceiling::port_ceiling_warning(s, r, ceiling::PortLimits::here()));
        w
    }

    fn table(&self) -> &'static dyn TableLayout {
        table()
    }
}
