//! A profile of one end's measured window, on either end (the client's `--profile`, the
//! agent's `netrig serve --allow-profile`): a sampler of every CPU started the instant the
//! measured window opens and stopped the instant it closes (the engine tells it,
//! [`WindowListener`]), and its profile as the result holds it (names and counts only).

use crate::{Config, Group, Ours, Profile, ProfileError, Running, Sampler};
use netrig_engine::window_watch::{WindowListener, WindowWatch};
use netrig_proto::report::profile::{
    EndProfile, FoldedStack, KernelCount, ProfileFunction, ProfileGroup, ProfileSplit, ProfileWitness,
    Profiled, SampleCount, SoftirqCounts, SoftirqCpuCount, SoftnetCounts, SoftnetCpuCount,
};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The functions the result lists, by inclusive samples.
pub const TOP_FUNCTIONS: usize = 100;
/// The heaviest stacks the result keeps as folded stacks.
pub const MAX_FOLDED: usize = 2_000;

enum State {
    /// Opened before the test's `go` (reading /proc/kallsyms takes a while), not yet sampling.
    Ready(Sampler),
    Running(Running),
    /// The window closed: the sampler is stopped and its samples folded on a thread of their
    /// own, so that the window's close does not wait for the fold.
    Stopping(JoinHandle<Result<Profile, ProfileError>>),
    Withheld(String),
}

/// One end's profile of its window.
pub struct ProfileWatch {
    state: Mutex<Option<State>>,
}

impl ProfileWatch {
    /// Opens the sampler now (before the test starts); a host that refuses it gives a watch
    /// whose profile is withheld with the sampler's reason.
    pub fn new() -> Arc<ProfileWatch> {
        let state = match Sampler::new(Config::default()) {
            Ok(s) => State::Ready(s),
            Err(e) => State::Withheld(e.to_string()),
        };
        Arc::new(ProfileWatch {
            state: Mutex::new(Some(state)),
        })
    }

    /// The engine's handle on it.
    pub fn watch(self: &Arc<Self>) -> WindowWatch {
        WindowWatch(Some(self.clone() as Arc<dyn WindowListener>))
    }

    /// This end's profile, once the run is over, with its service demand per unit of `work`;
    /// or why it is withheld.
    pub fn finish(&self, work: Work) -> EndProfile {
        let state = self.state.lock().map(|mut s| s.take()).unwrap_or(None);
        match state {
            Some(State::Stopping(h)) => match h.join() {
                Ok(Ok(p)) => EndProfile::Profiled(Box::new(profiled(&p, work))),
                Ok(Err(e)) => withheld(e.to_string()),
                Err(_) => withheld("profile withheld: the sampler's thread panicked".into()),
            },
            Some(State::Withheld(reason)) => withheld(reason),
            _ => withheld("profile withheld: the measured window never opened and closed".into()),
        }
    }
}

fn withheld(reason: String) -> EndProfile {
    EndProfile::Withheld { withheld: reason }
}

impl WindowListener for ProfileWatch {
    fn opened(&self) {
        if let Ok(mut s) = self.state.lock() {
            // Any other state (withheld: the host refused) stays as it is.
            *s = match s.take() {
                Some(State::Ready(sampler)) => Some(State::Running(sampler.start())),
                other => other,
            };
        }
    }

    fn closed(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = match s.take() {
                Some(State::Running(running)) => {
                    // The window ends here (the events off, /proc/stat and the softirq counts
                    // read); only the fold waits for a thread.
                    let halted = running.halt();
                    let stop = std::thread::Builder::new()
                        .name("netrig-profile-stop".into())
                        .spawn(move || halted.fold(&Ours::this_process()));
                    Some(match stop {
                        Ok(h) => State::Stopping(h),
                        Err(e) => State::Withheld(format!("profile withheld: cannot start its thread: {e}")),
                    })
                }
                other => other,
            };
        }
    }
}

/// What this end moved in its window: bytes (stream kinds) or transactions (request/response).
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub bytes: u64,
    pub transactions: Option<u64>,
}

impl Work {
    /// What an end moved in its window (its run's `outcome`): transactions for a
    /// request/response kind, bytes otherwise.
    pub fn of_run(spec: &netrig_proto::TestSpec, outcome: &netrig_engine::runner::SideOutcome) -> Work {
        let transactional = spec.rules().exchange().is_transactional();
        Work {
            bytes: outcome.flows.iter().map(|f| f.window_bytes).sum(),
            transactions: transactional.then(|| outcome.flows.iter().map(|f| f.window_transactions).sum()),
        }
    }

    /// The units of work and their name, as the result's service demand counts them.
    fn units(self) -> (f64, &'static str) {
        match self.transactions {
            Some(t) => (t as f64, "us/tran"),
            None => (self.bytes as f64 / 1024.0, "us/KB"),
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn count(c: crate::Count) -> SampleCount {
    SampleCount {
        samples: c.samples,
        cpu_ms: ms(c.period_ns),
    }
}

/// A kernel count over the window as the result holds it, or its reason.
fn net_count<T, U>(c: &Result<Vec<T>, String>, f: impl FnOnce(&[T]) -> U) -> KernelCount<U> {
    match c {
        Ok(v) => KernelCount::Counted(f(v)),
        Err(why) => KernelCount::Withheld {
            withheld: why.clone(),
        },
    }
}

fn softirq_cpu(c: &crate::SoftirqCpu) -> SoftirqCpuCount {
    SoftirqCpuCount {
        cpu: c.cpu,
        net_rx: c.net_rx,
        net_tx: c.net_tx,
    }
}

fn softnet_cpu(c: crate::SoftnetCpu) -> SoftnetCpuCount {
    SoftnetCpuCount {
        cpu: c.cpu,
        processed: c.processed,
        dropped: c.dropped,
        time_squeeze: c.time_squeeze,
        received_rps: c.received_rps,
        flow_limit_count: c.flow_limit_count,
    }
}

/// A profile as the result holds it: names and counts only.
pub fn profiled(p: &Profile, work: Work) -> Profiled {
    let split = p.split();
    let groups = p.groups();
    let busy_samples: u64 = groups
        .iter()
        .filter(|(g, _)| *g != Group::Idle)
        .map(|(_, c)| c.samples)
        .sum();
    let (units, unit) = work.units();
    let mut groups: Vec<ProfileGroup> = groups
        .into_iter()
        .map(|(g, c)| {
            let busy = g != Group::Idle;
            ProfileGroup {
                group: g.name().into(),
                samples: c.samples,
                cpu_ms: ms(c.period_ns),
                share_of_busy_pct: (busy && busy_samples > 0)
                    .then(|| c.samples as f64 * 100.0 / busy_samples as f64),
                demand: (busy && units > 0.0).then(|| c.period_ns as f64 / 1e3 / units),
            }
        })
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.samples));
    let folded = p
        .stacks
        .iter()
        .take(MAX_FOLDED)
        .map(|s| FoldedStack {
            stack: std::iter::once(&s.comm)
                .chain(&s.frames)
                .map(|f| f.replace(';', ":"))
                .collect::<Vec<_>>()
                .join(";"),
            samples: s.samples,
        })
        .collect();
    Profiled {
        window_s: p.window.as_secs_f64(),
        cpus: p.cpus as u32,
        frequency_hz: p.frequency_hz,
        samples: p.samples,
        busy_samples,
        lost_samples: p.lost_samples,
        dropped_samples: p.dropped_samples,
        throttles: p.throttles,
        split: ProfileSplit {
            this_test_process: count(split.this_test_process),
            this_test_softirq: count(split.this_test_softirq),
            rest_process: count(split.rest_process),
            rest_softirq: count(split.rest_softirq),
        },
        demand_unit: unit.into(),
        groups,
        top_functions: p
            .top_functions(TOP_FUNCTIONS)
            .into_iter()
            .map(|f| ProfileFunction {
                name: f.name,
                self_samples: f.self_samples,
                inclusive_samples: f.inclusive_samples,
            })
            .collect(),
        folded,
        folded_total: p.stacks.len() as u64,
        witness: p.witness().map(|w| ProfileWitness {
            sampled_busy_ms: ms(w.sampled_busy_ns),
            stat_busy_ms: ms(w.stat_busy_ns),
            ratio: w.ratio,
            stat_steal_ms: ms(w.stat_steal_ns),
            resolution_pct: w.resolution.map(|r| r * 100.0),
            band_pct: Some(w.band * 100.0),
            verdict: Some(w.verdict.name().into()),
            why: w.why,
        }),
        softirqs: net_count(&p.net.softirqs, |v| SoftirqCounts {
            net_rx: v.iter().map(|c| c.net_rx).sum(),
            net_tx: v.iter().map(|c| c.net_tx).sum(),
            per_cpu: v.iter().map(softirq_cpu).collect(),
        }),
        softnet: net_count(&p.net.softnet, |v| SoftnetCounts {
            total: p.net.softnet_totals().map(softnet_cpu).unwrap_or_default(),
            per_cpu: v.iter().copied().map(softnet_cpu).collect(),
        }),
    }
}
