//! The responder: a connection of the run's, its greeting seen, taken on
//! and answered.

use super::conn::*;
use super::worker::*;
use mio::Registry;
use netrig_engine::sockopt;
use netrig_engine::txn::{Answerer, Moved};
use netrig_engine::EngineError;
use netrig_proto::DataHello;
use std::io::Read;
use std::net::TcpStream;
use std::time::Instant;

impl Worker<'_> {
    /// A connection of the peer's, its greeting seen: answer it.
    pub(super) fn arrive(
        &mut self,
        registry: &Registry,
        hello: DataHello,
        sock: TcpStream,
        taken: Taken,
    ) -> Result<(), EngineError> {
        let Some((i, answer)) = self.accepted(&hello, &sock, taken)? else {
            return Ok(());
        };
        if self.cfg.closes_now(&answer) {
            return Ok(()); // Nothing to answer (no data): closed as it goes.
        }
        // Answered first, watched after: the request has mostly come with
        // the greeting, and the event loop's bookkeeping (and, the responder
        // closing first, all of it) stays off the requester's wait.
        let slot = self
            .open(None, sock, i, Step::Answering(answer), Instant::now())
            .expect("not watched: cannot fail");
        let serial = self.serial;
        self.advance(slot)?;
        if let Some(c) = self
            .conns
            .get(slot)
            .and_then(Option::as_ref)
            .filter(|c| c.serial == serial)
        {
            if let Err(e) = watch(registry, &c.sock, slot) {
                log::debug!("flow {}: {e}; closed", hello.flow);
                self.close(slot);
            }
        }
        Ok(())
    }

    /// A connection of the peer's, its greeting seen (`taken`: what of it
    /// and of the request has been read): its flow and what answers it, or
    /// `None` when it is to be closed (said at debug level).
    pub(super) fn accepted(
        &mut self,
        hello: &DataHello,
        sock: &TcpStream,
        taken: Taken,
    ) -> Result<Option<(usize, Answerer)>, EngineError> {
        let Some(&i) = self.by_id.get(&hello.flow) else {
            log::debug!(
                "a connection for flow {}, which this test does not have; closed",
                hello.flow
            );
            return Ok(None);
        };
        sockopt::apply_connected(sock, &self.cfg.accepted_options, true, "-S/--remote-sockbuf")
            .map_err(|e| EngineError::Setup(format!("agent {e}")))?;
        self.flows[i].note_first(sock);
        let requests = self.cfg.requests();
        let mut answer = Answerer::new(self.cfg.txn.request_size, self.cfg.txn.response_size, requests);
        let request = match taken {
            Taken::Read(request) => request,
            Taken::Peeked => {
                let room = self.cfg.txn.request_size.min(self.rbuf.len() - DataHello::LEN);
                match (&*sock).read(&mut self.rbuf[..DataHello::LEN + room]) {
                    // (At least the greeting: it was seen whole.)
                    Ok(n) if n >= DataHello::LEN => n - DataHello::LEN,
                    Ok(n) => {
                        log::debug!(
                            "flow {}: {n} bytes where its greeting was seen whole; closed",
                            hello.flow
                        );
                        return Ok(None);
                    }
                    Err(e) => {
                        log::debug!("flow {}: reading its greeting: {e}; closed", hello.flow);
                        return Ok(None);
                    }
                }
            }
        };
        if request > 0 {
            self.flows[i].slot.counters.add_bytes(request as u64);
            if let Err((what, e)) = answer.took(request) {
                log::debug!("flow {}: {what}: {e}; closed", hello.flow);
                return Ok(None);
            }
        }
        if requests == 0 {
            // No data (tcp-cc): the greeting is the transaction.
            let moved = Moved {
                bytes: 0,
                transactions: 1,
            };
            self.flows[i].answered(&moved, sock);
        }
        Ok(Some((i, answer)))
    }
}
