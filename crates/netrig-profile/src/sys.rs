//! perf_event_open on one CPU and its mmap'd ring buffer: the system calls and the record
//! layout, nothing else.

use std::io;
use std::sync::atomic::{fence, Ordering};

/// perf_event_attr up to sample_max_stack (PERF_ATTR_SIZE_VER5, 112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved2: u16,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
pub(crate) const PERF_SAMPLE_IP: u64 = 1 << 0;
pub(crate) const PERF_SAMPLE_TID: u64 = 1 << 1;
pub(crate) const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub(crate) const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub(crate) const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub(crate) const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_FREQ: u64 = 1 << 10;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;
pub(crate) const PERF_RECORD_LOST: u32 = 2;
/// The kernel stopped sampling an event for the rest of a tick: it took more than
/// perf_event_max_sample_rate / HZ samples since that CPU's last tick.
pub(crate) const PERF_RECORD_THROTTLE: u32 = 5;
pub(crate) const PERF_RECORD_SAMPLE: u32 = 9;
/// Callchain entries at or above this are context markers (PERF_CONTEXT_KERNEL, _USER...).
pub(crate) const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;
pub(crate) const PERF_CONTEXT_KERNEL: u64 = (-128i64) as u64;
pub(crate) const PERF_CONTEXT_USER: u64 = (-512i64) as u64;

/// One CPU's cpu-clock event and its ring buffer.
pub(crate) struct CpuEvent {
    fd: libc::c_int,
    base: *mut u8,
    len: usize,
    page: usize,
}

// SAFETY: the mapping and the descriptor belong to this value alone; the kernel writes the
// ring concurrently by design, and only one thread reads it (the value is moved, not shared).
unsafe impl Send for CpuEvent {}

impl CpuEvent {
    /// Opens a disabled cpu-clock sampling event on `cpu` for every task, kernel and user
    /// space, with call chains at most `max_stack` deep, and maps 1 + `pages` pages of ring.
    /// An error says which step failed: `perf_event_open` (the kernel's permission) or `mmap`
    /// (the locked-memory limit, perf_event_mlock_kb, for a process without root).
    pub(crate) fn open(
        cpu: u32,
        freq: u64,
        max_stack: u16,
        pages: usize,
    ) -> Result<CpuEvent, (&'static str, io::Error)> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_freq: freq,
            sample_type: PERF_SAMPLE_IP
                | PERF_SAMPLE_TID
                | PERF_SAMPLE_TIME
                | PERF_SAMPLE_CPU
                | PERF_SAMPLE_PERIOD
                | PERF_SAMPLE_CALLCHAIN,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_FREQ,
            wakeup_events: 0,
            sample_max_stack: max_stack,
            ..PerfEventAttr::default()
        };
        // SAFETY: attr is a valid perf_event_attr of the size it says; pid -1 and a cpu asks
        // for every task on that CPU; no group, no flags.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1,
                cpu as i32,
                -1,
                0,
            )
        };
        if fd < 0 {
            return Err(("perf_event_open", io::Error::last_os_error()));
        }
        let fd = fd as libc::c_int;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + pages.next_power_of_two());
        // SAFETY: maps a fresh shared region of the event's ring; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: fd is ours and open.
            unsafe { libc::close(fd) };
            return Err(("mmap", e));
        }
        Ok(CpuEvent {
            fd,
            base: base as *mut u8,
            len,
            page,
        })
    }

    /// The descriptor, for enable and disable from another thread.
    pub(crate) fn fd(&self) -> libc::c_int {
        self.fd
    }

    /// Reads every complete record the kernel has written, passing each (type, body) to `f`,
    /// and gives the space back to the kernel.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32, &[u8])) {
        let size = (self.len - self.page) as u64;
        // SAFETY: data_head is at offset 1024 of the header page, an aligned u64 the kernel
        // updates; the acquire fence orders the data reads after it (as perf's own reader).
        let head = unsafe { std::ptr::read_volatile(self.base.add(1024) as *const u64) };
        fence(Ordering::Acquire);
        // SAFETY: data_tail at offset 1032 is written by this reader only.
        let mut tail = unsafe { std::ptr::read_volatile(self.base.add(1032) as *const u64) };
        // SAFETY: the data area is `size` bytes after the header page, mapped above.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.page), size as usize) };
        let mut rec = Vec::new();
        while head.wrapping_sub(tail) >= 8 {
            let at = |i: u64| data[((tail + i) % size) as usize];
            let kind = u32::from_ne_bytes([at(0), at(1), at(2), at(3)]);
            let len = u16::from_ne_bytes([at(6), at(7)]) as u64;
            if len < 8 || head.wrapping_sub(tail) < len {
                break;
            }
            rec.clear();
            rec.extend((8..len).map(at));
            f(kind, &rec);
            tail += len;
        }
        fence(Ordering::Release);
        // SAFETY: as above; tells the kernel the records up to `tail` are read.
        unsafe { std::ptr::write_volatile(self.base.add(1032) as *mut u64, tail) };
    }
}

impl Drop for CpuEvent {
    fn drop(&mut self) {
        // SAFETY: the mapping and the descriptor are ours, unmapped and closed once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}

/// Resets and enables (true) or disables (false) the events of these descriptors.
pub(crate) fn switch(fds: &[libc::c_int], on: bool) {
    for &fd in fds {
        // SAFETY: ioctls without arguments on perf event descriptors that are open (their
        // CpuEvent outlives every call: the sampler holds both).
        unsafe {
            if on {
                libc::ioctl(fd, PERF_EVENT_IOC_RESET, 0);
                libc::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
            } else {
                libc::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
            }
        }
    }
}

/// A sample record's fields this crate asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawSample {
    pub pid: u32,
    pub tid: u32,
    pub period: u64,
    /// The call chain as the kernel gave it: leaf first, with context markers.
    pub chain: Vec<u64>,
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// Parses a PERF_RECORD_SAMPLE's body (ip, pid/tid, time, cpu, period, callchain), keeping at
/// most `max_chain` entries of the chain. None where the record is short.
pub(crate) fn parse_sample(b: &[u8], max_chain: usize) -> Option<RawSample> {
    // ip 0, pid 8, tid 12, time 16, cpu 24, res 28, period 32, nr 40, ips 48...
    let pid = u32_at(b, 8)?;
    let tid = u32_at(b, 12)?;
    let period = u64_at(b, 32)?;
    let nr = u64_at(b, 40)?;
    let room = (b.len().saturating_sub(48) / 8) as u64;
    let take = nr.min(room).min(max_chain as u64) as usize;
    let chain = (0..take).filter_map(|i| u64_at(b, 48 + 8 * i)).collect();
    Some(RawSample {
        pid,
        tid,
        period,
        chain,
    })
}

/// A PERF_RECORD_LOST's count of lost samples.
pub(crate) fn parse_lost(b: &[u8]) -> Option<u64> {
    u64_at(b, 8)
}

/// A PERF_RECORD_SAMPLE's body as the kernel writes it for this crate's sample_type, with `nr`
/// as the chain's claimed length.
#[cfg(test)]
pub(crate) fn sample_body(pid: u32, tid: u32, period: u64, nr: u64, chain: &[u64]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(
        chain
            .iter()
            .find(|&&a| a < PERF_CONTEXT_MAX)
            .copied()
            .unwrap_or(0)
            .to_ne_bytes(),
    );
    b.extend(pid.to_ne_bytes());
    b.extend(tid.to_ne_bytes());
    b.extend(123u64.to_ne_bytes());
    b.extend(1u32.to_ne_bytes());
    b.extend(0u32.to_ne_bytes());
    b.extend(period.to_ne_bytes());
    b.extend(nr.to_ne_bytes());
    for v in chain {
        b.extend(v.to_ne_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_the_kernels_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    fn sample_record_parses_and_bounds_its_chain() {
        // nr says 1,000 but only 3 are present: the record's length bounds it.
        let chain = [PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000];
        let b = sample_body(7, 8, 1_001_001, 1000, &chain);
        let s = parse_sample(&b, 64).unwrap();
        assert_eq!((s.pid, s.tid, s.period), (7, 8, 1_001_001));
        assert_eq!(
            s.chain,
            vec![PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000]
        );
        assert_eq!(parse_sample(&b, 2).unwrap().chain.len(), 2, "the cap on depth");
        assert_eq!(parse_sample(&b[..40], 64), None);
        assert_eq!(parse_lost(&[0; 16]), Some(0));
        const { assert!(PERF_CONTEXT_USER >= PERF_CONTEXT_MAX && PERF_CONTEXT_KERNEL >= PERF_CONTEXT_MAX) };
    }
}
