//! The one I/O adapter of this crate: frames over a blocking `Read + Write`
//! stream with timeouts. Agent and client both use it for control
//! connections; everything it does with bytes is delegated to [`FrameDecoder`].

use crate::frame::{encode_frame, FrameDecoder};
use crate::ProtoError;
use serde::{de::DeserializeOwned, Serialize};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Errors of a framed control connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{0}")]
    Proto(#[from] ProtoError),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("peer closed the control connection")]
    Closed,
    /// The peer closed after part of a frame: `received` bytes of it, of
    /// `whole` (with its 4-byte length) when the length had come.
    #[error("peer closed the control connection in the middle of a frame ({})", match whole {
        Some(w) => format!("{received} of its {w} bytes"),
        None => format!("{received} of its 4-byte length"),
    })]
    ClosedMidFrame { received: usize, whole: Option<usize> },
    #[error("no message from the peer within {0:?}")]
    Timeout(Duration),
}

/// How long a write to a peer that does not read may block before it fails.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A control connection carrying JSON frames.
pub struct FramedConn {
    stream: TcpStream,
    decoder: FrameDecoder,
}

impl FramedConn {
    /// Wraps a connected stream; frames over `max_frame` bytes are refused.
    pub fn new(stream: TcpStream, max_frame: usize) -> Self {
        FramedConn {
            stream,
            decoder: FrameDecoder::with_limit(max_frame),
        }
    }

    /// [`FramedConn::new`] for a stream of which `read` was read already
    /// (what followed its greeting, read with it): received before what
    /// comes on the stream. Fails as `recv` would on those bytes (a frame
    /// over `max_frame`).
    pub fn with_read(stream: TcpStream, max_frame: usize, read: &[u8]) -> Result<Self, ConnError> {
        let mut conn = FramedConn::new(stream, max_frame);
        conn.decoder.push(read)?;
        Ok(conn)
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one message (with a write timeout so a stuck peer cannot block us forever).
    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), ConnError> {
        self.stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        self.stream.write_all(&encode_frame(msg))?;
        Ok(())
    }

    /// Receives one message, waiting at most `timeout`.
    pub fn recv<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<T, ConnError> {
        match self.try_recv(timeout)? {
            Some(m) => Ok(m),
            None => Err(ConnError::Timeout(timeout)),
        }
    }

    /// Receives one message if one arrives within `timeout`; `None` otherwise.
    pub fn try_recv<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<Option<T>, ConnError> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(m) = self.decoder.next_msg()? {
                return Ok(Some(m));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.stream
                .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    return Err(match self.decoder.partial() {
                        Some((received, whole)) => ConnError::ClosedMidFrame { received, whole },
                        None => ConnError::Closed,
                    })
                }
                Ok(n) => self.decoder.push(&buf[..n])?,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A second handle on the same socket, for sending from another thread.
    pub fn try_clone_stream(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientMsg;
    use std::net::{Shutdown, TcpListener};

    /// A connected pair on loopback: what `write` does, then a FIN.
    fn received_after(write: &[u8]) -> Result<ClientMsg, ConnError> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(write).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        FramedConn::new(s, 1024).recv(Duration::from_secs(10))
    }

    /// Issue #11: a truncated frame followed by FIN was a plain close.
    #[test]
    fn a_close_in_the_middle_of_a_frame_is_not_a_clean_close() {
        let frame = encode_frame(&ClientMsg::Abort { reason: "r".into() });
        assert!(matches!(received_after(&frame), Ok(ClientMsg::Abort { .. })));
        assert!(matches!(received_after(&[]), Err(ConnError::Closed)));
        let e = received_after(&frame[..frame.len() - 1]).unwrap_err();
        assert!(
            matches!(e, ConnError::ClosedMidFrame { received, whole: Some(w) } if received == frame.len() - 1 && w == frame.len()),
            "{e:?}"
        );
        assert!(
            e.to_string().contains(&format!(
                "in the middle of a frame ({} of its {} bytes)",
                frame.len() - 1,
                frame.len()
            )),
            "{e}"
        );
        let e = received_after(&frame[..3]).unwrap_err().to_string();
        assert!(e.contains("(3 of its 4-byte length)"), "{e}");
    }

    /// Bytes read before the stream was wrapped come first, a frame split
    /// between them and the stream whole; a header over the limit in them
    /// fails at once.
    #[test]
    fn bytes_read_before_come_before_the_stream() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let first = encode_frame(&ClientMsg::Abort { reason: "one".into() });
        let second = encode_frame(&ClientMsg::Abort { reason: "two".into() });
        let mut read = first.clone();
        read.extend_from_slice(&second[..5]);
        c.write_all(&second[5..]).unwrap();
        let mut conn = FramedConn::with_read(s, 1024, &read).unwrap();
        for want in ["one", "two"] {
            match conn.recv(Duration::from_secs(10)) {
                Ok(ClientMsg::Abort { reason }) => assert_eq!(reason, want),
                other => panic!("{other:?}"),
            }
        }
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let too_big = 2048u32.to_be_bytes();
        assert!(matches!(
            FramedConn::with_read(s, 1024, &too_big),
            Err(ConnError::Proto(crate::ProtoError::FrameTooLarge {
                len: 2048,
                max: 1024
            }))
        ));
    }
}
