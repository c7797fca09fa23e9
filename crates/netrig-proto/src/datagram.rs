//! The 28-byte header at the start of every UDP test datagram (udp-stream
//! data, udp-rr requests and the responses that echo them, with the
//! responder's own timestamp), all big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | test id: the session cookie's first 8 bytes |
//! | 8..12 | flow id |
//! | 12..20 | sequence number |
//! | 20..28 | the sender's timestamp, ns, and two marks |
//!
//! The timestamp counts nanoseconds since the test's start (far below
//! 2^62); its top bits mark a time that is not the datagram's own:
//! [`SHARED_STAMP`] for a datagram that left in one UDP GSO send with
//! others, [`SAMPLED_STAMP`] (with [`SHARED_STAMP`], so that a receiver
//! that knows only the first takes it for untimed) for one that is not the
//! first of a sendmmsg call of separate datagrams.
//!
//! Receivers parse it from bytes any host may send to their port, so
//! [`DatagramHeader::decode`] takes any slice and answers `None` for one too
//! short to hold a header; whatever follows the header is payload and is
//! ignored here.

use crate::spec::UDP_HEADER_LEN;
use netrig_metrics::Timing;

/// Marks a send timestamp shared with the other datagrams of one GSO send.
pub const SHARED_STAMP: u64 = 1 << 63;
/// Marks (with [`SHARED_STAMP`]) a datagram after the first of a sendmmsg
/// call of separate datagrams: only the first left at the call's time.
pub const SAMPLED_STAMP: u64 = 1 << 62;
/// Both marks.
pub const STAMP_MARKS: u64 = SHARED_STAMP | SAMPLED_STAMP;

/// The header of one UDP test datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatagramHeader {
    /// The cookie's first 8 bytes ([`crate::SessionCookie::test_id`]).
    pub test_id: u64,
    /// The flow's id (its index in `TestSpec::flow_plan`).
    pub flow: u32,
    /// Sequence number, from 0 per flow.
    pub seq: u64,
    /// The sender's timestamp in ns (flags, such as the engine's
    /// shared-stamp bit, travel in it unchanged).
    pub stamp_ns: u64,
}

impl DatagramHeader {
    /// Bytes of the header: [`UDP_HEADER_LEN`].
    pub const LEN: usize = UDP_HEADER_LEN as usize;

    /// The header's 28 bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..8].copy_from_slice(&self.test_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.flow.to_be_bytes());
        b[12..20].copy_from_slice(&self.seq.to_be_bytes());
        b[20..28].copy_from_slice(&self.stamp_ns.to_be_bytes());
        b
    }

    /// Writes the header over the first [`Self::LEN`] bytes of `buf`.
    /// Returns false, writing nothing, when `buf` is shorter.
    pub fn write(&self, buf: &mut [u8]) -> bool {
        match buf.get_mut(..Self::LEN) {
            Some(head) => {
                head.copy_from_slice(&self.encode());
                true
            }
            None => false,
        }
    }

    /// The sender's time, ns since the test's start, without the marks.
    pub fn sent_ns(&self) -> u64 {
        self.stamp_ns & !STAMP_MARKS
    }

    /// How this datagram's timestamps stand for jitter, given whether its
    /// receive timestamp was its own (`own_rx`: not one GRO buffer's, nor the
    /// receiver's own clock for a whole batch).
    pub fn timing(&self, own_rx: bool) -> Timing {
        if !own_rx {
            Timing::Shared
        } else if self.stamp_ns & SAMPLED_STAMP != 0 {
            Timing::Sampled
        } else if self.stamp_ns & SHARED_STAMP != 0 {
            Timing::Shared
        } else {
            Timing::Own
        }
    }

    /// The header at the start of `d`, or `None` when `d` is shorter than
    /// [`Self::LEN`]. Never panics; bytes after the header are not read.
    pub fn decode(d: &[u8]) -> Option<Self> {
        let d = d.get(..Self::LEN)?;
        let be8 = |i: usize| d[i..i + 8].try_into().ok().map(u64::from_be_bytes);
        Some(DatagramHeader {
            test_id: be8(0)?,
            flow: u32::from_be_bytes(d[8..12].try_into().ok()?),
            seq: be8(12)?,
            stamp_ns: be8(20)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h() -> DatagramHeader {
        DatagramHeader {
            test_id: 0x0102_0304_0506_0708,
            flow: 0x0a0b_0c0d,
            seq: u64::MAX - 1,
            stamp_ns: 1 << 63 | 42,
        }
    }

    #[test]
    fn layout_is_big_endian_in_the_documented_order() {
        let b = h().encode();
        assert_eq!(&b[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..12], &[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&b[12..20], &(u64::MAX - 1).to_be_bytes());
        assert_eq!(&b[20..28], &(1u64 << 63 | 42).to_be_bytes());
        assert_eq!(DatagramHeader::LEN, 28);
    }

    #[test]
    fn roundtrip_and_payload_is_ignored() {
        let mut d = h().encode().to_vec();
        assert_eq!(DatagramHeader::decode(&d), Some(h()));
        d.extend_from_slice(b"payload");
        assert_eq!(DatagramHeader::decode(&d), Some(h()));
    }

    #[test]
    fn short_input_is_none_not_a_panic() {
        let b = h().encode();
        for n in 0..DatagramHeader::LEN {
            assert_eq!(DatagramHeader::decode(&b[..n]), None, "{n} bytes");
        }
    }

    #[test]
    fn write_needs_room_and_leaves_the_payload() {
        let mut short = [0xffu8; 27];
        assert!(!h().write(&mut short));
        assert_eq!(short, [0xff; 27], "nothing written");
        let mut buf = [0xeeu8; 40];
        assert!(h().write(&mut buf));
        assert_eq!(DatagramHeader::decode(&buf), Some(h()));
        assert_eq!(&buf[28..], &[0xee; 12]);
    }

    #[test]
    fn the_marks_say_how_a_stamp_stands_and_leave_the_time() {
        let at = |stamp_ns| DatagramHeader { stamp_ns, ..h() };
        assert_eq!(at(42).timing(true), Timing::Own);
        assert_eq!(at(42).timing(false), Timing::Shared);
        assert_eq!(at(SHARED_STAMP | 42).timing(true), Timing::Shared);
        assert_eq!(at(STAMP_MARKS | 42).timing(true), Timing::Sampled);
        assert_eq!(at(STAMP_MARKS | 42).timing(false), Timing::Shared);
        for s in [42, SHARED_STAMP | 42, STAMP_MARKS | 42] {
            assert_eq!(at(s).sent_ns(), 42);
        }
    }
}
