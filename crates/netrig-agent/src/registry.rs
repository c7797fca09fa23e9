//! Sessions waiting for their data connections, by cookie: where the accept
//! loop, the UDP intake and a run holding the listener hand a data
//! connection (or a UDP flow's hello) to the session it names.

use crate::peer::canonical_ip;
use netrig_proto::{DataHello, SessionCookie};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// A data connection as it reaches a session: a TCP connection, or the
/// address a UDP flow's hello came from.
pub(crate) enum DataConn {
    /// A TCP connection (still non-blocking, as the accept loop had it) and
    /// its peer's address.
    Tcp(TcpStream, SocketAddr),
    Udp(SocketAddr),
}

/// Where a session takes its data connections: at set-up, TCP connections
/// or UDP hellos; during a connection-per-transaction run, TCP connections
/// straight to the engine's intake.
#[derive(Clone)]
enum QueueTx {
    Setup(mpsc::SyncSender<(DataHello, DataConn)>),
    /// Dealt to the run's workers on the accept loop's thread: no thread
    /// between the listener and the worker that answers.
    Run(Arc<netrig_engine::intake::Intake>),
}

/// A session's queue of new data connections, how many connections it
/// turned away because it was full, and its control connection's address:
/// the only one its TCP data connections may come from.
type Queue = (QueueTx, Arc<AtomicU64>, Option<IpAddr>);

/// Sessions waiting for their data connections, by cookie.
#[derive(Default)]
pub(crate) struct Registry {
    waiting: Mutex<HashMap<SessionCookie, Queue>>,
}

impl Registry {
    /// `peer`: the control connection's address (canonical), from which
    /// alone TCP data connections are taken.
    pub(crate) fn register(
        &self,
        cookie: SessionCookie,
        capacity: usize,
        peer: Option<IpAddr>,
    ) -> mpsc::Receiver<(DataHello, DataConn)> {
        let (tx, rx) = mpsc::sync_channel(capacity);
        self.waiting
            .lock()
            .expect("registry lock")
            .insert(cookie, (QueueTx::Setup(tx), Arc::default(), peer));
        rx
    }

    /// For a connection-per-transaction run: TCP connections only, for the engine's intake.
    pub(crate) fn register_run(
        &self,
        cookie: SessionCookie,
        capacity: usize,
        peer: Option<IpAddr>,
    ) -> Arc<netrig_engine::intake::Intake> {
        let intake = Arc::new(netrig_engine::intake::Intake::new(capacity));
        self.waiting
            .lock()
            .expect("registry lock")
            .insert(cookie, (QueueTx::Run(intake.clone()), Arc::default(), peer));
        intake
    }

    /// Connections turned away so far because the session's queue was full.
    pub(crate) fn dropped(&self, cookie: &SessionCookie) -> u64 {
        self.waiting
            .lock()
            .expect("registry lock")
            .get(cookie)
            .map_or(0, |(_, d, _)| d.load(Ordering::Relaxed))
    }

    pub(crate) fn unregister(&self, cookie: &SessionCookie) {
        self.waiting.lock().expect("registry lock").remove(cookie);
    }

    /// Hands a data connection (non-blocking, from `peer`) to the session
    /// that awaits it. `read_past`: bytes past its greeting read with it
    /// (by a run holding the listener: the first bytes of a
    /// connection-per-transaction request), counted by the run that takes
    /// it. A set-up connection has no business sending before its test
    /// starts: one that did is closed.
    pub(crate) fn deliver(
        &self,
        hello: DataHello,
        stream: TcpStream,
        peer: SocketAddr,
        read_past: usize,
    ) -> Result<(), Undelivered> {
        self.deliver_conn(hello, DataConn::Tcp(stream, peer), read_past)
    }

    /// Hands a UDP flow's hello (and where it came from) to its session.
    pub(crate) fn deliver_udp(&self, hello: DataHello, from: SocketAddr) -> Result<(), Undelivered> {
        self.deliver_conn(hello, DataConn::Udp(from), 0)
    }

    fn deliver_conn(&self, hello: DataHello, conn: DataConn, read_past: usize) -> Result<(), Undelivered> {
        let tx = self
            .waiting
            .lock()
            .expect("registry lock")
            .get(&hello.cookie)
            .cloned();
        match tx {
            Some((tx, dropped, peer)) => {
                // The agent sends only to its client: a TCP data connection
                // with the cookie from another address (one who learnt the
                // cookie, or a second client) is closed. UDP hellos are
                // checked by their session, which counts them.
                if let (DataConn::Tcp(_, from), Some(want)) = (&conn, peer) {
                    let ip = canonical_ip(from.ip());
                    if ip != want {
                        return Err(Undelivered::refused(format!(
                            "data connection for session {} from {ip}, not from its control connection's \
                             address {want}; closed",
                            hello.cookie
                        )));
                    }
                }
                let sent = match (tx, conn) {
                    (QueueTx::Setup(_), _) if read_past > 0 => {
                        return Err(Undelivered::refused(format!(
                            "session {}: a data connection sent {read_past} bytes past its greeting before \
                             its test started; closed",
                            hello.cookie
                        )))
                    }
                    (QueueTx::Setup(tx), c) => {
                        // Set-up configures its connections with blocking calls.
                        if let DataConn::Tcp(s, _) = &c {
                            s.set_nonblocking(false).map_err(|e| {
                                Undelivered::refused(format!("cannot make the socket blocking: {e}"))
                            })?;
                        }
                        tx.try_send((hello, c))
                            .map_err(|e| matches!(e, mpsc::TrySendError::Full(_)))
                    }
                    // The worker that takes it keeps it non-blocking.
                    (QueueTx::Run(intake), DataConn::Tcp(stream, _)) => intake
                        .give(netrig_engine::intake::Arrival {
                            hello,
                            stream,
                            read_past,
                        })
                        .map_err(|r| r == netrig_engine::intake::Refused::Full),
                    (QueueTx::Run(_), DataConn::Udp(_)) => {
                        return Err(Undelivered::refused("a UDP hello for a TCP test; ignored".into()))
                    }
                };
                sent.map_err(|full| {
                    if full {
                        Undelivered::refused(format!(
                            "session {}: its queue of new data connections is full; closed one ({} so far)",
                            hello.cookie,
                            dropped.fetch_add(1, Ordering::Relaxed) + 1
                        ))
                    } else {
                        Undelivered {
                            why: format!(
                                "session {} is not accepting more data connections: its run is over; closed",
                                hello.cookie
                            ),
                            late: true,
                        }
                    }
                })
            }
            None => Err(Undelivered::refused(
                "data connection with an unknown or expired session cookie; closed".into(),
            )),
        }
    }
}

/// Why a data connection or hello went to no session.
#[derive(Debug)]
pub(crate) struct Undelivered {
    pub(crate) why: String,
    /// Its session's run was over: a connection-per-transaction client's
    /// last connections arrive so, as its run ends (outside the window,
    /// counted by neither end); not worth a warning.
    pub(crate) late: bool,
}

impl Undelivered {
    fn refused(why: String) -> Undelivered {
        Undelivered { why, late: false }
    }
}

impl std::fmt::Display for Undelivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Removes a cookie from the registry however the test ends.
pub(crate) struct Registration<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) cookie: SessionCookie,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.registry.unregister(&self.cookie);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connection to a loopback listener and the address it came from.
    fn conn(l: &TcpListener) -> (TcpStream, SocketAddr) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let from = c.local_addr().unwrap();
        (c, from)
    }

    fn hello(cookie: SessionCookie) -> DataHello {
        DataHello {
            version: netrig_proto::PROTOCOL_VERSION,
            cookie,
            flow: 0,
        }
    }

    /// A connection for a run that is over is late (said at debug level: a
    /// connection-per-transaction client's last ones arrive so); one for a
    /// full queue, a stranger's address or an unknown cookie is refused (a
    /// warning).
    #[test]
    fn a_connection_after_its_run_is_late_and_the_others_are_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let r = Registry::default();
        let cookie = SessionCookie([7; 16]);
        let intake = r.register_run(cookie, 1, Some(IpAddr::from([127, 0, 0, 1])));
        let (c, from) = conn(&l);
        r.deliver(hello(cookie), c, from, 0).expect("queued");
        let (c, from) = conn(&l);
        let full = r.deliver(hello(cookie), c, from, 0).unwrap_err();
        assert!(!full.late && full.why.contains("full"), "{full}");
        let (c, _) = conn(&l);
        let stranger = r
            .deliver(hello(cookie), c, SocketAddr::from(([127, 0, 0, 2], 9)), 0)
            .unwrap_err();
        assert!(!stranger.late && stranger.why.contains("not from"), "{stranger}");
        intake.close();
        let (c, from) = conn(&l);
        let late = r.deliver(hello(cookie), c, from, 0).unwrap_err();
        assert!(late.late && late.why.contains("run is over"), "{late}");
        let (c, from) = conn(&l);
        let unknown = r.deliver(hello(SessionCookie([8; 16])), c, from, 0).unwrap_err();
        assert!(!unknown.late && unknown.why.contains("unknown"), "{unknown}");
    }

    /// What a run holding the listener read past a greeting goes with the
    /// connection to its run; a set-up connection that sent before its test
    /// started is refused.
    #[test]
    fn bytes_read_past_a_greeting_go_to_a_run_and_are_refused_at_set_up() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let r = Registry::default();
        let peer = Some(IpAddr::from([127, 0, 0, 1]));
        let run = SessionCookie([7; 16]);
        let intake = r.register_run(run, 4, peer);
        let (c, from) = conn(&l);
        r.deliver(hello(run), c, from, 33).expect("queued");
        let (dealer, intakes) = netrig_engine::intake::deal(1, 4).unwrap();
        intake.start(dealer);
        let a = intakes[0].arrivals.try_recv().expect("dealt");
        assert_eq!(a.read_past, 33);
        let setup = SessionCookie([9; 16]);
        let _rx = r.register(setup, 4, peer);
        let (c, from) = conn(&l);
        let early = r.deliver(hello(setup), c, from, 1).unwrap_err();
        assert!(
            !early.late && early.why.contains("before its test started"),
            "{early}"
        );
        let (c, from) = conn(&l);
        r.deliver(hello(setup), c, from, 0)
            .expect("nothing read past: queued");
    }
}
