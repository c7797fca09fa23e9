//! IP addresses as users write them, with an IPv6 scope (zone) when the
//! address needs one: `fe80::1%eth0` or `fe80::1%2` (an interface's name or
//! index). A link-local address means nothing without the link it is on,
//! so one without a scope is refused with the way to add it.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

/// An IP address and, for IPv6, the index of the interface it is scoped to
/// (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopedIp {
    pub ip: IpAddr,
    pub scope_id: u32,
}

impl ScopedIp {
    /// The socket address with `port`, its scope in the IPv6 address.
    pub fn with_port(self, port: u16) -> SocketAddr {
        match self.ip {
            IpAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(v6, port, 0, self.scope_id)),
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), port),
        }
    }
}

/// Reads `text` as an IP address: IPv4, or IPv6 in brackets or not, with
/// `%interface` or `%index` after an IPv6 one. `Ok(None)`: not an address (a
/// host name, for a resolver). Errors say what is wrong with the address;
/// the caller names the option.
pub fn parse_ip(text: &str) -> Result<Option<ScopedIp>, String> {
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    let (addr, scope) = match bare.split_once('%') {
        Some((a, s)) => (a, Some(s)),
        None => (bare, None),
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return match scope {
            Some(_) => Err(format!(
                "a scope (%interface) follows an IPv6 address, and {addr:?} is not one"
            )),
            None => Ok(None),
        };
    };
    let v6 = match ip {
        IpAddr::V4(_) if scope.is_some() => {
            return Err(format!(
                "a scope (%interface) is for IPv6 addresses; {addr} is IPv4"
            ))
        }
        IpAddr::V4(_) => return Ok(Some(ScopedIp { ip, scope_id: 0 })),
        IpAddr::V6(v6) => v6,
    };
    let scope_id = match scope {
        Some(s) => interface_index(s)?,
        None if needs_scope(&v6) => {
            return Err(format!(
                "{v6} is a link-local address, which is ambiguous without the interface it \
                 is on: add it, as in {v6}%eth0 or {v6}%2 (its name or index, see `ip link`)"
            ))
        }
        None => 0,
    };
    Ok(Some(ScopedIp { ip, scope_id }))
}

/// Whether an IPv6 address means something only with an interface: a
/// link-local unicast (fe80::/10) or link-local multicast address.
pub fn needs_scope(ip: &Ipv6Addr) -> bool {
    ip.is_unicast_link_local() || (ip.is_multicast() && ip.segments()[0] & 0x000f == 2)
}

/// An interface's index from its name or from the index itself.
fn interface_index(scope: &str) -> Result<u32, String> {
    if scope.is_empty() {
        return Err("nothing after '%': give the interface (%eth0) or its index (%2)".into());
    }
    if let Ok(n) = scope.parse::<u32>() {
        return if n == 0 {
            Err("interface index 0 is no interface".into())
        } else {
            Ok(n)
        };
    }
    let name = std::ffi::CString::new(scope).map_err(|_| format!("{scope:?} is not an interface name"))?;
    // SAFETY: `name` is a valid NUL-terminated string for the call's duration.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(format!(
            "no interface named {scope:?} on this host ({}; see `ip link`)",
            std::io::Error::last_os_error()
        )),
        n => Ok(n),
    }
}

/// The local address to bind for a connection to `peer` from `ip` (`--bind`),
/// port chosen by the kernel: a link-local `ip` takes the peer's scope, the
/// link both are on.
pub fn local_for(ip: IpAddr, peer: SocketAddr) -> SocketAddr {
    match (ip, peer) {
        (IpAddr::V6(v6), SocketAddr::V6(p)) if needs_scope(&v6) => {
            SocketAddr::V6(SocketAddrV6::new(v6, 0, 0, p.scope_id()))
        }
        _ => SocketAddr::new(ip, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo_index() -> u32 {
        let lo = std::ffi::CString::new("lo").unwrap();
        // SAFETY: a valid NUL-terminated string.
        unsafe { libc::if_nametoindex(lo.as_ptr()) }
    }

    #[test]
    fn plain_addresses_and_names() {
        assert_eq!(
            parse_ip("192.0.2.1").unwrap().unwrap().with_port(1).to_string(),
            "192.0.2.1:1"
        );
        assert_eq!(
            parse_ip("[2001:db8::1]")
                .unwrap()
                .unwrap()
                .with_port(1)
                .to_string(),
            "[2001:db8::1]:1"
        );
        assert_eq!(parse_ip("::1").unwrap().unwrap().scope_id, 0);
        assert_eq!(parse_ip("agent.example").unwrap(), None);
        assert_eq!(parse_ip("fe80::1.example").unwrap(), None);
    }

    /// Issue #11: `serve --bind 'fe80::1%lo'` was "invalid IP address syntax".
    #[test]
    fn a_scope_by_name_or_index_goes_into_the_socket_address() {
        let lo = lo_index();
        assert!(lo > 0, "this host has a loopback interface");
        for text in ["fe80::1%lo", "[fe80::1%lo]", &format!("fe80::1%{lo}")] {
            let s = parse_ip(text).unwrap().unwrap();
            assert_eq!(s.scope_id, lo, "{text}");
            match s.with_port(6387) {
                SocketAddr::V6(a) => {
                    assert_eq!(a.scope_id(), lo);
                    assert_eq!(*a.ip(), "fe80::1".parse::<Ipv6Addr>().unwrap());
                }
                a => panic!("{a}"),
            }
        }
        // A global address may carry one too (the kernel ignores it there).
        assert_eq!(parse_ip("2001:db8::1%lo").unwrap().unwrap().scope_id, lo);
    }

    #[test]
    fn a_link_local_address_without_a_scope_says_how_to_add_one() {
        let e = parse_ip("fe80::1").unwrap_err();
        assert!(e.starts_with("fe80::1 is a link-local address"), "{e}");
        assert!(e.contains("fe80::1%eth0"), "{e}");
        let e = parse_ip("[fe80::abcd]").unwrap_err();
        assert!(e.contains("add it, as in fe80::abcd%eth0"), "{e}");
        assert!(parse_ip("ff02::1").is_err(), "link-local multicast");
        assert!(parse_ip("ff05::1").unwrap().is_some(), "site-local multicast");
    }

    #[test]
    fn bad_scopes_are_named() {
        let e = parse_ip("fe80::1%no-such-if0").unwrap_err();
        assert!(e.contains("no interface named \"no-such-if0\""), "{e}");
        let e = parse_ip("192.0.2.1%lo").unwrap_err();
        assert!(e.contains("192.0.2.1 is IPv4"), "{e}");
        assert!(parse_ip("fe80::1%").unwrap_err().contains("nothing after '%'"));
        assert!(parse_ip("fe80::1%0").unwrap_err().contains("index 0"));
        assert!(parse_ip("host%lo").unwrap_err().contains("\"host\" is not one"));
    }

    #[test]
    fn a_link_local_local_address_takes_the_peers_scope() {
        let peer: SocketAddr = SocketAddr::V6(SocketAddrV6::new("fe80::2".parse().unwrap(), 6387, 0, 7));
        match local_for("fe80::1".parse().unwrap(), peer) {
            SocketAddr::V6(a) => assert_eq!((a.scope_id(), a.port()), (7, 0)),
            a => panic!("{a}"),
        }
        assert_eq!(
            local_for("2001:db8::1".parse().unwrap(), peer).to_string(),
            "[2001:db8::1]:0"
        );
        assert_eq!(
            local_for("192.0.2.1".parse().unwrap(), "192.0.2.2:1".parse().unwrap()).to_string(),
            "192.0.2.1:0"
        );
    }
}
