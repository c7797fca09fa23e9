//! netrig's client against an iperf3 server (`iperf3 -s`): `--peer iperf3`,
//! or `--peer auto` when the server answered as iperf3 does ([`detect`]).
//!
//! The control connection speaks iperf3's protocol (netrig_proto::iperf3:
//! cookie, parameters, states, results), every wait bounded
//! ([`control`]); the data connections are made as iperf3's client makes
//! them ([`streams`]); and this end runs on netrig's engine exactly as
//! against an agent: its CPU, TCP_INFO, intervals and witness are netrig's
//! measurements. The server's figures come back in the results exchange and
//! become the result's remote end, marked as the server's report
//! ([`figures`]); what iperf3 does not report is withheld, saying so. An
//! option that cannot be asked of an iperf3 server is refused, naming it
//! and why ([`params`]).

mod control;
pub mod detect;
mod figures;
mod params;
mod streams;

pub use detect::Detected;

use crate::link::{connect_socket, shown, ClientOptions, Measured};
use crate::ClientError;
use control::{Ctl, Watch, FAILED, OVER, STEP_WAIT};
use netrig_engine::runner::{run_side, RunPlan, SideFlows, SideOutcome};
use netrig_engine::RunControl;
use netrig_kinds::Workloads;
use netrig_proto::clock::ClockCheck;
use netrig_proto::iperf3::{ClientAction, Cookie, Results, State, COOKIE_LEN, MAX_RESULTS_JSON};
use netrig_proto::report::{BufPair, CounterReport, IntervalSample};
use netrig_proto::spec::{Limit, Transport};
use netrig_proto::TestSpec;
use netrig_report::model::peer::Chosen;
use netrig_report::{
    assemble, merge_interval, AgentInfo, IntervalResult, NewConfig, RunInfo, Side, TestConfig, TestResult,
};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long this end's receivers read on after the window closes against
/// an iperf3 server, which sends until it reads TEST_END and closes its
/// streams only after the results: what is in flight, not the agent's 10 s.
const DRAIN: Duration = Duration::from_millis(300);

/// How the client came to speak iperf3.
pub enum How {
    /// `--peer iperf3`: connect and send a fresh cookie.
    Asked,
    /// `--peer auto` found an iperf3 server on this connection.
    Detected(Detected),
}

/// Runs `spec` against the iperf3 server at the first of `addrs` that
/// answers (or the one `how` found), calling `observer` with each interval
/// of this end's: the result, its remote end the server's report.
pub fn run(
    addrs: &[SocketAddr],
    opts: &ClientOptions,
    how: How,
    spec: &TestSpec,
    ctl: Arc<RunControl>,
    observer: &mut dyn FnMut(&IntervalResult),
) -> Result<TestResult, ClientError> {
    let kind = netrig_kinds::of(spec);
    // udp-stream without -m: its datagrams sized for the path, as against an agent.
    let first = match &how {
        How::Detected(d) => Some(d.addr),
        How::Asked => addrs.first().copied(),
    };
    let sized = first
        .filter(|_| opts.udp_size_default)
        .and_then(|a| kind.fit_to_path(spec, crate::link::default_udp_size(a, opts.bind)));
    let spec = &params::iperf3_spec(sized.as_ref().unwrap_or(spec));
    let params = params::of(spec, opts.server_output)?;
    opts.local
        .validate("-s/--local-sockbuf")
        .map_err(|e| ClientError::Option(e.to_string()))?;
    netrig_engine::transport::check_kernel(spec.rules().transport(), "client")
        .map_err(ClientError::Option)?;
    let (mut c, cookie, chosen) = match how {
        How::Detected(d) => {
            let mut c = Ctl::new(d.stream, d.addr);
            c.on_state(State::ParamExchange, None)?;
            (c, d.cookie, Chosen::Detected)
        }
        How::Asked => {
            let (c, cookie) = connect(addrs, opts)?;
            (c, cookie, Chosen::Asked)
        }
    };
    c.control
        .write_json(&params.encode())
        .map_err(|e| c.failed(e, "its parameters to be taken"))?;
    Test {
        spec,
        opts,
        shape: params::Shape::of(spec),
        cookie,
        chosen,
        sized: sized.is_some(),
    }
    .run(c, ctl, observer)
}

impl Test<'_> {
    /// Runs the test on `c`; a failure of this end before the results tells
    /// the server so (CLIENT_TERMINATE, as iperf3's client), rather than
    /// leaving it to time out.
    fn run(
        self,
        mut c: Ctl,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, ClientError> {
        let result = self.steps(&mut c, ctl, observer);
        if result.is_err() {
            c.terminate();
        }
        result
    }
}

/// Connects to the first address that answers and sends a fresh cookie:
/// the control connection once the server asked for the parameters.
fn connect(addrs: &[SocketAddr], opts: &ClientOptions) -> Result<(Ctl, [u8; COOKIE_LEN]), ClientError> {
    let mut last = None;
    for &addr in addrs {
        let mut stream = match connect_socket(addr, opts, Transport::Tcp, |_| Ok(())) {
            Ok(s) => s,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let cookie = *Cookie::random().as_bytes();
        stream
            .write_all(&cookie)
            .map_err(|error| ClientError::Connect { addr, error })?;
        let mut c = Ctl::new(stream, addr);
        let _ = c.control.get_ref().set_read_timeout(Some(STEP_WAIT));
        // A peer that does not answer the cookie with a state is no iperf3 server.
        let state = c.control.read_state().map_err(|e| ClientError::Iperf3 {
            addr,
            what: format!(
                "did not answer netrig's cookie as an iperf3 server does ({}): check -H and -p, or leave --peer out \
                 to find out what answers there",
                if e.is_timeout() {
                    format!("nothing within {} s", STEP_WAIT.as_secs())
                } else {
                    e.to_string()
                }
            ),
        })?;
        match c.on_state(state, None)? {
            ClientAction::SendParams => return Ok((c, cookie)),
            other => return Err(c.out_of_order(other)),
        }
    }
    Err(last.unwrap_or_else(|| ClientError::Option("no address to connect to".into())))
}

/// One test against an iperf3 server.
struct Test<'t> {
    spec: &'t TestSpec,
    opts: &'t ClientOptions,
    shape: params::Shape,
    cookie: [u8; COOKIE_LEN],
    chosen: Chosen,
    /// udp-stream's datagrams were sized for the path (no `-m`).
    sized: bool,
}

/// This end's run: what it measured and its interval samples.
struct LocalRun {
    outcome: SideOutcome,
    samples: Vec<IntervalSample>,
}

impl Test<'_> {
    /// The test's steps after the parameters: the streams, the run, the
    /// results exchange, the result.
    fn steps(
        &self,
        c: &mut Ctl,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, ClientError> {
        let spec = self.spec;
        let environment = netrig_proto::report::measure::Environment::from(&netrig_metrics::collect());
        let counters_before = netrig_metrics::read_kernel_counters().ok();
        let requested = BufPair {
            snd: self.opts.local.sndbuf,
            rcv: self.opts.local.rcvbuf,
        };
        let expect = |c: &mut Ctl, want: ClientAction, waiting: &str| match c.next(waiting)? {
            got if got == want => Ok(()),
            got => Err(c.out_of_order(got)),
        };
        expect(c, ClientAction::CreateStreams, "CREATE_STREAMS")?;
        let opened = streams::open(c.addr, self.opts, spec, &self.cookie, requested)?;
        expect(c, ClientAction::StartTest, "TEST_START")?;
        expect(c, ClientAction::Running, "TEST_RUNNING")?;
        let started_wall = std::time::SystemTime::now();
        let local = self.run_local(c, opened.flows, &ctl, observer)?;
        let theirs = self.exchange(c, &local.outcome, &opened.stream_ids)?;
        let counters = match (counters_before, netrig_metrics::read_kernel_counters()) {
            (Some(b), Ok(a)) => Some(CounterReport::between(&b, &a, netrig_metrics::read_conntrack())),
            _ => None,
        };
        let local_report = Measured {
            outcome: &local.outcome,
            requested,
            setup_info: &opened.setup_info,
            counters,
            environment,
        }
        .report(
            spec,
            ClockCheck::NotShared("the server is iperf3, whose clock netrig does not read".into()),
        );
        let remote_report = figures::remote_report(spec, c.addr, &theirs, &opened.stream_ids)?;
        let kind = netrig_kinds::of(spec);
        let mut config = TestConfig::new(spec, kind.report(), self.run_info(c.addr));
        if self.sized {
            config.set_kind_part(&netrig_kinds::UdpStreamConfig {
                message_size_default: Some(true),
                ..config.kind_part().unwrap_or_default()
            });
        }
        let plan = spec.flow_plan();
        let sent = figures::sent_intervals(&plan, &local.samples);
        let agent = AgentInfo {
            address: c.addr.to_string(),
            software: "iperf3".into(),
            protocol_version: 0,
        };
        let mut result = assemble(
            spec,
            kind.report(),
            config,
            agent,
            Side {
                report: &local_report,
                intervals: &local.samples,
            },
            Side {
                report: &remote_report,
                intervals: &sent,
            },
            opened.warnings,
        )
        .map_err(ClientError::Test)?;
        result.started_unix_s = started_wall
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs_f64());
        figures::mark(&mut result, theirs, &opened.stream_ids, self.chosen);
        Ok(result)
    }

    /// Runs this end's flows on the engine while the watch sends TEST_END
    /// as the window closes (or the count is done).
    fn run_local(
        &self,
        c: &mut Ctl,
        flows: Vec<netrig_engine::Flow>,
        ctl: &Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<LocalRun, ClientError> {
        let spec = self.spec;
        let start = Instant::now();
        let mut plan = RunPlan::for_spec(spec, start, 0);
        plan.cpus = self.opts.cpus.clone();
        plan.drain = DRAIN;
        let workload = match netrig_kinds::of(spec).workload(spec) {
            Workloads::Connected(w) => w,
            Workloads::Transient(_) => {
                return Err(ClientError::Option(format!(
                    "--peer iperf3: {} opens a connection per transaction, which iperf3 has not",
                    spec.kind()
                )))
            }
        };
        let local = Arc::new(AtomicU8::new(control::RUNNING));
        let senders = flows
            .iter()
            .filter(|f| f.role == netrig_proto::report::Role::Sender)
            .filter_map(|f| f.socket.tcp().ok()?.try_clone().ok())
            .collect();
        let watch = Watch {
            stream: c.control.get_ref().try_clone().map_err(crate::link::proto_err)?,
            addr: c.addr,
            // A UDP sender's datagrams after the window would meet the
            // server's closed socket: TEST_END once they have stopped.
            end_at: match spec.limit {
                Limit::Duration { .. } if self.shape.udp && !self.shape.server_sends => None,
                Limit::Duration { seconds } => Some(start + Duration::from_secs_f64(seconds)),
                Limit::Bytes { .. } => None,
            },
            senders,
            local: local.clone(),
            ctl: ctl.clone(),
        };
        let watcher = std::thread::Builder::new()
            .name("netrig-iperf3".into())
            .spawn(move || watch.run())
            .map_err(|e| ClientError::Test(format!("cannot start the control watch: {e}")))?;
        let flow_plan = spec.flow_plan();
        let mut samples = Vec::new();
        let outcome = run_side(SideFlows::Connected { workload, flows }, &plan, ctl, &mut |s| {
            samples.push(s.clone());
            let theirs = figures::sent_only(&flow_plan, s);
            if let Some(m) = merge_interval(&flow_plan, false, s.index, Some(s), Some(&theirs)) {
                observer(&m);
            }
        });
        local.store(if outcome.is_ok() { OVER } else { FAILED }, Ordering::Relaxed);
        let answer = watcher
            .join()
            .map_err(|_| ClientError::Test("the control watch failed".into()))?;
        let outcome = match (outcome, answer) {
            (Ok(o), Ok(a)) if a.ended => {
                c.machine
                    .send(State::TestEnd)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                c.on_state(a.state, a.error).and_then(|got| match got {
                    ClientAction::ExchangeResults => Ok(o),
                    got => Err(c.out_of_order(got)),
                })?
            }
            // The server spoke first: its error says why the run stopped.
            (_, Ok(a)) if !a.ended && a.state != State::ClientTerminate => {
                return Err(c.on_state(a.state, a.error).err().unwrap_or_else(|| {
                    ClientError::Test(format!(
                        "the iperf3 server at {} sent {} during the test",
                        c.addr,
                        a.state.name()
                    ))
                }))
            }
            (_, Err(e)) => return Err(e),
            (Err(e), _) => return Err(ClientError::Test(e.to_string())),
            (Ok(_), Ok(_)) => return Err(ClientError::Test("the test was stopped".into())),
        };
        Ok(LocalRun { outcome, samples })
    }

    /// The results exchange: this end's first, then the server's (bounded),
    /// DISPLAY_RESULTS and IPERF_DONE.
    fn exchange(
        &self,
        c: &mut Ctl,
        outcome: &SideOutcome,
        stream_ids: &std::collections::BTreeMap<u32, i32>,
    ) -> Result<Results, ClientError> {
        let ours = figures::ours(outcome, stream_ids, self.shape);
        let _ = c.control.get_ref().set_write_timeout(Some(STEP_WAIT));
        c.control
            .write_json(&ours.encode())
            .map_err(|e| c.failed(e, "its results to be taken"))?;
        let _ = c.control.get_ref().set_read_timeout(Some(STEP_WAIT));
        let json = c
            .control
            .read_json(MAX_RESULTS_JSON)
            .map_err(|e| c.failed(e, "its results"))?;
        let theirs = Results::decode(&json).map_err(|e| ClientError::Iperf3 {
            addr: c.addr,
            what: format!("sent results netrig cannot read: {e}"),
        })?;
        match c.next("DISPLAY_RESULTS")? {
            ClientAction::Display => c.send(State::IperfDone)?,
            got => return Err(c.out_of_order(got)),
        }
        c.close();
        Ok(theirs)
    }

    /// How the test was run, as the result says it.
    fn run_info(&self, addr: SocketAddr) -> RunInfo {
        let o = self.opts;
        RunInfo {
            host: o.host.clone(),
            port: addr.port(),
            cpus: o.cpus.clone(),
            bind: o.bind.map(|b| b.to_string()),
            family: o.family.name().map(str::to_string),
            local: shown(&o.local),
            remote: shown(&netrig_engine::sockopt::SocketSettings::new(
                &self.spec.remote,
                self.spec.rules().tcp(),
            )),
        }
    }
}
