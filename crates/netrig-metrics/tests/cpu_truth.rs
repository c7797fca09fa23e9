//! Does `/proc/stat` accounting see CPU time we know was burned?
//!
//! Two threads spin for about a second each. Their own `thread_cpu_time()`
//! says how many CPU-seconds they used; the machine-wide busy time over the
//! same window must be at least (most of) that: other processes can add busy
//! time, never subtract it. Tick sampling granularity is the reason for the
//! 0.8 factor.

use std::time::{Duration, Instant};

use netrig_metrics::{read_proc_stat, service_demand, thread_cpu_time};

fn spin_for(wall: Duration) -> Duration {
    let start_cpu = thread_cpu_time();
    let start = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while start.elapsed() < wall {
        for _ in 0..10_000 {
            x = std::hint::black_box(x ^ (x << 13) ^ (x >> 7));
        }
    }
    std::hint::black_box(x);
    thread_cpu_time().saturating_sub(start_cpu)
}

#[test]
fn busy_threads_are_seen_by_proc_stat() {
    let before = read_proc_stat().expect("read /proc/stat");
    let wall_start = Instant::now();
    let handles: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| spin_for(Duration::from_millis(1000))))
        .collect();
    let burned: f64 = handles
        .into_iter()
        .map(|h| h.join().expect("spinner thread").as_secs_f64())
        .sum();
    let after = read_proc_stat().expect("read /proc/stat");
    let wall = wall_start.elapsed().as_secs_f64();

    let usage = after.usage_since(&before);
    eprintln!("burned {burned:.3} CPU-s in {wall:.3} s wall; usage {usage:?}");

    assert!(burned > 0.5, "spinners got almost no CPU: {burned}");
    assert!(
        usage.busy_cpu_s >= 0.8 * burned,
        "/proc/stat saw {:.3} busy CPU-s, threads burned {:.3}",
        usage.busy_cpu_s,
        burned
    );
    assert!(usage.busy_pct > 0.0 && usage.busy_pct <= 100.0, "{usage:?}");
    assert!(usage.busiest_cpu.is_some());
    assert!(usage.busiest_cpu_pct <= 100.0);
    assert!(usage.cpus >= 1);
    // The window's CPU-seconds are about wall time × CPUs.
    let expected = wall * f64::from(usage.cpus);
    assert!(
        usage.elapsed_cpu_s > 0.5 * expected && usage.elapsed_cpu_s < 2.0 * expected,
        "elapsed_cpu_s {} vs wall × cpus {}",
        usage.elapsed_cpu_s,
        expected
    );
    // busy_pct and busy_cpu_s describe the same thing.
    let from_pct = usage.busy_pct / 100.0 * usage.elapsed_cpu_s;
    assert!((from_pct - usage.busy_cpu_s).abs() < 1e-6);
}

#[test]
fn service_demand_by_hand() {
    // 2 CPUs, 50 % busy for 4 s = 4 CPU-s = 4,000,000 us of CPU.
    // Moved 1 GiB = 1,048,576 KB  => 4e6 / 1048576 = 3.814697265625 us/KB.
    let sd = service_demand(50.0, 4.0, 2, 1_073_741_824.0 / 1024.0).unwrap();
    assert!((sd - 3.814_697_265_625).abs() < 1e-12, "{sd}");
    // 10,000 transactions with 8 CPUs 12.5 % busy for 2 s = 2 CPU-s
    // => 2e6 us / 1e4 = 200 us/tran.
    let sd = service_demand(12.5, 2.0, 8, 10_000.0).unwrap();
    assert!((sd - 200.0).abs() < 1e-9, "{sd}");
    assert_eq!(service_demand(50.0, 4.0, 2, 0.0), None);
    assert_eq!(netrig_metrics::per_packet_us(3.0, 1024), 3.0);
}
