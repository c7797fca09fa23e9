//! Suites: fixed lists of tests a driver runs one after another.

use netrig_proto::spec::{Limit, PaceOptions, RrOptions, UDP_HEADER_LEN};
use netrig_proto::{TestKind, TestSpec};

/// `netrig quick`: each kind once on loopback, `seconds` each: TCP streams
/// each way and both (one flow, then four), request/response over TCP, a
/// connection per transaction, UDP paced at 1 Gbit/s (a rate and its loss,
/// rather than how far an unpaced sender outruns one receiver) and UDP
/// request/response with the smallest datagrams (its header alone).
/// udp-stream's size is the path's default: run it with
/// [`LocalOptions::udp_size_default`](crate::LocalOptions).
pub fn quick(seconds: f64) -> Vec<TestSpec> {
    [
        (TestKind::TcpStream, 1),
        (TestKind::TcpMaerts, 1),
        (TestKind::TcpBidir, 1),
        (TestKind::TcpStream, 4),
        (TestKind::TcpRr, 1),
        (TestKind::TcpCrr, 1),
        (TestKind::UdpStream, 1),
        (TestKind::UdpRr, 1),
    ]
    .into_iter()
    .map(|(kind, flows)| {
        let udp = kind == TestKind::UdpStream;
        TestSpec {
            flows,
            // udp-rr's smallest datagrams: its header and nothing else.
            rr: if kind == TestKind::UdpRr {
                RrOptions {
                    request_size: UDP_HEADER_LEN,
                    response_size: UDP_HEADER_LEN,
                    ..Default::default()
                }
            } else {
                Default::default()
            },
            pace: PaceOptions {
                rate_bps: udp.then_some(1_000_000_000),
                pacing_us: None,
            },
            ..TestSpec::new(kind, Limit::Duration { seconds })
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_of_the_quick_suite_is_valid() {
        let specs = quick(2.0);
        assert_eq!(specs.len(), 8);
        for s in &specs {
            s.validate(&netrig_proto::AgentLimits::default())
                .unwrap_or_else(|e| panic!("{:?}: {e}", s.kind));
        }
    }
}
