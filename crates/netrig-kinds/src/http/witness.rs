//! The http kind's witness: the kernel's counts of this host over the whole
//! run (read just before the load threads start and just after they end),
//! and the interface toward the server, beside the run's own totals;
//! judged by `netrig_report::witness::judge_http`. The server host's counts
//! join them when `--server-agent` watched it
//! (`netrig_report::server_host::attach`).

use netrig_metrics::{InterfaceCounters, KernelCounters};
use netrig_proto::report::{measure, WitnessReport};
use netrig_report::witness::{judge_http, WitnessResult};
use netrig_report::TestResult;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// The readings before the run.
pub(crate) struct Readings {
    at: Instant,
    kernel: Result<KernelCounters, String>,
    interface: Option<InterfaceCounters>,
}

/// The address this host's connections to `server` leave from: `bind`, or
/// the kernel's route (a UDP socket connected, which sends nothing).
fn source_of(server: SocketAddr, bind: Option<IpAddr>) -> Option<IpAddr> {
    if let Some(b) = bind.filter(|b| !b.is_unspecified()) {
        return Some(b);
    }
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(server).ok()?;
    Some(s.local_addr().ok()?.ip())
}

impl Readings {
    pub(crate) fn before(server: SocketAddr, bind: Option<IpAddr>) -> Readings {
        let interface = source_of(server, bind)
            .and_then(netrig_metrics::witness::interface_of)
            .and_then(|n| netrig_metrics::witness::read_interface(&n));
        Readings {
            interface,
            kernel: netrig_metrics::read_kernel_counters().map_err(|e| e.to_string()),
            at: Instant::now(),
        }
    }

    /// The deltas over the run, as the witness report of this end.
    pub(crate) fn after(self, r: &netrig_http_load::Report) -> Result<WitnessReport, String> {
        let kernel = netrig_metrics::read_kernel_counters().map_err(|e| e.to_string());
        let interfaces = self
            .interface
            .as_ref()
            .and_then(|b| netrig_metrics::witness::read_interface(&b.name).map(|a| a.since(b)))
            .map(|d| vec![measure::InterfaceCounters::from(&d)])
            .unwrap_or_default();
        let window_s = self.at.elapsed().as_secs_f64();
        let (before, after) = match (self.kernel, kernel) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => return Err(format!("the kernel counters could not be read ({e})")),
        };
        let d = after.delta_since(&before);
        let kernel = [
            "Tcp.ActiveOpens",
            "Tcp.PassiveOpens",
            "Tcp.OutSegs",
            "Tcp.InSegs",
            "Tcp.AttemptFails",
        ]
        .iter()
        .filter_map(|k| d.get(k).map(|v| (k.to_string(), v)))
        .collect();
        Ok(WitnessReport {
            window_s,
            scope: netrig_metrics::witness::counter_scope(),
            payload_sent: r.total.bytes_out,
            payload_received: r.total.bytes_in,
            payload_out: r.total.bytes_out,
            payload_in: r.total.bytes_in,
            kernel,
            interfaces,
            ..Default::default()
        })
    }
}

/// Judges the run's totals against this host's readings; the server host's
/// checks are withheld until an agent has watched it.
pub(crate) fn judge(r: &mut TestResult, local: Result<WitnessReport, String>) {
    let Some(h) = &r.summary.http else { return };
    let (checks, warnings, withheld) = judge_http(
        &h.total,
        h.connections,
        u64::from(
            r.config
                .kind_part::<crate::txn::TransactionsConfig>()
                .and_then(|c| c.request_size)
                .unwrap_or(0),
        ),
        local.as_ref().map_err(String::as_str),
        Err(netrig_report::witness::SERVER_NOT_WATCHED),
    );
    r.warnings.extend(warnings);
    r.witness = WitnessResult {
        checks,
        local: local.ok(),
        remote: None,
        shared_counters: false,
        withheld,
    };
}
