//! The control preamble, version negotiation, connection kinds and the session cookie.
//! The body and its invariants: crates/netrig-fuzz/src/preamble.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::preamble::run(data));
