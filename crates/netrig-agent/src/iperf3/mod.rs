//! iperf3 clients served by the agent: an iperf3 3.x client (`iperf3 -c`)
//! runs its test against the agent as against `iperf3 -s`, on the agent's
//! own port (its cookie tells it from netrig's greetings) or on
//! `--iperf3-port`. The test runs on netrig's data path, measured as a
//! netrig client's is; the agent's side of it goes back in iperf3's results
//! exchange. What is supported, what differs and what is refused:
//! docs/IPERF3.md.
//!
//! By role: `session` the control flow (iperf3's states, each wait
//! bounded), `translate` an iperf3 client's parameters as a netrig test,
//! `streams` its data connections, `results` the agent's figures in
//! iperf3's results, `port` the iperf3-only port; where data connections
//! find their session is `crate::iperf3_routes`, below the accept loop.

mod port;
mod results;
mod session;
mod streams;
mod translate;

pub(crate) use port::Port;
pub(crate) use session::serve;
