//! One closed-loop responder flow holding the agent's listener, on
//! blocking sockets (netserver's side of TCP_CRR). Why it blocks rather
//! than run as a handler of the engine's reactor: see `Worker::run_lone`.

use super::alone::*;
use super::conn::*;
use super::greeting::*;
use super::worker::*;
use netrig_engine::flow::WorkerEnd;
use netrig_engine::intake::{accept_again, Door, DOOR_BACKOFF, READ_AHEAD};
use netrig_engine::txn::Moved;
use netrig_engine::EngineError;
use netrig_proto::DataHello;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A lone responder that waited [`ALONE_POLL`] for a greeting that did not
/// come waits for none for this long: greetings not there at accept go
/// back to the agent (which passes the run's own on through the intake).
/// (A flood of silent connections then costs the run at most 4 % of its
/// time; a client that stalled ALONE_POLL sends its connections the longer
/// way, through the intake, for as long.)
pub(super) const IMPATIENCE: Duration = Duration::from_millis(250);

/// Connections a lone responder sets the timeouts of itself, beyond those
/// queued on the listener when it became blocking (see `run_lone`).
pub(super) const LONE_SETTLE: u64 = 64;

/// A lone responder's connection: each blocking call waits [`ALONE_POLL`] at most.
pub(super) fn lone_timeouts(sock: &TcpStream) -> io::Result<()> {
    sock.set_read_timeout(Some(ALONE_POLL))?;
    sock.set_write_timeout(Some(ALONE_POLL))
}

/// A lone responder's connection as `Answerer::serve` sees it: once `by`
/// has passed, or the test was aborted, a call fails WouldBlock without
/// touching the socket. serve reads (and writes) on while each blocking
/// call makes progress within ALONE_POLL, so without this a peer that
/// trickles its request (or reads the response slowly) would hold the
/// worker past `--timeout`, the run's end included.
pub(super) struct Bounded<'a> {
    pub(super) sock: &'a TcpStream,
    pub(super) by: Instant,
    pub(super) aborted: &'a std::sync::atomic::AtomicBool,
    /// Marks each call a wait; its interruption (EINTR) reads as the
    /// socket timeout's WouldBlock, so that serve returns to look at the run.
    pub(super) watch: Option<&'a netrig_engine::nudge::Watch>,
}

/// Blocking reads: nothing to save.
impl netrig_engine::inq::ReadInq for Bounded<'_> {}

impl Bounded<'_> {
    pub(super) fn over(&self) -> io::Result<()> {
        if self.aborted.load(Ordering::Relaxed) || Instant::now() >= self.by {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        netrig_engine::nudge::waiting(self.watch);
        Ok(())
    }
}

/// A watched call's interruption, as a socket timeout's expiry.
pub(super) fn interrupted_as_timeout(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(io::ErrorKind::WouldBlock.into()),
        r => r,
    }
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.over()?;
        interrupted_as_timeout(self.sock.read(buf))
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.over()?;
        interrupted_as_timeout(self.sock.write(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Worker<'_> {
    /// One responder flow, closed loop, on the worker holding the agent's
    /// listener (netserver's side of TCP_CRR): the door made the listener
    /// blocking (`Door::block`), and the worker waits in accept(2), then in
    /// the connection's own calls: one read of the greeting and the request
    /// (no peek; a connection not the run's goes back with what was read of
    /// it), the response's write[, the read of the requester's close], then
    /// close(2); each wait bounded by [`ALONE_POLL`] (the
    /// timeouts the connection inherits from the listener) to look at the
    /// run's end and the connection's `--timeout`. The event loop's path
    /// adds an epoll_wait(2) and an accept(2) that finds the queue empty per
    /// connection, and epoll_ctl(2) for each greeting that is late. What is
    /// not the run's goes back to the agent as from the event loop (a
    /// greeting not come whole within [`ALONE_POLL`] too: the agent waits
    /// for it, and gives it to this worker through the intake).
    ///
    /// Why it blocks rather than run as a handler of the engine's reactor:
    /// see [`Worker::run_alone`], the requester's side of the same
    /// measurement (12.3 system calls per transaction, both ends, against
    /// 19.1 through the event loop).
    pub(super) fn run_lone(
        mut self,
        door: Arc<dyn Door>,
        listener: std::net::TcpListener,
        watch: Option<netrig_engine::nudge::Watch>,
    ) -> Result<WorkerEnd, EngineError> {
        let waiting = || netrig_engine::nudge::waiting(watch.as_ref());
        let mut impatient_until: Option<Instant> = None;
        // Connections whose handshake ended before the listener had its
        // timeouts (queued when `Door::block` ran, or completing as it ran)
        // did not inherit them, and a wait without one would be unbounded:
        // that many connections, and LONE_SETTLE more, get theirs here.
        // (Watched, no wait needs a timeout.)
        let mut unsure = match &watch {
            Some(_) => 0,
            None => netrig_metrics::tcp_info::accept_queue(listener.as_fd())
                .map_or(u64::MAX, |q| u64::from(q) + LONE_SETTLE),
        };
        while !self.ctl.aborted.load(Ordering::Relaxed) && !self.ctl.stop.load(Ordering::Relaxed) {
            if let Some(rx) = self.arrivals.take() {
                while let Ok(a) = rx.try_recv() {
                    let timeouts = |s: &TcpStream| if watch.is_some() { Ok(()) } else { lone_timeouts(s) };
                    match a.stream.set_nonblocking(false).and_then(|()| timeouts(&a.stream)) {
                        Ok(()) => {
                            self.answer_lone(a.hello, a.stream, Taken::Read(a.read_past), watch.as_ref())?
                        }
                        Err(e) => log::debug!("flow {}: {e}; closed", a.hello.flow),
                    }
                }
                self.arrivals = Some(rx);
            }
            waiting();
            // (socket2's accept: std's takes EINTR for "again" itself, so
            // that a watched wait would never end.)
            let accepted = socket2::SockRef::from(&listener).accept().and_then(|(s, a)| {
                let peer = a.as_socket().ok_or_else(|| io::Error::other("not an IP peer"))?;
                Ok((TcpStream::from(OwnedFd::from(s)), peer))
            });
            let (sock, peer) = match accepted {
                Ok(a) => a,
                // ALONE_POLL without a connection; the peer gave up while queued; a signal.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || accept_again(&e) => continue,
                Err(e) => {
                    // Out of descriptors and the like: as the event loop's.
                    door.accept_failed(&e);
                    std::thread::sleep(DOOR_BACKOFF);
                    continue;
                }
            };
            if !door.admits(peer) {
                door.hand_back(sock, peer, &[]);
                continue;
            }
            if unsure > 0 {
                unsure -= 1;
                if let Err(e) = lone_timeouts(&sock) {
                    log::debug!("{peer}: {e}; closed");
                    continue;
                }
            }
            let impatient = impatient_until.is_some_and(|t| Instant::now() < t);
            // Greeting and request in one read (as netserver reads its
            // request): what is not the run's goes back with what was read
            // of it, which the agent takes before the socket's bytes.
            let room = self.cfg.txn.request_size.min(READ_AHEAD);
            let buf = &mut self.rbuf[..DataHello::LEN + room];
            waiting();
            let mut n = match recv(&sock, buf, if impatient { libc::MSG_DONTWAIT } else { 0 }) {
                Ok(n) => n,
                // ALONE_POLL without a byte (or a signal: the watch): until
                // IMPATIENCE has passed, no greeting is waited for (a silent
                // one goes back at once), so that silent connections cannot
                // hold up the run's own for ALONE_POLL each.
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    if !impatient {
                        impatient_until = Some(Instant::now() + IMPATIENCE);
                    }
                    0
                }
                // Reset and the like: the agent finds it so, and says why.
                Err(_) => 0,
            };
            // A data greeting in part: its rest (not the request's), as long as ALONE_POLL.
            if DataHello::partial(&buf[..n]) && !impatient {
                waiting();
                n += recv(&sock, &mut buf[n..DataHello::LEN], libc::MSG_WAITALL).unwrap_or(0);
            }
            let hello = buf.get(..DataHello::LEN).filter(|_| n >= DataHello::LEN);
            match hello.and_then(|g| door.claim(g, peer)) {
                Some(hello) => {
                    self.answer_lone(hello, sock, Taken::Read(n - DataHello::LEN), watch.as_ref())?
                }
                None => door.hand_back(sock, peer, &self.rbuf[..n]),
            }
        }
        // The listener goes back to the agent, non-blocking again, with the door.
        drop(listener);
        drop(door);
        Ok(self.end())
    }

    /// A connection of the run's on a lone responder (blocking, with
    /// [`ALONE_POLL`] timeouts): answered, then closed, by the close order;
    /// cut at its `--timeout`, the test's abort, or the drain's end.
    pub(super) fn answer_lone(
        &mut self,
        hello: DataHello,
        sock: TcpStream,
        taken: Taken,
        watch: Option<&netrig_engine::nudge::Watch>,
    ) -> Result<(), EngineError> {
        netrig_engine::nudge::waiting(watch);
        let Some((i, mut answer)) = self.accepted(&hello, &sock, taken)? else {
            return Ok(());
        };
        if self.cfg.closes_now(&answer) {
            return Ok(()); // Nothing to answer (no data): closed as it goes.
        }
        let deadline = Instant::now() + self.cfg.timeout;
        let mut drain_by = None;
        let ctl = self.ctl;
        loop {
            let mut moved = Moved::default();
            let mut bounded = Bounded {
                sock: &sock,
                by: deadline,
                aborted: &ctl.aborted,
                watch,
            };
            let r = answer.serve(
                &mut bounded,
                &mut self.rbuf,
                &self.response,
                &mut moved,
                &self.cap,
            );
            self.flows[i].answered(&moved, &sock);
            match r {
                Ok(false) if self.cfg.closes_now(&answer) => break,
                // A call waited ALONE_POLL: look at the clock and the run.
                Ok(false) => {
                    let now = Instant::now();
                    if self.ctl.stop.load(Ordering::Relaxed) {
                        drain_by.get_or_insert(now + self.ctl.drain.min(self.cfg.timeout));
                    }
                    if self.ctl.aborted.load(Ordering::Relaxed)
                        || now >= deadline
                        || drain_by.is_some_and(|t| now >= t)
                    {
                        log::debug!("flow {}: connection not done in time; closed", hello.flow);
                        break;
                    }
                }
                Ok(true) => break,
                Err((_, e)) if self.cfg.reset_is_the_end(&answer, &e) => break,
                Err((what, e)) => {
                    log::debug!("flow {}: {what}: {e}", hello.flow);
                    break;
                }
            }
        }
        Ok(())
    }
}
