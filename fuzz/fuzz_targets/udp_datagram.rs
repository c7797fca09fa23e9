//! The UDP test header and the receiver's sequence accounting.
//! The body and its invariants: crates/netrig-fuzz/src/udp_datagram.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| netrig_fuzz::udp_datagram::run(data));
