//! An end's cap on what it sends (the agent's `--max-rate`), enforced where
//! its workers write, whatever the kind: a stream's sends, a responder's
//! answers, a UDP responder's datagrams. A spec's stated rate is checked
//! against the cap when the test is asked for; this holds the sends to it
//! whatever the peer then does (a closed loop with a deep burst, or UDP
//! requests sent without waiting for their answers).
//!
//! Each worker holds its share of the cap (the cap over the workers that
//! run) in a token bucket of its own: no atomics on the send path, nothing
//! shared between workers. Bytes are spent after the write that moved them;
//! a worker in debt sleeps until the bucket is back at zero, checking the
//! test's abort every few ms. Without a cap, [`SendCap::spend`] is one
//! branch on a `None`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far ahead of its rate a worker may send: this much of its rate's
/// bytes, and at least [`MIN_BURST`] bytes.
const BURST: Duration = Duration::from_millis(10);
const MIN_BURST: f64 = 512.0 * 1024.0;
/// The longest one sleep lasts before the abort is looked at again.
const SLICE: Duration = Duration::from_millis(5);

/// The cap an end's workers share, as the runner hands it to each
/// ([`crate::WorkerControl::send_cap`]).
#[derive(Debug, Clone)]
pub struct CapShare {
    /// This worker's share, in payload bytes per second.
    pub bytes_per_s: f64,
    /// Time all workers spent waiting for the cap, in ns (the result's warning).
    pub waited_ns: Arc<AtomicU64>,
    /// Bytes all workers spent against the cap.
    pub spent: Arc<AtomicU64>,
}

impl CapShare {
    /// A worker's share of `cap_bps` (payload bits/s, all workers
    /// together): `flows` of the `all` that send.
    pub fn split(
        cap_bps: u64,
        flows: usize,
        all: usize,
        waited_ns: Arc<AtomicU64>,
        spent: Arc<AtomicU64>,
    ) -> CapShare {
        CapShare {
            bytes_per_s: cap_bps as f64 / 8.0 * flows as f64 / all.max(1) as f64,
            waited_ns,
            spent,
        }
    }
}

/// What a run's cap did, for the end's report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CapUse {
    /// The cap, payload bits/s, all workers together.
    pub cap_bps: u64,
    /// Time its workers waited for it, summed over the workers.
    pub waited: Duration,
    /// Payload bytes sent under it.
    pub bytes: u64,
}

/// One worker's token bucket, or none (no cap: no cost).
#[derive(Debug, Default)]
pub struct SendCap {
    bucket: Option<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    /// Bytes that may leave now; below zero: the debt the worker sleeps off.
    tokens: Cell<f64>,
    last: Cell<Instant>,
    /// Waited and spent since they were last published.
    waited: Cell<Duration>,
    spent: Cell<u64>,
    share: CapShare,
    aborted: Arc<AtomicBool>,
}

impl SendCap {
    /// No cap.
    pub fn none() -> SendCap {
        SendCap { bucket: None }
    }

    /// A worker's bucket for its share of the cap; `aborted` cuts a sleep short.
    pub fn new(share: Option<&CapShare>, aborted: &Arc<AtomicBool>) -> SendCap {
        SendCap {
            bucket: share.map(|s| {
                let rate = s.bytes_per_s.max(1.0);
                let burst = (rate * BURST.as_secs_f64()).max(MIN_BURST);
                Bucket {
                    rate,
                    burst,
                    tokens: Cell::new(burst),
                    last: Cell::new(Instant::now()),
                    waited: Cell::new(Duration::ZERO),
                    spent: Cell::new(0),
                    share: s.clone(),
                    aborted: aborted.clone(),
                }
            }),
        }
    }

    /// A worker's bucket from its control.
    pub fn of(ctl: &crate::WorkerControl) -> SendCap {
        SendCap::new(ctl.send_cap.as_ref(), &ctl.aborted)
    }

    /// Whether there is a cap.
    pub fn is_on(&self) -> bool {
        self.bucket.is_some()
    }

    /// `bytes` were just sent: takes them from the bucket, and sleeps off
    /// any debt (until the test is aborted). True if it slept: a caller that
    /// reads on until its socket is empty returns to its event loop then.
    #[inline]
    pub fn spend(&self, bytes: usize) -> bool {
        match &self.bucket {
            Some(b) => b.spend(bytes as f64),
            None => false,
        }
    }
}

impl Drop for SendCap {
    fn drop(&mut self) {
        if let Some(b) = &self.bucket {
            b.publish();
        }
    }
}

impl Bucket {
    fn spend(&self, bytes: f64) -> bool {
        let now = Instant::now();
        let wait = debit(&self.tokens, &self.last, now, self.rate, self.burst, bytes);
        self.spent.set(self.spent.get() + bytes as u64);
        if wait.is_zero() {
            return false;
        }
        let until = now + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.aborted.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(left.min(SLICE));
        }
        self.waited.set(self.waited.get() + now.elapsed());
        // Published once a wait ends, so the run's report sees it without
        // a cost on the sends that did not wait.
        self.publish();
        true
    }

    fn publish(&self) {
        let w = self.waited.replace(Duration::ZERO);
        let s = self.spent.replace(0);
        self.share
            .waited_ns
            .fetch_add(w.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
        self.share.spent.fetch_add(s, Ordering::Relaxed);
    }
}

/// Refills `tokens` for the time since `last` at `rate` bytes/s (to at most
/// `burst`), takes `bytes`, and returns how long the sender must wait for
/// the bucket to be back at zero (nothing when it is not in debt).
fn debit(
    tokens: &Cell<f64>,
    last: &Cell<Instant>,
    now: Instant,
    rate: f64,
    burst: f64,
    bytes: f64,
) -> Duration {
    let elapsed = now.saturating_duration_since(last.get()).as_secs_f64();
    last.set(now);
    let t = (tokens.get() + elapsed * rate).min(burst) - bytes;
    tokens.set(t);
    if t >= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(-t / rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_holds_its_rate_after_its_burst() {
        let t0 = Instant::now();
        let (tokens, last) = (Cell::new(1000.0), Cell::new(t0));
        // 1000 bytes/s, a burst of 1000: the first 1000 bytes leave at once.
        assert_eq!(debit(&tokens, &last, t0, 1000.0, 1000.0, 1000.0), Duration::ZERO);
        // 500 more: half a second of debt.
        assert_eq!(
            debit(&tokens, &last, t0, 1000.0, 1000.0, 500.0),
            Duration::from_millis(500)
        );
        // 0.5 s later the debt is paid; 100 more are 0.1 s.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(
            debit(&tokens, &last, t1, 1000.0, 1000.0, 100.0),
            Duration::from_millis(100)
        );
        // An idle hour earns no more than the burst.
        let t2 = t1 + Duration::from_secs(3600);
        assert_eq!(debit(&tokens, &last, t2, 1000.0, 1000.0, 1000.0), Duration::ZERO);
        assert_eq!(
            debit(&tokens, &last, t2, 1000.0, 1000.0, 1.0),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn a_capped_worker_sends_no_more_than_its_share_plus_its_burst() {
        let waited = Arc::new(AtomicU64::new(0));
        let spent = Arc::new(AtomicU64::new(0));
        // 80 Mbit/s over 2 workers: 5 MB/s each; its burst 64 KiB.
        let share = CapShare::split(80_000_000, 1, 2, waited.clone(), spent.clone());
        let cap = SendCap::new(Some(&share), &Arc::new(AtomicBool::new(false)));
        let t0 = Instant::now();
        let mut sent = 0usize;
        while t0.elapsed() < Duration::from_millis(200) {
            cap.spend(16 * 1024);
            sent += 16 * 1024;
        }
        let secs = t0.elapsed().as_secs_f64();
        let most = 5e6 * secs + MIN_BURST + 16.0 * 1024.0;
        assert!((sent as f64) <= most, "{sent} bytes in {secs} s, at most {most}");
        // It did not stop early either: at least 80 % of its share.
        assert!(sent as f64 >= 0.8 * 5e6 * 0.2, "{sent} bytes in {secs} s");
        drop(cap);
        assert_eq!(spent.load(Ordering::Relaxed), sent as u64);
        assert!(
            waited.load(Ordering::Relaxed) > 100_000_000,
            "it waited most of the time"
        );
    }

    #[test]
    fn an_abort_cuts_the_wait_short() {
        let share = CapShare::split(8, 1, 1, Arc::default(), Arc::default());
        let aborted = Arc::new(AtomicBool::new(false));
        let cap = SendCap::new(Some(&share), &aborted);
        let a = aborted.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            a.store(true, Ordering::Relaxed);
        });
        let t0 = Instant::now();
        // 1 MiB at 1 byte/s: days of debt.
        cap.spend(1 << 20);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        t.join().unwrap();
    }

    #[test]
    fn no_cap_is_no_bucket() {
        let cap = SendCap::none();
        assert!(!cap.is_on());
        assert!(!cap.spend(usize::MAX));
    }
}
