//! An iperf3 client's parameters (JSON) as netrig's agent reads them.
//! The body and its invariants: crates/netrig-fuzz/src/iperf3_params.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::iperf3_params::run(data));
