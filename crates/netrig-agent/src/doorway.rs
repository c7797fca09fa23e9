//! The accept loop's side of lending the listener (the module `door`): which
//! listener a run holds, if one does, and the connections it gives back.

use mio::unix::SourceFd;
use mio::{Interest, Poll, Registry, Token, Waker};
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The listeners' tokens (by their index in
/// `Shared::listeners`); connections still greeting use
/// their slot index.
pub(crate) const LISTENERS: [Token; 2] = [netrig_io::reserved(0), netrig_io::reserved(2)];

/// Starts the accept loop's watch on listener `i` (again).
pub(crate) fn watch(registry: &Registry, listener: &mio::net::TcpListener, i: usize) -> io::Result<()> {
    registry.register(
        &mut SourceFd(&listener.as_raw_fd()),
        LISTENERS[i],
        Interest::READABLE,
    )
}

/// [`Doorway`]'s `lent` when no run holds a listener.
const NOT_LENT: usize = usize::MAX;

/// A connection a run gave back, with what it read of it.
pub(crate) struct Returned {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// Its first bytes, if the run read them (at most a DataHello's length
    /// and `READ_AHEAD`): the accept loop takes them before the socket's.
    pub read: Vec<u8>,
    /// It came to the iperf3 port (`--iperf3-port`), which serves iperf3 alone.
    pub iperf3_only: bool,
}

/// The accept loop's side: whether the listener is lent, and what comes back.
pub(crate) struct Doorway {
    /// Which listener is lent (its index in `Shared::listeners`), or
    /// [`NOT_LENT`]: one atomic, so that the accept loop never sees a run
    /// holding a listener with the index of another.
    lent: AtomicUsize,
    /// The accept loop's registry (to stop and start watching the listener).
    registry: Registry,
    /// Wakes the accept loop for what comes back.
    waker: Waker,
    returned: Mutex<VecDeque<Returned>>,
}

impl Doorway {
    pub(crate) fn new(poll: &Poll, token: Token) -> io::Result<Doorway> {
        Ok(Doorway {
            lent: AtomicUsize::new(NOT_LENT),
            registry: poll.registry().try_clone()?,
            waker: Waker::new(poll.registry(), token)?,
            returned: Mutex::new(VecDeque::new()),
        })
    }

    /// Which listener a run holds, if one does (the accept loop must not
    /// accept on it).
    pub(crate) fn lent(&self) -> Option<usize> {
        Some(self.lent.load(Ordering::Acquire)).filter(|&i| i != NOT_LENT)
    }

    /// What came back since last asked.
    pub(crate) fn returned(&self) -> VecDeque<Returned> {
        std::mem::take(&mut *self.returned.lock().expect("doorway lock"))
    }

    /// Takes `listener` (listener `which`) from the accept loop for a run:
    /// false if another run holds one, or the accept loop could not stop
    /// watching it.
    pub(crate) fn lend(&self, which: usize, listener: &mio::net::TcpListener) -> bool {
        if self
            .lent
            .compare_exchange(NOT_LENT, which, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        if let Err(e) = self.registry.deregister(&mut SourceFd(&listener.as_raw_fd())) {
            log::debug!("cannot lend the listener to a run: {e}");
            self.lent.store(NOT_LENT, Ordering::Release);
            return false;
        }
        true
    }

    /// A connection back to the accept loop, with what the run read of it;
    /// closed when `max_pending` wait already (as many as may wait for their
    /// greeting in the accept loop).
    pub(crate) fn give_back(&self, back: Returned, max_pending: usize) {
        let mut q = self.returned.lock().expect("doorway lock");
        // Past that, as the accept loop would, the connection is closed.
        if q.len() >= max_pending {
            log::debug!(
                "{}: closed: too many connections given back to the accept loop",
                back.peer
            );
            return;
        }
        q.push_back(back);
        drop(q);
        let _ = self.waker.wake();
    }

    /// The listener (listener `which`) back to the accept loop, which
    /// accepts what queued.
    pub(crate) fn take_back(&self, which: usize, listener: &mio::net::TcpListener) {
        if let Err(e) = watch(&self.registry, listener, which) {
            log::error!("cannot take the listener back from a run: {e}; no longer accepting");
        }
        self.lent.store(NOT_LENT, Ordering::Release);
        let _ = self.waker.wake();
    }
}
