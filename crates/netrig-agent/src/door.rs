//! The listener lent to a connection-per-transaction run's workers
//! ([`netrig_engine::intake::Door`], one shared by them): they accept and
//! answer their session's connections themselves, without the accept loop's
//! thread between. The
//! accept loop stops watching the listener while it is lent and takes back
//! what the worker will not keep (control connections, other sessions',
//! greetings not arrived whole) with what the worker read of them (it reads
//! greeting and request in one call), finishing their greeting as if it had
//! accepted them and passing what was read past it on with the connection
//! (to its session, or to the run it belongs to). One run holds a
//! listener at a time: with two (IPv6 and IPv4, the default), the one of
//! its client's address family, the accept loop keeping the other.

use crate::doorway::Returned;
use crate::peer::{allowed, canonical_ip};
use crate::shared::Shared;
use netrig_engine::intake::Door;
use netrig_proto::{DataHello, SessionCookie};
use socket2::SockRef;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Lends the listener of `client`'s address family (with two; the only one
/// otherwise) to the run of session `cookie`, whose connections come from
/// `client` only; `None` if another run holds one.
pub(crate) fn lend(
    shared: &Arc<Shared>,
    cookie: SessionCookie,
    client: Option<IpAddr>,
) -> Option<Box<dyn Door>> {
    // A client's data connections come the way its control connection came.
    let which = match client.map(canonical_ip) {
        Some(IpAddr::V4(_)) => shared
            .listeners
            .iter()
            .rposition(|l| l.local_addr().is_ok_and(|a| a.is_ipv4())),
        _ => None,
    }
    .unwrap_or(0);
    if !shared.doorway.lend(which, &shared.listeners[which]) {
        return None;
    }
    Some(Box::new(Lent {
        shared: shared.clone(),
        which,
        cookie,
        client,
        blocked: AtomicBool::new(false),
    }))
}

struct Lent {
    shared: Arc<Shared>,
    /// The listener lent (its index in `Shared::listeners`).
    which: usize,
    cookie: SessionCookie,
    client: Option<IpAddr>,
    /// The run made the listener blocking (`block`): undone when dropped.
    blocked: AtomicBool,
}

impl Door for Lent {
    fn listener(&self) -> BorrowedFd<'_> {
        self.mine().as_fd()
    }

    /// The accept loop's checks of who: a network the agent serves (its
    /// --allow, checked before a byte is read), the session's control
    /// connection's address.
    fn admits(&self, peer: SocketAddr) -> bool {
        let ip = canonical_ip(peer.ip());
        allowed(&self.shared.config.allow, ip) && self.client.is_none_or(|c| c == ip)
    }

    /// And of what: a whole data greeting with this session's cookie.
    fn claim(&self, greeting: &[u8], peer: SocketAddr) -> Option<DataHello> {
        let hello = DataHello::decode(greeting.try_into().ok()?).ok()?;
        (hello.cookie == self.cookie && self.admits(peer)).then_some(hello)
    }

    fn hand_back(&self, stream: TcpStream, peer: SocketAddr, read: &[u8]) {
        if self.blocked.load(Ordering::Relaxed) {
            // Accepted blocking, with the listener's timeouts: as the accept loop's own.
            if let Err(e) = unblock(SockRef::from(&stream)) {
                log::debug!("{peer}: closed: cannot make it non-blocking again: {e}");
                return;
            }
        }
        self.shared.doorway.give_back(
            Returned {
                stream,
                peer,
                read: read.to_vec(),
                iperf3_only: false,
            },
            self.shared.config.max_pending,
        );
    }

    fn block(&self, wait: Option<Duration>) -> io::Result<()> {
        if wait.is_some() && !netrig_engine::transport::accept_times_out(self.mine()) {
            // An MPTCP listener would wait in accept(2) past the timeout.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "accept(2) ignores timeouts here",
            ));
        }
        let l = SockRef::from(self.mine());
        self.blocked.store(true, Ordering::Relaxed);
        if let Some(wait) = wait {
            l.set_read_timeout(Some(wait))?;
            l.set_write_timeout(Some(wait))?;
        }
        l.set_nonblocking(false)
    }

    fn accept_failed(&self, error: &io::Error) {
        self.shared.accept_failures.record(error, self.queued());
        log::warn!("accept failed: {error}; the run holding the listener stops accepting for a moment");
    }
}

/// Non-blocking again, without timeouts (what `Door::block` set).
fn unblock(s: SockRef<'_>) -> io::Result<()> {
    s.set_nonblocking(true)?;
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)
}

impl Lent {
    fn mine(&self) -> &mio::net::TcpListener {
        &self.shared.listeners[self.which]
    }

    fn queued(&self) -> Option<u32> {
        netrig_metrics::tcp_info::accept_queue(self.mine().as_fd()).ok()
    }
}

impl Drop for Lent {
    /// The listener goes back to the accept loop, which accepts what queued.
    fn drop(&mut self) {
        if self.blocked.load(Ordering::Relaxed) {
            // Before the accept loop may accept on it again.
            if let Err(e) = unblock(SockRef::from(self.mine())) {
                log::error!("cannot make the listener non-blocking again: {e}; no longer accepting");
                return;
            }
        }
        self.shared.doorway.take_back(self.which, self.mine());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Agent, AgentConfig};
    use std::io::Read;
    use std::time::{Duration, Instant};

    /// A connection queued on `l` (the run's part: a lent listener), within 2 s.
    fn accept_within(l: &mio::net::TcpListener) -> (mio::net::TcpStream, SocketAddr) {
        let t = Instant::now();
        loop {
            match l.accept() {
                Ok(a) => return a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && t.elapsed() < Duration::from_secs(2) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// A running agent on loopback, its listener lent to session `cookie`'s run.
    fn lent_agent(cookie: SessionCookie) -> (Arc<Shared>, crate::AgentHandle, Box<dyn Door>) {
        lent_agent_on(cookie, true)
    }

    /// [`lent_agent`] with an MPTCP listener where the kernel makes it, or
    /// with a plain TCP one.
    fn lent_agent_on(cookie: SessionCookie, mptcp: bool) -> (Arc<Shared>, crate::AgentHandle, Box<dyn Door>) {
        let mut config = AgentConfig::new("127.0.0.1:0".parse().unwrap());
        config.mptcp_listener = mptcp;
        let agent = Agent::bind(config).unwrap();
        let shared = agent.shared.clone();
        let handle = agent.spawn();
        let door = lend(&shared, cookie, None).expect("free");
        (shared, handle, door)
    }

    /// Whether the agent closes `c` (unanswered) within 3 s.
    fn closed_by_agent(c: &mut TcpStream) -> bool {
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        matches!(c.read(&mut [0u8; 16]), Ok(0))
    }

    /// The listener is lent to one run at a time; while lent the accept
    /// loop leaves new connections to the run, finishes those given back,
    /// and takes the listener back when the run drops it.
    #[test]
    fn the_listener_is_lent_once_and_what_comes_back_is_served() {
        let cookie = SessionCookie([5; 16]);
        let (shared, handle, door) = lent_agent(cookie);
        assert!(lend(&shared, cookie, None).is_none(), "one run at a time");
        // Lent: a new connection waits in the queue for the run.
        let mut c = TcpStream::connect(handle.addr()).unwrap();
        let t = Instant::now();
        while netrig_metrics::tcp_info::accept_queue(shared.listeners[0].as_fd()).unwrap() == 0 {
            assert!(t.elapsed() < Duration::from_secs(2), "never queued");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            netrig_metrics::tcp_info::accept_queue(shared.listeners[0].as_fd()).unwrap(),
            1,
            "the accept loop left it to the run"
        );
        // The run's part: it gives it back unread; the greeting is no one's.
        std::io::Write::write_all(&mut c, b"XXXX").unwrap();
        let (s, peer) = shared.listeners[0].accept().unwrap();
        door.hand_back(
            std::net::TcpStream::from(std::os::fd::OwnedFd::from(s)),
            peer,
            &[],
        );
        assert!(closed_by_agent(&mut c), "the accept loop judged what came back");
        drop(door);
        // Given back: the accept loop accepts again, and it can be lent again.
        let mut c = TcpStream::connect(handle.addr()).unwrap();
        std::io::Write::write_all(&mut c, b"XXXX").unwrap();
        assert!(closed_by_agent(&mut c), "the accept loop accepts again");
        assert!(lend(&shared, cookie, None).is_some(), "free again");
    }

    /// A control connection given back with what the run read of it (its
    /// preamble and part of the first frame, which its client sent without
    /// waiting for the welcome) goes to a session with all of it: the rest
    /// of the frame comes from the socket, and the session answers the
    /// frame (a `go` before any test: an error), not waiting for it.
    #[test]
    fn what_a_run_read_of_a_control_connection_goes_to_its_session() {
        use netrig_proto::{encode_frame, AgentMsg, ClientMsg, ControlPreamble};
        let (shared, handle, door) = lent_agent(SessionCookie([7; 16]));
        let mut c = TcpStream::connect(handle.addr()).unwrap();
        let mut sent = ControlPreamble {
            min_version: netrig_proto::MIN_PROTOCOL_VERSION,
            max_version: netrig_proto::PROTOCOL_VERSION,
        }
        .encode()
        .to_vec();
        sent.extend(encode_frame(&ClientMsg::Go));
        std::io::Write::write_all(&mut c, &sent).unwrap();
        let (s, peer) = accept_within(&shared.listeners[0]);
        // The run's part: it read the preamble and 6 bytes of the frame.
        let s = std::net::TcpStream::from(std::os::fd::OwnedFd::from(s));
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut read = vec![0u8; ControlPreamble::LEN + 6];
        (&s).read_exact(&mut read).unwrap();
        s.set_nonblocking(true).unwrap();
        door.hand_back(s, peer, &read);
        let mut conn = netrig_proto::conn::FramedConn::new(c, 1 << 20);
        let welcome: AgentMsg = conn.recv(Duration::from_secs(5)).unwrap();
        assert!(matches!(welcome, AgentMsg::Welcome { .. }), "{welcome:?}");
        let answer: AgentMsg = conn
            .recv(Duration::from_secs(5))
            .expect("the frame read ahead was answered");
        assert!(
            matches!(&answer, AgentMsg::Error { message } if message.contains("unexpected message go")),
            "{answer:?}"
        );
    }

    /// Listening on `[::]` (the default) is two sockets on one port, an
    /// IPv6-only one and an IPv4 one: an IPv4 client's connections are
    /// AF_INET sockets (not v4-mapped AF_INET6 ones), and a run of an IPv4
    /// client is lent the IPv4 listener, the accept loop keeping the other.
    #[test]
    fn the_default_listens_on_ipv6_and_ipv4_apart_and_lends_the_clients_family() {
        let agent = Agent::bind(AgentConfig::new("[::]:0".parse().unwrap())).unwrap();
        let shared = agent.shared.clone();
        if shared.listeners.len() == 1 {
            eprintln!("skipped: no IPv6 on this host (the agent listens on IPv4 alone)");
            return;
        }
        let handle = agent.spawn();
        let port = handle.addr().port();
        let addrs: Vec<SocketAddr> = shared.listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        assert_eq!(
            addrs,
            vec![
                format!("[::]:{port}").parse().unwrap(),
                format!("0.0.0.0:{port}").parse().unwrap()
            ]
        );
        assert!(
            SockRef::from(&shared.listeners[0]).only_v6().unwrap(),
            "IPv6 only"
        );
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        let door = lend(&shared, SessionCookie([8; 16]), Some(v4)).expect("free");
        assert_eq!(
            std::net::TcpListener::from(door.listener().try_clone_to_owned().unwrap())
                .local_addr()
                .unwrap(),
            addrs[1]
        );
        // The run's: an IPv4 connection queues on the IPv4 listener, an AF_INET socket.
        let _c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (s, peer) = accept_within(&shared.listeners[1]);
        assert!(peer.is_ipv4(), "{peer}");
        assert_eq!(SockRef::from(&s).domain().unwrap(), socket2::Domain::IPV4);
        drop(s);
        // The accept loop still serves the other family: an IPv6 connection's
        // greeting that is no one's is closed by it.
        if let Ok(mut c6) = TcpStream::connect(("::1", port)) {
            std::io::Write::write_all(&mut c6, b"XXXX").unwrap();
            assert!(closed_by_agent(&mut c6), "the accept loop kept the IPv6 listener");
        }
        drop(door);
        // An IPv6 client's run is lent the IPv6 one.
        let door = lend(&shared, SessionCookie([8; 16]), Some("::1".parse().unwrap())).expect("free");
        assert_eq!(
            std::net::TcpListener::from(door.listener().try_clone_to_owned().unwrap())
                .local_addr()
                .unwrap(),
            addrs[0]
        );
    }

    /// A run that made the listener blocking (`Door::block`) accepts
    /// blocking sockets with its timeouts; what it gives back, and the
    /// listener when it is dropped, are non-blocking again without them,
    /// and the accept loop serves both.
    #[test]
    fn a_blocking_door_undoes_it_on_what_it_gives_back() {
        // A TCP listener: an MPTCP one refuses a timeout (see below).
        let (shared, handle, door) = lent_agent_on(SessionCookie([6; 16]), false);
        let wait = Duration::from_millis(30);
        door.block(Some(wait)).unwrap();
        let l = SockRef::from(&shared.listeners[0]);
        assert!(!l.nonblocking().unwrap(), "blocking while lent");
        // The run's accept waits (its timeout at most) and takes the listener's timeouts along.
        let copy = std::net::TcpListener::from(door.listener().try_clone_to_owned().unwrap());
        let t = Instant::now();
        assert_eq!(copy.accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert!(t.elapsed() >= wait, "accept(2) waited {:?}", t.elapsed());
        let mut c = TcpStream::connect(handle.addr()).unwrap();
        let (s, peer) = copy.accept().unwrap();
        assert!(s.read_timeout().unwrap().is_some(), "inherited");
        std::io::Write::write_all(&mut c, b"XXXX").unwrap();
        door.hand_back(s, peer, &[]);
        assert!(closed_by_agent(&mut c), "the accept loop judged what came back");
        drop(door);
        assert!(l.nonblocking().unwrap(), "non-blocking again");
        assert_eq!(l.read_timeout().unwrap(), None);
        assert_eq!(l.write_timeout().unwrap(), None);
        let mut c = TcpStream::connect(handle.addr()).unwrap();
        std::io::Write::write_all(&mut c, b"XXXX").unwrap();
        assert!(closed_by_agent(&mut c), "the accept loop accepts again");
    }

    /// An MPTCP listener's accept(2) ignores SO_RCVTIMEO: a run may block on
    /// it only with no timeout (its waits bounded by signals), and a door
    /// asked for one says no, so the run uses its event loop instead.
    #[test]
    fn a_door_on_an_mptcp_listener_refuses_a_timeout() {
        let (shared, _handle, door) = lent_agent(SessionCookie([7; 16]));
        if netrig_engine::transport::accept_times_out(&shared.listeners[0]) {
            return; // a kernel without MPTCP: a TCP listener, tested above
        }
        let e = door.block(Some(Duration::from_millis(30))).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        let l = SockRef::from(&shared.listeners[0]);
        assert!(l.nonblocking().unwrap(), "left as it was");
        door.block(None).unwrap();
        assert!(!l.nonblocking().unwrap());
    }
}
