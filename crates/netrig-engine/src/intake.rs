//! Connections that reach an end while it runs: the responder's side of a
//! connection-per-transaction test (tcp-crr).
//!
//! The agent's listener reads each new connection's DataHello and its
//! registry passes the connection on to the session's run as an
//! [`Arrival`]. The runner deals arrivals out to its workers round-robin:
//! each worker has a bounded channel and a mio [`Waker`] registered on its
//! own event loop as [`WAKE`], so it learns of a new connection without
//! polling. An arrival no worker has room for is closed and counted, never
//! dropped silently.

use mio::{Poll, Token, Waker};
use netrig_proto::DataHello;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// A connection whose greeting has been read, with that greeting.
pub type Arrival = (DataHello, TcpStream);

/// Token of the intake's Waker in a worker's event loop.
pub const WAKE: Token = Token(usize::MAX - 1);

/// Arrivals each worker's channel holds before the dealer tries the next worker.
pub const WORKER_CAPACITY: usize = 4096;

/// One worker's share of the arrivals: the event loop to run them in, whose
/// registry holds the Waker (as [`WAKE`]), and the channel they come on.
pub struct WorkerIntake {
    pub poll: Poll,
    pub arrivals: Receiver<Arrival>,
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
        intakes.push(WorkerIntake { poll, arrivals: rx });
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

    /// Deals what arrives on `rx` until `done` is set (bounded: it looks
    /// every 20 ms). Returns how many arrivals found no room.
    pub fn run(mut self, rx: Receiver<Arrival>, done: &AtomicBool) -> u64 {
        let mut dropped = 0u64;
        while !done.load(Ordering::Relaxed) {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(a) => match self.give(a) {
                    Dealt::Given => {}
                    Dealt::Dropped => {
                        dropped += 1;
                        if dropped.is_power_of_two() {
                            log::warn!(
                                "{dropped} connection(s) closed unanswered: every worker's intake ({} each) was full",
                                WORKER_CAPACITY
                            );
                        }
                    }
                    Dealt::Late => log::debug!("a connection arrived after the run; closed"),
                },
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::SessionCookie;
    use std::net::TcpListener;

    fn arrival(l: &TcpListener, flow: u32) -> Arrival {
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let hello = DataHello {
            version: netrig_proto::PROTOCOL_VERSION,
            cookie: SessionCookie([0; 16]),
            flow,
        };
        (hello, s)
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
            assert_eq!(i.arrivals.try_recv().unwrap().0.flow, w as u32);
        }
        drop(intakes);
        assert_eq!(dealer.give(arrival(&l, 3)), Dealt::Late);
    }
}
