//! The HTTP test server's request heads (`netrig_http::parse`): arbitrary bytes, fed in
//! arbitrary splits as a connection would read them, with bounds chosen by the input.
//!
//! Input: byte 0 chooses `max_header_bytes` (256 to 9,691), bytes 1-2 seed the split sizes
//! (1 to 64 bytes each), the rest is what the client sends.
//!
//! Invariants: no panic; a complete head is at most `max_header_bytes` long, never longer than
//! what was buffered and never empty; "need more" only while fewer than `max_header_bytes` bytes
//! are buffered (so a connection's buffer for one head is bounded); a `/bytes/N` route is within
//! `max_body` and its delay within `max_delay_ms`; every refusal's status is one the server
//! answers with; and the heads read, and the refusal that ends them, are the same whatever the
//! splits (pipelined requests do not depend on how the bytes arrived).

use netrig_http::parse::{parse, ParseLimits, Parsed, Request, Route};

const STATUSES: [u16; 9] = [400, 404, 405, 413, 414, 431, 501, 505, 200];

#[derive(Debug, PartialEq)]
enum Outcome {
    Head(Request),
    Refused(u16, String),
}

/// Feeds `stream` in chunks of the sizes `next` gives; what was read.
fn feed(stream: &[u8], limits: &ParseLimits, mut next: impl FnMut() -> usize) -> Vec<Outcome> {
    let mut buf: Vec<u8> = Vec::new();
    let mut pos = 0;
    let mut fed = 0;
    let mut out = Vec::new();
    while fed < stream.len() {
        let n = next().clamp(1, stream.len() - fed);
        buf.extend_from_slice(&stream[fed..fed + n]);
        fed += n;
        loop {
            let rest = &buf[pos..];
            if rest.is_empty() {
                break;
            }
            match parse(rest, limits) {
                Parsed::Complete(r) => {
                    assert!(
                        r.len > 0 && r.len <= rest.len(),
                        "a head of {} bytes in {}",
                        r.len,
                        rest.len()
                    );
                    assert!(
                        r.len <= limits.max_header_bytes,
                        "a head of {} bytes past the bound",
                        r.len
                    );
                    match &r.route {
                        Route::Bytes { len, delay_ms } => {
                            assert!(*len <= limits.max_body);
                            assert!(*delay_ms <= limits.max_delay_ms);
                        }
                        Route::Refused { status, .. } => assert!(STATUSES.contains(status), "{status}"),
                        Route::Stats | Route::NotFound => {}
                    }
                    pos += r.len;
                    out.push(Outcome::Head(r));
                }
                Parsed::Partial => {
                    assert!(
                        rest.len() < limits.max_header_bytes,
                        "waiting with {} bytes buffered",
                        rest.len()
                    );
                    break;
                }
                Parsed::Error(e) => {
                    assert!(STATUSES.contains(&e.status()), "{e}");
                    out.push(Outcome::Refused(e.status(), e.to_string()));
                    return out;
                }
            }
        }
        // Consumed heads leave the buffer, as the server's does.
        buf.drain(..pos);
        pos = 0;
    }
    out
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let [size, a, b, stream @ ..] = data else {
        return;
    };
    let limits = ParseLimits {
        max_header_bytes: 256 + usize::from(*size) * 37,
        max_body: 1 << 20,
        max_delay_ms: 1000,
    };
    let mut state = u32::from(*a) << 8 | u32::from(*b) | 1;
    let split = feed(stream, &limits, move || {
        // xorshift32: chunk sizes 1 to 64.
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state % 64) as usize + 1
    });
    let whole = feed(stream, &limits, || usize::MAX);
    assert_eq!(split, whole, "the heads read depend on how the bytes were split");
}
