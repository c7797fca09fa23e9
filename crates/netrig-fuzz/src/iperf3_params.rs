//! An iperf3 client's parameters as netrig's agent reads them
//! (`netrig_proto::iperf3::Params`): any bytes as the JSON.
//!
//! Invariants: no panic; bytes over iperf3's 8 KiB bound are refused;
//! parameters that decode re-encode to JSON that decodes to the same
//! parameters; `check` decides without panicking, and what it accepts has
//! 1 to 128 streams, a block within iperf3's limits and one end condition.

use netrig_proto::iperf3::params::{MAX_TCP_BLOCK, MAX_UDP_BLOCK};
use netrig_proto::iperf3::{Params, MAX_PARAMS_JSON, MAX_STREAMS};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Ok(p) = Params::decode(data) else {
        return;
    };
    assert!(data.len() <= MAX_PARAMS_JSON);
    assert_eq!(Params::decode(&p.encode()).expect("netrig's own encoding"), p);
    if p.check().is_ok() {
        assert!((1..=MAX_STREAMS).contains(&(p.parallel as usize)));
        assert!(p.streams() <= 2 * MAX_STREAMS);
        let max = if p.udp { MAX_UDP_BLOCK } else { MAX_TCP_BLOCK };
        assert!(p.block_len() >= 1 && p.block_len() <= max);
        let ends = [p.time as u64, p.num, p.blockcount];
        assert!(ends.iter().filter(|v| **v > 0).count() <= 1);
        assert!(!(p.reverse && p.bidirectional));
    }
}
