//! The test's data connections to an iperf3 server, made as iperf3's client
//! makes them, in its order: with `--bidir`, the client's sending streams
//! first, then its receiving ones (the server numbers them as they come,
//! and results are matched by those numbers).

use crate::link::{open_datagrams, open_stream, ClientOptions};
use crate::ClientError;
use netrig_engine::{sockopt, Flow, FlowSocket};
use netrig_proto::iperf3::{COOKIE_LEN, UDP_CONNECT_MSG, UDP_CONNECT_REPLY, UDP_LEGACY_REPLY};
use netrig_proto::report::{AppliedOptions, BufPair, Role};
use netrig_proto::{Direction, TestSpec};
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// How long a UDP stream waits for the server's answer to its first
/// datagram (iperf3's client waits 30 s). It is sent once, as iperf3's
/// client does: the server connects its socket to the first one it reads,
/// and would count a second as the stream's data.
pub(crate) const UDP_REPLY_WAIT: Duration = Duration::from_secs(10);

/// This end's flows as the server will number them.
#[derive(Default)]
pub(crate) struct Opened {
    pub flows: Vec<Flow>,
    /// Each flow's buffers and options read back at set-up.
    pub setup_info: BTreeMap<u32, (BufPair, AppliedOptions)>,
    /// iperf3's stream id of each flow, by flow id.
    pub stream_ids: BTreeMap<u32, i32>,
    /// What the first flow's read-back warns of.
    pub warnings: Vec<String>,
}

/// The flow ids in the order iperf3's client opens their streams: netrig's
/// flow plan puts the client's sending flows first, as iperf3 does.
fn creation_order(spec: &TestSpec) -> Vec<(u32, Direction)> {
    let mut order: Vec<(u32, Direction)> = spec
        .flow_plan()
        .into_iter()
        .enumerate()
        .map(|(i, d)| (i as u32, d))
        .collect();
    order.sort_by_key(|(id, d)| (*d != Direction::Tx, *id));
    order
}

/// Opens every stream of `spec` to the server at `addr`: TCP ones with
/// `cookie`, UDP ones with iperf3's connect datagram, each answered before
/// the next is opened (the server takes them one at a time).
pub(crate) fn open(
    addr: SocketAddr,
    opts: &ClientOptions,
    spec: &TestSpec,
    cookie: &[u8; COOKIE_LEN],
    requested: BufPair,
) -> Result<Opened, ClientError> {
    let ids = netrig_proto::iperf3::stream_ids(spec.connections() as usize);
    let mut opened = Opened::default();
    let mut in_dir: BTreeMap<Direction, u32> = BTreeMap::new();
    for ((id, dir), stream_id) in creation_order(spec).into_iter().zip(ids) {
        let role = spec.role(dir, false);
        let socket: FlowSocket = if spec.rules().transport().datagrams() {
            let datagram = spec.rules().datagram_size().unwrap_or(1460);
            udp_stream(addr, opts, datagram)?.into()
        } else {
            open_stream(addr, opts, cookie, false)?.into()
        };
        let initial = sockopt::buffers(&socket);
        let applied = sockopt::applied(&socket);
        if opened.flows.is_empty() {
            let got = (initial, &applied);
            let warned = sockopt::setup_warnings(requested, &opts.local, got, "local", "-s");
            opened.warnings.extend(warned);
        }
        let k = in_dir.entry(dir).or_default();
        let quota = (role == Role::Sender).then(|| spec.byte_quota(*k)).flatten();
        *k += 1;
        opened.setup_info.insert(id, (initial, applied));
        opened.stream_ids.insert(id, stream_id);
        opened.flows.push(Flow::new(id, dir, role, socket, quota));
    }
    opened.flows.sort_by_key(|f| f.id);
    Ok(opened)
}

/// A UDP stream: a connected socket that sends iperf3's connect datagram
/// and waits (bounded) for the server's answer from the socket it will use.
fn udp_stream(addr: SocketAddr, opts: &ClientOptions, datagram: u32) -> Result<UdpSocket, ClientError> {
    let udp = open_datagrams(addr, opts, datagram, "-m")?;
    let fail = |what: String| ClientError::Iperf3 { addr, what };
    let until = Instant::now() + UDP_REPLY_WAIT;
    let mut reply = [0u8; 64];
    udp.send(&UDP_CONNECT_MSG)
        .map_err(|e| fail(format!("took no UDP stream: sending its first datagram: {e}")))?;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(fail(format!(
                "did not answer a UDP stream's first datagram within {} s (is UDP to its port blocked?)",
                UDP_REPLY_WAIT.as_secs()
            )));
        }
        let _ = udp.set_read_timeout(Some(left));
        match udp.recv(&mut reply) {
            Ok(4) if reply[..4] == UDP_CONNECT_REPLY || reply[..4] == UDP_LEGACY_REPLY => break,
            // Anything else (a late datagram of an earlier test) is not the answer.
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(fail(format!("refused a UDP stream: {e}"))),
        }
    }
    let _ = udp.set_read_timeout(None);
    Ok(udp)
}
