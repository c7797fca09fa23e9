//! iperf3's protocol, without I/O (beyond [`conn`], the blocking adapter
//! both ends put on a control socket): what netrig needs to serve iperf3
//! clients (the agent) and to measure against iperf3 servers (the client).
//!
//! Learnt from iperf3 3.21's source and checked against its binaries (and
//! Debian's 3.12); docs/IPERF3.md says what netrig supports of it.
//!
//! The control connection carries, in order: the client's 37-byte cookie;
//! the server's one-byte states ([`State`]); the client's parameters as a
//! JSON object behind a 4-byte big-endian length ([`Params`]); later both
//! ends' results the same way ([`Results`]). Data connections are the
//! client's: TCP ones open with the same cookie, UDP ones with a 4-byte
//! datagram ([`UDP_CONNECT_MSG`]) the server answers from the socket it
//! will use ([`UDP_CONNECT_REPLY`]). Every length and count read here is
//! bounded ([`MAX_PARAMS_JSON`], [`MAX_RESULTS_JSON`], [`MAX_STREAMS`]).

pub mod conn;
pub mod error;
pub mod errors;
pub mod machine;
mod num;
pub mod params;
pub mod results;
pub mod server_codes;
pub mod udp;

pub use conn::Control;
pub use error::Iperf3Error;
pub use machine::{ClientAction, ClientMachine, Phase, ServerAction, ServerMachine};
pub use params::{Direction, Params};
pub use results::{Results, StreamResult};
pub use udp::{UdpHeader, UDP_CONNECT_MSG, UDP_CONNECT_REPLY, UDP_LEGACY_REPLY};

/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// A cookie's length on the wire: 36 letters and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The most parameters iperf3's server reads (its MAX_PARAMS_JSON_STRING).
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
/// The most results netrig reads from a peer. iperf3 reads any length; a
/// server's results carry its text output when the client asks for it
/// (`--get-server-output`), a few kilobytes for a long test.
pub const MAX_RESULTS_JSON: usize = 1 << 20;
/// The most parallel streams iperf3 allows (`-P`, its MAX_STREAMS); a
/// bidirectional test has twice as many.
pub const MAX_STREAMS: usize = 128;

/// The letters of a cookie (base32's alphabet, as iperf3's make_cookie).
const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A test's cookie: the client makes it, sends it on the control
/// connection and again on each TCP data connection, where the server
/// tells its test's streams by it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; COOKIE_LEN]);

impl Cookie {
    /// A fresh cookie from the system's randomness.
    pub fn random() -> Cookie {
        let mut b = [0u8; COOKIE_LEN];
        getrandom::fill(&mut b).expect("the operating system's random numbers");
        for x in &mut b[..COOKIE_LEN - 1] {
            *x = COOKIE_CHARS[(*x as usize) % COOKIE_CHARS.len()];
        }
        b[COOKIE_LEN - 1] = 0;
        Cookie(b)
    }

    /// Checks that `b` is a cookie as iperf3 makes them. iperf3's server
    /// takes any 37 bytes; netrig asks for its letters and the NUL, so that
    /// a stray connection is not taken for a test's.
    pub fn parse(b: &[u8; COOKIE_LEN]) -> Result<Cookie, Iperf3Error> {
        let letters = &b[..COOKIE_LEN - 1];
        if b[COOKIE_LEN - 1] != 0 || !letters.iter().all(|c| COOKIE_CHARS.contains(c)) {
            return Err(Iperf3Error::BadCookie);
        }
        Ok(Cookie(*b))
    }

    /// The cookie's bytes on the wire.
    pub fn as_bytes(&self) -> &[u8; COOKIE_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The first letters are enough to tell tests apart in a log.
        write!(f, "Cookie({}…)", String::from_utf8_lossy(&self.0[..8]))
    }
}

/// The one-byte states both ends send on the control connection (iperf3's
/// signed char; values 3, 5 to 8 are unused by iperf3 3.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum State {
    TestStart = 1,
    TestRunning = 2,
    TestEnd = 4,
    ParamExchange = 9,
    CreateStreams = 10,
    ServerTerminate = 11,
    ClientTerminate = 12,
    ExchangeResults = 13,
    DisplayResults = 14,
    IperfStart = 15,
    IperfDone = 16,
    AccessDenied = -1,
    ServerError = -2,
}

impl State {
    const ALL: [State; 13] = [
        State::TestStart,
        State::TestRunning,
        State::TestEnd,
        State::ParamExchange,
        State::CreateStreams,
        State::ServerTerminate,
        State::ClientTerminate,
        State::ExchangeResults,
        State::DisplayResults,
        State::IperfStart,
        State::IperfDone,
        State::AccessDenied,
        State::ServerError,
    ];

    /// The state a byte on the wire stands for, if any.
    pub fn from_byte(b: u8) -> Option<State> {
        State::ALL.into_iter().find(|s| s.byte() == b)
    }

    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        self as i8 as u8
    }

    /// iperf3's name for it, for messages.
    pub fn name(self) -> &'static str {
        match self {
            State::TestStart => "TEST_START",
            State::TestRunning => "TEST_RUNNING",
            State::TestEnd => "TEST_END",
            State::ParamExchange => "PARAM_EXCHANGE",
            State::CreateStreams => "CREATE_STREAMS",
            State::ServerTerminate => "SERVER_TERMINATE",
            State::ClientTerminate => "CLIENT_TERMINATE",
            State::ExchangeResults => "EXCHANGE_RESULTS",
            State::DisplayResults => "DISPLAY_RESULTS",
            State::IperfStart => "IPERF_START",
            State::IperfDone => "IPERF_DONE",
            State::AccessDenied => "ACCESS_DENIED",
            State::ServerError => "SERVER_ERROR",
        }
    }
}

/// The ids iperf3 gives `n` streams in the order they are made: 1, then
/// 3, 4, 5, … (iperf3 kept a numbering slip of its early versions, since
/// both ends must agree: results are matched to streams by id).
pub fn stream_ids(n: usize) -> Vec<i32> {
    (0..n.min(2 * MAX_STREAMS))
        .map(|i| if i == 0 { 1 } else { i as i32 + 2 })
        .collect()
}

/// Wire bytes of an iperf3 3.21 test, recorded on loopback: for the tests
/// here and the fuzz targets' seeds.
#[cfg(test)]
pub(crate) mod recorded;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_unknown_bytes_are_none() {
        for s in State::ALL {
            assert_eq!(State::from_byte(s.byte()), Some(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xFF);
        assert_eq!(State::ServerError.byte(), 0xFE);
        assert_eq!(State::ParamExchange.byte(), 9);
        for b in [0u8, 3, 5, 6, 7, 8, 17, 0x7F, 0x80, 0xFD] {
            assert_eq!(State::from_byte(b), None, "{b}");
        }
    }

    #[test]
    fn stream_ids_skip_two_as_iperf3_does() {
        assert_eq!(stream_ids(1), vec![1]);
        assert_eq!(stream_ids(4), vec![1, 3, 4, 5]);
        assert_eq!(stream_ids(10_000).len(), 2 * MAX_STREAMS);
    }

    #[test]
    fn cookies_are_iperf3s_letters_and_a_nul() {
        let c = Cookie::random();
        assert_eq!(c.0[36], 0);
        assert!(Cookie::parse(c.as_bytes()).is_ok());
        assert_ne!(Cookie::random(), c);
        let mut bad = c.0;
        bad[3] = b'A';
        assert!(Cookie::parse(&bad).is_err());
        let mut unterminated = c.0;
        unterminated[36] = b'a';
        assert!(Cookie::parse(&unterminated).is_err());
        assert!(Cookie::parse(recorded::COOKIE).is_ok());
    }
}
