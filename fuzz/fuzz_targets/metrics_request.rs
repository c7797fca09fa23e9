//! A scraper's request heads at the agent's metrics port.
//! The body and its invariants: crates/netrig-fuzz/src/metrics_request.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::metrics_request::run(data));
