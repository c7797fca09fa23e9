//! Bulk transfer (TCP_STREAM, TCP_MAERTS and both at once): senders write
//! `message_size` bytes per call until stopped or their quota is sent;
//! receivers read `recv_size` bytes per call until end of file.

use crate::flow::SocketHandle;
use crate::sockopt;
use crate::workload::{WorkerControl, Workload};
use crate::{EngineError, Flow, FlowEnd, WorkerEnd};
use mio::{Events, Interest, Poll, Token};
use netrig_proto::report::{BufPair, Role};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The stream workload's parameters.
#[derive(Debug, Clone)]
pub struct StreamWorkload {
    pub message_size: usize,
    pub recv_size: usize,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Active,
    /// Window closed: a receiver reads on, uncounted in the window, until end of file.
    Draining,
    Done,
}

struct Slot {
    flow: Flow,
    sock: SocketHandle,
    state: State,
    bytes: u64,
    /// Offset inside the current message (a partial write continues it).
    msg_off: usize,
    done_at: Option<Instant>,
    final_buffers: Option<BufPair>,
}

impl Slot {
    fn io_error(&self, what: &str, e: io::Error) -> EngineError {
        EngineError::Flow {
            flow: self.flow.id,
            direction: self.flow.direction.name(),
            what: format!("{what} after {} bytes", self.bytes),
            error: e,
        }
    }

    fn record_final_buffers(&mut self) {
        if self.final_buffers.is_none() {
            self.final_buffers = Some(sockopt::buffers(&self.flow.socket));
        }
    }
}

impl Workload for StreamWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        let mut poll = Poll::new().map_err(setup)?;
        let mut slots = Vec::with_capacity(flows.len());
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.tcp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            let interest = match flow.role {
                Role::Sender | Role::Requester => Interest::WRITABLE,
                Role::Receiver | Role::Responder => Interest::READABLE,
            };
            poll.registry()
                .register(&mut sock, Token(i), interest)
                .map_err(setup)?;
            slots.push(Slot {
                flow,
                sock,
                state: State::Active,
                bytes: 0,
                msg_off: 0,
                done_at: None,
                final_buffers: None,
            });
        }
        let mut send_buf = vec![0u8; self.message_size.max(1)];
        for (i, b) in send_buf.iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        let mut recv_buf = vec![0u8; self.recv_size.max(1)];
        let mut events = Events::with_capacity(1024);
        let mut live = slots.len();
        let mut drain_deadline: Option<Instant> = None;

        while live > 0 {
            if drain_deadline.is_none() && ctl.stop.load(Ordering::Relaxed) {
                // The window closed: senders finish, receivers drain.
                for s in slots.iter_mut().filter(|s| s.state == State::Active) {
                    s.record_final_buffers();
                    match s.flow.role {
                        Role::Sender | Role::Requester => {
                            let _ = s.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                            s.state = State::Done;
                            live -= 1;
                        }
                        Role::Receiver | Role::Responder => s.state = State::Draining,
                    }
                }
                drain_deadline = Some(Instant::now() + ctl.drain);
                continue;
            }
            if let Some(d) = drain_deadline {
                if Instant::now() >= d {
                    // The peer never closed: give up on it; what it sent late was not in the window anyway.
                    break;
                }
            }
            match poll.poll(&mut events, Some(Duration::from_millis(10))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(setup(e)),
            }
            for ev in events.iter() {
                let Some(s) = slots.get_mut(ev.token().0) else {
                    continue;
                };
                if s.state == State::Done {
                    continue;
                }
                let finished = match s.flow.role {
                    Role::Sender | Role::Requester => self.on_writable(s, &send_buf, ctl)?,
                    Role::Receiver | Role::Responder => {
                        self.on_readable(s, &mut recv_buf, drain_deadline.is_some())?
                    }
                };
                if finished {
                    let _ = poll.registry().deregister(&mut s.sock);
                    live -= 1;
                }
            }
        }
        let flows = slots
            .into_iter()
            .map(|mut s| {
                s.record_final_buffers();
                FlowEnd {
                    id: s.flow.id,
                    total_bytes: s.bytes,
                    done_at: s.done_at,
                    final_buffers: s.final_buffers.unwrap_or_default(),
                    udp: None,
                }
            })
            .collect();
        Ok(WorkerEnd {
            flows,
            ..WorkerEnd::default()
        })
    }
}

impl StreamWorkload {
    /// Writes until the socket is full. Returns true when the flow is done.
    fn on_writable(&self, s: &mut Slot, buf: &[u8], ctl: &WorkerControl) -> Result<bool, EngineError> {
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                return Ok(false); // the loop above finishes the flow
            }
            let mut len = buf.len() - s.msg_off;
            if let Some(q) = s.flow.quota {
                let left = q - s.bytes;
                if left == 0 {
                    s.done_at = Some(Instant::now());
                    s.record_final_buffers();
                    let _ = s.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                    s.state = State::Done;
                    return Ok(true);
                }
                len = len.min(left.min(usize::MAX as u64) as usize);
            }
            match s.sock.write(&buf[s.msg_off..s.msg_off + len]) {
                Ok(n) => {
                    s.bytes += n as u64;
                    s.flow.counters.set_bytes(s.bytes);
                    s.msg_off = (s.msg_off + n) % buf.len();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(s.io_error("send", e)),
            }
        }
    }

    /// Reads until the socket is empty. Returns true at end of file.
    fn on_readable(&self, s: &mut Slot, buf: &mut [u8], stopping: bool) -> Result<bool, EngineError> {
        loop {
            match s.sock.read(buf) {
                Ok(0) => {
                    s.done_at = Some(Instant::now());
                    s.record_final_buffers();
                    s.state = State::Done;
                    return Ok(true);
                }
                Ok(n) => {
                    s.bytes += n as u64;
                    s.flow.counters.set_bytes(s.bytes);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A reset while draining only loses bytes that were outside the window.
                Err(_) if stopping => {
                    s.state = State::Done;
                    return Ok(true);
                }
                Err(e) => return Err(s.io_error("receive", e)),
            }
        }
    }
}
