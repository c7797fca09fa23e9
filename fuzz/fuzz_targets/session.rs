//! The sans-IO session state machines, driven by message sequences and a virtual clock.
//! The body and its invariants: crates/netrig-fuzz/src/session.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::session::run(data));
