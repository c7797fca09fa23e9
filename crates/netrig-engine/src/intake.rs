//! Connections that reach an end while it runs: the responder's side of a
//! connection-per-transaction test (tcp-crr).
//!
//! The agent's listener reads each new connection's DataHello and hands
//! the connection to the session's [`Intake`] as an [`Arrival`], on its own
//! thread: the intake deals it to a worker at once, round-robin (no thread
//! in between: a hop less per connection). Each worker has a bounded
//! channel and a mio [`Waker`] registered on its own event loop as
//! [`WAKE`], so it learns of a new connection without polling. Arrivals
//! before the run has its workers wait in the intake (bounded); an arrival
//! no worker has room for is closed and counted, never dropped silently.
//!
//! A run may also be lent the listener itself, as a [`Door`] its workers
//! share: each accepts on it (EPOLLEXCLUSIVE: [`watch_door`]) and answers
//! the connections that greet it with its session's cookie at once, a
//! thread hand-over less per connection (the wake-up of the listener's
//! thread is most of what a new connection costs the agent beyond the
//! kernel's work). Everything else it accepts (control connections, other
//! sessions' connections, greetings not arrived whole) goes back to the
//! listener's thread, which treats it as if it had accepted it itself. One
//! run holds the door at a time; the others
//! get their connections through the intake as before.

use mio::{Poll, Token, Waker};
use netrig_proto::DataHello;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;

/// A connection whose greeting has been read, with that greeting; the
/// connection is non-blocking, as the worker that answers it wants it.
#[derive(Debug)]
pub struct Arrival {
    pub hello: DataHello,
    pub stream: TcpStream,
    /// Bytes of what followed the greeting that were read with it (by the
    /// run holding the [`Door`], which reads greeting and request in one
    /// call before it knows whose the connection is): the start of the
    /// payload, opaque, for the worker to count as received. At most
    /// [`READ_AHEAD`].
    pub read_past: usize,
}

impl Arrival {
    /// An arrival of which nothing past the greeting has been read.
    pub fn new(hello: DataHello, stream: TcpStream) -> Arrival {
        Arrival {
            hello,
            stream,
            read_past: 0,
        }
    }
}

/// The most a worker holding the [`Door`] reads past a greeting in the call
/// that reads the greeting (a connection-per-transaction request's first
/// bytes); what it read of a connection it gives back goes back with it.
pub const READ_AHEAD: usize = 4096;

/// Token of the intake's Waker in a worker's event loop.
pub const WAKE: Token = netrig_io::reserved(1);

/// Token of a lent [`Door`]'s listener in a worker's event loop.
pub const DOOR: Token = netrig_io::reserved(3);

/// Connections a worker accepts from a [`Door`] per wake-up, so that a
/// flood of them cannot keep it from its own connections.
pub const DOOR_BATCH: usize = 64;

/// The agent's listener, lent to a run's workers (see the module notes);
/// dropping it (the last worker's share) gives the listener back.
pub trait Door: Send + Sync {
    /// The listening socket (non-blocking; the agent's own, not a copy).
    fn listener(&self) -> std::os::fd::BorrowedFd<'_>;
    /// Whether a connection from `peer` may be one of the run's own (from
    /// the run's client, in the networks served): if not, it goes back
    /// before a byte of it is read.
    fn admits(&self, peer: std::net::SocketAddr) -> bool;
    /// The greeting a connection brought (at most a [`DataHello`]'s
    /// length), if it is whole and opens one of the run's own connections:
    /// then the worker keeps it.
    fn claim(&self, greeting: &[u8], peer: std::net::SocketAddr) -> Option<DataHello>;
    /// A connection the worker will not keep, with what the worker read of
    /// it (`read`: nothing when it only peeked; else its first bytes, at
    /// most a [`DataHello`]'s length and [`READ_AHEAD`]): to the listener's
    /// thread, which reads (the rest of) its greeting and dispatches it, the
    /// bytes past the greeting with it (or closes it, and says why).
    fn hand_back(&self, stream: TcpStream, peer: std::net::SocketAddr, read: &[u8]);
    /// For a worker with nothing else to watch: makes the listener blocking,
    /// each accept(2) waiting at most `wait` (SO_RCVTIMEO, which the
    /// connections it accepts inherit, with SO_SNDTIMEO; `None`: no
    /// timeouts, the worker bounds its waits itself with a
    /// [`nudge::Watch`](crate::nudge::Watch)), so that the worker
    /// waits in accept(2) and in each connection's own calls, as netserver
    /// does, instead of in epoll_wait(2) and then an accept(2) more to find
    /// the queue empty. Until the door is dropped, which makes the listener
    /// non-blocking again, timeouts cleared; `hand_back` undoes both on a
    /// connection it takes back. An error (or a door that cannot) leaves the
    /// listener as it was, and the worker in its event loop.
    fn block(&self, wait: Option<std::time::Duration>) -> std::io::Result<()> {
        let _ = wait;
        Err(std::io::ErrorKind::Unsupported.into())
    }
    /// accept() failed for want of a resource (descriptors, memory): the
    /// agent keeps the reason for the sessions that ask why.
    fn accept_failed(&self, error: &std::io::Error) {
        let _ = error;
    }
}

/// Watches a lent listener (`fd`, a worker's copy) in `registry` as `token`,
/// readable and edge-triggered as mio's own registration (without
/// EPOLLRDHUP, which EPOLLEXCLUSIVE refuses: a listener has no peer to hang
/// up), and exclusive
/// (EPOLLEXCLUSIVE): with several workers of a run sharing the listener, a
/// new connection wakes one of those waiting, not each (the others would
/// wake to find the queue empty). Undone with `Registry::deregister`.
pub fn watch_door(
    registry: &mio::Registry,
    fd: std::os::fd::BorrowedFd<'_>,
    token: Token,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLEXCLUSIVE) as u32,
        u64: token.0 as u64,
    };
    // SAFETY: an epoll descriptor and a listener's, both open for the
    // call, and a valid event structure.
    let rc = unsafe { libc::epoll_ctl(registry.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// How long a worker holding the listener stops accepting after accept()
/// failed for want of a resource (the accept loop's own back-off).
pub const DOOR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether accept(2) failed for this one connection only (its peer gave up
/// while it was queued) or for a signal: the caller takes the next one at
/// once. Anything else but an empty queue (EMFILE, ENFILE, ENOBUFS and the
/// like) calls for a back-off instead of a spin.
pub fn accept_again(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::Interrupted
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Lends a run the listener when called, if no other run holds it.
pub type Lender = Box<dyn FnOnce() -> Option<Box<dyn Door>> + Send>;

/// Arrivals each worker's channel holds before the dealer tries the next worker.
pub const WORKER_CAPACITY: usize = 4096;

/// One worker's share of the arrivals: the event loop to run them in, whose
/// registry holds the Waker (as [`WAKE`]), and the channel they come on.
pub struct WorkerIntake {
    pub poll: Poll,
    pub arrivals: Receiver<Arrival>,
    /// The listener, when the run has it: every worker of the run accepts
    /// on it.
    pub door: Option<std::sync::Arc<dyn Door>>,
}

/// Deals arrivals out to the workers, round-robin.
pub struct Dealer {
    outs: Vec<(SyncSender<Arrival>, Waker)>,
    next: usize,
}

/// A dealer and the intakes of `workers` workers, each channel holding `capacity`.
pub fn deal(workers: usize, capacity: usize) -> std::io::Result<(Dealer, Vec<WorkerIntake>)> {
    let mut outs = Vec::with_capacity(workers);
    let mut intakes = Vec::with_capacity(workers);
    for _ in 0..workers {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        let (tx, rx) = mpsc::sync_channel(capacity);
        outs.push((tx, waker));
        intakes.push(WorkerIntake {
            poll,
            arrivals: rx,
            door: None,
        });
    }
    Ok((Dealer { outs, next: 0 }, intakes))
}

/// What became of one arrival.
#[derive(Debug, PartialEq, Eq)]
enum Dealt {
    Given,
    /// Every worker's channel was full: closed.
    Dropped,
    /// Every worker is gone (the run is over): closed.
    Late,
}

impl Dealer {
    /// Hands `a` to the next worker that has room, waking it.
    fn give(&mut self, mut a: Arrival) -> Dealt {
        let n = self.outs.len();
        let mut gone = 0;
        for k in 0..n {
            let (tx, waker) = &self.outs[(self.next + k) % n];
            match tx.try_send(a) {
                Ok(()) => {
                    let _ = waker.wake();
                    self.next = (self.next + k + 1) % n;
                    return Dealt::Given;
                }
                Err(TrySendError::Full(back)) => a = back,
                Err(TrySendError::Disconnected(back)) => {
                    gone += 1;
                    a = back;
                }
            }
        }
        if gone == n {
            Dealt::Late
        } else {
            Dealt::Dropped
        }
    }
}

/// Why the intake did not take an arrival (it is closed either way).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No room: every worker's channel, or the queue before the run, was full.
    Full,
    /// The run is over.
    Closed,
}

/// Where a run's arrivals go, shared between whoever accepts connections
/// (the agent's listener) and the runner: a bounded queue until the run's
/// workers exist, then straight to them.
pub struct Intake {
    state: Mutex<IntakeState>,
    /// Lends this run the listener, if its owner offers (see [`Door`]).
    lender: Mutex<Option<Lender>>,
}

enum IntakeState {
    Waiting {
        queue: VecDeque<Arrival>,
        capacity: usize,
    },
    Dealing(Dealer),
    Closed,
}

impl Intake {
    /// An intake that holds up to `capacity` arrivals before the run starts.
    pub fn new(capacity: usize) -> Intake {
        Intake {
            state: Mutex::new(IntakeState::Waiting {
                queue: VecDeque::new(),
                capacity,
            }),
            lender: Mutex::new(None),
        }
    }

    /// Offers the run the listener (the agent, when it registers the run);
    /// lent only when the run's worker takes it.
    pub fn offer_door(&self, lender: Lender) {
        *self.lender.lock().expect("intake lock") = Some(lender);
    }

    /// The listener, if offered and free (the runner, for a run with one
    /// worker: with more, the listener's thread deals). Asked once.
    pub fn take_door(&self) -> Option<Box<dyn Door>> {
        let lender = self.lender.lock().expect("intake lock").take()?;
        lender()
    }

    /// Takes one arrival: to a worker when the run has started, else into
    /// the queue; refused (and so closed) when there is no room or the run
    /// is over.
    pub fn give(&self, a: Arrival) -> Result<(), Refused> {
        let mut state = self.state.lock().expect("intake lock");
        match &mut *state {
            IntakeState::Waiting { queue, capacity } => {
                if queue.len() >= *capacity {
                    return Err(Refused::Full);
                }
                queue.push_back(a);
                Ok(())
            }
            IntakeState::Dealing(dealer) => match dealer.give(a) {
                Dealt::Given => Ok(()),
                Dealt::Dropped => Err(Refused::Full),
                Dealt::Late => Err(Refused::Closed),
            },
            IntakeState::Closed => Err(Refused::Closed),
        }
    }

    /// The run's workers exist: what waited goes to them, and so does
    /// whatever comes next. Returns how many of those waiting found no room.
    pub fn start(&self, mut dealer: Dealer) -> u64 {
        let mut state = self.state.lock().expect("intake lock");
        let mut dropped = 0;
        if let IntakeState::Waiting { queue, .. } = &mut *state {
            for a in queue.drain(..) {
                if dealer.give(a) != Dealt::Given {
                    dropped += 1;
                }
            }
        }
        *state = IntakeState::Dealing(dealer);
        dropped
    }

    /// The run is over: what comes now is refused.
    pub fn close(&self) {
        *self.state.lock().expect("intake lock") = IntakeState::Closed;
        self.lender.lock().expect("intake lock").take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::SessionCookie;
    use std::net::TcpListener;
    use std::time::Duration;

    fn arrival(l: &TcpListener, flow: u32) -> Arrival {
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let hello = DataHello {
            version: netrig_proto::PROTOCOL_VERSION,
            cookie: SessionCookie([0; 16]),
            flow,
        };
        Arrival::new(hello, s)
    }

    #[test]
    fn an_intake_queues_until_the_run_starts_then_deals_and_refuses_once_closed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let intake = Intake::new(2);
        intake.give(arrival(&l, 0)).unwrap();
        intake.give(arrival(&l, 1)).unwrap();
        assert_eq!(
            intake.give(arrival(&l, 2)),
            Err(Refused::Full),
            "the queue holds 2"
        );
        let (dealer, intakes) = deal(1, 4).unwrap();
        assert_eq!(intake.start(dealer), 0);
        intake.give(arrival(&l, 3)).unwrap();
        let got: Vec<u32> = std::iter::from_fn(|| intakes[0].arrivals.try_recv().ok())
            .map(|a| a.hello.flow)
            .collect();
        assert_eq!(got, [0, 1, 3], "in order, the queued ones first");
        intake.close();
        assert_eq!(intake.give(arrival(&l, 4)), Err(Refused::Closed));
    }

    #[test]
    fn deals_round_robin_wakes_and_counts_what_finds_no_room() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut dealer, mut intakes) = deal(2, 1).unwrap();
        assert_eq!(dealer.give(arrival(&l, 0)), Dealt::Given);
        assert_eq!(dealer.give(arrival(&l, 1)), Dealt::Given);
        assert_eq!(
            dealer.give(arrival(&l, 2)),
            Dealt::Dropped,
            "both channels hold one"
        );
        for (w, i) in intakes.iter_mut().enumerate() {
            let mut events = mio::Events::with_capacity(4);
            i.poll.poll(&mut events, Some(Duration::from_secs(1))).unwrap();
            assert!(events.iter().any(|e| e.token() == WAKE), "worker {w} woken");
            assert_eq!(i.arrivals.try_recv().unwrap().hello.flow, w as u32);
        }
        drop(intakes);
        assert_eq!(dealer.give(arrival(&l, 3)), Dealt::Late);
    }

    /// A listener watched with `watch_door` reports a queued connection as
    /// readable under its token, in each of two polls that share it (each
    /// asked while the other is not waiting); the watch is exclusive (the
    /// kernel refuses EPOLL_CTL_MOD on an EPOLLEXCLUSIVE watch, and only on
    /// one); and `deregister` undoes it.
    #[test]
    fn a_door_watched_exclusively_reports_connections_and_can_be_dropped() {
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let mut polls: Vec<Poll> = (0..2).map(|_| Poll::new().unwrap()).collect();
        for p in &polls {
            watch_door(p.registry(), l.as_fd(), DOOR).unwrap();
        }
        let mut events = mio::Events::with_capacity(4);
        for (k, p) in polls.iter_mut().enumerate() {
            let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            p.poll(&mut events, Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let seen: Vec<_> = events.iter().map(|e| (e.token(), e.is_readable())).collect();
            assert_eq!(seen, vec![(DOOR, true)], "poll {k}");
            l.accept().unwrap();
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: an open epoll descriptor and listener, a valid event.
        let rc = unsafe {
            libc::epoll_ctl(
                std::os::fd::AsRawFd::as_raw_fd(polls[1].registry()),
                libc::EPOLL_CTL_MOD,
                fd,
                &mut ev,
            )
        };
        assert_eq!(
            (rc, std::io::Error::last_os_error().raw_os_error()),
            (-1, Some(libc::EINVAL)),
            "not an exclusive watch"
        );
        let mut src = mio::unix::SourceFd(&fd);
        polls[0].registry().deregister(&mut src).unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        polls[0]
            .poll(&mut events, Some(std::time::Duration::from_millis(100)))
            .unwrap();
        assert!(events.is_empty(), "deregistered, yet told");
    }
}
