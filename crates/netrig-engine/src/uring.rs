//! A TCP receiver that waits in io_uring instead of epoll, for a receiving
//! flow alone on its worker (written by hand for the hot path).
//!
//! An event-loop receiver makes three system calls per wake-up: epoll_wait(2)
//! and the reads that empty the socket (engine::inq spares the one that
//! would find nothing). Here one multishot receive (IORING_OP_RECV with
//! IORING_RECV_MULTISHOT, Linux 6.0) stays armed on the socket and copies
//! what arrives into a small ring of provided buffers (a buffer ring, Linux
//! 5.19), each copy a completion; the worker waits for completions in
//! io_uring_enter(2), one system call per wake-up, and hands each buffer
//! back as soon as it has counted it. The ring is made with
//! IORING_SETUP_SINGLE_ISSUER and IORING_SETUP_DEFER_TASKRUN (Linux 6.1), so
//! the copies run in the worker's own thread when it asks for completions,
//! not in the softirq of the sender's CPU.
//!
//! The bytes are copied to user memory as read(2) copies them and counted
//! from each completion's result: nothing is skipped. Where the kernel
//! refuses any of it (older kernels, io_uring disabled by
//! `kernel.io_uring_disabled` or a seccomp filter), [`MultishotRecv::new`]
//! fails and the caller keeps the event loop.

use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, IoUring};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Whether io_uring may be tried: not where the environment variable
/// `NETRIG_IO_URING` is `off` (read once per process), which keeps every
/// receiver in the event loop, for an A/B of the two or a host where
/// io_uring misbehaves.
pub fn allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os("NETRIG_IO_URING").is_none_or(|v| v != "off"))
}

/// The buffer group of the one buffer ring.
const GROUP: u16 = 0;
/// The multishot receive's `user_data`; its cancellation's is `CANCEL`.
const RECV: u64 = 1;
const CANCEL: u64 = 2;
/// How long dropping a receiver still armed waits for the kernel to confirm
/// its cancellation before it leaks the buffers rather than free memory the
/// kernel might still write.
const CANCEL_WAIT: Duration = Duration::from_millis(200);

/// Memory from the global allocator with a page's alignment (the buffer
/// ring must be page-aligned), zeroed, freed on drop.
struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

impl Pages {
    fn new(len: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len.max(1), 4096)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        Ok(Pages { ptr, layout })
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }
}

/// What one wait brought.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Got {
    /// Bytes received (copied to user memory and counted).
    pub bytes: u64,
    /// The peer closed: every byte before its end is in `bytes`.
    pub end: bool,
}

/// One socket's multishot receive into a ring of `count` buffers of `size`
/// bytes each.
pub struct MultishotRecv {
    ring: IoUring,
    fd: RawFd,
    /// `count` entries of the buffer ring (the kernel reads them).
    entries: Pages,
    /// The buffers themselves (the kernel writes them).
    bufs: Pages,
    count: u16,
    size: u32,
    /// Our tail of the buffer ring: entries handed to the kernel so far.
    tail: u16,
    /// Whether the multishot receive is still armed.
    armed: bool,
    /// Whether the buffer ring is still registered (the kernel may use it).
    registered: bool,
}

impl MultishotRecv {
    /// A receiver for `fd` (a connected TCP socket the caller keeps open
    /// for as long as this lives) with `count` buffers (a power of two) of
    /// `size` bytes. Fails where the kernel lacks or refuses what it needs.
    pub fn new(fd: RawFd, count: u16, size: usize) -> io::Result<Self> {
        if !count.is_power_of_two() || size == 0 || size > u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffers: a power of two, each of 1 to 4 GiB - 1 bytes",
            ));
        }
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(8)?;
        let entries = Pages::new(count as usize * std::mem::size_of::<BufRingEntry>())?;
        let bufs = Pages::new(count as usize * size)?;
        let mut me = MultishotRecv {
            ring,
            fd,
            entries,
            bufs,
            count,
            size: size as u32,
            tail: 0,
            armed: false,
            registered: false,
        };
        // SAFETY: the entries are page-aligned, `count` long, and live as
        // long as `me`, whose drop unregisters them (or leaks them) first.
        unsafe {
            me.ring
                .submitter()
                .register_buf_ring_with_flags(me.entries.ptr as u64, count, GROUP, 0)?;
        }
        me.registered = true;
        for bid in 0..count {
            me.give(bid);
        }
        me.publish();
        Ok(me)
    }

    /// Puts buffer `bid` at our tail (seen by the kernel once published).
    fn give(&mut self, bid: u16) {
        let i = (self.tail & (self.count - 1)) as usize;
        // SAFETY: `i` < count entries; the kernel reads only entries
        // before the published tail, and this one is past it.
        let e = unsafe { &mut *(self.entries.ptr as *mut BufRingEntry).add(i) };
        // SAFETY (pointer arithmetic): bid < count buffers of `size` bytes.
        e.set_addr(unsafe { self.bufs.ptr.add(bid as usize * self.size as usize) } as u64);
        e.set_len(self.size);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes our tail: the buffers given are the kernel's to fill.
    fn publish(&self) {
        // SAFETY: the ring's tail is a u16 inside its first entry, aligned,
        // shared with the kernel, which reads it with acquire ordering.
        let tail =
            unsafe { &*(BufRingEntry::tail(self.entries.ptr as *const BufRingEntry) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Waits up to `timeout` for what arrives and counts it, every buffer
    /// handed back at once. Returns nothing received at the timeout or
    /// when a signal interrupts the wait.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Got> {
        if !self.armed {
            let sqe = opcode::RecvMulti::new(Fd(self.fd), GROUP).build().user_data(RECV);
            // SAFETY: the buffers the receive fills are the registered ring's.
            unsafe { self.ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            self.armed = true;
        }
        let ts = Timespec::from(timeout);
        match self
            .ring
            .submitter()
            .submit_with_args(1, &SubmitArgs::new().timespec(&ts))
        {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        let mut got = Got::default();
        let mut err = None;
        let mut given = false;
        let done: Vec<(u64, i32, u32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()))
            .collect();
        for (data, res, flags) in done {
            if data != RECV {
                continue;
            }
            if !cqueue::more(flags) {
                self.armed = false;
            }
            if let Some(bid) = cqueue::buffer_select(flags) {
                if bid < self.count {
                    self.give(bid);
                    given = true;
                }
            }
            match res {
                n if n > 0 => got.bytes += n as u64,
                0 => got.end = true,
                // Every buffer was full: the receive stopped; it is armed
                // again on the next wait, the buffers handed back by then.
                e if -e == libc::ENOBUFS => {}
                e => err = Some(io::Error::from_raw_os_error(-e)),
            }
        }
        if given {
            self.publish();
        }
        match err {
            // The bytes counted before the error are lost with it, as a
            // failed read(2) loses nothing it had not returned.
            Some(e) => Err(e),
            None => Ok(got),
        }
    }
}

impl Drop for MultishotRecv {
    fn drop(&mut self) {
        if self.armed {
            let sqe = opcode::AsyncCancel::new(RECV).build().user_data(CANCEL);
            // SAFETY: a cancellation refers to no memory of ours.
            let pushed = unsafe { self.ring.submission().push(&sqe) }.is_ok();
            let until = Instant::now() + CANCEL_WAIT;
            while pushed && self.armed && Instant::now() < until {
                let ts = Timespec::from(Duration::from_millis(10));
                let _ = self
                    .ring
                    .submitter()
                    .submit_with_args(1, &SubmitArgs::new().timespec(&ts));
                for c in self.ring.completion() {
                    if c.user_data() == RECV && !cqueue::more(c.flags()) {
                        self.armed = false;
                    }
                }
            }
        }
        if self.registered && !self.armed {
            self.registered = self.ring.submitter().unregister_buf_ring(GROUP).is_err();
        }
        if self.armed || self.registered {
            // The kernel may still write them: leak rather than free.
            log::warn!("io_uring receive not cancelled in time: its buffers are leaked");
            std::mem::forget(std::mem::replace(&mut self.entries, Pages::leaked()));
            std::mem::forget(std::mem::replace(&mut self.bufs, Pages::leaked()));
        }
    }
}

impl Pages {
    /// Nothing to free (what a leaked allocation is replaced with).
    fn leaked() -> Self {
        Pages {
            ptr: std::ptr::null_mut(),
            layout: Layout::new::<()>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    /// Skips (saying so) where this kernel or sandbox refuses io_uring.
    fn receiver(fd: RawFd, count: u16, size: usize) -> Option<MultishotRecv> {
        match MultishotRecv::new(fd, count, size) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("skipped: io_uring multishot receive unavailable here: {e}");
                None
            }
        }
    }

    /// Every byte sent is counted once, through many more bytes than the
    /// ring holds (its buffers are handed back and reused), and the peer's
    /// close is seen after them.
    #[test]
    fn counts_every_byte_through_a_small_ring_then_the_end() {
        let (mut a, b) = pair();
        let Some(mut rx) = receiver(b.as_raw_fd(), 2, 4096) else {
            return;
        };
        let total: usize = 3 << 20;
        let writer = std::thread::spawn(move || {
            let chunk = vec![7u8; 100_000];
            let mut left = total;
            while left > 0 {
                let n = left.min(chunk.len());
                a.write_all(&chunk[..n]).unwrap();
                left -= n;
            }
        });
        let (mut bytes, mut end) = (0u64, false);
        let until = Instant::now() + Duration::from_secs(20);
        while !end && Instant::now() < until {
            let g = rx.wait(Duration::from_millis(50)).unwrap();
            bytes += g.bytes;
            end = g.end;
        }
        writer.join().unwrap();
        assert!(end, "no end of file after {bytes} bytes");
        assert_eq!(bytes, total as u64);
        // After the end, as read(2) after it, the end again and no bytes.
        let again = rx.wait(Duration::from_millis(20)).unwrap();
        assert_eq!(again, Got { bytes: 0, end: true });
    }

    /// A wait with nothing to receive returns empty at its timeout, not
    /// before and not much after; a receiver dropped while armed cancels
    /// its receive (no leak warning, the socket still usable).
    #[test]
    fn an_idle_wait_ends_at_its_timeout_and_a_drop_cancels() {
        let (mut a, b) = pair();
        let Some(mut rx) = receiver(b.as_raw_fd(), 4, 1024) else {
            return;
        };
        let t = Instant::now();
        assert_eq!(rx.wait(Duration::from_millis(60)).unwrap(), Got::default());
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(50), "returned after {took:?}");
        assert!(took < Duration::from_secs(5), "returned after {took:?}");
        assert!(rx.armed);
        drop(rx);
        // The cancelled receive took nothing: a plain read gets what comes.
        a.write_all(b"after").unwrap();
        let mut got = [0u8; 5];
        std::io::Read::read_exact(&mut &b, &mut got).unwrap();
        assert_eq!(&got, b"after");
    }

    /// A reset peer is an error, not an end of file.
    #[test]
    fn a_reset_is_an_error() {
        let (a, b) = pair();
        let Some(mut rx) = receiver(b.as_raw_fd(), 2, 1024) else {
            return;
        };
        socket2::SockRef::from(&a)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        (&a).write_all(b"x").unwrap();
        drop(a);
        let until = Instant::now() + Duration::from_secs(5);
        let err = loop {
            match rx.wait(Duration::from_millis(20)) {
                Err(e) => break e,
                Ok(g) => assert!(!g.end, "a reset taken for an end of file"),
            }
            assert!(Instant::now() < until, "no error after a reset");
        };
        assert_eq!(err.raw_os_error(), Some(libc::ECONNRESET), "{err}");
    }
}
