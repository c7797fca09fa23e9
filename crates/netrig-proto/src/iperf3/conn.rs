//! The control connection, blocking: states, length-prefixed JSON and a
//! server's error. Timeouts are the caller's (SO_RCVTIMEO/SO_SNDTIMEO on
//! the socket): every read here ends with the socket's timeout at most.

use super::{Iperf3Error, State};
use std::io::{ErrorKind, Read, Write};

/// One end of an iperf3 control connection.
#[derive(Debug)]
pub struct Control<S> {
    s: S,
}

impl<S: Read + Write> Control<S> {
    pub fn new(s: S) -> Self {
        Control { s }
    }

    pub fn get_ref(&self) -> &S {
        &self.s
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.s
    }

    pub fn into_inner(self) -> S {
        self.s
    }

    fn read_exact(&mut self, buf: &mut [u8], waiting_for: &'static str) -> Result<(), Iperf3Error> {
        self.s.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => Iperf3Error::Closed { waiting_for },
            _ => Iperf3Error::Io(e),
        })
    }

    /// The next state byte. A byte iperf3 has no state for is an error.
    pub fn read_state(&mut self) -> Result<State, Iperf3Error> {
        let mut b = [0u8; 1];
        self.read_exact(&mut b, "an iperf3 state")?;
        State::from_byte(b[0]).ok_or_else(|| Iperf3Error::unknown_state(b[0], "any"))
    }

    pub fn write_state(&mut self, s: State) -> Result<(), Iperf3Error> {
        self.s.write_all(&[s.byte()])?;
        Ok(())
    }

    /// A JSON object behind its 4-byte length, refused unread when the
    /// length is 0 or over `max`.
    pub fn read_json(&mut self, max: usize) -> Result<Vec<u8>, Iperf3Error> {
        let mut len = [0u8; 4];
        self.read_exact(&mut len, "the length of an iperf3 JSON message")?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 || len > max {
            return Err(Iperf3Error::TooLong {
                what: "an iperf3 JSON message",
                len: len as u64,
                max,
                whose: if max == super::MAX_PARAMS_JSON {
                    "iperf3's"
                } else {
                    "netrig's"
                },
            });
        }
        let mut json = vec![0u8; len];
        self.read_exact(&mut json, "an iperf3 JSON message")?;
        Ok(json)
    }

    /// Writes `json` behind its length, in one write.
    pub fn write_json(&mut self, json: &[u8]) -> Result<(), Iperf3Error> {
        let len = u32::try_from(json.len()).map_err(|_| Iperf3Error::TooLong {
            what: "an iperf3 JSON message",
            len: json.len() as u64,
            max: u32::MAX as usize,
            whose: "the protocol's",
        })?;
        let mut b = Vec::with_capacity(4 + json.len());
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(json);
        self.s.write_all(&b)?;
        Ok(())
    }

    /// After SERVER_ERROR: iperf3's error number and the server's errno.
    pub fn read_server_error(&mut self) -> Result<(i32, i32), Iperf3Error> {
        let mut b = [0u8; 8];
        self.read_exact(&mut b, "an iperf3 server's error number")?;
        let code = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let errno = i32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        Ok((code, errno))
    }

    /// SERVER_ERROR, iperf3's error number and an errno, in one write.
    pub fn write_server_error(&mut self, code: i32, errno: i32) -> Result<(), Iperf3Error> {
        let mut b = [0u8; 9];
        b[0] = State::ServerError.byte();
        b[1..5].copy_from_slice(&code.to_be_bytes());
        b[5..9].copy_from_slice(&errno.to_be_bytes());
        self.s.write_all(&b)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn json_is_framed_by_its_length_and_bounded() {
        let mut c = Control::new(Cursor::new(Vec::new()));
        c.write_json(b"{\"a\":1}").unwrap();
        c.write_state(State::TestEnd).unwrap();
        c.write_server_error(142, 0).unwrap();
        let bytes = c.into_inner().into_inner();
        assert_eq!(&bytes[..4], &[0, 0, 0, 7]);
        let mut r = Control::new(Cursor::new(bytes.clone()));
        assert_eq!(r.read_json(100).unwrap(), b"{\"a\":1}");
        assert_eq!(r.read_state().unwrap(), State::TestEnd);
        assert_eq!(r.read_state().unwrap(), State::ServerError);
        assert_eq!(r.read_server_error().unwrap(), (142, 0));
        assert!(matches!(r.read_state(), Err(Iperf3Error::Closed { .. })));
        let mut short = Control::new(Cursor::new(bytes));
        assert!(matches!(
            short.read_json(6),
            Err(Iperf3Error::TooLong { len: 7, max: 6, .. })
        ));
        let mut huge = Control::new(Cursor::new(vec![0xFF, 0xFF, 0xFF, 0xFF, b'{']));
        assert!(matches!(
            huge.read_json(1 << 20),
            Err(Iperf3Error::TooLong { .. })
        ));
        let mut cut = Control::new(Cursor::new(vec![0, 0, 0, 9, b'{']));
        assert!(matches!(cut.read_json(100), Err(Iperf3Error::Closed { .. })));
        let mut odd = Control::new(Cursor::new(vec![7u8]));
        assert!(matches!(
            odd.read_state(),
            Err(Iperf3Error::Unexpected { byte: 7, .. })
        ));
    }
}
