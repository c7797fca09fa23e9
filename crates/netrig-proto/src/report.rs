//! What each end measured, as it travels from the agent to the client. The
//! client merges the two sides into the one result model (netrig-report).
//! The measurements inside are this crate's own types ([`measure`]), not
//! netrig-metrics': the engine converts them as it builds a report.

pub mod counts;
pub mod host;
pub mod measure;
pub mod profile;

use crate::Direction;
pub use counts::{Counts, KindCounts};
use measure::{
    Conntrack, CpuUsage, Environment, InterfaceCounters, LatencySummary, SeqInterval, SeqSummary, TcpInfo,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one end did with a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
    /// Sends requests and times the responses (the client of request/response tests).
    Requester,
    /// Answers each request (the agent of request/response tests).
    Responder,
}

/// Send and receive buffer sizes in bytes, as getsockopt reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufPair {
    pub snd: Option<u32>,
    pub rcv: Option<u32>,
}

/// Socket buffers of one end of a connection: what was asked, what the
/// kernel granted before data flowed, and what it was when the window closed
/// (autotuning changes it when nothing was asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SockBufReport {
    pub requested: BufPair,
    pub initial: BufPair,
    #[serde(rename = "final")]
    pub final_: BufPair,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_report_keeps_changes_and_headline() {
        let before = netrig_metrics::parse_snmp(
            "Tcp: RetransSegs CurrEstab InSegs\nTcp: 10 5 100\nUdp: InErrors RcvbufErrors\nUdp: 0 0\n",
        )
        .unwrap();
        let after = netrig_metrics::parse_snmp(
            "Tcp: RetransSegs CurrEstab InSegs\nTcp: 13 5 180\nUdp: InErrors RcvbufErrors\nUdp: 0 2\n",
        )
        .unwrap();
        let r = CounterReport::between(&before, &after, None);
        assert_eq!(r.deltas.get("Tcp.RetransSegs"), Some(&3));
        assert_eq!(r.deltas.get("Tcp.InSegs"), Some(&80));
        assert_eq!(r.deltas.get("Udp.RcvbufErrors"), Some(&2));
        assert_eq!(r.deltas.get("Udp.InErrors"), Some(&0), "headline kept at zero");
        assert!(
            !r.deltas.contains_key("Tcp.CurrEstab"),
            "unchanged non-headline left out"
        );
    }
}

/// One end's account of one flow over the measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    pub id: u32,
    pub direction: Direction,
    pub role: Role,
    /// Payload bytes sent or received inside the measured window.
    pub window_bytes: u64,
    /// Payload bytes sent or received over the whole connection.
    pub total_bytes: u64,
    /// Length of this flow's measured window on this end's clock.
    pub window_s: f64,
    pub socket_buffers: SockBufReport,
    /// Options as the kernel reports them on this end's socket.
    pub applied: AppliedOptions,
    /// TCP_INFO of this end's socket when the window closed.
    #[serde(default)]
    pub tcp_info: Option<TcpInfo>,
    /// Transactions completed inside the window (request/response tests).
    #[serde(default)]
    pub window_transactions: u64,
    /// UDP flows: datagram accounting over the whole test.
    #[serde(default)]
    pub udp: Option<UdpFlowReport>,
    /// The kind's own counts of this flow over the window (tcp-crr's
    /// requesters: `connect_errors`, transactions that failed, by reason),
    /// each group a key of its own.
    #[serde(flatten)]
    pub counts: KindCounts,
    /// TCP stream senders with `--msg-zerocopy`: the kernel's completion notices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopyReport>,
    /// TCP stream receivers: their reads over the whole connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<ReadReport>,
    /// TCP stream senders: their sends over the whole connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sends: Option<SendReport>,
}

/// A TCP stream sender's sends over the whole connection, and how far
/// ahead of its flow the kernel let it write (TCP_NOTSENT_LOWAT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendReport {
    /// Send calls made (send(2), or sendfile(2) with `-Z`), those the
    /// socket refused as full (EAGAIN) included.
    pub calls: u64,
    /// The bound on this sender's unsent bytes (the kernel takes a write
    /// only while less is unsent; a write may go a segment beyond), as the
    /// socket reported it (TCP_NOTSENT_LOWAT, or the host's
    /// net.ipv4.tcp_notsent_lowat where the socket sets none); `None` when
    /// unlimited (only the send buffer bounds it).
    #[serde(default)]
    pub notsent_lowat: Option<u32>,
}

/// A TCP stream receiver's reads over the whole connection (drain
/// included), and when it let the kernel hold bytes back until a full read
/// was queued (SO_RCVLOWAT; see the engine's `lowat` module).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReport {
    /// Receive calls made, those that found nothing (EAGAIN) included.
    pub calls: u64,
    /// The watermark when it was on, in bytes: the read size, or what the
    /// kernel held to (half a fixed SO_RCVBUF, or half tcp_rmem[2]);
    /// `None` when this receiver does not use one (paced flows, reads under
    /// 16 KiB, `--skip-rx-copy`).
    #[serde(default)]
    pub watermark: Option<u32>,
    /// Times the watermark went on: after an epoch of wake-ups most of
    /// which found less than a read's worth queued (the receiver ahead).
    #[serde(default)]
    pub watermark_on: u64,
    /// Times it went off: after an epoch in which more than a quarter of
    /// the wake-ups found four reads' worth or more (the receiver behind),
    /// or when a check after a millisecond without a read found less than
    /// the watermark queued (a flow slower than that).
    #[serde(default)]
    pub watermark_off: u64,
}

/// A sender's MSG_ZEROCOPY sends (`--msg-zerocopy`) and what the kernel said
/// of them: each send's pages are the kernel's until it notifies their
/// completion on the socket's error queue, saying whether it copied them
/// after all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZeroCopyReport {
    /// send(2) calls with MSG_ZEROCOPY that sent bytes.
    pub sends: u64,
    /// Of those, the sends whose completion the kernel notified by the end.
    pub completed: u64,
    /// Of those completed, the sends whose pages the kernel copied
    /// (SO_EE_CODE_ZEROCOPY_COPIED): always on loopback and other local
    /// delivery, and on devices without scatter-gather or checksum offload.
    pub copied: u64,
}

/// One end's datagram accounting of a UDP flow, over the whole test (the
/// window, and the drain after it, so that datagrams in flight are not
/// counted as lost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpFlowReport {
    /// Datagrams this end sent, as they went on the wire.
    pub sent_datagrams: u64,
    /// Datagrams sent inside the window.
    pub window_sent_datagrams: u64,
    /// What this end received, by sequence number (receivers only).
    pub received: Option<SeqSummary>,
    /// Datagrams that arrived on the flow's socket but belong to no flow of this test.
    pub stray: u64,
    /// udp-rr requester: responses that came after their request had timed out.
    #[serde(default)]
    pub late: u64,
    /// udp-stream: messages this end sent (a GSO send of many datagrams
    /// counts once) or buffers it received (a GRO batch counts once), over
    /// the whole test: the unit of the kernel's `Udp.OutDatagrams` and
    /// `Udp.InDatagrams`.
    #[serde(default)]
    pub units: u64,
    /// udp-stream receivers: the accounting over exactly this end's
    /// measured window (differences of the running counts at its edges).
    #[serde(default)]
    pub window: Option<SeqInterval>,
}

/// Socket options read back from the kernel once the flow was set up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedOptions {
    /// IP TOS / IPv6 traffic class byte.
    pub tos: Option<u8>,
    pub priority: Option<u32>,
    pub nodelay: Option<bool>,
    pub congestion: Option<String>,
    /// TCP_MAXSEG as getsockopt reports it (the effective MSS once connected).
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE in bits/s; null when unlimited or unknown.
    #[serde(default)]
    pub max_pacing_rate_bps: Option<u64>,
    /// Whether the connection is MPTCP: true, or false when it fell back to
    /// TCP; absent for a plain TCP (or UDP) socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
}

/// One interim sample: bytes each of this end's flows moved in the period,
/// in the order of `SideReport::flows` (sent for senders, received for
/// receivers). Times are seconds since this end's start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    pub index: u32,
    pub start_s: f64,
    pub end_s: f64,
    pub ids: Vec<u32>,
    pub bytes: Vec<u64>,
    /// TCP_INFO of each flow's socket at the end of the period (same order).
    #[serde(default)]
    pub tcp_info: Vec<Option<TcpInfo>>,
    /// Transactions each flow completed in the period (request/response tests).
    #[serde(default)]
    pub transactions: Vec<u64>,
    /// Retransmitted segments of each TCP flow's socket in the period
    /// (`tcpi_total_retrans` difference; same order; empty without TCP_INFO).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retransmits: Vec<Option<u32>>,
    /// UDP stream receivers: each flow's datagram accounting in the period
    /// (same order; `None` for flows this end does not receive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp: Vec<Option<SeqInterval>>,
    /// tcp-crr requesters: transactions each flow saw fail in the period
    /// (same order; empty for other tests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<u64>,
    /// Requesters: the latency of the transactions completed in the period
    /// (all flows; exactly those `transactions` counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// How well an open-loop generator kept to its schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleReport {
    /// Requests due inside the window.
    pub due: u64,
    /// Requests whose first byte left more than 1 ms after it was due.
    pub late: u64,
    /// The largest delay between a request's due time and its send, in µs.
    pub max_behind_us: f64,
    /// Mean delay between due time and send, in µs.
    pub mean_behind_us: f64,
}

/// CPU time one worker thread of this end spent inside the measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerCpu {
    pub worker: u32,
    pub flows: u32,
    /// CPU-seconds the thread used in the window.
    pub cpu_s: f64,
    /// `cpu_s` / window length × 100: 100 % is one CPU fully busy.
    pub busy_pct: f64,
    /// The CPU the worker was pinned to (`--cpus`, `--remote-cpus`, `-A`);
    /// `None`: not pinned.
    #[serde(default)]
    pub cpu: Option<u32>,
    /// The CPU it was running on when it finished (sched_getcpu).
    #[serde(default)]
    pub last_cpu: Option<u32>,
}

/// Kernel counter deltas of this end's host over the test (from just before
/// the data connections were set up to the end of the window).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    /// Every counter of /proc/net/snmp and /proc/net/netstat that changed,
    /// plus the headline counters even when they did not.
    pub deltas: BTreeMap<String, i64>,
    /// Connection-tracking table fill at the end; null when nf_conntrack is not loaded.
    pub conntrack: Option<Conntrack>,
}

impl CounterReport {
    /// The deltas between two readings: every counter that changed, and the
    /// headline counters whether or not they did.
    pub fn between(
        before: &netrig_metrics::KernelCounters,
        after: &netrig_metrics::KernelCounters,
        conntrack: Option<netrig_metrics::Conntrack>,
    ) -> CounterReport {
        let delta = after.delta_since(before);
        let headline = delta.headline();
        let deltas = delta
            .values
            .into_iter()
            .filter(|(k, v)| *v != 0 || headline.contains_key(k))
            .collect();
        CounterReport {
            deltas,
            conntrack: conntrack.as_ref().map(Conntrack::from),
        }
    }
}

/// Everything one end measured in one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SideReport {
    pub flows: Vec<FlowReport>,
    /// Length of the measured window on this end's clock (the longest flow's).
    pub window_s: f64,
    pub warnings: Vec<String>,
    /// Whole-machine CPU utilisation over this end's window (per-CPU /proc/stat deltas).
    #[serde(default)]
    pub cpu: Option<CpuUsage>,
    /// Wall time between the two /proc/stat readings (the window on this end's clock).
    #[serde(default)]
    pub cpu_window_s: Option<f64>,
    /// This end's worker threads.
    #[serde(default)]
    pub workers: Vec<WorkerCpu>,
    #[serde(default)]
    pub counters: Option<CounterReport>,
    #[serde(default)]
    pub environment: Option<Environment>,
    /// Latency of every transaction completed in the window, merged across
    /// this end's workers (the requester's end).
    #[serde(default)]
    pub latency: Option<LatencySummary>,
    /// The same transactions' whole histogram, base64 of HdrHistogram's V2
    /// encoding in ns ([`netrig_metrics::LatencyRecorder::to_base64`]); set
    /// on the client's own report, never read from the wire.
    #[serde(skip)]
    pub latency_histogram: Option<String>,
    /// Open loop only: how far the generator fell behind its schedule.
    #[serde(default)]
    pub schedule: Option<ScheduleReport>,
    /// The kernel's own counts over this end's window, beside netrig's.
    #[serde(default)]
    pub witness: Option<WitnessReport>,
    /// This end's clock and the one-way delays its receivers measured
    /// (udp-stream); absent from an older agent's report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<crate::clock::OneWayReport>,
    /// The agent's profile of its host over its window, or why it is withheld, when the
    /// spec asked for one (`profile`); absent otherwise and from an older agent. The client
    /// checks it against [`profile::Bounds`] before it puts it in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::EndProfile>,
}

/// The kernel's counts over the instants that bound this end's window, and
/// netrig's own counts over the same instants (see
/// `netrig_metrics::witness`). The report sets them side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WitnessReport {
    /// Seconds between the two readings.
    pub window_s: f64,
    /// The counters' boot and network namespace: two ends with the same
    /// scope read the same host counters.
    pub scope: Option<String>,
    /// netrig's payload bytes: sent by this end's sending flows, received
    /// by its receiving flows (duplicates not counted again).
    pub payload_sent: u64,
    pub payload_received: u64,
    /// The same payload as it crossed the interface: sent less the growth
    /// of TCP's unsent queues, received plus the growth of the unread ones
    /// (equal to the above for UDP); what the interface counters bound.
    #[serde(default)]
    pub payload_out: u64,
    #[serde(default)]
    pub payload_in: u64,
    /// udp-stream: netrig's UDP messages sent (a GSO send counts once) and
    /// buffers received (a GRO batch counts once): the kernel's units.
    /// udp-rr: its datagrams sent (requests, or responses), and received at
    /// least: one a transaction (the response that completed it, the
    /// request answered).
    pub udp_messages_sent: u64,
    pub udp_buffers_received: u64,
    /// TCP streams: per-socket kernel counts of the same payload.
    pub tcp: Option<TcpWitness>,
    /// Connection per transaction (tcp-crr), the requester: transactions
    /// completed over the window, each on a connection of its own that the
    /// kernel counts in `Tcp.ActiveOpens`; and those that failed (most of
    /// which opened one too). Absent for other tests and from older peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionWitness>,
    /// Host counters of the witness over the window (`Udp.*`, `Udp6.*`,
    /// `Tcp.InSegs`, `Tcp.OutSegs`, `Tcp.RetransSegs`), from the readings
    /// just before the first mark's flows to just after the last's: a span
    /// that holds all of netrig's counts.
    pub kernel: BTreeMap<String, i64>,
    /// The statistics of the interfaces this end's flows used, over the same span.
    pub interfaces: Vec<InterfaceCounters>,
    /// The same from just after the first mark's flows to just before the
    /// last's: a span within netrig's, for what the host counted beyond it.
    #[serde(default)]
    pub kernel_inner: BTreeMap<String, i64>,
    #[serde(default)]
    pub interfaces_inner: Vec<InterfaceCounters>,
}

/// A connection-per-transaction end's count over the window: what the
/// kernel's `Tcp.ActiveOpens` (requester) or `Tcp.PassiveOpens`
/// (responder) bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionWitness {
    /// `requester` or `responder`.
    pub role: Role,
    /// Transactions completed (requester) or answered (responder): one
    /// connection each.
    pub transactions: u64,
    /// Requester: transactions that failed (refused, timed out, reset, no
    /// local port); all but the last opened a connection.
    pub failures: u64,
}

/// TCP payload over the window by netrig's count and by the kernel's
/// (`tcpi_bytes_acked` + SIOCOUTQ for senders, `tcpi_bytes_received` −
/// SIOCINQ for receivers), summed over the flows where the kernel has both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpWitness {
    /// The flows summed: those whose sockets were read (the first
    /// `engine::SOCKETS_READ` of each role at an end) at both edges.
    pub flows: u32,
    pub netrig_sent: u64,
    pub kernel_sent: u64,
    pub netrig_received: u64,
    pub kernel_received: u64,
    /// How much the kernel's counts grew while netrig's were read between
    /// two readings of them (both edges, all flows): the reading's own
    /// uncertainty, added to the tolerance.
    #[serde(default)]
    pub read_spread_bytes: u64,
    /// Request/response flows on a connection of their own (tcp-rr): the
    /// payload written and read, requests and responses together, by netrig
    /// and by the kernel (sent plus received, as above).
    #[serde(default)]
    pub netrig_both_ways: u64,
    #[serde(default)]
    pub kernel_both_ways: u64,
}
