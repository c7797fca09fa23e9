//! Socket options on data sockets, and the truth about what the kernel made
//! of them: Linux doubles SO_SNDBUF/SO_RCVBUF requests and clamps them at
//! net.core.wmem_max/rmem_max, silently. We read back what was granted and
//! say so when it is not what was asked.

use netrig_proto::report::{AppliedOptions, BufPair};
use netrig_proto::spec::{validate_mss, validate_socket_options, SocketOptions, SpecError, TcpOptions};
use socket2::SockRef;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
// The raw int options, below this module and transport.rs alike.
pub use crate::raw_opt::{get_int, set_int};

/// What one end applies to its data sockets: the spec's options for every
/// socket, the kind's TCP options, and on the client `--mss`. The engine's
/// own type: the wire carries the parts ([`SocketOptions`] in the spec,
/// [`TcpOptions`] in a TCP kind's options) and the result shows its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SocketSettings {
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    pub tos: Option<u8>,
    pub priority: Option<u32>,
    pub nodelay: bool,
    pub congestion: Option<String>,
    /// TCP_MAXSEG before connect: the client's only.
    pub mss: Option<u32>,
    pub max_pacing_rate_bps: Option<u64>,
    /// `--mptcp`: the data connections are MPTCP.
    pub mptcp: bool,
}

impl SocketSettings {
    /// The settings of the wire's parts (`tcp` for TCP kinds).
    pub fn new(common: &SocketOptions, tcp: Option<&TcpOptions>) -> SocketSettings {
        let tcp = tcp.cloned().unwrap_or_default();
        SocketSettings {
            sndbuf: common.sndbuf,
            rcvbuf: common.rcvbuf,
            tos: common.tos,
            priority: common.priority,
            nodelay: tcp.nodelay,
            congestion: tcp.congestion,
            mss: None,
            max_pacing_rate_bps: common.max_pacing_rate_bps,
            mptcp: tcp.mptcp,
        }
    }

    /// The protocol this end's stream sockets are made with (MPTCP with
    /// `--mptcp`).
    pub fn protocol(&self) -> socket2::Protocol {
        crate::transport::socket_kind(self.tcp().transport()).1
    }

    /// Whether [`apply_connected`] (without buffers) has nothing to set:
    /// then a connection's first write may go out before anything is
    /// applied, the connect's completion and its failure alike told by
    /// that write.
    pub fn nothing_after_connect(&self) -> bool {
        self.tos.is_none()
            && self.priority.is_none()
            && !self.nodelay
            && self.congestion.is_none()
            && self.max_pacing_rate_bps.is_none()
    }

    /// The part every socket takes, as the wire carries it.
    pub fn common(&self) -> SocketOptions {
        SocketOptions {
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            tos: self.tos,
            priority: self.priority,
            max_pacing_rate_bps: self.max_pacing_rate_bps,
        }
    }

    /// The TCP part, as the wire carries it.
    pub fn tcp(&self) -> TcpOptions {
        TcpOptions {
            nodelay: self.nodelay,
            congestion: self.congestion.clone(),
            mptcp: self.mptcp,
        }
    }

    /// netrig's bounds on every setting; `buf_option` names the flag that
    /// set the buffers (`-s/--local-sockbuf`).
    pub fn validate(&self, buf_option: &'static str) -> Result<(), SpecError> {
        validate_socket_options(&self.common(), buf_option)?;
        self.tcp().check()?;
        self.mss.map_or(Ok(()), validate_mss)
    }
}

/// An option the kernel refused, naming the CLI flag.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {value}: {what} failed: {error}{hint}")]
pub struct OptionError {
    pub flag: &'static str,
    pub value: String,
    pub what: &'static str,
    pub error: io::Error,
    pub hint: String,
}

fn err(flag: &'static str, value: impl ToString, what: &'static str, source: io::Error) -> OptionError {
    let hint = match (flag, source.raw_os_error()) {
        ("--cc", Some(libc::ENOENT)) => format!(
            " (this host offers: {}; see net.ipv4.tcp_available_congestion_control)",
            read_proc_sys("net/ipv4/tcp_available_congestion_control").unwrap_or_else(|| "?".into())
        ),
        ("--cc", Some(libc::EPERM)) => {
            " (not in net.ipv4.tcp_allowed_congestion_control; root may use any loaded algorithm)".into()
        }
        ("--priority", Some(libc::EPERM)) => " (priorities above 6 need CAP_NET_ADMIN)".into(),
        _ => String::new(),
    };
    OptionError {
        flag,
        value: value.to_string(),
        what,
        error: source,
        hint,
    }
}

pub(crate) fn read_proc_sys(path: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// IP_LOCAL_PORT_RANGE (linux/in.h, Linux 6.3), which the libc crate lacks.
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// The host's ephemeral ports for connect(2), `net.ipv4.ip_local_port_range`
/// (Linux's default where it cannot be read).
pub fn local_port_range() -> (u32, u32) {
    read_proc_sys("net/ipv4/ip_local_port_range")
        .and_then(|t| {
            let mut it = t.split_whitespace().map(|v| v.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .filter(|(lo, hi)| lo <= hi && *hi <= 65535)
        .unwrap_or((32768, 60999))
}

/// From which of a run's long-lived data connections (counted from 0) the
/// client lets connect(2) take ports of either parity
/// ([`either_port_parity`]): seven eighths of the even half of `range` (the
/// eighth left for the host's other connections to the agent).
pub fn either_parity_from(range: (u32, u32)) -> u32 {
    // The ports of the range's low parity (its first, third, ...).
    let even = (range.1.saturating_sub(range.0) + 1).div_ceil(2);
    even - even / 8
}

/// Lets connect(2) give this TCP socket a local port of either parity.
/// Linux's connect() takes only ports of the range's low parity (the even
/// ones of 32768-60999), keeping the others for bind(2) to port 0; once the
/// even ones to an agent are taken, every further connect() scans all of
/// them before it turns to the others: measured here, 22 µs per connect()
/// up to about 14,100 connections and 620-690 µs after. A per-socket range
/// makes the kernel (6.8 on) try every port in turn; 1-65535 is clamped to
/// the host's own range, so the ports stay those of `ip_local_port_range`.
/// Only for connections past [`either_parity_from`]: those would take odd
/// ports anyway, so the host's bind(2) keeps as many as without it (asked
/// of every connection, tcp-crr's TIME_WAIT soon covered every port and
/// bind(2) to port 0 failed host-wide). A kernel without the option keeps
/// its way (the error is ignored: nothing is counted differently, set-up
/// is only slower).
pub fn either_port_parity(sock: &socket2::Socket) {
    use std::os::fd::AsRawFd;
    let range: u32 = (65535 << 16) | 1;
    // SAFETY: a valid socket and a u32 value of its size, as the option takes.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            IP_LOCAL_PORT_RANGE,
            (&range as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        );
    }
}

/// Buffer sizes that must be set before connect/listen (window scaling is
/// chosen in the SYN), plus MSS. `buf_flag` names the CLI flag for errors.
pub fn apply_before_connect(
    sock: &socket2::Socket,
    opts: &SocketSettings,
    buf_flag: &'static str,
) -> Result<(), OptionError> {
    apply_buffers(&SockRef::from(sock), opts, buf_flag)?;
    if let Some(mss) = opts.mss {
        sock.set_tcp_mss(mss)
            .map_err(|e| err("--mss", mss, "setsockopt(TCP_MAXSEG)", e))?;
    }
    Ok(())
}

fn apply_buffers(
    sock: &SockRef<'_>,
    opts: &SocketSettings,
    buf_flag: &'static str,
) -> Result<(), OptionError> {
    if let Some(v) = opts.sndbuf {
        sock.set_send_buffer_size(v as usize)
            .map_err(|e| err(buf_flag, v, "setsockopt(SO_SNDBUF)", e))?;
    }
    if let Some(v) = opts.rcvbuf {
        sock.set_recv_buffer_size(v as usize)
            .map_err(|e| err(buf_flag, v, "setsockopt(SO_RCVBUF)", e))?;
    }
    Ok(())
}

/// A connected socket, TCP or UDP: what the option code needs of it.
pub trait Connected: std::os::fd::AsFd {
    fn local(&self) -> io::Result<std::net::SocketAddr>;
    fn peer(&self) -> io::Result<std::net::SocketAddr>;
}

impl Connected for TcpStream {
    fn local(&self) -> io::Result<std::net::SocketAddr> {
        self.local_addr()
    }
    fn peer(&self) -> io::Result<std::net::SocketAddr> {
        self.peer_addr()
    }
}

impl Connected for std::net::UdpSocket {
    fn local(&self) -> io::Result<std::net::SocketAddr> {
        self.local_addr()
    }
    fn peer(&self) -> io::Result<std::net::SocketAddr> {
        self.peer_addr()
    }
}

/// Options that may be set on a connected socket. On the agent this is also
/// where buffers are set: Linux picks the window scale from the tcp_rmem
/// maximum, not from the buffer, so setting them after accept still works.
pub fn apply_connected<S: Connected>(
    stream: &S,
    opts: &SocketSettings,
    include_buffers: bool,
    buf_flag: &'static str,
) -> Result<(), OptionError> {
    let sock = SockRef::from(stream);
    if include_buffers {
        apply_buffers(&sock, opts, buf_flag)?;
    }
    if let Some(tos) = opts.tos {
        let peer_v4 = match stream.peer().map(|a| a.ip()) {
            Ok(IpAddr::V4(_)) => true,
            Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_some(),
            Err(_) => false,
        };
        let local_v6 = matches!(stream.local().map(|a| a.ip()), Ok(IpAddr::V6(_)));
        if local_v6 {
            sock.set_tclass_v6(tos as u32)
                .map_err(|e| err("--tos/--dscp", tos, "setsockopt(IPV6_TCLASS)", e))?;
        }
        if peer_v4 {
            sock.set_tos_v4(tos as u32)
                .map_err(|e| err("--tos/--dscp", tos, "setsockopt(IP_TOS)", e))?;
        }
    }
    if let Some(p) = opts.priority {
        sock.set_priority(p)
            .map_err(|e| err("--priority", p, "setsockopt(SO_PRIORITY)", e))?;
    }
    if opts.nodelay {
        sock.set_tcp_nodelay(true)
            .map_err(|e| err("--nodelay", "", "setsockopt(TCP_NODELAY)", e))?;
    }
    if let Some(cc) = &opts.congestion {
        sock.set_tcp_congestion(cc.as_bytes())
            .map_err(|e| err("--cc", cc, "setsockopt(TCP_CONGESTION)", e))?;
    }
    if let Some(bps) = opts.max_pacing_rate_bps {
        set_max_pacing_rate(stream, bps / 8)
            .map_err(|e| err("--max-pacing-rate", bps, "setsockopt(SO_MAX_PACING_RATE)", e))?;
    }
    Ok(())
}

/// SO_MAX_PACING_RATE in bytes/s, as the 64-bit value kernels since 4.20 take.
fn set_max_pacing_rate<S: std::os::fd::AsFd>(s: &S, bytes_per_s: u64) -> io::Result<()> {
    let v: u64 = bytes_per_s;
    // SAFETY: a valid descriptor and an 8-byte value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s.as_fd()),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&v as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// SO_MAX_PACING_RATE in bits/s; None when unlimited (all ones) or unknown.
fn max_pacing_rate<S: std::os::fd::AsFd>(s: &S) -> Option<u64> {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: valid out-pointers of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s.as_fd()),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    let v = match len {
        4 => v & 0xffff_ffff,
        _ => v,
    };
    (rc == 0 && v != u64::MAX && v != u64::from(u32::MAX)).then(|| v.saturating_mul(8))
}

/// The socket's current buffer sizes (TCP or UDP).
pub fn buffers<S: std::os::fd::AsFd>(socket: &S) -> BufPair {
    let sock = SockRef::from(socket);
    BufPair {
        snd: sock.send_buffer_size().ok().map(|v| v as u32),
        rcv: sock.recv_buffer_size().ok().map(|v| v as u32),
    }
}

/// What the socket's options are now, read back from the kernel.
pub fn applied<S: Connected>(stream: &S) -> AppliedOptions {
    let sock = SockRef::from(stream);
    let tos = match stream.local().map(|a| a.ip()) {
        Ok(IpAddr::V4(_)) => sock.tos_v4().ok(),
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some() => sock.tos_v4().ok(),
        Ok(IpAddr::V6(_)) => sock.tclass_v6().ok(),
        Err(_) => None,
    };
    let peer_mapped =
        matches!(stream.peer().map(|a| a.ip()), Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some());
    let tos = if peer_mapped { sock.tos_v4().ok() } else { tos };
    AppliedOptions {
        tos: tos.map(|t| t as u8),
        priority: sock.priority().ok(),
        nodelay: sock.tcp_nodelay().ok(),
        congestion: sock
            .tcp_congestion()
            .ok()
            .map(|v| String::from_utf8_lossy(&v).trim_end_matches('\0').to_string()),
        mss: sock.tcp_mss().ok(),
        max_pacing_rate_bps: max_pacing_rate(stream),
        mptcp: crate::transport::mptcp_state(stream),
    }
}

/// Warnings for buffer requests the kernel did not grant as asked. `end` is
/// "local" or "remote"; `flag` the CLI flag that asked.
pub fn buffer_warnings(requested: BufPair, granted: BufPair, end: &str, flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let pairs = [
        ("SO_SNDBUF", requested.snd, granted.snd, "net.core.wmem_max"),
        ("SO_RCVBUF", requested.rcv, granted.rcv, "net.core.rmem_max"),
    ];
    for (opt, req, got, sysctl) in pairs {
        let (Some(req), Some(got)) = (req, got) else {
            continue;
        };
        let want = (req as u64) * 2; // Linux doubles every request for bookkeeping overhead
        if (got as u64) < want {
            let limit = read_proc_sys(&sysctl.replace(".", "/")).unwrap_or_else(|| "?".into());
            out.push(format!(
                "{end} {opt}: {flag} {req} was clamped: the kernel granted {got} bytes, not {want} \
                 ({sysctl} = {limit}); raise it with: sysctl -w {sysctl}={req}"
            ));
        } else if (got as u64) > want {
            out.push(format!(
                "{end} {opt}: {flag} {req} is below the kernel's minimum; it granted {got} bytes"
            ));
        }
    }
    out
}

/// Warnings for an end's first flow: buffers ([`buffer_warnings`]), then
/// options ([`option_warnings`]), not as `requested` and `asked`; `got`:
/// the buffers and options read back. `end` is "local" or "remote"; `flag`
/// the CLI flag that asked for the buffers.
pub fn setup_warnings(
    requested: BufPair,
    asked: &SocketSettings,
    got: (BufPair, &AppliedOptions),
    end: &str,
    flag: &str,
) -> Vec<String> {
    let mut out = buffer_warnings(requested, got.0, end, flag);
    out.extend(option_warnings(asked, got.1, end));
    out
}

/// Warnings for options the kernel did not take as asked (read back after
/// setting). `end` is "local" or "remote".
pub fn option_warnings(asked: &SocketSettings, got: &AppliedOptions, end: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(want), Some(have)) = (asked.tos, got.tos) {
        if want != have {
            out.push(format!(
                "{end} TOS: asked for {want:#04x}, the kernel set {have:#04x} (for TCP, Linux manages the two ECN \
                 bits of the TOS byte itself; --dscp sets only the top six bits)"
            ));
        }
    }
    if let (Some(want), Some(have)) = (asked.priority, got.priority) {
        if want != have {
            out.push(format!(
                "{end} SO_PRIORITY: asked for {want}, the kernel reports {have}"
            ));
        }
    }
    if asked.mptcp && got.mptcp != Some(true) {
        out.push(format!(
            "{end} MPTCP: --mptcp asked for it, but the connection {}: the test ran over TCP",
            match (got.mptcp, end) {
                (Some(_), _) => "fell back to plain TCP (the peer, or a middlebox, did not take MPTCP)",
                // An MPTCP listener hands plain TCP connections out as TCP
                // sockets: the agent's was made while MPTCP was off.
                (None, "remote") =>
                    "is a plain TCP one (the agent's listener is not MPTCP: it was made while \
                                     its kernel had MPTCP off)",
                (None, _) => "is a plain TCP one",
            }
        ));
    }
    out
}

/// Bytes of IP and UDP header in front of a datagram's payload: IPv4
/// without options, and IPv6 without extension headers.
pub fn udp_overhead(v6: bool) -> u32 {
    if v6 {
        48
    } else {
        28
    }
}

/// The UDP payload of one Ethernet-sized (1500-byte MTU) datagram: 1472
/// bytes over IPv4, 1452 over IPv6.
pub fn ethernet_udp_payload(v6: bool) -> u32 {
    1500 - udp_overhead(v6)
}

/// The datagram size udp-stream uses when `-m` is not given: the largest
/// payload that goes in one unfragmented datagram on a path of `mtu` bytes,
/// capped at an Ethernet-sized datagram's (so that loopback's 64 KiB MTU does
/// not make a default no other tool uses), and at `max`, the protocol's
/// largest. When the path MTU is not known, an Ethernet-sized datagram's.
pub fn default_udp_payload(mtu: Option<u32>, v6: bool, max: u32) -> u32 {
    let ethernet = ethernet_udp_payload(v6);
    let fits = mtu
        .filter(|m| *m > udp_overhead(v6))
        .map_or(ethernet, |m| m - udp_overhead(v6));
    fits.min(ethernet).min(max)
}

fn int_option<S: std::os::fd::AsFd>(s: &S, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    get_int(std::os::fd::AsRawFd::as_raw_fd(&s.as_fd()), level, opt)
}

/// Never fragment this UDP socket's datagrams (IP_PMTUDISC_DO /
/// IPV6_PMTUDISC_DO): one too large for the path fails with EMSGSIZE instead
/// of being split. `v6`: the socket is IPv6.
pub fn set_dont_fragment<S: std::os::fd::AsFd>(s: &S, v6: bool) -> io::Result<()> {
    let (level, opt, val) = if v6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO)
    };
    set_int(std::os::fd::AsRawFd::as_raw_fd(&s.as_fd()), level, opt, val)
}

/// The MTU of a connected socket's path (IP_MTU / IPV6_MTU): the route's,
/// or the smaller path MTU the kernel has cached for the peer. `None` when
/// the socket is not connected or the kernel does not say.
pub fn path_mtu<S: std::os::fd::AsFd>(s: &S, v6: bool) -> Option<u32> {
    let (level, opt) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    int_option(s, level, opt)
        .ok()
        .and_then(|m| u32::try_from(m).ok())
        .filter(|m| *m > 0)
}

/// The path MTU towards `peer`, from a throw-away UDP socket bound to `bind`
/// (or any address of the family) and connected to it: nothing is sent.
pub fn path_mtu_to(peer: SocketAddr, bind: Option<IpAddr>) -> Option<u32> {
    let local = bind.unwrap_or(if peer.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    });
    let sock = UdpSocket::bind(crate::addr::local_for(local, peer)).ok()?;
    sock.connect(peer).ok()?;
    path_mtu(&sock, peer.is_ipv6())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's release as (major, minor).
    fn kernel_release() -> Option<(u32, u32)> {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        let mut parts = r.trim().split(|c: char| !c.is_ascii_digit());
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    /// With the per-socket range, connect(2) hands out local ports of both
    /// parities (without it, this kernel gives connect() only even ones
    /// until they run out), and the range read back is the one set.
    #[test]
    fn either_port_parity_lets_connect_take_odd_ports() {
        use std::os::fd::AsRawFd;
        if kernel_release().is_none_or(|v| v < (6, 8)) {
            eprintln!("skipped: the kernel is older than 6.8 (its connect() keeps to one parity)");
            return;
        }
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to: socket2::SockAddr = l.local_addr().unwrap().into();
        let mut held = Vec::new();
        let mut odd = 0;
        for _ in 0..64 {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            either_port_parity(&s);
            s.connect(&to).unwrap();
            let port = s.local_addr().unwrap().as_socket().unwrap().port();
            odd += usize::from(port % 2 == 1);
            held.push((s, l.accept().unwrap()));
        }
        assert!(odd > 0, "64 connects with the range, every local port even");
        let mut v: u32 = 0;
        let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
        // SAFETY: a valid socket, and `v` and `len` valid out-pointers of the option's size.
        let rc = unsafe {
            libc::getsockopt(
                held[0].0.as_raw_fd(),
                libc::IPPROTO_IP,
                IP_LOCAL_PORT_RANGE,
                (&mut v as *mut u32).cast(),
                &mut len,
            )
        };
        assert_eq!((rc, v), (0, (65535 << 16) | 1));
    }

    #[test]
    fn either_parity_begins_at_seven_eighths_of_the_even_half() {
        // Linux's default range: 28,232 ports, 14,116 even.
        assert_eq!(either_parity_from((32768, 60999)), 12_352);
        assert_eq!(either_parity_from((40000, 40299)), 132);
        assert_eq!(either_parity_from((5000, 5000)), 1);
        let (lo, hi) = local_port_range();
        assert!(lo <= hi && hi <= 65535);
    }

    #[test]
    fn tos_readback_mismatch_is_named() {
        let asked = SocketSettings {
            tos: Some(10),
            ..Default::default()
        };
        let got = AppliedOptions {
            tos: Some(8),
            ..Default::default()
        };
        let w = option_warnings(&asked, &got, "local");
        assert!(
            w[0].contains("0x0a") && w[0].contains("0x08") && w[0].contains("ECN"),
            "{w:?}"
        );
        let same = AppliedOptions {
            tos: Some(10),
            ..Default::default()
        };
        assert!(option_warnings(&asked, &same, "local").is_empty());
    }

    #[test]
    fn warnings_for_clamp_and_minimum_only() {
        let req = BufPair {
            snd: Some(1000),
            rcv: Some(8 << 20),
        };
        let got = BufPair {
            snd: Some(4608),
            rcv: Some(8 << 20),
        };
        let w = buffer_warnings(req, got, "local", "-s");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("minimum"));
        assert!(w[1].contains("net.core.rmem_max") && w[1].contains("clamped"));
        let exact = BufPair {
            snd: Some(2000),
            rcv: Some(16 << 20),
        };
        assert!(buffer_warnings(req, exact, "local", "-s").is_empty());
        assert!(buffer_warnings(BufPair::default(), got, "local", "-s").is_empty());
    }

    #[test]
    fn default_udp_payload_fits_the_path_and_an_ethernet_frame() {
        let max = 65_507;
        // Loopback (64 KiB): an Ethernet-sized datagram, by family.
        assert_eq!(default_udp_payload(Some(65_536), false, max), 1472);
        assert_eq!(default_udp_payload(Some(65_536), true, max), 1452);
        // Ethernet.
        assert_eq!(default_udp_payload(Some(1500), false, max), 1472);
        assert_eq!(default_udp_payload(Some(1500), true, max), 1452);
        // Smaller paths: the largest unfragmented payload.
        assert_eq!(default_udp_payload(Some(1280), false, max), 1252);
        assert_eq!(default_udp_payload(Some(1280), true, max), 1232);
        assert_eq!(default_udp_payload(Some(576), false, max), 548);
        // Unknown (or nonsense): Ethernet's.
        assert_eq!(default_udp_payload(None, false, max), 1472);
        assert_eq!(default_udp_payload(None, true, max), 1452);
        assert_eq!(default_udp_payload(Some(20), true, max), 1452);
        // Never above the protocol's largest.
        assert_eq!(default_udp_payload(Some(1500), false, 1000), 1000);
    }

    #[test]
    fn path_mtu_on_loopback() {
        let lo = "127.0.0.1:9".parse().unwrap();
        let mtu = path_mtu_to(lo, None).expect("loopback's MTU");
        assert!(mtu >= 1500, "{mtu}");
        let unconnected = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(path_mtu(&unconnected, false), None);
    }
}
