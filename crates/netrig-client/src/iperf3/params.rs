//! What netrig asks of an iperf3 server: a test's spec as iperf3's
//! parameters, or why an option of it cannot be asked of one.

use crate::ClientError;
use netrig_proto::iperf3::Params;
use netrig_proto::spec::kind::DatagramFormat;
use netrig_proto::spec::{KindSpec, Limit, StreamOptions, Transport};
use netrig_proto::{Direction, TestSpec};

/// Which way a test's data goes, as iperf3 says it, and what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub udp: bool,
    /// The server sends on some streams (`-R`, `--bidir`).
    pub server_sends: bool,
    /// The client sends on some streams.
    pub client_sends: bool,
}

impl Shape {
    pub fn of(spec: &TestSpec) -> Shape {
        let dirs = spec.directions();
        Shape {
            udp: spec.rules().transport().datagrams(),
            server_sends: dirs.contains(&Direction::Rx),
            client_sends: dirs.contains(&Direction::Tx),
        }
    }
}

/// An option that cannot be asked of an iperf3 server, and why.
fn refuse(option: &str, why: &str) -> ClientError {
    ClientError::Option(format!("{option} with --peer iperf3: {why}"))
}

/// Whole seconds, as iperf3's parameters carry them: `what` names the
/// option for the error.
fn whole_seconds(s: f64, option: &str, why: &str) -> Result<u32, ClientError> {
    if s.fract() != 0.0 || !(0.0..=f64::from(netrig_proto::iperf3::params::MAX_TIME)).contains(&s) {
        return Err(refuse(&format!("{option} {s}"), why));
    }
    Ok(s as u32)
}

/// The parameters of `spec` for an iperf3 server; `server_output`: ask for
/// its own output (`--get-server-output`).
pub(crate) fn of(spec: &TestSpec, server_output: bool) -> Result<Params, ClientError> {
    let shape = Shape::of(spec);
    refused_everywhere(spec)?;
    let mut p = Params {
        tcp: !shape.udp,
        udp: shape.udp,
        parallel: spec.flows,
        reverse: shape.server_sends && !shape.client_sends,
        bidirectional: shape.server_sends && shape.client_sends,
        mptcp: spec.rules().transport() == Transport::Mptcp,
        get_server_output: server_output,
        client_version: Some("3.21".into()),
        ..Params::default()
    };
    p.omit = whole_seconds(
        spec.omit_s,
        "--omit",
        "iperf3's server leaves out whole seconds only (its -O), and its figures must cover netrig's window",
    )?;
    match spec.limit {
        // The client ends the test (TEST_END) when its window closes; the
        // server's own length only bounds it, so it is rounded up.
        Limit::Duration { seconds } => p.time = ((seconds - spec.omit_s).max(0.0).ceil() as u32).max(1),
        Limit::Bytes { bytes } if !shape.server_sends => p.num = bytes,
        Limit::Bytes { .. } => {
            return Err(refuse(
                "-n/--bytes",
                "an iperf3 server that sends (-R, tcp-maerts, tcp-bidir) stops at the count without closing \
                 its streams, so netrig's receivers could not tell the end: use a length (-l or -t)",
            ))
        }
    }
    // iperf3's -w sets both buffers on the server's sockets: netrig's -S.
    p.window = spec.remote.sndbuf.or(spec.remote.rcvbuf);
    p.tos = spec.remote.tos.map(u32::from);
    p.fqrate = spec.remote.max_pacing_rate_bps;
    p.server_affinity = spec
        .remote_cpus
        .as_ref()
        .and_then(|c| c.first())
        .map(|c| *c as i32);
    match &spec.test {
        KindSpec::TcpStream(s) => stream_options(&mut p, &s.0, shape)?,
        KindSpec::TcpMaerts(s) => stream_options(&mut p, &s.0, shape)?,
        KindSpec::TcpBidir(s) => stream_options(&mut p, &s.0, shape)?,
        KindSpec::UdpStream(u) => {
            p.len = Some(u.datagram_size);
            p.bandwidth = u.pace.as_ref().map(|x| x.rate_bps);
            p.pacing_timer = u.pace.as_ref().and_then(|x| x.pacing_us);
            udp_datagrams(&mut p, spec)?;
        }
        other => {
            return Err(ClientError::Option(format!(
                "--peer iperf3: {} cannot run against an iperf3 server, which measures streams only \
                 (tcp-stream, tcp-maerts, tcp-bidir, udp-stream)",
                other.name()
            )))
        }
    }
    p.check()
        .map_err(|e| ClientError::Option(format!("--peer iperf3: {e}")))?;
    Ok(p)
}

/// What an iperf3 server cannot do whatever the kind: run netrig's hooks,
/// set SO_PRIORITY, pin its threads to several CPUs.
fn refused_everywhere(spec: &TestSpec) -> Result<(), ClientError> {
    if spec.remote_hooks.setup.is_some() || spec.remote_hooks.teardown.is_some() {
        return Err(refuse(
            "--remote-setup/--remote-teardown",
            "an iperf3 server runs no hooks (they are a netrig agent's operator's scripts)",
        ));
    }
    if spec.remote.priority.is_some() {
        return Err(refuse(
            "--priority",
            "iperf3 has no SO_PRIORITY option, so its server's sockets cannot be asked for one",
        ));
    }
    if spec.remote_cpus.as_ref().is_some_and(|c| c.len() > 1) {
        return Err(refuse(
            "--remote-cpus",
            "an iperf3 server pins itself to one CPU at most (its -A): give one",
        ));
    }
    Ok(())
}

/// The TCP streams' options: the block size, rate, TCP options and the
/// zero-copy sends the server makes where it sends.
fn stream_options(p: &mut Params, s: &StreamOptions, shape: Shape) -> Result<(), ClientError> {
    p.len = Some(s.message_size);
    if s.recv_size != s.message_size {
        return Err(refuse(
            "-M/--recv-size",
            "an iperf3 server reads and writes with one block size (its -l), which is netrig's -m",
        ));
    }
    p.bandwidth = s.pace.as_ref().map(|x| x.rate_bps);
    p.pacing_timer = s.pace.as_ref().and_then(|x| x.pacing_us);
    p.nodelay = s.tcp.nodelay;
    p.congestion = s.tcp.congestion.clone();
    // -Z is the sender's: iperf3's server sends with sendfile(2) when asked.
    p.zerocopy = s.zerocopy && shape.server_sends;
    p.skip_rx_copy = s.skip_rx_copy && shape.client_sends;
    if s.msg_zerocopy && shape.server_sends {
        return Err(refuse(
            "--msg-zerocopy",
            "iperf3's server sends with send(2) or, with -Z, sendfile(2); it has no MSG_ZEROCOPY",
        ));
    }
    if s.notsent_lowat.is_some() && shape.server_sends {
        return Err(refuse(
            "--notsent-lowat",
            "iperf3 has no TCP_NOTSENT_LOWAT option for its server's sockets",
        ));
    }
    Ok(())
}

/// udp-stream's datagrams: iperf3's header, as the spec's `datagram` asks
/// ([`iperf3_spec`] sets it).
fn udp_datagrams(p: &mut Params, spec: &TestSpec) -> Result<(), ClientError> {
    match &spec.test {
        KindSpec::UdpStream(u) if u.datagram == DatagramFormat::Iperf3 => Ok(()),
        KindSpec::UdpStream(u) if u.datagram == DatagramFormat::Iperf3Counter64 => {
            p.udp_counters_64bit = true;
            Ok(())
        }
        _ => Err(refuse(
            "udp-stream",
            "an iperf3 server reads iperf3's datagram header, not netrig's",
        )),
    }
}

/// `spec` as it runs against an iperf3 server: udp-stream's datagrams
/// carry iperf3's header (its 32-bit sequence numbers, as iperf3's client
/// sends without --udp-counters-64bit), which the server reads.
pub(crate) fn iperf3_spec(spec: &TestSpec) -> TestSpec {
    let mut spec = spec.clone();
    if let KindSpec::UdpStream(u) = &mut spec.test {
        if u.datagram == DatagramFormat::Netrig {
            u.datagram = DatagramFormat::Iperf3;
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::{TcpMaertsSpec, UdpStreamSpec};

    fn spec(test: KindSpec) -> TestSpec {
        TestSpec::new(test, Limit::Duration { seconds: 3.0 })
    }

    /// netrig's options as iperf3's parameters: the direction, length and sizes.
    #[test]
    fn a_spec_becomes_iperf3s_parameters() {
        let mut s = spec(KindSpec::TcpMaerts(TcpMaertsSpec::default()));
        s.flows = 4;
        s.omit_s = 1.0;
        s.remote.sndbuf = Some(256 * 1024);
        let p = of(&s, true).unwrap();
        assert!(p.tcp && p.reverse && !p.bidirectional);
        assert_eq!((p.parallel, p.time, p.omit), (4, 2, 1));
        assert_eq!((p.len, p.window), (Some(128 * 1024), Some(256 * 1024)));
        assert!(p.get_server_output);
        let u = iperf3_spec(&spec(KindSpec::UdpStream(UdpStreamSpec::default())));
        let p = of(&u, false).unwrap();
        assert!(p.udp && !p.reverse && !p.udp_counters_64bit);
        assert_eq!(p.len, Some(1472));
    }

    /// What an iperf3 server cannot do is refused, naming the option.
    #[test]
    fn what_iperf3_cannot_be_asked_is_refused_by_name() {
        let mut s = spec(KindSpec::TcpMaerts(TcpMaertsSpec::default()));
        s.omit_s = 0.5;
        assert!(of(&s, false)
            .unwrap_err()
            .to_string()
            .starts_with("--omit 0.5 with --peer iperf3"));
        s.omit_s = 0.0;
        s.limit = Limit::Bytes { bytes: 1 << 20 };
        assert!(of(&s, false)
            .unwrap_err()
            .to_string()
            .starts_with("-n/--bytes with --peer iperf3"));
        let mut s = spec(KindSpec::TcpMaerts(TcpMaertsSpec::default()));
        s.remote.priority = Some(3);
        assert!(of(&s, false)
            .unwrap_err()
            .to_string()
            .starts_with("--priority with --peer iperf3"));
        // netrig's own datagram header is not iperf3's.
        let u = spec(KindSpec::UdpStream(UdpStreamSpec::default()));
        assert!(of(&u, false)
            .unwrap_err()
            .to_string()
            .contains("iperf3's datagram header"));
    }
}
