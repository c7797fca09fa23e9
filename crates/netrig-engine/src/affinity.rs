//! Worker threads pinned to CPUs (`--cpus`, `--remote-cpus`, `-A`), as
//! netperf's `-T` and iperf3's `-A` do: worker i of an end runs on the i-th
//! CPU of that end's list, round robin. Only the data path is pinned; the
//! sampler, the control thread and the nudge's watchdog run where the
//! scheduler puts them.

use std::io;

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set, and the kernel
    // fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}

/// Checks, before a test starts, that this host lets netrig run on every
/// CPU of `cpus`; the message names `option`.
pub fn check_cpus(cpus: &[u32], option: &str) -> Result<(), String> {
    let allowed =
        allowed_cpus().map_err(|e| format!("{option}: cannot read this host's CPU affinity: {e}"))?;
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(c) => Err(format!(
            "{option}: CPU {c} is not one this host lets netrig run on (it may: {})",
            cpu_list(&allowed)
        )),
        None => Ok(()),
    }
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin_current_thread(cpu: u32) -> io::Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in `allowed_cpus`; `cpu` is below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the calling thread the CPUs of the process's main thread: a helper
/// thread that a pinned worker starts (the nudge's watchdog) would
/// otherwise inherit the worker's one CPU and run its ticks there, on the
/// data path's CPU, where only the data path belongs.
pub(crate) fn unpin_current_thread() -> io::Result<()> {
    // SAFETY: as in `allowed_cpus`; the main thread's id is the process id.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let main = unsafe { libc::getpid() };
    if unsafe { libc::sched_getaffinity(main, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPU the calling thread is running on.
pub(crate) fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments; -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// A CPU list as Linux writes them: "0-3,6".
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_linux_writes_them() {
        assert_eq!(cpu_list(&[3, 0, 1, 2, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(cpu_list(&[5]), "5");
    }

    #[test]
    fn a_pinned_thread_runs_where_it_was_put() {
        let cpus = allowed_cpus().unwrap();
        let last = *cpus.last().unwrap();
        assert!(check_cpus(&[last], "--cpus").is_ok());
        let e = check_cpus(&[1023], "--cpus").unwrap_err();
        assert!(
            cpus.contains(&1023) || e.contains("--cpus: CPU 1023 is not one"),
            "{e}"
        );
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![last]);
            assert_eq!(current_cpu(), Some(last));
        })
        .join()
        .unwrap();
    }

    /// A thread started by a pinned one inherits its one CPU; unpinned, it
    /// has the main thread's CPUs again (on a host of one CPU, the same).
    #[test]
    fn an_unpinned_helper_has_the_main_threads_cpus() {
        let cpus = allowed_cpus().unwrap();
        let first = cpus[0];
        let (inherited, unpinned) = std::thread::spawn(move || {
            pin_current_thread(first).unwrap();
            std::thread::spawn(|| {
                let inherited = allowed_cpus().unwrap();
                unpin_current_thread().unwrap();
                (inherited, allowed_cpus().unwrap())
            })
            .join()
            .unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(inherited, vec![first]);
        assert_eq!(unpinned, cpus);
    }
}
