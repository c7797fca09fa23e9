//! The http load generator's response parser
//! (`netrig_http_load::ResponseParser`), fed a server's bytes in arbitrary
//! splits: it never panics, never takes more than it is given, holds its
//! bounds (head, body), counts every byte it takes as head or body, and
//! reads the same responses whatever the splits (until either reading
//! meets an error: httparse may see a bad head earlier in one piece than
//! in many).

use netrig_http_load::{Bounds, ParseError, Response, ResponseParser};

/// How a feeding went: the responses read, whether it ended in an error,
/// the bytes taken.
fn feed(
    bounds: Bounds,
    head_request: bool,
    data: &[u8],
    splits: &[u8],
) -> (Vec<Response>, Option<ParseError>, usize) {
    let mut p = ResponseParser::new(bounds, head_request);
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < data.len() {
        let len = if splits.is_empty() {
            data.len() - at
        } else {
            let s = usize::from(splits[k % splits.len()]).max(1);
            k += 1;
            s.min(data.len() - at)
        };
        let piece = &data[at..at + len];
        let mut off = 0;
        while off < piece.len() {
            match p.feed(&piece[off..]) {
                Ok((took, r)) => {
                    assert!(took <= piece.len() - off, "took {took} of {}", piece.len() - off);
                    assert!(took > 0 || r.is_some(), "no progress and no response");
                    off += took;
                    if let Some(r) = r {
                        out.push(r);
                    }
                }
                Err(e) => return (out, Some(e), at + off),
            }
        }
        at += len;
    }
    match p.eof() {
        Ok(r) => out.extend(r),
        Err(e) => return (out, Some(e), at),
    }
    (out, None, at)
}

pub fn run(data: &[u8]) {
    let [a, b, c, n, rest @ ..] = data else { return };
    let bounds = Bounds {
        max_header_bytes: 64 + usize::from(*a) * 16,
        max_body_bytes: u64::from(*b) * 64,
    };
    let head_request = c & 1 == 1;
    let n = usize::from(*n % 16).min(rest.len());
    let (splits, body) = rest.split_at(n);
    let (whole, whole_err, _) = feed(bounds, head_request, body, &[]);
    let (split, split_err, taken) = feed(bounds, head_request, body, splits);
    for r in whole.iter().chain(&split) {
        assert!(r.body_bytes <= bounds.max_body_bytes, "{r:?} over {bounds:?}");
        assert!((200..1000).contains(&r.status), "{r:?}");
        assert!(
            r.body_bytes == 0 || !head_request,
            "a HEAD response with a body: {r:?}"
        );
    }
    let counted: u64 = split.iter().map(|r| r.head_bytes + r.body_bytes).sum();
    assert!(
        counted <= taken as u64,
        "{counted} bytes in responses of {taken} taken"
    );
    let common = whole.len().min(split.len());
    assert_eq!(whole[..common], split[..common], "the splits changed a response");
    if whole_err.is_none() && split_err.is_none() {
        assert_eq!(whole, split, "the splits changed the responses");
        assert_eq!(counted, body.len() as u64, "every byte is a head's or a body's");
    }
}
