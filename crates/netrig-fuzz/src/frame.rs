//! Control-connection framing: arbitrary bytes, pushed in arbitrary chunks
//! into a `FrameDecoder` with an arbitrary limit.
//!
//! Invariants: no panic; `push` fails only on a header over the limit, and
//! then names that header's length; every body returned is within the limit;
//! what is buffered is always less than one frame of at most the limit;
//! nothing is lost or invented (the bodies, framed again, are exactly the
//! bytes consumed); and a body that decodes as a message decodes equal after
//! `encode_frame`.

use netrig_proto::{encode_frame, AgentMsg, ClientMsg, FrameDecoder, ProtoError};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let [a, b, c, input @ ..] = data else {
        return;
    };
    // The limit: small ones make the over-limit path easy to reach; the
    // agent's 64 KiB is in range.
    let max = usize::from(u16::from_be_bytes([*a, *b])) + 1;
    let chunk = usize::from(*c).max(1);
    let mut d = FrameDecoder::with_limit(max);
    let mut pushed = 0usize;
    let mut consumed: Vec<u8> = Vec::new();
    'input: for part in input.chunks(chunk) {
        pushed += part.len();
        match d.push(part) {
            Ok(()) => {}
            Err(ProtoError::FrameTooLarge { len, max: m }) => {
                over_limit(input, consumed.len(), len, m, max);
                break 'input;
            }
            Err(e) => panic!("push failed other than on a frame's size: {e}"),
        }
        loop {
            match d.next_body() {
                Ok(Some(body)) => {
                    assert!(body.len() <= max, "body of {} over the limit {max}", body.len());
                    consumed.extend_from_slice(&(body.len() as u32).to_be_bytes());
                    consumed.extend_from_slice(&body);
                    roundtrip(&body);
                }
                Ok(None) => break,
                Err(ProtoError::FrameTooLarge { len, max: m }) => {
                    over_limit(input, consumed.len(), len, m, max);
                    break 'input;
                }
                Err(e) => panic!("next_body failed other than on a frame's size: {e}"),
            }
        }
        // Bounded: less than one whole frame of at most `max` is left.
        assert!(
            d.buffered() < 4 + max,
            "{} bytes buffered, limit {max}",
            d.buffered()
        );
        assert_eq!(consumed.len() + d.buffered(), pushed, "bytes lost or invented");
        assert_eq!(
            &consumed[..],
            &input[..consumed.len()],
            "bodies framed again differ"
        );
    }
}

/// A refused header: it is the next one in the input, and it is over the limit.
fn over_limit(input: &[u8], at: usize, len: usize, m: usize, max: usize) {
    assert_eq!(m, max);
    assert!(len > max, "refused {len} within the limit {max}");
    let hdr: [u8; 4] = input[at..at + 4]
        .try_into()
        .expect("a refused header was pushed whole");
    assert_eq!(
        u32::from_be_bytes(hdr) as usize,
        len,
        "refused another header than the next"
    );
}

/// encode(decode(body)) decodes equal, for either end's messages.
fn roundtrip(body: &[u8]) {
    if let Ok(m) = serde_json::from_slice::<ClientMsg>(body) {
        assert_eq!(reframe::<ClientMsg>(&m), m);
    }
    if let Ok(m) = serde_json::from_slice::<AgentMsg>(body) {
        assert_eq!(reframe::<AgentMsg>(&m), m);
    }
}

fn reframe<T: serde::Serialize + serde::de::DeserializeOwned>(m: &T) -> T {
    let bytes = encode_frame(m);
    let mut d = FrameDecoder::with_limit(bytes.len());
    d.push(&bytes).expect("our own frame fits its own length");
    let back = d.next_msg::<T>().expect("our own frame decodes").expect("whole");
    assert_eq!(d.buffered(), 0);
    back
}
