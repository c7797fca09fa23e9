//! An iperf3 test's data connections: TCP connections that opened with the
//! test's cookie, or UDP streams that sent their connect datagram, taken in
//! the order iperf3 creates them, each configured as the test asks and
//! made a flow of the agent's run.

use super::translate::Refusal;
use crate::iperf3_routes::{TcpArrival, UdpConnect};
use netrig_engine::sockopt::{self, SocketSettings};
use netrig_engine::{Flow, FlowSocket};
use netrig_proto::iperf3::{errors, server_codes as codes, UDP_CONNECT_REPLY};
use netrig_proto::report::Role;
use netrig_proto::TestSpec;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long set-up waits for each next stream: as long as a netrig test's
/// set-up waits for its next data connection (a connect that lost three SYNs).
pub(crate) const STREAM_STALL: Duration = Duration::from_secs(10);

/// Where the test's streams arrive.
pub(crate) enum Arrivals {
    Tcp(mpsc::Receiver<TcpArrival>),
    Udp(mpsc::Receiver<UdpConnect>),
}

/// The test's streams as flows, in iperf3's order (with `--bidir`, the
/// client's sending streams come first, as the flow plan's `tx` flows do),
/// and each one's addresses for the server's text.
pub(crate) struct Gathered {
    pub flows: Vec<Flow>,
    pub addresses: Vec<String>,
    pub congestion: Option<String>,
}

/// Takes the test's `spec.connections()` streams, each within
/// [`STREAM_STALL`] of the last; `bytes`: a byte count's total, which the
/// agent's sending streams share.
pub(crate) fn gather(spec: &TestSpec, arrivals: &Arrivals, bytes: Option<u64>) -> Result<Gathered, Refusal> {
    let plan = spec.flow_plan();
    let remote = SocketSettings::new(&spec.remote, spec.rules().tcp());
    let senders = plan
        .iter()
        .filter(|d| spec.role(**d, true) == Role::Sender)
        .count() as u64;
    let mut got = Gathered {
        flows: Vec::with_capacity(plan.len()),
        addresses: Vec::with_capacity(plan.len()),
        congestion: None,
    };
    let mut sent_index = 0u64;
    for (i, direction) in plan.iter().enumerate() {
        let by = Instant::now() + STREAM_STALL;
        let stalled = || {
            Refusal::new(
                errors::IESTREAMACCEPT,
                format!(
                    "no iperf3 stream within {} s ({i} of the test's {} came); the test is given up",
                    STREAM_STALL.as_secs(),
                    plan.len()
                ),
            )
        };
        let (socket, address) = match arrivals {
            Arrivals::Tcp(rx) => {
                let (stream, peer) = rx
                    .recv_timeout(by.saturating_duration_since(Instant::now()))
                    .map_err(|_| stalled())?;
                sockopt::apply_connected(&stream, &remote, true, "-w/--window").map_err(option_refusal)?;
                let local = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
                if got.congestion.is_none() {
                    got.congestion = sockopt::applied(&stream).congestion;
                }
                (
                    FlowSocket::from(stream),
                    format!("local {local} connected to {peer}"),
                )
            }
            Arrivals::Udp(rx) => {
                let c = rx
                    .recv_timeout(by.saturating_duration_since(Instant::now()))
                    .map_err(|_| stalled())?;
                let sock = crate::udp::flow_socket(c.local, c.from).map_err(|e| {
                    Refusal::new(
                        errors::IESTREAMACCEPT,
                        format!("agent: UDP socket for stream {i}: {e}"),
                    )
                })?;
                sockopt::apply_connected(&sock, &remote, true, "-w/--window").map_err(option_refusal)?;
                // From the stream's own socket: the client's is connected to
                // the agent's port and takes its reply only from there.
                sock.send(&UDP_CONNECT_REPLY).map_err(|e| {
                    Refusal::new(codes::IESTREAMWRITE, format!("agent: UDP connect reply: {e}"))
                })?;
                let local = sock.local_addr().map_or(c.local, |a| a);
                (
                    FlowSocket::from(sock),
                    format!("local {local} connected to {}", c.from),
                )
            }
        };
        let role = spec.role(*direction, true);
        let quota = match (bytes, role) {
            (Some(b), Role::Sender) => {
                let n = senders.max(1);
                let q = b / n + u64::from(sent_index < b % n);
                sent_index += 1;
                Some(q)
            }
            _ => None,
        };
        got.flows
            .push(Flow::new(i as u32, *direction, role, socket, quota));
        got.addresses.push(address);
    }
    Ok(got)
}

/// A socket option the agent could not set, as iperf3's nearest error.
/// `-C` naming an algorithm the host lacks is refused, as a netrig
/// client's `--cc` is (iperf3's own server warns and goes on with its
/// default, and its figures are then of another algorithm than asked).
fn option_refusal(e: sockopt::OptionError) -> Refusal {
    let code = match e.flag {
        "--cc" => errors::IESETCONGESTION,
        _ => codes::IESETBUF,
    };
    Refusal::new(code, format!("agent {e}"))
}
