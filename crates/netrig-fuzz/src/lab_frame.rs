//! The frames netrig's path element reads off a lab link (after the 10-byte
//! virtio-net header that PACKET_VNET_HDR puts before each): it looks only at
//! the EtherType and the IP protocol, to count UDP datagrams apart.
//!
//! Invariants: no panic on any length; a frame is UDP only when it holds the
//! IPv4 or IPv6 EtherType at its place and protocol 17 at the header's
//! protocol (IPv4) or next-header (IPv6) byte, which it must be long enough
//! to hold; cutting the frame before that byte makes it not UDP.

use netrig_lab::element::is_udp;

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
}
