//! What can go wrong speaking iperf3.

use super::State;

/// An error of iperf3's protocol. Its message names what was read, the
/// option or limit, and whose limit it is (iperf3's own, or netrig's);
/// the caller says which end sent it.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3Error {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the connection closed while netrig waited for {waiting_for}")]
    Closed { waiting_for: &'static str },
    #[error("{what} of {len} bytes is over {whose} limit of {max} bytes")]
    TooLong {
        what: &'static str,
        len: u64,
        max: usize,
        whose: &'static str,
    },
    #[error("{what} is not iperf3's JSON: {reason}")]
    BadJson { what: &'static str, reason: String },
    #[error("{option} {value} ({meaning}) is outside iperf3's limit: {limit}")]
    BadValue {
        option: &'static str,
        meaning: &'static str,
        value: String,
        limit: String,
        code: i32,
    },
    #[error("{what} is not supported: {why}")]
    Unsupported {
        what: String,
        why: &'static str,
        code: i32,
    },
    #[error("iperf3 state {byte} ({name}) where the protocol allows none in phase {phase}")]
    Unexpected {
        byte: u8,
        name: &'static str,
        phase: &'static str,
    },
    #[error("a cookie that is not iperf3's (36 letters of a-z and 2-7, then a NUL)")]
    BadCookie,
}

impl Iperf3Error {
    /// The iperf3 error number a server sends back for it after SERVER_ERROR,
    /// so that an iperf3 client prints its own message.
    pub fn iperf3_code(&self) -> i32 {
        use super::errors::*;
        match self {
            Iperf3Error::BadValue { code, .. } | Iperf3Error::Unsupported { code, .. } => *code,
            Iperf3Error::Unexpected { .. } => IEMESSAGE,
            Iperf3Error::BadCookie => IERECVCOOKIE,
            Iperf3Error::TooLong { .. } | Iperf3Error::BadJson { .. } => IERECVPARAMS,
            Iperf3Error::Io(_) | Iperf3Error::Closed { .. } => IECTRLCLOSE,
        }
    }

    /// The peer sent a state byte iperf3 has no name for.
    pub(crate) fn unknown_state(byte: u8, phase: &'static str) -> Iperf3Error {
        let name = State::from_byte(byte).map(State::name).unwrap_or("unknown");
        Iperf3Error::Unexpected { byte, name, phase }
    }

    /// A read that ran out of time (the caller's socket timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Iperf3Error::Io(e)
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
    }
}
