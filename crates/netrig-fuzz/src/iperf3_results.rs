//! An iperf3 end's results as netrig reads them from an iperf3 server or
//! client (`netrig_proto::iperf3::Results`): any bytes as the JSON.
//!
//! Invariants: no panic; over 1 MiB or 256 streams is refused; results
//! that decode re-encode to JSON that decodes to the same figures (the
//! omitted counts, optional on the wire, as 0 where absent).

use netrig_proto::iperf3::{Results, MAX_RESULTS_JSON, MAX_STREAMS};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Ok(r) = Results::decode(data) else {
        return;
    };
    assert!(data.len() <= MAX_RESULTS_JSON);
    assert!(r.streams.len() <= 2 * MAX_STREAMS);
    let again = Results::decode(&r.encode()).expect("netrig's own encoding");
    let mut want = r.clone();
    for s in &mut want.streams {
        s.omitted_errors.get_or_insert(0);
        s.omitted_packets.get_or_insert(0);
    }
    assert_eq!(again, want);
}
