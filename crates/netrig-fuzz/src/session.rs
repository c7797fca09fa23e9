//! The sans-IO session state machines, driven with a virtual clock: a
//! sequence of client messages, data connections and clock advances into
//! `AgentSession`, and of agent messages and the client's own sends into
//! `ClientSession`.
//!
//! Invariants: no panic; the agent's, those of [`crate::agent_check`] (the
//! deadline exists exactly in the set-up states, is never further than the
//! set-up timeout from now, and `check_deadline` fails exactly when it has
//! passed; a test is requested only with a spec that validates, and then
//! holds every bound; set-up ends only when every flow's connection arrived
//! once; nothing is accepted after `bye`). The client accepts each agent message only in the state the
//! protocol table allows (compared with a model of it), nothing after an
//! error, and what it takes from a welcome bounds the timeouts it derives.

use crate::agent_check::AgentCheck;
use arbitrary::Arbitrary;
use netrig_proto::message::{MAX_AGENT_DURATION_S, MAX_SETUP_TIMEOUT_S};
use netrig_proto::report::{IntervalSample, SideReport};
use netrig_proto::session::{ClientEvent, ClientSession};
use netrig_proto::spec::kind::TcpCcSpec;
use netrig_proto::spec::{
    CloseFirst, KindSpec, Limit, Load, Pace, PortRange, StreamOptions, TcpBidirSpec, TcpCrrSpec,
    TcpMaertsSpec, TcpOptions, TcpRrSpec, TcpStreamSpec, Transactions, UdpRrSpec, UdpStreamSpec,
};
use netrig_proto::{AgentLimits, AgentMsg, ClientMsg, SessionCookie, TestSpec};
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
    /// Protocol 7: a clock probe.
    Probe(u32),
}

/// A spec that is valid until its overrides say otherwise: a kind at
/// options that validate, then changes to the common part and to whatever
/// the kind has (an override of an option the kind does not have changes
/// nothing), or a kind part made whole from arbitrary values.
#[derive(Arbitrary, Debug)]
struct ArbSpec {
    kind: u8,
    flows: u8,
    overrides: Vec<Override>,
}

#[derive(Arbitrary, Debug)]
enum Override {
    // The common part.
    Seconds(f64),
    Bytes(u64),
    Omit(f64),
    Interval(Option<f64>),
    Flows(u32),
    Workers(Option<u32>),
    MeasureCpu(bool),
    Cpus(Option<Vec<u32>>),
    Buffers(Option<u32>, Option<u32>),
    Tos(Option<u8>),
    Priority(Option<u32>),
    MaxPacingRate(Option<u64>),
    // The streams': -m (udp-stream's datagram size), -M, -b, -Z, -R, --no-gso.
    MessageSize(u32),
    RecvSize(u32),
    Pace(Option<ArbPace>),
    Zerocopy(bool),
    Reverse(bool),
    NoGso(bool),
    // The TCP kinds'.
    Nodelay(bool),
    Congestion(Option<String>),
    // The request/response kinds'.
    Sizes(u32, u32),
    Load(ArbLoad),
    Timeout(Option<f64>),
    /// Another kind, its options made from arbitrary values.
    Test(ArbKind),
}

#[derive(Arbitrary, Debug)]
struct ArbPace {
    rate_bps: u64,
    pacing_us: Option<u32>,
}

impl ArbPace {
    fn build(&self) -> Pace {
        Pace {
            rate_bps: self.rate_bps,
            pacing_us: self.pacing_us,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum ArbLoad {
    Closed(u32),
    Open(f64, bool, Option<u32>),
}

impl ArbLoad {
    fn build(&self) -> Load {
        match *self {
            ArbLoad::Closed(burst) => Load::Closed { burst },
            ArbLoad::Open(rate, poisson, spin_us) => Load::Open {
                rate,
                poisson,
                spin_us,
            },
        }
    }
}

#[derive(Arbitrary, Debug)]
struct ArbTcp {
    nodelay: bool,
    congestion: Option<String>,
}

impl ArbTcp {
    fn build(&self) -> TcpOptions {
        TcpOptions {
            nodelay: self.nodelay,
            congestion: self.congestion.clone(),
            mptcp: false,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct ArbStream {
    message_size: u32,
    recv_size: u32,
    pace: Option<ArbPace>,
    zerocopy: bool,
    skip_rx_copy: bool,
    msg_zerocopy: bool,
    no_rcvlowat: bool,
    notsent_lowat: Option<u32>,
    tcp: ArbTcp,
}

#[derive(Arbitrary, Debug)]
struct ArbTransactions {
    request_size: u32,
    response_size: u32,
    load: ArbLoad,
    busy_wait: bool,
}

impl ArbTransactions {
    fn build(&self) -> Transactions {
        Transactions {
            request_size: self.request_size,
            response_size: self.response_size,
            load: self.load.build(),
            busy_wait: self.busy_wait,
        }
    }
}

/// Every kind with every one of its options.
#[derive(Arbitrary, Debug)]
enum ArbKind {
    TcpStream(ArbStream),
    TcpMaerts(ArbStream),
    TcpBidir(ArbStream),
    TcpRr(ArbTransactions, ArbTcp),
    TcpCrr(ArbTransactions, Option<f64>, ArbTcp, u8, Option<(u16, u16)>),
    TcpCc(ArbLoad, Option<f64>, ArbTcp, Option<(u16, u16)>),
    UdpStream(u32, Option<ArbPace>, bool, bool),
    UdpRr(ArbTransactions, Option<f64>),
}

impl ArbStream {
    fn build(&self) -> StreamOptions {
        StreamOptions {
            message_size: self.message_size,
            recv_size: self.recv_size,
            pace: self.pace.as_ref().map(ArbPace::build),
            zerocopy: self.zerocopy,
            skip_rx_copy: self.skip_rx_copy,
            msg_zerocopy: self.msg_zerocopy,
            no_rcvlowat: self.no_rcvlowat,
            notsent_lowat: self.notsent_lowat,
            tcp: self.tcp.build(),
        }
    }
}

impl ArbKind {
    fn build(&self) -> KindSpec {
        match self {
            ArbKind::TcpStream(o) => KindSpec::TcpStream(TcpStreamSpec(o.build())),
            ArbKind::TcpMaerts(o) => KindSpec::TcpMaerts(TcpMaertsSpec(o.build())),
            ArbKind::TcpBidir(o) => KindSpec::TcpBidir(TcpBidirSpec(o.build())),
            ArbKind::TcpRr(t, tcp) => KindSpec::TcpRr(TcpRrSpec {
                transactions: t.build(),
                tcp: tcp.build(),
            }),
            ArbKind::TcpCrr(t, timeout_s, tcp, close, ports) => KindSpec::TcpCrr(TcpCrrSpec {
                transactions: t.build(),
                timeout_s: *timeout_s,
                tcp: tcp.build(),
                close_first: match close % 3 {
                    0 => CloseFirst::Requester,
                    1 => CloseFirst::Responder,
                    _ => CloseFirst::RequesterReset,
                },
                local_ports: ports.map(|(low, high)| PortRange { low, high }),
            }),
            ArbKind::TcpCc(load, timeout_s, tcp, ports) => KindSpec::TcpCc(TcpCcSpec {
                load: load.build(),
                timeout_s: *timeout_s,
                tcp: tcp.build(),
                local_ports: ports.map(|(low, high)| PortRange { low, high }),
            }),
            ArbKind::UdpStream(datagram_size, pace, reverse, no_gso) => KindSpec::UdpStream(UdpStreamSpec {
                datagram_size: *datagram_size,
                pace: pace.as_ref().map(ArbPace::build),
                reverse: *reverse,
                no_gso: *no_gso,
                datagram: Default::default(),
            }),
            ArbKind::UdpRr(t, timeout_s) => KindSpec::UdpRr(UdpRrSpec {
                transactions: t.build(),
                timeout_s: *timeout_s,
            }),
        }
    }
}

/// Kind `i` (of `KindSpec::NAMES`) at options that validate under
/// limits that allow 1 KiB messages.
pub(crate) fn kind_at_defaults(i: u8) -> KindSpec {
    let stream = StreamOptions {
        message_size: 1024,
        recv_size: 1024,
        ..StreamOptions::default()
    };
    let kinds = [
        KindSpec::TcpStream(TcpStreamSpec(stream.clone())),
        KindSpec::TcpMaerts(TcpMaertsSpec(stream.clone())),
        KindSpec::TcpBidir(TcpBidirSpec(stream)),
        KindSpec::TcpRr(TcpRrSpec::default()),
        KindSpec::TcpCrr(TcpCrrSpec::default()),
        KindSpec::TcpCc(TcpCcSpec::default()),
        KindSpec::UdpStream(UdpStreamSpec {
            datagram_size: 1024,
            ..UdpStreamSpec::default()
        }),
        KindSpec::UdpRr(UdpRrSpec::default()),
    ];
    // http, syn-flood and half-close run from the client alone (an agent
    // refuses them, by name): no session, report or merge of an agent's has them.
    assert_eq!(
        kinds.len(),
        KindSpec::NAMES.len() - 3,
        "a kind without a default here"
    );
    kinds[usize::from(i) % kinds.len()].clone()
}

/// Kind `i` at [`kind_at_defaults`], `flows` flows for `seconds`.
pub(crate) fn spec_at_defaults(kind: u8, flows: u32, seconds: f64) -> TestSpec {
    TestSpec {
        flows,
        ..TestSpec::new(kind_at_defaults(kind), Limit::Duration { seconds })
    }
}

/// The TCP options of a TCP kind.
fn tcp_of(k: &mut KindSpec) -> Option<&mut TcpOptions> {
    match k {
        KindSpec::TcpStream(TcpStreamSpec(o))
        | KindSpec::TcpMaerts(TcpMaertsSpec(o))
        | KindSpec::TcpBidir(TcpBidirSpec(o)) => Some(&mut o.tcp),
        KindSpec::TcpRr(r) => Some(&mut r.tcp),
        KindSpec::TcpCrr(c) => Some(&mut c.tcp),
        KindSpec::TcpCc(c) => Some(&mut c.tcp),
        KindSpec::Http(h) => Some(&mut h.tcp),
        KindSpec::UdpStream(_) | KindSpec::UdpRr(_) | KindSpec::SynFlood(_) | KindSpec::HalfClose(_) => None,
    }
}

/// The options of a TCP stream kind.
fn stream_of(k: &mut KindSpec) -> Option<&mut StreamOptions> {
    match k {
        KindSpec::TcpStream(TcpStreamSpec(o))
        | KindSpec::TcpMaerts(TcpMaertsSpec(o))
        | KindSpec::TcpBidir(TcpBidirSpec(o)) => Some(o),
        _ => None,
    }
}

/// The transactions of a request/response kind.
fn transactions_of(k: &mut KindSpec) -> Option<&mut Transactions> {
    match k {
        KindSpec::TcpRr(r) => Some(&mut r.transactions),
        KindSpec::TcpCrr(c) => Some(&mut c.transactions),
        KindSpec::UdpRr(u) => Some(&mut u.transactions),
        _ => None,
    }
}

impl ArbSpec {
    fn build(&self) -> TestSpec {
        let mut s = spec_at_defaults(self.kind, u32::from(self.flows % 4) + 1, 1.0);
        for o in &self.overrides {
            let t = &mut s.test;
            match o {
                Override::Seconds(x) => s.limit = Limit::Duration { seconds: *x },
                Override::Bytes(b) => s.limit = Limit::Bytes { bytes: *b },
                Override::Omit(x) => s.omit_s = *x,
                Override::Interval(x) => s.interval_s = *x,
                Override::Flows(n) => s.flows = *n,
                Override::Workers(w) => s.workers = *w,
                Override::MeasureCpu(m) => s.measure_cpu = *m,
                Override::Cpus(c) => s.remote_cpus = c.clone(),
                Override::Buffers(a, b) => {
                    s.remote.sndbuf = *a;
                    s.remote.rcvbuf = *b;
                }
                Override::Tos(x) => s.remote.tos = *x,
                Override::Priority(p) => s.remote.priority = *p,
                Override::MaxPacingRate(r) => s.remote.max_pacing_rate_bps = *r,
                Override::MessageSize(n) => match t {
                    KindSpec::UdpStream(u) => u.datagram_size = *n,
                    _ => stream_of(t).into_iter().for_each(|o| o.message_size = *n),
                },
                Override::RecvSize(n) => stream_of(t).into_iter().for_each(|o| o.recv_size = *n),
                Override::Pace(p) => {
                    let pace = p.as_ref().map(ArbPace::build);
                    match t {
                        KindSpec::UdpStream(u) => u.pace = pace,
                        _ => {
                            if let Some(o) = stream_of(t) {
                                o.pace = pace
                            }
                        }
                    }
                }
                Override::Zerocopy(z) => stream_of(t).into_iter().for_each(|o| o.zerocopy = *z),
                Override::Reverse(r) => {
                    if let KindSpec::UdpStream(u) = t {
                        u.reverse = *r
                    }
                }
                Override::NoGso(g) => {
                    if let KindSpec::UdpStream(u) = t {
                        u.no_gso = *g
                    }
                }
                Override::Nodelay(n) => tcp_of(t).into_iter().for_each(|o| o.nodelay = *n),
                Override::Congestion(c) => tcp_of(t).into_iter().for_each(|o| o.congestion = c.clone()),
                Override::Sizes(q, r) => transactions_of(t).into_iter().for_each(|x| {
                    x.request_size = *q;
                    x.response_size = *r;
                }),
                Override::Load(l) => match t {
                    KindSpec::TcpCc(c) => c.load = l.build(),
                    _ => transactions_of(t).into_iter().for_each(|x| x.load = l.build()),
                },
                Override::Timeout(x) => match t {
                    KindSpec::TcpCrr(c) => c.timeout_s = *x,
                    KindSpec::TcpCc(c) => c.timeout_s = *x,
                    KindSpec::UdpRr(u) => u.timeout_s = *x,
                    _ => {}
                },
                Override::Test(k) => s.test = k.build(),
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
    /// With the agent's clock (its boot hash), if any.
    Welcome(u16, WireLimits, Option<String>),
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
    /// Protocol 7: a clock probe sent, and an echo (seq, received, sent).
    ProbeSent,
    Echo(u32, u64, u64),
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    agent(&input);
    client(&input.client);
}

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
    let mut now = Instant::now();
    let mut a = AgentCheck::new(limits, now);
    for op in &input.agent {
        let msg = match op {
            AgentOp::Hello(s) => Some(ClientMsg::Hello {
                software: s.clone(),
                auth: netrig_proto::auth::HelloAuth {
                    nonce: netrig_proto::auth::Bytes([0; 32]),
                    client_key: None,
                    signature: None,
                },
            }),
            AgentOp::Request(s) => Some(ClientMsg::TestRequest {
                spec: s.build(),
                auth: None,
            }),
            AgentOp::Go => Some(ClientMsg::Go),
            AgentOp::Abort(r) => Some(ClientMsg::Abort { reason: r.clone() }),
            AgentOp::Bye => Some(ClientMsg::Bye),
            AgentOp::Probe(seq) => Some(ClientMsg::ClockProbe { seq: *seq }),
            AgentOp::Json(b) => serde_json::from_slice(b).ok(),
            _ => None,
        };
        if let Some(m) = msg {
            let _ = a.on_client(m, now);
        }
        match op {
            AgentOp::Data(flow) => {
                let _ = a.on_data(*flow, now);
            }
            AgentOp::DataNext => {
                let _ = a.on_data(a.next_flow(), now);
            }
            AgentOp::AdvanceMs(ms) => now += Duration::from_millis(u64::from(*ms)),
            AgentOp::AdvanceS(s) => now += Duration::from_secs(u64::from(*s)),
            AgentOp::Finish => a.end_test(true),
            AgentOp::Reject => a.end_test(false),
            _ => {}
        }
        a.check(now);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Model {
    AwaitWelcome,
    Ready,
    AwaitAccept,
    AwaitDataReady,
    Running,
    AwaitClockEcho,
    Closed,
}

fn client(ops: &[ClientOp]) {
    let mut c = ClientSession::new();
    let mut m = Model::AwaitWelcome;
    for op in ops {
        let Some(msg) = agent_message(op, &mut c, &mut m) else {
            continue;
        };
        let name = msg.name();
        let r = c.on_agent(msg);
        let (ok, next) = expected(m, name);
        if m == Model::Closed {
            assert!(r.is_err(), "{name} accepted after the session closed");
        }
        m = answered(r, (ok, next), name, m);
    }
}

/// The agent's message `op` makes; `None` for a step of the client's own
/// (what it sent), taken here: allowed only where the model says.
fn agent_message(op: &ClientOp, c: &mut ClientSession, m: &mut Model) -> Option<AgentMsg> {
    match op {
        ClientOp::Welcome(version, l, clock) => Some(AgentMsg::Welcome {
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
            auth: netrig_proto::auth::WelcomeAuth {
                required: false,
                nonce: netrig_proto::auth::Bytes([0; 32]),
                agent_key: None,
            },
            clock: clock
                .clone()
                .map(|boot_hash| netrig_proto::clock::AgentClock { boot_hash }),
            name: None,
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
        ClientOp::Echo(seq, received_ns, sent_ns) => Some(AgentMsg::ClockEcho {
            seq: *seq,
            received_ns: *received_ns,
            sent_ns: *sent_ns,
        }),
        ClientOp::ProbeSent => {
            let r = c.clock_probe_sent();
            assert_eq!(r.is_ok(), *m == Model::Ready, "clock_probe_sent while {m:?}");
            if r.is_ok() {
                *m = Model::AwaitClockEcho;
            }
            None
        }
        ClientOp::RequestSent => {
            let r = c.request_sent();
            assert_eq!(r.is_ok(), *m == Model::Ready, "request_sent while {m:?}");
            if r.is_ok() {
                *m = Model::AwaitAccept;
            }
            None
        }
        ClientOp::GoSent => {
            let r = c.go_sent();
            assert_eq!(r.is_ok(), *m == Model::AwaitDataReady, "go_sent while {m:?}");
            if r.is_ok() {
                *m = Model::Running;
            }
            None
        }
    }
}

/// Whether the client takes the message `name` in state `m`, and the state
/// it leads to.
fn expected(m: Model, name: &str) -> (bool, Model) {
    use Model as M;
    match (m, name) {
        (_, "error") => (false, M::Closed),
        (M::AwaitWelcome, "welcome") => (true, M::Ready),
        (M::AwaitWelcome, "version_mismatch" | "busy") => (false, M::Closed),
        (M::AwaitAccept, "test_accepted") => (true, M::AwaitDataReady),
        (M::AwaitAccept, "test_rejected") => (true, M::Ready),
        (M::AwaitDataReady, "data_ready") => (true, M::AwaitDataReady),
        (M::Running, "interval") => (true, M::Running),
        (M::Running, "results") => (true, M::Ready),
        (M::AwaitClockEcho, "clock_echo") => (true, M::Ready),
        (s, _) => (false, s),
    }
}

/// The model's state once the client answered the message `name` with `r`
/// in state `m`, checked against what was `expected` of it; what the
/// client takes of a welcome or a clock echo, checked too.
fn answered(
    r: Result<ClientEvent, netrig_proto::ProtoError>,
    (ok, next): (bool, Model),
    name: &str,
    m: Model,
) -> Model {
    use Model as M;
    match r {
        Ok(ClientEvent::Welcome { limits, clock, .. }) => {
            assert!(ok && name == "welcome", "welcome while {m:?}");
            assert_welcome(&limits, clock.as_ref());
            next
        }
        Ok(ClientEvent::ClockEcho {
            received_ns, sent_ns, ..
        }) => {
            assert!(ok, "clock_echo accepted while {m:?}");
            // An echo the client takes says the agent held the probe a bounded time.
            assert!(sent_ns
                .checked_sub(received_ns)
                .is_some_and(|h| h <= netrig_proto::clock::MAX_ECHO_HOLD_NS));
            next
        }
        Ok(_) => {
            assert!(ok, "{name} accepted while {m:?}");
            next
        }
        Err(_) if ok && name == "clock_echo" => {
            // An echo that holds the probe too long (or backwards) closes the session.
            M::Closed
        }
        Err(_) if ok && name == "welcome" => {
            // A welcome refused for its limits closes the session.
            M::Closed
        }
        Err(_) => {
            assert!(!ok, "{name} refused while {m:?}");
            next
        }
    }
}

/// What the client takes of a welcome: a clock of a boot hash's shape, and
/// limits whose deadlines it can compute.
fn assert_welcome(limits: &AgentLimits, clock: Option<&netrig_proto::clock::AgentClock>) {
    // A clock the client takes is a boot hash's shape.
    if let Some(c) = clock {
        assert!(
            c.boot_hash.len() == netrig_proto::clock::BOOT_HASH_LEN
                && c.boot_hash
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{c:?}"
        );
    }
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
}
