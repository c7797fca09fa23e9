//! The agent's control session fed raw bytes, as the agent reads them: the
//! 8-byte control preamble (`ControlPreamble::decode`, then version
//! negotiation), then the client's byte stream, pushed in reads into the
//! `FrameDecoder` with the agent's client frame limit
//! (`MAX_CLIENT_FRAME_LEN`), each whole frame decoded as a `ClientMsg` and
//! handed to `AgentSession` (through [`crate::agent_check`]) and, for a
//! hello or a test request, to the authentication of an open agent
//! (`AgentAuth::on_hello`, `AgentAuthSession::check_request`); between
//! reads, a virtual clock advances and data connections arrive.
//!
//! The input: the preamble (8 bytes), a count of steps (1 byte), the steps
//! (2 bytes each: an operation, an argument), then the stream. Steps:
//!
//! | op % 8 | step                                                         |
//! |--------|--------------------------------------------------------------|
//! | 0      | read `arg + 1` bytes of the stream                           |
//! | 1      | read through the end of the next frame                       |
//! | 2      | the clock advances `8 × arg` ms                              |
//! | 3      | the clock advances `arg` s                                   |
//! | 4      | a data connection for the lowest flow not yet connected      |
//! | 5      | a data connection for flow `arg`                             |
//! | 6      | the running test ends, or the host refuses the one requested |
//! | 7      | the set-up hook of the test just requested is done           |
//!
//! Once the steps are done, the rest of the stream arrives in 16 KiB reads.
//! The session ends where the agent's would: a bad preamble or no common
//! version, a frame over the limit, a frame that is not a client message,
//! any message the machine refuses, a hello or request authentication
//! refuses, any message while awaiting data connections, anything but go
//! while awaiting go, an abort during set-up, a refused data connection, or
//! a passed set-up deadline. After `bye` (or past one of these ends) the
//! rest is still fed to the machine, which must refuse it all.
//!
//! Invariants: no panic; those of [`crate::agent_check`] (deadlines bounded
//! and reported exactly when passed, a test requested only with a spec that
//! validates and then holds every bound, set-up ends only when every flow
//! arrived once, nothing accepted after `bye`); the decoder never holds a
//! whole frame's worth over the limit, and every frame it returns is within
//! it; an open agent accepts a hello without a key.

use crate::agent_check::AgentCheck;
use crate::session::spec_at_defaults;
use netrig_proto::auth::{AgentAuth, AgentAuthSession, Bytes, HelloAuth, PublicKey, WelcomeAuth};
use netrig_proto::session::AgentEvent;
use netrig_proto::spec::KindSpec;
use netrig_proto::{
    encode_frame, negotiate, AgentLimits, ClientMsg, ControlPreamble, FrameDecoder, MAX_CLIENT_FRAME_LEN,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use std::time::{Duration, Instant};

/// How much `FramedConn` reads at a time.
const READ: usize = 16 * 1024;

/// Why the agent would end the session.
struct End;

struct Agent<'a> {
    stream: &'a [u8],
    pushed: usize,
    decoder: FrameDecoder,
    now: Instant,
    a: AgentCheck,
    version: u16,
    welcome: WelcomeAuth,
    auth: AgentAuth,
    auth_session: Option<AgentAuthSession>,
    /// The last message requested a test the host has not yet answered.
    just_requested: bool,
    /// The agent has ended the session (after `bye`, what follows still
    /// goes to the machine, which must refuse it).
    ended: bool,
    /// The state after each message the agent took.
    states: Vec<&'static str>,
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    states(data);
}

/// [`run`], and the session's state after each message the agent took (to
/// check what the seeds reach).
pub fn states(data: &[u8]) -> Vec<&'static str> {
    let Some((preamble, rest)) = data.split_first_chunk::<{ ControlPreamble::LEN }>() else {
        return Vec::new();
    };
    let Ok(p) = ControlPreamble::decode(preamble) else {
        return Vec::new();
    };
    let Some(version) = negotiate(
        (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION),
        (p.min_version, p.max_version),
    ) else {
        return Vec::new();
    };
    let Some((&n, rest)) = rest.split_first() else {
        return Vec::new();
    };
    let steps = rest.get(..2 * usize::from(n)).unwrap_or(rest);
    let stream = &rest[steps.len()..];
    let now = Instant::now();
    let mut agent = Agent {
        stream,
        pushed: 0,
        decoder: FrameDecoder::with_limit(MAX_CLIENT_FRAME_LEN),
        now,
        a: AgentCheck::new(AgentLimits::default(), now),
        version,
        welcome: WelcomeAuth {
            required: false,
            nonce: Bytes([7; 32]),
            agent_key: None,
        },
        auth: AgentAuth::default(),
        auth_session: None,
        just_requested: false,
        ended: false,
        states: Vec::new(),
    };
    for step in steps.chunks_exact(2) {
        agent.step(step[0], step[1]);
    }
    while agent.pushed < stream.len() {
        agent.read(READ);
    }
    agent.states
}

impl Agent<'_> {
    fn step(&mut self, op: u8, arg: u8) {
        match op % 8 {
            0 => self.read(usize::from(arg) + 1),
            1 => self.read(self.to_frame_end()),
            2 => self.now += Duration::from_millis(8 * u64::from(arg)),
            3 => self.now += Duration::from_secs(u64::from(arg)),
            4 => self.data(self.a.next_flow()),
            5 => self.data(u32::from(arg)),
            6 => self.end_test(),
            _ => self.set_up_done(),
        }
        if matches!(op % 8, 2 | 3) {
            self.tick();
        }
    }

    /// The agent's wait for the client ends at the deadline.
    fn tick(&mut self) {
        if self.a.check(self.now) {
            self.ended = true;
        }
    }

    /// The agent's set-up hook for the test just requested is done.
    fn set_up_done(&mut self) {
        if !self.ended && self.just_requested {
            self.a.set_up_done(self.now);
            self.just_requested = false;
        }
    }

    /// Bytes from what is pushed to the end of the next frame (its header
    /// alone if the frame is over the limit; the rest of the stream if it
    /// ends within the header).
    fn to_frame_end(&self) -> usize {
        let start = self.pushed - self.decoder.buffered();
        let Some(h) = self.stream[start..].first_chunk::<4>() else {
            return usize::MAX;
        };
        let len = u32::from_be_bytes(*h) as usize;
        let end = if len > MAX_CLIENT_FRAME_LEN {
            start + 4
        } else {
            start + 4 + len
        };
        end.saturating_sub(self.pushed).max(1)
    }

    /// One read of at most `n` bytes, and every whole frame it completes.
    fn read(&mut self, n: usize) {
        let part = &self.stream[self.pushed..self.stream.len().min(self.pushed.saturating_add(n))];
        self.pushed += part.len();
        if self.ended || part.is_empty() {
            return;
        }
        if self.decoder.push(part).is_err() {
            self.ended = true;
            return;
        }
        loop {
            let msg = match self.decoder.next_msg::<ClientMsg>() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => {
                    self.ended = true;
                    return;
                }
            };
            if self.a.closed() {
                // The agent is gone; the machine must refuse the rest.
                let _ = self.a.on_client(msg, self.now);
                self.a.check(self.now);
            } else if self.on_message(msg).is_err() {
                self.ended = true;
                return;
            }
        }
        assert!(
            self.decoder.buffered() < 4 + MAX_CLIENT_FRAME_LEN,
            "{} bytes buffered",
            self.decoder.buffered()
        );
    }

    fn on_message(&mut self, msg: ClientMsg) -> Result<(), End> {
        if self.a.check(self.now) {
            // The agent timed out before this message came.
            return Err(End);
        }
        // The agent takes a heartbeat (protocol 5) as a sign of life only:
        // no state changes, no deadline moves.
        if matches!(msg, ClientMsg::Heartbeat) && self.version >= netrig_proto::message::HEARTBEAT_VERSION {
            return Ok(());
        }
        // The agent ends a session of an older protocol that probes its clock.
        if matches!(msg, ClientMsg::ClockProbe { .. })
            && self.version < netrig_proto::clock::CLOCK_PROBE_VERSION
        {
            return Err(End);
        }
        // The agent ends a session of an older protocol that asks for a watch.
        if matches!(msg, ClientMsg::WatchStart | ClientMsg::WatchEnd)
            && self.version < netrig_proto::message::WATCH_VERSION
        {
            return Err(End);
        }
        let before = self.a.state();
        self.just_requested = false;
        if let (ClientMsg::TestRequest { spec, auth }, Some(s)) = (&msg, self.auth_session.as_mut()) {
            s.check_request(spec, auth.as_ref()).map_err(|_| End)?;
        }
        let event = self.a.on_client(msg, self.now).map_err(|_| End)?;
        self.a.check(self.now);
        self.states.push(self.a.state());
        if before == "awaiting data connections" {
            // The agent reads the control connection during set-up only to
            // see the client give up.
            return Err(End);
        }
        match event {
            AgentEvent::Hello { auth, .. } => {
                let keyless = auth.client_key.is_none() && auth.signature.is_none();
                match self.auth.on_hello(self.version, &self.welcome, Some(&auth)) {
                    Ok((sig, s)) => {
                        assert!(sig.is_none(), "an agent without a key signed");
                        self.auth_session = Some(s);
                    }
                    Err(e) => {
                        assert!(!keyless, "an open agent refused a hello without a key: {e}");
                        return Err(End);
                    }
                }
            }
            AgentEvent::TestRequested(_) => self.just_requested = true,
            // After bye the machine is only checked (see `read`).
            AgentEvent::Go | AgentEvent::TestInvalid(_) | AgentEvent::Bye => {}
            // Protocol 6: the agent watches its host (or refuses a second watch).
            AgentEvent::WatchStart | AgentEvent::WatchEnd | AgentEvent::WatchRefused(_) => {}
            // Protocol 7: answered at once, the session stays idle.
            AgentEvent::ClockProbe { .. } => {}
            // Protocol 8: the agent runs the test as a client, then is idle (or refuses it).
            AgentEvent::Initiate(_) => self.a.end_initiate(),
            AgentEvent::InitiateInvalid(_) => {}
            AgentEvent::Abort(_)
                if before == "running a test"
                    || before == "watching the host"
                    || before == "running a test as a client (initiate)" => {}
            AgentEvent::Abort(_) => return Err(End),
        }
        Ok(())
    }

    /// A data connection the registry hands the session for `flow`.
    fn data(&mut self, flow: u32) {
        self.tick();
        if self.ended && !self.a.closed() {
            return;
        }
        let setup = self.a.state() == "awaiting data connections";
        let r = self.a.on_data(flow, self.now);
        self.a.check(self.now);
        // Outside set-up the registry holds no cookie for the session, and
        // the connection never reaches it: the refusal above is the
        // machine's own check.
        if setup && r.is_err() {
            self.ended = true;
        }
    }

    /// The running test ends, or the host cannot run the one just requested.
    fn end_test(&mut self) {
        if self.ended {
            return;
        }
        if self.a.state() == "running a test" {
            self.a.end_test(true);
        } else if self.just_requested {
            self.a.end_test(false);
        }
        self.just_requested = false;
        self.a.check(self.now);
    }
}

/// An input built step by step: a control preamble, the steps, the stream.
pub struct Script {
    preamble: [u8; ControlPreamble::LEN],
    steps: Vec<[u8; 2]>,
    stream: Vec<u8>,
}

impl Script {
    /// A script for a client that speaks exactly this build's version.
    pub fn new() -> Self {
        Self::with_preamble(
            ControlPreamble {
                min_version: PROTOCOL_VERSION,
                max_version: PROTOCOL_VERSION,
            }
            .encode(),
        )
    }

    pub fn with_preamble(preamble: [u8; ControlPreamble::LEN]) -> Self {
        Script {
            preamble,
            steps: Vec::new(),
            stream: Vec::new(),
        }
    }

    /// Sends `m` and reads it whole.
    pub fn send(mut self, m: &ClientMsg) -> Self {
        self.stream.extend_from_slice(&encode_frame(m));
        self.step(1, 0)
    }

    /// Appends `bytes` to the stream, without a step to read them.
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.stream.extend_from_slice(bytes);
        self
    }

    /// One step (see the module's table).
    pub fn step(mut self, op: u8, arg: u8) -> Self {
        self.steps.push([op, arg]);
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        let n = u8::try_from(self.steps.len()).expect("at most 255 steps");
        let mut b = self.preamble.to_vec();
        b.push(n);
        b.extend(self.steps.iter().flatten());
        b.extend_from_slice(&self.stream);
        b
    }
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

/// A hello as this build's client sends it to an open agent, without a key.
pub fn hello() -> ClientMsg {
    ClientMsg::Hello {
        software: "0.1.0".into(),
        auth: HelloAuth {
            nonce: Bytes([1; 32]),
            client_key: None,
            signature: None,
        },
    }
}

/// A request for kind `i` of `KindSpec::NAMES`, 2 flows for 1 s.
pub fn request(i: u8) -> ClientMsg {
    ClientMsg::TestRequest {
        spec: spec_at_defaults(i, 2, 1.0),
        auth: None,
    }
}

/// A whole test of kind `i`: hello, request, the set-up hook, every data
/// connection, go, a second, the end, bye.
pub fn whole_test(i: u8) -> Script {
    let req = request(i);
    let ClientMsg::TestRequest { spec, .. } = &req else {
        unreachable!("a request")
    };
    let mut s = Script::new().send(&hello()).send(&req).step(7, 0);
    for _ in 0..spec.connections() {
        s = s.step(4, 0);
    }
    s.send(&ClientMsg::Go).step(3, 1).step(6, 0).send(&ClientMsg::Bye)
}

/// The committed seeds (fuzz/seeds/agent_session/), by name: whole tests of
/// every kind, and byte streams cut, garbled, late or out of order.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = whole_tests();
    v.extend(cut_streams());
    v.extend(sessions());
    v.extend(refused());
    v
}

/// tcp-rr's index in `KindSpec::NAMES`.
const TCP_RR: u8 = 3;
/// tcp-crr's.
const TCP_CRR: u8 = 4;

/// A whole test of every kind an agent runs.
fn whole_tests() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for (i, name) in KindSpec::NAMES.iter().enumerate() {
        // http, syn-flood and half-close run from the client alone: no agent session has them.
        if ["http", "syn-flood", "half-close"].contains(name) {
            continue;
        }
        v.push((format!("whole-{name}"), whole_test(i as u8).bytes()));
    }
    v
}

/// Byte streams in one read, byte by byte, cut, garbled, over the frame
/// limit, or too late.
fn cut_streams() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let stream = whole_test(0).bytes();
    // The whole stream in one read: go comes while the agent awaits data
    // connections.
    v.push((
        "one-read".into(),
        Script::new()
            .raw(&encode_frame(&hello()))
            .raw(&encode_frame(&request(TCP_RR)))
            .raw(&encode_frame(&ClientMsg::Go))
            .raw(&encode_frame(&ClientMsg::Bye))
            .bytes(),
    ));
    // Byte by byte.
    let mut s = Script::new()
        .raw(&encode_frame(&hello()))
        .raw(&encode_frame(&ClientMsg::Bye));
    for _ in 0..s.stream.len() {
        s = s.step(0, 0);
    }
    v.push(("byte-by-byte".into(), s.bytes()));
    // Cut within bye; go with a body that is not JSON.
    v.push(("truncated".into(), stream[..stream.len() - 5].to_vec()));
    let mut s = Script::new().send(&hello()).send(&request(0)).step(7, 0);
    for _ in 0..2 {
        s = s.step(4, 0);
    }
    let body = br#"{"type":"go""#;
    s = s.raw(&(body.len() as u32).to_be_bytes()).raw(body).step(1, 0);
    v.push(("garbled".into(), s.send(&ClientMsg::Bye).bytes()));
    v.push((
        "over-limit".into(),
        Script::new()
            .send(&hello())
            .raw(&(MAX_CLIENT_FRAME_LEN as u32 + 1).to_be_bytes())
            .step(1, 0)
            .bytes(),
    ));
    // The set-up deadline passes (30 s) before the data connections.
    v.push((
        "late".into(),
        Script::new()
            .send(&hello())
            .send(&request(TCP_RR))
            .step(3, 31)
            .step(4, 0)
            .bytes(),
    ));
    v
}

/// Sessions that do the unusual: abort, tests refused, watches, clock
/// probes, messages out of order.
fn sessions() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    // A test without data connections aborted while it runs, a second
    // refused by the host, an invalid one, then bye and more.
    let invalid = ClientMsg::TestRequest {
        spec: spec_at_defaults(TCP_CRR, 0, 1.0),
        auth: None,
    };
    v.push((
        "abort-reject-invalid-bye".into(),
        Script::new()
            .send(&hello())
            .send(&request(TCP_CRR))
            .step(7, 0)
            .send(&ClientMsg::Go)
            .step(2, 100)
            .send(&ClientMsg::Abort { reason: "^C".into() })
            .send(&request(TCP_CRR))
            .step(6, 0)
            .send(&invalid)
            .send(&ClientMsg::Bye)
            .send(&hello())
            .send(&request(TCP_CRR))
            .step(5, 0)
            .bytes(),
    ));
    // Protocol 6: a watch with heartbeats, a second refused, its end, a
    // test after it; then a watch aborted, and one a test request cuts.
    v.push((
        "watch".into(),
        Script::new()
            .send(&hello())
            .send(&ClientMsg::WatchStart)
            .send(&ClientMsg::Heartbeat)
            .step(2, 1)
            .send(&ClientMsg::WatchStart)
            .send(&ClientMsg::WatchEnd)
            .send(&request(0))
            .step(7, 0)
            .send(&ClientMsg::WatchEnd)
            .bytes(),
    ));
    v.push((
        "watch-abort-request".into(),
        Script::new()
            .send(&hello())
            .send(&ClientMsg::WatchStart)
            .send(&ClientMsg::Abort { reason: "^C".into() })
            .send(&ClientMsg::WatchStart)
            .send(&request(TCP_RR))
            .bytes(),
    ));
    // Protocol 7: clock probes, a test, then more probes than the agent
    // answers between two test requests.
    let mut probes = Script::new().send(&hello());
    for seq in 0..3 {
        probes = probes.send(&ClientMsg::ClockProbe { seq });
    }
    probes = probes.send(&request(TCP_RR));
    v.push(("clock-probes".into(), probes.bytes()));
    let mut probes = Script::new().send(&hello());
    for seq in 0..=netrig_proto::clock::MAX_PROBES_PER_TEST {
        probes = probes.send(&ClientMsg::ClockProbe { seq });
    }
    v.push(("clock-probes-over-the-limit".into(), probes.bytes()));
    // Out of order: go before any request, a duplicate data connection.
    v.push((
        "go-first".into(),
        Script::new().send(&hello()).send(&ClientMsg::Go).bytes(),
    ));
    v.push((
        "duplicate-flow".into(),
        Script::new()
            .send(&hello())
            .send(&request(0))
            .step(5, 1)
            .step(5, 1)
            .bytes(),
    ));
    v
}

/// What the agent refuses before a session: a bad signature, an older
/// protocol, another magic.
fn refused() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    // A hello with a key and a signature that cannot be right.
    v.push((
        "hello-bad-signature".into(),
        Script::new()
            .send(&ClientMsg::Hello {
                software: "0.1.0".into(),
                auth: HelloAuth {
                    nonce: Bytes([1; 32]),
                    client_key: Some(PublicKey(Bytes([2; 32]))),
                    signature: Some(Bytes([3; 64])),
                },
            })
            .send(&request(0))
            .bytes(),
    ));
    // Preambles the agent refuses: an older protocol, another magic.
    let mut old = Script::with_preamble(
        ControlPreamble {
            min_version: 1,
            max_version: MIN_PROTOCOL_VERSION - 1,
        }
        .encode(),
    );
    old = old.send(&hello());
    v.push(("old-version".into(), old.bytes()));
    let mut other = whole_test(0).bytes();
    other[..4].copy_from_slice(b"NRGD");
    v.push(("data-magic".into(), other));
    v
}
