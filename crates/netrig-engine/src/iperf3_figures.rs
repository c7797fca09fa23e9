//! An end's figures in iperf3's results exchange: what netrig's agent sends
//! an iperf3 client, and netrig's client an iperf3 server (each prints the
//! other end's as its "sender"/"receiver" lines).

use crate::runner::{FlowOutcome, SideOutcome};
use netrig_proto::iperf3::StreamResult;
use netrig_proto::report::Role;

/// One stream's entry: the bytes this end counted in its window (after the
/// warm-up), sent or received; a TCP sender's retransmits (TCP_INFO's count
/// over the connection's life, which is not split at the warm-up's end),
/// else -1; for a UDP receiver its loss and RFC 3550 jitter, and as
/// `packets` the datagrams its sequence numbers reached (received and lost,
/// as iperf3's receiver counts them, its loss being lost/packets); for a
/// UDP sender the datagrams it sent.
pub fn stream(f: &FlowOutcome, id: i32, udp: bool) -> StreamResult {
    let sender = f.role == Role::Sender;
    let retransmits = match (&f.tcp_info, sender) {
        (Some(t), true) if !udp => i64::from(t.retransmits_total),
        _ => -1,
    };
    let seq = f.window_udp.as_ref().filter(|_| udp && !sender);
    StreamResult {
        id,
        bytes: f.window_bytes,
        retransmits,
        jitter: seq.map_or(0.0, |s| s.jitter_us / 1e6),
        errors: seq.map_or(0, |s| s.lost as i64),
        omitted_errors: None,
        packets: match (seq, f.udp.as_ref()) {
            (Some(s), _) => (s.received + s.lost) as i64,
            (None, Some(u)) if udp => u.sent_datagrams as i64,
            _ => 0,
        },
        omitted_packets: None,
        start_time: 0.0,
        end_time: f.window_s,
    }
}

/// This end's CPU over its window as iperf3's (total, user, system)
/// percentages: the host's, from /proc/stat (netrig's own accounting; an
/// iperf3 end reports its process's); zeros where CPU was not measured.
pub fn cpu(outcome: &SideOutcome) -> (f64, f64, f64) {
    outcome.cpu.as_ref().map_or((0.0, 0.0, 0.0), |c| {
        (
            c.busy_pct,
            c.user_pct + c.nice_pct,
            c.system_pct + c.irq_pct + c.softirq_pct,
        )
    })
}
