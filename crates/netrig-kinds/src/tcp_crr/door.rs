//! The listener the agent lent the run: accepting from it in the event
//! loop, keeping the run's connections and giving the rest back.

use super::conn::*;
use super::greeting::*;
use super::worker::*;
use mio::Registry;
use netrig_engine::intake::{accept_again, Door, DOOR_BACKOFF, DOOR_BATCH};
use netrig_engine::EngineError;
use std::io;
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::time::Instant;

impl Worker<'_> {
    /// Accepts from the lent listener while it is due (at most
    /// [`DOOR_BATCH`] a call): a connection of this run's whose greeting came
    /// whole with it is answered here; any other goes back to the agent.
    pub(super) fn accept(&mut self, registry: &Registry) -> Result<(), EngineError> {
        if !self.door_due {
            return Ok(());
        }
        if let Some(t) = self.door_backoff {
            if Instant::now() < t {
                return Ok(());
            }
            self.door_backoff = None;
        }
        let Some((door, listener)) = self.door.take() else {
            self.door_due = false;
            return Ok(());
        };
        let mut taken = 0;
        let r = loop {
            if taken == DOOR_BATCH {
                break Ok(()); // more on the next turn (door_due stays)
            }
            let (sock, peer) = match listener.accept() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.door_due = false;
                    break Ok(());
                }
                Err(e) if accept_again(&e) => continue,
                Err(e) => {
                    // Out of descriptors and the like: told to the agent,
                    // tried again after a back-off, not in a spin.
                    door.accept_failed(&e);
                    self.door_backoff = Some(Instant::now() + DOOR_BACKOFF);
                    break Ok(());
                }
            };
            taken += 1;
            let sock = TcpStream::from(OwnedFd::from(sock));
            if !door.admits(peer) {
                // Another client's, or from outside --allow: not a byte read.
                door.hand_back(sock, peer, &[]);
                continue;
            }
            // Never a byte past the greeting: a control connection's is
            // shorter, and what follows it belongs to its session.
            let mut g = Greeting::new(sock, peer);
            if let Err(e) = self.greeted(registry, &*door, g.read(), g) {
                break Err(e);
            }
        };
        self.door = Some((door, listener));
        r
    }

    /// A parked connection's greeting may have come on.
    pub(super) fn greet(&mut self, registry: &Registry, g: usize) -> Result<(), EngineError> {
        let Some((door, listener)) = self.door.take() else {
            return Ok(());
        };
        let r = match self.greeting.take(g, registry) {
            Some(mut c) => self.greeted(registry, &*door, c.read(), c),
            None => Ok(()),
        };
        self.door = Some((door, listener));
        r
    }

    /// Where a connection from the lent listener goes once a read of its
    /// greeting is over: answered here when it is one of the run's; parked
    /// when it may still become one; otherwise back to the agent.
    pub(super) fn greeted(
        &mut self,
        registry: &Registry,
        door: &dyn Door,
        read: Heard,
        g: Greeting,
    ) -> Result<(), EngineError> {
        if let Some(hello) = door.claim(g.bytes(), g.peer) {
            return self.arrive(registry, hello, g.sock, Taken::Peeked);
        }
        if read == Heard::Waiting && g.may_be_data() {
            if let Some(g) = self.greeting.park(g, registry) {
                g.hand_back(door);
            }
            return Ok(());
        }
        g.hand_back(door);
        Ok(())
    }
}
