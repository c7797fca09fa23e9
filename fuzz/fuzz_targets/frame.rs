//! Control-connection framing: `FrameDecoder` fed arbitrary bytes in arbitrary chunks.
//! The body and its invariants: crates/netrig-fuzz/src/frame.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::frame::run(data));
