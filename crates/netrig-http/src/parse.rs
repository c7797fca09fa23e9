//! Request heads, parsed with httparse and bounded, and the routes this server knows.
//!
//! No I/O: [`parse`] reads whatever bytes a connection has buffered and says whether they hold a
//! complete head (and how long it is), need more bytes, or must be refused (with the status and
//! the bound that refuses it). The fuzz target `http_request` feeds it arbitrary bytes in
//! arbitrary splits.

use std::mem::MaybeUninit;

/// Header lines one request may carry (beyond it: 431).
pub const MAX_HEADERS: usize = 64;
/// The longest `N` of `/bytes/N` or `delay_ms=M` read: 20 digits (u64).
const MAX_DIGITS: usize = 20;

/// The bounds a head is parsed within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Bytes of a request head: request line, headers and the blank line (`--max-header-bytes`).
    pub max_header_bytes: usize,
    /// The largest body `/bytes/N` may ask for (`--max-body`).
    pub max_body: u64,
    /// The longest `delay_ms` a request may ask for, in ms (`--max-delay`).
    pub max_delay_ms: u64,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_header_bytes: 8 * 1024,
            max_body: 64 << 20,
            max_delay_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Any other method (answered 405).
    Other,
}

/// A complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Bytes of the head, blank line included: what to consume from the buffer.
    pub len: usize,
    pub method: Method,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    /// Whether the connection stays open after the answer (HTTP/1.1 unless `Connection: close`;
    /// HTTP/1.0 only with `Connection: keep-alive`).
    pub keep_alive: bool,
    pub route: Route,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/bytes/N[?delay_ms=M]`: a body of N bytes, answered M ms after the head arrived.
    Bytes { len: u64, delay_ms: u64 },
    /// `/.netrig/stats`: the server's counts as JSON.
    Stats,
    /// Any other path: 404.
    NotFound,
    /// A request this server refuses, with its status and the reason given in the body
    /// (the connection stays usable: the head was read whole).
    Refused { status: u16, reason: String },
}

/// Why a head cannot be read; the connection is answered with `status` and closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {limit} bytes (--max-header-bytes)")]
    HeaderTooLarge { limit: usize },
    #[error("the request line has no end within {limit} bytes (--max-header-bytes)")]
    RequestLineTooLong { limit: usize },
    #[error("more than {MAX_HEADERS} header lines")]
    TooManyHeaders,
    #[error("not HTTP/1.0 or HTTP/1.1 (HTTP/2 is not served)")]
    Version,
    #[error("malformed request head: {0}")]
    Malformed(&'static str),
    #[error("request bodies are not taken (Content-Length {0})")]
    Body(u64),
    #[error("Transfer-Encoding is not taken (no request bodies)")]
    TransferEncoding,
    #[error("Content-Length is not a number, or given twice with different values")]
    ContentLength,
}

impl HeadError {
    /// The status the connection is answered with before it is closed.
    pub fn status(&self) -> u16 {
        match self {
            HeadError::HeaderTooLarge { .. } | HeadError::TooManyHeaders => 431,
            HeadError::RequestLineTooLong { .. } => 414,
            HeadError::Version => 505,
            HeadError::Malformed(_) | HeadError::ContentLength => 400,
            HeadError::Body(_) => 413,
            HeadError::TransferEncoding => 501,
        }
    }
}

/// What the buffered bytes hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Complete(Request),
    /// Not a whole head yet, and still within `max_header_bytes`: read more.
    Partial,
    Error(HeadError),
}

/// Reads the head at the start of `buf`. Never reads more than `limits.max_header_bytes` of it
/// as a head: a head that has not ended by then is refused, whatever follows.
pub fn parse(buf: &[u8], limits: &ParseLimits) -> Parsed {
    let max = limits.max_header_bytes;
    let window = &buf[..buf.len().min(max)];
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(window, &mut headers) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            if buf.len() < max {
                return Parsed::Partial;
            }
            return Parsed::Error(if window.contains(&b'\n') {
                HeadError::HeaderTooLarge { limit: max }
            } else {
                HeadError::RequestLineTooLong { limit: max }
            });
        }
        Err(httparse::Error::TooManyHeaders) => return Parsed::Error(HeadError::TooManyHeaders),
        Err(httparse::Error::Version) => return Parsed::Error(HeadError::Version),
        Err(e) => return Parsed::Error(HeadError::Malformed(error_name(e))),
    };
    let minor = req.version.unwrap_or(1);
    let mut close = false;
    let mut keep = false;
    let mut content_length: Option<u64> = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let t = token.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    keep = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let Some(n) = digits(h.value.trim_ascii()) else {
                return Parsed::Error(HeadError::ContentLength);
            };
            if content_length.is_some_and(|c| c != n) {
                return Parsed::Error(HeadError::ContentLength);
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Error(HeadError::TransferEncoding);
        }
    }
    if let Some(n) = content_length.filter(|&n| n > 0) {
        return Parsed::Error(HeadError::Body(n));
    }
    let keep_alive = !close && (minor == 1 || keep);
    let method = match req.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        _ => Method::Other,
    };
    let route = match method {
        Method::Other => Route::Refused {
            status: 405,
            reason: "only GET and HEAD are served".into(),
        },
        _ => route(req.path.unwrap_or("/"), limits),
    };
    Parsed::Complete(Request {
        len,
        method,
        minor,
        keep_alive,
        route,
    })
}

/// The route of a request target (origin form, or absolute form whose authority is ignored).
pub fn route(target: &str, limits: &ParseLimits) -> Route {
    let target = match target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if path == "/.netrig/stats" {
        return Route::Stats;
    }
    let Some(n) = path.strip_prefix("/bytes/") else {
        return Route::NotFound;
    };
    let Some(len) = digits(n.as_bytes()) else {
        return refused(
            400,
            format!("/bytes/N: N must be a whole number of bytes, not {n:?}"),
        );
    };
    if len > limits.max_body {
        return refused(
            413,
            format!(
                "/bytes/{len} asks for more than this server's --max-body of {} bytes",
                limits.max_body
            ),
        );
    }
    let mut delay_ms = 0;
    for pair in query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != "delay_ms" {
            return refused(
                400,
                format!("unknown query parameter {k:?} (only delay_ms=M is taken)"),
            );
        }
        match digits(v.as_bytes()) {
            Some(m) if m <= limits.max_delay_ms => delay_ms = m,
            Some(m) => {
                return refused(
                    400,
                    format!(
                        "delay_ms={m} is longer than this server's --max-delay of {} ms",
                        limits.max_delay_ms
                    ),
                )
            }
            None => return refused(400, format!("delay_ms must be a whole number of ms, not {v:?}")),
        }
    }
    Route::Bytes { len, delay_ms }
}

fn refused(status: u16, reason: String) -> Route {
    Route::Refused { status, reason }
}

/// A decimal number of 1 to 20 digits that fits a u64.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > MAX_DIGITS || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter()
        .try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

fn error_name(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid new line",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token (method)",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "invalid HTTP version",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> ParseLimits {
        ParseLimits::default()
    }

    #[test]
    fn a_get_of_bytes_is_complete_with_its_length() {
        let b = b"GET /bytes/1024 HTTP/1.1\r\nHost: x\r\n\r\nGET /";
        match parse(b, &lim()) {
            Parsed::Complete(r) => {
                assert_eq!(r.len, b.len() - 5);
                assert_eq!(r.method, Method::Get);
                assert!(r.keep_alive);
                assert_eq!(
                    r.route,
                    Route::Bytes {
                        len: 1024,
                        delay_ms: 0
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keep_alive_follows_the_version_and_the_connection_header() {
        let ka = |b: &[u8]| match parse(b, &lim()) {
            Parsed::Complete(r) => r.keep_alive,
            other => panic!("{other:?}"),
        };
        assert!(!ka(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(ka(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!ka(b"GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n"));
        assert!(ka(b"GET / HTTP/1.1\r\n\r\n"));
    }

    #[test]
    fn bounds_refuse_with_the_right_status() {
        let l = ParseLimits {
            max_header_bytes: 64,
            ..lim()
        };
        assert_eq!(parse(b"GET /", &l), Parsed::Partial);
        let line = [b'a'; 64];
        assert_eq!(
            parse(&line, &l),
            Parsed::Error(HeadError::RequestLineTooLong { limit: 64 })
        );
        let mut h = b"GET / HTTP/1.1\r\nX: ".to_vec();
        h.resize(80, b'y');
        let e = match parse(&h, &l) {
            Parsed::Error(e) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e, HeadError::HeaderTooLarge { limit: 64 });
        assert_eq!(e.status(), 431);
        assert!(e.to_string().contains("--max-header-bytes"));
        // A whole head beyond the bound is refused even though it ended.
        let mut long = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long.resize(70, b'y');
        long.extend_from_slice(b"\r\n\r\n");
        assert!(matches!(
            parse(&long, &l),
            Parsed::Error(HeadError::HeaderTooLarge { .. })
        ));
        assert_eq!(
            parse(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &lim()),
            Parsed::Error(HeadError::Version)
        );
        assert_eq!(
            parse(
                b"POST /bytes/1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
                &lim()
            ),
            Parsed::Error(HeadError::Body(5))
        );
    }

    #[test]
    fn routes_bound_sizes_and_delays() {
        let l = ParseLimits {
            max_body: 1000,
            max_delay_ms: 500,
            ..lim()
        };
        assert_eq!(
            route("/bytes/1000?delay_ms=500", &l),
            Route::Bytes {
                len: 1000,
                delay_ms: 500
            }
        );
        assert_eq!(
            route("http://h:1/bytes/0", &l),
            Route::Bytes { len: 0, delay_ms: 0 }
        );
        assert_eq!(route("/.netrig/stats", &l), Route::Stats);
        assert_eq!(route("/", &l), Route::NotFound);
        let status = |t: &str| match route(t, &l) {
            Route::Refused { status, reason } => (status, reason),
            other => panic!("{other:?}"),
        };
        assert_eq!(status("/bytes/1001").0, 413);
        assert!(status("/bytes/1001").1.contains("--max-body"));
        assert_eq!(status("/bytes/99999999999999999999999").0, 400);
        assert_eq!(status("/bytes/-1").0, 400);
        assert!(status("/bytes/1?delay_ms=501").1.contains("--max-delay"));
        assert_eq!(status("/bytes/1?x=1").0, 400);
    }
}
