//! The HTTP test server's request heads, fed in arbitrary splits.
//! The body and its invariants: crates/netrig-fuzz/src/http_request.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::http_request::run(data));
