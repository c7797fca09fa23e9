//! A DNS server's answer, as `netrig mesh --discover` reads it.
//! The body and its invariants: crates/netrig-fuzz/src/dns_answer.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::dns_answer::run(data));
