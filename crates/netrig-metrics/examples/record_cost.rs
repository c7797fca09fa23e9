//! What a latency histogram costs per transaction: the time of one
//! `LatencyRecorder::record` (and of the clock read each transaction takes
//! besides), averaged over many, for bench/measuring-cost.sh to set beside a
//! measured transaction rate. Not a test: a measurement.
//!
//!   cargo run --release -p netrig-metrics --example record_cost

use netrig_metrics::latency::LatencyRecorder;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    const N: u64 = 20_000_000;
    let mut h = LatencyRecorder::new();
    // Latencies spread over 20 µs to 200 µs, as loopback transactions are, in an order the
    // branch predictor cannot learn (a xorshift).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut values = Vec::with_capacity(4096);
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(20_000 + x % 180_000);
    }
    let mut best_record = f64::MAX;
    let mut best_clock = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for i in 0..N {
            h.record(black_box(values[(i & 4095) as usize]));
        }
        best_record = best_record.min(t.elapsed().as_nanos() as f64 / N as f64);
        let t = Instant::now();
        for _ in 0..N / 10 {
            black_box(Instant::now());
        }
        best_clock = best_clock.min(t.elapsed().as_nanos() as f64 / (N / 10) as f64);
    }
    black_box(&h);
    println!("record_ns {best_record:.2}");
    println!("clock_ns {best_clock:.2}");
}
