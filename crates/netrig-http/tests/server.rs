//! The HTTP test server over loopback: what it serves, keep-alive and close, pipelining, HTTPS,
//! delays and stalls, its counts against what the client sent and received, and the hostile
//! cases (docs/HOSTILE.md, "The HTTP server").

use netrig_http::{body_byte, Bounds, Close, Refusal, Server, ServerConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn server(threads: usize, bounds: Bounds) -> Server {
    let mut c = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    c.threads = threads;
    c.bounds = bounds;
    Server::start(c).expect("server starts")
}

fn connect(s: &Server) -> TcpStream {
    let t = TcpStream::connect(s.local_addr()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    t
}

/// One response as the client read it.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Bytes of the response on the wire, head included.
    wire: usize,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A reader of responses from any stream, keeping bytes read past one response for the next.
struct Client<S: Read + Write> {
    s: S,
    buf: Vec<u8>,
    sent: usize,
    received: usize,
}

impl<S: Read + Write> Client<S> {
    fn new(s: S) -> Self {
        Client {
            s,
            buf: Vec::new(),
            sent: 0,
            received: 0,
        }
    }

    fn send(&mut self, raw: &[u8]) {
        self.s.write_all(raw).unwrap();
        self.s.flush().unwrap();
        self.sent += raw.len();
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk).unwrap();
        self.buf.extend_from_slice(&chunk[..n]);
        self.received += n;
        n > 0
    }

    /// The next response; `head_only` for the answer to HEAD.
    fn response(&mut self, head_only: bool) -> Resp {
        let (head_len, status, headers) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut hs);
            if let httparse::Status::Complete(n) = r.parse(&self.buf).unwrap() {
                let headers = r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect::<Vec<_>>();
                break (n, r.code.unwrap(), headers);
            }
            assert!(self.fill(), "the server closed mid-head");
        };
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .expect("Content-Length");
        let body_len = if head_only { 0 } else { len };
        while self.buf.len() < head_len + body_len {
            assert!(self.fill(), "the server closed mid-body");
        }
        let body = self.buf[head_len..head_len + body_len].to_vec();
        self.buf.drain(..head_len + body_len);
        Resp {
            status,
            headers,
            body,
            wire: head_len + body_len,
        }
    }

    /// True when the server closed (EOF) with nothing more sent.
    fn closed(&mut self) -> bool {
        self.buf.is_empty() && !self.fill()
    }

    fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.response(false)
    }
}

fn assert_pattern(body: &[u8], len: usize) {
    assert_eq!(body.len(), len);
    if let Some(i) = body
        .iter()
        .enumerate()
        .position(|(i, &b)| b != body_byte(i as u64))
    {
        panic!(
            "byte {i} of {len} is {} (expected {})",
            body[i],
            body_byte(i as u64)
        );
    }
}

#[test]
fn bodies_of_several_sizes_are_byte_exact_and_head_has_none() {
    let s = server(2, Bounds::default());
    let mut c = Client::new(connect(&s));
    for len in [
        0usize,
        1,
        25,
        26,
        1024,
        16_383,
        16_384,
        16_385,
        65_536,
        65_563,
        1_000_003,
        8 << 20,
    ] {
        let r = c.get(&format!("/bytes/{len}"));
        assert_eq!(r.status, 200, "/bytes/{len}");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
        assert_eq!(
            r.header("connection"),
            None,
            "HTTP/1.1 keeps alive without saying so"
        );
        assert_pattern(&r.body, len);
        c.send(format!("HEAD /bytes/{len} HTTP/1.1\r\n\r\n").as_bytes());
        let h = c.response(true);
        assert_eq!(
            (h.status, h.header("content-length")),
            (200, Some(&*len.to_string()))
        );
    }
    // The HEAD answers had no body: the next answer on the connection is whole.
    assert_pattern(&c.get("/bytes/10").body, 10);
    assert_eq!(
        s.stats().connections_accepted,
        1,
        "one keep-alive connection for all of it"
    );
}

#[test]
fn other_paths_methods_and_sizes_are_refused_with_a_reason() {
    let s = server(
        1,
        Bounds {
            max_body: 1000,
            ..Bounds::default()
        },
    );
    let mut c = Client::new(connect(&s));
    assert_eq!(c.get("/").status, 404);
    assert_eq!(c.get("/bytes").status, 404);
    let r = c.get("/bytes/1001");
    assert_eq!(r.status, 413);
    assert!(String::from_utf8_lossy(&r.body).contains("--max-body of 1000"));
    assert_eq!(c.get("/bytes/12x").status, 400);
    assert_eq!(c.get("/bytes/1?delay_ms=99999999").status, 400);
    c.send(b"DELETE /bytes/1 HTTP/1.1\r\n\r\n");
    assert_eq!(c.response(false).status, 405);
    // Each refusal left the connection usable.
    assert_pattern(&c.get("/bytes/1000").body, 1000);
    let st = s.stats();
    assert_eq!(
        (
            st.status(404),
            st.status(413),
            st.status(400),
            st.status(405),
            st.status(200)
        ),
        (2, 1, 2, 1, 1)
    );
    assert_eq!(st.refused(Refusal::BodyTooLarge), 1);
    assert_eq!(st.refused(Refusal::BadTarget), 3);
}

#[test]
fn keep_alive_by_default_close_when_asked_and_http_1_0_closes_unless_asked() {
    let s = server(1, Bounds::default());
    // HTTP/1.1: two requests on one connection.
    let mut c = Client::new(connect(&s));
    c.get("/bytes/5");
    c.get("/bytes/5");
    // Connection: close is answered, said, and the connection closed.
    c.send(b"GET /bytes/5 HTTP/1.1\r\nConnection: close\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed(), "closed after Connection: close");
    // HTTP/1.0 without keep-alive: closed.
    let mut c = Client::new(connect(&s));
    c.send(b"GET /bytes/5 HTTP/1.0\r\n\r\n");
    assert_eq!(c.response(false).header("connection"), Some("close"));
    assert!(c.closed());
    // HTTP/1.0 with keep-alive: kept, and said.
    let mut c = Client::new(connect(&s));
    for _ in 0..3 {
        c.send(b"GET /bytes/5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(c.response(false).header("connection"), Some("keep-alive"));
    }
    let st = s.stats();
    assert_eq!(st.connections_accepted, 3);
    assert_eq!(st.closed_by(Close::Server), 2, "{st:?}");
}

#[test]
fn max_requests_per_connection_closes_after_the_last() {
    let s = server(
        1,
        Bounds {
            max_requests_per_connection: Some(3),
            ..Bounds::default()
        },
    );
    let mut c = Client::new(connect(&s));
    assert_eq!(c.get("/bytes/1").header("connection"), None);
    assert_eq!(c.get("/bytes/1").header("connection"), None);
    assert_eq!(c.get("/bytes/1").header("connection"), Some("close"));
    assert!(c.closed());
}

#[test]
fn pipelined_requests_are_answered_in_order_even_behind_a_delay() {
    let s = server(1, Bounds::default());
    let mut c = Client::new(connect(&s));
    let sizes: Vec<usize> = (0..60).map(|i| (i * 7919) % 70_000).collect();
    let mut raw = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let delay = if i == 20 { "?delay_ms=200" } else { "" };
        raw.extend_from_slice(format!("GET /bytes/{n}{delay} HTTP/1.1\r\n\r\n").as_bytes());
    }
    let t0 = Instant::now();
    c.send(&raw);
    for n in &sizes {
        assert_pattern(&c.get_response_body(), *n);
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(190),
        "the delayed answer held those behind it"
    );
    // Many small ones in one write, more than a read buffer holds, the client reading only
    // after it sent them all (a writer thread, so neither side can block the other).
    let mut w = c.s.try_clone().unwrap();
    let many = 5_000;
    let writer = std::thread::spawn(move || {
        let raw = b"GET /bytes/3 HTTP/1.1\r\nHost: pipelining\r\n\r\n".repeat(many);
        w.write_all(&raw).unwrap();
        raw.len()
    });
    for _ in 0..many {
        assert_eq!(c.response(false).body, b"abc");
    }
    c.sent += writer.join().unwrap();
    assert_eq!(s.stats().requests, (sizes.len() + many) as u64);
}

impl<S: Read + Write> Client<S> {
    fn get_response_body(&mut self) -> Vec<u8> {
        let r = self.response(false);
        assert_eq!(r.status, 200);
        r.body
    }
}

#[test]
fn the_counts_agree_with_what_the_client_sent_and_received() {
    let s = server(2, Bounds::default());
    let (mut sent, mut received, mut requests) = (0usize, 0usize, 0u64);
    let mut wire = 0usize;
    for conn in 0..4 {
        let mut c = Client::new(connect(&s));
        for i in 0..25 {
            let r = c.get(&format!("/bytes/{}", conn * 1000 + i * 333));
            wire += r.wire;
            requests += 1;
        }
        c.send(b"GET /missing HTTP/1.1\r\nConnection: close\r\n\r\n");
        wire += c.response(false).wire;
        requests += 1;
        assert!(c.closed());
        sent += c.sent;
        received += c.received;
    }
    assert_eq!(wire, received, "the client read nothing but whole responses");
    // The stats endpoint's own request and answer are not in the counts it returns.
    let mut c = Client::new(connect(&s));
    let r = c.get("/.netrig/stats");
    let wire_stats: netrig_http::Snapshot = serde_json::from_slice(&r.body).unwrap();
    // In process, the worker counts its write right after write(2) returns: the client may
    // read the answer a moment before.
    let want = (received + r.wire) as u64;
    wait_for(|| s.stats().bytes_sent == want, "the stats answer counted");
    for st in [&wire_stats, &s.stats()] {
        let this = if std::ptr::eq(st, &wire_stats) { 0 } else { 1 };
        assert_eq!(st.requests, requests + this);
        assert_eq!(st.status(200), 100 + this);
        assert_eq!(st.status(404), 4);
        // Read before the snapshot was taken: the stats request's own head is in both.
        assert_eq!(st.bytes_received, (sent + c.sent) as u64);
        assert_eq!(st.bytes_sent, (received + r.wire * this as usize) as u64);
        assert_eq!(st.connections_accepted, 5);
    }
    assert_eq!(wire_stats.closed_by(Close::Server), 4);
}

#[test]
fn a_delay_is_a_timer_not_a_sleeping_worker() {
    let s = server(1, Bounds::default());
    let addr = s.local_addr();
    let slow = std::thread::spawn(move || {
        let t = TcpStream::connect(addr).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut c = Client::new(t);
        let t0 = Instant::now();
        assert_pattern(&c.get("/bytes/100?delay_ms=600").body, 100);
        t0.elapsed()
    });
    std::thread::sleep(Duration::from_millis(100));
    // The one worker answers others while the delayed answer waits.
    let mut c = Client::new(connect(&s));
    let t0 = Instant::now();
    for _ in 0..20 {
        c.get("/bytes/10");
    }
    let others = t0.elapsed();
    let slow = slow.join().unwrap();
    assert!(slow >= Duration::from_millis(590), "delayed {slow:?}");
    assert!(slow < Duration::from_secs(5), "delayed {slow:?}");
    assert!(
        others < Duration::from_millis(450),
        "20 answers beside the delay took {others:?}"
    );
}

#[test]
fn a_stall_pauses_every_worker_for_its_length() {
    let s = server(2, Bounds::default());
    let mut cs: Vec<_> = (0..4).map(|_| Client::new(connect(&s))).collect();
    for c in &mut cs {
        c.get("/bytes/1");
    }
    let t0 = Instant::now();
    s.stall(Duration::from_millis(300));
    for c in &mut cs {
        c.get("/bytes/1");
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(280),
        "answered {took:?} after a 300 ms stall began"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    // After it, prompt again.
    let t1 = Instant::now();
    cs[0].get("/bytes/1");
    assert!(t1.elapsed() < Duration::from_millis(250));
    assert_eq!(s.stats().stalls, 1);
}

#[test]
fn https_round_trip_with_a_self_signed_certificate() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("netrig-http-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.tls = Some(netrig_http::tls::server_config(&cert, &key).unwrap());
    let s = Server::start(cfg).unwrap();
    std::fs::remove_dir_all(&dir).ok();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let client_cfg =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let conn = rustls::ClientConnection::new(Arc::new(client_cfg), "localhost".try_into().unwrap()).unwrap();
    let mut c = Client::new(rustls::StreamOwned::new(conn, connect(&s)));
    for len in [0, 1024, 100_000, 3 << 20] {
        assert_pattern(&c.get(&format!("/bytes/{len}")).body, len);
    }
    c.send(b"GET /bytes/7 HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_pattern(&c.response(false).body, 7);
    let st = s.stats();
    assert_eq!(st.requests, 5);
    // Counted as HTTP (the plaintext), not as TLS records.
    assert_eq!(st.bytes_received as usize, c.sent);
    assert_eq!(st.bytes_sent as usize, c.received);
    // A plain-HTTP client at the HTTPS port: a TLS failure, counted by cause.
    let mut p = connect(&s);
    p.write_all(b"GET /bytes/1 HTTP/1.1\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = p.read_to_end(&mut sink);
    wait_for(|| s.stats().closed_by(Close::Tls) == 1, "a TLS failure counted");
}

#[test]
fn a_tls_handshake_that_does_not_end_is_closed_at_the_header_timeout() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.tls = Some(netrig_http::tls::from_der(vec![ck.cert.der().clone()], key).unwrap());
    cfg.bounds.header_timeout = Duration::from_secs(1);
    let s = Server::start(cfg).unwrap();
    let mut t = connect(&s);
    // The first bytes of a ClientHello record, and no more.
    t.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    let t0 = Instant::now();
    read_to_close(&mut t);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "closed after {took:?}"
    );
    let st = s.stats();
    assert_eq!(st.closed_by(Close::HeaderTimeout), 1);
    assert_eq!(st.status(408), 0, "no 408 without a channel to send it on");
}

fn wait_for(mut f: impl FnMut() -> bool, what: &str) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------- hostile cases

/// Reads until EOF or a reset; what came.
fn read_to_close(t: &mut TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match t.read(&mut chunk) {
            Ok(0) => return v,
            Ok(n) => v.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return v,
            Err(e) => panic!("read: {e}"),
        }
    }
}

#[test]
fn slow_headers_are_answered_408_and_closed_at_the_header_timeout() {
    let s = server(
        1,
        Bounds {
            header_timeout: Duration::from_secs(1),
            ..Bounds::default()
        },
    );
    let mut t = connect(&s);
    let t0 = Instant::now();
    t.write_all(b"GET /bytes/1 HTTP/1.1\r\n").unwrap();
    // A header byte every 100 ms: each renews nothing.
    let mut w = t.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for _ in 0..40 {
            if w.write_all(b"X").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let got = read_to_close(&mut t);
    let took = t0.elapsed();
    trickle.join().unwrap();
    assert!(
        got.starts_with(b"HTTP/1.1 408 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(String::from_utf8_lossy(&got).contains("--header-timeout"));
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
    let st = s.stats();
    assert_eq!(st.refused(Refusal::HeaderTimeout), 1);
    assert_eq!(st.closed_by(Close::HeaderTimeout), 1);
    assert_eq!(st.status(408), 1);
    // An honest client is served meanwhile and after.
    assert_pattern(&Client::new(connect(&s)).get("/bytes/64").body, 64);
}

#[test]
fn a_silent_connection_is_closed_at_the_keepalive_timeout() {
    let s = server(
        1,
        Bounds {
            idle_timeout: Duration::from_millis(800),
            ..Bounds::default()
        },
    );
    let mut c = Client::new(connect(&s));
    c.get("/bytes/1");
    let t0 = Instant::now();
    assert!(c.closed());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(750) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // A connection that never sends a byte: the same bound from its accept.
    let t0 = Instant::now();
    assert!(read_to_close(&mut connect(&s)).is_empty());
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(s.stats().closed_by(Close::IdleTimeout), 2);
}

#[test]
fn a_huge_header_is_refused_at_the_bound_with_431() {
    let s = server(1, Bounds::default());
    let mut t = connect(&s);
    let mut raw = b"GET /bytes/1 HTTP/1.1\r\nX-Big: ".to_vec();
    raw.resize(1 << 20, b'x');
    raw.extend_from_slice(b"\r\n\r\n");
    let mut w = t.try_clone().unwrap();
    // The server stops reading at its bound; the writer may be cut off by the close.
    let writer = std::thread::spawn(move || w.write_all(&raw).is_ok());
    let got = read_to_close(&mut t);
    let _ = writer.join();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    assert!(
        text.contains("longer than 8192 bytes (--max-header-bytes)"),
        "{text}"
    );
    drop(t);
    assert_eq!(s.stats().refused(Refusal::HeaderTooLarge), 1);
    // Closed once the client closed too (it drained what the client still sent meanwhile,
    // 2 s at most, so that the 431 was not lost to a reset).
    wait_for(
        || s.stats().closed_by(Close::BadRequest) == 1,
        "the refused connection closed",
    );
    // Too many header lines: 431 too.
    let mut t = connect(&s);
    let mut raw = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        raw.extend_from_slice(format!("H{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    t.write_all(&raw).unwrap();
    assert!(read_to_close(&mut t).starts_with(b"HTTP/1.1 431 "));
    assert_eq!(s.stats().refused(Refusal::TooManyHeaders), 1);
    assert_pattern(&Client::new(connect(&s)).get("/bytes/64").body, 64);
}

#[test]
fn a_request_line_without_an_end_is_refused_414_or_408() {
    let s = server(
        1,
        Bounds {
            header_timeout: Duration::from_secs(1),
            ..Bounds::default()
        },
    );
    // Long: refused at the bound.
    let mut t = connect(&s);
    let mut raw = b"GET /".to_vec();
    raw.resize(20_000, b'a');
    t.write_all(&raw).unwrap();
    let got = read_to_close(&mut t);
    assert!(
        got.starts_with(b"HTTP/1.1 414 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // Short and never ending: refused at the header timeout.
    let mut t = connect(&s);
    t.write_all(b"GET /bytes/1 HTTP/1.1").unwrap();
    let t0 = Instant::now();
    assert!(read_to_close(&mut t).starts_with(b"HTTP/1.1 408 "));
    assert!(t0.elapsed() < Duration::from_secs(3));
    // Not HTTP/1.x (HTTP/2's preface), and garbage: 505 and 400.
    let mut t = connect(&s);
    t.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    assert!(read_to_close(&mut t).starts_with(b"HTTP/1.1 505 "));
    let mut t = connect(&s);
    t.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
        .unwrap();
    assert!(read_to_close(&mut t).starts_with(b"HTTP/1.1 400 "));
    let st = s.stats();
    assert_eq!(
        (
            st.refused(Refusal::RequestLineTooLong),
            st.refused(Refusal::HeaderTimeout),
            st.refused(Refusal::Version),
            st.refused(Refusal::Malformed)
        ),
        (1, 1, 1, 1)
    );
    assert_pattern(&Client::new(connect(&s)).get("/bytes/64").body, 64);
}

#[test]
fn connections_beyond_the_limit_get_503_and_are_closed_at_once() {
    let s = server(
        2,
        Bounds {
            max_connections: 5,
            ..Bounds::default()
        },
    );
    let mut held: Vec<_> = (0..5).map(|_| Client::new(connect(&s))).collect();
    for c in &mut held {
        c.get("/bytes/1");
    }
    let t0 = Instant::now();
    let mut extra = connect(&s);
    let got = read_to_close(&mut extra);
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert!(
        got.starts_with(b"HTTP/1.1 503 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(String::from_utf8_lossy(&got).contains("--max-connections"));
    assert_eq!(s.stats().refused(Refusal::OverConnectionLimit), 1);
    // Those held are still served; once one closes, a new one is taken.
    held[0].get("/bytes/1");
    drop(held.pop());
    wait_for(
        || s.stats().connections_open == 4,
        "the closed connection counted",
    );
    assert_pattern(&Client::new(connect(&s)).get("/bytes/9").body, 9);
}

#[test]
fn a_client_that_does_not_read_is_closed_at_the_send_timeout() {
    let s = server(
        1,
        Bounds {
            send_timeout: Duration::from_millis(700),
            ..Bounds::default()
        },
    );
    let mut t = connect(&s);
    t.write_all(b"GET /bytes/67108864 HTTP/1.1\r\n\r\n").unwrap();
    wait_for(
        || s.stats().closed_by(Close::SendTimeout) == 1,
        "closed at the send timeout",
    );
    assert!(
        s.stats().bytes_sent < 64 << 20,
        "the socket buffers cannot hold 64 MiB"
    );
}
