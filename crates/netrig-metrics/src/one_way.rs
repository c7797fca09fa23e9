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
}
