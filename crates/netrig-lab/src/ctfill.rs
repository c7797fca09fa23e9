//! Filling a lab host's connection tracking table (the IA64 study's conntrack collapse).
//!
//! The study's kernel stopped scaling when its conntrack table filled. Where the kernel keeps
//! `net.netfilter.nf_conntrack_max` host-wide (6.x: read-only in a network namespace, see
//! docs/LAB.md "conntrack_max"), a lab host cannot be given a small table; but the limit is
//! checked against each namespace's **own** count, so the host's table can be **filled**
//! instead: `netrig lab ct-fill --leave N`, run inside the host (an arm's `in_host` set-up),
//! inserts idle, established, assured TCP entries through ctnetlink (as `conntrack -I` does)
//! until the namespace holds `nf_conntrack_max − N`, leaving N free. Assured established
//! entries are what the kernel never evicts to make room (early drop takes only unassured ones,
//! and the garbage collector only closing ones), so the N free entries are the table the test's
//! connections get; when they are used up, new connections are dropped (`drop` in
//! /proc/net/stat/nf_conntrack, "nf_conntrack: table full" in the kernel log) as on a small
//! table. `--flush` empties the host's table (the arm's tear-down). Nothing outside the
//! namespace it runs in is touched: ctnetlink acts on the caller's network namespace.
//!
//! The entries are IPv4 TCP from `--from` (default 198.18.255.1, a benchmarking address) to
//! `--to` (default 198.18.255.2) port 9 (discard), source ports 1024–65535, then the next
//! source address; each expires after `--timeout` seconds (default 600) if not flushed.

use std::io;
use std::net::Ipv4Addr;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;

const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_STATUS: u16 = 3;
const CTA_PROTOINFO: u16 = 4;
const CTA_TIMEOUT: u16 = 7;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
const CTA_PROTOINFO_TCP: u16 = 1;
const CTA_PROTOINFO_TCP_STATE: u16 = 1;
/// IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED (ctnetlink refuses a new entry's status
/// without CONFIRMED, which creating sets: EBUSY, "that bit can only be set").
const STATUS_SEEN_REPLY_ASSURED: u32 = 2 | 4 | 8;
const TCP_CONNTRACK_ESTABLISHED: u8 = 3;
/// Messages sent per sendto, each acknowledged.
const BATCH: usize = 256;
/// The most entries one fill inserts (the kernel's own limit stops it first).
pub const MAX_FILL: u64 = 4 << 20;
/// The longest a filler entry lives, seconds.
pub const MAX_TIMEOUT_S: u32 = 24 * 3600;

/// What a fill did, in the namespace it ran in.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    /// net.netfilter.nf_conntrack_max (host-wide on this kernel).
    pub max: u64,
    /// This namespace's entries before and after.
    pub before: u64,
    pub after: u64,
    /// Entries inserted.
    pub inserted: u64,
    /// Why it stopped short of `max − leave`, if it did (the kernel's error).
    pub stopped: Option<String>,
}

fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

fn nested(buf: &mut Vec<u8>, ty: u16, inner: impl FnOnce(&mut Vec<u8>)) {
    let mut b = Vec::new();
    inner(&mut b);
    attr(buf, ty | NLA_F_NESTED, &b);
}

fn tuple(buf: &mut Vec<u8>, ty: u16, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) {
    nested(buf, ty, |b| {
        nested(b, CTA_TUPLE_IP, |b| {
            attr(b, CTA_IP_V4_SRC, &src.octets());
            attr(b, CTA_IP_V4_DST, &dst.octets());
        });
        nested(b, CTA_TUPLE_PROTO, |b| {
            attr(b, CTA_PROTO_NUM, &[libc::IPPROTO_TCP as u8]);
            attr(b, CTA_PROTO_SRC_PORT, &sport.to_be_bytes());
            attr(b, CTA_PROTO_DST_PORT, &dport.to_be_bytes());
        });
    });
}

fn message(out: &mut Vec<u8>, ty: u16, flags: u16, seq: u32, attrs: &[u8]) {
    let len = 16 + 4 + attrs.len();
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&((NFNL_SUBSYS_CTNETLINK << 8) | ty).to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    // nfgenmsg: family, version, resource id (big endian).
    out.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0]);
    out.extend_from_slice(attrs);
}

/// The `i`-th filler entry's source address and port: ports 1024–65535, then the next address.
pub fn nth(from: Ipv4Addr, i: u64) -> (Ipv4Addr, u16) {
    const PORTS: u64 = 65536 - 1024;
    let addr = u32::from(from).wrapping_add((i / PORTS) as u32);
    (Ipv4Addr::from(addr), (1024 + i % PORTS) as u16)
}

/// One ctnetlink message creating an established, assured TCP entry `src:sport → dst:9`
/// (reply `dst:9 → src:sport`) that expires after `timeout_s`.
pub fn create_message(seq: u32, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, timeout_s: u32) -> Vec<u8> {
    let mut a = Vec::with_capacity(128);
    tuple(&mut a, CTA_TUPLE_ORIG, src, dst, sport, 9);
    tuple(&mut a, CTA_TUPLE_REPLY, dst, src, 9, sport);
    attr(&mut a, CTA_STATUS, &STATUS_SEEN_REPLY_ASSURED.to_be_bytes());
    nested(&mut a, CTA_PROTOINFO, |b| {
        nested(b, CTA_PROTOINFO_TCP, |b| {
            attr(b, CTA_PROTOINFO_TCP_STATE, &[TCP_CONNTRACK_ESTABLISHED])
        })
    });
    attr(&mut a, CTA_TIMEOUT, &timeout_s.to_be_bytes());
    let mut m = Vec::with_capacity(a.len() + 20);
    message(
        &mut m,
        IPCTNL_MSG_CT_NEW,
        NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK,
        seq,
        &a,
    );
    m
}

/// The errors (0: acknowledged) of the acknowledgements in `buf`, by sequence number.
pub fn acks(buf: &[u8]) -> Vec<(u32, i32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4")) as usize;
        if len < 16 || at + len > buf.len() {
            break;
        }
        let ty = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2"));
        let seq = u32::from_ne_bytes(buf[at + 8..at + 12].try_into().expect("4"));
        if ty == NLMSG_ERROR && len >= 20 {
            let e = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().expect("4"));
            out.push((seq, -e));
        }
        at += (len + 3) & !3;
    }
    out
}

struct Socket(i32);

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this value owns.
        unsafe { libc::close(self.0) };
    }
}

impl Socket {
    fn open() -> io::Result<Socket> {
        // SAFETY: plain socket(2); the descriptor is owned by the returned value.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let s = Socket(fd);
        // A 5 s bound on every wait for the kernel's answers.
        let tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        // SAFETY: setsockopt with a timeval of the right size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        Ok(s)
    }

    fn send(&self, buf: &[u8]) -> io::Result<()> {
        // SAFETY: the kernel's address (pid 0), a buffer we own.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        let n = unsafe {
            libc::sendto(
                self.0,
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The acknowledgements of `want` messages (bounded by the receive timeout).
    fn acks(&self, want: usize) -> io::Result<Vec<(u32, i32)>> {
        let mut got = Vec::with_capacity(want);
        let mut buf = vec![0u8; 1 << 16];
        while got.len() < want {
            // SAFETY: reading into a buffer we own, of its length.
            let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            got.extend(acks(&buf[..n as usize]));
        }
        Ok(got)
    }
}

fn read_u64(path: &str) -> io::Result<u64> {
    std::fs::read_to_string(path)?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {e}")))
}

/// This namespace's conntrack entries and the table's size.
pub fn count_and_max() -> io::Result<(u64, u64)> {
    Ok((
        read_u64("/proc/sys/net/netfilter/nf_conntrack_count")?,
        read_u64("/proc/sys/net/netfilter/nf_conntrack_max")?,
    ))
}

/// Empties this namespace's IPv4 conntrack table.
pub fn flush() -> io::Result<()> {
    let s = Socket::open()?;
    let mut m = Vec::new();
    message(&mut m, IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, 1, &[]);
    s.send(&m)?;
    match s.acks(1)?.first() {
        Some((_, 0)) | None => Ok(()),
        Some((_, e)) => Err(io::Error::from_raw_os_error(*e)),
    }
}

/// Fills this namespace's table to `nf_conntrack_max − leave` entries (see the module's text).
pub fn fill(leave: u64, from: Ipv4Addr, to: Ipv4Addr, timeout_s: u32) -> io::Result<Filled> {
    let (before, max) = count_and_max()?;
    let want = max.saturating_sub(leave).saturating_sub(before).min(MAX_FILL);
    let s = Socket::open()?;
    let timeout_s = timeout_s.clamp(1, MAX_TIMEOUT_S);
    let mut inserted = 0u64;
    let mut i = 0u64;
    let mut stopped = None;
    let mut seq = 1u32;
    let mut exists = 0u64;
    'fill: while inserted < want {
        let n = ((want - inserted) as usize).min(BATCH);
        let mut buf = Vec::with_capacity(n * 140);
        for _ in 0..n {
            let (src, sport) = nth(from, i);
            i += 1;
            buf.extend(create_message(seq, src, sport, to, timeout_s));
            seq = seq.wrapping_add(1);
        }
        s.send(&buf)?;
        for (_, e) in s.acks(n)? {
            match e {
                0 => inserted += 1,
                libc::EEXIST => {
                    // Left by an earlier fill: counted in `before` already; try the next tuple.
                    exists += 1;
                    if exists > want {
                        stopped = Some("every tuple tried exists already".into());
                        break 'fill;
                    }
                }
                e => {
                    stopped = Some(format!(
                        "the kernel refused entry {}: {}",
                        inserted + 1,
                        io::Error::from_raw_os_error(e)
                    ));
                    break 'fill;
                }
            }
        }
    }
    let (after, _) = count_and_max()?;
    Ok(Filled {
        max,
        before,
        after,
        inserted,
        stopped,
    })
}

/// Ok when this process runs in a lab host's namespace (one of `ip netns`'s `nr*` namespaces);
/// else why not: a fill in the machine's own namespace would fill the machine's table.
pub fn in_lab_host() -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/self/ns/net").map_err(|e| format!("/proc/self/ns/net: {e}"))?;
    let lab = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("nr"))
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .any(|m| m.dev() == me.dev() && m.ino() == me.ino());
    if lab {
        Ok(())
    } else {
        Err("lab ct-fill fills (or flushes) the conntrack table of the network namespace it runs in, and this is no \
             lab host's: run it in one (an arm's in_host set-up, or netrig lab exec LAB HOST -- netrig lab ct-fill)"
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filler_entry_is_an_established_assured_tcp_pair_of_tuples() {
        let m = create_message(
            7,
            Ipv4Addr::new(198, 18, 255, 1),
            1024,
            Ipv4Addr::new(198, 18, 255, 2),
            600,
        );
        // nlmsghdr: its length, ctnetlink's NEW, request + create + excl + ack, the sequence.
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 1 << 8);
        assert_eq!(
            u16::from_ne_bytes(m[6..8].try_into().unwrap()),
            1 | 4 | 0x200 | 0x400
        );
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 7);
        assert_eq!(m[16], libc::AF_INET as u8);
        // The original tuple: nested, the addresses in order, then TCP with ports 1024 → 9.
        let a = &m[20..];
        assert_eq!(
            u16::from_ne_bytes(a[2..4].try_into().unwrap()),
            CTA_TUPLE_ORIG | NLA_F_NESTED
        );
        let hex: String = m.iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            hex.contains("c612ff0108000200c612ff02"),
            "src then dst in the original tuple: {hex}"
        );
        assert!(
            hex.contains("c612ff0208000200c612ff01"),
            "dst then src in the reply tuple: {hex}"
        );
        assert!(hex.contains("080003000000000e"), "CTA_STATUS");
        assert!(
            hex.contains("0000000e"),
            "SEEN_REPLY | ASSURED | CONFIRMED, big endian"
        );
        assert!(hex.contains("0800070000000258"), "CTA_TIMEOUT: 600 s, big endian");
        assert!(m.len().is_multiple_of(4));
    }

    #[test]
    fn filler_tuples_walk_ports_then_addresses() {
        let a = Ipv4Addr::new(198, 18, 255, 1);
        assert_eq!(nth(a, 0), (a, 1024));
        assert_eq!(nth(a, 64511), (a, 65535));
        assert_eq!(nth(a, 64512), (Ipv4Addr::new(198, 18, 255, 2), 1024));
    }

    #[test]
    fn acknowledgements_read_their_errors() {
        let mut b = Vec::new();
        for (seq, err) in [(1u32, 0i32), (2, -libc::ENOMEM)] {
            b.extend_from_slice(&36u32.to_ne_bytes());
            b.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&seq.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&err.to_ne_bytes());
            b.extend_from_slice(&[0u8; 16]);
        }
        assert_eq!(acks(&b), [(1, 0), (2, libc::ENOMEM)]);
        // A truncated message is not read past.
        assert_eq!(acks(&b[..40]), [(1, 0)]);
    }
}
