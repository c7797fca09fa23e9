//! The bodies of netrig's fuzz targets: one module per target, each with a
//! `run(&[u8])` that feeds the bytes to a parser of a peer's input (or to a
//! state machine driven by them) and panics when one of the module's
//! invariants fails.
//!
//! Two things call them: the cargo-fuzz binaries in `fuzz/fuzz_targets/`
//! (nightly, one line each:
//! `fuzz_target!(|data: &[u8]| netrig_fuzz::frame::run(data));`), and
//! `tests/replay.rs`, which runs every committed input of
//! `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` through them under
//! a plain `cargo test`, so that CI checks the corpora on stable.
//!
//! Linking this crate installs a counting global allocator
//! ([`alloc_count`]); only the fuzz binaries and the replay test do.

use arbitrary::{Arbitrary, Unstructured};

pub mod agent_check;
pub mod agent_report;
pub mod agent_session;
pub mod alloc_count;
pub mod bounds;
pub mod data_hello;
pub mod dns_answer;
pub mod frame;
pub mod http_request;
pub mod http_response;
pub mod initiate_result;
pub mod iperf3_control;
pub mod iperf3_params;
pub mod iperf3_results;
pub mod lab_frame;
pub mod latency_histogram;
pub mod message;
pub mod metrics_request;
pub mod msg_stamp;
pub mod preamble;
pub mod session;
pub mod spec;
pub mod udp_datagram;

/// A target: its name (the file in `fuzz/fuzz_targets/`, the cargo-fuzz
/// binary, the folder of its seeds) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("agent_report", agent_report::run),
    ("agent_session", agent_session::run),
    ("data_hello", data_hello::run),
    ("dns_answer", dns_answer::run),
    ("http_response", http_response::run),
    ("frame", frame::run),
    ("http_request", http_request::run),
    ("initiate_result", initiate_result::run),
    ("iperf3_control", iperf3_control::run),
    ("iperf3_params", iperf3_params::run),
    ("iperf3_results", iperf3_results::run),
    ("lab_frame", lab_frame::run),
    ("latency_histogram", latency_histogram::run),
    ("message", message::run),
    ("metrics_request", metrics_request::run),
    ("preamble", preamble::run),
    ("msg_stamp", msg_stamp::run),
    ("session", session::run),
    ("spec", spec::run),
    ("udp_datagram", udp_datagram::run),
];

/// `data` as a `T`, the way `libfuzzer_sys::fuzz_target!` makes a typed
/// input (too short for `T`: none; then `arbitrary_take_rest`), so that an
/// input reads the same in a fuzz binary and in the replay test.
pub fn arbitrary_input<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}
