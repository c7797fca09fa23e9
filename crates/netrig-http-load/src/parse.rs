//! The response parser: sans-IO, fed the bytes of one connection in any
//! splits, one response at a time. The head is parsed by httparse; the body
//! is framed here (Content-Length, chunked, or until the server closes) and
//! counted, never kept. Every length a server sends is bounded: the head's
//! bytes and header count, a chunk-size line, the trailers, the body.

use thiserror::Error;

/// Most header lines a response head may have.
pub const MAX_HEADERS: usize = 100;
/// Longest chunk-size line (with its extensions), in bytes.
pub const MAX_CHUNK_LINE: usize = 4096;

/// What a response may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The head's bytes, status line to the blank line (`--max-header`);
    /// chunked trailers get as much again.
    pub max_header_bytes: usize,
    /// The body's payload bytes (`--max-body`).
    pub max_body_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_header_bytes: 64 * 1024,
            max_body_bytes: 1 << 30,
        }
    }
}

/// A response that broke HTTP/1.1 or a bound.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("the response head is longer than {limit} bytes (--max-header)")]
    HeadTooLarge { limit: usize },
    #[error("the response head has more than {MAX_HEADERS} header lines")]
    TooManyHeaders,
    #[error("malformed response head: {0}")]
    BadHead(String),
    #[error("bad Content-Length")]
    BadLength,
    #[error("malformed chunked body")]
    BadChunk,
    #[error("the response body is longer than {limit} bytes (--max-body)")]
    BodyTooLarge { limit: u64 },
    #[error("the server switched protocols (101), which was not asked for")]
    Upgrade,
    #[error("the connection closed before the response ended")]
    Truncated,
}

/// One whole response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Bytes of the head (and of any 1xx interim heads before it, and of
    /// chunked framing and trailers).
    pub head_bytes: u64,
    /// Payload bytes of the body.
    pub body_bytes: u64,
    /// The server will close the connection after it (`Connection: close`,
    /// or HTTP/1.0 without keep-alive, or a body read until close).
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In the size line: the size so far, digits seen, in an extension.
    Size {
        size: u64,
        digits: u8,
        ext: bool,
        len: usize,
    },
    /// Past CR of the size line.
    SizeLf {
        size: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// Trailer lines after the last chunk: bytes of this line so far.
    Trailer {
        line: usize,
        cr: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length { left: u64 },
    Chunked(Chunk),
    UntilClose,
}

/// Parses the responses of one connection, one at a time.
#[derive(Debug)]
pub struct ResponseParser {
    bounds: Bounds,
    state: State,
    /// Head bytes kept while a head arrives in pieces (reused).
    head: Vec<u8>,
    /// The request was HEAD: no response has a body.
    head_request: bool,
    status: u16,
    head_bytes: u64,
    body_bytes: u64,
    close: bool,
    trailer_bytes: usize,
    /// Bytes of the current response seen so far (0: between responses).
    seen: u64,
}

impl ResponseParser {
    pub fn new(bounds: Bounds, head_request: bool) -> Self {
        ResponseParser {
            bounds,
            state: State::Head,
            head: Vec::new(),
            head_request,
            status: 0,
            head_bytes: 0,
            body_bytes: 0,
            close: false,
            trailer_bytes: 0,
            seen: 0,
        }
    }

    /// Ready for the next response (after an error, or on a new connection).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head.clear();
        self.status = 0;
        self.head_bytes = 0;
        self.body_bytes = 0;
        self.close = false;
        self.trailer_bytes = 0;
        self.seen = 0;
    }

    /// Whether part of a response has arrived.
    pub fn in_response(&self) -> bool {
        self.seen > 0
    }

    /// Takes bytes of `data` until one response ends: how many it took, and
    /// the response if it ended (bytes after it belong to the next one).
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, Option<Response>), ParseError> {
        let mut at = 0;
        while at < data.len() {
            let rest = &data[at..];
            let (took, done) = match self.state {
                State::Head => self.feed_head(rest)?,
                State::Length { left } => {
                    let n = (rest.len() as u64).min(left);
                    self.body_bytes += n;
                    let left = left - n;
                    self.state = State::Length { left };
                    (n as usize, left == 0)
                }
                State::UntilClose => {
                    self.body_bytes += rest.len() as u64;
                    if self.body_bytes > self.bounds.max_body_bytes {
                        return Err(ParseError::BodyTooLarge {
                            limit: self.bounds.max_body_bytes,
                        });
                    }
                    (rest.len(), false)
                }
                State::Chunked(c) => self.feed_chunked(c, rest)?,
            };
            at += took;
            self.seen += took as u64;
            if done {
                return Ok((at, Some(self.finish())));
            }
        }
        Ok((at, None))
    }

    /// The server closed the connection: the response read until close ends
    /// here; one cut short is an error; between responses, nothing.
    pub fn eof(&mut self) -> Result<Option<Response>, ParseError> {
        match self.state {
            State::UntilClose => Ok(Some(self.finish())),
            State::Head if self.seen == 0 => Ok(None),
            _ => Err(ParseError::Truncated),
        }
    }

    fn finish(&mut self) -> Response {
        let r = Response {
            status: self.status,
            head_bytes: self.head_bytes,
            body_bytes: self.body_bytes,
            close: self.close,
        };
        self.reset();
        r
    }

    /// Head bytes: parsed straight from `data` when a head comes whole,
    /// gathered (up to the bound) when it comes in pieces.
    fn feed_head(&mut self, data: &[u8]) -> Result<(usize, bool), ParseError> {
        let max = self.bounds.max_header_bytes;
        if self.head.is_empty() {
            if let Some(n) = self.parse_head(data)? {
                if n > max {
                    return Err(ParseError::HeadTooLarge { limit: max });
                }
                return Ok((n, self.after_head(n)));
            }
            // Partial: keep it, bounded.
            let keep = data.len().min(max + 1);
            if keep > max {
                return Err(ParseError::HeadTooLarge { limit: max });
            }
            self.head.extend_from_slice(&data[..keep]);
            return Ok((keep, false));
        }
        let old = self.head.len();
        let room = max + 1 - old;
        let keep = data.len().min(room);
        self.head.extend_from_slice(&data[..keep]);
        // Only a blank line can end a head: parse only once one may be there.
        let from = old.saturating_sub(3);
        // httparse ends a head at LF LF or LF CR LF (which CR LF CR LF contains).
        let ended = self.head[from..].windows(2).any(|w| w == b"\n\n")
            || self.head[from..].windows(3).any(|w| w == b"\n\r\n");
        let parsed = if ended {
            let head = std::mem::take(&mut self.head);
            let r = self.parse_head(&head);
            self.head = head;
            r?
        } else {
            None
        };
        match parsed {
            Some(n) if n <= max => {
                self.head.clear();
                // A head that ended in bytes kept before would have been
                // parsed then; should httparse ever differ, it is an error.
                let took = n
                    .checked_sub(old)
                    .filter(|t| *t > 0)
                    .ok_or_else(|| ParseError::BadHead("a head ended before its last piece".into()))?;
                Ok((took, self.after_head(n)))
            }
            Some(_) => Err(ParseError::HeadTooLarge { limit: max }),
            None if self.head.len() > max => Err(ParseError::HeadTooLarge { limit: max }),
            None => Ok((keep, false)),
        }
    }

    /// A head of `n` bytes was parsed: whether the response ends with it.
    fn after_head(&mut self, n: usize) -> bool {
        self.head_bytes += n as u64;
        matches!(self.state, State::Head) && self.status >= 200
    }

    /// Parses a head at the start of `buf`: its length when whole, having
    /// set the status, the framing of the body and whether the server closes.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, ParseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        let n = match r.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(ParseError::TooManyHeaders),
            Err(e) => return Err(ParseError::BadHead(e.to_string())),
        };
        let status = r.code.unwrap_or(0);
        let version = r.version.unwrap_or(1);
        if status < 100 {
            // httparse takes any three digits; HTTP's codes start at 100.
            return Err(ParseError::BadHead(format!("status code {status:03}")));
        }
        if status == 101 {
            return Err(ParseError::Upgrade);
        }
        if (100..200).contains(&status) {
            // An interim response: the real one follows.
            self.status = status;
            self.state = State::Head;
            return Ok(Some(n));
        }
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut encoded = false;
        let mut close = version == 0;
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(ParseError::BadLength)?;
                if length.is_some_and(|l| l != v) {
                    return Err(ParseError::BadLength);
                }
                length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                encoded = true;
                // Chunked when it is the last coding applied.
                chunked = h
                    .value
                    .rsplit(|b| *b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|b| *b == b',') {
                    let t = token.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && version == 0 {
                        close = false;
                    }
                }
            }
        }
        self.status = status;
        self.close = close;
        let bodiless = self.head_request || status == 204 || status == 304;
        self.state = if bodiless {
            State::Head
        } else if encoded && chunked {
            State::Chunked(Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
                len: 0,
            })
        } else if encoded {
            // Another coding last: the body ends when the server closes.
            self.close = true;
            State::UntilClose
        } else if let Some(l) = length {
            if l > self.bounds.max_body_bytes {
                return Err(ParseError::BodyTooLarge {
                    limit: self.bounds.max_body_bytes,
                });
            }
            if l == 0 {
                State::Head
            } else {
                State::Length { left: l }
            }
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok(Some(n))
    }

    fn feed_chunked(&mut self, mut c: Chunk, data: &[u8]) -> Result<(usize, bool), ParseError> {
        let mut i = 0;
        let max_trailer = self.bounds.max_header_bytes;
        let done = loop {
            if i >= data.len() {
                break false;
            }
            if let Chunk::Data { left } = c {
                let n = ((data.len() - i) as u64).min(left);
                self.body_bytes += n;
                i += n as usize;
                c = if left == n {
                    Chunk::DataCr
                } else {
                    Chunk::Data { left: left - n }
                };
                continue;
            }
            let b = data[i];
            i += 1;
            self.head_bytes += 1;
            c = match c {
                Chunk::Size {
                    size,
                    digits,
                    ext,
                    len,
                } => {
                    if len + 1 > MAX_CHUNK_LINE {
                        return Err(ParseError::BadChunk);
                    }
                    let len = len + 1;
                    match b {
                        b'\r' if digits > 0 => Chunk::SizeLf { size },
                        b'\n' if digits > 0 => self.chunk_start(size)?,
                        _ if ext => Chunk::Size {
                            size,
                            digits,
                            ext,
                            len,
                        },
                        b';' | b' ' | b'\t' if digits > 0 => Chunk::Size {
                            size,
                            digits,
                            ext: true,
                            len,
                        },
                        _ => {
                            let d = (b as char).to_digit(16).ok_or(ParseError::BadChunk)?;
                            if digits >= 16 {
                                return Err(ParseError::BadChunk);
                            }
                            Chunk::Size {
                                size: size << 4 | u64::from(d),
                                digits: digits + 1,
                                ext,
                                len,
                            }
                        }
                    }
                }
                Chunk::SizeLf { size } => {
                    if b != b'\n' {
                        return Err(ParseError::BadChunk);
                    }
                    self.chunk_start(size)?
                }
                Chunk::DataCr => match b {
                    b'\r' => Chunk::DataLf,
                    b'\n' => Chunk::Size {
                        size: 0,
                        digits: 0,
                        ext: false,
                        len: 0,
                    },
                    _ => return Err(ParseError::BadChunk),
                },
                Chunk::DataLf => {
                    if b != b'\n' {
                        return Err(ParseError::BadChunk);
                    }
                    Chunk::Size {
                        size: 0,
                        digits: 0,
                        ext: false,
                        len: 0,
                    }
                }
                Chunk::Trailer { line, cr } => {
                    self.trailer_bytes += 1;
                    if self.trailer_bytes > max_trailer {
                        return Err(ParseError::HeadTooLarge { limit: max_trailer });
                    }
                    match b {
                        b'\n' if line == 0 => break true,
                        b'\n' => Chunk::Trailer { line: 0, cr: false },
                        b'\r' if line == 0 && !cr => Chunk::Trailer { line: 0, cr: true },
                        _ if cr => return Err(ParseError::BadChunk),
                        _ => Chunk::Trailer {
                            line: line + 1,
                            cr: false,
                        },
                    }
                }
                Chunk::Data { .. } => unreachable!("handled above"),
            };
        };
        self.state = State::Chunked(c);
        Ok((i, done))
    }

    /// A chunk of `size` starts (the last chunk when 0: trailers follow).
    fn chunk_start(&mut self, size: u64) -> Result<Chunk, ParseError> {
        if size == 0 {
            return Ok(Chunk::Trailer { line: 0, cr: false });
        }
        if self.body_bytes.saturating_add(size) > self.bounds.max_body_bytes {
            return Err(ParseError::BodyTooLarge {
                limit: self.bounds.max_body_bytes,
            });
        }
        Ok(Chunk::Data { left: size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &mut ResponseParser, data: &[u8], split: usize) -> Result<Vec<Response>, ParseError> {
        let mut out = Vec::new();
        for piece in data.chunks(split.max(1)) {
            let mut at = 0;
            while at < piece.len() {
                let (n, r) = p.feed(&piece[at..])?;
                at += n;
                out.extend(r);
            }
        }
        out.extend(p.eof()?);
        Ok(out)
    }

    const TWO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\n\
        Transfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";

    #[test]
    fn length_and_chunked_in_every_split() {
        for split in 1..=TWO.len() {
            let mut p = ResponseParser::new(Bounds::default(), false);
            let r = all(&mut p, TWO, split).unwrap();
            assert_eq!(r.len(), 2, "split {split}");
            assert_eq!((r[0].status, r[0].body_bytes, r[0].close), (200, 5, false));
            assert_eq!((r[1].status, r[1].body_bytes), (404, 5));
            let total: u64 = r.iter().map(|x| x.head_bytes + x.body_bytes).sum();
            assert_eq!(total, TWO.len() as u64, "every byte is head or body");
        }
    }

    #[test]
    fn until_close_interim_and_bodiless() {
        let mut p = ResponseParser::new(Bounds::default(), false);
        let d = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nabcdef";
        let r = all(&mut p, d, 7).unwrap();
        assert_eq!(
            r,
            vec![Response {
                status: 200,
                head_bytes: 44,
                body_bytes: 6,
                close: true
            }]
        );
        let mut p = ResponseParser::new(Bounds::default(), true);
        let r = all(&mut p, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 3).unwrap();
        assert_eq!(r[0].body_bytes, 0, "HEAD: no body whatever the length says");
        let mut p = ResponseParser::new(Bounds::default(), false);
        assert_eq!(
            all(&mut p, b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 4),
            Err(ParseError::Truncated)
        );
    }

    /// Found by the fuzz target: httparse ends a head at LF CR LF, which
    /// the search for the head's end missed when it came in pieces.
    #[test]
    fn a_head_ending_lf_cr_lf_in_pieces() {
        let d = b"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nab";
        for split in 1..=d.len() {
            let mut p = ResponseParser::new(Bounds::default(), false);
            let r = all(&mut p, d, split).unwrap();
            assert_eq!(r.len(), 1, "split {split}");
            assert_eq!(r[0].body_bytes, 2);
        }
    }

    #[test]
    fn bounds_hold() {
        let b = Bounds {
            max_header_bytes: 64,
            max_body_bytes: 10,
        };
        let long = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &[b'a'; 100], b"\r\n\r\n"].concat();
        for split in [1, 5, 200] {
            let mut p = ResponseParser::new(b, false);
            assert_eq!(
                all(&mut p, &long, split),
                Err(ParseError::HeadTooLarge { limit: 64 }),
                "{split}"
            );
        }
        let mut p = ResponseParser::new(b, false);
        assert_eq!(
            all(&mut p, b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", 100),
            Err(ParseError::BodyTooLarge { limit: 10 })
        );
        let mut p = ResponseParser::new(b, false);
        assert_eq!(
            all(
                &mut p,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n",
                3
            ),
            Err(ParseError::BodyTooLarge { limit: 10 })
        );
        let mut p = ResponseParser::new(b, false);
        assert_eq!(
            all(
                &mut p,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n",
                3
            ),
            Err(ParseError::BadChunk),
            "a size of more than 16 hex digits"
        );
        let mut p = ResponseParser::new(b, false);
        assert_eq!(
            all(
                &mut p,
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                3
            ),
            Err(ParseError::BadLength)
        );
    }
}
