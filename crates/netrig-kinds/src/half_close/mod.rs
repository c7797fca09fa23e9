//! half-close: half-closed connections left on a server (netrig-lab's `overload::halfclose`) as
//! a kind with one end, so that a plan runs it from a client host of its lab: `-n` clients each
//! send a request and close their half (`--how shutdown`) or wait for the server's close and go
//! away without a FIN or RST (`--how vanish`); the server host's sockets from them are counted
//! in its namespace every 100 ms until gone (`summary.half_close`). Refused outside a lab.

mod table;

use crate::kind::{Ends, KindDef, LocalEnd, OneEnded, Planned, Workloads};
use crate::lab_host::{self, NoAgentEnd, Target};
use crate::units::parse_seconds;
use clap::{Args, ValueEnum};
use netrig_engine::RunControl;
use netrig_lab::overload::halfclose as hc;
use netrig_proto::spec::kind::{HalfCloseHow, HalfCloseSpec, MAX_HALF_CLOSE_WATCH_S};
use netrig_proto::spec::{KindSpec, Limit};
use netrig_proto::TestSpec;
use netrig_report::half_close::{HalfCloseSample, HalfCloseSummary};
use netrig_report::{IntervalResult, Summary, TableLayout, TestConfig, TestResult};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct HalfClose;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HowArg {
    /// Read until the server closes, then go away without a FIN or RST.
    Vanish,
    /// Send the request, shut the write half, hold the connection unread.
    Shutdown,
}

#[derive(Debug, Args)]
pub struct HalfCloseArgs {
    /// Connections (1 to 20000).
    #[arg(
        short = 'n',
        long = "connections",
        default_value_t = 200,
        help_heading = "Half-close"
    )]
    connections: u32,
    /// How the clients close and go away.
    #[arg(
        long = "how",
        value_enum,
        default_value = "vanish",
        help_heading = "Half-close"
    )]
    how: HowArg,
    /// The request each sends (\r\n escapes taken; default an HTTP/1.0 GET /).
    #[arg(long = "request", help_heading = "Half-close")]
    request: Option<String>,
    /// Watch the server's sockets at most this long after the clients went away (at most 600).
    #[arg(long = "watch", default_value = "90", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "Half-close")]
    watch: f64,
    /// The server's port, when not the target's (-p: in a plan, its agent's).
    #[arg(long = "to-port", value_name = "PORT", help_heading = "Half-close")]
    to_port: Option<u16>,
}

/// `\r`, `\n`, `\t` and `\\` in a request given on the command line.
pub(crate) fn unescape(s: &str) -> String {
    s.replace("\\r", "\r")
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\\\", "\\")
}

impl KindDef for HalfClose {
    type Args = HalfCloseArgs;
    type Spec = HalfCloseSpec;

    fn name(&self) -> &'static str {
        "half-close"
    }
    fn about(&self) -> &'static str {
        "half-closed connections from a lab host to a server of the same lab: clients that close \
         their half and go away; the server's FIN_WAIT2/CLOSE_WAIT sockets counted until gone"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a HalfCloseSpec> {
        match test {
            KindSpec::HalfClose(s) => Some(s),
            _ => None,
        }
    }
    fn plan(&self, a: HalfCloseArgs) -> Result<Planned, String> {
        let own = HalfCloseSpec {
            connections: a.connections,
            how: match a.how {
                HowArg::Vanish => HalfCloseHow::Vanish,
                HowArg::Shutdown => HalfCloseHow::Shutdown,
            },
            request: a
                .request
                .as_deref()
                .map(unescape)
                .unwrap_or_else(|| hc::DEFAULT_REQUEST.into()),
            watch_s: a.watch,
            to_port: a.to_port,
        };
        // The run's length bounds it: the connections (at most 60 s), the servers' closes and
        // the watch.
        let seconds = (a.watch + 70.0).min(MAX_HALF_CLOSE_WATCH_S + 70.0);
        let spec = TestSpec {
            flows: 1,
            measure_cpu: false,
            ..TestSpec::new(KindSpec::HalfClose(own), Limit::Duration { seconds })
        };
        Planned::one_ended(spec, None)
    }
    fn workload(&self, _: &HalfCloseSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(NoAgentEnd("half-close")))
    }
    fn config(&self, s: &HalfCloseSpec, c: &mut TestConfig) {
        c.message_size = s.request.len() as u32;
        c.recv_size = 4096;
        c.set_kind_part(&HalfCloseConfig {
            request_size: Some(s.request.len() as u32),
        });
    }
    fn table(&self) -> &'static dyn TableLayout {
        &table::LAYOUT
    }
    fn ends(&self) -> Ends<'_> {
        Ends::ClientOnly(self)
    }
}

impl OneEnded for HalfClose {
    fn run(
        &self,
        spec: &TestSpec,
        server: SocketAddr,
        _: &LocalEnd,
        ctl: Arc<RunControl>,
        _: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, String> {
        let KindSpec::HalfClose(s) = &spec.test else {
            return Err(format!("half-close was given a {} spec", spec.kind()));
        };
        let to = SocketAddr::new(server.ip(), s.to_port.unwrap_or(server.port()));
        let o = hc::Options {
            to,
            connections: s.connections,
            how: match s.how {
                HalfCloseHow::Vanish => hc::How::Vanish,
                HalfCloseHow::Shutdown => hc::How::Shutdown,
            },
            request: s.request.as_bytes().to_vec(),
            watch: Duration::from_secs_f64(s.watch_s),
        };
        hc::check(&o)?;
        let r = lab_host::run_stoppable(&ctl, move |stop| hc::run(&o, stop))
            .map_err(|_| "the half-close thread panicked".to_string())??;
        Ok(assemble(spec, to, &r))
    }
}

fn sample(t_s: f64, s: &netrig_lab::overload::watch::States) -> HalfCloseSample {
    HalfCloseSample {
        t_s,
        established: s.established,
        fin_wait1: s.fin_wait1,
        fin_wait2: s.fin_wait2,
        close_wait: s.close_wait,
        last_ack: s.last_ack,
    }
}

/// `summary.half_close` from the run's report.
pub(crate) fn summary_of(r: &hc::Report) -> HalfCloseSummary {
    HalfCloseSummary {
        how: match r.how {
            hc::How::Vanish => "vanish",
            hc::How::Shutdown => "shutdown",
        }
        .into(),
        connections_asked: r.connections_asked,
        opened: r.opened,
        connect_failures: r.connect_failures,
        request_failures: r.request_failures,
        server_closed_first: r.server_closed_first,
        away_at_s: r.away_at_s,
        gone_after_s: r.gone_after_s,
        gone_withheld: r.gone_after_s.is_none().then(|| {
            format!(
                "{} of the server's sockets from the clients were still open when the watch ended",
                r.left_at_end
            )
        }),
        left_at_end: r.left_at_end,
        server_fin_timeout_s: r.server_fin_timeout_s,
        peak: sample(0.0, &r.server.peak),
        samples: r
            .server
            .samples
            .iter()
            .map(|x| sample(x.t_s, &x.states))
            .collect(),
    }
}

fn assemble(spec: &TestSpec, to: SocketAddr, r: &hc::Report) -> TestResult {
    let summary = Summary {
        // One connection opened, one transaction.
        transactions: Some(u64::from(r.opened)),
        half_close: Some(summary_of(r)),
        ..lab_host::summary(r.server.window_s, "half-close does not measure this host's CPU")
    };
    let target = Target {
        to,
        host: &r.target_host,
        lab: &r.lab,
    };
    let config = target.config(spec, &crate::kind::Def(HalfClose));
    let mut warnings = Vec::new();
    if r.connect_failures > 0 || r.request_failures > 0 {
        warnings.push(format!(
            "{} connection(s) failed to open and {} were cut short by the server (the first: {})",
            r.connect_failures,
            r.request_failures,
            r.first_error.as_deref().unwrap_or("not kept")
        ));
    }
    TestResult {
        warnings,
        started_unix_s: Some(r.started_unix_s),
        ..target.result("half-close", config, summary)
    }
}

/// half-close's options in the result's config.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct HalfCloseConfig {
    /// The request's bytes each client sends before it goes away.
    pub request_size: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_given_on_the_command_line_takes_escapes() {
        assert_eq!(unescape("GET / HTTP/1.0\\r\\n\\r\\n"), "GET / HTTP/1.0\r\n\r\n");
        assert_eq!(unescape("a\\\\b"), "a\\b");
    }
}
