//! Suites: fixed lists of tests a driver runs one after another.

use netrig_proto::spec::{
    KindSpec, Limit, Pace, TcpBidirSpec, TcpCrrSpec, TcpMaertsSpec, TcpRrSpec, TcpStreamSpec, Transactions,
    UdpRrSpec, UdpStreamSpec, UDP_HEADER_LEN,
};
use netrig_proto::TestSpec;

/// `netrig quick`: each kind once on loopback, `seconds` each: TCP streams
/// each way and both (one flow, then four), request/response over TCP, a
/// connection per transaction, UDP paced at 1 Gbit/s (a rate and its loss,
/// rather than how far an unpaced sender outruns one receiver) and UDP
/// request/response with the smallest datagrams (its header alone).
/// udp-stream's size is the path's default: run it with
/// [`LocalOptions::udp_size_default`](crate::LocalOptions).
pub fn quick(seconds: f64) -> Vec<TestSpec> {
    let udp = UdpStreamSpec {
        pace: Some(Pace {
            rate_bps: 1_000_000_000,
            pacing_us: None,
        }),
        ..UdpStreamSpec::default()
    };
    // udp-rr's smallest datagrams: its header and nothing else.
    let udp_rr = UdpRrSpec {
        transactions: Transactions {
            request_size: UDP_HEADER_LEN,
            response_size: UDP_HEADER_LEN,
            ..Transactions::default()
        },
        ..UdpRrSpec::default()
    };
    [
        (KindSpec::TcpStream(TcpStreamSpec::default()), 1),
        (KindSpec::TcpMaerts(TcpMaertsSpec::default()), 1),
        (KindSpec::TcpBidir(TcpBidirSpec::default()), 1),
        (KindSpec::TcpStream(TcpStreamSpec::default()), 4),
        (KindSpec::TcpRr(TcpRrSpec::default()), 1),
        (KindSpec::TcpCrr(TcpCrrSpec::default()), 1),
        (KindSpec::UdpStream(udp), 1),
        (KindSpec::UdpRr(udp_rr), 1),
    ]
    .into_iter()
    .map(|(test, flows)| TestSpec {
        flows,
        ..TestSpec::new(test, Limit::Duration { seconds })
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
                .unwrap_or_else(|e| panic!("{}: {e}", s.kind()));
        }
    }
}
