//! The agent (`netrig serve`): like netserver or `iperf3 -s`, but one agent
//! serves many clients and tests at once, each in its own session.
//!
//! One TCP port carries both control and data connections; the first four
//! bytes of a connection say which it is. A data connection must present
//! the cookie of a session that is waiting for it, or it is closed: the
//! agent only ever sends test traffic on connections the client opened to
//! it, so it cannot be used to reflect traffic at a third party.
//!
//! It runs no command a client names: a test may name hooks, scripts its
//! operator put in a directory ([`hooks`]), to run before and after it.

mod accept_failures;
mod admission;
pub mod budget;
mod config;
mod door;
mod doorway;
pub mod hooks;
pub mod initiate;
mod iperf3;
mod iperf3_routes;
mod listener;
mod memory;
mod metrics;
pub mod metrics_http;
mod peer;
mod profile;
mod rate_limit;
mod registry;
mod session;
mod shared;
mod udp;
mod watch;
mod writer;

pub use budget::Totals;
pub use config::AgentConfig;
pub use hooks::{HookError, Hooks};
pub use listener::{Agent, AgentError, AgentHandle};

/// What an agent's results tell a client that did not authenticate about
/// the agent's host (`netrig serve --disclose`). Authenticated clients are
/// always told everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Disclose {
    /// The host's name, kernel, CPU model and sysctls, and its host-wide
    /// kernel counters and interface counts over the window (the witness).
    #[default]
    Full,
    /// Only what measures the test itself: its flows, the CPU time of the
    /// host and of netrig's workers. The environment, the host-wide counters
    /// and the witness are withheld, and the result says so.
    Minimal,
}
