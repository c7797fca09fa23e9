//! What a test is, as the client asks the agent to run it: the part every
//! test has ([`TestSpec`]: limit, omit, interval, flows, workers, CPU
//! measurement, the agent's socket options and CPUs) and the part that is
//! its kind's ([`KindSpec`], one type per kind in [`kind`]). An option that
//! does not apply to a kind has no field in that kind's type, so it cannot
//! be said on the wire: a spec that carries one is refused by name
//! (every type here denies unknown fields).
//!
//! The agent validates every spec against its own [`AgentLimits`] before
//! accepting it; the client checks netrig's own bounds before it connects.
//!
//! A spec may name hooks for the agent to run around the test
//! ([`RemoteHooks`]): names only, of scripts the agent's operator put in its
//! `--hooks` directory; a client never says what runs (docs/SECURITY.md).

pub mod kind;
pub mod transport;

use crate::AgentLimits;
pub use kind::{
    CloseFirst, DatagramFormat, Exchange, HttpSpec, KindRules, KindSpec, Load, PortRange, StreamOptions,
    TcpBidirSpec, TcpCrrSpec, TcpMaertsSpec, TcpOptions, TcpRrSpec, TcpStreamSpec, Transactions, Transport,
    UdpRrSpec, UdpStreamSpec, MAX_NOTSENT_LOWAT,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A sending rate for stream tests (`-b`, `--pacing-us`): udp-stream and
/// the TCP streams, per flow, whichever end sends. Message k of a flow is
/// due at time zero + k × message size × 8 / rate; when one is due, those
/// due within the quantum after it leave with it: never behind schedule,
/// never more than a quantum ahead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pace {
    /// Payload bits/s per flow (`-b`).
    pub rate_bps: u64,
    /// The pacing quantum in µs (`--pacing-us`); `None`: [`DEFAULT_PACING_US`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::pacing_us"
    )]
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

impl Pace {
    /// The paced sender's quantum.
    pub fn pacing(&self) -> std::time::Duration {
        std::time::Duration::from_micros(u64::from(self.pacing_us.unwrap_or(DEFAULT_PACING_US)))
    }

    fn check(&self) -> Result<(), SpecError> {
        if self.rate_bps == 0 || self.rate_bps > MAX_RATE_BPS {
            return Err(out_of_range(
                "-b/--bitrate",
                self.rate_bps,
                "1..=400G bits/s (0 or absent: as fast as possible)",
            ));
        }
        match self.pacing_us {
            Some(p) if p == 0 || p > MAX_PACING_US => {
                Err(out_of_range("--pacing-us", p, format!("1..={MAX_PACING_US} µs")))
            }
            _ => Ok(()),
        }
    }
}

/// Bytes at the start of every test datagram: test id (8), flow id (4),
/// sequence number (8), send timestamp in ns (8).
pub const UDP_HEADER_LEN: u32 = 28;
/// Largest UDP payload of an IPv4 datagram.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;

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
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Limit {
    /// After this many seconds (`-l`).
    Duration { seconds: f64 },
    /// After this many payload bytes per direction, spread over the flows (`-n`).
    Bytes { bytes: u64 },
}

impl std::fmt::Display for Limit {
    /// As a person says it: "10 s", "1073741824 bytes".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Duration { seconds } => write!(f, "{seconds} s"),
            Limit::Bytes { bytes } => write!(f, "{bytes} bytes"),
        }
    }
}

/// Options for the agent's end of every data socket, whatever the kind
/// (the TCP kinds carry [`TcpOptions`] besides).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketOptions {
    /// SO_SNDBUF request in bytes (the kernel doubles it and clamps it at wmem_max).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::sndbuf"
    )]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF request in bytes (the kernel doubles it and clamps it at rmem_max).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::rcvbuf"
    )]
    pub rcvbuf: Option<u32>,
    /// The whole IP TOS / IPv6 traffic-class byte (DSCP is its top six bits).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::tos"
    )]
    pub tos: Option<u8>,
    /// SO_PRIORITY (0-7 without CAP_NET_ADMIN).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::priority"
    )]
    pub priority: Option<u32>,
    /// SO_MAX_PACING_RATE in bits/s (`--max-pacing-rate`, iperf3's
    /// `--fq-rate`): the kernel paces each data socket to this rate (TCP
    /// paces by itself; other traffic needs the fq qdisc).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::max_pacing_rate_bps"
    )]
    pub max_pacing_rate_bps: Option<u64>,
}

/// The highest `--max-pacing-rate`, in bits/s.
pub const MAX_PACING_RATE_BPS: u64 = 400_000_000_000;

/// Hooks the client asks the agent to run around a test, by name
/// (`--remote-setup`, `--remote-teardown`): the agent's operator decides
/// what each name runs (`netrig serve --hooks DIR`), the client only picks
/// among the names the agent's welcome offers ([`AgentLimits::hooks`]).
/// The set-up hook runs before the agent accepts the test, the tear-down
/// hook after the test, however it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteHooks {
    /// Run before the test (`--remote-setup`); if it fails, the test is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::setup"
    )]
    pub setup: Option<String>,
    /// Run after the test (`--remote-teardown`), also after a failed set-up
    /// or a failed or aborted test.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::teardown"
    )]
    pub teardown: Option<String>,
}

impl RemoteHooks {
    /// The hooks asked for, each with the option that names it.
    pub fn requested(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("--remote-setup", self.setup.as_deref()),
            ("--remote-teardown", self.teardown.as_deref()),
        ]
        .into_iter()
        .filter_map(|(option, name)| name.map(|n| (option, n)))
    }

    /// Whether any hook is asked for.
    pub fn any(&self) -> bool {
        self.setup.is_some() || self.teardown.is_some()
    }
}

/// The longest hook name.
pub const MAX_HOOK_NAME: usize = 64;

/// Whether `name` can name a hook: 1 to [`MAX_HOOK_NAME`] ASCII letters,
/// digits, `.`, `_` and `-`, starting with a letter or a digit
/// (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`). No such name is a path (no `/`) or
/// a hidden file, `.` or `..`; the agent's hooks are the files of its
/// directory with such names, and a spec names nothing else.
pub fn is_hook_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_HOOK_NAME
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// A hook's name as messages show it: quoted and escaped, and cut short
/// when it is long (it may come from a hostile peer).
fn shown_name(name: &str) -> String {
    let cut: String = name.chars().take(MAX_HOOK_NAME + 8).collect();
    if cut.len() < name.len() {
        format!("{cut:?}...")
    } else {
        format!("{cut:?}")
    }
}

/// netrig's own bound on a hook's name, for `option`.
pub fn check_hook_name(option: &'static str, name: &str) -> Result<(), SpecError> {
    if is_hook_name(name) {
        return Ok(());
    }
    Err(invalid(
        option,
        shown_name(name),
        format!(
            "a hook is named by 1 to {MAX_HOOK_NAME} letters, digits, '.', '_' and '-', starting with a letter or \
             a digit (the name of a script in the agent's --hooks directory, never a path or a command)"
        ),
    ))
}

/// What an agent offers, as a message says it: "the agent offers no hooks
/// (...)" or "... offers no hook of that name; it offers a, b".
fn hooks_offered(agent: &str, offered: &[String]) -> String {
    if offered.is_empty() {
        format!("{agent} offers no hooks (start it with --hooks DIR)")
    } else {
        format!(
            "{agent} offers no hook of that name; it offers {}",
            offered.join(", ")
        )
    }
}

/// One test, as the client asks the agent to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// The kind and its own options: `{"kind": "tcp-rr", ...}`.
    pub test: KindSpec,
    pub limit: Limit,
    /// Seconds at the start left out of the results (`--omit`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub omit_s: f64,
    /// Interim report period in seconds (`-i`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::interval_s"
    )]
    pub interval_s: Option<f64>,
    /// Parallel flows per direction (`-P`).
    pub flows: u32,
    /// Worker threads per end (`-T`); `None`: the number of CPUs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::workers"
    )]
    pub workers: Option<u32>,
    /// Measure CPU utilisation over the window on both ends (on unless `--no-cpu`).
    #[serde(default = "yes")]
    pub measure_cpu: bool,
    /// Options for the agent's end of every data socket (`-S`, and the
    /// options that apply to both ends).
    #[serde(default, skip_serializing_if = "is_default")]
    pub remote: SocketOptions,
    /// Pin the agent's worker i to `remote_cpus[i % len]` (`--remote-cpus`,
    /// or `-A`'s second CPU); `None`: not pinned.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::remote_cpus"
    )]
    pub remote_cpus: Option<Vec<u32>>,
    /// Hooks the agent runs before and after the test, by name
    /// (`--remote-setup`, `--remote-teardown`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub remote_hooks: RemoteHooks,
    /// `--profile`: the client asks the agent for a profile of its host over its measured
    /// window (docs/PROFILE.md). The agent profiles only when its operator allows it
    /// (`netrig serve --allow-profile`), and otherwise says why in its report; off, it stays
    /// off the wire, and an agent older than the field refuses a spec that has it, naming it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub profile: bool,
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
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
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
    /// Names a hook the agent does not offer (none are in its welcome's
    /// [`AgentLimits::hooks`]). Said from the agent's side; a client names
    /// the agent with [`SpecError::at_agent`].
    #[error("{option} {name}: {}", hooks_offered("the agent", offered))]
    HookNotOffered {
        option: &'static str,
        /// A valid hook name ([`is_hook_name`]): netrig's own bound is checked first.
        name: String,
        /// What the agent offers.
        offered: Vec<String>,
    },
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
            SpecError::HookNotOffered {
                option,
                name,
                offered,
            } => {
                format!("{option} {name}: {}", hooks_offered(agent, offered))
            }
            other => other.to_string(),
        }
    }
}

pub(crate) fn invalid(option: &'static str, value: impl ToString, rule: impl ToString) -> SpecError {
    SpecError::Invalid {
        option,
        value: value.to_string(),
        rule: rule.to_string(),
    }
}

pub(crate) fn agent_limit(
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

pub(crate) fn out_of_range(option: &'static str, value: impl ToString, range: impl ToString) -> SpecError {
    SpecError::OutOfRange {
        option,
        value: value.to_string(),
        range: range.to_string(),
    }
}

/// netrig's own bounds and, at the agent, the agent's limits: what a
/// kind's [`KindRules::check`] checks its options with.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<'a> {
    /// The agent's limits; `None` on a client that has not reached one.
    pub limits: Option<&'a AgentLimits>,
}

impl Bounds<'_> {
    /// A message or request size: 1..=[`MAX_MESSAGE_SIZE`], then the
    /// agent's limit if it set a lower one. `what` is the value as the
    /// message shows it ("request size 64").
    pub fn size(&self, option: &'static str, v: u32, what: impl ToString) -> Result<(), SpecError> {
        if v == 0 || v > MAX_MESSAGE_SIZE {
            return Err(out_of_range(option, what, format!("1..={MAX_MESSAGE_SIZE}")));
        }
        match self.limits.filter(|l| v > l.max_message_size) {
            Some(l) => Err(agent_limit(
                option,
                what,
                format!("{} bytes", l.max_message_size),
                "limit on message sizes",
            )),
            None => Ok(()),
        }
    }

    /// A UDP payload: `min..=`[`MAX_UDP_PAYLOAD`] (`min` is
    /// [`UDP_HEADER_LEN`] where each datagram carries netrig's header).
    pub fn udp_payload(
        &self,
        option: &'static str,
        v: u32,
        what: impl ToString,
        min: u32,
    ) -> Result<(), SpecError> {
        if v < min || v > MAX_UDP_PAYLOAD {
            let why = if min == UDP_HEADER_LEN {
                format!(
                    " (each datagram carries a {UDP_HEADER_LEN}-byte header: test id, flow, sequence number, timestamp)"
                )
            } else {
                String::new()
            };
            return Err(out_of_range(
                option,
                what,
                format!("{min}..={MAX_UDP_PAYLOAD} for UDP{why}"),
            ));
        }
        Ok(())
    }

    /// A stream's optional rate.
    pub fn pace(&self, pace: Option<&Pace>) -> Result<(), SpecError> {
        pace.map_or(Ok(()), Pace::check)
    }
}

/// The UDP stream's batches (sendmmsg/recvmmsg messages per call) and the
/// largest buffer one GSO send or GRO receive may carry: the engine sizes its
/// buffers by them, and [`TestSpec::worker_buffer_bytes`] bounds them.
pub const UDP_BATCH: u64 = 64;
pub const UDP_BUFFER_MAX: u64 = 65_536;

impl TestSpec {
    /// A test of `test` limited by `limit`, everything else as netrig's CLI
    /// defaults it: one flow, CPU measured, no options on the agent's sockets.
    pub fn new(test: KindSpec, limit: Limit) -> TestSpec {
        TestSpec {
            test,
            limit,
            omit_s: 0.0,
            interval_s: None,
            flows: 1,
            workers: None,
            measure_cpu: true,
            remote: SocketOptions::default(),
            remote_cpus: None,
            remote_hooks: RemoteHooks::default(),
            profile: false,
        }
    }

    /// The kind's name ("tcp-rr").
    pub fn kind(&self) -> &'static str {
        self.test.name()
    }

    /// The kind's rules: its directions, transport, exchange and bounds.
    pub fn rules(&self) -> &dyn KindRules {
        self.test.rules()
    }

    /// At most how many bytes of buffers one worker thread allocates for
    /// this test (socket buffers aside, which the kernel bounds).
    pub fn worker_buffer_bytes(&self) -> u64 {
        self.rules().worker_buffer_bytes()
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

    /// The directions this test moves data in.
    pub fn directions(&self) -> &'static [Direction] {
        self.rules().directions()
    }

    /// What one end does with a flow going `direction`.
    pub fn role(&self, direction: Direction, at_agent: bool) -> crate::report::Role {
        self.rules().exchange().role(direction, at_agent)
    }

    /// Number of data connections the test opens at set-up. A
    /// connection-per-transaction test opens none then: its connections come
    /// and go during the run (its flow plan still has its flows).
    pub fn connections(&self) -> u64 {
        if self.rules().exchange() == Exchange::ConnectionPerTransaction {
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
        self.check(Bounds { limits: Some(limits) })
    }

    /// Checks netrig's own bounds, which hold whatever agent runs the test:
    /// what a client can check before it has reached an agent.
    pub fn validate_bounds(&self) -> Result<(), SpecError> {
        self.check(Bounds { limits: None })
    }

    /// netrig's own bounds, then the agent's limits if given. An agent's
    /// limit is only named once netrig's own bound holds, so a value wrong
    /// everywhere (`-l 0`) never reads as the agent's doing.
    fn check(&self, b: Bounds<'_>) -> Result<(), SpecError> {
        let limits = b.limits;
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
                    return Err(invalid(
                        "--omit",
                        self.omit_s,
                        format!("must be at least 0 and shorter than the test (-l {seconds})"),
                    ));
                }
            }
            Limit::Bytes { bytes } => {
                if bytes == 0 {
                    return Err(out_of_range("-n/--bytes", bytes, "1.."));
                }
                if !self.rules().counts_bytes() {
                    return Err(invalid(
                        "-n/--bytes",
                        bytes,
                        format!("{} runs for -l seconds, not to a byte count", self.kind()),
                    ));
                }
                if self.omit_s != 0.0 {
                    return Err(invalid(
                        "--omit",
                        self.omit_s,
                        "leaves seconds out of timed tests (-l), not of -n/--bytes",
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
        self.rules().check(&b)?;
        if let Some(cap) = limits.and_then(|l| l.max_rate_bps) {
            self.check_rate(cap)?;
        }
        if let (Some(most), Some((req, resp))) = (
            limits.and_then(|l| l.max_amplification),
            self.rules().udp_answer(),
        ) {
            if u64::from(resp) > u64::from(most) * u64::from(req) {
                return Err(agent_limit(
                    "-r/--request-response",
                    format!(
                        "asks for {resp}-byte answers to {req}-byte requests (datagram payload with netrig's \
                         {UDP_HEADER_LEN}-byte header: {:.1} times)",
                        f64::from(resp) / f64::from(req)
                    ),
                    format!("UDP answers {most} times their request's size"),
                    "--max-amplification",
                ));
            }
        }
        validate_socket_options(&self.remote, "-S/--remote-sockbuf")?;
        if let Some(c) = &self.remote_cpus {
            validate_cpus(c, "--remote-cpus")?;
        }
        for (option, name) in self.remote_hooks.requested() {
            check_hook_name(option, name)?;
            if let Some(l) = limits.filter(|l| !l.hooks.iter().any(|h| h == name)) {
                return Err(SpecError::HookNotOffered {
                    option,
                    name: name.to_string(),
                    offered: l.hooks.clone(),
                });
            }
        }
        Ok(())
    }
}

impl TestSpec {
    /// Against an agent's `--max-rate`: the payload all flows offer in each
    /// direction, as the options state it. A stream without `-b` is refused
    /// (it would send as fast as the path takes); closed-loop
    /// request/response is clocked by its answers and always runs.
    fn check_rate(&self, cap_bps: u64) -> Result<(), SpecError> {
        let limit = || {
            format!(
                "{} per direction (all flows of a test)",
                kind::format_bps(cap_bps as f64)
            )
        };
        let flows = f64::from(self.flows);
        match self.rules().offered() {
            kind::Offered::SelfClocked => Ok(()),
            kind::Offered::Unpaced { option } => Err(agent_limit(
                option,
                "not given (as fast as the path takes)",
                limit(),
                "--max-rate",
            )),
            kind::Offered::Paced {
                to_agent,
                from_agent,
                option,
            } => {
                let most = to_agent.max(from_agent) * flows;
                if most > cap_bps as f64 {
                    let per_flow = if self.flows > 1 {
                        format!(" ({} flows)", self.flows)
                    } else {
                        String::new()
                    };
                    return Err(agent_limit(
                        option,
                        format!("offers {}{per_flow}", kind::format_bps(most)),
                        limit(),
                        "--max-rate",
                    ));
                }
                Ok(())
            }
        }
    }
}

/// One rule for `null` in a spec: it is not a value. An option is left out
/// for its default; `null` is refused wherever it stands, naming the field
/// (serde takes `null` as `None` for an `Option` field unless told
/// otherwise, and refuses it for every other type). Each optional field
/// deserializes through the function of its name here.
pub(crate) mod not_null {
    use serde::de::{Deserialize, Deserializer, Error};

    /// An optional field present: its value, never `null`.
    fn present<'de, D, T>(d: D, field: &'static str) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        match Option::<T>::deserialize(d)? {
            Some(v) => Ok(Some(v)),
            None => Err(D::Error::custom(format_args!(
                "`{field}`: null is not a value (leave the field out for its default)"
            ))),
        }
    }

    macro_rules! fields {
        ($($name:ident,)*) => {$(
            pub(crate) fn $name<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
            where
                D: Deserializer<'de>,
                T: Deserialize<'de>,
            {
                present(d, stringify!($name))
            }
        )*};
    }

    fields! {
        ca_file,
        congestion,
        host_header,
        interval_s,
        local_ports,
        max_body,
        max_header,
        max_pacing_rate_bps,
        notsent_lowat,
        pace,
        pacing_us,
        priority,
        rcvbuf,
        remote_cpus,
        requests,
        setup,
        sndbuf,
        spin_us,
        teardown,
        timeout_s,
        tls,
        tos,
        url_host,
        url_port,
        workers,
    }
}

/// Which of a test's directions carry send times to be timed one way
/// (client to agent, agent to client), or why none does (shown as the
/// withheld reason); `None`: a kind that never reports one-way delay.
/// udp-stream and udp-rr stamp every datagram; tcp-rr stamps each message
/// of at least 8 bytes; tcp-crr does not stamp.
pub fn one_way_messages(spec: &TestSpec) -> Option<Result<(bool, bool), String>> {
    use kind::Transport;
    match &spec.test {
        KindSpec::TcpRr(s) => {
            let t = &s.transactions;
            let (tx, rx) = (t.request_size >= 8, t.response_size >= 8);
            Some(if tx || rx {
                Ok((tx, rx))
            } else {
                Err(format!(
                    "messages smaller than 8 bytes carry no time stamp (requests of {} B, responses of {} B: \
                     ask for -r REQ,RESP of 8 bytes or more, as `-r 64`)",
                    t.request_size, t.response_size
                ))
            })
        }
        KindSpec::TcpCrr(_) => Some(Err(
            "tcp-crr does not stamp its messages (a connection per transaction: its round trip only is timed)".into(),
        )),
        _ if spec.rules().transport() == Transport::Udp => Some(Ok((true, true))),
        _ => None,
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
    if let Some(r) = o.max_pacing_rate_bps {
        if !(8..=MAX_PACING_RATE_BPS).contains(&r) {
            return Err(out_of_range("--max-pacing-rate", r, "8..=400G bits/s"));
        }
    }
    Ok(())
}

/// Bounds on `--mss`, which only the client applies (before it connects).
pub fn validate_mss(mss: u32) -> Result<(), SpecError> {
    if !(88..=65535).contains(&mss) {
        return Err(out_of_range("--mss", mss, "88..=65535"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
