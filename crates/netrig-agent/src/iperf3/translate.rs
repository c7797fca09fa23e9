//! An iperf3 client's parameters as the netrig test the agent runs: the
//! kind as the agent's kinds see it (tcp-stream: the client sends;
//! tcp-maerts: `-R`, the agent sends; tcp-bidir: `--bidir`; udp-stream),
//! its flows, length, warm-up and options. The spec is what the client
//! asked, so that the agent's caps judge it as they judge a netrig
//! client's; the run's own bound ([`Translated::bound`]) is longer, since
//! the iperf3 client, not a clock of the agent's, ends the test.

use netrig_proto::iperf3::{errors, server_codes as codes, Params};
use netrig_proto::spec::kind::{KindSpec, StreamOptions, TcpOptions};
use netrig_proto::spec::SpecError;
use netrig_proto::spec::{
    DatagramFormat, Limit, Pace, SocketOptions, TcpBidirSpec, TcpMaertsSpec, TcpStreamSpec, UdpStreamSpec,
};
use netrig_proto::TestSpec;
use std::time::Duration;

/// How long past its length plus warm-up the agent waits for an iperf3
/// client's TEST_END before it ends the test itself (iperf3's own server
/// waits 40 s: 4 s of round trip for each of 10 state changes).
pub(crate) const END_GRACE: Duration = Duration::from_secs(40);

/// A refusal: iperf3's error code for the client, and netrig's reason for the log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub code: i32,
    pub why: String,
}

impl Refusal {
    pub(crate) fn new(code: i32, why: impl Into<String>) -> Refusal {
        Refusal {
            code,
            why: why.into(),
        }
    }
}

/// What the agent runs for an iperf3 client.
#[derive(Debug, Clone)]
pub(crate) struct Translated {
    /// The test as the client asked it (its length, or its byte count).
    pub spec: TestSpec,
    /// The longest the run may last: the length and warm-up and
    /// [`END_GRACE`]; for a byte count, the agent's `--max-duration` and
    /// the grace.
    pub bound: Duration,
    /// Warm-up left out of the figures (`-O`).
    pub omit: Duration,
    /// A byte count's total (`-n`, or `-k` blocks of `-l`): what the agent
    /// sends in all, spread over its sending streams, when it sends.
    pub bytes: Option<u64>,
    /// What the client asked that the agent does not do at its end, for the log.
    pub notes: Vec<String>,
}

/// The test for `p`, or why the agent will not run it. `max_duration_s`:
/// the agent's `--max-duration`, which bounds a byte count's run.
pub(crate) fn translate(p: &Params, max_duration_s: u64, max_workers: u32) -> Result<Translated, Refusal> {
    if p.sctp || !(p.tcp || p.udp) {
        return Err(Refusal::new(
            errors::IENOSCTP,
            "iperf3 --sctp: netrig serves iperf3 clients over TCP and UDP only",
        ));
    }
    let len = p.block_len();
    let pace = p.bandwidth.filter(|&b| b > 0).map(|rate_bps| Pace {
        rate_bps,
        pacing_us: p.pacing_timer.filter(|&t| t > 0),
    });
    let test = if p.udp {
        if p.bidirectional {
            return Err(Refusal::new(
                errors::IEUNIMP,
                "iperf3 -u --bidir: netrig's udp-stream runs one way (-R or not), not both at once",
            ));
        }
        KindSpec::UdpStream(UdpStreamSpec {
            datagram_size: len,
            pace,
            reverse: p.reverse,
            // iperf3's datagrams, as the client sends and expects them.
            datagram: if p.udp_counters_64bit {
                DatagramFormat::Iperf3Counter64
            } else {
                DatagramFormat::Iperf3
            },
            ..UdpStreamSpec::default()
        })
    } else {
        let o = StreamOptions {
            message_size: len,
            recv_size: len,
            pace,
            zerocopy: p.zerocopy,
            skip_rx_copy: p.skip_rx_copy,
            tcp: TcpOptions {
                nodelay: p.nodelay,
                congestion: p.congestion.clone(),
                mptcp: p.mptcp,
            },
            ..StreamOptions::default()
        };
        match (p.reverse, p.bidirectional) {
            (_, true) => KindSpec::TcpBidir(TcpBidirSpec(o)),
            (true, false) => KindSpec::TcpMaerts(TcpMaertsSpec(o)),
            (false, false) => KindSpec::TcpStream(TcpStreamSpec(o)),
        }
    };
    let (limit, bytes) = limit_of(p, len)?;
    let omit = Duration::from_secs(u64::from(p.omit));
    let bound = match limit {
        Limit::Duration { seconds } => Duration::from_secs_f64(seconds) + END_GRACE,
        Limit::Bytes { .. } => Duration::from_secs(max_duration_s) + omit + END_GRACE,
    };
    let spec = TestSpec {
        // netrig's warm-up; a byte count has none in netrig's terms (the
        // run's plan leaves it out all the same).
        omit_s: if bytes.is_some() { 0.0 } else { f64::from(p.omit) },
        flows: p.parallel.max(1),
        // iperf3 (3.16 on) runs a thread per stream at both ends, and its
        // client expects as much of the server: the agent runs a worker per
        // stream, within its cap (`--max-workers`). With a worker per CPU
        // instead, iperf3 3.21's `-P 4` reached 0.80x of what it reaches
        // against `iperf3 -s` on loopback (2 CPUs, 5 rounds).
        workers: Some((p.streams() as u32).clamp(1, max_workers.max(1))),
        remote: SocketOptions {
            sndbuf: p.window,
            rcvbuf: p.window,
            tos: p.tos.and_then(|t| u8::try_from(t).ok()),
            max_pacing_rate_bps: p.fqrate.filter(|&r| r > 0),
            ..SocketOptions::default()
        },
        remote_cpus: p
            .server_affinity
            .and_then(|a| u32::try_from(a).ok())
            .map(|cpu| vec![cpu]),
        ..TestSpec::new(test, limit)
    };
    Ok(Translated {
        spec,
        bound,
        omit,
        bytes,
        notes: notes(p),
    })
}

/// The length the client asked: `-t` seconds with the warm-up before it
/// (iperf3's `-O` comes before its `-t`, netrig's `--omit` inside `-l`),
/// or a byte count (`-n`, `-k` blocks of `len`).
fn limit_of(p: &Params, len: u32) -> Result<(Limit, Option<u64>), Refusal> {
    let bytes = if p.num > 0 {
        Some(p.num)
    } else if p.blockcount > 0 {
        Some(p.blockcount.saturating_mul(u64::from(len)))
    } else {
        None
    };
    Ok(match bytes {
        Some(b) => (Limit::Bytes { bytes: b }, Some(b)),
        None if p.time > 0 => (
            Limit::Duration {
                seconds: f64::from(p.time) + f64::from(p.omit),
            },
            None,
        ),
        None => {
            return Err(Refusal::new(
                errors::IEENDCONDITIONS,
                "an iperf3 test with no end: neither -t, -n nor -k",
            ))
        }
    })
}

/// A spec the agent's limits refuse, as iperf3's nearest error: its
/// duration, stream, rate and size caps have iperf3 codes of their own;
/// the reason logged is netrig's, naming the option and the limit.
pub(crate) fn refusal_of(e: &SpecError) -> Refusal {
    let code = match e {
        SpecError::AgentLimit { setting, .. } => match *setting {
            "--max-duration" => errors::IEMAXSERVERTESTDURATIONEXCEEDED,
            "--max-flows" => errors::IENUMSTREAMS,
            "--max-rate" => errors::IETOTALRATE,
            "--max-message-size" => errors::IEBLOCKSIZE,
            _ => codes::IEINITTEST,
        },
        SpecError::OutOfRange { option, .. } | SpecError::Invalid { option, .. } => {
            match option.split('/').next().unwrap_or(option) {
                "-m" | "-M" => errors::IEBLOCKSIZE,
                "-P" => errors::IENUMSTREAMS,
                "-S" => errors::IEBUFSIZE,
                "--omit" => errors::IEOMIT,
                "-l" => errors::IEDURATION,
                _ => codes::IEINITTEST,
            }
        }
        SpecError::HookNotOffered { .. } => codes::IEINITTEST,
    };
    Refusal::new(code, e.to_string())
}

/// Options the client asked that the agent's end does not apply.
fn notes(p: &Params) -> Vec<String> {
    let mut n = Vec::new();
    if p.mss.is_some() {
        n.push("-M/--set-mss is the client's: the agent's end of a connection it accepted keeps the MSS TCP agreed".into());
    }
    if p.flowlabel.is_some() {
        n.push("-L/--flowlabel is not set by the agent".into());
    }
    if p.dont_fragment {
        n.push("--dont-fragment is not set by the agent".into());
    }
    if p.burst.is_some_and(|b| b > 1) {
        n.push("--bitrate's burst: the agent paces its sends on netrig's schedule instead".into());
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(f: impl FnOnce(&mut Params)) -> Params {
        let mut p = Params::decode(br#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.21"}"#).unwrap();
        f(&mut p);
        p
    }

    /// Each iperf3 mode is the agent's kind of the same direction, with its
    /// flows, length, warm-up and options.
    #[test]
    fn modes_are_the_kinds_of_the_same_direction() {
        let t = translate(&params(|_| {}), 3600, 16).unwrap();
        assert_eq!(t.spec.kind(), "tcp-stream");
        assert_eq!(t.spec.limit, Limit::Duration { seconds: 10.0 });
        assert_eq!(t.bound, Duration::from_secs(10) + END_GRACE);
        let t = translate(&params(|p| p.reverse = true), 3600, 16).unwrap();
        assert_eq!(t.spec.kind(), "tcp-maerts");
        let t = translate(
            &params(|p| {
                p.bidirectional = true;
                p.parallel = 4;
                p.omit = 2;
                p.window = Some(1 << 20);
                p.bandwidth = Some(50_000_000);
                p.zerocopy = true;
            }),
            3600,
            16,
        )
        .unwrap();
        assert_eq!(t.spec.kind(), "tcp-bidir");
        assert_eq!((t.spec.flows, t.spec.omit_s), (4, 2.0));
        // A worker per stream, both ways, as iperf3 runs a thread per stream.
        assert_eq!(t.spec.workers, Some(8));
        assert_eq!(t.spec.limit, Limit::Duration { seconds: 12.0 });
        assert_eq!(t.spec.remote.sndbuf, Some(1 << 20));
        let KindSpec::TcpBidir(TcpBidirSpec(o)) = &t.spec.test else {
            panic!("{:?}", t.spec.test)
        };
        assert!(o.zerocopy && o.pace.as_ref().is_some_and(|p| p.rate_bps == 50_000_000));
        let t = translate(
            &params(|p| {
                p.tcp = false;
                p.udp = true;
                p.len = Some(1200);
                p.bandwidth = Some(1_000_000);
            }),
            3600,
            16,
        )
        .unwrap();
        assert_eq!(t.spec.kind(), "udp-stream");
        // Within the agent's cap on workers.
        let t = translate(&params(|p| p.parallel = 40), 3600, 16).unwrap();
        assert_eq!(t.spec.workers, Some(16));
    }

    /// A byte count is netrig's byte limit; its run is bounded by the
    /// agent's longest test; -k is blocks of -l.
    #[test]
    fn byte_counts_and_blocks_are_byte_limits() {
        let t = translate(&params(|p| p.num = 1 << 30), 60, 16).unwrap();
        assert_eq!(t.spec.limit, Limit::Bytes { bytes: 1 << 30 });
        assert_eq!(t.bound, Duration::from_secs(60) + END_GRACE);
        let t = translate(
            &params(|p| {
                p.blockcount = 10;
                p.len = Some(1000);
            }),
            60,
            16,
        )
        .unwrap();
        assert_eq!(t.bytes, Some(10_000));
    }

    /// What netrig does not do is refused with iperf3's nearest code.
    #[test]
    fn sctp_and_udp_both_ways_are_refused() {
        let e = translate(
            &params(|p| {
                p.tcp = false;
                p.sctp = true;
            }),
            60,
            16,
        )
        .unwrap_err();
        assert_eq!(e.code, errors::IENOSCTP);
        let e = translate(
            &params(|p| {
                p.tcp = false;
                p.udp = true;
                p.bidirectional = true;
            }),
            60,
            16,
        )
        .unwrap_err();
        assert_eq!(e.code, errors::IEUNIMP);
        assert!(translate(&params(|p| p.time = 0), 60, 16).is_err());
    }
}
