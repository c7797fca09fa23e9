//! The event loop's fine timer.

use mio::{Interest, Registry, Token};
use std::io;
use std::time::{Duration, Instant};

/// A timerfd in the event loop: epoll's own timeout has millisecond
/// resolution, far too coarse for an open-loop schedule.
pub struct Timer {
    pub fd: std::os::fd::OwnedFd,
    /// The deadline [`arm_at`](Self::arm_at) last set.
    armed_at: std::cell::Cell<Option<Instant>>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the result is checked before use.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Precise wake-ups for this thread (the default slack is 50 µs).
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Timer {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            armed_at: std::cell::Cell::new(None),
        })
    }

    /// A timer whose expiries wake `registry`'s poll with `token`.
    pub fn registered(registry: &Registry, token: Token) -> io::Result<Timer> {
        use std::os::fd::AsRawFd;
        let timer = Timer::new()?;
        registry.register(
            &mut mio::unix::SourceFd(&timer.fd.as_raw_fd()),
            token,
            Interest::READABLE,
        )?;
        Ok(timer)
    }

    /// Fires once after `after` (at least 1 ns).
    pub fn arm(&self, after: Duration) {
        self.armed_at.set(None);
        self.set(after.max(Duration::from_nanos(1)));
    }

    /// Fires once at `at`; a system call only when the deadline changed
    /// (an event loop re-arms on every turn, mostly for the same one).
    pub fn arm_at(&self, at: Instant) {
        if self.armed_at.get() != Some(at) {
            self.armed_at.set(Some(at));
            self.set(
                at.saturating_duration_since(Instant::now())
                    .max(Duration::from_nanos(1)),
            );
        }
    }

    /// Stops a pending expiry.
    pub fn disarm(&self) {
        self.armed_at.set(None);
        self.set(Duration::ZERO);
    }

    /// Fires once after `after`; zero disarms.
    fn set(&self, after: Duration) {
        use std::os::fd::AsRawFd;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and pointers.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Consumes an expiry so the descriptor is not readable again until re-armed.
    pub fn clear(&self) {
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 8];
        // SAFETY: valid descriptor, 8-byte buffer as timerfd requires.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}
