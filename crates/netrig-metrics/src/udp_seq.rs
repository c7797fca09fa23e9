//! Receiver-side accounting of a UDP stream in which every datagram carries a
//! 64-bit sequence number (starting at 0 for each flow) and the sender's
//! timestamp, reported the way iperf3 and the CERN scavenger study do:
//! datagrams received, lost, loss %, out of order, duplicates and RFC 3550
//! interarrival jitter.
//!
//! # Definitions
//!
//! - **received**: distinct datagrams that arrived (duplicates excluded).
//! - **duplicates**: arrivals of a sequence number already seen.
//! - **out_of_order**: arrivals whose sequence number is lower than the
//!   highest one seen before them, and that are not duplicates.
//! - **expected**: `highest_seq + 1`, or the sender's count if it reported a
//!   larger one ([`SeqTracker::sent_total_hint`]), so that datagrams lost
//!   after the last one received are counted. `highest_seq + 1` saturates at
//!   `u64::MAX`.
//! - **lost**: `expected − received` (0 rather than negative), computed when
//!   the summary is taken. A datagram first presumed lost that arrives late
//!   therefore reduces `lost` and counts as out of order, as in iperf3.
//! - **loss_pct**: `lost / expected × 100`, 0 when nothing is expected.
//! - **jitter**: RFC 3550 §6.4.1, `J += (|D| − J) / 16`, where `D` is the
//!   difference between the transit times (`recv − send`) of two consecutive
//!   arrivals (in arrival order, duplicates skipped), computed in nanoseconds
//!   and reported in microseconds. The sender's and receiver's clocks need not
//!   be synchronised: a constant offset between them adds the same amount to
//!   every transit time and cancels in `D`; only drift between the clocks
//!   shows up (as a tiny constant `|D|`). Beside the running `J`, the tracker
//!   sums `|D|` and counts the pairs, so that the mean `|D|` over any stretch
//!   (the quantity `J` estimates, without its 16-arrival memory) is a
//!   difference of two [`SeqLive`] snapshots.
//! - **timed** arrivals: `D` needs a send and a receive time of each datagram
//!   of its own. A datagram that shared its send timestamp with others (one
//!   UDP GSO send) or its receive timestamp (one GRO-coalesced buffer) is
//!   *untimed* ([`SeqTracker::on_arrival`]): it is counted in every figure
//!   but jitter, and no `D` is taken across it. [`SeqLive::untimed`] says how
//!   many there were, so that a jitter made mostly of shared timestamps
//!   (near zero by construction) can be withheld rather than shown.
//! - **sampled** arrivals: a sender that hands the kernel several separate
//!   datagrams in one call (sendmmsg) stamps each with the call's time, and
//!   only the first of them left at that time; the others are
//!   [`Timing::Sampled`]: counted everywhere but jitter, not counted as
//!   untimed, and `D` is taken between the timed ones on either side of
//!   them (RFC 3550's `D(i, j)` is defined for any two packets). Jitter is
//!   then the mean `|D|` between the first datagrams of successive calls:
//!   a sample taken by the sender's clock, not by how close together
//!   datagrams went or arrived, which is what makes shared ones biased.
//! - **far** stamps: a sender's timestamp counts from its own time zero, the
//!   receiver's from its own ([`SeqTracker::set_zero`]), and the two zeros
//!   are one control message apart. A send time more than
//!   [`MAX_STAMP_SKEW_NS`] (a minute) from the receiver's time since its zero
//!   at arrival is no sender's clock (a peer's forged or broken stamp): the
//!   datagram is counted as untimed and as far ([`SeqLive::far`]), and `D` is
//!   taken across it, between the timed ones on either side.
//!
//! # Bounded memory
//!
//! Duplicates are detected with a bitmap of the [`SEQ_WINDOW`] (65536)
//! sequence numbers ending at the highest one seen, i.e. `highest − 65535
//! ..= highest` (8 KiB, allocated once). A datagram ahead of the window moves
//! it forward; the numbers it skips are marked missing. A datagram more than
//! 65535 below the highest seen is outside the window and cannot be checked
//! for duplication: it is counted as received and out of order (like iperf3,
//! which never detects duplicates) and also in
//! [`SeqTracker::outside_window`]. Such very late duplicates are the only way
//! `received` can be too high; `lost` then saturates at 0.
//!
//! [`SeqTracker::on_datagram`] is the per-datagram hot path: it never
//! allocates and never panics, whatever the input (sequence numbers that wrap,
//! jump by 2^63 or go backwards, `u64::MAX`, timestamps that go backwards).

use serde::{Deserialize, Serialize};

/// Number of sequence numbers, ending at the highest seen, for which
/// duplicates are detected (see the module documentation).
pub const SEQ_WINDOW: u64 = 1 << 16;

const WORDS: usize = (SEQ_WINDOW / 64) as usize;
const POS_MASK: u64 = SEQ_WINDOW - 1;

/// Per-flow receiver state. See the module documentation for definitions.
#[derive(Clone)]
pub struct SeqTracker {
    /// Bit `s % SEQ_WINDOW` is set when `s` arrived, for `s` in
    /// `highest − (SEQ_WINDOW − 1) ..= highest`.
    seen: Box<[u64; WORDS]>,
    highest: Option<u64>,
    /// When the first datagram arrived (the receiver's clock).
    first_recv_ns: Option<u64>,
    /// Arrivals too far ahead to be real ([`Arrival::Implausible`]).
    implausible: u64,
    received: u64,
    duplicates: u64,
    out_of_order: u64,
    outside_window: u64,
    sent_hint: Option<u64>,
    prev_transit_ns: Option<i128>,
    jitter_ns: f64,
    /// Sum of `|D|` over timed consecutive pairs, and their number.
    d_sum_ns: f64,
    d_count: u64,
    untimed: u64,
    /// The receiver's clock at its time zero ([`SeqTracker::set_zero`]).
    zero_ns: Option<u64>,
    /// Arrivals whose send time was far from the receiver's clock.
    far: u64,
}

/// Summary of a [`SeqTracker`]; definitions in the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqSummary {
    /// Distinct datagrams that arrived.
    pub received: u64,
    /// `expected − received`, never negative.
    pub lost: u64,
    /// `max(highest_seq + 1, sent)`, `sent` from
    /// [`SeqTracker::sent_total_hint`] if given.
    pub expected: u64,
    /// `lost / expected × 100`; 0 when nothing is expected.
    pub loss_pct: f64,
    /// Non-duplicate arrivals below the highest sequence number seen before.
    pub out_of_order: u64,
    /// Arrivals of a sequence number already seen.
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter, in microseconds.
    pub jitter_us: f64,
    /// Highest sequence number received, if any.
    pub highest_seq: Option<u64>,
}

/// How a datagram's timestamps stand, for jitter (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Its send and receive timestamps are its own: it takes part in `D`.
    Own,
    /// It shared a timestamp with other datagrams (one GSO send, one GRO
    /// buffer): untimed, and no `D` is taken across it.
    Shared,
    /// Not the first datagram of a sender's call that sent several separate
    /// datagrams (sendmmsg): left out of `D`, which is taken across it
    /// between the timed datagrams on either side.
    Sampled,
}

/// What [`SeqTracker::on_arrival`] made of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Its first arrival: counted as received.
    New,
    /// A sequence number already seen: counted as a duplicate only.
    Duplicate,
    /// A sequence number further ahead than the sender can have sent by
    /// now ([`MAX_DATAGRAMS_PER_S`]): not counted at all (the caller counts
    /// it as stray), so one forged datagram cannot make the loss 10^19.
    Implausible,
}

/// The most datagrams one flow's sender can send per second: `-b`'s
/// highest rate (400 Gbit/s) in the smallest datagrams (netrig's 28-byte
/// header). A sequence number further ahead of the highest seen than this
/// rate allows in the time since the first arrival (plus
/// [`PLAUSIBLE_SLACK`]) is implausible.
pub const MAX_DATAGRAMS_PER_S: u64 = 400_000_000_000 / 8 / 28;
/// Sequence numbers any arrival may be ahead of the highest seen (and the
/// first arrival's at most): a burst lost at once.
pub const PLAUSIBLE_SLACK: u64 = 1 << 24;

/// How far a datagram's send time (since the sender's time zero) may be
/// from the receiver's time since its own zero when it arrives, in ns: a
/// minute. The two zeros are one control message apart, and no path holds
/// a datagram for a minute; a stamp further off is no sender's clock.
pub const MAX_STAMP_SKEW_NS: u64 = 60_000_000_000;

/// A [`SeqTracker`]'s running counts at one instant ([`SeqTracker::live`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeqLive {
    pub received: u64,
    /// `highest_seq + 1`, 0 before the first datagram.
    pub expected: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// RFC 3550's running `J`, in ns.
    pub jitter_ns: f64,
    /// Sum of `|D|` over the timed consecutive pairs so far, in ns.
    pub d_sum_ns: f64,
    /// Number of those pairs.
    pub d_count: u64,
    /// Datagrams received whose send or receive timestamp was shared with
    /// other datagrams (a GSO send, a GRO buffer), or whose send time was
    /// far from the receiver's clock, left out of jitter.
    pub untimed: u64,
    /// Of those, the ones whose send time was far from the receiver's clock
    /// ([`MAX_STAMP_SKEW_NS`]).
    pub far: u64,
}

impl SeqLive {
    /// What arrived between `earlier` and `self`: datagrams received, lost
    /// (newly expected minus newly received, never negative, so a datagram
    /// presumed lost in one interval that arrives in the next is not
    /// subtracted twice), out of order, duplicates, and the jitter at the end.
    pub fn since(&self, earlier: &SeqLive) -> SeqInterval {
        let received = self.received.saturating_sub(earlier.received);
        let expected = self.expected.saturating_sub(earlier.expected);
        let pairs = self.d_count.saturating_sub(earlier.d_count);
        let untimed = self.untimed.saturating_sub(earlier.untimed);
        SeqInterval {
            far: self.far.saturating_sub(earlier.far),
            received,
            lost: expected.saturating_sub(received),
            out_of_order: self.out_of_order.saturating_sub(earlier.out_of_order),
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            jitter_us: self.jitter_ns / 1000.0,
            jitter_pairs: pairs,
            jitter_mean_us: (pairs > 0)
                .then(|| (self.d_sum_ns - earlier.d_sum_ns).max(0.0) / pairs as f64 / 1000.0),
            untimed,
        }
    }
}

/// A receiver's accounting over one interim period ([`SeqLive::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqInterval {
    pub received: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// RFC 3550's running jitter `J` at the end of the period, in microseconds.
    pub jitter_us: f64,
    /// Timed consecutive pairs in the period (each a `|D|`).
    #[serde(default)]
    pub jitter_pairs: u64,
    /// Mean `|D|` over those pairs, in µs: the period's jitter; `None`
    /// without a pair.
    #[serde(default)]
    pub jitter_mean_us: Option<f64>,
    /// Datagrams received in the period whose timestamps were shared with
    /// others (GSO sends, GRO buffers), or whose send time was far from the
    /// receiver's clock: left out of jitter.
    #[serde(default)]
    pub untimed: u64,
    /// Of those, the ones whose send time was far from the receiver's clock
    /// ([`MAX_STAMP_SKEW_NS`]).
    #[serde(default)]
    pub far: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for SeqTracker {
    /// Shows the counters, not the bitmap.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqTracker")
            .field("highest", &self.highest)
            .field("received", &self.received)
            .field("duplicates", &self.duplicates)
            .field("out_of_order", &self.out_of_order)
            .field("outside_window", &self.outside_window)
            .field("sent_hint", &self.sent_hint)
            .field("jitter_ns", &self.jitter_ns)
            .finish()
    }
}

impl SeqTracker {
    /// A tracker for a flow from which nothing has arrived yet.
    pub fn new() -> Self {
        SeqTracker {
            seen: Box::new([0; WORDS]),
            highest: None,
            first_recv_ns: None,
            implausible: 0,
            received: 0,
            duplicates: 0,
            out_of_order: 0,
            outside_window: 0,
            sent_hint: None,
            prev_transit_ns: None,
            jitter_ns: 0.0,
            d_sum_ns: 0.0,
            d_count: 0,
            untimed: 0,
            zero_ns: None,
            far: 0,
        }
    }

    /// Sets the receiver's clock (that of `recv_ts_ns`) at its time zero,
    /// against which send times are judged (far ones are untimed; see the
    /// module documentation). Without it no send time is judged.
    pub fn set_zero(&mut self, zero_ns: u64) {
        self.zero_ns = Some(zero_ns);
    }

    /// Accounts for one arriving datagram with sequence number `seq`, sent at
    /// `send_ts_ns` by the sender's clock and received at `recv_ts_ns` by the
    /// receiver's clock (nanoseconds, any epoch), each timestamp its own.
    /// Never allocates, never panics.
    pub fn on_datagram(&mut self, seq: u64, send_ts_ns: u64, recv_ts_ns: u64) -> Arrival {
        self.on_arrival(seq, send_ts_ns, recv_ts_ns, Timing::Own)
    }

    /// [`on_datagram`](Self::on_datagram) for a datagram whose timestamps
    /// may not be its own ([`Timing`]; see the module documentation): such
    /// a datagram counts everywhere but in jitter.
    pub fn on_arrival(&mut self, seq: u64, send_ts_ns: u64, recv_ts_ns: u64, timing: Timing) -> Arrival {
        let first = *self.first_recv_ns.get_or_insert(recv_ts_ns);
        // At most a day: no test lasts longer (the agent's --max-duration).
        let elapsed_s = (recv_ts_ns.saturating_sub(first) / 1_000_000_000 + 1).min(86_400);
        let plausible = PLAUSIBLE_SLACK.saturating_add(MAX_DATAGRAMS_PER_S.saturating_mul(elapsed_s));
        if seq > self.highest.unwrap_or(0).saturating_add(plausible) {
            self.implausible = self.implausible.saturating_add(1);
            return Arrival::Implausible;
        }
        match self.highest {
            None => {
                self.set(seq);
                self.highest = Some(seq);
            }
            Some(h) if seq > h => {
                let ahead = seq - h;
                if ahead >= SEQ_WINDOW {
                    self.seen.fill(0);
                } else {
                    self.clear_range(h.wrapping_add(1), ahead);
                }
                self.set(seq);
                self.highest = Some(seq);
            }
            Some(h) => {
                if h - seq >= SEQ_WINDOW {
                    self.outside_window = self.outside_window.saturating_add(1);
                } else if self.is_set(seq) {
                    self.duplicates = self.duplicates.saturating_add(1);
                    return Arrival::Duplicate;
                } else {
                    self.set(seq);
                }
                self.out_of_order = self.out_of_order.saturating_add(1);
            }
        }
        self.received = self.received.saturating_add(1);

        // A send time far from the receiver's clock is no sender's: untimed,
        // and D is taken across it (it does not replace the last transit).
        if timing != Timing::Shared {
            if let Some(zero) = self.zero_ns {
                let since_zero = i128::from(recv_ts_ns) - i128::from(zero);
                if (since_zero - i128::from(send_ts_ns)).unsigned_abs() > u128::from(MAX_STAMP_SKEW_NS) {
                    self.untimed = self.untimed.saturating_add(1);
                    self.far = self.far.saturating_add(1);
                    return Arrival::New;
                }
            }
        }
        match timing {
            Timing::Own => {}
            Timing::Shared => {
                // No D across a shared timestamp.
                self.untimed = self.untimed.saturating_add(1);
                self.prev_transit_ns = None;
                return Arrival::New;
            }
            // D is taken across it, between the timed ones around it.
            Timing::Sampled => return Arrival::New,
        }
        let transit = i128::from(recv_ts_ns) - i128::from(send_ts_ns);
        if let Some(prev) = self.prev_transit_ns {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
            self.d_sum_ns += d;
            self.d_count = self.d_count.saturating_add(1);
        }
        self.prev_transit_ns = Some(transit);
        Arrival::New
    }

    /// Records how many datagrams the sender says it sent, so that datagrams
    /// lost after the highest one received count as lost:
    /// `expected = max(highest_seq + 1, sent)`. A later call replaces an
    /// earlier one.
    pub fn sent_total_hint(&mut self, sent: u64) {
        self.sent_hint = Some(sent);
    }

    /// How many arrivals were further ahead than the sender could have sent
    /// ([`Arrival::Implausible`]).
    pub fn implausible(&self) -> u64 {
        self.implausible
    }

    /// How many arrivals were too far below the highest sequence number to be
    /// checked for duplication (counted as received and out of order).
    pub fn outside_window(&self) -> u64 {
        self.outside_window
    }

    /// The counters so far (see the module documentation).
    pub fn summary(&self) -> SeqSummary {
        let from_seq = self.highest.map_or(0, |h| h.saturating_add(1));
        let expected = from_seq.max(self.sent_hint.unwrap_or(0));
        let lost = expected.saturating_sub(self.received);
        SeqSummary {
            received: self.received,
            lost,
            expected,
            loss_pct: if expected == 0 {
                0.0
            } else {
                // lost ≤ expected, but in f64 the quotient may round past 100.
                (lost as f64 * 100.0 / expected as f64).min(100.0)
            },
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            jitter_us: self.jitter_ns / 1000.0,
            highest_seq: self.highest,
        }
    }

    /// The running counts, cheap enough to publish after every batch for
    /// interim reports. `expected` is `highest_seq + 1` (no sender's hint).
    pub fn live(&self) -> SeqLive {
        SeqLive {
            received: self.received,
            expected: self.highest.map_or(0, |h| h.saturating_add(1)),
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            jitter_ns: self.jitter_ns,
            d_sum_ns: self.d_sum_ns,
            d_count: self.d_count,
            untimed: self.untimed,
            far: self.far,
        }
    }

    fn set(&mut self, seq: u64) {
        let pos = seq & POS_MASK;
        self.seen[(pos >> 6) as usize % WORDS] |= 1 << (pos & 63);
    }

    fn is_set(&self, seq: u64) -> bool {
        let pos = seq & POS_MASK;
        self.seen[(pos >> 6) as usize % WORDS] & (1 << (pos & 63)) != 0
    }

    /// Clears the bits of `len` (< `SEQ_WINDOW`) consecutive sequence numbers
    /// starting at `start`, a word at a time.
    fn clear_range(&mut self, start: u64, len: u64) {
        let mut pos = start & POS_MASK;
        let mut left = len;
        while left > 0 {
            let bit = pos & 63;
            let n = (64 - bit).min(left);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            self.seen[(pos >> 6) as usize % WORDS] &= !mask;
            pos = (pos + n) & POS_MASK;
            left -= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #11: one datagram with sequence number 2^64 − 1 made the loss
    /// 1.8e19 and the jitter 2.2e15 µs. Sequence numbers beyond what the
    /// sender can have sent are refused, and the figures stay true.
    #[test]
    fn a_sequence_number_beyond_what_was_sendable_is_refused() {
        let mut t = SeqTracker::new();
        for s in 0..100u64 {
            assert_eq!(t.on_datagram(s, s * 1000, s * 1000 + 50), Arrival::New);
        }
        assert_eq!(t.on_datagram(u64::MAX, 0, 100_000), Arrival::Implausible);
        assert_eq!(t.on_datagram(1 << 40, 0, 100_000), Arrival::Implausible);
        let s = t.summary();
        assert_eq!((s.received, s.lost, s.expected), (100, 0, 100));
        assert_eq!(t.implausible(), 2);
        assert!(s.jitter_us < 1.0, "{}", s.jitter_us);
        // A real burst lost at once is not refused.
        assert_eq!(t.on_datagram(100 + (1 << 20), 0, 200_000), Arrival::New);
        // Nor a first datagram that is not the sender's first.
        let mut u = SeqTracker::new();
        assert_eq!(u.on_datagram(5_000_000, 0, 1), Arrival::New);
    }
    use crate::latency::tests::alloc_counter::allocations_in;

    const MS: u64 = 1_000_000;

    /// Feeds `seqs` in order, 10 µs apart, with a constant 50 µs transit.
    fn feed(seqs: impl IntoIterator<Item = u64>) -> SeqTracker {
        let mut t = SeqTracker::new();
        for (i, s) in seqs.into_iter().enumerate() {
            let send = 1_000_000 + i as u64 * 10_000;
            t.on_datagram(s, send, send + 50_000);
        }
        t
    }

    #[test]
    fn empty() {
        let s = SeqTracker::default().summary();
        assert_eq!(s, SeqSummary::default());
        assert_eq!(s.highest_seq, None);
        assert_eq!(s.loss_pct, 0.0);
    }

    #[test]
    fn clean_in_order_stream() {
        let s = feed(0..1000).summary();
        assert_eq!(
            s,
            SeqSummary {
                received: 1000,
                lost: 0,
                expected: 1000,
                loss_pct: 0.0,
                out_of_order: 0,
                duplicates: 0,
                jitter_us: 0.0,
                highest_seq: Some(999),
            }
        );
    }

    #[test]
    fn loss_burst() {
        let s = feed((0..1000).filter(|s| !(100..150).contains(s))).summary();
        assert_eq!(s.received, 950);
        assert_eq!(s.lost, 50);
        assert_eq!(s.expected, 1000);
        assert!((s.loss_pct - 5.0).abs() < 1e-12);
        assert_eq!(s.out_of_order, 0);
        // A stream that starts late: the first datagrams were lost.
        let s = feed(10..20).summary();
        assert_eq!((s.received, s.lost, s.expected), (10, 10, 20));
    }

    #[test]
    fn swapped_pairs_are_half_out_of_order() {
        // Per-packet load balancing over two paths: 1 0 3 2 5 4 ...
        let s = feed((0..1000u64).map(|i| i ^ 1)).summary();
        assert_eq!(s.received, 1000);
        assert_eq!(s.out_of_order, 500);
        assert_eq!(s.lost, 0);
        assert_eq!(s.duplicates, 0);
        assert_eq!(s.out_of_order as f64 / s.received as f64, 0.5);
    }

    #[test]
    fn duplicates() {
        let s = feed((0..100u64).flat_map(|i| [i, i])).summary();
        assert_eq!(
            (s.received, s.duplicates, s.out_of_order, s.lost),
            (100, 100, 0, 0)
        );
        // A duplicate far back in the window, and a duplicate of the first.
        let mut seqs: Vec<u64> = (0..60_000).collect();
        seqs.push(3);
        seqs.push(0);
        let s = feed(seqs).summary();
        assert_eq!((s.received, s.duplicates, s.out_of_order), (60_000, 2, 0));
    }

    #[test]
    fn late_datagram_after_being_presumed_lost() {
        let mut t = feed((0..30).filter(|&s| s != 5));
        let s = t.summary();
        assert_eq!((s.received, s.lost, s.out_of_order), (29, 1, 0));
        t.on_datagram(5, 0, 0);
        let s = t.summary();
        assert_eq!((s.received, s.lost, s.out_of_order, s.duplicates), (30, 0, 1, 0));
        // Arriving again it is a duplicate.
        t.on_datagram(5, 0, 0);
        assert_eq!(t.summary().duplicates, 1);
        assert_eq!(t.summary().out_of_order, 1);
    }

    #[test]
    fn window_edges() {
        let w = SEQ_WINDOW;
        // Oldest in-window number: duplicate detected.
        let mut t = feed(0..w);
        t.on_datagram(0, 0, 0);
        assert_eq!(t.summary().duplicates, 1);
        assert_eq!(t.outside_window(), 0);
        // One older: outside, counted as received and out of order.
        let mut t = feed(0..=w);
        t.on_datagram(0, 0, 0);
        let s = t.summary();
        assert_eq!((s.received, s.duplicates, s.out_of_order), (w + 2, 0, 1));
        assert_eq!(t.outside_window(), 1);
        assert_eq!(s.lost, 0);

        // Jumps ahead, inside and beyond the window, clear what they skip.
        for jump in [1, 63, 64, 65, 1000, w - 1, w, w + 1, 3 * w + 17] {
            let mut t = feed(0..(w + 100));
            let top = w + 99 + jump;
            t.on_datagram(top, 0, 0);
            let s = t.summary();
            assert_eq!(s.lost, jump - 1, "jump {jump}");
            // Every skipped number still in the window arrives late once,
            // then again as a duplicate.
            let first = (top + 1).saturating_sub(w).max(w + 100);
            for seq in first..top {
                t.on_datagram(seq, 0, 0);
                t.on_datagram(seq, 0, 0);
            }
            let s = t.summary();
            assert_eq!(s.lost, first - (w + 100), "jump {jump}");
            assert_eq!(s.duplicates, top - first, "jump {jump}");
            assert_eq!(t.outside_window(), 0);
        }
    }

    #[test]
    fn tail_loss_with_sent_total_hint() {
        let mut t = feed(0..90);
        assert_eq!(t.summary().lost, 0);
        t.sent_total_hint(100);
        let s = t.summary();
        assert_eq!((s.expected, s.lost), (100, 10));
        assert!((s.loss_pct - 10.0).abs() < 1e-12);
        // A smaller hint (e.g. reported before the last sends) does not
        // reduce expected below highest + 1.
        t.sent_total_hint(50);
        assert_eq!(t.summary().expected, 90);
        // Nothing arrived at all.
        let mut t = SeqTracker::new();
        t.sent_total_hint(1000);
        let s = t.summary();
        assert_eq!(
            (s.received, s.lost, s.expected, s.loss_pct),
            (0, 1000, 1000, 100.0)
        );
    }

    #[test]
    fn jitter_of_constant_transit_is_zero() {
        let mut t = SeqTracker::new();
        // Irregular sending, constant 3 ms transit, unsynchronised clocks
        // (receiver clock far behind the sender's).
        let mut send = 5_000_000_000_000u64;
        for i in 0..1000u64 {
            send += 1000 + (i * 7919) % 100_000;
            t.on_datagram(i, send, send + 3 * MS - 4_000_000_000_000);
        }
        assert_eq!(t.summary().jitter_us, 0.0);
    }

    /// J after `k` differences of constant magnitude `d` starting from 0:
    /// `d × (1 − (15/16)^k)`.
    fn expected_jitter(d: f64, k: i32) -> f64 {
        d * (1.0 - (15.0f64 / 16.0).powi(k))
    }

    #[test]
    fn jitter_of_alternating_transit() {
        // Transit alternates between 10 ms and 11 ms: |D| = 1 ms every time,
        // so J → 1000 µs; after n datagrams (n − 1 differences) it is
        // 1000 × (1 − (15/16)^(n−1)) µs.
        // The same with the sender's clock 123 s ahead of the receiver's.
        for sender_ahead in [0, 123_000 * MS] {
            let mut t = SeqTracker::new();
            for i in 0..400u64 {
                let transit = 10 * MS + (i % 2) * MS;
                t.on_datagram(i, i * MS + sender_ahead, i * MS + transit);
                let want = expected_jitter(1000.0, i as i32);
                let got = t.summary().jitter_us;
                assert!((got - want).abs() < 1e-9, "after {i}: {got} vs {want}");
            }
            let j = t.summary().jitter_us;
            assert!((j - 1000.0).abs() < 1e-6, "{j}");
        }
        // Transit 10 ms ± 1 ms (9, 11, 9, ...): |D| = 2 ms, J → 2000 µs.
        let mut t = SeqTracker::new();
        for i in 0..400u64 {
            let transit = if i % 2 == 0 { 9 * MS } else { 11 * MS };
            t.on_datagram(i, i * MS, i * MS + transit);
        }
        let j = t.summary().jitter_us;
        assert!((j - expected_jitter(2000.0, 399)).abs() < 1e-9, "{j}");
        assert!((j - 2000.0).abs() < 1e-6, "{j}");
    }

    #[test]
    fn duplicates_do_not_affect_jitter() {
        let mut t = SeqTracker::new();
        t.on_datagram(0, 0, 100);
        t.on_datagram(0, 0, 5 * MS);
        t.on_datagram(1, 10, 110);
        assert_eq!(t.summary().jitter_us, 0.0);
    }

    #[test]
    fn adversarial_inputs_do_not_panic_and_memory_is_bounded() {
        let mut t = SeqTracker::new();
        let n = allocations_in(|| {
            t.on_datagram(u64::MAX, u64::MAX, 0);
            t.on_datagram(u64::MAX, 0, u64::MAX);
            t.on_datagram(0, u64::MAX, u64::MAX);
            t.on_datagram(u64::MAX - 1, 0, 0);
        });
        assert_eq!(n, 0);
        let s = t.summary();
        // Sequence numbers near 2^64 are beyond what any sender can have
        // sent: refused, so only the datagram numbered 0 counts.
        assert_eq!(t.implausible(), 3);
        assert_eq!(s.highest_seq, Some(0));
        assert_eq!(s.expected, 1);
        assert_eq!((s.received, s.duplicates, s.out_of_order), (1, 0, 0));
        assert!(s.jitter_us.is_finite() && s.loss_pct.is_finite());

        // Going backwards by 2^30 (e.g. a restarted sender), then forwards.
        let mut t = feed(0..1000);
        let base = (1u64 << 30) + 5000;
        t.on_datagram(base, 0, 0);
        t.on_datagram(base - (1 << 30), 0, 0);
        t.on_datagram(base + 1, 0, 0);
        let s = t.summary();
        assert_eq!(s.highest_seq, Some(base + 1));
        assert_eq!(t.outside_window(), 1);
        assert_eq!(s.received, 1003);

        // A million random sequence numbers and timestamps.
        let mut t = SeqTracker::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let n = allocations_in(|| {
            for i in 0..1_000_000u64 {
                let r = next();
                let seq = match i % 4 {
                    0 => r,
                    1 => r % 100_000,
                    2 => r >> 20,
                    _ => i,
                };
                t.on_datagram(seq, next(), next());
            }
        });
        assert_eq!(n, 0);
        let s = t.summary();
        // Every datagram is received, a duplicate, or refused as implausible.
        assert_eq!(s.received + s.duplicates + t.implausible(), 1_000_000);
        assert!(t.implausible() > 0, "random 64-bit sequence numbers are refused");
        assert!(s.out_of_order <= s.received);
        assert!(s.jitter_us.is_finite() && s.jitter_us >= 0.0);
        assert!(s.loss_pct.is_finite() && (0.0..=100.0).contains(&s.loss_pct));
        // The only heap memory is the fixed-size bitmap.
        assert_eq!(t.seen.len(), WORDS);
        assert_eq!(std::mem::size_of_val(&*t.seen), 8192);
    }

    /// Found by the `udp_datagram` fuzz target: with `lost` just below
    /// `expected` (both near 2^64, the sender's hint from the wire) the
    /// quotient rounded to 100.00000000000001 %.
    #[test]
    fn loss_never_exceeds_100_percent() {
        let mut t = SeqTracker::new();
        for seq in 0..819 {
            t.on_datagram(seq, 0, 0);
        }
        t.sent_total_hint(16_902_195_153_864_458_911);
        let s = t.summary();
        assert_eq!(s.lost, 16_902_195_153_864_458_092);
        assert!(s.loss_pct <= 100.0, "{}", s.loss_pct);
    }

    #[test]
    fn summary_serde_round_trip() {
        let mut t = feed([0, 2, 1, 1, 5]);
        t.sent_total_hint(8);
        let s = t.summary();
        assert_eq!((s.received, s.lost, s.out_of_order, s.duplicates), (4, 4, 1, 1));
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<SeqSummary>(&j).unwrap(), s);
        let s = SeqTracker::new().summary();
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<SeqSummary>(&j).unwrap(), s);
    }

    #[test]
    fn interval_counts_are_differences_of_live_counts() {
        let mut t = SeqTracker::new();
        for seq in 0..10 {
            t.on_datagram(seq, 0, 0);
        }
        let a = t.live();
        assert_eq!(a.expected, 10);
        // 10..20 with 12 and 13 missing, 5 a duplicate.
        for seq in (10..20).filter(|s| *s != 12 && *s != 13) {
            t.on_datagram(seq, 0, 0);
        }
        t.on_datagram(5, 0, 0);
        let b = t.live();
        let i = b.since(&a);
        assert_eq!((i.received, i.lost, i.duplicates, i.out_of_order), (8, 2, 1, 0));
        // 12 arrives late: received and out of order, and no negative loss.
        t.on_datagram(12, 0, 0);
        let j = t.live().since(&b);
        assert_eq!((j.received, j.lost, j.out_of_order), (1, 0, 1));
        // The totals still agree with the summary.
        assert_eq!(t.summary().lost, 1);
    }

    /// Calls of four datagrams each (sendmmsg): the first of each carries
    /// its call's time; `D` is taken between those, across the three
    /// sampled ones, which count everywhere but in jitter and not as
    /// untimed. A shared one (GSO, GRO) breaks the chain instead.
    #[test]
    fn sampled_datagrams_are_stepped_over_and_shared_ones_break_the_chain() {
        const US: u64 = 1000;
        let mut t = SeqTracker::new();
        // Call k at 100 µs intervals; its first datagram's transit is 10 µs,
        // plus 4 µs in odd calls: |D| = 4 µs between successive firsts. The
        // sampled ones arrive late, so that a D taken from them would differ.
        for call in 0..10u64 {
            let sent = call * 100 * US;
            let transit = if call % 2 == 1 { 14 * US } else { 10 * US };
            for i in 0..4 {
                let timing = if i == 0 { Timing::Own } else { Timing::Sampled };
                let a = t.on_arrival(call * 4 + i, sent, sent + transit + i * 50 * US, timing);
                assert_eq!(a, Arrival::New);
            }
        }
        let live = t.live();
        assert_eq!((live.received, live.untimed, live.d_count), (40, 0, 9));
        assert!(
            (live.d_sum_ns / live.d_count as f64 - 4_000.0).abs() < 1e-6,
            "{live:?}"
        );
        // A shared datagram: untimed, and the next timed one starts a new chain.
        t.on_arrival(40, 1_000 * US, 1_010 * US, Timing::Shared);
        t.on_arrival(41, 1_100 * US, 1_190 * US, Timing::Own);
        t.on_arrival(42, 1_200 * US, 1_210 * US, Timing::Own);
        let after = t.live();
        assert_eq!((after.untimed, after.d_count), (1, 10));
        assert!(
            (after.d_sum_ns - live.d_sum_ns - 80_000.0).abs() < 1e-6,
            "{after:?}"
        );
    }

    /// Issue #37, item 28: stamps far from the receiver's clock (a constant
    /// offset of 2^61, or 0 and 2^62 - 1 in turn) gave a jitter of 0.0 µs
    /// or of the arrivals' spacing. They are untimed and counted as far;
    /// D is taken across them between the timed ones, and a minute's skew
    /// either way is allowed.
    #[test]
    fn send_times_far_from_the_receiver_s_clock_are_untimed() {
        const ZERO: u64 = 1_800_000_000_000_000_000; // the receiver's realtime at its zero
        let run = |stamp: &dyn Fn(u64, u64) -> u64| {
            let mut t = SeqTracker::new();
            t.set_zero(ZERO);
            // 1,000 datagrams 1 ms apart, 50 µs in transit, with a 10 µs wobble every other one.
            for i in 0..1_000u64 {
                let sent = 5_000_000 + i * 1_000_000;
                let recv = ZERO + sent + 50_000 + (i % 2) * 10_000;
                assert_eq!(t.on_arrival(i, stamp(i, sent), recv, Timing::Own), Arrival::New);
            }
            t.live()
        };
        let honest = run(&|_, sent| sent);
        assert_eq!((honest.untimed, honest.far, honest.d_count), (0, 0, 999));
        assert!((honest.d_sum_ns / 999.0 - 10_000.0).abs() < 1.0);
        let offset = run(&|_, sent| sent + (1 << 61));
        assert_eq!((offset.untimed, offset.far, offset.d_count), (1_000, 1_000, 0));
        let alternating = run(&|i, _| if i % 2 == 0 { 0 } else { (1 << 62) - 1 });
        assert_eq!((alternating.untimed, alternating.far), (500, 500));
        // Every other stamp far: D bridges them, between the timed ones.
        let isolated = run(&|i, sent| if i % 10 == 5 { 1 << 61 } else { sent });
        assert_eq!((isolated.untimed, isolated.far), (100, 100));
        assert!(isolated.d_count >= 899, "{}", isolated.d_count);
        // A minute either way is a sender's clock; beyond it is not.
        let skewed = |by: i64| run(&move |_, sent| sent.saturating_add_signed(by));
        assert_eq!(skewed(59_000_000_000).far, 0);
        assert_eq!(skewed(-4_000_000).far, 0);
        assert_eq!(skewed(61_000_000_000).far, 1_000);
        // A shared stamp is untimed already, and not counted as far.
        let mut t = SeqTracker::new();
        t.set_zero(ZERO);
        t.on_arrival(0, 1 << 61, ZERO, Timing::Shared);
        assert_eq!((t.live().untimed, t.live().far), (1, 0));
        // Without a zero nothing is judged.
        let mut t = SeqTracker::new();
        t.on_arrival(0, 1 << 61, ZERO, Timing::Own);
        assert_eq!((t.live().untimed, t.live().far), (0, 0));
        let iv = offset.since(&SeqLive::default());
        assert_eq!((iv.untimed, iv.far), (1_000, 1_000));
    }
}
