//! What the client does with an agent's interval and results messages: merge, print.
//! The body and its invariants: crates/netrig-fuzz/src/agent_report.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::agent_report::run(data));
