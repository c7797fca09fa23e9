//! The sans-IO session state machines, driven with a virtual clock: a
//! sequence of client messages, data connections and clock advances into
//! `AgentSession`, and of agent messages and the client's own sends into
//! `ClientSession`.
//!
//! Invariants: no panic; the agent's deadline exists exactly in the set-up
//! states, is never further than the set-up timeout from now, and
//! `check_deadline` fails exactly when it has passed; a test is requested
//! only with a spec that validates (and then holds every bound), set-up ends
//! only when every flow's connection arrived once; nothing is accepted after
//! `bye`. The client accepts each agent message only in the state the
//! protocol table allows (compared with a model of it), nothing after an
//! error, and what it takes from a welcome bounds the timeouts it derives.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use netrig_proto::message::{MAX_AGENT_DURATION_S, MAX_SETUP_TIMEOUT_S};
use netrig_proto::report::{IntervalSample, SideReport};
use netrig_proto::session::{AgentEvent, AgentSession, ClientEvent, ClientSession};
use netrig_proto::spec::{Limit, PaceOptions, RrOptions, SocketOptions, UdpOptions};
use netrig_proto::{AgentLimits, AgentMsg, ClientMsg, ProtoError, SessionCookie, TestKind, TestSpec};
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[derive(Arbitrary, Debug)]
struct Input {
    limits: OwnLimits,
    agent: Vec<AgentOp>,
    client: Vec<ClientOp>,
}

/// The agent's own configuration (not from the wire).
#[derive(Arbitrary, Debug)]
struct OwnLimits {
    max_flows: u16,
    max_duration_s: u16,
    max_message_size: u32,
    setup_timeout_s: u16,
}

#[derive(Arbitrary, Debug)]
enum AgentOp {
    Hello(String),
    Request(ArbSpec),
    Go,
    Abort(String),
    Bye,
    /// Any client message, from JSON.
    Json(Vec<u8>),
    /// A data connection naming this flow.
    Data(u32),
    /// A data connection for the lowest flow not yet connected.
    DataNext,
    AdvanceMs(u32),
    AdvanceS(u16),
    Finish,
    Reject,
}

/// A spec that is valid until its overrides say otherwise.
#[derive(Arbitrary, Debug)]
struct ArbSpec {
    kind: u8,
    flows: u8,
    overrides: Vec<Override>,
}

#[derive(Arbitrary, Debug)]
enum Override {
    Seconds(f64),
    Bytes(u64),
    Omit(f64),
    Interval(Option<f64>),
    Flows(u32),
    MessageSize(u32),
    RecvSize(u32),
    Rr(u32, u32, u32),
    Rate(Option<f64>, bool, Option<u32>),
    Timeout(Option<f64>),
    Workers(Option<u32>),
    Reverse(bool),
    Pace(Option<u64>, Option<u32>),
    Cpus(Option<Vec<u32>>),
    Zerocopy(bool),
    Buffers(Option<u32>, Option<u32>),
    Congestion(Option<String>),
    Mss(Option<u32>),
}

impl ArbSpec {
    fn build(&self) -> TestSpec {
        let mut s = TestSpec {
            kind: TestKind::ALL[usize::from(self.kind) % TestKind::ALL.len()],
            limit: Limit::Duration { seconds: 1.0 },
            omit_s: 0.0,
            interval_s: None,
            flows: u32::from(self.flows % 4) + 1,
            message_size: 1024,
            recv_size: 1024,
            remote: SocketOptions::default(),
            measure_cpu: true,
            rr: RrOptions::default(),
            workers: None,
            udp: UdpOptions::default(),
            pace: PaceOptions::default(),
            remote_cpus: None,
            zerocopy: false,
        };
        for o in &self.overrides {
            match o {
                Override::Seconds(x) => s.limit = Limit::Duration { seconds: *x },
                Override::Bytes(b) => s.limit = Limit::Bytes { bytes: *b },
                Override::Omit(x) => s.omit_s = *x,
                Override::Interval(x) => s.interval_s = *x,
                Override::Flows(n) => s.flows = *n,
                Override::MessageSize(n) => s.message_size = *n,
                Override::RecvSize(n) => s.recv_size = *n,
                Override::Rr(q, r, b) => {
                    s.rr.request_size = *q;
                    s.rr.response_size = *r;
                    s.rr.burst = *b;
                }
                Override::Rate(r, p, spin) => {
                    s.rr.rate = *r;
                    s.rr.poisson = *p;
                    s.rr.spin_us = *spin;
                }
                Override::Timeout(t) => s.rr.timeout_s = *t,
                Override::Workers(w) => s.workers = *w,
                Override::Reverse(r) => s.udp.reverse = *r,
                Override::Pace(r, q) => {
                    s.pace.rate_bps = *r;
                    s.pace.pacing_us = *q;
                }
                Override::Cpus(c) => s.remote_cpus = c.clone(),
                Override::Zerocopy(z) => s.zerocopy = *z,
                Override::Buffers(a, b) => {
                    s.remote.sndbuf = *a;
                    s.remote.rcvbuf = *b;
                }
                Override::Congestion(c) => s.remote.congestion = c.clone(),
                Override::Mss(m) => s.remote.mss = *m,
            }
        }
        s
    }
}

/// Limits as a (possibly hostile) agent's welcome carries them.
#[derive(Arbitrary, Debug, Clone)]
struct WireLimits {
    max_sessions: u32,
    max_flows: u32,
    max_duration_s: u64,
    max_message_size: u32,
    setup_timeout_s: u64,
}

#[derive(Arbitrary, Debug)]
enum ClientOp {
    Welcome(u16, WireLimits),
    Mismatch(u16, u16),
    Busy,
    Accepted([u8; 16], Vec<String>),
    Rejected(String),
    DataReady,
    Interval,
    Results,
    Error(String),
    /// Any agent message, from JSON.
    Json(Vec<u8>),
    RequestSent,
    GoSent,
}

fuzz_target!(|input: Input| {
    agent(&input);
    client(&input.client);
});

const SETUP_STATES: [&str; 3] = ["awaiting hello", "awaiting data connections", "awaiting go"];

fn agent(input: &Input) {
    let l = &input.limits;
    let limits = AgentLimits {
        max_sessions: 64,
        max_flows: u32::from(l.max_flows),
        max_duration_s: u64::from(l.max_duration_s),
        max_message_size: l.max_message_size,
        setup_timeout_s: u64::from(l.setup_timeout_s % 3601),
        ..AgentLimits::default()
    };
    let setup = Duration::from_secs(limits.setup_timeout_s);
    let t0 = Instant::now();
    let mut now = t0;
    let mut a = AgentSession::new(limits.clone(), now);
    let mut closed = false;
    // While awaiting data connections: how many, and which arrived.
    let mut awaited: Option<(u64, HashSet<u32>)> = None;
    for op in &input.agent {
        let before = a.state_name();
        let msg = match op {
            AgentOp::Hello(s) => Some(ClientMsg::Hello { software: s.clone() }),
            AgentOp::Request(s) => Some(ClientMsg::TestRequest { spec: s.build() }),
            AgentOp::Go => Some(ClientMsg::Go),
            AgentOp::Abort(r) => Some(ClientMsg::Abort { reason: r.clone() }),
            AgentOp::Bye => Some(ClientMsg::Bye),
            AgentOp::Json(b) => serde_json::from_slice(b).ok(),
            _ => None,
        };
        if let Some(m) = msg {
            let r = a.on_client(m.clone(), now);
            if closed {
                assert!(r.is_err(), "accepted {m:?} after bye");
            }
            match r {
                Ok(AgentEvent::Hello { .. }) => assert_eq!(before, "awaiting hello"),
                Ok(AgentEvent::TestRequested(s)) => {
                    assert_eq!(before, "idle");
                    // Debug, not ==: options a kind does not use are not
                    // validated, and a structured one may hold a NaN.
                    let sent = match &m {
                        ClientMsg::TestRequest { spec } => format!("{spec:?}"),
                        _ => panic!("a test requested by {m:?}"),
                    };
                    assert_eq!(sent, format!("{s:?}"), "the spec changed on the way");
                    assert!(s.validate(&limits).is_ok(), "requested an invalid spec");
                    common::assert_bounded(&s, &limits);
                    assert_eq!(a.deadline(), Some(now + setup));
                    awaited = (s.connections() > 0).then(|| (s.connections(), HashSet::new()));
                    let want = if awaited.is_some() {
                        "awaiting data connections"
                    } else {
                        "awaiting go"
                    };
                    assert_eq!(a.state_name(), want);
                }
                Ok(AgentEvent::TestInvalid(_)) => {
                    assert_eq!(before, "idle");
                    let ClientMsg::TestRequest { spec } = &m else {
                        panic!("invalid without a spec")
                    };
                    assert!(spec.validate(&limits).is_err());
                    assert_eq!(a.state_name(), "idle");
                }
                Ok(AgentEvent::Go) => {
                    assert_eq!(before, "awaiting go");
                    assert!(a.is_running());
                }
                Ok(AgentEvent::Abort(_)) => {
                    assert!(
                        SETUP_STATES[1..].contains(&before) || before == "running a test",
                        "{before}"
                    );
                    assert_eq!(a.state_name(), "idle");
                }
                Ok(AgentEvent::Bye) => {
                    closed = true;
                    assert_eq!(a.state_name(), "closed");
                }
                Err(ProtoError::Unexpected { .. }) => {
                    assert_eq!(a.state_name(), before, "an error moved the state")
                }
                Err(e) => panic!("on_client failed with {e}"),
            }
            if a.state_name() != "awaiting data connections" {
                awaited = None;
            }
        }
        match op {
            AgentOp::Data(_) | AgentOp::DataNext => {
                let flow = match (op, &awaited) {
                    (AgentOp::Data(f), _) => *f,
                    (_, Some((n, seen))) => (0..*n as u32).find(|f| !seen.contains(f)).unwrap_or(0),
                    _ => 0,
                };
                let r = a.on_data_connection(flow, now);
                match (&mut awaited, r) {
                    (Some((n, seen)), Ok(last)) => {
                        assert!(u64::from(flow) < *n, "flow {flow} of {n} taken");
                        assert!(seen.insert(flow), "flow {flow} taken twice");
                        assert_eq!(last, seen.len() as u64 == *n, "last one at {} of {n}", seen.len());
                        if last {
                            assert_eq!(a.state_name(), "awaiting go");
                            assert_eq!(a.deadline(), Some(now + setup));
                            awaited = None;
                        }
                    }
                    (Some((n, seen)), Err(_)) => {
                        assert!(
                            u64::from(flow) >= *n || seen.contains(&flow),
                            "flow {flow} refused"
                        );
                    }
                    (None, Ok(_)) => panic!("data connection taken while {before}"),
                    (None, Err(_)) => {}
                }
            }
            AgentOp::AdvanceMs(ms) => now += Duration::from_millis(u64::from(*ms)),
            AgentOp::AdvanceS(s) => now += Duration::from_secs(u64::from(*s)),
            AgentOp::Finish | AgentOp::Reject => {
                if matches!(op, AgentOp::Finish) {
                    a.finish()
                } else {
                    a.reject()
                }
                assert_eq!(a.state_name(), if closed { "closed" } else { "idle" });
                awaited = None;
            }
            _ => {}
        }
        // The deadline: only in the set-up steps, never beyond the timeout.
        let state = a.state_name();
        assert_eq!(a.deadline().is_some(), SETUP_STATES.contains(&state), "{state}");
        assert_eq!(a.is_running(), state == "running a test");
        assert_eq!(closed, state == "closed");
        if let Some(d) = a.deadline() {
            assert!(d <= now + setup, "deadline beyond the set-up timeout");
            assert!(d >= t0 + setup, "deadline before any step could start");
        }
        let overdue = a.deadline().is_some_and(|d| now >= d);
        match a.check_deadline(now) {
            Ok(()) => assert!(!overdue, "a passed deadline not reported"),
            Err(ProtoError::Timeout(_)) => assert!(overdue, "a timeout before the deadline"),
            Err(e) => panic!("check_deadline failed with {e}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Model {
    AwaitWelcome,
    Ready,
    AwaitAccept,
    AwaitDataReady,
    Running,
    Closed,
}

fn client(ops: &[ClientOp]) {
    let mut c = ClientSession::new();
    let mut m = Model::AwaitWelcome;
    for op in ops {
        let msg = match op {
            ClientOp::Welcome(version, l) => Some(AgentMsg::Welcome {
                version: *version,
                software: "x".into(),
                limits: AgentLimits {
                    max_sessions: l.max_sessions,
                    max_flows: l.max_flows,
                    max_duration_s: l.max_duration_s,
                    max_message_size: l.max_message_size,
                    setup_timeout_s: l.setup_timeout_s,
                    ..AgentLimits::default()
                },
            }),
            ClientOp::Mismatch(a, b) => Some(AgentMsg::VersionMismatch {
                agent_min: *a,
                agent_max: *b,
                software: "y".into(),
            }),
            ClientOp::Busy => Some(AgentMsg::Busy {
                reason: "full".into(),
            }),
            ClientOp::Accepted(c, w) => Some(AgentMsg::TestAccepted {
                cookie: SessionCookie(*c),
                warnings: w.clone(),
            }),
            ClientOp::Rejected(r) => Some(AgentMsg::TestRejected { reason: r.clone() }),
            ClientOp::DataReady => Some(AgentMsg::DataReady),
            ClientOp::Interval => Some(AgentMsg::Interval {
                sample: Box::new(IntervalSample::default()),
            }),
            ClientOp::Results => Some(AgentMsg::Results {
                report: Box::new(SideReport::default()),
            }),
            ClientOp::Error(e) => Some(AgentMsg::Error { message: e.clone() }),
            ClientOp::Json(b) => serde_json::from_slice(b).ok(),
            ClientOp::RequestSent => {
                let r = c.request_sent();
                assert_eq!(r.is_ok(), m == Model::Ready, "request_sent while {m:?}");
                if r.is_ok() {
                    m = Model::AwaitAccept;
                }
                None
            }
            ClientOp::GoSent => {
                let r = c.go_sent();
                assert_eq!(r.is_ok(), m == Model::AwaitDataReady, "go_sent while {m:?}");
                if r.is_ok() {
                    m = Model::Running;
                }
                None
            }
        };
        let Some(msg) = msg else { continue };
        let name = msg.name();
        let r = c.on_agent(msg);
        use Model as M;
        let (ok, next) = match (m, name) {
            (_, "error") => (false, M::Closed),
            (M::AwaitWelcome, "welcome") => (true, M::Ready),
            (M::AwaitWelcome, "version_mismatch" | "busy") => (false, M::Closed),
            (M::AwaitAccept, "test_accepted") => (true, M::AwaitDataReady),
            (M::AwaitAccept, "test_rejected") => (true, M::Ready),
            (M::AwaitDataReady, "data_ready") => (true, M::AwaitDataReady),
            (M::Running, "interval") => (true, M::Running),
            (M::Running, "results") => (true, M::Ready),
            (s, _) => (false, s),
        };
        if m == M::Closed {
            assert!(r.is_err(), "{name} accepted after the session closed");
        }
        match r {
            Ok(ClientEvent::Welcome { limits, .. }) => {
                assert!(ok && name == "welcome", "welcome while {m:?}");
                // What the client derives from the agent's limits: the set-up
                // wait and the bound on a byte-count test.
                let t = Instant::now();
                let setup = limits.setup_timeout_s.checked_add(5).map(Duration::from_secs);
                let bytes_run = limits.max_duration_s.checked_add(60).map(Duration::from_secs);
                assert!(
                    setup.and_then(|d| t.checked_add(d)).is_some(),
                    "welcome's setup_timeout_s {} overflows the client's deadline",
                    limits.setup_timeout_s
                );
                assert!(
                    bytes_run.and_then(|d| t.checked_add(d)).is_some(),
                    "welcome's max_duration_s {} overflows the client's deadline",
                    limits.max_duration_s
                );
                assert!(limits.setup_timeout_s <= MAX_SETUP_TIMEOUT_S);
                assert!(limits.max_duration_s <= MAX_AGENT_DURATION_S);
                m = next;
            }
            Ok(_) => {
                assert!(ok, "{name} accepted while {m:?}");
                m = next;
            }
            Err(_) if ok && name == "welcome" => {
                // A welcome refused for its limits closes the session.
                m = M::Closed;
            }
            Err(_) => {
                assert!(!ok, "{name} refused while {m:?}");
                m = next;
            }
        }
    }
}
