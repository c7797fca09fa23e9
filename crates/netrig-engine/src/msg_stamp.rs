//! Send times carried in a TCP request/response stream (tcp-rr's one-way
//! delay): the first 8 bytes of each message, when messages are at least
//! 8 bytes, hold the sender's send time (ns since its worker's time zero,
//! u64 little-endian), written as the message's first byte goes out.
//!
//! TCP gives no per-message kernel receive time: the receive time is the
//! clock read taken once per read call that completed the stamp.

pub use netrig_metrics::one_way::{StampReader, STAMP_LEN};
use netrig_metrics::OneWayRecorder;
use std::time::Instant;

/// Ns from `zero` to `t`.
#[inline]
pub fn ns_since(t: Instant, zero: Instant) -> u64 {
    t.saturating_duration_since(zero).as_nanos().min(u64::MAX as u128) as u64
}

/// A receiver's side of the stamps: the reader, and the one-way delays of
/// the stamps it read while the window was open.
#[derive(Debug, Clone)]
pub struct StampIn {
    pub reader: StampReader,
    /// The receiver's reference (its values count from it).
    pub clock_ref: Instant,
    pub recorder: OneWayRecorder,
}

impl StampIn {
    /// `None` when `size`-byte messages carry no stamp.
    pub fn new(size: usize, clock_ref: Instant) -> Option<StampIn> {
        Some(StampIn {
            reader: StampReader::new(size)?,
            clock_ref,
            recorder: OneWayRecorder::new(0),
        })
    }

    /// Bytes read at `now`; their stamps recorded if `recording`.
    #[inline]
    pub fn feed(&mut self, data: &[u8], now: Instant, recording: bool) {
        let since = ns_since(now, self.clock_ref);
        let rec = &mut self.recorder;
        self.reader.feed(data, |sent| {
            if recording {
                rec.record_since_ref(sent, since);
            }
        });
    }
}
