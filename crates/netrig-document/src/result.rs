//! The result of one test, as `--json` prints it. Field names here are a
//! contract with scripts: `docs/result.schema.json` describes them and a
//! test validates real output against it. The measurements it embeds are
//! its own types ([`measure`]), converted from the wire's.

pub mod half_close;
pub mod http;
pub mod measure;
pub mod path_element;
pub mod peer;
pub mod profile;
pub mod server_host;
pub mod witness;

use measure::{CpuUsage, Environment, TcpInfo};
/// A kind's own counts, as the result carries them.
pub use netrig_proto::report::counts::{Counts, KindCounts, FAILURES};
use netrig_proto::report::{AppliedOptions, CounterReport, Role, ScheduleReport, SockBufReport, WorkerCpu};
use netrig_proto::Direction;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub netrig_version: String,
    /// The test kind, e.g. "tcp-stream".
    pub test: String,
    pub config: TestConfig,
    pub agent: AgentInfo,
    pub warnings: Vec<String>,
    pub summary: Summary,
    pub flows: Vec<FlowResult>,
    /// Interim reports (`-i`), empty without it.
    pub intervals: Vec<IntervalResult>,
    /// Kernel counter deltas of each end's host over the test.
    pub counters: PerEnd<Option<CounterReport>>,
    /// Each end's machine: kernel, CPUs, the sysctls that bound a test.
    pub environment: PerEnd<Option<Environment>>,
    /// CPU used by each end's netrig worker threads in the window.
    pub workers: PerEnd<Vec<WorkerCpu>>,
    /// The kernel's own counts beside netrig's figures, over the same
    /// window, judged (docs/RESULTS.md, "The witness").
    #[serde(default)]
    pub witness: witness::WitnessResult,
    /// Run through a lab (a plan's `[lab]`): what each netrig path element did over the run,
    /// per direction (docs/LAB.md); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_elements: Vec<path_element::PathElementCounts>,
    /// Kinds with one end, given `--server-agent`: what the agent on the
    /// server's host saw over the run (docs/RESULTS.md, "The server
    /// host"); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_host: Option<server_host::ServerHost>,
    /// When the test began by this client's wall clock, seconds since the Unix epoch: the
    /// instant the client sent `go` (time zero of the window, `omit_s` before it opens, and of
    /// `intervals[].start_s`). Several clients started together (a lab plan's `clients`) are
    /// compared by it (their start skew); tests started together (a plan's `[[group]]`) are
    /// placed on one time axis by it. Absent where the kind does not record it and in results of
    /// netrig before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_s: Option<f64>,
    /// The far end when it was not a netrig agent (an iperf3 server): which
    /// software, how the client chose to speak it, and what it reported
    /// (docs/RESULTS.md, "Against an iperf3 server"); absent against an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<peer::PeerInfo>,
    /// `--profile`: where each end's CPU time went over the measured window, or why it is
    /// withheld (docs/RESULTS.md, "The profile"); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::ProfileResult>,
}

impl TestResult {
    /// The result of a kind with one end (no agent: an HTTP load, a lab's overload generator):
    /// `test`, its config, what it ran against and its summary, every per-end part empty; the
    /// kind sets what it has beside (`TestResult { intervals, ..TestResult::one_ended(..) }`).
    pub fn one_ended(test: &str, config: TestConfig, agent: AgentInfo, summary: Summary) -> TestResult {
        TestResult {
            netrig_version: netrig_proto::SOFTWARE_VERSION.to_string(),
            test: test.into(),
            config,
            agent,
            warnings: Vec::new(),
            summary,
            flows: Vec::new(),
            intervals: Vec::new(),
            counters: PerEnd {
                local: None,
                remote: None,
            },
            environment: PerEnd {
                local: None,
                remote: None,
            },
            path_elements: Vec::new(),
            workers: PerEnd {
                local: Vec::new(),
                remote: Vec::new(),
            },
            witness: Default::default(),
            server_host: None,
            started_unix_s: None,
            peer: None,
            profile: None,
        }
    }
}

/// One value per end of the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerEnd<T> {
    pub local: T,
    pub remote: T,
}

/// Whole-machine CPU utilisation of each end over its measured window,
/// from per-CPU /proc/stat deltas (netperf's method): 100 % = every CPU busy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    pub local_pct: Option<f64>,
    pub remote_pct: Option<f64>,
    /// The split: user, nice, system, irq, softirq, steal, iowait, busiest CPU.
    pub local: Option<CpuUsage>,
    pub remote: Option<CpuUsage>,
    /// Share of wall time × CPUs that /proc/stat accounted for in each window
    /// (percentages are of what was accounted; under heavy interrupt load
    /// some kernels and hypervisors account for less than all of it).
    pub local_accounted_pct: Option<f64>,
    pub remote_accounted_pct: Option<f64>,
    /// Why `local_pct`, `local` and `service_demand.local` are null where
    /// they were to be measured: the busy time was below /proc/stat's
    /// resolution (fewer 10-ms ticks than CPUs), or (http) /proc/stat could
    /// not be read. Absent when they are not withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_withheld: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_withheld: Option<String>,
}

/// CPU time per unit of work, as netperf computes it: utilisation × elapsed ×
/// CPUs / units, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceDemandSummary {
    pub local: Option<f64>,
    pub remote: Option<f64>,
    /// "us/KB" (KB = 1024 bytes of `summary.bytes`) for stream tests.
    pub unit: String,
    /// The MSS used for the per-packet estimate (the first flow's sender, from TCP_INFO).
    pub mss: Option<u32>,
    /// Service demand × MSS / 1024: an estimate of CPU µs per packet.
    pub local_per_packet_us: Option<f64>,
    pub remote_per_packet_us: Option<f64>,
}

/// What the user asked for: the options every test has, and the kind's own
/// ([`TestConfig::kind`]).
// Serialize is below: it puts the kind's keys where netrig has always printed them. The
// derive makes `TestConfig::deserialize` of its own, which the Deserialize below calls.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct TestConfig {
    /// `-H`, or null for the embedded loopback agent.
    pub host: Option<String>,
    pub port: u16,
    pub embedded: bool,
    pub length_s: Option<f64>,
    pub bytes: Option<u64>,
    pub omit_s: f64,
    pub interval_s: Option<f64>,
    /// Flows per direction (`-P`).
    pub flows: u32,
    /// Bytes per send() call (`-m`; udp-stream: the datagram's payload;
    /// request/response kinds: the request size, what the client sends per
    /// transaction).
    pub message_size: u32,
    /// Bytes per recv() call (`-M`; udp-stream: the datagram's payload;
    /// request/response kinds: the response size).
    pub recv_size: u32,
    /// Worker threads per end (`-T`); null: the number of CPUs.
    pub workers: Option<u32>,
    /// The CPUs this end's / the agent's workers were pinned to, round
    /// robin (`--cpus`, `--remote-cpus`, `-A`); null: not pinned.
    #[serde(default)]
    pub cpus: Option<Vec<u32>>,
    #[serde(default)]
    pub remote_cpus: Option<Vec<u32>>,
    /// Options on the client's sockets (`-s` and the shared options).
    pub local: SocketOptions,
    /// Options on the agent's sockets (`-S` and the shared options).
    pub remote: SocketOptions,
    pub bind: Option<String>,
    /// "ipv4", "ipv6" or null (either).
    pub family: Option<String>,
    /// The kind's own options, beside the common ones in the document (each
    /// kind's type is in its folder, crate netrig-kinds: read and write them
    /// with [`TestConfig::kind_part`] and [`TestConfig::set_kind_part`]). A
    /// kind's keys are absent from another kind's result; a document saved
    /// before they were the kind's, with every kind's keys, keeps them all.
    #[serde(flatten)]
    pub kind: serde_json::Map<String, serde_json::Value>,
}

/// The kind's keys that netrig has printed among the common ones since
/// before the kinds took their own, each group after the common key it
/// follows, so that a result reads as it did; a key of none of them (a new
/// kind's) follows the common ones.
const KIND_KEYS_AFTER: &[(&str, &[&str])] = &[
    ("message_size", &["message_size_default"]),
    (
        "recv_size",
        &[
            "request_size",
            "response_size",
            "burst",
            "rate",
            "poisson",
            "timeout_s",
            "spin_us",
            "pacing_us",
            "rate_bps",
        ],
    ),
    (
        "workers",
        &[
            "zerocopy",
            "skip_rx_copy",
            "no_rcvlowat",
            "notsent_lowat",
            "msg_zerocopy",
            "busy_wait",
            "close_first",
            "local_ports",
        ],
    ),
    ("remote_cpus", &["udp_rate_bps", "reverse"]),
];

/// A common key of a config, then the kind's keys that follow it ([`KIND_KEYS_AFTER`]).
fn entry<M: serde::ser::SerializeMap, T: Serialize + ?Sized>(
    m: &mut M,
    kind: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    v: &T,
) -> Result<(), M::Error> {
    m.serialize_entry(key, v)?;
    let after = KIND_KEYS_AFTER.iter().find(|(k, _)| *k == key);
    for k in after.map_or(&[][..], |(_, keys)| keys) {
        if let Some(v) = kind.get(*k) {
            m.serialize_entry(k, v)?;
        }
    }
    Ok(())
}

impl Serialize for TestConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(17 + self.kind.len()))?;
        let kind = &self.kind;
        entry(&mut m, kind, "host", &self.host)?;
        entry(&mut m, kind, "port", &self.port)?;
        entry(&mut m, kind, "embedded", &self.embedded)?;
        entry(&mut m, kind, "length_s", &self.length_s)?;
        entry(&mut m, kind, "bytes", &self.bytes)?;
        entry(&mut m, kind, "omit_s", &self.omit_s)?;
        entry(&mut m, kind, "interval_s", &self.interval_s)?;
        entry(&mut m, kind, "flows", &self.flows)?;
        entry(&mut m, kind, "message_size", &self.message_size)?;
        entry(&mut m, kind, "recv_size", &self.recv_size)?;
        entry(&mut m, kind, "workers", &self.workers)?;
        entry(&mut m, kind, "cpus", &self.cpus)?;
        entry(&mut m, kind, "remote_cpus", &self.remote_cpus)?;
        entry(&mut m, kind, "local", &self.local)?;
        entry(&mut m, kind, "remote", &self.remote)?;
        entry(&mut m, kind, "bind", &self.bind)?;
        entry(&mut m, kind, "family", &self.family)?;
        let placed = |k: &str| KIND_KEYS_AFTER.iter().any(|(_, keys)| keys.contains(&k));
        for (k, v) in self.kind.iter().filter(|(k, _)| !placed(k)) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Keys every config had before the kinds took their own, of kinds no
/// kind's config is of all at once now: a result saved then has them all.
const LEGACY_KEYS: &[&str] = &["request_size", "pacing_us", "udp_rate_bps"];

/// The keys a config read then by their defaults (false, or null) when a
/// result saved before they were added lacked them.
const LEGACY_DEFAULTED: &[(&str, bool)] = &[
    ("message_size_default", false),
    ("rate_bps", false),
    ("zerocopy", true),
    ("skip_rx_copy", true),
    ("no_rcvlowat", true),
    ("notsent_lowat", false),
    ("msg_zerocopy", true),
    ("busy_wait", true),
    ("close_first", false),
    ("local_ports", false),
];

impl<'de> Deserialize<'de> for TestConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut c = TestConfig::deserialize(d)?;
        // A result saved before the kinds took their own keys reads as it did then (and is
        // written again so): the keys added since that it lacks by their defaults.
        if LEGACY_KEYS.iter().all(|k| c.kind.contains_key(*k)) {
            for (k, flag) in LEGACY_DEFAULTED {
                let default = if *flag {
                    serde_json::Value::Bool(false)
                } else {
                    serde_json::Value::Null
                };
                c.kind.entry(*k).or_insert(default);
            }
        }
        Ok(c)
    }
}

/// What the client knows of a run besides its spec: where it went and with
/// what on this end.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// `-H` as given; `None` for the embedded agent.
    pub host: Option<String>,
    pub port: u16,
    /// `--cpus` (or `-A`'s first CPU).
    pub cpus: Option<Vec<u32>>,
    /// `--bind`.
    pub bind: Option<String>,
    /// "ipv4", "ipv6" or `None` (either).
    pub family: Option<String>,
    /// Options on the client's sockets and on the agent's.
    pub local: SocketOptions,
    pub remote: SocketOptions,
}

impl TestConfig {
    /// The kind's own options as its type `T` (a kind's type in netrig-kinds,
    /// or a view of some of its keys); `None` when they do not read as `T`.
    /// Keys of `T` that the config lacks read as `T` says (its defaults).
    pub fn kind_part<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(serde_json::Value::Object(self.kind.clone())).ok()
    }

    /// Sets the kind's own options to `part`'s (its keys, beside any others).
    pub fn set_kind_part<T: Serialize>(&mut self, part: &T) {
        match serde_json::to_value(part) {
            Ok(serde_json::Value::Object(keys)) => self.kind.extend(keys),
            // A kind's options are a struct: anything else is a defect here.
            other => debug_assert!(false, "a kind's config is not an object: {other:?}"),
        }
    }
}

/// Options on one end's data sockets, as the result shows them (the
/// result's own type: the wire and the engine have theirs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketOptions {
    /// SO_SNDBUF request in bytes (the kernel doubles it and clamps it at wmem_max).
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF request in bytes (the kernel doubles it and clamps it at rmem_max).
    pub rcvbuf: Option<u32>,
    /// The whole IP TOS / IPv6 traffic-class byte (DSCP is its top six bits).
    pub tos: Option<u8>,
    /// SO_PRIORITY.
    pub priority: Option<u32>,
    /// TCP_NODELAY.
    #[serde(default)]
    pub nodelay: bool,
    /// TCP_CONGESTION algorithm name.
    pub congestion: Option<String>,
    /// TCP_MAXSEG, applied before connect (client end only).
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE in bits/s.
    #[serde(default)]
    pub max_pacing_rate_bps: Option<u64>,
    /// `--mptcp`: the data connections were made MPTCP (each flow's
    /// `applied.mptcp` says whether it stayed so); absent for TCP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
}

/// Who served the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// The address the client reached.
    pub address: String,
    pub software: String,
    pub protocol_version: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `bytes` × 8 / `elapsed_s`.
    pub throughput_bps: f64,
    /// Payload bytes the receiving applications got within the measured window, all directions.
    pub bytes: u64,
    /// The measured window, in seconds (the longest direction's).
    pub elapsed_s: f64,
    /// Client to agent, as the agent received it; null when the test sends no data that way.
    pub tx_throughput_bps: Option<f64>,
    /// Agent to client, as the client received it; null when the test sends no data that way.
    pub rx_throughput_bps: Option<f64>,
    pub directions: Vec<DirectionSummary>,
    /// Jain's fairness index between the directions' throughputs (tcp-bidir:
    /// tx and rx `throughput_bps`); null when the test moves data one way.
    #[serde(default)]
    pub directions_fairness: Option<f64>,
    pub socket_buffers: EndBuffers,
    pub cpu: CpuSummary,
    pub service_demand: ServiceDemandSummary,
    /// Request/response tests: transactions completed in the requester's window, all flows.
    pub transactions: Option<u64>,
    /// `transactions` / `elapsed_s`.
    pub transactions_per_s: Option<f64>,
    /// Request/response tests: latency of every transaction completed in the window,
    /// from per-worker HdrHistograms merged (never averaged percentiles).
    pub latency_us: Option<LatencyUs>,
    /// Open loop (`--rate`): how far the generator fell behind its schedule.
    pub schedule: Option<ScheduleReport>,
    /// The kind's own counts, all flows (the sum of `flows[].counts`),
    /// each group a key of its own (tcp-crr: `connect_errors`, transactions
    /// that failed inside the window, by reason, not counted in
    /// `transactions`); no key for a kind without counts of its own.
    #[serde(flatten)]
    pub counts: KindCounts,
    /// Senders' payload rate over their windows, all directions (null for request/response).
    pub send_throughput_bps: Option<f64>,
    /// Receivers' payload rate over their windows, all directions (null for request/response).
    pub recv_throughput_bps: Option<f64>,
    /// UDP tests: datagram accounting, all flows, over the whole test.
    pub udp: Option<UdpSummary>,
    /// http: the load generator's figures; absent for other tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<http::HttpSummary>,
    /// udp-stream: one-way delay per direction, where both ends read one
    /// clock; absent for other tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_delay: Option<OneWayDelay>,
    /// half-close: the clients and the server's sockets from them; absent for other tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_close: Option<half_close::HalfCloseSummary>,
}

/// One-way delay per direction (as iperf 2's `--trip-times`): the
/// receiver's receive time less the sender's send time, by one clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayDelay {
    /// How the two ends' clocks are known to be one (both ends on one
    /// kernel); null when withheld.
    pub clock: Option<String>,
    /// The most the two clocks may differ, µs (0: one clock), beside every
    /// figure; null when withheld.
    pub clock_offset_bound_us: Option<f64>,
    /// Two clocks whose offset the client measured (the clock probe): the
    /// agent's clock less the client's, µs, taken off the figures; absent on
    /// one clock and when withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_us: Option<f64>,
    /// The offset measured after the test less the one before, µs (half of
    /// it is in the bound); absent when not measured twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_drift_us: Option<f64>,
    /// Why there are no figures; null when there are.
    pub withheld: Option<String>,
    /// Client to agent: the datagrams the client sent, as the agent
    /// received them in its window; null when the test sends none that way.
    pub tx: Option<OneWayFigures>,
    /// Agent to client, as the client received them in its window.
    pub rx: Option<OneWayFigures>,
}

/// One direction's one-way delay, µs, over the datagrams its receiver took
/// in during its measured window with the kernel's receive timestamp (the
/// send time of a datagram sent in a batch is its send call's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayFigures {
    /// The datagrams the figures are of.
    pub datagrams: u64,
    pub min_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
    /// Why the figures are null; null when measured.
    pub withheld: Option<String>,
}

/// Datagram accounting of UDP flows over the whole test (the window and the
/// drain after it, so datagrams in flight are not counted as lost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagrams the sender sent, as they went on the wire.
    pub sent_datagrams: u64,
    /// Distinct datagrams the receiver got (duplicates not counted again).
    pub received_datagrams: u64,
    /// max(sent, highest sequence received + 1) − received.
    pub lost_datagrams: u64,
    /// lost / that expected count × 100.
    pub loss_pct: f64,
    /// Jitter over the receiver's measured window, in µs: the mean of RFC
    /// 3550's `|D|` (the difference between successive timed datagrams'
    /// transit times; with `--no-gso` unpaced, the first datagrams of
    /// successive sendmmsg calls) over the window's timed pairs, all flows
    /// together. Null when not measured, with the reason in `jitter_withheld`.
    pub jitter_us: Option<f64>,
    /// RFC 3550's running jitter `J` when the window closed, as iperf3
    /// prints it (the mean over flows, weighted by datagrams received); null
    /// when `jitter_us` is.
    #[serde(default)]
    pub jitter_rfc3550_us: Option<f64>,
    /// The window's pairs of successive timed datagrams that jitter is the mean over.
    #[serde(default)]
    pub jitter_pairs: u64,
    /// Datagrams received in the window whose send or receive timestamp
    /// was shared with other datagrams (a GSO send, a GRO buffer), or whose
    /// send time was more than a minute from the receiver's clock.
    #[serde(default)]
    pub untimed_datagrams: u64,
    /// Why `jitter_us` is null; null when it is measured.
    #[serde(default)]
    pub jitter_withheld: Option<String>,
    /// Datagrams that arrived after one with a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams that arrived more than once.
    pub duplicates: u64,
    /// Datagrams of no flow of this test that reached the receiver's sockets.
    pub stray: u64,
    /// Datagrams sent inside the sender's window (udp-stream); null for
    /// udp-rr, whose requester does not count its sends by window.
    pub window_sent_datagrams: Option<u64>,
}

/// Transaction latency in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub count: u64,
    pub mean: f64,
    pub stddev: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// The rest of wrk2's spectrum: 75th, 95th, 99.99th, 99.999th.
    pub p75: f64,
    pub p95: f64,
    pub p9999: f64,
    pub p99999: f64,
    /// The window's whole histogram (the summary only; null in intervals):
    /// base64 of HdrHistogram's uncompressed V2 encoding, values in ns, 1 ns
    /// to 100 s at 3 significant digits. Any HdrHistogram decoder reads it,
    /// so runs can be merged and any percentile read later.
    pub histogram: Option<String>,
}

impl From<&netrig_proto::report::measure::LatencySummary> for LatencyUs {
    fn from(s: &netrig_proto::report::measure::LatencySummary) -> Self {
        LatencyUs {
            count: s.count,
            mean: s.mean_us,
            stddev: s.stddev_us,
            min: s.min_us,
            p50: s.p50_us,
            p90: s.p90_us,
            p99: s.p99_us,
            p999: s.p999_us,
            max: s.max_us,
            p75: s.p75_us,
            p95: s.p95_us,
            p9999: s.p9999_us,
            p99999: s.p99999_us,
            histogram: None,
        }
    }
}

/// Socket buffers of each end. The summary holds the largest value across
/// that end's connections; each flow's own are in `flows[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndBuffers {
    pub local: SockBufReport,
    pub remote: SockBufReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    pub direction: Direction,
    pub flows: u32,
    /// Received within the receiver's window.
    pub bytes: u64,
    pub elapsed_s: f64,
    pub throughput_bps: f64,
    /// Sent within the sender's window.
    pub sender_bytes: u64,
    pub sender_elapsed_s: f64,
    pub sender_throughput_bps: f64,
    /// Spread of per-flow receive throughput.
    pub flow_throughput_bps: Spread,
    /// Jain's fairness index over this direction's flows' receive throughput
    /// ([`jain_index`]); null with one flow, or when no flow received anything.
    #[serde(default)]
    pub fairness: Option<f64>,
}

/// Jain's fairness index, (Σx)² / (n · Σx²): 1 when every share is equal,
/// 1/n when one takes everything. `None` for fewer than two values (one
/// flow is trivially fair: the index says nothing), or when all are zero.
pub fn jain_index(values: &[f64]) -> Option<f64> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return None;
    }
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| (sum * sum / (values.len() as f64 * squares)).min(1.0))
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread {
                min: 0.0,
                median: 0.0,
                max: 0.0,
            };
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            min: v[0],
            median,
            max: v[n - 1],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    pub id: u32,
    pub direction: Direction,
    /// Received within the receiver's window.
    pub bytes: u64,
    pub elapsed_s: f64,
    pub throughput_bps: f64,
    pub sender_bytes: u64,
    pub sender_elapsed_s: f64,
    pub sender_throughput_bps: f64,
    /// TCP_INFO of the sending end's socket when its window closed.
    pub tcp_info: Option<TcpInfo>,
    /// Request/response tests: transactions the requester completed in its window.
    pub transactions: Option<u64>,
    pub transactions_per_s: Option<f64>,
    /// UDP tests: this flow's datagram accounting.
    pub udp: Option<UdpSummary>,
    /// The kind's own counts of this flow, as the requester's end counted
    /// them (tcp-crr: `connect_errors`, its failed transactions by reason).
    #[serde(flatten)]
    pub counts: KindCounts,
    pub local: FlowEnd,
    pub remote: FlowEnd,
}

/// One end of one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowEnd {
    pub role: Role,
    /// Bytes over the whole connection, inside the window or not.
    pub total_bytes: u64,
    pub socket_buffers: SockBufReport,
    pub applied: AppliedOptions,
    pub tcp_info: Option<TcpInfo>,
    /// A `--msg-zerocopy` sender: its MSG_ZEROCOPY sends, the completions
    /// the kernel notified, and how many of those it copied after all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<netrig_proto::report::ZeroCopyReport>,
    /// A TCP stream receiver: its receive calls, and the watermark
    /// (SO_RCVLOWAT) it used while it was ahead of its flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<netrig_proto::report::ReadReport>,
    /// A TCP stream sender: its send calls, and the unsent bytes the
    /// kernel let it keep (TCP_NOTSENT_LOWAT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sends: Option<netrig_proto::report::SendReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalResult {
    pub index: u32,
    /// Seconds since the start of the test.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    pub throughput_bps: f64,
    pub tx_throughput_bps: Option<f64>,
    pub rx_throughput_bps: Option<f64>,
    /// Jain's fairness index over each direction's flows' throughput in the
    /// interval, and between the directions' (tcp-bidir); null as in the
    /// summary (one flow, one direction, nothing received).
    #[serde(default)]
    pub tx_fairness: Option<f64>,
    #[serde(default)]
    pub rx_fairness: Option<f64>,
    #[serde(default)]
    pub directions_fairness: Option<f64>,
    /// Request/response tests: transactions per second in the interval.
    pub transactions_per_s: Option<f64>,
    /// TCP streams: segments the senders retransmitted in the interval
    /// (from TCP_INFO); null without it.
    #[serde(default)]
    pub retransmits: Option<u64>,
    /// UDP streams: the receivers' datagram accounting in the interval.
    #[serde(default)]
    pub udp: Option<IntervalUdp>,
    /// tcp-crr: transactions that failed in the interval, all reasons (the
    /// test's split by reason is the kind's `summary.connect_errors`); null otherwise.
    #[serde(default)]
    pub failed_transactions: Option<u64>,
    /// Request/response: the latency of exactly the transactions completed
    /// in the interval, all flows; null otherwise.
    #[serde(default)]
    pub latency_us: Option<LatencyUs>,
    pub flows: Vec<IntervalFlow>,
}

/// A UDP receiver's accounting over one interval: `lost` is the datagrams
/// newly expected (highest sequence + 1) minus those newly received, never
/// negative; a datagram presumed lost that arrives in a later interval is
/// received and out of order there. The test's totals in `summary.udp` are
/// exact; interval figures are taken while datagrams flow and may split a
/// receive batch between neighbouring intervals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalUdp {
    pub received_datagrams: u64,
    pub lost_datagrams: u64,
    /// lost / (received + lost) × 100.
    pub loss_pct: f64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Jitter over the interval, in µs: the mean `|D|` of its timed pairs,
    /// as `summary.udp.jitter_us` over the window; null when not measured
    /// (too many shared timestamps, or no pair).
    pub jitter_us: Option<f64>,
    /// RFC 3550's running `J` at the interval's end (weighted by datagrams
    /// received over flows); null when `jitter_us` is.
    #[serde(default)]
    pub jitter_rfc3550_us: Option<f64>,
    /// Datagrams received in the interval with shared timestamps, or send
    /// times far from the receiver's clock.
    #[serde(default)]
    pub untimed_datagrams: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalFlow {
    pub id: u32,
    pub direction: Direction,
    pub bytes: u64,
    pub throughput_bps: f64,
    /// TCP_INFO of the sending end's socket at the end of the interval.
    pub tcp_info: Option<TcpInfo>,
    /// Request/response tests: transactions completed in the interval.
    pub transactions: Option<u64>,
    /// TCP streams: segments the sender retransmitted in the interval.
    #[serde(default)]
    pub retransmits: Option<u64>,
    /// UDP streams: the receiver's accounting in the interval.
    #[serde(default)]
    pub udp: Option<IntervalUdp>,
    /// tcp-crr: the flow's transactions that failed in the interval.
    #[serde(default)]
    pub failed_transactions: Option<u64>,
}

/// bits per second, 0 for an empty window.
pub fn bps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TestConfig {
        serde_json::from_value(serde_json::json!({
            "host": null, "port": 1, "embedded": true, "length_s": 1.0, "bytes": null, "omit_s": 0.0,
            "interval_s": null, "flows": 1, "message_size": 8, "recv_size": 8, "workers": null,
            "local": {}, "remote": {}, "bind": null, "family": null
        }))
        .unwrap()
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct Own {
        burst: Option<u32>,
        close_first: Option<String>,
        brand_new: bool,
    }

    /// A kind's part reads back as its type; its keys print where netrig
    /// has always printed them, a key of none of those after the common
    /// ones, and no other kind's key at all.
    #[test]
    fn a_kinds_part_reads_back_and_prints_in_place() {
        let mut c = config();
        assert!(c.kind.is_empty());
        let own = Own {
            burst: Some(4),
            close_first: Some("responder".into()),
            brand_new: true,
        };
        c.set_kind_part(&own);
        assert_eq!(c.kind_part::<Own>(), Some(own));
        let text = serde_json::to_string(&c).unwrap();
        let at = |k: &str| {
            text.find(&format!("\"{k}\""))
                .unwrap_or_else(|| panic!("{k} in {text}"))
        };
        assert!(
            at("recv_size") < at("burst") && at("burst") < at("workers"),
            "{text}"
        );
        assert!(
            at("workers") < at("close_first") && at("close_first") < at("cpus"),
            "{text}"
        );
        assert!(at("family") < at("brand_new"), "{text}");
        assert!(
            !text.contains("request_size") && !text.contains("zerocopy"),
            "{text}"
        );
        let back: TestConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
    }

    /// A result saved before the kinds took their own keys (every kind's,
    /// without those added later) reads as it did then: the later keys by
    /// their defaults.
    #[test]
    fn a_config_saved_before_the_kinds_parts_reads_as_then() {
        // Then every config had every kind's keys, null where not its kind's.
        let mut old = serde_json::to_value(config()).unwrap();
        for k in [
            "request_size",
            "burst",
            "spin_us",
            "pacing_us",
            "udp_rate_bps",
            "reverse",
        ] {
            old[k] = serde_json::Value::Null;
        }
        let c: TestConfig = serde_json::from_value(old).unwrap();
        assert_eq!(c.kind["zerocopy"], false);
        assert_eq!(c.kind["busy_wait"], false);
        assert!(c.kind["close_first"].is_null());
        // A config of now has its kind's keys alone, nothing added.
        let mut now = config();
        now.set_kind_part(&Own::default());
        let back: TestConfig = serde_json::from_str(&serde_json::to_string(&now).unwrap()).unwrap();
        assert_eq!(back, now);
    }

    #[test]
    fn jain_index_of_known_shares() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(
            jain_index(&[1.0, 0.0, 0.0, 0.0]),
            Some(0.25),
            "one takes all: 1/n"
        );
        // 1:2 between two flows is 0.9, the warning's threshold.
        assert!((jain_index(&[1.0, 2.0]).unwrap() - 0.9).abs() < 1e-12);
        let j = jain_index(&[2.1e9, 19.5e9]).unwrap();
        assert!((j - 21.6f64.powi(2) / (2.0 * (2.1f64.powi(2) + 19.5f64.powi(2)))).abs() < 1e-12);
        assert_eq!(jain_index(&[7.0]), None, "one flow");
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None, "nothing received");
    }
}
