//! How a transport's sockets are made, and what the kernel made of them, by
//! its rules ([`netrig_proto::spec::transport`]): the data sockets at both
//! ends, and the agent's one listener, which takes every stream transport's
//! connections.

use netrig_proto::spec::Transport;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd};

/// IPPROTO_MPTCP.
const IPPROTO_MPTCP: i32 = 262;
/// TCP_IS_MPTCP (SOL_TCP): 1 on an MPTCP socket that has not fallen back
/// to TCP, 0 otherwise (Linux 5.16).
const TCP_IS_MPTCP: i32 = 43;
/// Whether the kernel lets programs make MPTCP sockets.
const MPTCP_ENABLED: &str = "/proc/sys/net/mptcp/enabled";

/// The socket type and protocol `transport`'s sockets are made with.
pub fn socket_kind(transport: Transport) -> (Type, Protocol) {
    let rules = transport.rules();
    let ty = if rules.datagrams() {
        Type::DGRAM
    } else {
        Type::STREAM
    };
    (ty, Protocol::from(rules.ip_protocol()))
}

/// A new data socket of `transport` for a peer at `addr`.
pub fn socket(transport: Transport, addr: SocketAddr) -> io::Result<Socket> {
    let (ty, protocol) = socket_kind(transport);
    Socket::new(Domain::for_address(addr), ty, Some(protocol))
}

/// Whether this host's kernel makes `transport`'s sockets; if not, why, as
/// an error naming the option that asked for it and `end` ("client",
/// "agent"). Checked before a test so that a kernel without it is said as
/// such, not as a failed connection.
pub fn check_kernel(transport: Transport, end: &str) -> Result<(), String> {
    let Some(option) = transport.rules().option() else {
        return Ok(());
    };
    let name = transport.name().to_uppercase();
    match std::fs::read_to_string(MPTCP_ENABLED) {
        Ok(v) if v.trim() == "0" => Err(format!(
            "{option}: the {end}'s kernel has {name} turned off (net.mptcp.enabled = 0; \
             turn it on with: sysctl -w net.mptcp.enabled=1)"
        )),
        Ok(_) => Ok(()),
        Err(_) => Err(format!(
            "{option}: the {end}'s kernel has no {name} (no {MPTCP_ENABLED}: built without CONFIG_MPTCP)"
        )),
    }
}

/// `error` from making a socket of `transport` at `end`, said as the kernel
/// lacking the transport when that is what it means (EPROTONOSUPPORT,
/// ENOPROTOOPT: no such protocol, or turned off), naming its option.
pub fn unsupported(transport: Transport, end: &str, error: &io::Error) -> Option<String> {
    let option = transport.rules().option()?;
    matches!(
        error.raw_os_error(),
        Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT)
    )
    .then(|| {
        format!(
            "{option}: the {end}'s kernel does not make {} sockets ({error}; is net.mptcp.enabled 1?)",
            transport.name().to_uppercase()
        )
    })
}

/// The agent's listener on `addr` (`only_v6`: an IPv6 one beside an IPv4
/// twin), SO_REUSEADDR, with `backlog`. With `mptcp`, MPTCP where the kernel
/// makes it, else (and for a scoped link-local address, whose scope an
/// MPTCP socket's bind drops: Linux 6.18) TCP. An MPTCP listener takes
/// plain TCP connections as well, and hands each out as a plain TCP socket
/// (the kernel switches it back to TCP's operations at accept), so tests
/// without `--mptcp` see TCP as before, and those with it need no listener
/// of their own. One thing differs: its accept(2) ignores SO_RCVTIMEO (the
/// timeout is the listening subflow's, which the option does not reach),
/// see [`accept_times_out`].
pub fn listen(addr: SocketAddr, only_v6: bool, backlog: i32, mptcp: bool) -> io::Result<TcpListener> {
    let scoped = matches!(addr, SocketAddr::V6(a) if a.scope_id() != 0);
    if mptcp && !scoped {
        if let Ok(l) = listen_as(addr, only_v6, backlog, Protocol::from(IPPROTO_MPTCP)) {
            return Ok(l);
        }
    }
    listen_as(addr, only_v6, backlog, Protocol::TCP)
}

fn listen_as(addr: SocketAddr, only_v6: bool, backlog: i32, protocol: Protocol) -> io::Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(protocol))?;
    if addr.is_ipv6() {
        sock.set_only_v6(only_v6)?;
    }
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// Whether a blocking accept(2) on `listener` returns when its SO_RCVTIMEO
/// runs out: not on an MPTCP listener, which waits for a connection (or a
/// signal) however long.
pub fn accept_times_out<S: AsFd>(listener: &S) -> bool {
    let fd = listener.as_fd().as_raw_fd();
    crate::raw_opt::get_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL).ok() != Some(IPPROTO_MPTCP)
}

/// For a stream socket: `Some(true)` when it is MPTCP and has not fallen
/// back to TCP, `Some(false)` when it is an MPTCP socket that fell back,
/// `None` when it is a plain TCP socket (or not a stream one).
pub fn mptcp_state<S: AsFd>(s: &S) -> Option<bool> {
    let fd = s.as_fd().as_raw_fd();
    let protocol = crate::raw_opt::get_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL).ok()?;
    if protocol != IPPROTO_MPTCP {
        return None;
    }
    Some(crate::raw_opt::get_int(fd, libc::IPPROTO_TCP, TCP_IS_MPTCP).ok() == Some(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn mptcp_on() -> bool {
        check_kernel(Transport::Mptcp, "test").is_ok()
    }

    #[test]
    fn sockets_are_made_by_the_transports_rules() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for t in [Transport::Tcp, Transport::Udp] {
            let s = socket(t, addr).unwrap();
            let p = crate::raw_opt::get_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PROTOCOL).unwrap();
            assert_eq!(p, t.rules().ip_protocol());
            assert_eq!(s.r#type().unwrap() == Type::DGRAM, t.datagrams());
        }
        assert!(check_kernel(Transport::Tcp, "client").is_ok());
        let refused = io::Error::from_raw_os_error(libc::EPROTONOSUPPORT);
        let said = unsupported(Transport::Mptcp, "agent", &refused).unwrap();
        assert!(said.starts_with("--mptcp: the agent's kernel"), "{said}");
        assert!(unsupported(Transport::Tcp, "agent", &refused).is_none());
    }

    #[test]
    fn the_listener_takes_mptcp_and_hands_plain_tcp_out_as_tcp() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert!(accept_times_out(&listen(any, false, 8, false).unwrap()));
        // A scoped address is TCP's alone.
        if let Ok(scoped) = listen(
            "[::1]:0"
                .parse::<std::net::SocketAddrV6>()
                .map(|mut a| {
                    a.set_scope_id(1);
                    a.into()
                })
                .unwrap(),
            true,
            8,
            true,
        ) {
            assert!(accept_times_out(&scoped));
        }
        let l = listen(any, false, 8, true).unwrap();
        let at = l.local_addr().unwrap();
        let plain = TcpStream::connect(at).unwrap();
        let (accepted, _) = l.accept().unwrap();
        assert_eq!(mptcp_state(&plain), None);
        assert_eq!(mptcp_state(&accepted), None);
        if !mptcp_on() {
            return; // a kernel without MPTCP: the listener is TCP, as before
        }
        assert!(!accept_times_out(&l), "an MPTCP listener");
        let s = socket(Transport::Mptcp, at).unwrap();
        s.connect(&at.into()).unwrap();
        let (accepted, _) = l.accept().unwrap();
        assert_eq!(mptcp_state(&s), Some(true));
        assert_eq!(mptcp_state(&accepted), Some(true));
    }
}
