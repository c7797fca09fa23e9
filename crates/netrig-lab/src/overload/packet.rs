//! TCP SYN segments with their IP header, built by hand for a raw socket: the flood's packets
//! (IPv4 with IP_HDRINCL, IPv6 through an IPPROTO_RAW socket, which includes the header too).
//! Pure functions: the checksums are computed here (RFC 1071 one's-complement sums, the TCP one
//! over the pseudo-header of RFC 793 / RFC 8200 §8.1) and tested against a reference computation.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The SYN's TCP header: 20 bytes and one option, MSS (4 bytes), as a minimal real client sends.
pub const TCP_LEN: usize = 24;
/// An IPv4 SYN: 20-byte header and the TCP header.
pub const V4_LEN: usize = 20 + TCP_LEN;
/// An IPv6 SYN: 40-byte header and the TCP header.
pub const V6_LEN: usize = 40 + TCP_LEN;
/// The MSS the SYNs announce.
pub const MSS: u16 = 1460;
const WINDOW: u16 = 64240;
const TTL: u8 = 64;

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd last byte padded with
/// zero), added to `acc`; not folded.
pub fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

/// Folds a sum to 16 bits and complements it: the checksum field's value.
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// What varies from one SYN to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Syn {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    /// IPv4's identification (ignored for IPv6); IPv6's flow label's low 16 bits.
    pub id: u16,
}

fn tcp_header(s: &Syn, out: &mut [u8]) {
    out[0..2].copy_from_slice(&s.sport.to_be_bytes());
    out[2..4].copy_from_slice(&s.dport.to_be_bytes());
    out[4..8].copy_from_slice(&s.seq.to_be_bytes());
    out[8..12].fill(0); // ack
    out[12] = ((TCP_LEN / 4) as u8) << 4; // data offset
    out[13] = 0x02; // SYN
    out[14..16].copy_from_slice(&WINDOW.to_be_bytes());
    out[16..18].fill(0); // checksum, below
    out[18..20].fill(0); // urgent pointer
    out[20] = 2; // MSS
    out[21] = 4;
    out[22..24].copy_from_slice(&MSS.to_be_bytes());
}

/// An IPv4 SYN from `src` to `dst` into `out`, both checksums filled.
pub fn syn_v4(src: Ipv4Addr, dst: Ipv4Addr, s: &Syn, out: &mut [u8; V4_LEN]) {
    let (ip, tcp) = out.split_at_mut(20);
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&(V4_LEN as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&s.id.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = TTL;
    ip[9] = 6; // TCP
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = fold(sum16(ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    tcp_header(s, tcp);
    // Pseudo-header: source, destination, zero, protocol, TCP length.
    let mut acc = sum16(&src.octets(), 0);
    acc = sum16(&dst.octets(), acc);
    acc += 6 + TCP_LEN as u64;
    let c = fold(sum16(tcp, acc));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

/// An IPv6 SYN from `src` to `dst` into `out`, the TCP checksum filled (IPv6 has none of its own).
pub fn syn_v6(src: Ipv6Addr, dst: Ipv6Addr, s: &Syn, out: &mut [u8; V6_LEN]) {
    let (ip, tcp) = out.split_at_mut(40);
    // Version 6, traffic class 0, a flow label.
    let first = (6u32 << 28) | u32::from(s.id);
    ip[0..4].copy_from_slice(&first.to_be_bytes());
    ip[4..6].copy_from_slice(&(TCP_LEN as u16).to_be_bytes());
    ip[6] = 6; // next header: TCP
    ip[7] = TTL;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    tcp_header(s, tcp);
    // Pseudo-header: source, destination, upper-layer length (32 bits), zero, next header.
    let mut acc = sum16(&src.octets(), 0);
    acc = sum16(&dst.octets(), acc);
    acc += TCP_LEN as u64 + 6;
    let c = fold(sum16(tcp, acc));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: RFC 1071's definition, written as plainly as it reads, byte pair by byte
    /// pair with an end-around carry after every addition (no deferred folding, no chunks).
    fn reference(bytes: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i < bytes.len() {
            let hi = u32::from(bytes[i]);
            let lo = if i + 1 < bytes.len() {
                u32::from(bytes[i + 1])
            } else {
                0
            };
            sum += (hi << 8) | lo;
            if sum > 0xffff {
                sum = (sum & 0xffff) + 1;
            }
            i += 2;
        }
        !(sum as u16)
    }

    fn syn() -> Syn {
        Syn {
            sport: 40123,
            dport: 6387,
            seq: 0xdead_beef,
            id: 0x1c46,
        }
    }

    #[test]
    fn the_ipv4_header_checksum_matches_a_known_header() {
        // The worked example of an IPv4 header checksum (192.168.0.1 -> 192.168.0.199, UDP):
        // its checksum is 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01,
            0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(fold(sum16(&h, 0)), 0xb861);
        assert_eq!(reference(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        // A receiver's check: the sum over the header with its checksum is all ones.
        assert_eq!(reference(&h), 0);
    }

    #[test]
    fn an_ipv4_syn_carries_checksums_the_reference_computes() {
        let (src, dst) = (Ipv4Addr::new(198, 18, 3, 77), Ipv4Addr::new(198, 18, 1, 2));
        let mut p = [0u8; V4_LEN];
        syn_v4(src, dst, &syn(), &mut p);
        // IP header: as the reference computes it over the header with the field zeroed.
        let mut h = p[..20].to_vec();
        let got = u16::from_be_bytes([h[10], h[11]]);
        h[10..12].fill(0);
        assert_eq!(got, reference(&h));
        assert_eq!(reference(&p[..20]), 0, "the receiver's check of the IP header");
        // TCP: over the pseudo-header the reference builds itself.
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.octets());
        pseudo.extend_from_slice(&dst.octets());
        pseudo.extend_from_slice(&[0, 6, 0, TCP_LEN as u8]);
        let mut seg = p[20..].to_vec();
        let got = u16::from_be_bytes([seg[16], seg[17]]);
        seg[16..18].fill(0);
        let whole: Vec<u8> = pseudo.iter().chain(seg.iter()).copied().collect();
        assert_eq!(got, reference(&whole));
        let whole: Vec<u8> = pseudo.iter().chain(p[20..].iter()).copied().collect();
        assert_eq!(reference(&whole), 0, "the receiver's check of the segment");
        // The fields a listener reads.
        assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, V4_LEN);
        assert_eq!(p[9], 6);
        assert_eq!(&p[12..16], &src.octets());
        assert_eq!(&p[16..20], &dst.octets());
        assert_eq!(u16::from_be_bytes([p[20], p[21]]), 40123);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), 6387);
        assert_eq!(u32::from_be_bytes([p[24], p[25], p[26], p[27]]), 0xdead_beef);
        assert_eq!(p[32] >> 4, 6, "data offset: 6 words");
        assert_eq!(p[33], 0x02, "SYN alone");
        assert_eq!(&p[40..44], &[2, 4, 0x05, 0xb4], "MSS 1460");
    }

    #[test]
    fn an_ipv6_syn_carries_the_checksum_the_reference_computes() {
        let src: Ipv6Addr = "2001:db8:0:3::9a1".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8:0:1::2".parse().unwrap();
        let mut p = [0u8; V6_LEN];
        syn_v6(src, dst, &syn(), &mut p);
        assert_eq!(p[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([p[4], p[5]]) as usize, TCP_LEN);
        assert_eq!(p[6], 6);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.octets());
        pseudo.extend_from_slice(&dst.octets());
        pseudo.extend_from_slice(&(TCP_LEN as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 6]);
        let mut seg = p[40..].to_vec();
        let got = u16::from_be_bytes([seg[16], seg[17]]);
        seg[16..18].fill(0);
        let whole: Vec<u8> = pseudo.iter().chain(seg.iter()).copied().collect();
        assert_eq!(got, reference(&whole));
        assert_eq!(&p[8..24], &src.octets());
        assert_eq!(&p[24..40], &dst.octets());
    }

    #[test]
    fn checksums_hold_for_many_random_syns() {
        // Sums that carry many times (high addresses, ports, sequence numbers) agree as well.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = Syn {
                sport: x as u16,
                dport: (x >> 16) as u16,
                seq: (x >> 32) as u32,
                id: (x >> 8) as u16,
            };
            let src = Ipv4Addr::from((x >> 3) as u32);
            let dst = Ipv4Addr::from((x >> 29) as u32);
            let mut p = [0u8; V4_LEN];
            syn_v4(src, dst, &s, &mut p);
            assert_eq!(reference(&p[..20]), 0);
            let mut whole = Vec::new();
            whole.extend_from_slice(&src.octets());
            whole.extend_from_slice(&dst.octets());
            whole.extend_from_slice(&[0, 6, 0, TCP_LEN as u8]);
            whole.extend_from_slice(&p[20..]);
            assert_eq!(reference(&whole), 0);
        }
    }
}
