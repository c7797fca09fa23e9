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
}
