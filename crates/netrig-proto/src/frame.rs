//! Length-prefixed JSON frames: a 4-byte big-endian length, then that many
//! bytes of UTF-8 JSON. Frames longer than [`MAX_FRAME_LEN`] are refused
//! before any of their body is buffered.

use crate::ProtoError;
use serde::{de::DeserializeOwned, Serialize};

/// The largest control frame either side accepts (1 MiB).
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// The largest frame the agent accepts from a client (64 KiB): a client's
/// messages are small.
pub const MAX_CLIENT_FRAME_LEN: usize = 64 * 1024;

/// Encodes one message as a frame.
pub fn encode_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serializing our own message types cannot fail: they hold no maps with
    // non-string keys and no foreign Serialize impls.
    let body = serde_json::to_vec(msg).expect("control messages always serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Incremental frame decoder: push bytes as they arrive, pull whole messages.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    max: usize,
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::with_limit(MAX_FRAME_LEN)
    }

    pub fn with_limit(max: usize) -> Self {
        FrameDecoder { buf: Vec::new(), max }
    }

    /// Appends received bytes. Fails as soon as a header announces a frame
    /// over the limit, so a peer cannot make us buffer without bound.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), ProtoError> {
        self.buf.extend_from_slice(bytes);
        self.check_header()
    }

    fn check_header(&self) -> Result<(), ProtoError> {
        if self.buf.len() >= 4 {
            let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
            if len > self.max {
                return Err(ProtoError::FrameTooLarge { len, max: self.max });
            }
        }
        Ok(())
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The frame begun but not complete: bytes of it buffered, and its whole
    /// length with its 4-byte header once the header is in. `None` between frames.
    pub fn partial(&self) -> Option<(usize, Option<usize>)> {
        if self.buf.is_empty() {
            return None;
        }
        let whole = self
            .buf
            .first_chunk::<4>()
            .map(|h| 4 + u32::from_be_bytes(*h) as usize);
        Some((self.buf.len(), whole))
    }

    /// Returns the next complete frame's body, if one is buffered.
    pub fn next_body(&mut self) -> Result<Option<Vec<u8>>, ProtoError> {
        self.check_header()?;
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        if self.buf.len() == 4 + len {
            // The frame is all that is buffered (a large one always is):
            // hand over the buffer rather than copy it, so that it is freed
            // with the body instead of staying at its largest here.
            self.buf.drain(..4);
            return Ok(Some(std::mem::take(&mut self.buf)));
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }

    /// Returns the next complete message, if one is buffered.
    pub fn next_msg<T: DeserializeOwned>(&mut self) -> Result<Option<T>, ProtoError> {
        match self.next_body()? {
            None => Ok(None),
            Some(body) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| ProtoError::Malformed(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientMsg;

    #[test]
    fn roundtrip_byte_by_byte() {
        let msg = ClientMsg::Go;
        let bytes = encode_frame(&msg);
        let mut d = FrameDecoder::new();
        for (i, b) in bytes.iter().enumerate() {
            assert!(d.next_msg::<ClientMsg>().unwrap().is_none(), "early frame at {i}");
            d.push(&[*b]).unwrap();
        }
        assert!(matches!(d.next_msg::<ClientMsg>().unwrap(), Some(ClientMsg::Go)));
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn two_frames_in_one_push() {
        let mut bytes = encode_frame(&ClientMsg::Go);
        bytes.extend(encode_frame(&ClientMsg::Bye));
        let mut d = FrameDecoder::new();
        d.push(&bytes).unwrap();
        assert!(matches!(d.next_msg::<ClientMsg>().unwrap(), Some(ClientMsg::Go)));
        assert!(matches!(d.next_msg::<ClientMsg>().unwrap(), Some(ClientMsg::Bye)));
        assert!(d.next_msg::<ClientMsg>().unwrap().is_none());
    }

    #[test]
    fn a_partial_frame_says_how_much_of_it_came() {
        let bytes = encode_frame(&ClientMsg::Go);
        let mut d = FrameDecoder::new();
        assert_eq!(d.partial(), None);
        d.push(&bytes[..2]).unwrap();
        assert_eq!(d.partial(), Some((2, None)));
        d.push(&bytes[2..6]).unwrap();
        assert_eq!(d.partial(), Some((6, Some(bytes.len()))));
        d.push(&bytes[6..]).unwrap();
        assert!(d.next_msg::<ClientMsg>().unwrap().is_some());
        assert_eq!(d.partial(), None);
    }

    #[test]
    fn oversized_header_is_refused_before_body() {
        let mut d = FrameDecoder::with_limit(16);
        let err = d.push(&17u32.to_be_bytes()).unwrap_err();
        assert!(matches!(err, ProtoError::FrameTooLarge { len: 17, max: 16 }));
    }

    #[test]
    fn garbage_json_is_an_error_not_a_panic() {
        let mut d = FrameDecoder::new();
        let mut bytes = 5u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(b"{{{{{");
        d.push(&bytes).unwrap();
        assert!(matches!(d.next_msg::<ClientMsg>(), Err(ProtoError::Malformed(_))));
    }
}
