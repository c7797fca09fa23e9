//! `--metrics-port`: the agent's counters ([`crate::metrics`]) for Prometheus to scrape, at
//! `GET /metrics`, as OpenMetrics text when the scraper's Accept asks for it, else the classic
//! text format.
//!
//! One thread, one connection at a time: a scrape is a few kilobytes, and a scraper that sends
//! nothing, too much or too slowly only costs its own connection: the request head is read to
//! [`MAX_HEAD`] bytes within [`READ_DEADLINE`] (a deadline over the whole head, not per read,
//! so a byte a second does not hold it longer), the answer is written within
//! [`WRITE_TIMEOUT`], and the connection is closed after one answer. It needs no key: it only
//! reads counters, and tells nothing secret (no addresses, keys or hosts of clients); its port
//! should be firewalled as any exporter's. `--allow` applies to it as to every port of the agent.

use crate::peer::allowed;
use crate::shared::Shared;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most a request's head (request line and headers) may be.
pub const MAX_HEAD: usize = 8192;
/// The most time a request's head may take to arrive, from its connection.
pub const READ_DEADLINE: Duration = Duration::from_secs(3);
/// The most time writing the answer may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the accept loop looks whether the agent is shutting down (and how long it
/// sleeps after an accept that failed otherwise: out of descriptors, say).
const SHUTDOWN_POLL: Duration = Duration::from_millis(200);

/// `--metrics-port`'s socket: `bind`'s address on `port` (with `[::]`, IPv6 and IPv4 alike).
pub(crate) fn bind(bind: SocketAddr, port: u16) -> Result<TcpListener, (SocketAddr, io::Error)> {
    let mut addr = SocketAddr::new(bind.ip(), port);
    let l = match TcpListener::bind(addr) {
        // A host without IPv6: every IPv4 address, as the agent's own port does.
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) && bind.ip().is_unspecified() => {
            addr = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), port);
            TcpListener::bind(addr)
        }
        r => r,
    }
    .map_err(|e| (addr, e))?;
    // Linux's accept waits at most SO_RCVTIMEO: a scrape is taken at once, and the loop still
    // looks at the agent's shutdown that often.
    socket2::SockRef::from(&l)
        .set_read_timeout(Some(SHUTDOWN_POLL))
        .map_err(|e| (addr, e))?;
    Ok(l)
}

/// Serves scrapes on `listener` on a thread of its own until the agent shuts down.
pub(crate) fn start(listener: TcpListener, shared: Arc<Shared>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("netrig-metrics".into())
        .spawn(move || {
            while !shared.shutdown.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, peer)) if allowed(&shared.config.allow, peer.ip()) => {
                        answer(stream, &shared);
                    }
                    // Outside --allow: closed unanswered, as the HTTP port does.
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        log::warn!("metrics port (--metrics-port): accept failed: {e}");
                        std::thread::sleep(SHUTDOWN_POLL);
                    }
                }
            }
        })
        .map(|_| ())
}

/// One connection: its request read (bounded), one answer, closed.
fn answer(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let response = match read_head(&mut stream) {
        Ok(head) => respond(&head, shared),
        Err(Some(status)) => plain(status, "the request head is over 8192 bytes or malformed\n"),
        // No whole head by the deadline, or the client went: nothing to answer.
        Err(None) => return,
    };
    let _ = stream.write_all(&response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// The request head, up to its blank line; `Err(Some(status))` to answer with, or
/// `Err(None)` when the client was too slow or went away.
fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, Option<u16>> {
    let deadline = Instant::now() + READ_DEADLINE;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(None);
        }
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => n,
        };
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end + 4);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(Some(431));
        }
    }
}

/// The answer to a whole request head (judged by `netrig_openmetrics::scrape`, fuzzed there).
fn respond(head: &[u8], shared: &Shared) -> Vec<u8> {
    use netrig_openmetrics::scrape::{request, Scrape};
    let openmetrics = match request(head) {
        Scrape::Refused(status, words) => return plain(status, words),
        Scrape::Metrics { openmetrics } => openmetrics,
    };
    let families = shared.metrics.families(shared.slots.len());
    let (body, content_type) = if openmetrics {
        let t = netrig_openmetrics::openmetrics(&families);
        (t, netrig_openmetrics::OPENMETRICS_CONTENT_TYPE)
    } else {
        let t = netrig_openmetrics::classic(&families);
        (t, netrig_openmetrics::CLASSIC_CONTENT_TYPE)
    };
    http(200, content_type, body.as_bytes())
}

fn plain(status: u16, body: &str) -> Vec<u8> {
    http(status, "text/plain; charset=utf-8", body.as_bytes())
}

fn http(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Request Header Fields Too Large",
    };
    let allow = if status == 405 { "Allow: GET\r\n" } else { "" };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}
