//! Half-closed connections left on a server: clients that send a request, close their half (or
//! wait for the server to close its own) and go away, while a watch inside the server host
//! counts its sockets on the port by state (FIN_WAIT2, CLOSE_WAIT, ...) until they are gone.
//!
//! - `shutdown`: each client sends the request and shuts its write half (a FIN), then holds the
//!   connection without reading: the server sees CLOSE_WAIT until it closes its own half.
//! - `vanish`: each client sends the request (HTTP/1.0 by default: the server closes after its
//!   reply), reads until the server has closed (bounded: [`SERVER_CLOSE_WAIT`]), then goes away
//!   without a word: the socket is put in TCP_REPAIR mode and closed, which sends neither FIN
//!   nor RST. The server is left in FIN_WAIT2 with no peer, until its `tcp_fin_timeout`.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections, each connect at most 2 s, the watch at most
//! [`MAX_WATCH_S`]. Runs, as the flood, only inside a lab host towards another host of the lab.

use super::scope;
use super::watch::{View, Watch};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const MAX_CONNECTIONS: u32 = 20_000;
pub const MAX_WATCH_S: f64 = 600.0;
/// How long `vanish` waits, in all, for the server to close its halves.
pub const SERVER_CLOSE_WAIT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest the clients take to open their connections, in all.
pub const CONNECT_PHASE: Duration = Duration::from_secs(60);
/// The request unless one is given: HTTP/1.0, so an HTTP server closes after its reply.
pub const DEFAULT_REQUEST: &str = "GET / HTTP/1.0\r\n\r\n";
const MAX_REQUEST: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum How {
    Shutdown,
    Vanish,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub to: SocketAddr,
    pub connections: u32,
    pub how: How,
    pub request: Vec<u8>,
    /// The longest the server's sockets are watched after the clients went away.
    pub watch: Duration,
}

pub fn check(o: &Options) -> Result<(), String> {
    if o.connections == 0 || o.connections > MAX_CONNECTIONS {
        return Err(format!(
            "--connections {}: 1 to {MAX_CONNECTIONS} (netrig's limit)",
            o.connections
        ));
    }
    let w = o.watch.as_secs_f64();
    if !(w > 0.0 && w <= MAX_WATCH_S) {
        return Err(format!(
            "--watch {w}: more than 0 and at most {MAX_WATCH_S} s (netrig's limit)"
        ));
    }
    if o.request.is_empty() || o.request.len() > MAX_REQUEST {
        return Err(format!("--request: 1 to {MAX_REQUEST} bytes (netrig's limit)"));
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub lab: String,
    pub host: String,
    pub target: SocketAddr,
    pub target_host: String,
    pub how: How,
    pub started_unix_s: f64,
    pub connections_asked: u32,
    pub opened: u32,
    pub connect_failures: u32,
    /// Connections whose request or shutdown failed (the server had reset them).
    pub request_failures: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// `vanish`: connections the server had closed (the client read its FIN) before the client went away.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_closed_first: Option<u32>,
    /// Seconds after the watch began when the last client went away.
    pub away_at_s: f64,
    /// The server's sockets from this client on the port, watched in its namespace.
    pub server: View,
    /// Seconds from the last client going away until the watch saw none of them open (TIME_WAIT
    /// aside; 0 when the server held none by then); `None` if some were still open when the
    /// watch ended (see `left_at_end`).
    pub gone_after_s: Option<f64>,
    pub left_at_end: u64,
    /// The server host's net.ipv4.tcp_fin_timeout (what bounds an orphaned FIN_WAIT2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_fin_timeout_s: Option<u64>,
}

/// This host's source address towards `to` (a connected UDP socket's; nothing is sent).
fn source_towards(to: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().ok()?;
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(to).ok()?;
    Some(s.local_addr().ok()?.ip())
}

/// How long `vanish` lets the ACKs of the servers' FINs go out before the clients go away.
pub const ACK_GRACE: Duration = Duration::from_millis(250);

/// TCP_QUICKACK: ACK at once rather than on the delayed-ACK timer (the kernel clears it again
/// after a while, so it is set before each read).
fn set_quickack(s: &TcpStream) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on an open socket with a c_int; a failure only leaves ACKs delayed.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Goes away without a word: TCP_REPAIR on, then close (no FIN, no RST).
fn vanish(s: TcpStream) -> Result<(), String> {
    const TCP_REPAIR: libc::c_int = 19;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a socket this function owns, with a c_int.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_REPAIR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!(
            "TCP_REPAIR (needs CAP_NET_ADMIN): {}",
            std::io::Error::last_os_error()
        ));
    }
    drop(s);
    Ok(())
}

fn fin_timeout(ns: &str) -> Option<u64> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        super::watch::enter(&ns).ok()?;
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fin_timeout")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
    .join()
    .ok()
    .flatten()
}

/// The clients' connections and what went wrong opening them.
struct Clients {
    conns: Vec<TcpStream>,
    connect_failures: u32,
    request_failures: u32,
    first_error: Option<String>,
}

impl Clients {
    /// Opens up to `o.connections` connections (within [`CONNECT_PHASE`] from `t0`), each sending
    /// the request and, for `shutdown`, closing its write half.
    fn open(o: &Options, stop: &AtomicBool, t0: Instant) -> Clients {
        let mut c = Clients {
            conns: Vec::new(),
            connect_failures: 0,
            request_failures: 0,
            first_error: None,
        };
        for _ in 0..o.connections {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if t0.elapsed() >= CONNECT_PHASE {
                let opened = c.conns.len();
                c.first_error.get_or_insert_with(|| {
                    format!(
                        "stopped opening connections after {} s (netrig's bound on that phase), {opened} opened",
                        CONNECT_PHASE.as_secs(),
                    )
                });
                break;
            }
            let mut s = match TcpStream::connect_timeout(&o.to, CONNECT_TIMEOUT) {
                Ok(s) => s,
                Err(e) => {
                    c.connect_failures += 1;
                    c.first_error.get_or_insert_with(|| format!("connect: {e}"));
                    // A server that refuses or times out every connection: stop after a few.
                    if c.connect_failures >= 16 && c.conns.is_empty() {
                        break;
                    }
                    continue;
                }
            };
            // A request or shutdown the server cut short (it reset the connection) still leaves
            // the connection counted as opened: what the server did is in its sockets' view.
            let r = s.write_all(&o.request).and_then(|()| match o.how {
                How::Shutdown => s.shutdown(std::net::Shutdown::Write),
                How::Vanish => Ok(()),
            });
            if let Err(e) = r {
                c.request_failures += 1;
                c.first_error.get_or_insert_with(|| format!("request: {e}"));
            }
            c.conns.push(s);
        }
        c
    }

    /// `vanish`: reads until the server has closed its halves (bounded), lets the ACKs of its
    /// FINs go out, then goes away from every connection without a word. How many the server
    /// had closed first.
    fn go_away(&mut self, stop: &AtomicBool) -> u32 {
        let closed = read_until_closed(&self.conns, stop);
        // The ACK of each server's FIN may wait for the delayed-ACK timer (40 to 200 ms): a
        // client gone before it leaves the server in FIN_WAIT1, retransmitting its FIN into
        // a host without the socket, which answers RST. Ask for the ACKs now, and give them
        // the timer's longest wait.
        for s in &self.conns {
            set_quickack(s);
        }
        std::thread::sleep(ACK_GRACE);
        for s in self.conns.drain(..) {
            if let Err(e) = vanish(s) {
                self.first_error.get_or_insert(e);
            }
        }
        closed
    }
}

/// Reads each connection until the server has closed its half (EOF), in all at most
/// [`SERVER_CLOSE_WAIT`]; how many it closed.
fn read_until_closed(conns: &[TcpStream], stop: &AtomicBool) -> u32 {
    let deadline = Instant::now() + SERVER_CLOSE_WAIT;
    let mut closed = vec![false; conns.len()];
    let mut buf = [0u8; 4096];
    for s in conns {
        let _ = s.set_nonblocking(true);
    }
    while Instant::now() < deadline && closed.iter().any(|c| !c) && !stop.load(Ordering::Relaxed) {
        for (i, mut s) in conns.iter().enumerate() {
            if closed[i] {
                continue;
            }
            // Bounded: each turn reads at most 64 KiB per connection.
            for _ in 0..16 {
                set_quickack(s);
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed[i] = true;
                        break;
                    }
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        closed[i] = true;
                        break;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    closed.iter().filter(|c| **c).count() as u32
}

/// Asks the kernel of namespace `ns`, every 100 ms, for the sockets on `port` from `me` until
/// none is open, within `o.watch`; when that was, in seconds from `t0` (`away_at_s` when the
/// server held none by then), or `None` if some were still open at the end.
fn gone_at(
    o: &Options,
    stop: &AtomicBool,
    watch: &Watch,
    ns: &str,
    me: IpAddr,
    t0: Instant,
    away_at_s: f64,
) -> Option<f64> {
    let until = Instant::now() + o.watch;
    let mut seen_open = false;
    let away = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if stop.load(Ordering::Relaxed) || Instant::now() >= until || watch.ended() {
            return None;
        }
        // The watch's own samples are read at its end; here the kernel is asked directly.
        let open = count_open(ns, o.to.port(), me);
        seen_open |= open > 0;
        // Gone: none left after some were there, or none at all a second after the clients
        // went away (the server had closed them all already).
        if open == 0 && (seen_open || away.elapsed() >= Duration::from_secs(1)) {
            return Some(if seen_open {
                t0.elapsed().as_secs_f64()
            } else {
                away_at_s
            });
        }
    }
}

/// Runs from the calling thread's namespace, which must be a lab host's.
pub fn run(o: &Options, stop: &AtomicBool) -> Result<Report, String> {
    check(o)?;
    let scope = scope::check_here(o.to.ip())?;
    let me = source_towards(o.to).ok_or_else(|| format!("no route from host {} to {}", scope.host, o.to))?;
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    // The watch outlasts every phase: connecting, the servers' closes and the ACKs, watching.
    let bound =
        o.watch + CONNECT_PHASE + CONNECT_TIMEOUT + SERVER_CLOSE_WAIT + ACK_GRACE + Duration::from_secs(2);
    let t0 = Instant::now();
    let watch = Watch::start(
        &scope.target_host,
        &scope.target_ns,
        o.to.port(),
        Some(me),
        bound,
        false,
    );
    let mut clients = Clients::open(o, stop, t0);
    let opened = clients.conns.len() as u32;
    // shutdown: held without reading, the clients are gone, their half closed.
    let server_closed_first = (o.how == How::Vanish).then(|| clients.go_away(stop));
    let away_at_s = t0.elapsed().as_secs_f64();
    // Watch until the server's sockets from this client are gone, or the watch's bound.
    let gone_at = gone_at(o, stop, &watch, &scope.target_ns, me, t0, away_at_s);
    std::thread::sleep(Duration::from_millis(150));
    let server = watch.finish()?;
    let Clients {
        conns,
        connect_failures,
        request_failures,
        first_error,
    } = clients;
    drop(conns); // shutdown: the held halves go now (after the watch).
    let left_at_end = server.samples.last().map_or(0, |s| s.states.open());
    Ok(Report {
        lab: scope.lab.clone(),
        host: scope.host.clone(),
        target: o.to,
        target_host: scope.target_host.clone(),
        how: o.how,
        started_unix_s,
        connections_asked: o.connections,
        opened,
        connect_failures,
        request_failures,
        first_error,
        server_closed_first,
        away_at_s,
        gone_after_s: gone_at.map(|g| (g - away_at_s).max(0.0)),
        left_at_end,
        server,
        server_fin_timeout_s: fin_timeout(&scope.target_ns),
    })
}

fn count_open(ns: &str, port: u16, peer: IpAddr) -> u64 {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        if super::watch::enter(&ns).is_err() {
            return 1;
        }
        let mut st = super::watch::States::default();
        for f in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
            if let Ok(t) = std::fs::read_to_string(f) {
                super::watch::count(&t, port, Some(peer), &mut st, super::watch::MAX_LINES);
            }
        }
        st.open()
    })
    .join()
    .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            to: "198.18.1.2:8080".parse().unwrap(),
            connections: 100,
            how: How::Vanish,
            request: DEFAULT_REQUEST.as_bytes().to_vec(),
            watch: Duration::from_secs(30),
        }
    }

    #[test]
    fn counts_and_lengths_are_bounded() {
        assert!(check(&opts()).is_ok());
        let e = check(&Options {
            connections: MAX_CONNECTIONS + 1,
            ..opts()
        })
        .unwrap_err();
        assert!(e.contains("--connections") && e.contains("20000"), "{e}");
        let e = check(&Options {
            watch: Duration::from_secs(601),
            ..opts()
        })
        .unwrap_err();
        assert!(e.contains("--watch"), "{e}");
        let e = check(&Options {
            request: vec![],
            ..opts()
        })
        .unwrap_err();
        assert!(e.contains("--request"), "{e}");
    }

    #[test]
    fn outside_a_lab_it_is_refused() {
        let e = run(&opts(), &AtomicBool::new(false)).unwrap_err();
        assert!(e.starts_with("refused") && e.contains(scope::RULE), "{e}");
    }
}
