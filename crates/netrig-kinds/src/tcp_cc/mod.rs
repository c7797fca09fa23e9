//! tcp-cc: connect, close: a new connection per transaction and no request
//! or response (netperf TCP_CC): transactions (connections) per second,
//! their latency, and failed connections by reason.
//!
//! It is tcp-crr's workload without data: its requester and responder,
//! their event loop and blocking paths, its failure counts, its config and
//! table, run with no request and no response (`CrrWorkload::no_data`).
//! Each connection still carries netrig's 32-byte data greeting (cookie,
//! flow) and nothing else, so that the agent can tell the run's connections
//! from others and route each to its flow. As netperf's TCP_CC (whose
//! netserver closes each connection as soon as it has accepted it, and
//! whose client counts the transaction when its recv() sees that close),
//! the agent closes each connection first, once its greeting is read
//! (TIME_WAIT on the agent's host), and the client's transaction ends when
//! it sees that close: latency runs from the start of connect() (or, open
//! loop, from when it was due) to then. tcp-crr's other close orders do not
//! fit: the client closing first would wait for nothing of the agent's and
//! run ahead of its accepts (tried: the agent then dropped greetings it
//! could not keep up with), and a reset may overtake the greeting.

use crate::args::{parse_timeout, CommonArgs, LoadArgs};
use crate::kind::{KindDef, Planned, Workloads};
use crate::tcp_crr::{CrrConfig, CrrWorkload, PortCycle};
use crate::txn::TransactionsConfig;
use clap::Args;
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::TxnParams;
use netrig_proto::spec::kind::TcpCcSpec;
use netrig_proto::spec::{CloseFirst, KindSpec, PortRange};
use netrig_proto::{DataHello, TestSpec};
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct TcpCc;

/// tcp-cc's options on the command line: tcp-crr's, without the sizes.
#[derive(Debug, Args)]
pub struct CcArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    load: LoadArgs,
    /// Longest a transaction may take, from connect to the agent's close as the client sees it;
    /// later counts as timed out (default 1).
    #[arg(long = "timeout", value_name = "SECONDS", value_parser = parse_timeout, help_heading = "Rate")]
    timeout: Option<f64>,
    /// Bind each connection to the next local port of LOW-HIGH in turn (SO_REUSEADDR) before
    /// connecting, as netperf TCP_CC does; default: the kernel picks one at connect().
    #[arg(long = "local-ports", value_name = "LOW-HIGH", value_parser = PortRange::parse, help_heading = "Rate")]
    local_ports: Option<PortRange>,
}

impl KindDef for TcpCc {
    type Args = CcArgs;
    type Spec = TcpCcSpec;

    fn name(&self) -> &'static str {
        "tcp-cc"
    }
    fn about(&self) -> &'static str {
        "TCP connect/close, a new connection per transaction and no request or response (netperf \
         TCP_CC; each connection carries netrig's 32-byte data greeting alone): transactions/s, \
         latency and failed connections by reason"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a TcpCcSpec> {
        match test {
            KindSpec::TcpCc(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: CcArgs) -> Result<Planned, String> {
        a.common.plan(KindSpec::TcpCc(TcpCcSpec {
            load: a.load.load()?,
            timeout_s: a.timeout,
            tcp: a.common.tcp(),
            local_ports: a.local_ports,
        }))
    }

    /// tcp-crr's workload without data: its connections come and go during
    /// the run, none at set-up.
    fn workload(&self, s: &TcpCcSpec, spec: &TestSpec) -> Workloads {
        Workloads::Transient(Arc::new(CrrWorkload {
            txn: TxnParams::from_spec(&s.transactions()),
            timeout: s.timeout(),
            accepted_options: SocketSettings::new(&spec.remote, Some(&s.tcp)),
            close_first: CloseFirst::Responder,
            local_ports: s.local_ports.map(|r| Arc::new(PortCycle::new(r))),
        }))
    }

    /// tcp-crr's config part, its sizes 0; the message and receive sizes
    /// are the greeting, each connection's one send and the agent's one
    /// receive.
    fn config(&self, s: &TcpCcSpec, c: &mut TestConfig) {
        let part = CrrConfig {
            txn: TransactionsConfig::of(&s.transactions(), Some(s.timeout().as_secs_f64()), c),
            close_first: Some(CloseFirst::Responder.as_str().to_string()),
            local_ports: s.local_ports.map(|r| r.to_string()),
        };
        c.message_size = DataHello::LEN as u32;
        c.recv_size = DataHello::LEN as u32;
        c.set_kind_part(&part);
    }

    fn warnings(&self, s: &TcpCcSpec, _: &TestSpec, local: Side<'_>, r: &TestResult) -> Vec<String> {
        let mut w = crate::txn::open_loop_warnings(&s.transactions(), local);
        // (No local-port ceiling, tcp-crr's other warning: the agent keeps the TIME_WAITs.)
        w.extend(crate::tcp_crr::failure_warning(r));
        w
    }

    fn table(&self) -> &'static dyn TableLayout {
        crate::tcp_crr::table()
    }
}
