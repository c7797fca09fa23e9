//! One iperf3 client's test, from its cookie to IPERF_DONE: the control
//! flow of iperf3's server (iperf_server_api.c) around a netrig run, every
//! wait bounded: the parameters by the greeting's timeout, each stream by
//! [`super::streams::STREAM_STALL`], the test by its length, warm-up and
//! [`translate::END_GRACE`], the results exchange by [`EXCHANGE_WAIT`].

use super::results::{results, Described};
use super::streams::{gather, Arrivals};
use super::translate::{self, refusal_of, Refusal, Translated};
use crate::peer::{canonical_ip, client_key};
use crate::shared::Shared;
use netrig_engine::runner::{run_side, RunControl, RunPlan, SideFlows, SideOutcome};
use netrig_engine::FlowSocket;
use netrig_kinds::Workloads;
use netrig_proto::iperf3::{
    errors, server_codes as codes, Control, Cookie, Iperf3Error, Params, Results, ServerAction,
    ServerMachine, State, MAX_PARAMS_JSON, MAX_RESULTS_JSON,
};
use netrig_proto::spec::Limit;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the agent waits for the client's results and its IPERF_DONE,
/// and for a write to the control connection to be taken.
const EXCHANGE_WAIT: Duration = Duration::from_secs(10);
/// How often the agent looks at the control connection during the test.
const POLL: Duration = Duration::from_millis(100);
/// Receivers read on for this long after TEST_END, uncounted: the client
/// keeps its streams open until the results are shown, so a drain until
/// their end of file would hold the results back for the whole drain.
const DRAIN: Duration = Duration::from_millis(250);

/// Why a session ended early: iperf3's error number for the client (none
/// when the client went away or gave up), and netrig's reason for the log.
struct Ended {
    code: Option<i32>,
    why: String,
}

impl From<Refusal> for Ended {
    fn from(r: Refusal) -> Ended {
        Ended {
            code: Some(r.code),
            why: r.why,
        }
    }
}

/// The control connection failed: nothing more to tell the client.
fn gone(e: Iperf3Error, during: &str) -> Ended {
    Ended {
        code: None,
        why: format!("iperf3 client, during {during}: {e}"),
    }
}

/// Serves one iperf3 client whose control connection opened with `cookie`
/// (read by the accept loop); `pre`: its place among the connections not
/// yet in a session, held until its parameters are in.
pub(crate) fn serve(
    stream: TcpStream,
    cookie: Cookie,
    peer: SocketAddr,
    shared: Arc<Shared>,
    pre: crate::admission::PreSlot,
) {
    let who = format!("{peer} (iperf3)");
    shared.metrics.iperf3_session();
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(EXCHANGE_WAIT));
    let mut s = Session {
        ctl: Control::new(stream),
        sm: ServerMachine::new(),
        shared: &shared,
        who: &who,
        cookie,
        peer,
    };
    if let Err(e) = s.run(pre) {
        if let Some(code) = e.code {
            // The client reads its error in place of the next state.
            let _ = s.sm.send(State::ServerError);
            let _ = s.ctl.write_server_error(code, 0);
            log::info!("{who}: refused: {} (told: {})", e.why, errors::describe(code));
        } else {
            log::warn!("{who}: session ended: {}", e.why);
        }
    }
}

struct Session<'a> {
    ctl: Control<TcpStream>,
    sm: ServerMachine,
    shared: &'a Arc<Shared>,
    who: &'a str,
    cookie: Cookie,
    peer: SocketAddr,
}

impl Session<'_> {
    fn send(&mut self, s: State) -> Result<(), Ended> {
        self.sm.send(s).map_err(|e| gone(e, "its own order"))?;
        self.ctl.write_state(s).map_err(|e| gone(e, s.name()))
    }

    fn run(&mut self, pre: crate::admission::PreSlot) -> Result<(), Ended> {
        let p = self.params()?;
        let t = self
            .admit(&p)
            .inspect_err(|_| self.shared.metrics.refused(crate::metrics::Refusal::Iperf3))?;
        // Now, and only now, a session place (as a netrig client's after its hello).
        let shared = self.shared;
        let handle = self
            .ctl
            .get_ref()
            .try_clone()
            .map_err(|e| Ended::from(Refusal::new(codes::IEINITTEST, format!("control socket: {e}"))))?;
        let caps = (
            shared.config.limits.max_sessions as usize,
            shared.config.max_sessions_per_client,
        );
        let key = client_key(self.peer.ip());
        let admission = match crate::admission::take_slot(&shared.slots, caps, key, false, handle) {
            Ok((a, _)) => a,
            Err(reason) => {
                shared.metrics.refused(crate::metrics::Refusal::Busy);
                log::info!("{}: refused: {reason}", self.who);
                let _ = self.send(State::AccessDenied);
                return Ok(());
            }
        };
        drop(pre);
        // Busy from the start: never an idle session to close for room.
        let _ = admission.set_idle(false);
        log::info!(
            "{}: iperf3 client {}: {} {} stream(s), {}",
            self.who,
            p.client_version.as_deref().unwrap_or("(version not said)"),
            t.spec.kind(),
            t.spec.connections(),
            match t.spec.limit {
                Limit::Duration { .. } => format!("{} s after {} s of warm-up", p.time, p.omit),
                Limit::Bytes { bytes } => format!("{bytes} bytes"),
            }
        );
        for n in &t.notes {
            log::info!("{}: {n}", self.who);
        }
        let tested = self.test(&t);
        let flows = tested
            .iter()
            .flat_map(|(o, ..)| o.flows.iter().map(|f| (f.role, f.total_bytes)));
        shared.metrics.test(t.spec.kind(), tested.is_ok(), flows);
        let (outcome, addresses, congestion) = tested?;
        self.exchange(&p, &t, &outcome, addresses, congestion)
    }

    /// PARAM_EXCHANGE, and the client's parameters within the greeting's
    /// timeout, checked against iperf3's own limits.
    fn params(&mut self) -> Result<Params, Ended> {
        self.send(State::ParamExchange)?;
        let wait = self.shared.config.greeting_timeout;
        let _ = self.ctl.get_ref().set_read_timeout(Some(wait));
        let json = self.ctl.read_json(MAX_PARAMS_JSON).map_err(|e| Ended {
            code: Some(errors::IERECVPARAMS),
            why: if e.is_timeout() {
                format!(
                    "no whole parameters within {} s of PARAM_EXCHANGE (the agent's greeting timeout)",
                    wait.as_secs_f64()
                )
            } else {
                format!("its parameters: {e}")
            },
        })?;
        let p = Params::decode(&json).map_err(|e| Ended {
            code: Some(e.iperf3_code()),
            why: format!("its parameters: {e}"),
        })?;
        p.check().map_err(|e| Ended {
            code: Some(e.iperf3_code()),
            why: format!("its parameters: {e}"),
        })?;
        Ok(p)
    }

    /// Whether the agent serves this client's test: its authentication,
    /// then the test against the agent's caps and its host, as a netrig
    /// client's would be judged.
    fn admit(&self, p: &Params) -> Result<Translated, Ended> {
        let config = &self.shared.config;
        if p.authtoken.is_some() {
            return Err(Refusal::new(
                errors::IEAUTHTEST,
                "the client sent an RSA authentication token (iperf3 --username): netrig does not implement \
                 iperf3's RSA scheme (its clients authenticate with netrig's own keys)",
            )
            .into());
        }
        if config.auth.required() && !config.iperf3_unauthenticated {
            return Err(Refusal::new(
                errors::IEAUTHTEST,
                "this agent serves only clients that authenticate (its --authorized-keys), and an iperf3 client \
                 cannot: start it with --iperf3 to serve iperf3 clients unauthenticated",
            )
            .into());
        }
        let t = translate::translate(p, config.limits.max_duration_s, config.limits.max_workers)?;
        t.spec
            .validate(&config.limits)
            .map_err(|e| Ended::from(refusal_of(&e)))?;
        let share = crate::session::share_of(&t.spec);
        self.shared
            .budget
            .check(share)
            .map_err(|why| Refusal::new(errors::IEACCESSDENIED, why))?;
        crate::session::host_can_run(&t.spec, &config.limits)
            .map_err(|why| Refusal::new(codes::IEINITTEST, why))?;
        Ok(t)
    }

    /// The streams, then the run from TEST_START to the client's TEST_END.
    fn test(&mut self, t: &Translated) -> Result<(SideOutcome, Vec<String>, Option<String>), Ended> {
        let shared = self.shared;
        let control_ip = canonical_ip(self.peer.ip());
        let expected = t.spec.connections() as usize;
        let routes = &shared.iperf3;
        let udp = t.spec.rules().transport().datagrams();
        let (_expecting, arrivals) = if udp {
            let (e, rx) = routes
                .expect_udp(*self.cookie.as_bytes(), control_ip, expected.max(1))
                .map_err(|why| Refusal::new(errors::IEACCESSDENIED, why))?;
            (e, Arrivals::Udp(rx))
        } else {
            let (e, rx) = routes.expect_tcp(*self.cookie.as_bytes(), control_ip, expected.max(1));
            (e, Arrivals::Tcp(rx))
        };
        self.send(State::CreateStreams)?;
        let got = gather(&t.spec, &arrivals, t.bytes)?;
        drop(_expecting);
        let _reservation = shared
            .budget
            .reserve(crate::session::share_of(&t.spec))
            .map_err(|why| Refusal::new(errors::IEACCESSDENIED, format!("the test cannot start: {why}")))?;
        let Workloads::Connected(workload) = netrig_kinds::of(&t.spec).workload(&t.spec) else {
            return Err(Refusal::new(codes::IEINITTEST, "a kind without set-up connections").into());
        };
        self.send(State::TestStart)?;
        self.send(State::TestRunning)?;
        let start = Instant::now();
        let mut plan = RunPlan::for_spec(&t.spec, start, 0);
        plan.limit = Limit::Duration {
            seconds: t.bound.as_secs_f64(),
        };
        plan.omit = t.omit;
        plan.interval = Some(Duration::from_secs(1));
        plan.drain = DRAIN;
        plan.cpus = t.spec.remote_cpus.clone();
        plan.cpus_option = "iperf3 -A's server CPU";
        plan.send_cap_bps = shared.config.limits.max_rate_bps;
        let ctl = RunControl::new();
        ctl.expect_finish();
        let ctl2 = ctl.clone();
        let receivers: Vec<_> = got
            .flows
            .iter()
            .filter(|f| f.role == netrig_proto::report::Role::Receiver)
            .map(|f| f.socket.clone())
            .collect();
        let flows = SideFlows::Connected {
            workload,
            flows: got.flows,
        };
        let engine = std::thread::Builder::new()
            .name("netrig-iperf3-run".into())
            .spawn(move || run_side(flows, &plan, &ctl2, &mut |_| {}))
            .map_err(|e| Refusal::new(codes::IEINITTEST, format!("cannot start the test thread: {e}")))?;
        let watched = self.watch(&ctl, &engine, (start, t.bound), &receivers);
        let outcome = match engine.join() {
            Ok(Ok(o)) => Ok(o),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the test thread panicked".into()),
        };
        watched?;
        let outcome = match outcome {
            // The run reached its bound: the client never said TEST_END.
            Ok(_) if !ctl.finishing() => {
                return Err(Ended {
                    code: Some(errors::IESERVERTESTDURATIONEXPIRED),
                    why: format!(
                        "no TEST_END within {} s (the test's length, warm-up and {} s of grace)",
                        t.bound.as_secs(),
                        translate::END_GRACE.as_secs()
                    ),
                })
            }
            Ok(o) => o,
            Err(why) => {
                return Err(Ended {
                    code: Some(errors::IESTREAMREAD),
                    why,
                })
            }
        };
        Ok((outcome, got.addresses, got.congestion))
    }

    /// The control connection while the test runs: TEST_END finishes the
    /// run's window (the client decides the end); CLIENT_TERMINATE, a
    /// closed connection, anything out of order or no TEST_END within the
    /// run's bound stops it.
    fn watch(
        &mut self,
        ctl: &RunControl,
        engine: &std::thread::JoinHandle<Result<SideOutcome, netrig_engine::EngineError>>,
        (start, bound): (Instant, Duration),
        receivers: &[Arc<FlowSocket>],
    ) -> Result<(), Ended> {
        let _ = self.ctl.get_ref().set_read_timeout(Some(POLL));
        loop {
            // TEST_END came, or the run ended by itself (its bound, a
            // failure): the caller tells which.
            if ctl.finishing() || engine.is_finished() {
                return Ok(());
            }
            let state = match self.ctl.read_state() {
                Ok(s) => s,
                Err(e) if e.is_timeout() => {
                    if start.elapsed() > bound + Duration::from_secs(5) {
                        ctl.abort("the test overran its bound");
                    }
                    continue;
                }
                Err(e) => {
                    ctl.abort("the iperf3 client's control connection failed");
                    return Err(gone(e, "the test"));
                }
            };
            match self.sm.on_client_state(state) {
                Ok(ServerAction::EndTest) => {
                    settle(receivers);
                    ctl.finish()
                }
                Ok(ServerAction::Ignore) => {}
                Ok(ServerAction::ClientTerminated) => {
                    ctl.abort("the iperf3 client terminated the test");
                    return Err(Ended {
                        code: None,
                        why: "the client terminated the test (CLIENT_TERMINATE)".into(),
                    });
                }
                Ok(ServerAction::Done) | Err(_) => {
                    ctl.abort("the iperf3 client broke the protocol");
                    return Err(Ended {
                        code: Some(errors::IEMESSAGE),
                        why: format!("iperf3 state {} during the test", state.name()),
                    });
                }
            }
        }
    }

    /// EXCHANGE_RESULTS: the client's results (read, bounded, and only
    /// logged), the agent's, DISPLAY_RESULTS, and the client's IPERF_DONE.
    fn exchange(
        &mut self,
        p: &Params,
        t: &Translated,
        outcome: &SideOutcome,
        addresses: Vec<String>,
        congestion: Option<String>,
    ) -> Result<(), Ended> {
        let _ = self.ctl.get_ref().set_read_timeout(Some(EXCHANGE_WAIT));
        self.send(State::ExchangeResults)?;
        let json = self.ctl.read_json(MAX_RESULTS_JSON).map_err(|e| Ended {
            code: Some(errors::IERECVRESULTS),
            why: format!("its results: {e}"),
        })?;
        // The client's figures are only logged beside the agent's: results
        // the agent cannot read (an older iperf3's) do not stop the test.
        let theirs = Results::decode(&json)
            .inspect_err(|e| log::info!("{}: its results are not read: {e}", self.who))
            .ok();
        let udp = t.spec.rules().transport().datagrams();
        let ours = results(
            outcome,
            &Described {
                addresses: &addresses,
                udp,
                congestion,
                server_output: p.get_server_output,
            },
        );
        self.ctl
            .write_json(&ours.encode())
            .map_err(|e| gone(e, "the results exchange"))?;
        self.send(State::DisplayResults)?;
        log_figures(self.who, outcome, &ours, theirs.as_ref());
        match self.ctl.read_state() {
            Ok(s) => match self.sm.on_client_state(s) {
                Ok(ServerAction::Done) => Ok(()),
                _ => Err(Ended {
                    code: None,
                    why: format!("iperf3 state {} where IPERF_DONE was due", s.name()),
                }),
            },
            Err(e) => Err(gone(e, "the wait for IPERF_DONE")),
        }
    }
}

/// How long the agent's receivers may go on reading, into the window, what
/// the client sent before its TEST_END.
const SETTLE: Duration = Duration::from_millis(200);

/// Waits until the agent's receive queues are empty (twice, 1 ms apart), or
/// [`SETTLE`] has passed: what the client sent before it said TEST_END is
/// then in the window, as its own count of what it sent is (iperf3's
/// server closes its streams at once, and leaves it out).
fn settle(receivers: &[Arc<FlowSocket>]) {
    let until = Instant::now() + SETTLE;
    let mut empty = 0;
    while empty < 2 && Instant::now() < until {
        let waiting = receivers
            .iter()
            .any(|s| netrig_metrics::witness::socket_queue(s.as_fd(), false).unwrap_or(0) > 0);
        empty = if waiting { 0 } else { empty + 1 };
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The test's figures in the agent's log: each stream's bytes as the agent
/// counted them, beside what the client said it counted.
fn log_figures(who: &str, outcome: &SideOutcome, ours: &Results, theirs: Option<&Results>) {
    for (s, f) in ours.streams.iter().zip(&outcome.flows) {
        let client = theirs
            .iter()
            .flat_map(|t| &t.streams)
            .find(|c| c.id == s.id)
            .map_or("none".to_string(), |c| c.bytes.to_string());
        log::info!(
            "{who}: stream {} ({}): the agent {} {} bytes in {:.3} s after the warm-up (the client says {client})",
            s.id,
            f.direction.name(),
            if f.role == netrig_proto::report::Role::Sender {
                "sent"
            } else {
                "received"
            },
            s.bytes,
            f.window_s
        );
    }
}
