//! An agent's answer to `initiate`, as `netrig mesh` reads it.
//! The body and its invariants: crates/netrig-fuzz/src/initiate_result.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::initiate_result::run(data));
