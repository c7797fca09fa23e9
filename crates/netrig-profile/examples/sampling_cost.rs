//! What sampling costs the code it interrupts (bench/profile-cost.sh runs it): a loop of pure
//! arithmetic counts its rounds per second of its own thread's CPU time, alternately without and
//! with the sampler running (every CPU at 999 Hz, call chains), and prints the median ratio. The
//! sampling interrupts run on the interrupted thread's CPU time, so the ratio's shortfall is
//! their share of a busy CPU, and per sample their cost; other load on the host moves the
//! thread's wall time, not this ratio (only its spread).
//!
//!   cargo run --release -p netrig-profile --example sampling_cost [ROUNDS=9] [MAX_STACK=64]

use netrig_profile::{Config, Ours, Sampler};
use std::time::{Duration, Instant};

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to write; the clock id is a constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Rounds of arithmetic per second of this thread's CPU time, over `d` of wall time.
#[inline(never)]
fn rounds_per_cpu_second(d: Duration) -> f64 {
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    let (mut x, mut n) = (88172645463325252u64, 0u64);
    while t0.elapsed() < d {
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        n += 1;
    }
    std::hint::black_box(x);
    n as f64 / ((thread_cpu_ns() - c0).max(1) as f64 / 1e9)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(9, |a| a.parse().expect("ROUNDS"));
    let max_stack: u16 = args.next().map_or(64, |a| a.parse().expect("MAX_STACK"));
    let config = Config {
        max_stack,
        ..Config::default()
    };
    let mut ratios = Vec::new();
    let mut samples = 0;
    for _ in 0..rounds {
        let without = rounds_per_cpu_second(Duration::from_secs(1));
        let running = Sampler::new(config.clone()).expect("the sampler").start();
        let with = rounds_per_cpu_second(Duration::from_secs(1));
        let profile = running.stop(&Ours::this_process()).expect("the profile");
        samples += profile.samples;
        ratios.push(with / without);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    // The sampled CPU's share lost, over its samples a second (999 Hz, this CPU).
    let per_sample_us = (1.0 - median) / config.frequency_hz as f64 * 1e6;
    println!(
        "sampling cost: a busy loop's rate per CPU-second with/without the sampler (999 Hz, max_stack {max_stack}), \
         {rounds} rounds of 1 s: median {median:.4} ({:.2} % of a busy CPU, about {per_sample_us:.1} us a sample); \
         rounds {}; {samples} samples in all",
        (1.0 - median) * 100.0,
        ratios.iter().map(|r| format!("{r:.4}")).collect::<Vec<_>>().join(" ")
    );
}
