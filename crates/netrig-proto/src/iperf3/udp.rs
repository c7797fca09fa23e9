//! iperf3's UDP streams: the 4-byte datagrams that set a stream up, and the
//! header every data datagram starts with (iperf_udp.c).

/// A client's first datagram on a new UDP stream (iperf3's UDP_CONNECT_MSG,
/// 0x36373839 in the sender's byte order on little-endian hosts, which
/// iperf3 defines byte-swapped on big-endian ones: "9876" on the wire).
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer from the socket it will use for the stream
/// (UDP_CONNECT_REPLY: "6789" on the wire).
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// The answer of iperf3 servers before 3.17 (987654321 as a little-endian
/// host writes it), which clients still accept.
pub const UDP_LEGACY_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();

/// The start of each data datagram: the sender's clock when it sent it,
/// and its number in the stream, counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    pub sec: u32,
    pub usec: u32,
    pub seq: u64,
}

impl UdpHeader {
    /// The header's length: 12 bytes, 16 with 64-bit counters
    /// (`--udp-counters-64bit`).
    pub fn len(counters64: bool) -> usize {
        if counters64 {
            16
        } else {
            12
        }
    }

    /// Writes the header at the start of `buf` (which holds at least
    /// [`UdpHeader::len`] bytes); a 32-bit counter keeps the low bits.
    pub fn encode(&self, buf: &mut [u8], counters64: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters64 {
            buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
    }

    /// Reads the header of a datagram, if it is long enough to hold one.
    pub fn decode(buf: &[u8], counters64: bool) -> Option<UdpHeader> {
        let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if buf.len() < UdpHeader::len(counters64) {
            return None;
        }
        let seq = if counters64 {
            u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"))
        } else {
            word(8) as u64
        };
        Some(UdpHeader {
            sec: word(0),
            usec: word(4),
            seq,
        })
    }

    /// The send time in nanoseconds of the Unix epoch.
    pub fn nanos(&self) -> u64 {
        self.sec as u64 * 1_000_000_000 + (self.usec as u64).min(999_999) * 1_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_up_datagrams_are_iperf3s_bytes() {
        assert_eq!(u32::from_le_bytes(UDP_CONNECT_MSG), 0x3637_3839);
        assert_eq!(u32::from_le_bytes(UDP_CONNECT_REPLY), 0x3938_3736);
        assert_eq!(UDP_LEGACY_REPLY, [0xB1, 0x68, 0xDE, 0x3A]);
    }

    #[test]
    fn headers_of_both_widths_round_trip() {
        let h = UdpHeader {
            sec: 1_800_000_000,
            usec: 999_999,
            seq: (1 << 32) + 5,
        };
        let mut b = [0u8; 16];
        h.encode(&mut b, true);
        assert_eq!(UdpHeader::decode(&b, true), Some(h));
        h.encode(&mut b, false);
        assert_eq!(
            UdpHeader::decode(&b[..12], false),
            Some(UdpHeader { seq: 5, ..h })
        );
        assert_eq!(UdpHeader::decode(&b[..11], false), None);
        assert_eq!(&b[..4], &1_800_000_000u32.to_be_bytes());
        assert_eq!(h.nanos(), 1_800_000_000_999_999_000);
    }
}
