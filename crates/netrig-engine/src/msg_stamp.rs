//! Send times carried in a TCP request/response stream (tcp-rr's one-way
//! delay): the first 8 bytes of each message, when messages are at least
//! 8 bytes, hold the sender's send time (ns since its worker's time zero,
//! u64 little-endian), written as the message's first byte goes out.
//!
//! TCP gives no per-message kernel receive time: the receive time is the
//! clock read taken once per read call that completed the stamp.

use netrig_metrics::OneWayRecorder;
use std::time::Instant;

/// The bytes a message needs to carry a send time.
pub const STAMP_LEN: usize = 8;

/// Ns from `zero` to `t`.
#[inline]
pub fn ns_since(t: Instant, zero: Instant) -> u64 {
    t.saturating_duration_since(zero).as_nanos().min(u64::MAX as u128) as u64
}

/// Collects the stamp of each message in a byte stream of messages of one
/// size, across reads that split them anywhere.
#[derive(Debug, Clone)]
pub struct StampReader {
    size: usize,
    /// Position in the current message.
    pos: usize,
    hdr: [u8; STAMP_LEN],
}

impl StampReader {
    /// A reader of `size`-byte messages; `None` when they are too small to
    /// carry a stamp.
    pub fn new(size: usize) -> Option<StampReader> {
        (size >= STAMP_LEN).then_some(StampReader {
            size,
            pos: 0,
            hdr: [0; STAMP_LEN],
        })
    }

    /// The next bytes of the stream; `on_stamp` is called with each stamp
    /// completed in them, in order. Never panics, never allocates; work is
    /// bounded by the number of messages in `data`.
    #[inline]
    pub fn feed(&mut self, data: &[u8], mut on_stamp: impl FnMut(u64)) {
        let mut i = 0;
        while i < data.len() {
            if self.pos < STAMP_LEN {
                let take = (STAMP_LEN - self.pos).min(data.len() - i);
                self.hdr[self.pos..self.pos + take].copy_from_slice(&data[i..i + take]);
                self.pos += take;
                i += take;
                if self.pos == STAMP_LEN {
                    on_stamp(u64::from_le_bytes(self.hdr));
                }
            }
            let skip = (self.size - self.pos).min(data.len() - i);
            self.pos += skip;
            i += skip;
            if self.pos == self.size {
                self.pos = 0;
            }
        }
    }
}

/// A receiver's side of the stamps: the reader, and the one-way delays of
/// the stamps it read while the window was open.
#[derive(Debug, Clone)]
pub struct StampIn {
    pub reader: StampReader,
    /// The receiver's reference (its values count from it).
    pub clock_ref: Instant,
    pub recorder: OneWayRecorder,
}

impl StampIn {
    /// `None` when `size`-byte messages carry no stamp.
    pub fn new(size: usize, clock_ref: Instant) -> Option<StampIn> {
        Some(StampIn {
            reader: StampReader::new(size)?,
            clock_ref,
            recorder: OneWayRecorder::new(0),
        })
    }

    /// Bytes read at `now`; their stamps recorded if `recording`.
    #[inline]
    pub fn feed(&mut self, data: &[u8], now: Instant, recording: bool) {
        let since = ns_since(now, self.clock_ref);
        let rec = &mut self.recorder;
        self.reader.feed(data, |sent| {
            if recording {
                rec.record_since_ref(sent, since);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(size: usize, stamps: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        for s in stamps {
            let mut m = vec![0xa5u8; size];
            m[..8].copy_from_slice(&s.to_le_bytes());
            v.extend_from_slice(&m);
        }
        v
    }

    #[test]
    fn stamps_are_read_across_any_split() {
        let stamps = [1u64, 0x0102_0304_0506_0708, u64::MAX, 42, 7];
        for size in [8usize, 9, 13, 64, 1000] {
            let s = stream(size, &stamps);
            for chunk in [1usize, 3, 7, 8, 9, 64, 4096] {
                let mut r = StampReader::new(size).unwrap();
                let mut got = Vec::new();
                for c in s.chunks(chunk) {
                    r.feed(c, |v| got.push(v));
                }
                assert_eq!(got, stamps, "size {size} chunk {chunk}");
            }
        }
        assert!(StampReader::new(7).is_none() && StampReader::new(1).is_none());
    }
}
