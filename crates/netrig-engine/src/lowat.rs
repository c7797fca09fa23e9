//! Stream receivers that wake for a full read (SO_RCVLOWAT) while they are
//! ahead of their flow, with a bound on how long bytes may wait.
//!
//! An event-loop receiver is woken for every segment that lands (each
//! `sk_data_ready`), and reads what is there: on loopback about half a
//! 128 KiB buffer per read, where a blocking reader that the kernel wakes
//! less eagerly (netperf, iperf3) takes more per call. Each read that frees
//! room may also send a window update, so the eager reader costs CPU on
//! both ends: perf stat on a cubic loopback stream, 128 KiB reads, showed
//! 16,500 reads and 13,500 ACKs per GiB for netrig against 11,800 and 9,900
//! for netperf. With SO_RCVLOWAT set to the read size, TCP wakes the poll
//! only once that much is queued, or when the receive window is nearly
//! closed or memory is short (`tcp_epollin_ready`, so a sender is never
//! kept waiting on us), or at end of file; and it acknowledges at once the
//! segments it holds back (`__tcp_ack_snd_check`), so the sender's clock
//! does not slow.
//!
//! The watermark is a bet that the receiver is ahead of its flow, and it
//! does not always win: while less than it is queued, TCP acknowledges each
//! arriving segment at once, so a receiver that is behind anyway (four
//! flows, a thread each, on two CPUs: a wake-up finds a megabyte queued)
//! gains no fewer wake-ups and pays twice the acknowledgements (nstat: 1,800
//! against 950 per GiB, throughput 0.79x). So [`Watermark`] turns it on and
//! off from what the receiver's wake-ups find queued, epoch by epoch.
//!
//! Bytes may also wait in the kernel for a flow that slows down. The loop
//! checks every [`LAG`]: a receiver with its watermark on and no read since
//! the last check is read anyway, and if that read brings less than the
//! watermark, the watermark goes off. So a byte waits at most about two
//! [`LAG`]s longer than it would have, and counts are unchanged: every byte
//! is still read, and counted when it is read.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How often a receiver with its watermark on is checked for a read.
pub const LAG: Duration = Duration::from_millis(1);
/// Reads smaller than this gain nothing from a watermark: left off.
pub const MIN_READ: usize = 16 << 10;
/// The largest watermark asked for (the kernel caps it at half the largest
/// receive buffer, tcp_rmem[2] / 2, or half a fixed SO_RCVBUF).
pub const MAX_WATERMARK: usize = 4 << 20;

/// SO_RCVLOWAT on `sock`: false if the kernel refused it.
pub fn set(sock: RawFd, bytes: usize) -> bool {
    let v = bytes.clamp(1, MAX_WATERMARK) as libc::c_int;
    crate::sockopt::set_int(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT, v).is_ok()
}

/// Wake-ups per decision to turn the watermark on or off.
pub const EPOCH: u32 = 256;
/// A wake-up that finds at least this many watermarks' worth queued came
/// late: the receiver is behind its flow.
pub const LATE: usize = 4;

/// SO_RCVLOWAT as the kernel holds it on `sock`.
pub fn get(sock: RawFd) -> Option<usize> {
    crate::sockopt::get_int(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT)
        .ok()
        .map(|v| v.max(0) as usize)
}

/// One receiver's watermark: off (1) or at the read size, decided every
/// [`EPOCH`] wake-ups from what they found queued.
///
/// - Off, most wake-ups found less than a read's worth: the receiver is
///   ahead of its flow and woken for every arrival, which the watermark
///   saves. On.
/// - On, more than a quarter of the wake-ups found [`LATE`] reads' worth or
///   more: the receiver is behind, would be woken late anyway, and the
///   watermark only costs acknowledgements (while less than it is queued,
///   TCP acknowledges each arriving segment at once, so that the sender
///   does not wait on a reader that is not reading). Off.
/// - On, a check read after [`LAG`] without a read found less than the
///   watermark queued: the flow is slower than a read per [`LAG`]. Off.
#[derive(Debug, Clone)]
pub struct Watermark {
    /// The read size: the watermark when on; 0 when never used.
    target: usize,
    on: bool,
    /// Off for good: the window closed.
    retired: bool,
    /// A read since the last check.
    read: bool,
    /// This epoch's wake-ups, those that found less than `target` and
    /// those that found [`LATE`] × `target` or more.
    wakes: u32,
    short: u32,
    late: u32,
    /// Times it went on, and off.
    pub ons: u64,
    pub offs: u64,
}

impl Watermark {
    /// For a receiver that reads `read_size` bytes per call; unused (never
    /// on) below [`MIN_READ`] or when `enabled` is false.
    pub fn new(read_size: usize, enabled: bool) -> Self {
        let target = if enabled && read_size >= MIN_READ {
            read_size.min(MAX_WATERMARK)
        } else {
            0
        };
        Watermark {
            target,
            on: false,
            retired: false,
            read: false,
            wakes: 0,
            short: 0,
            late: 0,
            ons: 0,
            offs: 0,
        }
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// After a wake-up's reads on `sock`, which took `got` bytes; at the
    /// end of an epoch, on or off as the wake-ups say.
    pub fn after_wake(&mut self, sock: RawFd, got: usize) {
        self.read = true;
        if self.target == 0 || self.retired {
            return;
        }
        self.wakes += 1;
        if got < self.target {
            self.short += 1;
        } else if got >= LATE * self.target {
            self.late += 1;
        }
        if self.wakes < EPOCH {
            return;
        }
        let (short, late) = (self.short, self.late);
        self.new_epoch();
        if !self.on && short * 2 > EPOCH {
            if set(sock, self.target) {
                self.on = true;
                self.ons += 1;
                // The kernel caps it (half a fixed SO_RCVBUF, or half tcp_rmem[2]): wake-ups
                // and check reads are judged against what it holds back.
                if let Some(v) = get(sock).filter(|v| (1..self.target).contains(v)) {
                    self.target = v;
                }
            }
        } else if self.on && late * 4 > EPOCH {
            self.turn_off(sock);
        }
    }

    fn new_epoch(&mut self) {
        (self.wakes, self.short, self.late) = (0, 0, 0);
    }

    fn turn_off(&mut self, sock: RawFd) {
        set(sock, 1);
        self.on = false;
        self.offs += 1;
        self.new_epoch();
    }

    /// At a check: true when the watermark is on and nothing was read since
    /// the last check, so the caller reads the socket now (and then calls
    /// [`Watermark::after_check_read`]). Starts the next check's period.
    pub fn check(&mut self) -> bool {
        let due = self.on && !self.read;
        self.read = false;
        due
    }

    /// After the read a check asked for: `got` bytes. Less than the
    /// watermark: off.
    pub fn after_check_read(&mut self, sock: RawFd, got: usize) {
        if self.on && got < self.target {
            self.turn_off(sock);
        }
    }

    /// Off for good (the window closed: a drain reads what comes).
    pub fn off(&mut self, sock: RawFd) {
        if self.on {
            set(sock, 1);
            self.on = false;
        }
        self.retired = true;
    }

    /// The watermark this receiver uses when on, in bytes; `None` when it
    /// never uses one.
    pub fn watermark(&self) -> Option<u32> {
        (self.target > 0).then(|| self.target.min(u32::MAX as usize) as u32)
    }
}

/// When the next check is due, for a loop whose receivers' watermarks are
/// checked together.
#[derive(Debug, Default, Clone, Copy)]
pub struct Checks {
    next: Option<Instant>,
}

impl Checks {
    /// True when a check is due at `now` (the first call only starts the
    /// period); the next is then [`LAG`] later.
    pub fn due(&mut self, now: Instant) -> bool {
        match self.next {
            Some(t) if now < t => false,
            Some(_) => {
                self.next = Some(now + LAG);
                true
            }
            None => {
                self.next = Some(now + LAG);
                false
            }
        }
    }

    /// How long the poll may sleep before the next check.
    pub fn wait(&self, now: Instant) -> Duration {
        self.next.map_or(LAG, |t| t.saturating_duration_since(now))
    }

    /// No watermark on: checks stop until [`Checks::due`] starts them again.
    pub fn stop(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn lowat(fd: RawFd) -> i32 {
        get(fd).expect("getsockopt SO_RCVLOWAT") as i32
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        (tx, rx)
    }

    /// An epoch of wake-ups that found less than a read's worth: on. One in
    /// which more than a quarter found four reads' worth or more: off. A
    /// check read after a quiet millisecond that finds less: off. The
    /// socket's SO_RCVLOWAT follows.
    #[test]
    fn on_when_wakes_find_little_off_when_late_or_slow() {
        let (_tx, rx) = pair();
        let fd = rx.as_raw_fd();
        let t = 128 << 10;
        let mut w = Watermark::new(t, true);
        // Half the wake-ups short: not most; stays off.
        for i in 0..EPOCH {
            w.after_wake(fd, if i % 2 == 0 { 1000 } else { t });
        }
        assert!(!w.is_on());
        for _ in 0..EPOCH {
            w.after_wake(fd, 1000);
        }
        assert!(w.is_on());
        assert_eq!(lowat(fd), t as i32);
        // A quarter late: not more than a quarter; stays on.
        for i in 0..EPOCH {
            w.after_wake(fd, if i % 4 == 0 { LATE * t } else { t });
        }
        assert!(w.is_on());
        for i in 0..EPOCH {
            w.after_wake(fd, if i % 2 == 0 { LATE * t } else { t });
        }
        assert!(!w.is_on());
        assert_eq!(lowat(fd), 1);
        for _ in 0..EPOCH {
            w.after_wake(fd, 10);
        }
        assert!(w.is_on());
        // A read since the last check: nothing due.
        assert!(!w.check());
        // None since: due; a check read of a whole watermark keeps it on.
        assert!(w.check());
        w.after_check_read(fd, t);
        assert!(w.is_on());
        assert!(w.check());
        w.after_check_read(fd, 100);
        assert!(!w.is_on());
        assert_eq!(lowat(fd), 1);
        assert_eq!((w.ons, w.offs), (2, 2));
        // Off: never due.
        assert!(!w.check());
        // Retired at the window's end: off, and never on again.
        for _ in 0..EPOCH {
            w.after_wake(fd, 10);
        }
        assert!(w.is_on());
        w.off(fd);
        assert_eq!(lowat(fd), 1);
        for _ in 0..EPOCH {
            w.after_wake(fd, 10);
        }
        assert!(!w.is_on());
    }

    /// With a fixed receive buffer the kernel holds back at most half of it:
    /// the watermark is then that, and reported so.
    #[test]
    fn the_kernels_cap_is_the_watermark() {
        let (_tx, rx) = pair();
        let fd = rx.as_raw_fd();
        crate::sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 32 << 10).unwrap();
        let mut w = Watermark::new(128 << 10, true);
        for _ in 0..EPOCH {
            w.after_wake(fd, 1);
        }
        assert!(w.is_on());
        // The kernel doubles SO_RCVBUF and caps the watermark at half of that.
        assert_eq!(lowat(fd), 32 << 10);
        assert_eq!(w.watermark(), Some(32 << 10));
        // A check read of the capped watermark's worth keeps it on.
        assert!(!w.check());
        assert!(w.check());
        w.after_check_read(fd, 32 << 10);
        assert!(w.is_on());
    }

    /// Small reads and a disabled watermark never turn it on.
    #[test]
    fn small_reads_or_disabled_never_on() {
        let (_tx, rx) = pair();
        for mut w in [Watermark::new(MIN_READ - 1, true), Watermark::new(1 << 20, false)] {
            for _ in 0..EPOCH {
                w.after_wake(rx.as_raw_fd(), 1);
            }
            assert!(!w.is_on());
            assert_eq!(w.watermark().is_some(), w.target > 0);
        }
        assert_eq!(lowat(rx.as_raw_fd()), 1);
    }

    /// With the watermark on, the kernel holds a small write back from the
    /// poll; the end of the stream still wakes it.
    #[test]
    fn the_kernel_wakes_the_poll_at_the_watermark_or_the_end() {
        let (mut tx, rx) = pair();
        rx.set_nonblocking(true).unwrap();
        let mut w = Watermark::new(64 << 10, true);
        for _ in 0..EPOCH {
            w.after_wake(rx.as_raw_fd(), 1);
        }
        let readable = |fd: RawFd| {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd, for the call.
            unsafe { libc::poll(&mut p, 1, 200) == 1 }
        };
        tx.write_all(&[1u8; 1000]).unwrap();
        assert!(
            !readable(rx.as_raw_fd()),
            "1000 bytes under a 64 KiB watermark woke the poll"
        );
        tx.write_all(&vec![1u8; 64 << 10]).unwrap();
        assert!(readable(rx.as_raw_fd()), "64 KiB queued did not wake the poll");
        let (mut tx, rx) = pair();
        let mut w = Watermark::new(64 << 10, true);
        for _ in 0..EPOCH {
            w.after_wake(rx.as_raw_fd(), 1);
        }
        tx.write_all(&[1u8; 10]).unwrap();
        assert!(!readable(rx.as_raw_fd()));
        drop(tx);
        assert!(
            readable(rx.as_raw_fd()),
            "the end of the stream did not wake the poll"
        );
    }

    /// Checks come every LAG, the first call only starting the period.
    #[test]
    fn checks_come_every_lag() {
        let mut c = Checks::default();
        let t = Instant::now();
        assert!(!c.due(t));
        assert!(!c.due(t + LAG / 2));
        assert_eq!(c.wait(t + LAG / 2), LAG / 2);
        assert!(c.due(t + LAG));
        assert!(!c.due(t + LAG + LAG / 2));
        c.stop();
        assert!(!c.due(t + 10 * LAG));
    }
}
