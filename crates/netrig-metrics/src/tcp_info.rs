//! `getsockopt(IPPROTO_TCP, TCP_INFO)` and `TCP_CONGESTION` for a TCP socket.
//!
//! The kernel structure is mirrored here field by field (`RawTcpInfo`)
//! instead of using `libc::tcp_info`, which may lack newer fields. The kernel
//! copies `min(optlen, sizeof(struct tcp_info))` bytes and reports how many it
//! wrote, so fields beyond what an older kernel knows about are detected and
//! reported as `None`.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

use serde::{Deserialize, Serialize};

/// `tcpi_snd_ssthresh` value meaning "no threshold yet" (infinite,
/// `TCP_INFINITE_SSTHRESH` in the kernel).
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// `TCP_ESTABLISHED` in the kernel's TCP state numbering.
pub const TCP_ESTABLISHED: u8 = 1;
/// `tcpi_state` of a listening socket.
pub const TCP_LISTEN: u8 = 10;

/// Selected fields of the kernel's `struct tcp_info` for one socket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Kernel TCP state (`tcpi_state`): 1 = ESTABLISHED, 2 = SYN_SENT, …,
    /// 10 = LISTEN, as in `include/net/tcp_states.h`.
    pub state: u8,
    /// Total segments retransmitted over the connection's life
    /// (`tcpi_total_retrans`).
    pub retransmits_total: u32,
    /// Smoothed round-trip time in microseconds (`tcpi_rtt`).
    pub rtt_us: u32,
    /// Round-trip time variance in microseconds (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Congestion window in segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// Slow-start threshold in segments (`tcpi_snd_ssthresh`). The raw kernel
    /// value is kept: `0x7fffffff` ([`TCP_INFINITE_SSTHRESH`]) means
    /// "infinite", i.e. the connection has not left slow start yet.
    pub snd_ssthresh: u32,
    /// Reordering metric in segments (`tcpi_reordering`).
    pub reordering: u32,
    /// Path MTU in bytes (`tcpi_pmtu`).
    pub pmtu: u32,
    /// Sending maximum segment size in bytes (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// Receiving MSS estimate in bytes (`tcpi_rcv_mss`).
    pub rcv_mss: u32,
    /// Most recent delivery rate estimate in bits per second
    /// (`tcpi_delivery_rate` × 8; the kernel reports bytes/s). `None` on
    /// kernels older than 4.9.
    pub delivery_rate_bps: Option<u64>,
    /// The kernel's app-limited flag for that estimate
    /// (`tcpi_delivery_rate_app_limited`): `true` when the sender ran out
    /// of data to send during the interval the rate was measured over, so
    /// the rate reflects what the application offered, not what the path
    /// can carry. `None` where `delivery_rate_bps` is (kernels older than
    /// 4.9), and in reports from netrig versions that did not send it.
    #[serde(default)]
    pub delivery_rate_app_limited: Option<bool>,
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`). `None` on kernels
    /// older than 4.1.
    pub bytes_acked: Option<u64>,
    /// Bytes received and acknowledged locally (`tcpi_bytes_received`).
    /// `None` on kernels older than 4.1.
    pub bytes_received: Option<u64>,
    /// Segments currently considered lost (`tcpi_lost`; a gauge, not a
    /// running total).
    pub lost: u32,
    /// Congestion control algorithm (`TCP_CONGESTION`), e.g. `"cubic"`;
    /// `None` if it could not be read.
    pub congestion_control: Option<String>,
    /// Microseconds the connection had data outstanding, sending
    /// (`tcpi_busy_time`, over its life). `None` on kernels older than 4.10.
    #[serde(default)]
    pub busy_us: Option<u64>,
    /// Of those, microseconds the sender was held by the peer's receive
    /// window (`tcpi_rwnd_limited`): the receiver limited the flow.
    #[serde(default)]
    pub rwnd_limited_us: Option<u64>,
    /// Of those, microseconds it was held by its own send buffer
    /// (`tcpi_sndbuf_limited`): the sender's buffer limited the flow.
    #[serde(default)]
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes written but not yet sent, now (`tcpi_notsent_bytes`; a gauge).
    /// `None` on kernels older than 4.6.
    #[serde(default)]
    pub notsent_bytes: Option<u32>,
}

/// Mirror of `struct tcp_info` from `include/uapi/linux/tcp.h` (Linux 6.7),
/// field by field. The two bit-field bytes are kept as plain `u8`s.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
#[allow(dead_code)] // Mirrors the kernel layout; not every field is read.
struct RawTcpInfo {
    tcpi_state: u8,
    tcpi_ca_state: u8,
    tcpi_retransmits: u8,
    tcpi_probes: u8,
    tcpi_backoff: u8,
    tcpi_options: u8,
    /// `tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4`
    tcpi_wscale: u8,
    /// `tcpi_delivery_rate_app_limited:1, tcpi_fastopen_client_fail:2`
    tcpi_flags: u8,

    tcpi_rto: u32,
    tcpi_ato: u32,
    tcpi_snd_mss: u32,
    tcpi_rcv_mss: u32,

    tcpi_unacked: u32,
    tcpi_sacked: u32,
    tcpi_lost: u32,
    tcpi_retrans: u32,
    tcpi_fackets: u32,

    tcpi_last_data_sent: u32,
    tcpi_last_ack_sent: u32,
    tcpi_last_data_recv: u32,
    tcpi_last_ack_recv: u32,

    tcpi_pmtu: u32,
    tcpi_rcv_ssthresh: u32,
    tcpi_rtt: u32,
    tcpi_rttvar: u32,
    tcpi_snd_ssthresh: u32,
    tcpi_snd_cwnd: u32,
    tcpi_advmss: u32,
    tcpi_reordering: u32,

    tcpi_rcv_rtt: u32,
    tcpi_rcv_space: u32,

    tcpi_total_retrans: u32,

    tcpi_pacing_rate: u64,
    tcpi_max_pacing_rate: u64,
    tcpi_bytes_acked: u64,
    tcpi_bytes_received: u64,
    tcpi_segs_out: u32,
    tcpi_segs_in: u32,

    tcpi_notsent_bytes: u32,
    tcpi_min_rtt: u32,
    tcpi_data_segs_in: u32,
    tcpi_data_segs_out: u32,

    tcpi_delivery_rate: u64,

    tcpi_busy_time: u64,
    tcpi_rwnd_limited: u64,
    tcpi_sndbuf_limited: u64,

    tcpi_delivered: u32,
    tcpi_delivered_ce: u32,

    tcpi_bytes_sent: u64,
    tcpi_bytes_retrans: u64,
    tcpi_dsack_dups: u32,
    tcpi_reord_seen: u32,

    tcpi_rcv_ooopack: u32,

    tcpi_snd_wnd: u32,
    tcpi_rcv_wnd: u32,

    tcpi_rehash: u32,

    tcpi_total_rto: u16,
    tcpi_total_rto_recoveries: u16,
    tcpi_total_rto_time: u32,
}

// Layout checks against the kernel's offsets.
const _: () = {
    assert!(offset_of!(RawTcpInfo, tcpi_flags) == 7);
    assert!(offset_of!(RawTcpInfo, tcpi_rto) == 8);
    assert!(offset_of!(RawTcpInfo, tcpi_pmtu) == 60);
    assert!(offset_of!(RawTcpInfo, tcpi_total_retrans) == 100);
    assert!(offset_of!(RawTcpInfo, tcpi_pacing_rate) == 104);
    assert!(offset_of!(RawTcpInfo, tcpi_bytes_acked) == 120);
    assert!(offset_of!(RawTcpInfo, tcpi_bytes_received) == 128);
    assert!(offset_of!(RawTcpInfo, tcpi_delivery_rate) == 160);
    assert!(offset_of!(RawTcpInfo, tcpi_total_rto_time) == 244);
    assert!(size_of::<RawTcpInfo>() == 248);
};

/// End offset (exclusive) of a field: the kernel must have written at least
/// this many bytes for the field to be valid.
macro_rules! end_of {
    ($field:ident, $ty:ty) => {
        offset_of!(RawTcpInfo, $field) + size_of::<$ty>()
    };
}

/// Bytes needed for every non-optional field of [`TcpInfo`]
/// (through `tcpi_total_retrans`, present since Linux 2.6).
const REQUIRED_LEN: usize = end_of!(tcpi_total_retrans, u32);

/// `tcpi_delivery_rate_app_limited` is the lowest bit of the byte at offset 7
/// (`tcpi_flags` here): bit-fields are laid out from the least significant
/// bit on the little-endian ABIs Linux runs netrig on.
const DELIVERY_RATE_APP_LIMITED: u8 = 0x01;

/// The app-limited flag from the flags byte of `struct tcp_info`.
fn app_limited(flags: u8) -> bool {
    flags & DELIVERY_RATE_APP_LIMITED != 0
}

/// `TCP_INFO` as the kernel gave it, and how many bytes of it.
fn raw_tcp_info(fd: BorrowedFd<'_>) -> io::Result<(RawTcpInfo, usize)> {
    let mut raw = RawTcpInfo::default();
    let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a writable buffer of `len` bytes and `len` is a valid
    // pointer; the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let got = len as usize;
    if got < REQUIRED_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("TCP_INFO returned {got} bytes, need at least {REQUIRED_LEN}"),
        ));
    }
    Ok((raw, got))
}

/// Connections waiting in the accept queue of the listening TCP socket `fd`
/// (Linux gives its length as a listener's `tcpi_unacked`).
pub fn accept_queue(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let (raw, _) = raw_tcp_info(fd)?;
    if raw.tcpi_state != TCP_LISTEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a listening socket",
        ));
    }
    Ok(raw.tcpi_unacked)
}

/// Reads `TCP_INFO` and `TCP_CONGESTION` for the TCP socket `fd`.
///
/// Fields the running kernel does not provide (it returned fewer bytes than
/// the field's end offset) are `None`. Errors if `fd` is not a TCP socket or
/// the kernel returned too little for even the basic fields.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    let raw_fd = fd.as_raw_fd();
    let (raw, got) = raw_tcp_info(fd)?;
    let has = |end: usize| got >= end;
    Ok(TcpInfo {
        state: raw.tcpi_state,
        retransmits_total: raw.tcpi_total_retrans,
        rtt_us: raw.tcpi_rtt,
        rttvar_us: raw.tcpi_rttvar,
        snd_cwnd: raw.tcpi_snd_cwnd,
        snd_ssthresh: raw.tcpi_snd_ssthresh,
        reordering: raw.tcpi_reordering,
        pmtu: raw.tcpi_pmtu,
        snd_mss: raw.tcpi_snd_mss,
        rcv_mss: raw.tcpi_rcv_mss,
        delivery_rate_bps: has(end_of!(tcpi_delivery_rate, u64))
            .then(|| raw.tcpi_delivery_rate.saturating_mul(8)),
        // The flag came with tcpi_delivery_rate (Linux 4.9); before, the bit is 0 and means nothing.
        delivery_rate_app_limited: has(end_of!(tcpi_delivery_rate, u64)).then(|| app_limited(raw.tcpi_flags)),
        bytes_acked: has(end_of!(tcpi_bytes_acked, u64)).then_some(raw.tcpi_bytes_acked),
        bytes_received: has(end_of!(tcpi_bytes_received, u64)).then_some(raw.tcpi_bytes_received),
        lost: raw.tcpi_lost,
        congestion_control: congestion_control(raw_fd),
        busy_us: has(end_of!(tcpi_busy_time, u64)).then_some(raw.tcpi_busy_time),
        rwnd_limited_us: has(end_of!(tcpi_rwnd_limited, u64)).then_some(raw.tcpi_rwnd_limited),
        sndbuf_limited_us: has(end_of!(tcpi_sndbuf_limited, u64)).then_some(raw.tcpi_sndbuf_limited),
        notsent_bytes: has(end_of!(tcpi_notsent_bytes, u32)).then_some(raw.tcpi_notsent_bytes),
    })
}

/// `getsockopt(TCP_CONGESTION)` into a 16-byte (`TCP_CA_NAME_MAX`) buffer.
fn congestion_control(fd: libc::c_int) -> Option<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes; the kernel updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let name = &buf[..(len as usize).min(buf.len())];
    let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
    let name = String::from_utf8_lossy(name).trim().to_string();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsFd;

    #[test]
    fn a_listeners_accept_queue_counts_connections_not_yet_accepted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 0);
        let waiting: Vec<_> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 3);
        drop(listener.accept().unwrap());
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 2);
        assert!(accept_queue(waiting[0].as_fd()).is_err(), "not a listener");
    }

    /// A sender whose receiver does not read is held by the receive window
    /// from when the window closes: its busy time is mostly that, and what it
    /// wrote beyond the window waits unsent.
    #[test]
    fn a_sender_its_receiver_does_not_read_is_receive_window_limited() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        let chunk = vec![0x5au8; 64 * 1024];
        let mut written = 0usize;
        // Bounded: the buffers on both ends together take some MiB at most.
        for _ in 0..10_000 {
            match client.write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let info = tcp_info(client.as_fd()).unwrap();
        let (Some(busy), Some(rwnd), Some(sndbuf), Some(notsent)) = (
            info.busy_us,
            info.rwnd_limited_us,
            info.sndbuf_limited_us,
            info.notsent_bytes,
        ) else {
            eprintln!("skipped: this kernel gives no busy/limited times (before 4.10)");
            return;
        };
        eprintln!("{written} bytes written: {info:?}");
        assert!(written > 0);
        assert!(rwnd >= 100_000, "{info:?}");
        assert!(rwnd + sndbuf <= busy, "{info:?}");
        assert!(notsent > 0, "{info:?}");
    }

    #[test]
    fn loopback_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let payload = vec![0x5au8; 64 * 1024];
        client.write_all(&payload).unwrap();
        let mut got = vec![0u8; payload.len()];
        server.read_exact(&mut got).unwrap();
        server.write_all(b"ok").unwrap();
        let mut ack = [0u8; 2];
        client.read_exact(&mut ack).unwrap();

        let info = tcp_info(client.as_fd()).unwrap();
        assert!(info.rtt_us > 0 || info.state == TCP_ESTABLISHED, "{info:?}");
        assert_eq!(info.state, TCP_ESTABLISHED);
        assert!(info.snd_mss > 0, "{info:?}");
        assert!(info.snd_cwnd > 0, "{info:?}");
        let cc = info.congestion_control.clone().unwrap();
        assert!(!cc.is_empty());
        assert!(cc.bytes().all(|b| b.is_ascii_graphic()), "{cc:?}");
        // Any kernel from the last several years has these.
        if let Some(acked) = info.bytes_acked {
            assert!(acked >= payload.len() as u64, "{info:?}");
        }
        let sinfo = tcp_info(server.as_fd()).unwrap();
        if let Some(rcvd) = sinfo.bytes_received {
            assert!(rcvd >= payload.len() as u64, "{sinfo:?}");
        }
        let j = serde_json::to_string(&info).unwrap();
        assert_eq!(serde_json::from_str::<TcpInfo>(&j).unwrap(), info);
    }

    /// A connection that has sent only a few bytes and then waits is
    /// application-limited: the kernel sets the flag, and it is kept.
    #[test]
    fn app_limited_flag_is_read() {
        assert!(app_limited(0x01));
        assert!(app_limited(0x05), "fastopen_client_fail bits do not hide it");
        assert!(!app_limited(0x06));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        for _ in 0..5 {
            client.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            server.read_exact(&mut b).unwrap();
            server.write_all(b"y").unwrap();
            client.read_exact(&mut b).unwrap();
        }
        let info = tcp_info(client.as_fd()).unwrap();
        if info.delivery_rate_bps.is_some() {
            assert_eq!(info.delivery_rate_app_limited, Some(true), "{info:?}");
        } else {
            assert_eq!(info.delivery_rate_app_limited, None);
        }
        // A report from a build without the field reads as unknown.
        let mut v = serde_json::to_value(&info).unwrap();
        v.as_object_mut().unwrap().remove("delivery_rate_app_limited");
        assert_eq!(
            serde_json::from_value::<TcpInfo>(v)
                .unwrap()
                .delivery_rate_app_limited,
            None
        );
    }

    #[test]
    fn non_tcp_socket_is_an_error() {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(udp.as_fd()).is_err());
    }

    #[test]
    fn field_end_offsets() {
        assert_eq!(REQUIRED_LEN, 104);
        assert_eq!(end_of!(tcpi_bytes_acked, u64), 128);
        assert_eq!(end_of!(tcpi_bytes_received, u64), 136);
        assert_eq!(end_of!(tcpi_delivery_rate, u64), 168);
    }
}
