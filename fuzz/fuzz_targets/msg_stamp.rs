//! tcp-rr's message stamps read from a peer's byte stream.
//! The body and its invariants: crates/netrig-fuzz/src/msg_stamp.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::msg_stamp::run(data));
