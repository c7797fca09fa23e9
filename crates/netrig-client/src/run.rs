//! One control connection and the tests run over it.

use crate::link::{
    connect_socket, open_datagrams, open_stream, proto_err, shown, ClientOptions, Measured, FIRST_REPLY_RTTS,
};
use crate::ClientError;
use netrig_engine::runner::{run_side, RunControl, RunPlan, SideFlows};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::{sockopt, transport, Connector, Flow, FlowSlot, FlowSocket};
use netrig_kinds::Workloads;
use netrig_proto::clock::{AgentClock, ClockCheck};
use netrig_proto::conn::{ConnError, FramedConn};
use netrig_proto::message::{HEARTBEAT, SILENCE_LIMIT};
use netrig_proto::neighbour;
use netrig_proto::report::{AppliedOptions, BufPair, CounterReport, IntervalSample, Role, SideReport};
use netrig_proto::session::{ClientEvent, ClientSession};
use netrig_proto::spec::{Exchange, Limit, Transport};
use netrig_proto::{
    AgentLimits, AgentMsg, ClientMsg, ControlPreamble, DataHello, Direction, SessionCookie, TestSpec,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, SOFTWARE_VERSION,
};
use netrig_report::NewConfig;
use netrig_report::{
    assemble, merge_interval, AgentInfo, IntervalResult, RunInfo, Side, TestConfig, TestResult,
};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The agent's answers may carry per-flow reports of big tests.
pub(crate) const AGENT_FRAME_LIMIT: usize = 64 << 20;

/// How long the client waits for an agent's welcome after its preamble.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer may say nothing at all after the preamble before the
/// client gives up on it (iperf3's server and netserver say nothing):
/// this, plus [`FIRST_REPLY_RTTS`](crate::link::FIRST_REPLY_RTTS) times the time the connection took to
/// open, at most [`WELCOME_TIMEOUT`]. A netrig agent answers at once:
/// measured on loopback, 0.2 ms idle, at most 0.3 s on a host of two CPUs
/// at a load of 74 (docs/PROTOCOL.md, "Not an agent").
pub(crate) const FIRST_REPLY_MIN: Duration = Duration::from_secs(3);
/// The longest a client waits for its `--start-at` once set up (the agent waits for `go` for
/// its set-up timeout, 30 s by default).
pub const MAX_START_WAIT: Duration = Duration::from_secs(10);

/// What answered: a netrig agent, or an iperf3 server (`--peer auto`).
// One is made per connection: boxing the agent's session would save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Connected {
    Agent(Client),
    Iperf3(crate::iperf3::Detected),
}

/// A handshaken control connection to an agent.
pub struct Client {
    pub(crate) conn: FramedConn,
    pub(crate) sm: ClientSession,
    addr: SocketAddr,
    opts: ClientOptions,
    software: String,
    pub(crate) version: u16,
    limits: AgentLimits,
    auth: netrig_proto::auth::ClientAuthSession,
    /// Whether the agent reads this client's clock, as its welcome says.
    clocks: ClockCheck,
    /// Whether the welcome said the agent's clock at all (an agent that says
    /// nothing of it is taken for an older one, and not probed).
    agent_clock: bool,
    /// The agent's name for itself (protocol 8), checked.
    label: Option<String>,
}

/// Waits at most `wait` for the first byte of the peer's answer to the
/// preamble. Ok when it may start a netrig frame; otherwise what the peer
/// is, from what it says, or why it is not taken for an agent.
fn first_reply(stream: &TcpStream, addr: SocketAddr, wait: Duration) -> Result<(), ClientError> {
    let not_agent = |detail: String| ClientError::NotAgent { addr, detail };
    stream
        .set_read_timeout(Some(wait))
        .map_err(|error| ClientError::Connect { addr, error })?;
    let mut first = [0u8; 1];
    let n = loop {
        match stream.peek(&mut first) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(not_agent(silence(addr.port(), wait)))
            }
            Err(e) => {
                return Err(not_agent(format!(
                    "after netrig's greeting: {e}{}",
                    port_note(addr.port())
                )))
            }
        }
    };
    if n == 0 {
        return Err(not_agent(format!(
            "it closed the connection without a word after netrig's greeting{}",
            port_note(addr.port())
        )));
    }
    if neighbour::may_be_netrig(first[0]) {
        return Ok(());
    }
    // Not netrig's: what it says until it closes, pauses or has said enough names it.
    let reply = read_some(stream, 64, Duration::from_millis(500));
    match neighbour::recognise(&reply) {
        Some(n) => Err(ClientError::Neighbour {
            addr,
            what: n.what,
            how: n.how,
            advice: n.advice,
        }),
        None => Err(not_agent(format!(
            "it answered netrig's greeting with {}, which no netrig agent sends{}",
            shown_bytes(&reply),
            port_note(addr.port())
        ))),
    }
}

/// Why a peer that said nothing is not taken for an agent, with what its
/// port suggests.
fn silence(port: u16, wait: Duration) -> String {
    let tenths = (wait.as_secs_f64() * 10.0).round() / 10.0;
    let secs = if tenths.fract() == 0.0 {
        format!("{tenths:.0}")
    } else {
        format!("{tenths:.1}")
    };
    format!(
        "no answer to netrig's greeting in the {secs} s this client waits for one (a netrig agent answers \
         at once): a server that waits for its client to speak first, or an agent too stalled to answer \
         (stopped, or out of file descriptors){}",
        port_note(port)
    )
}

/// What listens on `port` by default, when netrig knows: "; port 5201 is
/// iperf3's default port, and ...: if that is what runs there, ...".
fn port_note(port: u16) -> String {
    match neighbour::port_hint(port) {
        Some(h) if h.silence.is_empty() => format!(
            "; port {port} is {} default port: if that is what runs there, {}",
            h.whose, h.advice
        ),
        Some(h) => format!(
            "; port {port} is {} default port, and {}: if that is what runs there, {}",
            h.whose, h.silence, h.advice
        ),
        None => String::new(),
    }
}

/// Reads up to `max` bytes, until the peer closes, pauses for `wait` or ends a line.
pub(crate) fn read_some(mut stream: &TcpStream, max: usize, wait: Duration) -> Vec<u8> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < max && !got.contains(&b'\n') {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut buf[..max - got.len()]) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    got
}

/// A peer's bytes as a message shows them: printable ASCII quoted (line ends
/// escaped), anything else in hex.
pub(crate) fn shown_bytes(b: &[u8]) -> String {
    if b.iter().all(|c| c.is_ascii_graphic() || b" \t\r\n".contains(c)) {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("the bytes {}", hex.join(" "))
    }
}

/// What answered netrig's greeting.
pub(crate) enum Greeted {
    /// A peer whose first byte may start a netrig frame: the connection,
    /// and when the greeting left.
    Agent(FramedConn, Instant),
    /// An iperf3 server (`--peer auto`), its connection past the cookie.
    Iperf3(crate::iperf3::Detected),
}

/// Opens the control connection to `addr` and sends netrig's greeting:
/// the connection, once the peer's first byte may start a netrig frame, and
/// when the greeting left. With `--peer auto` (`opts.peer`), a peer silent
/// for a moment is offered the rest of an iperf3 cookie
/// ([`crate::iperf3::detect`]), which an agent never sees: it answers first.
pub(crate) fn greet(addr: SocketAddr, opts: &ClientOptions) -> Result<Greeted, ClientError> {
    let opening = Instant::now();
    let mut stream = connect_socket(addr, opts, Transport::Tcp, |_| Ok(()))?;
    let round_trip = opening.elapsed();
    let _ = stream.set_nodelay(true);
    let preamble = ControlPreamble {
        min_version: MIN_PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
    }
    .encode();
    stream
        .write_all(&preamble)
        .map_err(|error| ClientError::Connect { addr, error })?;
    let greeted = Instant::now();
    let first_wait = (FIRST_REPLY_MIN + round_trip * FIRST_REPLY_RTTS).min(WELCOME_TIMEOUT);
    if opts.peer == netrig_report::model::peer::Peer::Auto {
        use crate::iperf3::detect::{probe, Probed};
        match probe(stream, addr, &preamble, round_trip, first_wait)? {
            Probed::Answered(s) => stream = s,
            Probed::Iperf3(d) => return Ok(Greeted::Iperf3(d)),
            // A slow agent answered after the rest of the cookie left, which
            // it took for a frame: greet it again, without the probe.
            Probed::LateAgent => {
                let again = ClientOptions {
                    peer: netrig_report::model::peer::Peer::Netrig,
                    ..opts.clone()
                };
                return greet(addr, &again);
            }
        }
    }
    let left = first_wait
        .saturating_sub(greeted.elapsed())
        .max(Duration::from_millis(1));
    first_reply(&stream, addr, left)?;
    Ok(Greeted::Agent(
        FramedConn::new(stream, AGENT_FRAME_LIMIT),
        greeted,
    ))
}

/// An agent's welcome, as the client takes it.
struct Welcome {
    version: u16,
    software: String,
    limits: AgentLimits,
    auth: netrig_proto::auth::WelcomeAuth,
    clock: Option<AgentClock>,
    name: Option<String>,
}

/// What the peer at `addr` answered netrig's greeting with (`msg`, as
/// read), through the session's state machine: its welcome, or why it is
/// not an agent or refused this client.
fn welcomed(
    sm: &mut ClientSession,
    msg: Result<AgentMsg, ConnError>,
    addr: SocketAddr,
) -> Result<Welcome, ClientError> {
    let msg = msg.map_err(|e| ClientError::NotAgent {
        addr,
        detail: match e {
            ConnError::Closed => "it closed the connection without a welcome".into(),
            ConnError::Timeout(_) => format!(
                "no whole welcome in the {} s this client waits for one",
                WELCOME_TIMEOUT.as_secs()
            ),
            other => other.to_string(),
        },
    })?;
    // An agent that refuses this client's address says so in place of a welcome.
    if let AgentMsg::Error { message } = &msg {
        return Err(ClientError::Handshake(format!(
            "the agent at {addr} refused this client: {message}"
        )));
    }
    match sm.on_agent(msg) {
        Ok(ClientEvent::Welcome {
            version,
            software,
            limits,
            auth: welcome_auth,
            clock,
            name,
        }) => Ok(Welcome {
            version,
            software,
            limits,
            auth: welcome_auth,
            clock,
            name,
        }),
        Ok(other) => Err(ClientError::NotAgent {
            addr,
            detail: format!("it answered {other}"),
        }),
        Err(e) => Err(ClientError::Handshake(format!("agent at {addr}: {e}"))),
    }
}

/// What the agent at `addr` answered the hello with (`answer`, as read):
/// its signature if it accepted it, or why the session is not to be.
fn hello_answered(
    answer: Result<AgentMsg, ConnError>,
    addr: SocketAddr,
) -> Result<Option<netrig_proto::auth::Signature>, ClientError> {
    match answer {
        Ok(AgentMsg::HelloAccepted { signature }) => Ok(signature),
        Ok(AgentMsg::Error { message }) => Err(ClientError::Handshake(format!(
            "the agent at {addr} refused this client: {message}"
        ))),
        // Its sessions are all taken (a place is given once the hello is in).
        Ok(AgentMsg::Busy { reason }) => Err(ClientError::Handshake(format!(
            "agent at {addr}: agent is busy: {reason}"
        ))),
        Ok(other) => Err(ClientError::Handshake(format!(
            "the agent at {addr} answered the hello with {}, not hello_accepted",
            other.name()
        ))),
        Err(e) => Err(ClientError::Handshake(format!(
            "the agent at {addr} did not answer the hello: {e}"
        ))),
    }
}

impl Client {
    /// Connects to the first address that answers and shakes hands.
    pub fn connect(addrs: &[SocketAddr], opts: ClientOptions) -> Result<Client, ClientError> {
        let opts = ClientOptions {
            peer: netrig_report::model::peer::Peer::Netrig,
            ..opts
        };
        match Self::connect_peer(addrs, opts)? {
            Connected::Agent(c) => Ok(c),
            Connected::Iperf3(d) => Err(ClientError::Protocol(format!(
                "{} answered as an iperf3 server without being probed",
                d.addr
            ))),
        }
    }

    /// Connects to the first address that answers: a netrig agent, handshaken,
    /// or with `--peer auto` (`opts.peer`) an iperf3 server that answered as one.
    pub fn connect_peer(addrs: &[SocketAddr], opts: ClientOptions) -> Result<Connected, ClientError> {
        opts.local
            .validate("-s/--local-sockbuf")
            .map_err(|e| ClientError::Option(e.to_string()))?;
        let mut last = None;
        for &addr in addrs {
            match Self::connect_one(addr, opts.clone()) {
                Ok(c) => return Ok(c),
                Err(
                    e @ (ClientError::Handshake(_)
                    | ClientError::NotAgent { .. }
                    | ClientError::Neighbour { .. }
                    | ClientError::Iperf3 { .. }
                    | ClientError::Option(_)),
                ) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::Option("no address to connect to".into())))
    }

    fn connect_one(addr: SocketAddr, opts: ClientOptions) -> Result<Connected, ClientError> {
        let (mut conn, greeted) = match greet(addr, &opts)? {
            Greeted::Agent(conn, greeted) => (conn, greeted),
            Greeted::Iperf3(d) => return Ok(Connected::Iperf3(d)),
        };
        let mut sm = ClientSession::new();
        let msg = conn.recv(WELCOME_TIMEOUT.saturating_sub(greeted.elapsed()));
        let welcome = welcomed(&mut sm, msg, addr)?;
        let refuse = |e: netrig_proto::auth::AuthError| {
            ClientError::Handshake(format!("refusing the agent at {addr}: {e}"))
        };
        let (hello_auth, auth) = match opts.auth.hello(welcome.version, &welcome.auth) {
            Ok(h) => h,
            Err(netrig_proto::auth::AuthError::Required) => {
                return Err(ClientError::Handshake(format!(
                    "the agent at {addr} requires authentication: give this client's key with --key FILE \
                     (one whose public key is in the agent's --authorized-keys; see `netrig keygen`)"
                )))
            }
            Err(e) => return Err(refuse(e)),
        };
        conn.send(&ClientMsg::Hello {
            software: SOFTWARE_VERSION.into(),
            auth: hello_auth,
        })
        .map_err(proto_err)?;
        let signature = hello_answered(conn.recv(Duration::from_secs(10)), addr)?;
        auth.check_accepted(signature.as_ref(), opts.auth.agent_key.is_some())
            .map_err(refuse)?;
        let Welcome {
            version,
            software,
            limits,
            auth: welcome_auth,
            clock,
            name,
        } = welcome;
        Ok(Connected::Agent(Client {
            conn,
            sm,
            addr,
            opts,
            software,
            version,
            limits,
            auth,
            agent_clock: clock.is_some(),
            label: name,
            clocks: clock_check(
                clock.as_ref(),
                netrig_metrics::witness::boot_id()
                    .map(|id| netrig_proto::clock::boot_hash(&welcome_auth.nonce.0, &id))
                    .as_deref(),
            ),
        }))
    }

    pub fn agent_address(&self) -> SocketAddr {
        self.addr
    }

    pub fn agent_limits(&self) -> &AgentLimits {
        &self.limits
    }

    /// The datagram size udp-stream uses when `-m` is not given: the largest
    /// payload that goes unfragmented on the path to the agent (its MTU, read
    /// from a throw-away connected UDP socket, less 28 bytes of headers over
    /// IPv4 or 48 over IPv6), but no more than an Ethernet-sized datagram's
    /// (1472 / 1452 bytes), which is also the size when the MTU is unknown. The
    /// agent's datagrams (-R) take the same path back, so the same size.
    pub fn default_udp_size(&self) -> u32 {
        crate::link::default_udp_size(self.addr, self.opts.bind)
    }

    /// The agent as messages name it: "the agent at 192.0.2.1:6387", with
    /// the host as given when it is a name, or "the embedded agent at …".
    pub fn agent_name(&self) -> String {
        match &self.opts.host {
            None => format!("the embedded agent at {}", self.addr),
            Some(h) if *h != self.addr.ip().to_string() => format!("the agent at {h} ({})", self.addr),
            Some(_) => format!("the agent at {}", self.addr),
        }
    }

    /// The agent's name for itself (`netrig serve --name`), from its welcome.
    pub fn agent_label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The key the agent proved it holds (its signature of the handshake), if it has one.
    pub fn agent_key(&self) -> Option<netrig_proto::auth::PublicKey> {
        self.auth.agent_key()
    }

    /// The agent's clock less this host's, measured now with the clock probe (up to 16
    /// exchanges within a second; docs/PROTOCOL.md "Clock probe"). Inner `Err`: why none
    /// came of them, or that the agent (protocol 6 or older) has no clock probe.
    pub fn clock_offset(&mut self) -> Result<Result<netrig_proto::clock::ClockOffset, String>, ClientError> {
        if self.version < netrig_proto::clock::CLOCK_PROBE_VERSION || !self.agent_clock {
            return Ok(Err(format!(
                "{} (protocol v{}) answers no clock probe",
                self.agent_name(),
                self.version
            )));
        }
        self.measure_clock()
    }

    /// Protocol 8: asks the agent to run `request`'s test as a client against the agent it
    /// names, and waits for the whole result (the document `netrig KIND --json` prints),
    /// sending heartbeats as during a test of its own. `wait`: the most to wait for it;
    /// `cancel`, checked about every 200 ms, aborts it.
    pub fn initiate(
        &mut self,
        request: &netrig_proto::initiate::InitiateRequest,
        wait: Duration,
        cancel: &dyn Fn() -> bool,
    ) -> Result<serde_json::Value, ClientError> {
        use netrig_proto::initiate::INITIATE_VERSION;
        if self.version < INITIATE_VERSION {
            return Err(ClientError::Rejected {
                agent: self.agent_name(),
                reason: format!(
                    "it speaks protocol v{} (netrig {}); running a test against another agent needs v{INITIATE_VERSION}",
                    self.version, self.software
                ),
            });
        }
        let auth = self.auth.sign_initiate(request);
        self.conn
            .send(&ClientMsg::Initiate {
                request: request.clone(),
                auth,
            })
            .map_err(proto_err)?;
        let began = Instant::now();
        let mut heard = Instant::now();
        let mut beat = Instant::now();
        let mut aborted = false;
        loop {
            if began.elapsed() > wait {
                return Err(ClientError::Test(format!(
                    "{} sent no result of the test against {} within {} s",
                    self.agent_name(),
                    request.target,
                    wait.as_secs()
                )));
            }
            if heard.elapsed() > netrig_proto::message::SILENCE_LIMIT {
                return Err(ClientError::Test(format!(
                    "{} said nothing for {} s while it ran the test against {}",
                    self.agent_name(),
                    netrig_proto::message::SILENCE_LIMIT.as_secs(),
                    request.target
                )));
            }
            if !aborted && cancel() {
                aborted = true;
                let _ = self.conn.send(&ClientMsg::Abort {
                    reason: "the asker was interrupted".into(),
                });
            }
            if beat.elapsed() >= netrig_proto::message::HEARTBEAT {
                self.conn.send(&ClientMsg::Heartbeat).map_err(proto_err)?;
                beat = Instant::now();
            }
            match self.conn.recv::<AgentMsg>(Duration::from_millis(200)) {
                Ok(AgentMsg::Heartbeat) => heard = Instant::now(),
                Ok(AgentMsg::InitiateDone { result }) => return Ok(*result),
                Ok(AgentMsg::InitiateRejected { reason }) => {
                    return Err(ClientError::Rejected {
                        agent: self.agent_name(),
                        reason,
                    })
                }
                Ok(AgentMsg::Error { message }) => {
                    return Err(ClientError::Test(format!("{}: {message}", self.agent_name())))
                }
                Ok(other) => {
                    return Err(ClientError::Protocol(format!(
                        "{} answered initiate with {}",
                        self.agent_name(),
                        other.name()
                    )))
                }
                Err(ConnError::Timeout(_)) => {}
                Err(e) => return Err(proto_err(e)),
            }
        }
    }

    /// Ends the session politely.
    pub fn close(mut self) {
        let _ = self.conn.send(&ClientMsg::Bye);
    }

    /// A long-lived TCP data connection; `either_parity`: past the point
    /// where connect(2) would scan every port of one parity first
    /// ([`sockopt::either_port_parity`]).
    fn open_data(
        &self,
        cookie: SessionCookie,
        flow: u32,
        either_parity: bool,
    ) -> Result<TcpStream, ClientError> {
        let hello = DataHello {
            version: self.version,
            cookie,
            flow,
        };
        open_stream(self.addr, &self.opts, &hello.encode(), either_parity)
    }

    /// A UDP flow's socket: bound like the TCP ones, connected to the agent's
    /// port, with the first hello sent (it is repeated until data-ready).
    /// `flag` names the option that set the size, for the error when it cannot pass.
    fn open_udp(&self, hello: &DataHello, datagram: u32, flag: &str) -> Result<UdpSocket, ClientError> {
        let udp = open_datagrams(self.addr, &self.opts, datagram, flag)?;
        udp.send(&hello.encode()).map_err(|error| ClientError::Connect {
            addr: self.addr,
            error,
        })?;
        Ok(udp)
    }
}

impl Client {
    /// Runs one test. `observer` sees each merged interim report as soon as
    /// both ends have sampled it; `ctl` lets the caller abort (Ctrl-C).
    pub fn run(
        &mut self,
        spec: &TestSpec,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, ClientError> {
        let kind = netrig_kinds::of(spec);
        let sized = if self.opts.udp_size_default {
            kind.fit_to_path(spec, self.default_udp_size())
        } else {
            None
        };
        let spec = sized.as_ref().unwrap_or(spec);
        self.check_spec(spec)?;
        // The agent runs the hooks asked for beside the test: before it
        // answers the request (the set-up, and the tear-down when that
        // fails), and before its results (the tear-down).
        let hook_time = self.limits.hook_time(&spec.remote_hooks);
        // One-way delay between two clocks: their offset, measured now (and
        // again after the test, for the drift).
        let clocks = if matches!(netrig_proto::spec::one_way_messages(spec), Some(Ok(_))) {
            self.clocks_for_test()?
        } else {
            self.clocks.clone()
        };
        let (cookie, mut warnings) = self.request_test(spec, hook_time)?;

        let environment = netrig_proto::report::measure::Environment::from(&netrig_metrics::collect());
        let counters_before = netrig_metrics::read_kernel_counters().ok();
        let requested = BufPair {
            snd: self.opts.local.sndbuf,
            rcv: self.opts.local.rcvbuf,
        };
        // A connection-per-transaction test opens its connections during the run.
        let workload = kind.workload(spec);
        let per_transaction = matches!(workload, Workloads::Transient(_));
        let opened = self.open_flows(spec, cookie, per_transaction, requested)?;
        warnings.extend(opened.warnings);
        self.await_data_ready(spec, &opened.udp_hellos)?;
        drop(opened.udp_hellos); // their duplicate descriptors are not needed past set-up
                                 // Time zero before `go` leaves: the agent starts when it reads `go`, so
                                 // its window never closes before ours (a client descheduled between
                                 // sending and reading the clock would otherwise start late, and its
                                 // last transactions could reach an agent whose run had ended).
                                 // The sampler is opened before `go` (it reads /proc/kallsyms) and samples only
                                 // between the window's marks, which the engine tells it.
        let profile = self.opts.profile.then(netrig_profile::watch::ProfileWatch::new);
        self.wait_for_start(&ctl)?;
        let start = Instant::now();
        let started_wall = std::time::SystemTime::now();
        self.conn.send(&ClientMsg::Go).map_err(proto_err)?;
        self.sm.go_sent().map_err(proto_err)?;

        let mut run_plan = RunPlan::for_spec(spec, start, cookie.test_id());
        run_plan.cpus = self.opts.cpus.clone();
        if let Some(p) = &profile {
            run_plan.watch = p.watch();
        }
        let side = match workload {
            Workloads::Transient(workload) => SideFlows::Transient {
                workload,
                flows: opened.slots,
                intake: None,
            },
            Workloads::Connected(workload) => SideFlows::Connected {
                workload,
                flows: opened.flows,
            },
        };
        let LocalRun {
            outcome,
            samples: local_samples,
            agent,
            reader,
        } = self.run_local(spec, side, &run_plan, &ctl, hook_time, observer)?;
        log::debug!("local side done; awaiting the agent's results");
        let profile = profile.map(|p| p.finish(netrig_profile::watch::Work::of_run(spec, &outcome)));
        if let Some(c) = outcome.flows.first().and_then(|f| f.first_connection.as_ref()) {
            let got = (c.initial, &c.applied);
            warnings.extend(sockopt::setup_warnings(
                requested,
                &self.opts.local,
                got,
                "local",
                "-s",
            ));
        }
        let counters = match (counters_before, netrig_metrics::read_kernel_counters()) {
            (Some(b), Ok(a)) => Some(CounterReport::between(&b, &a, netrig_metrics::read_conntrack())),
            _ => None,
        };
        let deadline = Instant::now() + Duration::from_secs(60) + hook_time;
        let (remote_report, remote_samples) = agent.results(&mut self.sm, observer, &reader, deadline);
        let _ = reader.join();
        let mut remote_report = remote_report?;
        // The agent's end (`profile` asked in the spec), checked before it joins this end's.
        let remote_profile = remote_report.profile.take();
        let profile = profile.map(|local| crate::profile::both_ends(local, remote_profile));

        let clocks = self.clocks_after_test(clocks)?;
        let measured = Measured {
            outcome: &outcome,
            requested,
            setup_info: &opened.setup_info,
            counters,
            environment,
        };
        let local_report = measured.report(spec, clocks);
        let mut config = TestConfig::new(spec, kind.report(), self.run_info(spec));
        if sized.is_some() {
            config.set_kind_part(&netrig_kinds::UdpStreamConfig {
                message_size_default: Some(true),
                ..config.kind_part().unwrap_or_default()
            });
        }
        let local = Side {
            report: &local_report,
            intervals: &local_samples,
        };
        let remote = Side {
            report: &remote_report,
            intervals: &remote_samples,
        };
        assemble(
            spec,
            kind.report(),
            config,
            self.agent_info(),
            local,
            remote,
            warnings,
        )
        .map(|mut r| {
            r.profile = profile;
            r.started_unix_s = started_wall
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64());
            r
        })
        .map_err(ClientError::Test)
    }

    /// Runs this end's flows (`side`) by `plan` while a reader thread takes
    /// the agent's messages from the control connection: what this end
    /// measured, and the agent's side as far as it came. A failure of this
    /// end aborts the test, telling the agent why.
    fn run_local<'c>(
        &mut self,
        spec: &TestSpec,
        side: SideFlows,
        plan: &RunPlan,
        ctl: &'c Arc<RunControl>,
        hook_time: Duration,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<LocalRun<'c>, ClientError> {
        // The agent's interim reports and results arrive on the control
        // connection while this thread runs its own flows.
        let (tx, rx) = mpsc::channel::<Result<AgentMsg, String>>();
        let mut reader = self.conn.try_clone_stream().map_err(proto_err)?;
        let until = plan.start + run_bound(spec, &self.limits) + hook_time;
        let reader = std::thread::Builder::new()
            .name("netrig-control".into())
            .spawn({
                let ctl = ctl.clone();
                let heartbeats = self.version >= netrig_proto::message::HEARTBEAT_VERSION;
                move || read_agent(&mut reader, tx, until, heartbeats, &ctl)
            })
            .map_err(|e| ClientError::Test(format!("cannot start the control reader: {e}")))?;
        let mut agent = AgentSide {
            rx,
            merger: Merger::new(spec.flow_plan(), spec.rules().exchange().is_transactional()),
            report: None,
            failure: None,
            max_samples: max_samples(spec.limit, spec.interval_s, self.limits.max_duration_s),
            ctl,
        };
        let mut samples = Vec::new();
        let sm = &mut self.sm;
        let outcome = run_side(side, plan, ctl, &mut |s: &IntervalSample| {
            samples.push(s.clone());
            agent.merger.push_local(s.clone(), observer);
            agent.pump(sm, observer, None);
        });
        match outcome {
            Ok(outcome) => Ok(LocalRun {
                outcome,
                samples,
                agent,
                reader,
            }),
            Err(e) => {
                let mut w = self.conn.try_clone_stream().map_err(proto_err)?;
                let _ = w.write_all(&netrig_proto::encode_frame(&ClientMsg::Abort {
                    reason: e.to_string(),
                }));
                Err(ClientError::Test(e.to_string()))
            }
        }
    }

    /// What this end checks before it asks for `spec`: the agent's limits,
    /// and the hooks it offers (a hook it does not is refused here, naming
    /// what it offers, before anything runs there); the descriptors this
    /// end's sockets take (twice over when the agent runs in this process);
    /// that this end's kernel makes the test's transport's sockets.
    fn check_spec(&self, spec: &TestSpec) -> Result<(), ClientError> {
        spec.validate(&self.limits)
            .map_err(|e| ClientError::Option(e.at_agent(&self.agent_name())))?;
        transport::check_kernel(spec.rules().transport(), "client").map_err(ClientError::Option)?;
        let sockets = netrig_engine::files::sockets_needed(spec)
            .saturating_mul(if self.opts.host.is_none() { 2 } else { 1 });
        netrig_engine::files::check_open_files(sockets, "this client").map_err(ClientError::Option)
    }

    /// How long the agent may take to set a test up (its data connections
    /// in): its set-up timeout and 5 s.
    fn setup_wait(&self) -> Duration {
        Duration::from_secs(self.limits.setup_timeout_s + 5)
    }

    /// Asks for `spec`: the test's cookie and the agent's warnings, or why
    /// it refused. `hook_time`: what its hooks may take besides.
    fn request_test(
        &mut self,
        spec: &TestSpec,
        hook_time: Duration,
    ) -> Result<(SessionCookie, Vec<String>), ClientError> {
        // `--profile` asks the agent for its end too (its operator decides: --allow-profile).
        let spec = &TestSpec {
            profile: self.opts.profile,
            ..spec.clone()
        };
        self.conn
            .send(&ClientMsg::TestRequest {
                spec: spec.clone(),
                auth: self.auth.sign_request(spec),
            })
            .map_err(proto_err)?;
        self.sm.request_sent().map_err(proto_err)?;
        log::debug!("test request sent: {} {} flow(s)", spec.kind(), spec.flows);
        let msg: AgentMsg = self.conn.recv(self.setup_wait() + hook_time).map_err(proto_err)?;
        match self.sm.on_agent(msg).map_err(proto_err)? {
            ClientEvent::Accepted(AgentMsg::TestAccepted { cookie, warnings }) => Ok((cookie, warnings)),
            ClientEvent::Rejected(reason) => Err(ClientError::Rejected {
                agent: self.agent_name(),
                reason,
            }),
            other => Err(proto_err(format!(
                "unexpected answer to the test request: {other}"
            ))),
        }
    }

    /// This end's flows for the test of `cookie`: their data connections
    /// opened, each configured and read back (the first one's warnings
    /// kept); or, for a connection-per-transaction test, their slots, which
    /// open connections during the run. A connection that cannot be opened
    /// aborts the test, telling the agent why.
    fn open_flows(
        &mut self,
        spec: &TestSpec,
        cookie: SessionCookie,
        per_transaction: bool,
        requested: BufPair,
    ) -> Result<Opened, ClientError> {
        let plan = spec.flow_plan();
        let connector = Arc::new(Connector {
            addr: self.addr,
            bind: self.opts.bind,
            options: self.opts.local.clone(),
            version: self.version,
            cookie,
        });
        let either_parity_from = sockopt::either_parity_from(sockopt::local_port_range());
        let mut opened = Opened::default();
        let mut in_dir: BTreeMap<Direction, u32> = BTreeMap::new();
        for (id, dir) in plan.iter().enumerate() {
            let id = id as u32;
            let role = spec.role(*dir, false);
            if per_transaction {
                opened
                    .slots
                    .push(FlowSlot::new(id, *dir, role, Some(connector.clone())));
                continue;
            }
            let k = in_dir.entry(*dir).or_default();
            let index_in_dir = *k;
            *k += 1;
            let stream = match self.open_flow(spec, cookie, id, id >= either_parity_from, &mut opened) {
                Ok(s) => s,
                Err(e) => {
                    let _ = self.conn.send(&ClientMsg::Abort {
                        reason: e.to_string(),
                    });
                    return Err(e);
                }
            };
            let initial = sockopt::buffers(&stream);
            let applied = sockopt::applied(&stream);
            if id == 0 {
                let got = (initial, &applied);
                let warned = sockopt::setup_warnings(requested, &self.opts.local, got, "local", "-s");
                opened.warnings.extend(warned);
            }
            let quota = if role == Role::Sender {
                spec.byte_quota(index_in_dir)
            } else {
                None
            };
            opened.setup_info.insert(id, (initial, applied));
            opened.flows.push(Flow::new(id, *dir, role, stream, quota));
        }
        log::debug!("{} data connections open", plan.len());
        Ok(opened)
    }

    /// Flow `id`'s socket: a TCP data connection, or a UDP socket whose
    /// hello `opened` keeps, to repeat until the agent has it.
    fn open_flow(
        &self,
        spec: &TestSpec,
        cookie: SessionCookie,
        id: u32,
        either_parity: bool,
        opened: &mut Opened,
    ) -> Result<FlowSocket, ClientError> {
        let rules = spec.rules();
        if !rules.transport().datagrams() {
            return self.open_data(cookie, id, either_parity).map(FlowSocket::from);
        }
        let hello = DataHello {
            version: self.version,
            cookie,
            flow: id,
        };
        let datagram = rules
            .datagram_size()
            .unwrap_or(netrig_proto::spec::MAX_UDP_PAYLOAD);
        let flag = if rules.exchange() == Exchange::Stream {
            "-m"
        } else {
            "-r"
        };
        self.open_udp(&hello, datagram, flag).map(|u| {
            opened.udp_hellos.push((u.try_clone(), hello));
            FlowSocket::from(u)
        })
    }

    /// Waits for data_ready; UDP hellos may be lost: repeats them until the
    /// agent has them all.
    fn await_data_ready(&mut self, spec: &TestSpec, udp_hellos: &[UdpHello]) -> Result<(), ClientError> {
        let setup = self.setup_wait();
        let ready_by = Instant::now() + setup;
        let msg: AgentMsg = loop {
            match self
                .conn
                .try_recv(Duration::from_millis(100))
                .map_err(proto_err)?
            {
                Some(m) => break m,
                None if Instant::now() >= ready_by => {
                    return Err(ClientError::Test(format!(
                        "the agent did not get every data connection within {} s{}",
                        setup.as_secs(),
                        if spec.rules().transport().datagrams() {
                            " (is UDP to the agent's port blocked?)"
                        } else {
                            ""
                        }
                    )))
                }
                None => {
                    for (sock, hello) in udp_hellos {
                        if let Ok(s) = sock {
                            let _ = s.send(&hello.encode());
                        }
                    }
                }
            }
        };
        match self.sm.on_agent(msg).map_err(proto_err)? {
            ClientEvent::DataReady => Ok(()),
            other => Err(proto_err(format!("expected data_ready, got {other}"))),
        }
    }

    /// The common start of several clients (`--start-at`): waits for it
    /// (bounded), still abortable.
    fn wait_for_start(&self, ctl: &RunControl) -> Result<(), ClientError> {
        let Some(at) = self.opts.start_at else {
            return Ok(());
        };
        let until = Instant::now()
            + at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
                .min(MAX_START_WAIT);
        while let Some(left) = until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        {
            if let Some(reason) = ctl.abort_reason() {
                return Err(ClientError::Test(reason));
            }
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        Ok(())
    }

    /// The agent as the result names it.
    fn agent_info(&self) -> AgentInfo {
        AgentInfo {
            address: self.addr.to_string(),
            software: self.software.clone(),
            protocol_version: self.version,
        }
    }

    /// How the test was run, as the result says it.
    fn run_info(&self, spec: &TestSpec) -> RunInfo {
        RunInfo {
            host: self.opts.host.clone(),
            port: self.addr.port(),
            cpus: self.opts.cpus.clone(),
            bind: self.opts.bind.map(|b| b.to_string()),
            family: self.opts.family.name().map(str::to_string),
            local: shown(&self.opts.local),
            remote: shown(&SocketSettings::new(&spec.remote, spec.rules().tcp())),
        }
    }
}

/// This end's run: what it measured, its interim samples, and the agent's
/// side with the thread that reads its messages.
struct LocalRun<'c> {
    outcome: netrig_engine::runner::SideOutcome,
    samples: Vec<IntervalSample>,
    agent: AgentSide<'c>,
    reader: std::thread::JoinHandle<()>,
}

/// A UDP flow's socket (a second handle on it) and its hello.
type UdpHello = (std::io::Result<UdpSocket>, DataHello);

/// This end's flows as set-up left them.
#[derive(Default)]
struct Opened {
    /// Flows with a data connection of their own.
    flows: Vec<Flow>,
    /// Connection-per-transaction flows.
    slots: Vec<FlowSlot>,
    /// UDP flows' hellos, repeated until the agent has them all.
    udp_hellos: Vec<UdpHello>,
    /// Each flow's buffers and options read back at set-up.
    setup_info: BTreeMap<u32, (BufPair, AppliedOptions)>,
    /// What the first flow's read-back warns of.
    warnings: Vec<String>,
}

/// The longest a test may run past `go`, whatever the agent does: its
/// length, or for a byte count the agent's longest test, and a minute.
fn run_bound(spec: &TestSpec, limits: &AgentLimits) -> Duration {
    match spec.limit {
        Limit::Duration { seconds } => Duration::from_secs_f64(seconds) + Duration::from_secs(60),
        Limit::Bytes { .. } => Duration::from_secs(limits.max_duration_s + 60),
    }
}

/// What an agent may send of interval samples: one per -i period of the
/// longest the test may last, and a few more; each with a value per flow at
/// most. More is refused, not kept (a hostile agent could otherwise grow
/// this client's memory for as long as the test runs).
/// `limit` and `interval_s`: the test's; `max_duration_s`: the agent's
/// longest test (what a byte count may last).
fn max_samples(limit: Limit, interval_s: Option<f64>, max_duration_s: u64) -> usize {
    let longest = match limit {
        Limit::Duration { seconds } => seconds,
        Limit::Bytes { .. } => max_duration_s as f64,
    };
    interval_s.map_or(0.0, |i| (longest / i).ceil()).min(1e7) as usize + 16
}

/// Why an interval sample from the agent is refused: more samples than
/// `max_samples` (`have` taken already), or more values than the test's
/// `flows`.
fn sample_refusal(sample: &IntervalSample, have: usize, max_samples: usize, flows: usize) -> Option<String> {
    let too_wide = [sample.ids.len(), sample.bytes.len(), sample.tcp_info.len()]
        .into_iter()
        .chain([sample.transactions.len(), sample.retransmits.len()])
        .chain([sample.udp.len(), sample.failures.len()])
        .any(|n| n > flows);
    (have >= max_samples || too_wide).then(|| {
        format!(
            "the agent sent an interval sample beyond what the test can have ({max_samples} samples at most, a \
             value per flow of {flows}): refused"
        )
    })
}

/// The agent's side of a running test, as its messages come from the
/// control reader: its interim reports merged with this end's, then its
/// results, or what went wrong.
struct AgentSide<'c> {
    rx: mpsc::Receiver<Result<AgentMsg, String>>,
    merger: Merger,
    report: Option<SideReport>,
    failure: Option<ClientError>,
    max_samples: usize,
    ctl: &'c RunControl,
}

impl AgentSide<'_> {
    /// Takes what the reader passed on: what is there (`block`: `None`), or
    /// what comes within `block`; until the results, a failure, or nothing more.
    fn pump(
        &mut self,
        sm: &mut ClientSession,
        observer: &mut dyn FnMut(&IntervalResult),
        block: Option<Duration>,
    ) {
        loop {
            let next = match block {
                Some(d) => self.rx.recv_timeout(d).map_err(|_| ()),
                None => self.rx.try_recv().map_err(|_| ()),
            };
            let Ok(msg) = next else { return };
            let event = msg
                .map_err(proto_err)
                .and_then(|m| sm.on_agent(m).map_err(proto_err));
            if !self.take(event, observer) {
                return;
            }
        }
    }

    /// One message of the agent, through the session's state machine:
    /// whether more may follow.
    fn take(
        &mut self,
        event: Result<ClientEvent, ClientError>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> bool {
        match event {
            Ok(ClientEvent::Interval(AgentMsg::Interval { sample })) => {
                let have = self.merger.remote_all.len();
                if let Some(why) = sample_refusal(&sample, have, self.max_samples, self.merger.plan.len()) {
                    self.ctl.abort(why.clone());
                    self.failure.get_or_insert(proto_err(why));
                    return false;
                }
                self.merger.push_remote(*sample, observer);
                true
            }
            Ok(ClientEvent::Results(AgentMsg::Results { report })) => {
                self.report = Some(*report);
                false
            }
            Ok(other) => {
                self.failure
                    .get_or_insert(proto_err(format!("unexpected message during the test: {other}")));
                false
            }
            Err(e) => {
                self.failure.get_or_insert(e);
                false
            }
        }
    }

    /// Once this end is done: the agent's results (by `deadline`, or until
    /// the reader gives up), and its interval samples, every interim report
    /// flushed to `observer`.
    fn results(
        mut self,
        sm: &mut ClientSession,
        observer: &mut dyn FnMut(&IntervalResult),
        reader: &std::thread::JoinHandle<()>,
        deadline: Instant,
    ) -> (Result<SideReport, ClientError>, Vec<IntervalSample>) {
        while self.report.is_none() && self.failure.is_none() && Instant::now() < deadline {
            self.pump(sm, observer, Some(Duration::from_millis(200)));
            if reader.is_finished() && self.report.is_none() {
                self.pump(sm, observer, None);
                break;
            }
        }
        self.merger.flush(observer);
        log::debug!(
            "results: {}",
            if self.report.is_some() {
                "received"
            } else {
                "missing"
            }
        );
        let samples = self.merger.remote_samples();
        let report = match (self.failure, self.report) {
            (Some(e), _) => Err(e),
            (None, r) => r.ok_or_else(|| ClientError::Test("the agent sent no results".into())),
        };
        (report, samples)
    }
}

impl Client {
    /// How this test's one-way delay reads the two ends' clocks: as the
    /// handshake found them when one clock; else, with an agent that answers
    /// the clock probe (protocol 7), their offset measured over the control
    /// connection (or why it could not be).
    fn clocks_for_test(&mut self) -> Result<ClockCheck, ClientError> {
        let why = match unprobed(&self.clocks, self.agent_clock, self.version) {
            Ok(why) => why,
            Err(clocks) => return Ok(clocks),
        };
        Ok(match self.measure_clock()? {
            Ok(offset) => ClockCheck::Measured {
                how: format!(
                    "measured: {why}, so the agent's clock's offset from this client's was measured over the \
                     control connection (the least round trip of {} exchanges, as NTP)",
                    offset.exchanges
                ),
                offset,
                drift_ns: None,
            },
            Err(e) => ClockCheck::NotShared(format!("{why}, and measuring their offset failed: {e}")),
        })
    }

    /// After the test: the offset measured again, the two measures'
    /// mean taken with the drift between them in the bound.
    fn clocks_after_test(&mut self, clocks: ClockCheck) -> Result<ClockCheck, ClientError> {
        let ClockCheck::Measured { how, offset, .. } = clocks else {
            return Ok(clocks);
        };
        Ok(match self.measure_clock()? {
            Ok(after) => {
                let (offset, drift) = netrig_proto::clock::ClockOffset::across(offset, after);
                ClockCheck::Measured {
                    how: format!("{how}, before and after the test"),
                    offset,
                    drift_ns: Some(drift),
                }
            }
            Err(e) => ClockCheck::Measured {
                how: format!("{how}, before the test only (after it: {e})"),
                offset,
                drift_ns: None,
            },
        })
    }

    /// The clock probe: up to [`netrig_proto::clock::PROBES_PER_MEASURE`]
    /// exchanges, for at most a second after the first, each answered within
    /// 5 s or the session fails. Inner `Err`: why no offset came of them.
    fn measure_clock(&mut self) -> Result<Result<netrig_proto::clock::ClockOffset, String>, ClientError> {
        use netrig_proto::clock::{ClockOffset, ClockSample, PROBES_PER_MEASURE};
        let now_ns = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
        };
        let began = Instant::now();
        let mut samples = Vec::with_capacity(PROBES_PER_MEASURE as usize);
        for seq in 0..PROBES_PER_MEASURE {
            if seq > 0 && began.elapsed() > Duration::from_secs(1) {
                break;
            }
            self.sm.clock_probe_sent().map_err(proto_err)?;
            let t1 = now_ns();
            self.conn
                .send(&ClientMsg::ClockProbe { seq })
                .map_err(proto_err)?;
            let msg: AgentMsg = self.conn.recv(Duration::from_secs(5)).map_err(proto_err)?;
            let t4 = now_ns();
            match self.sm.on_agent(msg).map_err(proto_err)? {
                ClientEvent::ClockEcho {
                    seq: s,
                    received_ns,
                    sent_ns,
                } if s == seq => samples.push(ClockSample {
                    t1,
                    t2: received_ns,
                    t3: sent_ns,
                    t4,
                }),
                other => {
                    return Err(ClientError::Handshake(format!(
                        "{} answered clock_probe {seq} with {other}",
                        self.agent_name()
                    )))
                }
            }
        }
        Ok(ClockOffset::from_samples(&samples).ok_or_else(|| {
            format!(
                "none of {} exchanges had times that go forwards (this client's clock was stepped)",
                samples.len()
            )
        }))
    }
}

/// Whether to probe the agent's clock: `Ok(why the clocks are not one)` to
/// probe, `Err(the clocks as they stay)` not to: one clock, an agent that
/// says no clock (an older one), or one older than the probe (the figures
/// withheld, saying so).
fn unprobed(clocks: &ClockCheck, agent_clock: bool, version: u16) -> Result<String, ClockCheck> {
    let ClockCheck::NotShared(why) = clocks else {
        return Err(clocks.clone());
    };
    if !agent_clock {
        return Err(clocks.clone());
    }
    if version < netrig_proto::clock::CLOCK_PROBE_VERSION {
        return Err(ClockCheck::NotShared(format!(
            "{why}, and the agent (protocol v{version}) does not answer the clock probe that measures their \
             offset (protocol v{})",
            netrig_proto::clock::CLOCK_PROBE_VERSION
        )));
    }
    Ok(why.clone())
}

/// Whether this client and the agent read one clock: the agent's boot hash
/// (from its welcome) is this kernel's (`ours`: its boot id hashed with the
/// welcome's nonce). The environment's
/// `NETRIG_TEST_CLOCKS_UNSHARED` (tests only) takes them for two clocks.
fn clock_check(agent: Option<&AgentClock>, ours: Option<&str>) -> ClockCheck {
    if std::env::var_os("NETRIG_TEST_CLOCKS_UNSHARED").is_some() {
        return ClockCheck::NotShared(
            "the clocks are taken as not shared (NETRIG_TEST_CLOCKS_UNSHARED)".into(),
        );
    }
    match (agent, ours) {
        (None, _) => ClockCheck::NotShared("the agent does not say its clock (an older netrig)".into()),
        (Some(_), None) => ClockCheck::NotShared(
            "this host does not say its boot id (no /proc/sys/kernel/random/boot_id)".into(),
        ),
        (Some(a), Some(b)) if a.boot_hash == b => ClockCheck::Shared(
            "one clock: both ends run on one kernel (the same boot id), so no offset".into(),
        ),
        (Some(_), Some(_)) => {
            ClockCheck::NotShared("the ends run on different kernels (their boot ids differ)".into())
        }
    }
}

/// Reads the agent's messages during a test until its results (or an error,
/// or the deadline), and forwards them.
///
/// An agent that dies or gives up during the test stops this end at once:
/// a receiving client would otherwise wait out the test's length for data
/// that will not come (with `-l 3600`, an hour).
/// Protocol 5 (`heartbeats`): sends a heartbeat every second, and gives
/// the test up when the agent has sent nothing for
/// [`netrig_proto::message::SILENCE_LIMIT`] (stopped, or its host gone).
fn read_agent(
    stream: &mut TcpStream,
    tx: mpsc::Sender<Result<AgentMsg, String>>,
    deadline: Instant,
    heartbeats: bool,
    ctl: &RunControl,
) {
    let fail = |tx: &mpsc::Sender<Result<AgentMsg, String>>, why: String| {
        ctl.abort(why.clone());
        let _ = tx.send(Err(why));
    };
    let mut decoder = netrig_proto::FrameDecoder::with_limit(AGENT_FRAME_LIMIT);
    let mut buf = vec![0u8; 64 * 1024];
    let beat = netrig_proto::encode_frame(&ClientMsg::Heartbeat);
    let mut pulse = Pulse::new(heartbeats, Instant::now());
    loop {
        loop {
            let next = decoder.next_body().and_then(|b| {
                b.map(|b| AgentMsg::from_slice(&b))
                    .transpose()
                    .map_err(|e| netrig_proto::ProtoError::Malformed(e.to_string()))
            });
            match next {
                Ok(Some(m)) => {
                    if !pass_on(m, heartbeats, ctl, &tx) {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    fail(&tx, format!("the agent's messages: {e}"));
                    return;
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            fail(&tx, "the agent sent no results in time".into());
            return;
        }
        if pulse.beat_due(now) {
            // A write that blocks for long means the agent stopped reading:
            // the silence check below ends the test then.
            let _ = stream.set_write_timeout(Some(HEARTBEAT));
            let _ = stream.write_all(&beat);
        }
        let _ = stream.set_read_timeout(Some(pulse.wait(now, deadline)));
        match stream.read(&mut buf) {
            Ok(0) => {
                fail(
                    &tx,
                    "the agent closed the control connection during the test".into(),
                );
                return;
            }
            Ok(n) => {
                pulse.heard(Instant::now());
                if let Err(e) = decoder.push(&buf[..n]) {
                    fail(&tx, format!("the agent's messages: {e}"));
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                // Silence is judged only after a read found nothing: a client
                // the host starved for a while must not take the frames
                // waiting in its socket for a silent agent.
                if let Some(why) = pulse.silence(Instant::now()) {
                    fail(&tx, why);
                    return;
                }
            }
            Err(e) => {
                fail(&tx, format!("the control connection: {e}"));
                return;
            }
        }
    }
}

/// Passes one of the agent's messages on (heartbeats only say it is
/// alive, with protocol 5: `heartbeats`); its error gives the test up.
/// Whether more may follow.
fn pass_on(
    m: AgentMsg,
    heartbeats: bool,
    ctl: &RunControl,
    tx: &mpsc::Sender<Result<AgentMsg, String>>,
) -> bool {
    if heartbeats && matches!(m, AgentMsg::Heartbeat) {
        return true;
    }
    if let AgentMsg::Error { message } = &m {
        ctl.abort(format!("the agent gave up: {message}"));
    }
    let last = matches!(m, AgentMsg::Results { .. } | AgentMsg::Error { .. });
    tx.send(Ok(m)).is_ok() && !last
}

/// The control connection's heartbeats during a test (protocol 5): when
/// this end sends its next one, and how long the agent has said nothing.
struct Pulse {
    heartbeats: bool,
    last_heard: Instant,
    last_beat: Instant,
}

impl Pulse {
    fn new(heartbeats: bool, now: Instant) -> Pulse {
        Pulse {
            heartbeats,
            last_heard: now,
            last_beat: now,
        }
    }

    /// Whether a heartbeat is due at `now` (it is then taken as sent).
    fn beat_due(&mut self, now: Instant) -> bool {
        if !self.heartbeats || now.duration_since(self.last_beat) < HEARTBEAT {
            return false;
        }
        self.last_beat = now;
        true
    }

    /// How long the next read may wait at `now`: until the next heartbeat
    /// (a second without them), never past `deadline`.
    fn wait(&self, now: Instant, deadline: Instant) -> Duration {
        (deadline - now).min(if self.heartbeats {
            HEARTBEAT
                .saturating_sub(now.duration_since(self.last_beat))
                .max(Duration::from_millis(10))
        } else {
            Duration::from_secs(1)
        })
    }

    /// The agent said something at `now`.
    fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }

    /// Why the test is given up at `now`: the agent sent nothing for
    /// [`SILENCE_LIMIT`] (stopped, or its host gone); never without heartbeats.
    fn silence(&self, now: Instant) -> Option<String> {
        (self.heartbeats && now.duration_since(self.last_heard) > SILENCE_LIMIT).then(|| {
            format!(
                "the agent sent nothing for {} s during the test (no interval, no heartbeat): it \
                 is stopped, or its host is gone or starved; the test is given up",
                SILENCE_LIMIT.as_secs()
            )
        })
    }
}

/// Emits merged interim reports in order, once each end that receives data
/// has sampled the interval.
struct Merger {
    plan: Vec<Direction>,
    transactional: bool,
    need_local: bool,
    need_remote: bool,
    local: BTreeMap<u32, IntervalSample>,
    remote: BTreeMap<u32, IntervalSample>,
    next: u32,
    remote_all: Vec<IntervalSample>,
}

impl Merger {
    fn new(plan: Vec<Direction>, transactional: bool) -> Self {
        Merger {
            // Who counts what: receivers count streams, the requester (here) counts transactions.
            need_local: transactional || plan.contains(&Direction::Rx),
            need_remote: !transactional && plan.contains(&Direction::Tx),
            transactional,
            plan,
            local: BTreeMap::new(),
            remote: BTreeMap::new(),
            next: 0,
            remote_all: Vec::new(),
        }
    }

    fn push_local(&mut self, s: IntervalSample, observer: &mut dyn FnMut(&IntervalResult)) {
        self.local.insert(s.index, s);
        self.emit_ready(observer, false);
    }

    fn push_remote(&mut self, s: IntervalSample, observer: &mut dyn FnMut(&IntervalResult)) {
        self.remote_all.push(s.clone());
        self.remote.insert(s.index, s);
        self.emit_ready(observer, false);
    }

    fn emit_ready(&mut self, observer: &mut dyn FnMut(&IntervalResult), flush: bool) {
        loop {
            let k = self.next;
            let have_l = self.local.contains_key(&k);
            let have_r = self.remote.contains_key(&k);
            let ready = (have_l || !self.need_local) && (have_r || !self.need_remote);
            if !(ready || (flush && (have_l || have_r))) {
                return;
            }
            let (l, r) = (self.local.remove(&k), self.remote.remove(&k));
            if let Some(m) = merge_interval(&self.plan, self.transactional, k, l.as_ref(), r.as_ref()) {
                observer(&m);
            }
            self.next += 1;
            if !(flush || have_l || have_r) {
                return;
            }
        }
    }

    fn flush(&mut self, observer: &mut dyn FnMut(&IntervalResult)) {
        self.emit_ready(observer, true);
    }

    fn remote_samples(&self) -> Vec<IntervalSample> {
        self.remote_all.clone()
    }
}

#[cfg(test)]
mod agent_side_tests {
    use super::*;

    /// An agent's interval samples are refused past the test's count, or
    /// with more values than it has flows.
    #[test]
    fn samples_beyond_what_the_test_can_have_are_refused() {
        let sample = |flows: usize| IntervalSample {
            bytes: vec![0; flows],
            ..IntervalSample::default()
        };
        assert_eq!(sample_refusal(&sample(2), 0, 16, 2), None);
        assert!(sample_refusal(&sample(3), 0, 16, 2).is_some_and(|w| w.contains("a value per flow of 2")));
        assert!(sample_refusal(&sample(2), 16, 16, 2).is_some_and(|w| w.contains("16 samples at most")));
    }

    /// A message out of place, or the agent's results, ends what the pump
    /// takes; an interval is merged and more may follow.
    #[test]
    fn the_agent_side_takes_intervals_until_its_results() {
        let (_tx, rx) = mpsc::channel();
        let ctl = RunControl::new();
        let mut side = AgentSide {
            rx,
            merger: Merger::new(vec![Direction::Tx], false),
            report: None,
            failure: None,
            max_samples: 16,
            ctl: &ctl,
        };
        let mut seen = 0;
        let interval = AgentMsg::Interval {
            sample: Box::new(IntervalSample {
                bytes: vec![1],
                ..IntervalSample::default()
            }),
        };
        assert!(side.take(Ok(ClientEvent::Interval(interval)), &mut |_| seen += 1));
        assert_eq!(side.merger.remote_all.len(), 1);
        let results = AgentMsg::Results {
            report: Box::default(),
        };
        assert!(!side.take(Ok(ClientEvent::Results(results)), &mut |_| {}));
        assert!(side.report.is_some() && side.failure.is_none());
        assert!(!side.take(Ok(ClientEvent::DataReady), &mut |_| {}));
        assert!(side
            .failure
            .as_ref()
            .is_some_and(|e| e.to_string().contains("unexpected message")));
        assert_eq!(ctl.abort_reason(), None);
    }

    /// What a peer answers the greeting and the hello with decides what it
    /// is taken for, and the message that says so.
    #[test]
    fn the_handshake_answers_are_judged_by_what_they_say() {
        let addr: SocketAddr = "192.0.2.1:6387".parse().unwrap();
        let mut sm = ClientSession::new();
        match welcomed(&mut sm, Err(ConnError::Closed), addr) {
            Err(ClientError::NotAgent { detail, .. }) => {
                assert_eq!(detail, "it closed the connection without a welcome")
            }
            _ => panic!("a silent close is no agent"),
        }
        let refused = AgentMsg::Error {
            message: "not from here".into(),
        };
        match welcomed(&mut sm, Ok(refused), addr) {
            Err(ClientError::Handshake(m)) => {
                assert_eq!(
                    m,
                    "the agent at 192.0.2.1:6387 refused this client: not from here"
                )
            }
            _ => panic!("an agent's error refuses"),
        }
        let busy = AgentMsg::Busy {
            reason: "full".into(),
        };
        match hello_answered(Ok(busy), addr) {
            Err(ClientError::Handshake(m)) => assert_eq!(m, "agent at 192.0.2.1:6387: agent is busy: full"),
            _ => panic!("busy refuses"),
        }
        let accepted = AgentMsg::HelloAccepted { signature: None };
        assert!(matches!(hello_answered(Ok(accepted), addr), Ok(None)));
        match hello_answered(Ok(AgentMsg::DataReady), addr) {
            Err(ClientError::Handshake(m)) => {
                assert!(m.ends_with("with data_ready, not hello_accepted"), "{m}")
            }
            _ => panic!("anything else refuses"),
        }
    }

    /// A heartbeat a period; an agent silent past the limit is given up,
    /// and only with heartbeats.
    #[test]
    fn a_silent_agent_is_given_up_only_with_heartbeats() {
        let t = Instant::now();
        let p = Pulse::new(true, t);
        assert_eq!(p.silence(t + SILENCE_LIMIT), None);
        assert!(p.silence(t + SILENCE_LIMIT + Duration::from_millis(1)).is_some());
        assert_eq!(Pulse::new(false, t).silence(t + SILENCE_LIMIT * 2), None);
        let mut p = Pulse::new(true, t);
        assert!(!p.beat_due(t + HEARTBEAT / 2));
        assert!(p.beat_due(t + HEARTBEAT));
        assert!(!p.beat_due(t + HEARTBEAT));
        assert_eq!(p.wait(t + HEARTBEAT, t + HEARTBEAT * 10), HEARTBEAT);
    }

    /// As many samples as -i periods in the longest the test may last, and 16.
    #[test]
    fn an_agent_may_send_a_sample_a_period_and_a_few_more() {
        let ten = Limit::Duration { seconds: 10.0 };
        assert_eq!(max_samples(ten, Some(1.0), 3600), 26);
        assert_eq!(max_samples(ten, None, 3600), 16);
        assert_eq!(max_samples(Limit::Bytes { bytes: 1 }, Some(1.0), 60), 76);
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    /// The clock probe goes only to an agent of protocol 7 that says its clock, when the clocks
    /// are not one; an older agent's figures are withheld naming the protocol.
    #[test]
    fn only_an_agent_that_answers_is_probed_and_an_older_one_is_named() {
        let two = ClockCheck::NotShared("the ends run on different kernels (their boot ids differ)".into());
        assert!(unprobed(&two, true, 7).is_ok_and(|w| w.contains("different kernels")));
        match unprobed(&two, true, 6) {
            Err(ClockCheck::NotShared(w)) => assert!(
                w.contains("different kernels")
                    && w.contains("(protocol v6) does not answer the clock probe"),
                "{w}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            unprobed(&two, false, 7),
            Err(two.clone()),
            "an agent that says no clock"
        );
        let one = ClockCheck::Shared("one kernel".into());
        assert_eq!(unprobed(&one, true, 7), Err(one.clone()));
    }
}
