//! One control session: handshake, then tests one after another.

use crate::hooks::{HookEnv, Phase, TestOutcome};
use crate::peer::canonical_ip;
use crate::rate_limit::{RateLimit, WARNINGS_PER_SECOND};
use crate::registry::{DataConn, Registration};
use crate::shared::Shared;
use netrig_engine::runner::{run_side, RunControl, RunPlan, SideFlows, SideOutcome};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::{sockopt, Flow, FlowSlot, FlowSocket};
use netrig_kinds::{Ends, Workloads};
use netrig_proto::conn::{ConnError, FramedConn};
use netrig_proto::report::{BufPair, CounterReport, Role, SideReport};
use netrig_proto::session::{AgentEvent, AgentSession};
use netrig_proto::spec::Limit;
use netrig_proto::spec::Transport;
use netrig_proto::{
    encode_frame, negotiate, AgentMsg, ClientMsg, ControlPreamble, Direction, SessionCookie, TestSpec,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, SOFTWARE_VERSION,
};
use std::collections::HashMap;
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
    shared_arc: Arc<Shared>,
    pre: crate::admission::PreSlot,
) {
    let shared: &Shared = &shared_arc;
    let mut pre = Some(pre);
    let _ = stream.set_nodelay(true);
    let mut conn = match FramedConn::with_read(stream, netrig_proto::MAX_CLIENT_FRAME_LEN, read) {
        Ok(c) => c,
        // A frame over the limit in what came with the preamble.
        Err(e) => {
            if SESSION_END_LOG
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .allow(Instant::now())
            {
                log::warn!("{peer}: session ended: {e}");
            }
            return;
        }
    };
    let limits = &shared.config.limits;
    let idle_timeout = shared.config.idle_timeout;
    let result = (|| -> Result<(), SessionError> {
        let welcome_auth = shared.config.auth.welcome();
        conn.send(&AgentMsg::Welcome {
            version,
            software: SOFTWARE_VERSION.into(),
            limits: limits.clone(),
            auth: welcome_auth.clone(),
            clock: agent_clock(&welcome_auth.nonce.0),
        })?;
        let mut auth_session = None;
        let mut sm = AgentSession::new(limits.clone(), Instant::now());
        // The hello must be whole within the greeting's time: until then the
        // connection holds no session place, only one in the pre-session pool.
        let greeting = shared.config.greeting_timeout;
        let hello_by = Instant::now() + greeting;
        let mut admission: Option<crate::admission::Admission> = None;
        let evicted = || {
            SessionError::Test(format!(
                "the agent closed this idle session to make room for a client from another address: all its \
                 sessions (its --max-sessions, {}) were taken, and {} held more of them than the newcomer's",
                limits.max_sessions,
                crate::admission::whose(key)
            ))
        };
        // Nothing the client sends moves this: only the end of a test does.
        let mut idle_until = Instant::now() + idle_timeout;
        // A watch of this host (protocol 6) and the thread it holds.
        let mut watch: Option<(crate::watch::Watch, crate::budget::Reservation)> = None;
        let mut last_heard = Instant::now();
        let silence = netrig_proto::message::SILENCE_LIMIT;
        let grace = Duration::from_secs(limits.setup_timeout_s);
        loop {
            // Before the hello both hold: the hello's set-up step and the
            // idle deadline, which runs from the welcome. A watch has its
            // own: the client's heartbeats, and its limit.
            let deadline = match &watch {
                Some((w, _)) => (last_heard + silence).min(w.hard_deadline(grace)),
                None if admission.is_none() => hello_by.min(idle_until),
                None => sm.deadline().map_or(idle_until, |d| d.min(idle_until)),
            };
            let msg: ClientMsg = match conn.recv(deadline.saturating_duration_since(Instant::now())) {
                Ok(m) => m,
                Err(ConnError::Timeout(_)) => {
                    let now = Instant::now();
                    if let Some((w, _)) = &watch {
                        if now >= w.hard_deadline(grace) {
                            return Err(SessionError::Test(format!(
                                "the watch reached its limit of {} s and no watch_end came within {} s; closing",
                                watch_limit(limits).as_secs(),
                                grace.as_secs()
                            )));
                        }
                        if now >= last_heard + silence {
                            return Err(SessionError::Test(format!(
                                "the client sent nothing for {} s during a watch (no heartbeat): it is stopped \
                                 or gone; the watch ends",
                                silence.as_secs()
                            )));
                        }
                        continue;
                    }
                    if admission.is_none() && now < idle_until {
                        if now < hello_by {
                            continue;
                        }
                        return Err(SessionError::Test(format!(
                            "no whole hello within {} s of the welcome (the agent's greeting timeout); closing",
                            greeting.as_secs_f64()
                        )));
                    }
                    sm.check_deadline(now)?;
                    if now < idle_until {
                        continue;
                    }
                    return Err(SessionError::Test(format!(
                        "no test asked for within {} s of the welcome or of the last test (the agent's \
                         --idle-timeout); closing",
                        idle_timeout.as_secs()
                    )));
                }
                Err(ConnError::Closed) if admission.as_ref().is_some_and(|a| a.evicted()) => {
                    return Err(evicted())
                }
                Err(ConnError::Closed) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            last_heard = Instant::now();
            // A request or a watch makes the session busy: no longer one to
            // close for room (unless that happened already).
            if matches!(msg, ClientMsg::TestRequest { .. } | ClientMsg::WatchStart) {
                if let Some(a) = &admission {
                    a.set_idle(false).map_err(|()| evicted())?;
                }
            }
            // Heartbeats sent while the test ended may follow it; they say
            // nothing else (and renew no deadline but a watch's silence).
            if matches!(msg, ClientMsg::Heartbeat) && version >= netrig_proto::message::HEARTBEAT_VERSION {
                continue;
            }
            // A clock probe's arrival, read first (the clock probe's t2).
            let probe_received = if matches!(msg, ClientMsg::ClockProbe { .. }) {
                agent_realtime_ns()
            } else {
                0
            };
            if matches!(msg, ClientMsg::ClockProbe { .. })
                && version < netrig_proto::clock::CLOCK_PROBE_VERSION
            {
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
            // An authenticated session's requests are checked before anything else.
            if let (ClientMsg::TestRequest { spec, auth }, Some(a)) = (&msg, auth_session.as_mut()) {
                let a: &mut netrig_proto::auth::AgentAuthSession = a;
                if let Err(e) = a.check_request(spec, auth.as_ref()) {
                    return Err(SessionError::Test(format!("authentication failed: {e}")));
                }
            }
            match sm.on_client(msg, Instant::now())? {
                AgentEvent::Hello { software, auth } => {
                    match shared.config.auth.on_hello(version, &welcome_auth, Some(&auth)) {
                        Ok((signature, a)) => {
                            // Now, and only now, a session place.
                            let handle = conn
                                .try_clone_stream()
                                .map_err(|e| SessionError::Test(format!("control socket: {e}")))?;
                            let caps = (
                                limits.max_sessions as usize,
                                shared.config.max_sessions_per_client,
                            );
                            match crate::admission::take_slot(
                                &shared.slots,
                                caps,
                                key,
                                a.client_key.is_some(),
                                handle,
                            ) {
                                Ok((adm, closed)) => {
                                    if let Some(k) = closed {
                                        log::info!(
                                            "{peer}: closed an idle session of {} to make room (--max-sessions {})",
                                            crate::admission::whose(k),
                                            limits.max_sessions
                                        );
                                    }
                                    admission = Some(adm);
                                    pre = None;
                                }
                                Err(reason) => {
                                    log::info!("{peer}: refused: {reason}");
                                    conn.send(&AgentMsg::Busy { reason })?;
                                    return Ok(());
                                }
                            }
                            match &a.client_key {
                                Some(k) => log::info!(
                                    "{peer}: client netrig {software}, protocol {version}, authenticated as {k}"
                                ),
                                None => log::info!("{peer}: client netrig {software}, protocol {version}"),
                            }
                            auth_session = Some(a);
                            conn.send(&AgentMsg::HelloAccepted { signature })?;
                        }
                        Err(e) => {
                            return Err(SessionError::Test(format!("authentication failed: {e}")));
                        }
                    }
                }
                AgentEvent::TestInvalid(reason) => {
                    log::info!("{peer}: test refused: {reason}");
                    conn.send(&AgentMsg::TestRejected { reason })?;
                }
                AgentEvent::TestRequested(spec) => {
                    // Checked before anything is allocated, the operator's
                    // caps first, then what this host can hold; the share is
                    // taken once the data connections are in (run_test).
                    let checked = shared
                        .budget
                        .check(share_of(&spec))
                        .and_then(|()| host_can_run(&spec, &shared.config.limits));
                    match checked {
                        Ok(()) => {}
                        Err(reason) => {
                            log::info!("{peer}: test refused: {reason}");
                            sm.reject();
                            conn.send(&AgentMsg::TestRejected { reason })?;
                            continue;
                        }
                    };
                    let env = HookEnv {
                        kind: spec.kind(),
                        peer: conn.stream().peer_addr().ok().map(|a| canonical_ip(a.ip())),
                        agent_port: shared.udp_local.port(),
                        outcome: None,
                    };
                    if let Err(reason) = set_up(&spec, shared, &env, peer) {
                        log::info!("{peer}: test refused: {reason}");
                        sm.reject();
                        conn.send(&AgentMsg::TestRejected { reason })?;
                        continue;
                    }
                    // The client's set-up steps get their whole time after the hook's.
                    sm.set_up_done(Instant::now());
                    log::info!("{peer}: {} {} flow(s), {}", spec.kind(), spec.flows, spec.limit);
                    let authenticated = auth_session.as_ref().is_some_and(|a| a.client_key.is_some());
                    let test = TestContext {
                        shared: &shared_arc,
                        peer,
                        heartbeats: version >= netrig_proto::message::HEARTBEAT_VERSION,
                        disclose: if authenticated {
                            crate::Disclose::Full
                        } else {
                            shared.config.disclose
                        },
                    };
                    let mut writer = None;
                    let report = run_test(&mut conn, &mut sm, &spec, &test, &mut writer);
                    // Its buffers are freed: back to the system, not kept by the allocator.
                    crate::memory::release_freed();
                    // Before the results go (a failure is among their warnings),
                    // and before an error ends the session.
                    let outcome = match report {
                        Ok(_) => TestOutcome::Completed,
                        Err(_) => TestOutcome::Failed,
                    };
                    let warning = tear_down(&spec, shared, &env, outcome, peer);
                    // Heartbeats until here: the tear-down hook may take a while.
                    let dropped = writer.take().map_or(0, crate::writer::ControlWriter::finish);
                    let mut report = report?;
                    report.warnings.extend(warning);
                    if dropped > 0 {
                        report.warnings.push(format!(
                            "remote: the agent dropped {dropped} interval sample(s) and heartbeat(s): the client \
                             did not read its control connection fast enough"
                        ));
                    }
                    conn.send(&AgentMsg::Results {
                        report: Box::new(report),
                    })?;
                    sm.finish();
                    idle_until = Instant::now() + idle_timeout;
                }
                AgentEvent::WatchStart => {
                    let authenticated = auth_session.as_ref().is_some_and(|a| a.client_key.is_some());
                    let started = if shared.config.disclose == crate::Disclose::Minimal && !authenticated {
                        Err(
                            "the agent tells clients that did not authenticate nothing of its host's \
                             counters (its --disclose minimal): give this client's key with --key"
                                .to_string(),
                        )
                    } else {
                        // The sampler's thread, among all tests' threads.
                        let share = crate::budget::Share {
                            threads: 1,
                            ..Default::default()
                        };
                        shared.budget.reserve(share).and_then(|r| {
                            crate::watch::Watch::start(watch_limit(limits))
                                .map(|w| (w, r))
                                .map_err(|e| format!("cannot start the watch's thread: {e}"))
                        })
                    };
                    match started {
                        Ok(w) => {
                            log::info!("{peer}: watching this host for the client");
                            watch = Some(w);
                            conn.send(&AgentMsg::WatchStarted {
                                limit_s: watch_limit(limits).as_secs(),
                            })?;
                        }
                        Err(reason) => {
                            log::info!("{peer}: watch refused: {reason}");
                            sm.end_watch();
                            conn.send(&AgentMsg::WatchRejected { reason })?;
                        }
                    }
                }
                AgentEvent::WatchRefused(reason) => conn.send(&AgentMsg::WatchRejected { reason })?,
                AgentEvent::WatchEnd => {
                    let (w, reservation) = watch.take().ok_or_else(|| {
                        SessionError::Test("watch_end without a watch (the agent lost it)".into())
                    })?;
                    let view = w.end().map_err(SessionError::Test)?;
                    drop(reservation);
                    log::info!("{peer}: watch ended after {:.1} s", view.window_s);
                    conn.send(&AgentMsg::HostView {
                        view: Box::new((&view).into()),
                    })?;
                    idle_until = Instant::now() + idle_timeout;
                }
                // An abort ends a watch without an answer.
                AgentEvent::Abort(_) if watch.is_some() => {
                    watch = None;
                    idle_until = Instant::now() + idle_timeout;
                }
                AgentEvent::ClockProbe { seq } => conn.send(&AgentMsg::ClockEcho {
                    seq,
                    received_ns: probe_received,
                    sent_ns: agent_realtime_ns().max(probe_received),
                })?,
                AgentEvent::Bye => return Ok(()),
                AgentEvent::Go | AgentEvent::Abort(_) => {}
            }
            // Idle again (a test ended or was refused, a watch ended or was
            // not started): a session that may be closed to make room.
            if let Some(a) = &admission {
                if sm.is_idle() && watch.is_none() && !a.is_idle() {
                    a.set_idle(true).map_err(|()| evicted())?;
                }
            }
        }
    })();
    if let Err(e) = result {
        let msg = e.to_string();
        if msg.contains("client aborted") {
            log::info!("{peer}: session ended: {msg}");
        } else if SESSION_END_LOG
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(Instant::now())
        {
            // A peer may open sessions only to end them (a truncated frame
            // and a FIN, say): their warnings are rate-limited.
            log::warn!("{peer}: session ended: {msg}");
        }
        let _ = conn.send(&AgentMsg::Error {
            message: e.to_string(),
        });
    }
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
fn host_can_run(spec: &TestSpec, limits: &netrig_proto::AgentLimits) -> Result<(), String> {
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
fn share_of(spec: &TestSpec) -> crate::budget::Share {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let workers = spec.workers_on(cpus);
    crate::budget::Share {
        threads: workers + 1,
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
    let (shared, peer) = (test.shared, test.peer);
    let mut cookie = [0u8; 16];
    getrandom::fill(&mut cookie)
        .map_err(|e| SessionError::Test(format!("no randomness for a cookie: {e}")))?;
    let cookie = SessionCookie(cookie);
    let expected = spec.connections() as usize;
    // A connection-per-transaction test's connections all come during the
    // run, straight to the engine, and the cookie stays registered for all of it.
    let workload = netrig_kinds::of(spec).workload(spec);
    let per_transaction = matches!(workload, Workloads::Transient(_));
    let udp = spec.rules().transport() == Transport::Udp;
    let remote = SocketSettings::new(&spec.remote, spec.rules().tcp());
    let control_ip = conn.stream().peer_addr().map(|a| canonical_ip(a.ip())).ok();
    let (data_rx, crr_rx) = if per_transaction {
        (
            None,
            Some({
                let intake = shared
                    .registry
                    .register_run(cookie, run_intake_capacity(spec), control_ip);
                let arc = shared.clone();
                intake.offer_door(Box::new(move || crate::door::lend(&arc, cookie, control_ip)));
                intake
            }),
        )
    } else {
        // Room for the client's repeated UDP hellos too.
        (
            Some(
                shared
                    .registry
                    .register(cookie, expected.saturating_mul(4).max(16), control_ip),
            ),
            None,
        )
    };
    let mut udp_seen: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut foreign_hellos = 0u64;
    let mut foreign_log = Instant::now()
        .checked_sub(Duration::from_secs(1))
        .unwrap_or_else(Instant::now);
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
    let plan = spec.flow_plan();
    let mut flows = Vec::with_capacity(expected);
    let mut buffers = Vec::with_capacity(expected);
    let mut warnings = Vec::new();
    let requested = BufPair {
        snd: spec.remote.sndbuf,
        rcv: spec.remote.rcvbuf,
    };
    let mut index_in_dir: HashMap<Direction, u32> = HashMap::new();
    let mut first_index = HashMap::new();
    for (i, d) in plan.iter().enumerate() {
        first_index.entry(*d).or_insert(i as u32);
        *index_in_dir.entry(*d).or_default() += 1;
    }
    let mut last_control_check = Instant::now();
    let failed_accepts = shared.accept_failures.count();
    // Each data connection within DATA_STALL of the last (of test_accepted
    // for the first): a client that opens none, or stops, holds its
    // sockets and session no longer than that (and none of the budget,
    // taken only before data_ready). The client opens them one after
    // another: 10 s leaves room for a connect that lost three SYNs (1, 2
    // and 4 s of retransmission).
    let stall = DATA_STALL;
    let mut next_by = Instant::now() + stall;
    while flows.len() < expected {
        if data_rx.is_some() && Instant::now() >= next_by {
            return Err(SessionError::Test(format!(
                "no data connection within {} s of {} ({} of the test's {expected} arrived); the test is \
                 given up",
                stall.as_secs_f64(),
                if flows.is_empty() {
                    "test_accepted"
                } else {
                    "the last one"
                },
                flows.len()
            )));
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
        let Some(data_rx) = &data_rx else { break };
        let (hello, data) = match data_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(x) => x,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SessionError::Test("registry closed".into()))
            }
        };
        let socket: FlowSocket = match data {
            DataConn::Tcp(stream, _) if !udp => {
                sm.on_data_connection(hello.flow, Instant::now())?;
                sockopt::apply_connected(&stream, &remote, true, "-S/--remote-sockbuf")
                    .map_err(|e| SessionError::Test(format!("agent {e}")))?;
                stream.into()
            }
            DataConn::Udp(from) if udp => {
                // Only the client's own address may open UDP flows: the agent
                // must never be made to send to a third party.
                if control_ip != Some(canonical_ip(from.ip())) {
                    // Said once a second at most, with how many: a peer must
                    // not be able to fill the log (40,000 hellos made 29,082
                    // lines).
                    foreign_hellos += 1;
                    if foreign_log.elapsed() >= Duration::from_secs(1) {
                        log::warn!(
                            "{peer}: {foreign_hellos} UDP hello(s) (the last for flow {} from {from}) not from the \
                             control connection's address; ignored",
                            hello.flow
                        );
                        foreign_hellos = 0;
                        foreign_log = Instant::now();
                    }
                    continue;
                }
                if !udp_seen.insert(hello.flow) {
                    continue; // a repeated hello
                }
                sm.on_data_connection(hello.flow, Instant::now())?;
                let sock = crate::udp::flow_socket(shared.udp_local, from).map_err(|e| {
                    SessionError::Test(format!("agent: UDP socket for flow {}: {e}", hello.flow))
                })?;
                sockopt::apply_connected(&sock, &remote, true, "-S/--remote-sockbuf")
                    .map_err(|e| SessionError::Test(format!("agent {e}")))?;
                sock.into()
            }
            _ => {
                log::warn!(
                    "{peer}: data connection of the wrong protocol for {}; ignored",
                    spec.kind()
                );
                continue;
            }
        };
        next_by = Instant::now() + stall;
        let direction = plan[hello.flow as usize];
        let initial = sockopt::buffers(&socket);
        if flows.is_empty() {
            warnings.extend(sockopt::buffer_warnings(requested, initial, "remote", "-S"));
        }
        let role = spec.role(direction, true);
        let quota = match role {
            Role::Sender => spec.byte_quota(hello.flow - first_index[&direction]),
            _ => None,
        };
        let applied = match &socket {
            FlowSocket::Tcp(t) => sockopt::applied(t),
            FlowSocket::Udp(u) => sockopt::applied(u),
        };
        if buffers.is_empty() {
            warnings.extend(sockopt::option_warnings(&remote, &applied, "remote"));
        }
        buffers.push((hello.flow, initial, applied));
        flows.push(Flow::new(hello.flow, direction, role, socket, quota));
    }
    if !per_transaction && !udp {
        // Every flow is here: a data connection that comes now is one too
        // many, closed at once rather than held until the test ends. (UDP
        // keeps its registration: the client repeats its hellos until it
        // reads data_ready, and those are expected.)
        shared.registry.unregister(&cookie);
        if let Some(rx) = &data_rx {
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
    // The test's share of the agent's totals, taken now that its data
    // connections are in (checked when it was asked for; another test may
    // have taken it since), held until the test ends.
    let _reservation = shared
        .budget
        .reserve(share_of(spec))
        .map_err(|reason| SessionError::Test(format!("the test cannot start: {reason}")))?;
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
        AgentEvent::Go => {}
        AgentEvent::Abort(r) => return Err(SessionError::Test(format!("client aborted: {r}"))),
        other => return Err(SessionError::Test(format!("expected go, got {other}"))),
    }
    let start = Instant::now();
    let w = crate::writer::ControlWriter::start(
        conn.try_clone_stream()
            .map_err(|e| SessionError::Test(format!("control socket: {e}")))?,
        test.heartbeats.then_some(netrig_proto::message::HEARTBEAT),
    )
    .map_err(|e| SessionError::Test(format!("cannot start the control writer: {e}")))?;
    let sink = w.sink();
    *writer = Some(w);
    let side = match workload {
        Workloads::Transient(workload) => SideFlows::Transient {
            workload,
            flows: plan
                .iter()
                .enumerate()
                .map(|(id, d)| FlowSlot::new(id as u32, *d, spec.role(*d, true), None))
                .collect(),
            intake: crr_rx,
        },
        Workloads::Connected(workload) => SideFlows::Connected { workload, flows },
    };
    let outcome = run_flows(
        conn,
        sm,
        spec,
        side,
        (start, ready_at),
        test,
        sink,
        cookie.test_id(),
    )?;
    if per_transaction {
        if let Some(c) = outcome.flows.iter().find_map(|f| f.first_connection.as_ref()) {
            warnings.extend(sockopt::buffer_warnings(requested, c.initial, "remote", "-S"));
            warnings.extend(sockopt::option_warnings(&remote, &c.applied, "remote"));
        }
        let dropped = shared.registry.dropped(&cookie) + outcome.dropped_connections;
        if dropped > 0 {
            warnings.push(format!(
                "remote: the agent closed {dropped} connection(s) unanswered: more arrived at once than its \
                 queues hold (the client counts them as reset)"
            ));
        }
    }
    warnings.extend(cap_warning(outcome.send_cap, outcome.window_s));
    let counters = match (counters_before, netrig_metrics::read_kernel_counters()) {
        (Some(b), Ok(a)) => Some(CounterReport::between(&b, &a, netrig_metrics::read_conntrack())),
        _ => None,
    };
    log::info!(
        "{peer}: done, {} bytes",
        outcome.flows.iter().map(|f| f.window_bytes).sum::<u64>()
    );
    let by_id: HashMap<u32, _> = buffers.into_iter().map(|(id, b, a)| (id, (b, a))).collect();
    let flows = outcome
        .flows
        .iter()
        .map(|f| f.report(spec, requested, by_id.get(&f.id).cloned()))
        .collect();
    let mut report = SideReport {
        flows,
        window_s: outcome.window_s,
        warnings,
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
    };
    if test.disclose == crate::Disclose::Minimal {
        withhold_host(&mut report);
    }
    Ok(report)
}

/// This agent's `CLOCK_REALTIME` as it tells the client (the clock probe's
/// echo), ns since the epoch.
fn agent_realtime_ns() -> u64 {
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
    test_id: u64,
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
