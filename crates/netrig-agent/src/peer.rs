//! Who a peer is: its address as the agent compares it (an IPv4-mapped IPv6
//! address as the IPv4 address it maps), whether `--allow` serves it, and
//! the client whose places it takes.

use std::net::{IpAddr, Ipv6Addr};

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Whether `--allow` lets `ip` in (an IPv4-mapped address counts as IPv4).
pub(crate) fn allowed(allow: &[ipnet::IpNet], ip: IpAddr) -> bool {
    let ip = canonical_ip(ip);
    allow.is_empty() || allow.iter().any(|n| n.contains(&ip))
}

/// Whose share of `--max-sessions-per-client` a session takes: its IPv4
/// address, or its IPv6 address's /64 (one host can have a whole /64).
pub(crate) fn client_key(ip: IpAddr) -> IpAddr {
    match canonical_ip(ip) {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_takes_mapped_addresses_as_ipv4_and_empty_means_any() {
        let allow: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(allowed(&allow, ip("10.1.2.3")));
        assert!(allowed(&allow, ip("::ffff:10.1.2.3")));
        assert!(allowed(&allow, ip("fd12::1")));
        assert!(!allowed(&allow, ip("127.0.0.1")));
        assert!(!allowed(&allow, ip("::1")));
        assert!(allowed(&[], ip("192.0.2.1")));
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            client_key(ip("2001:db8:1:2:aaaa::1")),
            client_key(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_ne!(
            client_key(ip("2001:db8:1:2::1")),
            client_key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(client_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
    }
}
