//! One control session: handshake, then tests one after another.

use crate::hooks::{HookEnv, Phase, TestOutcome};
use crate::metrics::Refusal;
use crate::peer::canonical_ip;

#[path = "session_initiate.rs"]
mod initiate;
use crate::rate_limit::{RateLimit, WARNINGS_PER_SECOND};
use crate::registry::{DataConn, Registration};
use crate::shared::Shared;
use netrig_engine::runner::{run_side, RunControl, RunPlan, SideFlows, SideOutcome};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::{sockopt, Flow, FlowSlot, FlowSocket};
use netrig_kinds::{Ends, Workloads};
use netrig_proto::conn::{ConnError, FramedConn};
use netrig_proto::message::SILENCE_LIMIT;
use netrig_proto::report::{AppliedOptions, BufPair, CounterReport, Role, SideReport};
use netrig_proto::session::{AgentEvent, AgentSession};
use netrig_proto::spec::Limit;
use netrig_proto::{
    encode_frame, negotiate, AgentMsg, ClientMsg, ControlPreamble, DataHello, Direction, SessionCookie,
    TestSpec, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, SOFTWARE_VERSION,
};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sessions that end in an error, as warnings: a few a second at most.
static SESSION_END_LOG: Mutex<RateLimit> =
    Mutex::new(RateLimit::new("sessions ended in an error", WARNINGS_PER_SECOND));

/// A control connection's preamble read: the protocol version its session
/// speaks, or the answer that refuses it (a frame) and why, for the log.
/// Its place among the sessions comes later, with its hello
/// ([`crate::admission`]).
pub(crate) fn negotiate_version(preamble: &ControlPreamble) -> Result<u16, (Vec<u8>, String)> {
    negotiate(
        (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION),
        (preamble.min_version, preamble.max_version),
    )
    .ok_or_else(|| {
        (
            encode_frame(&AgentMsg::VersionMismatch {
                agent_min: MIN_PROTOCOL_VERSION,
                agent_max: PROTOCOL_VERSION,
                software: SOFTWARE_VERSION.into(),
            }),
            format!(
                "client speaks protocol {}..={}, this agent {}..={}",
                preamble.min_version, preamble.max_version, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION
            ),
        )
    })
}

#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("{0}")]
    Conn(#[from] ConnError),
    #[error("{0}")]
    Proto(#[from] netrig_proto::ProtoError),
    #[error("{0}")]
    Test(String),
}

/// `read`: what was read of the connection past its preamble before it
/// came here (by a run holding the listener), the start of its first frame.
/// `key`: the client's, for its places ([`crate::peer::client_key`]);
/// `pre`: its place among the connections waiting for their hello, given
/// back once the hello is in (for a session place) or the session ends.
pub(crate) fn serve_control(
    stream: TcpStream,
    read: &[u8],
    peer: &str,
    key: IpAddr,
    version: u16,
    shared: Arc<Shared>,
    pre: crate::admission::PreSlot,
) {
    let mut pre = Some(pre);
    let _ = stream.set_nodelay(true);
    let mut conn = match FramedConn::with_read(stream, netrig_proto::MAX_CLIENT_FRAME_LEN, read) {
        Ok(c) => c,
        // A frame over the limit in what came with the preamble.
        Err(e) => {
            warn_session_end(peer, &e.to_string());
            return;
        }
    };
    // The session's state (its place, a watch) is gone before the error is sent.
    let result =
        Control::start(&mut conn, &shared, (peer, key, version), &mut pre).and_then(|mut c| c.serve());
    if let Err(e) = result {
        let msg = e.to_string();
        if msg.contains("client aborted") {
            log::info!("{peer}: session ended: {msg}");
        } else {
            // A peer may open sessions only to end them (a truncated frame
            // and a FIN, say): their warnings are rate-limited.
            warn_session_end(peer, &msg);
        }
        let _ = conn.send(&AgentMsg::Error {
            message: e.to_string(),
        });
    }
}

/// A session's end in an error, as a warning (a few a second at most).
fn warn_session_end(peer: &str, msg: &str) {
    if SESSION_END_LOG
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .allow(Instant::now())
    {
        log::warn!("{peer}: session ended: {msg}");
    }
}

/// What the session does once a message is handled.
#[derive(Debug, PartialEq)]
enum Then {
    /// Reads the next message.
    Next,
    /// Marks the session idle if it is (a test ended or was refused, a
    /// watch ended or was not started), then reads the next message.
    CheckIdle,
    /// Ends the session, without an error.
    End,
}

/// A control session between its messages: what it read of its client so
/// far, and what it holds.
struct Control<'a> {
    conn: &'a mut FramedConn,
    shared: &'a Arc<Shared>,
    peer: &'a str,
    /// The client's key, for its places.
    key: IpAddr,
    /// The protocol the session speaks.
    version: u16,
    welcome_auth: netrig_proto::auth::WelcomeAuth,
    sm: AgentSession,
    /// Set by the hello: the client's key, if it proved one.
    auth: Option<netrig_proto::auth::AgentAuthSession>,
    /// The hello must be whole by then: until it is, the connection holds
    /// no session place, only one in the pre-session pool.
    hello_by: Instant,
    /// Nothing the client sends moves this: only the end of a test does.
    idle_until: Instant,
    /// When the client was last heard (a watch's silence).
    last_heard: Instant,
    /// A watch of this host (protocol 6) and the thread it holds.
    watch: Option<(crate::watch::Watch, crate::budget::Reservation<'a>)>,
    /// Its session place, once its hello is in.
    admission: Option<crate::admission::Admission>,
    /// Its place in the pre-session pool, until then.
    pre: &'a mut Option<crate::admission::PreSlot>,
}

impl<'a> Control<'a> {
    /// Welcomes the client: the session, awaiting its hello.
    fn start(
        conn: &'a mut FramedConn,
        shared: &'a Arc<Shared>,
        (peer, key, version): (&'a str, IpAddr, u16),
        pre: &'a mut Option<crate::admission::PreSlot>,
    ) -> Result<Control<'a>, SessionError> {
        let limits = &shared.config.limits;
        let welcome_auth = shared.config.auth.welcome();
        conn.send(&AgentMsg::Welcome {
            version,
            software: SOFTWARE_VERSION.into(),
            limits: limits.clone(),
            auth: welcome_auth.clone(),
            clock: agent_clock(&welcome_auth.nonce.0),
            name: (version >= netrig_proto::initiate::INITIATE_VERSION)
                .then(|| shared.config.name.clone())
                .flatten(),
        })?;
        let sm = AgentSession::new(limits.clone(), Instant::now());
        let hello_by = Instant::now() + shared.config.greeting_timeout;
        Ok(Control {
            conn,
            shared,
            peer,
            key,
            version,
            welcome_auth,
            sm,
            auth: None,
            hello_by,
            idle_until: Instant::now() + shared.config.idle_timeout,
            last_heard: Instant::now(),
            watch: None,
            admission: None,
            pre,
        })
    }

    /// Messages until the client leaves, is silent past a deadline or breaks
    /// the protocol.
    fn serve(&mut self) -> Result<(), SessionError> {
        loop {
            let wait = self.deadline().saturating_duration_since(Instant::now());
            let msg: ClientMsg = match self.conn.recv(wait) {
                Ok(m) => m,
                Err(ConnError::Timeout(_)) => {
                    self.timed_out(Instant::now())?;
                    continue;
                }
                Err(ConnError::Closed) if self.admission.as_ref().is_some_and(|a| a.evicted()) => {
                    return Err(self.evicted())
                }
                Err(ConnError::Closed) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            match self.on_message(msg)? {
                Then::Next => {}
                Then::CheckIdle => self.check_idle()?,
                Then::End => return Ok(()),
            }
        }
    }

    /// Until when the session waits for the client's next message. Before
    /// the hello both hold: the hello's set-up step and the idle deadline,
    /// which runs from the welcome. A watch has its own: the client's
    /// heartbeats, and its limit.
    fn deadline(&self) -> Instant {
        match &self.watch {
            Some((w, _)) => (self.last_heard + SILENCE_LIMIT).min(w.hard_deadline(self.grace())),
            None if self.admission.is_none() => self.hello_by.min(self.idle_until),
            None => self
                .sm
                .deadline()
                .map_or(self.idle_until, |d| d.min(self.idle_until)),
        }
    }

    /// A watch's time past its limit for its end to come: the set-up steps'.
    fn grace(&self) -> Duration {
        Duration::from_secs(self.shared.config.limits.setup_timeout_s)
    }

    /// Nothing came by the deadline at `now`: Ok when the session waits on
    /// (another deadline than the one that passed), or why it ends.
    fn timed_out(&self, now: Instant) -> Result<(), SessionError> {
        let config = &self.shared.config;
        if let Some((w, _)) = &self.watch {
            if now >= w.hard_deadline(self.grace()) {
                return Err(SessionError::Test(format!(
                    "the watch reached its limit of {} s and no watch_end came within {} s; closing",
                    watch_limit(&config.limits).as_secs(),
                    self.grace().as_secs()
                )));
            }
            if now >= self.last_heard + SILENCE_LIMIT {
                return Err(SessionError::Test(format!(
                    "the client sent nothing for {} s during a watch (no heartbeat): it is stopped \
                     or gone; the watch ends",
                    SILENCE_LIMIT.as_secs()
                )));
            }
            return Ok(());
        }
        if self.admission.is_none() && now < self.idle_until {
            if now < self.hello_by {
                return Ok(());
            }
            return Err(SessionError::Test(format!(
                "no whole hello within {} s of the welcome (the agent's greeting timeout); closing",
                config.greeting_timeout.as_secs_f64()
            )));
        }
        self.sm.check_deadline(now)?;
        if now < self.idle_until {
            return Ok(());
        }
        Err(SessionError::Test(format!(
            "no test asked for within {} s of the welcome or of the last test (the agent's \
             --idle-timeout); closing",
            config.idle_timeout.as_secs()
        )))
    }

    /// Why the session ends when its place was taken to make room.
    fn evicted(&self) -> SessionError {
        SessionError::Test(format!(
            "the agent closed this idle session to make room for a client from another address: all its \
             sessions (its --max-sessions, {}) were taken, and {} held more of them than the newcomer's",
            self.shared.config.limits.max_sessions,
            crate::admission::whose(self.key)
        ))
    }

    /// Whether the client proved its key in its hello.
    fn authenticated(&self) -> bool {
        self.auth.as_ref().is_some_and(|a| a.client_key.is_some())
    }

    /// One message of the client, through the session's state machine.
    fn on_message(&mut self, msg: ClientMsg) -> Result<Then, SessionError> {
        self.last_heard = Instant::now();
        // A request or a watch makes the session busy: no longer one to
        // close for room (unless that happened already).
        if matches!(
            msg,
            ClientMsg::TestRequest { .. } | ClientMsg::WatchStart | ClientMsg::Initiate { .. }
        ) {
            if let Some(a) = &self.admission {
                a.set_idle(false).map_err(|()| self.evicted())?;
            }
        }
        // Heartbeats sent while the test ended may follow it; they say
        // nothing else (and renew no deadline but a watch's silence).
        if matches!(msg, ClientMsg::Heartbeat) && self.version >= netrig_proto::message::HEARTBEAT_VERSION {
            return Ok(Then::Next);
        }
        // A clock probe's arrival, read first (the clock probe's t2).
        let probe_received = if matches!(msg, ClientMsg::ClockProbe { .. }) {
            agent_realtime_ns()
        } else {
            0
        };
        beyond_protocol(&msg, self.version)?;
        // An authenticated session's requests are checked before anything else.
        if let (ClientMsg::TestRequest { spec, auth }, Some(a)) = (&msg, self.auth.as_mut()) {
            if let Err(e) = a.check_request(spec, auth.as_ref()) {
                self.shared.metrics.refused(Refusal::Auth);
                return Err(SessionError::Test(format!("authentication failed: {e}")));
            }
        }
        if let (ClientMsg::Initiate { request, auth }, Some(a)) = (&msg, self.auth.as_mut()) {
            if let Err(e) = a.check_initiate(request, auth.as_ref()) {
                self.shared.metrics.refused(Refusal::Auth);
                return Err(SessionError::Test(format!("authentication failed: {e}")));
            }
        }
        Ok(match self.sm.on_client(msg, Instant::now())? {
            AgentEvent::Hello { software, auth } => self.on_hello(&software, &auth)?,
            AgentEvent::TestInvalid(reason) => {
                self.shared.metrics.refused(Refusal::Spec);
                log::info!("{}: test refused: {reason}", self.peer);
                self.conn.send(&AgentMsg::TestRejected { reason })?;
                Then::CheckIdle
            }
            AgentEvent::TestRequested(spec) => self.on_test_request(&spec)?,
            AgentEvent::WatchStart => self.on_watch_start()?,
            AgentEvent::WatchRefused(reason) => {
                self.shared.metrics.refused(Refusal::Watch);
                self.conn.send(&AgentMsg::WatchRejected { reason })?;
                Then::CheckIdle
            }
            AgentEvent::WatchEnd => self.on_watch_end()?,
            // An abort ends a watch without an answer.
            AgentEvent::Abort(_) if self.watch.is_some() => {
                self.watch = None;
                self.idle_until = Instant::now() + self.shared.config.idle_timeout;
                Then::CheckIdle
            }
            AgentEvent::ClockProbe { seq } => {
                self.conn.send(&AgentMsg::ClockEcho {
                    seq,
                    received_ns: probe_received,
                    sent_ns: agent_realtime_ns().max(probe_received),
                })?;
                Then::CheckIdle
            }
            AgentEvent::Initiate(request) => self.on_initiate(request)?,
            AgentEvent::InitiateInvalid(reason) => {
                self.shared.metrics.refused(Refusal::Spec);
                log::info!("{}: initiate refused: {reason}", self.peer);
                self.conn.send(&AgentMsg::InitiateRejected { reason })?;
                Then::CheckIdle
            }
            AgentEvent::Bye => Then::End,
            AgentEvent::Go | AgentEvent::Abort(_) => Then::CheckIdle,
        })
    }

    /// Idle again (no test, no watch): a session that may be closed to make room.
    fn check_idle(&self) -> Result<(), SessionError> {
        if let Some(a) = &self.admission {
            if self.sm.is_idle() && self.watch.is_none() && !a.is_idle() {
                a.set_idle(true).map_err(|()| self.evicted())?;
            }
        }
        Ok(())
    }

    /// The hello: authenticated (or refused), then a session place (or
    /// `busy`, which ends the session).
    fn on_hello(
        &mut self,
        software: &str,
        auth: &netrig_proto::auth::HelloAuth,
    ) -> Result<Then, SessionError> {
        let (signature, a) = self
            .shared
            .config
            .auth
            .on_hello(self.version, &self.welcome_auth, Some(auth))
            .map_err(|e| {
                self.shared.metrics.refused(Refusal::Auth);
                SessionError::Test(format!("authentication failed: {e}"))
            })?;
        // Now, and only now, a session place.
        let handle = self
            .conn
            .try_clone_stream()
            .map_err(|e| SessionError::Test(format!("control socket: {e}")))?;
        let config = &self.shared.config;
        let caps = (
            config.limits.max_sessions as usize,
            config.max_sessions_per_client,
        );
        let peer = self.peer;
        match crate::admission::take_slot(&self.shared.slots, caps, self.key, a.client_key.is_some(), handle)
        {
            Ok((adm, closed)) => {
                if let Some(k) = closed {
                    log::info!(
                        "{peer}: closed an idle session of {} to make room (--max-sessions {})",
                        crate::admission::whose(k),
                        config.limits.max_sessions
                    );
                }
                self.admission = Some(adm);
                *self.pre = None;
                self.shared.metrics.session();
            }
            Err(reason) => {
                self.shared.metrics.refused(Refusal::Busy);
                log::info!("{peer}: refused: {reason}");
                self.conn.send(&AgentMsg::Busy { reason })?;
                return Ok(Then::End);
            }
        }
        let version = self.version;
        match &a.client_key {
            Some(k) => {
                log::info!("{peer}: client netrig {software}, protocol {version}, authenticated as {k}")
            }
            None => log::info!("{peer}: client netrig {software}, protocol {version}"),
        }
        self.auth = Some(a);
        self.conn.send(&AgentMsg::HelloAccepted { signature })?;
        Ok(Then::CheckIdle)
    }

    /// A valid request: refused when the agent's caps or this host cannot
    /// take it or its set-up hook fails; else run, its results sent.
    fn on_test_request(&mut self, spec: &TestSpec) -> Result<Then, SessionError> {
        let shared = self.shared;
        // Checked before anything is allocated, the operator's caps first,
        // then what this host can hold; the share is taken once the data
        // connections are in (run_test).
        let checked = shared
            .budget
            .check(share_of(spec))
            .and_then(|()| host_can_run(spec, &shared.config.limits));
        if let Err(reason) = checked {
            shared.metrics.refused(Refusal::Caps);
            return self.refuse_test(reason);
        }
        let env = HookEnv {
            kind: spec.kind(),
            peer: self.conn.stream().peer_addr().ok().map(|a| canonical_ip(a.ip())),
            agent_port: shared.udp_local.port(),
            outcome: None,
        };
        if let Err(reason) = set_up(spec, shared, &env, self.peer) {
            shared.metrics.refused(Refusal::Hook);
            return self.refuse_test(reason);
        }
        // The client's set-up steps get their whole time after the hook's.
        self.sm.set_up_done(Instant::now());
        log::info!(
            "{}: {} {} flow(s), {}",
            self.peer,
            spec.kind(),
            spec.flows,
            spec.limit
        );
        let test = TestContext {
            shared,
            peer: self.peer,
            heartbeats: self.version >= netrig_proto::message::HEARTBEAT_VERSION,
            disclose: if self.authenticated() {
                crate::Disclose::Full
            } else {
                shared.config.disclose
            },
        };
        let mut writer = None;
        let report = run_test(self.conn, &mut self.sm, spec, &test, &mut writer);
        // Its buffers are freed: back to the system, not kept by the allocator.
        crate::memory::release_freed();
        // Before the results go (a failure is among their warnings),
        // and before an error ends the session.
        let outcome = match report {
            Ok(_) => TestOutcome::Completed,
            Err(_) => TestOutcome::Failed,
        };
        let flows = report
            .iter()
            .flat_map(|r| r.flows.iter().map(|f| (f.role, f.total_bytes)));
        shared.metrics.test(spec.kind(), report.is_ok(), flows);
        let warning = tear_down(spec, shared, &env, outcome, self.peer);
        // Heartbeats until here: the tear-down hook may take a while.
        let dropped = writer.take().map_or(0, crate::writer::ControlWriter::finish);
        let report = with_end_warnings(report?, warning, dropped);
        self.conn.send(&AgentMsg::Results {
            report: Box::new(report),
        })?;
        self.sm.finish();
        self.idle_until = Instant::now() + shared.config.idle_timeout;
        Ok(Then::CheckIdle)
    }

    /// Tells the client why its test will not run; the session is idle
    /// again, as after a test refused by its spec: one that may be closed
    /// to make room (it stayed marked busy, so a client whose test was
    /// refused once kept its place for good).
    fn refuse_test(&mut self, reason: String) -> Result<Then, SessionError> {
        log::info!("{}: test refused: {reason}", self.peer);
        self.sm.reject();
        self.conn.send(&AgentMsg::TestRejected { reason })?;
        Ok(Then::CheckIdle)
    }

    /// A watch of this host, unless the agent tells this client nothing of
    /// it or has no thread to spare.
    fn on_watch_start(&mut self) -> Result<Then, SessionError> {
        let limits = &self.shared.config.limits;
        let started = match watch_refusal(self.shared.config.disclose, self.authenticated()) {
            Some(why) => Err(why),
            None => {
                // The sampler's thread, among all tests' threads.
                let share = crate::budget::Share {
                    threads: 1,
                    ..Default::default()
                };
                self.shared.budget.reserve(share).and_then(|r| {
                    crate::watch::Watch::start(watch_limit(limits))
                        .map(|w| (w, r))
                        .map_err(|e| format!("cannot start the watch's thread: {e}"))
                })
            }
        };
        match started {
            Ok(w) => {
                log::info!("{}: watching this host for the client", self.peer);
                self.watch = Some(w);
                self.conn.send(&AgentMsg::WatchStarted {
                    limit_s: watch_limit(limits).as_secs(),
                })?;
            }
            Err(reason) => {
                self.shared.metrics.refused(Refusal::Watch);
                log::info!("{}: watch refused: {reason}", self.peer);
                self.sm.end_watch();
                self.conn.send(&AgentMsg::WatchRejected { reason })?;
            }
        }
        Ok(Then::CheckIdle)
    }

    /// The watch's end: what it saw of the host.
    fn on_watch_end(&mut self) -> Result<Then, SessionError> {
        let (w, reservation) = self
            .watch
            .take()
            .ok_or_else(|| SessionError::Test("watch_end without a watch (the agent lost it)".into()))?;
        let view = w.end().map_err(SessionError::Test)?;
        drop(reservation);
        log::info!("{}: watch ended after {:.1} s", self.peer, view.window_s);
        self.conn.send(&AgentMsg::HostView {
            view: Box::new((&view).into()),
        })?;
        self.idle_until = Instant::now() + self.shared.config.idle_timeout;
        Ok(Then::CheckIdle)
    }
}

/// A message the session's protocol `version` does not have: the error
/// that ends the session.
fn beyond_protocol(msg: &ClientMsg, version: u16) -> Result<(), SessionError> {
    if matches!(msg, ClientMsg::Initiate { .. }) && version < netrig_proto::initiate::INITIATE_VERSION {
        return Err(SessionError::Test(format!(
            "initiate is protocol {}'s; this session speaks {version}",
            netrig_proto::initiate::INITIATE_VERSION
        )));
    }
    if matches!(msg, ClientMsg::ClockProbe { .. }) && version < netrig_proto::clock::CLOCK_PROBE_VERSION {
        return Err(SessionError::Test(format!(
            "clock_probe needs protocol v{}; this session speaks v{version}",
            netrig_proto::clock::CLOCK_PROBE_VERSION
        )));
    }
    if matches!(msg, ClientMsg::WatchStart | ClientMsg::WatchEnd)
        && version < netrig_proto::message::WATCH_VERSION
    {
        return Err(SessionError::Test(format!(
            "{} needs protocol v{}; this session speaks v{version}",
            msg.name(),
            netrig_proto::message::WATCH_VERSION
        )));
    }
    Ok(())
}

/// Why a watch is refused to a client, whatever the host can spare: the
/// agent's `--disclose minimal` tells a client that did not authenticate
/// nothing of its host's counters.
fn watch_refusal(disclose: crate::Disclose, authenticated: bool) -> Option<String> {
    (disclose == crate::Disclose::Minimal && !authenticated).then(|| {
        "the agent tells clients that did not authenticate nothing of its host's \
         counters (its --disclose minimal): give this client's key with --key"
            .to_string()
    })
}

/// A test's report with what came after its run: the tear-down hook's
/// failure, and the interval samples and heartbeats the agent dropped for a
/// client that did not read them.
fn with_end_warnings(mut report: SideReport, teardown: Option<String>, dropped: u64) -> SideReport {
    report.warnings.extend(teardown);
    if dropped > 0 {
        report.warnings.push(format!(
            "remote: the agent dropped {dropped} interval sample(s) and heartbeat(s): the client \
             did not read its control connection fast enough"
        ));
    }
    report
}

/// How long a watch may run: the agent's longest test and its set-up
/// timeout (`--max-duration`, the set-up steps' 30 s).
fn watch_limit(limits: &netrig_proto::AgentLimits) -> Duration {
    Duration::from_secs(limits.max_duration_s.saturating_add(limits.setup_timeout_s))
}

/// Runs the spec's set-up hook, if it asks for one. When the hook fails the
/// test is refused, with the hook's status and the end of its output; the
/// tear-down hook, if asked for, runs all the same (its failure is added).
fn set_up(spec: &TestSpec, shared: &Shared, env: &HookEnv, peer: &str) -> Result<(), String> {
    let hooks = &spec.remote_hooks;
    let Some(name) = &hooks.setup else {
        return Ok(());
    };
    // The session's validation refused hooks this agent does not offer.
    let Some(offered) = &shared.config.hooks else {
        return Err(format!(
            "--remote-setup {name}: the agent offers no hooks (start it with --hooks DIR)"
        ));
    };
    let run = offered.run(name, Phase::Setup, env);
    run.log(peer);
    if run.ok() {
        return Ok(());
    }
    let mut reason = run.refusal();
    if let Some(w) = tear_down(spec, shared, env, TestOutcome::NotRun, peer) {
        reason.push_str(&format!("\n(then {})", w.trim_start_matches("remote: ")));
    } else if let Some(t) = &hooks.teardown {
        reason.push_str(&format!("\n(the tear-down hook {t} ran after it)"));
    }
    Err(reason)
}

/// Runs the spec's tear-down hook, if it asks for one: a warning when it fails.
fn tear_down(
    spec: &TestSpec,
    shared: &Shared,
    env: &HookEnv,
    outcome: TestOutcome,
    peer: &str,
) -> Option<String> {
    let name = spec.remote_hooks.teardown.as_ref()?;
    let Some(offered) = &shared.config.hooks else {
        return Some(format!(
            "remote: --remote-teardown {name}: the agent offers no hooks (start it with --hooks DIR)"
        ));
    };
    let env = HookEnv {
        outcome: Some(outcome),
        ..env.clone()
    };
    let run = offered.run(name, Phase::Teardown, &env);
    run.log(peer);
    (!run.ok()).then(|| run.warning())
}

/// What the spec's validation cannot know: whether this host has what it asks for.
pub(crate) fn host_can_run(spec: &TestSpec, limits: &netrig_proto::AgentLimits) -> Result<(), String> {
    if let Ends::ClientOnly(_) = netrig_kinds::of(spec).ends() {
        return Err(format!(
            "{} runs from the client alone, against any server: an agent has no part in it",
            spec.kind()
        ));
    }
    if let Some(cpus) = &spec.remote_cpus {
        netrig_engine::affinity::check_cpus(cpus, "--remote-cpus (or -A's second CPU)")
            .map_err(|e| format!("on the agent's host, {e}"))?;
    }
    // Its transport, which this host's kernel may lack (MPTCP).
    netrig_engine::transport::check_kernel(spec.rules().transport(), "agent")?;
    let share = share_of(spec);
    // Its sockets, against the descriptors this process may still open.
    netrig_engine::files::check_open_files(share.flows, "the agent's host")?;
    // The buffers this host's workers would allocate, against the agent's bound.
    if share.buffer_bytes > limits.max_buffer_bytes {
        return Err(format!(
            "the test needs {} MiB of buffers on the agent ({} worker(s) x {} KiB: -m, -M, -r and -T \
             decide it) and the agent allows at most {} MiB per test (its --max-buffer)",
            share.buffer_bytes.div_ceil(1 << 20),
            share.threads - 1,
            spec.worker_buffer_bytes().div_ceil(1024),
            limits.max_buffer_bytes >> 20
        ));
    }
    Ok(())
}

/// How long a test's set-up waits for its next data connection.
const DATA_STALL: Duration = Duration::from_secs(10);

/// What a test needs of its session.
struct TestContext<'a> {
    shared: &'a Arc<Shared>,
    peer: &'a str,
    /// Both ends speak heartbeats (protocol 5).
    heartbeats: bool,
    /// What the results may tell of this host.
    disclose: crate::Disclose,
}

/// The share of the agent's totals a test takes: its workers and the run's
/// own thread, their buffers, its sockets.
pub(crate) fn share_of(spec: &TestSpec) -> crate::budget::Share {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let workers = spec.workers_on(cpus);
    crate::budget::Share {
        // The workers, the run's own thread, and a profile's reader (counted when asked for).
        threads: workers + 1 + u32::from(spec.profile),
        buffer_bytes: u64::from(workers).saturating_mul(spec.worker_buffer_bytes()),
        flows: netrig_engine::files::sockets_needed(spec),
    }
}

/// Sets up, runs and reports one test. The control connection's writer
/// during the run is left in `writer`, to stop once the results are ready.
fn run_test(
    conn: &mut FramedConn,
    sm: &mut AgentSession,
    spec: &TestSpec,
    test: &TestContext<'_>,
    writer: &mut Option<crate::writer::ControlWriter>,
) -> Result<SideReport, SessionError> {
    let shared = test.shared;
    let mut cookie = [0u8; 16];
    getrandom::fill(&mut cookie)
        .map_err(|e| SessionError::Test(format!("no randomness for a cookie: {e}")))?;
    let cookie = SessionCookie(cookie);
    // A connection-per-transaction test's connections all come during the
    // run, straight to the engine, and the cookie stays registered for all of it.
    let workload = netrig_kinds::of(spec).workload(spec);
    let per_transaction = matches!(workload, Workloads::Transient(_));
    let remote = SocketSettings::new(&spec.remote, spec.rules().tcp());
    let control_ip = conn.stream().peer_addr().map(|a| canonical_ip(a.ip())).ok();
    let arrivals = register(shared, spec, cookie, control_ip, per_transaction);
    let _registration = Registration {
        registry: &shared.registry,
        cookie,
    };
    conn.send(&AgentMsg::TestAccepted {
        cookie,
        warnings: vec![],
    })?;
    let environment = netrig_proto::report::measure::Environment::from(&netrig_metrics::collect());
    let counters_before = netrig_metrics::read_kernel_counters().ok();

    // Collect the data connections, configure each as it arrives.
    let mut got = Gathered::new(spec, &remote, control_ip);
    let data_rx = match &arrivals {
        Arrivals::Setup(rx) => Some(rx),
        Arrivals::Run(_) => None,
    };
    gather(conn, sm, test, data_rx, &mut got)?;
    if !per_transaction && !got.udp {
        close_extra(shared, cookie, data_rx, test.peer);
    }
    // The test's share of the agent's totals, taken now that its data
    // connections are in (checked when it was asked for; another test may
    // have taken it since), held until the test ends.
    let _reservation = shared
        .budget
        .reserve(share_of(spec))
        .map_err(|reason| SessionError::Test(format!("the test cannot start: {reason}")))?;
    // Opened before data_ready and the client's go, as the client opens its own: reading
    // /proc/kallsyms takes a while, and the window opens soon after go.
    let profile = crate::profile::AgentProfile::open(
        spec,
        shared.config.allow_profile,
        test.disclose == crate::Disclose::Full,
    );
    let ready_at = ready_and_go(conn, sm, shared)?;
    let start = Instant::now();
    let w = crate::writer::ControlWriter::start(
        conn.try_clone_stream()
            .map_err(|e| SessionError::Test(format!("control socket: {e}")))?,
        test.heartbeats.then_some(netrig_proto::message::HEARTBEAT),
    )
    .map_err(|e| SessionError::Test(format!("cannot start the control writer: {e}")))?;
    let sink = w.sink();
    *writer = Some(w);
    let plan = spec.flow_plan();
    // The set-up queue stays open until the test ends (a UDP client repeats
    // its hellos until it reads data_ready).
    let side = match workload {
        Workloads::Transient(workload) => SideFlows::Transient {
            workload,
            flows: plan
                .iter()
                .enumerate()
                .map(|(id, d)| FlowSlot::new(id as u32, *d, spec.role(*d, true), None))
                .collect(),
            intake: match &arrivals {
                Arrivals::Run(intake) => Some(intake.clone()),
                Arrivals::Setup(_) => None,
            },
        },
        Workloads::Connected(workload) => SideFlows::Connected {
            workload,
            flows: std::mem::take(&mut got.flows),
        },
    };
    let outcome = run_flows(
        conn,
        sm,
        spec,
        side,
        (start, ready_at),
        test,
        sink,
        (cookie.test_id(), profile.watch()),
    )?;
    let profile = profile.finish(spec, &outcome);
    if per_transaction {
        let dropped = shared.registry.dropped(&cookie) + outcome.dropped_connections;
        got.warnings
            .extend(transient_warnings(&outcome, got.requested, &remote, dropped));
    }
    got.warnings
        .extend(cap_warning(outcome.send_cap, outcome.window_s));
    let counters = match (counters_before, netrig_metrics::read_kernel_counters()) {
        (Some(b), Ok(a)) => Some(CounterReport::between(&b, &a, netrig_metrics::read_conntrack())),
        _ => None,
    };
    log::info!(
        "{}: done, {} bytes",
        test.peer,
        outcome.flows.iter().map(|f| f.window_bytes).sum::<u64>()
    );
    let mut report = got.report(outcome, counters, environment);
    report.profile = profile;
    if test.disclose == crate::Disclose::Minimal {
        withhold_host(&mut report);
    }
    Ok(report)
}

/// Where a test's data connections reach it: at set-up, through the
/// registry's queue; a connection-per-transaction test's, during the run,
/// through the engine's intake.
enum Arrivals {
    Setup(mpsc::Receiver<(DataHello, DataConn)>),
    Run(Arc<netrig_engine::intake::Intake>),
}

/// Registers the test's cookie, so that its data connections (from
/// `control_ip` alone, over TCP) reach it.
fn register(
    shared: &Arc<Shared>,
    spec: &TestSpec,
    cookie: SessionCookie,
    control_ip: Option<IpAddr>,
    per_transaction: bool,
) -> Arrivals {
    if per_transaction {
        let intake = shared
            .registry
            .register_run(cookie, run_intake_capacity(spec), control_ip);
        let arc = shared.clone();
        intake.offer_door(Box::new(move || crate::door::lend(&arc, cookie, control_ip)));
        Arrivals::Run(intake)
    } else {
        // Room for the client's repeated UDP hellos too.
        let expected = spec.connections() as usize;
        Arrivals::Setup(
            shared
                .registry
                .register(cookie, expected.saturating_mul(4).max(16), control_ip),
        )
    }
}

/// A test's data connections as set-up took them, each configured, and
/// what configuring them found.
struct Gathered<'s> {
    spec: &'s TestSpec,
    plan: Vec<Direction>,
    /// The flows the test has.
    expected: usize,
    /// Each direction's first flow (a sender's byte quota is counted from it).
    first_index: HashMap<Direction, u32>,
    udp: bool,
    /// The only address UDP flows may come from: the control connection's.
    control_ip: Option<IpAddr>,
    remote: &'s SocketSettings,
    requested: BufPair,
    flows: Vec<Flow>,
    /// Each flow's buffers and options as set-up found them.
    buffers: Vec<(u32, BufPair, AppliedOptions)>,
    warnings: Vec<String>,
    /// UDP flows whose hello came (the client repeats them).
    udp_seen: HashSet<u32>,
    foreign: ForeignHellos,
}

impl<'s> Gathered<'s> {
    fn new(spec: &'s TestSpec, remote: &'s SocketSettings, control_ip: Option<IpAddr>) -> Self {
        let plan = spec.flow_plan();
        let expected = spec.connections() as usize;
        let mut first_index = HashMap::new();
        for (i, d) in plan.iter().enumerate() {
            first_index.entry(*d).or_insert(i as u32);
        }
        Gathered {
            spec,
            plan,
            expected,
            first_index,
            udp: spec.rules().transport().datagrams(),
            control_ip,
            remote,
            requested: BufPair {
                snd: spec.remote.sndbuf,
                rcv: spec.remote.rcvbuf,
            },
            flows: Vec::with_capacity(expected),
            buffers: Vec::with_capacity(expected),
            warnings: Vec::new(),
            udp_seen: HashSet::new(),
            foreign: ForeignHellos::new(Instant::now()),
        }
    }

    /// What `hello` brought: its flow's socket, configured; `None` for what
    /// the test does not take (a repeated or stranger's UDP hello, the
    /// wrong protocol).
    fn socket(
        &mut self,
        hello: &DataHello,
        data: DataConn,
        sm: &mut AgentSession,
        test: &TestContext<'_>,
    ) -> Result<Option<FlowSocket>, SessionError> {
        let peer = test.peer;
        Ok(Some(match data {
            DataConn::Tcp(stream, _) if !self.udp => {
                sm.on_data_connection(hello.flow, Instant::now())?;
                sockopt::apply_connected(&stream, self.remote, true, "-S/--remote-sockbuf")
                    .map_err(|e| SessionError::Test(format!("agent {e}")))?;
                stream.into()
            }
            DataConn::Udp(from) if self.udp => {
                // Only the client's own address may open UDP flows: the agent
                // must never be made to send to a third party.
                if self.control_ip != Some(canonical_ip(from.ip())) {
                    // Said once a second at most, with how many: a peer must
                    // not be able to fill the log (40,000 hellos made 29,082
                    // lines).
                    if let Some(n) = self.foreign.count(Instant::now()) {
                        log::warn!(
                            "{peer}: {n} UDP hello(s) (the last for flow {} from {from}) not from the \
                             control connection's address; ignored",
                            hello.flow
                        );
                    }
                    return Ok(None);
                }
                if !self.udp_seen.insert(hello.flow) {
                    return Ok(None); // a repeated hello
                }
                sm.on_data_connection(hello.flow, Instant::now())?;
                let sock = crate::udp::flow_socket(test.shared.udp_local, from).map_err(|e| {
                    SessionError::Test(format!("agent: UDP socket for flow {}: {e}", hello.flow))
                })?;
                sockopt::apply_connected(&sock, self.remote, true, "-S/--remote-sockbuf")
                    .map_err(|e| SessionError::Test(format!("agent {e}")))?;
                sock.into()
            }
            _ => {
                log::warn!(
                    "{peer}: data connection of the wrong protocol for {}; ignored",
                    self.spec.kind()
                );
                return Ok(None);
            }
        }))
    }

    /// Flow `id`'s socket, configured: its buffers and options are read
    /// back, the first flow's warned about.
    fn add(&mut self, id: u32, socket: FlowSocket) {
        let spec = self.spec;
        let direction = self.plan[id as usize];
        let initial = sockopt::buffers(&socket);
        let applied = sockopt::applied(&socket);
        if self.flows.is_empty() {
            let got = (initial, &applied);
            let warned = sockopt::setup_warnings(self.requested, self.remote, got, "remote", "-S");
            self.warnings.extend(warned);
        }
        let role = spec.role(direction, true);
        let quota = match role {
            Role::Sender => spec.byte_quota(id - self.first_index[&direction]),
            _ => None,
        };
        self.buffers.push((id, initial, applied));
        self.flows.push(Flow::new(id, direction, role, socket, quota));
    }

    /// This end's report of the run: its flows with what set-up found of
    /// them, the warnings, the host's counters and environment.
    fn report(
        self,
        outcome: SideOutcome,
        counters: Option<CounterReport>,
        environment: netrig_proto::report::measure::Environment,
    ) -> SideReport {
        let by_id: HashMap<u32, _> = self.buffers.into_iter().map(|(id, b, a)| (id, (b, a))).collect();
        let flows = outcome
            .flows
            .iter()
            .map(|f| f.report(self.spec, self.requested, by_id.get(&f.id).cloned()))
            .collect();
        SideReport {
            flows,
            window_s: outcome.window_s,
            warnings: self.warnings,
            cpu: outcome.cpu,
            cpu_window_s: outcome.cpu_window_s,
            workers: outcome.workers,
            counters,
            environment: Some(environment),
            latency: outcome.latency,
            latency_histogram: None,
            schedule: outcome.schedule,
            witness: outcome.witness,
            one_way: outcome.one_way.map(|mut o| {
                o.zero_ns = skewed(o.zero_ns);
                o.ref_ns = skewed(o.ref_ns);
                o
            }),
            // run_test's, after the run.
            profile: None,
        }
    }
}

/// UDP hellos from a stranger's address, counted between two warnings.
struct ForeignHellos {
    since_warned: u64,
    warned: Instant,
}

impl ForeignHellos {
    fn new(now: Instant) -> Self {
        ForeignHellos {
            since_warned: 0,
            // The first is warned about at once.
            warned: now.checked_sub(Duration::from_secs(1)).unwrap_or(now),
        }
    }

    /// One more at `now`: how many to warn about, once a second at most.
    fn count(&mut self, now: Instant) -> Option<u64> {
        self.since_warned += 1;
        if now.saturating_duration_since(self.warned) < Duration::from_secs(1) {
            return None;
        }
        self.warned = now;
        Some(std::mem::take(&mut self.since_warned))
    }
}

/// Takes the test's data connections as they come, until it has them all.
///
/// Each data connection within [`DATA_STALL`] of the last (of
/// test_accepted for the first): a client that opens none, or stops,
/// holds its sockets and session no longer than that (and none of the
/// budget, taken only before data_ready). The client opens them one after
/// another: 10 s leaves room for a connect that lost three SYNs (1, 2 and
/// 4 s of retransmission).
fn gather(
    conn: &mut FramedConn,
    sm: &mut AgentSession,
    test: &TestContext<'_>,
    data_rx: Option<&mpsc::Receiver<(DataHello, DataConn)>>,
    got: &mut Gathered<'_>,
) -> Result<(), SessionError> {
    let shared = test.shared;
    let expected = got.expected;
    let mut last_control_check = Instant::now();
    let failed_accepts = shared.accept_failures.count();
    let stall = DATA_STALL;
    let mut next_by = Instant::now() + stall;
    while got.flows.len() < expected {
        if data_rx.is_some() && Instant::now() >= next_by {
            return Err(SessionError::Test(stalled(stall, got.flows.len(), expected)));
        }
        // Data connections the agent could not accept are the likeliest cause.
        sm.check_deadline(Instant::now()).map_err(|e| {
            match shared.accept_failures.since(failed_accepts) {
                Some(cause) => SessionError::Test(format!("{e}; {cause}")),
                None => e.into(),
            }
        })?;
        // A client may abort during set-up (checked now and then: thousands of
        // data connections must not each wait on the control socket).
        if last_control_check.elapsed() >= Duration::from_millis(100) {
            last_control_check = Instant::now();
            if let Some(msg) = conn.try_recv::<ClientMsg>(Duration::from_millis(1))? {
                sm.on_client(msg, Instant::now())?;
                return Err(SessionError::Test("client aborted during set-up".into()));
            }
        }
        let Some(data_rx) = data_rx else { break };
        let (hello, data) = match data_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(x) => x,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SessionError::Test("registry closed".into()))
            }
        };
        let Some(socket) = got.socket(&hello, data, sm, test)? else {
            continue;
        };
        next_by = Instant::now() + stall;
        got.add(hello.flow, socket);
    }
    Ok(())
}

/// Why set-up gave up: no data connection within `stall`, with `arrived` of
/// the test's `expected` in.
fn stalled(stall: Duration, arrived: usize, expected: usize) -> String {
    format!(
        "no data connection within {} s of {} ({arrived} of the test's {expected} arrived); the test is \
         given up",
        stall.as_secs_f64(),
        if arrived == 0 {
            "test_accepted"
        } else {
            "the last one"
        },
    )
}

/// Every flow of a TCP test is here: a data connection that comes now is
/// one too many, closed at once rather than held until the test ends. (UDP
/// keeps its registration: the client repeats its hellos until it reads
/// data_ready, and those are expected.)
fn close_extra(
    shared: &Shared,
    cookie: SessionCookie,
    data_rx: Option<&mpsc::Receiver<(DataHello, DataConn)>>,
    peer: &str,
) {
    shared.registry.unregister(&cookie);
    if let Some(rx) = data_rx {
        while let Ok((hello, extra)) = rx.try_recv() {
            if matches!(extra, DataConn::Tcp(..)) {
                log::info!(
                    "{peer}: data connection for flow {} beyond the test's flows; closed",
                    hello.flow
                );
            }
        }
    }
}

/// Tells the client its data connections are in and waits for its go:
/// the instant data_ready left.
fn ready_and_go(
    conn: &mut FramedConn,
    sm: &mut AgentSession,
    shared: &Shared,
) -> Result<Instant, SessionError> {
    // Before data_ready leaves, so no later than the client's time zero,
    // which it takes on reading it: this end's receivers count one-way
    // delay from here (netrig_proto::clock).
    let ready_at = Instant::now();
    conn.send(&AgentMsg::DataReady)?;
    // The client sends go as soon as it reads data_ready: the greeting's
    // time is plenty, and bounds how long a client that never sends it
    // holds the share.
    let go_wait = shared.config.greeting_timeout;
    let msg: ClientMsg = conn
        .recv(go_wait.min(Duration::from_secs(shared.config.limits.setup_timeout_s)))
        .map_err(|e| match e {
            ConnError::Timeout(_) => SessionError::Test(format!(
                "no go within {} s of data_ready; the test is given up",
                go_wait.as_secs_f64()
            )),
            e => e.into(),
        })?;
    match sm.on_client(msg, Instant::now())? {
        AgentEvent::Go => Ok(ready_at),
        AgentEvent::Abort(r) => Err(SessionError::Test(format!("client aborted: {r}"))),
        other => Err(SessionError::Test(format!("expected go, got {other}"))),
    }
}

/// What a connection-per-transaction run's outcome warns of: its first
/// connection's buffers and options, and the connections closed unanswered
/// (`dropped`, the registry's and the engine's).
fn transient_warnings(
    outcome: &SideOutcome,
    requested: BufPair,
    remote: &SocketSettings,
    dropped: u64,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(c) = outcome.flows.iter().find_map(|f| f.first_connection.as_ref()) {
        let got = (c.initial, &c.applied);
        warnings.extend(sockopt::setup_warnings(requested, remote, got, "remote", "-S"));
    }
    if dropped > 0 {
        warnings.push(format!(
            "remote: the agent closed {dropped} connection(s) unanswered: more arrived at once than its \
             queues hold (the client counts them as reset)"
        ));
    }
    warnings
}

/// This agent's `CLOCK_REALTIME` as it tells the client (the clock probe's
/// echo), ns since the epoch.
pub(super) fn agent_realtime_ns() -> u64 {
    skewed(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
    )
}

/// A reading of this agent's clock as it tells the client: with the
/// environment's `NETRIG_TEST_AGENT_CLOCK_SKEW_US` (tests only, signed µs)
/// added, as an agent on another kernel whose clock is that far ahead would
/// read it (the clock probe must find and remove it).
fn skewed(ns: u64) -> u64 {
    static SKEW: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    let skew = *SKEW.get_or_init(|| {
        std::env::var("NETRIG_TEST_AGENT_CLOCK_SKEW_US")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map_or(0, |us| us.saturating_mul(1000))
    });
    ns.saturating_add_signed(skew)
}

/// What the welcome says of this agent's clock: its kernel's boot id hashed
/// with the welcome's nonce (so that only a client on this kernel learns
/// anything from it; netrig_proto::clock). The
/// environment's `NETRIG_TEST_AGENT_NO_CLOCK` (tests only) leaves it out, as
/// an older agent's welcome does.
fn agent_clock(nonce: &[u8]) -> Option<netrig_proto::clock::AgentClock> {
    if std::env::var_os("NETRIG_TEST_AGENT_NO_CLOCK").is_some() {
        return None;
    }
    netrig_metrics::witness::boot_id().map(|id| netrig_proto::clock::AgentClock {
        boot_hash: netrig_proto::clock::boot_hash(nonce, &id),
    })
}

/// When the agent's `--max-rate` held its sends for more than 1 % of the
/// window (its workers' waits summed): the warning that says so, since the
/// remote's sending figures are then the cap's, not the path's.
fn cap_warning(cap: Option<netrig_engine::cap::CapUse>, window_s: f64) -> Option<String> {
    let c = cap?;
    let waited = c.waited.as_secs_f64();
    (waited > 0.01 * window_s.max(0.0)).then(|| {
        format!(
            "remote: the agent's --max-rate {} held its sends to it: its workers waited {waited:.2} s for it in \
             all (the window is {window_s:.2} s), so what the agent sent is the cap's rate, not the path's",
            netrig_proto::spec::kind::format_bps(c.cap_bps as f64)
        )
    })
}

/// What `--disclose minimal` keeps from a client that did not authenticate:
/// the host's identity and configuration, and its host-wide counts (which
/// show other traffic than the test's). The result says what is missing.
fn withhold_host(report: &mut SideReport) {
    report.environment = None;
    report.counters = None;
    report.witness = None;
    report.warnings.push(
        "remote: the agent withholds its host's environment (name, kernel, CPU model, sysctls), its \
         host-wide kernel counters and the witness of its figures from clients that did not authenticate \
         (its --disclose minimal): the remote figures cannot be checked against its kernel's own counts"
            .into(),
    );
}

/// Room for new connections of a connection-per-transaction test: every
/// connection the client may have in flight, within bounds.
fn run_intake_capacity(spec: &TestSpec) -> usize {
    (spec.flows as usize)
        .saturating_mul(spec.rules().in_flight() as usize)
        .clamp(1024, 65_536)
}

/// Runs the engine on its own thread while this one watches the control
/// connection, passing what the client sends through the session's state
/// machine: an abort, a goodbye, anything out of place or a vanished client
/// stops the test.
/// A byte-count test has no length of its own: the agent's longest allowed
/// test bounds it (and the engine stops it when nothing moves for 30 s).
#[allow(clippy::too_many_arguments)]
fn run_flows(
    conn: &mut FramedConn,
    sm: &mut AgentSession,
    spec: &TestSpec,
    flows: SideFlows,
    (start, ready_at): (Instant, Instant),
    test: &TestContext<'_>,
    sink: crate::writer::Sink,
    (test_id, watch): (u64, netrig_engine::window_watch::WindowWatch),
) -> Result<SideOutcome, SessionError> {
    let max_duration_s = test.shared.config.limits.max_duration_s;
    let ctl = RunControl::new();
    let mut plan = RunPlan::for_spec(spec, start, test_id);
    plan.clock_ref = Some(ready_at);
    plan.cpus = spec.remote_cpus.clone();
    plan.cpus_option = "--remote-cpus (or -A's second CPU)";
    // The agent's sends are held to its --max-rate whatever the client then
    // does (a closed loop's burst, UDP requests sent without waiting).
    plan.send_cap_bps = test.shared.config.limits.max_rate_bps;
    // The agent's --allow-profile: told at the window's marks.
    plan.watch = watch;
    let ctl2 = ctl.clone();
    let engine = std::thread::Builder::new()
        .name("netrig-run".into())
        .spawn(move || {
            // Never blocks: a client that stops reading loses samples, the
            // test keeps its length.
            run_side(flows, &plan, &ctl2, &mut |sample| {
                sink.send(&AgentMsg::Interval {
                    sample: Box::new(sample.clone()),
                })
            })
        })
        .map_err(|e| SessionError::Test(format!("cannot start the test thread: {e}")))?;
    // Upper bound on the whole run, whatever the engine does.
    let bound = match spec.limit {
        Limit::Duration { seconds } => Duration::from_secs_f64(seconds) + Duration::from_secs(30),
        Limit::Bytes { .. } => Duration::from_secs(max_duration_s + 30),
    };
    let mut control_alive = true;
    let mut last_heard = Instant::now();
    let silence = netrig_proto::message::SILENCE_LIMIT;
    while !engine.is_finished() {
        if start.elapsed() > bound {
            ctl.abort("the test overran its time bound");
        }
        if !control_alive {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        match conn.try_recv::<ClientMsg>(Duration::from_millis(50)) {
            // Silence is judged only once nothing is waiting to be read: a
            // session thread the host starved for a while must not take the
            // heartbeats queued meanwhile for a silent client.
            Ok(None) if test.heartbeats && last_heard.elapsed() > silence => {
                control_alive = false;
                ctl.abort(format!(
                    "the client sent nothing for {} s (no heartbeat): it is stopped or gone",
                    silence.as_secs()
                ));
            }
            Ok(None) => {}
            Ok(Some(ClientMsg::Heartbeat)) if test.heartbeats => last_heard = Instant::now(),
            Ok(Some(msg)) => match sm.on_client(msg, Instant::now()) {
                Ok(AgentEvent::Abort(reason)) => ctl.abort(format!("client aborted: {reason}")),
                Ok(AgentEvent::Bye) => ctl.abort("client said bye during the test"),
                // The state machine answers nothing else while a test runs.
                Ok(other) => ctl.abort(format!("client: {other} during the test")),
                Err(e) => ctl.abort(format!("client: {e}")),
            },
            Err(e) => {
                control_alive = false;
                ctl.abort(format!("control connection lost: {e}"));
            }
        }
    }
    match engine.join() {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(e)) => Err(SessionError::Test(e.to_string())),
        Err(_) => Err(SessionError::Test("the test thread panicked".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message the session's protocol does not have ends it, naming the
    /// protocol that has it; the others pass.
    #[test]
    fn messages_beyond_the_sessions_protocol_end_it() {
        let probe = ClientMsg::ClockProbe { seq: 0 };
        let v = netrig_proto::clock::CLOCK_PROBE_VERSION;
        assert!(beyond_protocol(&probe, v).is_ok());
        let e = beyond_protocol(&probe, v - 1).unwrap_err().to_string();
        assert!(e.starts_with("clock_probe needs protocol v"), "{e}");
        let w = netrig_proto::message::WATCH_VERSION;
        assert!(beyond_protocol(&ClientMsg::WatchEnd, w).is_ok());
        let e = beyond_protocol(&ClientMsg::WatchStart, w - 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("needs protocol v") && e.contains(&format!("speaks v{}", w - 1)),
            "{e}"
        );
        assert!(beyond_protocol(&ClientMsg::Bye, 1).is_ok());
    }

    /// A watch is refused only to a client that did not authenticate, by an
    /// agent that discloses the minimum.
    #[test]
    fn a_watch_is_refused_only_to_the_unauthenticated_under_minimal_disclosure() {
        assert!(watch_refusal(crate::Disclose::Minimal, false).is_some_and(|w| w.contains("--key")));
        assert_eq!(watch_refusal(crate::Disclose::Minimal, true), None);
        assert_eq!(watch_refusal(crate::Disclose::Full, false), None);
    }

    /// Hellos from a stranger are told at once, then once a second with how
    /// many came since.
    #[test]
    fn foreign_hellos_are_told_once_a_second_with_their_count() {
        let t = Instant::now();
        let mut f = ForeignHellos::new(t);
        assert_eq!(f.count(t), Some(1));
        assert_eq!(f.count(t + Duration::from_millis(10)), None);
        assert_eq!(f.count(t + Duration::from_millis(500)), None);
        assert_eq!(f.count(t + Duration::from_millis(1000)), Some(3));
    }

    /// Set-up gives up naming what it waited after and how many came.
    #[test]
    fn a_stalled_set_up_says_since_when_and_how_many_came() {
        let none = stalled(DATA_STALL, 0, 4);
        assert!(
            none.contains("within 10 s of test_accepted (0 of the test's 4 arrived)"),
            "{none}"
        );
        let some = stalled(DATA_STALL, 3, 4);
        assert!(some.contains("of the last one (3 of the test's 4"), "{some}");
    }

    /// The cap's warning says the cap and how long it held the sends, and
    /// only when it held them for more than 1 % of the window.
    #[test]
    fn the_cap_is_told_only_when_it_held_the_sends() {
        let used = |ms: u64| {
            Some(netrig_engine::cap::CapUse {
                cap_bps: 100_000_000,
                waited: Duration::from_millis(ms),
                bytes: 0,
            })
        };
        assert_eq!(cap_warning(None, 10.0), None);
        assert_eq!(cap_warning(used(0), 10.0), None);
        assert_eq!(cap_warning(used(90), 10.0), None);
        let w = cap_warning(used(2500), 10.0).unwrap();
        assert!(
            w.contains("--max-rate 100 Mbit/s held its sends") && w.contains("waited 2.50 s"),
            "{w}"
        );
    }
}
