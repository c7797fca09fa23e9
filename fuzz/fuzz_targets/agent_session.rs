//! The agent's control session fed raw bytes: preamble, frames, clock, data connections.
//! The body and its invariants: crates/netrig-fuzz/src/agent_session.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::agent_session::run(data));
