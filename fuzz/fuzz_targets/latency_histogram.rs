//! A latency histogram as a peer sends it (HdrHistogram V2 bytes, base64).
//! The body and its invariants: crates/netrig-fuzz/src/latency_histogram.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::latency_histogram::run(data));
