//! Stream senders' bound on the bytes they keep written but not yet sent
//! (TCP_NOTSENT_LOWAT): the kernel takes a write only while less than the
//! bound is unsent, and reports the socket writable again when less than
//! half is. Bytes in flight are not limited by it (the congestion and
//! receive windows bound those), only the backlog behind them.
//!
//! Without a bound an unpaced sender fills its whole send buffer, which
//! autotuning grows to tcp_wmem[2] (4 MiB). Where the receiver limits the
//! flow those megabytes wait in the sender's queue, and the receiver's
//! acknowledgements send them, in its softirq on its CPU, long after they
//! were written and gone from the caches: the receiver then does the
//! sender's work too and stays the bottleneck. On a 2-CPU loopback
//! tcp-bidir that state took one direction in about two runs of three
//! (`ss -ti`: rwnd_limited 70-77 %, notsent 3.4-4.2 MB); two messages
//! unsent made it rarer (5 of 24 directions against 17) and the run 1.58x
//! faster (CHANGELOG, "unpaced senders keep two messages unsent").
//!
//! That state is tcp-bidir's, where each host's CPUs both send and receive:
//! by default only a run of both directions sets the bound. A flow one way
//! gains nothing from it and may lose: one cubic flow made 0.90x the
//! throughput bounded against unbounded (12 alternating rounds, ahead in 2;
//! CHANGELOG, "the senders' bound only where both directions run"), the
//! unsent backlog there being sent by the receiver's CPU, which has room.
//!
//! A host that sets net.ipv4.tcp_notsent_lowat has tuned this itself, and
//! that may be what is under test: by default netrig leaves it alone.

use netrig_proto::spec::MAX_NOTSENT_LOWAT;
use std::io;
use std::os::fd::RawFd;

/// The least default bound, for small messages: a sender woken for every
/// few KiB would spend its time in the event loop.
pub const MIN_AUTO: u32 = 256 << 10;

/// The default bound for `message_size`-byte writes: two messages, so that
/// one goes in whole while the one before leaves, and at least [`MIN_AUTO`].
/// One message did better for tcp-bidir (1.16-1.26x) but cost a single
/// cubic flow 3-4 %.
pub fn auto(message_size: usize) -> u32 {
    let two = u32::try_from(message_size.saturating_mul(2)).unwrap_or(u32::MAX);
    two.clamp(MIN_AUTO, MAX_NOTSENT_LOWAT)
}

/// The bound a run's senders set, if any. `option` is `--notsent-lowat`
/// (`Some(0)`: `off`, none); without it, unpaced senders (`paced` false) of
/// a run of both directions (`both_directions`) take [`auto`] where the
/// host has no bound of its own (`host`, from [`host`]); paced ones none
/// (they write a message when it is due, and have no backlog to bound), nor
/// those of a run one way.
pub fn to_set(
    option: Option<u32>,
    message_size: usize,
    paced: bool,
    both_directions: bool,
    host: Option<u32>,
) -> Option<u32> {
    match option {
        Some(0) => None,
        Some(bytes) => Some(bytes),
        None if !paced && both_directions && host.is_none() => Some(auto(message_size)),
        None => None,
    }
}

/// The host's net.ipv4.tcp_notsent_lowat (of this thread's network
/// namespace): the bound of a socket that sets none; `None` at the kernel's
/// default, unlimited.
pub fn host() -> Option<u32> {
    crate::sockopt::read_proc_sys("net/ipv4/tcp_notsent_lowat")?
        .parse::<u32>()
        .ok()
        .filter(|&v| v != u32::MAX)
}

/// Sets TCP_NOTSENT_LOWAT on `fd` to `bytes`.
pub fn set(fd: RawFd, bytes: u32) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::sockopt::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, v)
}

/// The bound on `fd` as it is now: its TCP_NOTSENT_LOWAT, or where it sets
/// none the host's; `None` when unlimited.
pub fn get(fd: RawFd) -> Option<u32> {
    match crate::sockopt::get_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) {
        Ok(v) if v > 0 => Some(v as u32),
        Ok(_) => host(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn two_messages_at_least_256_kib_at_most_the_spec_s_bound() {
        assert_eq!(auto(128 << 10), 256 << 10);
        assert_eq!(auto(1 << 20), 2 << 20);
        assert_eq!(auto(1), MIN_AUTO);
        assert_eq!(auto(usize::MAX), MAX_NOTSENT_LOWAT);
    }

    #[test]
    fn the_option_then_the_host_then_the_default() {
        let m = 128 << 10;
        assert_eq!(to_set(None, m, false, true, None), Some(256 << 10));
        // A run one way, a host's own bound, and paced senders: none set.
        assert_eq!(to_set(None, m, false, false, None), None);
        assert_eq!(to_set(None, m, false, true, Some(65536)), None);
        assert_eq!(to_set(None, m, true, true, None), None);
        // The option wins over all of them; off sets none.
        assert_eq!(to_set(Some(4096), m, true, false, Some(65536)), Some(4096));
        assert_eq!(to_set(Some(0), m, false, true, None), None);
    }

    #[test]
    fn a_bound_set_reads_back() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(get(s.as_raw_fd()), host());
        set(s.as_raw_fd(), 300_000).unwrap();
        assert_eq!(get(s.as_raw_fd()), Some(300_000));
        assert!(
            set(s.as_raw_fd(), u32::MAX).is_err(),
            "beyond an int: refused, not wrapped"
        );
    }
}
