//! One-way delay's wire parts: what says that two ends read one clock, and
//! what each end reports of its clock and of the datagrams it received.
//!
//! One-way delay needs the two ends' clocks to agree. Two ends on one
//! kernel (any network namespaces: a lab's hosts, or loopback) read one
//! `CLOCK_REALTIME`; the kernel's boot id
//! (`/proc/sys/kernel/random/boot_id`, a fresh random UUID at every boot)
//! says which kernel an end runs on. The agent says it in its welcome
//! ([`AgentClock`]) hashed with the welcome's nonce ([`boot_hash`]), so that
//! only a client that knows the boot id (one on the same kernel) learns
//! anything from it; a client whose own boot id hashes the same knows the
//! clocks are one, with no offset. An agent that does not say it (an older
//! one): one-way delay is withheld, naming why.
//!
//! Each end reports, with its results, its clock at its time zero and at
//! its *reference* (an instant of its own no later than the other end's
//! time zero: the client's zero, which precedes its `go`; the agent's
//! sending of `data_ready`, which precedes the client's zero), and a
//! histogram of what its receivers measured of each timed datagram: its
//! receive time less its reference less the datagram's send stamp (which
//! counts from the sender's zero). That is the one-way delay plus the
//! sender's zero less the receiver's reference, never negative on one clock,
//! a control exchange at most; the client takes it off when it has both
//! ends' reports ([`OneWayReport::shift_ns`]).

use serde::{Deserialize, Serialize};

/// The length of [`AgentClock::boot_hash`]: SHA-256 in hexadecimal.
pub const BOOT_HASH_LEN: usize = 64;

/// What the agent says of its clock in its welcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentClock {
    /// [`boot_hash`] of the welcome's nonce and the agent's kernel's boot
    /// id: equal to the client's own, both ends read one clock.
    pub boot_hash: String,
}

impl AgentClock {
    /// Checks a clock that came from a peer: [`BOOT_HASH_LEN`] lowercase
    /// hexadecimal digits.
    pub fn check(&self) -> Result<(), crate::ProtoError> {
        let b = &self.boot_hash;
        if b.len() != BOOT_HASH_LEN || !b.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(crate::ProtoError::Violation(format!(
                "the agent's welcome has a boot hash {:?} that is not one ({BOOT_HASH_LEN} lowercase hex digits)",
                b.chars().take(80).collect::<String>()
            )));
        }
        Ok(())
    }
}

/// SHA-256 of `nonce` (the welcome's) followed by `boot_id`, in lowercase
/// hexadecimal: what an agent says of its kernel, and what a client
/// compares with its own.
pub fn boot_hash(nonce: &[u8], boot_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(nonce);
    h.update(boot_id.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The first protocol version with the clock probe (`clock_probe`, answered
/// by `clock_echo`): the client measures the agent's clock's offset from its
/// own, as NTP does, when the two are not one.
pub const CLOCK_PROBE_VERSION: u16 = 7;
/// The most `clock_probe`s an agent answers between two test requests (a
/// client sends [`PROBES_PER_MEASURE`] before a test and as many after it).
pub const MAX_PROBES_PER_TEST: u32 = 64;
/// The exchanges a client makes for one measure of the offset.
pub const PROBES_PER_MEASURE: u32 = 16;
/// The longest an agent may say it held a probe (its receive to its send of
/// the echo): more is a violation.
pub const MAX_ECHO_HOLD_NS: u64 = 1_000_000_000;
/// What one reading of `CLOCK_REALTIME` may be off by, added to the bound
/// (two reads at each end, each within a few hundred ns on Linux's vDSO).
pub const CLOCK_READ_ERROR_NS: u64 = 2_000;
/// The bound under which the offset's error is always shown beside the
/// figures; above it, the bound must be under [`OFFSET_BOUND_SHARE`] of a
/// direction's median one-way delay, or that direction is withheld.
pub const OFFSET_BOUND_FLOOR_NS: u64 = 100_000;
/// See [`OFFSET_BOUND_FLOOR_NS`].
pub const OFFSET_BOUND_SHARE: f64 = 0.10;

/// One exchange of the clock probe, as NTP's: `t1` the client's send,
/// `t2` the agent's receive, `t3` the agent's send, `t4` the client's
/// receive, each that end's `CLOCK_REALTIME` in ns since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl ClockSample {
    /// The round trip less the agent's hold: (t4 − t1) − (t3 − t2), ns;
    /// `None` when the client's or the agent's times go backwards.
    pub fn round_trip_ns(&self) -> Option<u64> {
        let total = self.t4.checked_sub(self.t1)?;
        let held = self.t3.checked_sub(self.t2)?;
        total.checked_sub(held)
    }

    /// The agent's clock less the client's, ns: ((t2 − t1) + (t3 − t4)) / 2.
    pub fn offset_ns(&self) -> i128 {
        let d = |a: u64, b: u64| a as i128 - b as i128;
        (d(self.t2, self.t1) + d(self.t3, self.t4)) / 2
    }
}

/// The agent's clock's offset from the client's, measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// The agent's clock less the client's, ns.
    pub offset_ns: i64,
    /// The most the true offset may differ from `offset_ns`, ns: half the
    /// least round trip, plus [`CLOCK_READ_ERROR_NS`].
    pub bound_ns: u64,
    /// The exchanges it was taken from.
    pub exchanges: u32,
}

impl ClockOffset {
    /// From exchanges: the one of least round trip (its queues the least,
    /// as NTP's clock filter), offset = ((t2 − t1) + (t3 − t4)) / 2, bound
    /// = that round trip / 2 + the clocks' read error. `None` with no
    /// exchange whose times go forwards, or an offset beyond ±i64.
    pub fn from_samples(samples: &[ClockSample]) -> Option<ClockOffset> {
        let best = samples
            .iter()
            .filter_map(|s| s.round_trip_ns().map(|r| (r, s)))
            .min_by_key(|(r, _)| *r)?;
        Some(ClockOffset {
            offset_ns: i64::try_from(best.1.offset_ns()).ok()?,
            bound_ns: (best.0 / 2).saturating_add(CLOCK_READ_ERROR_NS),
            exchanges: samples.len() as u32,
        })
    }

    /// Two measures, before and after a test: their mean, with a bound that
    /// covers both measures' bounds and half the drift between them (the
    /// offset during the test lay between the two). Also the drift (after
    /// less before), ns.
    pub fn across(before: ClockOffset, after: ClockOffset) -> (ClockOffset, i64) {
        let drift = after.offset_ns as i128 - before.offset_ns as i128;
        let mean = (before.offset_ns as i128 + after.offset_ns as i128) / 2;
        let half = (drift.unsigned_abs() / 2).min(u64::MAX as u128) as u64;
        (
            ClockOffset {
                offset_ns: mean as i64,
                bound_ns: before.bound_ns.max(after.bound_ns).saturating_add(half),
                exchanges: before.exchanges + after.exchanges,
            },
            drift.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        )
    }
}

/// Whether a direction's figures may be shown beside an offset bound of
/// `bound_ns`: the bound is under [`OFFSET_BOUND_FLOOR_NS`], or under
/// [`OFFSET_BOUND_SHARE`] of the median `p50_ns`.
pub fn bound_fits(bound_ns: u64, p50_ns: f64) -> bool {
    bound_ns <= OFFSET_BOUND_FLOOR_NS || (bound_ns as f64) <= OFFSET_BOUND_SHARE * p50_ns
}

/// How the client judged the two ends' clocks (kept on its own report,
/// never sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClockCheck {
    /// Not judged (an agent's own report).
    #[default]
    Unknown,
    /// One clock: how the client knows.
    Shared(String),
    /// Not known to be one clock: why (one-way delay is withheld for it).
    NotShared(String),
    /// Two clocks whose offset the client measured over the control
    /// connection (the clock probe): how, the offset and its bound, and the
    /// drift when it measured again after the test.
    Measured {
        how: String,
        offset: ClockOffset,
        drift_ns: Option<i64>,
    },
}

/// One end's clock and what its receivers measured (see the module
/// documentation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayReport {
    /// `CLOCK_REALTIME` at this end's time zero, ns since the epoch.
    pub zero_ns: u64,
    /// `CLOCK_REALTIME` at this end's reference, ns since the epoch: no
    /// later than the other end's zero.
    pub ref_ns: u64,
    /// Of every timed datagram this end received inside its window: its
    /// receive time less `ref_ns` less its send stamp, in ns; base64 of
    /// HdrHistogram's V2 encoding (`netrig_metrics::LatencyRecorder`).
    /// Absent: this end received no timed datagram in its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<String>,
    /// The client's judgement of the clocks (its own report only).
    #[serde(skip)]
    pub clocks: ClockCheck,
}

impl OneWayReport {
    /// What to take off the histogram of `receiver`'s values, whose datagrams
    /// `sender` sent, to read one-way delays: the sender's zero less the
    /// receiver's reference, in ns. `None` when it is negative (the
    /// reference was no earlier than the sender's zero: not one clock) or
    /// more than an hour (no set-up lasts so long).
    pub fn shift_ns(sender: &OneWayReport, receiver: &OneWayReport) -> Option<u64> {
        let s = sender.zero_ns.checked_sub(receiver.ref_ns)?;
        (s <= 3_600_000_000_000).then_some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_hash_is_checked() {
        let c = |s: &str| AgentClock { boot_hash: s.into() }.check();
        let h = boot_hash(&[1; 32], "0f4c2a4e-6c3b-4a8e-9d7e-2b1c3d4e5f60");
        assert!(c(&h).is_ok(), "{h}");
        assert!(c("").is_err());
        assert!(c(&h.to_uppercase()).is_err());
        assert!(c(&format!("{h}0")).is_err());
        assert!(c(&"g".repeat(64)).is_err());
    }

    #[test]
    fn the_boot_hash_is_sha256_of_the_nonce_and_the_boot_id() {
        let id = "0f4c2a4e-6c3b-4a8e-9d7e-2b1c3d4e5f60";
        assert_eq!(boot_hash(&[1; 32], id), boot_hash(&[1; 32], id));
        assert_ne!(boot_hash(&[1; 32], id), boot_hash(&[2; 32], id));
        assert_ne!(
            boot_hash(&[1; 32], id),
            boot_hash(&[1; 32], "0f4c2a4e-6c3b-4a8e-9d7e-2b1c3d4e5f61")
        );
        // Python: hashlib.sha256(bytes(32) + b"x").hexdigest()
        assert_eq!(
            boot_hash(&[0; 32], "x"),
            "fdded6faced1af47fdaaac589602f58e0e040a882627806c42ddcc38da604cf0"
        );
    }

    #[test]
    fn the_shift_is_the_senders_zero_less_the_receivers_reference() {
        let r = |zero_ns, ref_ns| OneWayReport {
            zero_ns,
            ref_ns,
            ..OneWayReport::default()
        };
        // The client (zero 1000, its reference) sends, the agent (reference 900) receives.
        assert_eq!(OneWayReport::shift_ns(&r(1000, 1000), &r(1050, 900)), Some(100));
        // A reference after the sender's zero: not one clock.
        assert_eq!(OneWayReport::shift_ns(&r(1000, 1000), &r(1050, 1001)), None);
        // Absurdly far apart.
        assert_eq!(OneWayReport::shift_ns(&r(u64::MAX, 0), &r(0, 0)), None);
    }

    #[test]
    fn the_offset_is_ntps_from_the_exchange_of_least_round_trip() {
        const T: u64 = 1_800_000_000_000_000_000;
        // The agent's clock 50 ms ahead; 100 µs each way, held 20 µs.
        let ahead = 50_000_000;
        let s = |out: u64, back: u64| ClockSample {
            t1: T,
            t2: T + out + ahead,
            t3: T + out + 20_000 + ahead,
            t4: T + out + 20_000 + back,
        };
        let even = s(100_000, 100_000);
        assert_eq!(even.round_trip_ns(), Some(200_000));
        assert_eq!(even.offset_ns(), ahead as i128);
        // An uneven exchange (300 µs out, 100 back) is off by half the difference
        // and has the larger round trip, so the even one is taken.
        let uneven = s(300_000, 100_000);
        assert_eq!(uneven.offset_ns(), ahead as i128 + 100_000);
        let o = ClockOffset::from_samples(&[uneven, even, uneven]).unwrap();
        assert_eq!(o.offset_ns, ahead as i64);
        assert_eq!(o.bound_ns, 100_000 + CLOCK_READ_ERROR_NS);
        assert_eq!(o.exchanges, 3);
        // The true offset lies within the bound, whatever the asymmetry.
        let o = ClockOffset::from_samples(&[uneven]).unwrap();
        assert!((o.offset_ns - ahead as i64).unsigned_abs() <= o.bound_ns);
        // The agent behind: a negative offset.
        let behind = ClockSample {
            t1: T,
            t2: T - 1_000_000 + 50,
            t3: T - 1_000_000 + 60,
            t4: T + 110,
        };
        assert_eq!(
            ClockOffset::from_samples(&[behind]).unwrap().offset_ns,
            -1_000_000
        );
        // Times that go backwards are no exchange; none left, no offset.
        let back = ClockSample {
            t1: T,
            t2: T,
            t3: T - 1,
            t4: T + 5,
        };
        assert_eq!(back.round_trip_ns(), None);
        assert_eq!(ClockSample { t4: T - 1, ..even }.round_trip_ns(), None);
        assert_eq!(ClockOffset::from_samples(&[back]), None);
        assert_eq!(ClockOffset::from_samples(&[]), None);
        // Extremes never panic.
        let far = ClockSample {
            t1: 0,
            t2: u64::MAX,
            t3: u64::MAX,
            t4: 0,
        };
        assert_eq!(ClockOffset::from_samples(&[far]), None);
    }

    #[test]
    fn two_measures_give_their_mean_and_a_bound_that_covers_the_drift() {
        let m = |offset_ns, bound_ns| ClockOffset {
            offset_ns,
            bound_ns,
            exchanges: 16,
        };
        let (o, drift) = ClockOffset::across(m(1_000, 30_000), m(5_000, 20_000));
        assert_eq!(drift, 4_000);
        assert_eq!(o.offset_ns, 3_000);
        assert_eq!(o.bound_ns, 32_000);
        assert_eq!(o.exchanges, 32);
        let (_, drift) = ClockOffset::across(m(i64::MAX, 0), m(i64::MIN, 0));
        assert_eq!(drift, i64::MIN);
    }

    #[test]
    fn a_bound_fits_under_the_floor_or_a_tenth_of_the_median() {
        assert!(bound_fits(OFFSET_BOUND_FLOOR_NS, 1_000.0));
        assert!(!bound_fits(OFFSET_BOUND_FLOOR_NS + 1, 1_000.0));
        assert!(bound_fits(500_000, 5_000_000.0));
        assert!(!bound_fits(500_001, 5_000_000.0));
    }
}
