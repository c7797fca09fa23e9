//! `--peer auto`: telling an iperf3 server from a netrig agent on the
//! control connection's first exchange, at no cost to an agent.
//!
//! netrig's greeting is 8 bytes; an idle iperf3 server waits for a 37-byte
//! cookie (10 s in 3.21, for ever in 3.12) and says nothing meanwhile,
//! while an agent answers the 8 bytes at once (0.2 ms on loopback, 0.3 s at
//! most on a host of two CPUs at a load of 74: docs/PROTOCOL.md). So the
//! client waits [`PROBE_WAIT`] (and four times the time the connection took
//! to open) for an answer; an agent has answered by then and never sees
//! more. A peer still silent is sent the 29 bytes that make the greeting a
//! whole cookie: an iperf3 server answers PARAM_EXCHANGE (9) at once, and
//! the connection goes on as iperf3's control connection, those 37 bytes
//! its cookie (no second connection: `iperf3 -s -1` serves one). An agent
//! that answers only after the 29 bytes left (it took them for a frame) is
//! greeted again on a new connection, without them.

use crate::link::FIRST_REPLY_RTTS;
use crate::ClientError;
use netrig_proto::iperf3::{State, COOKIE_LEN};
use netrig_proto::ControlPreamble;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a peer may be silent after netrig's greeting before it is
/// offered the rest of an iperf3 cookie (four round trips of the
/// connection's opening besides).
pub const PROBE_WAIT: Duration = Duration::from_millis(500);

/// An iperf3 server found by the probe: its control connection, past the
/// cookie and its PARAM_EXCHANGE (read).
#[derive(Debug)]
pub struct Detected {
    pub addr: SocketAddr,
    pub(crate) stream: TcpStream,
    /// The 37 bytes the server took for the cookie, which the test's TCP
    /// data connections present again.
    pub(crate) cookie: [u8; COOKIE_LEN],
}

/// What the probe found.
pub(crate) enum Probed {
    /// The peer answered netrig's greeting itself (an agent, or a server
    /// that speaks first): the caller reads what it said.
    Answered(TcpStream),
    /// An iperf3 server.
    Iperf3(Detected),
    /// A netrig frame came after the rest of the cookie had been sent.
    LateAgent,
}

/// The rest of a cookie after netrig's greeting: letters as iperf3's
/// cookies have, and the NUL that ends one.
fn rest_of_cookie() -> [u8; COOKIE_LEN - ControlPreamble::LEN] {
    let fresh = netrig_proto::iperf3::Cookie::random();
    let mut rest = [0u8; COOKIE_LEN - ControlPreamble::LEN];
    rest.copy_from_slice(&fresh.as_bytes()[ControlPreamble::LEN..]);
    rest
}

/// Whether anything (a byte, the close, an error) came within `wait`.
fn heard_within(stream: &TcpStream, wait: Duration) -> bool {
    if stream
        .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
        .is_err()
    {
        return true;
    }
    let mut b = [0u8; 1];
    loop {
        match stream.peek(&mut b) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return false
            }
            _ => return true,
        }
    }
}

/// Probes the peer at `addr`, greeted with `preamble` on `stream`
/// `round_trip` after it began opening; `first_wait`: the longest the
/// client waits for any first answer.
pub(crate) fn probe(
    mut stream: TcpStream,
    addr: SocketAddr,
    preamble: &[u8; ControlPreamble::LEN],
    round_trip: Duration,
    first_wait: Duration,
) -> Result<Probed, ClientError> {
    let began = Instant::now();
    let wait = (PROBE_WAIT + round_trip * FIRST_REPLY_RTTS).min(first_wait);
    if heard_within(&stream, wait) {
        let mut first = [0u8; 1];
        if matches!(stream.peek(&mut first), Ok(1)) && first[0] == State::AccessDenied.byte() {
            return Err(super::control::busy(addr));
        }
        return Ok(Probed::Answered(stream));
    }
    let rest = rest_of_cookie();
    if stream.write_all(&rest).is_err() {
        return Ok(Probed::Answered(stream));
    }
    let left = first_wait.saturating_sub(began.elapsed());
    if !heard_within(&stream, left) {
        return Ok(Probed::Answered(stream));
    }
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) if first[0] == State::ParamExchange.byte() => {
            let _ = stream.read_exact(&mut first);
            let mut cookie = [0u8; COOKIE_LEN];
            cookie[..ControlPreamble::LEN].copy_from_slice(preamble);
            cookie[ControlPreamble::LEN..].copy_from_slice(&rest);
            log::debug!("{addr} answered the rest of a cookie with PARAM_EXCHANGE: an iperf3 server");
            Ok(Probed::Iperf3(Detected { addr, stream, cookie }))
        }
        Ok(1) if netrig_proto::neighbour::may_be_netrig(first[0]) => Ok(Probed::LateAgent),
        _ => Ok(Probed::Answered(stream)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// netrig's greeting and the rest make one cookie: 37 bytes, its last a NUL.
    #[test]
    fn the_greeting_and_the_rest_make_a_cookie() {
        let rest = rest_of_cookie();
        assert_eq!(ControlPreamble::LEN + rest.len(), COOKIE_LEN);
        assert_eq!(rest[rest.len() - 1], 0);
        assert!(rest[..rest.len() - 1].iter().all(|c| c.is_ascii_alphanumeric()));
        // Its first bytes, read by a slow agent as a frame's length, are far over any frame's.
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        assert!(len > netrig_proto::MAX_CLIENT_FRAME_LEN);
    }
}
