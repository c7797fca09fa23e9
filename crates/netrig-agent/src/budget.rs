//! What all the agent's sessions may take together: worker threads, buffer
//! memory and flows. A test reserves its share when it is accepted, before
//! anything is allocated, and gives it back when it ends however it ends; a
//! test that would overdraw the budget is refused with what it asked for,
//! what is in use and the cap (`--max-threads`, `--max-memory`,
//! `--max-total-flows`).
//!
//! Per-test bounds (`--max-workers`, `--max-buffer`, `--max-flows`) are in
//! the welcome's [`netrig_proto::AgentLimits`] so a client can check before
//! asking; these totals are the agent's own business and never travel.

use std::sync::Mutex;

/// The totals, as `netrig serve` was given them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Worker threads of all running tests (`--max-threads`).
    pub threads: u32,
    /// Data-path buffer bytes of all running tests (`--max-memory`).
    pub buffer_bytes: u64,
    /// Flows (sockets) of all running tests (`--max-total-flows`).
    pub flows: u64,
}

impl Totals {
    /// Safe defaults for this host: 4 worker threads per CPU (at least 16);
    /// a quarter of the physical memory for buffers (between 256 MiB and
    /// 4 GiB); 40,000 flows (each is a socket: also bounded by the agent's
    /// `ulimit -n`, which `netrig serve` raises to its hard limit).
    pub fn for_host() -> Totals {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let mem = physical_memory().unwrap_or(4 << 30);
        Totals {
            threads: cpus.saturating_mul(4).max(16),
            buffer_bytes: (mem / 4).clamp(256 << 20, 4 << 30),
            flows: 40_000,
        }
    }
}

impl Totals {
    /// The most workers one test can have beside its own thread.
    pub fn max_workers(&self) -> u32 {
        self.threads.saturating_sub(1).max(1)
    }
}

impl Default for Totals {
    fn default() -> Self {
        Totals::for_host()
    }
}

fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| (pages as u64).saturating_mul(size as u64))
}

/// One test's share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Share {
    pub threads: u32,
    pub buffer_bytes: u64,
    pub flows: u64,
}

/// The budget all sessions draw from.
#[derive(Debug)]
pub struct Budget {
    totals: Totals,
    used: Mutex<Share>,
}

/// A share taken from a [`Budget`]; dropping it gives it back.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a Budget,
    share: Share,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().expect("budget lock");
        used.threads -= self.share.threads;
        used.buffer_bytes -= self.share.buffer_bytes;
        used.flows -= self.share.flows;
    }
}

impl Budget {
    pub fn new(totals: Totals) -> Budget {
        Budget {
            totals,
            used: Mutex::new(Share::default()),
        }
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// What running tests hold now.
    pub fn in_use(&self) -> Share {
        *self.used.lock().expect("budget lock")
    }

    /// Takes `share`, or says which total it would overdraw: a test that
    /// alone exceeds a total can never run ("-T 512 needs 512 worker threads
    /// and the agent runs at most 64 (its --max-threads)"); one that fits
    /// but not beside the tests running now may try again later.
    pub fn reserve(&self, share: Share) -> Result<Reservation<'_>, String> {
        let mut used = self.used.lock().expect("budget lock");
        self.fits(share, &used)?;
        used.threads += share.threads;
        used.buffer_bytes += share.buffer_bytes;
        used.flows += share.flows;
        Ok(Reservation { budget: self, share })
    }

    /// Whether `share` would be taken now, without taking it: a test is
    /// checked so when it is asked for, and takes its share only once its
    /// data connections are all in (a session that asks and then opens none
    /// holds nothing).
    pub fn check(&self, share: Share) -> Result<(), String> {
        let used = self.used.lock().expect("budget lock");
        self.fits(share, &used)
    }

    fn fits(&self, share: Share, used: &Share) -> Result<(), String> {
        let t = &self.totals;
        let check = |what: &str, want: u64, in_use: u64, cap: u64, option: &str, unit: fn(u64) -> String| {
            if want > cap {
                return Err(format!(
                    "the test needs {} of the agent's {what} and it has at most {} for all tests together \
                     (its {option})",
                    unit(want),
                    unit(cap)
                ));
            }
            if in_use.saturating_add(want) > cap {
                return Err(format!(
                    "the agent is busy: the test needs {} of its {what}, other tests hold {} of the {} it has \
                     (its {option}); try again later",
                    unit(want),
                    unit(in_use),
                    unit(cap)
                ));
            }
            Ok(())
        };
        check(
            "worker threads",
            u64::from(share.threads),
            u64::from(used.threads),
            u64::from(t.threads),
            "--max-threads",
            |n| n.to_string(),
        )?;
        check(
            "buffer memory",
            share.buffer_bytes,
            used.buffer_bytes,
            t.buffer_bytes,
            "--max-memory",
            |b| format!("{} MiB", b.div_ceil(1 << 20)),
        )?;
        check(
            "flows",
            share.flows,
            used.flows,
            t.flows,
            "--max-total-flows",
            |n| n.to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget::new(Totals {
            threads: 8,
            buffer_bytes: 100 << 20,
            flows: 100,
        })
    }

    fn share(threads: u32, mib: u64, flows: u64) -> Share {
        Share {
            threads,
            buffer_bytes: mib << 20,
            flows,
        }
    }

    #[test]
    fn reservations_add_up_and_are_given_back() {
        let b = budget();
        let a = b.reserve(share(4, 60, 50)).unwrap();
        let c = b.reserve(share(4, 40, 50)).unwrap();
        assert_eq!(b.in_use(), share(8, 100, 100));
        let e = b.reserve(share(1, 0, 0)).unwrap_err();
        assert!(
            e.contains("busy") && e.contains("--max-threads") && e.contains("other tests hold 8"),
            "{e}"
        );
        drop(a);
        assert_eq!(b.in_use(), share(4, 40, 50));
        let e = b.reserve(share(1, 61, 1)).unwrap_err();
        assert!(e.contains("--max-memory") && e.contains("61 MiB"), "{e}");
        drop(c);
        assert_eq!(b.in_use(), Share::default());
        b.reserve(share(8, 100, 100)).unwrap();
    }

    #[test]
    fn a_test_larger_than_a_total_is_told_it_can_never_run() {
        let b = budget();
        let e = b.reserve(share(9, 1, 1)).unwrap_err();
        assert!(
            e.contains("at most 8") && e.contains("--max-threads") && !e.contains("busy"),
            "{e}"
        );
        let e = b.reserve(share(1, 1, 101)).unwrap_err();
        assert!(e.contains("--max-total-flows") && e.contains("101"), "{e}");
        assert_eq!(b.in_use(), Share::default(), "a refusal takes nothing");
        let _held = b.reserve(share(6, 1, 1)).unwrap();
        assert!(b.check(share(2, 1, 1)).is_ok());
        assert!(b.check(share(3, 1, 1)).unwrap_err().contains("busy"));
        assert_eq!(b.in_use(), share(6, 1, 1), "a check takes nothing");
    }

    #[test]
    fn host_defaults_are_sane() {
        let t = Totals::for_host();
        assert!(t.threads >= 16);
        assert!((256 << 20..=4 << 30).contains(&t.buffer_bytes));
    }
}
