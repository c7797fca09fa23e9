//! The witness: the CPU time the samples account for (samples × period, idle excluded)
//! against the busy CPU time the kernel counted in /proc/stat over the same window. cpu-clock
//! samples every CPU at a steady rate, so the two should agree; where they do not, samples were
//! lost or the window was not the one measured.

/// The busy ticks of all CPUs from /proc/stat's `cpu` line: user, nice, system, irq, softirq
/// and steal (idle and iowait are not busy; guest time is already inside user).
pub fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    (v.len() >= 4).then(|| at(0) + at(1) + at(2) + at(5) + at(6) + at(7))
}

/// Reads /proc/stat's busy ticks now.
pub fn read_busy_ticks() -> Option<u64> {
    busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The kernel's clock ticks per second (USER_HZ), the unit of /proc/stat.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// The comparison of sampled busy time with the kernel's count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Witness {
    /// Nanoseconds the non-idle samples account for (their periods summed).
    pub sampled_busy_ns: u64,
    /// Nanoseconds /proc/stat counted as busy over the window, all CPUs.
    pub stat_busy_ns: u64,
    /// sampled / counted; None where the kernel counted no busy time.
    pub ratio: Option<f64>,
}

impl Witness {
    /// The witness from the sampled busy time and the /proc/stat busy ticks over the window.
    pub fn new(sampled_busy_ns: u64, stat_busy_ticks: u64, ticks_per_second: u64) -> Witness {
        let stat_busy_ns = stat_busy_ticks.saturating_mul(1_000_000_000) / ticks_per_second.max(1);
        let ratio = (stat_busy_ns > 0).then(|| sampled_busy_ns as f64 / stat_busy_ns as f64);
        Witness {
            sampled_busy_ns,
            stat_busy_ns,
            ratio,
        }
    }

    /// True where the two agree within `tolerance` (0.05 for 5 %).
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.ratio.is_some_and(|r| (r - 1.0).abs() <= tolerance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_ticks_sum_user_nice_system_irq_softirq_steal() {
        let stat = "cpu  100 2 30 9000 50 4 5 6 7 0\ncpu0 50 1 15 4500 25 2 2 3 0 0\nintr 1\n";
        assert_eq!(busy_ticks(stat), Some(100 + 2 + 30 + 4 + 5 + 6));
        assert_eq!(busy_ticks("cpu0 1 2 3 4\n"), None, "no aggregate line");
        assert_eq!(busy_ticks("cpu  1 x 3 4\n"), None);
        assert!(read_busy_ticks().is_some(), "this host has /proc/stat");
    }

    #[test]
    fn witness_arithmetic() {
        // 1,000 busy samples of 1.001 ms (999 Hz) against 100 ticks at 100 Hz (1 s).
        let w = Witness::new(1_000 * 1_001_001, 100, 100);
        assert_eq!(w.stat_busy_ns, 1_000_000_000);
        let r = w.ratio.unwrap();
        assert!((r - 1.001001).abs() < 1e-9, "{r}");
        assert!(w.agrees(0.05));
        let half = Witness::new(500_000_000, 100, 100);
        assert_eq!(half.ratio, Some(0.5));
        assert!(!half.agrees(0.05));
        let none = Witness::new(5, 0, 100);
        assert_eq!(none.ratio, None);
        assert!(!none.agrees(0.05));
    }
}
