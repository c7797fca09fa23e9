//! The agent's side of an iperf3 test as iperf3's results exchange carries
//! it: one entry per stream, with netrig's figures (bytes after the warm-up,
//! TCP_INFO's retransmissions, UDP loss and jitter), the host's CPU over
//! the window, and for `--get-server-output` the agent's intervals as
//! iperf3-style text.

use netrig_engine::iperf3_figures;
use netrig_engine::runner::SideOutcome;
use netrig_proto::iperf3::{stream_ids, Results};
use netrig_proto::report::{IntervalSample, Role};
use std::fmt::Write as _;

/// What the results need to know of the test besides the run's outcome.
pub(crate) struct Described<'a> {
    /// The stream's local and remote addresses, by flow, for the text.
    pub addresses: &'a [String],
    pub udp: bool,
    /// TCP's congestion control on the agent's sockets, if read.
    pub congestion: Option<String>,
    pub server_output: bool,
}

/// The results the agent sends the client.
pub(crate) fn results(outcome: &SideOutcome, d: &Described<'_>) -> Results {
    let ids = stream_ids(outcome.flows.len());
    let sends = outcome.flows.iter().any(|f| f.role == Role::Sender);
    let (cpu_util_total, cpu_util_user, cpu_util_system) = iperf3_figures::cpu(outcome);
    Results {
        // The host's CPU over the window (/proc/stat, all CPUs), netrig's
        // own accounting: iperf3's server reports its process's.
        cpu_util_total,
        cpu_util_user,
        cpu_util_system,
        // As iperf3's server says it: -1 when it only receives.
        sender_has_retransmits: if sends && !d.udp { 1 } else { -1 },
        congestion_used: d.congestion.clone(),
        streams: outcome
            .flows
            .iter()
            .zip(&ids)
            .map(|(f, &id)| iperf3_figures::stream(f, id, d.udp))
            .collect(),
        server_output_text: d.server_output.then(|| text(outcome, &ids, d)),
        server_output_json: None,
    }
}

/// iperf3's adaptive units: bytes by 1024s, bits by 1000s, three figures.
fn units(v: f64, base: f64, names: [&str; 4]) -> String {
    let mut v = v;
    let mut i = 0;
    while v >= base && i < 3 {
        v /= base;
        i += 1;
    }
    let n = if v < 9.995 {
        format!("{v:4.2}")
    } else if v < 99.95 {
        format!("{v:4.1}")
    } else {
        format!("{v:4.0}")
    };
    format!("{n} {}", names[i])
}

fn transfer(bytes: u64) -> String {
    units(bytes as f64, 1024.0, ["Bytes", "KBytes", "MBytes", "GBytes"])
}

fn bitrate(bytes: u64, secs: f64) -> String {
    let bps = if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    };
    units(bps, 1000.0, ["bits/sec", "Kbits/sec", "Mbits/sec", "Gbits/sec"])
}

/// The agent's figures as iperf3's server prints them: each interval of
/// each stream, then each stream's whole window with its exact byte count.
fn text(outcome: &SideOutcome, ids: &[i32], d: &Described<'_>) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "netrig agent {}: these figures are netrig's own measurements of the agent's end (bytes counted by its \
         workers after the warm-up, intervals on its clock), in iperf3's layout; this is not iperf3",
        netrig_proto::SOFTWARE_VERSION
    );
    for (addr, id) in d.addresses.iter().zip(ids) {
        let _ = writeln!(t, "[{id:3}] {addr}");
    }
    let _ = writeln!(t, "[ ID] Interval           Transfer     Bitrate");
    for s in &outcome.intervals {
        interval_lines(&mut t, s, ids);
    }
    let _ = writeln!(t, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    let _ = writeln!(t, "[ ID] Interval           Transfer     Bitrate");
    for (f, id) in outcome.flows.iter().zip(ids) {
        let role = if f.role == Role::Sender {
            "sender"
        } else {
            "receiver"
        };
        let _ = writeln!(
            t,
            "[{id:3}] {:6.2}-{:<6.2} sec  {}  {}  {role} ({} bytes)",
            0.0,
            f.window_s,
            transfer(f.window_bytes),
            bitrate(f.window_bytes, f.window_s),
            f.window_bytes
        );
    }
    t
}

fn interval_lines(t: &mut String, s: &IntervalSample, ids: &[i32]) {
    let secs = s.end_s - s.start_s;
    for (i, bytes) in s.bytes.iter().enumerate() {
        let id = s
            .ids
            .get(i)
            .and_then(|&flow| ids.get(flow as usize))
            .copied()
            .unwrap_or(0);
        let _ = writeln!(
            t,
            "[{id:3}] {:6.2}-{:<6.2} sec  {}  {}",
            s.start_s,
            s.end_s,
            transfer(*bytes),
            bitrate(*bytes, secs)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iperf3's units: three figures, bytes by 1024, bits by 1000.
    #[test]
    fn units_are_iperf3s() {
        assert_eq!(transfer(3 * (1 << 30)), "3.00 GBytes");
        assert_eq!(transfer(512), " 512 Bytes");
        assert_eq!(bitrate(125_000_000, 1.0), "1.00 Gbits/sec");
        assert_eq!(bitrate(12_500_000, 1.0), " 100 Mbits/sec");
        assert_eq!(bitrate(0, 0.0), "0.00 bits/sec");
    }
}
