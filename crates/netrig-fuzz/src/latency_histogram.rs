//! A latency histogram as a peer sends it (`latency_histogram` in a
//! report: HdrHistogram V2 bytes, base64), decoded with the size limit.
//!
//! Invariants: no panic; anything accepted holds at most `MAX_COUNT` values
//! and is within the size limit,
//! encodes within `MAX_ENCODED_LEN`, and decodes again to the same bytes,
//! count and clamped count; its summary is finite.

use netrig_metrics::latency::{MAX_COUNT, MAX_ENCODED_LEN};
use netrig_metrics::LatencyRecorder;

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    if let Ok(r) = LatencyRecorder::from_bytes(data, MAX_ENCODED_LEN) {
        check(&r);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(r) = LatencyRecorder::from_base64(s, MAX_ENCODED_LEN) {
            check(&r);
        }
    }
}

fn check(r: &LatencyRecorder) {
    assert!(r.len() <= MAX_COUNT, "{} values accepted", r.len());
    assert!(r.clamped() <= r.len(), "clamped {} of {}", r.clamped(), r.len());
    let b = r.to_bytes();
    assert!(b.len() <= MAX_ENCODED_LEN, "{} bytes encoded", b.len());
    let back = LatencyRecorder::from_bytes(&b, MAX_ENCODED_LEN).expect("our own encoding decodes");
    assert_eq!(back.to_bytes(), b);
    assert_eq!((back.len(), back.clamped()), (r.len(), r.clamped()));
    let s = r.summary();
    for v in [s.mean_us, s.p50_us, s.p99_us, s.max_us, s.min_us, s.stddev_us] {
        assert!(v.is_finite() && v >= 0.0, "{s:?}");
    }
}
