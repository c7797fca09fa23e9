//! The requester: starting each transaction on a new nonblocking
//! connection, and its end, done or failed (counted by reason).

use super::conn::*;
use super::worker::*;
use mio::Registry;
use netrig_engine::sockopt;
use netrig_engine::EngineError;
use netrig_proto::report::Role;
use socket2::{Domain, Socket, Type};
use std::io::{self};
use std::time::Instant;

impl Worker<'_> {
    /// Starts a transaction of requester flow `i`, due at `due` in open loop.
    /// False if it failed at once (counted).
    pub(super) fn start(
        &mut self,
        registry: &Registry,
        i: usize,
        due: Option<Instant>,
    ) -> Result<bool, EngineError> {
        let connector = self.flows[i]
            .slot
            .connect
            .clone()
            .expect("checked: requesters have one");
        let addr = connector.addr;
        let sock = match Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking(),
            Some(connector.options.protocol()),
        ) {
            Ok(s) => s,
            Err(e) => return Ok(self.failed_at_once(i, e)),
        };
        sockopt::apply_before_connect(&sock, &connector.options, "-s/--local-sockbuf")
            .map_err(|e| EngineError::Setup(format!("local {e}")))?;
        self.cfg.reset_on_close(&sock)?;
        if let Err(e) = self.cfg.bind_local(&sock, &connector) {
            return Ok(self.failed_at_once(i, e));
        }
        let t0 = Instant::now();
        let step = match sock.connect(&addr.into()) {
            Ok(()) => Step::Connecting, // the writable event confirms it
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Step::Connecting,
            Err(e) => return Ok(self.failed_at_once(i, e)),
        };
        let slot = match self.open(Some(registry), sock.into(), i, step, due.unwrap_or(t0)) {
            Ok(s) => s,
            Err(e) => return Ok(self.failed_at_once(i, e)),
        };
        self.advance(slot)?;
        Ok(true)
    }

    /// Counts a transaction that failed before it could start; false.
    pub(super) fn failed_at_once(&mut self, i: usize, e: io::Error) -> bool {
        self.count_failure(i, &e);
        false
    }

    /// A requester's transaction failed: count it and replace it.
    pub(super) fn fail(&mut self, slot: usize, e: io::Error) {
        if let Some(c) = self.close(slot) {
            if matches!(c.step, Step::Draining) {
                // Counted already: only the responder's close was missing.
                log::debug!(
                    "flow {}: closed without the responder's close: {e}",
                    self.flows[c.flow].slot.id
                );
                self.ended(c.flow);
            } else if self.flows[c.flow].slot.role == Role::Requester {
                self.count_failure(c.flow, &e);
                self.ended(c.flow);
            } else {
                log::debug!(
                    "flow {}: connection closed unanswered: {e}",
                    self.flows[c.flow].slot.id
                );
            }
        }
    }

    /// A requester's transaction ended, one way or the other.
    pub(super) fn ended(&mut self, flow: usize) {
        if self.pacer.is_none() && !self.stopping {
            self.restart.push(flow);
        }
    }
}
