//! `--iperf3-port`: a second port, TCP and UDP, that serves iperf3 clients
//! alone (iperf3's own is 5201), so that `iperf3 -c HOST` works without
//! `-p`. Its connections go to the accept loop as connections a run gives
//! back do, marked iperf3-only: the same allow-list, greeting timeout and
//! bound on connections still greeting hold for them.

use crate::doorway::Returned;
use crate::shared::Shared;
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often a blocked accept looks at the agent's shutdown.
const WAKE: Duration = Duration::from_millis(200);

/// The iperf3 port's sockets, bound.
pub(crate) struct Port {
    tcp: Vec<TcpListener>,
    udp: UdpSocket,
}

impl Port {
    /// The port's sockets, bound by the agent as its own (TCP: for `[::]`,
    /// an IPv6 socket and an IPv4 one; UDP on the same port).
    pub(crate) fn new(tcp: Vec<TcpListener>, udp: UdpSocket) -> Port {
        Port { tcp, udp }
    }

    /// The port's TCP address.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.first().and_then(|l| l.local_addr().ok())
    }

    /// Accepts on its own threads (one per listener, and one for UDP)
    /// until the agent shuts down.
    pub(crate) fn start(self, shared: &Arc<Shared>) -> io::Result<()> {
        for l in self.tcp {
            socket2::SockRef::from(&l).set_read_timeout(Some(WAKE))?;
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("netrig-iperf3-accept".into())
                .spawn(move || accept(l, shared))?;
        }
        let shared = shared.clone();
        let udp = self.udp;
        std::thread::Builder::new()
            .name("netrig-iperf3-udp".into())
            .spawn(move || crate::udp::intake(udp, shared, true))?;
        Ok(())
    }
}

/// Hands each connection to the accept loop, which reads its cookie.
fn accept(l: TcpListener, shared: Arc<Shared>) {
    while !shared.shutdown.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((stream, peer)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let back = Returned {
                    stream,
                    peer,
                    read: Vec::new(),
                    iperf3_only: true,
                };
                shared.doorway.give_back(back, shared.config.max_pending);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if netrig_engine::intake::accept_again(&e) => {}
            Err(e) => {
                log::warn!("iperf3 port: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
