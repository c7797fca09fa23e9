//! The lent listener's greetings: connections accepted from the agent's
//! listener whose data greeting (its format is netrig-proto's `DataHello`)
//! has yet to come whole, parked in the worker's event loop for a while
//! before they go back to the agent's accept loop.

use mio::{Interest, Registry, Token};
use netrig_engine::intake::Door;
use netrig_proto::DataHello;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Tokens of connections from the lent listener whose greeting is still
/// coming: from here up (below the reactor's reserved tokens).
pub(super) const GREETING_BASE: usize = 1 << 40;
/// At most this many wait for their greeting in a worker; more go back to
/// the agent's accept loop, which bounds its own.
pub(super) const MAX_GREETING: usize = 256;
/// How long a worker waits for a greeting before the agent's accept loop
/// takes the connection over (with its own --greeting-timeout).
pub(super) const GREETING_WAIT: Duration = Duration::from_millis(200);

pub(super) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// How reading a greeting ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Heard {
    /// Nothing more yet.
    Waiting,
    /// Whole (as long as its kind's greeting is), at its end, or an error.
    Over,
}

/// A connection from the lent listener and what it sent of its greeting.
pub(super) struct Greeting {
    pub(super) sock: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) buf: [u8; DataHello::LEN],
    pub(super) len: usize,
    pub(super) since: Instant,
}

impl Greeting {
    pub(super) fn new(sock: TcpStream, peer: SocketAddr) -> Greeting {
        Greeting {
            sock,
            peer,
            buf: [0; DataHello::LEN],
            len: 0,
            since: Instant::now(),
        }
    }

    /// Looks at what has come of the greeting, taking none of it
    /// (MSG_PEEK): a connection that is not the run's goes back to the
    /// agent with every byte unread (a control connection's greeting is
    /// shorter, and what follows it belongs to its session), and one of the
    /// run's has its greeting and request read in one call.
    pub(super) fn read(&mut self) -> Heard {
        self.peek(0)
    }

    /// [`Greeting::read`] with recv(2) `flags` besides MSG_PEEK
    /// (MSG_DONTWAIT: not waiting on a blocking socket).
    pub(super) fn peek(&mut self, flags: libc::c_int) -> Heard {
        match recv(&self.sock, &mut self.buf, libc::MSG_PEEK | flags) {
            Ok(n) => {
                self.len = n;
                let more = DataHello::partial(self.bytes());
                if more {
                    Heard::Waiting
                } else {
                    Heard::Over
                }
            }
            // Nothing yet, or a signal (a lone responder's watch ended the
            // wait, as a socket timeout would have): looked at again later.
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                self.len = 0;
                Heard::Waiting
            }
            Err(_) => Heard::Over,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// To the agent's accept loop, unread (what was seen was only peeked).
    pub(super) fn hand_back(self, door: &dyn Door) {
        door.hand_back(self.sock, self.peer, &[]);
    }

    /// What came so far begins a data connection's greeting.
    pub(super) fn may_be_data(&self) -> bool {
        DataHello::may_begin(self.bytes())
    }
}

/// recv(2) with `flags` (std's read has none: MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL).
pub(super) fn recv(sock: &TcpStream, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: recv(2) into `buf`, at most its length; the descriptor is `sock`'s.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Connections parked until their greeting comes, by token - GREETING_BASE.
#[derive(Default)]
pub(super) struct Greetings {
    pub(super) slots: Vec<Option<Greeting>>,
    pub(super) free: Vec<usize>,
    pub(super) live: usize,
}

impl Greetings {
    /// Waits for the rest of `g`'s greeting; gives it back if there is no room.
    pub(super) fn park(&mut self, mut g: Greeting, registry: &Registry) -> Option<Greeting> {
        if self.live >= MAX_GREETING {
            return Some(g);
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let token = Token(GREETING_BASE + slot);
        if registry
            .register(
                &mut mio::unix::SourceFd(&g.sock.as_raw_fd()),
                token,
                Interest::READABLE,
            )
            .is_err()
        {
            self.free.push(slot);
            return Some(g);
        }
        g.since = g.since.min(Instant::now());
        self.slots[slot] = Some(g);
        self.live += 1;
        None
    }

    /// Takes a parked connection out of the event loop.
    pub(super) fn take(&mut self, slot: usize, registry: &Registry) -> Option<Greeting> {
        let g = self.slots.get_mut(slot)?.take()?;
        let _ = registry.deregister(&mut mio::unix::SourceFd(&g.sock.as_raw_fd()));
        self.free.push(slot);
        self.live -= 1;
        Some(g)
    }

    /// Gives back to the agent (or closes, without a door) those parked
    /// since before `now` - GREETING_WAIT.
    pub(super) fn expire(&mut self, now: Instant, registry: &Registry, door: Option<&dyn Door>) {
        for slot in 0..self.slots.len() {
            let due = matches!(&self.slots[slot], Some(g) if now.saturating_duration_since(g.since) >= GREETING_WAIT);
            if due {
                if let (Some(g), Some(d)) = (self.take(slot, registry), door) {
                    g.hand_back(d);
                }
            }
        }
    }
}
