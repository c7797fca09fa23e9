//! A test spec from JSON through `TestSpec::validate`.
//! The body and its invariants: crates/netrig-fuzz/src/spec.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::spec::run(data));
