//! A minimal HTTP/1.1 server for the tests (std threads, a thread per
//! connection) that counts what it got and sent.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Content-Length bodies of this size.
    Length(usize),
    /// Chunked bodies of this size, in chunks of 100 bytes.
    Chunked(usize),
    /// Reset every connection after reading its first request.
    Reset,
    /// Read requests, never answer.
    Silent,
    /// Content-Length bodies of this size, each followed (in the same write) by bytes nobody
    /// asked for.
    Trailing(usize),
}

#[derive(Default)]
pub struct Counts {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub responses: AtomicU64,
    pub bytes_sent: AtomicU64,
}

pub struct Server {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    /// Responses due inside [from, to) wait until `to`.
    pub stall: Arc<Mutex<Option<(Instant, Instant)>>>,
}

impl Server {
    pub fn start(mode: Mode) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let stall = Arc::new(Mutex::new(None));
        let (c, s, st) = (counts.clone(), stop.clone(), stall.clone());
        l.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                match l.accept() {
                    Ok((conn, _)) => {
                        conn.set_nonblocking(false).unwrap();
                        c.connections.fetch_add(1, Ordering::Relaxed);
                        let (c, s, st) = (c.clone(), s.clone(), st.clone());
                        std::thread::spawn(move || serve(conn, mode, &c, &s, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Server {
            addr,
            counts,
            stop,
            stall,
        }
    }

    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::Relaxed)
    }
    pub fn responses(&self) -> u64 {
        self.counts.responses.load(Ordering::Relaxed)
    }
    pub fn bytes_sent(&self) -> u64 {
        self.counts.bytes_sent.load(Ordering::Relaxed)
    }
    pub fn connections(&self) -> u64 {
        self.counts.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    mut conn: TcpStream,
    mode: Mode,
    c: &Counts,
    stop: &AtomicBool,
    stall: &Mutex<Option<(Instant, Instant)>>,
) {
    conn.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        // One request head at a time.
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break Some(p + 4);
            }
            match conn.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                        return;
                    }
                }
                Err(_) => return,
            }
            if buf.len() > 65536 {
                return;
            }
        };
        let Some(end) = end else { return };
        let head: Vec<u8> = buf.drain(..end).collect();
        c.requests.fetch_add(1, Ordering::Relaxed);
        let close = String::from_utf8_lossy(&head)
            .to_ascii_lowercase()
            .contains("connection: close");
        let resp = match mode {
            Mode::Reset => {
                let s = socket2::SockRef::from(&conn);
                let _ = s.set_linger(Some(Duration::ZERO));
                return;
            }
            Mode::Silent => continue,
            Mode::Length(n) | Mode::Trailing(n) => {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n{}\r\n",
                    if close { "Connection: close\r\n" } else { "" }
                )
                .into_bytes();
                r.resize(r.len() + n, b'x');
                if matches!(mode, Mode::Trailing(_)) {
                    r.extend_from_slice(b"junk");
                }
                r
            }
            Mode::Chunked(n) => {
                let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                let mut left = n;
                while left > 0 {
                    let k = left.min(100);
                    r.extend_from_slice(format!("{k:x}\r\n").as_bytes());
                    r.resize(r.len() + k, b'y');
                    r.extend_from_slice(b"\r\n");
                    left -= k;
                }
                r.extend_from_slice(b"0\r\n\r\n");
                r
            }
        };
        let until = stall.lock().unwrap().and_then(|(from, to)| {
            let now = Instant::now();
            (now >= from && now < to).then_some(to)
        });
        if let Some(to) = until {
            std::thread::sleep(to.saturating_duration_since(Instant::now()));
        }
        if conn.write_all(&resp).is_err() {
            return;
        }
        c.responses.fetch_add(1, Ordering::Relaxed);
        c.bytes_sent.fetch_add(resp.len() as u64, Ordering::Relaxed);
        if close {
            return;
        }
    }
}

/// A config for `server` with the tests' defaults.
pub fn config(server: SocketAddr) -> netrig_http_load::Config {
    netrig_http_load::Config {
        server,
        bind: None,
        request: netrig_http_load::request("GET", "127.0.0.1", "/", &[], false),
        head_request: false,
        connections: 4,
        threads: 2,
        duration: Duration::from_secs(10),
        omit: Duration::ZERO,
        requests: None,
        load: netrig_http_load::Load::Closed,
        new_conn: false,
        timeout: Duration::from_secs(2),
        bounds: Default::default(),
        tls: None,
        interval: None,
        nodelay: true,
        cpus: None,
        measure_cpu: true,
        watch: Default::default(),
    }
}

pub fn run(c: &netrig_http_load::Config) -> netrig_http_load::Report {
    netrig_http_load::run(c, &|| None, &mut |_| {}).unwrap()
}
