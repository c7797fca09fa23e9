use crate::ClientError;
use std::net::{SocketAddr, ToSocketAddrs};

/// Which address family to use (`-4`, `-6`, or either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

impl Family {
    pub fn name(self) -> Option<&'static str> {
        match self {
            Family::Any => None,
            Family::V4 => Some("ipv4"),
            Family::V6 => Some("ipv6"),
        }
    }
}

/// Resolves a host name or literal (IPv6 with or without brackets, with a
/// scope: `fe80::1%eth0`, which a link-local address needs).
pub fn resolve(host: &str, port: u16, family: Family) -> Result<Vec<SocketAddr>, ClientError> {
    if host.contains("://") {
        // A URL where a host belongs: the resolver would only say it knows no such name.
        return Err(ClientError::Option(format!(
            "-H {host}: -H takes a host name or address, not a URL (for HTTP load: `netrig http --url {host}`)"
        )));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let literal =
        netrig_engine::addr::parse_ip(host).map_err(|e| ClientError::Option(format!("-H {host}: {e}")))?;
    let found: Vec<SocketAddr> = match literal {
        Some(ip) => vec![ip.with_port(port)],
        None => (bare, port)
            .to_socket_addrs()
            .map_err(|error| ClientError::Resolve {
                host: host.to_string(),
                error,
            })?
            .collect(),
    };
    let addrs: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .collect();
    if addrs.is_empty() {
        return Err(ClientError::NoAddress {
            host: host.to_string(),
            family: family.name().unwrap_or("IP"),
        });
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_families() {
        assert_eq!(
            resolve("127.0.0.1", 1, Family::Any).unwrap()[0].to_string(),
            "127.0.0.1:1"
        );
        assert_eq!(resolve("[::1]", 1, Family::V6).unwrap()[0].to_string(), "[::1]:1");
        assert!(matches!(
            resolve("::1", 1, Family::V4),
            Err(ClientError::NoAddress { .. })
        ));
        assert!(matches!(
            resolve("no-such-host.invalid", 1, Family::Any),
            Err(ClientError::Resolve { .. })
        ));
        let e = resolve("http://127.0.0.1:1/x", 1, Family::Any)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a URL") && e.contains("--url http://127.0.0.1:1/x"),
            "{e}"
        );
    }

    /// Issue #11: a link-local agent needs its scope, and without one the
    /// error says how to give it (it was the kernel's "Invalid argument").
    #[test]
    fn link_local_hosts_take_a_scope() {
        match resolve("fe80::1%lo", 6387, Family::V6).unwrap()[..] {
            [SocketAddr::V6(a)] => assert!(a.scope_id() > 0 && a.port() == 6387),
            ref other => panic!("{other:?}"),
        }
        let e = resolve("fe80::1", 6387, Family::Any).unwrap_err().to_string();
        assert!(e.contains("-H fe80::1: fe80::1 is a link-local address"), "{e}");
        assert!(e.contains("%eth0"), "{e}");
        assert!(matches!(
            resolve("fe80::1%lo", 1, Family::V4),
            Err(ClientError::NoAddress { .. })
        ));
    }
}
