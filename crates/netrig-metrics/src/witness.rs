//! The kernel's own counts beside netrig's: what the runner reads at the two
//! instants that bound a measured window, so that every figure can be set
//! against an independent count of the same thing.
//!
//! - **Per socket (TCP)**: the payload the application has written is
//!   `tcpi_bytes_acked` + the bytes still queued (`SIOCOUTQ`: sent but not
//!   acknowledged, or not yet sent); what it has read is
//!   `tcpi_bytes_received` − the bytes still waiting to be read
//!   (`SIOCINQ`). Both are exact at any instant, so their differences over
//!   the window equal netrig's byte counts to within the one system call in
//!   progress when each was read ([`socket_payload`]). (The SYN, which
//!   `tcpi_bytes_acked` counts, is taken off.)
//! - **Per host** (network namespace): `/proc/net/snmp`, `/proc/net/snmp6`
//!   and `/proc/net/netstat` (read by [`crate::read_kernel_counters`]), and
//!   the statistics of the interfaces the flows use ([`interface_of`],
//!   [`read_interface`]). These count every socket's traffic, so they bound
//!   netrig's figures from above; the excess is other traffic.
//! - **Scope** ([`counter_scope`]): two ends whose counters are the same
//!   files (one host, one network namespace) must not report them twice.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

/// One interface's statistics (`/sys/class/net/IF/statistics`): bytes are
/// whole frames as the driver counts them (headers included), packets are
/// the driver's units (a GSO or GRO super-packet counts once on loopback
/// and veth).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

impl InterfaceCounters {
    /// The counts between `earlier` and `self` (wrapping counters saturate at 0).
    pub fn since(&self, earlier: &InterfaceCounters) -> InterfaceCounters {
        InterfaceCounters {
            name: self.name.clone(),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
        }
    }
}

/// Reads one interface's statistics; `None` when it has none (gone, or no sysfs).
pub fn read_interface(name: &str) -> Option<InterfaceCounters> {
    // A name from getifaddrs, but never let it walk out of the directory.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some(InterfaceCounters {
        name: name.to_string(),
        rx_bytes: read("rx_bytes")?,
        tx_bytes: read("tx_bytes")?,
        rx_packets: read("rx_packets")?,
        tx_packets: read("tx_packets")?,
        rx_dropped: read("rx_dropped").unwrap_or(0),
        tx_dropped: read("tx_dropped").unwrap_or(0),
    })
}

/// The interface that holds local address `ip` (where this end's sockets
/// are bound), from getifaddrs(3); `None` for a wildcard address or one no
/// interface has.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    interfaces_of([ip]).pop()
}

/// The interfaces that hold the local addresses `ips`, each named once, in
/// the order of the first address on it; addresses no interface has (and
/// wildcards) are left out. One getifaddrs(3) for them all: it dumps every
/// address over netlink, and a test of 5,000 flows that asked it per flow
/// spent a quarter of a second of its window doing so.
pub fn interfaces_of(ips: impl IntoIterator<Item = IpAddr>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut wanted: Vec<IpAddr> = Vec::new();
    for ip in ips {
        // A v4-mapped address is its IPv4 address's.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if !ip.is_unspecified() && seen.insert(ip) {
            wanted.push(ip);
        }
    }
    if wanted.is_empty() {
        return Vec::new();
    }
    let held = addresses();
    let mut names: Vec<String> = Vec::new();
    for ip in wanted {
        if let Some((_, name)) = held.iter().find(|(a, _)| *a == ip) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Every interface address of this host (network namespace), with its
/// interface's name, from one getifaddrs(3).
fn addresses() -> Vec<(IpAddr, String)> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr of the family it names.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
                }
                libc::AF_INET6 => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(a.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if let Some(addr) = addr {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            out.push((addr, name.to_string_lossy().into_owned()));
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The payload a TCP socket's application has written (`sender`) or read
/// (`!sender`) so far, by the kernel's own count: `tcpi_bytes_acked` − 1
/// (the SYN) + SIOCOUTQ, or `tcpi_bytes_received` − SIOCINQ; and how far
/// off that can be. The two come from two system calls, between which an
/// acknowledgement (or new data) may arrive, so TCP_INFO is read on both
/// sides of the ioctl: the count uses the first reading, and the second
/// bounds its error (`tcpi_bytes_acked` or `tcpi_bytes_received` moved by
/// that much at most while the ioctl ran). `None` where the kernel does not
/// report them.
pub fn socket_payload(fd: BorrowedFd<'_>, sender: bool) -> Option<(u64, u64)> {
    let queued = |req: libc::c_ulong| -> Option<u64> {
        let mut n: libc::c_int = 0;
        // SAFETY: SIOCINQ/SIOCOUTQ write one int to the pointer given.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut n) };
        (rc == 0).then(|| u64::try_from(n).unwrap_or(0))
    };
    let moved = |i: &crate::TcpInfo| if sender { i.bytes_acked } else { i.bytes_received };
    let before = crate::tcp_info(fd).ok()?;
    let q = if sender {
        queued(libc::TIOCOUTQ as libc::c_ulong)?
    } else {
        queued(libc::FIONREAD as libc::c_ulong)?
    };
    let after = crate::tcp_info(fd).ok()?;
    let (m0, m1) = (moved(&before)?, moved(&after)?);
    let value = if sender {
        m0.saturating_sub(1) + q
    } else {
        m0.checked_sub(q)?
    };
    Some((value, m1.saturating_sub(m0)))
}

/// What waits in a TCP socket's queue on this end: bytes written but not
/// yet sent (`sender`, SIOCOUTQNSD), or arrived but not yet read
/// (SIOCINQ). Payload written minus the first has gone out of the
/// interface; payload read plus the second has come in.
pub fn socket_queue(fd: BorrowedFd<'_>, sender: bool) -> Option<u64> {
    /// From linux/sockios.h: output queue size, not sent yet.
    const SIOCOUTQNSD: libc::c_ulong = 0x894B;
    let req = if sender {
        SIOCOUTQNSD
    } else {
        libc::FIONREAD as libc::c_ulong
    };
    let mut n: libc::c_int = 0;
    // SAFETY: the ioctl writes one int to the pointer given.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut n) };
    (rc == 0).then(|| u64::try_from(n).unwrap_or(0))
}

/// This kernel's boot id (`/proc/sys/kernel/random/boot_id`, a random UUID
/// made at boot): two processes with the same one run on one kernel, in any
/// namespaces, and read one `CLOCK_REALTIME`.
pub fn boot_id() -> Option<String> {
    let b = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let b = b.trim();
    (!b.is_empty()).then(|| b.to_string())
}

/// Names the set of counters this process sees: the boot and the network
/// namespace. Two ends with the same scope read the same /proc/net files.
pub fn counter_scope() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/net").ok()?;
    Some(format!("{}/{}", boot.trim(), ns.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn loopback_is_found_and_read() {
        let lo = interface_of("127.0.0.1".parse().unwrap()).expect("127.0.0.1 is on an interface");
        let c = read_interface(&lo).expect("its statistics");
        assert_eq!(c.name, lo);
        assert_eq!(interface_of("0.0.0.0".parse().unwrap()), None);
        // v4-mapped is its IPv4 address's interface; each interface once, wildcards left out.
        assert_eq!(
            interface_of("::ffff:127.0.0.1".parse().unwrap()),
            Some(lo.clone())
        );
        let ips = ["127.0.0.1", "0.0.0.0", "127.0.0.1", "::ffff:127.0.0.1"].map(|a| a.parse().unwrap());
        assert_eq!(interfaces_of(ips), vec![lo.clone()]);
        assert!(interfaces_of([]).is_empty());
        assert_eq!(read_interface("../../etc"), None);
        assert!(counter_scope().is_some_and(|s| s.contains("net:[")));
    }

    #[test]
    fn socket_payload_is_what_the_applications_wrote_and_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        a.write_all(&[7u8; 10_000]).unwrap();
        let mut got = [0u8; 4_000];
        b.read_exact(&mut got).unwrap();
        // What is still queued on either side counts where it belongs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while socket_payload(b.as_fd(), false) != Some((4_000, 0)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                socket_payload(b.as_fd(), false)
            );
        }
        assert_eq!(socket_payload(a.as_fd(), true), Some((10_000, 0)));
        // Nothing waits unsent on loopback; 6000 bytes wait to be read.
        assert_eq!(socket_queue(a.as_fd(), true), Some(0));
        assert_eq!(socket_queue(b.as_fd(), false), Some(6_000));
    }
}
