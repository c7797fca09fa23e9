//! An iperf3 end's results (JSON) as netrig reads them.
//! The body and its invariants: crates/netrig-fuzz/src/iperf3_results.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::iperf3_results::run(data));
