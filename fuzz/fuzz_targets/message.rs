//! Control messages from JSON: `ClientMsg` and `AgentMsg` (results and intervals included).
//! The body and its invariants: crates/netrig-fuzz/src/message.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::message::run(data));
