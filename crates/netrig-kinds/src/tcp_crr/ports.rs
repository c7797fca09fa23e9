//! `--local-ports LOW-HIGH`: the requester binds each new connection to
//! the next port of the range in turn, with SO_REUSEADDR, before its
//! connect(), as netperf's TCP_CRR does (its `-p`, 5000-65535 by default).
//!
//! Without it the kernel picks a local port inside connect(), searching
//! `net.ipv4.ip_local_port_range` for one whose 4-tuple is free: that search
//! is part of what a connection costs a real client, and so the default.
//! Measured on this kernel (6.18) over loopback with the agent closing first,
//! it costs about 4 % of the connection rate against binding a port first.

use netrig_proto::spec::PortRange;
use socket2::Socket;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

/// Most ports one connection tries before its failure is counted: ports
/// held by listeners or by other programs' connections are skipped.
const BIND_TRIES: u32 = 256;

/// The range and the next port of it, shared by every worker of the run.
#[derive(Debug)]
pub struct PortCycle {
    range: PortRange,
    next: AtomicU32,
}

impl PortCycle {
    /// Starts at a random port of the range, as netperf does, so that runs
    /// one after another do not begin on the ports the last one left in
    /// TIME_WAIT.
    pub fn new(range: PortRange) -> PortCycle {
        PortCycle {
            range,
            next: AtomicU32::new(fastrand::u32(0..range.len().max(1))),
        }
    }

    fn next_port(&self) -> u16 {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.range.len().max(1);
        // In range by construction: low + (len - 1) = high.
        (u32::from(self.range.low) + i) as u16
    }

    /// Binds `sock` to the next free port of the range, on `ip` (`--bind`)
    /// or else on the wildcard address of `to`'s family; never on `to`'s own
    /// port (over loopback that would be the agent's). The last error once
    /// [`BIND_TRIES`] ports (or the whole range) would not do.
    pub fn bind(&self, sock: &Socket, ip: Option<IpAddr>, to: SocketAddr) -> io::Result<()> {
        sock.set_reuse_address(true)?;
        let mut local = match ip {
            Some(ip) => netrig_engine::addr::local_for(ip, to),
            None if to.is_ipv4() => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
            None => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), 0),
        };
        let mut last = io::Error::from_raw_os_error(libc::EADDRINUSE);
        for _ in 0..BIND_TRIES.min(self.range.len()) {
            let port = self.next_port();
            if port == to.port() {
                continue;
            }
            local.set_port(port);
            match sock.bind(&local.into()) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Type};
    use std::net::TcpListener;

    fn stream() -> Socket {
        Socket::new(Domain::IPV4, Type::STREAM, None).unwrap()
    }

    fn local_port(s: &Socket) -> u16 {
        s.local_addr().unwrap().as_socket().unwrap().port()
    }

    /// Port after port of the range, wrapping at its end, skipping the
    /// peer's port and a port a listener holds; EADDRINUSE once listeners
    /// hold all the others.
    #[test]
    fn binds_the_range_in_turn_and_skips_ports_in_use() {
        // Four free ports in a row, below the kernel's ephemeral range.
        let low = (20_000..32_000u16)
            .step_by(7)
            .find(|p| (*p..*p + 4).all(|q| TcpListener::bind(("127.0.0.1", q)).is_ok()))
            .expect("four free ports in a row");
        let cycle = PortCycle::new(PortRange { low, high: low + 3 });
        let peer = SocketAddr::from(([127, 0, 0, 1], low + 1));
        let listener = TcpListener::bind(("127.0.0.1", low + 2)).unwrap();
        // low + 1 is the peer's, low + 2 the listener's: low and low + 3, in turn.
        let mut got = Vec::new();
        for _ in 0..4 {
            let s = stream();
            cycle.bind(&s, Some([127, 0, 0, 1].into()), peer).unwrap();
            got.push(local_port(&s));
        }
        assert!(got.iter().all(|p| *p == low || *p == low + 3), "{got:?}");
        assert!(got.windows(2).all(|w| w[0] != w[1]), "not in turn: {got:?}");
        // Listeners on those two as well: the range is used up, and the error says so.
        let others = [low, low + 3].map(|p| TcpListener::bind(("127.0.0.1", p)).unwrap());
        let e = cycle.bind(&stream(), None, peer).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE), "{e}");
        drop((listener, others));
    }
}
