//! The http load generator's response parser, in arbitrary splits.
//! The body and its invariants: crates/netrig-fuzz/src/http_response.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::http_response::run(data));
