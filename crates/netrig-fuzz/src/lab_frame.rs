//! The frames netrig's path element reads off a lab link (after the 10-byte
//! virtio-net header that PACKET_VNET_HDR puts before each): it looks only at
//! the EtherType and the IP protocol, to count UDP datagrams apart.
//!
//! Invariants: no panic on any length; a frame is UDP only when it holds the
//! IPv4 or IPv6 EtherType at its place and protocol 17 at the header's
//! protocol (IPv4) or next-header (IPv6) byte, which it must be long enough
//! to hold; cutting the frame before that byte makes it not UDP.
//!
//! It also reads a frame's size on the wire and DSCP (its own queue), and corrupts frames:
//! no panic on any header (a virtio-net header's checksum offsets or GSO size from the kernel
//! are trusted no further than the frame's length); a frame's wire size is at least its length
//! and a non-GSO frame's is exactly it; corruption leaves the length alone and flips a bit
//! inside the frame, after the IP header, or does nothing.
//!
//! And it recognises pure TCP acknowledgements and their SACK option (counted per direction):
//! no panic on any option list; only a TCP frame (protocol 6) can be one.

use netrig_lab::element::{is_udp, Rng};
use netrig_lab::pathmodel::{corrupt, dscp, is_gso, pure_ack, wire};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    const ETHERTYPE: usize = 10 + 12;
    const IP: usize = 10 + 14;
    let udp = is_udp(data);
    let want = match data.get(ETHERTYPE..ETHERTYPE + 2) {
        Some([0x08, 0x00]) => data.get(IP + 9) == Some(&17),
        Some([0x86, 0xdd]) => data.get(IP + 6) == Some(&17),
        _ => false,
    };
    assert_eq!(udp, want, "is_udp of a {}-byte frame", data.len());
    if udp {
        let at = if data[ETHERTYPE] == 0x08 { IP + 9 } else { IP + 6 };
        assert!(
            !is_udp(&data[..at]),
            "a frame cut before its protocol byte is not UDP"
        );
    }
    let len = data.len().saturating_sub(10) as u64;
    let (bytes, segs) = wire(data);
    assert!(
        bytes >= len && segs >= 1,
        "wire({}) = ({bytes}, {segs})",
        data.len()
    );
    if !is_gso(data) {
        assert_eq!((bytes, segs), (len, 1));
    }
    if let Some(d) = dscp(data) {
        assert!(d < 64);
    }
    if pure_ack(data).is_some() {
        let proto = match data.get(ETHERTYPE..ETHERTYPE + 2) {
            Some([0x08, 0x00]) => data.get(IP + 9),
            _ => data.get(IP + 6),
        };
        assert_eq!(proto, Some(&6), "a pure acknowledgement is TCP");
    }
    let mut f = data.to_vec();
    let seed = data
        .iter()
        .fold(1u64, |a, b| a.wrapping_mul(31).wrapping_add(*b as u64));
    if let Some(at) = corrupt(&mut f, &mut Rng::new(seed)) {
        assert_eq!(f.len(), data.len());
        assert!(10 + at < f.len() && at >= 14 + 20, "flipped byte {at}");
        assert!(!is_gso(data));
    } else {
        assert_eq!(f, data, "an uncorrupted frame is unchanged");
    }
}
