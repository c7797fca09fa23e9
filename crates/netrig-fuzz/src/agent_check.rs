//! The agent session's invariants, for the targets that drive an
//! `AgentSession` (`session` with message values, `agent_session` with
//! bytes): every call goes through [`AgentCheck`], which makes it on the
//! machine and checks what came back against what it was given.
//!
//! Checked: a hello is taken only while awaiting one; a test is requested
//! only from idle, only with a spec that validates (and then holds every
//! bound of [`crate::bounds`]), unchanged, and with the set-up deadline
//! restarted; an invalid spec leaves the session idle; go only while
//! awaiting go; abort only during set-up or a test; an error never moves
//! the state; set-up ends only when every flow's connection arrived, each
//! once, and no connection is taken outside set-up; nothing is accepted
//! after `bye`; a watch starts only from idle, one at a time, and ends
//! into idle. After every step: the deadline exists exactly in the set-up
//! states, is never further than the set-up timeout from now nor earlier
//! than one after the start, and `check_deadline` fails exactly when it has
//! passed.

use crate::bounds;
use netrig_proto::session::{AgentEvent, AgentSession};
use netrig_proto::{AgentLimits, ClientMsg, ProtoError};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The states in which the agent waits for the client, with a deadline.
pub const SETUP_STATES: [&str; 3] = ["awaiting hello", "awaiting data connections", "awaiting go"];

/// An `AgentSession` and what the checks know of it.
pub struct AgentCheck {
    pub session: AgentSession,
    limits: AgentLimits,
    setup: Duration,
    t0: Instant,
    closed: bool,
    /// While awaiting data connections: how many, and which arrived.
    awaited: Option<(u64, HashSet<u32>)>,
    /// Clock probes answered since the last test request.
    probes: u32,
}

impl AgentCheck {
    /// A session whose preamble arrived at `t0`.
    pub fn new(limits: AgentLimits, t0: Instant) -> Self {
        AgentCheck {
            session: AgentSession::new(limits.clone(), t0),
            setup: Duration::from_secs(limits.setup_timeout_s),
            limits,
            t0,
            closed: false,
            awaited: None,
            probes: 0,
        }
    }

    pub fn state(&self) -> &'static str {
        self.session.state_name()
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    /// `AgentSession::on_client`, checked.
    pub fn on_client(&mut self, m: ClientMsg, now: Instant) -> Result<AgentEvent, ProtoError> {
        let a = &mut self.session;
        let before = a.state_name();
        let r = a.on_client(m.clone(), now);
        if self.closed {
            assert!(r.is_err(), "accepted {m:?} after bye");
        }
        match &r {
            Ok(AgentEvent::Hello { .. }) => assert_eq!(before, "awaiting hello"),
            Ok(AgentEvent::ClockProbe { seq }) => {
                assert_eq!(before, "idle");
                assert_eq!(a.state_name(), "idle");
                assert!(matches!(m, ClientMsg::ClockProbe { seq: s } if s == *seq));
                self.probes += 1;
                assert!(
                    self.probes <= netrig_proto::clock::MAX_PROBES_PER_TEST,
                    "unbounded clock probes"
                );
            }
            Err(ProtoError::Violation(_)) if matches!(m, ClientMsg::ClockProbe { .. }) => {
                assert_eq!(before, "idle");
                assert_eq!(self.probes, netrig_proto::clock::MAX_PROBES_PER_TEST);
                assert_eq!(a.state_name(), "closed");
                self.closed = true;
            }
            Ok(AgentEvent::TestRequested(s)) => {
                self.probes = 0;
                assert_eq!(before, "idle");
                // ==, not Debug as before version 3: a kind's spec has no
                // option it does not use, and validate bounds every float it
                // has, so a valid spec holds no NaN.
                let ClientMsg::TestRequest { spec: sent, .. } = &m else {
                    panic!("a test requested by {m:?}")
                };
                assert_eq!(sent, s, "the spec changed on the way");
                assert!(s.validate(&self.limits).is_ok(), "requested an invalid spec");
                bounds::assert_bounded(s, &self.limits);
                assert_eq!(a.deadline(), Some(now + self.setup));
                self.awaited = (s.connections() > 0).then(|| (s.connections(), HashSet::new()));
                let want = if self.awaited.is_some() {
                    "awaiting data connections"
                } else {
                    "awaiting go"
                };
                assert_eq!(a.state_name(), want);
            }
            Ok(AgentEvent::TestInvalid(_)) => {
                assert_eq!(before, "idle");
                let ClientMsg::TestRequest { spec, .. } = &m else {
                    panic!("invalid without a spec")
                };
                assert!(spec.validate(&self.limits).is_err());
                assert_eq!(a.state_name(), "idle");
            }
            Ok(AgentEvent::Go) => {
                assert_eq!(before, "awaiting go");
                assert!(a.is_running());
            }
            Ok(AgentEvent::Abort(_)) => {
                assert!(
                    SETUP_STATES[1..].contains(&before)
                        || before == "running a test"
                        || before == "watching the host"
                        || before == "running a test as a client (initiate)",
                    "{before}"
                );
                assert_eq!(a.state_name(), "idle");
            }
            Ok(AgentEvent::Initiate(r)) => {
                self.probes = 0;
                assert_eq!(before, "idle");
                assert!(r.spec.validate(&self.limits).is_ok(), "initiated an invalid spec");
                assert_eq!(a.state_name(), "running a test as a client (initiate)");
                assert_eq!(a.deadline(), None, "the agent bounds an initiated test itself");
            }
            Ok(AgentEvent::InitiateInvalid(_)) => {
                assert_eq!(before, "idle");
                let ClientMsg::Initiate { request, .. } = &m else {
                    panic!("an invalid initiate without a request")
                };
                assert!(request.spec.validate(&self.limits).is_err());
                assert_eq!(a.state_name(), "idle");
            }
            Ok(AgentEvent::WatchStart) => {
                assert_eq!(before, "idle");
                assert!(a.is_watching());
            }
            Ok(AgentEvent::WatchEnd) => {
                assert_eq!(before, "watching the host");
                assert_eq!(a.state_name(), "idle");
            }
            Ok(AgentEvent::WatchRefused(_)) => {
                assert_eq!(before, "watching the host", "one watch at a time");
                assert!(a.is_watching(), "the running watch goes on");
            }
            Ok(AgentEvent::Bye) => {
                self.closed = true;
                assert_eq!(a.state_name(), "closed");
            }
            Err(ProtoError::Unexpected { .. }) => {
                assert_eq!(a.state_name(), before, "an error moved the state")
            }
            Err(e) => panic!("on_client failed with {e}"),
        }
        if a.state_name() != "awaiting data connections" {
            self.awaited = None;
        }
        r
    }

    /// The lowest flow whose data connection is awaited and has not arrived
    /// (0 when none is awaited).
    pub fn next_flow(&self) -> u32 {
        match &self.awaited {
            Some((n, seen)) => (0..*n as u32).find(|f| !seen.contains(f)).unwrap_or(0),
            None => 0,
        }
    }

    /// `AgentSession::on_data_connection`, checked.
    pub fn on_data(&mut self, flow: u32, now: Instant) -> Result<bool, ProtoError> {
        let before = self.session.state_name();
        let r = self.session.on_data_connection(flow, now);
        match (&mut self.awaited, &r) {
            (Some((n, seen)), Ok(last)) => {
                assert!(u64::from(flow) < *n, "flow {flow} of {n} taken");
                assert!(seen.insert(flow), "flow {flow} taken twice");
                assert_eq!(
                    *last,
                    seen.len() as u64 == *n,
                    "last one at {} of {n}",
                    seen.len()
                );
                if *last {
                    assert_eq!(self.session.state_name(), "awaiting go");
                    assert_eq!(self.session.deadline(), Some(now + self.setup));
                    self.awaited = None;
                }
            }
            (Some((n, seen)), Err(_)) => {
                assert!(
                    u64::from(flow) >= *n || seen.contains(&flow),
                    "flow {flow} refused"
                );
                assert_eq!(self.session.state_name(), before, "an error moved the state");
            }
            (None, Ok(_)) => panic!("data connection taken while {before}"),
            (None, Err(_)) => assert_eq!(self.session.state_name(), before),
        }
        r
    }

    /// The test ended (`finish`) or the host cannot run it (`reject`).
    /// The initiated test is over: idle again.
    pub fn end_initiate(&mut self) {
        assert_eq!(self.session.state_name(), "running a test as a client (initiate)");
        self.session.end_initiate();
        assert_eq!(self.session.state_name(), "idle");
    }

    pub fn end_test(&mut self, finish: bool) {
        if finish {
            self.session.finish()
        } else {
            self.session.reject()
        }
        let want = if self.closed { "closed" } else { "idle" };
        assert_eq!(self.session.state_name(), want);
        self.awaited = None;
    }

    /// The agent's own set-up of the test is done at `now`.
    pub fn set_up_done(&mut self, now: Instant) {
        let before = self.session.deadline();
        self.session.set_up_done(now);
        if SETUP_STATES[1..].contains(&self.state()) {
            assert_eq!(self.session.deadline(), Some(now + self.setup));
        } else {
            assert_eq!(self.session.deadline(), before);
        }
    }

    /// The invariants that hold between steps, at `now`; whether the
    /// current step's deadline has passed.
    pub fn check(&self, now: Instant) -> bool {
        let a = &self.session;
        let state = a.state_name();
        assert_eq!(a.deadline().is_some(), SETUP_STATES.contains(&state), "{state}");
        assert_eq!(a.is_running(), state == "running a test");
        assert_eq!(self.closed, state == "closed");
        if let Some(d) = a.deadline() {
            assert!(d <= now + self.setup, "deadline beyond the set-up timeout");
            assert!(d >= self.t0 + self.setup, "deadline before any step could start");
        }
        let overdue = a.deadline().is_some_and(|d| now >= d);
        match a.check_deadline(now) {
            Ok(()) => assert!(!overdue, "a passed deadline not reported"),
            Err(ProtoError::Timeout(_)) => assert!(overdue, "a timeout before the deadline"),
            Err(e) => panic!("check_deadline failed with {e}"),
        }
        overdue
    }
}
