//! Figures across the results exchange: this end's, sent in iperf3's form
//! (the server prints them as its client's "sender"/"receiver" lines), and
//! the server's, taken as the result's remote end, marked as its report.

use super::params::Shape;
use crate::ClientError;
use netrig_engine::iperf3_figures;
use netrig_engine::runner::SideOutcome;
use netrig_proto::iperf3::{Results, StreamResult};
use netrig_proto::report::measure::{SeqInterval, SeqSummary};
use netrig_proto::report::{FlowReport, IntervalSample, Role, SideReport, UdpFlowReport};
use netrig_proto::{Direction, TestSpec};
use netrig_report::model::peer::{Chosen, PeerInfo, ReportedByServer, ReportedStream};
use netrig_report::TestResult;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// What this end measured, as iperf3's client reports it: its CPU, and per
/// stream the bytes of its window (sent or received), the retransmits of
/// the TCP streams it sends, the UDP streams' accounting where it receives.
pub(crate) fn ours(outcome: &SideOutcome, stream_ids: &BTreeMap<u32, i32>, shape: Shape) -> Results {
    let streams = outcome
        .flows
        .iter()
        .filter_map(|f| Some(iperf3_figures::stream(f, *stream_ids.get(&f.id)?, shape.udp)))
        .collect();
    let (cpu_util_total, cpu_util_user, cpu_util_system) = iperf3_figures::cpu(outcome);
    Results {
        cpu_util_total,
        cpu_util_user,
        cpu_util_system,
        sender_has_retransmits: i32::from(!shape.udp && shape.client_sends),
        congestion_used: None,
        streams,
        server_output_text: None,
        server_output_json: None,
    }
}

/// The server's results as the remote end's report of `spec`'s flows:
/// each flow's bytes over the span the server measured, and the UDP
/// accounting where it received; nothing it does not report.
pub(crate) fn remote_report(
    spec: &TestSpec,
    addr: SocketAddr,
    theirs: &Results,
    stream_ids: &BTreeMap<u32, i32>,
) -> Result<SideReport, ClientError> {
    let mut flows = Vec::new();
    for (id, dir) in spec.flow_plan().into_iter().enumerate() {
        let id = id as u32;
        let sid = stream_ids.get(&id).copied().unwrap_or(-1);
        let s = theirs.stream(sid).ok_or_else(|| ClientError::Iperf3 {
            addr,
            what: format!("sent results without stream {sid} (netrig's flow {id})"),
        })?;
        let role = spec.role(dir, true);
        let span = (s.end_time - s.start_time).max(0.0);
        flows.push(FlowReport {
            id,
            direction: dir,
            role,
            window_bytes: s.bytes,
            total_bytes: s.bytes,
            window_s: span,
            socket_buffers: Default::default(),
            applied: Default::default(),
            tcp_info: None,
            window_transactions: 0,
            udp: udp_received(spec, s, role),
            counts: Default::default(),
            zerocopy: None,
            reads: None,
            sends: None,
        });
    }
    Ok(SideReport {
        window_s: flows.iter().map(|f| f.window_s).fold(0.0, f64::max),
        flows,
        ..SideReport::default()
    })
}

/// A UDP stream the server received: its count of datagrams (the highest
/// sequence number it saw), of those lost, and its jitter.
fn udp_received(spec: &TestSpec, s: &StreamResult, role: Role) -> Option<UdpFlowReport> {
    if !spec.rules().transport().datagrams() {
        return None;
    }
    let expected = s.packets.max(0) as u64;
    let lost = (s.errors.max(0) as u64).min(expected);
    let received = expected - lost;
    let jitter_us = s.jitter.max(0.0) * 1e6;
    let receiver = role == Role::Receiver;
    Some(UdpFlowReport {
        sent_datagrams: if receiver { 0 } else { expected },
        window_sent_datagrams: if receiver { 0 } else { expected },
        received: receiver.then(|| SeqSummary {
            received,
            lost,
            expected,
            loss_pct: if expected > 0 {
                lost as f64 / expected as f64 * 100.0
            } else {
                0.0
            },
            jitter_us,
            ..SeqSummary::default()
        }),
        stray: 0,
        late: 0,
        units: 0,
        window: receiver.then(|| SeqInterval {
            received,
            lost,
            jitter_us,
            ..SeqInterval::default()
        }),
    })
}

/// This end's interval samples as the other end's too, for the flows it
/// sends: iperf3's server reports no intervals, so a row of a stream this
/// client sends shows what it sent (docs/IPERF3.md).
pub(crate) fn sent_intervals(plan: &[Direction], samples: &[IntervalSample]) -> Vec<IntervalSample> {
    samples.iter().map(|s| sent_only(plan, s)).collect()
}

/// `s` with only the flows this end sends.
pub(crate) fn sent_only(plan: &[Direction], s: &IntervalSample) -> IntervalSample {
    let keep: Vec<bool> = s
        .ids
        .iter()
        .map(|id| plan.get(*id as usize) == Some(&Direction::Tx))
        .collect();
    fn pick<T: Clone>(v: &[T], keep: &[bool]) -> Vec<T> {
        if v.len() != keep.len() {
            return Vec::new();
        }
        v.iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(x, _)| x.clone())
            .collect()
    }
    IntervalSample {
        index: s.index,
        start_s: s.start_s,
        end_s: s.end_s,
        ids: pick(&s.ids, &keep),
        bytes: pick(&s.bytes, &keep),
        tcp_info: pick(&s.tcp_info, &keep),
        transactions: pick(&s.transactions, &keep),
        retransmits: pick(&s.retransmits, &keep),
        udp: pick(&s.udp, &keep),
        failures: pick(&s.failures, &keep),
        latency: None,
    }
}

/// The jitter of the UDP streams the server received: iperf3 reports RFC
/// 3550's running jitter, which the result carries as such; netrig's mean
/// |D| it does not report, so that is withheld, saying so.
fn server_jitter(result: &mut TestResult, streams: &[ReportedStream]) {
    const WHY: &str =
        "not reported: iperf3's server reports RFC 3550's running jitter only (jitter_rfc3550_us, \
                       the server's report), not the mean |D| netrig measures";
    let mut weighted = (0.0, 0u64);
    let mut all_reported = true;
    for f in &mut result.flows {
        let Some(u) = f.udp.as_mut() else { continue };
        let reported = (f.direction == Direction::Tx)
            .then(|| streams.iter().find(|s| s.flow == f.id))
            .flatten();
        let Some(s) = reported else {
            all_reported = false;
            continue;
        };
        u.jitter_us = None;
        u.jitter_rfc3550_us = Some(s.jitter_ms * 1e3);
        u.jitter_withheld = Some(WHY.into());
        weighted.0 += s.jitter_ms * 1e3 * u.received_datagrams as f64;
        weighted.1 += u.received_datagrams;
    }
    if let Some(u) = result
        .summary
        .udp
        .as_mut()
        .filter(|_| all_reported && weighted.1 > 0)
    {
        u.jitter_us = None;
        u.jitter_rfc3550_us = Some(weighted.0 / weighted.1 as f64);
        u.jitter_withheld = Some(WHY.into());
    }
}

/// What the result leaves out of the remote end, and why.
const WITHHELD: [&str; 5] = [
    "the server's TCP_INFO (iperf3 reports none of its sockets' state)",
    "the server's intervals (iperf3 sends its totals only; interval rows show this client's counts)",
    "the server host's kernel counters and environment (iperf3 reports neither)",
    "remote service demand (iperf3's CPU figure is its process's getrusage(2), not /proc/stat's over netrig's window)",
    "the remote witness (no kernel count of the server's sockets is read)",
];

/// Marks `result` as measured against an iperf3 server: who answered, how
/// it was chosen, what it reported and what is withheld.
pub(crate) fn mark(
    result: &mut TestResult,
    theirs: Results,
    stream_ids: &BTreeMap<u32, i32>,
    chosen: Chosen,
) {
    let streams: Vec<ReportedStream> = stream_ids
        .iter()
        .filter_map(|(flow, sid)| {
            let s = theirs.stream(*sid)?;
            Some(ReportedStream {
                flow: *flow,
                stream_id: *sid,
                bytes: s.bytes,
                retransmits: s.retransmits,
                jitter_ms: s.jitter * 1e3,
                lost_packets: s.errors,
                packets: s.packets,
                start_s: s.start_time,
                end_s: s.end_time,
            })
        })
        .collect();
    server_jitter(result, &streams);
    let cpu_said = format!(
        "reported by the iperf3 server: {:.1}% ({:.1}% user, {:.1}% system) of its process, by getrusage(2)",
        theirs.cpu_util_total, theirs.cpu_util_user, theirs.cpu_util_system
    );
    result.summary.cpu.remote_withheld = Some(format!(
        "not measured by netrig (the server is iperf3); {cpu_said}: see peer.reported"
    ));
    result.agent.software = "iperf3".into();
    result.peer = Some(PeerInfo {
        software: "iperf3".into(),
        chosen,
        remote_figures: "reported by the server".into(),
        reported: ReportedByServer {
            cpu_util_total_pct: theirs.cpu_util_total,
            cpu_util_user_pct: theirs.cpu_util_user,
            cpu_util_system_pct: theirs.cpu_util_system,
            congestion_used: theirs.congestion_used,
            streams,
            server_output_text: theirs.server_output_text,
            server_output_json: theirs.server_output_json,
        },
        withheld: WITHHELD.iter().map(|w| w.to_string()).collect(),
    });
}
