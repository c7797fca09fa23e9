//! iperf3 error numbers the agent sends that the shared list in
//! [`super::errors`] does not hold (the agent's own set-up failures), with
//! iperf3's own meaning: an iperf3 client prints its text for each.

/// "test initialization failed": a test the agent's limits or host refuse
/// for a reason iperf3 has no number of its own for.
pub const IEINITTEST: i32 = 101;
/// "unable to set socket buffer size": the agent could not apply a
/// stream's socket options (`-w`, `-S`, `--fq-rate`).
pub const IESETBUF: i32 = 124;
/// "unable to write to stream socket": a UDP stream's connect reply failed.
pub const IESTREAMWRITE: i32 = 205;
