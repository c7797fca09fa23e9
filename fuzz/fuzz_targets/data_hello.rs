//! The 32-byte data hello and its UDP acknowledgement.
//! The body and its invariants: crates/netrig-fuzz/src/data_hello.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::data_hello::run(data));
