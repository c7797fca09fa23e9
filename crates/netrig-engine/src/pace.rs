//! The paced sender's schedule, shared by udp-stream and the TCP streams
//! (`-b`): unit k (a datagram, or a TCP message) of a flow is due at time
//! zero + k × unit bits / rate. When one is due, those due within the
//! quantum after it may leave with it: never behind schedule, never more
//! than a quantum ahead. Integer arithmetic throughout, so the schedule does
//! not drift however long the test.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    /// Bits per unit × 10^9 (so that times come out in ns).
    unit_bits_ns: u128,
    rate_bps: u128,
    /// Units that may leave together: the quantum over the gap between
    /// units, at least 1.
    quantum: u64,
}

impl Schedule {
    /// A schedule of `unit_bytes`-byte units at `rate_bps` from `start`,
    /// waking at most once per `quantum`.
    pub fn new(start: Instant, unit_bytes: usize, rate_bps: u64, quantum: Duration) -> Schedule {
        let unit_bits_ns = (unit_bytes.max(1) as u128) * 8 * 1_000_000_000;
        let rate_bps = u128::from(rate_bps.max(1));
        let quantum = (quantum.as_nanos() * rate_bps / unit_bits_ns).max(1);
        Schedule {
            start,
            unit_bits_ns,
            rate_bps,
            quantum: quantum.min(u64::MAX as u128) as u64,
        }
    }

    /// Units due by `now` (unit 0 is due at time zero).
    fn due_by(&self, now: Instant) -> u64 {
        let e = now.saturating_duration_since(self.start).as_nanos();
        (e * self.rate_bps / self.unit_bits_ns + 1).min(u64::MAX as u128) as u64
    }

    /// When unit `k` is due.
    pub fn due_at(&self, k: u64) -> Instant {
        let ns = (u128::from(k) * self.unit_bits_ns).div_ceil(self.rate_bps);
        self.start + Duration::from_nanos(ns.min(u64::MAX as u128) as u64)
    }

    /// How many units were due by `now` and have not left, when `sent` have:
    /// how far behind its schedule the sender is.
    pub fn overdue(&self, now: Instant, sent: u64) -> u64 {
        self.due_by(now).saturating_sub(sent)
    }

    /// How many units may leave at `now` when `sent` have: 0 until the next
    /// one is due; then those due and those due within the quantum.
    pub fn allowed(&self, now: Instant, sent: u64) -> u64 {
        let due = self.due_by(now);
        if due <= sent {
            0
        } else {
            due + self.quantum - 1 - sent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_behind_never_more_than_a_quantum_ahead() {
        let t0 = Instant::now();
        // 1000-byte units at 8 Mbit/s: one per ms; a 3.5 ms quantum is 3 units.
        let s = Schedule::new(t0, 1000, 8_000_000, Duration::from_micros(3500));
        assert_eq!(s.allowed(t0, 0), 3, "unit 0 and the two due within the quantum");
        assert_eq!(s.allowed(t0, 3), 0);
        assert_eq!((s.overdue(t0, 0), s.overdue(t0, 3)), (1, 0));
        let behind = t0 + Duration::from_micros(9500);
        assert_eq!((s.overdue(behind, 3), s.allowed(behind, 3)), (7, 9));
        assert_eq!(s.due_at(3), t0 + Duration::from_millis(3));
        let at = t0 + Duration::from_millis(3);
        assert_eq!(s.allowed(at, 3), 3);
        // Far behind: everything due now, plus the quantum.
        let late = t0 + Duration::from_millis(100);
        assert_eq!(s.allowed(late, 6), 101 + 2 - 6);
        // A quantum shorter than the gap is one unit at a time.
        let one = Schedule::new(t0, 1000, 8_000_000, Duration::from_micros(100));
        assert_eq!(one.allowed(t0, 0), 1);
        assert_eq!(one.allowed(t0 + Duration::from_micros(999), 1), 0);
        assert_eq!(one.allowed(t0 + Duration::from_millis(1), 1), 1);
    }

    #[test]
    fn exact_over_long_runs() {
        let t0 = Instant::now();
        // 1472-byte datagrams at 3 Mbit/s: a gap of 3.925333... ms, not a whole number of ns.
        let s = Schedule::new(t0, 1472, 3_000_000, Duration::from_micros(1));
        let hour = Duration::from_secs(3600);
        let units = 3_000_000u128 * 3600 / (1472 * 8);
        assert_eq!(s.due_by(t0 + hour) as u128, units + 1);
        let k = units as u64;
        assert!(s.due_at(k) <= t0 + hour && s.due_at(k + 1) > t0 + hour);
    }
}
