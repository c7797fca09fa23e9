//! Reads that say whether they emptied the socket (TCP_INQ).
//!
//! An event-loop reader under edge-triggered epoll must read until the
//! socket is empty, and without help learns that only from a read that
//! fails EAGAIN: one system call per wake-up that moves nothing (about a
//! third of a stream receiver's reads; one per transaction on each end of
//! an event-loop tcp-rr). With TCP_INQ set on the socket (Linux 4.18), each
//! recvmsg(2) comes with the bytes left in the receive queue once the call
//! is done, counted after the segments that arrived during the copy are in,
//! and 1 when the queue is empty but the peer has closed (so that the end of
//! file is still read). A read that leaves 0 is the last; what arrives after
//! it wakes the poll again. Counts are unchanged: every byte is still read,
//! by the same reads less the empty one.
//!
//! By hand, on the hot path: one recvmsg(2) and a walk of its one control
//! message, where a crate would allocate or parse more.

use std::io::{self, Read};
use std::os::fd::RawFd;

/// TCP_INQ on `sock`; false where the kernel refuses it (before 4.18), and
/// reads then go on to EAGAIN as before.
pub fn enable(sock: RawFd) -> bool {
    crate::sockopt::set_int(sock, libc::SOL_TCP, libc::TCP_INQ, 1).is_ok()
}

/// A non-blocking read of up to `buf.len()` bytes: the bytes read, and
/// whether the kernel said the receive queue is empty after it (false
/// when it said nothing: TCP_INQ not set, or not TCP).
pub fn recv(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a cmsghdr and its int, aligned as cmsghdr wants.
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; its pointers are set below to
    // buffers that outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at iov (over buf) and at control, both alive.
    let rc = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut empty = false;
    // SAFETY: the CMSG macros walk what the kernel wrote, bounded by the
    // msg_controllen it set.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_TCP && (*c).cmsg_type == libc::TCP_CM_INQ {
                let left = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                empty = left == 0;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((rc as usize, empty))
}

/// A reader that may know it emptied its socket.
pub trait ReadInq: Read {
    /// Reads as [`Read::read`]; true beside a count when the socket's
    /// receive queue is known to be empty after it. The default knows
    /// nothing.
    fn read_inq(&mut self, buf: &mut [u8]) -> io::Result<(usize, bool)> {
        self.read(buf).map(|n| (n, false))
    }
}

/// A plain socket's reads say nothing (it may be blocking: tcp-crr's
/// connections each carry one request, and read nothing after it).
impl ReadInq for std::net::TcpStream {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    /// Reads until `want` bytes have come or `wait` passed.
    fn read_all(fd: RawFd, want: usize, wait: Duration) -> (Vec<(usize, bool)>, usize) {
        let mut buf = [0u8; 64];
        let (mut calls, mut got) = (Vec::new(), 0);
        let until = Instant::now() + wait;
        while got < want && Instant::now() < until {
            match recv(fd, &mut buf) {
                Ok((n, e)) => {
                    got += n;
                    calls.push((n, e));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        (calls, got)
    }

    /// With TCP_INQ, the read that takes the last queued byte says the queue
    /// is empty and the ones before it do not; after the peer closes, an
    /// empty queue is not "empty" (the end of file is still to read), and
    /// the next read returns 0. Without TCP_INQ nothing is said.
    #[test]
    fn the_last_read_says_the_queue_is_empty_and_the_end_is_still_read() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        rx.set_nonblocking(true).unwrap();
        assert!(enable(rx.as_raw_fd()), "TCP_INQ refused");
        tx.write_all(&[7u8; 100]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (calls, got) = read_all(rx.as_raw_fd(), 100, Duration::from_secs(5));
        assert_eq!(got, 100);
        // 64 then 36: the first leaves 36 behind, the second none.
        assert_eq!(calls, vec![(64, false), (36, true)], "{calls:?}");
        tx.write_all(&[7u8; 10]).unwrap();
        drop(tx);
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = [0u8; 64];
        assert_eq!(
            recv(rx.as_raw_fd(), &mut buf).unwrap(),
            (10, false),
            "the end is still to read"
        );
        assert_eq!(recv(rx.as_raw_fd(), &mut buf).unwrap(), (0, false));

        // Without TCP_INQ: no word on the queue.
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        rx.set_nonblocking(true).unwrap();
        tx.write_all(&[7u8; 10]).unwrap();
        let (calls, got) = read_all(rx.as_raw_fd(), 10, Duration::from_secs(5));
        assert_eq!(got, 10);
        assert!(calls.iter().all(|&(_, e)| !e), "{calls:?}");
    }
}
