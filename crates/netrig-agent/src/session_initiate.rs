//! A control session's `initiate` (protocol 8): this agent runs a test as a client against
//! another agent for the client that asked, and sends back the whole result. Who may ask
//! (a client that proved a key this agent's `--authorized-keys` holds), what it may reach
//! (`--allow-initiate`, `--initiate-keys`, checked by the runner once the target proved its
//! key) and what it may take (this agent's per-test limits and totals, as for a test of its
//! own) are decided here; the run is the [`crate::initiate::Initiator`]'s.

use super::{share_of, Control, SessionError, Then};
use crate::metrics::Refusal;
use netrig_proto::conn::ConnError;
use netrig_proto::initiate::{InitiateRequest, RESULT_MARGIN_S};
use netrig_proto::message::{HEARTBEAT, SILENCE_LIMIT};
use netrig_proto::{AgentMsg, ClientMsg};
use std::time::{Duration, Instant, UNIX_EPOCH};

impl Control<'_> {
    /// Why this session may not initiate, if it may not.
    fn initiate_refusal(&self) -> Option<String> {
        let config = &self.shared.config;
        if config.initiate.is_none() {
            return Some(
                "this agent does not run tests against other agents: its operator has not allowed it \
                 (netrig serve --allow-initiate NET or --initiate-keys FILE)"
                    .into(),
            );
        }
        if config.auth.authorized.is_none() || !self.authenticated() {
            return Some(
                "this agent runs tests against other agents only for a client that proved a key of its \
                 --authorized-keys (the agent needs --authorized-keys, the client --key)"
                    .into(),
            );
        }
        if config.auth.key.is_none() {
            return Some(
                "this agent has no key of its own (netrig serve --key FILE): the agents it would test \
                 could not tell who it is"
                    .into(),
            );
        }
        None
    }

    /// An `initiate` the session's state machine took: refused, or run with heartbeats both
    /// ways until its result (or its end) is sent.
    pub(super) fn on_initiate(&mut self, request: InitiateRequest) -> Result<Then, SessionError> {
        let shared = self.shared;
        let checked = match self.initiate_refusal() {
            Some(why) => Err((Refusal::Initiate, why)),
            None => request
                .validate(super::agent_realtime_ns())
                .map_err(|e| (Refusal::Spec, e))
                .and_then(|()| {
                    shared
                        .budget
                        .reserve(share_of(&request.spec))
                        .and_then(|r| super::host_can_run(&request.spec, &shared.config.limits).map(|()| r))
                        .map_err(|e| (Refusal::Caps, e))
                }),
        };
        let reservation = match checked {
            Ok(r) => r,
            Err((why, reason)) => {
                shared.metrics.refused(why);
                log::info!("{}: initiate refused: {reason}", self.peer);
                return self.initiate_over(AgentMsg::InitiateRejected { reason });
            }
        };
        log::info!(
            "{}: initiate: {} {} flow(s), {}, to {}",
            self.peer,
            request.spec.kind(),
            request.spec.flows,
            request.spec.limit,
            request.target
        );
        let config = shared.config.initiate.clone().expect("checked above");
        let job = crate::initiate::Job {
            target: request.target.clone(),
            start_at: request
                .start_at_ns
                .map(|ns| UNIX_EPOCH + Duration::from_nanos(ns)),
            key: shared.config.auth.key.clone(),
            spec: request.spec.clone(),
            client: request.client.clone(),
            allow: config.clone(),
        };
        let limit = self.initiate_limit(&request);
        let mut running = config.runner.start(job);
        let outcome = self.await_initiated(&mut *running, limit);
        drop(reservation);
        match outcome? {
            Some(Ok(result)) => self.initiate_over(AgentMsg::InitiateDone {
                result: Box::new(result),
            }),
            Some(Err(reason)) => {
                log::info!("{}: initiated test failed: {reason}", self.peer);
                self.initiate_over(AgentMsg::InitiateRejected { reason })
            }
            // The client left.
            None => Ok(Then::End),
        }
    }

    /// The longest an initiated test may take: its length, twice the set-up timeout (this
    /// agent's, standing for the target's too) and a margin.
    fn initiate_limit(&self, request: &InitiateRequest) -> Duration {
        let setup = self.shared.config.limits.setup_timeout_s;
        let most = self.shared.config.limits.max_duration_s as f64;
        let length = match request.spec.limit {
            netrig_proto::spec::Limit::Duration { seconds } => seconds.min(most),
            netrig_proto::spec::Limit::Bytes { .. } => most,
        };
        let ahead = request
            .start_at_ns
            .map_or(0.0, |t| t.saturating_sub(super::agent_realtime_ns()) as f64 / 1e9);
        Duration::from_secs_f64(length + ahead) + Duration::from_secs(2 * setup + RESULT_MARGIN_S)
    }

    /// Heartbeats both ways while the test runs: its outcome, or `None` when the client left.
    fn await_initiated(
        &mut self,
        running: &mut dyn crate::initiate::Running,
        limit: Duration,
    ) -> Result<Option<Result<serde_json::Value, String>>, SessionError> {
        let began = Instant::now();
        let mut heard = Instant::now();
        let mut aborted: Option<String> = None;
        loop {
            if let Some(outcome) = running.wait(Duration::from_millis(200)) {
                return Ok(Some(match aborted {
                    Some(why) => Err(format!("aborted by the client: {why}")),
                    None => outcome,
                }));
            }
            if began.elapsed() > limit {
                running.cancel();
                let end = running.wait(Duration::from_secs(10));
                let _ = end;
                return Ok(Some(Err(format!(
                    "the test ran past {} s, the most this agent gives it (its length, twice the \
                     set-up timeout and {RESULT_MARGIN_S} s); stopped",
                    limit.as_secs()
                ))));
            }
            if heard.elapsed() > SILENCE_LIMIT {
                running.cancel();
                let _ = running.wait(Duration::from_secs(10));
                return Err(SessionError::Test(format!(
                    "the client sent nothing for {} s during an initiated test (no heartbeat): it is \
                     stopped or gone; the test is stopped",
                    SILENCE_LIMIT.as_secs()
                )));
            }
            self.conn.send(&AgentMsg::Heartbeat)?;
            match self
                .conn
                .recv::<ClientMsg>(HEARTBEAT.saturating_sub(Duration::from_millis(200)))
            {
                Ok(ClientMsg::Heartbeat) => heard = Instant::now(),
                Ok(ClientMsg::Abort { reason }) if aborted.is_none() => {
                    heard = Instant::now();
                    running.cancel();
                    aborted = Some(reason);
                }
                Ok(ClientMsg::Bye) | Err(ConnError::Closed) => {
                    running.cancel();
                    let _ = running.wait(Duration::from_secs(10));
                    return Ok(None);
                }
                Ok(other) => {
                    running.cancel();
                    let _ = running.wait(Duration::from_secs(10));
                    return Err(SessionError::Test(format!(
                        "{} during an initiated test: only heartbeat, abort and bye may come then",
                        other.name()
                    )));
                }
                Err(ConnError::Timeout(_)) => {}
                Err(e) => {
                    running.cancel();
                    let _ = running.wait(Duration::from_secs(10));
                    return Err(e.into());
                }
            }
        }
    }

    /// Sends the initiate's answer; the session is idle again.
    fn initiate_over(&mut self, answer: AgentMsg) -> Result<Then, SessionError> {
        self.conn.send(&answer)?;
        self.sm.end_initiate();
        self.idle_until = Instant::now() + self.shared.config.idle_timeout;
        Ok(Then::CheckIdle)
    }
}
