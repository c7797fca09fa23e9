//! A test spec from the wire (`test_request`'s `spec`), as JSON, checked by
//! `TestSpec::validate` with the agent's default limits and with small ones.
//!
//! Invariants: no panic; anything validate accepts holds every bound
//! (`common::assert_bounded`: flows, sizes, durations, rates, lists), is
//! accepted by netrig's own bounds too, and reads back equal and still
//! valid after serializing.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use netrig_proto::{AgentLimits, TestSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = serde_json::from_slice::<TestSpec>(data) else {
        return;
    };
    let small = AgentLimits {
        max_flows: 3,
        max_duration_s: 5,
        max_message_size: 1000,
        ..AgentLimits::default()
    };
    for limits in [AgentLimits::default(), small] {
        if spec.validate(&limits).is_ok() {
            common::assert_bounded(&spec, &limits);
            let text = serde_json::to_vec(&spec).expect("a spec serializes");
            let back: TestSpec = serde_json::from_slice(&text).expect("and reads back");
            assert_eq!(back, spec, "{}", String::from_utf8_lossy(&text));
            assert!(back.validate(&limits).is_ok());
        }
    }
    // Whatever the agent thinks, netrig's own check never panics either.
    let _ = spec.validate_bounds().map_err(|e| e.at_agent("the agent at x"));
});
