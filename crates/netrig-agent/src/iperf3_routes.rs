//! Where an iperf3 test's data connections find their session (the agent's
//! `iperf3` module serves the tests; the accept loop and the UDP intake
//! deliver here): TCP
//! connections by the test's 37-byte cookie (as netrig's data greetings
//! find theirs in the registry), UDP "connect" datagrams by the client's
//! address, since they carry no cookie.

use crate::peer::canonical_ip;
use netrig_proto::iperf3::COOKIE_LEN;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::Mutex;

/// A TCP data connection as it reaches its session: the stream (blocking)
/// and its peer.
pub(crate) type TcpArrival = (TcpStream, SocketAddr);

/// A UDP stream's connect datagram: where it came from, and the agent's
/// address it came to (the agent's port or `--iperf3-port`), which the
/// stream's own socket binds to so that its reply comes from there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdpConnect {
    pub from: SocketAddr,
    pub local: SocketAddr,
}

/// A session waiting for its TCP data connections: its queue, and its
/// control connection's address, the only one they may come from.
type TcpQueue = (mpsc::SyncSender<TcpArrival>, IpAddr);

/// The iperf3 sessions waiting for their data connections.
#[derive(Default)]
pub(crate) struct Routes {
    tcp: Mutex<HashMap<[u8; COOKIE_LEN], TcpQueue>>,
    /// By the client's address (canonical): a connect datagram has nothing
    /// else to tell its session by. So only one session of an address may
    /// be creating UDP streams at a time ([`Routes::expect_udp`]), and only
    /// datagrams from the control connection's address are taken: the agent
    /// then sends nowhere else.
    udp: Mutex<HashMap<IpAddr, mpsc::SyncSender<UdpConnect>>>,
}

/// Takes a session's routes away when it is done with them.
pub(crate) struct Expecting<'r> {
    routes: &'r Routes,
    cookie: [u8; COOKIE_LEN],
    udp: Option<IpAddr>,
}

impl Drop for Expecting<'_> {
    fn drop(&mut self) {
        self.routes.lock_tcp().remove(&self.cookie);
        if let Some(ip) = self.udp {
            self.routes.lock_udp().remove(&ip);
        }
    }
}

impl Routes {
    fn lock_tcp(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; COOKIE_LEN], TcpQueue>> {
        self.tcp.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_udp(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, mpsc::SyncSender<UdpConnect>>> {
        self.udp.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `cookie` is a test's that waits for data connections (a
    /// connection that opens with it is one of them; any other cookie opens
    /// a control connection).
    pub(crate) fn is_test(&self, cookie: &[u8; COOKIE_LEN]) -> bool {
        self.lock_tcp().contains_key(cookie)
    }

    /// A test's TCP data connections, from `control`'s address alone, at
    /// most `capacity` waiting.
    pub(crate) fn expect_tcp(
        &self,
        cookie: [u8; COOKIE_LEN],
        control: IpAddr,
        capacity: usize,
    ) -> (Expecting<'_>, mpsc::Receiver<TcpArrival>) {
        let (tx, rx) = mpsc::sync_channel(capacity);
        self.lock_tcp().insert(cookie, (tx, canonical_ip(control)));
        let e = Expecting {
            routes: self,
            cookie,
            udp: None,
        };
        (e, rx)
    }

    /// A test's UDP connect datagrams, from `control`'s address: refused
    /// while another session of that address creates its UDP streams (their
    /// datagrams could not be told apart).
    pub(crate) fn expect_udp(
        &self,
        cookie: [u8; COOKIE_LEN],
        control: IpAddr,
        capacity: usize,
    ) -> Result<(Expecting<'_>, mpsc::Receiver<UdpConnect>), String> {
        let ip = canonical_ip(control);
        let mut udp = self.lock_udp();
        if udp.contains_key(&ip) {
            return Err(format!(
                "another iperf3 test from {ip} is creating its UDP streams: their connect datagrams carry no \
                 cookie, so one test per client address sets up UDP streams at a time"
            ));
        }
        let (tx, rx) = mpsc::sync_channel(capacity);
        udp.insert(ip, tx);
        Ok((
            Expecting {
                routes: self,
                cookie,
                udp: Some(ip),
            },
            rx,
        ))
    }

    /// Hands a TCP connection that opened with `cookie` to its session; why
    /// not, when it cannot be (the connection is then closed).
    pub(crate) fn deliver_tcp(
        &self,
        cookie: &[u8; COOKIE_LEN],
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), String> {
        let tcp = self.lock_tcp();
        let Some((tx, want)) = tcp.get(cookie) else {
            return Err("an iperf3 data connection for no test waiting for its streams; closed".into());
        };
        let ip = canonical_ip(peer.ip());
        if ip != *want {
            return Err(format!(
                "an iperf3 data connection from {ip}, not from its control connection's address {want}; closed"
            ));
        }
        stream
            .set_nonblocking(false)
            .map_err(|e| format!("cannot make the socket blocking: {e}"))?;
        tx.try_send((stream, peer))
            .map_err(|_| "an iperf3 data connection beyond its test's streams; closed".to_string())
    }

    /// Hands a UDP connect datagram to the session of its sender's address;
    /// false when none waits for one (it is then dropped).
    pub(crate) fn deliver_udp(&self, connect: UdpConnect) -> bool {
        let ip = canonical_ip(connect.from.ip());
        self.lock_udp()
            .get(&ip)
            .is_some_and(|tx| tx.try_send(connect).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        std::mem::forget(c);
        (s, peer)
    }

    /// A test's connections reach it from its client's address alone, and
    /// no more than it waits for; once it is done, none.
    #[test]
    fn data_connections_reach_their_test_from_its_client_only() {
        let r = Routes::default();
        let cookie = [b'a'; COOKIE_LEN];
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        {
            let (_e, rx) = r.expect_tcp(cookie, local, 1);
            assert!(r.is_test(&cookie));
            let (s, p) = pair();
            r.deliver_tcp(&cookie, s, p).unwrap();
            let (s, p) = pair();
            assert!(r.deliver_tcp(&cookie, s, p).unwrap_err().contains("beyond"));
            assert!(rx.try_recv().is_ok());
            let (s, mut p) = pair();
            p.set_ip("127.0.0.2".parse().unwrap());
            assert!(r.deliver_tcp(&cookie, s, p).unwrap_err().contains("not from"));
        }
        assert!(!r.is_test(&cookie));
        let (s, p) = pair();
        assert!(r.deliver_tcp(&cookie, s, p).is_err());
    }

    /// UDP connect datagrams go to the one test of their address that is
    /// creating streams; a second test of that address must wait.
    #[test]
    fn one_test_per_address_takes_udp_connects_at_a_time() {
        let r = Routes::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let c = UdpConnect {
            from: "192.0.2.1:5000".parse().unwrap(),
            local: "0.0.0.0:5201".parse().unwrap(),
        };
        {
            let (_e, rx) = r.expect_udp([b'a'; COOKIE_LEN], ip, 4).unwrap();
            assert!(r.expect_udp([b'b'; COOKIE_LEN], ip, 4).is_err());
            assert!(r.deliver_udp(c));
            let stranger = UdpConnect {
                from: "192.0.2.9:5000".parse().unwrap(),
                ..c
            };
            assert!(!r.deliver_udp(stranger));
            assert_eq!(rx.try_recv().unwrap().from, c.from);
        }
        assert!(!r.deliver_udp(c), "gone with its test");
        assert!(r.expect_udp([b'b'; COOKIE_LEN], ip, 4).is_ok());
    }
}
