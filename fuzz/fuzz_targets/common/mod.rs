//! Shared by the targets: the bounds every spec the agent accepts must hold.
#![allow(dead_code)]

use netrig_proto::spec::{
    Limit, MAX_CPU, MAX_CPU_LIST, MAX_CRR_IN_FLIGHT, MAX_IN_FLIGHT, MAX_MESSAGE_SIZE, MAX_PACING_RATE_BPS,
    MAX_PACING_US, MAX_RATE, MAX_RATE_BPS, MAX_SOCKET_BUFFER, MAX_SPIN_US, MAX_UDP_PAYLOAD, MAX_WORKERS,
    MIN_INTERVAL_S, TXN_TIMEOUT_RANGE_S, UDP_HEADER_LEN,
};
use netrig_proto::{AgentLimits, TestKind, TestSpec};
use std::time::Duration;

/// Asserts that a spec `TestSpec::validate(limits)` accepted is bounded:
/// flows, sizes, durations, rates and lists, by netrig's own bounds and by
/// the agent's `limits`; and that what the agent derives from it (flow plan,
/// byte quotas, timeouts, quanta) can be computed without panicking.
pub fn assert_bounded(s: &TestSpec, limits: &AgentLimits) {
    assert!(
        s.validate_bounds().is_ok(),
        "accepted by the agent but not by netrig's own bounds: {s:?}"
    );
    assert!(s.flows >= 1 && s.flows <= limits.max_flows, "flows {}", s.flows);
    if let Some(w) = s.workers {
        assert!(w >= 1 && w <= limits.max_workers, "-T {w}");
    }
    // What one worker allocates is bounded whatever the spec says.
    assert!(s.worker_buffer_bytes() <= 2 * u64::from(limits.max_message_size) + (8 << 20) + (64 << 20));
    let conns = s.connections();
    assert!(conns <= 2 * u64::from(limits.max_flows), "connections {conns}");
    let plan = s.flow_plan();
    assert_eq!(
        plan.len() as u64,
        u64::from(s.flows) * s.directions().len() as u64
    );
    if !s.kind.connection_per_transaction() {
        assert_eq!(plan.len() as u64, conns);
    }
    let max_d = limits.max_duration_s as f64;
    match s.limit {
        Limit::Duration { seconds } => {
            assert!(
                seconds.is_finite() && seconds > 0.0 && seconds <= max_d,
                "-l {seconds}"
            );
            assert!(
                s.omit_s.is_finite() && s.omit_s >= 0.0 && s.omit_s < seconds,
                "--omit {}",
                s.omit_s
            );
            let _ = Duration::from_secs_f64(seconds) + Duration::from_secs(60);
            let _ = Duration::from_secs_f64(s.omit_s);
        }
        Limit::Bytes { bytes } => {
            assert!(bytes >= 1);
            assert!(s.omit_s == 0.0, "--omit {} with -n", s.omit_s);
            assert!(!s.kind.is_transactional(), "-n for {:?}", s.kind);
            let first = s.byte_quota(0).expect("a quota");
            let last = s.byte_quota(s.flows - 1).expect("a quota");
            assert!(first >= last && first - last <= 1, "quotas {first} and {last}");
            if s.flows <= 64 {
                let sum: u64 = (0..s.flows).map(|i| s.byte_quota(i).expect("a quota")).sum();
                assert_eq!(sum, bytes, "quotas do not add up");
            }
        }
    }
    if let Some(i) = s.interval_s {
        assert!(i.is_finite() && i >= MIN_INTERVAL_S && i <= max_d, "-i {i}");
        let _ = Duration::from_secs_f64(i);
    }
    let max_size = MAX_MESSAGE_SIZE.min(limits.max_message_size);
    for v in [s.message_size, s.recv_size] {
        assert!(v >= 1 && v <= max_size, "size {v}");
    }
    if s.kind.is_transactional() {
        let rr = &s.rr;
        for v in [rr.request_size, rr.response_size] {
            assert!(v >= 1 && v <= max_size, "rr size {v}");
        }
        assert!(rr.burst >= 1 && rr.burst <= MAX_IN_FLIGHT, "--burst {}", rr.burst);
        if s.kind.connection_per_transaction() {
            assert!(rr.burst <= MAX_CRR_IN_FLIGHT, "--burst {}", rr.burst);
        }
        if let Some(r) = rr.rate {
            assert!(r.is_finite() && r > 0.0 && r <= MAX_RATE, "--rate {r}");
            assert_eq!(rr.burst, 1);
        } else {
            assert!(!rr.poisson && rr.spin_us.is_none());
        }
        if let Some(us) = rr.spin_us {
            assert!(us <= MAX_SPIN_US);
        }
    }
    if let Some(t) = s.rr.timeout_s {
        assert!(
            matches!(s.kind, TestKind::TcpCrr | TestKind::UdpRr),
            "--timeout for {:?}",
            s.kind
        );
        assert!(
            t >= TXN_TIMEOUT_RANGE_S.0 && t <= TXN_TIMEOUT_RANGE_S.1,
            "--timeout {t}"
        );
    }
    assert!(s.rr.timeout() <= Duration::from_secs_f64(TXN_TIMEOUT_RANGE_S.1));
    if let Some(w) = s.workers {
        assert!(w >= 1 && w <= MAX_WORKERS, "-T {w}");
    }
    if s.kind == TestKind::UdpStream {
        assert!(s.message_size >= UDP_HEADER_LEN && s.message_size <= MAX_UDP_PAYLOAD);
    }
    if s.kind == TestKind::UdpRr {
        assert!(s.rr.request_size <= MAX_UDP_PAYLOAD && s.rr.response_size <= MAX_UDP_PAYLOAD);
    }
    if s.kind.is_udp() {
        assert!(s.remote.congestion.is_none() && !s.remote.nodelay);
    }
    if s.udp.reverse {
        assert_eq!(s.kind, TestKind::UdpStream);
    }
    if let Some(r) = s.pace.rate_bps {
        assert!(r >= 1 && r <= MAX_RATE_BPS, "-b {r}");
        assert!(!s.kind.is_transactional());
    }
    if let Some(p) = s.pace.pacing_us {
        assert!(
            p >= 1 && p <= MAX_PACING_US && s.pace.rate_bps.is_some(),
            "--pacing-us {p}"
        );
    }
    assert!(s.pace.pacing() <= Duration::from_micros(u64::from(MAX_PACING_US)));
    if s.zerocopy {
        assert!(matches!(
            s.kind,
            TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpBidir
        ));
    }
    let o = &s.remote;
    for v in [o.sndbuf, o.rcvbuf].into_iter().flatten() {
        assert!(v >= 1 && v <= MAX_SOCKET_BUFFER, "buffer {v}");
    }
    assert!(o.priority.is_none_or(|p| p <= 7));
    if let Some(cc) = &o.congestion {
        assert!(!cc.is_empty() && cc.len() <= 15, "--cc {cc:?}");
        assert!(
            cc.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "--cc {cc:?}"
        );
    }
    assert!(o.mss.is_none(), "the agent took --mss");
    assert!(o
        .max_pacing_rate_bps
        .is_none_or(|r| (8..=MAX_PACING_RATE_BPS).contains(&r)));
    if let Some(c) = &s.remote_cpus {
        assert!(!c.is_empty() && c.len() <= MAX_CPU_LIST, "{} CPUs", c.len());
        assert!(c.iter().all(|c| *c <= MAX_CPU));
    }
}
