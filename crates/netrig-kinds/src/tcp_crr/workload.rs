//! Connect, request, response, close: a new TCP connection per transaction
//! (netperf TCP_CRR).
//!
//! The requester opens each transaction's connection itself, nonblocking,
//! in its worker's event loop: connecting → greeting and request written →
//! response read → closed; a closed-loop flow alone on its worker does the
//! same on blocking sockets, without the event loop (`run_alone`). Which end closes first is `--close-first`: the
//! requester by default (as neper's tcp_crr --time-wait: TIME_WAIT on the client),
//! the responder (as netperf's netserver and an HTTP/1.0 server: TIME_WAIT
//! on the agent; the requester waits for that close before it closes and
//! opens the next), or the requester with a reset (SO_LINGER 0, as neper's
//! tcp_crr by default: no TIME_WAIT anywhere; the responder takes the reset
//! after its whole response as the end). Latency runs from the start of connect() (closed loop)
//! or from when the transaction was due (open loop, paced as tcp-rr) to the
//! last response byte. A transaction that fails (refused, timed out, no local
//! port, reset, anything else) is counted by reason, not as a transaction,
//! and the flow carries on with the next one; in closed loop, one that
//! failed before it could start is retried after [`FAILED_RETRY`].
//!
//! The responder gets the peer's connections through the run's intake, the
//! greeting already read, or, when the agent lent the run the listener
//! (shared by its workers), accepts them itself (see `engine::intake::Door`),
//! peeking at each greeting and reading it with the request in one call: it
//! answers the one request, then closes (responder first) or waits for the
//! requester's close. A closed-loop run of one flow does so on blocking
//! sockets (`run_lone`: the worker waits in accept(2), as netserver does),
//! and reads greeting and request in one recv(2) without peeking first,
//! giving back what it read of a connection that is not its run's.
//! Every connection on either end is bounded by the transaction timeout.
//!
//! The files, by role, each below those that use it: `params` (the
//! workload's parameters), `failure` (why a transaction failed, and the
//! kind's own counts of it), `conn` (a connection's steps on its socket),
//! `greeting` (connections from the lent listener until their greeting is
//! whole), `worker` (a worker's flows and connections, the event loop's
//! handler), then the worker's parts: `steps` (a connection moved on),
//! `requester`, `responder`, `door` (accepting from the lent listener),
//! `alone` and `lone` (one flow on blocking sockets, requester and
//! responder); this file picks the path a worker takes. tcp-cc (netperf's
//! TCP_CC: connect, close) runs them all without data
//! (`CrrWorkload::no_data`): its requester writes its greeting alone and
//! takes the responder's close for the response; its responder, closing
//! first, answers the greeting with that close.

use super::alone::*;
use super::failure::*;
use super::greeting::*;
use super::params::*;
use super::worker::*;
use netrig_engine::cap::SendCap;
use netrig_engine::flow::{FlowSlot, WorkerEnd};
use netrig_engine::intake::{watch_door, WorkerIntake, DOOR};
use netrig_engine::reactor::Reactor;
use netrig_engine::workload::{TransientWorkload, WorkerControl};
use netrig_engine::EngineError;
use netrig_proto::report::Role;
use netrig_proto::DataHello;
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;

impl TransientWorkload for CrrWorkload {
    fn run_transient(
        &self,
        flows: Vec<FlowSlot>,
        intake: Option<WorkerIntake>,
        ctl: &WorkerControl,
    ) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        // The intake's poll holds its waker (as WAKE).
        let (mut reactor, arrivals, door) = match intake {
            Some(i) => (Reactor::with_poll(i.poll, false)?, Some(i.arrivals), i.door),
            None => (Reactor::new(false)?, None, None),
        };
        // One responder flow, closed loop, holding the listener: it waits in
        // accept(2) itself, no event loop (run_lone), if the door lets it;
        // its waits bounded by a watch, or else by socket timeouts.
        let lone_flow = door.is_some()
            && self.txn.rate.is_none()
            && self.txn.burst <= 1
            && matches!(&flows[..], [f] if f.role == Role::Responder);
        let watch = lone_flow.then(crate::txn::watch_alone).flatten();
        let wait = if watch.is_some() { None } else { Some(ALONE_POLL) };
        let lone = lone_flow && door.as_ref().is_some_and(|d| d.block(wait).is_ok());
        let mut lone_door = None;
        let door = match door {
            Some(d) if lone => {
                let copy = d.listener().try_clone_to_owned().map_err(setup)?;
                lone_door = Some((d, std::net::TcpListener::from(copy)));
                None
            }
            Some(d) => {
                let copy = d.listener().try_clone_to_owned().map_err(setup)?;
                let l = mio::net::TcpListener::from_std(std::net::TcpListener::from(copy));
                watch_door(reactor.registry(), l.as_fd(), DOOR).map_err(setup)?;
                Some((d, l))
            }
            None => None,
        };
        let pacer = self.txn.pacer(reactor.registry(), ctl.window).map_err(setup)?;
        let mut w = Worker {
            cfg: self,
            ctl,
            cap: SendCap::of(ctl),
            arrivals,
            door,
            by_id: flows.iter().enumerate().map(|(i, f)| (f.id, i)).collect(),
            flows: flows
                .into_iter()
                .map(|slot| FlowState {
                    hello: slot
                        .connect
                        .as_ref()
                        .map(|c| c.hello(slot.id))
                        .unwrap_or_default(),
                    slot,
                    in_flight: 0,
                    failures: Failures::default(),
                    first: None,
                    first_done: false,
                })
                .collect(),
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            deadlines: VecDeque::new(),
            serial: 0,
            latency: ctl.latencies(),
            pacer,
            outgoing: [vec![0; DataHello::LEN], vec![0x5a; self.txn.request_size]].concat(),
            response: vec![0xa5; self.txn.response_size.clamp(1, 256 * 1024)],
            rbuf: vec![0; 64 * 1024],
            restart: Vec::new(),
            retry: Vec::new(),
            retry_at: None,
            stopping: false,
            logged: [false; 5],
            door_due: true,
            door_backoff: None,
            greeting: Greetings::default(),
        };
        for i in 0..w.flows.len() {
            if w.flows[i].slot.role != Role::Requester {
                continue;
            }
            if w.flows[i].slot.connect.is_none() {
                return Err(EngineError::Setup(format!(
                    "flow {}: a requester without an address to connect to",
                    w.flows[i].slot.id
                )));
            }
            match &mut w.pacer {
                Some(p) => p.start(i, ctl.start),
                None => w
                    .restart
                    .extend(std::iter::repeat_n(i, self.txn.burst.max(1) as usize)),
            }
        }
        if w.alone() {
            return w.run_alone();
        }
        if let Some((door, listener)) = lone_door {
            return w.run_lone(door, listener, watch);
        }
        reactor.run_worker(w, ctl)
    }
}
