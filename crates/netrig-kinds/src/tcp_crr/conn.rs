//! A connection's steps: where each is in its transaction, and the
//! requester's steps on a nonblocking socket (connect, greeting and
//! request, response, the responder's close), each as far as the socket
//! allows. A connection without data (tcp-cc, netperf's TCP_CC) writes
//! its greeting alone, and its response is the responder's close.

use netrig_engine::flow::FlowCounters;
use netrig_engine::txn::Answerer;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// What a responder has read of a connection of its run as it takes it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taken {
    /// Its greeting was only peeked at: read here, with as much of the
    /// request as came, in one call.
    Peeked,
    /// Its greeting was read, and this many bytes of the request with it
    /// (counted here as received).
    Read(usize),
}

/// Where a connection is in its transaction.
pub(super) enum Step {
    /// Requester: connect() in progress.
    Connecting,
    /// Requester: greeting and request being written; bytes of both written so far.
    Sending(usize),
    /// Requester: response bytes read so far.
    Receiving(usize),
    /// Requester, the responder closing first: the transaction is done
    /// (counted); the responder's close awaited before closing.
    Draining,
    /// Responder: the request being answered, then the requester's close awaited.
    Answering(Answerer),
}

pub(super) struct Conn {
    pub(super) sock: TcpStream,
    /// Index in the worker's flows.
    pub(super) flow: usize,
    pub(super) step: Step,
    /// When the transaction started (requester): connect(), or its due time.
    pub(super) t0: Instant,
    /// Tells this connection's deadline from a later one's in the same slot.
    pub(super) serial: u64,
}

/// How far a requester's step on its nonblocking socket went.
pub(super) enum Progress {
    /// The whole step.
    Done,
    /// As far as the socket allows for now: its next event goes on.
    Blocked,
    /// The transaction failed.
    Failed(io::Error),
}

/// Whether a nonblocking connect(2) is done: blocked while the handshake
/// goes on, its error if it failed.
pub(super) fn connect_done(sock: &TcpStream) -> Progress {
    match sock.take_error() {
        Ok(None) => {}
        Ok(Some(e)) | Err(e) => return Progress::Failed(e),
    }
    match sock.peer_addr() {
        Ok(_) => Progress::Done,
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Progress::Blocked,
        Err(e) => Progress::Failed(e),
    }
}

/// Writes the greeting `hello` and the request (`outgoing`, which begins
/// with the greeting's room) from `*off` on, counting the request's bytes.
pub(super) fn send_request(
    mut sock: &TcpStream,
    off: &mut usize,
    outgoing: &mut [u8],
    hello: &[u8],
    counters: &FlowCounters,
) -> Progress {
    let total = outgoing.len();
    while *off < total {
        // Another flow's greeting may be there since this one's last call.
        if *off < hello.len() {
            outgoing[..hello.len()].copy_from_slice(hello);
        }
        match sock.write(&outgoing[*off..]) {
            Ok(n) => {
                let payload = (*off + n).saturating_sub(hello.len()) - off.saturating_sub(hello.len());
                counters.add_bytes(payload as u64);
                *off += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Progress::Failed(e),
        }
    }
    Progress::Done
}

/// Reads the response, `want` bytes (`*got` so far), counting them: the
/// stream's end before them, or more than them, fails the transaction.
/// Without a response (`want` 0, tcp-cc) the stream's end is the whole of
/// it: the responder's close.
pub(super) fn receive_response(
    mut sock: &TcpStream,
    got: &mut usize,
    want: usize,
    rbuf: &mut [u8],
    counters: &FlowCounters,
) -> Progress {
    loop {
        match sock.read(rbuf) {
            Ok(0) if want == 0 => return Progress::Done,
            Ok(0) => {
                return Progress::Failed(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("closed after {got} of the {want} response bytes"),
                ));
            }
            Ok(n) => {
                counters.add_bytes(n as u64);
                *got += n;
                if *got > want {
                    return Progress::Failed(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{got} response bytes, not {want}"),
                    ));
                }
                if *got == want {
                    return Progress::Done;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Progress::Failed(e),
        }
    }
}

/// Waits for the responder's close after the response (flow `id`'s): nothing
/// may follow the response but that close, so anything else ends it too.
pub(super) fn await_close(mut sock: &TcpStream, rbuf: &mut [u8], id: u32) -> Progress {
    loop {
        match sock.read(rbuf) {
            Ok(0) => return Progress::Done,
            Ok(n) => {
                log::debug!("flow {id}: {n} bytes after the response; closed");
                return Progress::Done;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::debug!("flow {id}: after the response: {e}");
                return Progress::Done;
            }
        }
    }
}
