//! What a test is: its kind, its limits and the options of its sockets.
//! The client sends a [`TestSpec`] to the agent, which validates it against
//! its own [`AgentLimits`] before accepting it.

use crate::AgentLimits;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The kinds of test. The wire name is the CLI subcommand name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    /// Client sends, agent receives (netperf TCP_STREAM).
    TcpStream,
    /// Agent sends, client receives (netperf TCP_MAERTS).
    TcpMaerts,
    /// Both at once, on separate connections.
    TcpBidir,
    /// Request/response on persistent connections (netperf TCP_RR).
    TcpRr,
    /// UDP datagrams at a set rate, client to agent (or agent to client with
    /// `-R`): loss, jitter, reordering, duplicates.
    UdpStream,
    /// Request/response over UDP (netperf UDP_RR), surviving lost datagrams.
    UdpRr,
    /// Connect, request, response, close: a new connection per transaction (netperf TCP_CRR).
    TcpCrr,
}

impl TestKind {
    pub const ALL: [TestKind; 7] = [
        TestKind::TcpStream,
        TestKind::TcpMaerts,
        TestKind::TcpBidir,
        TestKind::TcpRr,
        TestKind::TcpCrr,
        TestKind::UdpStream,
        TestKind::UdpRr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TestKind::TcpStream => "tcp-stream",
            TestKind::TcpMaerts => "tcp-maerts",
            TestKind::TcpBidir => "tcp-bidir",
            TestKind::TcpRr => "tcp-rr",
            TestKind::UdpStream => "udp-stream",
            TestKind::UdpRr => "udp-rr",
            TestKind::TcpCrr => "tcp-crr",
        }
    }

    /// The kind [`name`](Self::name) names.
    pub fn from_name(name: &str) -> Option<TestKind> {
        TestKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this kind's flows are UDP sockets.
    pub fn is_udp(self) -> bool {
        matches!(self, TestKind::UdpStream | TestKind::UdpRr)
    }

    /// The directions in which this kind moves data. Request/response
    /// flows count as `tx`: the client initiates every transaction.
    pub fn directions(self) -> &'static [Direction] {
        match self {
            TestKind::TcpStream
            | TestKind::TcpRr
            | TestKind::TcpCrr
            | TestKind::UdpStream
            | TestKind::UdpRr => &[Direction::Tx],
            TestKind::TcpMaerts => &[Direction::Rx],
            TestKind::TcpBidir => &[Direction::Tx, Direction::Rx],
        }
    }

    /// Whether this kind measures transactions rather than a byte stream.
    pub fn is_transactional(self) -> bool {
        matches!(self, TestKind::TcpRr | TestKind::TcpCrr | TestKind::UdpRr)
    }

    /// Whether every transaction opens its own connection, during the run,
    /// rather than the flows' connections being opened at set-up.
    pub fn connection_per_transaction(self) -> bool {
        matches!(self, TestKind::TcpCrr)
    }

    /// What one end does with a flow of this kind going `direction`.
    pub fn role(self, direction: Direction, at_agent: bool) -> crate::report::Role {
        use crate::report::Role;
        if self.is_transactional() {
            return if at_agent {
                Role::Responder
            } else {
                Role::Requester
            };
        }
        match (direction, at_agent) {
            (Direction::Tx, false) | (Direction::Rx, true) => Role::Sender,
            (Direction::Tx, true) | (Direction::Rx, false) => Role::Receiver,
        }
    }
}

/// Options of request/response tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrOptions {
    /// Request size in bytes (`-r REQ,RESP`).
    pub request_size: u32,
    /// Response size in bytes.
    pub response_size: u32,
    /// Transactions in flight per flow in closed loop (`--burst`, netperf's `-b`).
    pub burst: u32,
    /// Open loop: transactions per second per flow (`--rate`); requests leave
    /// on schedule whatever the responses do.
    pub rate: Option<f64>,
    /// Exponential inter-arrival times around `rate` (`--poisson`).
    #[serde(default)]
    pub poisson: bool,
    /// Open loop: wake this many µs before each request is due and spin
    /// until it is (`--spin-us`); 0: sleep until due; `None`: a lead learned
    /// from how late the requester's timer wakes. Only the requester paces.
    #[serde(default)]
    pub spin_us: Option<u32>,
    /// tcp-crr and udp-rr (`--timeout`): longest a transaction may take.
    /// tcp-crr: from connect to its last response byte, and the agent gives
    /// each connection as long to bring its request and close; udp-rr: a
    /// request without a response by then is lost. `None`:
    /// [`DEFAULT_TXN_TIMEOUT_S`].
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

impl Default for RrOptions {
    fn default() -> Self {
        RrOptions {
            request_size: 1,
            response_size: 1,
            burst: 1,
            rate: None,
            poisson: false,
            spin_us: None,
            timeout_s: None,
        }
    }
}

/// Options of UDP tests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpOptions {
    /// The agent sends and the client receives (`-R`).
    #[serde(default)]
    pub reverse: bool,
    /// udp-stream: one datagram per message, no UDP GSO/GRO (`--no-gso`).
    #[serde(default)]
    pub no_gso: bool,
}

/// A sending rate for stream tests (`-b`, `--pacing-us`): udp-stream and
/// the TCP streams (tcp-stream, tcp-maerts, tcp-bidir), per flow, whichever
/// end sends. Message k of a flow is due at time zero + k × message size × 8
/// / rate; when one is due, those due within the quantum after it leave
/// with it: never behind schedule, never more than a quantum ahead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaceOptions {
    /// Payload bits/s per flow (`-b`); `None`: as fast as possible.
    pub rate_bps: Option<u64>,
    /// The pacing quantum in µs (`--pacing-us`); `None`: [`DEFAULT_PACING_US`].
    #[serde(default)]
    pub pacing_us: Option<u32>,
}

/// The default pacing quantum: a paced sender wakes at most this often and
/// sends what falls due within it (iperf3's `--pacing-timer` defaults to
/// 1000 µs).
pub const DEFAULT_PACING_US: u32 = 100;
/// The largest pacing quantum `--pacing-us` takes.
pub const MAX_PACING_US: u32 = 1_000_000;
/// The highest `-b`, in bits/s.
pub const MAX_RATE_BPS: u64 = 400_000_000_000;

impl PaceOptions {
    /// The paced sender's quantum.
    pub fn pacing(&self) -> std::time::Duration {
        std::time::Duration::from_micros(u64::from(self.pacing_us.unwrap_or(DEFAULT_PACING_US)))
    }
}

/// Bytes at the start of every test datagram: test id (8), flow id (4),
/// sequence number (8), send timestamp in ns (8).
pub const UDP_HEADER_LEN: u32 = 28;
/// Largest UDP payload of an IPv4 datagram.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;

impl RrOptions {
    /// The open-loop pacer's wake-up lead, if set (`--spin-us`).
    pub fn spin(&self) -> Option<std::time::Duration> {
        self.spin_us.map(|us| std::time::Duration::from_micros(us.into()))
    }

    /// tcp-crr's and udp-rr's transaction timeout.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.timeout_s.unwrap_or(DEFAULT_TXN_TIMEOUT_S))
    }
}

/// Most transactions one flow may have in flight (closed-loop burst, or
/// the backlog an open-loop schedule may build up before it waits).
pub const MAX_IN_FLIGHT: u32 = 65_536;
/// Highest open-loop rate per flow.
pub const MAX_RATE: f64 = 10_000_000.0;
/// Longest open-loop wake-up lead (`--spin-us`), in µs.
pub const MAX_SPIN_US: u32 = 10_000;
/// tcp-crr: most connections one flow may have open at once (`--burst`, or
/// the backlog an open-loop schedule may build up before it waits).
pub const MAX_CRR_IN_FLIGHT: u32 = 1024;
/// tcp-crr and udp-rr: the transaction timeout without `--timeout`.
/// netrig's `--connect-timeout` (10 s) suits a control connection, not a
/// test whose every transaction connects.
pub const DEFAULT_TXN_TIMEOUT_S: f64 = 1.0;
/// The shortest and longest `--timeout`, in seconds.
pub const TXN_TIMEOUT_RANGE_S: (f64, f64) = (0.001, 60.0);

/// Which way data moves, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to agent.
    Tx,
    /// Agent to client.
    Rx,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Tx => "tx",
            Direction::Rx => "rx",
        }
    }
}

/// When a test ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// After this many seconds (`-l`).
    Duration { seconds: f64 },
    /// After this many payload bytes per direction, spread over the flows (`-n`).
    Bytes { bytes: u64 },
}

/// Socket options one end applies to its data sockets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketOptions {
    /// SO_SNDBUF request in bytes (the kernel doubles it and clamps it at wmem_max).
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF request in bytes (the kernel doubles it and clamps it at rmem_max).
    pub rcvbuf: Option<u32>,
    /// The whole IP TOS / IPv6 traffic-class byte (DSCP is its top six bits).
    pub tos: Option<u8>,
    /// SO_PRIORITY (0-7 without CAP_NET_ADMIN).
    pub priority: Option<u32>,
    /// TCP_NODELAY.
    #[serde(default)]
    pub nodelay: bool,
    /// TCP_CONGESTION algorithm name.
    pub congestion: Option<String>,
    /// TCP_MAXSEG, applied before connect (client end only).
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE in bits/s (`--max-pacing-rate`, iperf3's
    /// `--fq-rate`): the kernel paces each data socket to this rate (TCP
    /// paces by itself; other traffic needs the fq qdisc).
    #[serde(default)]
    pub max_pacing_rate_bps: Option<u64>,
}

/// The highest `--max-pacing-rate`, in bits/s.
pub const MAX_PACING_RATE_BPS: u64 = 400_000_000_000;

/// One test, as the client asks the agent to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    pub kind: TestKind,
    pub limit: Limit,
    /// Seconds at the start left out of the results (`--omit`).
    #[serde(default)]
    pub omit_s: f64,
    /// Interim report period in seconds (`-i`).
    pub interval_s: Option<f64>,
    /// Parallel flows per direction (`-P`).
    pub flows: u32,
    /// Bytes per send() call (`-m`).
    pub message_size: u32,
    /// Bytes per recv() call (`-M`).
    pub recv_size: u32,
    /// Options for the agent's end of every data connection (`-S`, and the
    /// options that apply to both ends).
    pub remote: SocketOptions,
    /// Measure CPU utilisation over the window on both ends (on unless `--no-cpu`).
    #[serde(default = "yes")]
    pub measure_cpu: bool,
    /// Request/response options (request/response kinds only).
    #[serde(default)]
    pub rr: RrOptions,
    /// Worker threads per end (`-T`); `None`: the number of CPUs.
    #[serde(default)]
    pub workers: Option<u32>,
    /// UDP options (UDP kinds only).
    #[serde(default)]
    pub udp: UdpOptions,
    /// Sending rate of stream tests (`-b`; udp-stream and the TCP streams).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pace: PaceOptions,
    /// Pin the agent's worker i to `remote_cpus[i % len]` (`--remote-cpus`,
    /// or `-A`'s second CPU); `None`: not pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_cpus: Option<Vec<u32>>,
    /// TCP streams (`-Z`): whichever end sends sends each message with
    /// sendfile(2) from an in-memory file instead of send(2).
    #[serde(default, skip_serializing_if = "is_default")]
    pub zerocopy: bool,
}

/// The highest CPU number `--cpus` and `--remote-cpus` take (glibc's
/// cpu_set_t holds 1024), and the longest list.
pub const MAX_CPU: u32 = 1023;
pub const MAX_CPU_LIST: usize = 1024;

/// Bounds on a CPU list; the message names `option`.
pub fn validate_cpus(cpus: &[u32], option: &'static str) -> Result<(), SpecError> {
    if cpus.is_empty() || cpus.len() > MAX_CPU_LIST {
        return Err(out_of_range(
            option,
            format!("a list of {} CPUs", cpus.len()),
            format!("1..={MAX_CPU_LIST} CPUs"),
        ));
    }
    match cpus.iter().find(|c| **c > MAX_CPU) {
        Some(c) => Err(out_of_range(option, c, format!("CPUs 0..={MAX_CPU}"))),
        None => Ok(()),
    }
}

/// Most worker threads per end.
pub const MAX_WORKERS: u32 = 1024;

fn yes() -> bool {
    true
}

/// Options at their defaults stay off the wire, so that an agent which
/// does not know a newer option still runs the tests that do not use it
/// (and refuses, naming the field, those that do: specs deny unknown fields).
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// A spec that cannot run. The messages name the option to change, the
/// bound it broke and who set that bound: netrig itself (the same on both
/// ends) or the agent's configuration.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum SpecError {
    /// Outside a range netrig itself holds to, on both ends.
    #[error("{option} {value} is out of range {range}")]
    OutOfRange {
        option: &'static str,
        value: String,
        range: String,
    },
    /// Breaks a rule netrig itself holds to, on both ends ("must be more
    /// than 0 seconds").
    #[error("{option} {value}: {rule}")]
    Invalid {
        option: &'static str,
        value: String,
        rule: String,
    },
    /// Beyond a limit of the agent's configuration ([`AgentLimits`], which
    /// its welcome carries). Said from the agent's side; a client names the
    /// agent with [`SpecError::at_agent`].
    #[error("{option} {value}: the agent allows at most {limit} (its {setting})")]
    AgentLimit {
        option: &'static str,
        value: String,
        /// The limit with its unit, e.g. "5 seconds".
        limit: String,
        /// The agent's setting that holds it, e.g. "--max-duration".
        setting: &'static str,
    },
    #[error("{0}")]
    NotApplicable(String),
}

/// Limits that hold whatever an agent's configuration says.
pub const MAX_MESSAGE_SIZE: u32 = 16 << 20;
pub const MAX_SOCKET_BUFFER: u32 = 1 << 30;
pub const MIN_INTERVAL_S: f64 = 0.1;

impl SpecError {
    /// The message as a client says it, naming the agent whose limit it is
    /// (`agent`, e.g. "the agent at 192.0.2.1:6387"); errors of netrig's own
    /// bounds read the same on both ends.
    pub fn at_agent(&self, agent: &str) -> String {
        match self {
            SpecError::AgentLimit {
                option,
                value,
                limit,
                setting,
            } => format!("{option} {value}: {agent} allows at most {limit} (its {setting})"),
            other => other.to_string(),
        }
    }
}

fn invalid(option: &'static str, value: impl ToString, rule: impl ToString) -> SpecError {
    SpecError::Invalid {
        option,
        value: value.to_string(),
        rule: rule.to_string(),
    }
}

fn agent_limit(
    option: &'static str,
    value: impl ToString,
    limit: impl ToString,
    setting: &'static str,
) -> SpecError {
    SpecError::AgentLimit {
        option,
        value: value.to_string(),
        limit: limit.to_string(),
        setting,
    }
}

fn out_of_range(option: &'static str, value: impl ToString, range: impl ToString) -> SpecError {
    SpecError::OutOfRange {
        option,
        value: value.to_string(),
        range: range.to_string(),
    }
}

/// The UDP stream's batches (sendmmsg/recvmmsg messages per call) and the
/// largest buffer one GSO send or GRO receive may carry: the engine sizes its
/// buffers by them, and [`TestSpec::worker_buffer_bytes`] bounds them.
pub const UDP_BATCH: u64 = 64;
pub const UDP_BUFFER_MAX: u64 = 65_536;

impl TestSpec {
    /// A test of `kind` limited by `limit`, everything else as netrig's CLI
    /// defaults it: one flow, 128 KiB sends and receives (1472-byte
    /// datagrams for udp-stream), 1-byte requests and responses, CPU
    /// measured, no options on the agent's sockets.
    pub fn new(kind: TestKind, limit: Limit) -> TestSpec {
        let size = if kind == TestKind::UdpStream {
            1472
        } else {
            128 * 1024
        };
        TestSpec {
            kind,
            limit,
            omit_s: 0.0,
            interval_s: None,
            flows: 1,
            message_size: size,
            recv_size: size,
            remote: SocketOptions::default(),
            measure_cpu: true,
            rr: RrOptions::default(),
            workers: None,
            udp: UdpOptions::default(),
            pace: PaceOptions::default(),
            remote_cpus: None,
            zerocopy: false,
        }
    }

    /// At most how many bytes of buffers one worker thread allocates for
    /// this test (socket buffers aside, which the kernel bounds): a send and
    /// a receive buffer of `-m` / `-M` (and as much again for `-Z`'s
    /// in-memory file); request and response buffers and a receive buffer
    /// of at most 4 MiB; a UDP stream's
    /// batches of up to [`UDP_BATCH`] buffers of [`UDP_BUFFER_MAX`] each way.
    pub fn worker_buffer_bytes(&self) -> u64 {
        let (m, r) = (u64::from(self.message_size), u64::from(self.recv_size));
        let (req, resp) = (u64::from(self.rr.request_size), u64::from(self.rr.response_size));
        match self.kind {
            TestKind::UdpStream | TestKind::UdpRr => 2 * UDP_BATCH * UDP_BUFFER_MAX + req + resp,
            // The receive buffer holds a burst of responses, at most 4 MiB.
            TestKind::TcpRr | TestKind::TcpCrr => req + resp + (4 << 20),
            _ => m * if self.zerocopy { 2 } else { 1 } + r,
        }
    }

    /// The worker threads an end with `cpus` CPUs runs this test on: `-T`,
    /// or one per CPU, never more than the flows it has.
    pub fn workers_on(&self, cpus: u32) -> u32 {
        let flows = u64::from(self.flows) * self.directions().len() as u64;
        let w = self.workers.unwrap_or(cpus).max(1);
        w.min(flows.clamp(1, u64::from(u32::MAX)) as u32)
    }

    /// The direction of every flow, indexed by flow id: for bidirectional
    /// tests the `tx` flows come first.
    pub fn flow_plan(&self) -> Vec<Direction> {
        self.directions()
            .iter()
            .flat_map(|d| std::iter::repeat_n(*d, self.flows as usize))
            .collect()
    }

    /// The directions this test moves data in (the kind's, or reversed with `-R`).
    pub fn directions(&self) -> &'static [Direction] {
        if self.kind == TestKind::UdpStream && self.udp.reverse {
            &[Direction::Rx]
        } else {
            self.kind.directions()
        }
    }

    /// Number of data connections the test opens at set-up. A
    /// connection-per-transaction test opens none then: its connections come
    /// and go during the run (its flow plan still has its flows).
    pub fn connections(&self) -> u64 {
        if self.kind.connection_per_transaction() {
            return 0;
        }
        self.flows as u64 * self.directions().len() as u64
    }

    /// Bytes flow `index_in_direction` must send in byte-count mode.
    pub fn byte_quota(&self, index_in_direction: u32) -> Option<u64> {
        match self.limit {
            Limit::Bytes { bytes } => {
                let n = self.flows.max(1) as u64;
                let i = index_in_direction as u64;
                Some(bytes / n + u64::from(i < bytes % n))
            }
            Limit::Duration { .. } => None,
        }
    }

    /// Checks every bound. The agent calls this with its own limits on every
    /// spec it receives, so nothing here may trust the client.
    pub fn validate(&self, limits: &AgentLimits) -> Result<(), SpecError> {
        self.check(Some(limits))
    }

    /// Checks netrig's own bounds, which hold whatever agent runs the test:
    /// what a client can check before it has reached an agent.
    pub fn validate_bounds(&self) -> Result<(), SpecError> {
        self.check(None)
    }

    /// netrig's own bounds, then the agent's `limits` if given. An agent's
    /// limit is only named once netrig's own bound holds, so a value wrong
    /// everywhere (`-l 0`) never reads as the agent's doing.
    fn check(&self, limits: Option<&AgentLimits>) -> Result<(), SpecError> {
        if self.flows == 0 {
            return Err(invalid("-P/--parallel", self.flows, "must be at least 1 flow"));
        }
        if let Some(l) = limits.filter(|l| self.flows > l.max_flows) {
            return Err(agent_limit(
                "-P/--parallel",
                self.flows,
                format!(
                    "{} flow{} per direction",
                    l.max_flows,
                    if l.max_flows == 1 { "" } else { "s" }
                ),
                "--max-flows",
            ));
        }
        let max_duration = limits.map(|l| l.max_duration_s);
        match self.limit {
            Limit::Duration { seconds } => {
                if !(seconds.is_finite() && seconds > 0.0) {
                    return Err(invalid(
                        "-l/--length",
                        seconds,
                        "must be more than 0 seconds (and finite)",
                    ));
                }
                if let Some(m) = max_duration.filter(|m| seconds > *m as f64) {
                    return Err(agent_limit(
                        "-l/--length",
                        seconds,
                        format!("{m} seconds"),
                        "--max-duration",
                    ));
                }
                if !(self.omit_s.is_finite() && self.omit_s >= 0.0 && self.omit_s < seconds) {
                    return Err(SpecError::NotApplicable(format!(
                        "--omit {} must be at least 0 and shorter than the test (-l {seconds})",
                        self.omit_s
                    )));
                }
            }
            Limit::Bytes { bytes } => {
                if bytes == 0 {
                    return Err(out_of_range("-n/--bytes", bytes, "1.."));
                }
                if self.omit_s != 0.0 {
                    return Err(SpecError::NotApplicable(
                        "--omit applies to timed tests (-l), not to -n/--bytes".into(),
                    ));
                }
            }
        }
        if let Some(i) = self.interval_s {
            if !(i.is_finite() && i >= MIN_INTERVAL_S) {
                return Err(invalid(
                    "-i/--interval",
                    i,
                    format!("must be at least {MIN_INTERVAL_S} seconds (and finite)"),
                ));
            }
            if let Some(m) = max_duration.filter(|m| i > *m as f64) {
                return Err(agent_limit(
                    "-i/--interval",
                    i,
                    format!("{m} seconds"),
                    "--max-duration",
                ));
            }
        }
        // netrig's own bound, then the agent's if it set a lower one.
        let size = |option: &'static str, v: u32, what: String| -> Result<(), SpecError> {
            if v == 0 || v > MAX_MESSAGE_SIZE {
                return Err(out_of_range(option, what, format!("1..={MAX_MESSAGE_SIZE}")));
            }
            match limits.filter(|l| v > l.max_message_size) {
                Some(l) => Err(agent_limit(
                    option,
                    what,
                    format!("{} bytes", l.max_message_size),
                    "limit on message sizes",
                )),
                None => Ok(()),
            }
        };
        size(
            "-m/--message-size",
            self.message_size,
            self.message_size.to_string(),
        )?;
        size("-M/--recv-size", self.recv_size, self.recv_size.to_string())?;
        if self.kind.is_transactional() {
            let rr = &self.rr;
            if matches!(self.limit, Limit::Bytes { .. }) {
                return Err(SpecError::NotApplicable(format!(
                    "-n/--bytes applies to stream tests; {} runs for -l seconds",
                    self.kind.name()
                )));
            }
            for (v, what) in [(rr.request_size, "request"), (rr.response_size, "response")] {
                size("-r/--request-response", v, format!("{what} size {v}"))?;
            }
            if rr.burst == 0 || rr.burst > MAX_IN_FLIGHT {
                return Err(out_of_range("--burst", rr.burst, format!("1..={MAX_IN_FLIGHT}")));
            }
            if let Some(rate) = rr.rate {
                if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
                    return Err(out_of_range(
                        "--rate",
                        rate,
                        format!("(0, {MAX_RATE}] transactions/s per flow"),
                    ));
                }
                if rr.burst != 1 {
                    return Err(SpecError::NotApplicable(
                        "--burst sets the closed loop's transactions in flight; with --rate the schedule decides".into(),
                    ));
                }
            } else if rr.poisson {
                return Err(SpecError::NotApplicable("--poisson needs --rate".into()));
            } else if rr.spin_us.is_some() {
                return Err(SpecError::NotApplicable("--spin-us needs --rate".into()));
            }
            if let Some(us) = rr.spin_us {
                if us > MAX_SPIN_US {
                    return Err(out_of_range("--spin-us", us, format!("0..={MAX_SPIN_US} µs")));
                }
            }
            if self.kind.connection_per_transaction() && rr.burst > MAX_CRR_IN_FLIGHT {
                return Err(out_of_range(
                    "--burst",
                    rr.burst,
                    format!("1..={MAX_CRR_IN_FLIGHT} connections per flow"),
                ));
            }
        }
        if let Some(t) = self.rr.timeout_s {
            if !matches!(self.kind, TestKind::TcpCrr | TestKind::UdpRr) {
                return Err(SpecError::NotApplicable(format!(
                    "--timeout applies to tcp-crr and udp-rr, not to {}",
                    self.kind.name()
                )));
            }
            let (lo, hi) = TXN_TIMEOUT_RANGE_S;
            if !(t.is_finite() && (lo..=hi).contains(&t)) {
                return Err(out_of_range("--timeout", t, format!("[{lo}, {hi}] seconds")));
            }
        }
        if let Some(w) = self.workers {
            if w == 0 || w > MAX_WORKERS {
                return Err(out_of_range("-T/--workers", w, format!("1..={MAX_WORKERS}")));
            }
            if let Some(l) = limits.filter(|l| w > l.max_workers) {
                return Err(agent_limit(
                    "-T/--workers",
                    w,
                    format!("{} worker threads", l.max_workers),
                    "--max-workers",
                ));
            }
        }
        if self.kind == TestKind::UdpRr {
            for (v, what) in [
                (self.rr.request_size, "request"),
                (self.rr.response_size, "response"),
            ] {
                if v > MAX_UDP_PAYLOAD {
                    return Err(out_of_range(
                        "-r/--request-response",
                        format!("{what} size {v}"),
                        format!("1..={MAX_UDP_PAYLOAD} for UDP"),
                    ));
                }
            }
            if self.remote.congestion.is_some() || self.remote.nodelay {
                return Err(SpecError::NotApplicable(
                    "--cc and --nodelay apply to TCP tests, not to UDP".into(),
                ));
            }
        } else if self.kind.is_udp() {
            if self.message_size < UDP_HEADER_LEN || self.message_size > MAX_UDP_PAYLOAD {
                return Err(out_of_range(
                    "-m/--message-size",
                    self.message_size,
                    format!(
                        "{UDP_HEADER_LEN}..={MAX_UDP_PAYLOAD} for UDP (each datagram carries a {UDP_HEADER_LEN}-byte \
                         header: test id, flow, sequence number, timestamp)"
                    ),
                ));
            }
            if self.remote.congestion.is_some() || self.remote.nodelay {
                return Err(SpecError::NotApplicable(
                    "--cc and --nodelay apply to TCP tests, not to UDP".into(),
                ));
            }
        }
        if self.kind != TestKind::UdpStream && self.udp.reverse {
            return Err(SpecError::NotApplicable(
                "-R applies to udp-stream (tcp-maerts is the TCP stream from agent to client)".into(),
            ));
        }
        let streams = matches!(
            self.kind,
            TestKind::UdpStream | TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpBidir
        );
        if let Some(r) = self.pace.rate_bps {
            if !streams {
                return Err(SpecError::NotApplicable(
                    "-b applies to stream tests (udp-stream, tcp-stream, tcp-maerts, tcp-bidir); \
                     request/response tests take --rate in transactions/s"
                        .into(),
                ));
            }
            if r == 0 || r > MAX_RATE_BPS {
                return Err(out_of_range(
                    "-b/--bitrate",
                    r,
                    "1..=400G bits/s (0 or absent: as fast as possible)",
                ));
            }
        }
        if self.zerocopy
            && !matches!(
                self.kind,
                TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpBidir
            )
        {
            return Err(SpecError::NotApplicable(format!(
                "-Z/--zerocopy applies to the TCP streams (tcp-stream, tcp-maerts, tcp-bidir), not to {}",
                self.kind.name()
            )));
        }
        if let Some(p) = self.pace.pacing_us {
            if !streams || self.pace.rate_bps.is_none() {
                return Err(SpecError::NotApplicable(
                    "--pacing-us applies to stream tests with a rate (-b)".into(),
                ));
            }
            if p == 0 || p > MAX_PACING_US {
                return Err(out_of_range("--pacing-us", p, format!("1..={MAX_PACING_US} µs")));
            }
        }
        validate_socket_options(&self.remote, "-S/--remote-sockbuf")?;
        if let Some(c) = &self.remote_cpus {
            validate_cpus(c, "--remote-cpus")?;
        }
        if self.remote.mss.is_some() {
            return Err(SpecError::NotApplicable(
                "--mss is applied by the client before it connects; the agent does not take it".into(),
            ));
        }
        Ok(())
    }
}

/// Bounds on socket options, shared by both ends.
pub fn validate_socket_options(o: &SocketOptions, buf_option: &'static str) -> Result<(), SpecError> {
    for v in [o.sndbuf, o.rcvbuf].into_iter().flatten() {
        if v == 0 || v > MAX_SOCKET_BUFFER {
            return Err(out_of_range(buf_option, v, format!("1..={MAX_SOCKET_BUFFER}")));
        }
    }
    if let Some(p) = o.priority {
        if p > 7 {
            return Err(out_of_range("--priority", p, "0..=7"));
        }
    }
    if let Some(cc) = &o.congestion {
        if cc.is_empty()
            || cc.len() > 15
            || !cc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(out_of_range(
                "--cc",
                format!("{cc:?}"),
                "an algorithm name of 1-15 letters, digits, '_' or '-'",
            ));
        }
    }
    if let Some(mss) = o.mss {
        if !(88..=65535).contains(&mss) {
            return Err(out_of_range("--mss", mss, "88..=65535"));
        }
    }
    if let Some(r) = o.max_pacing_rate_bps {
        if !(8..=MAX_PACING_RATE_BPS).contains(&r) {
            return Err(out_of_range("--max-pacing-rate", r, "8..=400G bits/s"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn spec() -> TestSpec {
        TestSpec {
            flows: 2,
            ..TestSpec::new(TestKind::TcpBidir, Limit::Duration { seconds: 10.0 })
        }
    }

    /// An option this build does not know is refused by name, never run
    /// without; options at their defaults stay off the wire.
    #[test]
    fn unknown_fields_are_refused_and_defaults_left_out() {
        let s = spec();
        let v = serde_json::to_value(&s).unwrap();
        for absent in ["pace", "remote_cpus", "zerocopy"] {
            assert!(v.get(absent).is_none(), "{absent} at its default was sent: {v}");
        }
        let back: TestSpec = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, s);
        let mut newer = v.clone();
        newer["frobnicate"] = serde_json::json!(true);
        let e = serde_json::from_value::<TestSpec>(newer).unwrap_err().to_string();
        assert!(e.contains("unknown field `frobnicate`"), "{e}");
        let mut nested = v;
        nested["remote"]["tx_ring"] = serde_json::json!(4096);
        let e = serde_json::from_value::<TestSpec>(nested)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `tx_ring`"), "{e}");
    }

    #[test]
    fn worker_buffers_and_workers_are_bounded_by_what_the_spec_asks() {
        let mut s = spec();
        s.kind = TestKind::TcpStream;
        s.message_size = 1 << 20;
        s.recv_size = 1 << 19;
        assert_eq!(s.worker_buffer_bytes(), (1 << 20) + (1 << 19));
        s.zerocopy = true;
        assert_eq!(s.worker_buffer_bytes(), (2 << 20) + (1 << 19));
        s.kind = TestKind::UdpStream;
        assert_eq!(s.worker_buffer_bytes(), 2 * 64 * 65_536 + 2);
        // One per CPU, never more than the flows (2 flows one way here).
        s.flows = 2;
        assert_eq!(s.workers_on(8), 2);
        assert_eq!(s.workers_on(1), 1);
        s.workers = Some(16);
        assert_eq!(s.workers_on(1), 2);
        let limits = AgentLimits {
            max_workers: 8,
            ..AgentLimits::default()
        };
        let e = s.validate(&limits).unwrap_err().to_string();
        assert!(
            e.contains("-T/--workers 16") && e.contains("--max-workers"),
            "{e}"
        );
    }

    #[test]
    fn zerocopy_is_for_tcp_streams_only() {
        let l = AgentLimits::default();
        let mut s = spec();
        s.zerocopy = true;
        for kind in [TestKind::TcpStream, TestKind::TcpMaerts, TestKind::TcpBidir] {
            s.kind = kind;
            assert!(s.validate(&l).is_ok(), "{kind:?}");
        }
        s.message_size = 1472;
        for kind in [
            TestKind::TcpRr,
            TestKind::TcpCrr,
            TestKind::UdpStream,
            TestKind::UdpRr,
        ] {
            s.kind = kind;
            let e = s.validate(&l).unwrap_err();
            assert!(matches!(e, SpecError::NotApplicable(_)), "{kind:?}: {e}");
            assert!(e.to_string().contains("-Z/--zerocopy"), "{kind:?}: {e}");
        }
        // A spec from a client that predates -Z reads as off.
        let mut v = serde_json::to_value(spec()).unwrap();
        v.as_object_mut().unwrap().remove("zerocopy");
        assert!(!serde_json::from_value::<TestSpec>(v).unwrap().zerocopy);
    }

    #[test]
    fn udp_options() {
        let l = AgentLimits::default();
        let mut s = spec();
        s.kind = TestKind::UdpStream;
        s.message_size = 27;
        assert!(s.validate(&l).unwrap_err().to_string().contains("28-byte"));
        s.message_size = 64;
        assert!(s.validate(&l).is_ok());
        assert_eq!(s.flow_plan(), vec![Direction::Tx, Direction::Tx]);
        s.udp.reverse = true;
        assert_eq!(s.flow_plan(), vec![Direction::Rx, Direction::Rx]);
        s.pace.rate_bps = Some(0);
        assert!(s.validate(&l).unwrap_err().to_string().contains("-b/--bitrate"));
        s.pace.rate_bps = Some(1_000_000);
        s.remote.congestion = Some("bbr".into());
        assert!(s.validate(&l).is_err());
        let mut t = spec();
        t.udp.reverse = true;
        assert!(t.validate(&l).unwrap_err().to_string().contains("-R"));
    }

    #[test]
    fn rr_options_are_bounded() {
        let l = AgentLimits::default();
        let mut s = spec();
        s.kind = TestKind::TcpRr;
        assert!(s.validate(&l).is_ok());
        s.rr.burst = 0;
        assert!(s.validate(&l).unwrap_err().to_string().contains("--burst"));
        s.rr.burst = 4;
        s.rr.rate = Some(1000.0);
        assert!(s.validate(&l).unwrap_err().to_string().contains("--burst"));
        s.rr.burst = 1;
        s.rr.rate = Some(f64::INFINITY);
        assert!(s.validate(&l).unwrap_err().to_string().contains("--rate"));
        s.rr.rate = None;
        s.rr.poisson = true;
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("--poisson needs --rate"));
        s.rr.poisson = false;
        s.rr.spin_us = Some(0);
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("--spin-us needs --rate"));
        s.rr.rate = Some(1000.0);
        assert!(s.validate(&l).is_ok());
        s.rr.spin_us = Some(MAX_SPIN_US);
        assert!(s.validate(&l).is_ok());
        s.rr.spin_us = Some(MAX_SPIN_US + 1);
        assert!(s.validate(&l).unwrap_err().to_string().contains("--spin-us"));
        s.rr.spin_us = None;
        s.rr.rate = None;
        s.rr.response_size = 0;
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("-r/--request-response"));
        s.rr.response_size = 1;
        s.limit = Limit::Bytes { bytes: 10 };
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("-n/--bytes applies to stream tests"));
        s.limit = Limit::Duration { seconds: 1.0 };
        s.workers = Some(0);
        assert!(s.validate(&l).unwrap_err().to_string().contains("-T/--workers"));
    }

    #[test]
    fn crr_opens_no_connection_at_set_up_and_bounds_its_options() {
        let l = AgentLimits::default();
        let mut s = spec();
        s.kind = TestKind::TcpCrr;
        s.flows = 3;
        assert_eq!(s.connections(), 0);
        assert_eq!(s.flow_plan(), vec![Direction::Tx; 3]);
        assert!(s.validate(&l).is_ok());
        assert_eq!(s.rr.timeout(), std::time::Duration::from_secs(1));
        s.rr.burst = MAX_CRR_IN_FLIGHT + 1;
        assert!(s.validate(&l).unwrap_err().to_string().contains("--burst"));
        s.rr.burst = 1;
        for bad in [0.0, -1.0, f64::NAN, 61.0] {
            s.rr.timeout_s = Some(bad);
            assert!(
                s.validate(&l).unwrap_err().to_string().contains("--timeout"),
                "{bad}"
            );
        }
        s.rr.timeout_s = Some(0.25);
        assert!(s.validate(&l).is_ok());
        s.kind = TestKind::TcpRr;
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("--timeout applies to tcp-crr and udp-rr, not to tcp-rr"));
    }

    #[test]
    fn roles() {
        use crate::report::Role;
        assert_eq!(TestKind::TcpStream.role(Direction::Tx, false), Role::Sender);
        assert_eq!(TestKind::TcpStream.role(Direction::Tx, true), Role::Receiver);
        assert_eq!(TestKind::TcpMaerts.role(Direction::Rx, true), Role::Sender);
        assert_eq!(TestKind::TcpRr.role(Direction::Tx, false), Role::Requester);
        assert_eq!(TestKind::TcpRr.role(Direction::Tx, true), Role::Responder);
        assert_eq!(TestKind::TcpCrr.role(Direction::Tx, false), Role::Requester);
        assert_eq!(TestKind::TcpCrr.role(Direction::Tx, true), Role::Responder);
    }

    #[test]
    fn bidir_plan_puts_tx_first() {
        assert_eq!(
            spec().flow_plan(),
            vec![Direction::Tx, Direction::Tx, Direction::Rx, Direction::Rx]
        );
        assert_eq!(spec().connections(), 4);
    }

    #[test]
    fn byte_quota_spreads_remainder() {
        let mut s = spec();
        s.flows = 3;
        s.limit = Limit::Bytes { bytes: 10 };
        let q: Vec<u64> = (0..3).map(|i| s.byte_quota(i).unwrap()).collect();
        assert_eq!(q, vec![4, 3, 3]);
        assert_eq!(q.iter().sum::<u64>(), 10);
    }

    /// Issue #7, item 9: a bound error names the option, the limit and
    /// which end imposed it; netrig's own bounds never read as an agent's,
    /// and are never printed as a range up to an internal maximum.
    #[test]
    fn bound_errors_say_whose_limit_it_is() {
        let l = AgentLimits {
            max_duration_s: 5,
            max_flows: 2,
            max_message_size: 1000,
            ..AgentLimits::default()
        };
        let mut s = spec();
        s.message_size = 1000;
        s.recv_size = 1000;
        s.limit = Limit::Duration { seconds: 5.0 };
        assert_eq!(s.validate(&l), Ok(()));
        s.limit = Limit::Duration { seconds: 6.0 };
        let e = s.validate(&l).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-l/--length 6: the agent allows at most 5 seconds (its --max-duration)"
        );
        assert_eq!(
            e.at_agent("the agent at 127.0.0.1:7000"),
            "-l/--length 6: the agent at 127.0.0.1:7000 allows at most 5 seconds (its --max-duration)"
        );
        assert_eq!(
            s.validate_bounds(),
            Ok(()),
            "no agent limit is checked before an agent is reached"
        );
        for bad in [0.0, -1.0, f64::INFINITY] {
            s.limit = Limit::Duration { seconds: bad };
            for e in [s.validate(&l).unwrap_err(), s.validate_bounds().unwrap_err()] {
                let m = e.to_string();
                assert!(
                    m.starts_with(&format!("-l/--length {bad}: must be more than 0 seconds")),
                    "{m}"
                );
                assert_eq!(
                    e.at_agent("the agent at x"),
                    m,
                    "netrig's own bound is nobody's limit but netrig's"
                );
            }
        }
        s.limit = Limit::Duration { seconds: 4.0 };
        s.interval_s = Some(6.0);
        assert_eq!(
            s.validate(&l).unwrap_err().to_string(),
            "-i/--interval 6: the agent allows at most 5 seconds (its --max-duration)"
        );
        s.interval_s = Some(0.01);
        assert_eq!(
            s.validate_bounds().unwrap_err().to_string(),
            "-i/--interval 0.01: must be at least 0.1 seconds (and finite)"
        );
        s.interval_s = None;
        s.flows = 3;
        assert_eq!(
            s.validate(&l).unwrap_err().to_string(),
            "-P/--parallel 3: the agent allows at most 2 flows per direction (its --max-flows)"
        );
        s.flows = 0;
        assert_eq!(
            s.validate_bounds().unwrap_err().to_string(),
            "-P/--parallel 0: must be at least 1 flow"
        );
        s.flows = 1;
        s.message_size = 2000;
        assert_eq!(
            s.validate(&l).unwrap_err().to_string(),
            "-m/--message-size 2000: the agent allows at most 1000 bytes (its limit on message sizes)"
        );
        s.message_size = 1000;
        s.recv_size = 1001;
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .starts_with("-M/--recv-size 1001: the agent allows"));
        s.recv_size = 1000;
        s.kind = TestKind::TcpRr;
        s.rr.request_size = 2000;
        assert_eq!(
            s.validate(&l).unwrap_err().to_string(),
            "-r/--request-response request size 2000: the agent allows at most 1000 bytes (its limit on message sizes)"
        );
        assert!(s.validate_bounds().is_ok());
    }

    #[test]
    fn validation_names_the_option() {
        let l = AgentLimits::default();
        let mut s = spec();
        s.message_size = 0;
        assert!(s
            .validate(&l)
            .unwrap_err()
            .to_string()
            .contains("-m/--message-size"));
        let mut s = spec();
        s.flows = l.max_flows + 1;
        assert!(s.validate(&l).unwrap_err().to_string().contains("-P"));
        let mut s = spec();
        s.limit = Limit::Duration { seconds: f64::NAN };
        assert!(s.validate(&l).is_err());
        let mut s = spec();
        s.omit_s = 10.0;
        assert!(s.validate(&l).unwrap_err().to_string().contains("--omit"));
        let mut s = spec();
        s.limit = Limit::Bytes { bytes: 100 };
        s.omit_s = 1.0;
        assert!(s.validate(&l).unwrap_err().to_string().contains("--omit"));
        let mut s = spec();
        s.remote.congestion = Some("../../etc".into());
        assert!(s.validate(&l).unwrap_err().to_string().contains("--cc"));
        let mut s = spec();
        s.remote.priority = Some(8);
        assert!(s.validate(&l).is_err());
        let mut s = spec();
        s.interval_s = Some(0.01);
        assert!(s.validate(&l).unwrap_err().to_string().contains("-i"));
        assert!(spec().validate(&l).is_ok());
    }
}
