//! An iperf3 control connection from either end: states, parameters, results, a server's error.
//! The body and its invariants: crates/netrig-fuzz/src/iperf3_control.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::iperf3_control::run(data));
