//! Machine-wide CPU accounting from `/proc/stat`, per-thread CPU clocks, and
//! netperf-style service demand.
//!
//! Network processing is charged to softirq time on whichever CPU took the
//! interrupt, not to the process doing the I/O, so per-process CPU time
//! under-reports the cost of moving bytes. Instead a [`CpuSnapshot`] of every
//! CPU's tick counters is taken at the start and at the end of exactly the
//! measured window and [`CpuSnapshot::usage_since`] computes the difference.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::MetricsError;

const PROC_STAT: &str = "/proc/stat";

/// `USER_HZ` on every mainstream Linux architecture; used only when
/// `sysconf(_SC_CLK_TCK)` fails.
const FALLBACK_TICKS_PER_SECOND: u64 = 100;

/// Tick counters of one CPU (or the sum over all CPUs) from a `cpu` line of
/// `/proc/stat`, in units of `USER_HZ` (see [`CpuSnapshot::ticks_per_second`]).
///
/// The kernel's `guest` and `guest_nice` columns are deliberately not stored:
/// the kernel already includes guest time in `user` and guest_nice time in
/// `nice`, so adding them again would double count.
///
/// Columns missing on old kernels (`iowait`, `irq`, `softirq` before 2.6,
/// `steal` before 2.6.11) are 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicks {
    /// Time in user mode (includes guest time).
    pub user: u64,
    /// Time in user mode with low priority (includes guest_nice time).
    pub nice: u64,
    /// Time in kernel mode, excluding interrupt handling.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// Idle time while some I/O was outstanding (counts as idle).
    pub iowait: u64,
    /// Time servicing hard interrupts.
    pub irq: u64,
    /// Time servicing softirqs: most network protocol processing lands here.
    pub softirq: u64,
    /// Time stolen by the hypervisor for other guests.
    pub steal: u64,
}

impl CpuTicks {
    /// Busy ticks: everything except `idle` and `iowait`
    /// (`user + nice + system + irq + softirq + steal`). Saturates instead of
    /// overflowing.
    pub fn busy(&self) -> u64 {
        self.user
            .saturating_add(self.nice)
            .saturating_add(self.system)
            .saturating_add(self.irq)
            .saturating_add(self.softirq)
            .saturating_add(self.steal)
    }

    /// All ticks: `busy() + idle + iowait`. Saturates instead of overflowing.
    pub fn total(&self) -> u64 {
        self.busy().saturating_add(self.idle).saturating_add(self.iowait)
    }

    /// Field-by-field difference `self - earlier`. A field that decreased
    /// (counter wrap, CPU hot-plug reset, the known `iowait` regressions on
    /// NO_HZ kernels) gives a delta of 0 rather than a panic or a huge value.
    pub fn delta_since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    fn saturating_add(&self, o: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_add(o.user),
            nice: self.nice.saturating_add(o.nice),
            system: self.system.saturating_add(o.system),
            idle: self.idle.saturating_add(o.idle),
            iowait: self.iowait.saturating_add(o.iowait),
            irq: self.irq.saturating_add(o.irq),
            softirq: self.softirq.saturating_add(o.softirq),
            steal: self.steal.saturating_add(o.steal),
        }
    }
}

/// The `cpu` lines of one reading of `/proc/stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSnapshot {
    /// The aggregate `cpu` line (sum over all possible CPUs).
    pub total: CpuTicks,
    /// The `cpuN` lines as `(N, ticks)`, sorted by `N`. Offline CPUs have no
    /// line, so indexes may have gaps.
    pub per_cpu: Vec<(u32, CpuTicks)>,
    /// Ticks per second of the counters (`USER_HZ`, from
    /// `sysconf(_SC_CLK_TCK)`; usually 100).
    pub ticks_per_second: u64,
}

/// CPU utilisation over a window, from two [`CpuSnapshot`]s.
///
/// All `*_pct` fields except `busiest_cpu_pct` are percentages of the WHOLE
/// machine, like netperf: 100 % means every CPU was busy for the whole
/// window, so one saturated CPU of eight shows as 12.5 %.
/// `busy_pct == user_pct + nice_pct + system_pct + irq_pct + softirq_pct +
/// steal_pct` (up to rounding); `iowait_pct` counts as idle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Busy (all but idle and iowait), % of the whole machine.
    pub busy_pct: f64,
    /// User time (including guest), % of the whole machine.
    pub user_pct: f64,
    /// Niced user time (including guest_nice), % of the whole machine.
    pub nice_pct: f64,
    /// Kernel time outside interrupts, % of the whole machine.
    pub system_pct: f64,
    /// Hard interrupt time, % of the whole machine.
    pub irq_pct: f64,
    /// Softirq time (network protocol processing), % of the whole machine.
    pub softirq_pct: f64,
    /// Time stolen by the hypervisor, % of the whole machine.
    pub steal_pct: f64,
    /// Idle with I/O outstanding, % of the whole machine (not busy).
    pub iowait_pct: f64,
    /// Number of CPUs present in both snapshots (the ones measured). 0 when
    /// neither snapshot had per-CPU lines, in which case the aggregate line
    /// was used.
    pub cpus: u32,
    /// Index of the CPU with the highest busy share of its own time, if any.
    pub busiest_cpu: Option<u32>,
    /// Busy % of [`busiest_cpu`](Self::busiest_cpu) alone (100 % = that one
    /// CPU fully busy); 0 when there is no busiest CPU.
    pub busiest_cpu_pct: f64,
    /// Sum over CPUs of the ticks elapsed in the window, in seconds
    /// (about wall time × `cpus`).
    pub elapsed_cpu_s: f64,
    /// CPU-seconds spent busy in the window, summed over all CPUs.
    pub busy_cpu_s: f64,
}

/// netperf-style service demand of both ends of a test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceDemand {
    /// Service demand measured on the local (client) machine, if measured.
    pub local: Option<f64>,
    /// Service demand measured on the remote (agent) machine, if measured.
    pub remote: Option<f64>,
    /// Unit of both values: `"us/KB"` for streams, `"us/tran"` for
    /// request/response tests.
    pub unit: String,
}

/// Parses the text of `/proc/stat`.
///
/// Requires the aggregate `cpu` line; `cpuN` lines are optional (offline CPUs
/// have none). Each line needs at least the four original columns
/// (`user nice system idle`); later columns missing on old kernels are 0 and
/// columns beyond `steal` (`guest`, `guest_nice`, anything newer) are ignored.
/// Non-`cpu` lines are ignored. Malformed numbers, too few columns and
/// duplicate CPU lines are [`MetricsError::Parse`] errors.
///
/// `ticks_per_second` is taken from `sysconf(_SC_CLK_TCK)` of this machine.
pub fn parse_proc_stat(text: &str) -> Result<CpuSnapshot, MetricsError> {
    parse_proc_stat_at(text, PROC_STAT)
}

/// Reads and parses `/proc/stat` (see [`parse_proc_stat`]).
pub fn read_proc_stat() -> Result<CpuSnapshot, MetricsError> {
    let text = crate::read_file(PROC_STAT)?;
    parse_proc_stat_at(&text, PROC_STAT)
}

/// `sysconf(_SC_CLK_TCK)`, the unit of `/proc/stat`, or 100 if unavailable.
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        FALLBACK_TICKS_PER_SECOND
    }
}

pub(crate) fn parse_proc_stat_at(text: &str, path: &str) -> Result<CpuSnapshot, MetricsError> {
    let mut total: Option<CpuTicks> = None;
    let mut per_cpu: Vec<(u32, CpuTicks)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let mut fields = line.split_whitespace();
        let Some(label) = fields.next() else {
            continue;
        };
        let Some(suffix) = label.strip_prefix("cpu") else {
            continue;
        };
        let ticks = parse_cpu_fields(fields, path, lineno)?;
        if suffix.is_empty() {
            if total.is_some() {
                return Err(MetricsError::parse(
                    path,
                    lineno,
                    "duplicate aggregate \"cpu\" line",
                ));
            }
            total = Some(ticks);
        } else {
            let idx: u32 = suffix
                .parse()
                .map_err(|_| MetricsError::parse(path, lineno, format!("bad CPU label {label:?}")))?;
            per_cpu.push((idx, ticks));
        }
    }
    let total = total.ok_or_else(|| MetricsError::parse(path, 0, "no aggregate \"cpu\" line found"))?;
    per_cpu.sort_by_key(|(idx, _)| *idx);
    if let Some(w) = per_cpu.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(MetricsError::parse(
            path,
            0,
            format!("duplicate line for cpu{}", w[0].0),
        ));
    }
    Ok(CpuSnapshot {
        total,
        per_cpu,
        ticks_per_second: clock_ticks_per_second(),
    })
}

fn parse_cpu_fields<'a>(
    fields: impl Iterator<Item = &'a str>,
    path: &str,
    lineno: usize,
) -> Result<CpuTicks, MetricsError> {
    // user nice system idle iowait irq softirq steal [guest guest_nice ...]
    let mut v = [0u64; 8];
    let mut n = 0;
    for tok in fields.take(8) {
        v[n] = tok
            .parse()
            .map_err(|_| MetricsError::parse(path, lineno, format!("bad tick count {tok:?}")))?;
        n += 1;
    }
    if n < 4 {
        return Err(MetricsError::parse(
            path,
            lineno,
            format!("expected at least 4 tick columns, found {n}"),
        ));
    }
    Ok(CpuTicks {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
    })
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl CpuSnapshot {
    /// CPU utilisation between `earlier` and `self` (the later snapshot).
    ///
    /// Computed from per-CPU deltas; CPUs present in only one snapshot (taken
    /// offline or brought online during the window) are ignored. If neither
    /// snapshot has per-CPU lines, the aggregate line is used and `cpus` is 0.
    /// Counters that went backwards contribute 0 (see
    /// [`CpuTicks::delta_since`]). A zero-length window gives all zeros, never
    /// NaN. Seconds use `self.ticks_per_second`.
    pub fn usage_since(&self, earlier: &CpuSnapshot) -> CpuUsage {
        let before: BTreeMap<u32, &CpuTicks> = earlier.per_cpu.iter().map(|(i, t)| (*i, t)).collect();
        let mut sum = CpuTicks::default();
        let mut cpus: u32 = 0;
        let mut busiest: Option<(u32, f64)> = None;
        for (idx, now) in &self.per_cpu {
            let Some(prev) = before.get(idx) else {
                continue;
            };
            let d = now.delta_since(prev);
            sum = sum.saturating_add(&d);
            cpus = cpus.saturating_add(1);
            if d.total() > 0 {
                let p = pct(d.busy(), d.total());
                let better = match busiest {
                    None => true,
                    Some((_, best)) => p > best,
                };
                if better {
                    busiest = Some((*idx, p));
                }
            }
        }
        if cpus == 0 && self.per_cpu.is_empty() && earlier.per_cpu.is_empty() {
            sum = self.total.delta_since(&earlier.total);
        }
        let total = sum.total();
        let seconds = |ticks: u64| {
            if self.ticks_per_second == 0 {
                0.0
            } else {
                ticks as f64 / self.ticks_per_second as f64
            }
        };
        CpuUsage {
            busy_pct: pct(sum.busy(), total),
            user_pct: pct(sum.user, total),
            nice_pct: pct(sum.nice, total),
            system_pct: pct(sum.system, total),
            irq_pct: pct(sum.irq, total),
            softirq_pct: pct(sum.softirq, total),
            steal_pct: pct(sum.steal, total),
            iowait_pct: pct(sum.iowait, total),
            cpus,
            busiest_cpu: busiest.map(|(i, _)| i),
            busiest_cpu_pct: busiest.map_or(0.0, |(_, p)| p),
            elapsed_cpu_s: seconds(total),
            busy_cpu_s: seconds(sum.busy()),
        }
    }
}

/// CPU time consumed so far by the calling thread: the I/O core's reading
/// (crate netrig-io), the one in netrig.
pub use netrig_io::thread_cpu_time;

/// CPU time consumed so far by the whole process, all threads
/// (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`). Returns zero if the clock is
/// unavailable.
pub fn process_cpu_time() -> Duration {
    netrig_io::cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// netperf service demand: microseconds of CPU consumed per unit of work,
/// `busy_pct / 100 × elapsed_s × cpus × 1e6 / units_of_work`.
///
/// `usage_busy_pct` is the whole-machine busy percentage
/// ([`CpuUsage::busy_pct`]), `elapsed_s` the wall-clock length of the window
/// and `cpus` the number of CPUs ([`CpuUsage::cpus`]). The caller chooses the
/// unit: pass kilobytes transferred (`bytes / 1024`) for stream tests, giving
/// "us/KB", or the number of transactions for request/response tests, giving
/// "us/tran".
///
/// Returns `None` when `units_of_work <= 0` (or is NaN) or the result is not
/// finite.
pub fn service_demand(usage_busy_pct: f64, elapsed_s: f64, cpus: u32, units_of_work: f64) -> Option<f64> {
    if units_of_work.is_nan() || units_of_work <= 0.0 {
        return None;
    }
    let sd = usage_busy_pct / 100.0 * elapsed_s * f64::from(cpus) * 1e6 / units_of_work;
    sd.is_finite().then_some(sd)
}

/// Converts a stream service demand in µs/KB to µs per packet of `mss`
/// bytes: `us_per_kb × mss / 1024`. This is what netperf does when it
/// multiplies µs/KB by 1.46 for 1460-byte segments.
pub fn per_packet_us(us_per_kb: f64, mss: u32) -> f64 {
    us_per_kb * f64::from(mss) / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4.x+ kernel, 4 CPUs, all ten columns.
    const STAT_A: &str = "\
cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0
cpu1 1335301 29122 513429 11164813 3402 0 3446 0 47000 0
cpu2 3708716 97541 1021107 10940089 4043 0 2188 0 57000 0
cpu3 3694856 131067 978127 11380289 3108 0 1686 0 47695 0
intr 1462898 1 0 0 0 0 0 0 0 1 0 0 0 0 0 0
ctxt 4093447
btime 1700000000
processes 86031
procs_running 2
procs_blocked 0
softirq 1032745 0 288164 58 19812 113577 0 15097 344237 0 191800
";

    #[test]
    fn parses_modern_stat() {
        let s = parse_proc_stat(STAT_A).unwrap();
        assert_eq!(s.per_cpu.len(), 4);
        assert_eq!(
            s.total,
            CpuTicks {
                user: 10132153,
                nice: 290696,
                system: 3084719,
                idle: 46828483,
                iowait: 16683,
                irq: 0,
                softirq: 25195,
                steal: 0,
            }
        );
        assert_eq!(s.per_cpu[2].0, 2);
        assert_eq!(s.per_cpu[2].1.user, 3708716);
        assert!(s.ticks_per_second > 0);
        // guest (175628) is not added on top of user.
        assert_eq!(
            s.total.total(),
            10132153 + 290696 + 3084719 + 46828483 + 16683 + 25195
        );
        assert_eq!(s.total.busy(), 10132153 + 290696 + 3084719 + 25195);
    }

    #[test]
    fn old_kernel_with_four_columns() {
        // Linux 2.4: user nice system idle only.
        let text = "cpu  100 2 30 1000\ncpu0 50 1 15 500\ncpu1 50 1 15 500\npage 1 2\n";
        let s = parse_proc_stat(text).unwrap();
        assert_eq!(s.total.iowait, 0);
        assert_eq!(s.total.steal, 0);
        assert_eq!(s.per_cpu.len(), 2);
        // 2.6.0-2.6.10: seven columns, no steal.
        let text = "cpu  100 2 30 1000 5 6 7\ncpu0 100 2 30 1000 5 6 7\n";
        let s = parse_proc_stat(text).unwrap();
        assert_eq!(s.total.softirq, 7);
        assert_eq!(s.total.steal, 0);
    }

    #[test]
    fn extra_columns_are_ignored() {
        let text = "cpu  1 2 3 4 5 6 7 8 9 10 11 12\ncpu0 1 2 3 4 5 6 7 8 9 10 11 12\n";
        let s = parse_proc_stat(text).unwrap();
        assert_eq!(s.total.steal, 8);
        assert_eq!(s.total.total(), 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
    }

    #[test]
    fn offline_cpu_has_no_line() {
        let text = "\
cpu  400 0 400 4000 0 0 0 0 0 0
cpu0 100 0 100 1000 0 0 0 0 0 0
cpu2 100 0 100 1000 0 0 0 0 0 0
cpu3 100 0 100 1000 0 0 0 0 0 0
";
        let s = parse_proc_stat(text).unwrap();
        let idx: Vec<u32> = s.per_cpu.iter().map(|(i, _)| *i).collect();
        assert_eq!(idx, vec![0, 2, 3]);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        crate::tests::assert_refuses(
            parse_proc_stat,
            "/proc/stat",
            &[
                "",
                "intr 1 2 3\n",
                "cpu  1 2 3\n",
                "cpu  1 2 x 4\n",
                "cpu  1 2 3 4\ncpuX 1 2 3 4\n",
                "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n",
                "cpu  1 2 3 4\ncpu  1 2 3 4\n",
                "cpu  -1 2 3 4\n",
                "cpu  99999999999999999999999 2 3 4\n",
                "cpu0 1 2 3 4\n",
            ],
            ("cpu  1 2 3 4\ncpu0 1 2 z 4\n", 2),
        );
    }

    fn snap(total: CpuTicks, per_cpu: Vec<(u32, CpuTicks)>) -> CpuSnapshot {
        CpuSnapshot {
            total,
            per_cpu,
            ticks_per_second: 100,
        }
    }

    fn t(user: u64, system: u64, idle: u64, softirq: u64) -> CpuTicks {
        CpuTicks {
            user,
            system,
            idle,
            softirq,
            ..Default::default()
        }
    }

    #[test]
    fn usage_is_whole_machine() {
        // 2 CPUs, 1 s window at 100 Hz: cpu0 fully busy (60 user, 20 sys,
        // 20 softirq), cpu1 fully idle.
        let a = snap(t(0, 0, 0, 0), vec![(0, t(0, 0, 0, 0)), (1, t(0, 0, 0, 0))]);
        let b = snap(
            t(60, 20, 100, 20),
            vec![(0, t(60, 20, 0, 20)), (1, t(0, 0, 100, 0))],
        );
        let u = b.usage_since(&a);
        assert_eq!(u.cpus, 2);
        assert!((u.busy_pct - 50.0).abs() < 1e-9);
        assert!((u.user_pct - 30.0).abs() < 1e-9);
        assert!((u.system_pct - 10.0).abs() < 1e-9);
        assert!((u.softirq_pct - 10.0).abs() < 1e-9);
        assert_eq!(u.busiest_cpu, Some(0));
        assert!((u.busiest_cpu_pct - 100.0).abs() < 1e-9);
        assert!((u.elapsed_cpu_s - 2.0).abs() < 1e-9);
        assert!((u.busy_cpu_s - 1.0).abs() < 1e-9);
        let sum = u.user_pct + u.nice_pct + u.system_pct + u.irq_pct + u.softirq_pct + u.steal_pct;
        assert!((sum - u.busy_pct).abs() < 1e-9);
    }

    #[test]
    fn usage_from_real_text() {
        let a = parse_proc_stat(STAT_A).unwrap();
        let later = "\
cpu  10132253 290696 3084769 46828833 16683 0 25245 0 175628 0
cpu0 1393380 32966 572056 13343292 6130 0 17875 0 23933 0
cpu1 1335301 29122 513479 11164863 3402 0 3496 0 47000 0
cpu2 3708716 97541 1021107 10940189 4043 0 2188 0 57000 0
cpu3 3694856 131067 978127 11380389 3108 0 1686 0 47695 0
";
        let mut b = parse_proc_stat(later).unwrap();
        b.ticks_per_second = 100;
        let u = b.usage_since(&a);
        // cpu0: 100 user; cpu1: 50 sys + 50 softirq + 50 idle;
        // cpu2, cpu3: 100 idle each. Total 450 ticks, busy 200.
        assert_eq!(u.cpus, 4);
        assert!((u.busy_pct - 200.0 * 100.0 / 450.0).abs() < 1e-9);
        assert!((u.busy_cpu_s - 2.0).abs() < 1e-9);
        assert!((u.elapsed_cpu_s - 4.5).abs() < 1e-9);
        assert_eq!(u.busiest_cpu, Some(0));
    }

    #[test]
    fn zero_window_gives_zeros() {
        let a = parse_proc_stat(STAT_A).unwrap();
        let u = a.usage_since(&a);
        assert_eq!(u.busy_pct, 0.0);
        assert_eq!(u.user_pct, 0.0);
        assert_eq!(u.elapsed_cpu_s, 0.0);
        assert_eq!(u.busiest_cpu, None);
        assert_eq!(u.busiest_cpu_pct, 0.0);
        assert_eq!(u.cpus, 4);
        assert!(!u.busy_pct.is_nan());
        // Zero ticks_per_second does not divide by zero either.
        let mut b = a.clone();
        b.ticks_per_second = 0;
        b.per_cpu[0].1.user += 10;
        let u = b.usage_since(&a);
        assert_eq!(u.busy_cpu_s, 0.0);
        assert!(u.busy_pct > 0.0);
    }

    #[test]
    fn decreasing_counters_are_zero_delta() {
        let a = snap(t(0, 0, 0, 0), vec![(0, t(500, 500, 500, 500))]);
        // user wrapped/reset, idle went backwards (NO_HZ iowait bug style).
        let b = snap(t(0, 0, 0, 0), vec![(0, t(10, 600, 400, 500))]);
        let u = b.usage_since(&a);
        assert_eq!(u.user_pct, 0.0);
        assert!((u.system_pct - 100.0).abs() < 1e-9);
        assert!((u.busy_cpu_s - 1.0).abs() < 1e-9);
        // Wrap at u64::MAX.
        let a = snap(t(u64::MAX, 0, 0, 0), vec![(0, t(u64::MAX, 0, u64::MAX, 0))]);
        let b = snap(t(1, 0, 0, 0), vec![(0, t(1, 0, 5, 0))]);
        let u = b.usage_since(&a);
        assert_eq!(u.busy_pct, 0.0);
    }

    #[test]
    fn cpus_in_only_one_snapshot_are_ignored() {
        let a = snap(t(0, 0, 0, 0), vec![(0, t(0, 0, 0, 0)), (1, t(0, 0, 0, 0))]);
        // cpu1 went offline, cpu2 came online during the window.
        let b = snap(t(0, 0, 0, 0), vec![(0, t(50, 0, 50, 0)), (2, t(100, 0, 0, 0))]);
        let u = b.usage_since(&a);
        assert_eq!(u.cpus, 1);
        assert!((u.busy_pct - 50.0).abs() < 1e-9);
        assert_eq!(u.busiest_cpu, Some(0));
    }

    #[test]
    fn aggregate_fallback_without_per_cpu_lines() {
        let a = snap(t(0, 0, 0, 0), vec![]);
        let b = snap(t(25, 25, 50, 0), vec![]);
        let u = b.usage_since(&a);
        assert_eq!(u.cpus, 0);
        assert!((u.busy_pct - 50.0).abs() < 1e-9);
        assert_eq!(u.busiest_cpu, None);
    }

    #[test]
    fn service_demand_math() {
        // 25% of 4 CPUs for 10 s = 10 CPU-s = 1e7 us over 1e6 KB = 10 us/KB.
        let sd = service_demand(25.0, 10.0, 4, 1e6).unwrap();
        assert!((sd - 10.0).abs() < 1e-9);
        assert_eq!(service_demand(25.0, 10.0, 4, 0.0), None);
        assert_eq!(service_demand(25.0, 10.0, 4, -1.0), None);
        assert_eq!(service_demand(25.0, 10.0, 4, f64::NAN), None);
        assert!((per_packet_us(10.0, 1460) - 14.2578125).abs() < 1e-9);
        assert!((per_packet_us(1.0, 1460) - 1460.0 / 1024.0).abs() < 1e-12);
    }

    #[test]
    fn real_proc_stat_and_clocks() {
        let s = read_proc_stat().unwrap();
        assert!(!s.per_cpu.is_empty());
        assert!(s.total.total() > 0);
        let before = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        let after = thread_cpu_time();
        assert!(after > before);
        assert!(process_cpu_time() >= after);
    }

    #[test]
    fn serde_round_trip() {
        let s = parse_proc_stat(STAT_A).unwrap();
        let u = s.usage_since(&s);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<CpuSnapshot>(&j).unwrap(), s);
        let j = serde_json::to_string(&u).unwrap();
        assert_eq!(serde_json::from_str::<CpuUsage>(&j).unwrap(), u);
        let d = ServiceDemand {
            local: Some(1.5),
            remote: None,
            unit: "us/KB".into(),
        };
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<ServiceDemand>(&j).unwrap(), d);
    }
}
