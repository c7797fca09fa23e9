//! One-way delay as a receiver measures it (see `netrig_proto::clock` for
//! how the two ends' clocks are known to be one).
//!
//! A datagram's send stamp counts ns from its sender's time zero; its
//! receive time is the receiver's `CLOCK_REALTIME`. The receiver records
//! `receive − reference − stamp`, its *reference* being a realtime instant
//! it knows to be no later than the sender's zero, so that on one clock the
//! value is the one-way delay plus `sender's zero − reference` (never
//! negative). Whoever has both ends' clocks takes that shift off.

use crate::latency::LatencyRecorder;

/// A receiver's record of one-way delays, shifted by an unknown constant
/// (see the module documentation).
#[derive(Debug, Clone)]
pub struct OneWayRecorder {
    ref_ns: u64,
    hist: LatencyRecorder,
    /// Datagrams whose receive time was before `ref_ns + stamp`: not one
    /// clock with the sender (or it was stepped).
    early: u64,
}

impl OneWayRecorder {
    /// A recorder counting from `ref_ns` (realtime, ns since the epoch).
    pub fn new(ref_ns: u64) -> Self {
        OneWayRecorder {
            ref_ns,
            hist: LatencyRecorder::new(),
            early: 0,
        }
    }

    /// One timed datagram stamped `sent_ns` (since its sender's zero),
    /// received at `recv_ns` (realtime). A value before the reference is
    /// counted in [`early`](Self::early) and recorded as 0; one past the
    /// histogram's range is clamped there (and counted as clamped). Never
    /// allocates, never panics.
    #[inline]
    pub fn record(&mut self, sent_ns: u64, recv_ns: u64) {
        let v = i128::from(recv_ns) - i128::from(self.ref_ns) - i128::from(sent_ns);
        if v < 0 {
            self.early = self.early.saturating_add(1);
        }
        self.hist.record(u64::try_from(v.max(0)).unwrap_or(u64::MAX));
    }

    /// One message stamped `sent_ns` (since its sender's zero), received
    /// `since_ref_ns` after this end's reference, by this end's monotonic
    /// clock (request/response: no kernel timestamp, the receive time is the
    /// read that took the message). A value more than
    /// [`MAX_STAMP_SKEW_NS`](crate::udp_seq::MAX_STAMP_SKEW_NS) off is no
    /// sender's stamp (an older peer's, a forged one): not recorded, and
    /// false returned. Never allocates, never panics.
    #[inline]
    pub fn record_since_ref(&mut self, sent_ns: u64, since_ref_ns: u64) -> bool {
        let v = i128::from(since_ref_ns) - i128::from(sent_ns);
        if v.unsigned_abs() > u128::from(crate::udp_seq::MAX_STAMP_SKEW_NS) {
            return false;
        }
        if v < 0 {
            self.early = self.early.saturating_add(1);
        }
        self.hist.record(u64::try_from(v.max(0)).unwrap_or(0));
        true
    }

    /// Values recorded before the reference.
    pub fn early(&self) -> u64 {
        self.early
    }

    /// The histogram of the values, in ns.
    pub fn histogram(&self) -> &LatencyRecorder {
        &self.hist
    }

    /// Takes the histogram out.
    pub fn into_histogram(self) -> LatencyRecorder {
        self.hist
    }
}

/// The bytes a message of a byte stream needs to carry a send time (tcp-rr's
/// requests and responses: its first 8, u64 little-endian).
pub const STAMP_LEN: usize = 8;

/// Collects the stamp of each message in a byte stream of messages of one
/// size, across reads that split them anywhere.
#[derive(Debug, Clone)]
pub struct StampReader {
    size: usize,
    /// Position in the current message.
    pos: usize,
    hdr: [u8; STAMP_LEN],
}

impl StampReader {
    /// A reader of `size`-byte messages; `None` when they are too small to
    /// carry a stamp.
    pub fn new(size: usize) -> Option<StampReader> {
        (size >= STAMP_LEN).then_some(StampReader {
            size,
            pos: 0,
            hdr: [0; STAMP_LEN],
        })
    }

    /// The next bytes of the stream; `on_stamp` is called with each stamp
    /// completed in them, in order. Never panics, never allocates; work is
    /// bounded by the number of messages in `data`.
    #[inline]
    pub fn feed(&mut self, data: &[u8], mut on_stamp: impl FnMut(u64)) {
        let mut i = 0;
        while i < data.len() {
            if self.pos < STAMP_LEN {
                let take = (STAMP_LEN - self.pos).min(data.len() - i);
                self.hdr[self.pos..self.pos + take].copy_from_slice(&data[i..i + take]);
                self.pos += take;
                i += take;
                if self.pos == STAMP_LEN {
                    on_stamp(u64::from_le_bytes(self.hdr));
                }
            }
            let skip = (self.size - self.pos).min(data.len() - i);
            self.pos += skip;
            i += skip;
            if self.pos == self.size {
                self.pos = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_the_receive_time_less_the_reference_and_the_stamp() {
        const REF: u64 = 1_800_000_000_000_000_000;
        let mut r = OneWayRecorder::new(REF);
        // Sent 2 ms after the sender's zero, which was 300 µs after the
        // reference; 10 ms on the way.
        r.record(2_000_000, REF + 300_000 + 2_000_000 + 10_000_000);
        let s = r.histogram().summary();
        assert_eq!(s.count, 1);
        assert!((s.p50_us - 10_300.0).abs() < 10.3, "{s:?}");
        assert_eq!(r.early(), 0);
        // Before the reference: counted, recorded as the lowest value.
        r.record(5_000_000, REF + 1_000_000);
        assert_eq!(r.early(), 1);
        assert_eq!(r.histogram().len(), 2);
        // Extremes never panic.
        r.record(u64::MAX, 0);
        r.record(0, u64::MAX);
        assert_eq!(r.histogram().clamped(), 1);
    }

    #[test]
    fn a_stamp_far_from_this_ends_clock_is_not_recorded() {
        let mut r = OneWayRecorder::new(0);
        assert!(r.record_since_ref(1_000_000, 1_250_000));
        assert!((r.histogram().summary().p50_us - 250.0).abs() < 0.3);
        // An older peer's filler bytes, or a forged stamp: more than a minute off.
        assert!(!r.record_since_ref(0x5a5a_5a5a_5a5a_5a5a, 1_000));
        assert!(!r.record_since_ref(0, u64::MAX));
        assert_eq!(r.histogram().len(), 1);
        // Slightly before: early, recorded as the lowest value.
        assert!(r.record_since_ref(2_000, 1_000));
        assert_eq!(r.early(), 1);
    }

    fn stream(size: usize, stamps: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        for s in stamps {
            let mut m = vec![0xa5u8; size];
            m[..8].copy_from_slice(&s.to_le_bytes());
            v.extend_from_slice(&m);
        }
        v
    }

    #[test]
    fn stamps_are_read_across_any_split() {
        let stamps = [1u64, 0x0102_0304_0506_0708, u64::MAX, 42, 7];
        for size in [8usize, 9, 13, 64, 1000] {
            let s = stream(size, &stamps);
            for chunk in [1usize, 3, 7, 8, 9, 64, 4096] {
                let mut r = StampReader::new(size).unwrap();
                let mut got = Vec::new();
                for c in s.chunks(chunk) {
                    r.feed(c, |v| got.push(v));
                }
                assert_eq!(got, stamps, "size {size} chunk {chunk}");
            }
        }
        assert!(StampReader::new(7).is_none() && StampReader::new(1).is_none());
    }
}
