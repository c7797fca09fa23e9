//! The sampler: a cpu-clock event on every online CPU, enabled exactly around a window, its
//! ring buffers read by a thread of its own while it runs, and folded into a [`Profile`].

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{sysctl, ProfileError};
use crate::kallsyms::Kallsyms;
use crate::profile::Profile;
use crate::selfsyms::SelfSyms;
use crate::softnet::NetSnapshot;
use crate::symbolize::Symbols;
use crate::sys::{self, CpuEvent, PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PERF_RECORD_THROTTLE};
use crate::witness::{self, StatTimes};

/// How the sampler samples, and its bounds.
#[derive(Debug, Clone)]
pub struct Config {
    /// Samples per second on each CPU (999: off the beat of timers at round rates).
    pub frequency_hz: u64,
    /// The deepest call chain kept (kernel and user frames and markers together).
    pub max_stack: u16,
    /// The most distinct (thread, call chain) pairs kept; samples of new ones past it are
    /// counted as dropped.
    pub max_stacks: usize,
    /// The most samples folded in one window; later ones are counted as dropped.
    pub max_samples: u64,
    /// Ring buffer pages per CPU (a power of two).
    pub ring_pages: usize,
    /// How often the reader empties the rings.
    pub drain_every: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            frequency_hz: 999,
            max_stack: 64,
            max_stacks: 50_000,
            // An hour of 999 Hz on 16 CPUs: a bound on the counts, not on memory (that is
            // max_stacks').
            max_samples: 60_000_000,
            // 256 KiB per CPU with 4 KiB pages: at 999 Hz and ~300 bytes a sample, seconds
            // of samples against a reader that empties it every 50 ms.
            ring_pages: 64,
            drain_every: Duration::from_millis(50),
        }
    }
}

/// The processes and threads of this test: a sample in one of them is "this test", any other
/// is "the rest of the host".
#[derive(Debug, Clone, Default)]
pub struct Ours {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
}

impl Ours {
    /// Every thread of this process.
    pub fn this_process() -> Ours {
        Ours {
            pids: vec![std::process::id()],
            tids: Vec::new(),
        }
    }

    fn contains(&self, pid: u32, tid: u32) -> bool {
        self.pids.contains(&pid) || self.tids.contains(&tid)
    }
}

/// The online CPUs, from /sys/devices/system/cpu/online (`0-3,5`).
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("cpu list {text:?}")))
}

fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        // A bound on the list's size: no machine has more CPUs than this.
        if b < a || b >= 65_536 {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

/// Opened and mapped, not yet sampling.
pub struct Sampler {
    events: Vec<CpuEvent>,
    symbols: Symbols,
    config: Config,
}

/// The samples read so far, folded by (pid, tid, chain).
#[derive(Default)]
struct Fold {
    stacks: HashMap<(u32, u32, Vec<u64>), (u64, u64)>,
    samples: u64,
    lost: u64,
    dropped: u64,
    throttles: u64,
}

impl Fold {
    fn record(&mut self, kind: u32, body: &[u8], config: &Config) {
        match kind {
            PERF_RECORD_SAMPLE => {
                let Some(s) = sys::parse_sample(body, config.max_stack as usize) else {
                    return;
                };
                self.samples += 1;
                if self.samples > config.max_samples {
                    self.dropped += 1;
                    return;
                }
                let full = self.stacks.len() >= config.max_stacks;
                match self.stacks.get_mut(&(s.pid, s.tid, s.chain.clone())) {
                    Some(c) => {
                        c.0 += 1;
                        c.1 += s.period;
                    }
                    None if full => self.dropped += 1,
                    None => {
                        self.stacks.insert((s.pid, s.tid, s.chain), (1, s.period));
                    }
                }
            }
            PERF_RECORD_LOST => self.lost += sys::parse_lost(body).unwrap_or(0),
            PERF_RECORD_THROTTLE => self.throttles += 1,
            _ => {}
        }
    }
}

impl Sampler {
    /// Opens a sampling event on every online CPU, disabled. Fails, naming the reason, where
    /// the host does not allow a system-wide profile or hides kernel addresses.
    pub fn new(config: Config) -> Result<Sampler, ProfileError> {
        let kallsyms = Kallsyms::load().map_err(|e| ProfileError::io("reading /proc/kallsyms", e))?;
        if kallsyms.hidden() {
            return Err(ProfileError::KernelAddressesHidden {
                kptr_restrict: sysctl("/proc/sys/kernel/kptr_restrict"),
            });
        }
        let cpus = online_cpus().map_err(|e| ProfileError::io("reading the online CPUs", e))?;
        // The kernel refuses (EOVERFLOW) a depth above kernel.perf_event_max_stack.
        let max_stack = match sysctl("/proc/sys/kernel/perf_event_max_stack").parse::<u16>() {
            Ok(limit) => config.max_stack.min(limit),
            Err(_) => config.max_stack,
        };
        let config = Config { max_stack, ..config };
        let mut events = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            let ev = CpuEvent::open(cpu, config.frequency_hz, config.max_stack, config.ring_pages);
            events.push(ev.map_err(|(step, e)| open_error(cpu, step, e))?);
        }
        Ok(Sampler {
            events,
            symbols: Symbols::new(kallsyms, SelfSyms::load()),
            config,
        })
    }

    /// Enables every CPU's event now and starts reading their rings. /proc/stat and the
    /// network softirq counts are read just before.
    pub fn start(self) -> Running {
        let Sampler {
            mut events,
            symbols,
            config,
        } = self;
        let fds: Vec<libc::c_int> = events.iter().map(CpuEvent::fd).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let net0 = NetSnapshot::read();
        let stat0 = witness::read_stat_times();
        let started = Instant::now();
        sys::switch(&fds, true);
        let (flag, cfg) = (stop.clone(), config.clone());
        let reader = std::thread::spawn(move || {
            let mut fold = Fold::default();
            loop {
                let last = flag.load(Ordering::Acquire);
                for ev in events.iter_mut() {
                    ev.drain(|kind, body| fold.record(kind, body, &cfg));
                }
                if last {
                    return (events, fold);
                }
                std::thread::park_timeout(cfg.drain_every);
            }
        });
        Running {
            fds,
            stop,
            reader: Some(reader),
            started,
            counts: Box::new(Counts {
                stat0,
                net0,
                ended: None,
            }),
            symbols,
            config,
        }
    }
}

/// perf_event_open's refusal in words: not allowed, not available, or else (a failed mmap
/// names the locked-memory limit it most likely met).
fn open_error(cpu: u32, step: &str, e: io::Error) -> ProfileError {
    if step != "perf_event_open" {
        let limit = sysctl("/proc/sys/kernel/perf_event_mlock_kb");
        return ProfileError::io(
            format!("{step} of CPU {cpu}'s ring buffer (perf_event_mlock_kb is {limit})"),
            e,
        );
    }
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => ProfileError::NotAllowed {
            paranoid: sysctl("/proc/sys/kernel/perf_event_paranoid"),
            errno: e,
        },
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            ProfileError::Unsupported(e)
        }
        _ => ProfileError::io(format!("perf_event_open on CPU {cpu}"), e),
    }
}

/// Sampling: [`Running::halt`] (or [`Running::stop`]) ends the window. Dropped without it (on
/// an error or a panic of the caller's), it stops the events and its reader all the same.
pub struct Running {
    fds: Vec<libc::c_int>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<(Vec<CpuEvent>, Fold)>>,
    started: Instant,
    counts: Box<Counts>,
    symbols: Symbols,
    config: Config,
}

/// The kernel's counts at the window's open, and its close once it is ended (boxed: the
/// handle on a running sampler stays small).
struct Counts {
    stat0: Option<StatTimes>,
    net0: NetSnapshot,
    ended: Option<Ended>,
}

/// The window's close: its length and the kernel's counts read at once after the events were
/// disabled.
struct Ended {
    window: Duration,
    stat1: Option<StatTimes>,
    net1: NetSnapshot,
}

/// The window is closed (the events disabled, the counts read); its samples are not folded yet.
pub struct Halted(Running);

impl Running {
    /// Ends the window now, once: disables every CPU's event, then reads /proc/stat and the
    /// network softirq counts. The counts and the samples then cover the same window whenever
    /// the fold runs.
    fn end_window(&mut self) {
        if self.counts.ended.is_none() {
            let window = self.started.elapsed();
            sys::switch(&self.fds, false);
            self.counts.ended = Some(Ended {
                window,
                stat1: witness::read_stat_times(),
                net1: NetSnapshot::read(),
            });
        }
    }

    /// Ends the window, then has the reader empty the rings a last time and return them.
    fn finish(&mut self) -> Option<std::thread::Result<(Vec<CpuEvent>, Fold)>> {
        let reader = self.reader.take()?;
        self.end_window();
        self.stop.store(true, Ordering::Release);
        reader.thread().unpark();
        Some(reader.join())
    }

    /// Ends the window now: an ioctl per CPU and three small reads of /proc, cheap enough for
    /// the instant the measured window closes. [`Halted::fold`] does the rest, on any thread.
    pub fn halt(mut self) -> Halted {
        self.end_window();
        Halted(self)
    }

    /// Ends the window now and folds its samples ([`Running::halt`], then [`Halted::fold`]).
    pub fn stop(self, ours: &Ours) -> Result<Profile, ProfileError> {
        self.halt().fold(ours)
    }
}

impl Halted {
    /// Reads what is left in the rings and folds the window's samples into names. `ours` says
    /// which processes and threads are this test's.
    pub fn fold(self, ours: &Ours) -> Result<Profile, ProfileError> {
        let mut run = self.0;
        let joined = run.finish();
        let panicked = || {
            ProfileError::io(
                "reading the ring buffers",
                io::Error::other("the reader panicked"),
            )
        };
        let (events, fold) = joined.ok_or_else(panicked)?.map_err(|_| panicked())?;
        drop(events);
        let ended = run.counts.ended.take().ok_or_else(panicked)?;
        let mut profile = Profile {
            window: ended.window,
            cpus: run.fds.len(),
            frequency_hz: run.config.frequency_hz,
            samples: fold.samples,
            lost_samples: fold.lost,
            dropped_samples: fold.dropped,
            throttles: fold.throttles,
            stat: run.counts.stat0.zip(ended.stat1).map(|(a, b)| b.since(a)),
            ticks_per_second: witness::clock_ticks_per_second(),
            net: run.counts.net0.delta(&ended.net1),
            ..Profile::default()
        };
        let symbols = &mut run.symbols;
        let named: Vec<_> = fold
            .stacks
            .into_iter()
            .map(|((pid, tid, chain), (n, ns))| {
                (
                    symbols.comm(pid),
                    symbols.frames(pid, &chain),
                    ours.contains(pid, tid),
                    n,
                    ns,
                )
            })
            .collect();
        profile.fold_stacks(named);
        Ok(profile)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_are_bounded() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("0-4294967295"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert!(!online_cpus().unwrap().is_empty());
    }

    #[test]
    fn folding_records_is_bounded_and_counts_what_it_leaves() {
        let mut config = Config::default();
        (config.max_stacks, config.max_samples, config.max_stack) = (2, 6, 3);
        let mut fold = Fold::default();
        let body =
            |tid: u32, leaf: u64| sys::sample_body(5, tid, 1_000, 4, &[sys::PERF_CONTEXT_KERNEL, leaf, 2, 3]);
        // (thread, leaf): the fourth is a third distinct (thread, chain), past max_stacks, so
        // dropped while a known one still folds; the seventh is past max_samples.
        for (tid, leaf) in [(1, 10), (1, 10), (2, 10), (1, 11), (2, 10), (1, 10), (1, 10)] {
            fold.record(PERF_RECORD_SAMPLE, &body(tid, leaf), &config);
        }
        let lost = [1u64.to_ne_bytes(), 17u64.to_ne_bytes()].concat();
        fold.record(PERF_RECORD_LOST, &lost, &config);
        fold.record(PERF_RECORD_THROTTLE, &[0; 24], &config);
        // A short record is not a sample.
        fold.record(PERF_RECORD_SAMPLE, &[0; 20], &config);
        assert_eq!((fold.samples, fold.dropped, fold.stacks.len()), (7, 2, 2));
        assert_eq!((fold.lost, fold.throttles), (17, 1));
        let kept = fold.stacks[&(5, 1, vec![sys::PERF_CONTEXT_KERNEL, 10, 2])];
        assert_eq!(kept, (3, 3_000), "the chain cut at max_stack");
        assert_eq!(
            fold.stacks[&(5, 2, vec![sys::PERF_CONTEXT_KERNEL, 10, 2])],
            (2, 2_000)
        );
    }

    #[test]
    fn refusals_name_their_reason() {
        let e = open_error(0, "perf_event_open", io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(e, ProfileError::NotAllowed { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("perf_event_paranoid") && text.contains("CAP_PERFMON"),
            "{text}"
        );
        let e = open_error(0, "perf_event_open", io::Error::from_raw_os_error(libc::ENOENT));
        assert!(matches!(e, ProfileError::Unsupported(_)), "{e:?}");
        let e = open_error(3, "perf_event_open", io::Error::from_raw_os_error(libc::EMFILE));
        assert!(e.to_string().contains("CPU 3"), "{e}");
        let e = open_error(1, "mmap", io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            matches!(e, ProfileError::Io { .. }),
            "not a refusal of sampling: {e:?}"
        );
        assert!(e.to_string().contains("perf_event_mlock_kb"), "{e}");
        let hidden = ProfileError::KernelAddressesHidden {
            kptr_restrict: "2".into(),
        };
        assert!(hidden.to_string().contains("kptr_restrict is 2"));
    }
}
