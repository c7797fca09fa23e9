//! What sampling costs the code it interrupts (bench/profile-cost.sh runs it): a loop counts its
//! rounds per second of its own thread's CPU time, alternately without and with the sampler
//! running (every CPU at 999 Hz, call chains), and prints the median ratio. The sampling
//! interrupts run on the interrupted thread's CPU time, so the ratio's shortfall is their share
//! of a busy CPU, and per sample their cost; other load on the host moves the thread's wall
//! time, not this ratio (only its spread). Two loops: pure arithmetic in user space (no kernel
//! call chain to unwind), and 64 KiB written to and read back from a loopback TCP connection in
//! one thread (deep kernel stacks: the send path, softirq, the receive path).
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

/// A loop's rounds per second of this thread's CPU time, over `d` of wall time.
fn rounds_per_cpu_second(d: Duration, mut round: impl FnMut()) -> f64 {
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    let mut n = 0u64;
    while t0.elapsed() < d {
        round();
        n += 1;
    }
    n as f64 / ((thread_cpu_ns() - c0).max(1) as f64 / 1e9)
}

/// A thousand rounds of xorshift: user space only.
#[inline(never)]
fn arithmetic(x: &mut u64) {
    for _ in 0..1000 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
    }
}

/// A connected loopback TCP pair: 64 KiB written on one end and read back on the other, in
/// this thread (every read and write bounded by a timeout).
fn loopback() -> impl FnMut() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let mut tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
    let (mut rx, _) = listener.accept().expect("accept");
    for s in [&tx, &rx] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let (out, mut back) = (vec![7u8; 64 * 1024], vec![0u8; 64 * 1024]);
    move || {
        tx.write_all(&out).expect("write");
        rx.read_exact(&mut back).expect("read");
    }
}

/// One round of a loop.
type Round = Box<dyn FnMut()>;

/// The median of with/without over `rounds` pairs of 1 s, every pair, and the samples taken.
fn ratio(rounds: usize, config: &Config, mut round: impl FnMut()) -> (f64, Vec<f64>, u64) {
    let mut ratios = Vec::new();
    let mut samples = 0;
    for _ in 0..rounds {
        let without = rounds_per_cpu_second(Duration::from_secs(1), &mut round);
        let running = Sampler::new(config.clone()).expect("the sampler").start();
        let with = rounds_per_cpu_second(Duration::from_secs(1), &mut round);
        samples += running.stop(&Ours::this_process()).expect("the profile").samples;
        ratios.push(with / without);
    }
    ratios.sort_by(f64::total_cmp);
    (ratios[ratios.len() / 2], ratios, samples)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(9, |a| a.parse().expect("ROUNDS"));
    let max_stack: u16 = args.next().map_or(64, |a| a.parse().expect("MAX_STACK"));
    let config = Config {
        max_stack,
        ..Config::default()
    };
    let mut x = 88172645463325252u64;
    let loops: [(&str, Round); 2] = [
        (
            "arithmetic in user space",
            Box::new(move || arithmetic(std::hint::black_box(&mut x))),
        ),
        ("64 KiB over loopback TCP", Box::new(loopback())),
    ];
    for (name, round) in loops {
        let (median, ratios, samples) = ratio(rounds, &config, round);
        // The sampled CPU's share lost, over its samples a second (999 Hz, this CPU).
        let per_sample_us = (1.0 - median) / config.frequency_hz as f64 * 1e6;
        println!(
            "sampling cost, {name}: rate per CPU-second with/without the sampler (999 Hz, max_stack \
             {max_stack}), {rounds} pairs of 1 s: median {median:.4} ({:.2} % of a busy CPU, about \
             {per_sample_us:.1} us a sample); pairs {}; {samples} samples in all",
            (1.0 - median) * 100.0,
            ratios
                .iter()
                .map(|r| format!("{r:.4}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}
