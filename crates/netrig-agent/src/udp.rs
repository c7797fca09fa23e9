//! UDP on the agent's port: hellos of UDP flows arrive at one unconnected
//! socket and are handed to their sessions; each flow then gets a socket of
//! its own, bound to the same port and connected to the client's address, so
//! that the kernel delivers that flow's datagrams to it (a connected socket
//! is a better match than the unconnected one) and workers own their flows.

use crate::iperf3_routes::UdpConnect;
use crate::shared::Shared;
use netrig_proto::iperf3::UDP_CONNECT_MSG;
use netrig_proto::DataHello;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Binds the agent's UDP socket on `addr` (dual-stack for `[::]`), shared
/// with the flows' connected sockets.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        sock.set_only_v6(false)?;
    }
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// A flow's own socket: the agent's UDP address, connected to `peer`.
pub(crate) fn flow_socket(local: SocketAddr, peer: SocketAddr) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    let peer = match (local, peer) {
        (SocketAddr::V6(_), SocketAddr::V4(p4)) => {
            SocketAddr::new(IpAddr::V6(p4.ip().to_ipv6_mapped()), p4.port())
        }
        (_, p) => p,
    };
    if local.is_ipv6() {
        sock.set_only_v6(false)?;
    }
    sock.set_reuse_address(true)?;
    sock.bind(&local.into())?;
    sock.connect(&peer.into())?;
    Ok(sock.into())
}

/// Reads hellos until the agent shuts down: netrig's 32-byte data hellos
/// (not on the iperf3 port, `iperf3_only`) and iperf3's 4-byte connect
/// datagrams, each handed to its session. Anything else is dropped (and
/// counted in the log at most once a second).
pub(crate) fn intake(sock: UdpSocket, shared: Arc<Shared>, iperf3_only: bool) {
    let local = match sock.local_addr() {
        Ok(a) => a,
        Err(e) => return log::warn!("UDP intake: {e}"),
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 64];
    let mut dropped = 0u64;
    let mut last_log = Instant::now();
    while !shared.shutdown.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                log::warn!("UDP intake: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if n == UDP_CONNECT_MSG.len() && buf[..n] == UDP_CONNECT_MSG {
            if !shared.iperf3.deliver_udp(UdpConnect { from, local }) {
                dropped += 1;
            }
            continue;
        }
        let hello = (n == DataHello::LEN && !iperf3_only)
            .then(|| DataHello::decode(buf[..DataHello::LEN].try_into().expect("32 bytes")).ok())
            .flatten();
        match hello {
            Some(h) => {
                if let Err(e) = shared.registry.deliver_udp(h, from) {
                    dropped += 1;
                    log::debug!("{from}: {e}");
                }
            }
            None => dropped += 1,
        }
        if dropped > 0 && last_log.elapsed() >= Duration::from_secs(1) {
            log::warn!("UDP: {dropped} datagram(s) that were no valid hello dropped");
            dropped = 0;
            last_log = Instant::now();
        }
    }
}
