//! Session state machines for both ends. They hold no sockets and read no
//! clock: the caller passes each message and the current time, and the
//! machine says what it means or why it is not allowed now.

use crate::message::{AgentLimits, AgentMsg, ClientMsg};
use crate::{ProtoError, TestSpec};
use std::time::{Duration, Instant};

/// What a client message means to the agent.
#[derive(Debug, Clone, PartialEq)]
// One per test on the control connection: a boxed spec would save nothing that matters.
#[allow(clippy::large_enum_variant)]
pub enum AgentEvent {
    /// Handshake finished; the agent checks `auth` (see [`crate::auth::AgentAuth::on_hello`]).
    Hello {
        software: String,
        auth: crate::auth::HelloAuth,
    },
    /// A valid spec: set the test up (generate a cookie, await data connections).
    TestRequested(TestSpec),
    /// A spec that breaks a limit: tell the client, stay idle.
    TestInvalid(String),
    /// Start measuring.
    Go,
    /// Stop the running test.
    Abort(String),
    /// Close the session.
    Bye,
    /// Protocol 6: start watching the host (the session was idle).
    WatchStart,
    /// Protocol 6: end the watch and answer with the host's view.
    WatchEnd,
    /// Protocol 6: a watch the agent will not start (one runs in this
    /// session already): answer `watch_rejected`, the running one goes on.
    WatchRefused(String),
    /// Protocol 7: answer `clock_echo` with this `seq` and the clock's
    /// readings, at once.
    ClockProbe { seq: u32 },
    /// Protocol 8: run this test as a client against another agent (the session was idle;
    /// the spec is within the agent's limits).
    Initiate(crate::initiate::InitiateRequest),
    /// Protocol 8: an `initiate` whose spec breaks a limit: answer `initiate_rejected`, stay idle.
    InitiateInvalid(String),
}

#[derive(Debug, Clone, PartialEq)]
enum AgentState {
    AwaitHello,
    Idle,
    AwaitData {
        expected: u64,
        seen: Vec<bool>,
        arrived: u64,
    },
    AwaitGo,
    Running,
    /// Protocol 6: a watch of the host runs (no deadline of the machine's:
    /// the agent bounds it by its limit and the client's silence).
    Watching,
    /// Protocol 8: running a test as a client for the asker (bounded by the agent: the
    /// test's length and its set-up, and the asker's heartbeats).
    Initiating,
    Closed,
}

impl AgentState {
    fn name(&self) -> &'static str {
        match self {
            AgentState::AwaitHello => "awaiting hello",
            AgentState::Idle => "idle",
            AgentState::AwaitData { .. } => "awaiting data connections",
            AgentState::AwaitGo => "awaiting go",
            AgentState::Running => "running a test",
            AgentState::Watching => "watching the host",
            AgentState::Initiating => "running a test as a client (initiate)",
            AgentState::Closed => "closed",
        }
    }
}

/// The agent's view of one control session.
#[derive(Debug)]
pub struct AgentSession {
    state: AgentState,
    limits: AgentLimits,
    deadline: Option<Instant>,
    /// `clock_probe`s answered since the last test request.
    probes: u32,
}

impl AgentSession {
    /// A session whose client has sent a matching preamble at `now`.
    pub fn new(limits: AgentLimits, now: Instant) -> Self {
        let mut s = AgentSession {
            state: AgentState::AwaitHello,
            limits,
            deadline: None,
            probes: 0,
        };
        s.deadline = Some(now + s.setup_timeout());
        s
    }

    fn setup_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.setup_timeout_s)
    }

    pub fn state_name(&self) -> &'static str {
        self.state.name()
    }

    pub fn is_running(&self) -> bool {
        self.state == AgentState::Running
    }

    /// Between tests: hello done, no test set up or running, no watch.
    pub fn is_idle(&self) -> bool {
        self.state == AgentState::Idle
    }

    /// The initiated test is over (its result or why not sent): idle again.
    pub fn end_initiate(&mut self) {
        if self.state == AgentState::Initiating {
            self.state = AgentState::Idle;
        }
    }

    /// A watch of the host runs (protocol 6).
    pub fn is_watching(&self) -> bool {
        self.state == AgentState::Watching
    }

    /// When the current step must be done by, if it has a deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Handles one message from the client.
    pub fn on_client(&mut self, msg: ClientMsg, now: Instant) -> Result<AgentEvent, ProtoError> {
        let unexpected = |s: &AgentState, m: &ClientMsg| ProtoError::Unexpected {
            got: m.name(),
            state: s.name(),
        };
        match (&self.state, msg) {
            (AgentState::Closed, m) => Err(unexpected(&self.state, &m)),
            (_, ClientMsg::Bye) => {
                self.state = AgentState::Closed;
                self.deadline = None;
                Ok(AgentEvent::Bye)
            }
            (AgentState::AwaitHello, ClientMsg::Hello { software, auth }) => {
                self.state = AgentState::Idle;
                self.deadline = None;
                Ok(AgentEvent::Hello { software, auth })
            }
            (AgentState::Idle, ClientMsg::ClockProbe { seq }) => {
                self.probes += 1;
                if self.probes > crate::clock::MAX_PROBES_PER_TEST {
                    self.state = AgentState::Closed;
                    return Err(ProtoError::Violation(format!(
                        "more than {} clock_probe messages between two test requests (the agent's limit)",
                        crate::clock::MAX_PROBES_PER_TEST
                    )));
                }
                Ok(AgentEvent::ClockProbe { seq })
            }
            (AgentState::Idle, ClientMsg::TestRequest { spec, .. }) => match spec.validate(&self.limits) {
                Ok(()) => {
                    self.probes = 0;
                    let expected = spec.connections();
                    // A connection-per-transaction test has none to wait for.
                    self.state = if expected == 0 {
                        AgentState::AwaitGo
                    } else {
                        AgentState::AwaitData {
                            expected,
                            seen: vec![false; expected as usize],
                            arrived: 0,
                        }
                    };
                    self.deadline = Some(now + self.setup_timeout());
                    Ok(AgentEvent::TestRequested(spec))
                }
                Err(e) => Ok(AgentEvent::TestInvalid(e.to_string())),
            },
            (
                AgentState::AwaitData { .. } | AgentState::AwaitGo | AgentState::Running,
                ClientMsg::Abort { reason },
            ) => {
                self.state = AgentState::Idle;
                self.deadline = None;
                Ok(AgentEvent::Abort(reason))
            }
            (AgentState::Idle, ClientMsg::Initiate { request, .. }) => {
                match request.spec.validate(&self.limits) {
                    Ok(()) => {
                        self.probes = 0;
                        self.state = AgentState::Initiating;
                        self.deadline = None;
                        Ok(AgentEvent::Initiate(request))
                    }
                    Err(e) => Ok(AgentEvent::InitiateInvalid(e.to_string())),
                }
            }
            (AgentState::Initiating, ClientMsg::Abort { reason }) => {
                self.state = AgentState::Idle;
                Ok(AgentEvent::Abort(reason))
            }
            (AgentState::Idle, ClientMsg::WatchStart) => {
                self.state = AgentState::Watching;
                self.deadline = None;
                Ok(AgentEvent::WatchStart)
            }
            (AgentState::Watching, ClientMsg::WatchStart) => Ok(AgentEvent::WatchRefused(
                "a watch runs in this session already: one at a time (end it with watch_end)".into(),
            )),
            (AgentState::Watching, ClientMsg::WatchEnd) => {
                self.state = AgentState::Idle;
                Ok(AgentEvent::WatchEnd)
            }
            (AgentState::Watching, ClientMsg::Abort { reason }) => {
                self.state = AgentState::Idle;
                Ok(AgentEvent::Abort(reason))
            }
            (AgentState::AwaitGo, ClientMsg::Go) => {
                self.state = AgentState::Running;
                self.deadline = None;
                Ok(AgentEvent::Go)
            }
            (s, m) => Err(unexpected(s, &m)),
        }
    }

    /// Records a data connection for `flow`. Returns true when it was the
    /// last one awaited. Duplicates and unknown flows are errors.
    pub fn on_data_connection(&mut self, flow: u32, now: Instant) -> Result<bool, ProtoError> {
        let timeout = self.setup_timeout();
        let AgentState::AwaitData {
            expected,
            seen,
            arrived,
        } = &mut self.state
        else {
            return Err(ProtoError::Violation(format!(
                "data connection for flow {flow} while {}",
                self.state.name()
            )));
        };
        let slot = seen.get_mut(flow as usize).ok_or_else(|| {
            ProtoError::Violation(format!(
                "data connection for flow {flow}, but the test has {expected}"
            ))
        })?;
        if *slot {
            return Err(ProtoError::Violation(format!(
                "second data connection for flow {flow}"
            )));
        }
        *slot = true;
        *arrived += 1;
        if *arrived == *expected {
            self.state = AgentState::AwaitGo;
            self.deadline = Some(now + timeout);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// The agent's own set-up of the accepted test (its set-up hook) is done
    /// at `now`: the client's set-up steps (data connections, go) get their
    /// whole time from here, not from the request.
    pub fn set_up_done(&mut self, now: Instant) {
        if matches!(self.state, AgentState::AwaitData { .. } | AgentState::AwaitGo) {
            self.deadline = Some(now + self.setup_timeout());
        }
    }

    /// The agent could not start the watch asked for (or will not): the
    /// session is idle again.
    pub fn end_watch(&mut self) {
        if self.state == AgentState::Watching {
            self.idle();
        }
    }

    /// The running test finished (or failed); the session is idle again.
    pub fn finish(&mut self) {
        self.idle();
    }

    /// The host cannot run a spec that passed validation (a CPU it does not
    /// have, say): the agent answers `test_rejected` and the session is
    /// idle again, as for an invalid spec.
    pub fn reject(&mut self) {
        self.idle();
    }

    fn idle(&mut self) {
        if self.state != AgentState::Closed {
            self.state = AgentState::Idle;
            self.deadline = None;
        }
    }

    /// Fails when the current setup step has overrun its deadline.
    pub fn check_deadline(&self, now: Instant) -> Result<(), ProtoError> {
        match self.deadline {
            Some(d) if now >= d => Err(ProtoError::Timeout(match &self.state {
                AgentState::AwaitData {
                    expected, arrived, ..
                } => format!(
                    "waiting for data connections: {arrived} of {expected} arrived within {} s",
                    self.limits.setup_timeout_s
                ),
                s => format!("{} for {} s", s.name(), self.limits.setup_timeout_s),
            })),
            _ => Ok(()),
        }
    }
}

/// What an agent message means to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    Welcome {
        version: u16,
        software: String,
        limits: AgentLimits,
        auth: crate::auth::WelcomeAuth,
        /// The agent's clock, if it said it.
        clock: Option<crate::clock::AgentClock>,
        /// Protocol 8: the agent's name for itself, checked ([`crate::initiate::check_name`]).
        name: Option<String>,
    },
    Accepted(AgentMsg),
    Rejected(String),
    DataReady,
    Interval(AgentMsg),
    Results(AgentMsg),
    /// Protocol 6: the watch began; it stops by itself after `limit_s`.
    WatchStarted {
        limit_s: u64,
    },
    /// Protocol 6: the agent will not watch, and why.
    WatchRejected(String),
    /// Protocol 6: the answer to `watch_end`.
    HostView(Box<crate::report::host::HostView>),
    /// Protocol 7: the answer to `clock_probe`: its `seq`, the agent's
    /// clock when the probe arrived and when the echo left.
    ClockEcho {
        seq: u32,
        received_ns: u64,
        sent_ns: u64,
    },
}

impl std::fmt::Display for ClientEvent {
    /// What the agent said, as a message names it (never a Rust dump).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientEvent::Welcome {
                version, software, ..
            } => {
                write!(f, "a welcome (protocol v{version}, netrig {software})")
            }
            ClientEvent::Accepted(_) => f.write_str("test_accepted"),
            ClientEvent::Rejected(r) => write!(f, "test_rejected ({r})"),
            ClientEvent::DataReady => f.write_str("data_ready"),
            ClientEvent::Interval(_) => f.write_str("an interval"),
            ClientEvent::Results(_) => f.write_str("results"),
            ClientEvent::WatchStarted { .. } => f.write_str("watch_started"),
            ClientEvent::WatchRejected(r) => write!(f, "watch_rejected ({r})"),
            ClientEvent::HostView(_) => f.write_str("host_view"),
            ClientEvent::ClockEcho { .. } => f.write_str("clock_echo"),
        }
    }
}

impl std::fmt::Display for AgentEvent {
    /// What the client said, as a message names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentEvent::Hello { software, .. } => write!(f, "hello (netrig {software})"),
            AgentEvent::TestRequested(s) => write!(f, "test_request ({})", s.kind()),
            AgentEvent::TestInvalid(r) => write!(f, "an invalid test_request ({r})"),
            AgentEvent::Go => f.write_str("go"),
            AgentEvent::Abort(r) => write!(f, "abort ({r})"),
            AgentEvent::Bye => f.write_str("bye"),
            AgentEvent::WatchStart => f.write_str("watch_start"),
            AgentEvent::WatchEnd => f.write_str("watch_end"),
            AgentEvent::WatchRefused(r) => write!(f, "a refused watch_start ({r})"),
            AgentEvent::ClockProbe { .. } => f.write_str("clock_probe"),
            AgentEvent::Initiate(r) => write!(f, "initiate ({} to {})", r.spec.kind(), r.target),
            AgentEvent::InitiateInvalid(r) => write!(f, "an invalid initiate ({r})"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitWelcome,
    Ready,
    AwaitAccept,
    AwaitDataReady,
    Running,
    AwaitWatchStarted,
    Watching,
    AwaitHostView,
    AwaitClockEcho,
    Closed,
}

impl ClientState {
    fn name(self) -> &'static str {
        match self {
            ClientState::AwaitWelcome => "awaiting welcome",
            ClientState::Ready => "ready",
            ClientState::AwaitAccept => "awaiting test acceptance",
            ClientState::AwaitDataReady => "awaiting data-ready",
            ClientState::Running => "running a test",
            ClientState::AwaitWatchStarted => "awaiting watch_started",
            ClientState::Watching => "watching the agent's host",
            ClientState::AwaitHostView => "awaiting the host's view",
            ClientState::AwaitClockEcho => "awaiting clock_echo",
            ClientState::Closed => "closed",
        }
    }
}

/// The client's view of one control session.
#[derive(Debug)]
pub struct ClientSession {
    state: ClientState,
}

impl Default for ClientSession {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientSession {
    pub fn new() -> Self {
        ClientSession {
            state: ClientState::AwaitWelcome,
        }
    }

    /// Call when sending a test request.
    pub fn request_sent(&mut self) -> Result<(), ProtoError> {
        self.expect(ClientState::Ready, "test_request")?;
        self.state = ClientState::AwaitAccept;
        Ok(())
    }

    /// Call when sending go (after data-ready).
    pub fn go_sent(&mut self) -> Result<(), ProtoError> {
        self.expect(ClientState::AwaitDataReady, "go")?;
        self.state = ClientState::Running;
        Ok(())
    }

    /// Call when sending `watch_start` (protocol 6; only when ready).
    pub fn watch_start_sent(&mut self) -> Result<(), ProtoError> {
        self.expect(ClientState::Ready, "watch_start")?;
        self.state = ClientState::AwaitWatchStarted;
        Ok(())
    }

    /// Call when sending `clock_probe` (protocol 7; only when ready).
    pub fn clock_probe_sent(&mut self) -> Result<(), ProtoError> {
        self.expect(ClientState::Ready, "clock_probe")?;
        self.state = ClientState::AwaitClockEcho;
        Ok(())
    }

    /// Call when sending `watch_end`.
    pub fn watch_end_sent(&mut self) -> Result<(), ProtoError> {
        self.expect(ClientState::Watching, "watch_end")?;
        self.state = ClientState::AwaitHostView;
        Ok(())
    }

    fn expect(&self, s: ClientState, what: &'static str) -> Result<(), ProtoError> {
        if self.state == s {
            Ok(())
        } else {
            Err(ProtoError::Unexpected {
                got: what,
                state: self.state.name(),
            })
        }
    }

    /// Handles one message from the agent. Errors name what the agent said
    /// when it refused or failed.
    pub fn on_agent(&mut self, msg: AgentMsg) -> Result<ClientEvent, ProtoError> {
        use ClientState as S;
        match (self.state, msg) {
            (_, AgentMsg::Error { message }) => {
                self.state = S::Closed;
                Err(ProtoError::Violation(format!(
                    "agent reported an error: {message}"
                )))
            }
            (
                S::AwaitWelcome,
                AgentMsg::Welcome {
                    version,
                    software,
                    limits,
                    auth,
                    clock,
                    name,
                },
            ) => {
                // The client derives timeouts from these: bounded, or refused.
                let named = name.as_deref().map_or(Ok(()), |n| {
                    crate::initiate::check_name(n).map_err(ProtoError::Violation)
                });
                if let Err(e) = limits
                    .check()
                    .and_then(|()| clock.as_ref().map_or(Ok(()), |c| c.check()))
                    .and(named)
                {
                    self.state = S::Closed;
                    return Err(e);
                }
                self.state = S::Ready;
                Ok(ClientEvent::Welcome {
                    version,
                    software,
                    limits,
                    auth,
                    clock,
                    name,
                })
            }
            (
                S::AwaitWelcome,
                AgentMsg::VersionMismatch {
                    agent_min,
                    agent_max,
                    software,
                },
            ) => {
                self.state = S::Closed;
                Err(ProtoError::Violation(format!(
                    "version mismatch: the agent (netrig {software}) speaks protocol versions {agent_min}..={agent_max}, \
                     this client (netrig {}) speaks {}..={}; run the same netrig release on both hosts",
                    crate::SOFTWARE_VERSION,
                    crate::MIN_PROTOCOL_VERSION,
                    crate::PROTOCOL_VERSION
                )))
            }
            (S::AwaitWelcome, AgentMsg::Busy { reason }) => {
                self.state = S::Closed;
                Err(ProtoError::Violation(format!("agent is busy: {reason}")))
            }
            (S::AwaitAccept, m @ AgentMsg::TestAccepted { .. }) => {
                self.state = S::AwaitDataReady;
                Ok(ClientEvent::Accepted(m))
            }
            (S::AwaitAccept, AgentMsg::TestRejected { reason }) => {
                self.state = S::Ready;
                Ok(ClientEvent::Rejected(reason))
            }
            (S::AwaitDataReady, AgentMsg::DataReady) => Ok(ClientEvent::DataReady),
            (S::Running, m @ AgentMsg::Interval { .. }) => Ok(ClientEvent::Interval(m)),
            (S::Running, m @ AgentMsg::Results { .. }) => {
                self.state = S::Ready;
                Ok(ClientEvent::Results(m))
            }
            (S::AwaitWatchStarted, AgentMsg::WatchStarted { limit_s }) => {
                if limit_s > crate::message::MAX_WATCH_S {
                    self.state = S::Closed;
                    return Err(ProtoError::Violation(format!(
                        "the agent's watch_started has limit_s {limit_s}, over the {} s a client takes",
                        crate::message::MAX_WATCH_S
                    )));
                }
                self.state = S::Watching;
                Ok(ClientEvent::WatchStarted { limit_s })
            }
            (S::AwaitWatchStarted, AgentMsg::WatchRejected { reason }) => {
                self.state = S::Ready;
                Ok(ClientEvent::WatchRejected(reason))
            }
            (
                S::AwaitClockEcho,
                AgentMsg::ClockEcho {
                    seq,
                    received_ns,
                    sent_ns,
                },
            ) => {
                match sent_ns.checked_sub(received_ns) {
                    Some(held) if held <= crate::clock::MAX_ECHO_HOLD_NS => {}
                    _ => {
                        self.state = S::Closed;
                        return Err(ProtoError::Violation(format!(
                            "the agent's clock_echo says it received the probe at {received_ns} ns and answered at \
                             {sent_ns} ns: not within the {} ns a client takes",
                            crate::clock::MAX_ECHO_HOLD_NS
                        )));
                    }
                }
                self.state = S::Ready;
                Ok(ClientEvent::ClockEcho {
                    seq,
                    received_ns,
                    sent_ns,
                })
            }
            (S::AwaitHostView, AgentMsg::HostView { view }) => {
                self.state = S::Ready;
                Ok(ClientEvent::HostView(view))
            }
            (s, m) => Err(ProtoError::Unexpected {
                got: m.name(),
                state: s.name(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{IntervalSample, SideReport};
    use crate::spec::{KindSpec, Limit, TcpBidirSpec, TcpCrrSpec, TcpStreamSpec};
    use crate::SessionCookie;

    fn hello() -> ClientMsg {
        ClientMsg::Hello {
            software: "c".into(),
            auth: crate::auth::HelloAuth {
                nonce: crate::auth::Nonce::random(),
                client_key: None,
                signature: None,
            },
        }
    }

    fn spec(test: KindSpec, flows: u32) -> TestSpec {
        TestSpec {
            interval_s: Some(0.5),
            flows,
            ..TestSpec::new(test, Limit::Duration { seconds: 1.0 })
        }
    }

    fn stream() -> KindSpec {
        KindSpec::TcpStream(TcpStreamSpec::default())
    }

    /// The welcome's clock is bounded like its limits: a boot hash that is
    /// not one closes the session; a good one reaches the client.
    #[test]
    fn a_welcome_with_a_clock_that_is_no_boot_hash_is_refused() {
        let welcome = |boot_hash: &str| AgentMsg::Welcome {
            version: 6,
            software: "x".into(),
            limits: AgentLimits::default(),
            auth: crate::auth::AgentAuth::default().welcome(),
            clock: Some(crate::clock::AgentClock {
                boot_hash: boot_hash.into(),
            }),
            name: None,
        };
        let e = ClientSession::new()
            .on_agent(welcome(&"x".repeat(1000)))
            .unwrap_err();
        assert!(e.to_string().contains("boot hash"), "{e}");
        let w = ClientSession::new()
            .on_agent(welcome(&crate::clock::boot_hash(&[1; 32], "an id")))
            .unwrap();
        assert!(matches!(w, ClientEvent::Welcome { clock: Some(_), .. }), "{w:?}");
    }

    /// A whole test driven through both machines with a virtual clock.
    #[test]
    fn simulated_pair_runs_a_test() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        let mut client = ClientSession::new();
        let w = client
            .on_agent(AgentMsg::Welcome {
                version: 1,
                software: "x".into(),
                limits: AgentLimits::default(),
                auth: crate::auth::AgentAuth::default().welcome(),
                clock: None,
                name: None,
            })
            .unwrap();
        assert!(matches!(w, ClientEvent::Welcome { version: 1, .. }));
        assert!(matches!(
            agent.on_client(hello(), t0).unwrap(),
            AgentEvent::Hello { .. }
        ));
        client.request_sent().unwrap();
        let ev = agent
            .on_client(
                ClientMsg::TestRequest {
                    spec: spec(KindSpec::TcpBidir(TcpBidirSpec::default()), 2),
                    auth: None,
                },
                t0,
            )
            .unwrap();
        assert!(matches!(ev, AgentEvent::TestRequested(_)));
        client
            .on_agent(AgentMsg::TestAccepted {
                cookie: SessionCookie([1; 16]),
                warnings: vec![],
            })
            .unwrap();
        let t1 = t0 + Duration::from_secs(1);
        assert!(!agent.on_data_connection(0, t1).unwrap());
        assert!(!agent.on_data_connection(3, t1).unwrap());
        assert!(agent.on_data_connection(3, t1).is_err(), "duplicate flow");
        assert!(agent.on_data_connection(4, t1).is_err(), "flow out of range");
        assert!(!agent.on_data_connection(1, t1).unwrap());
        assert!(agent.on_data_connection(2, t1).unwrap());
        assert_eq!(
            client.on_agent(AgentMsg::DataReady).unwrap(),
            ClientEvent::DataReady
        );
        client.go_sent().unwrap();
        assert_eq!(agent.on_client(ClientMsg::Go, t1).unwrap(), AgentEvent::Go);
        assert!(agent.is_running());
        let iv = AgentMsg::Interval {
            sample: Box::new(IntervalSample {
                index: 0,
                start_s: 0.0,
                end_s: 0.5,
                ids: vec![0],
                bytes: vec![1],
                tcp_info: vec![],
                transactions: vec![],
                ..Default::default()
            }),
        };
        assert!(matches!(client.on_agent(iv).unwrap(), ClientEvent::Interval(_)));
        agent.finish();
        let r = AgentMsg::Results {
            report: Box::new(SideReport::default()),
        };
        assert!(matches!(client.on_agent(r).unwrap(), ClientEvent::Results(_)));
        // Both are ready for another test.
        client.request_sent().unwrap();
        assert!(matches!(
            agent
                .on_client(
                    ClientMsg::TestRequest {
                        spec: spec(stream(), 1),
                        auth: None,
                    },
                    t1
                )
                .unwrap(),
            AgentEvent::TestRequested(_)
        ));
        assert_eq!(agent.on_client(ClientMsg::Bye, t1).unwrap(), AgentEvent::Bye);
        assert!(agent.on_client(ClientMsg::Go, t1).is_err());
    }

    #[test]
    fn crr_goes_straight_to_go_and_takes_no_set_up_connection() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        let ev = agent
            .on_client(
                ClientMsg::TestRequest {
                    spec: spec(KindSpec::TcpCrr(TcpCrrSpec::default()), 4),
                    auth: None,
                },
                t0,
            )
            .unwrap();
        assert!(matches!(ev, AgentEvent::TestRequested(_)));
        assert_eq!(agent.state_name(), "awaiting go");
        assert!(agent.on_data_connection(0, t0).is_err());
        assert!(
            agent.check_deadline(t0 + Duration::from_secs(31)).is_err(),
            "go is still bounded"
        );
        assert_eq!(agent.on_client(ClientMsg::Go, t0).unwrap(), AgentEvent::Go);
        assert!(agent.is_running());
    }

    #[test]
    fn agent_refuses_out_of_order_messages() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        assert!(agent.on_client(ClientMsg::Go, t0).is_err());
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        assert!(agent.on_client(ClientMsg::Go, t0).is_err(), "go before any test");
        assert!(agent.on_data_connection(0, t0).is_err(), "data before any test");
    }

    #[test]
    fn invalid_spec_keeps_session_idle() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        let mut s = spec(stream(), 1);
        s.limit = Limit::Duration { seconds: 1e9 };
        match agent
            .on_client(ClientMsg::TestRequest { spec: s, auth: None }, t0)
            .unwrap()
        {
            AgentEvent::TestInvalid(why) => assert!(why.contains("-l/--length"), "{why}"),
            e => panic!("{e:?}"),
        }
        assert_eq!(agent.state_name(), "idle");
    }

    #[test]
    fn setup_deadlines_use_the_virtual_clock() {
        let t0 = Instant::now();
        let limits = AgentLimits {
            setup_timeout_s: 5,
            ..AgentLimits::default()
        };
        let mut agent = AgentSession::new(limits, t0);
        assert!(agent.check_deadline(t0 + Duration::from_secs(4)).is_ok());
        assert!(
            agent.check_deadline(t0 + Duration::from_secs(5)).is_err(),
            "hello never came"
        );
        agent.on_client(hello(), t0).unwrap();
        assert!(
            agent.check_deadline(t0 + Duration::from_secs(100)).is_ok(),
            "idle has no deadline"
        );
        agent
            .on_client(
                ClientMsg::TestRequest {
                    spec: spec(stream(), 2),
                    auth: None,
                },
                t0,
            )
            .unwrap();
        agent.on_data_connection(0, t0).unwrap();
        let err = agent
            .check_deadline(t0 + Duration::from_secs(6))
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 of 2 arrived"), "{err}");
    }

    /// The agent's set-up hook runs between the request and test_accepted:
    /// the client's set-up steps still get their whole time after it.
    #[test]
    fn set_up_done_restarts_the_set_up_deadline() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.set_up_done(t0 + Duration::from_secs(100));
        assert!(
            agent.check_deadline(t0 + Duration::from_secs(31)).is_err(),
            "not while awaiting hello"
        );
        agent.on_client(hello(), t0).unwrap();
        agent.set_up_done(t0);
        assert_eq!(agent.deadline(), None, "idle has none");
        agent
            .on_client(
                ClientMsg::TestRequest {
                    spec: spec(stream(), 1),
                    auth: None,
                },
                t0,
            )
            .unwrap();
        let hook_done = t0 + Duration::from_secs(25);
        agent.set_up_done(hook_done);
        assert!(agent.check_deadline(t0 + Duration::from_secs(31)).is_ok());
        assert!(agent.check_deadline(hook_done + Duration::from_secs(30)).is_err());
    }

    #[test]
    fn client_reports_version_mismatch_in_words() {
        let mut c = ClientSession::new();
        let err = c
            .on_agent(AgentMsg::VersionMismatch {
                agent_min: 7,
                agent_max: 9,
                software: "9.0.0".into(),
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("7..=9") && err.contains("9.0.0"), "{err}");
    }

    /// Found by the `session` fuzz target: a welcome's limits were taken
    /// whole, and the client computes `setup_timeout_s + 5` and
    /// `max_duration_s + 60` seconds and deadlines from them, which overflow
    /// (a panic) for a hostile agent's values.
    #[test]
    fn client_refuses_a_welcome_with_unbounded_durations() {
        use crate::message::{MAX_AGENT_DURATION_S, MAX_SETUP_TIMEOUT_S};
        let welcome = |setup_timeout_s, max_duration_s| AgentMsg::Welcome {
            version: 2,
            software: "x".into(),
            auth: crate::auth::AgentAuth::default().welcome(),
            limits: AgentLimits {
                setup_timeout_s,
                max_duration_s,
                ..AgentLimits::default()
            },
            clock: None,
            name: None,
        };
        for (setup, max) in [
            (30, 18_361_687_889_224_520_145),
            (u64::MAX, 3600),
            (MAX_SETUP_TIMEOUT_S + 1, 3600),
            (30, MAX_AGENT_DURATION_S + 1),
        ] {
            let mut c = ClientSession::new();
            let err = c.on_agent(welcome(setup, max)).unwrap_err().to_string();
            assert!(err.contains("the agent's welcome has"), "{err}");
            assert!(c.request_sent().is_err(), "the session closed");
        }
        let mut c = ClientSession::new();
        c.on_agent(welcome(MAX_SETUP_TIMEOUT_S, MAX_AGENT_DURATION_S))
            .unwrap();
        c.request_sent().unwrap();
    }

    /// Protocol 6: a watch from idle, at most one at a time, a host view at
    /// its end; the agent's figures and limit are bounded by the client.
    /// The clock probe: answered when idle only, a bounded number between two test requests;
    /// the client refuses an echo it did not ask for or one that says it was held too long.
    #[test]
    fn clock_probes_are_answered_when_idle_and_bounded() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        assert!(
            agent.on_client(ClientMsg::ClockProbe { seq: 1 }, t0).is_err(),
            "before the hello"
        );
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        for seq in 0..crate::clock::MAX_PROBES_PER_TEST {
            assert_eq!(
                agent.on_client(ClientMsg::ClockProbe { seq }, t0).unwrap(),
                AgentEvent::ClockProbe { seq }
            );
        }
        // A test request starts the count again.
        let req = || ClientMsg::TestRequest {
            spec: spec(stream(), 1),
            auth: None,
        };
        agent.on_client(req(), t0).unwrap();
        assert!(
            agent.on_client(ClientMsg::ClockProbe { seq: 0 }, t0).is_err(),
            "not during a test's set-up"
        );
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        for seq in 0..crate::clock::MAX_PROBES_PER_TEST {
            agent.on_client(ClientMsg::ClockProbe { seq }, t0).unwrap();
        }
        let e = agent
            .on_client(ClientMsg::ClockProbe { seq: 99 }, t0)
            .unwrap_err();
        assert!(e.to_string().contains("more than 64 clock_probe"), "{e}");

        let ready = || {
            let mut c = ClientSession::new();
            c.on_agent(AgentMsg::Welcome {
                version: 7,
                software: "x".into(),
                limits: AgentLimits::default(),
                auth: crate::auth::AgentAuth::default().welcome(),
                clock: None,
                name: None,
            })
            .unwrap();
            c
        };
        let echo = |received_ns, sent_ns| AgentMsg::ClockEcho {
            seq: 3,
            received_ns,
            sent_ns,
        };
        let mut c = ready();
        assert!(c.on_agent(echo(5, 6)).is_err(), "not asked for");
        let mut c = ready();
        c.clock_probe_sent().unwrap();
        assert!(c.clock_probe_sent().is_err(), "one at a time");
        assert_eq!(
            c.on_agent(echo(5, 6)).unwrap(),
            ClientEvent::ClockEcho {
                seq: 3,
                received_ns: 5,
                sent_ns: 6
            }
        );
        c.request_sent().unwrap();
        for (r, s) in [(6, 5), (0, crate::clock::MAX_ECHO_HOLD_NS + 1), (0, u64::MAX)] {
            let mut c = ready();
            c.clock_probe_sent().unwrap();
            assert!(c.on_agent(echo(r, s)).is_err(), "{r} {s}");
        }
    }

    #[test]
    fn a_watch_runs_from_idle_one_at_a_time() {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        assert!(
            agent.on_client(ClientMsg::WatchStart, t0).is_err(),
            "before the hello"
        );
        let mut agent = AgentSession::new(AgentLimits::default(), t0);
        agent.on_client(hello(), t0).unwrap();
        assert_eq!(
            agent.on_client(ClientMsg::WatchEnd, t0).unwrap_err().to_string(),
            "unexpected message watch_end while idle"
        );
        assert_eq!(
            agent.on_client(ClientMsg::WatchStart, t0).unwrap(),
            AgentEvent::WatchStart
        );
        assert!(agent.is_watching());
        assert_eq!(agent.deadline(), None, "the agent bounds a watch itself");
        assert!(matches!(
            agent.on_client(ClientMsg::WatchStart, t0).unwrap(),
            AgentEvent::WatchRefused(r) if r.contains("one at a time")
        ));
        assert!(agent.is_watching(), "the first watch goes on");
        let req = ClientMsg::TestRequest {
            spec: spec(stream(), 1),
            auth: None,
        };
        assert!(agent.on_client(req, t0).is_err(), "no test while watching");
        assert_eq!(
            agent.on_client(ClientMsg::WatchEnd, t0).unwrap(),
            AgentEvent::WatchEnd
        );
        assert_eq!(agent.state_name(), "idle");

        let mut c = ClientSession::new();
        assert!(c.watch_start_sent().is_err(), "before the welcome");
        c.on_agent(AgentMsg::Welcome {
            version: 6,
            software: "x".into(),
            limits: AgentLimits::default(),
            auth: crate::auth::AgentAuth::default().welcome(),
            clock: None,
            name: None,
        })
        .unwrap();
        c.watch_start_sent().unwrap();
        assert!(c.request_sent().is_err());
        assert_eq!(
            c.on_agent(AgentMsg::WatchStarted { limit_s: 3630 }).unwrap(),
            ClientEvent::WatchStarted { limit_s: 3630 }
        );
        assert!(
            c.on_agent(AgentMsg::HostView { view: Box::default() }).is_err(),
            "not asked for yet"
        );
        let mut c = ClientSession::new();
        c.on_agent(AgentMsg::Welcome {
            version: 6,
            software: "x".into(),
            limits: AgentLimits::default(),
            auth: crate::auth::AgentAuth::default().welcome(),
            clock: None,
            name: None,
        })
        .unwrap();
        c.watch_start_sent().unwrap();
        c.on_agent(AgentMsg::WatchStarted { limit_s: 10 }).unwrap();
        c.watch_end_sent().unwrap();
        assert!(matches!(
            c.on_agent(AgentMsg::HostView { view: Box::default() }).unwrap(),
            ClientEvent::HostView(_)
        ));
        c.watch_start_sent().unwrap();
        assert!(matches!(
            c.on_agent(AgentMsg::WatchRejected { reason: "no".into() })
                .unwrap(),
            ClientEvent::WatchRejected(_)
        ));
        c.watch_start_sent().unwrap();
        let e = c
            .on_agent(AgentMsg::WatchStarted {
                limit_s: crate::message::MAX_WATCH_S + 1,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit_s"), "{e}");
    }

    #[test]
    fn client_refuses_results_before_running() {
        let mut c = ClientSession::new();
        let r = AgentMsg::Results {
            report: Box::new(SideReport::default()),
        };
        assert!(c.on_agent(r).is_err());
    }
}
