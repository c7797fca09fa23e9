//! The frames the lab's path element reads off a link (virtio-net header, Ethernet, IP).
//! The body and its invariants: crates/netrig-fuzz/src/lab_frame.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::lab_frame::run(data));
