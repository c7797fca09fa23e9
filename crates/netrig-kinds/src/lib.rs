//! netrig's test kinds. Each kind is one module (folder) holding all that is
//! its own: its command line and how its spec is made from it, its workload
//! on either end (built from the engine's reactor and parts), and its part
//! of the result (its options in the config, the warnings only it gives,
//! its table). Its wire form is its type in netrig-proto's `spec::kind`;
//! [`registry`] is the one list that names every kind.
//!
//! Adding a kind: its folder here, its wire type in `netrig_proto::spec::kind`
//! (one line in that list), one line in [`registry`], its schema entries,
//! tests and docs.

pub mod args;
mod kind;
mod lab_host;
pub mod peer;
pub mod registry;
mod txn;
pub mod units;

mod half_close;
mod http;
mod syn_flood;
mod tcp_cc;
mod tcp_crr;
mod tcp_rr;
mod tcp_stream;
mod udp_rr;
mod udp_stream;

pub use kind::{Def, Ends, Kind, KindDef, LocalEnd, OneEnded, Planned, Workloads};
pub use registry::{all, by_name, of};

// Each kind's options in the result's config, as its type
// (`netrig_report::TestConfig::kind_part`).
pub use args::PaceConfig;
pub use half_close::HalfCloseConfig;
pub use syn_flood::SynFloodConfig;
pub use tcp_crr::CrrConfig;
pub use tcp_stream::StreamConfig;
pub use txn::TransactionsConfig;
pub use udp_rr::UdpRrConfig;
pub use udp_stream::UdpStreamConfig;
