//! Where a requester's workers record transaction latencies: one histogram
//! for the whole window and, with interim reports, one per interval.
//!
//! The interval a transaction belongs to comes from the same atomic
//! increment that counts it ([`FlowCounters::count_transactions`]): the
//! sampler switches each flow's counter to the next period at every tick and
//! reads the boundary count in the same step. So an interval's histogram
//! holds exactly the transactions its count includes. Workers keep their
//! histograms to themselves and hand over those of finished periods once per
//! loop iteration; the sampler waits for them, within a bound.
//!
//! [`FlowCounters::count_transactions`]: crate::FlowCounters::count_transactions

use crate::flow::InWindow;
use netrig_metrics::{LatencyRecorder, LatencySummary};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The periods' meeting point between the sampler and the workers of one end.
#[derive(Debug)]
pub struct IntervalLatencies {
    /// The period now running; workers hand over every earlier one.
    current: AtomicU32,
    workers: Vec<Mutex<Deposit>>,
}

#[derive(Debug, Default)]
struct Deposit {
    /// Every period below this has been handed over.
    flushed_below: u32,
    hists: Vec<(u32, LatencyRecorder)>,
}

impl IntervalLatencies {
    pub fn new(workers: usize) -> Self {
        IntervalLatencies {
            current: AtomicU32::new(0),
            workers: (0..workers).map(|_| Mutex::new(Deposit::default())).collect(),
        }
    }

    /// The sampler: period `period` has ended (every flow's counter already
    /// switched past it). Waits up to `wait` for every worker to hand it
    /// over and returns their merged summary; a worker that did not make it
    /// in time leaves its transactions out (the count then says so).
    pub fn collect(&self, period: u32, wait: Duration) -> LatencySummary {
        self.current.fetch_max(period + 1, Ordering::Release);
        let deadline = Instant::now() + wait;
        loop {
            let all = self.workers.iter().all(|w| lock(w).flushed_below > period);
            if all || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let mut merged = LatencyRecorder::new();
        for w in &self.workers {
            let mut d = lock(w);
            d.hists.retain(|(p, h)| {
                if *p == period {
                    merged.merge(h);
                }
                *p > period
            });
        }
        merged.summary()
    }
}

fn lock(m: &Mutex<Deposit>) -> std::sync::MutexGuard<'_, Deposit> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One worker's latency recording.
pub struct Latencies {
    window: LatencyRecorder,
    intervals: Option<WorkerPeriods>,
}

struct WorkerPeriods {
    shared: std::sync::Arc<IntervalLatencies>,
    worker: usize,
    /// Periods not handed over yet, by full index (a few at most).
    open: Vec<(u32, LatencyRecorder)>,
    seen: u32,
}

impl Latencies {
    pub fn new(intervals: Option<(std::sync::Arc<IntervalLatencies>, usize)>) -> Self {
        Latencies {
            window: LatencyRecorder::new(),
            intervals: intervals.map(|(shared, worker)| WorkerPeriods {
                shared,
                worker,
                open: Vec::new(),
                seen: 0,
            }),
        }
    }

    /// Records a transaction counted inside the window.
    #[inline]
    pub fn record(&mut self, mark: InWindow, ns: u64) {
        self.window.record(ns);
        if let Some(p) = &mut self.intervals {
            let current = p.shared.current.load(Ordering::Acquire);
            let period = full_period(current, mark.epoch);
            match p.open.iter_mut().find(|(k, _)| *k == period) {
                Some((_, h)) => h.record(ns),
                None => {
                    let mut h = LatencyRecorder::new();
                    h.record(ns);
                    p.open.push((period, h));
                }
            }
        }
    }

    /// Once per loop iteration: hands the sampler the periods that ended.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(p) = &mut self.intervals {
            let current = p.shared.current.load(Ordering::Acquire);
            if current != p.seen {
                p.hand_over(current);
            }
        }
    }

    /// The whole window's histogram; hands over every period left.
    pub fn into_window(mut self) -> LatencyRecorder {
        if let Some(p) = &mut self.intervals {
            p.hand_over(u32::MAX);
        }
        std::mem::take(&mut self.window)
    }
}

impl WorkerPeriods {
    fn hand_over(&mut self, below: u32) {
        let mut d = lock(&self.shared.workers[self.worker]);
        let mut i = 0;
        while i < self.open.len() {
            if self.open[i].0 < below {
                d.hists.push(self.open.swap_remove(i));
            } else {
                i += 1;
            }
        }
        d.flushed_below = d.flushed_below.max(below);
        self.seen = below;
    }
}

impl Drop for WorkerPeriods {
    /// A worker that ends early, or on an error, never holds the sampler up.
    fn drop(&mut self) {
        self.hand_over(u32::MAX);
    }
}

/// The full index of the period whose index mod 64 is `epoch`, nearest to
/// `current` (a counter may run one period ahead of `current` while the
/// sampler switches the flows, never 32 behind).
fn full_period(current: u32, epoch: u8) -> u32 {
    let diff = (i32::from(epoch) - (current & 0x3f) as i32).rem_euclid(64);
    let diff = if diff >= 32 { diff - 64 } else { diff };
    current.wrapping_add_signed(diff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn epochs_map_to_the_nearest_full_period() {
        assert_eq!(full_period(0, 0), 0);
        assert_eq!(full_period(5, 6), 6, "one ahead while the sampler switches");
        assert_eq!(full_period(64, 63), 63, "one behind, across the wrap");
        assert_eq!(full_period(130, 1), 129);
        assert_eq!(full_period(130, 2), 130);
    }

    #[test]
    fn each_period_gets_exactly_its_transactions() {
        let shared = Arc::new(IntervalLatencies::new(2));
        let mut a = Latencies::new(Some((shared.clone(), 0)));
        let mut b = Latencies::new(Some((shared.clone(), 1)));
        a.record(InWindow { epoch: 0 }, 1_000);
        a.record(InWindow { epoch: 0 }, 2_000);
        b.record(InWindow { epoch: 0 }, 3_000);
        // Period 1 starts: a transaction already counted in it on one worker.
        a.record(InWindow { epoch: 1 }, 9_000);
        let collector = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.collect(0, Duration::from_secs(5)))
        };
        while shared.current.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        a.flush();
        b.flush();
        let p0 = collector.join().unwrap();
        assert_eq!(p0.count, 3);
        assert!((p0.max_us - 3.0).abs() < 0.01, "{p0:?}");
        // The worker that ends hands over the rest; a silent one does not hold the sampler up.
        assert_eq!(a.into_window().len(), 3, "the whole window, all periods");
        drop(b);
        let p1 = shared.collect(1, Duration::from_secs(5));
        assert_eq!(p1.count, 1);
    }

    #[test]
    fn a_worker_that_never_flushes_costs_the_wait_not_a_hang() {
        let shared = Arc::new(IntervalLatencies::new(1));
        let mut a = Latencies::new(Some((shared.clone(), 0)));
        a.record(InWindow { epoch: 0 }, 1_000);
        let t0 = Instant::now();
        let p = shared.collect(0, Duration::from_millis(20));
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert_eq!(
            p.count, 0,
            "not handed over in time: left out, and the count says so"
        );
        drop(a);
    }
}
