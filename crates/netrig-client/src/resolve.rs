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

/// Resolves a host name or literal (IPv6 with or without brackets).
pub fn resolve(host: &str, port: u16, family: Family) -> Result<Vec<SocketAddr>, ClientError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|error| ClientError::Resolve {
            host: host.to_string(),
            error,
        })?
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
    }
}
