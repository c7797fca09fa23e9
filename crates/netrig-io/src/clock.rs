//! CPU clocks: what a thread (or the process) has spent, as the kernel
//! accounts it.

use std::time::Duration;

/// The time of CPU clock `clock` (`clock_gettime(2)`); zero if the clock is
/// unavailable or reads nonsense.
pub fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time consumed so far by the calling thread
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`). Returns zero if the clock is
/// unavailable. Does not include softirq work done on the thread's behalf.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock counts this thread's work, not the wall clock's.
    #[test]
    fn a_thread_clock_advances_with_work() {
        let before = thread_cpu_time();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = thread_cpu_time() - before;
        assert!(spent >= Duration::from_millis(10), "{spent:?}");
        assert!(spent <= t0.elapsed() + Duration::from_millis(5), "{spent:?}");
    }
}
