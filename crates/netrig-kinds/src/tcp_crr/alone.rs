//! One closed-loop requester flow alone on its worker, on blocking
//! sockets (netperf's TCP_CRR client). Why it blocks rather than run as a
//! handler of the engine's reactor: see `Worker::run_alone`.

use super::params::*;
use super::worker::*;
use netrig_engine::flow::WorkerEnd;
use netrig_engine::sockopt;
use netrig_engine::EngineError;
use netrig_proto::report::Role;
use netrig_proto::spec::CloseFirst;
use socket2::{Domain, Socket, Type};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a requester alone on its worker waits in one blocking call
/// before it looks at the window, the abort and its transaction's deadline.
pub(super) const ALONE_POLL: Duration = Duration::from_millis(10);

/// How a requester's transaction alone on its worker ended.
pub(super) enum Alone {
    /// Done, or failed (counted) after it began: the next one now.
    Next,
    /// Failed before it could begin (counted): the next one after [`FAILED_RETRY`].
    Retry,
    /// The test was aborted, or the window closed and the drain is over.
    Over,
}

impl Worker<'_> {
    /// Whether this worker is one closed-loop requester flow with one
    /// connection at a time, and neither listener nor intake to watch.
    pub(super) fn alone(&self) -> bool {
        self.pacer.is_none()
            && self.cfg.txn.burst <= 1
            && self.door.is_none()
            && self.arrivals.is_none()
            && matches!(&self.flows[..], [f] if f.slot.role == Role::Requester)
    }

    /// One closed-loop requester flow alone on its worker (netperf's TCP_CRR
    /// client): each transaction's socket is blocking and the worker waits in
    /// connect(2) and read(2) itself, each wait bounded by the engine's
    /// watchdog (`nudge`; without it, SO_SNDTIMEO and SO_RCVTIMEO of
    /// [`ALONE_POLL`]) to look at the window, the abort and the
    /// transaction's `--timeout`, instead of in epoll_wait(2). A transaction
    /// is socket, connect, send (greeting and request), read (response),
    /// [read (the responder's close),] close; the event loop's path adds
    /// epoll_ctl, two or three epoll_waits, getsockopt, getpeername and reads
    /// that find nothing. Counts, failures by reason, latencies and the
    /// drain are the event loop's.
    ///
    /// Why it blocks rather than run as a handler of the engine's reactor:
    /// the system calls it saves are most of a transaction's. Measured with
    /// `strace -c -f` on `netrig tcp-crr -l 2` (both ends in one process,
    /// this path and [`Worker::run_lone`]): 12.3 calls per transaction
    /// (recvfrom 3, sendto 2, close 2, fcntl 2, socket, connect, accept4),
    /// against 19.1 through the event loop (`-P 2 -T 1`: epoll_ctl 2.3 and
    /// epoll_wait 2.1 more, accept4 and recvfrom that find nothing).
    pub(super) fn run_alone(mut self) -> Result<WorkerEnd, EngineError> {
        let to = self.flows[0]
            .slot
            .connect
            .clone()
            .expect("checked: requesters have one");
        let mut drain_by = None;
        let watch = crate::txn::watch_alone();
        while !self.ctl.aborted.load(Ordering::Relaxed) && !self.ctl.stop.load(Ordering::Relaxed) {
            self.latency.flush();
            match self.transact_alone(&to, &mut drain_by, watch.as_ref())? {
                Alone::Next => {}
                Alone::Retry => std::thread::sleep(FAILED_RETRY),
                Alone::Over => break,
            }
        }
        Ok(self.end())
    }

    /// A blocking call found nothing within [`ALONE_POLL`]: `None` to wait
    /// on; else the run is over, or the transaction's deadline passed (a
    /// failure, counted, unless the transaction was counted done already).
    pub(super) fn waited(
        &mut self,
        deadline: Instant,
        drain_by: &mut Option<Instant>,
        done: bool,
    ) -> Option<Alone> {
        if self.ctl.aborted.load(Ordering::Relaxed) {
            return Some(Alone::Over);
        }
        let now = Instant::now();
        if self.ctl.stop.load(Ordering::Relaxed) {
            // As the event loop's on_stop: what is in flight may finish.
            let by = *drain_by.get_or_insert(now + self.ctl.drain.min(self.cfg.timeout));
            if now >= by {
                return Some(Alone::Over);
            }
        }
        if now < deadline {
            return None;
        }
        let e = io::Error::new(
            io::ErrorKind::TimedOut,
            format!("not done within {:?} (--timeout)", self.cfg.timeout),
        );
        if done {
            let id = self.flows[0].slot.id;
            log::debug!("flow {id}: closed without the responder's close: {e}");
            return Some(Alone::Next);
        }
        Some(self.failed_alone(&e, Alone::Next))
    }

    /// One transaction of the worker's only flow, on a blocking socket.
    pub(super) fn transact_alone(
        &mut self,
        to: &netrig_engine::flow::Connector,
        drain_by: &mut Option<Instant>,
        watch: Option<&netrig_engine::nudge::Watch>,
    ) -> Result<Alone, EngineError> {
        // Each blocking call is marked: the watch interrupts it past ALONE_POLL.
        let waiting = || netrig_engine::nudge::waiting(watch);
        let setup = |e: io::Error| EngineError::Setup(format!("local socket: {e}"));
        let sock = match Socket::new(
            Domain::for_address(to.addr),
            Type::STREAM,
            Some(to.options.protocol()),
        ) {
            Ok(s) => s,
            Err(e) => return Ok(self.failed_alone(&e, Alone::Retry)),
        };
        sockopt::apply_before_connect(&sock, &to.options, "-s/--local-sockbuf")
            .map_err(|e| EngineError::Setup(format!("local {e}")))?;
        self.cfg.reset_on_close(&sock)?;
        if let Err(e) = self.cfg.bind_local(&sock, to) {
            return Ok(self.failed_alone(&e, Alone::Retry));
        }
        if watch.is_none() {
            sock.set_write_timeout(Some(ALONE_POLL)).map_err(setup)?;
            sock.set_read_timeout(Some(ALONE_POLL)).map_err(setup)?;
        }
        // From the start of connect(2), as the event loop's path times it.
        let t0 = Instant::now();
        let deadline = t0 + self.cfg.timeout;
        // A connect(2) that times out leaves the handshake going on; the
        // next call waits for it again, and says how it ended.
        loop {
            waiting();
            match sock.connect(&to.addr.into()) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EISCONN) => break,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINPROGRESS | libc::EALREADY | libc::EINTR)
                    ) =>
                {
                    if let Some(end) = self.waited(deadline, drain_by, false) {
                        return Ok(end);
                    }
                }
                // Refused, no local port: as the event loop, tried again after FAILED_RETRY.
                Err(e) => return Ok(self.failed_alone(&e, Alone::Retry)),
            }
        }
        let sock = TcpStream::from(OwnedFd::from(sock));
        let f = &mut self.flows[0];
        sockopt::apply_connected(&sock, &to.options, false, "-s/--local-sockbuf")
            .map_err(|e| EngineError::Setup(format!("local {e}")))?;
        f.note_first(&sock);
        // The greeting and the request, in one call as a rule.
        let hello = f.hello;
        let total = self.outgoing.len();
        let mut off = 0;
        while off < total {
            waiting();
            if off < hello.len() {
                self.outgoing[..hello.len()].copy_from_slice(&hello);
            }
            match (&sock).write(&self.outgoing[off..]) {
                Ok(n) => {
                    let payload = (off + n).saturating_sub(hello.len()) - off.saturating_sub(hello.len());
                    self.flows[0].slot.counters.add_bytes(payload as u64);
                    off += n;
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    if let Some(end) = self.waited(deadline, drain_by, false) {
                        return Ok(end);
                    }
                }
                Err(e) => return Ok(self.failed_alone(&e, Alone::Next)),
            }
        }
        let want = self.cfg.txn.response_size;
        let mut got = 0;
        // No data (tcp-cc): the responder's close is the response.
        let till_close = self.cfg.no_data();
        while got < want || till_close {
            waiting();
            match (&sock).read(&mut self.rbuf) {
                Ok(0) if till_close => break,
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("closed after {got} of the {want} response bytes"),
                    );
                    return Ok(self.failed_alone(&e, Alone::Next));
                }
                Ok(n) => {
                    self.flows[0].slot.counters.add_bytes(n as u64);
                    got += n;
                    if got > want {
                        let e = io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{got} response bytes, not {want}"),
                        );
                        return Ok(self.failed_alone(&e, Alone::Next));
                    }
                    // A response that trickles in never makes a read wait
                    // ALONE_POLL: its deadline is looked at here too.
                    if got < want {
                        if let Some(end) = self.waited(deadline, drain_by, false) {
                            return Ok(end);
                        }
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    if let Some(end) = self.waited(deadline, drain_by, false) {
                        return Ok(end);
                    }
                }
                Err(e) => return Ok(self.failed_alone(&e, Alone::Next)),
            }
        }
        let now = Instant::now();
        self.flows[0].completed(&mut self.latency, t0, now, &sock);
        if self.cfg.close_first == CloseFirst::Responder && !till_close {
            // Counted; nothing may follow the response but the responder's close.
            let id = self.flows[0].slot.id;
            loop {
                waiting();
                match (&sock).read(&mut self.rbuf) {
                    Ok(0) => break,
                    Ok(n) => {
                        log::debug!("flow {id}: {n} bytes after the response; closed");
                        break;
                    }
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                        if let Some(end) = self.waited(deadline, drain_by, true) {
                            return Ok(end);
                        }
                    }
                    Err(e) => {
                        log::debug!("flow {id}: after the response: {e}");
                        break;
                    }
                }
            }
        }
        Ok(Alone::Next)
    }

    /// Counts a failed transaction of the only flow; what comes next.
    pub(super) fn failed_alone(&mut self, e: &io::Error, next: Alone) -> Alone {
        self.count_failure(0, e);
        next
    }
}
