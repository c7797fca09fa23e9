//! Moving a connection's transaction on, step by step, as far as its
//! socket allows, for the requester and the responder alike.

use super::conn::*;
use super::worker::*;
use netrig_engine::sockopt;
use netrig_engine::txn::Moved;
use netrig_engine::EngineError;
use netrig_proto::spec::CloseFirst;
use std::time::Instant;

impl Worker<'_> {
    /// Whether connection `slot` waits only for something to read: the
    /// response, the responder's close, or (answering) the request or the
    /// requester's close with nothing left to write.
    pub(super) fn waits_to_read(&self, slot: usize) -> bool {
        match self.conns.get(slot).and_then(Option::as_ref).map(|c| &c.step) {
            Some(Step::Receiving(_) | Step::Draining) => true,
            Some(Step::Answering(a)) => !a.owes(),
            _ => false,
        }
    }

    /// Moves a connection's transaction on as far as its socket allows.
    pub(super) fn advance(&mut self, slot: usize) -> Result<(), EngineError> {
        loop {
            let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                return Ok(());
            };
            let i = c.flow;
            let direct = self.flows[i]
                .slot
                .connect
                .as_ref()
                .is_some_and(|k| k.options.nothing_after_connect());
            let progress = match &mut c.step {
                Step::Connecting if direct => {
                    // Nothing to set once connected: the request's write
                    // tells whether the connect is done (EAGAIN while it is
                    // not, its error if it failed), without getsockopt(2)
                    // and getpeername(2) first.
                    c.step = Step::Sending(0);
                    continue;
                }
                Step::Connecting => match connect_done(&c.sock) {
                    Progress::Done => {
                        let f = &mut self.flows[i];
                        let opts = &f.slot.connect.as_ref().expect("requester").options;
                        sockopt::apply_connected(&c.sock, opts, false, "-s/--local-sockbuf")
                            .map_err(|e| EngineError::Setup(format!("local {e}")))?;
                        f.note_first(&c.sock);
                        c.step = Step::Sending(0);
                        continue;
                    }
                    not_yet => not_yet,
                },
                Step::Sending(off) => {
                    let f = &self.flows[i];
                    match send_request(&c.sock, off, &mut self.outgoing, &f.hello, &f.slot.counters) {
                        Progress::Done => {
                            c.step = Step::Receiving(0);
                            // Connected (the write went out): the first connection's figures.
                            self.flows[i].note_first(&c.sock);
                            // The response is seldom there yet (the responder has
                            // yet to run): its arrival wakes the poll.
                            return Ok(());
                        }
                        not_yet => not_yet,
                    }
                }
                Step::Receiving(got) => {
                    let want = self.cfg.txn.response_size;
                    match receive_response(&c.sock, got, want, &mut self.rbuf, &self.flows[i].slot.counters) {
                        // The whole response: the transaction is done; the requester closes first
                        // (or, the responder closing first, once it has: without a response, that
                        // close was the response).
                        Progress::Done => {
                            let now = Instant::now();
                            self.flows[i].completed(&mut self.latency, c.t0, now, &c.sock);
                            if self.cfg.close_first == CloseFirst::Responder && want > 0 {
                                c.step = Step::Draining;
                                continue;
                            }
                            Progress::Done
                        }
                        not_yet => not_yet,
                    }
                }
                Step::Draining => await_close(&c.sock, &mut self.rbuf, self.flows[i].slot.id),
                Step::Answering(answer) => {
                    let mut moved = Moved::default();
                    let r = answer.serve(&mut c.sock, &mut self.rbuf, &self.response, &mut moved, &self.cap);
                    self.flows[i].answered(&moved, &c.sock);
                    match r {
                        // Closing first: as soon as the response is out.
                        Ok(false) if self.cfg.closes_now(answer) => {
                            self.close(slot);
                        }
                        Ok(false) => return Ok(()),
                        // The requester closed (or reset, as asked): done.
                        Ok(true) => {
                            self.close(slot);
                        }
                        Err((_, e)) if self.cfg.reset_is_the_end(answer, &e) => {
                            self.close(slot);
                        }
                        Err((what, e)) => {
                            log::debug!("flow {}: {what}: {e}", self.flows[i].slot.id);
                            self.close(slot);
                        }
                    }
                    return Ok(());
                }
            };
            match progress {
                Progress::Blocked => {}
                Progress::Failed(e) => self.fail(slot, e),
                // The requester's transaction is over: its response read
                // (and, the responder closing first, that close seen).
                Progress::Done => {
                    self.close(slot);
                    self.ended(i);
                }
            }
            return Ok(());
        }
    }
}
