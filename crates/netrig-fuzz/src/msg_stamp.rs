//! tcp-rr's message stamps as a receiver reads them from a peer's byte
//! stream (`netrig_metrics::one_way::StampReader`, as
//! crates/netrig-engine/src/msg_stamp.rs and the tcp-rr workload use it):
//! any bytes, split into reads anywhere, any message size, and each stamp
//! recorded as a one-way delay against any receive time.
//!
//! Invariants: no panic; the stamps read are exactly the first 8 bytes of
//! each message of the concatenated stream whose first 8 bytes arrived, in
//! order; a message size under 8 reads none; the recorder keeps at most one
//! value per stamp, and only those within `MAX_STAMP_SKEW_NS` of their
//! receive time.

use arbitrary::Arbitrary;
use netrig_metrics::one_way::{StampReader, STAMP_LEN};
use netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS;
use netrig_metrics::OneWayRecorder;

#[derive(Arbitrary, Debug)]
struct Input {
    size: u16,
    since_ref_ns: u64,
    reads: Vec<Vec<u8>>,
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let size = usize::from(input.size);
    let Some(mut r) = StampReader::new(size) else {
        assert!(size < STAMP_LEN, "a reader refused {size}-byte messages");
        return;
    };
    let mut rec = OneWayRecorder::new(0);
    let (mut got, mut kept) = (Vec::new(), 0u64);
    for chunk in &input.reads {
        r.feed(chunk, |s| {
            got.push(s);
            let v = i128::from(input.since_ref_ns) - i128::from(s);
            if rec.record_since_ref(s, input.since_ref_ns) {
                assert!(v.unsigned_abs() <= u128::from(MAX_STAMP_SKEW_NS), "{v} recorded");
                kept += 1;
            }
        });
    }
    let all: Vec<u8> = input.reads.concat();
    let want: Vec<u64> = all
        .chunks(size)
        .filter(|m| m.len() >= STAMP_LEN)
        .map(|m| u64::from_le_bytes(m[..STAMP_LEN].try_into().expect("8 bytes")))
        .collect();
    assert_eq!(got, want, "size {size}");
    assert_eq!(rec.histogram().len(), kept);
}
